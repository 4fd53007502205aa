-- Umbra schema, version 7: each Global replica's latest KDS subscription of each zone
-- (issue 36), so every replica answers a zone's `ZoneOverview` with the subscriptions of
-- every replica that held it, not only its own. The replica holding a zone rewrites its row
-- when the subscription changes (at most once per second); a row left without a
-- `disconnectTime` by a replica that no longer holds the zone is read as ended at `at`.
-- Unused in a zone's database.
CREATE TABLE zone_subscriptions (
    zone         TEXT        NOT NULL,
    -- The Global replica (`--replica-name`) the subscription was on.
    replica      TEXT        NOT NULL,
    -- Kuma's `KDSSubscription` JSON, as that replica last saw it.
    subscription JSONB       NOT NULL,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (zone, replica)
);
