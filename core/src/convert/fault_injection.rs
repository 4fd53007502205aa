//! FaultInjection to MeshFaultInjection.
//!
//! The mapping follows the MeshFaultInjection MADR (seed 004: the old `conf` becomes one entry
//! of `default.http`, the sources become `from`, the selected proxies the top-level `targetRef`),
//! the transition MADR (seed 000: "it should be always safe to remove FaultInjection and create
//! new MeshFaultInjection") and what Umbra generates for each policy
//! (`xds/src/plugins/fault_injection.rs`, after Kuma 2.7's inbound fault configurer and its
//! `meshfaultinjection` plugin):
//!
//! - FaultInjection is an inbound policy: `destinations[i]` (which carry `kuma.io/protocol`)
//!   select the proxies' inbounds and become the top-level `targetRef` of one
//!   MeshFaultInjection each (`<name>-<i+1>` when there are several), the protocol tag kept as a
//!   subset tag; `Mesh` and `MeshSubset` targets are narrowed to `proxyTypes: [Sidecar]`
//!   (Kuma only injected faults into sidecar inbounds, and a gateway-including target cannot
//!   have `from`);
//! - `sources[j]` become `from` items (`Mesh`, `MeshService`, `MeshServiceSubset`,
//!   `MeshSubset`), all with `default.http: [<conf>]`: `delay`, `abort` and `responseBandwidth`
//!   keep their fields, percentages become an integer or a decimal string that parses back to
//!   the same float, so Envoy gets the same fractional percent;
//! - gRPC destinations are dropped: Kuma 2.7's MeshFaultInjection configures `http` and `http2`
//!   inbounds only.
//!
//! What stays different is reported as [`Note`]s: the `x-kuma-tags` header matchers (per rule,
//! none for `Mesh`), one fault filter per source instead of one for all, the dropped gRPC
//! destinations, and the merging (old: every matching FaultInjection adds its filter; new: the
//! `http` lists of several policies for the same clients replace each other).

use serde_json::{json, Map, Value};

use super::model::{int_or_decimal, push_unique, ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::old::fault_injection::FaultInjectionConf;
use crate::resource::{ResourceType, Spec};
use crate::target_ref::PROTOCOL_TAG;

/// Convert a FaultInjection to MeshFaultInjections.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations, or when every destination
/// is gRPC; [`ConvertError::Invalid`] when a value MeshFaultInjection rejects (an abort without
/// a status) is carried over.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::FaultInjection(fi) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a FaultInjection"));
    };
    let Some(conf) = &fi.conf else {
        return Err(ctx.empty("conf is not set: the FaultInjection injects nothing"));
    };
    if fi.sources.is_empty() || fi.destinations.is_empty() {
        return Err(
            ctx.empty("a FaultInjection without sources or destinations selects no traffic")
        );
    }
    let mut notes = Vec::new();
    let default = json!({"http": [fault(conf)]});

    let from = selectors::items(
        &fi.sources,
        "sources",
        selectors::target_ref,
        &default,
        &mut notes,
    );
    notes.push(
        Note::new(
            NoteKind::Default,
            "sources",
            "MeshFaultInjection matches clients with x-kuma-tags header matchers (stringMatch.safeRegex) built from each from targetRef, and none for Mesh, which then also injects faults into requests without x-kuma-tags (from outside the mesh); the old filter had one deprecated safeRegexMatch over all the sources",
        )
        .affecting(&["headers"]),
    );
    if from.len() > 1 {
        notes.push(
            Note::new(
                NoteKind::Default,
                "sources",
                "MeshFaultInjection writes one fault filter per source (each rule's client subset), where the old FaultInjection had one filter matching any of its sources; a client still gets the faults once",
            )
            .affecting(&["httpFilters"]),
        );
    }

    let mut targets: Vec<Value> = Vec::new();
    for (i, destination) in fi.destinations.iter().enumerate() {
        let field = format!("destinations[{i}]");
        if destination
            .match_tags
            .get(PROTOCOL_TAG)
            .is_some_and(|p| p == "grpc")
        {
            notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("{field}.match"),
                    "gRPC inbounds: Kuma 2.7's MeshFaultInjection only configures http and http2 inbounds, so this destination is not converted and its proxies lose the fault filter",
                )
                .affecting(&["httpFilters"]),
            );
            continue;
        }
        let (mut target, n) = selectors::target_ref(destination, &field);
        notes.extend(n);
        selectors::sidecars_only(&mut target);
        push_unique(&mut targets, target);
    }
    if targets.is_empty() {
        return Err(
            ctx.empty("every destination is gRPC, which MeshFaultInjection does not configure")
        );
    }
    if targets.len() > 1 {
        notes.push(Note::new(
            NoteKind::Semantics,
            "destinations",
            "Kuma adds the FaultInjection's filter once per destination matching an inbound; the converted policies, one per destination, merge into one filter on an inbound several of them select",
        ));
    }
    notes.push(Note::new(
        NoteKind::Semantics,
        "sources",
        "Kuma injects the faults of every FaultInjection matching an inbound, one filter each (most specific source first); MeshFaultInjection merges the policies selecting an inbound and `http` lists replace each other: for clients several converted policies cover, only the highest-precedence policy's faults (top-level targetRef kind, then the lexically smallest name) are injected",
    ));

    let outputs = ctx.output_per_target(
        ResourceType::MeshFaultInjection,
        &targets,
        |target| json!({"targetRef": target, "from": from}),
    )?;
    Ok((outputs, notes))
}

