//! HealthCheck to MeshHealthCheck: owns the conversion of the old HealthCheck policy
//! (issue 19, item 1).
//!
//! The mapping follows seed 000 (shadow outputs, leaking defaults) and Kuma 2.7's
//! MeshHealthCheck semantics as Umbra generates them (`xds/src/plugins/health_check.rs`):
//!
//! - HealthCheck is an outbound policy: each `sources[i]` selects the proxies (top-level
//!   `targetRef`), the `destinations` become `to` items (`Mesh` or `MeshService`). One
//!   MeshHealthCheck per source.
//! - `interval`, `timeout`, the thresholds, jitters, `healthyPanicThreshold` (as the value Kuma
//!   renders: the float widened to a double), `failTrafficOnPanic`, `noTrafficInterval`,
//!   `reuseConnection`, `alwaysLogHealthCheckFailures`, `eventLogPath` are copied.
//! - The check kind: the old policy adds its TCP check (or a plain TCP check when neither `tcp`
//!   nor `http` is set) to every destination, its HTTP check to every destination whatever
//!   its protocol; MeshHealthCheck picks one check by the destination's protocol. So a TCP
//!   check converts to `tcp` plus disabled `http` and `grpc` (TCP checks for HTTP, HTTP/2,
//!   gRPC and TCP services), an HTTP check to an enabled `http` plus disabled `tcp` and
//!   `grpc`. Every output sets the three `disabled` flags, `alwaysLogHealthCheckFailures` and
//!   `intervalJitterPercent`, `tcp.receive` and `http.expectedStatuses` explicitly (to what
//!   the old policy renders, an empty list for an absent one) so that merging with less
//!   specific MeshHealthChecks cannot change the check kind or those fields.
//! - `tcp.send`/`receive` (base64 bytes) become MeshHealthCheck's text payloads (the decoded
//!   bytes, which must be UTF-8); `http.requestHeadersToAdd` split into `add` (`append: true`)
//!   and `set`.
//!
//! Differences that remain: MeshHealthCheck's HTTP check also sends `x-kuma-tags` (seed 000's
//! leaking defaults, the other way round), writes `eventLogPath` as a file event sink,
//! splits header values on commas and puts `add` headers before `set` ones; Kafka
//! destinations get no check; old precedence becomes merging.

use serde_json::{json, Map, Value};

use super::model::{int_or_decimal, set_and_add, ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::old::health_check::{decode_bytes, HealthCheck, HealthCheckConf, Http, Tcp};
use crate::resource::{ResourceType, Spec};

/// Convert a HealthCheck into one MeshHealthCheck per source.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations;
/// [`ConvertError::Unsupported`] for a conf with both `tcp` and `http` (which Kuma refuses);
/// [`ConvertError::Invalid`] when an output does not validate (an `eventLogPath` that is not a
/// file path, `intervalJitterPercent` above 100).
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::HealthCheck(hc) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a HealthCheck"));
    };
    let HealthCheck {
        sources,
        destinations,
        conf,
    } = hc;
    let conf = conf
        .as_ref()
        .ok_or_else(|| ctx.empty("the HealthCheck has no conf"))?;
    if sources.is_empty() || destinations.is_empty() {
        return Err(ctx.empty("the HealthCheck has no sources or no destinations"));
    }
    if conf.tcp.is_some() && conf.http.is_some() {
        return Err(ctx.unsupported(
            "conf.http and conf.tcp cannot be defined at the same time (Kuma refuses this HealthCheck)",
        ));
    }
    let mut notes = Vec::new();
    let default = convert_conf(conf, &mut notes);
    notes.push(Note::new(
        NoteKind::Semantics,
        "conf",
        "Kuma applies only the most specific HealthCheck per source and destination; every MeshHealthCheck targeting the proxy and destination merges (by targetRef kind, then name), so optional fields this policy leaves unset (jitters, panic settings, noTrafficInterval, reuseConnection, eventLogPath, tcp.send, http headers) may come from less specific MeshHealthChecks",
    ));

    let outputs = selectors::outputs_per_source(
        ctx,
        ResourceType::MeshHealthCheck,
        sources,
        destinations,
        &default,
        &mut notes,
    )?;
    Ok((outputs, notes))
}

