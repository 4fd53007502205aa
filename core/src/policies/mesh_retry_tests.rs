//! MeshRetry decoding and validation, ported from Kuma 2.7.29's
//! `pkg/plugins/policies/meshretry/api/v1alpha1/validator_test.go` (the cases that use the
//! upper-case header match types of that file are written with the schema's names here, see
//! the module docs).

use super::*;
use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

fn errors(spec: &str) -> Vec<(String, String)> {
    violations::<MeshRetry>(spec)
}

const FULL: &str = r#"
targetRef:
  kind: Mesh
to:
  - targetRef:
      kind: Mesh
    default:
      tcp:
        maxConnectAttempt: 5
  - targetRef:
      kind: MeshService
      name: backend
    default:
      tcp:
        maxConnectAttempt: 5
      http:
        numRetries: 10
        perTryTimeout: 20s
        backOff:
          baseInterval: 15s
          maxInterval: 20m
        rateLimitedBackOff:
          resetHeaders:
            - name: retry-after-http
              format: Seconds
            - name: x-retry-after-http
              format: UnixTimestamp
          maxInterval: 21m
        retryOn: [5xx, GatewayError, Reset, Retriable4xx, ConnectFailure, EnvoyRatelimited,
          RefusedStream, Http3PostConnectFailure, HttpMethodConnect, HttpMethodDelete,
          HttpMethodGet, HttpMethodHead, HttpMethodOptions, HttpMethodPatch, HttpMethodPost,
          HttpMethodPut, HttpMethodTrace, 500, 409, 503]
        retriableRequestHeaders:
          - {type: Prefix, name: x-my-header-1, value: kuma-value-}
          - {type: RegularExpression, name: x-my-header-2, value: ".*"}
          - {type: Exact, name: x-my-header-3, value: exact-value}
        retriableResponseHeaders:
          - {type: Prefix, name: x-my-header-4, value: kuma-value-}
        hostSelection:
          - predicate: OmitPreviousHosts
          - predicate: OmitHostsWithTags
            tags: {version: v1}
          - predicate: OmitPreviousPriorities
            updateFrequency: 2
        hostSelectionMaxAttempts: 3
      grpc:
        numRetries: 10
        perTryTimeout: 20s
        backOff:
          baseInterval: 15s
          maxInterval: 20m
        rateLimitedBackOff:
          resetHeaders:
            - name: retry-after-grpc
              format: Seconds
          maxInterval: 21m
        retryOn: [Canceled, DeadlineExceeded, Internal, ResourceExhausted, Unavailable]
"#;

#[test]
fn valid_specs_pass() {
    for spec in [
        FULL,
        "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: Mesh}\n  default: {http: {numRetries: 5}}\n",
        "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: Mesh}\n  default:\n    http: {numRetries: 5, retryOn: [], retriableRequestHeaders: [], retriableResponseHeaders: []}\n",
        "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: Mesh}\n  default: {grpc: {numRetries: 5, retryOn: []}}\n",
        "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: Mesh}\n  default: {http: {retryOn: [500, 409]}}\n",
        "targetRef: {kind: MeshHTTPRoute, name: route-1}\nto:\n- targetRef: {kind: Mesh}\n  default: {http: {retryOn: [500, 409]}}\n",
    ] {
        assert_eq!(errors(spec), [], "{spec}");
    }
}

#[test]
fn empty_to_and_unsupported_kinds() {
    assert_eq!(
        errors("targetRef: {kind: MeshService, name: backend}\nto: []\n"),
        [v("spec.to", "needs at least one item")]
    );
    assert_eq!(
        errors("targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: MeshSubset, tags: {version: v1}}\n  default: {http: {numRetries: 1}}\n- targetRef: {kind: MeshServiceSubset, name: backend, tags: {kuma.io/zone: us-east}}\n  default: {grpc: {numRetries: 1}}\n"),
        [
            v("spec.to[0].targetRef.kind", "value is not supported"),
            v("spec.to[1].targetRef.kind", "value is not supported"),
        ]
    );
    for top in [
        "{kind: MeshGateway, name: gateway-1}",
        "{kind: MeshHTTPRoute, name: route-1}",
    ] {
        assert_eq!(
            errors(&format!("targetRef: {top}\nto:\n- targetRef: {{kind: MeshService, name: web-backend}}\n  default: {{tcp: {{maxConnectAttempt: 5}}}}\n")),
            [v("spec.to[0].targetRef.kind", "value is not supported")],
            "{top}"
        );
    }
}

#[test]
fn empty_sections() {
    let item = |default: &str| {
        errors(&format!(
            "targetRef: {{kind: Mesh}}\nto:\n- targetRef: {{kind: Mesh}}\n  default: {default}\n"
        ))
    };
    assert_eq!(
        item("{}"),
        [v(
            "spec.to[0].default.conf",
            "at least one of the 'tcp', 'http', 'grpc' must be specified"
        )]
    );
    assert_eq!(
        item("{tcp: {}, http: {}, grpc: {}}"),
        [
            v("spec.to[0].default.conf.tcp", "must not be empty"),
            v("spec.to[0].default.conf.http", "must not be empty"),
            v("spec.to[0].default.conf.grpc", "must not be empty"),
        ]
    );
    for proto in ["http", "grpc"] {
        assert_eq!(
            item(&format!("{{{proto}: {{backOff: {{}}}}}}")),
            [v(
                &format!("spec.to[0].default.conf.{proto}.backOff"),
                "must not be empty"
            )]
        );
        assert_eq!(
            item(&format!("{{{proto}: {{rateLimitedBackOff: {{}}}}}}")),
            [v(
                &format!("spec.to[0].default.conf.{proto}.rateLimitedBackOff.resetHeaders"),
                "must be defined"
            )]
        );
    }
    assert_eq!(
        item("{http: {rateLimitedBackOff: {maxInterval: 0s, resetHeaders: [{name: '', format: UnixTimestamp}]}}}"),
        [
            v(
                "spec.to[0].default.conf.http.rateLimitedBackOff.maxInterval",
                "must be defined and greater than zero"
            ),
            v(
                "spec.to[0].default.conf.http.rateLimitedBackOff.resetHeaders[0].name",
                "must be defined"
            ),
        ]
    );
}

