//! The outbound base generator (Kuma 2.7 `OutboundProxyGenerator` with TrafficRoute "route all",
//! the shape meshes on the old policies run today), no policy baked in: for each outbound of the
//! DPP (those with a `backendRef` excepted), listener `outbound:<ip>:<port>` (an HTTP connection
//! manager with route configuration `outbound:<service>` adding `x-kuma-tags`, or a TCP proxy)
//! and EDS cluster `<service>` (upstream mTLS with SNI `<service>{mesh=<mesh>}` when mTLS is on).
//! Listeners get `bindToPort: false` when the DPP redirects both inbound and outbound traffic
//! ([`super::transparent::bind_to_port`]); the route plugins edit them in place and keep it.
//!
//! Timeouts are Kuma's values for "no Timeout policy": every listener timeout 0s, connect 5s.
//! Kuma bakes the old Timeout in here; Umbra applies it as the first step of the timeout family
//! plugin ([`crate::plugins::timeout`]), which overwrites exactly the fields set here, so the
//! result is the same.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, HttpProtocolOptions as CoreHttpProtocolOptions,
    TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::google::protobuf::BoolValue;
use umbra_core::dataplane::{DataplaneSpec, Outbound};
use umbra_core::external_service::ExternalEndpoint;
use umbra_core::view::PolicySet;

use super::common::{
    catch_all_virtual_hosts, common_tls, http_protocol_options, network_filter, router_filter,
    tcp_proxy_filter, tls_socket,
};
use super::external;
use crate::context::{MeshContext, Protocol};
use crate::envoy_core::{eds_cluster, socket};
use crate::names::{
    outbound_listener_name, sanitize_metric, HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY,
    KUMA_TAGS_HEADER, SERVICE,
};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;
use crate::tags::{serialize_tags, tags_metadata};

/// Add the listener of every outbound of `dp` (but those with a `backendRef`) to `snap`, and
/// the cluster of each service they reach (one per service, shared by its outbounds): an
/// ExternalService's carries its endpoints ([`external`]; which ones `dp` reaches depends on
/// `new_routes`, [`PolicySet::new_routes_apply`]).
pub fn generate(
    snap: &mut Snapshot,
    dp: &DataplaneSpec,
    ctx: &MeshContext,
    policies: &PolicySet,
    new_routes: bool,
) {
    // The DPP's own tags, as every HTTP outbound sends them in `x-kuma-tags`.
    let source_tags = serialize_tags(&dp.tag_set());
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let external = external::reachable(policies, dp, outbound.service(), new_routes);
        let protocol = external::service_protocol(policies, ctx, outbound.service());
        let target = Target {
            ctx,
            protocol,
            external: &external,
            ipv6: dp.is_ipv6(),
            bind_to_port: super::transparent::bind_to_port(dp),
            egress_protocol: external::through_egress(policies, outbound.service())
                .then_some(protocol),
        };
        add_outbound(snap, outbound, &target, &source_tags);
    }
}

/// What an outbound's service is: its protocol, and its ExternalService endpoints (empty for
/// a mesh service).
struct Target<'a> {
    ctx: &'a MeshContext,
    protocol: Protocol,
    external: &'a [&'a ExternalEndpoint],
    ipv6: bool,
    /// The listener's `bindToPort` ([`super::transparent::bind_to_port`]).
    bind_to_port: Option<BoolValue>,
    /// An ExternalService reached through the zone's egress: its protocol.
    egress_protocol: Option<Protocol>,
}

