-- Umbra Global CP schema, version 1 (DESIGN.md, "Global CP").

-- Every resource, keyed (type, mesh, name); a Mesh has mesh = ''.
CREATE TABLE resources (
    type              TEXT        NOT NULL,
    mesh              TEXT        NOT NULL,
    name              TEXT        NOT NULL,
    -- Compare-and-swap version: 1 on creation, +1 per change.
    version           BIGINT      NOT NULL CHECK (version > 0),
    -- Kuma's universal document minus type, mesh, name, labels and times.
    spec              JSONB       NOT NULL,
    labels            JSONB       NOT NULL DEFAULT '{}'::jsonb,
    -- Owning zone; NULL for resources created on the Global.
    zone              TEXT,
    creation_time     TIMESTAMPTZ NOT NULL,
    modification_time TIMESTAMPTZ NOT NULL,
    -- Revision of the change that wrote this content.
    revision          BIGINT      NOT NULL,
    PRIMARY KEY (type, mesh, name)
);

CREATE INDEX resources_labels ON resources USING GIN (labels jsonb_path_ops);

-- The change log. Revisions are consecutive and assigned in commit order: every writer first
-- locks the single log_head row, so a reader that has seen revision r never later finds a
-- change below r.
CREATE TABLE changes (
    revision BIGINT      PRIMARY KEY,
    type     TEXT        NOT NULL,
    mesh     TEXT        NOT NULL,
    name     TEXT        NOT NULL,
    op       TEXT        NOT NULL CHECK (op IN ('put', 'delete')),
    version  BIGINT      NOT NULL,
    at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE log_head (
    id       BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
    revision BIGINT  NOT NULL
);
INSERT INTO log_head (revision) VALUES (0);
