//! The `targetRef` policies Umbra knows only by Kuma's schema: it stores, syncs, matches and
//! lists them but neither models their configuration nor generates Envoy config for them:
//! MeshMetric.
//!
//! [`StoredPolicy`] is their common shape: a typed top-level `targetRef`, `from`/`to` items with
//! a typed `targetRef` and the `default` kept as JSON, or a single top-level `default`. Which of
//! those a type has, and which `targetRef` kinds each level allows, come from Kuma 2.7.29's
//! validators (`pkg/plugins/policies/<name>/api/v1alpha1/validator.go`, see [`rules_for`]).
//! Every field of every `default` is checked against Kuma's published schema for the type
//! ([`super::kuma_schema`]): names, JSON types and enums, unknown fields refused.
//!
//! Kuma's value rules beyond the schema (a positive health-check interval, one access-log
//! backend per entry, ...) come with each type's generation. Until then such a policy is
//! accepted as Kuma's schema allows, and every answer about a DPP it selects says it is not
//! generated ([`crate::view::PolicySet::not_generated`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{validate_target_ref_at, validate_top_target_ref, Item};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::type_info::ResourceType;
use crate::validate::{ValidationError, MUST_NOT_BE_DEFINED};

/// A stored-only `targetRef` policy spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoredPolicy {
    /// The proxies the policy applies to (an absent one is reported by validation).
    #[serde(default)]
    pub target_ref: TargetRef,
    /// Inbound items (types with `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<Item<Value>>>,
    /// Outbound items (types with `to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<Item<Value>>>,
    /// The single-item configuration (MeshMetric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// Kuma's `targetRef` rules for one stored policy type.
#[derive(Debug, Clone, Copy)]
pub struct TypeRules {
    /// Kinds allowed at the top level.
    pub top: &'static [TargetRefKind],
    /// Whether a top-level MeshGateway may carry listener tags.
    pub gateway_listener_tags: bool,
    /// Kinds allowed in `from[]`; `None` when the type has no `from`.
    pub from: Option<&'static [TargetRefKind]>,
    /// Kinds allowed in `to[]`; `None` when the type has no `to`.
    pub to: Option<&'static [TargetRefKind]>,
    /// The type has a single top-level `default` instead of items.
    pub single: bool,
}

use TargetRefKind::{Mesh, MeshGateway, MeshService, MeshServiceSubset, MeshSubset};

const TOP: &[TargetRefKind] = &[
    Mesh,
    MeshSubset,
    MeshGateway,
    MeshService,
    MeshServiceSubset,
];

/// Kuma 2.7.29's `targetRef` rules for `ty`; `None` for types that are not stored-only
/// `targetRef` policies.
pub fn rules_for(ty: ResourceType) -> Option<TypeRules> {
    let items = |from, to| TypeRules {
        top: TOP,
        gateway_listener_tags: true,
        from,
        to,
        single: false,
    };
    Some(match ty {
        ResourceType::MeshMetric => TypeRules {
            single: true,
            ..items(None, None)
        },
        _ => return None,
    })
}

impl StoredPolicy {
    /// Validate a spec of type `ty` (a type [`rules_for`] knows): the `targetRef`s by Kuma's
    /// rules, the item lists the type has, then `spec_json` (the same spec as JSON) against
    /// Kuma's schema. Paths are rooted at `spec`.
    pub fn validate(&self, ty: ResourceType, spec_json: &Value) -> ValidationError {
        let Some(rules) = rules_for(ty) else {
            let mut err = ValidationError::new();
            err.violation_field(
                "spec",
                format!("{ty} is not a stored targetRef policy type"),
            );
            return err;
        };
        let (mut err, spec) =
            validate_top_target_ref(&self.target_ref, rules.top, rules.gateway_listener_tags);
        let from = self.from.as_deref().unwrap_or_default();
        let to = self.to.as_deref().unwrap_or_default();
        if rules.single {
            for (name, present) in [("from", self.from.is_some()), ("to", self.to.is_some())] {
                if present {
                    err.violation(&spec.field(name), MUST_NOT_BE_DEFINED);
                }
            }
        } else if self.default.is_some() {
            err.violation(&spec.field("default"), MUST_NOT_BE_DEFINED);
        }
        let (from_kinds, to_kinds) = (rules.from, rules.to);
        for (name, items, kinds, allowed) in [
            ("from", from, from_kinds, rules.from.is_some()),
            ("to", to, to_kinds, rules.to.is_some()),
        ] {
            if !allowed && !items.is_empty() {
                err.violation(&spec.field(name), MUST_NOT_BE_DEFINED);
                continue;
            }
            let Some(kinds) = kinds else { continue };
            for (i, item) in items.iter().enumerate() {
                validate_target_ref_at(
                    &mut err,
                    &spec.field(name).index(i).field("targetRef"),
                    &item.target_ref,
                    kinds,
                    false,
                );
            }
        }
        // The lists the type does not have are reported above; the schema sees the rest.
        let mut checked = spec_json.clone();
        if let Value::Object(map) = &mut checked {
            for (key, has) in [
                ("from", rules.from.is_some()),
                ("to", rules.to.is_some()),
                ("default", rules.single),
            ] {
                if !has {
                    map.remove(key);
                }
            }
        }
        err.add(super::kuma_schema::validate(ty, &checked));
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(ty: ResourceType, yaml: &str) -> Vec<String> {
        let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
        let p: StoredPolicy = serde_json::from_value(v.clone()).unwrap();
        p.validate(ty, &v)
            .violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.message))
            .collect()
    }

    #[test]
    fn kuma_target_ref_rules_per_type() {
        assert!(errors(
            ResourceType::MeshMetric,
            "targetRef: {kind: Mesh}\ndefault: {}\n"
        )
        .is_empty());
        assert_eq!(
            errors(
                ResourceType::MeshMetric,
                "targetRef: {kind: Mesh}\nto: []\ndefault: {}\n"
            ),
            ["spec.to: must not be defined"]
        );
        assert_eq!(
            errors(
                ResourceType::MeshMetric,
                "targetRef: {kind: MeshHTTPRoute, name: r}\ndefault: {}\n"
            ),
            ["spec.targetRef.kind: value is not supported"]
        );
    }
}
