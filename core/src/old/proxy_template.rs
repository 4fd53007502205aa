//! Old ProxyTemplate policy (placeholder until its typed model and validator land).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::ValidationError;

/// ProxyTemplate spec (placeholder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyTemplate {
    /// Everything.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl ProxyTemplate {
    /// Validate (placeholder).
    pub fn validate(&self) -> ValidationError {
        ValidationError::new()
    }
}
