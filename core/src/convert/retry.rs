//! Retry to MeshRetry: owns the conversion of the old Retry policy (issue 19, item 1).
//!
//! The mapping follows seed 000 (the transition MADR: shadow outputs, leaking defaults) and
//! Kuma 2.7's MeshRetry semantics as Umbra generates them (`xds/src/plugins/retry.rs`):
//!
//! - Retry is an outbound policy: each `sources[i]` selects the proxies (the top-level
//!   `targetRef`, any kind), the `destinations` become `to` items (`Mesh` or `MeshService`:
//!   Retry only allows `kuma.io/service` in destinations). One MeshRetry per source.
//! - `conf.http` -> `default.http`: `numRetries`, `perTryTimeout`, `backOff` copied;
//!   `retryOn` conditions renamed (`all_5xx` -> `5xx`, `gateway_error` -> `GatewayError`, ...),
//!   `retriableStatusCodes` become status-code items and `retriableMethods` become
//!   `HttpMethod<Method>` items of `retryOn`. `retriable_status_codes` (added by MeshRetry
//!   whenever status codes are listed) and `retriable_headers` (no MeshRetry condition) are not
//!   conditions of MeshRetry: a note says when the Envoy `retryOn` string differs.
//! - `conf.grpc` -> `default.grpc`: same fields, `retryOn` renamed (`cancelled` ->
//!   `Canceled`, which Kuma 2.7 renders as Envoy's unknown `canceled`: a note).
//! - `conf.tcp.maxConnectAttempts` -> `default.tcp.maxConnectAttempt`.
//!
//! Differences every conversion with an HTTP or gRPC section has: Kuma puts the old Retry on
//! the outbound virtual host and MeshRetry on each route (`retryPolicy` moves; Envoy's
//! route-level policy replaces the virtual host's, so the behaviour is the same), and the
//! precedence of old policies (the most specific Retry wins alone) becomes merging (every
//! matching MeshRetry contributes the fields this one leaves unset).

use serde_json::{json, Map, Value};

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::duration::Duration;
use crate::old::retry::{BackOff, Grpc, GrpcRetryOn, Http, HttpRetryOn, Retry, Tcp};
use crate::policies::mesh_retry::HttpRetryOn as NewRetryOn;
use crate::resource::{ResourceType, Spec};

/// Kuma's default HTTP `retry_on` (old Retry and MeshRetry alike).
const HTTP_RETRY_ON_DEFAULT: &str = "gateway-error,connect-failure,refused-stream";
/// The Envoy condition both policies append when status codes are listed.
const RETRIABLE_STATUS_CODES: &str = "retriable-status-codes";

/// Convert a Retry into one MeshRetry per source.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations; [`ConvertError::Invalid`]
/// when an output does not validate.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::Retry(retry) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a Retry"));
    };
    let Retry {
        sources,
        destinations,
        conf,
    } = retry;
    let conf = conf
        .as_ref()
        .ok_or_else(|| ctx.empty("the Retry has no conf"))?;
    if sources.is_empty() || destinations.is_empty() {
        return Err(ctx.empty("the Retry has no sources or no destinations"));
    }
    let mut notes = Vec::new();
    let mut default = Map::new();
    if let Some(http) = &conf.http {
        default.insert("http".to_owned(), convert_http(http, &mut notes));
    }
    if let Some(grpc) = &conf.grpc {
        default.insert("grpc".to_owned(), convert_grpc(grpc, &mut notes));
    }
    if let Some(Tcp {
        max_connect_attempts,
    }) = &conf.tcp
    {
        default.insert(
            "tcp".to_owned(),
            json!({"maxConnectAttempt": max_connect_attempts}),
        );
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf.tcp.maxConnectAttempts",
            "Retry also sets maxConnectAttempts on Kafka outbounds; MeshRetry only on TCP ones (Kafka outbounds lose it)",
        ));
    }
    if default.is_empty() {
        return Err(ctx.empty("the Retry's conf has no http, grpc or tcp section"));
    }
    if conf.http.is_some() || conf.grpc.is_some() {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                "conf",
                "Retry sets the retry policy on the outbound virtual host, MeshRetry on each of its routes (the route's policy replaces the virtual host's in Envoy: same retries)",
            )
            .affecting(&["retryPolicy"]),
        );
    }
    notes.push(Note::new(
        NoteKind::Semantics,
        "conf",
        "Kuma applies only the most specific Retry per source and destination; every MeshRetry targeting the proxy and destination merges (by targetRef kind, then name), so fields this policy leaves unset may come from less specific MeshRetries",
    ));

    let outputs = selectors::outputs_per_source(
        ctx,
        ResourceType::MeshRetry,
        sources,
        destinations,
        &Value::Object(default),
        &mut notes,
    )?;
    Ok((outputs, notes))
}

