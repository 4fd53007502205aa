//! What durability costs the memory store: writes per second, volatile vs durable (journal
//! fsynced before each write returns), one write at a time and batched (one fsync per KDS
//! response). Prints a table; run with `cargo bench -p umbra-store --bench durable`
//! (`UMBRA_BENCH_WRITES`, default 2,000).

use std::time::{Duration, Instant};

use umbra_core::resource::Resource;
use umbra_store::memory::{MemoryStore, ReplicaWrite};

fn dataplane(i: usize) -> Resource {
    Resource::from_bytes(
        format!(
            "type: Dataplane\nmesh: default\nname: dp-{i}\nnetworking:\n  address: 10.0.{}.{}\n  inbound:\n  - port: 8080\n    tags: {{kuma.io/service: svc-{}, kuma.io/protocol: http}}\n",
            i / 250,
            i % 250,
            i % 50
        )
        .as_bytes(),
    )
    .expect("a valid Dataplane")
}

fn timeout(i: usize) -> Resource {
    Resource::from_bytes(
        format!("type: MeshTimeout\nmesh: default\nname: t-{i}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {}s}}\n", i % 60 + 1)
            .as_bytes(),
    )
    .expect("a valid MeshTimeout")
}

fn mesh() -> Resource {
    Resource::from_bytes(b"type: Mesh\nname: default\n").expect("a valid Mesh")
}

fn row(what: &str, n: usize, took: Duration) {
    println!(
        "| {what:<52} | {n:>6} | {:>9.1} | {:>10.0} |",
        took.as_secs_f64() * 1e3,
        n as f64 / took.as_secs_f64()
    );
}

fn main() {
    let n = std::env::var("UMBRA_BENCH_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000usize);
    let dir = std::env::temp_dir().join(format!("umbra-store-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    println!("| what | writes | ms | writes/s |");
    println!("|---|---:|---:|---:|");

    let volatile = MemoryStore::new();
    volatile.put_now(mesh(), None, None).expect("mesh");
    let start = Instant::now();
    for i in 0..n {
        volatile.put_now(dataplane(i), None, None).expect("put");
    }
    row("volatile: one Dataplane put at a time", n, start.elapsed());

    let durable = MemoryStore::open(&dir.join("single")).expect("open");
    durable.put_now(mesh(), None, None).expect("mesh");
    let start = Instant::now();
    for i in 0..n {
        durable.put_now(dataplane(i), None, None).expect("put");
    }
    row(
        "durable: one Dataplane put at a time (fsync each)",
        n,
        start.elapsed(),
    );

    let batched = MemoryStore::open(&dir.join("batched")).expect("open");
    batched.put_replica(mesh()).expect("mesh");
    let start = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let writes = chunk
            .iter()
            .map(|i| ReplicaWrite::Put(Box::new(timeout(*i))))
            .collect();
        for outcome in batched.apply_replica(writes) {
            outcome.expect("applied");
        }
    }
    row(
        "durable: KDS responses of 500 policies (fsync each)",
        n,
        start.elapsed(),
    );

    drop((durable, batched));
    let start = Instant::now();
    let reopened = MemoryStore::open(&dir.join("single")).expect("reopen");
    row(
        "durable: reopen (load, replay, compact)",
        reopened.len(),
        start.elapsed(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
