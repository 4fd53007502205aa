//! Property (issue 3, deliverable 5): over generated meshes and policies (every policy family,
//! old and new, shadow or not, mTLS on or off), applying the Live →
//! Shadow diff to the live document yields the shadow document exactly, for both the full-document
//! diff and [`snapshot_diff`]; `shadow=false` (Live vs Live) gives `[]`.

use proptest::prelude::*;
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::diff::{apply, diff, snapshot_diff, snapshot_diff_cached, DiffCache};
use umbra_xds::generate::{generate, Proxy};

#[derive(Debug, Clone)]
struct Policy {
    kind: u8,
    shadow: bool,
    target: Option<usize>,
    seconds: u32,
}

fn mesh_yaml(protocols: &[bool], outbounds: &[usize], policies: &[Policy], mtls: bool) -> String {
    let mut y = String::from("type: Mesh\nname: m\n");
    if mtls {
        y.push_str("mtls: {enabledBackend: ca, backends: [{name: ca, type: builtin}]}\n");
    }
    for (i, http) in protocols.iter().enumerate() {
        let proto = if *http { "http" } else { "tcp" };
        y.push_str(&format!(
            "---\ntype: Dataplane\nmesh: m\nname: dp-{i}\nnetworking:\n  address: 10.0.0.{}\n  inbound:\n  - port: {}\n    tags: {{kuma.io/service: svc-{i}, kuma.io/protocol: {proto}}}\n",
            i + 1,
            8000 + i
        ));
        if i == 0 {
            y.push_str("  outbound:\n");
            for o in outbounds {
                y.push_str(&format!(
                    "  - {{port: {}, tags: {{kuma.io/service: svc-{o}}}}}\n",
                    9000 + o
                ));
            }
        }
    }
    for (n, p) in policies.iter().enumerate() {
        let labels = if p.shadow {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        let to = p.target.map_or_else(
            || "{kind: Mesh}".to_owned(),
            |t| format!("{{kind: MeshService, name: svc-{t}}}"),
        );
        let s = p.seconds;
        let body = match p.kind % 8 {
            4 => format!("type: MeshFaultInjection\nmesh: m\nname: p{n}\n{labels}spec:\n  targetRef: {{kind: Mesh, proxyTypes: [Sidecar]}}\n  from:\n  - targetRef: {to}\n    default: {{http: [{{abort: {{httpStatus: 503, percentage: {}}}}}]}}\n", s % 100),
            5 => format!("type: MeshTrafficPermission\nmesh: m\nname: p{n}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  from:\n  - targetRef: {to}\n    default: {{action: {}}}\n", if s % 2 == 0 { "Allow" } else { "Deny" }),
            6 => format!("type: MeshProxyPatch\nmesh: m\nname: p{n}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Add\n        value: '{{name: extra-{n}, connectTimeout: {s}s, type: STATIC}}'\n"),
            7 => format!("type: TrafficPermission\nmesh: m\nname: p{n}\nsources:\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: '*'}}\n"),
            0 => format!("type: MeshTimeout\nmesh: m\nname: p{n}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {to}\n    default: {{connectionTimeout: {s}s, idleTimeout: {}s, http: {{requestTimeout: {}s}}}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {}s}}\n", s + 1, s + 2, s + 3),
            1 => format!("type: MeshCircuitBreaker\nmesh: m\nname: p{n}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {to}\n    default: {{connectionLimits: {{maxConnections: {}}}}}\n", s + 1),
            2 => format!("type: Timeout\nmesh: m\nname: p{n}\nsources:\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: '*'}}\nconf:\n  connectTimeout: {}s\n  http: {{requestTimeout: {s}s, idleTimeout: {s}s}}\n  tcp: {{idleTimeout: {s}s}}\n", s + 1),
            _ => format!("type: CircuitBreaker\nmesh: m\nname: p{n}\nsources:\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: '*'}}\nconf:\n  thresholds: {{maxConnections: {}}}\n  detectors: {{totalErrors: {{consecutive: 3}}}}\n", s + 1),
        };
        y.push_str("---\n");
        y.push_str(&body);
    }
    y
}

fn arb_policy(services: usize) -> impl Strategy<Value = Policy> {
    (
        0u8..4,
        any::<bool>(),
        proptest::option::of(0..services),
        1u32..100,
    )
        .prop_map(|(kind, shadow, target, seconds)| Policy {
            kind,
            shadow,
            target,
            seconds,
        })
}

fn arb_case() -> impl Strategy<Value = (Vec<bool>, Vec<usize>, Vec<Policy>, bool)> {
    (2usize..6).prop_flat_map(|n| {
        (
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::btree_set(0..n, 0..n)
                .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
            proptest::collection::vec(arb_policy(n), 0..6),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn applying_the_diff_to_live_yields_shadow((protocols, outbounds, policies, mtls) in arb_case()) {
        let yaml = mesh_yaml(&protocols, &outbounds, &policies, mtls);
        let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
        let mesh = match &resources[0].spec { umbra_core::resource::Spec::Mesh(m) => m.clone(), _ => unreachable!() };
        let ctx = MeshContext::build("m", &mesh, resources.iter().filter_map(Resource::as_dataplane));
        let dp = resources.iter().find(|r| r.meta.name == "dp-0").and_then(Resource::as_dataplane).unwrap();
        let proxy = Proxy { name: "dp-0", dataplane: dp, admin: None, dns: None };
        let live = generate(proxy, &ctx, &PolicySet::build("m", &resources, View::Live)).unwrap();
        let shadow = generate(proxy, &ctx, &PolicySet::build("m", &resources, View::Shadow)).unwrap();
        let (l, s) = (live.to_document().unwrap(), shadow.to_document().unwrap());
        prop_assert_eq!(apply(&l, &diff(&l, &s)).unwrap(), s.clone());
        prop_assert_eq!(apply(&l, &snapshot_diff(&live, &shadow).unwrap()).unwrap(), s.clone());
        prop_assert!(diff(&l, &l).0.is_empty());
        prop_assert!(snapshot_diff(&live, &live).unwrap().0.is_empty());
        // The cached diff is the same patch, on a miss and on a hit.
        let cache = DiffCache::new(1000);
        let uncached = snapshot_diff(&live, &shadow).unwrap();
        prop_assert_eq!(&snapshot_diff_cached(&live, &shadow, &cache).unwrap(), &uncached);
        prop_assert_eq!(&snapshot_diff_cached(&live, &shadow, &cache).unwrap(), &uncached);
        // Every other DPP with the same cache: its resources differ from dp-0's (names, tags)
        // but share sub-messages, whose kept operations must give the same patch.
        for other in resources.iter().filter(|r| r.meta.name != "dp-0") {
            let Some(dp) = other.as_dataplane() else { continue };
            let proxy = Proxy { name: &other.meta.name, dataplane: dp, admin: None, dns: None };
            let live = generate(proxy, &ctx, &PolicySet::build("m", &resources, View::Live)).unwrap();
            let shadow = generate(proxy, &ctx, &PolicySet::build("m", &resources, View::Shadow)).unwrap();
            let uncached = snapshot_diff(&live, &shadow).unwrap();
            prop_assert_eq!(&snapshot_diff_cached(&live, &shadow, &cache).unwrap(), &uncached, "{}", other.meta.name);
        }
        if !policies.iter().any(|p| p.shadow) {
            prop_assert_eq!(l, s, "without shadow policies both views are the same");
        }
    }
}
