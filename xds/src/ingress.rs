//! Generation for a ZoneIngress proxy (Kuma 2.7's `IngressGenerator` and
//! `generator/zoneproxy`): the entry point of a zone for other zones' sidecars.
//!
//! The ingress never terminates mTLS: a listener `inbound:<address>:<port>` with a TLS
//! inspector reads the SNI of each connection and a filter chain per SNI passes it through by
//! TCP to the zone's endpoints of that service, so the callee sees the caller's own
//! certificate and its MeshTrafficPermission/TrafficPermission apply across zones.
//!
//! - **SNIs** (Kuma's `AddFilterChains`): for each service the ingress offers
//!   (`availableServices`, this mesh's), one per destination of the mesh's routes: every service
//!   (`{kuma.io/service: *}`) when the mesh has no TrafficRoute, each TrafficRoute split
//!   destination, each MeshHTTPRoute/MeshTCPRoute `to` target or tagged backend
//!   (`BuildMeshDestinations`). The SNI is `<service>{<tags>,mesh=<mesh>}`, tags sorted (Kuma's
//!   `SNIFromTags`), what the caller's outbound cluster sends. Each filter chain matches
//!   `transportProtocol: tls` and that server name, and TCP-proxies to cluster
//!   `<mesh>:<service>` with `metadataMatch` on the destination tags that actually split the
//!   endpoints (Kuma's "relevant tags").
//! - **Clusters** `<mesh>:<service>`: EDS over ADS, connect timeout 5s, an `lbSubsetConfig`
//!   (any endpoint as fallback, one selector per tag key set, no fallback per selector) when
//!   destinations split by tags.
//! - **Endpoints**: the service's endpoints in this zone, weight 1, in the zone's locality.
//! - An ingress with nothing to offer gets a listener answering
//!   `{"proxy":"<name>","zone":"<zone>"}` (Kuma's `GenerateEmptyDirectResponseListener`).
//!
//! Pure and deterministic, like [`crate::generate`].

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::cluster::{lb_subset_config, LbSubsetConfig};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    data_source, DataSource, Metadata, TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{
    listener_filter, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::direct_response::v3::Config as DirectResponse;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{tcp_proxy, TcpProxy};
use umbra_core::target_ref::SERVICE_TAG;
use umbra_core::view::PolicySet;
use umbra_core::zone_ingress::ZoneIngressSpec;

use umbra_core::dependencies::ingress::{mesh_destinations, MATCH_ALL};

use crate::context::MeshContext;
use crate::envoy_core::{eds_cluster, socket};
use crate::load_assignment::{load_assignment, Endpoint};
use crate::names::{inbound_listener_name, sanitize_metric, TCP_PROXY_FILTER};
use crate::protobuf::any;
use crate::snapshot::Snapshot;
use crate::tags::string_metadata;

/// Name of the TLS inspector listener filter.
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";

/// Name of the direct response network filter.
const DIRECT_RESPONSE: &str = "envoy.filters.network.direct_response";

/// One mesh as the ingress sees it: its context (endpoints) and its policies in one view.
#[derive(Debug, Clone, Copy)]
pub struct IngressMesh<'a> {
    /// The mesh's context (built in this zone).
    pub ctx: &'a MeshContext,
    /// The mesh's policies in the view being generated.
    pub policies: &'a PolicySet,
}

/// Kuma's `GetMeshClusterName`: `<mesh>:<service>`.
pub fn mesh_cluster_name(mesh: &str, service: &str) -> String {
    format!("{mesh}:{service}")
}

/// Kuma's `SNIFromTags`: `<service>{k=v,...}` over every tag but `kuma.io/service`, sorted.
pub fn sni_from_tags(tags: &BTreeMap<String, String>) -> String {
    let service = tags.get(SERVICE_TAG).map_or("", String::as_str);
    let rest: Vec<String> = tags
        .iter()
        .filter(|(k, _)| k.as_str() != SERVICE_TAG)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{service}{{{}}}", rest.join(","))
}

