//! The `ZoneEgress` resource: the proxy a zone's sidecars send traffic leaving the zone
//! through (ExternalServices, and other zones' services) when a Mesh has
//! `routing.zoneEgress: true`. Not mesh-scoped: one egress serves every mesh of its zone.
//! Zone-owned: a zone registers its egresses and sends them to the Global, and never receives
//! another zone's (Kuma's `kds.send_to_global` only), so each zone sees only its own.
//!
//! Shape and rules follow Kuma 2.7's `api/mesh/v1alpha1/zoneegress.proto` (`zone`,
//! `networking: {address, port, admin: {port}}`), `zone_egress_validator.go` and
//! `zone_egress_helpers.go` (`IsRemoteEgress`, `UsesInboundInterface`, `AdminAddress`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::dataplane::validate_address;
use crate::validate::{PathBuilder, ValidationError};

/// A ZoneEgress spec (Kuma's `ZoneEgress` message).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneEgressSpec {
    /// The zone it belongs to (set by the zone CP when it sends the egress up; may be empty
    /// in the zone's own copy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// Where it listens.
    #[serde(default)]
    pub networking: ZoneEgressNetworking,
}

/// `networking` of a ZoneEgress (Kuma's `ZoneEgress.Networking`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneEgressNetworking {
    /// Address the egress listener binds (an IP or a DNS name; may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Port the egress listener binds (1-65535).
    #[serde(default)]
    pub port: u32,
    /// Envoy admin settings (Kuma's `EnvoyAdmin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<EnvoyAdmin>,
}

/// Kuma's `EnvoyAdmin` (`api/mesh/v1alpha1/envoy_admin.proto`): the port of the proxy's
/// Envoy admin; 0 means the CP's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyAdmin {
    /// The admin port (0: the default).
    #[serde(default)]
    pub port: u32,
}

impl ZoneEgressSpec {
    /// Kuma's `IsRemoteEgress`: it belongs to a zone, and not to `local_zone`.
    pub fn is_remote(&self, local_zone: &str) -> bool {
        !self.zone.is_empty() && self.zone != local_zone
    }

    /// The admin port it asks for, `None` when it leaves it to the CP (absent or 0).
    pub fn admin_port(&self) -> Option<u16> {
        self.networking
            .admin
            .and_then(|a| u16::try_from(a.port).ok())
            .filter(|p| *p != 0)
    }

    /// Kuma's `UsesInboundInterface(address, port)`: `port` is the egress port and `address`
    /// overlaps the egress address (equal, or either is a wildcard `0.0.0.0`/`::`). An address
    /// that is not an IP (a DNS name, empty) overlaps nothing, as Go's `net.ParseIP` gives nil.
    pub fn uses_inbound_interface(&self, address: IpAddr, port: u32) -> bool {
        if port != self.networking.port {
            return false;
        }
        let Ok(own) = self.networking.address.parse::<IpAddr>() else {
            return false;
        };
        address.is_unspecified()
            || own.is_unspecified()
            || address.to_canonical() == own.to_canonical()
    }

    /// Validate as Kuma 2.7 does (`zone_egress_validator.go`): the admin port must not be the
    /// egress port on the loopback interface (`networking.admin.port`), a non-empty address
    /// must be an IP or a DNS name and not a wildcard (`networking.address.address`: Kuma's
    /// `validateAddress` adds `.address` to the path it is given), and the port must be in
    /// 1-65535 (`networking.port`).
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let net = PathBuilder::rooted_at("networking");
        let n = &self.networking;
        if let Some(admin) = n.admin {
            if self.uses_inbound_interface(IpAddr::from([127, 0, 0, 1]), admin.port) {
                err.violation(&net.field("admin").field("port"), "must differ from port");
            }
        }
        if !n.address.is_empty() {
            validate_address(&mut err, &net.field("address").field("address"), &n.address);
        }
        if n.port == 0 || n.port > 65535 {
            err.violation(&net.field("port"), "port must be in the range [1, 65535]");
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ZoneEgressSpec {
        let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
        serde_json::from_value(v).unwrap()
    }

    /// `(field, message)` of each violation of `ze`.
    fn problems(ze: &ZoneEgressSpec) -> Vec<(String, String)> {
        ze.validate()
            .violations
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    }

    /// Kuma 2.7.29 `zone_egress_validator_test.go`, "should pass validation".
    #[test]
    fn kuma_valid_egresses() {
        for yaml in [
            "networking:\n  address: 192.168.0.1\n  port: 10001\n",
            "networking:\n  admin:\n    port: 10001\n  address: 192.168.0.1\n  port: 10001\n",
            "zone: zone-1\nnetworking: {address: egress_1.example, port: 10002, admin: {port: 9901}}\n",
        ] {
            let ze = spec(yaml);
            assert!(!ze.validate().has_violations(), "{yaml}: {}", ze.validate());
        }
    }

    /// Kuma 2.7.29 `zone_egress_validator_test.go`, "no port defined" and "admin port equal to
    /// port", with Kuma's fields and messages.
    #[test]
    fn kuma_violations() {
        assert_eq!(
            problems(&spec("networking:\n  address: 192.168.0.1\n")),
            [(
                "networking.port".to_owned(),
                "port must be in the range [1, 65535]".to_owned()
            )]
        );
        assert_eq!(
            problems(&spec(
                "networking:\n  admin:\n    port: 10001\n  address: 127.0.0.1\n  port: 10001\n"
            )),
            [(
                "networking.admin.port".to_owned(),
                "must differ from port".to_owned()
            )]
        );
        let all = problems(&spec(
            "networking: {address: 0.0.0.0, port: 70000, admin: {port: 70000}}\n",
        ));
        let fields: Vec<&str> = all.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "networking.admin.port",
                "networking.address.address",
                "networking.port"
            ],
            "{all:?}"
        );
        assert_eq!(all[1].1, "must not be 0.0.0.0 or ::");
        assert_eq!(
            problems(&spec("networking: {address: '!@#', port: 1}\n")),
            [(
                "networking.address.address".to_owned(),
                "address has to be valid IP address or domain name".to_owned()
            )]
        );
    }

    #[test]
    fn helpers_and_shape() {
        let ze = spec(
            "zone: zone-2\nnetworking: {address: 10.0.0.1, port: 10002, admin: {port: 9902}}\n",
        );
        assert!(ze.is_remote("zone-1") && !ze.is_remote("zone-2"));
        assert!(!spec("networking: {port: 1}").is_remote("zone-1"));
        assert_eq!(ze.admin_port(), Some(9902));
        assert_eq!(spec("networking: {port: 1, admin: {}}").admin_port(), None);
        assert!(ze.uses_inbound_interface("0.0.0.0".parse().unwrap(), 10002));
        assert!(!ze.uses_inbound_interface("10.0.0.2".parse().unwrap(), 10002));
        assert_eq!(
            serde_json::to_value(&ze).unwrap(),
            serde_json::json!({"zone": "zone-2", "networking": {"address": "10.0.0.1", "port": 10002, "admin": {"port": 9902}}})
        );
        let bad = crate::codec::decode_one(
            b"networking: {port: 1, advertisedPort: 2}",
            crate::codec::Limits::default(),
        )
        .unwrap();
        assert!(serde_json::from_value::<ZoneEgressSpec>(bad).is_err());
    }
}
