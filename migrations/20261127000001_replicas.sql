-- Umbra Global CP schema, version 3: replicas (issue 36, high availability).

-- One row per Global replica process and database session (a replica whose session to
-- PostgreSQL was lost registers again under a new id). A replica holds the session-level
-- advisory lock (1, id) for its life; PostgreSQL releases it the moment the session ends.
CREATE TABLE cp_replicas (
    id           INTEGER     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         TEXT        NOT NULL,
    -- Where other replicas reach this one's inter-CP server (host:port; empty: none).
    inter_cp     TEXT        NOT NULL DEFAULT '',
    -- Where this one's REST API listens (host:port), for operators.
    api          TEXT        NOT NULL DEFAULT '',
    -- Its session's backend process (pg_backend_pid()), so that a replica whose heartbeat
    -- stopped while PostgreSQL still sees its session (a partition) can be cut off.
    pid          INTEGER     NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A replica is alive while it holds its advisory lock and its heartbeat is fresher than `ttl`.
CREATE FUNCTION umbra_replica_alive(replica INTEGER, ttl INTERVAL) RETURNS BOOLEAN
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM cp_replicas r
        WHERE r.id = replica AND r.heartbeat_at > now() - ttl
          AND EXISTS (
            SELECT 1 FROM pg_locks l
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.classid::bigint = 1 AND l.objid::bigint = replica))
$$;

-- The per-zone KDS lease: which replica (and which connection on it) holds a zone's streams.
-- Held while `released_at` is NULL and the replica is alive.
CREATE TABLE zone_leases (
    zone        TEXT        PRIMARY KEY,
    replica     INTEGER     NOT NULL,
    connection  TEXT        NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- When its holder let it go (its last stream ended); NULL while held.
    released_at TIMESTAMPTZ,
    -- The replica removing the zone's resources (zone cleanup), while it is alive no replica
    -- may take the zone; NULL: none.
    cleaning_by INTEGER
);
