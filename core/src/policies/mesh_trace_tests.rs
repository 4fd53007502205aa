//! MeshTrace decoding and validation, ported from Kuma 2.7.29's
//! `pkg/plugins/policies/meshtrace/api/v1alpha1/validator_test.go`.

use super::*;
use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

fn errors(spec: &str) -> Vec<(String, String)> {
    violations::<MeshTrace>(spec)
}

fn with_default(default: &str) -> String {
    let body: String = default.lines().map(|l| format!("  {l}\n")).collect();
    format!("targetRef:\n  kind: MeshService\n  name: backend\ndefault:\n{body}")
}

#[test]
fn valid_specs_pass() {
    for d in [
        "backends:\n- type: Zipkin\n  zipkin: {url: 'http://jaeger-collector:9411/api/v2/spans', traceId128bit: true, apiVersion: httpProto, sharedSpanContext: false}\ntags:\n- {name: team, literal: core}\n- name: env\n  header: {name: x-env, default: prod}\nsampling: {overall: 80, client: '60.5', random: 40}",
        "backends:\n- type: Datadog\n  datadog: {url: 'http://intake.datadoghq.eu:443', splitService: true}",
        "backends:\n- type: OpenTelemetry\n  openTelemetry: {endpoint: otel-collector:4317}",
        "backends: []",
    ] {
        assert_eq!(errors(&with_default(d)), [], "{d}");
    }
}

#[test]
fn kuma_violations() {
    let b = "spec.default.backends";
    assert_eq!(
        errors(&with_default("sampling: {overall: 10}")),
        [v(b, "must be defined")]
    );
    assert_eq!(
        errors(&with_default("backends:\n- type: OpenTelemetry\n  openTelemetry: {endpoint: a}\n- type: OpenTelemetry\n  openTelemetry: {endpoint: b}")),
        [v(b, "must have zero or one backend defined")]
    );
    assert_eq!(
        errors(&with_default("backends:\n- type: Zipkin\n  zipkin: {}")),
        [v(&format!("{b}[0].zipkin.url"), "must not be empty")]
    );
    assert_eq!(
        errors(&with_default(
            "backends:\n- type: Zipkin\n  zipkin: {url: not_valid_url}"
        )),
        [v(&format!("{b}[0].zipkin.url"), "must be a valid url")]
    );
    let dd = |url: &str| {
        errors(&with_default(&format!(
            "backends:\n- type: Datadog\n  datadog: {{url: '{url}'}}"
        )))
    };
    let at = format!("{b}[0].datadog.url");
    assert_eq!(dd("not valid url"), [v(&at, "must be a valid url")]);
    assert_eq!(dd("http://localhost"), [v(&at, "port must be defined")]);
    assert_eq!(
        dd("http://localhost:99999"),
        [v(&at, "port must be a valid (1-65535)")]
    );
    assert_eq!(
        dd("https://localhost:1234"),
        [v(&at, "scheme must be http")]
    );
    assert_eq!(
        dd("http://localhost:1234/path"),
        [v(&at, "path must not be defined")]
    );
    assert_eq!(
        errors(&with_default(
            "backends: []\ntags:\n- {literal: a}\n- header: {name: x}"
        )),
        [
            v("spec.default.tags[0].name", "must not be empty"),
            v("spec.default.tags[1].name", "must not be empty"),
        ]
    );
    assert_eq!(
        errors(&with_default(
            "backends: []\ntags:\n- {name: a, literal: b, header: {name: c}}"
        )),
        [v(
            "spec.default.tags[0]",
            "tag must have only one type defined: header, literal"
        )]
    );
    assert_eq!(
        errors(&with_default("backends: []\nsampling: {overall: 101}")),
        [v(
            "spec.default.sampling.overall",
            "must be between 0 and 100"
        )]
    );
    assert_eq!(
        errors(&with_default(
            "backends: []\nsampling: {overall: xyz, client: xyz, random: xyz}"
        )),
        [
            v("spec.default.sampling.client", "string is not a number"),
            v("spec.default.sampling.random", "string is not a number"),
            v("spec.default.sampling.overall", "string is not a number"),
        ]
    );
    for (t, s) in [
        ("Datadog", "datadog"),
        ("Zipkin", "zipkin"),
        ("OpenTelemetry", "openTelemetry"),
    ] {
        assert_eq!(
            errors(&with_default(&format!("backends:\n- type: {t}"))),
            [v(&format!("{b}[0].{s}"), "must be defined")]
        );
    }
    assert_eq!(
        errors("targetRef: {kind: MeshGateway, name: gw, tags: {a: b}}\ndefault: {backends: []}\n"),
        [v(
            "spec.targetRef.tags",
            "must not be set with kind MeshGateway"
        )]
    );
}

