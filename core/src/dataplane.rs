//! The `Dataplane` resource (a DPP): inbounds with address/port/servicePort/tags, outbounds with
//! port/tags, an optional gateway; its validation and the helpers matching needs (inbound keys,
//! proxy type, protocol).
//!
//! Shape and rules follow Kuma 2.7's `api/mesh/v1alpha1/dataplane.proto` and
//! `pkg/core/resources/apis/mesh/dataplane_validator.go` (universal mode).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::target_ref::{
    is_valid_tag_name, is_valid_tag_value, ProxyType, PROTOCOL_TAG, SERVICE_TAG,
};
use crate::validate::{PathBuilder, ValidationError};

/// A DPP's identity: its mesh and Dataplane name. Envoy names it in its node id as
/// `<mesh>.<name>` (Kuma's convention, [`DpKey::from_node_id`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DpKey {
    /// The mesh.
    pub mesh: String,
    /// The Dataplane's name in the mesh.
    pub name: String,
}

impl DpKey {
    /// The DPP `name` of `mesh`.
    pub fn new(mesh: impl Into<String>, name: impl Into<String>) -> Self {
        DpKey {
            mesh: mesh.into(),
            name: name.into(),
        }
    }

    /// The DPP an Envoy node id `<mesh>.<name>` names (the name may contain dots); `None`
    /// when either part is empty or there is no dot.
    pub fn from_node_id(id: &str) -> Option<Self> {
        let (mesh, name) = id.split_once('.')?;
        (!mesh.is_empty() && !name.is_empty()).then(|| DpKey::new(mesh, name))
    }
}

/// `<mesh>.<name>`, the node id form.
impl std::fmt::Display for DpKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.mesh, self.name)
    }
}

/// A Dataplane's spec: `networking` (plus opaque `metrics`/`probes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneSpec {
    /// Addresses, inbounds, outbounds, gateway.
    pub networking: Networking,
    /// Metrics backend override (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
    /// Probes (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Value>,
}

/// `networking` of a Dataplane.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Networking {
    /// The DPP's IP (inbound listeners bind here unless an inbound has its own `address`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Address other DPPs use to reach this one, when different.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub advertised_address: String,
    /// Inbound interfaces, one listener each.
    #[serde(
        default,
        deserialize_with = "crate::old::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub inbound: Vec<Inbound>,
    /// Outbound interfaces (services this DPP consumes).
    #[serde(
        default,
        deserialize_with = "crate::old::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub outbound: Vec<Outbound>,
    /// Present for gateway DPPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Gateway>,
    /// Transparent proxy settings (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_proxying: Option<Value>,
    /// Envoy admin settings (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<Value>,
}

/// Health of an inbound (`health.ready`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Health {
    /// `false` removes the inbound's endpoint from other DPPs' EDS.
    #[serde(default)]
    pub ready: bool,
}

/// Inbound state (`Ready`, `NotReady`, `Ignored`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InboundState {
    /// Serving.
    Ready,
    /// Not ready: no endpoint for it.
    NotReady,
    /// Ignored by the CP (still selectable by policies, as in Kuma).
    Ignored,
}

/// One inbound interface of a DPP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inbound {
    /// Port the inbound listener binds (on `address` or `networking.address`).
    pub port: u32,
    /// Port of the application (defaults to `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_port: Option<u32>,
    /// Address of the application (defaults to the inbound listener's address: `address`, else
    /// `networking.address`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_address: String,
    /// Listener address overriding `networking.address`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Tags; `kuma.io/service` is required, `kuma.io/protocol` picks HTTP vs TCP.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Health as reported by the platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    /// Service probe (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_probe: Option<Value>,
    /// Inbound state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InboundState>,
}

/// One outbound interface of a DPP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outbound {
    /// Address the outbound listener binds (default 127.0.0.1).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Port the outbound listener binds.
    pub port: u32,
    /// Tags of the destination; `kuma.io/service` names it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Reference to a real resource (opaque, not used by Umbra yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ref: Option<Value>,
}

/// Gateway settings of a gateway DPP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    /// Gateway tags (`kuma.io/service` required).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `DELEGATED` (default) or `BUILTIN`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub gateway_type: Option<GatewayType>,
}

/// Kind of gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum GatewayType {
    /// An external gateway (Kong, Contour...) with a Kuma sidecar.
    Delegated,
    /// Kuma's builtin gateway.
    Builtin,
}

/// Key of an inbound: `<address>:<port>` (the inbound's own address, else `networking.address`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InboundKey {
    /// Listener IP.
    pub address: String,
    /// Listener port.
    pub port: u32,
}

