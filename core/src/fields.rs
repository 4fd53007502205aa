//! Field names as Kuma 2.7 reads them, and what Umbra says of a field it does not know: the
//! decoding of a document's fields into typed specs ([`decode_at`], [`from_value_at`]) and its
//! errors ([`DecodeError`], every one with the field path).
//!
//! - **Proto names.** Kuma decodes its protobuf-based resources (the Mesh, Dataplanes,
//!   ZoneIngresses, ExternalServices and every old policy) with protojson, which takes a
//!   field's proto name (`reuse_connection`) as well as its JSON name (`reuseConnection`).
//!   [`proto_json_name`] maps one to the other; the decoder renames a proto name when the JSON
//!   name is a field at that place (`crate::resource::decode_spec`), so map keys such as tags
//!   are never touched.
//! - **Unknown fields.** Kuma ignores fields it does not know (protojson with
//!   `DiscardUnknown`, Go's `encoding/json` for targetRef policies). Umbra refuses them, since
//!   nothing accepted may be silently ignored, and says so: [`unknown_field_message`] names
//!   the field, says that Kuma would ignore it, suggests the known field it resembles
//!   ([`suggest`]) and lists the known ones.
//! - **Sections Umbra keeps verbatim** (the Mesh's `routing`, `networking`, `tracing`,
//!   `logging`, `metrics`, `constraints`, a CA backend's `dpCert` and `rootChain`) are checked
//!   against the shape of Kuma's `mesh.proto` ([`Shape`], [`normalize`]) with the same rules.
//!   Pure.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::codec::CodecError;
use crate::validate::{PathBuilder, ValidationError, Violation};

/// The JSON name protojson gives the proto field `name`: lowerCamelCase, each `_` dropped
/// and the letter after it upper-cased (`reuse_connection` -> `reuseConnection`,
/// `max_ejection_percent` -> `maxEjectionPercent`). A name without `_` is returned as it is.
pub fn proto_json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The field of `known` that `field` most likely meant: the same name in another case or as a
/// proto name; else one at an edit distance of at most a third of its length (at least 2);
/// else one sharing a prefix of at least 60% of `field` (`localityAwarenes` ->
/// `localityAwareLoadBalancing`). `None` when nothing is close.
pub fn suggest<'a>(field: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = field.to_ascii_lowercase();
    let json = proto_json_name(field).to_ascii_lowercase();
    if let Some(k) = known.iter().find(|k| {
        let k = k.to_ascii_lowercase();
        k == lower || k == json
    }) {
        return Some(k);
    }
    let limit = (field.chars().count() / 3).max(2);
    let near = known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d);
    if let Some((_, k)) = near {
        return Some(k);
    }
    let need = (field.chars().count() * 3).div_ceil(5).max(4);
    known
        .iter()
        .map(|k| (common_prefix(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(n, _)| *n >= need)
        .max_by_key(|(n, _)| *n)
        .map(|(_, k)| k)
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Levenshtein distance (insertions, deletions, substitutions), in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur.push(substitute.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The answer for an unknown field `field` where `known` are the fields Umbra knows: the
/// field, a suggestion when one is close ([`suggest`]), Kuma's behaviour and the known fields.
/// `universal_spec` marks a `spec` met at the top of a universal-format resource, whose
/// fields belong at the top level.
pub fn unknown_field_message(field: &str, known: &[&str], universal_spec: bool) -> String {
    let mut out = format!("unknown field `{field}`");
    if universal_spec {
        out.push_str(
            ": in Kuma's universal format the spec's fields stand at the top level, next to `type`, `name` and `mesh` (only the Kubernetes form, with `apiVersion`, `kind` and `metadata`, nests them under `spec`)",
        );
    } else if let Some(s) = suggest(field, known) {
        out.push_str(&format!(" (did you mean `{s}`?)"));
    }
    out.push_str(
        "; Kuma 2.7 would ignore it silently, Umbra refuses it so that nothing accepted is ignored",
    );
    if !known.is_empty() {
        let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        out.push_str(&format!("; known fields here: {}", list.join(", ")));
    }
    out
}

/// The unknown field and the expected ones of serde's "unknown field" message
/// (``unknown field `x`, expected one of `a`, `b` ``, ``... expected `a` ``, ``... there are
/// no fields``); `None` for any other message.
pub fn parse_unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    Some((field.to_owned(), expected))
}

/// The shape of a section Umbra keeps verbatim, after Kuma's `mesh.proto`.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// Anything (a scalar, or a `google.protobuf.Struct` whose keys are data).
    Any,
    /// A message with these fields (JSON names).
    Message(&'static [(&'static str, Shape)]),
    /// A list of these.
    List(&'static Shape),
}

