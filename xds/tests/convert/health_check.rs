//! HealthCheck -> MeshHealthCheck equivalence: a web DPP with HTTP, HTTP/2, gRPC and TCP
//! outbounds. TCP checks convert with an empty diff (MeshHealthCheck `tcp` with `http` and
//! `grpc` disabled gives every one of those services the same TCP check); an HTTP check keeps
//! two differences: MeshHealthCheck's `x-kuma-tags` request header and the event log written
//! as a file sink.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

const MESH_AND_DPPS: &str = r#"
type: Mesh
name: default
skipCreatingInitialPolicies: ["*"]
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.10
  inbound:
  - port: 8080
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: http-service}}
  - {port: 10002, tags: {kuma.io/service: grpc-service}}
  - {port: 10003, tags: {kuma.io/service: tcp-service}}
  - {port: 10004, tags: {kuma.io/service: http2-service}}
---
type: Dataplane
mesh: default
name: api
networking:
  address: 10.0.0.20
  inbound:
  - port: 8080
    tags: {kuma.io/service: api, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: http-service}}
  - {port: 10003, tags: {kuma.io/service: tcp-service}}
---
type: Dataplane
mesh: default
name: http-service
networking:
  address: 10.0.0.11
  inbound:
  - port: 80
    tags: {kuma.io/service: http-service, kuma.io/protocol: http}
---
type: Dataplane
mesh: default
name: grpc-service
networking:
  address: 10.0.0.12
  inbound:
  - port: 80
    tags: {kuma.io/service: grpc-service, kuma.io/protocol: grpc}
---
type: Dataplane
mesh: default
name: tcp-service
networking:
  address: 10.0.0.13
  inbound:
  - port: 80
    tags: {kuma.io/service: tcp-service, kuma.io/protocol: tcp}
---
type: Dataplane
mesh: default
name: http2-service
networking:
  address: 10.0.0.14
  inbound:
  - port: 80
    tags: {kuma.io/service: http2-service, kuma.io/protocol: http2}
"#;

/// A TCP check for every destination, with most common fields.
const HC_ALL: &str = r#"
---
type: HealthCheck
mesh: default
name: hc-all
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: '*'}
conf:
  interval: 10s
  timeout: 2s
  unhealthyThreshold: 3
  healthyThreshold: 2
  intervalJitterPercent: 5
  healthyPanicThreshold: 33.3
  failTrafficOnPanic: true
  reuseConnection: false
  tcp:
    send: Zm9v
    receive: [YmFy]
"#;

/// A TCP check from api to tcp-service (more specific than hc-all). It sends its own payload:
/// `send` has no neutral value, so without it hc-all's would leak into the merged
/// MeshHealthChecks (the precedence note); its `receive` is left unset, which the converter
/// neutralises with an empty list.
const HC_API_TCP: &str = r#"
---
type: HealthCheck
mesh: default
name: hc-api-tcp
sources:
- match: {kuma.io/service: api}
destinations:
- match: {kuma.io/service: tcp-service}
conf:
  interval: 20s
  timeout: 3s
  unhealthyThreshold: 4
  healthyThreshold: 1
  healthyPanicThreshold: 10
  failTrafficOnPanic: false
  reuseConnection: true
  noTrafficInterval: 30s
  tcp:
    send: cGluZw==
"#;

/// An HTTP check from web to its HTTP services; sets every field hc-all sets, so nothing of
/// hc-all leaks into the merge.
const HC_WEB_HTTP: &str = r#"
---
type: HealthCheck
mesh: default
name: hc-web-http
sources:
- match: {kuma.io/service: web}
destinations:
- match: {kuma.io/service: http-service}
- match: {kuma.io/service: http2-service}
conf:
  interval: 5s
  timeout: 1s
  unhealthyThreshold: 2
  healthyThreshold: 1
  healthyPanicThreshold: 12.5
  failTrafficOnPanic: false
  reuseConnection: true
  alwaysLogHealthCheckFailures: true
  eventLogPath: /tmp/health.log
  http:
    path: /healthz
    expectedStatuses: [200, 204]
    requestHeadersToAdd:
    - header: {key: x-check, value: umbra}
      append: true
    - header: {key: x-mode, value: probe}
"#;

const CLUSTER: &str = "/type.googleapis.com~1envoy.config.cluster.v3.Cluster";

#[test]
fn health_check_http_keeps_kuma_tags_and_event_sink_differences() {
    let scenario = scenario(&format!("{MESH_AND_DPPS}{HC_ALL}{HC_WEB_HTTP}"));
    let report = equivalence(&scenario, &["web", "api"]);
    assert_eq!(report.conversions.len(), old_policies(&scenario));
    assert_eq!(output_types(&report), [ResourceType::MeshHealthCheck]);
    let web_http = output_spec(&report, ResourceType::MeshHealthCheck, "hc-web-http");
    assert_eq!(
        web_http["to"][1]["default"]["http"],
        json!({"disabled": false, "path": "/healthz", "expectedStatuses": [200, 204],
            "requestHeadersToAdd": {"set": [{"name": "x-mode", "value": "probe"}],
                "add": [{"name": "x-check", "value": "umbra"}]}})
    );
    assert_eq!(web_http["to"][1]["targetRef"]["name"], "http2-service");
    // On web's two HTTP clusters only: x-kuma-tags comes first in the header list, and the
    // event log moves from eventLogPath to an eventLogger.
    let mut expected = Vec::new();
    for cluster in ["http-service", "http2-service"] {
        let hc = format!("{CLUSTER}/{cluster}/healthChecks/0");
        let headers = format!("{hc}/httpHealthCheck/requestHeadersToAdd");
        for (op, path) in [
            ("add", format!("{hc}/eventLogger")),
            ("remove", format!("{hc}/eventLogPath")),
            ("add", format!("{headers}/2")),
            ("replace", format!("{headers}/0/header/key")),
            ("replace", format!("{headers}/0/header/value")),
            ("replace", format!("{headers}/1/header/key")),
            ("replace", format!("{headers}/1/header/value")),
            ("remove", format!("{headers}/1/appendAction")),
        ] {
            expected.push(Op {
                dataplane: "web".to_owned(),
                op: op.to_owned(),
                path,
            });
        }
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}

#[test]
fn health_check_tcp_converts_with_an_empty_diff() {
    let scenario = scenario(&format!("{MESH_AND_DPPS}{HC_ALL}{HC_API_TCP}"));
    let report = equivalence(&scenario, &["web", "api"]);
    assert_eq!(report.ops, []);
    assert_eq!(
        output_spec(&report, ResourceType::MeshHealthCheck, "hc-all")["to"][0]["default"],
        json!({
            "interval": "10s", "timeout": "2s", "unhealthyThreshold": 3, "healthyThreshold": 2,
            "intervalJitterPercent": 5, "healthyPanicThreshold": "33.29999923706055",
            "failTrafficOnPanic": true, "reuseConnection": false,
            "alwaysLogHealthCheckFailures": false,
            "tcp": {"disabled": false, "send": "foo", "receive": ["bar"]},
            "http": {"disabled": true}, "grpc": {"disabled": true},
        })
    );
    assert!(report.notes().all(|n| n.affects.is_empty()));
}
