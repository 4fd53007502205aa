//! Old selectors (`{match: {tag: value}}`, `*` for any value) as `targetRef`s.
//!
//! - `kuma.io/service: '*'` alone (or an empty `match`) selects every proxy: `{kind: Mesh}`;
//! - `kuma.io/service: X` alone: `{kind: MeshService, name: X}`;
//! - `kuma.io/service: X` with other tags: `{kind: MeshServiceSubset, name: X, tags}`;
//! - other tags without a service: `{kind: MeshSubset, tags}`.
//!
//! A tag with the value `*` ("has this tag, any value") has no `targetRef` form: it is left
//! out, which widens the target, and a [`Note`] of kind [`NoteKind::Selector`] says so.

use serde_json::{json, Map, Value};

use super::model::{Note, NoteKind};
use crate::old::Selector;
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