/// Check `value` against `shape` at `path`: proto names of message fields renamed to their
/// JSON names in place (as protojson reads them), every unknown field a violation
/// ([`unknown_field_message`]); a field given under both names is a violation too. Values of
/// the wrong kind are left to the caller's own checks.
pub fn normalize(shape: Shape, path: &PathBuilder, value: &mut Value, err: &mut ValidationError) {
    match (shape, value) {
        (Shape::Message(fields), Value::Object(obj)) => {
            rename_proto_names(fields, path, obj, err);
            let known: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
            for (key, v) in obj.iter_mut() {
                match fields.iter().find(|(n, _)| n == key) {
                    Some((_, inner)) => normalize(*inner, &path.field(key), v, err),
                    None => {
                        err.violation(&path.field(key), unknown_field_message(key, &known, false))
                    }
                }
            }
        }
        (Shape::List(inner), Value::Array(items)) => {
            for (i, v) in items.iter_mut().enumerate() {
                normalize(*inner, &path.index(i), v, err);
            }
        }
        _ => {}
    }
}

fn rename_proto_names(
    fields: &[(&str, Shape)],
    path: &PathBuilder,
    obj: &mut Map<String, Value>,
    err: &mut ValidationError,
) {
    let proto: Vec<String> = obj
        .keys()
        .filter(|k| k.contains('_') && !fields.iter().any(|(n, _)| n == k))
        .filter(|k| fields.iter().any(|(n, _)| *n == proto_json_name(k)))
        .cloned()
        .collect();
    for key in proto {
        let json = proto_json_name(&key);
        if obj.contains_key(&json) {
            err.violation(
                &path.field(&key),
                format!("`{key}` is the proto name of `{json}`, which is set too: set one of them"),
            );
        } else if let Some(v) = obj.remove(&key) {
            obj.insert(json, v);
        }
    }
}

/// The sections of a Mesh Umbra keeps verbatim, with their shapes (Kuma 2.7's `mesh.proto`).
pub const MESH_SECTIONS: &[(&str, Shape)] = &[
    (
        "networking",
        Shape::Message(&[("outbound", Shape::Message(&[("passthrough", Shape::Any)]))]),
    ),
    (
        "routing",
        Shape::Message(&[
            ("localityAwareLoadBalancing", Shape::Any),
            ("zoneEgress", Shape::Any),
            ("defaultForbidMeshExternalServiceAccess", Shape::Any),
        ]),
    ),
    (
        "tracing",
        Shape::Message(&[
            ("defaultBackend", Shape::Any),
            (
                "backends",
                Shape::List(&Shape::Message(&[
                    ("name", Shape::Any),
                    ("sampling", Shape::Any),
                    ("type", Shape::Any),
                    ("conf", Shape::Any),
                ])),
            ),
        ]),
    ),
    (
        "logging",
        Shape::Message(&[
            ("defaultBackend", Shape::Any),
            (
                "backends",
                Shape::List(&Shape::Message(&[
                    ("name", Shape::Any),
                    ("format", Shape::Any),
                    ("type", Shape::Any),
                    ("conf", Shape::Any),
                ])),
            ),
        ]),
    ),
    (
        "metrics",
        Shape::Message(&[
            ("enabledBackend", Shape::Any),
            (
                "backends",
                Shape::List(&Shape::Message(&[
                    ("name", Shape::Any),
                    ("type", Shape::Any),
                    ("conf", Shape::Any),
                ])),
            ),
        ]),
    ),
    (
        "constraints",
        Shape::Message(&[(
            "dataplaneProxy",
            Shape::Message(&[
                (
                    "requirements",
                    Shape::List(&Shape::Message(&[("tags", Shape::Any)])),
                ),
                (
                    "restrictions",
                    Shape::List(&Shape::Message(&[("tags", Shape::Any)])),
                ),
            ]),
        )]),
    ),
];

