//! The transparent-proxy base generator (Kuma 2.7 `TransparentProxyGenerator`,
//! `pkg/xds/generator/transparent_proxy_generator.go`), plus the two settings Kuma's other
//! generators take from `networking.transparentProxying`: `bindToPort: false`
//! ([`bind_to_port`], Kuma's `TransparentProxyingConfigurer`,
//! `pkg/xds/envoy/listeners/v3/transparent_proxying_configurer.go`) and the inbound clusters'
//! upstream bind address ([`inbound_upstream_bind`], `inbound_proxy_generator.go:46-53`).
//!
//! When the DPP's `redirectPortOutbound` is non-zero, [`generate`] adds, for IPv4 (`0.0.0.0`,
//! bind `127.0.0.6`) and, when [`umbra_core::dataplane::TransparentProxying::ipv6_inbound_redirect_port`] is non-zero,
//! IPv6 (`::`, bind `::6`):
//! - listener `outbound:passthrough:ipv<N>` on `redirectPortOutbound`: `trafficDirection:
//!   OUTBOUND`, `useOriginalDst: true`, one filter chain with a tcp_proxy to the cluster of the
//!   same name (`statPrefix: outbound_passthrough_ipv<N>`);
//! - cluster `outbound:passthrough:ipv<N>`, only when the Mesh's
//!   `networking.outbound.passthrough` is not `false` (the listener stays, and drops what it
//!   accepts);
//! - listener `inbound:passthrough:ipv<N>` on `redirectPortInbound` (IPv6: the v6 port):
//!   `trafficDirection: INBOUND`, `enableReusePort: false`, `useOriginalDst: true`, tcp_proxy to
//!   the cluster of the same name;
//! - cluster `inbound:passthrough:ipv<N>` with `upstreamBindConfig.sourceAddress
//!   {127.0.0.6 | ::6, 0}`.
//!
//! Every cluster is `ORIGINAL_DST`, `lbPolicy: CLUSTER_PROVIDED`, `connectTimeout: 5s`,
//! `altStatName` the name with `:` made `_`. Their origin is [`ORIGIN`] (`transparent`).
//!
//! The access log Kuma bakes into the outbound passthrough listeners (the old TrafficLog chosen
//! for the `pass_through` service) is added by the access-log plugin
//! ([`crate::plugins::access_log`]), which finds these listeners by their origin.

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, LbPolicy,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{BindConfig, SocketAddress, TrafficDirection};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    tcp_proxy::ClusterSpecifier, TcpProxy,
};
use envoy_types::pb::google::protobuf::BoolValue;
use umbra_core::dataplane::DataplaneSpec;

use super::common::network_filter;
use crate::context::MeshContext;
use crate::envoy_core::socket;
use crate::names::{sanitize_metric, TCP_PROXY_FILTER};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;

/// Kuma's `OriginTransparent`: the origin of every resource [`generate`] adds.
pub const ORIGIN: &str = "transparent";

/// Kuma's `InPassThroughIPv4`/`IPv6`: the source address of connections to the workload when
/// transparent proxying is on, which iptables does not redirect back to Envoy.
pub const PASSTHROUGH_SOURCE_IPV4: &str = "127.0.0.6";
/// See [`PASSTHROUGH_SOURCE_IPV4`].
pub const PASSTHROUGH_SOURCE_IPV6: &str = "::6";

/// One IP family's passthrough set: names, listen-all address, upstream bind address.
struct Family {
    outbound: &'static str,
    inbound: &'static str,
    all: &'static str,
    source: &'static str,
}

const IPV4: Family = Family {
    outbound: "outbound:passthrough:ipv4",
    inbound: "inbound:passthrough:ipv4",
    all: "0.0.0.0",
    source: PASSTHROUGH_SOURCE_IPV4,
};

const IPV6: Family = Family {
    outbound: "outbound:passthrough:ipv6",
    inbound: "inbound:passthrough:ipv6",
    all: "::",
    source: PASSTHROUGH_SOURCE_IPV6,
};

