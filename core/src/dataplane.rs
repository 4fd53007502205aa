//! The `Dataplane` resource (a DPP): inbounds with address/port/servicePort/tags, outbounds with
//! port/tags, an optional gateway; its validation and the helpers matching needs (inbound keys,
//! proxy type, protocol).
//!
//! Shape and rules follow Kuma 2.7's `api/mesh/v1alpha1/dataplane.proto` and
//! `pkg/core/resources/apis/mesh/dataplane_validator.go` (universal mode).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::go_net;
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

    /// The key of the zone's ZoneEgress `name`'s proxy: its name under the mesh
    /// [`ZONE_EGRESS_KEY_MESH`], so that it never meets a Dataplane or a ZoneIngress (the
    /// empty mesh) of the same name in the ADS streams, insights and snapshots keyed by
    /// `DpKey`.
    pub fn zone_egress(name: impl Into<String>) -> Self {
        DpKey::new(ZONE_EGRESS_KEY_MESH, name)
    }

    /// `true` for a ZoneIngress's key (the empty mesh).
    pub fn is_zone_ingress(&self) -> bool {
        self.mesh.is_empty()
    }

    /// `true` for a ZoneEgress's key ([`DpKey::zone_egress`]).
    pub fn is_zone_egress(&self) -> bool {
        self.mesh == ZONE_EGRESS_KEY_MESH
    }

    /// The DPP an Envoy node id `<mesh>.<name>` names (the name may contain dots); `None`
    /// when either part is empty or there is no dot.
    pub fn from_node_id(id: &str) -> Option<Self> {
        let (mesh, name) = id.split_once('.')?;
        (!mesh.is_empty() && !name.is_empty()).then(|| DpKey::new(mesh, name))
    }
}

/// The mesh part of a ZoneEgress's [`DpKey`] (ZoneEgresses belong to no mesh): a string no
/// mesh is called (`:` is in no Kuma resource name, and a KDS name splits at `/`, which it
/// lacks), so a key carries which kind of proxy it names. On the Global, the insight a zone
/// reports for its ZoneEgress `ze` arrives under the KDS name `<this>/ze`.
pub const ZONE_EGRESS_KEY_MESH: &str = ":zoneegress";

/// The mesh part of the [`DpKey`] the proxy of stored resource `ty` `mesh`/`name` is keyed
/// by (its ADS stream, its insight): [`ZONE_EGRESS_KEY_MESH`] for a ZoneEgress, else `mesh`
/// (empty for a ZoneIngress).
pub fn proxy_key_mesh(ty: crate::type_info::ResourceType, mesh: &str) -> &str {
    if ty == crate::type_info::ResourceType::ZoneEgress {
        ZONE_EGRESS_KEY_MESH
    } else {
        mesh
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
    /// Not a Dataplane: a stand-in built to match policies against something else (an
    /// ExternalService on a ZoneEgress, the converter's probes). Never read from nor written
    /// to a document; a rollout sample ([`crate::sample`]) never selects it, as it stages DPPs
    /// only.
    #[serde(skip)]
    pub synthetic: bool,
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
    /// Transparent proxy settings: present when iptables redirects the workload's traffic to
    /// Envoy (the passthrough listeners, `bindToPort: false`, the `kuma:dns` listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_proxying: Option<TransparentProxying>,
    /// Envoy admin settings (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<Value>,
}

/// `networking.transparentProxying` (Kuma 2.7 `Dataplane.Networking.TransparentProxying`,
/// `api/mesh/v1alpha1/dataplane.proto:224-263`), with the proto JSON names:
/// `{redirectPortInbound, redirectPortOutbound, directAccessServices, redirectPortInboundV6,
/// reachableServices, ipFamilyMode}`. Every field keeps whether it was written, so a stored
/// Dataplane renders back in the shape it was given (`{}` stays `{}`, an explicit `0` stays).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransparentProxying {
    /// Port all inbound traffic is redirected to (IPv4; IPv6 too unless
    /// `redirectPortInboundV6` says otherwise). 0 / absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port_inbound: Option<u32>,
    /// Port all outbound traffic is redirected to. 0 / absent: no passthrough listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port_outbound: Option<u32>,
    /// Services reached directly by IP:port (`*`: every service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_access_services: Option<Vec<String>>,
    /// Port IPv6 inbound traffic is redirected to (see
    /// [`TransparentProxying::ipv6_inbound_redirect_port`]).
    #[serde(
        default,
        rename = "redirectPortInboundV6",
        skip_serializing_if = "Option::is_none"
    )]
    pub redirect_port_inbound_v6: Option<u32>,
    /// The `kuma.io/service`s reachable through the VIP outbounds (empty: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachable_services: Option<Vec<String>>,
    /// IP families redirected (`UnSpecified` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family_mode: Option<IpFamilyMode>,
}

