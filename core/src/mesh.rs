//! The `Mesh` resource (universal format: `type: Mesh`, `name`, then `mtls`, `networking`,
//! `routing`, ... at the top level) and its validation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::{PathBuilder, ValidationError};

/// A Mesh's spec. Fields Umbra does not interpret yet (`tracing`, `logging`, `metrics`,
/// `constraints`) are kept verbatim so Kuma YAML round-trips.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshSpec {
    /// Mutual TLS settings; mTLS is on when `enabledBackend` names one of `backends`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<Mtls>,
    /// Mesh networking settings (outbound passthrough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Value>,
    /// Routing settings (locality-aware load balancing, zone egress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Value>,
    /// Tracing backends (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Value>,
    /// Logging backends (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<Value>,
    /// Metrics backends (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
    /// Dataplane proxy constraints (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Value>,
    /// Kuma's flag to skip default policies on creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_creating_initial_policies: Option<Vec<String>>,
}

/// `mtls` block of a Mesh.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mtls {
    /// Name of the backend in use; empty means mTLS off.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub enabled_backend: String,
    /// Certificate authority backends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<MtlsBackend>,
    /// Kuma's switch to skip validating the CA on Mesh updates (stored, not acted on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_validation: Option<bool>,
}

/// One CA backend (`builtin` or `provided`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtlsBackend {
    /// Backend name referenced by `enabledBackend`.
    pub name: String,
    /// `builtin` or `provided`.
    #[serde(rename = "type")]
    pub backend_type: String,
    /// Data plane certificate settings (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_cert: Option<Value>,
    /// Backend configuration (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<Value>,
    /// `PERMISSIVE` or `STRICT` (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Root chain settings (`requestTimeout`; stored, not acted on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_chain: Option<Value>,
}

impl MeshSpec {
    /// `true` when mutual TLS is enabled (an `enabledBackend` is set).
    pub fn mtls_enabled(&self) -> bool {
        self.mtls
            .as_ref()
            .is_some_and(|m| !m.enabled_backend.is_empty())
    }

    /// Validate: the enabled backend must exist; backend names unique and types known.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        if let Some(mtls) = &self.mtls {
            let path = PathBuilder::rooted_at("mtls");
            for (i, b) in mtls.backends.iter().enumerate() {
                let bp = path.field("backends").index(i);
                if b.name.is_empty() {
                    err.violation(&bp.field("name"), "cannot be empty");
                }
                if mtls.backends[..i].iter().any(|o| o.name == b.name) {
                    err.violation(
                        &bp.field("name"),
                        format!("{:?} name is already used for another backend", b.name),
                    );
                }
                if !matches!(b.backend_type.as_str(), "builtin" | "provided") {
                    err.violation(&bp.field("type"), "must be one of: builtin, provided");
                }
            }
            if !mtls.enabled_backend.is_empty()
                && !mtls.backends.iter().any(|b| b.name == mtls.enabled_backend)
            {
                err.violation(
                    &path.field("enabledBackend"),
                    "has to be set to one of the backends in the mesh",
                );
            }
        }
        err
    }
}
