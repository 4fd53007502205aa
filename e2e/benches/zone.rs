//! Zone CP benchmarks (issue 4), printed as a table:
//!
//! 1. **RSS per DPP**: a zone with `UMBRA_BENCH_DPPS` (default 10,000) registered Dataplanes,
//!    each with its Live snapshot generated; (RSS after − RSS before) / DPPs.
//! 2. **Change propagation**: `UMBRA_BENCH_STREAMS` (default 1,000) simulated SotW ADS clients
//!    ([`umbra_e2e::envoy_sim`]: one TLS connection each, authenticated with a dataplane token
//!    as Envoys are, subscribing to CDS, EDS, LDS and RDS, decoding and ACKing every response
//!    at once), then one mesh-wide MeshTimeout PUT; per stream, the time from the PUT to its ACK of
//!    the new listeners (the last type of the push); p50, p99, max.
//! 3. **Idle CPU**: process CPU time over 5 s with every stream connected and nothing changing.
//!
//! Run: `cargo bench -p umbra-e2e --bench zone`. Linux only (reads `/proc/self`).
//! Everything (zone and clients) shares this machine's cores, as a zone and its Envoys would not.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use umbra_e2e::envoy_sim::{self, Access, Events, XdsType};
use umbra_e2e::measure::{env_usize, percentile};
use umbra_e2e::{http, Zone};

/// The allocator the `zone-cp` binary uses, so RSS and CPU match the real process.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of this process, in clock ticks (1/100 s on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): state is field 3; utime 14,
    // stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Wait until the process has used less than 5% of one core over 500 ms (the zone settled).
async fn settle() {
    loop {
        let before = cpu_ticks();
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_ticks() - before <= 2 {
            return;
        }
    }
}

/// Dataplane `i` of a mesh with `services` services: service `svc-(i % services)`, outbounds to
/// the next two services.
fn dataplane(i: usize, services: usize) -> String {
    let (a, b, c) = (10 + i / 65_536, (i / 256) % 256, i % 256);
    let s = i % services;
    let o1 = (s + 1) % services;
    let o2 = (s + 2) % services;
    format!(
        "type: Dataplane\nmesh: default\nname: dp-{i}\nnetworking:\n  address: {a}.{b}.{c}.1\n  inbound:\n  - port: 8080\n    servicePort: 80\n    tags: {{kuma.io/service: svc-{s}, kuma.io/protocol: http, version: v{}}}\n  outbound:\n  - port: {}\n    address: 240.0.{}.{}\n    tags: {{kuma.io/service: svc-{o1}}}\n  - port: {}\n    address: 240.0.{}.{}\n    tags: {{kuma.io/service: svc-{o2}}}\n",
        i % 3,
        10_000 + o1,
        o1 / 256,
        o1 % 256,
        10_000 + o2,
        o2 / 256,
        o2 % 256
    )
}

