//! Structural validation of policy specs against Kuma 2.7.29's published OpenAPI schemas
//! (`core/schemas/kuma-v2.7.29/<type>.yaml`, copied from Kuma's
//! `pkg/plugins/policies/<name>/api/v1alpha1/schema.yaml`), for the policy types whose
//! configuration Umbra stores but does not model field by field yet.
//!
//! Kuma's schemas come from its CRDs: they list every field, its type and enum, but do not
//! forbid unknown fields. Umbra does ([`crate::resource`] refuses unknown fields everywhere),
//! so each object schema with `properties` gets `additionalProperties: false` unless Kuma marks
//! it `x-kubernetes-preserve-unknown-fields`. `targetRef`s are removed from the schema: they
//! are typed and checked by Kuma's validator rules ([`super::schema_only`]).
//!
//! Violations carry Kuma-style paths rooted at `spec` (`spec.to[0].default.interval`) and the
//! schema library's message (`"foo" is not of type "integer"`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::type_info::ResourceType;
use crate::validate::{PathBuilder, ValidationError};

/// `(type, schema text)` of every embedded schema.
const SCHEMAS: &[(ResourceType, &str)] = &[(
    ResourceType::MeshMetric,
    include_str!("../../schemas/kuma-v2.7.29/meshmetric.yaml"),
)];

type Validators = BTreeMap<ResourceType, jsonschema::Validator>;

fn validators() -> &'static Validators {
    static CELL: OnceLock<Validators> = OnceLock::new();
    CELL.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|(ty, text)| (*ty, compile(*ty, text)))
            .collect()
    })
}

/// Compile one embedded schema. The schemas are part of the build, and a unit test compiles
/// every one of them, so a failure here is a build defect, reported loudly.
fn compile(ty: ResourceType, text: &str) -> jsonschema::Validator {
    let doc = crate::codec::decode_one(text.as_bytes(), crate::codec::Limits::default())
        .unwrap_or_else(|e| panic!("embedded {ty} schema does not parse: {e}"));
    let mut spec = doc["properties"]["spec"].clone();
    strict(&mut spec);
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&spec)
        .unwrap_or_else(|e| panic!("embedded {ty} schema does not compile: {e}"))
}

/// Forbid unknown fields in every object schema with `properties`, drop `targetRef`s, and
/// remove the OpenAPI-only keywords (`example`, `x-kubernetes-*`) the library does not know.
fn strict(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let preserve = map
        .get("x-kubernetes-preserve-unknown-fields")
        .is_some_and(|v| v == &Value::Bool(true));
    map.retain(|k, _| !k.starts_with("x-kubernetes-") && k != "example");
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        if props.contains_key("targetRef") {
            props.insert("targetRef".into(), Value::Object(Map::new()));
        }
        for v in props.values_mut() {
            strict(v);
        }
        if !preserve && !map.contains_key("additionalProperties") {
            map.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = map.get_mut(key) {
            strict(v);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(list)) = map.get_mut(key) {
            list.iter_mut().for_each(strict);
        }
    }
}

/// `true` when Umbra embeds Kuma's schema for `ty`.
pub fn has_schema(ty: ResourceType) -> bool {
    SCHEMAS.iter().any(|(t, _)| *t == ty)
}

/// Validate `spec` (the content of a resource's `spec`) against Kuma's schema for `ty`; no
/// violations when Umbra embeds no schema for `ty`.
pub fn validate(ty: ResourceType, spec: &Value) -> ValidationError {
    let mut err = ValidationError::new();
    let Some(validator) = validators().get(&ty) else {
        return err;
    };
    let mut found: Vec<(String, String)> = validator
        .iter_errors(spec)
        .map(|e| (kuma_path(e.instance_path().as_str()), e.to_string()))
        .collect();
    found.sort();
    found.dedup();
    for (path, message) in found {
        err.violation_field(path, message);
    }
    err
}

/// JSON pointer (`/to/0/default/interval`) → Kuma path rooted at `spec`
/// (`spec.to[0].default.interval`).
fn kuma_path(pointer: &str) -> String {
    let mut path = PathBuilder::rooted_at("spec");
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        path = match seg.parse::<usize>() {
            Ok(i) => path.index(i),
            Err(_) => path.field(&seg),
        };
    }
    path.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_embedded_schema_compiles() {
        assert_eq!(validators().len(), SCHEMAS.len());
    }

    #[test]
    fn fields_types_and_unknown_fields_are_checked_with_paths() {
        let ok =
            json!({"targetRef": {"kind": "Mesh"}, "default": {"sidecar": {"includeUnused": true}}});
        assert!(!validate(ResourceType::MeshMetric, &ok).has_violations());
        let bad = json!({"targetRef": {"kind": "Mesh"}, "default": {"sidecar": {"includeUnused": "yes"}, "backendz": []}});
        let err = validate(ResourceType::MeshMetric, &bad);
        let fields: Vec<&str> = err.violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.default", "spec.default.sidecar.includeUnused"],
            "{err}"
        );
        assert!(err.violations[0].message.contains("backendz"), "{err}");
    }
}
