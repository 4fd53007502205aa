//! Old selectors (`{match: {tag: value}}`, `*` for any value) as `targetRef`s.
//!
//! - `kuma.io/service: '*'` alone (or an empty `match`) selects every proxy: `{kind: Mesh}`;
//! - `kuma.io/service: X` alone: `{kind: MeshService, name: X}`;
//! - `kuma.io/service: X` with other tags: `{kind: MeshServiceSubset, name: X, tags}`;
//! - other tags without a service: `{kind: MeshSubset, tags}`.
//!
//! A tag with the value `*` ("has this tag, any value") has no `targetRef` form: it is left
//! out, which widens the target, and a [`Note`] of kind [`NoteKind::Selector`] says so.
//!
//! Lists of selectors become the distinct top-level targets ([`distinct_targets`]), `to` or
//! `from` items ([`items`]) or one target per selector ([`per_selector`], and
//! [`outputs_per_source`] for the outbound policies written that way).

use serde_json::{json, Map, Value};

use super::model::{push_unique, ConvertError, Ctx, Note, NoteKind};
use crate::old::Selector;
use crate::resource::{Resource, ResourceType};
use crate::target_ref::SERVICE_TAG;

/// A selector as a `targetRef` value, with the notes of what it could not express.
/// `field` is the selector's path in the old policy (`sources[0]`).
pub fn target_ref(selector: &Selector, field: &str) -> (Value, Vec<Note>) {
    let mut notes = Vec::new();
    let mut service: Option<&str> = None;
    let mut tags = Map::new();
    for (k, v) in &selector.match_tags {
        if v == "*" {
            if k != SERVICE_TAG {
                notes.push(Note::new(
                    NoteKind::Selector,
                    format!("{field}.match"),
                    format!(
                        "{k}: '*' (any proxy that has the tag {k}) has no targetRef form; the converted policy does not require the tag, so it may select more proxies"
                    ),
                ));
            }
            continue;
        }
        if k == SERVICE_TAG {
            service = Some(v);
        } else {
            tags.insert(k.clone(), Value::String(v.clone()));
        }
    }
    let value = match (service, tags.is_empty()) {
        (None, true) => json!({"kind": "Mesh"}),
        (Some(name), true) => json!({"kind": "MeshService", "name": name}),
        (Some(name), false) => json!({"kind": "MeshServiceSubset", "name": name, "tags": tags}),
        (None, false) => json!({"kind": "MeshSubset", "tags": tags}),
    };
    (value, notes)
}

/// The `kind` of a `targetRef` value (`""` when absent).
pub fn kind(target_ref: &Value) -> &str {
    target_ref.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// A selector as a `to[].targetRef` / `from[].targetRef` value where only `Mesh` and
/// `MeshService` are allowed (most policies' `to`): a subset is widened to its service (or to
/// `Mesh`), with a note.
pub fn service_or_mesh(selector: &Selector, field: &str) -> (Value, Vec<Note>) {
    let (value, mut notes) = target_ref(selector, field);
    let widened = match kind(&value) {
        "MeshServiceSubset" => Some(json!({"kind": "MeshService", "name": value["name"]})),
        "MeshSubset" => Some(json!({"kind": "Mesh"})),
        _ => None,
    };
    match widened {
        Some(w) => {
            notes.push(Note::new(
                NoteKind::Selector,
                format!("{field}.match"),
                format!(
                    "tags other than {SERVICE_TAG} cannot be targeted here; the converted policy targets {}",
                    describe(&w)
                ),
            ));
            (w, notes)
        }
        None => (value, notes),
    }
}

/// `Mesh`, `MeshService backend`, ... for messages.
pub fn describe(target_ref: &Value) -> String {
    let mut s = kind(target_ref).to_owned();
    if let Some(n) = target_ref.get("name").and_then(Value::as_str) {
        s.push(' ');
        s.push_str(n);
    }
    if let Some(t) = target_ref.get("tags").and_then(Value::as_object) {
        let tags: Vec<String> = t
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        s.push_str(&format!(" {{{}}}", tags.join(", ")));
    }
    s
}

/// The distinct values `target` makes of the selectors of `list` (`{field}[i]`), in order,
/// pushing their notes.
fn distinct(
    list: &[Selector],
    field: &str,
    target: fn(&Selector, &str) -> (Value, Vec<Note>),
    notes: &mut Vec<Note>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, selector) in list.iter().enumerate() {
        let (value, n) = target(selector, &format!("{field}[{i}]"));
        notes.extend(n);
        push_unique(&mut out, value);
    }
    out
}

/// The distinct [`target_ref`]s of the selectors of `list` (`{field}[i]`, `field` being
/// `sources`, `destinations` or `selectors`), in order, pushing their notes: the top-level
/// targets of a family with one output per distinct target.
pub fn distinct_targets(list: &[Selector], field: &str, notes: &mut Vec<Note>) -> Vec<Value> {
    distinct(list, field, target_ref, notes)
}

