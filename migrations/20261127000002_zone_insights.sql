-- Umbra Global CP schema, version 4: the insights zones report (issue 36), shared by every
-- Global replica. The replica holding a zone's KDS stream writes them; the others mirror them
-- (by `seq`, and by a periodic full read), so any replica answers a DPP's overview and a zone
-- that moves to another replica resumes with only what changed.
CREATE SEQUENCE zone_insights_seq;

CREATE TABLE zone_insights (
    zone    TEXT   NOT NULL,
    -- The insight's KDS name (`<mesh>/<name>` as the zone names it).
    name    TEXT   NOT NULL,
    -- Its content version; NULL with `body` for a removed insight (kept a while so that
    -- mirrors learn the removal).
    version TEXT,
    body    BYTEA,
    seq     BIGINT NOT NULL DEFAULT nextval('zone_insights_seq'),
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (zone, name)
);

CREATE INDEX zone_insights_by_seq ON zone_insights (seq);
