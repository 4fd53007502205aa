//! `backendRef`: where a route sends traffic (Kuma 2.7's `common_api.BackendRef`): a
//! `targetRef` written inline (`kind`, `name`, `tags`...) plus a `weight` (default 1) and a
//! `port` (only for real MeshService resources, which Umbra does not have). Shared by
//! MeshHTTPRoute (`default.backendRefs`, `RequestMirror.backendRef`) and MeshTCPRoute.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::target_ref::{
    validate_target_ref, ProxyType, TargetRef, TargetRefKind, TargetRefOpts, SERVICE_TAG,
};
use crate::validate::{PathBuilder, ValidationError};

/// A route backend: a MeshService or MeshServiceSubset and its weight.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendRef {
    /// `MeshService` or `MeshServiceSubset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TargetRefKind>,
    /// The service (`kuma.io/service`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Subset tags (`MeshServiceSubset`), e.g. `{version: v2}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Reserved by Kuma for cross-mesh references.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mesh: String,
    /// Not allowed on a backend (validation reports it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_types: Vec<ProxyType>,
    /// Relative weight among the rule's backends; absent means 1, 0 sends nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Port of a real MeshService resource; Umbra has none, so validation refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
}

impl BackendRef {
    /// `MeshService name` with `tags` (the outbound's own tags) and `weight`.
    pub fn service(name: &str, tags: BTreeMap<String, String>, weight: u32) -> Self {
        Self {
            kind: Some(TargetRefKind::MeshService),
            name: name.to_owned(),
            tags,
            weight: Some(weight),
            ..Self::default()
        }
    }

    /// The inline reference as a [`TargetRef`].
    pub fn target_ref(&self) -> TargetRef {
        TargetRef {
            kind: self.kind.clone(),
            name: self.name.clone(),
            tags: self.tags.clone(),
            mesh: self.mesh.clone(),
            proxy_types: self.proxy_types.clone(),
        }
    }

    /// The weight (1 when absent).
    pub fn weight(&self) -> u32 {
        self.weight.unwrap_or(1)
    }

    /// The endpoint tags this backend selects: its `tags` plus `kuma.io/service: name`.
    pub fn destination_tags(&self) -> BTreeMap<String, String> {
        let mut tags = self.tags.clone();
        tags.insert(SERVICE_TAG.to_owned(), self.name.clone());
        tags
    }

    /// Kuma's backendRef check (`ValidateTargetRef` with MeshService and MeshServiceSubset),
    /// violations rooted at `path`; a `port` is refused (Umbra has no MeshService resources,
    /// so it could never resolve and Kuma would drop the backend silently).
    pub fn validate_at(&self, err: &mut ValidationError, path: &PathBuilder) {
        err.add_at(
            path,
            validate_target_ref(
                &self.target_ref(),
                &TargetRefOpts {
                    supported_kinds: &[
                        TargetRefKind::MeshService,
                        TargetRefKind::MeshServiceSubset,
                    ],
                    gateway_listener_tags_allowed: false,
                    sample_tag_allowed: false,
                },
            ),
        );
        if self.port.is_some() {
            err.violation(
                &path.field("port"),
                "must not be defined: Umbra routes to kuma.io/service names and has no MeshService resources a port could refer to",
            );
        }
    }

    /// Kuma's `BackendRef.Hash`: `<kind>/<name>/<sorted k=v joined by />/<mesh>` (Go's quirk
    /// of leading empty entries reproduced: it pre-sizes the slice and then appends).
    pub fn hash(&self) -> String {
        let mut parts: Vec<String> = vec![String::new(); self.tags.len()];
        parts.extend(self.tags.iter().map(|(k, v)| format!("{k}={v}")));
        let kind = self.kind.as_ref().map_or("", TargetRefKind::as_str);
        format!("{kind}/{}/{}/{}", self.name, parts.join("/"), self.mesh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_defaults() {
        let b: BackendRef = serde_json::from_value(serde_json::json!({
            "kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}
        }))
        .unwrap();
        assert_eq!(b.weight(), 1);
        assert_eq!(b.hash(), "MeshServiceSubset/backend//version=v2/");
        assert_eq!(b.destination_tags()["kuma.io/service"], "backend");
        let mut err = ValidationError::new();
        b.validate_at(&mut err, &PathBuilder::rooted_at("x"));
        assert!(!err.has_violations(), "{err}");
        let bad = BackendRef {
            kind: Some(TargetRefKind::Mesh),
            port: Some(80),
            ..BackendRef::default()
        };
        let mut err = ValidationError::new();
        bad.validate_at(&mut err, &PathBuilder::rooted_at("x"));
        let fields: Vec<&str> = err.violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["x.kind", "x.port"]);
    }
}
