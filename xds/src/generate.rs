//! Snapshot generation for a sidecar DPP: the base resources (inbound and outbound listeners,
//! clusters, endpoints) as Kuma 2.7 generates them, the old policies baked in where Kuma bakes
//! them, then the new-policy plugins in Kuma's order. Pure and deterministic.
//!
//! Names and shapes follow `docs/research/kuma-2.7-xds-generation.md` and the transition seed:
//! listeners `inbound:<ip>:<port>` / `outbound:<ip>:<port>`, inbound clusters
//! `localhost:<servicePort>`, outbound clusters named by `kuma.io/service` (EDS over ADS), route
//! configurations inlined in the HTTP connection manager (`inbound:<service>`,
//! `outbound:<service>`). Outbounds use Kuma's TrafficRoute ("route all") shape, which is what
//! meshes on the old policies run today.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, transport_socket, Address, AggregatedConfigSource, ApiVersion, ConfigSource,
    HeaderValue, HeaderValueOption, Http1ProtocolOptions, Http2ProtocolOptions, HttpProtocolOptions as CoreHttpProtocolOptions,
    SocketAddress, TrafficDirection, TransportSocket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::{route, route_action, route_match, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::{
    ForwardClientCertDetails, RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager, HttpFilter, http_connection_manager::SetCurrentClientCertDetails,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{tcp_proxy, TcpProxy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    common_tls_context, CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher, UpstreamTlsContext,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{http_protocol_options, HttpProtocolOptions};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use umbra_core::dataplane::{DataplaneSpec, Inbound, Outbound};
use umbra_core::old_matching::{select_outbound_connection_policies, OldPolicyRef};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::target_ref::SERVICE_TAG;
use umbra_core::view::PolicySet;

use crate::context::{MeshContext, Protocol};
use crate::snapshot::Snapshot;
use crate::util::{any, duration, sanitize_metric, secs, serialize_tags, tags_metadata};

/// Name of the HTTP connection manager network filter.
pub const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";
/// Name of the TCP proxy network filter.
pub const TCP_PROXY_FILTER: &str = "envoy.filters.network.tcp_proxy";
/// Name of the router HTTP filter.
pub const ROUTER_FILTER: &str = "envoy.filters.http.router";
/// Key of the upstream HTTP protocol options in `typedExtensionProtocolOptions`.
pub const HTTP_PROTOCOL_OPTIONS_KEY: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
/// Header carrying the source DPP's tags to the destination (Kuma's `x-kuma-tags`).
pub const KUMA_TAGS_HEADER: &str = "x-kuma-tags";

/// Why a snapshot could not be generated. Names the policy and the resource involved, so the
/// caller can report it and keep serving the last good snapshot (seed 003).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// A policy could not be applied to a resource.
    #[error("{policy} cannot be applied to {resource}: {reason}")]
    Policy {
        /// `Type/name` of the policy.
        policy: String,
        /// `typeUrl/name` of the resource.
        resource: String,
        /// What went wrong.
        reason: String,
    },
}

/// The DPP being generated for.
#[derive(Debug, Clone, Copy)]
pub struct Proxy<'a> {
    /// Dataplane name.
    pub name: &'a str,
    /// Its spec.
    pub dataplane: &'a DataplaneSpec,
}

/// Generate the snapshot of `proxy` in `ctx` under the policies of one view.
///
/// # Errors
/// [`GenerateError`] when a policy cannot be applied.
pub fn generate(
    proxy: Proxy<'_>,
    ctx: &MeshContext,
    policies: &PolicySet,
) -> Result<Snapshot, GenerateError> {
    let mut snap = Snapshot::default();
    let dp = proxy.dataplane;
    for inbound in &dp.networking.inbound {
        if inbound.port == 49151 {
            continue; // Kuma's service-less inbound
        }
        add_inbound(&mut snap, dp, inbound, ctx);
    }
    // Old Timeouts are baked into outbounds, superseded or not: Kuma 2.7 computes them
    // unconditionally and MeshTimeout overrides field by field (seed 000's "leaking" values).
    let timeouts: Vec<&Resource> = policies
        .old_policies_with_superseded(ResourceType::Timeout)
        .collect();
    let refs: Vec<OldPolicyRef<'_>> = timeouts
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let chosen = select_outbound_connection_policies(dp, &refs);
    let source_tags = source_tags(dp);
    let mut old_timeout_services = BTreeSet::new();
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let timeout = chosen
            .get(outbound.service())
            .and_then(|i| match &timeouts[*i].spec {
                Spec::Timeout(t) => t.conf.as_ref(),
                _ => None,
            });
        if timeout.is_some() {
            old_timeout_services.insert(outbound.service().to_owned());
        }
        add_outbound(&mut snap, outbound, ctx, timeout, &source_tags);
    }
    crate::plugins::mesh_timeout::apply(&mut snap, dp, ctx, policies, &old_timeout_services)?;
    crate::plugins::apply_all(
        &mut snap,
        &crate::plugins::PluginInput {
            dataplane: dp,
            ctx,
            policies,
        },
    )?;
    Ok(snap)
}

