//! What every converter shares (issue 19): the [`Conversion`] of one old policy, its [`Note`]s,
//! [`ConvertError`], [`Options`], the [`Ctx`] a family converter gets, which builds and
//! validates each output, and the value builders several families use ([`int_or_decimal`],
//! [`set_and_add`]). A leaf: the family converters and the list passes depend on it, it depends
//! on none of them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::mesh::{Backends, MeshSpec, NamedBackend};
use crate::resource::{Resource, ResourceKey, ResourceType, EFFECT_LABEL, EFFECT_SHADOW};

/// Label naming the old policy type an output was converted from (`Timeout`).
pub const CONVERTED_FROM_TYPE_LABEL: &str = "umbra.io/converted-from-type";
/// Label naming the old policy an output was converted from (its name in the same mesh).
pub const CONVERTED_FROM_NAME_LABEL: &str = "umbra.io/converted-from";

/// What kind of difference a [`Note`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NoteKind {
    /// A value the old policy puts in the config (explicitly or as its default) that the new
    /// policy leaves to Envoy's or Kuma's default: seed 000's "leaking" defaults.
    Default,
    /// A selector that `targetRef` cannot express exactly (converted to a wider or narrower
    /// target, or split into several policies).
    Selector,
    /// A field with no equivalent in the new policy: dropped.
    Dropped,
    /// Equivalent fields whose semantics differ (precedence, merging, units).
    Semantics,
}

/// One difference between an old policy and its conversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// What kind of difference.
    pub kind: NoteKind,
    /// Path of the field in the old policy (`conf.connectTimeout`, `sources[1].match`).
    pub field: String,
    /// What differs and why, for a person.
    pub message: String,
    /// Envoy proto3-JSON field names (camelCase, as in `_config`) whose value the difference
    /// shows up in, if any (`["connectTimeout"]`): a fleet diff operation whose path ends in
    /// one of them is explained by this note. Empty: no visible effect in the config.
    pub affects: Vec<String>,
}

impl Note {
    /// A note with no `affects`.
    pub fn new(kind: NoteKind, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind,
            field: field.into(),
            message: message.into(),
            affects: Vec::new(),
        }
    }

    /// This note, explaining changes to the Envoy fields `affects`.
    #[must_use]
    pub fn affecting(mut self, affects: &[&str]) -> Self {
        self.affects = affects.iter().map(|s| (*s).to_owned()).collect();
        self
    }
}

/// The conversion of one old policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The old policy.
    pub source: ResourceKey,
    /// The new policies (shadow-labelled, valid), in a stable order.
    pub outputs: Vec<Resource>,
    /// Every difference between the old policy and the outputs.
    pub notes: Vec<Note>,
}

/// Why an old policy cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The type has no converter (not an old policy, or no new equivalent: VirtualOutbound), or
    /// the inputs lack what it needs (a MeshGatewayRoute's MeshGateways).
    #[error("{ty} {name:?}: no conversion for this type ({reason})")]
    Unsupported {
        /// The type name.
        ty: String,
        /// The policy name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The conversion produced a policy that does not validate (a converter bug or an input
    /// the converter cannot express): the violations, as `field: message`.
    #[error("{ty} {name:?}: the converted {output_type} {output_name:?} is invalid: {violations}")]
    Invalid {
        /// The old type.
        ty: String,
        /// The old name.
        name: String,
        /// The output type.
        output_type: String,
        /// The output name.
        output_name: String,
        /// `field: message; ...`.
        violations: String,
    },
    /// Nothing in the old policy maps to a new one.
    #[error("{ty} {name:?}: {reason}")]
    Empty {
        /// The type name.
        ty: String,
        /// The policy name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// Options of a conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Put every output in this mesh (default: the source's mesh).
    pub mesh: Option<String>,
}

/// What a family converter returns: the outputs and the notes.
pub type Output = (Vec<Resource>, Vec<Note>);

/// What a family converter is given besides the policy.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// The options.
    pub options: &'a Options,
    /// The old policy being converted.
    pub source: &'a Resource,
    /// The source's Mesh, when the caller has it ([`convert`] finds it among the resources):
    /// TrafficLog and TrafficTrace name its `logging`/`tracing` backends.
    pub mesh_spec: Option<&'a MeshSpec>,
}

