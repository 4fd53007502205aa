//! ExternalService clusters on a sidecar whose Mesh does not route them through a ZoneEgress
//! (Kuma 2.7.29 `pkg/xds/generator/outbound_proxy_generator.go` `generateCDS` and
//! `pkg/plugins/policies/core/xds/meshroute/clusters.go`): the cluster carries its endpoints
//! itself, no EDS.
//!
//! - `ProvidedEndpointCluster` (`envoy/clusters/v3/endpoint_cluster_configurer.go`): `STATIC`
//!   when every host is an IP, `STRICT_DNS` (with `dnsLookupFamily: V4_ONLY`, `AUTO` for an
//!   IPv6 DPP) when they are names; `ROUND_ROBIN`; an inline `loadAssignment` named after the
//!   cluster, weight 1, tags (minus `kuma.io/service`) as `envoy.lb` and
//!   `envoy.transport_socket_match` metadata. Kuma refuses to generate a cluster mixing IPs and
//!   names (the DPP's whole config fails); Umbra makes it `STRICT_DNS`, which resolves an IP to
//!   itself.
//! - `ClientSideTLS` (`client_side_tls_configurer.go`): one `transportSocketMatches` entry per
//!   endpoint with `tls.enabled`, named after its host and matched on its tags minus
//!   `kuma.io/service` (which hold `kuma.io/external-service-name`), with Kuma's
//!   `UpstreamTlsContextOutsideMesh` (`envoy/tls/v3/tls.go`): SNI `serverName`, else the host
//!   when it is a DNS name; client certificate and key inline when both are given; with a CA,
//!   the CA inline and, unless `skipHostnameVerification`, an exact DNS and an exact IP SAN
//!   match on the SNI (the host when there is none); `allowRenegotiation`.
//! - Protocol options by the services' `kuma.io/protocol`: HTTP/1.1 or HTTP/2 with idle
//!   timeout 0s, none for TCP.
//!
//! Which endpoints a DPP gets ([`reachable`]): all of the service's on the MeshHTTPRoute /
//! MeshTCPRoute path, those the TrafficPermissions let it reach on the legacy one
//! ([`umbra_core::external_service`]); none when the Mesh routes ExternalServices through its
//! ZoneEgress: the ordinary mesh cluster (EDS) then reaches them at the egress, over mTLS
//! verifying the egress's identity ([`crate::context::MeshContext::route_through_egress`]). A
//! service with no reachable endpoint gets the ordinary mesh cluster (EDS, no endpoints), as in
//! Kuma.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, DnsLookupFamily, TransportSocketMatch,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource};
use envoy_types::pb::envoy::config::route::v3::{route, route_action, VirtualHost};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    common_tls_context::ValidationContextType, subject_alt_name_matcher::SanType,
    CertificateValidationContext, CommonTlsContext, SubjectAltNameMatcher, TlsCertificate,
    UpstreamTlsContext,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use envoy_types::pb::google::protobuf::{value::Kind, BoolValue, Struct, Value as PbValue};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::external_service::{ExternalEndpoint, ExternalTls};
use umbra_core::go_net;
use umbra_core::resource::ResourceType;
use umbra_core::target_ref::{PROTOCOL_TAG, SERVICE_TAG};
use umbra_core::view::PolicySet;

use super::common::{http_protocol_options, tls_socket};
use crate::context::{common_protocol, MeshContext, Protocol};
use crate::envoy_core::eds_cluster;
use crate::load_assignment::{load_assignment, Endpoint};
use crate::names::HTTP_PROTOCOL_OPTIONS_KEY;
use crate::protobuf::secs;

/// The endpoints of ExternalService `service` that `dp` reaches (see the module docs);
/// `new_routes`: the MeshHTTPRoute/MeshTCPRoute path, which reads them unfiltered.
pub fn reachable<'a>(
    policies: &'a PolicySet,
    dp: &DataplaneSpec,
    service: &str,
    new_routes: bool,
) -> Vec<&'a ExternalEndpoint> {
    if policies.zone_egress || !policies.external.is_external(service) {
        return Vec::new();
    }
    if new_routes {
        return policies.external.of(service).iter().collect();
    }
    let permissions: Vec<_> = policies
        .old_policies_with_superseded(ResourceType::TrafficPermission)
        .collect();
    policies.external.permitted(service, dp, &permissions)
}

/// `true` when `service` is an ExternalService a sidecar reaches through its zone's egress
/// (the Mesh has `routing.zoneEgress: true`): its cluster is the mesh's EDS cluster over mTLS
/// to the egress ([`crate::base::outbound::outbound_cluster`]), its endpoints the egresses
/// ([`egress_endpoints`]).
pub fn through_egress(policies: &PolicySet, service: &str) -> bool {
    policies.zone_egress && policies.external.is_external(service)
}

