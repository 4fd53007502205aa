//! Global replica failover (issue 36): two `global-cp` replicas on one PostgreSQL, a zone-cp
//! given both KDS addresses, and real Envoys registered in the zone. Each round SIGKILLs the
//! replica the zone is connected to, writes a MeshTimeout through the survivor at once, and
//! measures from the kill until the zone is connected again and until every Envoy runs the new
//! timeout (read from each Envoy's own config dump); then the killed replica is restarted and
//! the next round kills the other one. Prints one table with p50, p99 and max.
//!
//! `cargo bench -p umbra-e2e --bench global_failover`; `UMBRA_FAILOVER_ROUNDS` (default 20)
//! and `UMBRA_FAILOVER_ENVOYS` (default 3) change the size. Needs PostgreSQL and Envoy.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use umbra_e2e::measure::{env_usize, percentile};
use umbra_e2e::{
    dataplane_yaml, envoy_binary, free_port, http, wait_until, CpProcess, DpServer, Envoy,
};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn idle_timeout(seconds: u32) -> String {
    umbra_e2e::compose::deployment::idle_timeout("idle", seconds)
}

async fn start_global(url: &str, name: &str, log: PathBuf) -> anyhow::Result<CpProcess> {
    CpProcess::start_global_replica(GLOBAL, url, name, log).await
}

/// The KDS address the zone is connected to.
async fn connected_to(zone: &CpProcess) -> Option<String> {
    let (_, v) = zone.call("GET", "/ready", None).await.ok()?;
    (v["global"]["connected"] == true)
        .then(|| v["global"]["globalAddress"].as_str().map(str::to_owned))
        .flatten()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rounds = env_usize("UMBRA_FAILOVER_ROUNDS", 20);
    let envoys = env_usize("UMBRA_FAILOVER_ENVOYS", 3);
    let envoy_bin = envoy_binary().ok_or_else(|| anyhow::anyhow!("Envoy is not installed"))?;
    let pg = TempPostgres::start()?;
    let url = pg.create_database("failover").await?;
    let dir = std::env::temp_dir().join(format!("umbra-failover-bench-{}", free_port()));
    std::fs::create_dir_all(&dir)?;
    let a = start_global(&url, "a", dir.join("global-a.log")).await?;
    let b = start_global(&url, "b", dir.join("global-b.log")).await?;
    let mut globals = [a, b];
    let addresses: Vec<String> = globals
        .iter()
        .map(|g| format!("http://{}", g.grpc))
        .collect();
    let token = umbra_e2e::zone_token(&globals[0], "zone-1").await?;
    globals[0].apply("/meshes/default", MESH).await?;
    globals[0]
        .apply("/meshes/default/meshtimeouts/idle", &idle_timeout(100))
        .await?;
    let zone = CpProcess::start(
        ZONE,
        "--ads-addr",
        &[
            "--zone".into(),
            "zone-1".into(),
            "--global-kds-address".into(),
            addresses.join(","),
        ],
        &[("UMBRA_KDS_TOKEN", &token)],
        dir.join("zone.log"),
    )
    .await?;
    wait_until(Duration::from_secs(30), || async {
        matches!(
            zone.call("GET", "/meshes/default", None).await,
            Ok((200, _))
        )
    })
    .await?;
    let dp = DpServer::of(zone.api, zone.grpc, globals[0].api).await?;
    let mut proxies = Vec::new();
    for i in 0..envoys {
        let name = format!("web-{i}");
        let port = u16::try_from(20_000 + i)?;
        let yaml = dataplane_yaml(&name, "web", port, 8_000 + u16::try_from(i)?, None);
        proxies.push(
            Envoy::start_with_dataplane(&envoy_bin, "default", &name, &dp, Some(&yaml)).await?,
        );
    }
    for p in &proxies {
        if wait_until(Duration::from_secs(60), || p.runs_idle_timeout(100))
            .await
            .is_err()
        {
            let dump = http(
                p.admin,
                "GET",
                "/config_dump?resource=dynamic_active_clusters",
                None,
            )
            .await;
            anyhow::bail!(
                "an Envoy does not run the first timeout\nEnvoy:\n{}\nits clusters: {dump:?}\nzone:\n{}",
                p.log_tail(),
                zone.log_tail()
            );
        }
    }

    let mut reconnected = Vec::new();
    let mut acked = Vec::new();
    for round in 0..rounds {
        let seconds = 200 + u32::try_from(round)?;
        let holder = wait_until_some(Duration::from_secs(30), || connected_to(&zone)).await?;
        let victim = addresses
            .iter()
            .position(|a| *a == holder)
            .ok_or_else(|| anyhow::anyhow!("connected to an unknown address {holder}"))?;
        let survivor = 1 - victim;
        globals[victim].kill();
        let killed = Instant::now();
        globals[survivor]
            .apply("/meshes/default/meshtimeouts/idle", &idle_timeout(seconds))
            .await?;
        let mut back = None;
        let deadline = killed + Duration::from_secs(60);
        loop {
            if back.is_none() && connected_to(&zone).await.as_deref() == Some(&addresses[survivor])
            {
                back = Some(killed.elapsed());
            }
            let mut all = true;
            for p in &proxies {
                all &= p.runs_idle_timeout(seconds).await;
            }
            if all && back.is_some() {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "round {round}: not converged within 60 s\nzone:\n{}",
                zone.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = killed.elapsed();
        eprintln!(
            "round {round}: killed {}, zone back after {:?}, every Envoy runs the write after {took:?}",
            ["a", "b"][victim],
            back.unwrap_or_default()
        );
        reconnected.push(back.unwrap_or_default());
        acked.push(took);
        globals[victim].restart().await?;
    }
    reconnected.sort();
    acked.sort();
    let row = |what: &str, v: &[Duration], target: &str| {
        println!(
            "| {what} | {:.0} ms | {:.0} ms | {:.0} ms | {target} |",
            percentile(v, 50.0).as_secs_f64() * 1e3,
            percentile(v, 99.0).as_secs_f64() * 1e3,
            percentile(v, 100.0).as_secs_f64() * 1e3
        );
    };
    println!("| measured ({rounds} kills, {envoys} Envoys) | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    row(
        "Global replica SIGKILLed -> zone connected to the other",
        &reconnected,
        "",
    );
    row(
        "Global replica SIGKILLed -> a write made through the other runs on every Envoy",
        &acked,
        "p99 <= 5 s",
    );
    Ok(())
}

/// Poll `f` every 20 ms until it yields a value, for at most `limit`.
async fn wait_until_some<T, F, Fut>(limit: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        anyhow::ensure!(start.elapsed() < limit, "nothing within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
