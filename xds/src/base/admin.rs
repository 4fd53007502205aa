//! The admin base generator (Kuma 2.7 `pkg/xds/generator/admin_proxy_generator.go`): what lets
//! a zone CP read the Envoy admin of a proxy on another host.
//!
//! For a proxy whose admin port is known ([`EnvoyAdmin`]):
//!
//! - the cluster `kuma:envoy:admin`: STATIC, `127.0.0.1:<admin port>` (the admin stays on the
//!   proxy host's loopback), connect timeout 5 s;
//! - unless the proxy's address is `127.0.0.1` (the admin's own address: Envoy could not bind
//!   both), the listener `kuma:envoy:admin` on `<proxy address>:<admin port>`, INBOUND, with a
//!   TLS inspector and two filter chains, both HTTP connection managers routing to that cluster
//!   (stat prefix `kuma_envoy_admin`, `validateClusters: false`, internal addresses
//!   `127.0.0.1/32` and `::1/128`):
//!   - plaintext: only the `/ready` prefix, so health checks work without a certificate;
//!   - `transportProtocol: tls`: every path, behind a `DownstreamTlsContext` presenting the
//!     proxy's server certificate (inline) and requiring a client certificate issued by the
//!     zone's Envoy-admin CA (inline) with the DNS SAN `kuma-cp`.
//!
//! The shapes are Kuma's golden `pkg/xds/generator/testdata/admin/01.envoy-config.golden.yaml`.
//! Kuma's readiness cluster (`kuma:readiness`, kuma-dp's readiness port) is not generated:
//! Umbra's bootstraps carry no readiness port, so `/ready` goes to the admin, as Kuma does for
//! such a proxy. The listener carries a private key: [`crate::snapshot::Snapshot::to_document`]
//! and the diffs redact it ([`crate::render::redact_sensitive`]).

use envoy_types::pb::envoy::config::cluster::v3::{cluster, Cluster};
use envoy_types::pb::envoy::config::core::v3::{
    data_source, CidrRange, DataSource, TrafficDirection,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{
    listener_filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
};
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, route_match, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager, HttpConnectionManager,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    common_tls_context, subject_alt_name_matcher::SanType, CertificateValidationContext,
    CommonTlsContext, DownstreamTlsContext, SubjectAltNameMatcher, TlsCertificate,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::google::protobuf::BoolValue;

use super::common::{network_filter, router_filter, tls_socket};
use crate::envoy_core::socket;
use crate::names::HCM_FILTER;
use crate::protobuf::{any, secs};
use crate::snapshot::Snapshot;

/// The name of the admin listener and of the admin cluster (Kuma's
/// `GetAdminListenerName`/`GetEnvoyAdminClusterName`).
pub const ADMIN_NAME: &str = "kuma:envoy:admin";

/// The DNS SAN the listener requires of a client certificate (Kuma's `ClientCertSAN`).
pub const CLIENT_SAN: &str = "kuma-cp";

/// What the admin generator needs of a proxy: its admin port (node metadata
/// `dataplane.admin.port`) and the mTLS material the zone issued for it. `Debug` never shows
/// the key.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvoyAdmin {
    /// The admin's port on the proxy host's `127.0.0.1`, and the listener's port.
    pub port: u16,
    /// PEM certificate of the zone's Envoy-admin CA (trusted for client certificates).
    pub ca_pem: String,
    /// PEM server certificate of this proxy (IP SANs: its addresses).
    pub cert_pem: String,
    /// PEM private key of `cert_pem`.
    pub key_pem: String,
}

impl std::fmt::Debug for EnvoyAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EnvoyAdmin {{ port: {}, .. }}", self.port)
    }
}

/// The admin's address inside the proxy host.
const ADMIN_ADDRESS: &str = "127.0.0.1";

