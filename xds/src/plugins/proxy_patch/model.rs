//! The model the modification engine works on, whichever policy a modification comes from:
//! the operation ([`Op`]), the match conditions ([`Match`]), one [`Modification`] and its
//! [`Source`] (policy, position, origin of what it adds). A leaf of the `proxy_patch` module:
//! imports only [`crate::error`].

use std::collections::BTreeMap;

use umbra_core::policies::mesh_proxy_patch::{JsonPatchBlock, ModificationKind};

use crate::error::GenerateError;

/// A modification operation (MeshProxyPatch's `Add`, ProxyTemplate's `add`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Add a resource (clusters, listeners, virtual hosts).
    Add,
    /// Remove matching resources.
    Remove,
    /// Merge `value` into, or apply `jsonPatches` to, matching resources.
    Patch,
    /// Insert a filter first.
    AddFirst,
    /// Insert a filter last.
    AddLast,
    /// Insert a filter before the one named by `match.name`.
    AddBefore,
    /// Insert a filter after the one named by `match.name`.
    AddAfter,
}

/// Match conditions; `None` (or an empty tag map) means "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Match {
    /// Origin of the resource (of the listener, for filters and virtual hosts).
    pub origin: Option<String>,
    /// Name of the cluster, listener, filter or virtual host.
    pub name: Option<String>,
    /// Name of the listener holding the filter.
    pub listener_name: Option<String>,
    /// Tag selector on the listener's `io.kuma.tags` metadata.
    pub listener_tags: BTreeMap<String, String>,
    /// Name of the route configuration holding the virtual host.
    pub route_configuration_name: Option<String>,
}

/// One modification, whichever policy it comes from.
#[derive(Debug, Clone)]
pub(super) struct Modification<'a> {
    /// What it modifies.
    pub kind: ModificationKind,
    /// The operation as written (for error messages).
    pub operation: &'a str,
    /// The parsed operation (`None` when unknown).
    pub op: Option<Op>,
    /// Conditions.
    pub matcher: Match,
    /// YAML of the resource (adds) or of the part to merge (`Patch`).
    pub value: Option<&'a str>,
    /// RFC 6902 patches (`Patch` only; take precedence over `value` when non-empty).
    pub json_patches: &'a [JsonPatchBlock],
}

/// Where a modification comes from, for origins and errors.
#[derive(Debug, Clone)]
pub(super) struct Source {
    /// `MeshProxyPatch/<name>` or `ProxyTemplate/<name>`.
    pub policy: String,
    /// Position in the policy (`appendModifications[2]`).
    pub label: String,
    /// Origin given to added resources.
    pub origin: &'static str,
}

impl Source {
    /// A [`GenerateError::Policy`] of this source on `resource`, `reason` prefixed with the label.
    pub(super) fn error(
        &self,
        resource: impl Into<String>,
        reason: impl std::fmt::Display,
    ) -> GenerateError {
        GenerateError::Policy {
            policy: self.policy.clone(),
            resource: resource.into(),
            reason: format!("{}: {reason}", self.label),
        }
    }
}

/// Origin Kuma gives to raw ProxyTemplate resources.
pub(super) const ORIGIN_RAW: &str = "proxy-template-raw";
