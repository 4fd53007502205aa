//! Zone CP replica failover (issue 36): one Global, two `zone-cp` replicas of `zone-1` on the
//! zone's PostgreSQL (`--store postgres`), and real Envoys whose ADS cluster lists both
//! replicas (as the zone's `POST /bootstrap` does). Rounds alternate:
//!
//! - **the leader is SIGKILLed**: measured until the other replica leads with its KDS stream
//!   to the Global connected, and until a MeshTimeout written on the Global right after the
//!   kill runs on every Envoy (read from each Envoy's own config dump);
//! - **a replica that does not lead is SIGKILLed**: measured until a write made right after
//!   the kill runs on every Envoy.
//!
//! In every round, for each Envoy that was connected to the killed replica (Envoy's
//! `/clusters`), measured until it is connected to the survivor and the survivor records its
//! ACKs of the current config (its insight there). Half the Envoys were bootstrapped by each
//! replica (listing itself first), so each kill moves some.
//!
//! The killed replica is restarted after each round. Prints one table with p50, p99 and max.
//! `cargo bench -p umbra-e2e --bench zone_failover`; `UMBRA_FAILOVER_ROUNDS` (default 12) and
//! `UMBRA_FAILOVER_ENVOYS` (default 4) change the size. Needs PostgreSQL and Envoy.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use umbra_e2e::measure::{env_usize, percentile};
use umbra_e2e::{dataplane_yaml, envoy_binary, free_port, wait_until, CpProcess, DpServer, Envoy};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const NAMES: [&str; 2] = ["a", "b"];

fn idle_timeout(seconds: u32) -> String {
    umbra_e2e::compose::deployment::idle_timeout("idle", seconds)
}

/// `/ready` of a replica.
async fn ready(zone: &CpProcess) -> Value {
    match zone.call("GET", "/ready", None).await {
        Ok((_, v)) => v,
        Err(_) => Value::Null,
    }
}

