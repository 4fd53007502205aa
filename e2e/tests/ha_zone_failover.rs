//! High availability (issue 36): two global-cp replicas on one PostgreSQL database, a zone-cp
//! given both KDS addresses (`--global-kds-address http://a,http://b`).
//!
//! - The zone connects to one replica and reports which (`/ready`: `global.globalAddress`);
//!   a policy written on the Global reaches it. Both replicas show the zone online, held by
//!   that replica, and agree on two live replicas and one leader; a second zone process with
//!   the zone's token, pointed at the other replica, is refused there (the zone's lease is in
//!   PostgreSQL).
//! - SIGKILL the replica it is connected to: it is connected to the other one within 10 s
//!   (the time is printed), a policy written through the survivor and a Dataplane registered
//!   in the zone cross over it, and nothing else does: on the new session the zone receives
//!   the new policy and the commit markers only (no Mesh, trust bundle or older policy again),
//!   the survivor sends only that policy and receives only the new Dataplane, since both sides
//!   resume from content versions, which do not depend on the process that computed them.
//! - Both replicas, the restarted one included, answer the zone's `ZoneOverview` with the same
//!   subscriptions: the survivor's last and open, the killed replica's before it and ended.
//! - The killed replica is restarted and the next round kills the other one: three failovers,
//!   alternating, so the test does not pass by the luck of which replica came first.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use umbra_e2e::{dataplane_yaml, free_port, wait_until, CpProcess};
use umbra_global_cp::testing::TempPostgres;
use umbra_kds::resource::COMMIT_TYPE;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const ZONE_NAME: &str = "zone-1";
/// The failover bound the test asserts.
const FAILOVER_BOUND: Duration = Duration::from_secs(10);
/// Failovers, alternating between the replicas.
const ROUNDS: usize = 3;

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-ha-failover-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn timeout_policy(name: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: 7s}}\n")
}

async fn start_global(url: &str, name: &str, log: PathBuf) -> anyhow::Result<CpProcess> {
    CpProcess::start_global_replica(GLOBAL, url, name, log).await
}

/// The zone's KDS state (`/ready`'s `global`).
async fn kds_state(zone: &CpProcess) -> Value {
    match zone.call("GET", "/ready", None).await {
        Ok((_, v)) => v["global"].clone(),
        Err(_) => Value::Null,
    }
}

/// The address the zone is connected to, if it is.
fn connected_to(state: &Value) -> Option<String> {
    (state["connected"] == true)
        .then(|| state["globalAddress"].as_str().map(str::to_owned))
        .flatten()
}

/// A per-type counter map (`{"Mesh": 3, ...}`) as numbers.
fn counters(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// `after - before`, per type, the types that moved only.
fn moved(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d > 0)
        .collect()
}

