//! Issue 39, item 3: the Shadow view built from the Live one ([`shadow_from_live`]) equals the
//! Shadow view generated whole, for every DPP of random meshes, policies and shadow sets.
//!
//! A mesh is one variant (or none) of each slot below: Dataplanes (plain, behind a transparent
//! proxy with two outbounds to one service, a route's backend reached only through the route),
//! and live and shadow policies of every kind the splice must tell apart: `to` entries naming
//! one service (the spliced path), Mesh-wide `to`, `from`, top-level `default`, routes and old
//! policies superseded in the Shadow view (the whole path), and the first policy of a type. The
//! admin and DNS inputs are given, as the zone gives them. Every run draws a fresh seed; the
//! run fails unless each path was taken.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use umbra_core::dependencies::shadow::{view_difference, ViewDifference};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::view::{PolicySet, Promotion, View};
use umbra_xds::base::admin::EnvoyAdmin;
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, DnsInput, Proxy};
use umbra_xds::shadow::{shadow_from_live, Shadow};

const SHADOW: &str = "labels: {kuma.io/effect: shadow}\n";

/// Each slot: its variants; a mesh takes one of them or none. `{s}` is the shadow label.
const SLOTS: &[&[&str]] = &[
    &[
        "type: Mesh\nname: m\n",
        "type: Mesh\nname: m\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - {name: ca-1, type: builtin}\n",
    ],
    &[
        "type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/protocol: http}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n  - {port: 9002, tags: {kuma.io/service: db}}\n  - {port: 9003, tags: {kuma.io/service: cache}}\n",
        "type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/protocol: http}\n  outbound:\n  - {port: 80, address: 240.0.0.1, tags: {kuma.io/service: backend}}\n  - {port: 80, address: 240.0.0.2, tags: {kuma.io/service: db}}\n  - {port: 9001, tags: {kuma.io/service: backend}}\n  - {port: 80, address: 240.0.0.3, tags: {kuma.io/service: cache}}\n  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001}\n",
    ],
    &[
        "type: Dataplane\nmesh: m\nname: backend-1\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: http}\n  outbound:\n  - {port: 9002, tags: {kuma.io/service: db}}\n",
        "type: Dataplane\nmesh: m\nname: backend-1\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: tcp, version: v2}\n",
    ],
    &[
        "type: Dataplane\nmesh: m\nname: db-1\nnetworking:\n  address: 10.0.0.3\n  inbound:\n  - port: 5432\n    tags: {kuma.io/service: db, kuma.io/protocol: tcp}\n",
        "type: Dataplane\nmesh: m\nname: db-1\nnetworking:\n  address: 10.0.0.3\n  inbound:\n  - port: 5432\n    tags: {kuma.io/service: db, kuma.io/protocol: tcp}\n  - port: 9902\n    tags: {kuma.io/service: db-admin, kuma.io/protocol: http}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n",
    ],
    &[
        "type: Dataplane\nmesh: m\nname: cache-1\nnetworking:\n  address: 10.0.0.4\n  inbound:\n  - port: 6379\n    tags: {kuma.io/service: cache, kuma.io/protocol: http}\n",
    ],
    &[
        "type: Dataplane\nmesh: m\nname: canary-1\nnetworking:\n  address: 10.0.0.5\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: canary, kuma.io/protocol: http}\n",
    ],
    // Live policies.
    &[
        "type: MeshTimeout\nmesh: m\nname: mt-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 11s}}]\n  from: [{targetRef: {kind: Mesh}, default: {idleTimeout: 12s}}]\n",
        "type: MeshTimeout\nmesh: m\nname: mt-all\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to: [{targetRef: {kind: Mesh}, default: {http: {requestTimeout: 3s}}}]\n",
    ],
    &[
        "type: MeshCircuitBreaker\nmesh: m\nname: mcb-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {connectionLimits: {maxConnections: 8}}}]\n",
        "type: MeshCircuitBreaker\nmesh: m\nname: mcb-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {connectionLimits: {maxConnections: 8}}}, {targetRef: {kind: MeshServiceSubset, name: backend, tags: {version: v2}}, default: {connectionLimits: {maxConnections: 9}}}]\n",
    ],
    &[
        "type: MeshRetry\nmesh: m\nname: mr-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {http: {numRetries: 2}}}]\n",
    ],
    &[
        "type: MeshAccessLog\nmesh: m\nname: mal-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {backends: [{type: File, file: {path: /dev/stdout}}]}}]\n",
        "type: MeshAccessLog\nmesh: m\nname: mal-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {backends: [{type: OpenTelemetry, openTelemetry: {endpoint: 'otel:4317'}}]}}, {targetRef: {kind: MeshService, name: backend}, default: {backends: [{type: OpenTelemetry, openTelemetry: {endpoint: 'otel:4317'}}]}}]\n",
    ],
    &[
        "type: MeshHTTPRoute\nmesh: m\nname: split\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: cache}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default:\n        backendRefs: [{kind: MeshService, name: cache, weight: 1}, {kind: MeshService, name: canary, weight: 1}]\n",
        "type: MeshHTTPRoute\nmesh: m\nname: split\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: cache}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /db}}]\n      default:\n        backendRefs: [{kind: MeshServiceSubset, name: db, tags: {version: v1}, weight: 1}, {kind: MeshService, name: cache, weight: 1}]\n",
        "type: MeshHTTPRoute\nmesh: m\nname: split\n{s}spec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshService, name: db, weight: 1}]\n",
    ],
    &[
        "type: Timeout\nmesh: m\nname: old-timeout\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 4s}\n",
    ],
    &[
        "type: MeshLoadBalancingStrategy\nmesh: m\nname: mlbs-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {loadBalancer: {type: RoundRobin}}}]\n",
    ],
    &[
        "type: MeshHealthCheck\nmesh: m\nname: mhc-all\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {interval: 10s, timeout: 2s, unhealthyThreshold: 3, healthyThreshold: 1}}]\n",
    ],
    // Shadow policies whose `to` names services (spliced when the type already applies).
    &[
        "type: MeshTimeout\nmesh: m\nname: s-mt\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {idleTimeout: 21s, http: {requestTimeout: 5s}}}]\n",
        "type: MeshTimeout\nmesh: m\nname: s-mt\n{s}spec:\n  targetRef: {kind: MeshService, name: web}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {connectionTimeout: 2s}}, {targetRef: {kind: MeshService, name: canary}, default: {idleTimeout: 22s}}]\n",
        "type: MeshTimeout\nmesh: m\nname: s-mt\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 23s}}]\n",
    ],
    &[
        "type: MeshCircuitBreaker\nmesh: m\nname: s-mcb\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {connectionLimits: {maxConnections: 2}, outlierDetection: {disabled: false, detectors: {totalFailures: {consecutive: 3}}}}}]\n",
        "type: MeshCircuitBreaker\nmesh: m\nname: s-mcb\n{s}spec:\n  targetRef: {kind: MeshSubset, tags: {kuma.io/service: web}}\n  to: [{targetRef: {kind: MeshService, name: canary}, default: {connectionLimits: {maxPendingRequests: 3}}}]\n",
    ],
    &[
        "type: MeshRetry\nmesh: m\nname: s-mr\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: cache}, default: {http: {numRetries: 4, retryOn: [5xx]}}}]\n",
        "type: MeshRetry\nmesh: m\nname: s-mr\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {tcp: {maxConnectAttempt: 3}}}]\n",
    ],
    &[
        "type: MeshAccessLog\nmesh: m\nname: s-mal\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {backends: [{type: File, file: {path: /tmp/db.log}}]}}]\n",
        "type: MeshAccessLog\nmesh: m\nname: s-mal\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {backends: [{type: OpenTelemetry, openTelemetry: {endpoint: 'otel:4317'}}]}}]\n",
        "type: MeshAccessLog\nmesh: m\nname: s-mal\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: cache}, default: {backends: [{type: Tcp, tcp: {address: 'logs:5000'}}]}}]\n",
    ],
    &[
        "type: MeshLoadBalancingStrategy\nmesh: m\nname: s-mlbs\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: cache}, default: {loadBalancer: {type: LeastRequest, leastRequest: {choiceCount: 3}}}}]\n",
        "type: MeshLoadBalancingStrategy\nmesh: m\nname: s-mlbs\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {localityAwareness: {disabled: true}}}]\n",
    ],
    &[
        "type: MeshHealthCheck\nmesh: m\nname: s-mhc\n{s}spec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: canary}, default: {interval: 5s, timeout: 1s, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /health}}}]\n",
    ],
    // Shadow policies that may change anything.
    &[
        "type: MeshFaultInjection\nmesh: m\nname: s-mfi\n{s}spec:\n  targetRef: {kind: MeshService, name: db}\n  from: [{targetRef: {kind: Mesh}, default: {http: [{delay: {value: 1s, percentage: 10}}]}}]\n",
        "type: MeshTrafficPermission\nmesh: m\nname: s-mfi\n{s}spec:\n  targetRef: {kind: Mesh}\n  from: [{targetRef: {kind: MeshService, name: web}, default: {action: Deny}}]\n",
        "type: MeshProxyPatch\nmesh: m\nname: s-mfi\n{s}spec:\n  targetRef: {kind: Mesh}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: db}\n        value: 'connectTimeout: 7s'\n",
        "type: Timeout\nmesh: m\nname: s-mfi\n{s}sources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: db}}]\nconf: {connectTimeout: 9s}\n",
    ],
];