impl std::fmt::Display for InboundKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.address, self.port)
    }
}

impl Inbound {
    /// The `kuma.io/service` tag (empty if missing).
    pub fn service(&self) -> &str {
        self.tags.get(SERVICE_TAG).map_or("", String::as_str)
    }

    /// The `kuma.io/protocol` tag, `tcp` when missing (Kuma's default).
    pub fn protocol(&self) -> &str {
        self.tags.get(PROTOCOL_TAG).map_or("tcp", String::as_str)
    }

    /// Application port: `servicePort`, else `port`.
    pub fn effective_service_port(&self) -> u32 {
        self.service_port.unwrap_or(self.port)
    }
}

impl Outbound {
    /// The destination `kuma.io/service`.
    pub fn service(&self) -> &str {
        self.tags.get(SERVICE_TAG).map_or("", String::as_str)
    }

    /// Bind address, 127.0.0.1 by default.
    pub fn effective_address(&self) -> &str {
        if self.address.is_empty() {
            "127.0.0.1"
        } else {
            &self.address
        }
    }
}

impl DataplaneSpec {
    /// Kuma's `GetIdentifyingService`: the first `kuma.io/service` of [`Self::tag_set`]
    /// (values sorted), else `unknown`. Access logs and tracing name the DPP by it.
    pub fn identifying_service(&self) -> String {
        self.tag_set()
            .get(crate::target_ref::SERVICE_TAG)
            .and_then(|s| s.iter().next().cloned())
            .unwrap_or_else(|| "unknown".to_owned())
    }

    /// Tag → values over every inbound and the gateway (Kuma's `TagSet`): what `x-kuma-tags`
    /// carries and what a tag-bound dataplane token is checked against.
    pub fn tag_set(
        &self,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        let mut out: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
            std::collections::BTreeMap::new();
        let gateway = self.networking.gateway.iter().map(|g| &g.tags);
        for tags in self
            .networking
            .inbound
            .iter()
            .map(|i| &i.tags)
            .chain(gateway)
        {
            for (k, v) in tags {
                out.entry(k.clone()).or_default().insert(v.clone());
            }
        }
        out
    }

    /// `Gateway` when `networking.gateway` is set, else `Sidecar` (Kuma's proxy type rule).
    pub fn proxy_type(&self) -> ProxyType {
        if self.networking.gateway.is_some() {
            ProxyType::Gateway
        } else {
            ProxyType::Sidecar
        }
    }

    /// Key of inbound `i` (see [`InboundKey`]).
    pub fn inbound_key(&self, inbound: &Inbound) -> InboundKey {
        let address = if inbound.address.is_empty() {
            self.networking.address.clone()
        } else {
            inbound.address.clone()
        };
        InboundKey {
            address,
            port: inbound.port,
        }
    }

    /// Validate in universal mode. Paths are rooted at `networking`.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let net = PathBuilder::rooted_at("networking");
        let n = &self.networking;
        if n.address.is_empty() {
            err.violation(&net.field("address"), "address can't be empty");
        } else if !is_ip_or_hostname(&n.address) {
            err.violation(
                &net.field("address"),
                "address has to be valid IP address or domain name",
            );
        }
        if n.gateway.is_none() && n.inbound.is_empty() {
            err.violation(
                &net,
                "has to contain at least one inbound interface or gateway",
            );
        }
        if let Some(gw) = &n.gateway {
            let gp = net.field("gateway");
            err.add(validate_service_tags(&gp.field("tags"), &gw.tags));
        }
        for (i, inbound) in n.inbound.iter().enumerate() {
            let ip = net.field("inbound").index(i);
            if inbound.port == 0 || inbound.port > 65535 {
                err.violation(&ip.field("port"), "port must be in the range [1, 65535]");
            }
            if let Some(sp) = inbound.service_port {
                if sp == 0 || sp > 65535 {
                    err.violation(
                        &ip.field("servicePort"),
                        "port must be in the range [1, 65535]",
                    );
                }
            }
            if !inbound.address.is_empty() && !is_ip_or_hostname(&inbound.address) {
                err.violation(&ip.field("address"), "address has to be valid IP address");
            }
            if !inbound.service_address.is_empty() && !is_ip_or_hostname(&inbound.service_address) {
                err.violation(
                    &ip.field("serviceAddress"),
                    "serviceAddress has to be valid IP address",
                );
            }
            err.add(validate_service_tags(&ip.field("tags"), &inbound.tags));
            if let Some(proto) = inbound.tags.get(PROTOCOL_TAG) {
                if !matches!(proto.as_str(), "http" | "http2" | "grpc" | "tcp" | "kafka") {
                    err.violation(
                        &ip.field("tags").key(PROTOCOL_TAG),
                        "tag \"kuma.io/protocol\" has an invalid value. Allowed values: grpc, http, http2, kafka, tcp",
                    );
                }
            }
            if n.inbound[..i]
                .iter()
                .any(|o| self.inbound_key(o) == self.inbound_key(inbound))
            {
                err.violation(&ip.field("port"), "port is already used by another inbound");
            }
        }
        for (i, outbound) in n.outbound.iter().enumerate() {
            let op = net.field("outbound").index(i);
            if outbound.port == 0 || outbound.port > 65535 {
                err.violation(&op.field("port"), "port must be in the range [1, 65535]");
            }
            if !outbound.address.is_empty() && !is_ip_or_hostname(&outbound.address) {
                err.violation(&op.field("address"), "address has to be valid IP address");
            }
            if outbound.backend_ref.is_none() && !outbound.tags.contains_key(SERVICE_TAG) {
                err.violation(
                    &op.field("tags"),
                    "mandatory tag \"kuma.io/service\" is missing",
                );
            }
            for (k, v) in &outbound.tags {
                if !is_valid_tag_name(k) {
                    err.violation(&op.field("tags").key(k), "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores");
                }
                if v.is_empty() || !is_valid_tag_value(v) {
                    err.violation(&op.field("tags").key(k), "tag value must consist of alphanumeric characters, dots, dashes and underscores");
                }
            }
        }
        err
    }
}

