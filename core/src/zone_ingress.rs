//! The `ZoneIngress` resource: the proxy at the edge of a zone that other zones' sidecars
//! reach the zone's services through (issue 18). Not mesh-scoped: one ingress serves every
//! mesh of its zone. Its `availableServices` (tags, instance count and mesh of every service
//! the zone runs) are computed by the zone CP and travel zone → Global → other zones over KDS,
//! where they become remote endpoints.
//!
//! Shape and rules follow Kuma 2.7's `api/mesh/v1alpha1/zone_ingress.proto`,
//! `zone_ingress_validator.go` and `zone_ingress_helpers.go` (`IsRemoteIngress`,
//! `HasPublicAddress`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dataplane::{validate_address, validate_service_tags};
use crate::target_ref::SERVICE_TAG;
use crate::validate::{PathBuilder, ValidationError};

/// A ZoneIngress spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneIngressSpec {
    /// The zone it belongs to (set by the zone CP; empty until then).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// Where it listens, and where other zones reach it.
    #[serde(default)]
    pub networking: ZoneIngressNetworking,
    /// What it offers: the zone's services per mesh, with their instance counts.
    #[serde(
        default,
        deserialize_with = "crate::old::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub available_services: Vec<AvailableService>,
}

/// `networking` of a ZoneIngress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneIngressNetworking {
    /// Address the ingress listener binds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Address other zones reach it by (a load balancer, a NAT); required to be reachable.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub advertised_address: String,
    /// Port the ingress listener binds.
    #[serde(default)]
    pub port: u32,
    /// Port other zones reach it by.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub advertised_port: u32,
    /// Envoy admin settings (opaque; `port` checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<Value>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One service a ZoneIngress offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AvailableService {
    /// The service's tags (`kuma.io/service` required), those of its inbounds.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// How many healthy inbounds carry exactly these tags.
    #[serde(default)]
    pub instances: u32,
    /// The mesh it belongs to.
    #[serde(default)]
    pub mesh: String,
    /// `true` for an ExternalService reachable through the zone (not produced by Umbra).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external_service: bool,
}

impl AvailableService {
    /// The `kuma.io/service` tag (empty if missing).
    pub fn service(&self) -> &str {
        self.tags.get(SERVICE_TAG).map_or("", String::as_str)
    }
}

impl ZoneIngressSpec {
    /// Kuma's `IsRemoteIngress`: it belongs to a zone, and not to `local_zone`.
    pub fn is_remote(&self, local_zone: &str) -> bool {
        !self.zone.is_empty() && self.zone != local_zone
    }

    /// Kuma's `HasPublicAddress`: other zones know where to reach it.
    pub fn has_public_address(&self) -> bool {
        !self.networking.advertised_address.is_empty() && self.networking.advertised_port != 0
    }

    /// Validate as Kuma 2.7 does. Paths are rooted at `networking` and `availableService`
    /// (Kuma's singular).
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let net = PathBuilder::rooted_at("networking");
        let n = &self.networking;
        crate::mesh::must_be_mapping(&mut err, &net.field("admin"), n.admin.as_ref());
        if let Some(admin_port) = n
            .admin
            .as_ref()
            .and_then(|a| a.get("port"))
            .and_then(Value::as_u64)
        {
            if admin_port == u64::from(n.port) || admin_port == u64::from(n.advertised_port) {
                err.violation(&net.field("admin").field("port"), "must differ from port");
            }
        }
        if n.advertised_address.is_empty() && n.advertised_port != 0 {
            err.violation(
                &net.field("advertisedAddress"),
                "has to be defined with advertisedPort",
            );
        }
        if n.advertised_port == 0 && !n.advertised_address.is_empty() {
            err.violation(
                &net.field("advertisedPort"),
                "has to be defined with advertisedAddress",
            );
        }
        // Kuma passes `networking.<field>` to its Dataplane `validateAddress`, which adds
        // `.address`: its violations are at `networking.address.address` and
        // `networking.advertisedAddress.address` (`zone_ingress_validator_test.go`).
        for (field, address) in [
            ("address", &n.address),
            ("advertisedAddress", &n.advertised_address),
        ] {
            if !address.is_empty() {
                validate_address(&mut err, &net.field(field).field("address"), address);
            }
        }
        if n.port == 0 || n.port > 65535 {
            err.violation(&net.field("port"), "port must be in the range [1, 65535]");
        }
        if n.advertised_port > 65535 {
            err.violation(
                &net.field("advertisedPort"),
                "port must be in the range [1, 65535]",
            );
        }
        let services = PathBuilder::rooted_at("availableService");
        for (i, s) in self.available_services.iter().enumerate() {
            err.add(validate_service_tags(
                &services.index(i).field("tags"),
                &s.tags,
            ));
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(field, message)` of each violation of `zi`.
    fn problems(zi: &ZoneIngressSpec) -> Vec<(String, String)> {
        zi.validate()
            .violations
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    }

    fn spec(yaml: &str) -> ZoneIngressSpec {
        let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_valid_ingress_and_its_helpers() {
        let zi = spec("zone: zone-2\nnetworking:\n  address: 10.0.0.1\n  port: 10001\n  advertisedAddress: 192.168.0.1\n  advertisedPort: 10001\navailableServices:\n- mesh: default\n  instances: 2\n  tags: {kuma.io/service: backend, version: v1}\n");
        assert!(!zi.validate().has_violations(), "{}", zi.validate());
        assert!(zi.is_remote("zone-1"));
        assert!(!zi.is_remote("zone-2"));
        assert!(zi.has_public_address());
        assert_eq!(zi.available_services[0].service(), "backend");
        assert!(!spec("networking: {address: 10.0.0.1, port: 1}").is_remote("zone-1"));
    }

    #[test]
    fn every_problem_is_reported_with_kuma_messages() {
        let zi = spec("networking:\n  address: 0.0.0.0\n  port: 0\n  advertisedPort: 5\n  admin: {port: 5}\navailableServices:\n- mesh: default\n  tags: {version: v1}\n");
        let got = problems(&zi);
        let fields: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "networking.admin.port",
                "networking.advertisedAddress",
                "networking.address.address",
                "networking.port",
                "availableService[0].tags"
            ],
            "{got:?}"
        );
        assert!(got[4].1.contains("kuma.io/service"), "{got:?}");
    }

    /// Kuma 2.7.29 `zone_ingress_validator_test.go`, "invalid advertised address, port and
    /// available service": Kuma reports the address at `networking.advertisedAddress.address`;
    /// names with underscores pass (govalidator's `IsDNSName`, issue 41).
    #[test]
    fn addresses_follow_kuma() {
        let zi = spec("networking:\n  address: 192.168.0.1\n  advertisedAddress: '!@#'\n  port: 10001\n  advertisedPort: 100000\navailableServices:\n- tags: {kuma.io/service: backend}\n");
        let got = problems(&zi);
        assert_eq!(
            got,
            [
                (
                    "networking.advertisedAddress.address".to_owned(),
                    "address has to be valid IP address or domain name".to_owned()
                ),
                (
                    "networking.advertisedPort".to_owned(),
                    "port must be in the range [1, 65535]".to_owned()
                ),
            ]
        );
        let ok = spec("networking:\n  address: kuma-2_ingress_1x\n  port: 10001\n  advertisedAddress: ingress_public.example.com\n  advertisedPort: 10001\n");
        assert!(!ok.validate().has_violations(), "{}", ok.validate());
    }
}
