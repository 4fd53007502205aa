//! Listener-level pieces of a builtin gateway (Kuma 2.7.29 `pkg/plugins/runtime/gateway`
//! listener and filter chain generators, `GenerateRTDS`): the RTDS Runtime of its connection
//! limits, its connection managers' compressor and internal addresses, its TLS contexts,
//! certificate secrets and SNI matches.

use envoy_types::pb::envoy::config::core::v3::{data_source, CidrRange, DataSource};
use envoy_types::pb::envoy::config::listener::v3::FilterChainMatch;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager::InternalAddressConfig, http_filter, HttpFilter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    secret, tls_parameters, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, Secret,
    TlsCertificate, TlsParameters,
};
use envoy_types::pb::envoy::service::runtime::v3::Runtime;
use envoy_types::pb::google::protobuf::{
    value, BoolValue, Struct, UInt32Value, Value as ProtoValue,
};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::gateway::GatewayCertificate;

use crate::plugins::edit::edit_hcms;
use crate::snapshot::Snapshot;

/// The name of a builtin gateway's RTDS Runtime and of its bootstrap's runtime layer (Kuma's).
pub const GATEWAY_RUNTIME: &str = "gateway.listeners";

/// The Runtime [`GATEWAY_RUNTIME`]: per `(listener name, limit)`, the key
/// `envoy.resource_limits.listener.<name>.connection_limit` (Envoy's per-listener connection
/// limit, a runtime key) set to the limit.
pub(super) fn gateway_runtime(limits: Vec<(String, u32)>) -> Runtime {
    let fields = limits
        .into_iter()
        .map(|(name, limit)| {
            (
                format!("envoy.resource_limits.listener.{name}.connection_limit"),
                ProtoValue {
                    kind: Some(value::Kind::NumberValue(f64::from(limit))),
                },
            )
        })
        .collect();
    Runtime {
        name: GATEWAY_RUNTIME.to_owned(),
        layer: Some(Struct { fields }),
    }
}

/// Kuma's default compressor HTTP filter (`DefaultCompressorFilter`): gzip, responses with
/// an ETag left alone.
pub(super) fn gzip_compressor() -> HttpFilter {
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::envoy::extensions::compression::gzip::compressor::v3::Gzip;
    use envoy_types::pb::envoy::extensions::filters::http::compressor::v3::{
        compressor::ResponseDirectionConfig, Compressor,
    };
    let compressor = Compressor {
        compressor_library: Some(TypedExtensionConfig {
            name: "gzip".to_owned(),
            typed_config: Some(crate::protobuf::any(&Gzip::default())),
        }),
        response_direction_config: Some(ResponseDirectionConfig {
            disable_on_etag_header: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    HttpFilter {
        name: "gzip-compress".to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(crate::protobuf::any(
            &compressor,
        ))),
        ..Default::default()
    }
}

/// The addresses the gateway's connection manager treats as internal: Kuma's
/// `LocalHostAddresses` (what it uses with no `knownInternalCIDRs` given), `::1/128` only
/// for an IPv6 DPP.
pub(super) fn internal_addresses(ipv6: bool) -> InternalAddressConfig {
    let cidr = |prefix: &str, len: u32| CidrRange {
        address_prefix: prefix.to_owned(),
        prefix_len: Some(UInt32Value { value: len }),
    };
    let mut cidr_ranges = vec![cidr("127.0.0.1", 32)];
    if ipv6 {
        cidr_ranges.push(cidr("::1", 128));
    }
    InternalAddressConfig {
        cidr_ranges,
        ..Default::default()
    }
}

/// The SDS secret `name` (Kuma's: `cert.<rsa|ecdsa>:secret:<Secret>` or
/// `cert.<rsa|ecdsa>:inline:<hostname>`) of gateway certificate `cert`, chain and key inline.
pub(super) fn certificate_secret(name: String, cert: &GatewayCertificate) -> Secret {
    let inline = |s: &str| DataSource {
        specifier: Some(data_source::Specifier::InlineString(s.to_owned())),
        ..Default::default()
    };
    Secret {
        name,
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&cert.chain_pem)),
            private_key: Some(inline(&cert.key_pem)),
            ..Default::default()
        })),
    }
}