/// The sections of a Mesh CA backend Umbra keeps verbatim (besides `conf`, whose fields
/// depend on the backend's type), with their shapes.
pub const CA_BACKEND_SECTIONS: &[(&str, Shape)] = &[
    (
        "dpCert",
        Shape::Message(&[
            ("rotation", Shape::Message(&[("expiration", Shape::Any)])),
            ("requestTimeout", Shape::Any),
        ]),
    ),
    (
        "rootChain",
        Shape::Message(&[("requestTimeout", Shape::Any)]),
    ),
];

/// Why a document is not a resource. Every case carries the field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Bytes were not YAML/JSON within limits.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The document is not shaped like the resource (missing/unknown/mistyped fields).
    #[error("{0}")]
    Invalid(ValidationError),
}

impl DecodeError {
    /// The `{field, message}` list for an API 400.
    pub fn violations(&self) -> Vec<Violation> {
        match self {
            DecodeError::Codec(e) => vec![Violation {
                field: String::new(),
                message: e.to_string(),
            }],
            DecodeError::Invalid(v) => v.violations.clone(),
        }
    }
}

/// A [`DecodeError::Invalid`] with one violation.
pub(crate) fn decode_invalid(field: impl Into<String>, message: impl Into<String>) -> DecodeError {
    let mut e = ValidationError::new();
    e.violation_field(field, message);
    DecodeError::Invalid(e)
}

/// Deserialize `value` into `T`, mapping serde errors to a violation at the failing path under
/// `root` (`spec.to[0].default.idleTimeout`). An unknown field gets Umbra's explanation
/// ([`unknown_field_message`]: the field, the known field it resembles, that
/// Kuma would ignore it).
///
/// # Errors
/// [`DecodeError::Invalid`] with the failing path.
pub fn from_value_at<T: DeserializeOwned>(
    root: &PathBuilder,
    value: Value,
) -> Result<T, DecodeError> {
    decode_at(root, value, Names::Json).map_err(DecodeError::Invalid)
}

/// Which field names a decoder takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// JSON names only (targetRef policies: Kuma decodes them with Go's `encoding/json`).
    Json,
    /// JSON names and proto names (Kuma's protobuf-based resources, decoded with protojson).
    JsonOrProto,
}

/// How many proto names one document may use before the decoder gives up renaming.
const MAX_PROTO_RENAMES: usize = 256;

/// Deserialize `value` into `T` at `root`, taking the field `names` given; serde's errors
/// become a violation at the failing path, an unknown field with [`unknown_field_message`].
///
/// # Errors
/// The violation.
pub fn decode_at<T: DeserializeOwned>(
    root: &PathBuilder,
    mut value: Value,
    names: Names,
) -> Result<T, ValidationError> {
    let mut renames = 0;
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        let segments: Vec<serde_path_to_error::Segment> = e.path().iter().cloned().collect();
        let mut path = root.clone();
        for seg in &segments {
            path = match seg {
                serde_path_to_error::Segment::Seq { index } => path.index(*index),
                serde_path_to_error::Segment::Map { key } => path.field(key),
                serde_path_to_error::Segment::Enum { variant } => path.field(variant),
                serde_path_to_error::Segment::Unknown => path,
            };
        }
        let message = e.into_inner().to_string();
        let Some((field, expected)) = parse_unknown_field(&message) else {
            return Err(invalid(&path, message));
        };
        let json = proto_json_name(&field);
        if names == Names::JsonOrProto
            && renames < MAX_PROTO_RENAMES
            && json != field
            && expected.contains(&json)
        {
            match rename_at(&mut value, &segments, &field, &json) {
                Rename::Done => {
                    renames += 1;
                    continue;
                }
                Rename::Both => {
                    return Err(invalid(
                        &path,
                        format!("`{field}` is the proto name of `{json}`, which is set too: set one of them"),
                    ))
                }
                Rename::NotFound => {}
            }
        }
        let known: Vec<&str> = expected.iter().map(String::as_str).collect();
        let universal_spec = field == "spec" && path.to_string() == "spec";
        return Err(invalid(
            &path,
            unknown_field_message(&field, &known, universal_spec),
        ));
    }
}

