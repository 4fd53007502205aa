//! MeshTCPRoute (Kuma 2.7.29 `pkg/plugins/policies/meshtcproute/api/v1alpha1`): weighted
//! backends for TCP outbounds, and for HTTP outbounds no MeshHTTPRoute covers. The typed spec,
//! its validator, and a `to` item's `default` as Kuma's `To.GetDefault` builds it (the first
//! rule, or the destination itself with weight 1 when there is no rule).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::backend_ref::BackendRef;
use super::{validate_route_to_target_ref, validate_route_top_target_ref};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::validate::ValidationError;

/// MeshTCPRoute spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTcpRoute {
    /// Proxies the route applies to.
    #[serde(default)]
    pub target_ref: TargetRef,
    /// Per-destination rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<TcpRouteTo>,
}

/// One `to` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRouteTo {
    /// Destination (`MeshService`; `Mesh` under a MeshGateway).
    #[serde(default)]
    pub target_ref: TargetRef,
    /// Rules; only the first is used (Kuma's `GetDefault`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<TcpRule>,
}

/// A rule: its `default`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRule {
    /// The backends.
    #[serde(default)]
    pub default: TcpRuleConf,
}

/// A rule's configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRuleConf {
    /// Weighted backends.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

impl MeshTcpRoute {
    /// Kuma's `validate()`: the top-level targetRef (Mesh, MeshSubset, MeshGateway,
    /// MeshService, MeshServiceSubset), then per `to` item its targetRef (MeshService; Mesh
    /// under a MeshGateway) and each rule's backendRefs (MeshService, MeshServiceSubset).
    pub fn validate(&self) -> ValidationError {
        use TargetRefKind::*;
        let (mut err, spec) = validate_route_top_target_ref(&self.target_ref);
        let top_is_gateway = self.target_ref.kind() == MeshGateway;
        for (i, to) in self.to.iter().enumerate() {
            let path = spec.field("to").index(i);
            validate_route_to_target_ref(&mut err, &path, &to.target_ref, top_is_gateway);
            for (j, rule) in to.rules.iter().enumerate() {
                let rp = path
                    .field("rules")
                    .index(j)
                    .field("default")
                    .field("backendRefs");
                for (k, b) in rule.default.backend_refs.iter().enumerate() {
                    b.validate_at(&mut err, &rp.index(k));
                }
            }
        }
        err
    }
}

/// A `to` item's `default` (Kuma's `To.GetDefault`): `{default: {backendRefs}}` of its first
/// rule, or of the destination itself with weight 1 when it has no rule. JSON.
pub fn to_conf(to: &TcpRouteTo) -> Value {
    let rule = to.rules.first().cloned().unwrap_or_else(|| TcpRule {
        default: TcpRuleConf {
            backend_refs: vec![BackendRef {
                kind: to.target_ref.kind.clone(),
                name: to.target_ref.name.clone(),
                tags: to.target_ref.tags.clone(),
                mesh: to.target_ref.mesh.clone(),
                proxy_types: to.target_ref.proxy_types.clone(),
                weight: Some(1),
                port: None,
            }],
        },
    });
    serde_json::to_value(rule).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{v, violations};

    #[test]
    fn validates_like_kuma() {
        assert_eq!(
            violations::<MeshTcpRoute>(
                "targetRef: {kind: MeshService, name: web}\nto:\n- targetRef: {kind: Mesh}\n  rules:\n  - default:\n      backendRefs:\n      - {kind: Mesh}\n      - {kind: MeshServiceSubset, name: db, tags: {version: v2}, weight: 10}\n"
            ),
            [
                v("spec.to[0].targetRef.kind", "value is not supported"),
                v("spec.to[0].rules[0].default.backendRefs[0].kind", "value is not supported"),
            ]
        );
        assert!(violations::<MeshTcpRoute>(
            "targetRef: {kind: Mesh}\nto:\n- targetRef: {kind: MeshService, name: db}\n"
        )
        .is_empty());
    }

    #[test]
    fn default_is_first_rule_or_destination() {
        let to: TcpRouteTo = serde_json::from_value(serde_json::json!({
            "targetRef": {"kind": "MeshService", "name": "db"}
        }))
        .unwrap();
        assert_eq!(
            to_conf(&to),
            serde_json::json!({"default": {"backendRefs": [{"kind": "MeshService", "name": "db", "weight": 1}]}})
        );
    }
}