/// Kuma's gateway TLS termination: the certificates over SDS (`sds`), ALPN `alpn` (h2 and
/// http/1.1 on HTTPS listeners, none on TLS ones), TLS 1.2 at least, no client certificate.
pub(super) fn downstream_tls(sds: &[String], alpn: &[&str]) -> DownstreamTlsContext {
    DownstreamTlsContext {
        require_client_certificate: Some(BoolValue { value: false }),
        common_tls_context: Some(CommonTlsContext {
            alpn_protocols: alpn.iter().map(|a| (*a).to_owned()).collect(),
            tls_certificate_sds_secret_configs: sds
                .iter()
                .map(|n| SdsSecretConfig {
                    name: n.clone(),
                    sds_config: Some(crate::envoy_core::ads()),
                })
                .collect(),
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: tls_parameters::TlsProtocol::TlSv12 as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A filter chain match on TLS with SNI `hostname` (any SNI for `*`, as Kuma's
/// `MatchServerNames`).
pub(super) fn tls_match(hostname: &str) -> FilterChainMatch {
    FilterChainMatch {
        server_names: if hostname == "*" {
            Vec::new()
        } else {
            vec![hostname.to_owned()]
        },
        transport_protocol: "tls".to_owned(),
        ..Default::default()
    }
}

/// Kuma serves a builtin gateway's route configurations over RDS, under their names
/// (`<gateway>:<protocol>:<port>:<hostname>`), its connection managers naming them (`rds` over
/// ADS): a route change then reaches Envoy as an RDS update and leaves the listener and its
/// connections alone (an inline route configuration would make every route change a listener
/// update, whose filter chain drain resets connections opened across it). Only the gateway's
/// own route configurations move; the admin listener's and any other stay inline. Run last,
/// after every plugin edited the route configurations in place; nothing for any other DPP.
pub(crate) fn routes_over_rds(snap: &mut Snapshot, dp: &DataplaneSpec) {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        http_connection_manager::RouteSpecifier, Rds,
    };
    if !umbra_core::gateway::is_builtin(dp) {
        return;
    }
    let mut routes = Vec::new();
    for l in snap.listeners.values_mut() {
        let inline = l
            .filter_chains
            .iter()
            .flat_map(|c| &c.filters)
            .any(|f| f.name == crate::names::HCM_FILTER);
        if !inline {
            continue;
        }
        // A gateway route configuration is named `<listener>:<hostname>`; any other (the
        // admin listener's, a ProxyTemplate's) stays inline.
        let prefix = format!("{}:", l.name);
        edit_hcms(l, |hcm| match hcm.route_specifier.take() {
            Some(RouteSpecifier::RouteConfig(rc)) if rc.name.starts_with(&prefix) => {
                hcm.route_specifier = Some(RouteSpecifier::Rds(Rds {
                    config_source: Some(crate::envoy_core::ads()),
                    route_config_name: rc.name.clone(),
                }));
                routes.push(rc);
            }
            other => hcm.route_specifier = other,
        });
    }
    for rc in routes {
        snap.routes.insert(rc.name.clone(), rc.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::edit::edit_hcms;
    use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain, Listener};
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        http_connection_manager::RouteSpecifier, HttpConnectionManager,
    };

    fn listener(name: &str, route_config: &str) -> Listener {
        let hcm = HttpConnectionManager {
            route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                name: route_config.to_owned(),
                ..Default::default()
            })),
            ..Default::default()
        };
        Listener {
            name: name.to_owned(),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: crate::names::HCM_FILTER.to_owned(),
                    config_type: Some(filter::ConfigType::TypedConfig(crate::protobuf::any(&hcm))),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Only a builtin gateway's own route configurations go to RDS: the admin listener's
    /// (unnamed) and any other listener's stay inline, and no other DPP is touched.
    #[test]
    fn only_the_gateways_route_configurations_go_to_rds() {
        let gateway: DataplaneSpec = serde_json::from_value(serde_json::json!({
            "networking": {"address": "10.0.0.1", "gateway": {"type": "BUILTIN", "tags": {"kuma.io/service": "edge"}}},
        }))
        .unwrap();
        let sidecar: DataplaneSpec = serde_json::from_value(serde_json::json!({
            "networking": {"address": "10.0.0.2", "inbound": [{"port": 80, "tags": {"kuma.io/service": "web"}}]},
        }))
        .unwrap();
        let snap = || {
            let mut snap = Snapshot::default();
            for l in [
                listener("edge:HTTP:8080", "edge:HTTP:8080:*"),
                listener("kuma:envoy:admin", ""),
                listener("added-by-template", "template-routes"),
            ] {
                snap.listeners.insert(l.name.clone(), l.into());
            }
            snap
        };
        let specifier = |snap: &mut Snapshot, name: &str| {
            let mut out = None;
            let l = snap.listeners.get_mut(name).unwrap();
            edit_hcms(l, |hcm| out = hcm.route_specifier.clone());
            out
        };
        let mut s = snap();
        routes_over_rds(&mut s, &gateway);
        assert_eq!(
            s.routes.keys().collect::<Vec<_>>(),
            ["edge:HTTP:8080:*"],
            "only the gateway's own"
        );
        assert!(matches!(
            specifier(&mut s, "edge:HTTP:8080"),
            Some(RouteSpecifier::Rds(r)) if r.route_config_name == "edge:HTTP:8080:*"
        ));
        for inline in ["kuma:envoy:admin", "added-by-template"] {
            assert!(
                matches!(
                    specifier(&mut s, inline),
                    Some(RouteSpecifier::RouteConfig(_))
                ),
                "{inline}"
            );
        }
        let mut s = snap();
        routes_over_rds(&mut s, &sidecar);
        assert!(s.routes.is_empty());
    }
}
