//! Kuma 2.7 resource types that are not `targetRef` policies and that Umbra stores, syncs and
//! lists without generating anything from them: ExternalService (until zone egress exists),
//! MeshGateway, MeshGatewayRoute, VirtualOutbound (builtin gateways and virtual outbounds are
//! out of Umbra's scope), Secret and GlobalSecret.
//!
//! Their envelope is typed as Kuma's protos give it (`api/mesh/v1alpha1/*.proto`,
//! `api/system/v1alpha1/secret.proto`), unknown top-level fields refused. The nested `conf` of
//! the gateway types and of VirtualOutbound and ExternalService's `networking` are kept as
//! JSON objects, verbatim. Validation is the part of Kuma's validators
//! (`pkg/core/resources/apis/{mesh,system}/*_validator.go`) that concerns those envelopes.
//! Answers about DPPs these types could affect say they are not generated
//! ([`crate::view::PolicySet::not_generated`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::old::selectors::{deserialize_selectors, validate_selectors, Selector, SelectorRules};
use crate::target_ref::SERVICE_TAG;
use crate::validate::{PathBuilder, ValidationError};

/// ExternalService: a service outside the mesh, addressed by `networking.address`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalService {
    /// `address` (`host:port`), `tls`, `disableHostDNSEntry`: kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Map<String, Value>>,
    /// Tags; `kuma.io/service` is required.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// MeshGateway, MeshGatewayRoute and VirtualOutbound: `selectors` and a `conf` object (and a
/// MeshGateway's `tags`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorResource {
    /// Dataplanes (or gateways) selected.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<Selector>,
    /// The configuration, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<Map<String, Value>>,
    /// MeshGateway tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Secret and GlobalSecret: `data`, base64.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSpec {
    /// The secret's bytes, base64 (standard alphabet, padded).
    #[serde(default)]
    pub data: String,
}

impl ExternalService {
    /// Kuma's `ExternalServiceResource.Validate`, envelope part: `networking` present with a
    /// `host:port` address, a `kuma.io/service` tag that is not the address.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let tags = PathBuilder::root().field("tags");
        match self.tags.get(SERVICE_TAG) {
            None => err.violation(
                &tags.key(SERVICE_TAG),
                format!("mandatory tag {SERVICE_TAG:?} is missing"),
            ),
            Some(s) if s.is_empty() => {
                err.violation(&tags.key(SERVICE_TAG), "tag value must be non-empty")
            }
            Some(_) => {}
        }
        let path = PathBuilder::root().field("networking");
        let Some(networking) = &self.networking else {
            err.violation(&path, "should have networking");
            return err;
        };
        let address = networking
            .get("address")
            .and_then(Value::as_str)
            .unwrap_or("");
        let ap = path.field("address");
        if address.is_empty() {
            err.violation(&ap, "address can't be empty");
        } else {
            match address.rsplit_once(':') {
                None => err.violation(&ap, "unable to parse address"),
                Some((host, port)) => {
                    if host.is_empty() {
                        err.violation(&ap, "address has to be a valid IP address or a domain name");
                    }
                    if port.parse::<u16>().map_or(true, |p| p == 0) {
                        err.violation(&ap, "unable to parse port in address");
                    }
                }
            }
            if self.tags.get(SERVICE_TAG).is_some_and(|s| s == address) {
                err.violation(
                    &tags.key(SERVICE_TAG),
                    "cannot be the same as networking.address",
                );
            }
        }
        err
    }
}

impl SelectorResource {
    /// Kuma's envelope checks of MeshGateway, MeshGatewayRoute and VirtualOutbound: at least
    /// one selector with at least one tag, and a `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_selectors(
            &PathBuilder::root().field("selectors"),
            &self.selectors,
            &SelectorRules::NON_EMPTY,
        );
        if self.conf.is_none() {
            err.violation(&PathBuilder::root().field("conf"), "has to be defined");
        }
        err
    }
}

impl SecretSpec {
    /// Kuma's `ValidateSecretData`: `data` present and base64.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let path = PathBuilder::root().field("data");
        if self.data.is_empty() {
            err.violation(&path, "cannot be empty");
        } else if base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .is_err()
        {
            err.violation(&path, "must be base64 (standard alphabet, padded)");
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_are_checked() {
        let es: ExternalService = serde_json::from_value(
            json!({"networking": {"address": "httpbin.org:443", "tls": {"enabled": true}}, "tags": {"kuma.io/service": "httpbin"}}),
        )
        .unwrap();
        assert!(!es.validate().has_violations());
        let bad: ExternalService =
            serde_json::from_value(json!({"networking": {"address": "x"}})).unwrap();
        assert_eq!(bad.validate().violations.len(), 2, "{}", bad.validate());
        let gw: SelectorResource = serde_json::from_value(json!({"selectors": []})).unwrap();
        assert_eq!(gw.validate().violations.len(), 2);
        assert!(SecretSpec {
            data: "c2VjcmV0".into()
        }
        .validate()
        .violations
        .is_empty());
        assert!(SecretSpec {
            data: "not base64!".into()
        }
        .validate()
        .has_violations());
    }
}
