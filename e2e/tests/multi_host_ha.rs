//! Issue 36 item 7: the compose deployment's replicas fail over, on the test hosts.
//! `docker-compose.yml` itself runs (the compose runner on network namespaces, real PostgreSQL,
//! Envoy and CP binaries): two Global replicas behind the Envoy load balancer `global-cp`, two
//! replicas of zone-1's CP on zone-1's own database, zone-2 alone. Once everything converged,
//! three processes are SIGKILLed in turn (`docker kill`):
//!
//! 1. the Global replica holding zone-1's KDS: both zones are online through the other one;
//! 2. zone-1's leader replica: the other one leads and opens KDS; zone-1's Envoys are spread
//!    over both replicas (their bootstraps name them in different orders), and those on the
//!    follower keep their ADS stream while the others move to it;
//! 3. after the killed replica is started again (a follower now), the zone-1 replica
//!    frontend-1's Envoy is connected to: every zone-1 Envoy moves to the restarted one.
//!
//! After each, a MeshTimeout written at once through the load balancer is accepted and reaches
//! every sidecar of both zones, and every sidecar is connected and ACKed; traffic from zone-1's
//! frontend to backend (zone-1) and payments (zone-2, through its ingress), probed every 0.2 s
//! from before the first kill to the end, never fails. Prints the times (BENCHMARKS.md,
//! "Failover on test hosts"). Needs root.

use std::time::{Duration, Instant};

use umbra_e2e::compose::deployment::{
    self, acked, all_acked, converged, fetch, global_cps, idle_timeout, wait_for, zone_call,
    zone_cps, GLOBAL, SIDECARS,
};
use umbra_e2e::compose::Project;

/// The probe MeshTimeout every step rewrites (a new idle timeout each time).
const PROBE: &str = "failover-probe";
const ZONES: [&str; 2] = ["zone-1", "zone-2"];

fn options() -> umbra_e2e::compose::UpOptions {
    deployment::options(
        env!("CARGO_BIN_EXE_e2e-global-cp"),
        env!("CARGO_BIN_EXE_e2e-zone-cp"),
        env!("CARGO_BIN_EXE_e2e-umbractl"),
        Duration::from_secs(90),
    )
    .expect("privilege for test hosts, the CP binaries and envoy")
}

/// The Global replica holding `zone`'s KDS streams, as the Global (through the load
/// balancer, so either replica) reports it: `None` while the zone is offline, or while Kuma's
/// view of it (`zoneInsight`'s last subscription, open, on that replica) disagrees with
/// Umbra's own.
async fn global_holder(p: &Project, zone: &str) -> Option<String> {
    let (s, z) = p
        .call(
            GLOBAL,
            5681,
            "GET",
            &format!("/zones/{zone}+insights"),
            None,
        )
        .await
        .ok()?;
    let replica = z["umbra"]["replica"].as_str()?;
    let current = z["zoneInsight"]["subscriptions"].as_array()?.last()?;
    (s == 200
        && z["umbra"]["online"] == true
        && current["globalInstanceId"] == replica
        && current["disconnectTime"].is_null())
    .then(|| replica.to_owned())
}

/// The CP replica of `zone` that leads (its own `/ready` says so), if exactly one running does.
async fn zone_leader(p: &Project, zone: &str) -> Option<String> {
    let mut leaders = Vec::new();
    for cp in zone_cps(p, zone) {
        if !p.running(&cp) {
            continue;
        }
        if let Ok((200, ready)) = p.call(&cp, 5681, "GET", "/ready", None).await {
            if ready["leader"] == true {
                leaders.push(cp);
            }
        }
    }
    (leaders.len() == 1).then(|| leaders.remove(0))
}

/// The zone replica `dp`'s Envoy is connected to and the id of that ADS stream (its
/// insight's last subscription, open).
async fn subscription(p: &Project, zone: &str, dp: &str) -> Option<(String, String)> {
    subscription_acked(p, zone, dp)
        .await
        .map(|(replica, id, _)| (replica, id))
}

/// [`subscription`], and whether that stream ACKed CDS and LDS with no NACK.
async fn subscription_acked(p: &Project, zone: &str, dp: &str) -> Option<(String, String, bool)> {
    let path = format!("/meshes/default/dataplanes+insights/{dp}");
    let (_, body) = zone_call(p, zone, "GET", &path, None).await.ok()?;
    let sub = body["dataplaneInsight"]["subscriptions"]
        .as_array()?
        .last()?
        .clone();
    if !sub["disconnectTime"].is_null() {
        return None;
    }
    Some((
        sub["controlPlaneInstanceId"].as_str()?.to_owned(),
        sub["id"].as_str()?.to_owned(),
        acked(&body["dataplaneInsight"]),
    ))
}