#[test]
fn unknown_retry_on_items() {
    let spec = "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: Mesh}\n  default:\n    http: {retryOn: [WRONG_VALUE, 5XX, reset, DEADLINE_EXCEEDED, 123, 952, '+500']}\n    grpc: {retryOn: [500, reset, wrong]}\n";
    let http = |i: usize, item: &str| {
        v(
            &format!("spec.to[0].default.conf.http.retryOn[{i}]"),
            &format!("unknown item '{item}'"),
        )
    };
    let grpc = |i: usize, item: &str| {
        v(
            &format!("spec.to[0].default.conf.grpc.retryOn[{i}]"),
            &format!("unknown item '{item}'"),
        )
    };
    assert_eq!(
        errors(spec),
        [
            http(0, "WRONG_VALUE"),
            http(1, "5XX"),
            http(2, "reset"),
            http(3, "DEADLINE_EXCEEDED"),
            http(4, "123"),
            http(5, "952"),
            http(6, "+500"),
            grpc(0, "500"),
            grpc(1, "reset"),
            grpc(2, "wrong"),
        ]
    );
}

#[test]
fn host_selection_rules() {
    let item = |hs: &str| {
        errors(&format!(
            "targetRef: {{kind: Mesh}}\nto:\n- targetRef: {{kind: Mesh}}\n  default: {{http: {{hostSelection: {hs}}}}}\n"
        ))
    };
    let at = |s: &str| format!("spec.to[0].default.conf.http.hostSelection{s}");
    assert_eq!(
        item("[{predicate: OmitHostsWithTags}]"),
        [v(&at("[0].tags"), "must be defined")]
    );
    assert_eq!(
        item("[{predicate: OmitPreviousPriorities, updateFrequency: 0}]"),
        [v(
            &at("[0].updateFrequency"),
            "must be defined and greater than zero"
        )]
    );
    assert_eq!(
        item("[{predicate: OmitPreviousHosts}, {predicate: IncorrectPredicateType}]"),
        [v(
            &at("[1].predicate"),
            "unknown predicate type 'IncorrectPredicateType'"
        )]
    );
    assert_eq!(
        item("[{predicate: OmitPreviousPriorities, updateFrequency: 3}, {predicate: OmitPreviousHosts}, {predicate: OmitPreviousPriorities, updateFrequency: 1}]"),
        [v(
            &at("[2].predicate"),
            "OmitPreviousPriorities must only be specified once"
        )]
    );
}

#[test]
fn retry_on_items_mean_envoy_conditions_codes_and_methods() {
    assert_eq!(
        HttpRetryOn::parse("GatewayError"),
        Some(HttpRetryOn::Condition("gateway-error"))
    );
    assert_eq!(
        HttpRetryOn::parse("503"),
        Some(HttpRetryOn::StatusCode(503))
    );
    assert_eq!(
        HttpRetryOn::parse("0503"),
        Some(HttpRetryOn::StatusCode(503))
    );
    assert_eq!(
        HttpRetryOn::parse("306"),
        None,
        "Go's StatusText has no 306"
    );
    assert_eq!(
        HttpRetryOn::parse("HttpMethodGet"),
        Some(HttpRetryOn::Method("GET"))
    );
    assert_eq!(grpc_retry_on("Canceled"), Some("canceled"));
    assert_eq!(grpc_retry_on("cancelled"), None);
}

#[test]
fn enums_and_unknown_fields_are_decode_errors() {
    let with = |default: &str| {
        format!(
            "targetRef: {{kind: Mesh}}\nto:\n- targetRef: {{kind: Mesh}}\n  default: {default}\n"
        )
    };
    assert!(decodes::<MeshRetry>(&with(
        "{http: {retriableRequestHeaders: [{type: Present, name: x}]}}"
    )));
    assert!(!decodes::<MeshRetry>(&with(
        "{http: {retriableRequestHeaders: [{type: PREFIX, name: x, value: y}]}}"
    )));
    assert!(!decodes::<MeshRetry>(&with(
        "{http: {rateLimitedBackOff: {resetHeaders: [{name: x, format: Minutes}]}}}"
    )));
    assert!(!decodes::<MeshRetry>(&with("{http: {numRetriez: 1}}")));
    assert!(!decodes::<MeshRetry>(&with(
        "{tcp: {maxConnectAttempt: -1}}"
    )));
}

#[test]
fn round_trips() {
    assert_round_trip(&document::<MeshRetry>(
        "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: MeshService\n      name: backend\n    default:\n      http:\n        numRetries: 3\n        retryOn:\n          - '503'\n          - GatewayError\n      tcp:\n        maxConnectAttempt: 2\n",
    ));
}
