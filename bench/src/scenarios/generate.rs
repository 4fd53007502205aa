//! In-process generation figures (issues 3, 16, 21): one DPP with 1 inbound and 50 outbounds
//! in a mesh of 1,000 services with 20 policies; generating its Live snapshot against
//! prost-encoding that snapshot (target <= 3x), matching and rules alone, the JSON render plus
//! RFC 6902 diff of both views, the wire diff (`snapshot_diff`), and the same DPP with a 5-rule
//! MeshHTTPRoute per outbound. One thread, the CPs' allocator (jemalloc), no I/O.

use std::hint::black_box;
use std::time::{Duration, Instant};

use prost::Message;
use umbra_core::resource::ResourceType;
use umbra_core::view::{PolicySet, View};
use umbra_xds::diff::{diff, snapshot_diff};
use umbra_xds::generate::generate;
use umbra_xds::snapshot::Snapshot;

use crate::measure::{Row, Target};
use crate::mesh;

const SERVICES: usize = 1_000;
const OUTBOUNDS: usize = 50;
const COMMAND: &str = "cargo run --release -p umbra-bench -- generate";

fn time<T>(iters: u32, mut f: impl FnMut() -> T) -> Duration {
    for _ in 0..iters.min(10) {
        black_box(f());
    }
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed() / iters.max(1)
}

/// prost-encode every resource of `s`; the bytes written.
pub fn encode(s: &Snapshot) -> usize {
    s.clusters
        .values()
        .map(|m| m.encode_to_vec().len())
        .sum::<usize>()
        + s.endpoints
            .values()
            .map(|m| m.encode_to_vec().len())
            .sum::<usize>()
        + s.listeners
            .values()
            .map(|m| m.encode_to_vec().len())
            .sum::<usize>()
        + s.routes
            .values()
            .map(|m| m.encode_to_vec().len())
            .sum::<usize>()
}

/// Run it with `iters` iterations per figure; the rows, printed as they are measured.
///
/// # Errors
/// When generation fails (a bug: the fixture is valid).
pub fn run(iters: u32) -> anyhow::Result<Vec<Row>> {
    let fixture = mesh::GenerationFixture::new(SERVICES, OUTBOUNDS);
    let (resources, ctx, client, proxy) = (
        &fixture.resources,
        &fixture.ctx,
        fixture.client(),
        fixture.proxy(),
    );
    let live_set = PolicySet::build("default", resources, View::Live);
    let shadow_set = PolicySet::build("default", resources, View::Shadow);
    let live = generate(proxy, ctx, &live_set)?;
    let shadow = generate(proxy, ctx, &shadow_set)?;

    let t_generate = time(iters, || generate(proxy, ctx, &live_set));
    let t_encode = time(iters, || encode(&live));
    let t_matching = time(iters, || {
        use ResourceType::*;
        [
            MeshTimeout,
            MeshCircuitBreaker,
            MeshFaultInjection,
            MeshTrafficPermission,
            MeshProxyPatch,
        ]
        .map(|t| live_set.matched(t, client).to_rules.0.len())
    });
    let t_render_diff = time(iters, || {
        let a = live.to_document().expect("render");
        let b = shadow.to_document().expect("render");
        diff(&a, &b)
    });
    let t_wire_diff = time(iters, || snapshot_diff(&live, &shadow).expect("diff"));
    let (_, routed) = mesh::decode(&format!(
        "{}{}",
        mesh::generation_mesh(SERVICES, OUTBOUNDS),
        mesh::routes(OUTBOUNDS)
    ));
    let routed_set = PolicySet::build("default", &routed, View::Live);
    let t_routed = time(iters, || generate(proxy, ctx, &routed_set));
    let t_ctx = time(20, || {
        mesh::GenerationFixture::context(&fixture.mesh, resources)
    });
    let bytes = encode(&live);
    let shape = format!("1 inbound, {OUTBOUNDS} outbounds, 20 policies, {SERVICES} services");
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let row = |what: String, value: f64, unit, target, anchor| Row {
        what,
        value,
        unit,
        target,
        anchor,
        command: COMMAND.into(),
    };
    Ok(vec![
        row(
            format!("generate one DPP's Live snapshot ({shape})"),
            us(t_generate),
            "µs",
            Target::None,
            "Kuma 2.7: xDS generation p99 ~10 s per DPP at 2,000 DPPs (issue 21's anchor)",
        ),
        row(
            format!("prost-encode that snapshot ({bytes} bytes)"),
            us(t_encode),
            "µs",
            Target::None,
            "-",
        ),
        row(
            "generate / encode".into(),
            t_generate.as_secs_f64() / t_encode.as_secs_f64(),
            "x",
            Target::AtMost(3.0),
            "-",
        ),
        row(
            "of which matching + rules, 5 policy types".into(),
            us(t_matching),
            "µs",
            Target::None,
            "-",
        ),
        row(
            "wire diff Live -> Shadow (`snapshot_diff`), per DPP".into(),
            us(t_wire_diff) / 1e3,
            "ms",
            Target::AtMost(1.0),
            "-",
        ),
        row(
            "full JSON render of both views + RFC 6902 diff, per DPP".into(),
            us(t_render_diff) / 1e3,
            "ms",
            Target::None,
            "-",
        ),
        row(
            format!(
                "generate, each outbound with a 5-rule MeshHTTPRoute ({:.1}x route-free)",
                t_routed.as_secs_f64() / t_generate.as_secs_f64()
            ),
            us(t_routed),
            "µs",
            Target::None,
            "-",
        ),
        row(
            format!("mesh context build ({SERVICES} DPPs, once per mesh change)"),
            us(t_ctx) / 1e3,
            "ms",
            Target::None,
            "-",
        ),
    ])
}