fn socket(address: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: address.to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_owned(),
        sds_config: Some(ads()),
    }
}

/// SDS name of the DPP identity certificate of `mesh`.
pub fn identity_secret_name(mesh: &str) -> String {
    format!("identity_cert:secret:{mesh}")
}

/// SDS name of the CA bundle of `mesh`.
pub fn ca_secret_name(mesh: &str) -> String {
    format!("mesh_ca:secret:{mesh}")
}

/// The two SDS secrets of `mesh` as Kuma's secrets generator serves them:
/// [`identity_secret_name`] holding the DPP's certificate chain and private key (PEM, inline),
/// and [`ca_secret_name`] holding the mesh CA bundle as a validation context.
pub fn mesh_secrets(
    mesh: &str,
    certificate_chain_pem: &[u8],
    private_key_pem: &[u8],
    ca_pem: &[u8],
) -> [envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret; 2] {
    use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        secret, CertificateValidationContext, Secret, TlsCertificate,
    };
    let inline = |bytes: &[u8]| {
        Some(DataSource {
            specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
            ..Default::default()
        })
    };
    [
        Secret {
            name: identity_secret_name(mesh),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: inline(certificate_chain_pem),
                private_key: inline(private_key_pem),
                ..Default::default()
            })),
        },
        Secret {
            name: ca_secret_name(mesh),
            r#type: Some(secret::Type::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: inline(ca_pem),
                    ..Default::default()
                },
            )),
        },
    ]
}

fn common_tls(mesh: &str, san: StringMatcher, alpn: bool) -> CommonTlsContext {
    CommonTlsContext {
        alpn_protocols: if alpn { vec!["kuma".to_owned()] } else { Vec::new() },
        tls_certificate_sds_secret_configs: vec![sds(&identity_secret_name(mesh))],
        validation_context_type: Some(common_tls_context::ValidationContextType::CombinedValidationContext(
            common_tls_context::CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                        san_type: envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::subject_alt_name_matcher::SanType::Uri as i32,
                        matcher: Some(san),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(sds(&ca_secret_name(mesh))),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

fn tls_socket<M: prost::Message + prost::Name>(ctx: &M) -> TransportSocket {
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(ctx))),
    }
}

fn network_filter<M: prost::Message + prost::Name>(name: &str, config: &M) -> Filter {
    Filter {
        name: name.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(any(config))),
    }
}

fn router_filter() -> HttpFilter {
    HttpFilter {
        name: ROUTER_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            any(&Router::default()),
        )),
        ..Default::default()
    }
}

fn catch_all_route(
    cluster: &str,
    timeout_secs: Option<envoy_types::pb::google::protobuf::Duration>,
) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster.to_owned())),
            timeout: timeout_secs,
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn http_protocol_options(
    protocol: Protocol,
    idle: Option<envoy_types::pb::google::protobuf::Duration>,
) -> HttpProtocolOptions {
    use http_protocol_options::explicit_http_config::ProtocolConfig;
    let protocol_config = match protocol {
        Protocol::Http2 | Protocol::Grpc => {
            ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions::default())
        }
        _ => ProtocolConfig::HttpProtocolOptions(Http1ProtocolOptions::default()),
    };
    HttpProtocolOptions {
        common_http_protocol_options: idle.map(|d| CoreHttpProtocolOptions {
            idle_timeout: Some(d),
            ..Default::default()
        }),
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(protocol_config),
                },
            ),
        ),
        ..Default::default()
    }
}

