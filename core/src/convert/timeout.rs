//! Timeout to MeshTimeout.
//!
//! The mapping follows the transition MADR (seed 000, "Timeout -> MeshTimeout") and what Umbra
//! generates for each policy (`xds/src/plugins/timeout.rs`, after Kuma 2.7's outbound timeout
//! configurers and its `meshtimeout` plugin):
//!
//! - `sources[i]` (the proxies that send the traffic) become the top-level `targetRef` of one
//!   MeshTimeout each (`<name>-<i+1>` when there are several); `destinations` become `to` items
//!   (`MeshService`, or `Mesh` for `kuma.io/service: '*'`), all with the same `default`;
//! - `conf.connectTimeout` → `connectionTimeout`; `conf.http.idleTimeout` (else
//!   `conf.tcp.idleTimeout`) → `idleTimeout`; `conf.http.requestTimeout` →
//!   `http.requestTimeout`; `conf.http.streamIdleTimeout` (else `conf.grpc.streamIdleTimeout`) →
//!   `http.streamIdleTimeout`; `conf.http.maxStreamDuration` → `http.maxStreamDuration`;
//! - the old Timeout is applied whole (Kuma picks the single most specific one per outbound
//!   service and every unset field takes its built-in value: 0s, connect 5s), while MeshTimeouts
//!   merge field by field. So every field is written explicitly, unset ones with the value the
//!   old Timeout gave them, and a broader MeshTimeout cannot leak into the conversion;
//! - a MeshTimeout also configures the inbounds of the proxies it selects (the old Timeout never
//!   did), so a `from: [{targetRef: Mesh}]` item restates Kuma's inbound defaults (connect 10s,
//!   idle 2h, stream idle 1h, no request timeout), as seed 000's `timeout-global` does.
//!
//! What stays different is reported as [`Note`]s: seed 000's "leaking" defaults (HCM idle
//! timeout moved to the cluster, `requestHeadersTimeout`, route `idleTimeout`,
//! `maxConnectionDuration`/`maxStreamDuration` written as 0s), the single `idleTimeout` for TCP
//! and HTTP, the gRPC fields, and the precedence (old: most specific selector; new: merge by
//! top-level kind, then name).

use serde_json::{json, Map, Value};

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::duration::Duration;
use crate::old::timeout::TimeoutConf;
use crate::resource::{ResourceType, Spec};

/// Kuma 2.7's inbound defaults (`DefaultInboundTimeout`, what Umbra's base inbound generator
/// writes): restated in the `from` item so the proxies' inbounds keep them.
const INBOUND_CONNECT: &str = "10s";
/// Inbound idle timeout default.
const INBOUND_IDLE: &str = "2h";
/// Inbound stream idle timeout default.
const INBOUND_STREAM_IDLE: &str = "1h";

/// Convert a Timeout to MeshTimeouts.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations;
/// [`ConvertError::Invalid`] when a value MeshTimeout rejects (a zero connect timeout, a
/// negative duration) is carried over.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::Timeout(timeout) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a Timeout"));
    };
    let Some(conf) = &timeout.conf else {
        return Err(ctx.empty("conf is not set: the Timeout configures nothing"));
    };
    if timeout.sources.is_empty() || timeout.destinations.is_empty() {
        return Err(ctx.empty("a Timeout without sources or destinations selects no traffic"));
    }
    let mut notes = Vec::new();
    let default = to_default(conf, &mut notes);

    let to = selectors::items(
        &timeout.destinations,
        "destinations",
        selectors::service_or_mesh,
        &default,
        &mut notes,
    );
    let from = json!([{
        "targetRef": {"kind": "Mesh"},
        "default": {
            "connectionTimeout": INBOUND_CONNECT,
            "idleTimeout": INBOUND_IDLE,
            "http": {"requestTimeout": "0s", "streamIdleTimeout": INBOUND_STREAM_IDLE},
        },
    }]);

    let targets = selectors::distinct_targets(&timeout.sources, "sources", &mut notes);
    let all_mesh = targets.iter().all(|t| selectors::kind(t) == "Mesh");
    notes.push(inbound_note(all_mesh));
    notes.push(precedence_note());

    let outputs = ctx.output_per_target(
        ResourceType::MeshTimeout,
        &targets,
        |target| json!({"targetRef": target, "to": to, "from": from}),
    )?;
    Ok((outputs, notes))
}

