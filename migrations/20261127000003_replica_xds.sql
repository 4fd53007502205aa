-- Umbra schema, version 5: zone CP replicas (issue 36) register where Envoys reach their
-- data-plane server, so a bootstrap can list every live replica's address.
ALTER TABLE cp_replicas ADD COLUMN xds TEXT NOT NULL DEFAULT '';