/// Register DPPs `0..n` through the API, `parallel` requests at a time.
async fn register(zone: &Zone, n: usize, services: usize) -> anyhow::Result<()> {
    let api = zone.api;
    let mut tasks = tokio::task::JoinSet::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..16 {
        let next = next.clone();
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return anyhow::Ok(());
                }
                let (status, body) = http(
                    api,
                    "PUT",
                    &format!("/meshes/default/dataplanes/dp-{i}"),
                    Some(&dataplane(i, services)),
                )
                .await?;
                anyhow::ensure!((200..300).contains(&status), "{status} {body}");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// How the simulated Envoys reach ADS, as real ones do: TLS verified with the zone's
/// data-plane server CA, and a dataplane token (one for any DPP of the mesh).
async fn access(zone: &Zone) -> anyhow::Result<Arc<Access>> {
    let (status, ca) = http(zone.api, "GET", "/dp-server/ca.pem", None).await?;
    anyhow::ensure!(status == 200, "CA: {status} {ca}");
    let (status, token) = http(
        zone.api,
        "POST",
        "/tokens/dataplane",
        Some(r#"{"mesh": "default", "validFor": "1h"}"#),
    )
    .await?;
    anyhow::ensure!(status == 200, "token: {status} {token}");
    Ok(Arc::new(Access::new(&ca, &token)?))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let dpps = env_usize("UMBRA_BENCH_DPPS", 10_000);
    let streams = env_usize("UMBRA_BENCH_STREAMS", 1_000);
    let mut rows: Vec<(String, String, String)> = Vec::new();

    // 1. RSS per registered DPP.
    {
        let zone = Zone::start("bench-rss").await?;
        http(
            zone.api,
            "PUT",
            "/meshes/default",
            Some("type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n"),
        )
        .await?;
        settle().await;
        let before = rss_kib();
        let start = Instant::now();
        register(&zone, dpps, (dpps / 10).max(3)).await?;
        settle().await;
        let took = start.elapsed();
        let after = rss_kib();
        let per = (after.saturating_sub(before)) as f64 / dpps as f64;
        rows.push((
            format!("RSS per registered DPP ({dpps} DPPs)"),
            format!(
                "{per:.1} KiB (RSS {} → {} MiB)",
                before / 1024,
                after / 1024
            ),
            "≤ 200 KB".into(),
        ));
        rows.push((
            format!("register {dpps} DPPs through the API and generate"),
            format!("{:.1} s", took.as_secs_f64()),
            "-".into(),
        ));
        zone.stop().await?;
    }

    // 2. One mesh-wide change, `streams` ADS clients.
    let zone = Zone::start("bench-ads").await?;
    http(
        zone.api,
        "PUT",
        "/meshes/default",
        Some("type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n"),
    )
    .await?;
    register(&zone, streams, (streams / 10).max(3)).await?;
    settle().await;
    let events: Events = Arc::default();
    let mut clients = tokio::task::JoinSet::new();
    let access = access(&zone).await?;
    let connect = Instant::now();
    for i in 0..streams {
        clients.spawn(envoy_sim::run(
            zone.ads,
            format!("default.dp-{i}"),
            i,
            access.clone(),
            events.clone(),
        ));
    }
    let ready =
        |events: &Events| envoy_sim::ready_clients(&envoy_sim::events_since(events, 0)).len();
    while ready(&events) < streams {
        // A client that ended has failed (they run until the zone stops): say why.
        if let Some(done) = clients.try_join_next() {
            done??;
            anyhow::bail!("an ADS client stream ended before the zone stopped");
        }
        anyhow::ensure!(
            connect.elapsed() < Duration::from_secs(120),
            "only {} of {streams} streams got their config",
            ready(&events)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rows.push((
        format!("{streams} streams connect and ACK CDS+EDS+LDS"),
        format!("{:.2} s", connect.elapsed().as_secs_f64()),
        "-".into(),
    ));
    settle().await;

    // 3. Idle CPU with every stream open.
    let (t0, c0) = (Instant::now(), cpu_ticks());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = (cpu_ticks() - c0) as f64 / 100.0 / t0.elapsed().as_secs_f64() * 100.0;
    rows.push((
        format!("idle CPU, {streams} streams open, nothing changing (5 s)"),
        format!("{idle:.2} % of one core"),
        "~0".into(),
    ));

    let mark = envoy_sim::mark(&events);
    let t0 = Instant::now();
    let (status, body) = http(
        zone.api,
        "PUT",
        "/meshes/default/meshtimeouts/mesh-wide",
        Some("type: MeshTimeout\nmesh: default\nname: mesh-wide\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 42s, http: {requestTimeout: 7s}}\n"),
    )
    .await?;
    anyhow::ensure!(status == 201 || status == 200, "{status} {body}");
    let done = |events: &Events| {
        let mut firsts: HashMap<usize, Instant> = HashMap::new();
        for e in envoy_sim::events_since(events, mark) {
            if e.ty == XdsType::Listener {
                firsts.entry(e.client).or_insert(e.acked);
            }
        }
        firsts
    };
    while done(&events).len() < streams {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(60),
            "only {} of {streams} streams ACKed the change",
            done(&events).len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut latencies: Vec<Duration> = done(&events).values().map(|at| *at - t0).collect();
    latencies.sort();
    rows.push((
        format!("mesh-wide MeshTimeout → new LDS ACKed, {streams} streams: p50"),
        format!("{:.0} ms", percentile(&latencies, 50.0).as_secs_f64() * 1e3),
        "-".into(),
    ));
    rows.push((
        format!("mesh-wide MeshTimeout → new LDS ACKed, {streams} streams: p99"),
        format!("{:.0} ms", percentile(&latencies, 99.0).as_secs_f64() * 1e3),
        "≤ 1 s".into(),
    ));
    rows.push((
        format!("mesh-wide MeshTimeout → new LDS ACKed, {streams} streams: max"),
        format!(
            "{:.0} ms",
            percentile(&latencies, 100.0).as_secs_f64() * 1e3
        ),
        "-".into(),
    ));
    clients.abort_all();
    zone.stop().await?;

    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(10);
    let w2 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(10);
    println!("| {:w$} | {:w2$} | target |", "measure", "measured");
    println!("|{}|{}|--------|", "-".repeat(w + 2), "-".repeat(w2 + 2));
    for (m, v, t) in rows {
        println!("| {m:w$} | {v:w2$} | {t} |");
    }
    Ok(())
}
