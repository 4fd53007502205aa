//! Criterion benches of the pure hot paths (issue 21), on the generation mesh of
//! `umbra_bench::mesh` (1,000 services; a DPP with 1 inbound, 50 outbounds, 20 policies):
//! policy matching (building a view's policy set), rules for one DPP, generating its Live
//! snapshot, rendering it to JSON, and the Live -> Shadow diff (wire diff and full RFC 6902).
//! No I/O, one thread.
//!
//! Run: `cargo bench -p umbra-bench --bench hot_paths`. The test command runs each once
//! (`cargo test -p umbra-bench --bench hot_paths`, criterion's test mode) so they cannot rot.

// criterion_group!/criterion_main! generate undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use umbra_bench::mesh;
use umbra_core::resource::ResourceType;
use umbra_core::view::{PolicySet, View};
use umbra_xds::diff::{diff, snapshot_diff};
use umbra_xds::generate::generate;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn hot_paths(c: &mut Criterion) {
    let fixture = mesh::GenerationFixture::new(1_000, 50);
    let (resources, ctx, client, proxy) = (
        &fixture.resources,
        &fixture.ctx,
        fixture.client(),
        fixture.proxy(),
    );
    let live_set = PolicySet::build("default", resources, View::Live);
    let shadow_set = PolicySet::build("default", resources, View::Shadow);
    let live = generate(proxy, ctx, &live_set).expect("live");
    let shadow = generate(proxy, ctx, &shadow_set).expect("shadow");
    let (live_doc, shadow_doc) = (
        live.to_document().expect("render"),
        shadow.to_document().expect("render"),
    );

    c.bench_function("matching: policy set of a view (20 policies)", |b| {
        b.iter(|| PolicySet::build("default", black_box(resources), View::Live))
    });
    c.bench_function("rules: one DPP, 5 policy types", |b| {
        b.iter(|| {
            [
                ResourceType::MeshTimeout,
                ResourceType::MeshCircuitBreaker,
                ResourceType::MeshFaultInjection,
                ResourceType::MeshTrafficPermission,
                ResourceType::MeshProxyPatch,
            ]
            .map(|t| live_set.matched(t, black_box(client)).to_rules.0.len())
        })
    });
    c.bench_function("generation: one DPP, Live", |b| {
        b.iter(|| generate(proxy, ctx, black_box(&live_set)).expect("live"))
    });
    c.bench_function("render: one DPP's snapshot to JSON", |b| {
        b.iter(|| black_box(&live).to_document().expect("render"))
    });
    c.bench_function("diff: wire diff Live -> Shadow", |b| {
        b.iter(|| snapshot_diff(black_box(&live), black_box(&shadow)).expect("diff"))
    });
    c.bench_function("diff: RFC 6902 of rendered documents", |b| {
        b.iter(|| diff(black_box(&live_doc), black_box(&shadow_doc)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = hot_paths
}
criterion_main!(benches);