/// A replica's counters for the zone in one direction (`globalToZone`: resources sent,
/// `zoneToGlobal`: resources received), per type; empty when it has not seen the zone.
async fn replica_counters(global: &CpProcess, direction: &str) -> BTreeMap<String, u64> {
    let Ok((200, v)) = global
        .call("GET", &format!("/zones/{ZONE_NAME}"), None)
        .await
    else {
        return BTreeMap::new();
    };
    v[direction]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(t, s)| (t.clone(), s["resources"].as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Items of `path` on `cp` (`usize::MAX` when it does not answer a list).
async fn count(cp: &CpProcess, path: &str) -> usize {
    match cp.call("GET", path, None).await {
        Ok((200, v)) => v["items"].as_array().map_or(usize::MAX, Vec::len),
        _ => usize::MAX,
    }
}

/// Both replicas' and the zone's log tails, for failure messages.
fn logs(globals: &[CpProcess], zone: &CpProcess) -> String {
    format!(
        "zone:\n{}\nreplica a:\n{}\nreplica b:\n{}",
        zone.log_tail(),
        globals[0].log_tail(),
        globals[1].log_tail()
    )
}

/// Both replicas tell the same story: the zone online, held by the replica it is connected to;
/// both replicas alive, one leader. A second zone process with the zone's token, pointed at the
/// other replica only, is refused there (the lease is in PostgreSQL, not in one process).
async fn replicas_agree(
    globals: &[CpProcess; 2],
    addresses: &[String; 2],
    zone: &CpProcess,
    dir: &std::path::Path,
    token: &str,
) -> anyhow::Result<()> {
    let on = wait_until(Duration::from_secs(20), || async {
        connected_to(&kds_state(zone).await).is_some()
    })
    .await;
    assert!(
        on.is_ok(),
        "the zone did not connect\n{}",
        logs(globals, zone)
    );
    let on = connected_to(&kds_state(zone).await).unwrap_or_default();
    let holder = addresses
        .iter()
        .position(|a| *a == on)
        .expect("a known address");
    let other = 1 - holder;
    for g in globals {
        let (status, z) = g.call("GET", &format!("/zones/{ZONE_NAME}"), None).await?;
        assert_eq!(status, 200, "{z}");
        assert_eq!(z["online"], true, "{z}");
        assert_eq!(z["replica"], ["a", "b"][holder], "{z}");
    }
    let ready = wait_until(Duration::from_secs(20), || async {
        let mut leaders = 0;
        for g in globals {
            let Ok((200, r)) = g.call("GET", "/ready", None).await else {
                return false;
            };
            let alive = r["replicas"].as_array().map_or(0, Vec::len);
            if alive != 2 {
                return false;
            }
            leaders += usize::from(r["leader"] == true);
        }
        leaders == 1
    })
    .await;
    assert!(
        ready.is_ok(),
        "the replicas do not agree on two replicas and one leader"
    );
    // A second process for the same zone, on the other replica only: refused.
    let intruder = CpProcess::start(
        ZONE,
        "--ads-addr",
        &[
            "--zone".into(),
            ZONE_NAME.into(),
            "--global-kds-address".into(),
            addresses[other].clone(),
        ],
        &[("UMBRA_KDS_TOKEN", token)],
        dir.join("intruder.log"),
    )
    .await?;
    let refused = wait_until(Duration::from_secs(15), || async {
        intruder.log_text().contains("AlreadyExists")
    })
    .await;
    assert!(
        refused.is_ok(),
        "the second zone process was not refused by the other replica\n{}",
        intruder.log_tail()
    );
    assert!(connected_to(&kds_state(&intruder).await).is_none());
    assert!(
        intruder
            .log_text()
            .contains("is connected to Global replica"),
        "the refusal does not name the replica holding the zone\n{}",
        intruder.log_tail()
    );
    drop(intruder);
    // The zone stayed where it was.
    assert_eq!(connected_to(&kds_state(zone).await), Some(on));
    Ok(())
}

/// Both replicas, the one restarted after its SIGKILL included, answer the zone's
/// `ZoneOverview` with the same subscriptions: the `holder`'s last and open, the `killed`
/// one's before it, ended (it never said so: it was read as ended when last recorded).
async fn overviews_agree(globals: &[CpProcess; 2], holder: &str, killed: &str, round: usize) {
    let path = format!("/zones/{ZONE_NAME}+insights");
    let ok = |s: &[Value]| {
        let Some((current, earlier)) = s.split_last() else {
            return false;
        };
        current["globalInstanceId"] == holder
            && current["disconnectTime"].is_null()
            && earlier.iter().any(|p| p["globalInstanceId"] == killed)
            && earlier.iter().all(|p| p["disconnectTime"].is_string())
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut seen = Vec::new();
        for g in globals {
            let body = match g.call("GET", &path, None).await {
                Ok((200, o)) => o["zoneInsight"]["subscriptions"].clone(),
                _ => Value::Null,
            };
            // What both must agree on (the holder's `status` is fresher in its own memory).
            let subs: Vec<Value> = body
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    serde_json::json!({"id": s["id"], "globalInstanceId": s["globalInstanceId"],
                        "connectTime": s["connectTime"], "disconnectTime": s["disconnectTime"]})
                })
                .collect();
            seen.push(subs);
        }
        if seen[0] == seen[1] && ok(&seen[0]) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "round {round}: the replicas' ZoneOverview subscriptions differ or are wrong (held \
             by {holder}, {killed} killed): {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_fails_over_between_global_replicas_without_a_full_resend() -> anyhow::Result<()> {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let url = pg.create_database("ha_failover").await?;
    let dir = temp_dir();
    // Replica a first: it migrates the database and creates the signing keys and the store
    // identity; b, started next, uses them.
    let a = start_global(&url, "a", dir.join("global-a.log")).await?;
    let b = start_global(&url, "b", dir.join("global-b.log")).await?;
    let mut globals = [a, b];
    let kds_of = |g: &CpProcess| format!("http://{}", g.grpc);
    let addresses = [kds_of(&globals[0]), kds_of(&globals[1])];
    let token = umbra_e2e::zone_token(&globals[0], ZONE_NAME).await?;
    globals[0].apply("/meshes/default", MESH).await?;
    globals[1]
        .apply("/meshes/default/meshtimeouts/t-0", &timeout_policy("t-0"))
        .await?;
    let zone = CpProcess::start(
        ZONE,
        "--ads-addr",
        &[
            "--zone".into(),
            ZONE_NAME.into(),
            "--global-kds-address".into(),
            addresses.join(","),
        ],
        &[("UMBRA_KDS_TOKEN", &token)],
        dir.join("zone.log"),
    )
    .await?;
    let mesh = wait_until(Duration::from_secs(20), || async {
        matches!(
            zone.call("GET", "/meshes/default", None).await,
            Ok((200, _))
        )
    })
    .await;
    assert!(
        mesh.is_ok(),
        "the Mesh did not reach the zone\n{}",
        logs(&globals, &zone)
    );
    // The zone's Dataplanes go up through whichever replica it is connected to.
    for i in 0..2 {
        zone.apply(
            &format!("/meshes/default/dataplanes/dp-{i}"),
            &dataplane_yaml(&format!("dp-{i}"), "web", 20_000 + i, 8_000 + i, None),
        )
        .await?;
    }
    let mut policies = 1;
    let mut dataplanes = 2;
    replicas_agree(&globals, &addresses, &zone, &dir, &token).await?;
    let mut victims = Vec::new();
    let mut times = Vec::new();

    for round in 0..ROUNDS {
        // Settled: connected, every policy here, every Dataplane on the Global.
        let settled = wait_until(Duration::from_secs(30), || async {
            let state = kds_state(&zone).await;
            connected_to(&state).is_some()
                && state["synced"] == true
                && count(&zone, "/meshes/default/meshtimeouts").await == policies
                && count(&globals[0], "/meshes/default/dataplanes").await == dataplanes
        })
        .await;
        assert!(
            settled.is_ok(),
            "round {round}: not settled\n{}",
            logs(&globals, &zone)
        );
        let state = kds_state(&zone).await;
        let on = connected_to(&state).unwrap_or_default();
        let victim = addresses
            .iter()
            .position(|a| *a == on)
            .unwrap_or_else(|| panic!("connected to {on}, not one of {addresses:?}"));
        let survivor = 1 - victim;
        if let Some(last) = victims.last() {
            assert_ne!(
                *last, victim,
                "round {round}: the zone left the replica it failed over to"
            );
        }
        victims.push(victim);
        let received_before = counters(&state["resourcesReceived"]);
        let applied_before = counters(&state["applied"]);
        let sent_before = replica_counters(&globals[survivor], "globalToZone").await;
        let up_before = replica_counters(&globals[survivor], "zoneToGlobal").await;

        // SIGKILL the replica the zone is connected to.
        let killed = Instant::now();
        globals[victim].kill();
        let failed_over = wait_until(FAILOVER_BOUND, || async {
            connected_to(&kds_state(&zone).await).as_ref() == Some(&addresses[survivor])
        })
        .await;
        let took = killed.elapsed();
        println!(
            "round {round}: killed replica {} ({}); the zone is connected to {} after {took:?}",
            ["a", "b"][victim],
            addresses[victim],
            addresses[survivor]
        );
        assert!(
            failed_over.is_ok(),
            "round {round}: no failover to {} within {FAILOVER_BOUND:?}\n{}",
            addresses[survivor],
            logs(&globals, &zone)
        );
        times.push(took);
        // The new session's first generation is applied (its commit marker).
        let resumed = wait_until(Duration::from_secs(10), || async {
            let applied = counters(&kds_state(&zone).await["applied"]);
            applied.get(COMMIT_TYPE) > applied_before.get(COMMIT_TYPE)
        })
        .await;
        assert!(
            resumed.is_ok(),
            "round {round}: no sync on the new session\n{}",
            logs(&globals, &zone)
        );

        // A policy through the survivor reaches the zone, a Dataplane of the zone the survivor.
        let name = format!("t-{}", round + 1);
        globals[survivor]
            .apply(
                &format!("/meshes/default/meshtimeouts/{name}"),
                &timeout_policy(&name),
            )
            .await?;
        policies += 1;
        let dp = format!("dp-{}", dataplanes);
        let port = u16::try_from(20_000 + dataplanes)?;
        zone.apply(
            &format!("/meshes/default/dataplanes/{dp}"),
            &dataplane_yaml(&dp, "web", port, port - 12_000, None),
        )
        .await?;
        dataplanes += 1;
        let crossed = wait_until(Duration::from_secs(20), || async {
            matches!(
                zone.call("GET", &format!("/meshes/default/meshtimeouts/{name}"), None)
                    .await,
                Ok((200, _))
            ) && count(&globals[survivor], "/meshes/default/dataplanes").await == dataplanes
        })
        .await;
        assert!(
            crossed.is_ok(),
            "round {round}: the new policy or Dataplane did not cross\n{}",
            logs(&globals, &zone)
        );

        // Only the changes crossed, in both directions.
        // (The zone counts a response when it applies it, before the commit marker writes it
        // to its store, so the new policy is counted already.)
        let received = moved(
            &received_before,
            &counters(&kds_state(&zone).await["resourcesReceived"]),
        );
        let received_kinds: Vec<&String> = received.keys().filter(|t| *t != COMMIT_TYPE).collect();
        assert!(
            received_kinds == ["MeshTimeout"] && received.get("MeshTimeout") == Some(&1),
            "round {round}: on the new session the zone received {received:?} (expected the new \
             MeshTimeout and commit markers only; {policies} policies exist)\n{}",
            logs(&globals, &zone)
        );
        let sent = moved(
            &sent_before,
            &replica_counters(&globals[survivor], "globalToZone").await,
        );
        let sent: BTreeMap<_, _> = sent.into_iter().filter(|(t, _)| t != COMMIT_TYPE).collect();
        assert_eq!(
            sent,
            BTreeMap::from([("MeshTimeout".to_owned(), 1)]),
            "round {round}: what the survivor sent the zone"
        );
        let up = moved(
            &up_before,
            &replica_counters(&globals[survivor], "zoneToGlobal").await,
        );
        assert_eq!(
            up,
            BTreeMap::from([("Dataplane".to_owned(), 1)]),
            "round {round}: what the survivor received from the zone ({dataplanes} Dataplanes exist)"
        );
        println!("round {round}: the zone received {received:?}, the survivor sent {sent:?} and received {up:?}");

        // The zone's log names the replica it connected to.
        let log = zone.log_text();
        assert!(
            log.lines()
                .any(|l| l.contains("KDS: connected to the Global")
                    && l.contains(&format!("global={}", addresses[survivor]))),
            "round {round}: the zone's log does not name {}\n{}",
            addresses[survivor],
            zone.log_tail()
        );

        // The killed replica comes back (the zone stays where it is).
        globals[victim].restart().await?;
        overviews_agree(&globals, ["a", "b"][survivor], ["a", "b"][victim], round).await;
    }

    assert!(
        victims.windows(2).all(|w| w[0] != w[1]) && victims.len() == ROUNDS,
        "{victims:?}"
    );
    println!("failover times: {times:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