fn add_inbound(snap: &mut Snapshot, dp: &DataplaneSpec, inbound: &Inbound, ctx: &MeshContext) {
    let key = dp.inbound_key(inbound);
    let listener_name = inbound_listener_name(&key.address, key.port);
    let service_port = inbound.effective_service_port();
    let cluster_name = format!("localhost:{service_port}");
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
                virtual_hosts: vec![VirtualHost {
                    name: service.to_owned(),
                    domains: vec!["*".to_owned()],
                    routes: vec![catch_all_route(&cluster_name, Some(secs(0)))],
                    ..Default::default()
                }],
                ..Default::default()
            })),
            ..Default::default()
        };
        network_filter(HCM_FILTER, &hcm)
    } else {
        let tcp = TcpProxy {
            stat_prefix: stat.clone(),
            cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster_name.clone())),
            idle_timeout: Some(secs(7200)),
            ..Default::default()
        };
        network_filter(TCP_PROXY_FILTER, &tcp)
    };
    let transport_socket = ctx.mtls.then(|| {
        tls_socket(&DownstreamTlsContext {
            require_client_certificate: Some(BoolValue { value: true }),
            common_tls_context: Some(common_tls(
                &ctx.mesh,
                StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Prefix(format!(
                        "spiffe://{}/",
                        ctx.mesh
                    ))),
                    ..Default::default()
                },
                false,
            )),
            ..Default::default()
        })
    });
    snap.listeners.insert(
        listener_name.clone(),
        Listener {
            name: listener_name,
            address: Some(socket(&key.address, key.port)),
            traffic_direction: TrafficDirection::Inbound as i32,
            enable_reuse_port: Some(BoolValue { value: false }),
            metadata: Some(tags_metadata(&inbound.tags)),
            filter_chains: vec![FilterChain {
                filters: vec![filter],
                transport_socket,
                ..Default::default()
            }],
            ..Default::default()
        },
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
            any(&http_protocol_options(protocol, Some(secs(7200)))),
        );
    }
    snap.clusters.insert(cluster_name, cluster);
}

/// All tags of the DPP's inbounds (and gateway), values merged: the `x-kuma-tags` source set.
fn source_tags(dp: &DataplaneSpec) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let gateway = dp.networking.gateway.iter().map(|g| &g.tags);
    for tags in dp.networking.inbound.iter().map(|i| &i.tags).chain(gateway) {
        for (k, v) in tags {
            out.entry(k.clone()).or_default().insert(v.clone());
        }
    }
    out
}

/// Kuma's inbound listener name `inbound:<ip>:<port>` (IPv6 bracketed).
pub fn inbound_listener_name(address: &str, port: u32) -> String {
    format!("inbound:{}", join_host_port(address, port))
}

/// Kuma's outbound listener name `outbound:<ip>:<port>` (IPv6 bracketed).
pub fn outbound_listener_name(address: &str, port: u32) -> String {
    format!("outbound:{}", join_host_port(address, port))
}

