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

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors::{self, describe};
use crate::mesh::TracingBackendKind;
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
    let mesh = ctx.mesh_spec.ok_or_else(|| {
        ctx.unsupported("the Mesh is needed to convert a TrafficTrace (its backend is one of the Mesh's tracing backends)")
    })?;
    let name = conf.as_ref().map_or("", |c| c.backend.as_str());
    let backends = mesh.tracing_backends();
    let backend = backends.get(name).ok_or_else(|| {
        ctx.empty(format!(
            "the Mesh has no tracing backend {:?}: the TrafficTrace traces nothing",
            if name.is_empty() {
                backends.default_backend.as_str()
            } else {
                name
            }
        ))
    })?;
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
    if conf.as_ref().is_none_or(|c| c.backend.is_empty()) {
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf.backend",
            format!(
                "the Mesh's default tracing backend {:?} is copied: changing the Mesh's default no longer changes this trace",
                backend.name
            ),
        ));
    }
    let mut default = Map::new();
    default.insert("backends".to_owned(), json!([new_backend]));
    if let Some(s) = backend.sampling {
        default.insert("sampling".to_owned(), json!({"overall": percentage(s)}));
    }
    let default = Value::Object(default);

    let mut outputs = Vec::new();
    for (i, s) in sels.iter().enumerate() {
        let (target, n) = selectors::target_ref(s, &format!("selectors[{i}]"));
        notes.extend(n);
        let name = ctx.output_name(i, sels.len());
        if sels.len() > 1 {
            notes.push(Note::new(
                NoteKind::Selector,
                format!("selectors[{i}]"),
                format!(
                    "one MeshTrace per selector: {name} targets {}",
                    describe(&target)
                ),
            ));
        }
        outputs.push(ctx.output(
            ResourceType::MeshTrace,
            &name,
            json!({"targetRef": target, "default": default}),
        )?);
    }
    Ok((outputs, notes))
}

/// A sampling percentage as MeshTrace writes it, parsing back to the same double: an integer
/// when whole, else the shortest decimal string.
fn percentage(p: f64) -> Value {
    if p.fract() == 0.0 && p.abs() <= f64::from(i32::MAX) {
        json!(p as i32)
    } else {
        json!(p.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{convert_one, convert_one_in, Conversion, Options};
    use crate::mesh::MeshSpec;
    use crate::policies::mesh_fault_injection::IntOrString;
    use crate::resource::Resource;

    fn trace(body: &str) -> Resource {
        Resource::from_bytes(
            format!("type: TrafficTrace\nmesh: default\nname: tt\n{body}").as_bytes(),
        )
        .unwrap()
    }

    fn mesh() -> MeshSpec {
        let r = Resource::from_bytes(
            br#"type: Mesh
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
        .unwrap();
        match r.spec {
            Spec::Mesh(m) => m,
            _ => unreachable!(),
        }
    }

    const SEL: &str = "selectors:\n- match: {kuma.io/service: web}\n";

    fn run(body: &str) -> Conversion {
        convert_one_in(&trace(body), &Options::default(), Some(&mesh())).unwrap()
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
    fn percentages_parse_back_to_the_same_double() {
        for p in [0.0, 1.0, 12.5, 33.3, 0.001, 99.99] {
            let v: IntOrString = serde_json::from_value(percentage(p)).unwrap();
            assert_eq!(v.to_f64(), Some(p), "{p}");
        }
    }

    #[test]
    fn errors() {
        let e = convert_one(&trace(SEL), &Options::default()).unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }), "{e}");
        let e = convert_one_in(
            &trace(&format!("{SEL}conf: {{backend: missing}}\n")),
            &Options::default(),
            Some(&mesh()),
        )
        .unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }), "{e}");
        let e = convert_one_in(
            &trace(&format!("{SEL}conf: {{backend: weird}}\n")),
            &Options::default(),
            Some(&mesh()),
        )
        .unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }), "{e}");
        let e = convert_one_in(
            &trace("conf: {backend: dd}\n"),
            &Options::default(),
            Some(&mesh()),
        )
        .unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }), "{e}");
    }
}