fn add_outbound(snap: &mut Snapshot, outbound: &Outbound, target: &Target<'_>, source_tags: &str) {
    let (ctx, protocol) = (target.ctx, target.protocol);
    let service = outbound.service().to_owned();
    let address = outbound.effective_address().to_owned();
    let listener_name = outbound_listener_name(&address, outbound.port);
    let stat = sanitize_metric(&service);
    let filter = if protocol.is_http() {
        let mut request_headers_to_add = Vec::new();
        if !source_tags.is_empty() {
            request_headers_to_add.push(HeaderValueOption {
                header: Some(HeaderValue {
                    key: KUMA_TAGS_HEADER.to_owned(),
                    value: source_tags.to_owned(),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let hcm = HttpConnectionManager {
            stat_prefix: stat.clone(),
            http_filters: vec![router_filter()],
            common_http_protocol_options: Some(CoreHttpProtocolOptions {
                idle_timeout: Some(secs(0)),
                ..Default::default()
            }),
            stream_idle_timeout: Some(secs(0)),
            route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                name: format!("outbound:{service}"),
                validate_clusters: Some(BoolValue { value: false }),
                request_headers_to_add,
                virtual_hosts: {
                    let mut vhosts = catch_all_virtual_hosts(&service, &service);
                    if !target.external.is_empty() {
                        external::auto_host_rewrite(&mut vhosts);
                    }
                    vhosts
                },
                ..Default::default()
            })),
            ..Default::default()
        };
        network_filter(HCM_FILTER, hcm)
    } else {
        tcp_proxy_filter(&stat, &service, secs(0))
    };
    snap.listeners.insert(
        listener_name.clone(),
        crate::interner::Shared::from(Listener {
            name: listener_name,
            address: Some(socket(&address, outbound.port)),
            traffic_direction: TrafficDirection::Outbound as i32,
            bind_to_port: target.bind_to_port,
            metadata: Some(tags_metadata(&outbound.tags)),
            filter_chains: vec![FilterChain {
                filters: vec![filter],
                ..Default::default()
            }],
            ..Default::default()
        }),
    );
    if snap.clusters.contains_key(&service) {
        return; // several outbounds to one service share the cluster
    }
    let cluster = if target.external.is_empty() {
        outbound_cluster(&service, &BTreeMap::new(), ctx, target.egress_protocol)
    } else {
        external::cluster(&service, target.external, protocol, target.ipv6)
    };
    snap.clusters.insert(service, cluster.into());
}

/// Kuma's EDS cluster of `service` endpoints with `tags` (besides `kuma.io/service`; empty for
/// the service's own cluster), named [`destination_cluster_name`]: connect timeout 5s,
/// upstream HTTP/2, upstream mTLS with SNI `<service>{<tags>,mesh=<mesh>}` when mTLS is on
/// (Kuma's `SNIFromTags`, tags sorted).
///
/// `egress_protocol`: the service is an ExternalService reached through the zone's egress
/// ([`external::through_egress`]) in that protocol; the cluster then verifies the egress's
/// identity (`spiffe://<mesh>/zone-egress`, Kuma's `ClientSideMTLS` with upstream service
/// `zone-egress`) and speaks the ExternalService's protocol.
pub fn outbound_cluster(
    service: &str,
    tags: &BTreeMap<String, String>,
    ctx: &MeshContext,
    egress_protocol: Option<Protocol>,
) -> Cluster {
    let name = destination_cluster_name(service, tags);
    let protocol = ctx.service_protocol(service);
    // An ExternalService through the egress is spoken to in its own protocol (Kuma's
    // `Http`/`Http2` configurers on the ES cluster), any other service over HTTP/2.
    let through_egress = egress_protocol.is_some();
    let protocol = egress_protocol.unwrap_or(protocol);
    let mut options = if through_egress {
        http_protocol_options(protocol, None)
    } else {
        http_protocol_options(Protocol::Http2, None)
    };
    if protocol.is_http() && !through_egress {
        options.common_http_protocol_options = Some(CoreHttpProtocolOptions {
            idle_timeout: Some(secs(0)),
            ..Default::default()
        });
    }
    let mut cluster = eds_cluster(&name);
    if !through_egress || protocol.is_http() {
        cluster.typed_extension_protocol_options.insert(
            HTTP_PROTOCOL_OPTIONS_KEY.to_owned(),
            crate::draft::pack(options),
        );
    }
    if ctx.mtls {
        // Through the egress, the peer is the egress (Kuma's `ClientSideMTLS` with upstream
        // service `zone-egress`).
        let peer = if through_egress {
            ZONE_EGRESS_SERVICE
        } else {
            service
        };
        let mut sni_tags: Vec<String> = tags
            .iter()
            .filter(|(k, _)| k.as_str() != SERVICE && k.as_str() != "mesh")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        sni_tags.push(format!("mesh={}", ctx.mesh));
        sni_tags.sort();
        cluster.transport_socket = Some(tls_socket(&UpstreamTlsContext {
            sni: format!("{service}{{{}}}", sni_tags.join(",")),
            common_tls_context: Some(common_tls(
                &ctx.mesh,
                StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(format!(
                        "spiffe://{}/{peer}",
                        ctx.mesh
                    ))),
                    ..Default::default()
                },
                true,
            )),
            ..Default::default()
        }));
    }
    cluster
}

/// The service name a ZoneEgress's identity carries (`spiffe://<mesh>/zone-egress`, Kuma's
/// `ZoneEgressServiceName`).
pub const ZONE_EGRESS_SERVICE: &str = "zone-egress";

/// Kuma's `Tags.DestinationClusterName`: `service` when `tags` (besides `kuma.io/service`) are
/// empty, else `<service>-<first 8 bytes of SHA-256 over the sorted key/value pairs, hex>`.
pub fn destination_cluster_name(service: &str, tags: &BTreeMap<String, String>) -> String {
    use sha2::Digest as _;
    let mut all = tags.clone();
    all.insert(SERVICE.to_owned(), service.to_owned());
    if all.len() == 1 {
        return service.to_owned();
    }
    let mut h = sha2::Sha256::new();
    for (k, v) in &all {
        h.update(k.as_bytes());
        h.update(v.as_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{service}-{hex}")
}
