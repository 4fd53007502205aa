//! High availability of a zone (issue 36, item 4): two zone-cp replicas, `a` and `b`, of zone
//! `zone-1` on one PostgreSQL database (`--store postgres`), federated to one Global (memory
//! store), with a real Envoy bootstrapped the production way. Real processes, a real
//! PostgreSQL, a real Envoy. The test proves:
//!
//! - exactly one replica leads (`/ready`: `leader`) and holds the KDS stream to the Global
//!   (`global.connected`); the Global's Mesh and MeshTimeout reach both replicas' APIs (the
//!   non-leader's through the shared database);
//! - a Dataplane `dp-1` registered through the non-leader's API reaches the Global, and
//!   `POST /bootstrap` on the leader's data-plane server (CA from `GET /dp-server/ca.pem`, a
//!   dataplane token from the Global) hands its Envoy both replicas' ADS addresses;
//! - four rounds, alternating: even rounds SIGKILL the zone leader while the Envoy is on the
//!   other replica (that replica leads with KDS connected within a bound; the Envoy keeps its
//!   ADS stream), odd rounds SIGKILL the replica the Envoy is connected to, found from
//!   Envoy's side (`/clusters`: `cx_active` of `ads_cluster`), while the other one leads (the
//!   Envoy is connected to it, and ACKed, within a bound; the leader keeps leading). Since
//!   after a kill the survivor both leads and serves the Envoy, each round first moves
//!   leadership away from the Envoy's replica by ending the leader's database session (as a
//!   partition from PostgreSQL would): it steps down and keeps serving, the other one leads.
//!   Every time is printed;
//! - across every kill the Envoy keeps the (name, version) of its dynamic listeners and
//!   clusters and its add/modify/remove counters (the survivor serves it the config it had),
//!   and rejects nothing (`update_rejected` stays 0); after every kill a new MeshTimeout
//!   written on the Global reaches the Envoy's config dump; the killed replica restarts and
//!   rejoins as a non-leader with what it missed;
//! - throughout, requests through the Envoy's inbound listener every 50 ms all succeed (Envoy
//!   serves with its last config while its control plane is away), and `/ready` of both
//!   replicas, sampled every 100 ms, never shows two leaders at once.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use umbra_e2e::{
    call_json, dataplane_yaml, envoy_binary, free_port, http, http_request, https_post, put_yaml,
    wait_until, CpProcess, DpServer, Envoy,
};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const ZONE_NAME: &str = "zone-1";
const NAMES: [&str; 2] = ["a", "b"];
/// Kills, alternating: even rounds the zone leader (the Envoy on the other replica), odd
/// rounds the Envoy's replica (the other one leading).
const ROUNDS: usize = 4;
/// What the test asserts for a leader failover (the target is 5 s: a heartbeat plus
/// `LEADER_GRACE`, then the KDS connection).
const LEADER_BOUND: Duration = Duration::from_secs(15);
/// What the test asserts for an Envoy failover (the target is 3 s).
const ENVOY_BOUND: Duration = Duration::from_secs(10);
/// How long a policy written on the Global may take to reach the Envoy.
const POLICY_BOUND: Duration = Duration::from_secs(30);
/// The MeshTimeout the rounds rewrite (an inbound idle timeout, seconds per round).
const POLICY: &str = "idle";
/// The body of dp-1's app.
const HELLO: &str = "hello from dp-1";

/// A fresh directory for the CPs' logs, removed when dropped (a failing test has printed
/// their tails already).
struct TempDir(PathBuf);

