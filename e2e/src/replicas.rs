//! Replicas for the high-availability tests and benches (issue 36): several `global-cp`
//! processes on one PostgreSQL database, or several `zone-cp` processes of one zone on the
//! zone's own database, each a [`CpProcess`].

use std::path::PathBuf;

use crate::CpProcess;

impl CpProcess {
    /// Start the Global `binary` as replica `name` of the PostgreSQL database at `url`
    /// (`--store postgres`; [`CpProcess::start`] picks its ports, its inter-CP one included).
    ///
    /// # Errors
    /// As [`CpProcess::start`].
    pub async fn start_global_replica(
        binary: &str,
        url: &str,
        name: &str,
        log: PathBuf,
    ) -> anyhow::Result<CpProcess> {
        let args = [
            "--store",
            "postgres",
            "--postgres-url",
            url,
            "--replica-name",
            name,
        ];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Self::start(binary, "--kds-addr", &args, &[], log).await
    }

    /// Start the zone-cp `binary` as replica `name` of zone `zone` on the zone's PostgreSQL
    /// database at `url` (`--store postgres`), federated to the Global KDS address(es)
    /// `global_kds` (`http://host:port`, comma-separated for several) with the zone `token`.
    /// [`CpProcess::start`] picks its API and ADS ports; the ADS one is what the replica
    /// advertises to Envoys (the default `--advertised-xds-address`), so its `grpc` is the
    /// address bootstraps list for it.
    ///
    /// # Errors
    /// As [`CpProcess::start`].
    pub async fn start_zone_replica(
        binary: &str,
        zone: &str,
        global_kds: &str,
        token: &str,
        url: &str,
        name: &str,
        log: PathBuf,
    ) -> anyhow::Result<CpProcess> {
        let args = [
            "--zone",
            zone,
            "--global-kds-address",
            global_kds,
            "--store",
            "postgres",
            "--postgres-url",
            url,
            "--replica-name",
            name,
        ];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Self::start(
            binary,
            "--ads-addr",
            &args,
            &[("UMBRA_KDS_TOKEN", token)],
            log,
        )
        .await
    }
}