/// Kuma's `LbMetadata`: `envoy.lb` = `tags`; none for no tags.
fn lb_metadata(tags: &BTreeMap<String, String>) -> Option<Metadata> {
    (!tags.is_empty()).then(|| string_metadata("envoy.lb", tags))
}

pub(crate) fn filter<M: prost::Message + prost::Name>(name: &str, config: &M) -> Filter {
    Filter {
        name: name.to_owned(),
        config_type: Some(
            envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any(
                config,
            )),
        ),
    }
}

/// The ingress cluster `<mesh>:<service>` subsetting by `tag_keys`.
fn ingress_cluster(name: &str, tag_keys: &BTreeSet<Vec<String>>) -> Cluster {
    Cluster {
        lb_subset_config: (!tag_keys.is_empty()).then(|| LbSubsetConfig {
            fallback_policy: lb_subset_config::LbSubsetFallbackPolicy::AnyEndpoint as i32,
            subset_selectors: tag_keys
                .iter()
                .map(|keys| lb_subset_config::LbSubsetSelector {
                    keys: keys.clone(),
                    fallback_policy:
                        lb_subset_config::lb_subset_selector::LbSubsetSelectorFallbackPolicy::NoFallback
                            as i32,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..eds_cluster(name)
    }
}

/// One SNI passthrough filter chain per destination of `service` of `mesh` not yet in
/// `sni_used` (Kuma's `zoneproxy.AddFilterChains`), appended to `chains`: match
/// `transportProtocol: tls` and the SNI, TCP proxy to `<mesh>:<service>` with a metadata match
/// on the destination's tags that split `endpoints`. Returns those relevant tag sets (one per
/// chain added), what the cluster subsets by ([`passthrough_cluster`]).
pub(crate) fn passthrough_chains<'d>(
    mesh: &str,
    service: &str,
    endpoints: &[&Endpoint],
    destinations: impl IntoIterator<Item = &'d BTreeMap<String, String>>,
    sni_used: &mut BTreeSet<String>,
    chains: &mut Vec<FilterChain>,
) -> Vec<BTreeMap<String, String>> {
    let cluster = mesh_cluster_name(mesh, service);
    let all: BTreeSet<(&str, u32)> = endpoints
        .iter()
        .map(|e| (e.address.as_str(), e.port))
        .collect();
    let mut relevant_sets = Vec::new();
    for destination in destinations {
        let mut sni_tags = destination.clone();
        sni_tags.insert(SERVICE_TAG.to_owned(), service.to_owned());
        sni_tags.insert("mesh".to_owned(), mesh.to_owned());
        let sni = sni_from_tags(&sni_tags);
        if !sni_used.insert(sni.clone()) {
            continue;
        }
        // Only tags that split the endpoints go into the metadata match.
        let relevant: BTreeMap<String, String> = destination
            .iter()
            .filter(|(k, v)| {
                let matched = endpoints
                    .iter()
                    .filter(|e| v.as_str() == MATCH_ALL || e.tags.get(*k) == Some(*v))
                    .map(|e| (e.address.as_str(), e.port))
                    .collect::<BTreeSet<_>>();
                matched.len() < all.len()
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let tcp = TcpProxy {
            stat_prefix: sanitize_metric(&cluster),
            cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster.clone())),
            metadata_match: lb_metadata(
                &relevant
                    .iter()
                    .filter(|(k, _)| k.as_str() != SERVICE_TAG)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            ..Default::default()
        };
        chains.push(FilterChain {
            filter_chain_match: Some(FilterChainMatch {
                server_names: vec![sni],
                transport_protocol: "tls".to_owned(),
                ..Default::default()
            }),
            filters: vec![filter(TCP_PROXY_FILTER, &tcp)],
            ..Default::default()
        });
        relevant_sets.push(relevant);
    }
    relevant_sets
}

/// The passthrough cluster `<mesh>:<service>` (`cluster`) subsetting by the keys of the
/// relevant tag sets [`passthrough_chains`] returned and of the `match_all` destinations.
pub(crate) fn passthrough_cluster(
    cluster: &str,
    tag_sets: &[BTreeMap<String, String>],
    match_all: &[BTreeMap<String, String>],
) -> Cluster {
    let tag_keys: BTreeSet<Vec<String>> = tag_sets
        .iter()
        .chain(match_all.iter())
        .map(|t| {
            t.keys()
                .filter(|k| k.as_str() != SERVICE_TAG)
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|k| !k.is_empty())
        .collect();
    ingress_cluster(cluster, &tag_keys)
}

/// The TLS inspector listener filter the zone proxies read SNIs with.
pub(crate) fn tls_inspector() -> ListenerFilter {
    ListenerFilter {
        name: TLS_INSPECTOR.to_owned(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    }
}

/// Generate the snapshot of the ZoneIngress `name` (`zi`), serving `meshes` of its zone.
pub fn generate_ingress(name: &str, zi: &ZoneIngressSpec, meshes: &[IngressMesh<'_>]) -> Snapshot {
    let mut snap = Snapshot::default();
    let address = zi.networking.address.as_str();
    let port = zi.networking.port;
    let mut chains = Vec::new();
    let mut sni_used = BTreeSet::new();
    for m in meshes {
        let mesh = m.ctx.mesh.as_str();
        let destinations = mesh_destinations(m.policies);
        let match_all = destinations.get(MATCH_ALL).cloned().unwrap_or_default();
        // Service → (cluster tag sets).
        let mut services: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for service in zi.available_services.iter().filter(|s| s.mesh == mesh) {
            let service_name = service.service();
            let endpoints: Vec<&Endpoint> = m.ctx.local_endpoints(service_name).collect();
            let own = destinations.get(service_name).into_iter().flatten();
            let relevant = passthrough_chains(
                mesh,
                service_name,
                &endpoints,
                own.chain(match_all.iter()),
                &mut sni_used,
                &mut chains,
            );
            services
                .entry(service_name.to_owned())
                .or_default()
                .extend(relevant);
        }
        for (service, tag_sets) in services {
            let cluster = mesh_cluster_name(mesh, &service);
            snap.clusters.insert(
                cluster.clone(),
                passthrough_cluster(&cluster, &tag_sets, &match_all).into(),
            );
            let eps: Vec<Endpoint> = m
                .ctx
                .local_endpoints(&service)
                .map(|e| Endpoint {
                    weight: 1,
                    ..e.clone()
                })
                .collect();
            snap.endpoints
                .insert(cluster.clone(), load_assignment(&cluster, &eps).into());
        }
    }
    if chains.is_empty() {
        let response = serde_json::json!({"proxy": name, "zone": zi.zone}).to_string();
        chains.push(FilterChain {
            filters: vec![filter(
                DIRECT_RESPONSE,
                &DirectResponse {
                    response: Some(DataSource {
                        specifier: Some(data_source::Specifier::InlineString(response)),
                        ..Default::default()
                    }),
                },
            )],
            ..Default::default()
        });
    }
    let listener_name = inbound_listener_name(address, port);
    snap.listeners.insert(
        listener_name.clone(),
        crate::interner::Shared::from(Listener {
            name: listener_name,
            address: Some(socket(address, port)),
            traffic_direction: TrafficDirection::Inbound as i32,
            listener_filters: vec![tls_inspector()],
            filter_chains: chains,
            ..Default::default()
        }),
    );
    snap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_follows_kuma() {
        let tags = BTreeMap::from([
            (SERVICE_TAG.to_owned(), "backend".to_owned()),
            ("mesh".to_owned(), "default".to_owned()),
            ("version".to_owned(), "v2".to_owned()),
        ]);
        assert_eq!(sni_from_tags(&tags), "backend{mesh=default,version=v2}");
        assert_eq!(mesh_cluster_name("default", "backend"), "default:backend");
    }
}
