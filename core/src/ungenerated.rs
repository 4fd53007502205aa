//! Kuma 2.7 resource types that are not `targetRef` policies, typed as far as their envelope:
//! ExternalService (generated from [`crate::external_service`]), MeshGateway, MeshGatewayRoute,
//! VirtualOutbound (stored, synced and listed; not generated), Secret (read by ExternalServices)
//! and GlobalSecret.
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

use crate::go_net;
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
    /// Kuma's `ExternalServiceResource.Validate`, envelope part, in Kuma's order:
    /// `networking` present with a `host:port` address as Go's `net.SplitHostPort` splits it,
    /// a host that is an IP or a DNS name as govalidator reads them (`db_1:5432`, a compose
    /// container, is one) and a port in 1..=65535; a `tls.serverName`, when given, not empty;
    /// `tls.caCert`, `clientCert` and `clientKey`, when given, not empty data sources; a
    /// `kuma.io/service` tag that is not the address's host.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let path = PathBuilder::root().field("networking");
        let address = match &self.networking {
            None => {
                err.violation(&path, "should have networking");
                ""
            }
            Some(networking) => {
                let address = networking
                    .get("address")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                validate_external_address(&mut err, &path.field("address"), address);
                let tls = networking.get("tls");
                let tp = path.field("tls");
                if tls
                    .and_then(|t| t.get("serverName"))
                    .is_some_and(|n| n.as_str() == Some(""))
                {
                    err.violation(&tp.field("serverName"), "cannot be empty");
                }
                for field in ["caCert", "clientCert", "clientKey"] {
                    if let Some(ds) = tls.and_then(|t| t.get(field)).filter(|d| !d.is_null()) {
                        let set = |k: &str| {
                            ds.get(k)
                                .and_then(Value::as_str)
                                .is_some_and(|v| !v.is_empty())
                        };
                        if !["inline", "inlineString", "secret", "file"]
                            .into_iter()
                            .any(set)
                        {
                            err.violation(&tp.field(field), "data source cannot be empty");
                        }
                    }
                }
                address
            }
        };
        let tags = PathBuilder::root().field("tags");
        match self.tags.get(SERVICE_TAG) {
            None => err.violation(&tags, format!("mandatory tag {SERVICE_TAG:?} is missing")),
            Some(s) if s.is_empty() => {
                err.violation(&tags.key(SERVICE_TAG), "tag value must be non-empty")
            }
            Some(_) => {}
        }
        if let (Some(service), Ok((host, _))) = (
            self.tags.get(SERVICE_TAG).filter(|s| !s.is_empty()),
            go_net::split_host_port(address),
        ) {
            if service == host {
                err.violation(
                    &tags.key(SERVICE_TAG),
                    "cannot be the same as networking.address",
                );
            }
        }
        err
    }
}

/// Kuma's `validateExternalServiceAddress`: every problem of a `host:port` address, at the
/// address (an unsplittable one gets all four messages, as in Kuma).
fn validate_external_address(err: &mut ValidationError, ap: &PathBuilder, address: &str) {
    if address.is_empty() {
        err.violation(ap, "address can't be empty");
        return;
    }
    let (host, port) = go_net::split_host_port(address).unwrap_or_else(|_| {
        err.violation(ap, "unable to parse address");
        ("", "")
    });
    if !go_net::is_host(host) {
        err.violation(ap, "address has to be a valid IP address or a domain name");
    }
    // Go's `strconv.ParseUint(port, 10, 32)`: ASCII digits only, below 2^32.
    let port = if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        port.parse::<u32>().ok()
    } else {
        None
    };
    if port.is_none() {
        err.violation(ap, "unable to parse port in address");
    }
    if port.is_none_or(|p| p == 0 || p > 65535) {
        err.violation(ap, "port must be in the range [1, 65535]");
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
        assert_eq!(bad.validate().violations.len(), 5, "{}", bad.validate());
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

    /// Kuma 2.7.29 `external_service_validator_test.go`: its valid addresses and the address,
    /// `tls.serverName` and tag entries, with its messages, plus govalidator's names with
    /// underscores (issue 41) and Kuma's host-only comparison of the service tag.
    #[test]
    fn external_service_addresses_follow_kuma() {
        let es = |networking: Value, tags: Value| -> Vec<(String, String)> {
            let es: ExternalService =
                serde_json::from_value(json!({"networking": networking, "tags": tags})).unwrap();
            es.validate()
                .violations
                .into_iter()
                .map(|v| (v.field, v.message))
                .collect()
        };
        let svc = json!({"kuma.io/service": "backend"});
        let addr = |a: &str| es(json!({"address": a}), svc.clone());
        for ok in [
            "192.168.0.1:8080",
            "example.com:8080",
            "[fd00:a123::1]:8080",
            "kuma-3_postgres_1x:5432",
            "db_1.:5432",
        ] {
            assert_eq!(addr(ok), [], "{ok}");
        }
        let at = |msgs: &[&str]| -> Vec<(String, String)> {
            msgs.iter()
                .map(|m| ("networking.address".to_owned(), (*m).to_owned()))
                .collect()
        };
        let all4 = [
            "unable to parse address",
            "address has to be a valid IP address or a domain name",
            "unable to parse port in address",
            "port must be in the range [1, 65535]",
        ];
        assert_eq!(addr(""), at(&["address can't be empty"]));
        assert_eq!(addr("..>_<..:8080"), at(&[all4[1]]));
        assert_eq!(addr("http://example.com:8080"), at(&all4));
        assert_eq!(addr("fd00:1234::1:8080"), at(&all4));
        assert_eq!(addr("192.168.0.1:65536"), at(&[all4[3]]));
        assert_eq!(addr("192.168.0.1:0"), at(&[all4[3]]));
        assert_eq!(addr("192.168.0.1:+80"), at(&[all4[2], all4[3]]));
        assert_eq!(
            es(
                json!({"address": "192.168.0.1:8080", "tls": {"serverName": ""}}),
                svc.clone()
            ),
            [(
                "networking.tls.serverName".to_owned(),
                "cannot be empty".to_owned()
            )]
        );
        assert_eq!(
            es(
                json!({"address": "192.168.0.1:8080", "tls": {"caCert": {}, "clientCert": {"secret": "s"}, "clientKey": {"inline": ""}}}),
                svc.clone()
            ),
            [
                (
                    "networking.tls.caCert".to_owned(),
                    "data source cannot be empty".to_owned()
                ),
                (
                    "networking.tls.clientKey".to_owned(),
                    "data source cannot be empty".to_owned()
                ),
            ]
        );
        assert_eq!(
            es(json!({"address": "192.168.0.1:8080"}), json!({})),
            [(
                "tags".to_owned(),
                "mandatory tag \"kuma.io/service\" is missing".to_owned()
            )]
        );
        assert_eq!(
            es(
                json!({"address": "httpbin.org:443"}),
                json!({"kuma.io/service": "httpbin.org"})
            ),
            [(
                "tags[\"kuma.io/service\"]".to_owned(),
                "cannot be the same as networking.address".to_owned()
            )]
        );
    }
}