/// Whether `zone`'s insight of DPP `name` says its Envoy is connected there and has ACKed
/// clusters and listeners.
async fn serving(zone: &CpProcess, replica: &str, name: &str) -> bool {
    let Ok((200, v)) = zone
        .call(
            "GET",
            &format!("/meshes/default/dataplanes+insights/{name}"),
            None,
        )
        .await
    else {
        return false;
    };
    let insight = &v["dataplaneInsight"];
    let Some(sub) = insight["subscriptions"].as_array().and_then(|s| s.last()) else {
        return false;
    };
    sub["controlPlaneInstanceId"] == replica
        && sub.get("disconnectTime").is_none()
        && ["cds", "lds"]
            .iter()
            .all(|t| sub["status"][t]["ackedVersion"].is_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rounds = env_usize("UMBRA_FAILOVER_ROUNDS", 12);
    let envoys = env_usize("UMBRA_FAILOVER_ENVOYS", 4);
    let envoy_bin = envoy_binary().ok_or_else(|| anyhow::anyhow!("Envoy is not installed"))?;
    let pg = TempPostgres::start()?;
    let url = pg.create_database("zone_1").await?;
    let dir = std::env::temp_dir().join(format!("umbra-zone-failover-bench-{}", free_port()));
    std::fs::create_dir_all(&dir)?;
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    let token = umbra_e2e::zone_token(&global, "zone-1").await?;
    global.apply("/meshes/default", MESH).await?;
    global
        .apply("/meshes/default/meshtimeouts/idle", &idle_timeout(100))
        .await?;
    let mut zones = Vec::new();
    let kds = format!("http://{}", global.grpc);
    for name in NAMES {
        let log = dir.join(format!("zone-{name}.log"));
        zones.push(
            CpProcess::start_zone_replica(ZONE, "zone-1", &kds, &token, &url, name, log).await?,
        );
    }
    for z in &zones {
        wait_until(Duration::from_secs(30), || async {
            matches!(z.call("GET", "/meshes/default", None).await, Ok((200, _)))
        })
        .await?;
    }
    let ads: Vec<SocketAddr> = zones.iter().map(|z| z.grpc).collect();
    let mut proxies = Vec::new();
    for i in 0..envoys {
        // Half the Envoys were bootstrapped by each replica (which lists itself first), as
        // kuma-dps behind a load balancer would be.
        let first = &zones[i % 2];
        let dp = DpServer::of(first.api, first.grpc, global.api)
            .await?
            .with_replicas(&ads);
        let name = format!("web-{i}");
        let port = u16::try_from(21_000 + i)?;
        let yaml = dataplane_yaml(&name, "web", port, 9_000 + u16::try_from(i)?, None);
        proxies.push((
            name.clone(),
            Envoy::start_with_dataplane(&envoy_bin, "default", &name, &dp, Some(&yaml)).await?,
        ));
    }
    for (_, p) in &proxies {
        if wait_until(Duration::from_secs(60), || p.runs_idle_timeout(100))
            .await
            .is_err()
        {
            anyhow::bail!(
                "an Envoy does not run the first timeout\nEnvoy:\n{}\nzone a:\n{}\nzone b:\n{}",
                p.log_tail(),
                zones[0].log_tail(),
                zones[1].log_tail()
            );
        }
    }

    let (mut kds_back, mut leader_write) = (Vec::new(), Vec::new());
    let (mut envoy_back, mut other_write) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let seconds = 200 + u32::try_from(round)?;
        // Settled: one leader, connected to the Global.
        wait_until(Duration::from_secs(30), || async {
            let (a, b) = (ready(&zones[0]).await, ready(&zones[1]).await);
            let leads = [a["leader"] == true, b["leader"] == true];
            let connected = [
                a["global"]["connected"] == true,
                b["global"]["connected"] == true,
            ];
            leads[0] != leads[1] && connected[usize::from(leads[1])]
        })
        .await?;
        let mut leader = None;
        for (i, z) in zones.iter().enumerate() {
            if ready(z).await["leader"] == true {
                leader = Some(i);
            }
        }
        let leader = leader.ok_or_else(|| anyhow::anyhow!("no leader"))?;
        let kill_leader = round % 2 == 0;
        let victim = if kill_leader { leader } else { 1 - leader };
        let survivor = 1 - victim;
        let mut moving = Vec::new();
        for (name, p) in &proxies {
            if p.ads_host().await == Some(ads[victim]) {
                moving.push(name.clone());
            }
        }
        zones[victim].kill();
        let killed = Instant::now();
        global
            .apply("/meshes/default/meshtimeouts/idle", &idle_timeout(seconds))
            .await?;
        let deadline = killed + Duration::from_secs(60);
        let (mut kds, mut moved) = (None, Vec::new());
        loop {
            if kill_leader && kds.is_none() {
                let r = ready(&zones[survivor]).await;
                if r["leader"] == true && r["global"]["connected"] == true {
                    kds = Some(killed.elapsed());
                }
            }
            for name in &moving {
                if !moved.iter().any(|(n, _)| n == name)
                    && serving(&zones[survivor], NAMES[survivor], name).await
                {
                    moved.push((name.clone(), killed.elapsed()));
                }
            }
            let mut all = true;
            for (_, p) in &proxies {
                all &= p.runs_idle_timeout(seconds).await;
            }
            if all && (!kill_leader || kds.is_some()) && moved.len() == moving.len() {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "round {round}: not converged within 60 s (leader killed: {kill_leader}; KDS back: {kds:?}; Envoys back: {moved:?} of {moving:?})\nsurvivor:\n{}",
                zones[survivor].log_tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = killed.elapsed();
        eprintln!(
            "round {round}: killed {} ({}), KDS back after {kds:?}, {} Envoys moved {:?}, the write runs everywhere after {took:?}",
            NAMES[victim],
            if kill_leader { "the leader" } else { "not leading" },
            moving.len(),
            moved.iter().map(|(_, t)| *t).collect::<Vec<_>>()
        );
        envoy_back.extend(moved.into_iter().map(|(_, t)| t));
        if kill_leader {
            kds_back.push(kds.unwrap_or_default());
            leader_write.push(took);
        } else {
            other_write.push(took);
        }
        zones[victim].restart().await?;
        wait_until(Duration::from_secs(30), || async {
            ready(&zones[victim]).await["replicaId"].is_number()
        })
        .await?;
    }
    for v in [
        &mut kds_back,
        &mut leader_write,
        &mut envoy_back,
        &mut other_write,
    ] {
        v.sort();
    }
    let row = |what: &str, v: &[Duration], target: &str| {
        println!(
            "| {what} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {target} |",
            v.len(),
            percentile(v, 50.0).as_secs_f64() * 1e3,
            percentile(v, 99.0).as_secs_f64() * 1e3,
            percentile(v, 100.0).as_secs_f64() * 1e3
        );
    };
    println!("| measured ({rounds} kills, {envoys} Envoys) | samples | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    row(
        "zone leader SIGKILLed -> the other leads, KDS connected",
        &kds_back,
        "<= 5 s",
    );
    row(
        "zone leader SIGKILLed -> a write on the Global runs on every Envoy",
        &leader_write,
        "",
    );
    row(
        "Envoy's zone replica SIGKILLed -> Envoy connected to the other, ACKed there",
        &envoy_back,
        "<= 3 s",
    );
    row(
        "non-leading replica SIGKILLed -> a write on the Global runs on every Envoy",
        &other_write,
        "",
    );
    Ok(())
}
