//! Nothing lost, nothing run twice (issue 36, item 6): two Global replicas on one PostgreSQL,
//! two replicas of `zone-1` on the zone's PostgreSQL (given both Globals' KDS addresses), and
//! real Envoys whose ADS cluster lists both zone replicas. While 8 writers write policies
//! through both Global replicas, the test SIGKILLs, in turn:
//!
//! 1. the Global replica the zone's KDS stream goes through;
//! 2. the zone's leader (the replica speaking KDS), restarted afterwards;
//! 3. the zone replica an Envoy is connected to.
//!
//! Then: every write a Global acknowledged (2xx) is on the surviving Global and on every live
//! zone replica, a last write runs on every Envoy (so each Envoy's config comes from a state
//! holding every acknowledged write), and a monitor that sampled every replica's `/ready`
//! every 100 ms never saw two Global leaders, two zone leaders, or two zone replicas with a KDS
//! stream at once (leader-only work never ran twice). After each kill, per-DPP inspect and the
//! fleet shadow diff answer from the survivors, complete (not `partial`) once the zone is back.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use umbra_e2e::{
    dataplane_yaml, envoy_binary, free_port, http, put_yaml, wait_until, CpProcess, DpServer, Envoy,
};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const WRITERS: usize = 8;

fn idle_timeout(seconds: u32) -> String {
    umbra_e2e::compose::deployment::idle_timeout("idle", seconds)
}

fn policy(name: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: {name}}}\n    default: {{connectionTimeout: 3s}}\n")
}

/// `/ready` of a process at `api` (`Null` when it does not answer).
async fn ready(api: SocketAddr) -> Value {
    match umbra_e2e::call_json(api, "GET", "/ready", None).await {
        Ok((_, v)) => v,
        Err(_) => Value::Null,
    }
}

/// Names of the MeshTimeouts `api` lists (`None` when it does not answer).
async fn policies(api: SocketAddr) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    let mut offset = 0;
    loop {
        let (status, v) = umbra_e2e::call_json(
            api,
            "GET",
            &format!("/meshes/default/meshtimeouts?size=1000&offset={offset}"),
            None,
        )
        .await
        .ok()?;
        if status != 200 {
            return None;
        }
        let items = v["items"].as_array()?;
        names.extend(
            items
                .iter()
                .filter_map(|i| i["name"].as_str().map(str::to_owned)),
        );
        if v["next"].is_null() || items.is_empty() {
            return Some(names);
        }
        offset += items.len();
    }
}

/// Per-DPP inspect and the fleet diff answer through `global`, the diff complete.
async fn inspect_answers(global: SocketAddr) -> bool {
    let config = http(
        global,
        "GET",
        "/meshes/default/dataplanes/dp-0/_config",
        None,
    )
    .await;
    let diff = umbra_e2e::call_json(
        global,
        "GET",
        "/meshes/default/_shadow-diff?format=summary",
        None,
    )
    .await;
    matches!(config, Ok((200, _))) && matches!(diff, Ok((200, ref v)) if v["partial"] == false)
}

/// What the monitor saw that must never happen.
#[derive(Debug, Default)]
struct Seen {
    violations: Vec<String>,
    samples: usize,
}

