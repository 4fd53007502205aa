//! Fleet-wide shadow diff benchmark (issue 6), printed as a table.
//!
//! `UMBRA_BENCH_ZONES` (default 5) zone-cp processes with `UMBRA_BENCH_DPPS` (default 2,000)
//! DPPs each, and one global-cp process (memory store), all on this machine. Each DPP has one
//! HTTP inbound and 50 outbounds (`UMBRA_BENCH_SERVICES` services, default 1,000, so 2 DPPs of
//! each per zone; each service behind one VIP). The mesh holds 20 policies: 10 live Timeouts (one for every
//! service, nine for single services) and their 10 MeshTimeout replacements as shadow (one
//! Mesh-wide, nine for single services), so the shadow policies affect every DPP.
//!
//! Each zone starts from a prepared `--data-dir` (so no zone spends minutes regenerating while
//! 2,000 DPPs register one by one), syncs its Dataplanes up to the Global over KDS and
//! generates every DPP's Live snapshot (the bench waits until the zones are idle); then
//! `GET /meshes/default/_shadow-diff` (summary) is timed from the client, `UMBRA_BENCH_RUNS`
//! times (default 3), while the Global's RSS is sampled every 5 ms; the CPU time the Global and the
//! zones used during each run is printed too (user + system, from `/proc/<pid>/stat`).
//!
//! Run: `cargo bench -p umbra-e2e --bench fanout`.

use std::time::{Duration, Instant};

use serde_json::Value;
use umbra_core::resource::Resource;
use umbra_e2e::{free_port, http_request, wait_until, CpProcess};
use umbra_zone_cp::synthetic;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const OUTBOUNDS: usize = 50;

