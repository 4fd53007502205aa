//! Clusters and EDS for route backends (Kuma's `meshroute.MakeSplit` + `GenerateClusters` +
//! `GenerateEndpoints`, and the legacy `clustersFromSplit`): one cluster per distinct backend
//! (service and tags), named by `Tags.DestinationClusterName`, with its own
//! ClusterLoadAssignment holding only the service's endpoints that carry the tags; the weighted
//! cluster list a route or TCP proxy points at.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::route::v3::{
    route_action, weighted_cluster::ClusterWeight, RouteAction, WeightedCluster,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{tcp_proxy, TcpProxy};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use umbra_core::target_ref::SERVICE_TAG;

use crate::base::external;
use crate::base::outbound::{destination_cluster_name, outbound_cluster};
use crate::load_assignment::load_assignment;
use crate::names::TCP_PROXY_FILTER;
use crate::plugins::input::{Origins, PluginInput};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;

/// One weighted destination cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Split {
    /// Cluster name.
    pub cluster: String,
    /// Weight (> 0).
    pub weight: u32,
    /// The cluster is an ExternalService's ([`crate::base::external`]): routes to it rewrite
    /// the Host header to the upstream's address (`autoHostRewrite`, as Kuma's).
    pub external: bool,
}

/// Ensure the cluster (and its EDS resource) for endpoints of `service` tagged `tags` exists
/// in `snap`, recording it under `service` in `origins`; return its name, and whether it is an
/// ExternalService's cluster (which carries its endpoints, every one of the service's whatever
/// `tags` say, as Kuma's). `tags` may hold `kuma.io/service` (ignored: `service` names it).
pub(super) fn ensure_cluster(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
    service: &str,
    tags: &BTreeMap<String, String>,
) -> (String, bool) {
    let ctx = input.ctx;
    let mut subset = tags.clone();
    subset.remove(SERVICE_TAG);
    let name = destination_cluster_name(service, &subset);
    if name != service {
        origins
            .service_clusters
            .entry(service.to_owned())
            .or_default()
            .insert(name.clone());
        origins.subset_tags.insert(name.clone(), subset.clone());
    }
    let external = external::reachable(input.policies, input.dataplane, service, input.new_routes);
    if !external.is_empty() {
        if !snap.clusters.contains_key(&name) {
            let protocol = external::service_protocol(input.policies, ctx, service);
            let ipv6 = input.dataplane.is_ipv6();
            let cluster = external::cluster(&name, &external, protocol, ipv6);
            snap.clusters.insert(name.clone(), cluster.into());
        }
        return (name, true);
    }
    let egress = external::through_egress(input.policies, service);
    if !snap.clusters.contains_key(&name) {
        let egress_protocol =
            egress.then(|| external::service_protocol(input.policies, ctx, service));
        snap.clusters.insert(
            name.clone(),
            outbound_cluster(service, &subset, ctx, egress_protocol).into(),
        );
    }
    if !snap.endpoints.contains_key(&name) {
        let egress_eps = egress.then(|| external::egress_endpoints(ctx, input.policies, service));
        let cla = if subset.is_empty() && egress_eps.is_none() {
            ctx.load_assignment(service)
        } else {
            let eps: Vec<_> = egress_eps
                .as_deref()
                .or_else(|| ctx.endpoints.get(service).map(Vec::as_slice))
                .unwrap_or_default()
                .iter()
                .filter(|e| subset.iter().all(|(k, v)| e.tags.get(k) == Some(v)))
                .cloned()
                .collect();
            crate::interner::Shared::from(load_assignment(&name, &eps))
        };
        snap.endpoints.insert(name.clone(), cla);
    }
    (name, false)
}

/// A route action to `splits`: one cluster, or weighted clusters; route timeout 0s.
pub(super) fn route_action(splits: &[Split]) -> RouteAction {
    let cluster_specifier = match splits {
        [one] => route_action::ClusterSpecifier::Cluster(one.cluster.clone()),
        many => route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: many
                .iter()
                .map(|s| ClusterWeight {
                    name: s.cluster.clone(),
                    weight: Some(UInt32Value { value: s.weight }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    };
    RouteAction {
        cluster_specifier: Some(cluster_specifier),
        timeout: Some(secs(0)),
        host_rewrite_specifier: splits.iter().any(|s| s.external).then_some(
            route_action::HostRewriteSpecifier::AutoHostRewrite(BoolValue { value: true }),
        ),
        ..Default::default()
    }
}

/// A TCP proxy network filter to `splits` (stats under `stat`).
pub(super) fn tcp_proxy_filter(
    stat: &str,
    splits: &[Split],
) -> envoy_types::pb::envoy::config::listener::v3::Filter {
    let cluster_specifier = match splits {
        [one] => tcp_proxy::ClusterSpecifier::Cluster(one.cluster.clone()),
        many => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: many
                .iter()
                .map(|s| tcp_proxy::weighted_cluster::ClusterWeight {
                    name: s.cluster.clone(),
                    weight: s.weight,
                    ..Default::default()
                })
                .collect(),
        }),
    };
    let tcp = TcpProxy {
        stat_prefix: stat.to_owned(),
        cluster_specifier: Some(cluster_specifier),
        ..Default::default()
    };
    envoy_types::pb::envoy::config::listener::v3::Filter {
        name: TCP_PROXY_FILTER.to_owned(),
        config_type: Some(
            envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(
                crate::draft::pack(tcp),
            ),
        ),
    }
}
