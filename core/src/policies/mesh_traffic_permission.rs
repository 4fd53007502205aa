//! MeshTrafficPermission (placeholder until its typed model and validator land).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::target_ref::TargetRef;
use crate::validate::ValidationError;

/// MeshTrafficPermission spec (placeholder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTrafficPermission {
    /// Top-level targetRef.
    pub target_ref: TargetRef,
    /// `to` items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
    /// `from` items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    /// single-item `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

impl MeshTrafficPermission {
    /// Validate (placeholder).
    pub fn validate(&self) -> ValidationError {
        ValidationError::new()
    }
}