/// What [`rename_at`] did.
enum Rename {
    Done,
    /// The object holds both names.
    Both,
    /// The path does not lead to an object holding `from` (a custom deserializer's path).
    NotFound,
}

/// Rename key `from` to `to` in the object at `segments` (the path serde reported for the
/// unknown field `from`, ending with it).
fn rename_at(
    value: &mut Value,
    segments: &[serde_path_to_error::Segment],
    from: &str,
    to: &str,
) -> Rename {
    let mut at = value;
    let parent = segments.split_last().map_or(&[][..], |(_, p)| p);
    for seg in parent {
        let next = match (seg, at) {
            (serde_path_to_error::Segment::Seq { index }, Value::Array(a)) => a.get_mut(*index),
            (serde_path_to_error::Segment::Map { key }, Value::Object(o)) => o.get_mut(key),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return Rename::NotFound,
        }
    }
    let Value::Object(obj) = at else {
        return Rename::NotFound;
    };
    if obj.contains_key(to) {
        return Rename::Both;
    }
    match obj.remove(from) {
        Some(v) => {
            obj.insert(to.to_owned(), v);
            Rename::Done
        }
        None => Rename::NotFound,
    }
}

fn invalid(path: &PathBuilder, message: impl Into<String>) -> ValidationError {
    let mut e = ValidationError::new();
    e.violation_field(path.to_string(), message);
    e
}

/// Check and normalize the sections of a Mesh (`v`, at `root`) that Umbra keeps verbatim
/// ([`MESH_SECTIONS`], and each CA backend's
/// [`CA_BACKEND_SECTIONS`]): proto names renamed, unknown fields refused. A
/// section given by its proto name (`dp_cert`) is renamed first.
pub fn normalize_mesh_sections(root: &PathBuilder, v: &mut Value) -> Result<(), ValidationError> {
    let mut err = ValidationError::new();
    let Value::Object(mesh) = v else {
        return Ok(());
    };
    normalize_sections(mesh, MESH_SECTIONS, root, &mut err);
    let backends = mesh
        .get_mut("mtls")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.get_mut("backends"))
        .and_then(Value::as_array_mut);
    for (i, backend) in backends.into_iter().flatten().enumerate() {
        if let Value::Object(b) = backend {
            let at = root.field("mtls").field("backends").index(i);
            normalize_sections(b, CA_BACKEND_SECTIONS, &at, &mut err);
        }
    }
    if err.has_violations() {
        return Err(err);
    }
    Ok(())
}

/// [`normalize`] each of `sections` present in `obj` (renamed from its proto
/// name when given so).
fn normalize_sections(
    obj: &mut Map<String, Value>,
    sections: &[(&str, Shape)],
    at: &PathBuilder,
    err: &mut ValidationError,
) {
    for (name, shape) in sections {
        let proto = name_as_proto(name);
        if !obj.contains_key(*name) {
            if let Some(section) = obj.remove(&proto) {
                obj.insert((*name).to_owned(), section);
            }
        }
        if let Some(section) = obj.get_mut(*name) {
            normalize(*shape, &at.field(name), section, err);
        }
    }
}