pub(crate) fn validate_service_tags(
    path: &PathBuilder,
    tags: &BTreeMap<String, String>,
) -> ValidationError {
    let mut err = ValidationError::new();
    if tags.is_empty() {
        err.violation(path, "must have at least one tag");
    }
    for (k, v) in tags {
        if k.is_empty() {
            err.violation(path, "tag name must be non-empty");
        }
        if !is_valid_tag_name(k) {
            err.violation(&path.key(k), "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores");
        }
        if v.is_empty() {
            err.violation(&path.key(k), "tag value must be non-empty");
        }
        if !is_valid_tag_value(v) {
            err.violation(
                &path.key(k),
                "tag value must consist of alphanumeric characters, dots, dashes and underscores",
            );
        }
    }
    if !tags.contains_key(SERVICE_TAG) {
        err.violation(path, "mandatory tag \"kuma.io/service\" is missing");
    }
    err
}

pub(crate) fn is_ip_or_hostname(s: &str) -> bool {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(yaml: &str) -> DataplaneSpec {
        let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn valid_dataplane_and_keys() {
        let d = dp("networking:\n  address: 10.42.0.29\n  inbound:\n  - port: 8080\n    servicePort: 5000\n    tags: {kuma.io/service: frontend, kuma.io/protocol: http}\n  - port: 9090\n    address: 10.0.0.1\n    tags: {kuma.io/service: admin}\n  outbound:\n  - port: 3001\n    address: 10.43.13.71\n    tags: {kuma.io/service: backend}\n");
        assert!(!d.validate().has_violations(), "{}", d.validate());
        assert_eq!(
            d.inbound_key(&d.networking.inbound[0]).to_string(),
            "10.42.0.29:8080"
        );
        assert_eq!(
            d.inbound_key(&d.networking.inbound[1]).to_string(),
            "10.0.0.1:9090"
        );
        assert_eq!(d.networking.inbound[0].protocol(), "http");
        assert_eq!(d.networking.inbound[1].protocol(), "tcp");
        assert_eq!(d.networking.inbound[0].effective_service_port(), 5000);
        assert_eq!(d.proxy_type(), ProxyType::Sidecar);
    }

    #[test]
    fn null_lists_are_empty_like_in_go() {
        let d = dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n  outbound:\n");
        assert!(d.networking.outbound.is_empty());
    }

    #[test]
    fn invalid_dataplane_reports_every_problem() {
        let d = dp("networking:\n  address: ''\n  inbound:\n  - port: 0\n    tags: {kuma.io/protocol: smtp}\n  outbound:\n  - port: 70000\n");
        let fields: Vec<_> = d
            .validate()
            .violations
            .into_iter()
            .map(|v| v.field)
            .collect();
        assert_eq!(
            fields,
            [
                "networking.address",
                "networking.inbound[0].port",
                "networking.inbound[0].tags",
                "networking.inbound[0].tags[\"kuma.io/protocol\"]",
                "networking.outbound[0].port",
                "networking.outbound[0].tags"
            ]
        );
    }
}