impl TempDir {
    /// Create it.
    fn new() -> TempDir {
        let d = std::env::temp_dir().join(format!(
            "umbra-ha-zone-replicas-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&d).expect("a temp dir");
        TempDir(d)
    }

    /// The path of `file` in it.
    fn join(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The MeshTimeout [`POLICY`]: every inbound of the mesh idles out after `seconds`.
fn idle_timeout(seconds: u32) -> String {
    umbra_e2e::compose::deployment::idle_timeout(POLICY, seconds)
}

/// `/ready` of the replica whose API is `api` (`None` when it does not answer).
async fn ready(api: SocketAddr) -> Option<Value> {
    call_json(api, "GET", "/ready", None)
        .await
        .ok()
        .map(|(_, v)| v)
}

/// Whether `ready` says its replica leads and its KDS stream to the Global is connected.
fn leads_connected(ready: &Value) -> bool {
    ready["leader"] == true && ready["global"]["connected"] == true
}

/// The one replica that says it leads, with its KDS connected, while the other answers and
/// says it does not; `None` otherwise.
async fn settled_leader(apis: [SocketAddr; 2]) -> Option<usize> {
    let (Some(r0), Some(r1)) = (ready(apis[0]).await, ready(apis[1]).await) else {
        return None;
    };
    let alive = |r: &Value| {
        r["replicas"]
            .as_array()
            .map_or(0, |all| all.iter().filter(|x| x["alive"] == true).count())
    };
    if alive(&r0) != 2 || alive(&r1) != 2 {
        return None;
    }
    match (leads_connected(&r0), leads_connected(&r1)) {
        (true, false) if r1["leader"] == false => Some(0),
        (false, true) if r0["leader"] == false => Some(1),
        _ => None,
    }
}

/// The ADS port the Envoy whose admin is `admin` holds a connection to (its `ads_cluster`
/// hosts with `cx_active` above 0), when it is exactly one.
async fn envoy_upstream(admin: SocketAddr) -> Option<u16> {
    let (200, text) = http(admin, "GET", "/clusters", None).await.ok()? else {
        return None;
    };
    let mut ports: Vec<u16> = text
        .lines()
        .filter_map(|l| l.strip_prefix("ads_cluster::"))
        .filter_map(|l| l.split_once("::cx_active::"))
        .filter(|(_, n)| n.trim().parse::<u64>().is_ok_and(|n| n > 0))
        .filter_map(|(host, _)| host.rsplit_once(':')?.1.parse().ok())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    match ports.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// Envoy's `control_plane.connected_state` (1: its ADS stream is up).
async fn envoy_connected(admin: SocketAddr) -> bool {
    matches!(
        http(admin, "GET", "/stats?filter=^control_plane.connected_state$", None).await,
        Ok((200, text)) if text.contains("control_plane.connected_state: 1")
    )
}

/// (name, version_info) of the Envoy's dynamic listeners and clusters, as its config dump
/// has them (a warming listener counts as `warming:<version>`).
async fn envoy_versions(admin: SocketAddr) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (resource, kind) in [
        ("dynamic_active_clusters", "cluster"),
        ("dynamic_listeners", "listener"),
    ] {
        let (status, text) = http(
            admin,
            "GET",
            &format!("/config_dump?resource={resource}"),
            None,
        )
        .await?;
        anyhow::ensure!(status == 200, "config_dump {resource}: {status} {text}");
        let dump: Value = serde_json::from_str(&text)?;
        for c in dump["configs"].as_array().into_iter().flatten() {
            let (name, version) = if kind == "cluster" {
                (c["cluster"]["name"].clone(), c["version_info"].clone())
            } else if c["active_state"].is_object() {
                (c["name"].clone(), c["active_state"]["version_info"].clone())
            } else {
                let v = c["warming_state"]["version_info"].as_str().unwrap_or("?");
                (c["name"].clone(), Value::from(format!("warming:{v}")))
            };
            out.insert(
                format!("{kind} {}", name.as_str().unwrap_or("?")),
                version.as_str().unwrap_or("?").to_owned(),
            );
        }
    }
    Ok(out)
}

/// Envoy's counters of listeners and clusters added, modified and removed (by xDS updates):
/// unchanged when an update brings nothing new.
async fn envoy_churn(admin: SocketAddr) -> anyhow::Result<BTreeMap<String, u64>> {
    let (status, text) = http(
        admin,
        "GET",
        "/stats?filter=^(cluster_manager.cluster|listener_manager.listener)_(added|modified|removed)$",
        None,
    )
    .await?;
    anyhow::ensure!(status == 200, "stats: {status} {text}");
    let counters: BTreeMap<String, u64> = text
        .lines()
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.to_owned(), v.trim().parse().ok()?)))
        .collect();
    anyhow::ensure!(counters.len() == 6, "add/modify/remove counters: {text}");
    Ok(counters)
}

/// Envoy's `*update_rejected` stats that are not 0 (an xDS response it NACKed).
async fn envoy_rejections(admin: SocketAddr) -> anyhow::Result<Vec<String>> {
    let (status, text) = http(admin, "GET", "/stats?filter=update_rejected", None).await?;
    anyhow::ensure!(status == 200, "stats: {status} {text}");
    anyhow::ensure!(
        text.contains("cluster_manager.cds.update_rejected")
            && text.contains("listener_manager.lds.update_rejected"),
        "no CDS/LDS rejection stats: {text}"
    );
    Ok(text
        .lines()
        .filter(|l| !l.trim_end().ends_with(": 0"))
        .map(str::to_owned)
        .collect())
}

/// Whether the Envoy whose admin is `admin` runs the inbound idle timeout `seconds` (Kuma's
/// MeshTimeout puts an inbound `idleTimeout` on the inbound cluster's HTTP options).
async fn envoy_runs(admin: SocketAddr, seconds: u32) -> bool {
    matches!(
        http(admin, "GET", "/config_dump?resource=dynamic_active_clusters", None).await,
        Ok((200, body)) if body.contains(&format!("\"{seconds}s\""))
    )
}

/// Whether the replica whose API is `api` has dp-1's Envoy connected on a stream that ACKed
/// clusters and listeners (its own insight: each replica knows the streams it serves).
async fn serves_dp(api: SocketAddr) -> bool {
    let Ok((200, v)) =
        call_json(api, "GET", "/meshes/default/dataplanes+insights/dp-1", None).await
    else {
        return false;
    };
    let insight = &v["dataplaneInsight"];
    // Kuma's subscription of the current stream carries its per-type counters.
    let Some(stream) = insight["subscriptions"].as_array().and_then(|s| s.last()) else {
        return false;
    };
    let acked = |ty: &str| {
        stream["status"][ty]["responsesAcknowledged"]
            .as_str()
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    };
    insight["connected"] == true && acked("cds") && acked("lds")
}

/// The id of the ADS stream of dp-1 the replica whose API is `api` serves or served last
/// (Kuma's subscription id: it names when the stream opened).
async fn stream_id(api: SocketAddr) -> Option<String> {
    let (200, v) = call_json(api, "GET", "/meshes/default/dataplanes+insights/dp-1", None)
        .await
        .ok()?
    else {
        return None;
    };
    v["dataplaneInsight"]["subscriptions"].as_array()?.last()?["id"]
        .as_str()
        .map(str::to_owned)
}

/// Whether the replica whose API is `api` holds [`POLICY`] with an idle timeout of `seconds`.
async fn holds_policy(api: SocketAddr, seconds: u32) -> bool {
    matches!(
        call_json(api, "GET", &format!("/meshes/default/meshtimeouts/{POLICY}"), None).await,
        Ok((200, v)) if v.to_string().contains(&format!("\"{seconds}s\""))
    )
}

/// Wait until the zone is settled: one connected leader, the Envoy connected to a replica
/// that counts its stream as ACKed. Returns (the leader, the Envoy's replica).
async fn settled(
    round: usize,
    apis: [SocketAddr; 2],
    ads_ports: [u16; 2],
    admin: SocketAddr,
) -> Result<(usize, usize), String> {
    let state = Cell::new(None);
    let done = wait_until(Duration::from_secs(30), || async {
        state.set(None);
        let (Some(l), Some(port)) = (settled_leader(apis).await, envoy_upstream(admin).await)
        else {
            return false;
        };
        let Some(on) = ads_ports.iter().position(|p| *p == port) else {
            return false;
        };
        if serves_dp(apis[on]).await && envoy_connected(admin).await {
            state.set(Some((l, on)));
        }
        state.get().is_some()
    })
    .await;
    match (done, state.get()) {
        (Ok(()), Some(s)) => Ok(s),
        _ => Err(format!(
            "round {round}: not settled (one connected leader, the Envoy on a replica)\n{}",
            diagnose(apis, admin).await
        )),
    }
}

/// Move the zone's leadership from replica `from` to replica `to` by ending `from`'s database
/// session whenever it holds the leader lock (advisory lock `(2, 0)` in the zone's database at
/// `url`), as a partition of `from` from PostgreSQL would, until `to` has taken the lock.
/// (Ending it once is not enough: `from` registers again at once and may take the lock back
/// before `to`'s next heartbeat.) Returns how many sessions were ended.
async fn move_leadership(url: &str, from: &str, to: &str) -> anyhow::Result<usize> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let start = Instant::now();
    let mut ended = 0;
    loop {
        let holder: Option<(i32, String)> = sqlx::query_as(
            "SELECT l.pid, r.name FROM pg_locks l JOIN cp_replicas r ON r.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                AND l.classid = 2 AND l.objid = 0
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_optional(&mut conn)
        .await?;
        match holder {
            Some((_, name)) if name == to => return Ok(ended),
            Some((pid, name)) if name == from => {
                sqlx::query("SELECT pg_terminate_backend($1)")
                    .bind(pid)
                    .execute(&mut conn)
                    .await?;
                ended += 1;
            }
            _ => {}
        }
        anyhow::ensure!(
            start.elapsed() < LEADER_BOUND,
            "replica {to} did not take the leader lock within {LEADER_BOUND:?} ({ended} sessions of {from} ended)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Poll `check` every 50 ms from `start` until it holds (how long after `start` it did) or
/// `bound` has passed since `start` (`None`).
async fn timed<F, Fut>(start: Instant, bound: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if check().await {
            return Some(start.elapsed());
        }
        if start.elapsed() > bound {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Requests through the Envoy's inbound listener every 50 ms until stopped, and what they got.
struct Traffic {
    ok: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Traffic {
    /// Send `GET /` to `inbound` every 50 ms (each bounded to 2 s); a failure is anything but
    /// `200` with dp-1's body. `epoch` dates the failures.
    fn start(inbound: SocketAddr, epoch: Instant) -> Traffic {
        let ok = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ok2, failures2, stop2) = (ok.clone(), failures.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop2.load(Ordering::SeqCst) {
                tick.tick().await;
                let got =
                    http_request(inbound, "GET", "/", None, &[], Duration::from_secs(2)).await;
                match got {
                    Ok((200, body)) if body == HELLO => {
                        ok2.fetch_add(1, Ordering::SeqCst);
                    }
                    other => failures2
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(format!("at {:?}: {other:?}", epoch.elapsed())),
                }
            }
        });
        Traffic {
            ok,
            failures,
            stop,
            task,
        }
    }

    /// Stop; the requests that succeeded and the failures.
    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (self.ok.load(Ordering::SeqCst), failures)
    }
}

/// `/ready` of both replicas sampled every 100 ms until stopped: samples taken, and those
/// where both said they lead.
struct LeaderWatch {
    samples: Arc<AtomicU64>,
    both: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaderWatch {
    /// Sample `/ready` of the replicas whose APIs are `apis`; `epoch` dates the findings.
    fn start(apis: [SocketAddr; 2], epoch: Instant) -> LeaderWatch {
        let samples = Arc::new(AtomicU64::new(0));
        let both = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (samples2, both2, stop2) = (samples.clone(), both.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !stop2.load(Ordering::SeqCst) {
                let (r0, r1) = tokio::join!(ready(apis[0]), ready(apis[1]));
                samples2.fetch_add(1, Ordering::SeqCst);
                if let (Some(r0), Some(r1)) = (r0, r1) {
                    if r0["leader"] == true && r1["leader"] == true {
                        both2
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(format!(
                                "at {:?}: a {} / b {}",
                                epoch.elapsed(),
                                r0["replica"],
                                r1["replica"]
                            ));
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        LeaderWatch {
            samples,
            both,
            stop,
            task,
        }
    }

    /// Stop; the samples taken and those where both replicas led.
    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        let both = self
            .both
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (self.samples.load(Ordering::SeqCst), both)
    }
}

/// The log tails of the Global, both replicas and the Envoy, for failure messages.
fn logs(global: &CpProcess, zones: &[CpProcess; 2], envoy: Option<&Envoy>) -> String {
    format!(
        "global:\n{}\nreplica a:\n{}\nreplica b:\n{}\nenvoy:\n{}",
        global.log_tail(),
        zones[0].log_tail(),
        zones[1].log_tail(),
        envoy.map(Envoy::log_tail).unwrap_or_default()
    )
}

/// The Envoy's log lines about xDS updates (CDS, LDS, the ADS stream), for failure messages.
fn envoy_xds_log(envoy: &Envoy) -> String {
    let text = std::fs::read_to_string(envoy.dir.join("envoy.log")).unwrap_or_default();
    text.lines()
        .filter(|l| {
            [
                "cds:",
                "lds:",
                "gRPC config stream",
                "DeltaAggregated",
                "StreamAggregated",
            ]
            .iter()
            .any(|k| l.contains(k))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the settle checks read (both replicas' `/ready` and dp-1 insight, the Envoy's
/// `ads_cluster` hosts and control-plane state), for failure messages.
async fn diagnose(apis: [SocketAddr; 2], admin: SocketAddr) -> String {
    let mut out = String::new();
    for (name, api) in NAMES.iter().zip(apis) {
        let r = ready(api).await.unwrap_or_default();
        let insight = call_json(api, "GET", "/meshes/default/dataplanes+insights/dp-1", None)
            .await
            .map(|(_, v)| v["dataplaneInsight"].clone())
            .unwrap_or_default();
        out.push_str(&format!(
            "replica {name}: leader {} global {} replicas {}\n  dp-1 insight {insight}\n",
            r["leader"], r["global"], r["replicas"]
        ));
    }
    let clusters = http(admin, "GET", "/clusters", None)
        .await
        .map(|(_, t)| {
            t.lines()
                .filter(|l| l.starts_with("ads_cluster::") && l.contains("::cx_"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let state = http(admin, "GET", "/stats?filter=control_plane", None)
        .await
        .map(|(_, t)| t)
        .unwrap_or_default();
    out.push_str(&format!("envoy ads_cluster:\n{clusters}\nenvoy {state}"));
    out
}

/// The ADS endpoints (`host:port`) of a bootstrap's `ads_cluster`.
fn ads_endpoints(bootstrap: &Value) -> Vec<String> {
    let clusters = bootstrap["static_resources"]["clusters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    clusters
        .iter()
        .filter(|c| c["name"] == "ads_cluster")
        .flat_map(|c| {
            c["load_assignment"]["endpoints"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|e| e["lb_endpoints"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            let a = &e["endpoint"]["address"]["socket_address"];
            format!(
                "{}:{}",
                a["address"].as_str().unwrap_or("?"),
                a["port_value"]
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_replicas_fail_over_under_a_serving_envoy() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let epoch = Instant::now();
    let url = pg.create_database("zone_replicas").await?;
    let dir = TempDir::new();

    // The Global (memory store), its Mesh and first MeshTimeout, a zone token.
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    global.apply("/meshes/default", MESH).await?;
    let mut seconds = 100;
    global
        .apply(
            &format!("/meshes/default/meshtimeouts/{POLICY}"),
            &idle_timeout(seconds),
        )
        .await?;
    let token = umbra_e2e::zone_token(&global, ZONE_NAME).await?;
    let kds = format!("http://{}", global.grpc);

    // Two replicas of zone-1 on its database (a first: it migrates the schema).
    let mut zones = Vec::new();
    for name in NAMES {
        zones.push(
            CpProcess::start_zone_replica(
                ZONE,
                ZONE_NAME,
                &kds,
                &token,
                &url,
                name,
                dir.join(&format!("zone-{name}.log")),
            )
            .await?,
        );
    }
    let mut zones: [CpProcess; 2] = zones
        .try_into()
        .map_err(|_| anyhow::anyhow!("two replicas"))?;
    let apis = [zones[0].api, zones[1].api];
    let ads_ports = [zones[0].grpc.port(), zones[1].grpc.port()];

    // One leader, connected to the Global; the Mesh and the policy on both replicas.
    let setup = Instant::now();
    let leader = Cell::new(None);
    let up = wait_until(Duration::from_secs(30), || async {
        leader.set(settled_leader(apis).await);
        leader.get().is_some()
            && holds_policy(apis[0], seconds).await
            && holds_policy(apis[1], seconds).await
    })
    .await;
    assert!(
        up.is_ok(),
        "no single connected leader, or the Global's policy is not on both replicas\n{}",
        logs(&global, &zones, None)
    );
    let first = leader.get().unwrap_or_default();
    let other = 1 - first;
    println!(
        "replica {} leads (elected and connected {:?} after the replicas started)",
        NAMES[first],
        setup.elapsed()
    );
    for api in apis {
        let (status, mesh) = call_json(api, "GET", "/meshes/default", None).await?;
        assert_eq!(status, 200, "{mesh}");
        let r = ready(api).await.unwrap_or_default();
        assert!(r["replicaId"].is_number(), "{r}");
        assert_eq!(
            r["replicas"].as_array().map(Vec::len),
            Some(2),
            "both replicas are alive: {r}"
        );
    }
    assert_eq!(
        ready(apis[other]).await.unwrap_or_default()["global"]["connected"],
        false,
        "the non-leader holds no KDS stream"
    );

    // dp-1, registered through the non-leader, reaches the Global (through the leader's KDS).
    let (app_port, inbound_port) = (free_port(), free_port());
    let _app = umbra_e2e::http_app(app_port, HELLO, Duration::ZERO).await?;
    put_yaml(
        apis[other],
        "/meshes/default/dataplanes/dp-1",
        &dataplane_yaml("dp-1", "web", inbound_port, app_port, None),
    )
    .await?;
    let on_global = format!(
        "/meshes/default/dataplanes/{}",
        umbra_kds::resource::global_name("default", "dp-1", ZONE_NAME)
    );
    let reached = wait_until(Duration::from_secs(20), || async {
        matches!(global.call("GET", &on_global, None).await, Ok((200, _)))
            && matches!(
                call_json(apis[first], "GET", "/meshes/default/dataplanes/dp-1", None).await,
                Ok((200, _))
            )
    })
    .await;
    assert!(
        reached.is_ok(),
        "dp-1 registered on the non-leader did not reach the leader and the Global\n{}",
        logs(&global, &zones, None)
    );

    // dp-1's Envoy, bootstrapped by the leader's data-plane server as kuma-dp does.
    let dp = DpServer::of(apis[first], zones[first].grpc, global.api).await?;
    let dp_token = dp.token("default", "dp-1").await?;
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let request = serde_json::json!({
        "mesh": "default", "name": "dp-1", "proxyType": "dataplane",
        "dataplaneToken": dp_token, "adminPort": admin.port(),
    })
    .to_string();
    let (status, _, body) =
        https_post(dp.addr, "localhost", &dp.ca_pem, "/bootstrap", &request).await?;
    assert_eq!(status, 200, "POST /bootstrap: {body}");
    let answer: Value = serde_json::from_str(&body)?;
    let config = base64::engine::general_purpose::STANDARD
        .decode(answer["bootstrap"].as_str().unwrap_or_default())?;
    let bootstrap = umbra_core::codec::decode_one(&config, umbra_core::codec::Limits::default())?;
    let endpoints = ads_endpoints(&bootstrap);
    println!("the bootstrap's ADS endpoints: {endpoints:?}");
    for port in ads_ports {
        assert!(
            endpoints.iter().any(|e| e.ends_with(&format!(":{port}"))),
            "the bootstrap does not list the replica on ADS port {port}: {endpoints:?}"
        );
    }
    assert!(
        endpoints[0].ends_with(&format!(":{}", ads_ports[first])),
        "the replica asked comes first: {endpoints:?}"
    );
    let ads = &bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["envoy_grpc"];
    assert!(
        ads["retry_policy"]["retry_back_off"].is_object(),
        "a short ADS retry backoff with several replicas: {ads}"
    );
    let envoy = Envoy::from_bootstrap(&envoy_bin, "dp-1", &config, admin)?;
    let inbound: SocketAddr = format!("127.0.0.1:{inbound_port}").parse()?;
    let serving = wait_until(Duration::from_secs(30), || async {
        envoy_runs(admin, seconds).await
            && matches!(http(inbound, "GET", "/", None).await, Ok((200, b)) if b == HELLO)
    })
    .await;
    assert!(
        serving.is_ok(),
        "the bootstrapped Envoy does not serve dp-1 with the Global's policy\n{}",
        logs(&global, &zones, Some(&envoy))
    );

    // From here on: traffic every 50 ms, and /ready of both replicas every 100 ms.
    let traffic = Traffic::start(inbound, epoch);
    let watch = LeaderWatch::start(apis, epoch);

    let mut leader_times = Vec::new();
    let mut envoy_times = Vec::new();
    let mut policy_times = Vec::new();
    let mut handover_times = Vec::new();
    let mut changed: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let (mut leader, envoy_on) = settled(round, apis, ads_ports, admin)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", logs(&global, &zones, Some(&envoy))));
        let rejected = envoy_rejections(admin).await?;
        assert!(
            rejected.is_empty(),
            "round {round}: Envoy rejected {rejected:?}"
        );
        let before = envoy_versions(admin).await?;
        let churn_before = envoy_churn(admin).await?;

        // After a kill the survivor both leads and serves the Envoy. So that a round kills
        // one of them only, leadership first moves to the other replica: the leader's
        // database session ends (as in a partition from PostgreSQL) until the other replica
        // has the leader lock; the old leader steps down at its next heartbeat and keeps
        // serving the Envoy, the other one leads after LEADER_GRACE.
        if leader == envoy_on {
            let ended = Instant::now();
            let next = 1 - leader;
            let sessions = move_leadership(&url, NAMES[leader], NAMES[next]).await?;
            let took = timed(ended, LEADER_BOUND, || async {
                settled_leader(apis).await == Some(next)
            })
            .await;
            let Some(took) = took else {
                panic!(
                    "round {round}: leadership did not move from replica {} (its database \
                     session ended) to replica {} within {LEADER_BOUND:?}\n{}",
                    NAMES[leader],
                    NAMES[next],
                    logs(&global, &zones, Some(&envoy))
                )
            };
            println!(
                "round {round}: replica {} lost its database session ({sessions} times); \
                 replica {} leads, KDS connected, after {took:?}",
                NAMES[leader], NAMES[next]
            );
            handover_times.push(took);
            leader = next;
            let again = settled(round, apis, ads_ports, admin)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", logs(&global, &zones, Some(&envoy))));
            assert_eq!(
                again,
                (leader, envoy_on),
                "round {round}: the Envoy moved when leadership did"
            );
        }

        let victim = if round % 2 == 0 { leader } else { envoy_on };
        let survivor = 1 - victim;
        let (kills_leader, kills_envoys) = (round % 2 == 0, round % 2 == 1);
        println!(
            "round {round}: replica {} leads, the Envoy is on replica {}; SIGKILL replica {} \
             (the {})",
            NAMES[leader],
            NAMES[envoy_on],
            NAMES[victim],
            if kills_leader { "leader" } else { "Envoy's" }
        );
        let stream = stream_id(apis[envoy_on]).await;
        let killed = Instant::now();
        zones[victim].kill();
        let survivor_api = apis[survivor];
        let survivor_port = ads_ports[survivor];
        let (led, moved) = tokio::join!(
            timed(killed, LEADER_BOUND, || async {
                ready(survivor_api)
                    .await
                    .is_some_and(|r| leads_connected(&r))
            }),
            timed(killed, ENVOY_BOUND, || async {
                envoy_upstream(admin).await == Some(survivor_port)
                    && envoy_connected(admin).await
                    && serves_dp(survivor_api).await
            }),
        );
        if kills_leader {
            let Some(took) = led else {
                panic!(
                    "round {round}: replica {} did not lead with KDS connected within \
                     {LEADER_BOUND:?}\n{}",
                    NAMES[survivor],
                    logs(&global, &zones, Some(&envoy))
                )
            };
            println!(
                "round {round}: leader failover: replica {} leads, KDS connected, after {took:?}",
                NAMES[survivor]
            );
            leader_times.push(took);
        } else {
            // The leader stayed (and was checked right away: `led` is immediate).
            assert!(
                led.is_some_and(|t| t < Duration::from_secs(1)),
                "round {round}: the leader lost leadership when a follower died\n{}",
                logs(&global, &zones, Some(&envoy))
            );
        }
        if kills_envoys {
            let Some(took) = moved else {
                panic!(
                    "round {round}: the Envoy is not connected to replica {} (ADS port \
                     {survivor_port}) with an ACK within {ENVOY_BOUND:?}\n{}",
                    NAMES[survivor],
                    logs(&global, &zones, Some(&envoy))
                )
            };
            println!(
                "round {round}: Envoy failover: on replica {}, ACKed, after {took:?}",
                NAMES[survivor]
            );
            envoy_times.push(took);
        } else {
            // The Envoy stayed, on the same ADS stream.
            assert!(
                moved.is_some_and(|t| t < Duration::from_secs(1)) && stream.is_some(),
                "round {round}: the Envoy left replica {} when the other one died\n{}",
                NAMES[survivor],
                logs(&global, &zones, Some(&envoy))
            );
            assert_eq!(
                stream_id(survivor_api).await,
                stream,
                "round {round}: the Envoy's ADS stream to replica {} ended when the leader died",
                NAMES[survivor]
            );
        }

        // The Envoy has the versions it had, and rejected nothing.
        let after = envoy_versions(admin).await?;
        let churn = envoy_churn(admin).await?;
        // (Recorded, and asserted once every round has run, so that one run measures all.)
        if before != after || churn_before != churn {
            changed.push(format!(
                "round {round}: across the kill of replica {} (the {}), the Envoy's dynamic \
                 listeners and clusters went from\n  {before:?}\nto\n  {after:?}\nand its \
                 add/modify/remove counters from\n  {churn_before:?}\nto\n  {churn:?}\nits \
                 xDS log:\n{}",
                NAMES[victim],
                if kills_leader { "leader" } else { "Envoy's" },
                envoy_xds_log(&envoy)
            ));
        }
        let rejected = envoy_rejections(admin).await?;
        assert!(
            rejected.is_empty(),
            "round {round}: Envoy rejected {rejected:?}"
        );

        // A policy written on the Global now reaches the Envoy (through the survivor).
        seconds = 200 + u32::try_from(round)?;
        let written = Instant::now();
        global
            .apply(
                &format!("/meshes/default/meshtimeouts/{POLICY}"),
                &idle_timeout(seconds),
            )
            .await?;
        let Some(took) = timed(written, POLICY_BOUND, || envoy_runs(admin, seconds)).await else {
            panic!(
                "round {round}: the idle timeout {seconds}s written on the Global did not \
                 reach the Envoy within {POLICY_BOUND:?}\n{}",
                logs(&global, &zones, Some(&envoy))
            )
        };
        println!(
            "round {round}: a MeshTimeout written on the Global ran in the Envoy after {took:?}"
        );
        policy_times.push(took);

        // The killed replica comes back as a non-leader, with what it missed.
        zones[victim].restart().await?;
        let back = wait_until(Duration::from_secs(20), || async {
            settled_leader(apis).await == Some(survivor)
                && holds_policy(apis[victim], seconds).await
        })
        .await;
        assert!(
            back.is_ok(),
            "round {round}: replica {} did not rejoin as a non-leader next to leader {}\n{}",
            NAMES[victim],
            NAMES[survivor],
            logs(&global, &zones, Some(&envoy))
        );
    }

    let (ok, failures) = traffic.finish().await;
    let (samples, both) = watch.finish().await;
    println!(
        "requests through the Envoy: {ok} ok, {} failed; /ready samples: {samples}",
        failures.len()
    );
    println!("zone leader failover (kill -> the other leads, KDS connected): {leader_times:?}");
    println!("Envoy ADS failover (kill -> connected to the survivor, ACKed): {envoy_times:?}");
    println!("leadership handover after the leader's database session ended: {handover_times:?}");
    println!("MeshTimeout on the Global -> in the Envoy, after each kill: {policy_times:?}");
    assert!(
        failures.is_empty(),
        "requests through the Envoy failed while its control plane failed over: {failures:#?}\n{}",
        envoy.log_tail()
    );
    assert!(ok > 100, "too few requests went through the Envoy: {ok}");
    assert!(samples > 100, "too few /ready samples: {samples}");
    assert!(both.is_empty(), "two replicas led at once: {both:#?}");
    assert!(leader_times.len() >= ROUNDS / 2 && envoy_times.len() >= ROUNDS / 2);
    assert!(
        changed.is_empty(),
        "the Envoy did not keep the config it had across {} of {ROUNDS} kills (the replica \
         it was on or reconnected to served it something else first):\n{}",
        changed.len(),
        changed.join("\n\n")
    );

    drop(envoy);
    for z in &mut zones {
        z.kill();
    }
    drop(global);
    drop(dir);
    Ok(())
}