/// Poll `check` every 50 ms until it returns `Some`, up to `bound` (finer than
/// [`wait_for`], for the times this test reports); the error names `what`.
async fn poll<T, F, Fut>(bound: Duration, what: &str, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    deployment::poll_every(Duration::from_millis(50), bound, what, check).await
}

/// Whether zone CP `cp` leads and its KDS stream to the Global is connected (its `/ready`).
async fn speaks_kds(p: &Project, cp: &str) -> bool {
    matches!(
        p.call(cp, 5681, "GET", "/ready", None).await,
        Ok((200, ready)) if ready["leader"] == true && ready["global"]["connected"] == true
    )
}

/// The zone replica `dp`'s Envoy is connected to.
async fn connected_replica(p: &Project, zone: &str, dp: &str) -> Option<String> {
    subscription(p, zone, dp).await.map(|(replica, _)| replica)
}

/// zone-1's sidecars.
const ZONE1_DPS: [&str; 3] = ["frontend-1", "backend-1", "redis-1"];

/// Write the probe MeshTimeout (`seconds`) through the load balancer, once: it must be
/// accepted at the first attempt, whichever replica died.
async fn write_probe(p: &Project, seconds: u32) -> anyhow::Result<()> {
    let (s, body) = p
        .call(
            GLOBAL,
            5681,
            "PUT",
            &format!("/meshes/default/meshtimeouts/{PROBE}"),
            Some(&idle_timeout(PROBE, seconds)),
        )
        .await?;
    anyhow::ensure!(
        s == 200 || s == 201,
        "PUT {PROBE} through the load balancer: {s} {body}"
    );
    Ok(())
}

/// Now as the traffic probe writes it (seconds since the epoch), with what happened.
fn event(events: &mut Vec<String>, what: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    events.push(format!("{t:.3} {what}"));
}

/// Everything converged on `seconds`: every sidecar of both zones runs it and is ACKed.
async fn everywhere(p: &Project, seconds: u32) -> anyhow::Result<Duration> {
    let took = converged(p, &ZONES, seconds, Duration::from_secs(60)).await?;
    all_acked(p, &ZONES, Duration::from_secs(30)).await?;
    Ok(took)
}

/// Wait until no sidecar or ingress has a listener or filter chain draining (their Envoy
/// stats, read through their zone).
async fn settled(p: &Project) -> anyhow::Result<()> {
    let mut proxies: Vec<(&str, String)> = SIDECARS
        .iter()
        .map(|(zone, dp)| {
            (
                *zone,
                format!("/meshes/default/dataplanes/{dp}/stats?usedonly=false"),
            )
        })
        .collect();
    for zone in ZONES {
        proxies.push((
            zone,
            format!("/zoneingresses/{zone}-ingress/stats?usedonly=false"),
        ));
    }
    for (zone, path) in proxies {
        wait_for(
            Duration::from_secs(15),
            &format!("no listener draining ({zone} {path})"),
            || async {
                let (s, stats) = zone_call(p, zone, "GET", &path, None).await.ok()?;
                let draining: Vec<&str> = stats
                    .as_str()?
                    .lines()
                    .filter(|l| l.starts_with("listener_manager.total_") && l.contains("draining"))
                    .collect();
                (s == 200 && !draining.is_empty() && draining.iter().all(|l| l.ends_with(": 0")))
                    .then_some(())
            },
        )
        .await?;
    }
    Ok(())
}

/// The traffic probe's lines: `<unix time> ok|fail <url> <answer or error>`.
const PROBE_SCRIPT: &str = r#"
import sys, time, urllib.request
while True:
    for url in sys.argv[1:]:
        t = time.time()
        try:
            body = urllib.request.urlopen(url, timeout=2).read().decode().strip()
            print(f"{t:.3f} ok {url} {body}", flush=True)
        except Exception as e:
            detail = e.read().decode(errors="replace") if hasattr(e, "read") else ""
            print(f"{t:.3f} fail {url} {type(e).__name__}: {e} {detail}", flush=True)
    time.sleep(0.2)
"#;

