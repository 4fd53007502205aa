//! FaultInjection and MeshFaultInjection on inbound listeners (Kuma 2.7 shapes, see
//! `src/plugins/fault_injection.rs`): the transition seed's "FaultInjection -> MeshFaultInjection"
//! on kuma-demo as a Live/Shadow diff, the MeshFaultInjection MADR's merge example (seed 004),
//! rules with negations, and the protocols each generation covers. Every snapshot is compared
//! with a golden file and checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::diff::{apply, diff};
use umbra_xds::generate::{generate, GenerateError, Proxy};
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const FAULT_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault";
fn router() -> Value {
    json!({
        "name": "envoy.filters.http.router",
        "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
    })
}

fn fault(config: Value) -> Value {
    let mut typed = json!({ "@type": FAULT_TYPE });
    if let (Some(t), Value::Object(c)) = (typed.as_object_mut(), config) {
        t.extend(c);
    }
    json!({"name": "envoy.filters.http.fault", "typedConfig": typed})
}

fn string_regex(regex: &str, invert: bool) -> Value {
    let mut m = json!({"name": "x-kuma-tags", "stringMatch": {"safeRegex": {"regex": regex}}});
    if invert {
        m["invertMatch"] = json!(true);
    }
    m
}

/// The HTTP filters of the (only) HCM of `listener` in a config document.
fn http_filters(doc: &Value, listener: &str) -> Value {
    doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]["httpFilters"].clone()
}

fn generate_result(
    resources: &[Resource],
    dp_name: &str,
    view: View,
) -> Result<Snapshot, GenerateError> {
    let mesh = resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) => Some((r.meta.name.clone(), m.clone())),
            _ => None,
        })
        .expect("a Mesh resource");
    let dps = resources
        .iter()
        .filter(|r| r.ty() == ResourceType::Dataplane)
        .filter_map(Resource::as_dataplane);
    let ctx = MeshContext::build(&mesh.0, &mesh.1, dps);
    let dp = resources
        .iter()
        .find(|r| r.ty() == ResourceType::Dataplane && r.meta.name == dp_name)
        .and_then(Resource::as_dataplane)
        .expect("dataplane");
    let policies = PolicySet::build(&mesh.0, resources, view);
    generate(
        Proxy {
            name: dp_name,
            dataplane: dp,
            admin: None,
            dns: None,
        },
        &ctx,
        &policies,
    )
}

/// The seed's transition on kuma-demo: a FaultInjection live on the frontend, the equivalent
/// MeshFaultInjection as shadow. The Shadow view drops the superseded FaultInjection and applies
/// the MeshFaultInjection; the faults are identical, only the matcher's form changes.
#[test]
fn fault_injection_to_mesh_fault_injection_changes_only_the_matcher_form() {
    let resources = load("fault-injection.yaml");
    let live = snapshot(&resources, "frontend", View::Live);
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    let patch_json = serde_json::to_value(&patch).unwrap();
    golden("fault-injection.live.json", &live_doc);
    golden("fault-injection.shadow-diff.json", &patch_json);

    let faults = json!({
        "delay": {"fixedDelay": "5s", "percentage": {"numerator": 5050, "denominator": "TEN_THOUSAND"}},
        "abort": {"httpStatus": 500, "percentage": {"numerator": 10}},
        "responseRateLimit": {"fixedLimit": {"limitKbps": "50"}, "percentage": {"numerator": 40}},
    });
    let regex = ".*&kuma.io/service=[^&]*backend_kuma-demo_svc_3001[,&].*";
    let with_headers = |headers: Value| {
        let mut f = faults.clone();
        f["headers"] = headers;
        fault(f)
    };
    let inbound = "inbound:10.42.0.29:8080";
    assert_eq!(
        http_filters(&live_doc, inbound),
        json!([
            with_headers(json!([{"name": "x-kuma-tags", "safeRegexMatch": {"regex": regex}}])),
            router()
        ])
    );
    assert_eq!(
        http_filters(&shadow_doc, inbound),
        json!([with_headers(json!([string_regex(regex, false)])), router()])
    );

    let headers = format!(
        "/type.googleapis.com~1envoy.config.listener.v3.Listener/{inbound}/filterChains/0/filters/0/typedConfig/httpFilters/0/typedConfig/headers/0"
    );
    assert_eq!(
        patch_json,
        json!([
            {"op": "add", "path": format!("{headers}/stringMatch"), "value": {"safeRegex": {"regex": regex}}},
            {"op": "remove", "path": format!("{headers}/safeRegexMatch")},
        ])
    );

    envoy_validates(&live);
    envoy_validates(&shadow);
}

