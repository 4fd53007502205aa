//! The resource envelope in Kuma's universal format: `type`, `mesh`, `name`, `labels`,
//! (`creationTime`, `modificationTime` on output), then `spec` for new policies, the spec's own
//! fields at the top level for Mesh/Dataplane (`mtls`, `networking`...) and
//! `sources`/`destinations`/`conf` (or `selectors`) for old policies.
//!
//! [`Resource::from_value`] decodes strictly: unknown fields, wrong types and unknown resource
//! types are errors carrying the field path (`spec.to[0].default.foo`), never silently dropped.
//! [`Resource::to_value`] writes the same shape back, so decode → encode is lossless.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::codec::{self, Limits};
use crate::dataplane::DataplaneSpec;
use crate::fields::{decode_at, decode_invalid as invalid, Names};
pub use crate::fields::{from_value_at, DecodeError};
// The modules the type list's spec paths start from (`policies::mesh_timeout::MeshTimeout`).
pub use crate::type_info::{ResourceType, TypeKind};
use crate::validate::{PathBuilder, ValidationError};
use crate::{dataplane, mesh, old, policies, ungenerated, zone_egress, zone_ingress};

pub use crate::meta::{
    Meta, DISPLAY_NAME_LABEL, EFFECT_LABEL, EFFECT_SHADOW, OBSERVABLE_TYPES, OBSERVE_LABEL,
    ORIGIN_LABEL,
};

/// A typed key: `(type, mesh, name)`. Mesh resources have an empty `mesh`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// The type.
    pub ty: ResourceType,
    /// Owning mesh (empty for a Mesh).
    pub mesh: String,
    /// Name, unique per type and mesh.
    pub name: String,
}

impl ResourceKey {
    /// The key of the Mesh `name`.
    pub fn mesh(name: impl Into<String>) -> Self {
        ResourceKey {
            ty: ResourceType::Mesh,
            mesh: String::new(),
            name: name.into(),
        }
    }

    /// The key of the Dataplane `name` in `mesh`.
    pub fn dataplane(mesh: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceKey {
            ty: ResourceType::Dataplane,
            mesh: mesh.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mesh.is_empty() {
            write!(f, "{}/{}", self.ty, self.name)
        } else {
            write!(f, "{}/{}/{}", self.ty, self.mesh, self.name)
        }
    }
}

/// Expands to `$body`: a match arm of an `own` spec (the type list's `spec: own(..)`), whose
/// path `$own` only selects the arms written for such specs.
macro_rules! own {
    ($own:ty => $body:expr) => {
        $body
    };
}

/// Generates [`Spec`] and the matches over it from the type list (the callback of
/// `crate::policies::for_each_type`): one variant per type with its `own` spec, the shared
/// variants written out below.
macro_rules! define_spec {
    ($(
        $variant:ident {
            name: $name:literal,
            path: $plural:literal,
            display: $singular_display:literal / $plural_display:literal,
            kind: $kind:ident,
            scope: $scope:ident,
            levels: [$($level:ident),*],
            replaces: [$($replaces:ident)?],
            generated: $generated:literal,
            spec: $(own($own:ty))? $(shared($shared:ident))?,
        }
    )*) => {
        /// A typed spec: one variant per [`ResourceType`] with its own spec type, and the
        /// variants several types share, with the type.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum Spec {
            $($(
                #[doc = concat!("A `", $name, "`.")]
                $variant($own),
            )?)*
            /// A `targetRef` policy known only by Kuma's schema (MeshMetric) and its type.
            StoredPolicy(ResourceType, policies::schema_only::StoredPolicy),
            /// MeshGateway, MeshGatewayRoute or VirtualOutbound, and which.
            Selected(ResourceType, ungenerated::SelectorResource),
            /// Secret or GlobalSecret, and which.
            Secret(ResourceType, ungenerated::SecretSpec),
        }

        impl Spec {
            /// The spec's type.
            pub fn ty(&self) -> ResourceType {
                match self {
                    $($(Spec::$variant(_) => own!($own => ResourceType::$variant),)?)*
                    Spec::StoredPolicy(ty, _) | Spec::Selected(ty, _) | Spec::Secret(ty, _) => *ty,
                }
            }

            /// The spec as JSON (for new policies: the content of `spec`).
            fn to_json(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $($(Spec::$variant(s) => own!($own => serde_json::to_value(s)),)?)*
                    Spec::StoredPolicy(_, s) => serde_json::to_value(s),
                    Spec::Selected(_, s) => serde_json::to_value(s),
                    Spec::Secret(_, s) => serde_json::to_value(s),
                }
            }

            /// The spec's own validation; `json` is the spec as JSON, which the schema-checked
            /// policies read.
            fn validate_with(&self, json: impl FnOnce() -> Value) -> ValidationError {
                match self {
                    $($(Spec::$variant(s) => own!($own => s.validate()),)?)*
                    Spec::StoredPolicy(ty, s) => s.validate(*ty, &json()),
                    Spec::Selected(_, s) => s.validate(),
                    Spec::Secret(_, s) => s.validate(),
                }
            }

            /// Decode the spec of type `ty` from `v`, taking field `names`, failures reported at
            /// paths under `root`.
            fn decode(
                ty: ResourceType,
                root: &PathBuilder,
                v: Value,
                names: Names,
            ) -> Result<Spec, ValidationError> {
                Ok(match ty {
                    $(ResourceType::$variant => {
                        $(own!($own => Spec::$variant(decode_at(root, v, names)?)))?
                        $(Spec::$shared(ty, decode_at(root, v, names)?))?
                    })*
                })
            }
        }
    };
}