impl Ctx<'_> {
    /// The mesh outputs go to.
    pub fn mesh(&self) -> &str {
        self.options
            .mesh
            .as_deref()
            .unwrap_or(&self.source.meta.mesh)
    }

    /// Build one output: `{type, mesh, name, labels, spec}` with the shadow and converted-from
    /// labels (the source's other labels are kept, `kuma.io/effect` replaced), decoded and
    /// validated.
    ///
    /// # Errors
    /// [`ConvertError::Invalid`] when the document does not decode or validate.
    pub fn output(
        &self,
        ty: ResourceType,
        name: &str,
        spec: Value,
    ) -> Result<Resource, ConvertError> {
        let mut labels: BTreeMap<String, String> = self.source.meta.labels.clone();
        labels.insert(EFFECT_LABEL.to_owned(), EFFECT_SHADOW.to_owned());
        labels.insert(
            CONVERTED_FROM_TYPE_LABEL.to_owned(),
            self.source.ty().name().to_owned(),
        );
        labels.insert(
            CONVERTED_FROM_NAME_LABEL.to_owned(),
            self.source.meta.name.clone(),
        );
        let doc = json!({
            "type": ty.name(),
            "mesh": self.mesh(),
            "name": name,
            "labels": labels,
            "spec": spec,
        });
        let invalid = |violations: String| ConvertError::Invalid {
            ty: self.source.ty().name().to_owned(),
            name: self.source.meta.name.clone(),
            output_type: ty.name().to_owned(),
            output_name: name.to_owned(),
            violations,
        };
        let r = Resource::from_value(doc).map_err(|e| {
            invalid(
                e.violations()
                    .iter()
                    .map(|v| format!("{}: {}", v.field, v.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let v = r.validate();
        if v.has_violations() {
            return Err(invalid(
                v.violations
                    .iter()
                    .map(|v| format!("{}: {}", v.field, v.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            ));
        }
        Ok(r)
    }

    /// The name of output `index` of `count` (the source's name when there is one, else
    /// `<name>-<index+1>`).
    pub fn output_name(&self, index: usize, count: usize) -> String {
        if count <= 1 {
            self.source.meta.name.clone()
        } else {
            format!("{}-{}", self.source.meta.name, index + 1)
        }
    }

    /// One output of type `ty` per target of `targets` (the families whose outputs are their
    /// distinct top-level targets), named by [`Ctx::output_name`], with the spec `spec(target)`.
    ///
    /// # Errors
    /// As [`Ctx::output`].
    pub fn output_per_target(
        &self,
        ty: ResourceType,
        targets: &[Value],
        spec: impl Fn(&Value) -> Value,
    ) -> Result<Vec<Resource>, ConvertError> {
        targets
            .iter()
            .enumerate()
            .map(|(i, target)| self.output(ty, &self.output_name(i, targets.len()), spec(target)))
            .collect()
    }

    /// The Mesh backend a TrafficLog or TrafficTrace names (`name`, its `conf.backend`; empty:
    /// the Mesh's default one) among those `read` takes from the Mesh's `section` (`logging`,
    /// `tracing`), and, when it is the default one, the note that its settings are copied.
    /// `what` is what the source makes (`log`, `trace`).
    ///
    /// # Errors
    /// [`ConvertError::Unsupported`] without the Mesh; [`ConvertError::Empty`] when the Mesh has
    /// no such backend (the source then makes nothing).
    pub fn mesh_backend<T: NamedBackend + Clone>(
        &self,
        section: &str,
        what: &str,
        read: impl FnOnce(&MeshSpec) -> Backends<T>,
        name: &str,
    ) -> Result<(T, Option<Note>), ConvertError> {
        let ty = self.source.ty().name();
        let mesh = self.mesh_spec.ok_or_else(|| {
            self.unsupported(format!(
                "the Mesh is needed to convert a {ty} (its backend is one of the Mesh's {section} backends)"
            ))
        })?;
        let backends = read(mesh);
        let backend = backends.get(name).cloned().ok_or_else(|| {
            self.empty(format!(
                "the Mesh has no {section} backend {:?}: the {ty} {what}s nothing",
                if name.is_empty() {
                    backends.default_backend.as_str()
                } else {
                    name
                }
            ))
        })?;
        let copied = name.is_empty().then(|| {
            Note::new(
                NoteKind::Semantics,
                "conf.backend",
                format!(
                    "the Mesh's default {section} backend {:?} is copied: changing the Mesh's default no longer changes this {what}",
                    backend.name()
                ),
            )
        });
        Ok((backend, copied))
    }

    /// [`ConvertError::Unsupported`] for this source.
    pub fn unsupported(&self, reason: impl Into<String>) -> ConvertError {
        ConvertError::Unsupported {
            ty: self.source.ty().name().to_owned(),
            name: self.source.meta.name.clone(),
            reason: reason.into(),
        }
    }

    /// [`ConvertError::Empty`] for this source.
    pub fn empty(&self, reason: impl Into<String>) -> ConvertError {
        ConvertError::Empty {
            ty: self.source.ty().name().to_owned(),
            name: self.source.meta.name.clone(),
            reason: reason.into(),
        }
    }
}

/// Push `v` unless `list` already has it.
pub fn push_unique<T: PartialEq>(list: &mut Vec<T>, v: T) {
    if !list.contains(&v) {
        list.push(v);
    }
}

/// A percentage as the new policies write one that must parse back to the same double: an
/// integer when whole (within `i32`), else the shortest decimal string.
pub fn int_or_decimal(p: f64) -> Value {
    if p.fract() == 0.0 && p.abs() <= f64::from(i32::MAX) {
        json!(p as i64)
    } else {
        json!(p.to_string())
    }
}

/// Headers to add, each a `{name, value}` item and whether the old policy appended it, as a new
/// policy's `{set, add}` (`None` when there is none): the appended ones in `add`, the others in
/// `set`. The new policy adds the appended headers before the overwriting ones: when one comes
/// after an overwriting header, a note on `field` (affecting the Envoy field `affects`) says
/// that `policy` changes the order.
pub fn set_and_add(
    headers: Vec<(Value, bool)>,
    policy: &str,
    field: &str,
    affects: &str,
    notes: &mut Vec<Note>,
) -> Option<Value> {
    let mut set = Vec::new();
    let mut add = Vec::new();
    let mut reordered = false;
    for (header, append) in headers {
        if append {
            reordered |= !set.is_empty();
            add.push(header);
        } else {
            set.push(header);
        }
    }
    if reordered {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                field,
                format!(
                    "{policy} adds the appended headers before the overwriting ones: the order changes"
                ),
            )
            .affecting(&[affects]),
        );
    }
    let mut m = Map::new();
    if !set.is_empty() {
        m.insert("set".to_owned(), json!(set));
    }
    if !add.is_empty() {
        m.insert("add".to_owned(), json!(add));
    }
    (!m.is_empty()).then_some(Value::Object(m))
}

/// Fixtures of the converters' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use serde_json::Value;

    use super::{Conversion, ConvertError, Note, NoteKind, Options};
    use crate::convert::convert_one;
    use crate::mesh::MeshSpec;
    use crate::resource::{Resource, Spec};

    /// `sources` and `destinations` selecting every service.
    pub const ANY_TO_ANY: &str =
        "sources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\n";
    /// `sources` selecting web, `destinations` backend.
    pub const WEB_TO_BACKEND: &str = "sources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: backend}\n";

    /// The policy of type `ty` named `name` in the mesh `default`, the rest of its document
    /// `body`.
    pub fn policy(ty: &str, name: &str, body: &str) -> Resource {
        Resource::from_bytes(format!("type: {ty}\nmesh: default\nname: {name}\n{body}").as_bytes())
            .unwrap()
    }

    /// The conversion of `r` with the default options.
    pub fn convert(r: &Resource) -> Result<Conversion, ConvertError> {
        convert_one(r, &Options::default())
    }

    /// The conversion of the policy `yaml` with the default options.
    pub fn conv(yaml: &str) -> Result<Conversion, ConvertError> {
        convert(&Resource::from_bytes(yaml.as_bytes()).unwrap())
    }

    /// The conversion of the policy `yaml`, which must succeed.
    pub fn ok(yaml: &str) -> Conversion {
        conv(yaml).unwrap()
    }

    /// The Mesh `yaml`'s spec.
    pub fn mesh(yaml: &str) -> MeshSpec {
        match Resource::from_bytes(yaml.as_bytes()).unwrap().spec {
            Spec::Mesh(m) => m,
            _ => unreachable!(),
        }
    }

    /// The names of the outputs.
    pub fn names(c: &Conversion) -> Vec<&str> {
        c.outputs.iter().map(|o| o.meta.name.as_str()).collect()
    }

    /// The top-level `targetRef` of each output.
    pub fn targets(c: &Conversion) -> Vec<Value> {
        c.outputs
            .iter()
            .map(|o| o.spec_value()["targetRef"].clone())
            .collect()
    }

    /// The kind and field of each note.
    pub fn fields(c: &Conversion) -> Vec<(NoteKind, &str)> {
        c.notes.iter().map(|n| (n.kind, n.field.as_str())).collect()
    }

    /// The field and `affects` of each note that affects a field.
    pub fn affects(c: &Conversion) -> Vec<(&str, Vec<String>)> {
        c.notes
            .iter()
            .filter(|n| !n.affects.is_empty())
            .map(|n| (n.field.as_str(), n.affects.clone()))
            .collect()
    }

    /// Whether `notes` has one of `kind` on `field`.
    pub fn has(notes: &[Note], kind: NoteKind, field: &str) -> bool {
        notes.iter().any(|n| n.kind == kind && n.field == field)
    }

    /// Whether `notes` has one of `kind` on `field` affecting exactly `affects`.
    pub fn has_affecting(notes: &[Note], kind: NoteKind, field: &str, affects: &[&str]) -> bool {
        notes
            .iter()
            .any(|n| n.kind == kind && n.field == field && n.affects == affects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::mesh_fault_injection::IntOrString;

    #[test]
    fn percentages_parse_back_to_the_same_double() {
        for p in [0.0, 1.0, 50.0, 12.5, 50.5, 33.3, 0.1, 0.001, 99.99, 1e-5] {
            let v = int_or_decimal(p);
            let back = match &v {
                Value::Number(n) => n.as_f64().unwrap(),
                Value::String(s) => s.parse::<f64>().unwrap(),
                other => panic!("{other}"),
            };
            assert_eq!(back, p, "{v}");
            let v: IntOrString = serde_json::from_value(v).unwrap();
            assert_eq!(v.to_f64(), Some(p), "{p}");
        }
        assert_eq!(int_or_decimal(50.0), json!(50));
        assert_eq!(int_or_decimal(0.1), json!("0.1"));
    }

    #[test]
    fn appended_headers_after_overwriting_ones_are_reordered() {
        let h = |n: &str| json!({"name": n, "value": "1"});
        let mut notes = Vec::new();
        assert_eq!(set_and_add(Vec::new(), "P", "f", "a", &mut notes), None);
        assert_eq!(
            set_and_add(
                vec![(h("x"), true), (h("y"), false)],
                "P",
                "f",
                "a",
                &mut notes
            ),
            Some(json!({"set": [h("y")], "add": [h("x")]}))
        );
        assert!(notes.is_empty());
        set_and_add(
            vec![(h("y"), false), (h("x"), true)],
            "P",
            "f",
            "a",
            &mut notes,
        );
        assert_eq!(notes.len(), 1);
        assert_eq!(
            (notes[0].field.as_str(), &notes[0].affects[..]),
            ("f", &["a".to_owned()][..])
        );
    }
}
