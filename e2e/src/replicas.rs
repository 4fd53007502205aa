//! Replicas for the high-availability tests and benches (issue 36): several `global-cp`
//! processes on one PostgreSQL database, or several `zone-cp` processes of one zone on the
//! zone's own database, each a [`CpProcess`]; and what the failover tests read of an
//! [`Envoy`] (the idle timeout it runs, the replica its ADS stream is open to).

use std::path::PathBuf;

use crate::{http, CpProcess, Envoy};

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

impl Envoy {
    /// Whether this Envoy runs the inbound idle timeout `seconds` (Kuma's MeshTimeout `from`
    /// puts it on the inbound cluster's HTTP options; read from Envoy's own config dump).
    pub async fn runs_idle_timeout(&self, seconds: u32) -> bool {
        matches!(
            http(self.admin, "GET", "/config_dump?resource=dynamic_active_clusters", None).await,
            Ok((200, body)) if body.contains(&format!("\"{seconds}s\""))
        )
    }

    /// The control-plane replica this Envoy's ADS connection is open to (its admin
    /// `/clusters`: `ads_cluster::<ip:port>::cx_active::1`), when it is connected.
    pub async fn ads_host(&self) -> Option<std::net::SocketAddr> {
        let (200, body) = http(self.admin, "GET", "/clusters", None).await.ok()? else {
            return None;
        };
        body.lines().find_map(|l| {
            let (host, stat) = l.strip_prefix("ads_cluster::")?.split_once("::")?;
            (stat == "cx_active::1")
                .then(|| host.parse().ok())
                .flatten()
        })
    }
}