/// The backend is not a destination of the FaultInjection: untouched in both views.
#[test]
fn fault_injection_leaves_other_dataplanes_alone() {
    let resources = load("fault-injection.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    let shadow = snapshot(&resources, "backend", View::Shadow);
    assert_eq!(live, shadow);
    let doc = live.to_document().unwrap();
    golden("fault-injection.backend.json", &doc);
    assert_eq!(
        http_filters(&doc, "inbound:10.42.0.30:3001"),
        json!([router()])
    );
    envoy_validates(&live);
}

/// Promoting the shadow MeshFaultInjection (dropping the label) gives, in the Live view, the
/// config the Shadow view announced: the FaultInjection is superseded, the new policy applies.
#[test]
fn promoting_the_shadow_policy_applies_what_the_shadow_view_showed() {
    let resources = load("fault-injection.yaml");
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let promoted: Vec<Resource> = resources
        .iter()
        .cloned()
        .map(|mut r| {
            if r.ty() == ResourceType::MeshFaultInjection {
                r.meta.labels.remove("kuma.io/effect");
            }
            r
        })
        .collect();
    for view in [View::Live, View::Shadow] {
        let s = snapshot(&promoted, "frontend", view);
        assert_eq!(s, shadow, "{view:?}");
        envoy_validates(&s);
    }
}

/// Seed 004's "Service to service fault injection and Mesh fault injection" with the shipped API.
/// The MADR expected the two aborts to add up (`appendAbort`); Kuma 2.7 has no append field for
/// faults and merging replaces the `http` list, so the MeshService-targeted policy (higher
/// precedence than the Mesh-targeted one) wins alone.
#[test]
fn madr_merge_example_kuma_2_7_keeps_the_most_specific_list() {
    let resources = load("fault-injection-madr.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    assert_eq!(live, snapshot(&resources, "backend", View::Shadow));
    let doc = live.to_document().unwrap();
    golden("fault-injection-madr.json", &doc);
    let frontend = string_regex(
        ".*&kuma.io/service=[^&]*frontend_kuma-demo_svc_8080[,&].*",
        false,
    );
    assert_eq!(
        http_filters(&doc, "inbound:10.42.0.30:3001"),
        json!([
            fault(json!({
                "abort": {"httpStatus": 500, "percentage": {"numerator": 50}},
                "headers": [frontend],
            })),
            router()
        ])
    );
    // Only the Mesh-targeted policy selects the frontend: there its 504 abort is the rule.
    let front = snapshot(&resources, "frontend", View::Live);
    let front_doc = front.to_document().unwrap();
    golden("fault-injection-madr.frontend.json", &front_doc);
    assert_eq!(
        http_filters(&front_doc, "inbound:10.42.0.29:8080"),
        json!([
            fault(json!({
                "abort": {"httpStatus": 504, "percentage": {"numerator": 5}},
                "headers": [frontend],
            })),
            router()
        ])
    );
    envoy_validates(&live);
    envoy_validates(&front);
}

/// Seed 004's expected merge result ("appendAbort: 500 at 50%, 504 at 5%"), which Kuma 2.7 writes
/// as one `http` list: one fault filter per entry, in order, both for the frontend's requests.
#[test]
fn madr_merge_result_is_one_filter_per_http_entry() {
    let resources = load("fault-injection-madr-result.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    let doc = live.to_document().unwrap();
    golden("fault-injection-madr-result.json", &doc);
    let frontend = string_regex(
        ".*&kuma.io/service=[^&]*frontend_kuma-demo_svc_8080[,&].*",
        false,
    );
    assert_eq!(
        http_filters(&doc, "inbound:10.42.0.30:3001"),
        json!([
            fault(json!({
                "abort": {"httpStatus": 500, "percentage": {"numerator": 50}},
                "headers": [frontend.clone()],
            })),
            fault(json!({
                "abort": {"httpStatus": 504, "percentage": {"numerator": 5}},
                "headers": [frontend],
            })),
            router()
        ])
    );
    envoy_validates(&live);
}

/// Rules with negations: one filter per rule, in rules order (most positive tags first), each
/// with a positive matcher and an inverted one for its negated tags. Percentages: `"33.3"` is
/// `333000/MILLION` (f64), `"50.5"` is `5050/TEN_THOUSAND`.
///
/// Kuma folds all negated tags of a rule into one inverted matcher, which negates their
/// conjunction: the last rule ("neither the frontend nor v2") matches every client that is not
/// "frontend v2", so frontend v1 clients get both the abort and the bandwidth limit. Reproduced
/// as Kuma generates it.
#[test]
fn rules_with_negations() {
    let resources = load("fault-injection-negations.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    let doc = live.to_document().unwrap();
    golden("fault-injection-negations.json", &doc);
    let svc = ".*&kuma.io/service=[^&]*frontend_kuma-demo_svc_8080[,&].*";
    let v2 = ".*&version=[^&]*v2[,&].*";
    let both = ".*&kuma.io/service=[^&]*frontend_kuma-demo_svc_8080[,&].*&version=[^&]*v2[,&].*";
    let bandwidth = json!({
        "fixedLimit": {"limitKbps": "1000"},
        "percentage": {"numerator": 333000, "denominator": "MILLION"}
    });
    assert_eq!(
        http_filters(&doc, "inbound:10.42.0.30:3001"),
        json!([
            // frontend, version v2: the MeshServiceSubset item's list.
            fault(json!({
                "delay": {"fixedDelay": "2s", "percentage": {"numerator": 100}},
                "headers": [string_regex(both, false)],
            })),
            // version v2 but not the frontend: only the Mesh item.
            fault(json!({
                "headers": [string_regex(v2, false), string_regex(svc, true)],
                "responseRateLimit": bandwidth,
            })),
            // the frontend but not v2: the MeshService item's list.
            fault(json!({
                "abort": {"httpStatus": 503, "percentage": {"numerator": 5050, "denominator": "TEN_THOUSAND"}},
                "headers": [string_regex(svc, false), string_regex(v2, true)],
            })),
            // neither: the Mesh item (one inverted matcher for both negations).
            fault(json!({
                "headers": [string_regex(both, true)],
                "responseRateLimit": bandwidth,
            })),
            router()
        ])
    );
    envoy_validates(&live);
}

/// FaultInjection covers http, http2 and grpc inbounds; MeshFaultInjection only http and http2.
/// In the Shadow view the superseded FaultInjection disappears everywhere and the gRPC inbound is
/// left without faults: the diff shows it.
#[test]
fn grpc_inbounds_lose_their_faults_in_the_shadow_view() {
    let resources = load("fault-injection-protocols.yaml");
    let live = snapshot(&resources, "multi", View::Live);
    let shadow = snapshot(&resources, "multi", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    golden("fault-injection-protocols.live.json", &live_doc);
    golden(
        "fault-injection-protocols.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
    let abort = json!({"httpStatus": 503, "percentage": {"numerator": 10}});
    let old = fault(json!({
        "abort": abort,
        "headers": [{"name": "x-kuma-tags", "safeRegexMatch": {"regex": ".*&kuma.io/service=.*"}}],
    }));
    let new = fault(json!({ "abort": abort }));
    for port in [8080, 8081, 9090] {
        let l = format!("inbound:10.42.0.40:{port}");
        assert_eq!(http_filters(&live_doc, &l), json!([old, router()]), "{l}");
    }
    for port in [8080, 8081] {
        let l = format!("inbound:10.42.0.40:{port}");
        assert_eq!(http_filters(&shadow_doc, &l), json!([new, router()]), "{l}");
    }
    assert_eq!(
        http_filters(&shadow_doc, "inbound:10.42.0.40:9090"),
        json!([router()])
    );
    // TCP: a tcp_proxy, never touched.
    let tcp = "inbound:10.42.0.40:5432";
    assert_eq!(live_doc[LISTENER][tcp], shadow_doc[LISTENER][tcp]);
    assert_eq!(
        live_doc[LISTENER][tcp]["filterChains"][0]["filters"][0]["name"],
        "envoy.filters.network.tcp_proxy"
    );
    envoy_validates(&live);
    envoy_validates(&shadow);
}

/// A limit MeshFaultInjection's validation accepts (it contains `bps`) but Kuma's converter does
/// not (`50 mbps`: lower-case unit) fails generation with the policy and listener named.
#[test]
fn unconvertible_bandwidth_is_a_generation_error() {
    let yaml = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fault-injection-madr-result.yaml"),
    )
    .unwrap()
    .replace(
        "          - abort:\n              httpStatus: 504\n              percentage: \"5\"\n",
        "          - responseBandwidth:\n              limit: 50 mbps\n              percentage: \"5\"\n",
    );
    let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
    let err = generate_result(&resources, "backend", View::Live).unwrap_err();
    assert_eq!(
        err,
        GenerateError::Policy {
            policy: "MeshFaultInjection/default-fault-injection".into(),
            resource: format!("{LISTENER}/inbound:10.42.0.30:3001"),
            reason: "bandwidth limit \"50 mbps\" cannot be converted to kbps".into(),
        }
    );
    // The other DPPs are not selected and still generate.
    assert!(generate_result(&resources, "frontend", View::Live).is_ok());
}

#[test]
fn generation_is_deterministic() {
    for (file, dp) in [
        ("fault-injection.yaml", "frontend"),
        ("fault-injection-negations.yaml", "backend"),
    ] {
        let resources = load(file);
        for view in [View::Live, View::Shadow] {
            assert_eq!(
                snapshot(&resources, dp, view),
                snapshot(&resources, dp, view)
            );
        }
    }
}