/// Add the passthrough listeners and clusters of `dp` to `snap` (see the module docs), and
/// return the names of what was added, as `(clusters, listeners)`, for their origin. Nothing
/// when `dp` has no `transparentProxying` or its `redirectPortOutbound` is 0.
pub fn generate(
    snap: &mut Snapshot,
    dp: &DataplaneSpec,
    ctx: &MeshContext,
) -> (Vec<String>, Vec<String>) {
    let mut added = (Vec::new(), Vec::new());
    let Some(tp) = &dp.networking.transparent_proxying else {
        return added;
    };
    let outbound_port = tp.outbound_port();
    if outbound_port == 0 {
        return added;
    }
    let v6_port = tp.ipv6_inbound_redirect_port();
    let families = [
        Some((IPV4, tp.inbound_port())),
        (v6_port != 0).then_some((IPV6, v6_port)),
    ];
    for (family, inbound_port) in families.into_iter().flatten() {
        let outbound = passthrough_listener(
            family.outbound,
            family.all,
            outbound_port,
            TrafficDirection::Outbound,
        );
        added.1.push(family.outbound.to_owned());
        snap.listeners
            .insert(family.outbound.to_owned(), outbound.into());
        if !ctx.passthrough_disabled {
            added.0.push(family.outbound.to_owned());
            snap.clusters.insert(
                family.outbound.to_owned(),
                passthrough_cluster(family.outbound, None).into(),
            );
        }
        let inbound = passthrough_listener(
            family.inbound,
            family.all,
            inbound_port,
            TrafficDirection::Inbound,
        );
        added.1.push(family.inbound.to_owned());
        snap.listeners
            .insert(family.inbound.to_owned(), inbound.into());
        added.0.push(family.inbound.to_owned());
        snap.clusters.insert(
            family.inbound.to_owned(),
            passthrough_cluster(family.inbound, Some(family.source)).into(),
        );
    }
    added
}

