//! TrafficTrace to MeshTrace: owns the conversion of the old TrafficTrace policy (issue 19,
//! item 1).
//!
//! The mapping follows seed 000 and Kuma 2.7's MeshTrace semantics as Umbra generates them
//! (`xds/src/plugins/trace.rs`):
//!
//! - TrafficTrace selects proxies: each `selectors[i]` becomes a MeshTrace's top-level
//!   `targetRef`. One MeshTrace per selector.
//! - The backend is the Mesh's `tracing` backend named by `conf.backend` (else
//!   `defaultBackend`), so the conversion needs the Mesh ([`Ctx::mesh_spec`]): `zipkin`
//!   becomes a `Zipkin` backend (`url`, `traceId128bit`, `apiVersion`, `sharedSpanContext`),
//!   `datadog` a `Datadog` backend with `url: http://<address>:<port>` and `splitService`; the
//!   backend's `sampling` becomes `sampling.overall`.
//!
//! Differences that remain: MeshTrace names its collector cluster after the provider
//! (`meshtrace:zipkin`, `meshtrace:datadog`) where TrafficTrace used the backend's name
//! (`tracing:<backend>`); Datadog inbound spans are named after the proxy's identifying
//! service rather than the inbound's (same for single-service proxies); old precedence (the
//! most specific TrafficTrace) becomes merging.

use serde_json::{json, Map, Value};