/// The `to` default for `conf` (every field explicit), pushing the notes of what differs.
fn to_default(conf: &TimeoutConf, notes: &mut Vec<Note>) -> Value {
    let http = conf.http.as_ref();
    let grpc = conf.grpc.as_ref();
    let tcp_idle = conf.tcp.as_ref().and_then(|t| t.idle_timeout.as_ref());
    let http_idle = http.and_then(|h| h.idle_timeout.as_ref());
    let request = http.and_then(|h| h.request_timeout.as_ref());
    let http_stream_idle = http.and_then(|h| h.stream_idle_timeout.as_ref());
    let grpc_stream_idle = grpc.and_then(|g| g.stream_idle_timeout.as_ref());
    let http_max_stream = http.and_then(|h| h.max_stream_duration.as_ref());
    let grpc_max_stream = grpc.and_then(|g| g.max_stream_duration.as_ref());

    // Unconditional: what MeshTimeout writes on every HTTP outbound that the old one did not.
    notes.push(
        Note::new(
            NoteKind::Default,
            "conf.http",
            "on HTTP outbounds MeshTimeout always adds requestHeadersTimeout 0s to the connection manager, maxConnectionDuration 0s to HTTP and HTTP/2 clusters (both disabled; the old Timeout had no such fields) and a route idleTimeout equal to http.streamIdleTimeout (0s when unset; the old Timeout only set the connection manager's streamIdleTimeout)",
        )
        .affecting(&["requestHeadersTimeout", "maxConnectionDuration", "idleTimeout"]),
    );

    let idle = match (http_idle, tcp_idle) {
        (Some(h), Some(t)) if h != t => {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    "conf.tcp.idleTimeout",
                    format!(
                        "MeshTimeout has one idleTimeout for TCP and HTTP: it is converted from http.idleTimeout ({}), so TCP destinations get {} instead of {}",
                        h.as_str(),
                        h.as_str(),
                        t.as_str()
                    ),
                )
                .affecting(&["idleTimeout"]),
            );
            h.as_str()
        }
        (Some(h), Some(_)) => h.as_str(),
        (Some(h), None) => {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    "conf.http.idleTimeout",
                    format!(
                        "MeshTimeout has one idleTimeout for TCP and HTTP: TCP destinations get {} where the old Timeout (no tcp.idleTimeout) set 0s",
                        h.as_str()
                    ),
                )
                .affecting(&["idleTimeout"]),
            );
            h.as_str()
        }
        (None, Some(t)) => {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    "conf.tcp.idleTimeout",
                    format!(
                        "MeshTimeout has one idleTimeout for TCP and HTTP: HTTP and HTTP/2 clusters get an idle timeout of {} where the old Timeout (no http.idleTimeout) set 0s",
                        t.as_str()
                    ),
                )
                .affecting(&["idleTimeout"]),
            );
            t.as_str()
        }
        (None, None) => "0s",
    };
    if let Some(h) = http_idle.filter(|d| !d.is_zero()) {
        notes.push(
            Note::new(
                NoteKind::Default,
                "conf.http.idleTimeout",
                format!(
                    "MeshTimeout puts the idle timeout ({}) on the cluster only: HTTP outbound listeners get idleTimeout 0s, and gRPC clusters (whose upstream options MeshTimeout leaves alone) lose it",
                    h.as_str()
                ),
            )
            .affecting(&["idleTimeout"]),
        );
    }

    let stream_idle = match (http_stream_idle, grpc_stream_idle) {
        (Some(h), g) => {
            if g.is_some() {
                notes.push(Note::new(
                    NoteKind::Dropped,
                    "conf.grpc.streamIdleTimeout",
                    "ignored: http.streamIdleTimeout takes precedence for gRPC, as in the old Timeout",
                ));
            }
            Some(h)
        }
        (None, Some(g)) => {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    "conf.grpc.streamIdleTimeout",
                    format!(
                        "converted to http.streamIdleTimeout, which applies to every HTTP destination, not only gRPC ones: HTTP and HTTP/2 routes also get idleTimeout {}",
                        g.as_str()
                    ),
                )
                .affecting(&["idleTimeout"]),
            );
            Some(g)
        }
        (None, None) => None,
    };
    if let Some(s) = stream_idle.filter(|d| !d.is_zero()) {
        notes.push(
            Note::new(
                NoteKind::Default,
                if http_stream_idle.is_some() {
                    "conf.http.streamIdleTimeout"
                } else {
                    "conf.grpc.streamIdleTimeout"
                },
                format!(
                    "MeshTimeout sets the stream idle timeout ({}) on each route (route idleTimeout, which takes precedence) and leaves the connection manager's streamIdleTimeout at 0s",
                    s.as_str()
                ),
            )
            .affecting(&["streamIdleTimeout"]),
        );
    }

    if http_max_stream.is_none_or(Duration::is_zero) {
        notes.push(
            Note::new(
                NoteKind::Default,
                "conf.http.maxStreamDuration",
                "MeshTimeout writes maxStreamDuration 0s on HTTP and HTTP/2 clusters where the old Timeout left it out (both disabled)",
            )
            .affecting(&["maxStreamDuration"]),
        );
    }
    if let Some(m) = http_max_stream.filter(|d| !d.is_zero()) {
        notes.push(
            Note::new(
                NoteKind::Default,
                "conf.http.maxStreamDuration",
                format!(
                    "MeshTimeout leaves the upstream options of gRPC clusters alone: gRPC destinations lose maxStreamDuration {}",
                    m.as_str()
                ),
            )
            .affecting(&["maxStreamDuration"]),
        );
    }
    if let Some(g) = grpc_max_stream {
        let note = Note::new(
            NoteKind::Dropped,
            "conf.grpc.maxStreamDuration",
            if http_max_stream.is_some() || g.is_zero() {
                "ignored: the old Timeout already preferred http.maxStreamDuration (or the value is 0s)".to_owned()
            } else {
                format!(
                    "MeshTimeout sets no maxStreamDuration on gRPC clusters: gRPC destinations lose {}",
                    g.as_str()
                )
            },
        );
        notes.push(if http_max_stream.is_none() && !g.is_zero() {
            note.affecting(&["maxStreamDuration"])
        } else {
            note
        });
    }

    let mut http_default = Map::new();
    http_default.insert(
        "requestTimeout".to_owned(),
        json!(request.map_or("0s", Duration::as_str)),
    );
    http_default.insert(
        "streamIdleTimeout".to_owned(),
        json!(stream_idle.map_or("0s", Duration::as_str)),
    );
    http_default.insert(
        "maxStreamDuration".to_owned(),
        json!(http_max_stream.map_or("0s", Duration::as_str)),
    );
    json!({
        "connectionTimeout": conf.connect_timeout.as_ref().map_or("5s", Duration::as_str),
        "idleTimeout": idle,
        "http": http_default,
    })
}