/// Sample every replica's `/ready` every 100 ms until `stop`: never two leaders of a role,
/// never two zone replicas with a KDS stream.
async fn monitor(
    globals: Vec<SocketAddr>,
    zones: Vec<SocketAddr>,
    seen: Arc<Mutex<Seen>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let mut g = Vec::new();
        for a in &globals {
            g.push(ready(*a).await);
        }
        let mut z = Vec::new();
        for a in &zones {
            z.push(ready(*a).await);
        }
        let global_leaders = g.iter().filter(|r| r["leader"] == true).count();
        let zone_leaders = z.iter().filter(|r| r["leader"] == true).count();
        let kds = z
            .iter()
            .filter(|r| r["global"]["connected"] == true)
            .count();
        {
            let mut s = seen.lock().unwrap();
            s.samples += 1;
            for (what, n) in [
                ("Global leaders", global_leaders),
                ("zone leaders", zone_leaders),
                ("zone replicas with a KDS stream", kds),
            ] {
                if n > 1 {
                    s.violations.push(format!("{n} {what} at once"));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Write a new policy every ~50 ms through the Global replicas in turn until `stop`; the
/// names a replica acknowledged.
async fn writer(
    i: usize,
    globals: Vec<SocketAddr>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<String> {
    let mut acked = Vec::new();
    let mut n = 0;
    while !*stop.borrow() {
        let name = format!("w{i}-{n}");
        let api = globals[(i + n) % globals.len()];
        if put_yaml(
            api,
            &format!("/meshes/default/meshtimeouts/{name}"),
            &policy(&name),
        )
        .await
        .is_ok()
        {
            acked.push(name);
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_killing_the_global_the_zone_leader_and_the_envoys_replica(
) -> anyhow::Result<()> {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let Some(envoy_bin) = envoy_binary() else {
        return Ok(());
    };
    let global_url = pg.create_database("chaos_global").await?;
    let zone_url = pg.create_database("chaos_zone").await?;
    let dir = std::env::temp_dir().join(format!("umbra-ha-chaos-{}", free_port()));
    std::fs::create_dir_all(&dir)?;
    let a = CpProcess::start_global_replica(GLOBAL, &global_url, "a", dir.join("g-a.log")).await?;
    let b = CpProcess::start_global_replica(GLOBAL, &global_url, "b", dir.join("g-b.log")).await?;
    let mut globals = [a, b];
    let kds: Vec<String> = globals
        .iter()
        .map(|g| format!("http://{}", g.grpc))
        .collect();
    // Which Global the zone tries first and which zone replica starts first (and so leads)
    // change from run to run, so that no order is the only one tested.
    let flip = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos()
        % 2
        == 1;
    println!("order: {}", if flip { "flipped" } else { "as started" });
    let mut listed = kds.clone();
    if flip {
        listed.reverse();
    }
    let token = umbra_e2e::zone_token(&globals[0], "zone-1").await?;
    globals[0].apply("/meshes/default", MESH).await?;
    globals[0]
        .apply("/meshes/default/meshtimeouts/idle", &idle_timeout(100))
        .await?;
    let mut zones = Vec::new();
    let names = if flip { ["zb", "za"] } else { ["za", "zb"] };
    let listed = listed.join(",");
    for name in names {
        let log = dir.join(format!("{name}.log"));
        zones.push(
            CpProcess::start_zone_replica(ZONE, "zone-1", &listed, &token, &zone_url, name, log)
                .await?,
        );
    }
    let logs = |globals: &[CpProcess], zones: &[CpProcess]| {
        let mut out = String::new();
        for p in globals.iter().chain(zones) {
            out.push_str(&format!("--- {}\n{}\n", p.log.display(), p.log_tail()));
        }
        out
    };
    for z in &zones {
        let up = wait_until(Duration::from_secs(30), || async {
            matches!(z.call("GET", "/meshes/default", None).await, Ok((200, _)))
        })
        .await;
        assert!(
            up.is_ok(),
            "the Mesh did not reach a zone replica\n{}",
            logs(&globals, &zones)
        );
    }
    let ads: Vec<SocketAddr> = zones.iter().map(|z| z.grpc).collect();
    let mut envoys = Vec::new();
    for (i, first) in zones.iter().enumerate() {
        let dp = DpServer::of(first.api, first.grpc, globals[0].api)
            .await?
            .with_replicas(&ads);
        let name = format!("dp-{i}");
        let port = free_port();
        let yaml = dataplane_yaml(&name, "web", port, 9_100 + u16::try_from(i)?, None);
        envoys.push(
            Envoy::start_with_dataplane(&envoy_bin, "default", &name, &dp, Some(&yaml)).await?,
        );
    }
    for e in &envoys {
        let on = wait_until(Duration::from_secs(60), || e.runs_idle_timeout(100)).await;
        assert!(
            on.is_ok(),
            "an Envoy never ran the first policy\n{}\n{}",
            e.log_tail(),
            logs(&globals, &zones)
        );
    }
    let global_apis: Vec<SocketAddr> = globals.iter().map(|g| g.api).collect();
    let zone_apis: Vec<SocketAddr> = zones.iter().map(|z| z.api).collect();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watching = tokio::spawn(monitor(
        global_apis.clone(),
        zone_apis.clone(),
        seen.clone(),
        stop_rx.clone(),
    ));
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| tokio::spawn(writer(i, global_apis.clone(), stop_rx.clone())))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 1. The Global replica the zone's KDS goes through.
    let mut through = None;
    for z in &zones {
        let r = ready(z.api).await;
        if r["global"]["connected"] == true {
            through = r["global"]["globalAddress"].as_str().map(str::to_owned);
        }
    }
    let through = through.expect("the zone's leader is connected to a Global replica");
    let g_victim = kds
        .iter()
        .position(|k| *k == through)
        .expect("a known KDS address");
    globals[g_victim].kill();
    let survivor = globals[1 - g_victim].api;
    let answered = wait_until(Duration::from_secs(20), || inspect_answers(survivor)).await;
    assert!(
        answered.is_ok(),
        "inspect does not answer from the surviving Global\n{}",
        logs(&globals, &zones)
    );
    println!(
        "killed Global replica {} (the zone's KDS went through it)",
        ["a", "b"][g_victim]
    );

    // 2. The zone's leader; restarted once another leads.
    let mut leader = None;
    for (i, z) in zones.iter().enumerate() {
        if ready(z.api).await["leader"] == true {
            leader = Some(i);
        }
    }
    let leader = leader.expect("a zone leader");
    zones[leader].kill();
    let other = &zones[1 - leader];
    let took_over = wait_until(Duration::from_secs(15), || async {
        let r = ready(other.api).await;
        r["leader"] == true && r["global"]["connected"] == true
    })
    .await;
    assert!(
        took_over.is_ok(),
        "no zone replica took over KDS\n{}",
        logs(&globals, &zones)
    );
    let answered = wait_until(Duration::from_secs(20), || inspect_answers(survivor)).await;
    assert!(
        answered.is_ok(),
        "inspect does not answer after the zone leader died\n{}",
        logs(&globals, &zones)
    );
    zones[leader].restart().await?;
    globals[g_victim].restart().await?;
    println!(
        "killed zone replica {} (the leader), restarted it and the Global",
        names[leader]
    );

    // 3. The zone replica an Envoy is connected to.
    let host = envoys[0].ads_host().await.expect("Envoy is connected");
    let z_victim = ads.iter().position(|a| *a == host).expect("a zone replica");
    zones[z_victim].kill();
    let moved = wait_until(Duration::from_secs(10), || async {
        envoys[0].ads_host().await == Some(ads[1 - z_victim])
    })
    .await;
    assert!(
        moved.is_ok(),
        "the Envoy did not move to the other zone replica\n{}",
        envoys[0].log_tail()
    );
    let answered = wait_until(Duration::from_secs(20), || inspect_answers(survivor)).await;
    assert!(
        answered.is_ok(),
        "inspect does not answer after the Envoy's replica died\n{}",
        logs(&globals, &zones)
    );
    println!(
        "killed zone replica {} (dp-0's Envoy was connected to it)",
        names[z_victim]
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    stop_tx.send_replace(true);
    let mut acked = BTreeSet::new();
    for w in writers {
        acked.extend(w.await?);
    }
    let _ = watching.await;
    assert!(
        acked.len() > 50,
        "the writers got too little through: {}",
        acked.len()
    );

    // A last write, after every acknowledged one, runs on every Envoy.
    put_yaml(
        survivor,
        "/meshes/default/meshtimeouts/idle",
        &idle_timeout(777),
    )
    .await?;
    for e in &envoys {
        let ran = wait_until(Duration::from_secs(30), || e.runs_idle_timeout(777)).await;
        assert!(
            ran.is_ok(),
            "the last write did not reach an Envoy\n{}\n{}",
            e.log_tail(),
            logs(&globals, &zones)
        );
    }
    // Every acknowledged write is on the Globals and on the live zone replica.
    let live_zone = zones[1 - z_victim].api;
    for api in [globals[0].api, globals[1].api, live_zone] {
        let complete = wait_until(Duration::from_secs(20), || async {
            policies(api)
                .await
                .is_some_and(|have| acked.is_subset(&have))
        })
        .await;
        let have = policies(api).await.unwrap_or_default();
        let missing: Vec<&String> = acked.difference(&have).collect();
        assert!(
            complete.is_ok(),
            "{api}: {} acknowledged writes missing, e.g. {:?}\n{}",
            missing.len(),
            missing.iter().take(5).collect::<Vec<_>>(),
            logs(&globals, &zones)
        );
    }
    let seen = seen.lock().unwrap();
    assert!(seen.samples > 20, "the monitor barely ran");
    assert!(
        seen.violations.is_empty(),
        "leader-only work ran twice: {:?}",
        seen.violations
    );
    println!(
        "{} acknowledged writes, all on every replica; {} monitor samples, no overlap",
        acked.len(),
        seen.samples
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
