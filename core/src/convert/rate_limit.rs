//! RateLimit to MeshRateLimit: owns the conversion of the old RateLimit policy (issue 19,
//! item 1).
//!
//! The mapping follows seed 000 (shadow outputs, leaking defaults) and Kuma 2.7's
//! MeshRateLimit semantics as Umbra generates them (`xds/src/plugins/rate_limit.rs`):
//!
//! - RateLimit is an inbound policy: each `destinations[i]` selects the limited proxies and
//!   inbounds (the top-level `targetRef`; `Mesh` and `MeshSubset` get `proxyTypes: [Sidecar]`,
//!   since MeshRateLimit refuses `from` on a target that includes gateways); the `sources`
//!   become the `from` item, which MeshRateLimit only allows as `kind: Mesh`: a RateLimit for
//!   some sources only is widened to every client (a note). One MeshRateLimit per
//!   destination.
//! - `conf.http.requests`/`interval` -> `local.http.requestRate.num`/`interval`;
//!   `onRateLimit.status` -> `onRateLimit.status` (0, Envoy's default, left out);
//!   `onRateLimit.headers` -> `onRateLimit.headers.add` (`append: true`) or `set`.
//!
//! Differences that remain: on the clients, the old RateLimit's empty HTTP filter on their
//! outbounds (and its limit on calls to ExternalServices without a ZoneEgress) goes; the old
//! RateLimit adds a copy of the inbound's route matching the
//! `x-kuma-tags` header of its sources (so requests without that header, from outside the
//! mesh, are not limited) before the catch-all route; MeshRateLimit puts the limit on the
//! catch-all route itself. Several RateLimits on one inbound each keep their route (the most
//! specific first); MeshRateLimits merge into one limit.

use serde_json::{json, Map, Value};

use super::model::{set_and_add, ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::old::rate_limit::{Http, RateLimit};
use crate::resource::{ResourceType, Spec};

/// Convert a RateLimit into one MeshRateLimit per destination.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf.http` (nothing to limit), sources or destinations;
/// [`ConvertError::Invalid`] when an output does not validate (an interval of 50ms or less).
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::RateLimit(rl) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a RateLimit"));
    };
    let RateLimit {
        sources,
        destinations,
        conf,
    } = rl;
    let http = conf.as_ref().and_then(|c| c.http.as_ref()).ok_or_else(|| {
        ctx.empty(
            "the RateLimit has no conf.http: it limits nothing (Kuma generates nothing for it)",
        )
    })?;
    if sources.is_empty() || destinations.is_empty() {
        return Err(ctx.empty("the RateLimit has no sources or no destinations"));
    }
    let mut notes = Vec::new();
    let every_source = sources
        .iter()
        .any(|s| s.match_tags.values().all(|v| v == "*"));
    if !every_source {
        notes.push(
            Note::new(
                NoteKind::Selector,
                "sources",
                "MeshRateLimit's from only takes kind: Mesh: the limit now applies to requests from every client, not only from these sources",
            )
            .affecting(&["routes"]),
        );
    }
    notes.push(
        Note::new(
            NoteKind::Semantics,
            "sources",
            "RateLimit adds a copy of the inbound route matching its sources' x-kuma-tags header (so clients outside the mesh, without the header, were not limited) before the catch-all route; MeshRateLimit sets the limit on the catch-all route itself",
        )
        .affecting(&["routes"]),
    );
    notes.push(Note::new(
        NoteKind::Semantics,
        "destinations",
        "Kuma applies every RateLimit matching an inbound, each on its own route (most specific sources first); MeshRateLimits on an inbound merge into one limit (by targetRef kind, then name)",
    ));
    notes.push(
        Note::new(
            NoteKind::Semantics,
            "sources",
            "Kuma also puts the RateLimit on its sources' HTTP outbounds to the destinations: an empty local rate-limit filter, and the limit itself on routes to ExternalServices reached without a ZoneEgress; MeshRateLimit limits on the destination's inbounds only, so that filter (and any limit on ExternalService calls) leaves the clients",
        )
        .affecting(&["httpFilters", "typedPerFilterConfig"]),
    );
    let default = json!({"local": {"http": convert_http(http, &mut notes)}});

    let mut outputs = Vec::new();
    for (name, mut target) in selectors::per_selector(
        ctx,
        destinations,
        "destinations",
        "MeshRateLimit per destination",
        &mut notes,
    ) {
        selectors::sidecars_only(&mut target);
        outputs.push(ctx.output(
            ResourceType::MeshRateLimit,
            &name,
            json!({"targetRef": target, "from": [{"targetRef": {"kind": "Mesh"}, "default": default}]}),
        )?);
    }
    Ok((outputs, notes))
}

