//! KDS benchmarks (issue 5), printed as a table:
//!
//! 1. **Initial sync**: a Global (memory store) holding one Mesh and `UMBRA_BENCH_POLICIES`
//!    (default 10,000) MeshTimeouts; a fresh zone's KDS client starts with an empty store; the
//!    time until its store holds every policy (connect, subscribe, chunked responses, apply,
//!    ACKs). A warm-up zone syncs first, so the Global's offer is loaded.
//! 2. **Incremental change**: `UMBRA_BENCH_CHANGES` (default 200) PUTs of one policy through the
//!    Global's REST API, one at a time; for each, the time from the 200 response to the new
//!    content being in the zone's store; p50, p99, max. On the memory store and, when
//!    PostgreSQL is available, on PostgreSQL (LISTEN/NOTIFY wake-up + change log).
//!
//! Run: `cargo bench -p umbra-e2e --bench kds`. The Global, the zone and the client share this
//! machine's cores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_e2e::measure::{env_usize, percentile};
use umbra_e2e::{free_port, http};
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::TempPostgres;
use umbra_global_cp::tokens::ZoneTokens;
use umbra_zone_cp::store::Store as ZoneStore;

fn policy(i: usize, idle_secs: usize) -> Resource {
    Resource::from_bytes(
        format!(
            "type: MeshTimeout\nmesh: default\nname: p-{i}\nspec:\n  targetRef: {{kind: MeshService, name: svc-{i}}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {idle_secs}s, connectionTimeout: 2s}}\n"
        )
        .as_bytes(),
    )
    .expect("valid policy")
}

struct Global {
    api: std::net::SocketAddr,
    kds: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn start_global(store: Arc<dyn Store>) -> anyhow::Result<Global> {
    let api = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await?;
    let kds = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await?;
    let (api_addr, kds_addr) = (api.local_addr()?, kds.local_addr()?);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(umbra_global_cp::serve(
        store,
        api,
        kds,
        None,
        umbra_global_cp::Settings::default(),
        async move {
            let _ = rx.await;
        },
    ));
    Ok(Global {
        api: api_addr,
        kds: kds_addr,
        stop,
    })
}

/// A zone KDS client into a fresh store; returns the store and the client's stop switch.
async fn start_zone(
    global: &Global,
    token: &str,
    zone: &str,
) -> (ZoneStore, tokio::sync::watch::Sender<bool>) {
    let store = ZoneStore::new();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let config = umbra_zone_cp::kds::KdsClientConfig {
        zone: zone.into(),
        addresses: format!("http://{}", global.kds)
            .parse::<umbra_zone_cp::kds::KdsAddress>()
            .expect("a KDS address")
            .into(),
        token: umbra_zone_cp::kds::TokenSource::Value(token.into()),
        ca_pem: None,
        trust: umbra_pki::trust::Trust::verifier(Default::default(), Default::default()),
        cas: Arc::new(tokio::sync::watch::channel(Arc::default()).0),
    };
    tokio::spawn(umbra_zone_cp::kds::run(
        config,
        store.clone(),
        Arc::default(),
        None,
        Arc::default(),
        Arc::default(),
        rx,
    ));
    (store, tx)
}

async fn wait_for_policies(store: &ZoneStore, n: usize, timeout: Duration) -> anyhow::Result<()> {
    let mut changes = store.subscribe();
    let deadline = Instant::now() + timeout;
    while store.list_all(ResourceType::MeshTimeout).len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(
            !left.is_zero(),
            "zone did not sync {n} policies in {timeout:?}"
        );
        let _ = tokio::time::timeout(left, changes.changed()).await;
    }
    Ok(())
}