/// A passthrough listener `name` on `address:port`: `useOriginalDst`, one chain with a
/// tcp_proxy to cluster `name` (stats under the sanitized name); inbound ones get Kuma's
/// `enableReusePort: false` (TCP, `NewInboundListenerBuilder`).
fn passthrough_listener(
    name: &str,
    address: &str,
    port: u32,
    direction: TrafficDirection,
) -> Listener {
    let tcp = TcpProxy {
        stat_prefix: sanitize_metric(name),
        cluster_specifier: Some(ClusterSpecifier::Cluster(name.to_owned())),
        ..Default::default()
    };
    Listener {
        name: name.to_owned(),
        address: Some(socket(address, port)),
        traffic_direction: direction as i32,
        enable_reuse_port: (direction == TrafficDirection::Inbound)
            .then_some(BoolValue { value: false }),
        use_original_dst: Some(BoolValue { value: true }),
        filter_chains: vec![FilterChain {
            filters: vec![network_filter(TCP_PROXY_FILTER, tcp)],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Kuma's `PassThroughCluster` + `DefaultTimeout` (+ `UpstreamBindConfig(source, 0)` when
/// `source` is given): `ORIGINAL_DST`, `CLUSTER_PROVIDED`, connect timeout 5s, `altStatName`.
fn passthrough_cluster(name: &str, source: Option<&str>) -> Cluster {
    Cluster {
        name: name.to_owned(),
        alt_stat_name: sanitize_metric(name),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(secs(5)),
        upstream_bind_config: source.map(upstream_bind),
        ..Default::default()
    }
}

/// `upstreamBindConfig {sourceAddress {address: source, portValue: 0}}`.
fn upstream_bind(source: &str) -> BindConfig {
    let address = socket(source, 0);
    let source_address = match address.address {
        Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(s)) => s,
        _ => SocketAddress::default(),
    };
    BindConfig {
        source_address: Some(source_address),
        ..Default::default()
    }
}

/// Kuma's `TransparentProxyingConfigurer`: `bindToPort: false` when `dp` redirects both
/// inbound and outbound traffic (both redirect ports non-zero), else unset (Envoy binds). For
/// every inbound and outbound listener.
pub fn bind_to_port(dp: &DataplaneSpec) -> Option<BoolValue> {
    dp.networking
        .transparent_proxying
        .as_ref()
        .is_some_and(umbra_core::dataplane::TransparentProxying::redirects_both)
        .then_some(BoolValue { value: false })
}

/// The upstream bind of an inbound's local cluster (`inbound_proxy_generator.go:46-53`): when
/// `dp` uses transparent proxying ([`DataplaneSpec::is_using_transparent_proxy`]) and the
/// workload address is neither `127.0.0.1` nor `::1`, connections to the workload leave from
/// `127.0.0.6:0` (`::6:0` for an IPv6 workload), so iptables does not redirect them back.
pub fn inbound_upstream_bind(dp: &DataplaneSpec, workload: &str) -> Option<BindConfig> {
    if !dp.is_using_transparent_proxy() {
        return None;
    }
    // Kuma compares the strings with `127.0.0.1` and `::1` (so `127.0.0.2` gets the bind).
    if workload == "127.0.0.1" || workload == "::1" {
        return None;
    }
    let ip = umbra_core::go_net::parse_ip(workload);
    // Go's `IsAddressIPv6`: `To4() == nil`, so an IPv4-mapped IPv6 address counts as IPv4.
    let ipv6 = matches!(ip, Some(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none());
    let source = if ipv6 {
        PASSTHROUGH_SOURCE_IPV6
    } else {
        PASSTHROUGH_SOURCE_IPV4
    };
    Some(upstream_bind(source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::dataplane::{IpFamilyMode, TransparentProxying};

    fn dp(address: &str, tp: Option<TransparentProxying>) -> DataplaneSpec {
        let mut d = DataplaneSpec::default();
        d.networking.address = address.to_owned();
        d.networking.transparent_proxying = tp;
        d
    }

    fn tp(inbound: u32, outbound: u32) -> TransparentProxying {
        TransparentProxying {
            redirect_port_inbound: Some(inbound),
            redirect_port_outbound: Some(outbound),
            ..Default::default()
        }
    }

    #[test]
    fn nothing_without_an_outbound_redirect_port() {
        let ctx = MeshContext::default();
        for d in [
            dp("10.0.0.1", None),
            dp("10.0.0.1", Some(TransparentProxying::default())),
            dp("10.0.0.1", Some(tp(15006, 0))),
        ] {
            let mut snap = Snapshot::default();
            assert_eq!(generate(&mut snap, &d, &ctx), (vec![], vec![]));
            assert!(snap.listeners.is_empty() && snap.clusters.is_empty());
        }
    }

    #[test]
    fn passthrough_off_drops_the_outbound_cluster_only() {
        let ctx = MeshContext {
            passthrough_disabled: true,
            ..Default::default()
        };
        let mut t = tp(15006, 15001);
        t.ip_family_mode = Some(IpFamilyMode::IPv4);
        let mut snap = Snapshot::default();
        let (clusters, listeners) = generate(&mut snap, &dp("10.0.0.1", Some(t)), &ctx);
        assert_eq!(clusters, ["inbound:passthrough:ipv4"]);
        assert_eq!(
            listeners,
            ["outbound:passthrough:ipv4", "inbound:passthrough:ipv4"]
        );
    }

    #[test]
    fn inbound_port_zero_still_gives_the_inbound_listener() {
        let mut snap = Snapshot::default();
        generate(
            &mut snap,
            &dp("10.0.0.1", Some(tp(0, 15001))),
            &MeshContext::default(),
        );
        let l = &snap.listeners["inbound:passthrough:ipv4"];
        assert_eq!(l.address, Some(socket("0.0.0.0", 0)), "as Kuma: port 0");
    }

    #[test]
    fn bind_to_port_needs_both_redirect_ports() {
        assert_eq!(bind_to_port(&dp("10.0.0.1", None)), None);
        assert_eq!(bind_to_port(&dp("10.0.0.1", Some(tp(0, 15001)))), None);
        assert_eq!(
            bind_to_port(&dp("10.0.0.1", Some(tp(15006, 15001)))),
            Some(BoolValue { value: false })
        );
    }

    #[test]
    fn inbound_bind_skips_loopback_workloads_and_picks_the_family() {
        let on = dp("10.0.0.1", Some(tp(15006, 15001)));
        let addr = |b: Option<BindConfig>| b.and_then(|b| b.source_address).map(|s| s.address);
        assert_eq!(
            addr(inbound_upstream_bind(&on, "10.0.0.1")).as_deref(),
            Some("127.0.0.6")
        );
        assert_eq!(
            addr(inbound_upstream_bind(&on, "fd00::2")).as_deref(),
            Some("::6")
        );
        assert_eq!(inbound_upstream_bind(&on, "127.0.0.1"), None);
        assert_eq!(inbound_upstream_bind(&on, "::1"), None);
        assert_eq!(
            inbound_upstream_bind(&dp("10.0.0.1", None), "10.0.0.1"),
            None
        );
        assert_eq!(
            inbound_upstream_bind(&dp("10.0.0.1", Some(tp(0, 15001))), "10.0.0.1"),
            None
        );
    }
}