crate::policies::for_each_type!(define_spec);

/// A decoded resource: type, metadata and typed spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Metadata.
    pub meta: Meta,
    /// Typed spec (its variant gives the type).
    pub spec: Spec,
}

impl Resource {
    /// The resource's type.
    pub fn ty(&self) -> ResourceType {
        self.spec.ty()
    }

    /// The typed key.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            ty: self.ty(),
            mesh: self.meta.mesh.clone(),
            name: self.meta.name.clone(),
        }
    }

    /// Decode YAML/JSON text holding exactly one resource.
    ///
    /// # Errors
    /// [`DecodeError`] with the failing field path.
    pub fn from_bytes(bytes: &[u8]) -> Result<Resource, DecodeError> {
        Self::from_value(codec::decode_one(bytes, Limits::default())?)
    }

    /// Decode every resource of a multi-document YAML file; the first bad document stops
    /// decoding and its error names the document index (`[2].spec...`).
    ///
    /// # Errors
    /// [`DecodeError`].
    pub fn all_from_bytes(bytes: &[u8]) -> Result<Vec<Resource>, DecodeError> {
        decode_documents_with(bytes, Limits::default(), Self::from_value)
    }

    /// Decode a universal-format document.
    ///
    /// # Errors
    /// [`DecodeError::Invalid`] for a missing/unknown `type`, mistyped metadata, unknown fields
    /// or fields of the wrong type anywhere in the spec.
    pub fn from_value(value: Value) -> Result<Resource, DecodeError> {
        let Value::Object(mut obj) = value else {
            return Err(invalid("", "resource must be a mapping"));
        };
        let ty_name = match obj.remove("type") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("type", "must be a string")),
            None => return Err(invalid("type", "must be defined")),
        };
        let ty = ResourceType::from_name(&ty_name)
            .ok_or_else(|| invalid("type", format!("unknown resource type {ty_name:?}")))?;
        let string_field =
            |obj: &mut Map<String, Value>, f: &str| -> Result<Option<String>, DecodeError> {
                match obj.remove(f) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s)),
                    Some(_) => Err(invalid(f, "must be a string")),
                }
            };
        let mesh = string_field(&mut obj, "mesh")?.unwrap_or_default();
        let name = string_field(&mut obj, "name")?.unwrap_or_default();
        let creation_time = string_field(&mut obj, "creationTime")?;
        let modification_time = string_field(&mut obj, "modificationTime")?;
        let labels = match obj.remove("labels") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(v) => from_value_at(&PathBuilder::rooted_at("labels"), v)?,
        };
        let meta = Meta {
            mesh,
            name,
            labels,
            creation_time,
            modification_time,
        };
        let spec = match ty.kind() {
            TypeKind::NewPolicy => {
                if let Some(k) = obj.keys().find(|k| *k != "spec") {
                    return Err(invalid(k.clone(), "unknown field"));
                }
                let spec = obj.remove("spec").unwrap_or(Value::Object(Map::new()));
                decode_spec(ty, &PathBuilder::rooted_at("spec"), spec)?
            }
            TypeKind::Infra | TypeKind::OldPolicy | TypeKind::StoredOnly => {
                decode_spec(ty, &PathBuilder::root(), Value::Object(obj))?
            }
        };
        Ok(Resource { meta, spec })
    }

    /// Encode in universal format (meta first, then the spec), omitting empty fields.
    pub fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), Value::String(self.ty().name().into()));
        if !self.meta.mesh.is_empty() {
            out.insert("mesh".into(), Value::String(self.meta.mesh.clone()));
        }
        out.insert("name".into(), Value::String(self.meta.name.clone()));
        if let Some(t) = &self.meta.creation_time {
            out.insert("creationTime".into(), Value::String(t.clone()));
        }
        if let Some(t) = &self.meta.modification_time {
            out.insert("modificationTime".into(), Value::String(t.clone()));
        }
        if !self.meta.labels.is_empty() {
            out.insert(
                "labels".into(),
                serde_json::to_value(&self.meta.labels).unwrap_or_default(),
            );
        }
        let spec = self.spec_value();
        match self.ty().kind() {
            TypeKind::NewPolicy => {
                out.insert("spec".into(), spec);
            }
            TypeKind::Infra | TypeKind::OldPolicy | TypeKind::StoredOnly => {
                if let Value::Object(m) = spec {
                    out.extend(m);
                }
            }
        }
        Value::Object(out)
    }

    /// The spec alone as JSON (for new policies: the content of `spec`).
    pub fn spec_value(&self) -> Value {
        // Serializing plain data structs with string keys cannot fail.
        self.spec.to_json().unwrap_or(Value::Null)
    }

    /// Validate metadata and spec, returning every violation (empty = valid).
    ///
    /// Metadata: `name` required (Kuma's name charset), `mesh` required for mesh-scoped types.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        if self.meta.name.is_empty() {
            err.violation_field("name", "must not be empty");
        } else if self.meta.name.len() > 253 {
            err.violation_field("name", "must be at most 253 characters");
        } else if matches!(self.meta.name.as_str(), "." | "..") {
            // A path segment that URLs normalise away: such a resource could be stored but
            // never read or deleted by name.
            err.violation_field("name", "must not be \".\" or \"..\"");
        } else if !self
            .meta
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            err.violation_field(
                "name",
                "invalid characters: must consist of alphanumeric characters, '-', '.' and '_'",
            );
        }
        if self.ty().is_mesh_scoped() && self.meta.mesh.is_empty() {
            err.violation_field("mesh", "must not be empty");
        }
        if self.ty() == ResourceType::GlobalSecret && !self.meta.mesh.is_empty() {
            err.violation_field("mesh", "must not be set: a GlobalSecret belongs to no mesh");
        }
        if let Some(effect) = self.meta.labels.get(EFFECT_LABEL) {
            if effect != EFFECT_SHADOW {
                err.violation(
                    &PathBuilder::rooted_at("labels").key(EFFECT_LABEL),
                    "must be \"shadow\" when set",
                );
            } else if self.ty().kind() != TypeKind::NewPolicy {
                err.violation(
                    &PathBuilder::rooted_at("labels").key(EFFECT_LABEL),
                    "only targetRef policies can be shadow",
                );
            }
        }
        if let Some(observe) = self.meta.labels.get(OBSERVE_LABEL) {
            let at = PathBuilder::rooted_at("labels").key(OBSERVE_LABEL);
            if observe != "true" && observe != "false" {
                err.violation(&at, "must be \"true\" or \"false\" when set");
            } else if observe == "true" && !self.meta.is_shadow() {
                err.violation(
                    &at,
                    "only a shadow policy (kuma.io/effect: shadow) can be observed: a live one already runs",
                );
            } else if observe == "true" && !OBSERVABLE_TYPES.contains(&self.ty().name()) {
                err.violation(
                    &at,
                    format!(
                        "observe mode is implemented for {} only",
                        OBSERVABLE_TYPES.join(", ")
                    ),
                );
            } else if observe == "true" && self.ty() == ResourceType::MeshRateLimit {
                let doc = self.to_value();
                let with_tcp = ["from", "to"].iter().any(|list| {
                    doc["spec"][*list]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|item| !item["default"]["local"]["tcp"].is_null())
                });
                if with_tcp {
                    err.violation(
                        &at,
                        "a MeshRateLimit with local.tcp cannot be observed: Envoy's network local rate limit has no mode that counts without enforcing; observe its local.http in a policy without local.tcp",
                    );
                }
            }
        }
        err.add(self.validate_spec());
        err
    }

    /// Validate the spec only (paths rooted at `spec` for new policies, at the top for others).
    pub fn validate_spec(&self) -> ValidationError {
        self.spec.validate_with(|| self.spec_value())
    }

    /// The ZoneIngress spec, if this is a ZoneIngress.
    pub fn as_zone_ingress(&self) -> Option<&crate::zone_ingress::ZoneIngressSpec> {
        match &self.spec {
            Spec::ZoneIngress(z) => Some(z),
            _ => None,
        }
    }

    /// The ZoneEgress spec, if this is a ZoneEgress.
    pub fn as_zone_egress(&self) -> Option<&crate::zone_egress::ZoneEgressSpec> {
        match &self.spec {
            Spec::ZoneEgress(z) => Some(z),
            _ => None,
        }
    }

    /// The Dataplane spec, if this is a Dataplane.
    pub fn as_dataplane(&self) -> Option<&DataplaneSpec> {
        match &self.spec {
            Spec::Dataplane(d) => Some(d),
            _ => None,
        }
    }
}

