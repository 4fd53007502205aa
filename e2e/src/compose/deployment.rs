//! What the repository's compose deployment (`docker-compose.yml`, `deploy/`) holds and how to
//! check it once it runs on test hosts ([`super::Project`]): its sidecars, its control-plane
//! services (the Global's replicas, each zone's CP or CP replicas, reached through whichever
//! runs: [`zone_call`]), whether a proxy's insight shows its config ACKed, whether its running
//! Envoy applied a policy (read through the zone, that is through the proxy's mTLS admin
//! listener `kuma:envoy:admin`), the probe policy the partition and failover tests and the
//! bench write, and bounded polling. Shared by `e2e/tests/multi_host.rs`,
//! `e2e/tests/multi_host_ha.rs`, `e2e/benches/partitions.rs` and the `--hosts` demo.

use std::time::{Duration, Instant};

use super::{Programs, Project, UpOptions};

/// The sidecars of the compose deployment: `(zone, DPP name)`; every one has an inbound,
/// the frontends also outbounds.
pub const SIDECARS: [(&str, &str); 6] = [
    ("zone-1", "frontend-1"),
    ("zone-1", "backend-1"),
    ("zone-1", "redis-1"),
    ("zone-2", "frontend-2"),
    ("zone-2", "backend-2"),
    ("zone-2", "payments-2"),
];

/// The Global's address in the deployment: the load balancer in front of its replicas.
pub const GLOBAL: &str = "global-cp";

/// The services of the compose file whose command runs `binary` with `flag value` (every one
/// when `flag` is empty), by name.
fn services_running(p: &Project, binary: &str, flag: &str, value: &str) -> Vec<String> {
    p.file()
        .services
        .values()
        .filter(|s| {
            let argv: Vec<&String> = s
                .entrypoint
                .iter()
                .flatten()
                .chain(s.command.iter().flatten())
                .collect();
            argv.first().is_some_and(|a| *a == binary)
                && (flag.is_empty() || argv.windows(2).any(|w| *w[0] == flag && *w[1] == value))
        })
        .map(|s| s.name.clone())
        .collect()
}

/// The Global CP replicas (services running `global-cp`), by name.
pub fn global_cps(p: &Project) -> Vec<String> {
    services_running(p, "global-cp", "", "")
}

/// The zone CP services of `zone` (running `zone-cp --zone <zone>`: one, or its replicas), by
/// name.
pub fn zone_cps(p: &Project, zone: &str) -> Vec<String> {
    services_running(p, "zone-cp", "--zone", zone)
}

/// `method path` as the admin on `zone`'s API (port 5681) through the first of its CP
/// services that runs and answers below 500: every replica of a zone serves its whole API.
///
/// # Errors
/// None of them answered.
pub async fn zone_call(
    p: &Project,
    zone: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, serde_json::Value)> {
    let mut last = Err(anyhow::anyhow!("no zone CP service of {zone} runs"));
    for cp in zone_cps(p, zone) {
        if !p.running(&cp) {
            continue;
        }
        match p.call(&cp, 5681, method, path, body).await {
            // A replica still starting may answer 503: ask the next one.
            Ok((status, answer)) if status < 500 => return Ok((status, answer)),
            Ok(answer) => last = Ok(answer),
            Err(e) => {
                if last.is_err() {
                    last = Err(e.context(format!("{method} {path} on {cp}")));
                }
            }
        }
    }
    last
}

/// How to bring the repository's `docker-compose.yml` up with the e2e-built binaries
/// (`global_cp`, `zone_cp`, `umbractl`: the `CARGO_BIN_EXE_e2e-*` paths of the caller) within
/// `timeout`. Checks the privilege first, so an unprivileged run fails saying what it needs.
///
/// # Errors
/// No privilege for test hosts, or a binary or `envoy` is missing.
pub fn options(
    global_cp: &str,
    zone_cp: &str,
    umbractl: &str,
    timeout: Duration,
) -> anyhow::Result<UpOptions> {
    crate::hosts::require_privilege()?;
    Ok(UpOptions {
        file: std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docker-compose.yml"
        )),
        programs: Programs::new(global_cp, zone_cp, umbractl)?,
        timeout,
    })
}