/// `conf` as MeshHealthCheck's `default`.
fn convert_conf(conf: &HealthCheckConf, notes: &mut Vec<Note>) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    if let Some(d) = &conf.interval {
        put("interval", json!(d));
    }
    if let Some(d) = &conf.timeout {
        put("timeout", json!(d));
    }
    put("unhealthyThreshold", json!(conf.unhealthy_threshold));
    put("healthyThreshold", json!(conf.healthy_threshold));
    if let Some(d) = &conf.initial_jitter {
        put("initialJitter", json!(d));
    }
    if let Some(d) = &conf.interval_jitter {
        put("intervalJitter", json!(d));
    }
    put(
        "intervalJitterPercent",
        json!(conf.interval_jitter_percent.unwrap_or(0)),
    );
    if let Some(p) = conf.healthy_panic_threshold {
        // The value Kuma renders: a protobuf float widened to a double.
        put("healthyPanicThreshold", int_or_decimal(f64::from(p as f32)));
    }
    if let Some(b) = conf.fail_traffic_on_panic {
        put("failTrafficOnPanic", json!(b));
    }
    if let Some(path) = &conf.event_log_path {
        put("eventLogPath", json!(path));
        notes.push(
            Note::new(
                NoteKind::Semantics,
                "conf.eventLogPath",
                "HealthCheck writes Envoy's deprecated eventLogPath; MeshHealthCheck an eventLogger file sink with the same path",
            )
            .affecting(&["eventLogPath", "eventLogger"]),
        );
    }
    put(
        "alwaysLogHealthCheckFailures",
        json!(conf.always_log_health_check_failures.unwrap_or(false)),
    );
    if let Some(d) = &conf.no_traffic_interval {
        put("noTrafficInterval", json!(d));
    }
    if let Some(b) = conf.reuse_connection {
        put("reuseConnection", json!(b));
    }
    let disabled = json!({"disabled": true});
    match &conf.http {
        Some(http) => {
            put("http", convert_http(http, notes));
            put("tcp", disabled.clone());
            put("grpc", disabled);
            notes.push(Note::new(
                NoteKind::Semantics,
                "conf.http",
                "HealthCheck adds its HTTP check to every destination; MeshHealthCheck only to HTTP and HTTP/2 services (gRPC, TCP and Kafka destinations lose the check)",
            ));
        }
        None => {
            put(
                "tcp",
                convert_tcp(conf.tcp.as_ref().unwrap_or(&Tcp::default()), notes),
            );
            put("http", disabled.clone());
            put("grpc", disabled);
            notes.push(Note::new(
                NoteKind::Semantics,
                "conf.tcp",
                "HealthCheck adds its TCP check to every destination; MeshHealthCheck (tcp, with http and grpc disabled) to HTTP, HTTP/2, gRPC and TCP services, not Kafka ones (they lose the check)",
            ));
        }
    }
    Value::Object(m)
}

/// A base64 payload as MeshHealthCheck's text (`None`: not UTF-8, with a note).
fn text(b64: &str, field: String, notes: &mut Vec<Note>) -> Option<String> {
    let decoded = decode_bytes(b64).and_then(|b| String::from_utf8(b).ok());
    if decoded.is_none() {
        notes.push(
            Note::new(
                NoteKind::Dropped,
                field,
                "MeshHealthCheck payloads are text: bytes that are not UTF-8 (or not base64) cannot be expressed: dropped",
            )
            .affecting(&["tcpHealthCheck"]),
        );
    }
    decoded
}

/// `conf.tcp` as an enabled MeshHealthCheck `tcp`.
fn convert_tcp(tcp: &Tcp, notes: &mut Vec<Note>) -> Value {
    let mut m = Map::new();
    m.insert("disabled".to_owned(), json!(false));
    if let Some(s) = &tcp.send {
        if let Some(t) = text(s, "conf.tcp.send".to_owned(), notes) {
            m.insert("send".to_owned(), json!(t));
        }
    }
    // Always set: an empty list renders as an absent one and keeps a less specific
    // MeshHealthCheck's payloads out of the merge.
    let items: Vec<String> = tcp
        .receive
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, s)| text(s, format!("conf.tcp.receive[{i}]"), notes))
        .collect();
    m.insert("receive".to_owned(), json!(items));
    Value::Object(m)
}

