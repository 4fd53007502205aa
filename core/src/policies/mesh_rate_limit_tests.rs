//! MeshRateLimit decoding and validation, ported from Kuma 2.7.29's
//! `pkg/plugins/policies/meshratelimit/api/v1alpha1/validator_test.go`.

use super::*;
use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

fn errors(spec: &str) -> Vec<(String, String)> {
    violations::<MeshRateLimit>(spec)
}

const LOCAL: &str = "local:\n  http:\n    requestRate: {num: 100, interval: 10s}\n  tcp:\n    connectionRate: {num: 100, interval: 100ms}";

fn item(default: &str) -> String {
    let body: String = default.lines().map(|l| format!("      {l}\n")).collect();
    format!("  - targetRef:\n      kind: Mesh\n    default:\n{body}")
}

#[test]
fn valid_specs_pass() {
    let full = "local:\n  http:\n    disabled: false\n    requestRate: {num: 100, interval: 10s}\n    onRateLimit:\n      status: 123\n      headers:\n        add: [{name: test, value: '123'}]\n  tcp:\n    disabled: false\n    connectionRate: {num: 100, interval: 100ms}";
    for spec in [
        format!(
            "targetRef: {{kind: MeshService, name: web-frontend}}\nfrom:\n{}",
            item(full)
        ),
        format!(
            "targetRef: {{kind: MeshService, name: web-frontend}}\nfrom:\n{}",
            item("local: {http: {disabled: true}}")
        ),
        format!(
            "targetRef: {{kind: Mesh, proxyTypes: [Sidecar]}}\nfrom:\n{}",
            item(LOCAL)
        ),
        format!(
            "targetRef: {{kind: MeshGateway, name: edge}}\nto:\n{}",
            item(LOCAL)
        ),
        format!(
            "targetRef: {{kind: MeshHTTPRoute, name: http-route-1}}\nto:\n{}",
            item(LOCAL)
        ),
    ] {
        assert_eq!(errors(&spec), [], "{spec}");
    }
}

#[test]
fn kuma_violations() {
    let svc = "targetRef: {kind: MeshService, name: web-frontend}\nfrom:\n";
    assert_eq!(
        errors(&format!("{svc}  - targetRef: {{kind: MeshGatewayRoute}}\n    default: {{local: {{http: {{requestRate: {{num: 10, interval: 10s}}}}}}}}\n")),
        [v("spec.from[0].targetRef.kind", "value is not supported")]
    );
    assert_eq!(
        errors(&format!("{svc}{}", item("local:\n  http:\n    requestRate: {num: 0, interval: 49ms}\n  tcp:\n    connectionRate: {num: 0, interval: 49ms}"))),
        [
            v("spec.from[0].default.local.http.requestRate.num", "must be greater than 0"),
            v("spec.from[0].default.local.http.requestRate.interval", "must be greater than: 50ms"),
            v("spec.from[0].default.local.tcp.connectionRate.num", "must be greater than 0"),
            v("spec.from[0].default.local.tcp.connectionRate.interval", "must be greater than: 50ms"),
        ]
    );
    assert_eq!(
        errors(&format!("{svc}  - targetRef: {{kind: MeshService, name: backend}}\n    default: {{local: {{tcp: {{connectionRate: {{num: 100, interval: 500ms}}}}}}}}\n")),
        [v("spec.from[0].targetRef.kind", "value is not supported")]
    );
    assert_eq!(
        errors(&format!(
            "{svc}  - targetRef: {{kind: Mesh}}\n    default: {{}}\n"
        )),
        [v("spec.from[0].default.local", "must be defined")]
    );
    assert_eq!(
        errors(&format!("{svc}{}", item("local: {}"))),
        [v(
            "spec.from[0].default.local",
            "must have at least one defined: tcp, http"
        )]
    );
    assert_eq!(
        errors(&format!("{svc}{}", item("local: {tcp: {}}"))),
        [v(
            "spec.from[0].default.local.tcp",
            "must have at least one defined: disabled, connectionRate"
        )]
    );
    assert_eq!(
        errors(&format!("{svc}{}", item("local: {http: {}}"))),
        [v(
            "spec.from[0].default.local.http",
            "must have at least one defined: disabled, requestRate, onRateLimit"
        )]
    );
    assert_eq!(
        errors(&format!(
            "{svc}{}",
            item("local: {http: {onRateLimit: {status: 0}}}")
        )),
        [v(
            "spec.from[0].default.local.http.onRateLimit.status",
            "must be greater than 0"
        )]
    );
    for top in [
        "{kind: MeshGateway, name: edge}",
        "{kind: MeshHTTPRoute, name: r}",
        "{kind: Mesh}",
    ] {
        assert_eq!(
            errors(&format!("targetRef: {top}\nfrom:\n{}", item(LOCAL))),
            [v("spec.from", "must not be defined")],
            "{top}"
        );
    }
    assert_eq!(
        errors(&format!(
            "targetRef: {{kind: MeshService, name: web}}\nto:\n{}",
            item(LOCAL)
        )),
        [v("spec.to", "must not be defined")]
    );
}

#[test]
fn decoding_and_round_trip() {
    assert!(!decodes::<MeshRateLimit>(&format!(
        "targetRef: {{kind: MeshService, name: w}}\nfrom:\n{}",
        item("local: {http: {requestRate: {num: 1, intervall: 1s}}}")
    )));
    assert_round_trip(&document::<MeshRateLimit>(
        "targetRef:\n  kind: MeshService\n  name: web\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      local:\n        http:\n          requestRate:\n            num: 5\n            interval: 1s\n",
    ));
}