#[test]
fn request_uris_as_go_splits_them() {
    let u = parse_request_uri("http://user@host:80/p?q=1").unwrap();
    assert_eq!(
        (u.scheme, u.user, u.host, u.port, u.path, u.query),
        ("http", Some("user"), "host", "80", "/p", "q=1")
    );
    assert!(parse_request_uri("http://host:8a").is_none());
    assert!(parse_request_uri("a b").is_none());
    assert_eq!(parse_request_uri("http:opaque").unwrap().opaque, "opaque");
}

#[test]
fn decoding_and_round_trip() {
    assert!(!decodes::<MeshTrace>(&with_default(
        "backends:\n- type: Jaeger"
    )));
    assert_round_trip(&document::<MeshTrace>(
        "targetRef:\n  kind: Mesh\ndefault:\n  backends:\n    - type: Zipkin\n      zipkin:\n        url: http://zipkin:9411/api/v2/spans\n  sampling:\n    overall: 50\n",
    ));
}

/// Issue 41: Zipkin URLs as `govalidator.IsURL` takes them and Datadog URLs as Go 1.26's
/// `url.ParseRequestURI` reads them (Kuma's validator; the URLs of its `validator_test.go` plus
/// container names and Go's case-folded scheme).
#[test]
fn collector_urls_as_kuma_reads_them() {
    let at = |s: &str| format!("spec.default.backends[0].{s}.url");
    let zipkin = |url: &str| {
        errors(&with_default(&format!(
            "backends:\n- type: Zipkin\n  zipkin: {{url: '{url}'}}"
        )))
    };
    for ok in [
        "http://jaeger-collector.mesh-observability:9411/api/v2/spans",
        "http://kuma-3_zipkin_1x:9411/api/v2/spans",
        "zipkin_collector:9411",
        "https://[::1]:9411/api",
    ] {
        assert_eq!(zipkin(ok), [], "{ok}");
    }
    for bad in [
        "not_valid_url",
        "zipkin",
        "http://_zipkin:9411",
        "http://a:1:2/",
    ] {
        assert_eq!(
            zipkin(bad),
            [v(&at("zipkin"), "must be a valid url")],
            "{bad}"
        );
    }
    let dd = |url: &str| {
        errors(&with_default(&format!(
            "backends:\n- type: Datadog\n  datadog: {{url: '{url}'}}"
        )))
    };
    for ok in [
        "http://intake.datadoghq.eu:8126",
        "HTTP://datadog_agent:8126",
        "http://[::1]:8126",
        "http://agent:8126?",
    ] {
        assert_eq!(dd(ok), [], "{ok}");
    }
    let d = at("datadog");
    assert_eq!(
        dd("http://intake.datadoghq.eu:999999"),
        [v(&d, "port must be a valid (1-65535)")]
    );
    assert_eq!(
        dd("sql://intake.datadoghq.eu:8126"),
        [v(&d, "scheme must be http")]
    );
    assert_eq!(dd("http://[10.0.0.1]:8126"), [v(&d, "must be a valid url")]);
    assert_eq!(dd("http://agent:8126:1"), [v(&d, "must be a valid url")]);
    assert_eq!(dd("http://a%zz:8126"), [v(&d, "must be a valid url")]);
    assert_eq!(
        dd("http://u@agent:8126/p?q"),
        [
            v(&d, "path must not be defined"),
            v(&d, "query must not be defined"),
            v(&d, "user must not be defined"),
        ]
    );
    assert_eq!(
        dd("http:agent"),
        [
            v(&d, "port must be defined"),
            v(&d, "opaque must not be defined")
        ]
    );
}