/// `conf.http` as an enabled MeshHealthCheck `http`.
fn convert_http(http: &Http, notes: &mut Vec<Note>) -> Value {
    let mut m = Map::new();
    m.insert("disabled".to_owned(), json!(false));
    if http.path.is_empty() {
        notes.push(
            Note::new(
                NoteKind::Default,
                "conf.http.path",
                "an empty path becomes MeshHealthCheck's default \"/\"",
            )
            .affecting(&["path"]),
        );
    } else {
        m.insert("path".to_owned(), json!(http.path));
    }
    // Always set (an empty list renders as an absent one): no merge from less specific ones.
    m.insert(
        "expectedStatuses".to_owned(),
        json!(http.expected_statuses.as_deref().unwrap_or_default()),
    );
    notes.push(
        Note::new(
            NoteKind::Default,
            "conf.http.requestHeadersToAdd",
            "MeshHealthCheck's HTTP check also sends an x-kuma-tags header with the proxy's tags (first), which HealthCheck does not",
        )
        .affecting(&["requestHeadersToAdd"]),
    );
    let mut headers = Vec::new();
    for (i, h) in http.request_headers_to_add.iter().flatten().enumerate() {
        let Some(header) = &h.header else {
            notes.push(Note::new(
                NoteKind::Dropped,
                format!("conf.http.requestHeadersToAdd[{i}]"),
                "an entry without header adds nothing: dropped",
            ));
            continue;
        };
        if header.value.contains(',') {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    format!("conf.http.requestHeadersToAdd[{i}].header.value"),
                    "MeshHealthCheck adds one header per comma-separated value",
                )
                .affecting(&["requestHeadersToAdd"]),
            );
        }
        headers.push((
            json!({"name": header.key, "value": header.value}),
            h.append == Some(true),
        ));
    }
    if let Some(h) = set_and_add(
        headers,
        "MeshHealthCheck",
        "conf.http.requestHeadersToAdd",
        "requestHeadersToAdd",
        notes,
    ) {
        m.insert("requestHeadersToAdd".to_owned(), h);
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{convert, policy, targets, WEB_TO_BACKEND as SEL};
    use crate::policies::mesh_fault_injection::IntOrString;
    use crate::resource::Resource;

    fn hc(body: &str) -> Resource {
        policy("HealthCheck", "hc", body)
    }

    const BASE: &str =
        "conf:\n  interval: 10s\n  timeout: 2s\n  unhealthyThreshold: 3\n  healthyThreshold: 1\n";

    fn run(body: &str) -> (Value, Vec<Note>) {
        let c = convert(&hc(body)).unwrap();
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshHealthCheck);
        (c.outputs[0].spec_value(), c.notes)
    }

    fn find<'a>(notes: &'a [Note], field: &str) -> Option<&'a Note> {
        notes.iter().find(|n| n.field == field)
    }

    #[test]
    fn tcp_check_with_every_common_field() {
        let (spec, notes) = run(&format!(
            "{SEL}{BASE}  initialJitter: 1s\n  intervalJitter: 2s\n  intervalJitterPercent: 10\n  healthyPanicThreshold: 33.3\n  failTrafficOnPanic: true\n  alwaysLogHealthCheckFailures: true\n  noTrafficInterval: 7s\n  reuseConnection: false\n  tcp: {{send: Zm9v, receive: [YmFy, YmF6]}}\n"
        ));
        assert_eq!(
            spec,
            json!({
                "targetRef": {"kind": "MeshService", "name": "web"},
                "to": [{"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {
                    "interval": "10s", "timeout": "2s", "unhealthyThreshold": 3, "healthyThreshold": 1,
                    "initialJitter": "1s", "intervalJitter": "2s", "intervalJitterPercent": 10,
                    "healthyPanicThreshold": "33.29999923706055", "failTrafficOnPanic": true,
                    "alwaysLogHealthCheckFailures": true, "noTrafficInterval": "7s",
                    "reuseConnection": false,
                    "tcp": {"disabled": false, "send": "foo", "receive": ["bar", "baz"]},
                    "http": {"disabled": true}, "grpc": {"disabled": true},
                }}],
            })
        );
        // The converted threshold parses to the very double Kuma renders.
        let p: IntOrString = serde_json::from_value(json!("33.29999923706055")).unwrap();
        assert_eq!(p.to_f64(), Some(f64::from(33.3f64 as f32)));
        assert!(notes.iter().all(|n| n.affects.is_empty()));
        assert!(find(&notes, "conf.tcp").is_some());
        assert!(find(&notes, "conf").is_some());
    }

    #[test]
    fn neither_tcp_nor_http_is_a_plain_tcp_check() {
        let (spec, _) = run(&format!("{SEL}{BASE}  healthyPanicThreshold: 50\n"));
        let d = &spec["to"][0]["default"];
        assert_eq!(d["tcp"], json!({"disabled": false, "receive": []}));
        assert_eq!(d["http"], json!({"disabled": true}));
        assert_eq!(d["healthyPanicThreshold"], json!(50));
        assert_eq!(d["intervalJitterPercent"], json!(0));
        assert_eq!(d["alwaysLogHealthCheckFailures"], json!(false));
    }

    #[test]
    fn http_check_headers_and_leaks() {
        let (spec, notes) = run(&format!(
            "{SEL}{BASE}  eventLogPath: /tmp/hc.log\n  http:\n    path: /health\n    expectedStatuses: [200, 204]\n    requestHeadersToAdd:\n    - header: {{key: x-a, value: '1'}}\n    - header: {{key: x-b, value: '2,3'}}\n      append: true\n"
        ));
        let d = &spec["to"][0]["default"];
        assert_eq!(
            d["http"],
            json!({"disabled": false, "path": "/health", "expectedStatuses": [200, 204],
                "requestHeadersToAdd": {"set": [{"name": "x-a", "value": "1"}],
                    "add": [{"name": "x-b", "value": "2,3"}]}})
        );
        assert_eq!(d["tcp"], json!({"disabled": true}));
        assert_eq!(d["grpc"], json!({"disabled": true}));
        assert_eq!(d["eventLogPath"], json!("/tmp/hc.log"));
        assert_eq!(
            find(&notes, "conf.http.requestHeadersToAdd")
                .unwrap()
                .affects,
            ["requestHeadersToAdd"]
        );
        assert_eq!(
            find(&notes, "conf.eventLogPath").unwrap().affects,
            ["eventLogPath", "eventLogger"]
        );
        assert!(find(&notes, "conf.http.requestHeadersToAdd[1].header.value").is_some());
        // set before add: reordered.
        assert!(notes
            .iter()
            .any(|n| n.field == "conf.http.requestHeadersToAdd" && n.message.contains("order")));
        assert!(find(&notes, "conf.http").unwrap().affects.is_empty());
    }

    #[test]
    fn headers_in_kumas_order_are_not_reordered() {
        let (_, notes) = run(&format!(
            "{SEL}{BASE}  http:\n    path: /\n    requestHeadersToAdd:\n    - header: {{key: x-b, value: '2'}}\n      append: true\n    - header: {{key: x-a, value: '1'}}\n"
        ));
        assert!(!notes.iter().any(|n| n.message.contains("order")));
    }

    #[test]
    fn payloads_that_are_not_text_are_dropped() {
        // 0xff 0xfe is not UTF-8.
        let (spec, notes) = run(&format!(
            "{SEL}{BASE}  tcp: {{send: //4=, receive: [YmFy, //4=]}}\n"
        ));
        assert_eq!(
            spec["to"][0]["default"]["tcp"],
            json!({"disabled": false, "receive": ["bar"]})
        );
        assert_eq!(
            find(&notes, "conf.tcp.send").unwrap().kind,
            NoteKind::Dropped
        );
        assert!(find(&notes, "conf.tcp.receive[1]").is_some());
    }

    #[test]
    fn errors() {
        let e = convert(&hc(SEL)).unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }));
        let e = convert(&hc(&format!(
            "{SEL}{BASE}  tcp: {{}}\n  http: {{path: /}}\n"
        )))
        .unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }));
        // Not a file path for MeshHealthCheck.
        let e = convert(&hc(&format!("{SEL}{BASE}  eventLogPath: relative.log\n"))).unwrap_err();
        assert!(matches!(e, ConvertError::Invalid { .. }), "{e}");
    }

    #[test]
    fn one_output_per_source() {
        let c = convert(&hc(&format!("sources:\n- match: {{kuma.io/service: web}}\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: '*'}}\n{BASE}")))
        .unwrap();
        assert_eq!(
            targets(&c),
            [
                json!({"kind": "MeshService", "name": "web"}),
                json!({"kind": "Mesh"})
            ]
        );
        assert_eq!(c.outputs[1].meta.name, "hc-2");
        assert_eq!(
            c.outputs[1].spec_value()["to"][0]["targetRef"],
            json!({"kind": "Mesh"})
        );
    }
}