/// The fields MeshRetry's `http` and `grpc` share with the old ones: `numRetries`,
/// `perTryTimeout`, `backOff`.
fn shared_fields(
    num_retries: Option<u32>,
    per_try_timeout: Option<&Duration>,
    backoff: Option<&BackOff>,
) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(n) = num_retries {
        m.insert("numRetries".to_owned(), json!(n));
    }
    if let Some(d) = per_try_timeout {
        m.insert("perTryTimeout".to_owned(), json!(d));
    }
    if let Some(b) = backoff {
        m.insert("backOff".to_owned(), back_off(b));
    }
    m
}

/// `backOff` as MeshRetry writes it.
fn back_off(b: &BackOff) -> Value {
    let mut m = Map::new();
    if let Some(d) = &b.base_interval {
        m.insert("baseInterval".to_owned(), json!(d));
    }
    if let Some(d) = &b.max_interval {
        m.insert("maxInterval".to_owned(), json!(d));
    }
    Value::Object(m)
}

/// MeshRetry's name of an old HTTP `retryOn` condition (`None`: no MeshRetry condition).
fn http_condition(c: HttpRetryOn) -> Option<&'static str> {
    Some(match c {
        HttpRetryOn::All5xx => "5xx",
        HttpRetryOn::GatewayError => "GatewayError",
        HttpRetryOn::Reset => "Reset",
        HttpRetryOn::ConnectFailure => "ConnectFailure",
        HttpRetryOn::EnvoyRatelimited => "EnvoyRatelimited",
        HttpRetryOn::Retriable4xx => "Retriable4xx",
        HttpRetryOn::RefusedStream => "RefusedStream",
        HttpRetryOn::Http3PostConnectFailure => "Http3PostConnectFailure",
        HttpRetryOn::RetriableStatusCodes | HttpRetryOn::RetriableHeaders => return None,
    })
}