/// Add the admin cluster and (unless `address` is the admin's own) the admin listener of a
/// proxy at `address` (its Dataplane's or ZoneIngress's `networking.address`) to `snap`.
pub fn generate(snap: &mut Snapshot, address: &str, admin: &EnvoyAdmin) {
    let port = u32::from(admin.port);
    let cluster = Cluster {
        name: ADMIN_NAME.to_owned(),
        alt_stat_name: crate::names::sanitize_metric(ADMIN_NAME),
        connect_timeout: Some(secs(5)),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: ADMIN_NAME.to_owned(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket(ADMIN_ADDRESS, port)),
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
    snap.clusters.insert(ADMIN_NAME.to_owned(), cluster.into());
    if address == ADMIN_ADDRESS {
        return;
    }
    let plaintext = FilterChain {
        filters: vec![network_filter(HCM_FILTER, hcm(&[("/ready", "/ready")]))],
        ..Default::default()
    };
    let mtls = FilterChain {
        filter_chain_match: Some(FilterChainMatch {
            transport_protocol: "tls".to_owned(),
            ..Default::default()
        }),
        filters: vec![network_filter(
            HCM_FILTER,
            hcm(&[("/ready", "/ready"), ("/", "/")]),
        )],
        transport_socket: Some(tls_socket(&downstream_tls(admin))),
        ..Default::default()
    };
    let listener = Listener {
        name: ADMIN_NAME.to_owned(),
        address: Some(socket(address, port)),
        enable_reuse_port: Some(BoolValue { value: false }),
        traffic_direction: TrafficDirection::Inbound as i32,
        listener_filters: vec![ListenerFilter {
            name: "envoy.filters.listener.tls_inspector".to_owned(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &TlsInspector::default(),
            ))),
            ..Default::default()
        }],
        filter_chains: vec![plaintext, mtls],
        ..Default::default()
    };
    snap.listeners
        .insert(ADMIN_NAME.to_owned(), listener.into());
}

/// Kuma's `StaticEndpoints` HTTP connection manager: one prefix route per `(path, rewrite)`,
/// each to the admin cluster.
fn hcm(paths: &[(&str, &str)]) -> HttpConnectionManager {
    let routes = paths
        .iter()
        .map(|(path, rewrite)| Route {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix((*path).to_owned())),
                ..Default::default()
            }),
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                    ADMIN_NAME.to_owned(),
                )),
                prefix_rewrite: (*rewrite).to_owned(),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    let cidr = |prefix: &str, len: u32| CidrRange {
        address_prefix: prefix.to_owned(),
        prefix_len: Some(envoy_types::pb::google::protobuf::UInt32Value { value: len }),
    };
    HttpConnectionManager {
        stat_prefix: crate::names::sanitize_metric(ADMIN_NAME),
        codec_type: http_connection_manager::CodecType::Auto as i32,
        http_filters: vec![router_filter()],
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(
            RouteConfiguration {
                virtual_hosts: vec![VirtualHost {
                    name: ADMIN_NAME.to_owned(),
                    domains: vec!["*".to_owned()],
                    routes,
                    ..Default::default()
                }],
                validate_clusters: Some(BoolValue { value: false }),
                ..Default::default()
            },
        )),
        internal_address_config: Some(http_connection_manager::InternalAddressConfig {
            unix_sockets: false,
            cidr_ranges: vec![cidr("127.0.0.1", 32), cidr("::1", 128)],
        }),
        ..Default::default()
    }
}