/// One `http[]` entry with the faults of `conf` (a section present but empty stays present:
/// both policies then inject a zero fault).
fn fault(conf: &FaultInjectionConf) -> Value {
    let mut out = Map::new();
    if let Some(a) = &conf.abort {
        let mut m = Map::new();
        if let Some(s) = a.http_status {
            m.insert("httpStatus".to_owned(), json!(s));
        }
        if let Some(p) = a.percentage {
            m.insert("percentage".to_owned(), int_or_decimal(p));
        }
        out.insert("abort".to_owned(), Value::Object(m));
    }
    if let Some(d) = &conf.delay {
        let mut m = Map::new();
        if let Some(v) = &d.value {
            m.insert("value".to_owned(), json!(v.as_str()));
        }
        if let Some(p) = d.percentage {
            m.insert("percentage".to_owned(), int_or_decimal(p));
        }
        out.insert("delay".to_owned(), Value::Object(m));
    }
    if let Some(r) = &conf.response_bandwidth {
        let mut m = Map::new();
        if let Some(l) = &r.limit {
            m.insert("limit".to_owned(), json!(l));
        }
        if let Some(p) = r.percentage {
            m.insert("percentage".to_owned(), int_or_decimal(p));
        }
        out.insert("responseBandwidth".to_owned(), Value::Object(m));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{self, has_affecting, names, policy};
    use crate::convert::Conversion;

    /// The conversion of the FaultInjection `fi` with `body` (selectors and conf).
    fn conv(body: &str) -> Result<Conversion, ConvertError> {
        testing::convert(&policy("FaultInjection", "fi", body))
    }

    fn ok(body: &str) -> Conversion {
        conv(body).unwrap()
    }

    /// `sources` selecting every service, `destinations` every service of protocol
    /// `protocol`.
    fn any_to(protocol: &str) -> String {
        format!("sources:\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: '*', kuma.io/protocol: {protocol}}}\n")
    }

    /// Seed 004's "current configuration".
    const SEED: &str = "
type: FaultInjection
mesh: default
name: fi
sources:
- match:
    kuma.io/service: frontend_default_svc_80
    kuma.io/protocol: http
destinations:
- match:
    kuma.io/service: backend_default_svc_80
    kuma.io/protocol: http
conf:
  abort:
    httpStatus: 500
    percentage: 50
  delay:
    percentage: 50.5
    value: 5s
  responseBandwidth:
    limit: 50 mbps
    percentage: 50
";

    #[test]
    fn the_seed_example_maps_every_field() {
        let c = testing::ok(SEED);
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshFaultInjection);
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({
                "targetRef": {
                    "kind": "MeshServiceSubset",
                    "name": "backend_default_svc_80",
                    "tags": {"kuma.io/protocol": "http"},
                },
                "from": [{
                    "targetRef": {
                        "kind": "MeshServiceSubset",
                        "name": "frontend_default_svc_80",
                        "tags": {"kuma.io/protocol": "http"},
                    },
                    "default": {"http": [{
                        "abort": {"httpStatus": 500, "percentage": 50},
                        "delay": {"value": "5s", "percentage": "50.5"},
                        "responseBandwidth": {"limit": "50 mbps", "percentage": 50},
                    }]},
                }],
            })
        );
        let kinds: Vec<(NoteKind, &str, Vec<String>)> = c
            .notes
            .iter()
            .map(|n| (n.kind, n.field.as_str(), n.affects.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                (NoteKind::Default, "sources", vec!["headers".to_owned()]),
                (NoteKind::Semantics, "sources", vec![]),
            ]
        );
    }

    #[test]
    fn wildcard_destinations_are_narrowed_to_sidecars() {
        let c = ok(&format!(
            "{}conf:\n  delay:\n    value: 1s\n",
            any_to("http2")
        ));
        let spec = c.outputs[0].spec_value();
        assert_eq!(
            spec["targetRef"],
            json!({"kind": "MeshSubset", "tags": {"kuma.io/protocol": "http2"}, "proxyTypes": ["Sidecar"]})
        );
        assert_eq!(spec["from"][0]["targetRef"], json!({"kind": "Mesh"}));
        // An absent percentage stays absent: 0 in both.
        assert_eq!(
            spec["from"][0]["default"]["http"][0],
            json!({"delay": {"value": "1s"}})
        );
    }

    #[test]
    fn several_sources_and_destinations_and_grpc() {
        let c = ok("
sources:
- match:
    kuma.io/service: web
- match:
    kuma.io/zone: east
- match:
    kuma.io/service: web
destinations:
- match:
    kuma.io/service: a
    kuma.io/protocol: http
- match:
    kuma.io/service: b
    kuma.io/protocol: grpc
- match:
    kuma.io/service: c
    kuma.io/protocol: http2
conf:
  abort:
    httpStatus: 503
    percentage: 33.3
");
        assert_eq!(names(&c), ["fi-1", "fi-2"]);
        let spec = c.outputs[1].spec_value();
        assert_eq!(spec["targetRef"]["name"], "c");
        // Duplicate sources give one item.
        let from = spec["from"].as_array().unwrap();
        assert_eq!(from.len(), 2);
        assert_eq!(
            from[1]["targetRef"],
            json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "east"}})
        );
        assert_eq!(from[0]["default"]["http"][0]["abort"]["percentage"], "33.3");
        let has =
            |kind, field: &str, affects: &[&str]| has_affecting(&c.notes, kind, field, affects);
        assert!(has(
            NoteKind::Dropped,
            "destinations[1].match",
            &["httpFilters"]
        ));
        assert!(has(NoteKind::Default, "sources", &["httpFilters"]));
        assert!(has(NoteKind::Semantics, "destinations", &[]));
    }

    #[test]
    fn errors() {
        let only_grpc = conv(&format!(
            "{}conf:\n  delay:\n    value: 1s\n",
            any_to("grpc")
        ));
        assert!(matches!(only_grpc, Err(ConvertError::Empty { .. })));
        let no_conf = conv(&any_to("http"));
        assert!(matches!(no_conf, Err(ConvertError::Empty { .. })));
        // An abort without a status: Kuma aborted with 0; MeshFaultInjection rejects it.
        let no_status = conv(&format!(
            "{}conf:\n  abort:\n    percentage: 10\n",
            any_to("http")
        ));
        assert!(
            matches!(no_status, Err(ConvertError::Invalid { .. })),
            "{no_status:?}"
        );
    }
}