/// MeshRetry's `HttpMethod<Method>` item for an old method (`None` for `NONE`).
fn method_item(m: crate::old::retry::HttpMethod) -> Option<String> {
    let name = m.name();
    if name == "NONE" {
        return None;
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    Some(format!(
        "HttpMethod{first}{}",
        chars.as_str().to_ascii_lowercase()
    ))
}

/// Kuma's `ensureRetriableStatusCodes`.
fn ensure_retriable_status_codes(retry_on: String) -> String {
    if retry_on.split(',').any(|c| c == RETRIABLE_STATUS_CODES) {
        retry_on
    } else {
        format!("{retry_on},{RETRIABLE_STATUS_CODES}")
    }
}

/// The Envoy `retryOn` the old Retry renders for `http`.
fn old_http_retry_on(http: &Http) -> String {
    let mut s = match http.retry_on.as_deref() {
        Some(on) if !on.is_empty() => on
            .iter()
            .map(|c| c.envoy_name())
            .collect::<Vec<_>>()
            .join(","),
        _ => HTTP_RETRY_ON_DEFAULT.to_owned(),
    };
    if http.retriable_status_codes.is_some() {
        s = ensure_retriable_status_codes(s);
    }
    s
}

/// The Envoy `retryOn` MeshRetry renders for its `retryOn` items.
fn new_http_retry_on(items: &[String]) -> String {
    let mut conditions = Vec::new();
    let mut codes = false;
    for i in items {
        match NewRetryOn::parse(i) {
            Some(NewRetryOn::Condition(c)) => conditions.push(c),
            Some(NewRetryOn::StatusCode(_)) => codes = true,
            _ => {}
        }
    }
    let s = if conditions.is_empty() {
        HTTP_RETRY_ON_DEFAULT.to_owned()
    } else {
        conditions.join(",")
    };
    if codes {
        ensure_retriable_status_codes(s)
    } else {
        s
    }
}

/// `conf.http` as MeshRetry's `http`.
fn convert_http(http: &Http, notes: &mut Vec<Note>) -> Value {
    let mut m = shared_fields(
        http.num_retries,
        http.per_try_timeout.as_ref(),
        http.back_off.as_ref(),
    );
    let mut items: Vec<String> = Vec::new();
    for (i, c) in http.retry_on.iter().flatten().enumerate() {
        match http_condition(*c) {
            Some(name) => items.push(name.to_owned()),
            None if *c == HttpRetryOn::RetriableHeaders => notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("conf.http.retryOn[{i}]"),
                    "retriable_headers has no MeshRetry condition (MeshRetry's retriableResponseHeaders are not set by Retry): dropped",
                )
                .affecting(&["retryPolicy", "retryOn"]),
            ),
            None => {} // retriable_status_codes: implied by the status-code items
        }
    }
    for (i, code) in http.retriable_status_codes.iter().flatten().enumerate() {
        let item = code.to_string();
        if matches!(NewRetryOn::parse(&item), Some(NewRetryOn::StatusCode(_))) {
            items.push(item);
        } else {
            notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("conf.http.retriableStatusCodes[{i}]"),
                    format!("{code} is not an HTTP status code MeshRetry accepts: dropped"),
                )
                .affecting(&["retryPolicy", "retriableStatusCodes"]),
            );
        }
    }
    items.extend(
        http.retriable_methods
            .iter()
            .flatten()
            .filter_map(|m| method_item(*m)),
    );
    if http.retry_on.is_some() || http.retriable_status_codes.is_some() || !items.is_empty() {
        m.insert("retryOn".to_owned(), json!(items));
    }
    let (old, new) = (old_http_retry_on(http), new_http_retry_on(&items));
    if old != new {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                "conf.http.retryOn",
                format!("Envoy's retryOn is {old:?} with the Retry and {new:?} with the MeshRetry (MeshRetry has no retriable_status_codes nor retriable_headers condition: it appends retriable-status-codes when status codes are listed, and uses the default conditions when none is left)"),
            )
            .affecting(&["retryPolicy", "retryOn"]),
        );
    }
    Value::Object(m)
}