/// How likely each slot is in a mesh: the Mesh and web always; the live policies that make a
/// type apply often, the shadow policies that may change anything rarely, so that every path
/// is taken often.
const LIKELIHOOD: [f64; 21] = [
    1.0, 1.0, 0.6, 0.6, 0.6, 0.6, // Mesh, Dataplanes
    0.8, 0.7, 0.7, 0.7, 0.4, 0.2, 0.6, 0.6, // live policies
    0.4, 0.4, 0.4, 0.4, 0.4, 0.4,  // shadow, `to` services
    0.15, // shadow, anything
];

/// One variant (or none) per slot.
fn mesh() -> impl Strategy<Value = Vec<Option<usize>>> {
    SLOTS
        .iter()
        .zip(LIKELIHOOD)
        .map(|(variants, p)| {
            let n = variants.len();
            if p >= 1.0 {
                (0..n).prop_map(Some).boxed()
            } else {
                proptest::option::weighted(p, 0..n).boxed()
            }
        })
        .collect::<Vec<_>>()
}

fn resources(choice: &[Option<usize>]) -> Vec<Resource> {
    let text: Vec<String> = (choice.iter().enumerate())
        .filter_map(|(slot, v)| v.map(|v| SLOTS[slot][v].replace("{s}", SHADOW)))
        .collect();
    Resource::all_from_bytes(text.join("---\n").as_bytes()).unwrap()
}

