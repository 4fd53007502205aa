//! MeshTrace (issue 17), on `tests/data/traces.yaml`: a Zipkin MeshTrace live, a Datadog one
//! for the DPP in shadow. Both configs are checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn filter<'a>(doc: &'a Value, listener: &str) -> &'a Value {
    &doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]
}

#[test]
fn zipkin_live_and_datadog_in_shadow() {
    let resources = load("traces.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    let zipkin = json!({
        "spawnUpstreamSpan": false,
        "overallSampling": {"value": 10.0},
        "clientSampling": {"value": 20.5},
        "randomSampling": {"value": 50.0},
        "customTags": [
            {"tag": "app", "literal": {"value": "backend"}},
            {"tag": "version", "requestHeader": {"name": "x-version", "defaultValue": "v1"}},
        ],
        "provider": {"name": "envoy.tracers.zipkin", "typedConfig": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
            "collectorCluster": "meshtrace:zipkin",
            "collectorEndpoint": "/api/v2/spans",
            "traceId128bit": true,
            "sharedSpanContext": false,
            "collectorEndpointVersion": "HTTP_PROTO",
            "collectorHostname": "jaeger-collector:9411",
        }},
    });
    for listener in ["inbound:10.0.0.10:8080", "outbound:127.0.0.1:10001"] {
        assert_eq!(filter(&live, listener)["tracing"], zipkin, "{listener}");
    }
    // TCP listeners have no HTTP connection manager to trace.
    assert!(filter(&live, "outbound:127.0.0.1:10002")
        .get("tracing")
        .is_none());
    let cluster = &live[CLUSTER]["meshtrace:zipkin"];
    assert_eq!(cluster["type"], "STRICT_DNS");
    assert_eq!(
        cluster["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]
            ["socketAddress"],
        json!({"address": "jaeger-collector", "portValue": 9411})
    );
    golden("traces.live.json", &live);

    // Shadow: the MeshService policy is more specific; Datadog with split service names.
    let service_name = |doc: &Value, listener: &str| {
        filter(doc, listener)["tracing"]["provider"]["typedConfig"]["serviceName"].clone()
    };
    assert_eq!(
        service_name(&shadow, "inbound:10.0.0.10:8080"),
        "web_INBOUND"
    );
    assert_eq!(
        service_name(&shadow, "outbound:127.0.0.1:10001"),
        "web_OUTBOUND_backend"
    );
    // The sampling and tags of the Mesh-wide policy merge in.
    assert_eq!(
        filter(&shadow, "inbound:10.0.0.10:8080")["tracing"]["overallSampling"],
        json!({"value": 10.0})
    );
    assert_eq!(shadow[CLUSTER]["meshtrace:datadog"]["type"], "STATIC");

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "traces.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}

#[test]
fn traffic_trace_live_and_mesh_trace_in_shadow() {
    let resources = load("traffic-traces.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    // The more specific TrafficTrace wins: the Mesh's Datadog backend, split service names.
    let provider =
        |doc: &Value, listener: &str| filter(doc, listener)["tracing"]["provider"].clone();
    assert_eq!(
        provider(&live, "inbound:10.0.0.10:8080"),
        json!({"name": "envoy.tracers.datadog", "typedConfig": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.DatadogConfig",
            "collectorCluster": "tracing:datadog",
            "serviceName": "web_INBOUND",
        }})
    );
    assert_eq!(
        provider(&live, "outbound:127.0.0.1:10001")["typedConfig"]["serviceName"],
        "web_OUTBOUND_backend"
    );
    assert_eq!(live[CLUSTER]["tracing:datadog"]["type"], "STATIC");
    // The other DPP gets the default Zipkin backend with its sampling.
    let backend = snapshot(&resources, "backend", View::Live);
    envoy_validates(&backend);
    let backend = backend.to_document().unwrap();
    let tracing = &filter(&backend, "inbound:10.0.0.11:80")["tracing"];
    assert_eq!(tracing["overallSampling"], json!({"value": 80.0}));
    assert_eq!(
        tracing["provider"]["typedConfig"]["collectorHostname"],
        "zipkin.local:9411"
    );
    golden("traffic-traces.live.json", &live);
    // Shadow: MeshTrace replaces the TrafficTraces (same Datadog agent, its own cluster).
    assert_eq!(
        provider(&shadow, "inbound:10.0.0.10:8080")["typedConfig"]["collectorCluster"],
        "meshtrace:datadog"
    );
    assert!(shadow[CLUSTER].get("tracing:datadog").is_none());
    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "traffic-traces.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}

/// Kuma's route plugins rebuild a DPP's outbound listeners without the old tracing once a
/// MeshHTTPRoute gives it a `to` rule; its inbounds keep it.
#[test]
fn traffic_trace_leaves_outbounds_rebuilt_by_a_mesh_http_route() {
    let mut resources = load("traffic-traces.yaml");
    resources.push(umbra_core::resource::Resource::from_bytes(b"type: MeshHTTPRoute\nmesh: default\nname: to-backend\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend}]\n").unwrap());
    let live = snapshot(&resources, "web", View::Live);
    envoy_validates(&live);
    let live = live.to_document().unwrap();
    assert!(filter(&live, "inbound:10.0.0.10:8080")
        .get("tracing")
        .is_some());
    assert!(filter(&live, "outbound:127.0.0.1:10001")
        .get("tracing")
        .is_none());
}
