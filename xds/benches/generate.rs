//! Generation benchmark (issue 3 "Performance"), a bench binary that prints a table.
//!
//! Mesh of 1,000 services (one DPP each, HTTP), the measured DPP with 1 inbound and 50
//! outbounds, 20 matching policies of mixed types (half of them shadow). Measures, in one run:
//! - generate one Live snapshot vs prost-encoding that same snapshot (target: <= 3x);
//! - render both views to JSON + RFC 6902 diff (target: <= 1 ms per DPP), and JSON bytes per DPP;
//! - generate the same DPP when each of its 50 outbounds has a 5-rule MeshHTTPRoute (issue 16:
//!   header, prefix with rewrite, exact, method + query, weighted subset split), next to the
//!   route-free figure.
//!
//! Run: `cargo bench -p umbra-xds --bench generate` (release build).

use std::hint::black_box;
use std::time::{Duration, Instant};

use prost::Message;
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::diff::{diff, snapshot_diff};
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::Snapshot;

/// The allocator the `zone-cp` binary uses (see its `main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const SERVICES: usize = 1_000;
const OUTBOUNDS: usize = 50;

fn yaml() -> String {
    let mut y = String::from("type: Mesh\nname: default\n");
    for i in 0..SERVICES {
        y.push_str(&format!(
            "---\ntype: Dataplane\nmesh: default\nname: svc-{i}\nnetworking:\n  address: 10.{}.{}.{}\n  inbound:\n  - port: 8080\n    tags: {{kuma.io/service: svc-{i}, kuma.io/protocol: http, version: v{}}}\n",
            i / 65536 + 1,
            (i / 256) % 256,
            i % 256,
            i % 3
        ));
    }
    y.push_str("---\ntype: Dataplane\nmesh: default\nname: client\nnetworking:\n  address: 10.200.0.1\n  inbound:\n  - port: 9000\n    tags: {kuma.io/service: client, kuma.io/protocol: http, team: a}\n  outbound:\n");
    for i in 0..OUTBOUNDS {
        y.push_str(&format!(
            "  - {{port: {}, address: 127.0.0.1, tags: {{kuma.io/service: svc-{i}}}}}\n",
            10_000 + i
        ));
    }
    // 20 policies of mixed types; every other one shadow.
    for p in 0..20 {
        let shadow = if p % 2 == 1 {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        let body = match p % 5 {
            0 => format!("type: MeshTimeout\nmesh: default\nname: mt-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{connectionTimeout: {}s, idleTimeout: 30s, http: {{requestTimeout: 5s, streamIdleTimeout: 10s}}}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: 60s}}\n", p + 1),
            1 => format!("type: MeshTimeout\nmesh: default\nname: mt-all-{p}\n{shadow}spec:\n  targetRef: {{kind: MeshSubset, tags: {{team: a}}}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 2s, http: {{requestTimeout: {}s}}}}\n", p + 10),
            2 => format!("type: MeshCircuitBreaker\nmesh: default\nname: mcb-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionLimits: {{maxConnections: {}}}, outlierDetection: {{detectors: {{totalFailures: {{consecutive: 5}}}}}}}}\n", 100 + p),
            3 => format!("type: MeshFaultInjection\nmesh: default\nname: mfi-{p}\n{shadow}spec:\n  targetRef: {{kind: MeshService, name: client}}\n  from:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{http: [{{abort: {{httpStatus: 503, percentage: 10}}}}]}}\n"),
            _ => format!("type: MeshTrafficPermission\nmesh: default\nname: mtp-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  from:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{action: Allow}}\n"),
        };
        y.push_str("---\n");
        y.push_str(&body);
    }
    y
}

/// 50 MeshHTTPRoutes, one per outbound service of `client`, 5 rules each.
fn routes_yaml() -> String {
    let mut y = String::new();
    for i in 0..OUTBOUNDS {
        y.push_str(&format!(
            "---\ntype: MeshHTTPRoute\nmesh: default\nname: route-{i}\nspec:\n  targetRef: {{kind: MeshService, name: client}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-{i}}}\n    rules:\n    - matches: [{{path: {{type: PathPrefix, value: /}}, headers: [{{name: x-version, value: v1}}]}}]\n      default: {{backendRefs: [{{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v1}}}}]}}\n    - matches: [{{path: {{type: PathPrefix, value: /api}}}}]\n      default:\n        filters: [{{type: URLRewrite, urlRewrite: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: /v2/}}}}}}]\n        backendRefs: [{{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v2}}}}]\n    - matches: [{{path: {{type: Exact, value: /health}}}}]\n      default: {{}}\n    - matches: [{{method: POST, queryParams: [{{type: Exact, name: dry, value: 'true'}}]}}]\n      default: {{filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-dry, value: '1'}}]}}}}]}}\n    - matches: [{{path: {{type: PathPrefix, value: /}}}}]\n      default:\n        backendRefs:\n        - {{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v0}}, weight: 90}}\n        - {{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v1}}, weight: 10}}\n"
        ));
    }
    y
}

fn time<T>(iters: u32, mut f: impl FnMut() -> T) -> Duration {
    for _ in 0..iters.min(10) {
        black_box(f());
    }
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed() / iters
}

fn encode(s: &Snapshot) -> usize {
    let mut n = 0;
    n += s
        .clusters
        .values()
        .map(|m| m.encode_to_vec().len())
        .sum::<usize>();
    n += s
        .endpoints
        .values()
        .map(|m| m.encode_to_vec().len())
        .sum::<usize>();
    n += s
        .listeners
        .values()
        .map(|m| m.encode_to_vec().len())
        .sum::<usize>();
    n += s
        .routes
        .values()
        .map(|m| m.encode_to_vec().len())
        .sum::<usize>();
    n
}

fn main() {
    let resources = Resource::all_from_bytes(yaml().as_bytes()).expect("bench mesh decodes");
    let mesh = match &resources[0].spec {
        umbra_core::resource::Spec::Mesh(m) => m.clone(),
        _ => unreachable!("first document is the Mesh"),
    };
    let ctx = MeshContext::build(
        "default",
        &mesh,
        resources.iter().filter_map(Resource::as_dataplane),
    );
    let client = resources
        .iter()
        .find(|r| r.meta.name == "client")
        .and_then(Resource::as_dataplane)
        .expect("client");
    let live_set = PolicySet::build("default", &resources, View::Live);
    let shadow_set = PolicySet::build("default", &resources, View::Shadow);
    let proxy = Proxy {
        name: "client",
        dataplane: client,
    };
    let live = generate(proxy, &ctx, &live_set).expect("live");
    let shadow = generate(proxy, &ctx, &shadow_set).expect("shadow");

    let iters: u32 = std::env::var("UMBRA_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let t_generate = time(iters, || generate(proxy, &ctx, &live_set).expect("live"));
    let t_encode = time(iters, || encode(&live));
    let t_render_diff = time(iters, || {
        let a = live.to_document().expect("render");
        let b = shadow.to_document().expect("render");
        diff(&a, &b)
    });
    let t_matching = time(iters, || {
        use umbra_core::resource::ResourceType::*;
        [
            MeshTimeout,
            MeshCircuitBreaker,
            MeshFaultInjection,
            MeshTrafficPermission,
            MeshProxyPatch,
        ]
        .map(|t| live_set.matched(t, client).to_rules.0.len())
    });
    let t_fast_diff = time(iters, || snapshot_diff(&live, &shadow).expect("diff"));
    let routed = Resource::all_from_bytes(format!("{}{}", yaml(), routes_yaml()).as_bytes())
        .expect("routes decode");
    let routed_set = PolicySet::build("default", &routed, View::Live);
    let routed_snap = generate(proxy, &ctx, &routed_set).expect("routed");
    let routes_per_dpp = routed_snap
        .to_document()
        .expect("render")
        .to_string()
        .matches("\"match\":")
        .count();
    let t_routed = time(iters, || {
        generate(proxy, &ctx, &routed_set).expect("routed")
    });
    let t_mesh_ctx = time(20, || {
        MeshContext::build(
            "default",
            &mesh,
            resources.iter().filter_map(Resource::as_dataplane),
        )
    });
    let json_bytes =
        serde_json::to_vec(&live.to_document().expect("render")).map_or(0, |v| v.len());
    let patch_ops = diff(
        &live.to_document().expect("render"),
        &shadow.to_document().expect("render"),
    )
    .0
    .len();

    let ratio = t_generate.as_secs_f64() / t_encode.as_secs_f64();
    println!("| measurement | value | target |");
    println!("|---|---|---|");
    println!("| generate one Live snapshot (1 inbound, {OUTBOUNDS} outbounds, 20 policies, {SERVICES} services) | {:.1} µs | |", t_generate.as_secs_f64() * 1e6);
    println!(
        "| of which: matching + rule building, 5 new policy types | {:.1} µs | |",
        t_matching.as_secs_f64() * 1e6
    );
    println!(
        "| prost encode of that snapshot ({} bytes) | {:.1} µs | |",
        encode(&live),
        t_encode.as_secs_f64() * 1e6
    );
    println!(
        "| generate / encode | {ratio:.2}x | <= 3x {} |",
        if ratio <= 3.0 { "(met)" } else { "(missed)" }
    );
    println!(
        "| render Live + Shadow to JSON + RFC 6902 diff, per DPP | {:.3} ms | <= 1 ms {} |",
        t_render_diff.as_secs_f64() * 1e3,
        if t_render_diff <= Duration::from_millis(1) {
            "(met)"
        } else {
            "(missed)"
        }
    );
    println!("| diff only, rendering changed resources (`snapshot_diff`), per DPP | {:.3} ms | <= 1 ms {} |", t_fast_diff.as_secs_f64() * 1e3, if t_fast_diff <= Duration::from_millis(1) { "(met)" } else { "(missed)" });
    println!(
        "| generate one Live snapshot, each of the {OUTBOUNDS} outbounds with a 5-rule MeshHTTPRoute ({} Envoy routes, {} clusters) | {:.1} µs ({:.1}x route-free) | |",
        routes_per_dpp,
        routed_snap.clusters.len(),
        t_routed.as_secs_f64() * 1e6,
        t_routed.as_secs_f64() / t_generate.as_secs_f64()
    );
    println!("| JSON bytes per DPP (Live document) | {json_bytes} | |");
    println!("| diff operations Live -> Shadow | {patch_ops} | |");
    println!(
        "| mesh context build ({SERVICES} DPPs, once per mesh change) | {:.2} ms | |",
        t_mesh_ctx.as_secs_f64() * 1e3
    );
}
