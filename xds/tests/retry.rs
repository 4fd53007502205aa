//! Retry -> MeshRetry (issue 17), on `tests/data/retries.yaml`: the old Retry live, the
//! MeshRetry policies that replace it in shadow (confs from Kuma 2.7.29's MeshRetry plugin
//! tests), and a MeshRetry that targets a MeshHTTPRoute (`retries-route.yaml`). Every config is
//! checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

fn filter(doc: &Value, port: u16) -> Value {
    doc[LISTENER][format!("outbound:127.0.0.1:{port}")]["filterChains"][0]["filters"][0]
        ["typedConfig"]
        .clone()
}

fn vhost(doc: &Value, port: u16) -> Value {
    filter(doc, port)["routeConfig"]["virtualHosts"][0].clone()
}

#[test]
fn old_retry_live_and_mesh_retry_in_shadow() {
    let resources = load("retries.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // Live: the old Retry on the virtual host of HTTP and gRPC listeners (Kuma's
    // `RetryConfig`), none for HTTP/2; tcp maxConnectAttempts on TCP and Kafka listeners.
    assert_eq!(
        vhost(&live, 10001)["retryPolicy"],
        json!({
            "retryOn": "5xx,reset,retriable-status-codes",
            "numRetries": 5,
            "perTryTimeout": "16s",
            "retryBackOff": {"baseInterval": "0.025s", "maxInterval": "0.250s"},
            "retriableStatusCodes": [503, 429],
            "retriableRequestHeaders": [
                {"name": ":method", "stringMatch": {"exact": "GET"}},
                {"name": ":method", "stringMatch": {"exact": "POST"}},
            ],
        })
    );
    assert_eq!(
        vhost(&live, 10002)["retryPolicy"],
        json!({"retryOn": "cancelled,unavailable", "numRetries": 3, "perTryTimeout": "4s"})
    );
    assert!(vhost(&live, 10004).get("retryPolicy").is_none());
    for port in [10003, 10005] {
        assert_eq!(filter(&live, port)["maxConnectAttempts"], 7, "{port}");
    }
    // No route-level policy: that is MeshRetry's place.
    assert!(vhost(&live, 10001)["routes"][0]["route"]
        .get("retryPolicy")
        .is_none());
    golden("retries.live.json", &live);

    // Shadow: MeshRetry on each route (Kuma bakes the old Retry in anyway, so the virtual
    // host keeps it; Envoy uses the route's policy).
    let http = &vhost(&shadow, 10001)["routes"][0]["route"]["retryPolicy"];
    assert_eq!(
        http["retryOn"],
        "5xx,gateway-error,reset,retriable-4xx,connect-failure,envoy-ratelimited,refused-stream,http3-post-connect-failure,retriable-status-codes"
    );
    assert_eq!(http["retriableStatusCodes"], json!([429]));
    assert_eq!(http["hostSelectionRetryMaxAttempts"], "2");
    assert_eq!(
        http["rateLimitedRetryBackOff"],
        json!({"maxInterval": "5s", "resetHeaders": [
            {"name": "retry-after-http"},
            {"name": "x-retry-after-http", "format": "UNIX_TIMESTAMP"},
        ]})
    );
    let methods: Vec<&str> = http["retriableRequestHeaders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            h["stringMatch"]["exact"]
                .as_str()
                .or(h["stringMatch"]["prefix"].as_str())
                .unwrap()
        })
        .collect();
    assert_eq!(
        methods,
        [
            "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE",
            "prefix-"
        ]
    );
    assert_eq!(
        http["retriableHeaders"],
        json!([
            {"name": "x-retry-regex", "stringMatch": {"safeRegex": {"regex": ".*"}}},
            {"name": "x-retry-exact", "stringMatch": {"exact": "exact-value"}},
        ])
    );
    assert_eq!(
        http["retryHostPredicate"][1]["typedConfig"]["metadataMatch"],
        json!({"filterMetadata": {"envoy.lb": {"test": "test"}}})
    );
    assert_eq!(http["retryPriority"]["typedConfig"]["updateFrequency"], 2);
    assert_eq!(
        vhost(&shadow, 10001)["retryPolicy"],
        vhost(&live, 10001)["retryPolicy"]
    );
    let grpc = &vhost(&shadow, 10002)["routes"][0]["route"]["retryPolicy"];
    assert_eq!(
        grpc["retryOn"],
        "canceled,deadline-exceeded,internal,resource-exhausted,unavailable"
    );
    assert_eq!(grpc["numRetries"], 11);
    assert_eq!(
        grpc["retryBackOff"],
        json!({"baseInterval": "13s", "maxInterval": "14s"})
    );
    // HTTP/2 and Kafka: Kuma's MeshRetry configures neither.
    assert!(vhost(&shadow, 10004)["routes"][0]["route"]
        .get("retryPolicy")
        .is_none());
    assert_eq!(filter(&shadow, 10005)["maxConnectAttempts"], 7);
    assert_eq!(filter(&shadow, 10003)["maxConnectAttempts"], 21);

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "retries.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}

#[test]
fn mesh_retry_targeting_a_route_configures_its_routes_only() {
    let resources = load("retries-route.yaml");
    let snap = snapshot(&resources, "web", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let routes = vhost(&doc, 10001)["routes"].as_array().unwrap().clone();
    // `/api` as Kuma writes a PathPrefix (exact `/api` and prefix `/api/`), then the
    // catch-all `/` route to the service.
    assert_eq!(routes.len(), 3, "{routes:#?}");
    for r in &routes {
        let policy = &r["route"]["retryPolicy"];
        let api = r["match"]["path"] == "/api" || r["match"]["prefix"] == "/api/";
        if api {
            // The route's own MeshRetry: status codes add `retriable-status-codes` to the
            // default conditions.
            assert_eq!(policy["numRetries"], 4, "{r:#}");
            assert_eq!(policy["retriableStatusCodes"], json!([503]));
            assert_eq!(
                policy["retryOn"],
                "gateway-error,connect-failure,refused-stream,retriable-status-codes"
            );
        } else {
            assert_eq!(r["match"]["prefix"], "/", "{r:#}");
            // The service-wide MeshRetry.
            assert_eq!(policy["numRetries"], 2, "{r:#}");
            assert_eq!(
                policy["retryOn"],
                "gateway-error,connect-failure,refused-stream"
            );
        }
    }
    golden("retries-route.live.json", &doc);
}