/// `conf.grpc` as MeshRetry's `grpc`.
fn convert_grpc(grpc: &Grpc, notes: &mut Vec<Note>) -> Value {
    let mut m = shared_fields(
        grpc.num_retries,
        grpc.per_try_timeout.as_ref(),
        grpc.back_off.as_ref(),
    );
    if let Some(on) = &grpc.retry_on {
        let items: Vec<&str> = on
            .iter()
            .map(|c| match c {
                GrpcRetryOn::Cancelled => "Canceled",
                GrpcRetryOn::DeadlineExceeded => "DeadlineExceeded",
                GrpcRetryOn::Internal => "Internal",
                GrpcRetryOn::ResourceExhausted => "ResourceExhausted",
                GrpcRetryOn::Unavailable => "Unavailable",
            })
            .collect();
        if let Some(i) = on.iter().position(|c| *c == GrpcRetryOn::Cancelled) {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    format!("conf.grpc.retryOn[{i}]"),
                    "cancelled becomes MeshRetry's Canceled, which Kuma 2.7 renders as Envoy's \"canceled\" (not a gRPC retry condition Envoy knows): cancelled calls are no longer retried",
                )
                .affecting(&["retryPolicy", "retryOn"]),
            );
        }
        m.insert("retryOn".to_owned(), json!(items));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{
        convert, has, names, policy, targets, WEB_TO_BACKEND as SEL,
    };
    use crate::resource::Resource;

    fn retry(body: &str) -> Resource {
        policy("Retry", "r", body)
    }

    fn run(body: &str) -> (Vec<Value>, Vec<Note>) {
        let c = convert(&retry(body)).unwrap();
        for o in &c.outputs {
            assert_eq!(o.ty(), ResourceType::MeshRetry);
        }
        (
            c.outputs.iter().map(Resource::spec_value).collect(),
            c.notes,
        )
    }

    #[test]
    fn http_fields_map_one_to_one() {
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    numRetries: 5\n    perTryTimeout: 16s\n    backOff: {{baseInterval: 25ms, maxInterval: 250ms}}\n    retryOn: [all_5xx, gateway_error, reset, connect_failure, envoy_ratelimited, retriable_4xx, refused_stream, http3_post_connect_failure]\n    retriableStatusCodes: [503, 429]\n    retriableMethods: [GET, NONE, POST]\n"
        ));
        assert_eq!(
            specs,
            [json!({
                "targetRef": {"kind": "MeshService", "name": "web"},
                "to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {"http": {
                    "numRetries": 5, "perTryTimeout": "16s",
                    "backOff": {"baseInterval": "25ms", "maxInterval": "250ms"},
                    "retryOn": ["5xx", "GatewayError", "Reset", "ConnectFailure", "EnvoyRatelimited",
                        "Retriable4xx", "RefusedStream", "Http3PostConnectFailure", "503", "429",
                        "HttpMethodGet", "HttpMethodPost"],
                }}}],
            })]
        );
        // Exact mapping: only the placement and precedence notes.
        assert!(!notes.iter().any(|n| n.field.starts_with("conf.http")));
        assert!(notes
            .iter()
            .any(|n| n.field == "conf" && n.affects == ["retryPolicy"]));
        assert!(notes
            .iter()
            .any(|n| n.field == "conf" && n.kind == NoteKind::Semantics && n.affects.is_empty()));
    }

    #[test]
    fn retriable_status_codes_condition_position_and_lone_use_are_noted() {
        // Last among the conditions: same Envoy string, no note.
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    retryOn: [reset, retriable_status_codes]\n    retriableStatusCodes: [503]\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["http"]["retryOn"],
            json!(["Reset", "503"])
        );
        assert!(!has(&notes, NoteKind::Semantics, "conf.http.retryOn"));
        // Alone: the MeshRetry falls back to the default conditions.
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    retryOn: [retriable_status_codes]\n    retriableStatusCodes: [503]\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["http"]["retryOn"],
            json!(["503"])
        );
        let n = notes
            .iter()
            .find(|n| n.field == "conf.http.retryOn")
            .unwrap();
        assert_eq!(n.affects, ["retryPolicy", "retryOn"]);
        assert!(n
            .message
            .contains("gateway-error,connect-failure,refused-stream,retriable-status-codes"));
        // Not last: the order changes.
        let (_, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    retryOn: [retriable_status_codes, reset]\n    retriableStatusCodes: [503]\n"
        ));
        assert!(has(&notes, NoteKind::Semantics, "conf.http.retryOn"));
        // Codes without retryOn: the default conditions in both.
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    retriableStatusCodes: [503]\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["http"]["retryOn"],
            json!(["503"])
        );
        assert!(!has(&notes, NoteKind::Semantics, "conf.http.retryOn"));
    }

    #[test]
    fn unknown_status_codes_and_retriable_headers_are_dropped() {
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    retryOn: [retriable_headers, reset]\n    retriableStatusCodes: [599, 503]\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["http"]["retryOn"],
            json!(["Reset", "503"])
        );
        assert!(has(&notes, NoteKind::Dropped, "conf.http.retryOn[0]"));
        assert!(has(
            &notes,
            NoteKind::Dropped,
            "conf.http.retriableStatusCodes[0]"
        ));
        // "retriable-headers,reset,retriable-status-codes" vs "reset,retriable-status-codes".
        assert!(has(&notes, NoteKind::Semantics, "conf.http.retryOn"));
        // An empty list of codes still adds the condition in the old policy only.
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  http:\n    numRetries: 1\n    retriableStatusCodes: []\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["http"],
            json!({"numRetries": 1, "retryOn": []})
        );
        assert!(has(&notes, NoteKind::Semantics, "conf.http.retryOn"));
    }

    #[test]
    fn grpc_and_tcp_sections() {
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  grpc:\n    numRetries: 3\n    perTryTimeout: 4s\n    backOff: {{baseInterval: 1s}}\n    retryOn: [deadline_exceeded, internal, resource_exhausted, unavailable]\n  tcp: {{maxConnectAttempts: 7}}\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"],
            json!({
                "grpc": {"numRetries": 3, "perTryTimeout": "4s", "backOff": {"baseInterval": "1s"},
                    "retryOn": ["DeadlineExceeded", "Internal", "ResourceExhausted", "Unavailable"]},
                "tcp": {"maxConnectAttempt": 7},
            })
        );
        assert!(!has(&notes, NoteKind::Semantics, "conf.grpc.retryOn[0]"));
        let kafka = notes
            .iter()
            .find(|n| n.field == "conf.tcp.maxConnectAttempts")
            .unwrap();
        assert!(kafka.affects.is_empty());
        let (specs, notes) = run(&format!(
            "{SEL}conf:\n  grpc:\n    retryOn: [unavailable, cancelled]\n"
        ));
        assert_eq!(
            specs[0]["to"][0]["default"]["grpc"]["retryOn"],
            json!(["Unavailable", "Canceled"])
        );
        let n = notes
            .iter()
            .find(|n| n.field == "conf.grpc.retryOn[1]")
            .unwrap();
        assert_eq!(n.affects, ["retryPolicy", "retryOn"]);
    }

    #[test]
    fn tcp_only_has_no_placement_note() {
        let (specs, notes) = run(&format!("{SEL}conf:\n  tcp: {{maxConnectAttempts: 2}}\n"));
        assert_eq!(
            specs[0]["to"][0]["default"],
            json!({"tcp": {"maxConnectAttempt": 2}})
        );
        assert!(notes.iter().all(|n| n.affects.is_empty()));
    }

    #[test]
    fn selectors_one_output_per_source() {
        let c = convert(&retry("sources:\n- match: {kuma.io/service: '*'}\n- match: {kuma.io/service: web, version: v2}\n- match: {kuma.io/service: '*', team: a, zone: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\n- match: {kuma.io/service: backend}\n- match: {kuma.io/service: '*'}\nconf:\n  tcp: {maxConnectAttempts: 2}\n"))
        .unwrap();
        assert_eq!(names(&c), ["r-1", "r-2", "r-3"]);
        assert_eq!(
            targets(&c),
            [
                json!({"kind": "Mesh"}),
                json!({"kind": "MeshServiceSubset", "name": "web", "tags": {"version": "v2"}}),
                json!({"kind": "MeshSubset", "tags": {"team": "a"}}),
            ]
        );
        // Duplicate destinations collapse.
        let to: Vec<Value> = c.outputs[0].spec_value()["to"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["targetRef"].clone())
            .collect();
        assert_eq!(
            to,
            [
                json!({"kind": "Mesh"}),
                json!({"kind": "MeshService", "name": "backend"})
            ]
        );
        assert!(has(&c.notes, NoteKind::Selector, "sources[2].match"));
        assert!(has(&c.notes, NoteKind::Selector, "sources[1]"));
        for o in &c.outputs {
            assert!(o.meta.is_shadow());
        }
    }

    #[test]
    fn missing_conf_or_sections_is_an_error() {
        let err = convert(&retry(SEL)).unwrap_err();
        assert!(matches!(err, ConvertError::Empty { .. }));
        let err = convert(&retry(&format!("{SEL}conf: {{}}\n"))).unwrap_err();
        assert!(matches!(err, ConvertError::Empty { .. }));
        let err = convert(&retry("destinations:\n- match: {kuma.io/service: backend}\nconf:\n  tcp: {maxConnectAttempts: 2}\n"))
        .unwrap_err();
        assert!(matches!(err, ConvertError::Empty { .. }));
    }

    #[test]
    fn method_items_use_kumas_names() {
        use crate::old::retry::HttpMethod;
        assert_eq!(
            method_item(HttpMethod::OPTIONS).as_deref(),
            Some("HttpMethodOptions")
        );
        assert_eq!(method_item(HttpMethod::NONE), None);
        for m in [
            HttpMethod::CONNECT,
            HttpMethod::DELETE,
            HttpMethod::GET,
            HttpMethod::HEAD,
            HttpMethod::PATCH,
            HttpMethod::PUT,
            HttpMethod::TRACE,
        ] {
            let item = method_item(m).unwrap();
            assert_eq!(NewRetryOn::parse(&item), Some(NewRetryOn::Method(m.name())));
        }
    }
}
