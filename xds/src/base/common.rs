//! Envoy shapes shared by the inbound and outbound base generators (Kuma 2.7's
//! `pkg/xds/envoy/{listeners,clusters}/v3` configurers): network filters, the router filter, the
//! catch-all route, the mTLS transport sockets and the upstream HTTP protocol options. Imports
//! only leaf modules.

use envoy_types::pb::envoy::config::core::v3::{
    transport_socket, Http1ProtocolOptions, Http2ProtocolOptions,
    HttpProtocolOptions as CoreHttpProtocolOptions, TransportSocket,
};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter};
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, route_match, Route, RouteAction, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    common_tls_context, CertificateValidationContext, CommonTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    http_protocol_options, HttpProtocolOptions,
};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;

use crate::context::Protocol;
use crate::envoy_core::ads;
use crate::names::{ca_secret_name, identity_secret_name, ROUTER_FILTER};
use crate::protobuf::any;

fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_owned(),
        sds_config: Some(ads()),
    }
}

/// The mTLS context of `mesh`: the identity certificate and the CA over SDS, the peer's URI SAN
/// matched by `san`, ALPN `kuma` when `alpn`.
pub(crate) fn common_tls(mesh: &str, san: StringMatcher, alpn: bool) -> CommonTlsContext {
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

/// The server side of `mesh`'s mTLS (Kuma's `ServerSideMTLS`): the identity certificate and
/// CA over SDS, a client certificate required, any peer of the mesh (URI SAN prefix
/// `spiffe://<mesh>/`).
pub(crate) fn server_mtls(mesh: &str) -> TransportSocket {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
    use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher;
    tls_socket(&DownstreamTlsContext {
        require_client_certificate: Some(envoy_types::pb::google::protobuf::BoolValue {
            value: true,
        }),
        common_tls_context: Some(common_tls(
            mesh,
            StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Prefix(format!(
                    "spiffe://{mesh}/"
                ))),
                ..Default::default()
            },
            false,
        )),
        ..Default::default()
    })
}

/// An `envoy.transport_sockets.tls` transport socket holding `ctx` (up- or downstream).
pub(crate) fn tls_socket<M: prost::Message + prost::Name>(ctx: &M) -> TransportSocket {
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(ctx))),
    }
}

/// A network filter `name` with typed config `config` (a draft during a generation,
/// [`crate::draft::pack`]).
pub(crate) fn network_filter<M: prost::Message + prost::Name + Clone + 'static>(
    name: &str,
    config: M,
) -> Filter {
    Filter {
        name: name.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(crate::draft::pack(config))),
    }
}

/// The router HTTP filter (last in every HTTP connection manager).
/// A TCP proxy network filter to `cluster` (stats under `stat`), idle after `idle`.
pub(crate) fn tcp_proxy_filter(
    stat: &str,
    cluster: &str,
    idle: envoy_types::pb::google::protobuf::Duration,
) -> Filter {
    let tcp = envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy {
        stat_prefix: stat.to_owned(),
        cluster_specifier: Some(
            envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy::ClusterSpecifier::Cluster(
                cluster.to_owned(),
            ),
        ),
        idle_timeout: Some(idle),
        ..Default::default()
    };
    network_filter(crate::names::TCP_PROXY_FILTER, tcp)
}

/// The one virtual host of a Kuma listener's route configuration: every domain, every path to
/// `cluster` (route timeout 0s, set by MeshTimeout when one applies).
pub(crate) fn catch_all_virtual_hosts(name: &str, cluster: &str) -> Vec<VirtualHost> {
    vec![VirtualHost {
        name: name.to_owned(),
        domains: vec!["*".to_owned()],
        routes: vec![catch_all_route(cluster, Some(crate::protobuf::secs(0)))],
        ..Default::default()
    }]
}

pub(crate) fn router_filter() -> HttpFilter {
    HttpFilter {
        name: ROUTER_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            any(&Router::default()),
        )),
        ..Default::default()
    }
}

/// A route matching every path (prefix `/`) to `cluster`, with route `timeout` `timeout_secs`.
pub(super) fn catch_all_route(
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

/// Upstream `HttpProtocolOptions` speaking `protocol` explicitly (HTTP/2 for http2 and grpc,
/// HTTP/1.1 otherwise), with `commonHttpProtocolOptions.idleTimeout` = `idle` when given.
pub(crate) fn http_protocol_options(
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