/// `conf.http` as MeshRateLimit's `local.http`.
fn convert_http(http: &Http, notes: &mut Vec<Note>) -> Value {
    let mut rate = Map::new();
    rate.insert("num".to_owned(), json!(http.requests));
    if let Some(d) = &http.interval {
        rate.insert("interval".to_owned(), json!(d));
    }
    let mut out = Map::new();
    out.insert("requestRate".to_owned(), Value::Object(rate));
    if let Some(on) = &http.on_rate_limit {
        let mut o = Map::new();
        if let Some(status) = on.status.filter(|s| *s != 0) {
            o.insert("status".to_owned(), json!(status));
        }
        let mut headers = Vec::new();
        for (i, h) in on.headers.iter().enumerate() {
            let append = h.append == Some(true);
            if !append && h.value.contains(',') {
                notes.push(
                    Note::new(
                        NoteKind::Semantics,
                        format!("conf.http.onRateLimit.headers[{i}].value"),
                        "MeshRateLimit sets one header per comma-separated value",
                    )
                    .affecting(&["responseHeadersToAdd"]),
                );
            }
            headers.push((json!({"name": h.key, "value": h.value}), append));
        }
        if let Some(h) = set_and_add(
            headers,
            "MeshRateLimit",
            "conf.http.onRateLimit.headers",
            "responseHeadersToAdd",
            notes,
        ) {
            o.insert("headers".to_owned(), h);
        }
        if !o.is_empty() {
            out.insert("onRateLimit".to_owned(), Value::Object(o));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{convert, policy, targets};
    use crate::convert::Conversion;
    use crate::resource::Resource;

    fn rl(body: &str) -> Resource {
        policy("RateLimit", "rl", body)
    }

    fn run(body: &str) -> Conversion {
        convert(&rl(body)).unwrap()
    }

    const ALL_TO_BACKEND: &str = "sources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: backend}\n";

    #[test]
    fn http_limit_maps_to_local_http() {
        let c = run(&format!("{ALL_TO_BACKEND}conf:\n  http:\n    requests: 5\n    interval: 10s\n    onRateLimit:\n      status: 423\n      headers:\n      - {{key: x-a, value: '1', append: true}}\n      - {{key: x-b, value: '2'}}\n"));
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshRateLimit);
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({
                "targetRef": {"kind": "MeshService", "name": "backend"},
                "from": [{"targetRef": {"kind": "Mesh"}, "default": {"local": {"http": {
                    "requestRate": {"num": 5, "interval": "10s"},
                    "onRateLimit": {"status": 423, "headers": {
                        "add": [{"name": "x-a", "value": "1"}],
                        "set": [{"name": "x-b", "value": "2"}]}},
                }}}}],
            })
        );
        // Every source: no widening note; the route shape note always.
        assert!(!c.notes.iter().any(|n| n.kind == NoteKind::Selector));
        assert!(c
            .notes
            .iter()
            .any(|n| n.field == "sources" && n.affects == ["routes"]));
        assert!(!c
            .notes
            .iter()
            .any(|n| n.affects.contains(&"responseHeadersToAdd".to_owned())));
    }

    #[test]
    fn header_order_and_commas_are_noted() {
        let c = run(&format!("{ALL_TO_BACKEND}conf:\n  http:\n    requests: 5\n    interval: 1s\n    onRateLimit:\n      status: 0\n      headers:\n      - {{key: x-b, value: '2,3'}}\n      - {{key: x-a, value: '1', append: true}}\n"));
        let http = &c.outputs[0].spec_value()["from"][0]["default"]["local"]["http"];
        assert!(http["onRateLimit"].get("status").is_none());
        let fields: Vec<&str> = c
            .notes
            .iter()
            .filter(|n| n.affects == ["responseHeadersToAdd"])
            .map(|n| n.field.as_str())
            .collect();
        assert_eq!(
            fields,
            [
                "conf.http.onRateLimit.headers[0].value",
                "conf.http.onRateLimit.headers"
            ]
        );
    }

    #[test]
    fn specific_sources_are_widened_and_mesh_targets_sidecars() {
        let c = run("sources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: '*'}\n- match: {kuma.io/zone: z1}\n- match: {kuma.io/service: backend, version: v2}\nconf:\n  http: {requests: 1, interval: 1s}\n");
        assert_eq!(
            targets(&c),
            [
                json!({"kind": "Mesh", "proxyTypes": ["Sidecar"]}),
                json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "z1"}, "proxyTypes": ["Sidecar"]}),
                json!({"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}}),
            ]
        );
        assert_eq!(c.outputs[2].meta.name, "rl-3");
        let widened = c.notes.iter().find(|n| n.field == "sources").unwrap();
        assert_eq!(widened.kind, NoteKind::Selector);
        assert_eq!(widened.affects, ["routes"]);
    }

    #[test]
    fn errors() {
        let e = convert(&rl(&format!("{ALL_TO_BACKEND}conf: {{}}\n"))).unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }));
        // MeshRateLimit needs an interval above 50ms.
        let e = convert(&rl(&format!(
            "{ALL_TO_BACKEND}conf:\n  http: {{requests: 1, interval: 10ms}}\n"
        )))
        .unwrap_err();
        assert!(matches!(e, ConvertError::Invalid { .. }), "{e}");
    }
}
