//! The inbound base generator (Kuma 2.7 `InboundProxyGenerator`, no policy baked in): for each
//! inbound of the DPP, listener `inbound:<ip>:<port>` (an HTTP connection manager with route
//! configuration `inbound:<service>` for HTTP protocols, a TCP proxy otherwise; mTLS requiring
//! a client certificate from the mesh when mTLS is on) and static cluster `localhost:<port>` to
//! the workload, with Kuma's default inbound timeouts (`DefaultInboundTimeout`). With transparent
//! proxying, the listener gets `bindToPort: false` when both redirect ports are set and the
//! cluster an upstream bind to `127.0.0.6`/`::6` ([`super::transparent`]).

use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    HttpProtocolOptions as CoreHttpProtocolOptions, TrafficDirection,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::{
    ForwardClientCertDetails, RouteSpecifier, SetCurrentClientCertDetails,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::google::protobuf::BoolValue;
use umbra_core::dataplane::{DataplaneSpec, Inbound};

use super::common::{
    catch_all_virtual_hosts, http_protocol_options, network_filter, router_filter, tcp_proxy_filter,
};
use crate::context::{MeshContext, Protocol};
use crate::envoy_core::socket;
use crate::names::{
    inbound_cluster_name, inbound_listener_name, sanitize_metric, HCM_FILTER,
    HTTP_PROTOCOL_OPTIONS_KEY, KUMA_TAGS_HEADER,
};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;
use crate::tags::tags_metadata;

/// Port of Kuma's service-less inbound, which gets no listener.
const SERVICELESS_INBOUND_PORT: u32 = 49151;

/// Add the listener and cluster of every inbound of `dp` to `snap` (the service-less inbound,
/// port 49151, excepted).
pub fn generate(snap: &mut Snapshot, dp: &DataplaneSpec, ctx: &MeshContext) {
    for inbound in &dp.networking.inbound {
        if inbound.port == SERVICELESS_INBOUND_PORT {
            continue; // Kuma's service-less inbound
        }
        add_inbound(snap, dp, inbound, ctx);
    }
}

fn add_inbound(snap: &mut Snapshot, dp: &DataplaneSpec, inbound: &Inbound, ctx: &MeshContext) {
    let key = dp.inbound_key(inbound);
    let listener_name = inbound_listener_name(&key.address, key.port);
    let service_port = inbound.effective_service_port();
    let cluster_name = inbound_cluster_name(service_port);
    let stat = sanitize_metric(&cluster_name);
    let protocol = Protocol::parse(
        inbound
            .tags
            .get(umbra_core::target_ref::PROTOCOL_TAG)
            .map(String::as_str),
    );
    // Kuma 2.7 inbound defaults (DefaultInboundTimeout): connect 10s, idle 7200s, stream idle 3600s.
    let filter = if protocol.is_http() {
        let service = inbound.service();
        let hcm = HttpConnectionManager {
            stat_prefix: stat.clone(),
            http_filters: vec![router_filter()],
            forward_client_cert_details: ForwardClientCertDetails::SanitizeSet as i32,
            set_current_client_cert_details: Some(SetCurrentClientCertDetails {
                uri: true,
                ..Default::default()
            }),
            common_http_protocol_options: Some(CoreHttpProtocolOptions {
                idle_timeout: Some(secs(7200)),
                ..Default::default()
            }),
            stream_idle_timeout: Some(secs(3600)),
            route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                name: format!("inbound:{service}"),
                request_headers_to_remove: vec![KUMA_TAGS_HEADER.to_owned()],
                validate_clusters: Some(BoolValue { value: false }),
                virtual_hosts: catch_all_virtual_hosts(service, &cluster_name),
                ..Default::default()
            })),
            ..Default::default()
        };
        network_filter(HCM_FILTER, hcm)
    } else {
        tcp_proxy_filter(&stat, &cluster_name, secs(7200))
    };
    let transport_socket = ctx.mtls.then(|| super::common::server_mtls(&ctx.mesh));
    snap.listeners.insert(
        listener_name.clone(),
        crate::interner::Shared::from(Listener {
            name: listener_name,
            address: Some(socket(&key.address, key.port)),
            traffic_direction: TrafficDirection::Inbound as i32,
            enable_reuse_port: Some(BoolValue { value: false }),
            bind_to_port: super::transparent::bind_to_port(dp),
            metadata: Some(tags_metadata(&inbound.tags)),
            filter_chains: vec![FilterChain {
                filters: vec![filter],
                transport_socket,
                ..Default::default()
            }],
            ..Default::default()
        }),
    );
    let workload = if inbound.service_address.is_empty() {
        key.address.clone()
    } else {
        inbound.service_address.clone()
    };
    let mut cluster = Cluster {
        name: cluster_name.clone(),
        alt_stat_name: stat,
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        connect_timeout: Some(secs(10)),
        upstream_bind_config: super::transparent::inbound_upstream_bind(dp, &workload),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: cluster_name.clone(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                        address: Some(socket(&workload, service_port)),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    if protocol.is_http() {
        cluster.typed_extension_protocol_options.insert(
            HTTP_PROTOCOL_OPTIONS_KEY.to_owned(),
            crate::draft::pack(http_protocol_options(protocol, Some(secs(7200)))),
        );
    }
    snap.clusters.insert(cluster_name, cluster.into());
}