use super::model::{int_or_decimal, ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::mesh::{MeshSpec, TracingBackendKind};
use crate::old::traffic_log::TrafficTrace;
use crate::resource::{ResourceType, Spec};

/// Convert a TrafficTrace into one MeshTrace per selector.
///
/// # Errors
/// [`ConvertError::Unsupported`] without the Mesh, or for a backend type MeshTrace does not
/// have; [`ConvertError::Empty`] when the backend does not exist (the TrafficTrace traces
/// nothing) or without selectors; [`ConvertError::Invalid`] when an output does not validate
/// (a Datadog port out of range, a sampling outside [0, 100], a URL that is not one).
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::TrafficTrace(trace) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a TrafficTrace"));
    };
    let TrafficTrace {
        selectors: sels,
        conf,
    } = trace;
    if sels.is_empty() {
        return Err(ctx.empty("the TrafficTrace has no selectors"));
    }
    let (backend, copied) = ctx.mesh_backend(
        "tracing",
        "trace",
        MeshSpec::tracing_backends,
        conf.as_ref().map_or("", |c| c.backend.as_str()),
    )?;
    let mut notes = Vec::new();
    let (new_backend, provider) = match &backend.kind {
        TracingBackendKind::Zipkin {
            url,
            trace_id_128bit,
            api_version,
            shared_span_context,
        } => {
            let mut z = Map::new();
            z.insert("url".to_owned(), json!(url));
            if *trace_id_128bit {
                z.insert("traceId128bit".to_owned(), json!(true));
            }
            if !api_version.is_empty() {
                z.insert("apiVersion".to_owned(), json!(api_version));
            }
            if let Some(s) = shared_span_context {
                z.insert("sharedSpanContext".to_owned(), json!(s));
            }
            (json!({"type": "Zipkin", "zipkin": z}), "zipkin")
        }
        TracingBackendKind::Datadog {
            address,
            port,
            split_service,
        } => {
            let host = if address.contains(':') {
                format!("[{address}]")
            } else {
                address.clone()
            };
            let mut d = Map::new();
            d.insert("url".to_owned(), json!(format!("http://{host}:{port}")));
            if *split_service {
                d.insert("splitService".to_owned(), json!(true));
            }
            notes.push(Note::new(
                NoteKind::Semantics,
                "conf.backend",
                "MeshTrace names Datadog inbound spans after the proxy's identifying service, TrafficTrace after each inbound's service (the same for proxies with one service)",
            ));
            (json!({"type": "Datadog", "datadog": d}), "datadog")
        }
        TracingBackendKind::Other(ty) => {
            return Err(ctx.unsupported(format!(
                "the Mesh tracing backend {:?} has type {ty:?}; MeshTrace has Zipkin, Datadog and OpenTelemetry backends",
                backend.name
            )))
        }
    };
    let old_cluster = format!("tracing:{}", backend.name);
    let new_cluster = format!("meshtrace:{provider}");
    notes.push(
        Note::new(
            NoteKind::Semantics,
            "conf.backend",
            format!("the collector cluster {old_cluster} becomes {new_cluster} (same endpoint and settings)"),
        )
        .affecting(&["collectorCluster", &old_cluster, &new_cluster]),
    );
    notes.push(Note::new(
        NoteKind::Semantics,
        "selectors",
        "Kuma applies only the most specific TrafficTrace per proxy; MeshTraces targeting the proxy merge (by targetRef kind, then name; the last backends list wins), so another policy may win",
    ));
    notes.extend(copied);
    let mut default = Map::new();
    default.insert("backends".to_owned(), json!([new_backend]));
    if let Some(s) = backend.sampling {
        default.insert("sampling".to_owned(), json!({"overall": int_or_decimal(s)}));
    }
    let default = Value::Object(default);

    let mut outputs = Vec::new();
    for (name, target) in
        selectors::per_selector(ctx, sels, "selectors", "MeshTrace per selector", &mut notes)
    {
        outputs.push(ctx.output(
            ResourceType::MeshTrace,
            &name,
            json!({"targetRef": target, "default": default}),
        )?);
    }
    Ok((outputs, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{self, convert, policy};
    use crate::convert::{convert_one_in, Conversion, Options};
    use crate::resource::Resource;

    fn trace(body: &str) -> Resource {
        policy("TrafficTrace", "tt", body)
    }

    fn mesh() -> MeshSpec {
        testing::mesh(
            r#"type: Mesh
name: default
tracing:
  defaultBackend: zipkin
  backends:
  - name: zipkin
    type: zipkin
    sampling: 12.5
    conf: {url: 'http://zipkin.local:9411/api/v2/spans', traceId128bit: true, apiVersion: httpProto, sharedSpanContext: false}
  - name: dd
    type: datadog
    sampling: 100
    conf: {address: 'fd00::1', port: 8126, splitService: true}
  - name: plain-zipkin
    type: zipkin
    conf: {url: 'http://z:9411/api/v2/spans'}
  - name: weird
    type: jaeger
"#,
        )
    }

    const SEL: &str = "selectors:\n- match: {kuma.io/service: web}\n";

    /// The conversion of `body` in the [`mesh`].
    fn conv(body: &str) -> Result<Conversion, ConvertError> {
        convert_one_in(&trace(body), &Options::default(), Some(&mesh()))
    }

    fn run(body: &str) -> Conversion {
        conv(body).unwrap()
    }

    #[test]
    fn zipkin_backend_and_sampling() {
        let c = run(SEL);
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshTrace);
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({"targetRef": {"kind": "MeshService", "name": "web"}, "default": {
                "backends": [{"type": "Zipkin", "zipkin": {
                    "url": "http://zipkin.local:9411/api/v2/spans", "traceId128bit": true,
                    "apiVersion": "httpProto", "sharedSpanContext": false}}],
                "sampling": {"overall": "12.5"},
            }})
        );
        let rename = c.notes.iter().find(|n| !n.affects.is_empty()).unwrap();
        assert_eq!(
            rename.affects,
            ["collectorCluster", "tracing:zipkin", "meshtrace:zipkin"]
        );
        assert!(c
            .notes
            .iter()
            .any(|n| n.message.contains("default tracing backend")));
        let c = run(&format!("{SEL}conf: {{backend: plain-zipkin}}\n"));
        assert_eq!(
            c.outputs[0].spec_value()["default"],
            json!({"backends": [{"type": "Zipkin", "zipkin": {"url": "http://z:9411/api/v2/spans"}}]})
        );
    }

    #[test]
    fn datadog_backend() {
        let c = run("selectors:\n- match: {kuma.io/service: '*'}\n- match: {kuma.io/service: web, version: v1}\nconf: {backend: dd}\n");
        assert_eq!(c.outputs.len(), 2);
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({"targetRef": {"kind": "Mesh"}, "default": {
                "backends": [{"type": "Datadog", "datadog": {"url": "http://[fd00::1]:8126", "splitService": true}}],
                "sampling": {"overall": 100},
            }})
        );
        assert_eq!(
            c.outputs[1].spec_value()["targetRef"],
            json!({"kind": "MeshServiceSubset", "name": "web", "tags": {"version": "v1"}})
        );
        assert_eq!(c.outputs[1].meta.name, "tt-2");
        assert!(c
            .notes
            .iter()
            .any(|n| n.affects.contains(&"meshtrace:datadog".to_owned())));
        assert!(c
            .notes
            .iter()
            .any(|n| n.message.contains("identifying service")));
    }

    #[test]
    fn errors() {
        let e = convert(&trace(SEL)).unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }), "{e}");
        let e = conv(&format!("{SEL}conf: {{backend: missing}}\n")).unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }), "{e}");
        let e = conv(&format!("{SEL}conf: {{backend: weird}}\n")).unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }), "{e}");
        let e = conv("conf: {backend: dd}\n").unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }), "{e}");
    }
}
