//! Retry -> MeshRetry equivalence: a web DPP with one HTTP, one gRPC and one TCP outbound.
//! With HTTP and gRPC sections the only remaining difference is where the retry policy sits
//! (virtual host with the Retry, each route with the MeshRetry), plus the noted `retryOn`
//! changes; TCP-only Retries convert with an empty diff.

use serde_json::json;
use umbra_core::convert::NoteKind;
use umbra_core::resource::ResourceType;

use super::scenarios::{api_and_protocol_services, tagged_dataplane, MESH};
use super::{converts, document, equivalence, migrated, output_spec, scenario, typed_config, Op};

/// web (with a version tag) calls a service of each protocol (HTTP, gRPC, TCP), api the HTTP
/// and TCP ones.
fn topology() -> String {
    let web = tagged_dataplane(
        "web",
        "10.0.0.10",
        8080,
        "kuma.io/service: web, kuma.io/protocol: http, version: v1",
        &[
            (10001, "http-service"),
            (10002, "grpc-service"),
            (10003, "tcp-service"),
        ],
    );
    format!("{MESH}{web}{}", api_and_protocol_services())
}

const OLD_RETRIES: &str = r#"
---
type: Retry
mesh: default
name: retry-all
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: '*'}
conf:
  http:
    numRetries: 5
    perTryTimeout: 16s
    backOff: {baseInterval: 25ms, maxInterval: 250ms}
    retryOn: [retriable_status_codes, all_5xx, reset]
    retriableStatusCodes: [503, 429]
    retriableMethods: [GET, POST]
  grpc:
    numRetries: 3
    perTryTimeout: 4s
    retryOn: [cancelled, unavailable]
  tcp:
    maxConnectAttempts: 7
---
type: Retry
mesh: default
name: retry-web
sources:
- match: {kuma.io/service: web, version: v1}
destinations:
- match: {kuma.io/service: http-service}
- match: {kuma.io/service: tcp-service}
conf:
  http:
    numRetries: 2
    perTryTimeout: 16s
    backOff: {baseInterval: 25ms, maxInterval: 250ms}
    retriableMethods: [GET]
  tcp:
    maxConnectAttempts: 3
"#;

const TCP_RETRIES: &str = r#"
---
type: Retry
mesh: default
name: tcp-all
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: '*'}
conf:
  tcp: {maxConnectAttempts: 4}
---
type: Retry
mesh: default
name: tcp-from-web-and-api
sources:
- match: {kuma.io/service: web}
- match: {kuma.io/service: api}
destinations:
- match: {kuma.io/service: tcp-service}
conf:
  tcp: {maxConnectAttempts: 9}
"#;

const VH: &str = "routeConfig/virtualHosts/0";

#[test]
fn retry_http_and_grpc_move_to_routes() {
    let scenario = scenario(&format!("{}{OLD_RETRIES}", topology()));
    let report = converts(&scenario, &["web", "api"], &[ResourceType::MeshRetry]);
    assert_eq!(
        output_spec(&report, ResourceType::MeshRetry, "retry-all"),
        json!({
            "targetRef": {"kind": "Mesh"},
            "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                "http": {
                    "numRetries": 5, "perTryTimeout": "16s",
                    "backOff": {"baseInterval": "25ms", "maxInterval": "250ms"},
                    "retryOn": ["5xx", "Reset", "503", "429", "HttpMethodGet", "HttpMethodPost"],
                },
                "grpc": {"numRetries": 3, "perTryTimeout": "4s", "retryOn": ["Canceled", "Unavailable"]},
                "tcp": {"maxConnectAttempt": 7},
            }}],
        })
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshRetry, "retry-web")["targetRef"],
        json!({"kind": "MeshServiceSubset", "name": "web", "tags": {"version": "v1"}})
    );
    // retry-all: retryOn order ("retriable-status-codes,5xx,reset" becomes
    // "5xx,reset,retriable-status-codes") and cancelled -> canceled.
    let retry_on: Vec<&str> = report
        .notes()
        .filter(|n| n.affects.iter().any(|a| a == "retryOn"))
        .map(|n| n.field.as_str())
        .collect();
    assert_eq!(retry_on, ["conf.http.retryOn", "conf.grpc.retryOn[0]"]);
    assert!(report
        .notes()
        .any(|n| n.kind == NoteKind::Semantics && n.affects == ["retryPolicy"]));
    // The only remaining operations: the policy leaves the virtual host for the route
    // (HTTP and gRPC outbounds; TCP maxConnectAttempts is identical).
    let mut expected = Vec::new();
    for (dp, ports) in [("web", &[10001, 10002][..]), ("api", &[10001][..])] {
        for port in ports {
            let vh = |rest: &str| {
                typed_config(
                    &format!("outbound:127.0.0.1:{port}"),
                    &format!("{VH}/{rest}"),
                )
            };
            expected.push(Op::new(dp, "add", vh("routes/0/route/retryPolicy")));
            expected.push(Op::new(dp, "remove", vh("retryPolicy")));
        }
    }
    expected.sort();
    assert_eq!(report.ops, expected);

    // Precedence became merging: web -> http-service had retry-web alone. retry-web sets
    // every field retry-all sets (numRetries, perTryTimeout, backOff, retryOn), so nothing of
    // retry-all leaks into the merge: the policy is the same, only moved.
    let live = document(&scenario, "web");
    let now = document(&migrated(&scenario, &report.conversions), "web");
    let at = |doc: &serde_json::Value, tail: &str| {
        doc.pointer(&typed_config(
            "outbound:127.0.0.1:10001",
            &format!("{VH}{tail}"),
        ))
        .cloned()
    };
    let old = at(&live, "/retryPolicy").unwrap();
    let new = at(&now, "/routes/0/route/retryPolicy").unwrap();
    assert_eq!(old["numRetries"], 2);
    assert_eq!(
        new["retryOn"],
        "gateway-error,connect-failure,refused-stream"
    );
    assert_eq!(old, new);
}

#[test]
fn retry_tcp_only_converts_with_an_empty_diff() {
    let scenario = scenario(&format!("{}{TCP_RETRIES}", topology()));
    let report = equivalence(&scenario, &["web", "api"]);
    assert_eq!(report.ops, []);
    let names: Vec<&str> = report
        .conversions
        .iter()
        .flat_map(|c| c.outputs.iter().map(|o| o.meta.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            "tcp-all",
            "tcp-from-web-and-api-1",
            "tcp-from-web-and-api-2"
        ]
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshRetry, "tcp-from-web-and-api-2"),
        json!({
            "targetRef": {"kind": "MeshService", "name": "api"},
            "to": [{"targetRef": {"kind": "MeshService", "name": "tcp-service"},
                "default": {"tcp": {"maxConnectAttempt": 9}}}],
        })
    );
    assert!(report.notes().all(|n| n.affects.is_empty()));
}
