-- Umbra schema, version 6: the insights of a zone's proxies (issue 36), shared by the zone CP
-- replicas on the zone's database. The replica an Envoy's ADS stream is open to writes that
-- proxy's insight; the others mirror it (by `seq`, and by a periodic full read that also
-- notices a writer that died), so any replica answers for any Envoy and generates the same
-- configuration for it (its admin port is part of it). Unused in the Global's database.
CREATE SEQUENCE dataplane_insights_seq;

CREATE TABLE dataplane_insights (
    -- The proxy: mesh and name (a ZoneIngress has an empty mesh).
    mesh    TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    -- The replica (cp_replicas.id) that wrote it last: the one its Envoy is (or was last)
    -- connected to.
    replica INTEGER NOT NULL,
    -- The insight (JSON): the zone's insight document, its admin endpoint, the replica's name.
    body    JSONB   NOT NULL,
    seq     BIGINT  NOT NULL DEFAULT nextval('dataplane_insights_seq'),
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (mesh, name)
);

CREATE INDEX dataplane_insights_by_seq ON dataplane_insights (seq);