/// The inbound side a MeshTimeout adds to the proxies it selects.
fn inbound_note(all_mesh: bool) -> Note {
    let mut message = "a MeshTimeout also configures the inbounds of the proxies it selects, which the old Timeout never touched: the converted `from` restates Kuma's inbound defaults (connect 10s, idle 2h, stream idle 1h, no request timeout), yet HTTP inbounds get idleTimeout 0s on the connection manager (the idle timeout moves to the local cluster), requestHeadersTimeout 0s, a route idleTimeout of 1h and maxStreamDuration/maxConnectionDuration 0s on HTTP and HTTP/2 local clusters".to_owned();
    if !all_mesh {
        message.push_str("; inbounds of a selected proxy that the top-level targetRef does not cover get MeshTimeout's built-in defaults");
    }
    Note::new(NoteKind::Default, "sources", message).affecting(&[
        "idleTimeout",
        "requestHeadersTimeout",
        "maxStreamDuration",
        "maxConnectionDuration",
    ])
}

/// Old precedence (one Timeout per outbound) versus MeshTimeout merging.
fn precedence_note() -> Note {
    Note::new(
        NoteKind::Semantics,
        "sources",
        "Kuma applies the single most specific Timeout per outbound service (selector rank, then newest), MeshTimeouts merge (top-level targetRef kind, then name, the lexically smallest name last and winning): every field is written explicitly, so a converted policy that wins the merge gives the old values, but which one wins depends on the top-level kinds and the names; converting a list names the outputs (seed 000's `aaa-` prefix) so that the old ranking holds where it can (the precedence note on `sources`)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{
        convert, fields, has_affecting, names, policy, targets, ANY_TO_ANY,
    };
    use crate::convert::{convert_one, Conversion, Options};

    /// The conversion of the Timeout `t` with `body` (selectors and conf).
    fn conv(body: &str) -> Result<Conversion, ConvertError> {
        convert(&policy("Timeout", "t", body))
    }

    fn ok(body: &str) -> Conversion {
        conv(body).unwrap()
    }

    fn has(c: &Conversion, kind: NoteKind, field: &str, affects: &[&str]) -> bool {
        has_affecting(&c.notes, kind, field, affects)
    }

    const FULL: &str = "
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: backend
conf:
  connectTimeout: 21s
  tcp:
    idleTimeout: 24s
  http:
    requestTimeout: 23s
    idleTimeout: 24s
    streamIdleTimeout: 25s
    maxStreamDuration: 26s
";

    #[test]
    fn every_field_maps_and_the_inbound_defaults_are_restated() {
        let c = ok(FULL);
        assert_eq!(c.outputs.len(), 1);
        let o = &c.outputs[0];
        assert_eq!(o.ty(), ResourceType::MeshTimeout);
        assert_eq!(o.meta.name, "t");
        assert!(o.meta.is_shadow());
        assert_eq!(
            o.spec_value(),
            json!({
                "targetRef": {"kind": "Mesh"},
                "to": [{
                    "targetRef": {"kind": "MeshService", "name": "backend"},
                    "default": {
                        "connectionTimeout": "21s",
                        "idleTimeout": "24s",
                        "http": {
                            "requestTimeout": "23s",
                            "streamIdleTimeout": "25s",
                            "maxStreamDuration": "26s",
                        },
                    },
                }],
                "from": [{
                    "targetRef": {"kind": "Mesh"},
                    "default": {
                        "connectionTimeout": "10s",
                        "idleTimeout": "2h",
                        "http": {"requestTimeout": "0s", "streamIdleTimeout": "1h"},
                    },
                }],
            })
        );
        // Equal TCP and HTTP idle: no idle conflict; max stream set: no 0s note.
        assert_eq!(
            fields(&c),
            [
                (NoteKind::Default, "conf.http"),
                (NoteKind::Default, "conf.http.idleTimeout"),
                (NoteKind::Default, "conf.http.streamIdleTimeout"),
                (NoteKind::Default, "conf.http.maxStreamDuration"),
                (NoteKind::Default, "sources"),
                (NoteKind::Semantics, "sources"),
            ]
        );
        assert!(has(
            &c,
            NoteKind::Default,
            "conf.http",
            &[
                "requestHeadersTimeout",
                "maxConnectionDuration",
                "idleTimeout"
            ]
        ));
        assert!(has(
            &c,
            NoteKind::Default,
            "conf.http.streamIdleTimeout",
            &["streamIdleTimeout"]
        ));
        // The set maxStreamDuration only differs on gRPC clusters.
        assert!(c
            .notes
            .iter()
            .any(|n| n.field == "conf.http.maxStreamDuration" && n.message.contains("gRPC")));
        assert!(c.notes.iter().all(|n| !n.message.contains("built-in")));
    }

    #[test]
    fn unset_fields_are_written_with_the_old_built_in_values() {
        let c = ok("
sources:
- match:
    kuma.io/service: web
destinations:
- match:
    kuma.io/service: '*'
conf:
  tcp:
    idleTimeout: 1m
");
        let spec = c.outputs[0].spec_value();
        assert_eq!(
            spec["targetRef"],
            json!({"kind": "MeshService", "name": "web"})
        );
        assert_eq!(spec["to"][0]["targetRef"], json!({"kind": "Mesh"}));
        assert_eq!(
            spec["to"][0]["default"],
            json!({
                "connectionTimeout": "5s",
                "idleTimeout": "1m",
                "http": {"requestTimeout": "0s", "streamIdleTimeout": "0s", "maxStreamDuration": "0s"},
            })
        );
        // Only tcp.idleTimeout: HTTP clusters get it too.
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.tcp.idleTimeout",
            &["idleTimeout"]
        ));
        assert!(has(
            &c,
            NoteKind::Default,
            "conf.http.maxStreamDuration",
            &["maxStreamDuration"]
        ));
        // No streamIdleTimeout, no http.idleTimeout: nothing moves off the connection manager.
        assert!(!c.notes.iter().any(|n| n.affects == ["streamIdleTimeout"]));
        assert!(!c.notes.iter().any(|n| n.field == "conf.http.idleTimeout"));
        // A non-Mesh top-level target leaves other inbounds to MeshTimeout's defaults.
        assert!(c
            .notes
            .iter()
            .any(|n| n.field == "sources" && n.message.contains("built-in")));
    }

    #[test]
    fn no_idle_timeout_at_all_maps_to_zero() {
        let c = ok(&format!("{ANY_TO_ANY}conf:\n  connectTimeout: 3s\n"));
        let d = &c.outputs[0].spec_value()["to"][0]["default"];
        assert_eq!(d["idleTimeout"], "0s");
        assert_eq!(d["connectionTimeout"], "3s");
        assert!(!c.notes.iter().any(|n| n.field.ends_with("idleTimeout")));
    }

    #[test]
    fn differing_tcp_and_http_idle_timeouts_keep_the_http_one() {
        let c = ok(&format!(
            "{ANY_TO_ANY}conf:
  tcp:
    idleTimeout: 22s
  http:
    idleTimeout: 24s
"
        ));
        assert_eq!(
            c.outputs[0].spec_value()["to"][0]["default"]["idleTimeout"],
            "24s"
        );
        let n = c
            .notes
            .iter()
            .find(|n| n.field == "conf.tcp.idleTimeout")
            .unwrap();
        assert_eq!(n.kind, NoteKind::Semantics);
        assert!(n.message.contains("22s"), "{}", n.message);
        // Only http.idleTimeout: TCP destinations get it.
        let c = ok(&format!(
            "{ANY_TO_ANY}conf:\n  http:\n    idleTimeout: 24s\n"
        ));
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.http.idleTimeout",
            &["idleTimeout"]
        ));
        assert!(has(
            &c,
            NoteKind::Default,
            "conf.http.idleTimeout",
            &["idleTimeout"]
        ));
    }

    #[test]
    fn grpc_fields() {
        let c = ok(&format!(
            "{ANY_TO_ANY}conf:
  grpc:
    streamIdleTimeout: 7s
    maxStreamDuration: 8s
"
        ));
        let d = &c.outputs[0].spec_value()["to"][0]["default"];
        assert_eq!(d["http"]["streamIdleTimeout"], "7s");
        assert_eq!(d["http"]["maxStreamDuration"], "0s");
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.grpc.streamIdleTimeout",
            &["idleTimeout"]
        ));
        assert!(has(
            &c,
            NoteKind::Default,
            "conf.grpc.streamIdleTimeout",
            &["streamIdleTimeout"]
        ));
        assert!(has(
            &c,
            NoteKind::Dropped,
            "conf.grpc.maxStreamDuration",
            &["maxStreamDuration"]
        ));
        // With the http fields set, the gRPC ones were already ignored by Kuma.
        let c = ok(&format!(
            "{ANY_TO_ANY}conf:
  http:
    requestTimeout: 1s
    streamIdleTimeout: 2s
    maxStreamDuration: 3s
  grpc:
    streamIdleTimeout: 7s
    maxStreamDuration: 8s
"
        ));
        let d = &c.outputs[0].spec_value()["to"][0]["default"];
        assert_eq!(d["http"]["streamIdleTimeout"], "2s");
        assert_eq!(d["http"]["maxStreamDuration"], "3s");
        assert!(has(
            &c,
            NoteKind::Dropped,
            "conf.grpc.streamIdleTimeout",
            &[]
        ));
        assert!(has(
            &c,
            NoteKind::Dropped,
            "conf.grpc.maxStreamDuration",
            &[]
        ));
    }

    #[test]
    fn several_sources_and_destinations() {
        let c = ok("
sources:
- match:
    kuma.io/service: web
    version: v2
- match:
    kuma.io/service: '*'
    kuma.io/zone: z1
- match:
    kuma.io/service: api
    team: '*'
destinations:
- match:
    kuma.io/service: backend
- match:
    kuma.io/service: redis
- match:
    kuma.io/service: backend
conf:
  connectTimeout: 2s
");
        assert_eq!(names(&c), ["t-1", "t-2", "t-3"]);
        assert_eq!(
            targets(&c),
            [
                json!({"kind": "MeshServiceSubset", "name": "web", "tags": {"version": "v2"}}),
                json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "z1"}}),
                json!({"kind": "MeshService", "name": "api"}),
            ]
        );
        // Duplicate destinations give one `to` item.
        let to = c.outputs[0].spec_value()["to"].clone();
        assert_eq!(to.as_array().unwrap().len(), 2);
        assert_eq!(
            to[1]["targetRef"],
            json!({"kind": "MeshService", "name": "redis"})
        );
        // The wildcard tag is a selector note.
        assert!(has(&c, NoteKind::Selector, "sources[2].match", &[]));
    }

    #[test]
    fn errors() {
        let no_conf = conv(ANY_TO_ANY);
        assert!(matches!(no_conf, Err(ConvertError::Empty { .. })));
        let no_sources = conv(
            "
destinations:
- match:
    kuma.io/service: '*'
conf:
  connectTimeout: 1s
",
        );
        assert!(matches!(no_sources, Err(ConvertError::Empty { .. })));
        // MeshTimeout rejects a zero connection timeout the old Timeout let through.
        let zero = conv(&format!("{ANY_TO_ANY}conf:\n  connectTimeout: 0s\n"));
        assert!(
            matches!(zero, Err(ConvertError::Invalid { .. })),
            "{zero:?}"
        );
    }

    #[test]
    fn options_mesh_and_labels() {
        let c = convert_one(
            &policy("Timeout", "t", FULL),
            &Options {
                mesh: Some("other".to_owned()),
            },
        )
        .unwrap();
        let o = &c.outputs[0];
        assert_eq!(o.meta.mesh, "other");
        assert_eq!(
            o.meta
                .labels
                .get(crate::convert::CONVERTED_FROM_TYPE_LABEL)
                .map(String::as_str),
            Some("Timeout")
        );
    }
}