#[derive(Debug, Default)]
struct Paths {
    unchanged: usize,
    spliced: usize,
    regenerated: usize,
    /// Regenerated though only some outbounds could differ: a splice check failed.
    splice_refused: usize,
    /// Spliced, and different from the Live snapshot.
    spliced_changed: usize,
}

fn check(choice: &[Option<usize>], paths: &mut Paths) -> Result<(), TestCaseError> {
    let rs = resources(choice);
    let Spec::Mesh(mesh) = &rs[0].spec else {
        unreachable!("slot 0 is the Mesh")
    };
    let dps: Vec<_> = (rs.iter())
        .filter(|r| r.ty() == ResourceType::Dataplane)
        .collect();
    let ctx = MeshContext::build("m", mesh, dps.iter().filter_map(|r| r.as_dataplane()));
    let live_set = PolicySet::build("m", &rs, View::Live);
    let shadow_set = PolicySet::build_shadow("m", &rs, &Promotion::All);
    let admin = EnvoyAdmin {
        port: 9901,
        ca_pem: "ca".into(),
        cert_pem: "cert".into(),
        key_pem: "key".into(),
    };
    let dns = DnsInput {
        port: 15054,
        domains: vec![
            ("backend.mesh".into(), "240.0.0.1".into()),
            ("db.mesh".into(), "240.0.0.2".into()),
            ("cache.mesh".into(), "240.0.0.3".into()),
        ],
    };
    for r in &dps {
        let proxy = Proxy {
            name: &r.meta.name,
            dataplane: r.as_dataplane().unwrap(),
            admin: Some(&admin),
            dns: Some(&dns),
        };
        let Ok(live) = generate(proxy, &ctx, &live_set) else {
            continue; // no Live snapshot is served
        };
        let whole = generate(proxy, &ctx, &shadow_set);
        let difference = view_difference(proxy.dataplane, &live_set, &shadow_set);
        let from_live = shadow_from_live(
            proxy,
            &ctx,
            &live_set,
            &shadow_set,
            difference.clone(),
            &live,
        );
        match (whole, from_live) {
            (Ok(whole), Ok(shadow)) => {
                let snap = shadow.snapshot(&live);
                match &shadow {
                    Shadow::Unchanged => paths.unchanged += 1,
                    Shadow::Spliced { .. } => {
                        paths.spliced += 1;
                        paths.spliced_changed += usize::from(*snap != live);
                    }
                    Shadow::Regenerated(_) => paths.regenerated += 1,
                }
                let regenerated = matches!(shadow, Shadow::Regenerated(_));
                if regenerated && difference != ViewDifference::Whole {
                    paths.splice_refused += 1;
                }
                let path = match &shadow {
                    Shadow::Unchanged => "unchanged".to_owned(),
                    Shadow::Spliced { outbounds, .. } => format!("spliced, {outbounds} outbounds"),
                    Shadow::Regenerated(_) => "regenerated".to_owned(),
                };
                if *snap != whole {
                    let (a, b) = (whole.to_document(), snap.to_document());
                    let patch = json_patch::diff(&a.unwrap(), &b.unwrap());
                    return Err(TestCaseError::fail(format!(
                        "{} ({path}): from Live differs from whole: {}",
                        r.meta.name,
                        serde_json::to_string(&patch).unwrap()
                    )));
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => {
                return Err(TestCaseError::fail(format!(
                    "{}: whole {:?}, from Live {:?}",
                    r.meta.name,
                    a.err(),
                    b.err()
                )))
            }
        }
    }
    Ok(())
}

#[test]
fn shadow_from_live_equals_whole_regeneration() {
    // A fresh seed every run (TestRunner::new); failures print the mesh's slot choices.
    let mut runner = TestRunner::new(Config {
        cases: 192,
        failure_persistence: None,
        ..Config::default()
    });
    let paths = std::cell::RefCell::new(Paths::default());
    let result = runner.run(&mesh(), |choice| check(&choice, &mut paths.borrow_mut()));
    if let Err(e) = result {
        panic!("{e}");
    }
    let paths = paths.into_inner();
    eprintln!("{paths:?}");
    // Each path taken, or the property says nothing about it.
    assert!(
        paths.spliced_changed >= 20 && paths.regenerated >= 20 && paths.unchanged >= 20,
        "{paths:?}"
    );
}