/// Where a sidecar reaches ExternalService `service` through the zone's egresses (Kuma's
/// `fillExternalServicesOutboundsThroughEgress`): one endpoint per ExternalService resource
/// and egress ([`MeshContext::egresses`]), weight 1, with the resource's tags (its
/// `kuma.io/external-service-name` left out: the egress originates TLS, not the sidecar), in
/// the zone its `kuma.io/zone` tag names (this zone without one). Sorted.
pub fn egress_endpoints(ctx: &MeshContext, policies: &PolicySet, service: &str) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for es in policies.external.of(service) {
        let mut tags = es.tags.clone();
        tags.remove(umbra_core::external_service::EXTERNAL_SERVICE_NAME_TAG);
        let locality = ctx.zone.as_ref().map(|z| crate::load_assignment::Locality {
            zone: tags.get(crate::context::ZONE_TAG).unwrap_or(z).clone(),
            priority: 0,
        });
        out.extend(ctx.egresses.iter().map(|g| Endpoint {
            address: g.address.clone(),
            port: g.port,
            tags: tags.clone(),
            weight: 1,
            locality: locality.clone(),
        }));
    }
    out.sort();
    out
}

/// The protocol of `service`: its ExternalServices' common `kuma.io/protocol` when it is one
/// (every endpoint of the mesh, as Kuma's `GetServiceProtocol`), else the mesh's.
pub fn service_protocol(policies: &PolicySet, ctx: &MeshContext, service: &str) -> Protocol {
    let eps = policies.external.of(service);
    if eps.is_empty() {
        return ctx.service_protocol(service);
    }
    let ps: BTreeSet<Protocol> = eps
        .iter()
        .map(|e| Protocol::parse(e.tags.get(PROTOCOL_TAG).map(String::as_str)))
        .collect();
    common_protocol(&ps)
}

/// The cluster `name` of ExternalService endpoints `eps` (not empty) spoken to in `protocol`,
/// for a DPP that is IPv6 (`ipv6`) or not.
pub fn cluster(name: &str, eps: &[&ExternalEndpoint], protocol: Protocol, ipv6: bool) -> Cluster {
    let mut cluster = eds_cluster(name);
    cluster.eds_cluster_config = None;
    let all_ips = eps.iter().all(|e| go_net::is_ip(&e.host));
    if all_ips {
        cluster.cluster_discovery_type =
            Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
    } else {
        cluster.cluster_discovery_type =
            Some(ClusterDiscoveryType::Type(DiscoveryType::StrictDns as i32));
        cluster.dns_lookup_family = if ipv6 {
            DnsLookupFamily::Auto as i32
        } else {
            DnsLookupFamily::V4Only as i32
        };
    }
    let endpoints: Vec<Endpoint> = eps
        .iter()
        .map(|e| Endpoint::new(e.host.clone(), e.port, e.tags.clone()))
        .collect();
    cluster.load_assignment = Some(load_assignment(name, &endpoints));
    if protocol.is_http() {
        cluster.typed_extension_protocol_options.insert(
            HTTP_PROTOCOL_OPTIONS_KEY.to_owned(),
            crate::draft::pack(http_protocol_options(protocol, Some(secs(0)))),
        );
    }
    cluster.transport_socket_matches = eps
        .iter()
        .filter_map(|e| {
            let tls = e.tls.as_ref()?;
            Some(TransportSocketMatch {
                name: e.host.clone(),
                r#match: Some(tags_struct(&e.tags)),
                transport_socket: Some(tls_socket(&upstream_tls(tls, &e.host))),
            })
        })
        .collect();
    cluster
}

/// Set `autoHostRewrite` on every route of `vhosts` (a route to an ExternalService rewrites
/// the Host header to the upstream's address, Kuma's `RoutesConfigurer.routeAction`).
pub fn auto_host_rewrite(vhosts: &mut [VirtualHost]) {
    for r in vhosts.iter_mut().flat_map(|v| &mut v.routes) {
        if let Some(route::Action::Route(a)) = &mut r.action {
            a.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::AutoHostRewrite(
                BoolValue { value: true },
            ));
        }
    }
}

/// The endpoint's tags minus `kuma.io/service`, as the `transport_socket_match` metadata of
/// its load assignment holds them.
fn tags_struct(tags: &BTreeMap<String, String>) -> Struct {
    Struct {
        fields: tags
            .iter()
            .filter(|(k, _)| k.as_str() != SERVICE_TAG)
            .map(|(k, v)| {
                (
                    k.clone(),
                    PbValue {
                        kind: Some(Kind::StringValue(v.clone())),
                    },
                )
            })
            .collect(),
    }
}

fn inline(bytes: &[u8]) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    }
}

