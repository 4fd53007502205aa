//! HealthCheck -> MeshHealthCheck equivalence: a web DPP with HTTP, HTTP/2, gRPC and TCP
//! outbounds. TCP checks convert with an empty diff (MeshHealthCheck `tcp` with `http` and
//! `grpc` disabled gives every one of those services the same TCP check); an HTTP check keeps
//! two differences: MeshHealthCheck's `x-kuma-tags` request header and the event log written
//! as a file sink.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{api_and_protocol_services, dataplane, MESH};
use super::{converts, equivalence, output_spec, scenario, Op, CLUSTER};

/// web calls a service of each protocol (HTTP, gRPC, TCP, HTTP/2), api the HTTP and TCP ones.
fn topology() -> String {
    let web = dataplane(
        "web",
        "10.0.0.10",
        8080,
        "http",
        &[
            (10001, "http-service"),
            (10002, "grpc-service"),
            (10003, "tcp-service"),
            (10004, "http2-service"),
        ],
    );
    format!(
        "{MESH}{web}{}{}",
        api_and_protocol_services(),
        dataplane("http2-service", "10.0.0.14", 80, "http2", &[])
    )
}

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

#[test]
fn health_check_http_keeps_kuma_tags_and_event_sink_differences() {
    let scenario = scenario(&format!("{}{HC_ALL}{HC_WEB_HTTP}", topology()));
    let report = converts(&scenario, &["web", "api"], &[ResourceType::MeshHealthCheck]);
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
            expected.push(Op::new("web", op, path));
        }
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}

#[test]
fn health_check_tcp_converts_with_an_empty_diff() {
    let scenario = scenario(&format!("{}{HC_ALL}{HC_API_TCP}", topology()));
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
