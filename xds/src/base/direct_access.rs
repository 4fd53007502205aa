//! The direct-access base generator (Kuma 2.7 `DirectAccessProxyGenerator`,
//! `pkg/xds/generator/direct_access_proxy_generator.go`): a transparent proxy that lists
//! `directAccessServices` reaches other DPPs of those services at their own IP:port, without
//! an outbound.
//!
//! Runs when both redirect ports are non-zero and `directAccessServices` is not empty. The
//! endpoints are the inbound interfaces (inbound `address`, else `networking.address`; inbound
//! `port`) of the mesh's Dataplanes whose `kuma.io/service` is listed (`*`: all), whatever
//! their health ([`MeshContext::inbound_interfaces`]); the DPP's own inbounds and the
//! IP:ports of its outbounds are left out; sorted by address string, then port. For each:
//!
//! ```yaml
//! name: direct_access_<ip>:<port>
//! address: {socketAddress: {address: <ip>, portValue: <port>}}
//! bindToPort: false
//! trafficDirection: OUTBOUND
//! filterChains: [{filters: [{name: envoy.filters.network.tcp_proxy, typedConfig:
//!   {cluster: direct_access, statPrefix: direct_access_<ip with _>_<port>}}]}]
//! ```
//!
//! and one cluster `direct_access`: `ORIGINAL_DST`, `CLUSTER_PROVIDED`, connect timeout 5s
//! (no `altStatName`, the name is clean); with mesh mTLS, an upstream TLS context with the
//! mesh's identity and CA, ALPN `kuma`, no SNI, and the peer's URI SAN prefix
//! `spiffe://<mesh>/` (Kuma's `UnknownDestinationClientSideMTLS`). Their origin is [`ORIGIN`]
//! (`direct-access`).
//!
//! Differences from Kuma: Kuma skips the DPP by name, Umbra by its inbound keys (the same
//! unless two Dataplanes claim one IP:port); Kuma also counts the Prometheus inbound of
//! Dataplanes with metrics on, which Umbra does not generate; the `pass_through` TrafficLog is
//! not added to the listeners.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, LbPolicy,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    tcp_proxy::ClusterSpecifier, TcpProxy,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use umbra_core::dataplane::DataplaneSpec;

use super::common::{common_tls, network_filter, tls_socket};
use crate::context::MeshContext;
use crate::envoy_core::socket;
use crate::names::{sanitize_metric, TCP_PROXY_FILTER};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;

/// Kuma's `OriginDirectAccess`: the origin of every resource [`generate`] adds.
pub const ORIGIN: &str = "direct-access";

/// The cluster every direct-access listener forwards to.
pub const CLUSTER_NAME: &str = "direct_access";

/// Add the direct-access listeners and cluster of `dp` to `snap` (see the module docs), and
/// return the names of what was added, as `(clusters, listeners)`, for their origin.
pub fn generate(
    snap: &mut Snapshot,
    dp: &DataplaneSpec,
    ctx: &MeshContext,
) -> (Vec<String>, Vec<String>) {
    let mut added = (Vec::new(), Vec::new());
    let Some(tp) = &dp.networking.transparent_proxying else {
        return added;
    };
    if !tp.redirects_both() || tp.direct_access().is_empty() {
        return added;
    }
    let bind_to_port = super::transparent::bind_to_port(dp);
    for (address, port) in endpoints(dp, ctx) {
        let name = format!("direct_access_{address}:{port}");
        let tcp = TcpProxy {
            stat_prefix: sanitize_metric(&name),
            cluster_specifier: Some(ClusterSpecifier::Cluster(CLUSTER_NAME.to_owned())),
            ..Default::default()
        };
        let listener = Listener {
            name: name.clone(),
            address: Some(socket(&address, port)),
            traffic_direction: TrafficDirection::Outbound as i32,
            bind_to_port,
            filter_chains: vec![FilterChain {
                filters: vec![network_filter(TCP_PROXY_FILTER, tcp)],
                ..Default::default()
            }],
            ..Default::default()
        };
        snap.listeners.insert(name.clone(), listener.into());
        added.1.push(name);
    }
    let transport_socket = ctx.mtls.then(|| {
        tls_socket(&UpstreamTlsContext {
            common_tls_context: Some(common_tls(
                &ctx.mesh,
                StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Prefix(format!(
                        "spiffe://{}/",
                        ctx.mesh
                    ))),
                    ..Default::default()
                },
                true,
            )),
            ..Default::default()
        })
    });
    let cluster = Cluster {
        name: CLUSTER_NAME.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(secs(5)),
        transport_socket,
        ..Default::default()
    };
    snap.clusters
        .insert(CLUSTER_NAME.to_owned(), cluster.into());
    added.0.push(CLUSTER_NAME.to_owned());
    added
}

/// Kuma's `directAccessEndpoints`: the `(ip, port)` of every inbound interface of the listed
/// services in the mesh, but `dp`'s own inbounds and its outbounds' addresses, sorted by
/// address string then port.
fn endpoints(dp: &DataplaneSpec, ctx: &MeshContext) -> BTreeSet<(String, u32)> {
    let services = dp
        .networking
        .transparent_proxying
        .as_ref()
        .map(|tp| tp.direct_access())
        .unwrap_or_default();
    let all = services.iter().any(|s| s == "*");
    let own: BTreeSet<(String, u32)> = dp
        .networking
        .inbound
        .iter()
        .map(|i| {
            let k = dp.inbound_key(i);
            (k.address, k.port)
        })
        .collect();
    let taken: BTreeSet<(String, u32)> = dp
        .networking
        .outbound
        .iter()
        .map(|o| (o.effective_address().to_owned(), o.port))
        .collect();
    ctx.inbound_interfaces
        .iter()
        .filter(|(service, _)| all || services.contains(service))
        .flat_map(|(_, eps)| eps.iter().cloned())
        .filter(|e| !own.contains(e) && !taken.contains(e))
        .collect()
}