/// Incremental changes through the REST API; per change, 200 → visible in the zone store.
async fn incremental(
    global: &Global,
    zone: &ZoneStore,
    changes: usize,
    policies: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(changes);
    let mut notify = zone.subscribe();
    for c in 0..changes {
        let i = (c * 7919) % policies;
        let idle = 100 + c;
        let body = serde_json::to_string(&policy(i, idle).to_value())?;
        let (status, text) = http(
            global.api,
            "PUT",
            &format!("/meshes/default/meshtimeouts/p-{i}"),
            Some(&body),
        )
        .await?;
        anyhow::ensure!(status == 200, "PUT: {status} {text}");
        let t0 = Instant::now();
        let key = ResourceKey {
            ty: ResourceType::MeshTimeout,
            mesh: "default".into(),
            name: format!("p-{i}"),
        };
        let want = format!("{idle}s");
        loop {
            let arrived = zone.get(&key).is_some_and(|s| {
                s.resource.to_value()["spec"]["to"][0]["default"]["idleTimeout"] == want.as_str()
            });
            if arrived {
                break;
            }
            anyhow::ensure!(
                t0.elapsed() < Duration::from_secs(10),
                "change {c} never arrived"
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), notify.changed()).await;
        }
        out.push(t0.elapsed());
    }
    out.sort();
    Ok(out)
}

async fn fill(store: &dyn Store, policies: usize) -> anyhow::Result<()> {
    store
        .put(
            Resource::from_bytes(
                b"type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
            )?,
            None,
            None,
        )
        .await?;
    for i in 0..policies {
        store.put(policy(i, 10), None, None).await?;
    }
    Ok(())
}

fn row(label: &str, d: &[Duration], target: &str) {
    println!(
        "| {label} | {:.1} | {:.1} | {:.1} | {target} |",
        percentile(d, 50.0).as_secs_f64() * 1e3,
        percentile(d, 99.0).as_secs_f64() * 1e3,
        d.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let policies = env_usize("UMBRA_BENCH_POLICIES", 10_000);
    let changes = env_usize("UMBRA_BENCH_CHANGES", 200);
    println!("| measurement | p50 ms | p99 ms | max ms | target |");
    println!("|---|---|---|---|---|");

    // Memory store: initial sync and incremental changes.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    fill(&*store, policies).await?;
    let token = ZoneTokens::load(&*store)
        .await?
        .issue("bench", Duration::from_secs(3600))?;
    let global = start_global(store.clone()).await?;
    let (warm, warm_stop) = start_zone(&global, &token, "bench").await;
    wait_for_policies(&warm, policies, Duration::from_secs(60)).await?;
    let _ = warm_stop.send(true);
    let mut initial = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let (zone, stop) = start_zone(&global, &token, "bench").await;
        wait_for_policies(&zone, policies, Duration::from_secs(60)).await?;
        initial.push(t0.elapsed());
        let _ = stop.send(true);
    }
    initial.sort();
    row(
        &format!("initial sync, {policies} policies, fresh zone (5 runs)"),
        &initial,
        "<= 1,000 ms",
    );
    let (zone, _zone_stop) = start_zone(&global, &token, "bench").await;
    wait_for_policies(&zone, policies, Duration::from_secs(60)).await?;
    let d = incremental(&global, &zone, changes, policies).await?;
    row(
        &format!("incremental change, memory store ({changes} PUTs)"),
        &d,
        "p99 <= 50 ms",
    );
    let _ = global.stop.send(());

    // PostgreSQL: incremental changes (LISTEN/NOTIFY wake-up, change log).
    match TempPostgres::start() {
        Ok(pg) => {
            let url = pg.create_database("kds_bench").await?;
            let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 16).await?);
            let n = policies.min(1000);
            fill(&*store, n).await?;
            let token = ZoneTokens::load(&*store)
                .await?
                .issue("bench", Duration::from_secs(3600))?;
            let global = start_global(store).await?;
            let (zone, _stop) = start_zone(&global, &token, "bench").await;
            wait_for_policies(&zone, n, Duration::from_secs(60)).await?;
            let d = incremental(&global, &zone, changes, n).await?;
            row(
                &format!("incremental change, PostgreSQL store ({changes} PUTs)"),
                &d,
                "p99 <= 50 ms",
            );
            let _ = global.stop.send(());
        }
        Err(e) => println!("| incremental change, PostgreSQL store | skipped: {e} | | | |"),
    }
    Ok(())
}
