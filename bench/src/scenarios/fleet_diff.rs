//! The fleet-wide shadow diff (issues 6 and 21): `zones` zone-cp processes with `dpps` DPPs
//! each and one global-cp (memory store), all on this machine. Each DPP has one HTTP inbound
//! and 50 outbounds to service VIPs; `dpps / endpoints` services, so each outbound has
//! `endpoints` endpoints per zone. With `--shadow migration` (the default, issue 21's rows) the
//! mesh holds issue 6's 20 policies: 10 live Timeouts and their 10 MeshTimeout replacements as
//! shadow (one Mesh-wide), so every DPP is affected; with `--shadow one-service`, a live
//! Mesh-wide MeshTimeout and one shadow MeshTimeout to one service, which changes one outbound
//! of that service's callers ([`synthetic::shape`]).
//!
//! The clock starts once the zones have synced their Dataplanes to the Global and generated
//! every Live snapshot (their CPU went idle). `GET /meshes/default/_shadow-diff` (summary) is
//! timed from the client `runs` times while the Global's RSS is sampled every 5 ms; then once
//! more with nothing changed since the last run ("asked again").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use umbra_e2e::{http_request, CpProcess};
use umbra_zone_cp::synthetic;

use crate::cluster::{self, WorkDir};
use crate::measure::{cpu_ticks, cpu_ticks_of, ms, rss_kib, settle, Row, Target};

/// Outbounds per DPP.
pub const OUTBOUNDS: usize = 50;

/// The scenario's size.
#[derive(Debug, Clone)]
pub struct Size {
    /// Zone processes.
    pub zones: usize,
    /// DPPs per zone.
    pub dpps: usize,
    /// Endpoints per outbound per zone.
    pub endpoints: usize,
    /// Timed runs (the median is reported).
    pub runs: usize,
    /// The shadow policies ([`synthetic::shape`]: `migration` or `one-service`).
    pub shadow: String,
}

struct Run {
    wall: Duration,
    growth_kib: u64,
    body: Value,
    global_cpu: f64,
    zones_cpu: f64,
}

