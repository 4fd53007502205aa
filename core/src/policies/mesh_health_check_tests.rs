//! MeshHealthCheck decoding and validation, ported from Kuma 2.7.29's
//! `pkg/plugins/policies/meshhealthcheck/api/v1alpha1/validator_test.go`.

use super::*;
use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

fn errors(spec: &str) -> Vec<(String, String)> {
    violations::<MeshHealthCheck>(spec)
}

/// `targetRef: MeshService backend`, one `to` item for `web-backend` with `default`.
fn with_default(default: &str) -> String {
    let body: String = default.lines().map(|l| format!("      {l}\n")).collect();
    format!("targetRef:\n  kind: MeshService\n  name: backend\nto:\n  - targetRef:\n      kind: MeshService\n      name: web-backend\n    default:\n{body}")
}

const FULL: &str = "interval: 10s
timeout: 2s
unhealthyThreshold: 3
healthyThreshold: 1
initialJitter: 5s
intervalJitter: 6s
intervalJitterPercent: 10
healthyPanicThreshold: 60
failTrafficOnPanic: true
noTrafficInterval: 10s
eventLogPath: /tmp/health-check.log
alwaysLogHealthCheckFailures: true
reuseConnection: false
tcp:
  disabled: true
  send: Zm9v
  receive: [YmFy, YmF6]
http:
  disabled: true
  path: /health
  requestHeadersToAdd:
    set: [{name: Content-Type, value: application/json}]
    add: [{name: Accept, value: application/json}]
  expectedStatuses: [200, 201]
grpc:
  disabled: false
  serviceName: ''
  authority: ''";

#[test]
fn valid_specs_pass() {
    assert_eq!(errors(&with_default(FULL)), []);
    assert_eq!(
        errors("targetRef: {kind: MeshGateway, name: edge}\nto:\n- targetRef: {kind: MeshService, name: web-backend}\n  default: {interval: 10s, http: {path: /}, healthyPanicThreshold: '12.5'}\n"),
        []
    );
}

#[test]
fn kuma_violations() {
    assert_eq!(
        errors("targetRef: {kind: MeshGatewayRoute, name: some-mesh-gateway-route}\n"),
        [v("spec.targetRef.kind", "value is not supported")]
    );
    assert_eq!(
        errors(&with_default("{}")),
        [v(
            "spec.to[0].default",
            "must have at least one defined: http, tcp, grpc"
        )]
    );
    let d = "spec.to[0].default";
    assert_eq!(
        errors(&with_default(
            "interval: 10s\ntimeout: 2s\nunhealthyThreshold: -3\nhealthyThreshold: 0\ngrpc: {}"
        )),
        [
            v(
                &format!("{d}.unhealthyThreshold"),
                GREATER_THAN_ZERO_WHEN_DEFINED
            ),
            v(
                &format!("{d}.healthyThreshold"),
                GREATER_THAN_ZERO_WHEN_DEFINED
            ),
        ]
    );
    assert_eq!(
        errors(&with_default("interval: -10s\ntimeout: -2s\ninitialJitter: -5s\nintervalJitter: -6s\nnoTrafficInterval: -10s\nunhealthyThreshold: 3\nhealthyThreshold: 1\ngrpc: {}")),
        ["interval", "timeout", "initialJitter", "intervalJitter", "noTrafficInterval"]
            .map(|f| v(&format!("{d}.{f}"), GREATER_THAN_ZERO_WHEN_DEFINED))
    );
    assert_eq!(
        errors(&with_default(
            "intervalJitterPercent: 110\nhealthyPanicThreshold: -10\ngrpc: {}"
        )),
        [
            v(
                &format!("{d}.intervalJitterPercent"),
                "must be in inclusive range [0, 100]"
            ),
            v(
                &format!("{d}.healthyPanicThreshold"),
                "must be in inclusive range [0.0, 100.0]"
            ),
        ]
    );
    assert_eq!(
        errors(&with_default("healthyPanicThreshold: abc\ngrpc: {}")),
        [v(
            &format!("{d}.healthyPanicThreshold"),
            "string must be a valid number"
        )]
    );
    assert_eq!(
        errors(&with_default("eventLogPath: '#not_valid_path'\ngrpc: {}")),
        [v(
            &format!("{d}.eventLogPath"),
            "must be a valid path when defined"
        )]
    );
    assert_eq!(
        errors(&with_default(
            "http:\n  path: ''\n  expectedStatuses: [99, 600, 200]"
        )),
        [
            v(&format!("{d}.http.path"), "must be defined"),
            v(
                &format!("{d}.http.expectedStatuses[0]"),
                "must be in inclusive range [100, 599]"
            ),
            v(
                &format!("{d}.http.expectedStatuses[1]"),
                "must be in inclusive range [100, 599]"
            ),
        ]
    );
    assert_eq!(
        errors("targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: MeshSubset, tags: {a: b}}\n  default: {tcp: {}}\n"),
        [v("spec.to[0].targetRef.kind", "value is not supported")]
    );
}

#[test]
fn file_paths_as_govalidator_reads_them() {
    for ok in ["/tmp/hc.log", "/", "C:\\logs\\hc.log", "c:\\"] {
        assert!(is_file_path(ok), "{ok}");
    }
    for bad in [
        "", "hc.log", "./hc.log", "#x", "C:/logs", "C:\\\\x", "C:\\a|b",
    ] {
        assert!(!is_file_path(bad), "{bad}");
    }
}

#[test]
fn decoding_and_round_trip() {
    assert!(!decodes::<MeshHealthCheck>(&with_default("intervall: 1s")));
    assert!(!decodes::<MeshHealthCheck>(&with_default(
        "http: {requestHeadersToAdd: {set: [{name: a}]}}"
    )));
    assert_round_trip(&document::<MeshHealthCheck>(
        "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: MeshService\n      name: backend\n    default:\n      interval: 10s\n      healthyPanicThreshold: '50.5'\n      http:\n        path: /health\n        expectedStatuses:\n          - 200\n",
    ));
}