/// Kuma's `UpstreamTlsContextOutsideMesh` towards `host` (see the module docs).
pub fn upstream_tls(tls: &ExternalTls, host: &str) -> UpstreamTlsContext {
    let sni = match &tls.server_name {
        Some(s) => s.clone(),
        None if go_net::is_dns_name(host) && !go_net::is_ip(host) => host.to_owned(),
        None => String::new(),
    };
    let mut common: Option<CommonTlsContext> = None;
    if let (Some(cert), Some(key)) = (&tls.client_cert, &tls.client_key) {
        common = Some(CommonTlsContext {
            tls_certificates: vec![TlsCertificate {
                certificate_chain: Some(inline(cert)),
                private_key: Some(inline(key)),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    if let Some(ca) = &tls.ca_cert {
        let san = if sni.is_empty() { host } else { sni.as_str() };
        let matchers = if tls.skip_hostname_verification {
            Vec::new()
        } else {
            [SanType::Dns, SanType::IpAddress]
                .into_iter()
                .map(|t| SubjectAltNameMatcher {
                    san_type: t as i32,
                    matcher: Some(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::Exact(san.to_owned())),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect()
        };
        common
            .get_or_insert_with(Default::default)
            .validation_context_type = Some(ValidationContextType::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(inline(ca)),
                match_typed_subject_alt_names: matchers,
                ..Default::default()
            },
        ));
    }
    UpstreamTlsContext {
        common_tls_context: common,
        sni,
        allow_renegotiation: tls.allow_renegotiation,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(name: &str, host: &str, tls: Option<ExternalTls>) -> ExternalEndpoint {
        let mut tags = BTreeMap::from([
            ("kuma.io/service".to_owned(), "pay".to_owned()),
            ("kuma.io/protocol".to_owned(), "http".to_owned()),
        ]);
        if tls.is_some() {
            tags.insert(
                umbra_core::external_service::EXTERNAL_SERVICE_NAME_TAG.to_owned(),
                name.to_owned(),
            );
        }
        ExternalEndpoint {
            name: name.into(),
            host: host.into(),
            port: 443,
            declared_tags: tags.clone(),
            tags,
            tls,
        }
    }

    #[test]
    fn ip_endpoints_make_a_static_cluster_and_names_a_dns_one() {
        let ip = ep("a", "10.0.0.1", None);
        let c = cluster("pay", &[&ip], Protocol::Http, false);
        assert_eq!(
            c.cluster_discovery_type,
            Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32))
        );
        assert!(c.eds_cluster_config.is_none() && c.transport_socket_matches.is_empty());
        let la = c.load_assignment.unwrap();
        assert_eq!(la.cluster_name, "pay");
        assert_eq!(la.endpoints[0].lb_endpoints.len(), 1);
        let name = ep("b", "pay.example.com", None);
        let c = cluster("pay", &[&name, &ip], Protocol::Tcp, true);
        assert_eq!(
            c.cluster_discovery_type,
            Some(ClusterDiscoveryType::Type(DiscoveryType::StrictDns as i32))
        );
        assert_eq!(c.dns_lookup_family, DnsLookupFamily::Auto as i32);
        assert!(
            c.typed_extension_protocol_options.is_empty(),
            "TCP: no HTTP options"
        );
    }

    #[test]
    fn tls_endpoints_get_a_transport_socket_match_as_kuma_builds_it() {
        let tls = ExternalTls {
            ca_cert: Some(b"CA".to_vec()),
            client_cert: Some(b"CERT".to_vec()),
            client_key: Some(b"KEY".to_vec()),
            ..Default::default()
        };
        let e = ep("pay-api", "pay.example.com", Some(tls.clone()));
        let c = cluster("pay", &[&e], Protocol::Http, false);
        assert_eq!(c.transport_socket_matches.len(), 1);
        let m = &c.transport_socket_matches[0];
        assert_eq!(m.name, "pay.example.com");
        let fields = &m.r#match.as_ref().unwrap().fields;
        assert!(
            fields.contains_key("kuma.io/external-service-name")
                && !fields.contains_key("kuma.io/service")
        );
        let ctx = upstream_tls(&tls, "pay.example.com");
        assert_eq!(ctx.sni, "pay.example.com");
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(common.tls_certificates.len(), 1);
        let Some(ValidationContextType::ValidationContext(v)) = common.validation_context_type
        else {
            panic!("a validation context");
        };
        assert_eq!(v.match_typed_subject_alt_names.len(), 2);
        // An IP host: no SNI, the SAN check on the IP; skipHostnameVerification: no SAN check.
        let ctx = upstream_tls(&tls, "10.0.0.1");
        assert_eq!(ctx.sni, "");
        let skip = ExternalTls {
            skip_hostname_verification: true,
            server_name: Some("api.pay".into()),
            ..tls
        };
        let ctx = upstream_tls(&skip, "10.0.0.1");
        assert_eq!(ctx.sni, "api.pay");
        let Some(ValidationContextType::ValidationContext(v)) =
            ctx.common_tls_context.unwrap().validation_context_type
        else {
            panic!("a validation context");
        };
        assert!(v.match_typed_subject_alt_names.is_empty());
        // No CA: Kuma verifies nothing.
        let bare = upstream_tls(&ExternalTls::default(), "pay.example.com");
        assert!(bare.common_tls_context.is_none());
    }
}
