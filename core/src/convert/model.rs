//! What every converter shares (issue 19): the [`Conversion`] of one old policy, its [`Note`]s,
//! [`ConvertError`], [`Options`], and the [`Ctx`] a family converter gets, which builds and
//! validates each output. A leaf: the family converters and the list passes depend on it, it
//! depends on none of them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::mesh::MeshSpec;
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
    /// The type has no converter (not an old policy, or no new equivalent:
    /// VirtualOutbound, MeshGatewayRoute).
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
