//! Real control planes for the harness: the `umbra-bench` binary re-executes itself as
//! `global-cp` or `zone-cp` (the environment variable [`ROLE`] picks which; the arguments are
//! the CP's own), so one `cargo run -p umbra-bench` builds everything a scenario starts, with
//! the CPs' allocator (jemalloc). Zones start from a prepared `--data-dir` (a store snapshot
//! holding the Mesh, the policies and the zone's Dataplanes), so a scenario does not spend
//! minutes registering DPPs one by one. Everything lives under one temp dir that is removed on
//! drop unless `UMBRA_BENCH_KEEP` is set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use umbra_core::resource::Resource;
use umbra_e2e::CpProcess;

use umbra_e2e::envoy_sim::Access;

/// The environment variable naming the CP this process runs as (`global-cp`, `zone-cp`).
pub const ROLE: &str = "UMBRA_BENCH_ROLE";

/// Run as a CP when [`ROLE`] says so: `Some(result)` of its `cli_main`, `None` otherwise.
pub fn run_role() -> Option<anyhow::Result<()>> {
    match std::env::var(ROLE).ok()?.as_str() {
        "global-cp" => Some(umbra_global_cp::cli_main()),
        "zone-cp" => Some(umbra_zone_cp::cli_main()),
        other => Some(Err(anyhow::anyhow!("{ROLE}={other}: not a CP"))),
    }
}

/// A scenario's working directory (logs, data dirs), removed on drop unless
/// `UMBRA_BENCH_KEEP` is set.
#[derive(Debug)]
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// A fresh directory under the system temp dir, named after `scenario`.
    ///
    /// # Errors
    /// When it cannot be created.
    pub fn new(scenario: &str) -> anyhow::Result<WorkDir> {
        let dir = std::env::temp_dir().join(format!(
            "umbra-bench-{scenario}-{}-{}",
            std::process::id(),
            umbra_e2e::free_port()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("UMBRA_BENCH_KEEP").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn exe() -> anyhow::Result<String> {
    Ok(std::env::current_exe()?.display().to_string())
}

/// Start a Global (memory store) with its log in `dir`.
///
/// # Errors
/// When it does not start.
pub async fn start_global(dir: &Path) -> anyhow::Result<CpProcess> {
    CpProcess::start(
        &exe()?,
        "--kds-addr",
        &[],
        &[(ROLE, "global-cp")],
        dir.join("global.log"),
    )
    .await
}

/// Write zone `z`'s data dir under `dir`: the Mesh, `policies` and `dataplanes` (YAML each).
///
/// # Errors
/// Invalid YAML (a bug in the scenario), I/O.
pub fn zone_dir(
    dir: &Path,
    z: usize,
    policies: &[String],
    dataplanes: impl Iterator<Item = String>,
) -> anyhow::Result<PathBuf> {
    let data = dir.join(format!("zone-{z}"));
    std::fs::create_dir_all(&data)?;
    let decode = |y: &str| -> anyhow::Result<serde_json::Value> {
        Ok(Resource::from_bytes(y.as_bytes())
            .map_err(|e| anyhow::anyhow!("{e}: {y}"))?
            .to_value())
    };
    let mut docs = vec![decode(crate::mesh::MESH)?];
    for p in policies {
        docs.push(decode(p)?);
    }
    for d in dataplanes {
        docs.push(decode(&d)?);
    }
    std::fs::write(data.join("store.json"), serde_json::to_vec(&docs)?)?;
    Ok(data)
}

/// Start zone `zone-<z>` on `data`: federated to `global` when given (with a zone token from
/// it), standalone otherwise.
///
/// # Errors
/// When it does not start or the Global refuses a token.
pub async fn start_zone(
    dir: &Path,
    global: Option<&CpProcess>,
    z: usize,
    data: &Path,
) -> anyhow::Result<CpProcess> {
    let name = format!("zone-{z}");
    let log = dir.join(format!("{name}.log"));
    let data_arg = ["--data-dir".to_owned(), data.display().to_string()];
    match global {
        Some(g) => {
            let token = umbra_e2e::zone_token(g, &name).await?;
            let mut args = vec![
                "--zone".to_owned(),
                name.clone(),
                "--global-kds-address".to_owned(),
                format!("http://{}", g.grpc),
            ];
            args.extend(data_arg);
            CpProcess::start(
                &exe()?,
                "--ads-addr",
                &args,
                &[(ROLE, "zone-cp"), ("UMBRA_KDS_TOKEN", token.as_str())],
                log,
            )
            .await
        }
        None => {
            let mut args = vec!["--zone".to_owned(), name];
            args.extend(data_arg);
            CpProcess::start(&exe()?, "--ads-addr", &args, &[(ROLE, "zone-cp")], log).await
        }
    }
}

/// How simulated Envoys reach `zone`: its data-plane server CA, and a mesh-wide dataplane
/// token for mesh `default` from `issuer` (the Global when federated, else the zone).
///
/// # Errors
/// When either API refuses.
pub async fn ads_access(zone: &CpProcess, issuer: &CpProcess) -> anyhow::Result<Access> {
    let (status, ca) = zone.call("GET", "/dp-server/ca.pem", None).await?;
    let ca = ca.as_str().unwrap_or_default().to_owned();
    anyhow::ensure!(status == 200, "GET /dp-server/ca.pem: {status} {ca}");
    let (status, token) = issuer
        .call(
            "POST",
            "/tokens/dataplane",
            Some(r#"{"mesh": "default", "validFor": "2h"}"#),
        )
        .await?;
    anyhow::ensure!(status == 200, "POST /tokens/dataplane: {status} {token}");
    Access::new(&ca, token.as_str().unwrap_or_default())
}

/// Wait until the Global lists `total` Dataplanes in mesh `default` (the zones synced them).
///
/// # Errors
/// When it does not within `limit`.
pub async fn wait_dataplanes(
    global: &CpProcess,
    total: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    umbra_e2e::wait_until(limit, || async {
        matches!(global.call("GET", "/meshes/default/dataplanes?size=1", None).await,
            Ok((200, v)) if v["total"] == total)
    })
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "the Global did not list {total} Dataplanes:\n{}",
            global.log_tail()
        )
    })
}