/// `(ok, failures)` of the traffic probe's log so far.
fn traffic_outcomes(log: &std::path::Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ok = text
        .lines()
        .filter(|l| {
            l.split(' ').nth(1) == Some("ok")
                && (l.ends_with("backend (zone-1)") || l.ends_with("payments (zone-2)"))
        })
        .count();
    let failed = text
        .lines()
        .filter(|l| l.split(' ').nth(1) != Some("ok") || l.contains("fail"))
        .map(str::to_owned)
        .collect();
    (ok, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_fail_over() -> anyhow::Result<()> {
    let started = Instant::now();
    let p = Project::up(&options()).await?;
    let up_took = started.elapsed();
    assert_eq!(global_cps(&p), ["global-cp-a", "global-cp-b"]);
    let zone1 = zone_cps(&p, "zone-1");
    assert_eq!(zone1, ["zone-1-cp-a", "zone-1-cp-b"]);

    // Everything converged: every sidecar ACKed, traffic flows, a first probe everywhere.
    all_acked(&p, &ZONES, Duration::from_secs(30)).await?;
    for (url, want) in [
        ("http://127.0.0.1:3001", "backend (zone-1)"),
        ("http://127.0.0.1:5001", "payments (zone-2)"),
    ] {
        wait_for(Duration::from_secs(30), want, || async {
            fetch(&p, "zone-1-frontend", url)
                .ok()
                .filter(|(c, out)| *c == 0 && out.contains(want))
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", p.log_tail("zone-1-frontend-sidecar", 20)))?;
    }
    write_probe(&p, 1000).await?;
    everywhere(&p, 1000).await?;
    // The first MeshTimeout changes listeners (later ones only clusters): Envoy updates their
    // filter chains in place and closes the connections left on the old ones when its drain
    // time (1 s) ends, which fails a request in flight on them whatever the control plane
    // does. The traffic probe starts once no Envoy drains any.
    settled(&p).await?;
    let converged_at = started.elapsed();
    let traffic = p.exec_detached(
        "zone-1-frontend",
        &[
            "python",
            "-c",
            PROBE_SCRIPT,
            "http://127.0.0.1:3001",
            "http://127.0.0.1:5001",
        ],
    )?;

    // 1. The Global replica zone-1's KDS goes through dies: zone-1 (and zone-2, if it held it)
    // reconnects through the load balancer to the other one, and a write through the load
    // balancer reaches every Envoy.
    let holder = wait_for(
        Duration::from_secs(10),
        "the Global replica holding zone-1",
        || global_holder(&p, "zone-1"),
    )
    .await?;
    assert!(global_cps(&p).contains(&holder), "{holder}");
    let survivor = global_cps(&p)
        .into_iter()
        .find(|g| *g != holder)
        .expect("two replicas");
    let mut events = Vec::new();
    event(
        &mut events,
        &format!("zone-2 held by {:?}", global_holder(&p, "zone-2").await),
    );
    let killed = Instant::now();
    event(&mut events, &format!("kill {holder}"));
    p.kill(&holder);
    write_probe(&p, 1001).await?;
    event(&mut events, "wrote 1001");
    let written = killed.elapsed();
    everywhere(&p, 1001).await?;
    let global_step = killed.elapsed();
    for zone in ZONES {
        let now = wait_for(
            Duration::from_secs(10),
            &format!("{zone} online on {survivor}"),
            || async { global_holder(&p, zone).await.filter(|h| *h == survivor) },
        )
        .await?;
        assert_eq!(now, survivor);
    }

    // 2. zone-1's leader replica (the one speaking KDS) dies: the other one takes the lead and
    // opens KDS; a write through the load balancer reaches every Envoy. zone-1's Envoys are
    // spread over both replicas (their bootstraps name them in different orders): those on
    // the follower keep their ADS stream, those on the leader move to the follower.
    let leader = wait_for(Duration::from_secs(10), "zone-1's leader", || {
        zone_leader(&p, "zone-1")
    })
    .await?;
    let follower = zone1
        .iter()
        .find(|c| **c != leader)
        .expect("two replicas")
        .clone();
    let mut before = Vec::new();
    for dp in ZONE1_DPS {
        let sub = wait_for(
            Duration::from_secs(10),
            &format!("{dp}'s ADS stream"),
            || subscription(&p, "zone-1", dp),
        )
        .await?;
        before.push((dp, sub));
    }
    let spread: Vec<String> = before
        .iter()
        .map(|(dp, (replica, _))| format!("{dp} on {replica}"))
        .collect();
    assert!(
        before.iter().any(|(_, (r, _))| *r == leader)
            && before.iter().any(|(_, (r, _))| *r == follower),
        "zone-1's Envoys are spread over both replicas: {spread:?}"
    );
    let killed = Instant::now();
    event(&mut events, &format!("kill {leader}"));
    p.kill(&leader);
    write_probe(&p, 1002).await?;
    event(&mut events, "wrote 1002");
    poll(
        Duration::from_secs(15),
        &format!("{follower} leading and connected to the Global"),
        || async { speaks_kds(&p, &follower).await.then_some(()) },
    )
    .await?;
    let kds_resumed = killed.elapsed();
    everywhere(&p, 1002).await?;
    let leader_step = killed.elapsed();
    let new_leader = wait_for(Duration::from_secs(10), "zone-1's new leader", || {
        zone_leader(&p, "zone-1")
    })
    .await?;
    assert_eq!(new_leader, follower);
    for (dp, (replica, id)) in &before {
        let now = wait_for(
            Duration::from_secs(10),
            &format!("{dp} on {follower}"),
            || async {
                subscription(&p, "zone-1", dp)
                    .await
                    .filter(|(r, _)| *r == follower)
            },
        )
        .await?;
        if *replica == follower {
            assert_eq!(now.1, *id, "{dp} kept its ADS stream to {follower}");
        } else {
            assert_ne!(now.1, *id, "{dp} reconnected to {follower}");
        }
    }
    wait_for(
        Duration::from_secs(10),
        "zone-1 online on the Global again",
        || global_holder(&p, "zone-1"),
    )
    .await?;

    // 3. The killed replica comes back (a follower now); then the replica frontend-1's Envoy is
    // connected to dies: the Envoy reconnects to the other replica, and a write through the
    // load balancer reaches every Envoy.
    event(&mut events, &format!("start {leader}"));
    p.start(&leader)?;
    wait_for(
        Duration::from_secs(30),
        &format!("{leader} ready again"),
        || async {
            matches!(
                p.call(&leader, 5681, "GET", "/ready", None).await,
                Ok((200, _))
            )
            .then_some(())
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", p.log_tail(&leader, 30)))?;
    let connected = wait_for(
        Duration::from_secs(10),
        "the replica frontend-1 is connected to",
        || connected_replica(&p, "zone-1", "frontend-1"),
    )
    .await?;
    let other = zone1
        .iter()
        .find(|c| **c != connected)
        .expect("two replicas")
        .clone();
    let killed = Instant::now();
    event(&mut events, &format!("kill {connected}"));
    p.kill(&connected);
    write_probe(&p, 1003).await?;
    event(&mut events, "wrote 1003");
    poll(
        Duration::from_secs(15),
        &format!("frontend-1 connected to {other} and ACKed"),
        || async {
            subscription_acked(&p, "zone-1", "frontend-1")
                .await
                .filter(|(r, _, acked)| *r == other && *acked)
        },
    )
    .await?;
    let reconnected = killed.elapsed();
    everywhere(&p, 1003).await?;
    let sidecar_step = killed.elapsed();
    let moved = wait_for(
        Duration::from_secs(10),
        &format!("frontend-1 connected to {other}"),
        || async {
            connected_replica(&p, "zone-1", "frontend-1")
                .await
                .filter(|r| *r == other)
        },
    )
    .await?;
    assert_eq!(moved, other);
    for dp in ZONE1_DPS {
        wait_for(
            Duration::from_secs(10),
            &format!("{dp} on {other}"),
            || async {
                connected_replica(&p, "zone-1", dp)
                    .await
                    .filter(|r| r == &other)
            },
        )
        .await?;
    }

    // Traffic never stopped.
    let (ok, failed) = traffic_outcomes(&traffic.log);
    drop(traffic);
    assert!(ok > 20, "too few traffic probes answered: {ok}");
    assert!(
        failed.is_empty(),
        "traffic failed during the failovers ({} of {}):\n{}\nwhile:\n{}\n{}",
        failed.len(),
        ok + failed.len(),
        failed.join("\n"),
        events.join("\n"),
        p.log_tail("zone-1-frontend-sidecar", 40)
    );

    // Nothing but the killed processes ended or was restarted.
    for service in p.services() {
        assert_eq!(
            p.restarts(&service),
            0,
            "{service} restarted:\n{}",
            p.log_tail(&service, 30)
        );
        if service == holder || service == connected {
            continue;
        }
        if let Some(code) = p.exit_code(&service) {
            assert_eq!(
                code,
                0,
                "{service} exited {code}:\n{}",
                p.log_tail(&service, 30)
            );
        }
    }
    println!(
        "multi-host HA: compose up {up_took:.1?}, converged {converged_at:.1?} after start; \
         Global replica {holder} (zone-1's KDS) killed: a write through the load balancer accepted {written:.1?} and run by every Envoy (both zones) {global_step:.1?} after the kill; \
         zone-1 leader {leader} killed ({}): {new_leader} led with KDS connected {kds_resumed:.1?} after the kill, the write made at once run by every Envoy {leader_step:.1?} after the kill; \
         {connected} (frontend-1's replica; restarted {leader} a follower) killed: frontend-1 connected to {moved} and ACKed {reconnected:.1?} after the kill, the write made at once run by every Envoy {sidecar_step:.1?} after the kill; \
         {ok} traffic probes answered, none failed; whole test {:.1?}",
        spread.join(", "),
        started.elapsed()
    );
    Ok(())
}