/// `python -c` fetching `url` (timeout 3 s) inside `service`'s host, as `docker compose exec`
/// would (deploy/README.md's traffic check): its exit code and output.
///
/// # Errors
/// The command could not be run within 10 s.
pub fn fetch(p: &Project, service: &str, url: &str) -> anyhow::Result<(i32, String)> {
    let code = format!(
        "import urllib.request; print(urllib.request.urlopen({url:?}, timeout=3).read().decode())"
    );
    p.exec(service, &["python", "-c", &code], Duration::from_secs(10))
}

/// Poll `check` every 250 ms until it returns `Some`, up to `bound`; the error names `what`.
///
/// # Errors
/// `bound` passed.
pub async fn wait_for<T, F, Fut>(bound: Duration, what: &str, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    poll_every(Duration::from_millis(250), bound, what, check).await
}

/// Poll `check` every `every` until it returns `Some`, up to `bound`; the error names `what`
/// ([`wait_for`] with a finer step, for times a test reports).
///
/// # Errors
/// `bound` passed.
pub async fn poll_every<T, F, Fut>(
    every: Duration,
    bound: Duration,
    what: &str,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < deadline, "waited {bound:?} for {what}");
        tokio::time::sleep(every).await;
    }
}

/// Whether an insight (Kuma's `dataplaneInsight`/`zoneIngressInsight`) shows a connected
/// stream that ACKed CDS and LDS and NACKed nothing.
pub fn acked(insight: &serde_json::Value) -> bool {
    let Some(sub) = insight["subscriptions"].as_array().and_then(|s| s.last()) else {
        return false;
    };
    let n = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .or_else(|| v.as_u64())
            .unwrap_or(0)
    };
    sub["disconnectTime"].is_null()
        && n(&sub["status"]["cds"]["responsesAcknowledged"]) > 0
        && n(&sub["status"]["lds"]["responsesAcknowledged"]) > 0
        && n(&sub["status"]["total"]["responsesRejected"]) == 0
}

/// Every sidecar of `zones` ACKed CDS and LDS on its zone with no NACK, within `bound`.
///
/// # Errors
/// One did not within `bound` (the error holds every service's state and log tail).
pub async fn all_acked(p: &Project, zones: &[&str], bound: Duration) -> anyhow::Result<()> {
    for (zone, dp) in SIDECARS.iter().filter(|(z, _)| zones.contains(z)) {
        let path = format!("/meshes/default/dataplanes+insights/{dp}");
        wait_for(bound, &format!("{dp} ACKed on {zone}"), || async {
            let (s, body) = zone_call(p, zone, "GET", &path, None).await.ok()?;
            (s == 200 && acked(&body["dataplaneInsight"])).then_some(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", p.report()))?;
    }
    Ok(())
}

/// A MeshTimeout `name` giving every sidecar's inbounds an idle timeout of `seconds` (every
/// sidecar has an inbound, so every Envoy runs it), as JSON for `PUT
/// /meshes/default/meshtimeouts/{name}`.
pub fn idle_timeout(name: &str, seconds: u32) -> String {
    serde_json::json!({
        "type": "MeshTimeout", "mesh": "default", "name": name,
        "spec": {"targetRef": {"kind": "Mesh"},
            "from": [{"targetRef": {"kind": "Mesh"},
                "default": {"idleTimeout": format!("{seconds}s")}}]},
    })
    .to_string()
}

/// Whether `dp`'s running Envoy (its config dump, read by its zone through the mTLS admin
/// listener) runs the inbound idle timeout `seconds` of [`idle_timeout`].
pub async fn runs_idle_timeout(p: &Project, zone: &str, dp: &str, seconds: u32) -> bool {
    let path = format!("/meshes/default/dataplanes/{dp}/xds");
    matches!(
        zone_call(p, zone, "GET", &path, None).await,
        Ok((200, v)) if v.to_string().contains(&format!("\"{seconds}s\""))
    )
}

/// Wait until every sidecar of `zones` runs [`idle_timeout`] `seconds`; how long it took.
///
/// # Errors
/// One did not within `bound`.
pub async fn converged(
    p: &Project,
    zones: &[&str],
    seconds: u32,
    bound: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    for (zone, dp) in SIDECARS.iter().filter(|(z, _)| zones.contains(z)) {
        wait_for(
            bound.saturating_sub(start.elapsed()),
            &format!("{dp} of {zone} running an idle timeout of {seconds}s"),
            || async { runs_idle_timeout(p, zone, dp, seconds).await.then_some(()) },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", p.report()))?;
    }
    Ok(start.elapsed())
}
