//! One zone's reconcile pass in process (issue 39's propagation rows, without processes, KDS or
//! Envoys): a zone store holding the propagation scenario's mesh (`dpps` DPPs of
//! [`umbra_zone_cp::synthetic::dataplane`], `outbounds` outbounds each, `policies` policies of
//! every type), and [`Reconciler::reconcile_once`] timed after each of the propagation
//! scenario's two changes (a Mesh-wide MeshTimeout, then a MeshTimeout for one service's
//! outbounds) and after no change at all. Each figure is the median of `runs` passes, the
//! policy put back and forth between two contents so that every pass has work to do (a first,
//! untimed pass creates it). Uses the rayon pool of the zone's reconciler (one thread per core).

use std::time::{Duration, Instant};

use umbra_core::resource::Resource;
use umbra_zone_cp::reconciler::Reconciler;
use umbra_zone_cp::store::Store;
use umbra_zone_cp::synthetic;

use crate::measure::{percentile, Row, Target};
use crate::mesh;
use crate::scenarios::fleet_envoys::Size;

fn put(store: &Store, yaml: &str) -> anyhow::Result<()> {
    store.put(Resource::from_bytes(yaml.as_bytes())?, None)?;
    Ok(())
}

/// Median pass time and regenerated DPPs after each of `change`'s puts.
fn passes(
    store: &Store,
    rec: &Reconciler,
    runs: usize,
    change: impl Fn(usize) -> Option<String>,
) -> anyhow::Result<(Duration, usize)> {
    let mut times = Vec::with_capacity(runs);
    let mut regenerated = 0;
    // Run 0 creates the policy (or is a first idle pass) and is not timed.
    for run in 0..=runs {
        if let Some(y) = change(run) {
            put(store, &y)?;
        }
        let t = Instant::now();
        let n = rec.reconcile_once().regenerated;
        if run > 0 {
            times.push(t.elapsed());
            regenerated = regenerated.max(n);
        }
    }
    times.sort();
    Ok((percentile(&times, 50.0), regenerated))
}

/// Run it with `size` (the propagation scenario's, for one zone) and `runs` timed passes per
/// figure; the rows (first pass, no change, Mesh-wide change, one service's change).
///
/// # Errors
/// A resource the store refuses (a bug in the fixture).
pub fn run(size: Size, runs: usize) -> anyhow::Result<Vec<Row>> {
    let Size {
        dpps,
        outbounds,
        endpoints,
        policies,
    } = size;
    let services = size.services();
    let store = Store::new();
    put(&store, mesh::MESH)?;
    for (_, _, y) in mesh::every_type(policies, 4, services) {
        put(&store, &y)?;
    }
    for i in 0..dpps {
        put(&store, &synthetic::dataplane(0, i, services, outbounds))?;
    }
    let rec = Reconciler::new(store.clone());
    let t = Instant::now();
    let first = rec.reconcile_once().regenerated;
    let first_time = t.elapsed();
    let (idle, idle_regenerated) = passes(&store, &rec, runs, |_| None)?;
    let (mesh_wide, mesh_wide_regenerated) = passes(&store, &rec, runs, |run| {
        Some(format!("type: MeshTimeout\nmesh: default\nname: bench-mesh-wide\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {}s, http: {{requestTimeout: 7s}}}}\n", 40 + run % 2))
    })?;
    let (one, one_regenerated) = passes(&store, &rec, runs, |run| {
        Some(format!("type: MeshTimeout\nmesh: default\nname: bench-one-service\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-3}}\n    default: {{connectionTimeout: {}s}}\n", 8 + run % 2))
    })?;
    let command = format!(
        "cargo run --release -p umbra-bench -- reconcile --dpps {dpps} --outbounds {outbounds} --endpoints {endpoints} --policies {policies}"
    );
    let shape = format!(
        "{dpps} DPPs, {outbounds} outbounds, {policies} policies of every type, {} threads",
        rayon::current_num_threads()
    );
    let row = |what: String, d: Duration| Row {
        what,
        value: d.as_secs_f64() * 1e3,
        unit: "ms",
        target: Target::None,
        anchor: "-",
        command: command.clone(),
    };
    Ok(vec![
        row(
            format!("zone reconcile pass, first and cold ({shape}; {first} regenerated)"),
            first_time,
        ),
        row(
            format!("zone reconcile pass, nothing changed ({idle_regenerated} regenerated)"),
            idle,
        ),
        row(
            format!(
                "zone reconcile pass, Mesh-wide MeshTimeout ({mesh_wide_regenerated} regenerated)"
            ),
            mesh_wide,
        ),
        row(
            format!(
                "zone reconcile pass, one service's MeshTimeout ({one_regenerated} regenerated)"
            ),
            one,
        ),
    ])
}
