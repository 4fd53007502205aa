-- Umbra Global CP schema, version 2: keys that sign tokens (issue 5: zone tokens).
-- One row per purpose ('zone-token'); created on first use, never rotated automatically.
CREATE TABLE signing_keys (
    name       TEXT        PRIMARY KEY,
    key        BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