/// Kuma's `TransparentProxying.IpFamilyMode`, written by name in JSON and YAML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpFamilyMode {
    /// 0: Dataplanes written before the field existed; IPv6 follows `redirectPortInboundV6`.
    #[default]
    UnSpecified,
    /// 1: IPv4 and IPv6.
    DualStack,
    /// 2: IPv4 only.
    IPv4,
    /// 3: IPv6 only.
    IPv6,
}

/// Kuma's default IPv6 inbound redirect port (`defaultInboundPortV6`): a
/// `redirectPortInboundV6` equal to it is not a customisation.
const DEFAULT_INBOUND_PORT_V6: u32 = 15010;

impl TransparentProxying {
    /// `redirectPortInbound`, 0 when absent.
    pub fn inbound_port(&self) -> u32 {
        self.redirect_port_inbound.unwrap_or(0)
    }

    /// `redirectPortOutbound`, 0 when absent.
    pub fn outbound_port(&self) -> u32 {
        self.redirect_port_outbound.unwrap_or(0)
    }

    /// `ipFamilyMode`, `UnSpecified` when absent.
    pub fn family_mode(&self) -> IpFamilyMode {
        self.ip_family_mode.unwrap_or_default()
    }

    /// `directAccessServices` (empty when absent).
    pub fn direct_access(&self) -> &[String] {
        self.direct_access_services.as_deref().unwrap_or_default()
    }

    /// `reachableServices` (empty when absent).
    pub fn reachable(&self) -> &[String] {
        self.reachable_services.as_deref().unwrap_or_default()
    }

    /// Both redirect ports set: Kuma's `TransparentProxying` listener configurer then gives
    /// every inbound, outbound, probe and direct-access listener `bindToPort: false`
    /// (`pkg/xds/envoy/listeners/listener_configurers.go:42-49`).
    pub fn redirects_both(&self) -> bool {
        self.inbound_port() != 0 && self.outbound_port() != 0
    }

    /// Kuma's `GetIPv6InboundRedirectPort` (`transparent_proxy_generator.go:146-168`): the port
    /// of the IPv6 inbound passthrough listener, 0 for none. `IPv4` → 0; `UnSpecified` → 0
    /// when `redirectPortInboundV6` is 0; otherwise `redirectPortInboundV6` when it is set,
    /// not 15010 and not `redirectPortInbound`, else `redirectPortInbound`.
    pub fn ipv6_inbound_redirect_port(&self) -> u32 {
        let v6 = self.redirect_port_inbound_v6.unwrap_or(0);
        match self.family_mode() {
            IpFamilyMode::IPv4 => 0,
            IpFamilyMode::UnSpecified if v6 == 0 => 0,
            _ if v6 > 0 && v6 != DEFAULT_INBOUND_PORT_V6 && v6 != self.inbound_port() => v6,
            _ => self.inbound_port(),
        }
    }

    /// Kuma's proto rules (`validate.rules`, `dataplane.proto:240-253`): every redirect port
    /// ≤ 65535. Kuma 2.7 declares them but does not generate the validators for its API
    /// (no `*.pb.validate.go`), so it stores a larger port and Envoy then rejects the
    /// listener; Umbra refuses it up front.
    fn validate(&self, path: &PathBuilder, err: &mut ValidationError) {
        for (field, port) in [
            ("redirectPortInbound", self.redirect_port_inbound),
            ("redirectPortOutbound", self.redirect_port_outbound),
            ("redirectPortInboundV6", self.redirect_port_inbound_v6),
        ] {
            if port.is_some_and(|p| p > 65535) {
                err.violation(
                    &path.field(field),
                    "value must be less than or equal to 65535",
                );
            }
        }
    }
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

