//! Zone-side cost of the fleet-wide shadow diff (issue 6), printed as a table: one mesh of
//! `UMBRA_BENCH_DPPS` (default 2,000) DPPs, each with one HTTP inbound and 50 outbounds to
//! service VIPs of `UMBRA_BENCH_SERVICES` (default 100) services, and the shadow policies of
//! `UMBRA_BENCH_SHADOW` (default `migration`: 10 live Timeouts and their 10 MeshTimeout
//! replacements as shadow, the topology of `umbra-bench fleet-diff`, one zone; `one-service`:
//! one shadow MeshTimeout to one service). Times [`MeshShadow::prepare`] and
//! [`MeshShadow::diff`] over every DPP, on one thread and on the inspect pool's threads.
//!
//! Run: `cargo bench -p umbra-zone-cp --bench shadow`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, Promotion, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::Snapshot;
use umbra_zone_cp::inspect::MeshShadow;
use umbra_zone_cp::synthetic;

const OUTBOUNDS: usize = 50;

/// The allocator the `zone-cp` binary uses, so the figures match the process the fan-out bench
/// runs.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Services in the mesh (`UMBRA_BENCH_SERVICES`, default 100): DPPs are spread over them, so
/// each outbound has `DPPs / services` endpoints.
fn services() -> usize {
    std::env::var("UMBRA_BENCH_SERVICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize)
        .max(OUTBOUNDS + 1)
}

/// The shadow policies (`UMBRA_BENCH_SHADOW`, [`synthetic::shape`]): `migration` (default)
/// changes every listener of every DPP; `one-service` changes one outbound of the DPPs calling
/// `svc-1` (about half of them with the default 100 services).
fn policies() -> Vec<String> {
    let name = std::env::var("UMBRA_BENCH_SHADOW").unwrap_or_else(|_| "migration".into());
    synthetic::shape(&name)
        .unwrap_or_else(|| panic!("UMBRA_BENCH_SHADOW={name}: expected migration or one-service"))
}

fn resources(dpps: usize) -> Vec<Resource> {
    let mut y = vec!["type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n".to_owned()];
    y.extend(policies());
    y.extend((0..dpps).map(|i| synthetic::dataplane(0, i, services(), OUTBOUNDS)));
    y.iter()
        .map(|s| Resource::from_bytes(s.as_bytes()).expect("valid"))
        .collect()
}

fn main() {
    let dpps: usize = std::env::var("UMBRA_BENCH_DPPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rs = resources(dpps);
    let names: Vec<String> = (0..dpps).map(|i| format!("dp-{i}")).collect();
    let t = Instant::now();
    let shadow = MeshShadow::prepare(rs.clone(), &Default::default(), "default", &Promotion::All)
        .expect("prepare");
    let prepare = t.elapsed();
    let t = Instant::now();
    let ops: usize = names
        .iter()
        .take(200)
        .map(|n| shadow.diff(n).expect("diff").0.len())
        .sum();
    let one_thread = t.elapsed() / 200;
    let shadow = MeshShadow::prepare(rs.clone(), &Default::default(), "default", &Promotion::All)
        .expect("prepare");
    let t = Instant::now();
    names.par_iter().for_each(|n| {
        shadow.diff(n).expect("diff");
    });
    let parallel = t.elapsed();
    // What the reconciler holds: every DPP's Live snapshot.
    let mesh = umbra_core::mesh::MeshSpec::default();
    let ctx = MeshContext::build(
        "default",
        &mesh,
        rs.iter().filter_map(Resource::as_dataplane),
    );
    let live_set = PolicySet::build("default", &rs, View::Live);
    let served: HashMap<String, Arc<Snapshot>> = rs
        .par_iter()
        .filter_map(|r| {
            let dp = r.as_dataplane()?;
            let proxy = Proxy {
                name: &r.meta.name,
                dataplane: dp,
                admin: None,
                dns: None,
            };
            Some((
                r.meta.name.clone(),
                Arc::new(generate(proxy, &ctx, &live_set).expect("generate")),
            ))
        })
        .collect();
    let shadow = MeshShadow::prepare(rs.clone(), &Default::default(), "default", &Promotion::All)
        .expect("prepare")
        .with_live_snapshots(served);
    let t = Instant::now();
    let differing = names
        .par_iter()
        .filter(|n| !shadow.diff(n).expect("diff").0.is_empty())
        .count();
    let reused = t.elapsed();
    println!(
        "| measurement ({dpps} DPPs, {OUTBOUNDS} outbounds each, {} services, shadow: {}) | value |",
        services(),
        std::env::var("UMBRA_BENCH_SHADOW").unwrap_or_else(|_| "migration".into())
    );
    println!("|---|---|");
    println!(
        "| prepare (mesh context, both views) | {:.1} ms |",
        prepare.as_secs_f64() * 1e3
    );
    println!(
        "| one DPP's diff, one thread (first 200, cold cache) | {:.2} ms ({:.1} operations per DPP) |",
        one_thread.as_secs_f64() * 1e3,
        ops as f64 / 200.0
    );
    println!(
        "| every DPP, {} threads (cold cache) | {:.2} s = {:.2} ms per DPP |",
        rayon::current_num_threads(),
        parallel.as_secs_f64(),
        parallel.as_secs_f64() * 1e3 / dpps as f64
    );
    println!(
        "| same, reusing the served Live snapshots | {:.2} s = {:.2} ms per DPP ({differing} DPPs differ) |",
        reused.as_secs_f64(),
        reused.as_secs_f64() * 1e3 / dpps as f64
    );
}
