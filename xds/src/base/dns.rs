//! The DNS base generator (Kuma 2.7 `DNSGenerator`, `pkg/xds/generator/dns_generator.go`, and
//! `pkg/xds/envoy/listeners/v3/dns_configurer.go`): the `kuma:dns` listener, Envoy's DNS
//! filter answering the mesh's VIP names for kuma-dp's CoreDNS (which forwards to it and falls
//! back to the host's resolvers itself).
//!
//! Built only when the DPP has `networking.transparentProxying` (its redirect ports are not
//! checked) and the caller gives kuma-dp's DNS port ([`DnsInput`], node metadata
//! `dataplane.dns.port`):
//!
//! ```yaml
//! name: kuma:dns
//! address: {socketAddress: {address: 127.0.0.1, portValue: <port>, protocol: UDP}}
//! enableReusePort: true
//! trafficDirection: INBOUND
//! listenerFilters:
//! - name: envoy.filters.udp.dns_filter
//!   typedConfig:   # DnsFilterConfig
//!     statPrefix: kuma_dns
//!     serverConfig: {inlineDnsTable: {virtualDomains: [
//!       {name: <domain>, answerTtl: 30s, endpoint: {addressList: {address: [<vip>, <::ffff:vip>]}}}]}}
//! ```
//!
//! The table holds the domains whose VIP is the address of one of the DPP's outbounds (after
//! the caller merged the VIP outbounds in), sorted by name; each answers its VIP and, unless
//! `ipFamilyMode` is `IPv4`, the IPv4-mapped IPv6 address (`240.0.0.1` → `::ffff:f000:1`).
//! A name given twice answers its last address (Kuma's map). No filter chain, no client
//! config, no upstream resolvers. The listener is there even with an empty table. Its origin
//! is [`ORIGIN`] (`dns`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use envoy_types::pb::envoy::config::core::v3::{
    address, socket_address::Protocol as SocketProtocol, TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{listener_filter, Listener, ListenerFilter};
use envoy_types::pb::envoy::data::dns::v3::dns_table::{
    dns_endpoint::EndpointConfig, AddressList, DnsEndpoint, DnsVirtualDomain,
};
use envoy_types::pb::envoy::data::dns::v3::DnsTable;
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::dns_filter_config::{
    server_context_config::ConfigSource, ServerContextConfig,
};
use envoy_types::pb::envoy::extensions::filters::udp::dns_filter::v3::DnsFilterConfig;
use envoy_types::pb::google::protobuf::BoolValue;
use umbra_core::dataplane::{DataplaneSpec, IpFamilyMode};

use crate::envoy_core::socket;
use crate::protobuf::{any, secs};
use crate::snapshot::Snapshot;

/// Kuma's `OriginDNS`: the origin of the listener [`generate`] adds.
pub const ORIGIN: &str = "dns";

/// The listener's name (Kuma's `names.GetDNSListenerName()`).
pub const LISTENER_NAME: &str = "kuma:dns";

/// The DNS filter's name.
const DNS_FILTER: &str = "envoy.filters.udp.dns_filter";

/// What the DNS generator needs beyond the Dataplane, given by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsInput {
    /// kuma-dp's Envoy DNS port (node metadata `dataplane.dns.port`, 15054 by default).
    pub port: u16,
    /// The mesh's VIP domains (Kuma's `VIPDomains`), as `(name, ipv4 VIP)`, e.g.
    /// `("backend.mesh", "240.0.0.1")`. Only those whose VIP is one of the DPP's outbound
    /// addresses are served.
    pub domains: Vec<(String, String)>,
}

/// Add the `kuma:dns` listener of `dp` to `snap` (see the module docs). Returns whether it was
/// added (`dp` has `transparentProxying`).
pub fn generate(snap: &mut Snapshot, dp: &DataplaneSpec, dns: &DnsInput) -> bool {
    let Some(tp) = &dp.networking.transparent_proxying else {
        return false;
    };
    let ipv6 = tp.family_mode() != IpFamilyMode::IPv4;
    let outbound_ips: std::collections::BTreeSet<&str> = dp
        .networking
        .outbound
        .iter()
        .map(umbra_core::dataplane::Outbound::effective_address)
        .collect();
    let mut table: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, vip) in &dns.domains {
        if !outbound_ips.contains(vip.as_str()) {
            continue;
        }
        let mut addresses = vec![vip.clone()];
        if ipv6 {
            if let Some(v6) = to_v6(vip) {
                addresses.push(v6);
            }
        }
        table.insert(name, addresses);
    }
    let virtual_domains = table
        .into_iter()
        .map(|(name, addresses)| DnsVirtualDomain {
            name: name.to_owned(),
            endpoint: Some(DnsEndpoint {
                endpoint_config: Some(EndpointConfig::AddressList(AddressList {
                    address: addresses,
                })),
            }),
            answer_ttl: Some(secs(30)),
        })
        .collect();
    let filter = DnsFilterConfig {
        stat_prefix: "kuma_dns".to_owned(),
        server_config: Some(ServerContextConfig {
            config_source: Some(ConfigSource::InlineDnsTable(DnsTable {
                virtual_domains,
                ..Default::default()
            })),
        }),
        ..Default::default()
    };
    let mut addr = socket("127.0.0.1", u32::from(dns.port));
    if let Some(address::Address::SocketAddress(s)) = &mut addr.address {
        s.protocol = SocketProtocol::Udp as i32;
    }
    let listener = Listener {
        name: LISTENER_NAME.to_owned(),
        address: Some(addr),
        traffic_direction: TrafficDirection::Inbound as i32,
        enable_reuse_port: Some(BoolValue { value: true }),
        listener_filters: vec![ListenerFilter {
            name: DNS_FILTER.to_owned(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(&filter))),
            ..Default::default()
        }],
        ..Default::default()
    };
    snap.listeners
        .insert(LISTENER_NAME.to_owned(), listener.into());
    true
}

/// Kuma's `util_net.ToV6`: the IPv4-mapped IPv6 address of an IPv4 `ip` in Go's notation
/// (`240.0.0.1` → `::ffff:f000:1`); `None` for anything else, or when that is `ip` itself
/// (Kuma then adds nothing).
fn to_v6(ip: &str) -> Option<String> {
    // Go's `To4() != nil`: IPv4-mapped IPv6 addresses count as IPv4 too.
    let v4 = match umbra_core::go_net::parse_ip(ip)? {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => v6.to_ipv4_mapped()?,
    };
    let o = v4.octets();
    let hi = u16::from_be_bytes([o[0], o[1]]);
    let lo = u16::from_be_bytes([o[2], o[3]]);
    let v6 = format!("::ffff:{hi:x}:{lo:x}");
    (v6 != ip).then_some(v6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_mapped_addresses_are_written_as_go_does() {
        assert_eq!(to_v6("240.0.0.1").as_deref(), Some("::ffff:f000:1"));
        assert_eq!(to_v6("240.0.0.0").as_deref(), Some("::ffff:f000:0"));
        assert_eq!(to_v6("10.1.255.3").as_deref(), Some("::ffff:a01:ff03"));
        assert_eq!(to_v6("2001:db8::1"), None);
        assert_eq!(to_v6("::ffff:f000:1"), None, "already the mapped form");
        assert_eq!(to_v6("not-an-ip"), None);
    }

    #[test]
    fn no_listener_without_transparent_proxying() {
        let mut snap = Snapshot::default();
        let input = DnsInput {
            port: 15054,
            domains: vec![],
        };
        assert!(!generate(&mut snap, &DataplaneSpec::default(), &input));
        assert!(snap.listeners.is_empty());
    }
}