/// One `{targetRef, default}` item per distinct target `target` ([`target_ref`] or
/// [`service_or_mesh`]) makes of the selectors of `list` (`{field}[i]`), in order, pushing
/// their notes: a `to` or `from` list whose items share `default`.
pub fn items(
    list: &[Selector],
    field: &str,
    target: fn(&Selector, &str) -> (Value, Vec<Note>),
    default: &Value,
    notes: &mut Vec<Note>,
) -> Vec<Value> {
    distinct(list, field, target, notes)
        .into_iter()
        .map(|t| json!({"targetRef": t, "default": default}))
        .collect()
}

/// The [`target_ref`] of each selector of `list` (`{field}[i]`) with the name of its output
/// ([`Ctx::output_name`]), for a family with one output per selector, pushing the selector
/// notes and, when there are several, a note naming each output (`per`: `MeshRetry per
/// source`).
pub fn per_selector(
    ctx: &Ctx,
    list: &[Selector],
    field: &str,
    per: &str,
    notes: &mut Vec<Note>,
) -> Vec<(String, Value)> {
    let mut out = Vec::with_capacity(list.len());
    for (i, selector) in list.iter().enumerate() {
        let (target, n) = target_ref(selector, &format!("{field}[{i}]"));
        notes.extend(n);
        let name = ctx.output_name(i, list.len());
        if list.len() > 1 {
            notes.push(Note::new(
                NoteKind::Selector,
                format!("{field}[{i}]"),
                format!("one {per}: {name} targets {}", describe(&target)),
            ));
        }
        out.push((name, target));
    }
    out
}

/// The outputs of an outbound policy written as one output of type `ty` per source
/// ([`per_selector`]), each with one `to` item per distinct destination ([`service_or_mesh`]),
/// all with `default`.
///
/// # Errors
/// As [`Ctx::output`].
pub fn outputs_per_source(
    ctx: &Ctx,
    ty: ResourceType,
    sources: &[Selector],
    destinations: &[Selector],
    default: &Value,
    notes: &mut Vec<Note>,
) -> Result<Vec<Resource>, ConvertError> {
    let to = items(
        destinations,
        "destinations",
        service_or_mesh,
        default,
        notes,
    );
    per_selector(
        ctx,
        sources,
        "sources",
        &format!("{} per source", ty.name()),
        notes,
    )
    .into_iter()
    .map(|(name, target)| ctx.output(ty, &name, json!({"targetRef": target, "to": to})))
    .collect()
}

/// `target` limited to sidecars when it is `Mesh` or `MeshSubset`, which include gateways: the
/// inbound policies' targets (Kuma only configured sidecar inbounds, and a target that includes
/// gateways cannot have `from`).
pub fn sidecars_only(target: &mut Value) {
    if matches!(kind(target), "Mesh" | "MeshSubset") {
        target["proxyTypes"] = json!(["Sidecar"]);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn sel(tags: &[(&str, &str)]) -> Selector {
        Selector {
            match_tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn selectors_map_to_the_narrowest_target_ref() {
        assert_eq!(
            target_ref(&sel(&[("kuma.io/service", "*")]), "s").0,
            json!({"kind": "Mesh"})
        );
        assert_eq!(target_ref(&sel(&[]), "s").0, json!({"kind": "Mesh"}));
        assert_eq!(
            target_ref(&sel(&[("kuma.io/service", "web")]), "s").0,
            json!({"kind": "MeshService", "name": "web"})
        );
        assert_eq!(
            target_ref(&sel(&[("kuma.io/service", "web"), ("version", "v2")]), "s").0,
            json!({"kind": "MeshServiceSubset", "name": "web", "tags": {"version": "v2"}})
        );
        assert_eq!(
            target_ref(&sel(&[("kuma.io/zone", "z1")]), "s").0,
            json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "z1"}})
        );
    }

    #[test]
    fn a_wildcard_tag_is_left_out_with_a_note() {
        let (v, notes) = target_ref(
            &sel(&[("kuma.io/service", "web"), ("version", "*")]),
            "sources[0]",
        );
        assert_eq!(v, json!({"kind": "MeshService", "name": "web"}));
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].kind, NoteKind::Selector);
        assert_eq!(notes[0].field, "sources[0].match");
    }

    #[test]
    fn subsets_widen_where_only_services_are_allowed() {
        let (v, notes) = service_or_mesh(
            &sel(&[("kuma.io/service", "web"), ("version", "v2")]),
            "destinations[0]",
        );
        assert_eq!(v, json!({"kind": "MeshService", "name": "web"}));
        assert_eq!(notes.len(), 1);
        let (v, notes) = service_or_mesh(&sel(&[("team", "a")]), "destinations[0]");
        assert_eq!(v, json!({"kind": "Mesh"}));
        assert_eq!(notes.len(), 1);
    }
}