async fn ask(global: &CpProcess, zone_pids: &[u32]) -> anyhow::Result<Run> {
    let pid = global
        .pid()
        .ok_or_else(|| anyhow::anyhow!("Global not running"))?;
    let before = rss_kib(pid);
    let sampling = Arc::new(AtomicBool::new(true));
    let peak = {
        let sampling = sampling.clone();
        tokio::task::spawn_blocking(move || {
            let mut peak = 0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let (g0, z0) = (cpu_ticks(pid), cpu_ticks_of(zone_pids));
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
    let global_cpu = (cpu_ticks(pid) - g0) as f64 / 100.0;
    let zones_cpu = (cpu_ticks_of(zone_pids) - z0) as f64 / 100.0;
    sampling.store(false, Ordering::Relaxed);
    let peak = peak.await?;
    let (status, text) = answer?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    anyhow::ensure!(status == 200, "shadow diff: {status} {body}");
    anyhow::ensure!(
        body["partial"] == false,
        "partial result: {}",
        body["zones"]
    );
    Ok(Run {
        wall,
        growth_kib: peak.saturating_sub(before),
        body,
        global_cpu,
        zones_cpu,
    })
}

/// Run it; the rows (median wall, asked again, Global RSS growth).
///
/// # Errors
/// A CP that does not start, sync or answer; a partial or failed diff.
pub async fn run(size: Size) -> anyhow::Result<Vec<Row>> {
    let Size {
        zones,
        dpps,
        endpoints,
        runs,
        shadow,
    } = size;
    let services = (dpps / endpoints.max(1)).max(OUTBOUNDS + 1);
    let work = WorkDir::new("fleet-diff")?;
    let global = cluster::start_global(&work.0).await?;
    global.apply("/meshes/default", crate::mesh::MESH).await?;
    let policies = synthetic::shape(&shadow)
        .ok_or_else(|| anyhow::anyhow!("--shadow {shadow}: expected migration or one-service"))?;
    for p in &policies {
        let r = umbra_core::resource::Resource::from_bytes(p.as_bytes())?;
        let plural = r.ty().plural();
        global
            .apply(&format!("/meshes/default/{plural}/{}", r.meta.name), p)
            .await?;
    }
    let setup = Instant::now();
    let mut zone_procs = Vec::new();
    for z in 0..zones {
        let data = cluster::zone_dir(
            &work.0,
            z,
            &policies,
            (0..dpps).map(|i| synthetic::dataplane(z, i, services, OUTBOUNDS)),
        )?;
        zone_procs.push(cluster::start_zone(&work.0, Some(&global), z, &data).await?);
    }
    cluster::wait_dataplanes(&global, zones * dpps, Duration::from_secs(600)).await?;
    let zone_pids: Vec<u32> = zone_procs.iter().filter_map(CpProcess::pid).collect();
    let settled = settle(&zone_pids, 10, Duration::from_secs(600)).await?;
    let pid = global.pid().unwrap_or(0);
    println!(
        "fleet-diff: {zones} zones x {dpps} DPPs ({OUTBOUNDS} outbounds, {services} services, {endpoints} endpoints per outbound per zone); synced in {:.1} s, zones idle {:.1} s later; Global RSS {} MiB, zones {} MiB",
        setup.elapsed().as_secs_f64() - settled.as_secs_f64(),
        settled.as_secs_f64(),
        rss_kib(pid) / 1024,
        zone_pids.iter().map(|p| rss_kib(*p)).sum::<u64>() / 1024,
    );
    let mut walls = Vec::new();
    let mut growth = 0;
    for n in 1..=runs {
        // Something changed since the last run (a live policy touched), so each run computes.
        if n > 1 {
            let p = &policies[0];
            let r = umbra_core::resource::Resource::from_bytes(p.as_bytes())?;
            global
                .apply(
                    &format!("/meshes/default/{}/{}", r.ty().plural(), r.meta.name),
                    &p.replace("21s", &format!("2{n}s")),
                )
                .await?;
            for z in &zone_procs {
                umbra_e2e::reconciled(z.api).await?;
            }
            settle(&zone_pids, 10, Duration::from_secs(120)).await?;
        }
        let r = ask(&global, &zone_pids).await?;
        println!(
            "  run {n}: {:.2} s, considered {}, changed {}, {} distinct operations, Global +{:.1} MiB, CPU Global {:.1} s / zones {:.1} s",
            r.wall.as_secs_f64(),
            r.body["totals"]["considered"],
            r.body["totals"]["changed"],
            r.body["changes"].as_array().map_or(0, Vec::len),
            r.growth_kib as f64 / 1024.0,
            r.global_cpu,
            r.zones_cpu
        );
        anyhow::ensure!(
            r.body["totals"]["considered"] == zones * dpps,
            "not every DPP was considered: {}",
            r.body["totals"]
        );
        walls.push(r.wall);
        growth = growth.max(r.growth_kib);
    }
    let again = ask(&global, &zone_pids).await?;
    println!(
        "  asked again, nothing changed: {:.3} s, CPU Global {:.2} s / zones {:.2} s",
        again.wall.as_secs_f64(),
        again.global_cpu,
        again.zones_cpu
    );
    walls.sort();
    let median = walls[walls.len() / 2];
    let migration = shadow == "migration";
    let command = format!(
        "cargo run --release -p umbra-bench -- fleet-diff --zones {zones} --dpps {dpps} --endpoints {endpoints} --shadow {shadow}"
    );
    let shape = format!(
        "{zones} zones x {dpps} DPPs, {OUTBOUNDS} outbounds of {endpoints} endpoints, {shadow} shadow"
    );
    // Issue 21's targets are for the migration; the one-service shape has none.
    let limit = if endpoints > 2 { 10.0 } else { 5.0 };
    let target = |t: Target| if migration { t } else { Target::None };
    Ok(vec![
        Row {
            what: format!("fleet shadow diff, {shape} (median of {runs})"),
            value: median.as_secs_f64(),
            unit: "s",
            target: target(Target::AtMost(limit)),
            anchor: "Kuma 2.7 has no fleet diff (its inspect answers one DPP at a time)",
            command: command.clone(),
        },
        Row {
            what: format!("fleet shadow diff asked again, nothing changed, {shape}"),
            value: ms(again.wall) / 1e3,
            unit: "s",
            target: if endpoints > 2 {
                Target::None
            } else {
                target(Target::AtMost(0.5))
            },
            anchor: "-",
            command: command.clone(),
        },
        Row {
            what: format!("Global RSS growth during the fleet diff, {shape}"),
            value: growth as f64 / 1024.0,
            unit: "MiB",
            target: Target::AtMost(100.0),
            anchor: "-",
            command,
        },
    ])
}
