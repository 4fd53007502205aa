//! A resource's metadata ([`Meta`]: mesh, name, labels, times) and the labels Umbra and Kuma
//! read from it (`kuma.io/effect`, `umbra.io/observe`, `kuma.io/origin`,
//! `kuma.io/display-name`). Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Label marking a policy as shadow: `kuma.io/effect: shadow` (transition seed 000).
pub const EFFECT_LABEL: &str = "kuma.io/effect";
/// Value of [`EFFECT_LABEL`] that makes a policy shadow.
pub const EFFECT_SHADOW: &str = "shadow";
/// Label asking for a shadow policy to be observed on the live proxies (issue 40):
/// `umbra.io/observe: "true"` next to `kuma.io/effect: shadow`. Envoy then evaluates the policy
/// on every request without enforcing it (a MeshTrafficPermission becomes RBAC `shadow_rules`
/// beside the enforcing filter); without it, a shadow policy never reaches a proxy (seed 000).
pub const OBSERVE_LABEL: &str = "umbra.io/observe";
/// Label of a staged rollout's copy of a policy: the rollout it belongs to (its plan's
/// fingerprint; [`crate::rollout`]).
pub const ROLLOUT_LABEL: &str = "umbra.io/rollout";
/// The policy types observe mode renders (others are refused when labelled).
pub const OBSERVABLE_TYPES: &[&str] = &["MeshTrafficPermission", "MeshRateLimit"];
/// Label carrying where a resource came from (`global` or `zone`).
pub const ORIGIN_LABEL: &str = "kuma.io/origin";
/// Label carrying a resource's display name.
pub const DISPLAY_NAME_LABEL: &str = "kuma.io/display-name";

/// Resource metadata: everything in the envelope but the spec.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Meta {
    /// Owning mesh (empty for a Mesh).
    pub mesh: String,
    /// Name.
    pub name: String,
    /// Labels (`kuma.io/effect`, `kuma.io/origin`, `kuma.io/zone`, ...).
    pub labels: BTreeMap<String, String>,
    /// RFC 3339 creation time, when known (set by stores).
    pub creation_time: Option<String>,
    /// RFC 3339 modification time, when known (set by stores).
    pub modification_time: Option<String>,
}

impl Meta {
    /// `true` when labelled `kuma.io/effect: shadow`.
    pub fn is_shadow(&self) -> bool {
        self.labels
            .get(EFFECT_LABEL)
            .is_some_and(|v| v == EFFECT_SHADOW)
    }

    /// `true` for a staged rollout's copy of a policy (labelled [`ROLLOUT_LABEL`]).
    pub fn is_staged_copy(&self) -> bool {
        self.labels.contains_key(ROLLOUT_LABEL)
    }

    /// `true` when shadow and labelled [`OBSERVE_LABEL`]` = "true"`.
    pub fn is_observed(&self) -> bool {
        self.is_shadow() && self.labels.get(OBSERVE_LABEL).is_some_and(|v| v == "true")
    }

    /// Precedence of the `kuma.io/origin` label: `global` -1 < none 0 < `zone` 1.
    pub fn origin_rank(&self) -> i8 {
        match self.labels.get(ORIGIN_LABEL).map(String::as_str) {
            Some("global") => -1,
            Some("zone") => 1,
            _ => 0,
        }
    }

    /// Label `kuma.io/display-name`, else the name (Kuma's `GetDisplayName`).
    pub fn display_name(&self) -> &str {
        self.labels
            .get(DISPLAY_NAME_LABEL)
            .filter(|v| !v.is_empty())
            .map_or(&self.name, String::as_str)
    }
}