/// Decode a spec of type `ty` from JSON, reporting failures at paths under `root`.
///
/// # Errors
/// [`DecodeError::Invalid`] with the failing path.
pub fn decode_spec(ty: ResourceType, root: &PathBuilder, v: Value) -> Result<Spec, DecodeError> {
    // Kuma decodes every type but the targetRef policies with protojson: proto names too.
    let names = if ty.kind() == TypeKind::NewPolicy {
        Names::Json
    } else {
        Names::JsonOrProto
    };
    let mut v = v;
    if ty == ResourceType::Mesh {
        crate::fields::normalize_mesh_sections(root, &mut v).map_err(DecodeError::Invalid)?;
    }
    Spec::decode(ty, root, v, names).map_err(DecodeError::Invalid)
}

/// Every document of a multi-document YAML (or JSON) text decoded by `decode`; the first bad
/// document stops decoding, and with several documents its violations' paths start with the
/// document's index (`[2].spec...`).
///
/// # Errors
/// [`DecodeError`].
pub(crate) fn decode_documents_with(
    bytes: &[u8],
    limits: Limits,
    decode: impl Fn(Value) -> Result<Resource, DecodeError>,
) -> Result<Vec<Resource>, DecodeError> {
    let docs = codec::decode_documents(bytes, limits)?;
    let many = docs.len() > 1;
    docs.into_iter()
        .enumerate()
        .map(|(i, d)| {
            decode(d).map_err(|e| match e {
                DecodeError::Invalid(v) if many => {
                    let mut out = ValidationError::new();
                    out.add_at(&PathBuilder::root().index(i), v);
                    DecodeError::Invalid(out)
                }
                other => other,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_paths_normalise_away_are_refused() {
        for (name, refused) in [(".", true), ("..", true), ("...", false), ("a.b", false)] {
            let r =
                Resource::from_value(serde_json::json!({"type": "Mesh", "name": name})).unwrap();
            let errors = r.validate();
            assert_eq!(
                errors.violations.iter().any(|v| v.field == "name"),
                refused,
                "{name:?}: {errors}"
            );
        }
    }

    /// `umbra.io/observe` (issue 40): `"true"` only on a shadow policy of a type observe mode
    /// renders, so no accepted label is silently ignored.
    #[test]
    fn observe_is_accepted_only_where_it_is_rendered() {
        let policy = |ty: &str, labels: serde_json::Value| {
            let default = match ty {
                "MeshTrafficPermission" => serde_json::json!({"action": "Allow"}),
                "MeshRateLimit" => {
                    serde_json::json!({"local": {"http": {"requestRate": {"num": 5, "interval": "1s"}}}})
                }
                "MeshRateLimit+tcp" => serde_json::json!({"local": {
                    "http": {"requestRate": {"num": 5, "interval": "1s"}},
                    "tcp": {"connectionRate": {"num": 5, "interval": "1s"}}}}),
                _ => serde_json::json!({"idleTimeout": "5s"}),
            };
            let ty = ty.trim_end_matches("+tcp");
            let top = if ty == "MeshRateLimit" {
                serde_json::json!({"kind": "Mesh", "proxyTypes": ["Sidecar"]})
            } else {
                serde_json::json!({"kind": "Mesh"})
            };
            Resource::from_value(serde_json::json!({
                "type": ty, "mesh": "m", "name": "p", "labels": labels,
                "spec": {"targetRef": top,
                         "from": [{"targetRef": {"kind": "Mesh"}, "default": default}]},
            }))
            .unwrap()
        };
        let observe_violation = |r: &Resource| {
            r.validate()
                .violations
                .into_iter()
                .find(|v| v.field.contains(OBSERVE_LABEL))
                .map(|v| v.message)
        };
        let shadow = |observe: &str| serde_json::json!({EFFECT_LABEL: EFFECT_SHADOW, OBSERVE_LABEL: observe});
        let ok = policy("MeshTrafficPermission", shadow("true"));
        assert_eq!(observe_violation(&ok), None);
        assert!(ok.meta.is_observed());
        let limit = policy("MeshRateLimit", shadow("true"));
        assert_eq!(limit.validate().violations, vec![]);
        let off = policy("MeshTrafficPermission", shadow("false"));
        assert_eq!(observe_violation(&off), None);
        assert!(!off.meta.is_observed());
        for (r, reason) in [
            (
                policy("MeshTrafficPermission", shadow("yes")),
                "\"true\" or \"false\"",
            ),
            (
                policy(
                    "MeshTrafficPermission",
                    serde_json::json!({OBSERVE_LABEL: "true"}),
                ),
                "only a shadow policy",
            ),
            (
                policy("MeshTimeout", shadow("true")),
                "implemented for MeshTrafficPermission, MeshRateLimit only",
            ),
            (
                policy("MeshRateLimit+tcp", shadow("true")),
                "local.tcp cannot be observed",
            ),
        ] {
            let message = observe_violation(&r).expect("refused");
            assert!(message.contains(reason), "{message}");
        }
    }
}
