//! HealthCheck -> MeshHealthCheck (issue 17), on `tests/data/health-checks.yaml`: the old
//! HealthCheck live, the MeshHealthCheck replacing it in shadow (conf from Kuma 2.7.29's
//! MeshHealthCheck plugin tests). Both configs are checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn cluster<'a>(doc: &'a Value, name: &str) -> &'a Value {
    &doc[CLUSTER][name]
}

#[test]
fn old_health_check_live_and_mesh_health_check_in_shadow() {
    let resources = load("health-checks.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // Live: the old HealthCheck's HTTP check on every outbound cluster but tcp-service, which
    // has the more specific TCP one. HTTP/2 services get the HTTP/2 codec.
    let http = cluster(&live, "http-service");
    assert_eq!(
        http["commonLbConfig"],
        json!({"healthyPanicThreshold": {"value": 60.0}, "zoneAwareLbConfig": {"failTrafficOnPanic": true}})
    );
    assert_eq!(
        http["healthChecks"],
        json!([{
            "interval": "10s", "timeout": "2s", "unhealthyThreshold": 3, "healthyThreshold": 1,
            "reuseConnection": false,
            "httpHealthCheck": {
                "path": "/health",
                "requestHeadersToAdd": [{"header": {"key": "x-check", "value": "umbra"}}],
                "expectedStatuses": [{"start": "200", "end": "201"}, {"start": "201", "end": "202"}],
            },
        }])
    );
    assert_eq!(
        cluster(&live, "http2-service")["healthChecks"][0]["httpHealthCheck"]["codecClientType"],
        "HTTP2"
    );
    assert_eq!(
        cluster(&live, "tcp-service")["healthChecks"],
        json!([{
            "interval": "5s", "timeout": "1s", "unhealthyThreshold": 2, "healthyThreshold": 2,
            // Envoy's deprecated field, as Kuma writes it (Envoy 1.40 still accepts it).
            "eventLogPath": "/tmp/hc.log",
            "tcpHealthCheck": {"send": {"text": "666f6f"}, "receive": [{"text": "626172"}]},
        }])
    );
    assert!(cluster(&live, "localhost:8080")
        .get("healthChecks")
        .is_none());
    golden("health-checks.live.json", &live);

    // Shadow: the MeshHealthCheck's check replaces the old one (Envoy refuses two unnamed
    // checks on a cluster, see the plugin docs); the kind follows the service's protocol.
    let http = cluster(&shadow, "http-service");
    assert_eq!(http["healthChecks"].as_array().unwrap().len(), 1);
    assert_eq!(
        http["healthChecks"][0],
        json!({
            "interval": "10s", "timeout": "2s", "unhealthyThreshold": 3, "healthyThreshold": 1,
            "initialJitter": "13s", "intervalJitter": "15s", "intervalJitterPercent": 10,
            "noTrafficInterval": "16s", "reuseConnection": true,
            "eventLogger": [{
                "name": "envoy.health_check.event_sinks.file",
                "typedConfig": {
                    "@type": "type.googleapis.com/envoy.extensions.health_check.event_sinks.file.v3.HealthCheckEventFileSink",
                    "eventLogPath": "/tmp/log.txt",
                },
            }],
            "httpHealthCheck": {
                "path": "/health",
                "requestHeadersToAdd": [
                    {"header": {"key": "x-kuma-tags", "value": "&kuma.io/protocol=http&&kuma.io/service=web&"}},
                    {"header": {"key": "x-some-header", "value": "value"}},
                    {"header": {"key": "x-some-other-header", "value": "value"}, "appendAction": "OVERWRITE_IF_EXISTS_OR_ADD"},
                ],
                "expectedStatuses": [{"start": "200", "end": "201"}, {"start": "201", "end": "202"}],
            },
        })
    );
    assert_eq!(
        http["commonLbConfig"]["healthyPanicThreshold"],
        json!({"value": 62.9})
    );
    assert_eq!(
        cluster(&shadow, "grpc-service")["healthChecks"][0]["grpcHealthCheck"],
        json!({"serviceName": "grpc-client", "authority": "grpc-client.default.svc.cluster.local"})
    );
    assert_eq!(
        cluster(&shadow, "tcp-service")["healthChecks"][0]["tcpHealthCheck"],
        json!({"send": {"text": "70696e67"}, "receive": [{"text": "706f6e67"}]})
    );

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "health-checks.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}