/// Services per mesh (`UMBRA_BENCH_SERVICES`, default 1,000): each zone's DPPs are spread over
/// them, so each outbound has `DPPs / services` endpoints per zone.
fn services() -> usize {
    env_usize("UMBRA_BENCH_SERVICES", 1000).max(OUTBOUNDS + 1)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of process `pid`, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

fn resource(yaml: &str) -> Resource {
    Resource::from_bytes(yaml.as_bytes()).expect("valid resource")
}

/// A zone data directory holding the Mesh, the policies and `dpps` Dataplanes.
fn zone_dir(root: &std::path::Path, z: usize, dpps: usize) -> anyhow::Result<std::path::PathBuf> {
    let dir = root.join(format!("zone-{z}"));
    std::fs::create_dir_all(&dir)?;
    let mut docs: Vec<Value> =
        vec![
            resource("type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n").to_value(),
        ];
    docs.extend(synthetic::policies().iter().map(|p| resource(p).to_value()));
    docs.extend(
        (0..dpps).map(|i| resource(&synthetic::dataplane(z, i, services(), OUTBOUNDS)).to_value()),
    );
    std::fs::write(dir.join("store.json"), serde_json::to_vec(&docs)?)?;
    Ok(dir)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let zones = env_usize("UMBRA_BENCH_ZONES", 5);
    let dpps = env_usize("UMBRA_BENCH_DPPS", 2000);
    let runs = env_usize("UMBRA_BENCH_RUNS", 3);
    let root = std::env::temp_dir().join(format!(
        "umbra-bench-fanout-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&root)?;
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], root.join("global.log")).await?;
    global
        .apply(
            "/meshes/default",
            "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
        )
        .await?;
    for p in synthetic::policies() {
        let r = resource(&p);
        let plural = if r.ty().name() == "Timeout" {
            "timeouts"
        } else {
            "meshtimeouts"
        };
        global
            .apply(&format!("/meshes/default/{plural}/{}", r.meta.name), &p)
            .await?;
    }
    let setup = Instant::now();
    let mut zone_procs = Vec::new();
    for z in 0..zones {
        let token = umbra_e2e::zone_token(&global, &format!("zone-{z}")).await?;
        let dir = zone_dir(&root, z, dpps)?;
        let zone = umbra_e2e::start_federated_zone(
            ZONE,
            &global,
            &format!("zone-{z}"),
            &token,
            &["--data-dir".into(), dir.display().to_string()],
            root.join(format!("zone-{z}.log")),
        )
        .await?;
        zone_procs.push(zone);
    }
    let total = zones * dpps;
    wait_until(Duration::from_secs(600), || async {
        matches!(global.call("GET", "/meshes/default/dataplanes?size=1", None).await, Ok((200, v)) if v["total"] == total)
    })
    .await
    .map_err(|_| anyhow::anyhow!("the Global did not receive {total} dataplanes:\n{}", global.log_tail()))?;
    let pid = global.pid().expect("global running");
    println!(
        "setup: {zones} zones x {dpps} DPPs ({OUTBOUNDS} outbounds each, {} services), 20 policies; synced to the Global in {:.1} s; Global RSS {} MiB",
        services(),
        setup.elapsed().as_secs_f64(),
        rss_kib(pid) / 1024
    );
    // Let the zones finish their first reconciliation (every DPP's Live snapshot) before
    // timing: until the zone processes together use under 10% of one core for a second.
    let zone_pids: Vec<u32> = zone_procs.iter().filter_map(CpProcess::pid).collect();
    let settle = Instant::now();
    loop {
        let before: u64 = zone_pids.iter().map(|p| cpu_ticks(*p)).sum();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let used: u64 = zone_pids.iter().map(|p| cpu_ticks(*p)).sum::<u64>() - before;
        if used <= 10 {
            break;
        }
    }
    println!(
        "zones settled (Live snapshots generated) after another {:.1} s",
        settle.elapsed().as_secs_f64()
    );

    println!();
    println!("| run | wall | considered | changed | failed | distinct operations | Global RSS before | peak growth | Global CPU | zones' CPU |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut walls = Vec::new();
    let mut growths = Vec::new();
    for run in 1..=runs {
        let before = rss_kib(pid);
        let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let peak = {
            let sampling = sampling.clone();
            tokio::task::spawn_blocking(move || {
                let mut peak = 0;
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    peak = peak.max(rss_kib(pid));
                    std::thread::sleep(Duration::from_millis(5));
                }
                peak
            })
        };
        let global_ticks = cpu_ticks(pid);
        let zone_ticks: u64 = zone_pids.iter().map(|p| cpu_ticks(*p)).sum();
        let started = Instant::now();
        let answer = http_request(
            global.api,
            "GET",
            "/meshes/default/_shadow-diff?timeout=120s",
            None,
            &[],
            Duration::from_secs(130),
        )
        .await;
        let wall = started.elapsed();
        let global_cpu = (cpu_ticks(pid) - global_ticks) as f64 / 100.0;
        let zones_cpu =
            (zone_pids.iter().map(|p| cpu_ticks(*p)).sum::<u64>() - zone_ticks) as f64 / 100.0;
        sampling.store(false, std::sync::atomic::Ordering::Relaxed);
        let peak = peak.await?;
        let (status, text) = answer?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        anyhow::ensure!(status == 200, "shadow diff: {status} {body}");
        anyhow::ensure!(
            body["partial"] == false,
            "partial result (logs in {}): {}",
            root.display(),
            body["zones"]
        );
        let growth = peak.saturating_sub(before);
        println!(
            "| {run} | {:.2} s | {} | {} | {} | {} | {} MiB | {:.1} MiB | {global_cpu:.1} s | {zones_cpu:.1} s |",
            wall.as_secs_f64(),
            body["totals"]["considered"],
            body["totals"]["changed"],
            body["totals"]["failed"],
            body["changes"].as_array().map_or(0, Vec::len),
            before / 1024,
            growth as f64 / 1024.0
        );
        walls.push(wall);
        growths.push(growth);
    }
    walls.sort();
    let median = walls[walls.len() / 2];
    let max_growth = growths.iter().max().copied().unwrap_or(0);
    println!();
    println!(
        "fleet-wide summary, median wall: {:.2} s (target <= 5 s: {}); max Global RSS growth: {:.1} MiB (target <= 100 MB: {})",
        median.as_secs_f64(),
        if median <= Duration::from_secs(5) { "met" } else { "missed" },
        max_growth as f64 / 1024.0,
        if max_growth * 1024 <= 100_000_000 { "met" } else { "missed" }
    );
    drop(zone_procs);
    drop(global);
    if std::env::var_os("UMBRA_BENCH_KEEP").is_some() {
        println!("logs kept in {}", root.display());
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}
