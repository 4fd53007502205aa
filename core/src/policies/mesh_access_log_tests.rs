//! MeshAccessLog decoding and validation, ported from Kuma 2.7.29's
//! `pkg/plugins/policies/meshaccesslog/api/v1alpha1/validator_test.go`.

use super::*;
use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

fn errors(spec: &str) -> Vec<(String, String)> {
    violations::<MeshAccessLog>(spec)
}

/// `targetRef: MeshService web-frontend`, one `from` item with `backends`.
fn from_backends(backends: &str) -> String {
    let body: String = backends.lines().map(|l| format!("        {l}\n")).collect();
    format!("targetRef:\n  kind: MeshService\n  name: web-frontend\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      backends:\n{body}")
}

#[test]
fn valid_specs_pass() {
    let spec = "targetRef: {kind: MeshService, name: web-frontend}\nfrom:\n- targetRef: {kind: Mesh}\n  default:\n    backends:\n    - type: Tcp\n      tcp:\n        format: {type: Json, json: [{key: start_time, value: '%START_TIME%'}]}\n        address: 127.0.0.1:5000\nto:\n- targetRef: {kind: MeshService, name: web-backend}\n  default:\n    backends:\n    - type: File\n      file:\n        format: {type: Plain, plain: '{\"start_time\": \"%START_TIME%\"}'}\n        path: /tmp/logs.txt\n    - type: OpenTelemetry\n      openTelemetry: {endpoint: otel-collector:4317, attributes: [{key: mesh, value: '%KUMA_MESH%'}], body: {kvlistValue: {values: [{key: x, value: {stringValue: y}}]}}}\n";
    assert_eq!(errors(spec), []);
    assert_eq!(
        errors(&from_backends(
            "- type: File\n  file: {path: /tmp/logs.txt}"
        )),
        []
    );
    assert_eq!(errors(&from_backends("[]")), []);
}

#[test]
fn kuma_violations() {
    assert_eq!(
        errors("targetRef: {kind: MeshService, name: web-frontend}\nto: []\nfrom: []\n"),
        [v("spec", "at least one of 'from', 'to' has to be defined")]
    );
    let b = "spec.from[0].default.backends";
    for path in ["''", "'#not_valid_path'"] {
        assert_eq!(
            errors(&from_backends(&format!(
                "- type: File\n  file: {{path: {path}}}"
            ))),
            [v(
                &format!("{b}[0].file.path"),
                "file backend requires a valid path"
            )]
        );
    }
    assert_eq!(
        errors(&from_backends("- type: File\n  file:\n    path: /tmp/logs.txt\n    format: {type: Json, json: [{key: '', value: '%START_TIME%'}, {key: k, value: ''}, {key: '\"', value: '%START_TIME%'}]}")),
        [
            v(&format!("{b}[0].file.format.json[0].key"), "key cannot be empty"),
            v(&format!("{b}[0].file.format.json[1].value"), "value cannot be empty"),
            v(&format!("{b}[0].file.format.json[2]"), "is not a valid JSON object"),
        ]
    );
    assert_eq!(
        errors("targetRef: {kind: MeshService, name: web}\nto:\n- targetRef: {kind: Mesh}\nfrom:\n- targetRef: {kind: Mesh}\n"),
        [
            v("spec.to[0].default.backends", "must be defined"),
            v("spec.from[0].default.backends", "must be defined"),
        ]
    );
    assert_eq!(
        errors(&from_backends(
            "- type: Tcp\n  tcp: {address: not_valid_url}"
        )),
        [v(
            &format!("{b}[0].tcp.address"),
            "tcp backend requires valid address"
        )]
    );
    assert_eq!(
        errors(&from_backends("- type: File\n  file: {path: /tmp/x, format: {type: Json, json: []}}\n- type: Tcp\n  tcp: {address: 'logs:1234', format: {type: Plain, plain: ''}}")),
        [
            v(&format!("{b}[0].file.format.json"), "must not be empty"),
            v(&format!("{b}[1].tcp.format.plain"), "must not be empty"),
        ]
    );
    assert_eq!(
        errors(&from_backends(
            "- type: File\n- type: Tcp\n- type: OpenTelemetry"
        )),
        [
            v(&format!("{b}[0].file"), "must be defined"),
            v(&format!("{b}[1].tcp"), "must be defined"),
            v(&format!("{b}[2].openTelemetry"), "must be defined"),
        ]
    );
    assert_eq!(
        errors(&from_backends("- type: File\n  file: {path: /tmp/x, format: {type: Plain}}\n- type: Tcp\n  tcp: {address: 'logs:1234', format: {type: Json}}")),
        [
            v(&format!("{b}[0].file.format.plain"), "must be defined"),
            v(&format!("{b}[1].tcp.format.json"), "must be defined"),
        ]
    );
}

/// Issue 41: TCP addresses as Kuma's `govalidator.IsURL` takes them (the whole table is in
/// `crate::go_net`'s tests). `kuma-3_meshaccesslog_tcp-sink:9999` is the compose container
/// Kuma's own e2e tests log to; `host:99999` passes govalidator's 5-digit port pattern (Umbra
/// sends no TCP backend to Envoy, so it reaches no proxy).
#[test]
fn tcp_addresses_as_govalidator_reads_them() {
    let tcp = |address: &str| {
        errors(&from_backends(&format!(
            "- type: Tcp\n  tcp: {{address: '{address}'}}"
        )))
    };
    for ok in [
        "kuma-3_meshaccesslog_tcp-sink:9999",
        "127.0.0.1:5000",
        "logstash:1234",
        "tcp://logs.example.com:514",
        "[::1]:9000",
        "localhost.",
        "sink_ab:1",
        "host:99999",
    ] {
        assert_eq!(tcp(ok), [], "{ok}");
    }
    for bad in [
        "",
        "not_valid_url",
        "localhost",
        "host:",
        ".host",
        "a b:1",
        "ftpx://h",
        "_sink:9999",
        "sink:1:2",
    ] {
        assert_eq!(
            tcp(bad),
            [v(
                "spec.from[0].default.backends[0].tcp.address",
                "tcp backend requires valid address"
            )],
            "{bad}"
        );
    }
}

#[test]
fn unknown_types_are_decode_errors_and_round_trip() {
    assert!(!decodes::<MeshAccessLog>(&from_backends("- type: Syslog")));
    assert!(!decodes::<MeshAccessLog>(&from_backends(
        "- type: File\n  file: {path: /x, format: {type: Yaml}}"
    )));
    assert_round_trip(&document::<MeshAccessLog>(
        "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      backends:\n        - type: File\n          file:\n            path: /tmp/access.log\n",
    ));
}