/// `dpCert` -> `dp_cert`: the proto name of a JSON name.
fn name_as_proto(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn proto_names_map_to_json_names() {
        assert_eq!(proto_json_name("reuse_connection"), "reuseConnection");
        assert_eq!(
            proto_json_name("max_ejection_percent"),
            "maxEjectionPercent"
        );
        assert_eq!(proto_json_name("interval"), "interval");
    }

    #[test]
    fn suggestions_catch_typos_cases_and_prefixes_only() {
        let known = ["localityAwareLoadBalancing", "zoneEgress"];
        assert_eq!(
            suggest("localityAwarenes", &known),
            Some("localityAwareLoadBalancing")
        );
        assert_eq!(suggest("zoneegress", &known), Some("zoneEgress"));
        assert_eq!(suggest("zone_egress", &known), Some("zoneEgress"));
        assert_eq!(suggest("zoneEgres", &known), Some("zoneEgress"));
        assert_eq!(suggest("passthrough", &known), None);
        let timeouts = ["connectionTimeout", "idleTimeout", "http"];
        assert_eq!(suggest("requestHeader", &timeouts), None);
        assert_eq!(suggest("idleTimout", &timeouts), Some("idleTimeout"));
    }

    #[test]
    fn serde_unknown_field_messages_are_read() {
        assert_eq!(
            parse_unknown_field("unknown field `x`, expected one of `a`, `b`"),
            Some(("x".into(), vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            parse_unknown_field("unknown field `x`, expected `a`"),
            Some(("x".into(), vec!["a".into()]))
        );
        assert_eq!(
            parse_unknown_field("unknown field `x`, there are no fields"),
            Some(("x".into(), vec![]))
        );
        assert_eq!(parse_unknown_field("invalid type: string"), None);
    }

    #[test]
    fn sections_rename_proto_names_and_refuse_unknown_fields() {
        let routing = MESH_SECTIONS
            .iter()
            .find(|(n, _)| *n == "routing")
            .unwrap()
            .1;
        let mut v = json!({"locality_aware_load_balancing": true, "zoneEgress": false});
        let mut err = ValidationError::new();
        normalize(
            routing,
            &PathBuilder::rooted_at("routing"),
            &mut v,
            &mut err,
        );
        assert!(!err.has_violations(), "{err}");
        assert_eq!(
            v,
            json!({"localityAwareLoadBalancing": true, "zoneEgress": false})
        );

        let mut typo = json!({"localityAwarenes": true});
        normalize(
            routing,
            &PathBuilder::rooted_at("routing"),
            &mut typo,
            &mut err,
        );
        assert_eq!(err.violations.len(), 1);
        assert_eq!(err.violations[0].field, "routing.localityAwarenes");
        let message = &err.violations[0].message;
        assert!(
            message.contains("did you mean `localityAwareLoadBalancing`?")
                && message.contains("Kuma 2.7 would ignore it"),
            "{message}"
        );

        let mut both = json!({"zone_egress": true, "zoneEgress": false});
        let mut err = ValidationError::new();
        normalize(
            routing,
            &PathBuilder::rooted_at("routing"),
            &mut both,
            &mut err,
        );
        assert_eq!(err.violations[0].field, "routing.zone_egress");

        // Struct data (a backend's `conf`) keeps its keys.
        let tracing = MESH_SECTIONS
            .iter()
            .find(|(n, _)| *n == "tracing")
            .unwrap()
            .1;
        let mut t = json!({"backends": [{"name": "z", "type": "zipkin", "conf": {"api_version": "httpJson", "url": "http://z"}}]});
        let mut err = ValidationError::new();
        normalize(
            tracing,
            &PathBuilder::rooted_at("tracing"),
            &mut t,
            &mut err,
        );
        assert!(!err.has_violations(), "{err}");
        assert_eq!(t["backends"][0]["conf"]["api_version"], "httpJson");
    }
}
