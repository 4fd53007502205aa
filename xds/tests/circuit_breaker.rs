//! The transition seed's "CircuitBreaker -> MeshCircuitBreaker" example (000_c0dd8fb0a11dab1f.txt):
//! the kuma-demo frontend DPP with the old CircuitBreaker live and its MeshCircuitBreaker
//! replacement in shadow. The seed's diff is empty; a replacement that differs gives exactly
//! the differing fields. Both configs are checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const SERVICES: [&str; 3] = [
    "backend_kuma-demo_svc_3001",
    "frontend_kuma-demo_svc_8080",
    "redis_kuma-demo_svc_6379",
];

fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn cluster_path(name: &str, rest: &str) -> String {
    format!("/{}/{}/{rest}", escape(CLUSTER), escape(name))
}

/// Live and Shadow documents of the frontend DPP, and the diff between them (checked to apply).
fn live_shadow_diff(resources: &[Resource]) -> (Value, Value, Value) {
    let live = snapshot(resources, "frontend", View::Live);
    let shadow = snapshot(resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    envoy_validates(&live);
    envoy_validates(&shadow);
    (live_doc, shadow_doc, serde_json::to_value(&patch).unwrap())
}

#[test]
fn circuit_breaker_to_mesh_circuit_breaker_has_an_empty_diff() {
    let resources = load("circuit-breakers.yaml");
    let (live, _shadow, patch) = live_shadow_diff(&resources);
    assert_eq!(
        patch,
        json!([]),
        "diff was {}",
        serde_json::to_string_pretty(&patch).unwrap()
    );

    // The live config really carries the old CircuitBreaker on every outbound cluster...
    for service in SERVICES {
        let c = &live[CLUSTER][service];
        assert_eq!(
            c["circuitBreakers"],
            json!({"thresholds": [{"maxConnections": 24, "maxPendingRequests": 25, "maxRequests": 26, "maxRetries": 27}]}),
            "{service}"
        );
        let od = &c["outlierDetection"];
        assert_eq!(od["interval"], "21s", "{service}");
        assert_eq!(od["baseEjectionTime"], "22s");
        assert_eq!(od["maxEjectionPercent"], 23);
        assert_eq!(od["consecutive5xx"], 28);
        assert_eq!(od["consecutiveGatewayFailure"], 29);
        assert_eq!(od["consecutiveLocalOriginFailure"], 30);
        assert_eq!(od["successRateStdevFactor"], 1330);
        assert_eq!(od["successRateRequestVolume"], 31);
        assert_eq!(od["failurePercentageThreshold"], 36);
        assert_eq!(od["enforcingLocalOriginSuccessRate"], 100);
        assert_eq!(od["enforcingFailurePercentageLocalOrigin"], 100);
        // splitExternalAndLocalErrors: false is a proto3 default, not rendered.
        assert!(od.get("splitExternalLocalOriginErrors").is_none());
    }
    // ...and none on the inbound cluster.
    let inbound = &live[CLUSTER]["localhost:8080"];
    assert!(inbound.get("circuitBreakers").is_none());
    assert!(inbound.get("outlierDetection").is_none());

    golden("circuit-breakers.live.json", &live);
}

#[test]
fn a_differing_mesh_circuit_breaker_shows_exactly_its_changes() {
    let resources = load("circuit-breakers-differs.yaml");
    let (live, shadow, patch) = live_shadow_diff(&resources);
    let mut expected: Vec<Value> = SERVICES
        .iter()
        .map(|s| {
            json!({
                "op": "replace",
                "path": cluster_path(s, "circuitBreakers/thresholds/0/maxConnections"),
                "value": 100,
            })
        })
        .collect();
    expected.insert(
        0,
        json!({
            "op": "add",
            "path": cluster_path("localhost:8080", "circuitBreakers"),
            "value": {"thresholds": [{"maxConnections": 7}]},
        }),
    );
    let mut got = patch.as_array().unwrap().clone();
    let key = |v: &Value| v["path"].as_str().unwrap_or_default().to_owned();
    got.sort_by_key(key);
    expected.sort_by_key(key);
    assert_eq!(
        got,
        expected,
        "diff was {}",
        serde_json::to_string_pretty(&patch).unwrap()
    );
    // The seed's outlier detection is untouched by the inbound `from` item (no outlierDetection).
    assert!(shadow[CLUSTER]["localhost:8080"]
        .get("outlierDetection")
        .is_none());
    assert_eq!(
        live[CLUSTER]["backend_kuma-demo_svc_3001"]["outlierDetection"],
        shadow[CLUSTER]["backend_kuma-demo_svc_3001"]["outlierDetection"]
    );
}

/// Kuma looks inbound clusters up by the dataplane port, but names them by the service port:
/// an inbound whose `servicePort` differs is not configured by `from` rules.
#[test]
fn inbound_rules_use_the_dataplane_port() {
    let yaml = "
type: Mesh
name: default
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 8080
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  - port: 9090
    servicePort: 9999
    tags: {kuma.io/service: metrics, kuma.io/protocol: http}
---
type: MeshCircuitBreaker
mesh: default
name: inbound
spec:
  targetRef: {kind: Mesh}
  from:
  - targetRef: {kind: Mesh}
    default:
      connectionLimits: {maxConnections: 5}
      outlierDetection:
        detectors:
          totalFailures: {consecutive: 3}
";
    let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
    for view in [View::Live, View::Shadow] {
        let snap = snapshot(&resources, "web", view);
        let doc = snap.to_document().unwrap();
        let clusters = &doc[CLUSTER];
        assert_eq!(
            clusters["localhost:8080"]["circuitBreakers"],
            json!({"thresholds": [{"maxConnections": 5}]})
        );
        assert_eq!(
            clusters["localhost:8080"]["outlierDetection"],
            json!({
                "consecutive5xx": 3,
                "enforcingConsecutive5xx": 100,
                "enforcingConsecutiveGatewayFailure": 0,
                "enforcingConsecutiveLocalOriginFailure": 0,
                "enforcingSuccessRate": 0,
                "enforcingLocalOriginSuccessRate": 0,
                "enforcingFailurePercentage": 0,
                "enforcingFailurePercentageLocalOrigin": 0
            })
        );
        let other = &clusters["localhost:9999"];
        assert!(other.is_object());
        assert!(other.get("circuitBreakers").is_none());
        assert!(other.get("outlierDetection").is_none());
        envoy_validates(&snap);
    }
}

#[test]
fn generation_is_deterministic() {
    let resources = load("circuit-breakers-differs.yaml");
    for view in [View::Live, View::Shadow] {
        let a = snapshot(&resources, "frontend", view);
        let b = snapshot(&resources, "frontend", view);
        assert_eq!(a, b);
        assert_eq!(a.version(CLUSTER).unwrap(), b.version(CLUSTER).unwrap());
    }
}