    /// `true` when the DPP's `networking.address` is an IPv6 address (Kuma's `IsIPv6`).
    pub fn is_ipv6(&self) -> bool {
        crate::go_net::parse_ip(&self.networking.address).is_some_and(|ip| ip.is_ipv6())
    }

    /// Kuma's `IsUsingTransparentProxy` (`pkg/core/resources/apis/mesh/dataplane_helpers.go:186-212`):
    /// `transparentProxying` with both redirect ports non-zero; for an IPv6 DPP
    /// ([`Self::is_ipv6`]) with `ipFamilyMode` `UnSpecified`, `redirectPortInboundV6` non-zero
    /// instead, and with another mode both ports and a mode other than `IPv4`.
    pub fn is_using_transparent_proxy(&self) -> bool {
        let Some(tp) = &self.networking.transparent_proxying else {
            return false;
        };
        if !self.is_ipv6() {
            return tp.redirects_both();
        }
        match tp.family_mode() {
            IpFamilyMode::UnSpecified => tp.redirect_port_inbound_v6.unwrap_or(0) != 0,
            IpFamilyMode::IPv4 => false,
            _ => tp.redirects_both(),
        }
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

    /// Stamp the zone that registers this Dataplane: `kuma.io/zone: <zone>` on every inbound's
    /// tags and on the gateway's, replacing a value the client sent, as Kuma 2.7's zone CP does
    /// on every create and update (`pkg/core/managers/apis/dataplane/dataplane_manager.go`,
    /// `setInboundsClusterTag`, `setGatewayClusterTag`). Policies select by it (a `MeshSubset`
    /// with `kuma.io/zone`, an old policy's selector), and the DPP's certificate carries it.
    /// Nothing happens for an empty `zone` (Kuma's Global).
    pub fn stamp_zone(&mut self, zone: &str) {
        if zone.is_empty() {
            return;
        }
        let gateway = self.networking.gateway.iter_mut().map(|g| &mut g.tags);
        for tags in self
            .networking
            .inbound
            .iter_mut()
            .map(|i| &mut i.tags)
            .chain(gateway)
        {
            tags.insert(crate::target_ref::ZONE_TAG.to_owned(), zone.to_owned());
        }
    }

    /// The fields of this Dataplane that Umbra accepts and stores but does not act on, as
    /// `(field path, reason)` in field order: the inspect answers name them under
    /// `notGenerated` ([`crate::view::NotGenerated::dataplane_fields`]).
    /// - `networking.outbound[i].backendRef`: that outbound's listener and cluster;
    /// - `networking.inbound[i].serviceProbe`: the application probe;
    /// - `metrics`: the DPP's Prometheus metrics listener;
    /// - `probes`: the virtual probes listener.
    pub fn not_generated_fields(&self) -> Vec<(String, &'static str)> {
        let n = &self.networking;
        let mut out = Vec::new();
        for (i, inbound) in n.inbound.iter().enumerate() {
            if inbound.service_probe.is_some() {
                out.push((
                    format!("networking.inbound[{i}].serviceProbe"),
                    "not acted on by Umbra: nothing probes the application with it; the inbound's health comes from health.ready only",
                ));
            }
        }
        for (i, outbound) in n.outbound.iter().enumerate() {
            if outbound.backend_ref.is_some() {
                out.push((
                    format!("networking.outbound[{i}].backendRef"),
                    "not generated by Umbra: an outbound given by backendRef gets no listener or cluster; Umbra generates the outbounds given by tags",
                ));
            }
        }
        if self.metrics.is_some() {
            out.push((
                "metrics".to_owned(),
                "not generated by Umbra: no Prometheus metrics listener is in this DPP's config (Envoy's own stats stay on its admin)",
            ));
        }
        if self.probes.is_some() {
            out.push((
                "probes".to_owned(),
                "not generated by Umbra: the virtual probes listener is not in this DPP's config",
            ));
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
        validate_address(&mut err, &net.field("address"), &n.address);
        if let Some(tp) = &n.transparent_proxying {
            tp.validate(&net.field("transparentProxying"), &mut err);
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
            // Kuma's `validateInbound`: both addresses are IPs (Go's `net.ParseIP`), and the
            // application's address and port differ from the inbound's.
            let service_port = inbound.service_port.unwrap_or(0);
            let same_port = service_port == 0 || service_port == inbound.port;
            if !inbound.service_address.is_empty() {
                if go_net::parse_ip(&inbound.service_address).is_none() {
                    err.violation(
                        &ip.field("serviceAddress"),
                        "serviceAddress has to be valid IP address",
                    );
                }
                if inbound.service_address == n.address && same_port {
                    err.violation(&ip.field("serviceAddress"), SERVICE_ADDRESS_CLASH);
                }
            }
            if !inbound.address.is_empty() {
                if go_net::parse_ip(&inbound.address).is_none() {
                    err.violation(&ip.field("address"), "address has to be valid IP address");
                }
                if inbound.address == inbound.service_address && same_port {
                    err.violation(&ip.field("serviceAddress"), SERVICE_ADDRESS_CLASH);
                }
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
            if !outbound.address.is_empty() && go_net::parse_ip(&outbound.address).is_none() {
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

/// Kuma's message when an inbound's application address and port are the inbound's own.
const SERVICE_ADDRESS_CLASH: &str =
    "serviceAddress and servicePort has to differ from address and port";

/// Kuma's `validateAddress` (Dataplane `networking.address`; ZoneIngress addresses, where Kuma
/// passes `networking.address` as the path and so reports `networking.address.address`):
/// not empty, not `0.0.0.0` or `::`, and an IP or a DNS name as govalidator reads them
/// ([`go_net::is_host`]: `web_1`, a compose container name, is one).
pub(crate) fn validate_address(err: &mut ValidationError, path: &PathBuilder, address: &str) {
    if address.is_empty() {
        err.violation(path, "address can't be empty");
        return;
    }
    if address == "0.0.0.0" || address == "::" {
        err.violation(path, "must not be 0.0.0.0 or ::");
    }
    if !go_net::is_host(address) {
        err.violation(path, "address has to be valid IP address or domain name");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(yaml: &str) -> DataplaneSpec {
        let v = crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_zone_is_stamped_on_every_inbound_and_the_gateway_replacing_a_sent_value() {
        let mut d = dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a, kuma.io/zone: elsewhere}\n  - port: 81\n    tags: {kuma.io/service: b}\n  outbound:\n  - port: 3001\n    tags: {kuma.io/service: c}\n");
        d.stamp_zone("zone-1");
        for i in &d.networking.inbound {
            assert_eq!(i.tags["kuma.io/zone"], "zone-1", "{i:?}");
        }
        assert!(
            !d.networking.outbound[0].tags.contains_key("kuma.io/zone"),
            "outbounds name a destination, not this DPP"
        );
        let mut g =
            dp("networking:\n  address: 10.0.0.1\n  gateway:\n    tags: {kuma.io/service: edge}\n");
        g.stamp_zone("zone-2");
        assert_eq!(g.networking.gateway.unwrap().tags["kuma.io/zone"], "zone-2");
        let before = dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        let mut same = before.clone();
        same.stamp_zone("");
        assert_eq!(same, before, "no zone (a Global): nothing stamped");
    }

    #[test]
    fn fields_not_acted_on_are_named_with_their_path() {
        let plain = dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        assert!(plain.not_generated_fields().is_empty());
        let d = dp("networking:\n  address: 10.0.0.1\n  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001, directAccessServices: [b]}\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n  - port: 81\n    tags: {kuma.io/service: b}\n    serviceProbe: {interval: 1s}\n  outbound:\n  - port: 3001\n    tags: {kuma.io/service: c}\n  - port: 3002\n    backendRef: {kind: MeshService, name: c}\nmetrics: {type: prometheus}\nprobes: {port: 9000}\n");
        let fields: Vec<String> = d
            .not_generated_fields()
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "networking.inbound[1].serviceProbe",
                "networking.outbound[1].backendRef",
                "metrics",
                "probes"
            ]
        );
        let tp = dp("networking:\n  address: 10.0.0.1\n  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001, directAccessServices: ['*']}\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        assert!(
            tp.not_generated_fields().is_empty(),
            "transparent proxying and direct access are generated"
        );
        let g = dp("networking:\n  address: 10.0.0.1\n  gateway:\n    type: BUILTIN\n    tags: {kuma.io/service: edge}\n");
        assert!(
            g.not_generated_fields().is_empty(),
            "a builtin gateway is generated from its MeshGateway"
        );
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

    /// Kuma 2.7.29 `dataplane_validator_test.go`: the address entries ("dataplane domain name
    /// in the address", "can't use 0.0.0.0/::", "invalid format", "inbound: invalid address",
    /// "outbound: invalid address", the "inbound service address" entries), plus govalidator's
    /// names with underscores (issue 41).
    #[test]
    fn addresses_follow_kuma() {
        let fields = |yaml: &str| -> Vec<(String, String)> {
            dp(yaml)
                .validate()
                .violations
                .into_iter()
                .map(|v| (v.field, v.message))
                .collect()
        };
        let with_address = |a: &str| {
            fields(&format!(
                "networking:\n  address: '{a}'\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: a}}\n"
            ))
        };
        let at = |f: &str, m: &str| vec![(f.to_owned(), m.to_owned())];
        for ok in [
            "192.168.0.1",
            "example.com",
            "kuma-3_web_1x",
            "web_1.",
            "::1",
            "0:0:0:0:0:FFFF:C0A8:0001",
        ] {
            assert_eq!(with_address(ok), [], "{ok}");
        }
        for zero in ["0.0.0.0", "::"] {
            assert_eq!(
                with_address(zero),
                at("networking.address", "must not be 0.0.0.0 or ::")
            );
        }
        for bad in ["..>_<..", "-web", "a..b", "web:80"] {
            assert_eq!(
                with_address(bad),
                at(
                    "networking.address",
                    "address has to be valid IP address or domain name"
                ),
                "{bad}"
            );
        }
        let inbound = |extra: &str| {
            fields(&format!(
                "networking:\n  address: 192.168.0.1\n  inbound:\n  - port: 10001\n    tags: {{kuma.io/service: backend}}\n{extra}"
            ))
        };
        assert_eq!(
            inbound(
                "    serviceAddress: 192.168.0.2\n    servicePort: 5050\n    address: 1.1.1.1\n"
            ),
            []
        );
        assert_eq!(inbound("    address: 192.168.0.2\n    serviceAddress: 192.168.0.2\n    servicePort: 10002\n"), []);
        assert_eq!(
            inbound("    address: invalid-address\n"),
            at(
                "networking.inbound[0].address",
                "address has to be valid IP address"
            )
        );
        assert_eq!(
            inbound("    serviceAddress: INVALID\n"),
            at(
                "networking.inbound[0].serviceAddress",
                "serviceAddress has to be valid IP address"
            )
        );
        let clash = "serviceAddress and servicePort has to differ from address and port";
        assert_eq!(
            inbound("    serviceAddress: 192.168.0.1\n"),
            at("networking.inbound[0].serviceAddress", clash)
        );
        assert_eq!(
            inbound("    address: 192.168.0.2\n    serviceAddress: 192.168.0.2\n"),
            at("networking.inbound[0].serviceAddress", clash)
        );
        assert_eq!(
            fields("networking:\n  address: 192.168.0.1\n  inbound:\n  - port: 1234\n    tags: {kuma.io/service: backend}\n  outbound:\n  - port: 3333\n    address: invalid\n    tags: {kuma.io/service: elastic}\n"),
            at("networking.outbound[0].address", "address has to be valid IP address")
        );
    }

    /// `transparentProxying` is typed with Kuma's proto JSON names and renders back in the
    /// shape it was given; unknown fields are refused like everywhere in the Dataplane.
    #[test]
    fn transparent_proxying_round_trips_and_is_typed() {
        for tp in [
            "{}",
            r#"{"redirectPortInbound":0}"#,
            r#"{"redirectPortInbound":15006,"redirectPortOutbound":15001,"directAccessServices":["*"],"redirectPortInboundV6":15010,"reachableServices":["a","b"],"ipFamilyMode":"DualStack"}"#,
            r#"{"ipFamilyMode":"IPv4","reachableServices":[]}"#,
        ] {
            let json = format!(
                r#"{{"networking":{{"address":"10.0.0.1","inbound":[{{"port":80,"tags":{{"kuma.io/service":"a"}}}}],"transparentProxying":{tp}}}}}"#
            );
            let d: DataplaneSpec = serde_json::from_str(&json).unwrap();
            let back = serde_json::to_value(&d).unwrap();
            assert_eq!(
                back["networking"]["transparentProxying"],
                serde_json::from_str::<Value>(tp).unwrap()
            );
        }
        let d = dp("networking:\n  address: 10.0.0.1\n  transparentProxying:\n    redirectPortInbound: 15006\n    redirectPortOutbound: 15001\n    ipFamilyMode: IPv6\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        let tp = d.networking.transparent_proxying.as_ref().unwrap();
        assert_eq!(tp.family_mode(), IpFamilyMode::IPv6);
        assert_eq!((tp.inbound_port(), tp.outbound_port()), (15006, 15001));
        for bad in [
            r#"{"redirectPortInbound":15006,"unknown":1}"#,
            r#"{"ipFamilyMode":"Both"}"#,
            r#"{"redirectPortInbound":-1}"#,
        ] {
            let json = format!(r#"{{"networking":{{"transparentProxying":{bad}}}}}"#);
            assert!(
                serde_json::from_str::<DataplaneSpec>(&json).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn redirect_ports_are_at_most_65535() {
        let d = dp("networking:\n  address: 10.0.0.1\n  transparentProxying: {redirectPortInbound: 65536, redirectPortOutbound: 65535, redirectPortInboundV6: 70000}\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        let v: Vec<(String, String)> = d
            .validate()
            .violations
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect();
        let m = "value must be less than or equal to 65535".to_owned();
        assert_eq!(
            v,
            [
                (
                    "networking.transparentProxying.redirectPortInbound".to_owned(),
                    m.clone()
                ),
                (
                    "networking.transparentProxying.redirectPortInboundV6".to_owned(),
                    m
                ),
            ]
        );
    }

    /// Kuma's `GetIPv6InboundRedirectPort` and the inputs of its goldens
    /// (`pkg/xds/generator/testdata/transparent-proxy/0{2,4,5,6}`).
    #[test]
    fn ipv6_inbound_redirect_port_follows_kuma() {
        let tp = |mode: Option<IpFamilyMode>, v6: Option<u32>| TransparentProxying {
            redirect_port_inbound: Some(15006),
            redirect_port_outbound: Some(15001),
            redirect_port_inbound_v6: v6,
            ip_family_mode: mode,
            ..Default::default()
        };
        use IpFamilyMode::*;
        assert_eq!(
            tp(Some(DualStack), None).ipv6_inbound_redirect_port(),
            15006
        );
        assert_eq!(tp(None, Some(15010)).ipv6_inbound_redirect_port(), 15006);
        assert_eq!(tp(None, Some(15066)).ipv6_inbound_redirect_port(), 15066);
        assert_eq!(tp(None, None).ipv6_inbound_redirect_port(), 0);
        assert_eq!(tp(Some(IPv4), Some(15066)).ipv6_inbound_redirect_port(), 0);
        assert_eq!(
            tp(Some(IPv6), Some(15006)).ipv6_inbound_redirect_port(),
            15006
        );
        assert_eq!(
            tp(Some(DualStack), Some(15066)).ipv6_inbound_redirect_port(),
            15066
        );
    }

    /// Kuma's `IsUsingTransparentProxy`, IPv4 and IPv6 DPPs.
    #[test]
    fn using_transparent_proxy_follows_kuma() {
        let using = |address: &str, tp: &str| {
            dp(&format!("networking:\n  address: '{address}'\n  transparentProxying: {tp}\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: a}}\n"))
                .is_using_transparent_proxy()
        };
        let both = "{redirectPortInbound: 15006, redirectPortOutbound: 15001";
        assert!(using("10.0.0.1", &format!("{both}}}")));
        assert!(!using("10.0.0.1", "{redirectPortOutbound: 15001}"));
        assert!(!using("10.0.0.1", "{}"));
        assert!(using("10.0.0.1", &format!("{both}, ipFamilyMode: IPv4}}")));
        assert!(
            !using("fd00::1", &format!("{both}}}")),
            "IPv6, UnSpecified: needs the v6 port"
        );
        assert!(using("fd00::1", "{redirectPortInboundV6: 15010}"));
        assert!(using(
            "fd00::1",
            &format!("{both}, ipFamilyMode: DualStack}}")
        ));
        assert!(!using("fd00::1", &format!("{both}, ipFamilyMode: IPv4}}")));
        let plain = dp("networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a}\n");
        assert!(!plain.is_using_transparent_proxy());
    }
}