fn join_host_port(host: &str, port: u32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn add_outbound(
    snap: &mut Snapshot,
    outbound: &Outbound,
    ctx: &MeshContext,
    timeout: Option<&umbra_core::old::timeout::TimeoutConf>,
    source_tags: &BTreeMap<String, BTreeSet<String>>,
) {
    let service = outbound.service().to_owned();
    let address = outbound.effective_address().to_owned();
    let listener_name = outbound_listener_name(&address, outbound.port);
    let protocol = ctx.service_protocol(&service);
    let stat = sanitize_metric(&service);
    let zero = || secs(0);
    let http = timeout.and_then(|t| t.http.as_ref());
    let pick = |d: Option<&umbra_core::duration::Duration>| d.map_or_else(zero, duration);
    let filter = if protocol.is_http() {
        let mut request_headers_to_add = Vec::new();
        let tags = serialize_tags(source_tags);
        if !tags.is_empty() {
            request_headers_to_add.push(HeaderValueOption {
                header: Some(HeaderValue {
                    key: KUMA_TAGS_HEADER.to_owned(),
                    value: tags,
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let stream_idle = match protocol {
            Protocol::Grpc => http
                .and_then(|h| h.stream_idle_timeout.as_ref())
                .or_else(|| {
                    timeout
                        .and_then(|t| t.grpc.as_ref())
                        .and_then(|g| g.stream_idle_timeout.as_ref())
                }),
            _ => http.and_then(|h| h.stream_idle_timeout.as_ref()),
        };
        let hcm = HttpConnectionManager {
            stat_prefix: stat.clone(),
            http_filters: vec![router_filter()],
            common_http_protocol_options: Some(CoreHttpProtocolOptions {
                idle_timeout: Some(pick(http.and_then(|h| h.idle_timeout.as_ref()))),
                ..Default::default()
            }),
            stream_idle_timeout: Some(pick(stream_idle)),
            route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                name: format!("outbound:{service}"),
                validate_clusters: Some(BoolValue { value: false }),
                request_headers_to_add,
                virtual_hosts: vec![VirtualHost {
                    name: service.clone(),
                    domains: vec!["*".to_owned()],
                    routes: vec![catch_all_route(
                        &service,
                        Some(pick(http.and_then(|h| h.request_timeout.as_ref()))),
                    )],
                    ..Default::default()
                }],
                ..Default::default()
            })),
            ..Default::default()
        };
        network_filter(HCM_FILTER, &hcm)
    } else {
        let idle = timeout
            .and_then(|t| t.tcp.as_ref())
            .and_then(|t| t.idle_timeout.as_ref());
        let tcp = TcpProxy {
            stat_prefix: stat.clone(),
            cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(service.clone())),
            idle_timeout: Some(pick(idle)),
            ..Default::default()
        };
        network_filter(TCP_PROXY_FILTER, &tcp)
    };
    snap.listeners.insert(
        listener_name.clone(),
        Listener {
            name: listener_name,
            address: Some(socket(&address, outbound.port)),
            traffic_direction: TrafficDirection::Outbound as i32,
            metadata: Some(tags_metadata(&outbound.tags)),
            filter_chains: vec![FilterChain {
                filters: vec![filter],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    if snap.clusters.contains_key(&service) {
        return; // several outbounds to one service share the cluster
    }
    let connect = timeout
        .and_then(|t| t.connect_timeout.as_ref())
        .map_or_else(|| secs(5), duration);
    let mut options = http_protocol_options(Protocol::Http2, None);
    if protocol.is_http() {
        let max_stream = match protocol {
            Protocol::Grpc => http
                .and_then(|h| h.max_stream_duration.as_ref())
                .or_else(|| {
                    timeout
                        .and_then(|t| t.grpc.as_ref())
                        .and_then(|g| g.max_stream_duration.as_ref())
                }),
            _ => http.and_then(|h| h.max_stream_duration.as_ref()),
        };
        options.common_http_protocol_options = Some(CoreHttpProtocolOptions {
            idle_timeout: Some(pick(http.and_then(|h| h.idle_timeout.as_ref()))),
            max_stream_duration: max_stream.filter(|d| !d.is_zero()).map(duration),
            ..Default::default()
        });
    }
    let mut cluster = Cluster {
        name: service.clone(),
        alt_stat_name: if stat == service { String::new() } else { stat },
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        connect_timeout: Some(connect),
        ..Default::default()
    };
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_PROTOCOL_OPTIONS_KEY.to_owned(), any(&options));
    if ctx.mtls {
        cluster.transport_socket = Some(tls_socket(&UpstreamTlsContext {
            sni: format!("{service}{{mesh={}}}", ctx.mesh),
            common_tls_context: Some(common_tls(
                &ctx.mesh,
                StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(format!(
                        "spiffe://{}/{service}",
                        ctx.mesh
                    ))),
                    ..Default::default()
                },
                true,
            )),
            ..Default::default()
        }));
    }
    snap.clusters.insert(service.clone(), cluster);
    snap.endpoints
        .insert(service.clone(), ctx.load_assignment(&service));
}

/// The EDS resource of outbound cluster `service` with endpoints `eps` (one locality, weight
/// 1 each, the endpoint's tags as `envoy.lb` metadata); [`MeshContext::build`] builds one per
/// service.
pub(crate) fn load_assignment(
    service: &str,
    eps: &[crate::context::Endpoint],
) -> ClusterLoadAssignment {
    let lb_endpoints: Vec<LbEndpoint> = eps
        .iter()
        .map(|e| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                address: Some(socket(&e.address, e.port)),
                ..Default::default()
            })),
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            metadata: crate::util::endpoint_metadata(&e.tags),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: service.to_owned(),
        endpoints: if lb_endpoints.is_empty() {
            Vec::new()
        } else {
            vec![LocalityLbEndpoints {
                lb_endpoints,
                ..Default::default()
            }]
        },
        ..Default::default()
    }
}

/// The `kuma.io/service` tag name, re-exported for plugins.
pub const SERVICE: &str = SERVICE_TAG;
