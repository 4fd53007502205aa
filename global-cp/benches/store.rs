//! PostgreSQL store benchmark (issue 5), printed as a table: sustained policy writes per second
//! with `UMBRA_BENCH_WRITERS` (default 16) concurrent writers for `UMBRA_BENCH_WRITES` (default
//! 10,000) MeshTimeout PUTs, and change-log delivery latency: from a write's acknowledgement to
//! the moment a consumer (woken by LISTEN/NOTIFY, reading `changes_since`) has it; p50, p99;
//! and whether the log the consumer read is consecutive, in order and holds every acknowledged
//! revision (issue 21: puts are committed in groups).
//!
//! With `UMBRA_BENCH_REPLICAS=n` (default 1) the writers are spread over `n` stores on the same
//! database, as `n` Global replicas' stores are (issue 36: each has its own pool and group
//! commit; they contend on the change log's head row), and the consumer reads from the first
//! one, so it also sees the other replicas' writes through its own change feed.
//!
//! Run: `cargo bench -p umbra-global-cp --bench store` (needs PostgreSQL's `initdb`/`pg_ctl`;
//! the server is a throwaway one with `fsync=off`, so this measures Umbra and PostgreSQL's CPU
//! path, not disk flushes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use umbra_core::resource::Resource;
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::TempPostgres;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn policy(name: &str) -> Resource {
    Resource::from_bytes(
        format!("type: MeshTimeout\nmesh: default\nname: {name}\nspec:\n  targetRef: {{kind: MeshService, name: {name}}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: 30s, http: {{requestTimeout: 5s}}}}\n").as_bytes(),
    )
    .expect("valid policy")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let writers = env_usize("UMBRA_BENCH_WRITERS", 16);
    let writes = env_usize("UMBRA_BENCH_WRITES", 10_000);
    let pg = TempPostgres::start()?;
    let url = pg.create_database("bench").await?;
    let replicas = env_usize("UMBRA_BENCH_REPLICAS", 1).max(1);
    let mut stores = Vec::with_capacity(replicas);
    for _ in 0..replicas {
        stores.push(Arc::new(PostgresStore::connect(&url, 20).await?));
    }
    let store = stores[0].clone();
    store
        .put(
            Resource::from_bytes(b"type: Mesh\nname: default\n")?,
            None,
            None,
        )
        .await?;
    let start_revision = store.revision().await?;

    // Acknowledgement times by revision, and the consumer's delivery times.
    let acked: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let delivered: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    // Every revision the consumer read, in the order it read them.
    let order: Arc<Mutex<Vec<u64>>> = Arc::default();
    let consumer = {
        let (store, delivered, order) = (store.clone(), delivered.clone(), order.clone());
        tokio::spawn(async move {
            let mut wake = store.subscribe();
            let mut seen = start_revision;
            let target = start_revision + writes as u64;
            while seen < target {
                let changes = store.changes_since(seen, 10_000).await.unwrap_or_default();
                let now = Instant::now();
                {
                    let mut d = delivered
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    for c in &changes {
                        d.insert(c.revision, now);
                    }
                }
                order
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(changes.iter().map(|c| c.revision));
                if let Some(last) = changes.last() {
                    seen = last.revision;
                    continue;
                }
                let _ = tokio::time::timeout(Duration::from_secs(1), wake.changed()).await;
            }
        })
    };

    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let store = stores[w % replicas].clone();
        let (next, acked) = (next.clone(), acked.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= writes {
                    return anyhow::Ok(());
                }
                let (stored, _) = store.put(policy(&format!("p{i}")), None, None).await?;
                acked
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(stored.revision, Instant::now());
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let elapsed = t0.elapsed();
    tokio::time::timeout(Duration::from_secs(30), consumer).await??;

    let acked = acked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let delivered = delivered
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut latencies: Vec<Duration> = acked
        .iter()
        .filter_map(|(rev, at)| Some(delivered.get(rev)?.saturating_duration_since(*at)))
        .collect();
    latencies.sort();
    let rate = writes as f64 / elapsed.as_secs_f64();
    println!("| measure | measured | target |");
    println!("|---|---|---|");
    println!(
        "| sustained MeshTimeout writes, {writers} writers over {replicas} replica(s), {writes} writes | {rate:.0} writes/s ({:.2} s) | >= 2,000 writes/s (issue 21) |",
        elapsed.as_secs_f64()
    );
    println!(
        "| change-log delivery after the write's ack: p50 | {:.1} ms | |",
        percentile(&latencies, 50.0).as_secs_f64() * 1e3
    );
    println!(
        "| change-log delivery after the write's ack: p99 | {:.1} ms | <= 100 ms |",
        percentile(&latencies, 99.0).as_secs_f64() * 1e3
    );
    println!(
        "| change-log delivery after the write's ack: max | {:.1} ms | |",
        percentile(&latencies, 100.0).as_secs_f64() * 1e3
    );
    println!(
        "| writes delivered to the consumer | {} of {} | all |",
        latencies.len(),
        writes
    );
    let order = order
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let consecutive = order
        .iter()
        .copied()
        .eq(start_revision + 1..=start_revision + writes as u64);
    println!(
        "| change log read back consecutive and in order, every acknowledged revision in it | {} | yes |",
        if consecutive && acked.keys().all(|r| delivered.contains_key(r)) {
            "yes"
        } else {
            "NO"
        }
    );
    Ok(())
}