/// Kuma's `ServerSideStaticMTLS`: the proxy's certificate, a required client certificate from
/// the Envoy-admin CA with the DNS SAN [`CLIENT_SAN`].
fn downstream_tls(admin: &EnvoyAdmin) -> DownstreamTlsContext {
    let inline = |pem: &str| {
        Some(DataSource {
            specifier: Some(data_source::Specifier::InlineBytes(pem.as_bytes().to_vec())),
            ..Default::default()
        })
    };
    DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificates: vec![TlsCertificate {
                certificate_chain: inline(&admin.cert_pem),
                private_key: inline(&admin.key_pem),
                ..Default::default()
            }],
            validation_context_type: Some(
                common_tls_context::ValidationContextType::ValidationContext(
                    CertificateValidationContext {
                        trusted_ca: inline(&admin.ca_pem),
                        match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                            san_type: SanType::Dns as i32,
                            matcher: Some(StringMatcher {
                                match_pattern: Some(string_matcher::MatchPattern::Exact(
                                    CLIENT_SAN.to_owned(),
                                )),
                                ignore_case: false,
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                ),
            ),
            ..Default::default()
        }),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> EnvoyAdmin {
        EnvoyAdmin {
            port: 9901,
            ca_pem: "caPEM".into(),
            cert_pem: "certPEM".into(),
            key_pem: "keyPEM".into(),
        }
    }

    /// Kuma's golden `pkg/xds/generator/testdata/admin/01.envoy-config.golden.yaml` (a Dataplane
    /// at 192.168.0.1, admin port 9901, certificates `certPEM`/`keyPEM`/`caPEM`), in proto3 JSON.
    #[test]
    fn matches_kumas_golden() {
        let mut snap = Snapshot::default();
        generate(&mut snap, "192.168.0.1", &admin());
        let cluster = crate::render::to_json(&*snap.clusters[ADMIN_NAME]).unwrap();
        assert_eq!(
            cluster,
            serde_json::json!({
                "altStatName": "kuma_envoy_admin",
                "connectTimeout": "5s",
                "loadAssignment": {"clusterName": "kuma:envoy:admin", "endpoints": [{"lbEndpoints": [
                    {"endpoint": {"address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9901}}}}
                ]}]},
                "name": "kuma:envoy:admin",
                "type": "STATIC",
            })
        );
        let listener = crate::render::to_json(&*snap.listeners[ADMIN_NAME]).unwrap();
        let hcm = |routes: serde_json::Value| {
            serde_json::json!({
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "httpFilters": [{"name": "envoy.filters.http.router", "typedConfig": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                "internalAddressConfig": {"cidrRanges": [
                    {"addressPrefix": "127.0.0.1", "prefixLen": 32},
                    {"addressPrefix": "::1", "prefixLen": 128},
                ]},
                "routeConfig": {"validateClusters": false, "virtualHosts": [
                    {"domains": ["*"], "name": "kuma:envoy:admin", "routes": routes}]},
                "statPrefix": "kuma_envoy_admin",
            })
        };
        let route = |prefix: &str| serde_json::json!({"match": {"prefix": prefix}, "route": {"cluster": "kuma:envoy:admin", "prefixRewrite": prefix}});
        let b64 = |s: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(s)
        };
        assert_eq!(
            listener,
            serde_json::json!({
                "address": {"socketAddress": {"address": "192.168.0.1", "portValue": 9901}},
                "enableReusePort": false,
                "filterChains": [
                    {"filters": [{"name": "envoy.filters.network.http_connection_manager",
                        "typedConfig": hcm(serde_json::json!([route("/ready")]))}]},
                    {"filterChainMatch": {"transportProtocol": "tls"},
                     "filters": [{"name": "envoy.filters.network.http_connection_manager",
                        "typedConfig": hcm(serde_json::json!([route("/ready"), route("/")]))}],
                     "transportSocket": {"name": "envoy.transport_sockets.tls", "typedConfig": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                        "commonTlsContext": {
                            "tlsCertificates": [{"certificateChain": {"inlineBytes": b64("certPEM")},
                                                 "privateKey": {"inlineBytes": b64("keyPEM")}}],
                            "validationContext": {
                                "matchTypedSubjectAltNames": [{"matcher": {"exact": "kuma-cp"}, "sanType": "DNS"}],
                                "trustedCa": {"inlineBytes": b64("caPEM")}},
                        },
                        "requireClientCertificate": true}}},
                ],
                "listenerFilters": [{"name": "envoy.filters.listener.tls_inspector", "typedConfig": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}}],
                "name": "kuma:envoy:admin",
                "trafficDirection": "INBOUND",
            })
        );
    }

    #[test]
    fn a_proxy_on_the_admins_own_address_gets_the_cluster_only() {
        let mut snap = Snapshot::default();
        generate(&mut snap, "127.0.0.1", &admin());
        assert!(snap.clusters.contains_key(ADMIN_NAME));
        assert!(snap.listeners.is_empty());
        assert!(!format!("{:?}", admin()).contains("keyPEM"));
    }
}
