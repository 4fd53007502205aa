//! Load balancing: the MeshLoadBalancingStrategy plugin (Kuma 2.7.29,
//! `pkg/plugins/policies/meshloadbalancingstrategy/plugin/{v1alpha1/plugin.go,xds/*.go}`).
//!
//! For every outbound (no `backendRef`), the `to` rules for `{kuma.io/service: <service>}`:
//! - `loadBalancer` on each cluster of the service (its own and the route plugins' subset
//!   clusters): `lbPolicy` `ROUND_ROBIN`, `LEAST_REQUEST` (with `choiceCount` and
//!   `activeRequestBias` when given), `RANDOM`, `RING_HASH` (ring sizes and hash function)
//!   or `MAGLEV` (table size);
//! - for `RingHash` and `Maglev` with `hashPolicies`: each route of the outbound listener gets
//!   the hash policies (header, cookie with TTL and path, connection source IP, query
//!   parameter, filter state; `terminal` as given).
//!
//! - `localityAwareness` on the endpoints of each of those clusters ([`super::locality`]): with
//!   local zone affinity tags or cross-zone failover rules, the ClusterLoadAssignment is rebuilt
//!   into Kuma's priority groups (and the cluster weighs localities when affinity tags are
//!   given); otherwise, unless `disabled`, other zones' endpoints get priority 1 so the local
//!   zone is preferred.
//!
//! Builtin gateways: [`apply_gateway`], per listener and backend.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    common_lb_config, ring_hash_lb_config::HashFunction as EnvoyHashFunction, LbConfig, LbPolicy,
    LeastRequestLbConfig, MaglevLbConfig, RingHashLbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::RuntimeDouble;
use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::{
    ConnectionProperties, Cookie, FilterState, Header, PolicySpecifier, QueryParameter,
};
use envoy_types::pb::envoy::config::route::v3::route_action::HashPolicy as EnvoyHashPolicy;
use envoy_types::pb::envoy::config::route::v3::{route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::google::protobuf::{UInt32Value, UInt64Value};
use serde::Deserialize;
use umbra_core::policies::mesh_load_balancing_strategy::{
    Conf, HashFunction, HashPolicy, HashPolicyType, LoadBalancer, LoadBalancerType,
};
use umbra_core::policies::mesh_fault_injection::IntOrString;
use umbra_core::resource::ResourceType;
use umbra_core::rules::Element;
use umbra_core::target_ref::SERVICE_TAG;

use super::edit::edit_hcms;
use super::input::{Origins, PluginInput};
use super::locality;
use crate::error::GenerateError;
use crate::names::outbound_listener_name;
use crate::protobuf::duration;
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::CLUSTER_TYPE;

/// Apply MeshLoadBalancingStrategy to `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged conf does not fit the model or an
/// `activeRequestBias` is not a number.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input
        .policies
        .matched(ResourceType::MeshLoadBalancingStrategy, dp);
    if matched.to_rules.is_empty() {
        return Ok(());
    }
    let mut confs: BTreeMap<&str, (Conf, String)> = BTreeMap::new();
    for outbound in dp
        .networking
        .outbound
        .iter()
        .filter(|o| o.backend_ref.is_none())
    {
        let service = outbound.service();
        let Some((conf, policies)) = service_conf(&matched.to_rules, service)? else {
            continue;
        };
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        if let (Some(l), Some(policies)) = (
            snap.listeners.get_mut(&listener),
            conf.load_balancer.as_ref().and_then(hash_policies),
        ) {
            let envoy: Vec<EnvoyHashPolicy> = policies.iter().map(hash_policy).collect();
            edit_hcms(l, |hcm| {
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    for r in rc.virtual_hosts.iter_mut().flat_map(|vh| &mut vh.routes) {
                        if let Some(route::Action::Route(action)) = &mut r.action {
                            action.hash_policy.extend(envoy.iter().cloned());
                        }
                    }
                }
            });
        }
        confs.insert(service, (conf, policies));
    }
    // Several outbounds may reach one service: its clusters are configured once.
    for (service, (conf, policies)) in &confs {
        let clusters: Vec<String> = origins.clusters_of(service).map(str::to_owned).collect();
        configure_clusters(snap, input, &clusters, conf, policies)?;
    }
    Ok(())
}

/// MeshLoadBalancingStrategy on builtin gateway listener `listener` (Kuma's
/// `configureGateway`): for each backend `(cluster, service)` of the listener, the `to` rules'
/// conf for the service configures the cluster and its endpoints as an outbound's; a route
/// gets the hash policies of its first backend's service (Kuma appends every backend
/// service's hash policies to every route of the listener; Umbra keeps each route to its own).
///
/// # Errors
/// As [`apply`].
pub(crate) fn apply_gateway(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    listener: &str,
    rules: &umbra_core::rules::Rules,
    backends: &[(String, String)],
) -> Result<(), GenerateError> {
    let mut by_cluster: BTreeMap<&str, Vec<EnvoyHashPolicy>> = BTreeMap::new();
    for (cluster, service) in backends {
        let Some((conf, policies)) = service_conf(rules, service)? else {
            continue;
        };
        configure_clusters(snap, input, std::slice::from_ref(cluster), &conf, &policies)?;
        if let Some(hp) = conf.load_balancer.as_ref().and_then(hash_policies) {
            by_cluster.insert(cluster, hp.iter().map(hash_policy).collect());
        }
    }
    if by_cluster.is_empty() {
        return Ok(());
    }
    if let Some(l) = snap.listeners.get_mut(listener) {
        edit_hcms(l, |hcm| {
            if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                for r in rc.virtual_hosts.iter_mut().flat_map(|vh| &mut vh.routes) {
                    if let Some(route::Action::Route(action)) = &mut r.action {
                        let first = match &action.cluster_specifier {
                            Some(route_action::ClusterSpecifier::Cluster(c)) => Some(c.as_str()),
                            Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                                w.clusters.first().map(|c| c.name.as_str())
                            }
                            _ => None,
                        };
                        if let Some(hp) = first.and_then(|c| by_cluster.get(c)) {
                            action.hash_policy.extend(hp.iter().cloned());
                        }
                    }
                }
            }
        });
    }
    Ok(())
}

/// The typed conf of the `to` rule for `service` and the policies it comes from.
fn service_conf(
    rules: &umbra_core::rules::Rules,
    service: &str,
) -> Result<Option<(Conf, String)>, GenerateError> {
    let element = Element::from([(SERVICE_TAG.to_owned(), service.to_owned())]);
    let Some(rule) = rules.compute(&element) else {
        return Ok(None);
    };
    let policies = rule
        .origin
        .iter()
        .map(|o| format!("MeshLoadBalancingStrategy/{}", o.meta.name))
        .collect::<Vec<_>>()
        .join(", ");
    let conf = Conf::deserialize(&rule.conf).map_err(|e| GenerateError::Policy {
        policy: policies.clone(),
        resource: format!("{CLUSTER_TYPE}/{service}"),
        reason: format!("merged conf does not fit MeshLoadBalancingStrategy: {e}"),
    })?;
    Ok(Some((conf, policies)))
}

/// Configure `clusters` (and their endpoints) with `conf` (see the module docs).
fn configure_clusters(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    clusters: &[String],
    conf: &Conf,
    policies: &str,
) -> Result<(), GenerateError> {
    let dp_tags = input.dataplane.tag_set();
    let local = input.ctx.zone.as_deref().unwrap_or_default();
    let la = conf.locality_awareness.as_ref();
    for name in clusters {
        if let Some(cluster) = snap.clusters.get_mut(name) {
            if locality::weighs_localities(la) {
                cluster
                    .common_lb_config
                    .get_or_insert_with(Default::default)
                    .locality_config_specifier = Some(
                    common_lb_config::LocalityConfigSpecifier::LocalityWeightedLbConfig(
                        common_lb_config::LocalityWeightedLbConfig::default(),
                    ),
                );
            }
            if let Some(lb) = &conf.load_balancer {
                configure_cluster(cluster, lb).map_err(|e| GenerateError::Policy {
                    policy: policies.to_owned(),
                    resource: format!("{CLUSTER_TYPE}/{name}"),
                    reason: e.to_string(),
                })?;
            }
        }
        if let Some(cla) = snap.endpoints.get_mut(name) {
            let rebuilt = match la {
                Some(l) if locality::rebuilds(Some(l)) => {
                    Some(locality::locality_aware(cla, l, &dp_tags, local))
                }
                _ if locality::prefers_local(la)
                    && cla
                        .endpoints
                        .iter()
                        .any(|l| l.locality.as_ref().is_some_and(|z| z.zone != local)) =>
                {
                    Some(locality::prefer_local(cla, local))
                }
                _ => None,
            };
            if let Some(new) = rebuilt {
                *cla = crate::interner::Shared::from(new);
            }
        }
    }
    Ok(())
}

fn hash_policies(lb: &LoadBalancer) -> Option<&[HashPolicy]> {
    match lb.lb_type {
        LoadBalancerType::RingHash => lb.ring_hash.as_ref()?.hash_policies.as_deref(),
        LoadBalancerType::Maglev => lb.maglev.as_ref()?.hash_policies.as_deref(),
        _ => None,
    }
}

/// Kuma's `HashPolicyConfigurer` for one policy.
fn hash_policy(p: &HashPolicy) -> EnvoyHashPolicy {
    let specifier = match p.policy_type {
        HashPolicyType::Header => PolicySpecifier::Header(Header {
            header_name: p
                .header
                .as_ref()
                .map(|h| h.name.clone())
                .unwrap_or_default(),
            ..Default::default()
        }),
        HashPolicyType::Cookie => {
            let c = p.cookie.clone().unwrap_or_default();
            PolicySpecifier::Cookie(Cookie {
                name: c.name,
                ttl: c.ttl.as_ref().map(duration),
                path: c.path.unwrap_or_default(),
                ..Default::default()
            })
        }
        HashPolicyType::Connection => PolicySpecifier::ConnectionProperties(ConnectionProperties {
            source_ip: p
                .connection
                .as_ref()
                .and_then(|c| c.source_ip)
                .unwrap_or(false),
        }),
        HashPolicyType::QueryParameter => PolicySpecifier::QueryParameter(QueryParameter {
            name: p
                .query_parameter
                .as_ref()
                .map(|q| q.name.clone())
                .unwrap_or_default(),
        }),
        HashPolicyType::FilterState => PolicySpecifier::FilterState(FilterState {
            key: p
                .filter_state
                .as_ref()
                .map(|f| f.key.clone())
                .unwrap_or_default(),
        }),
    };
    EnvoyHashPolicy {
        terminal: p.terminal.unwrap_or(false),
        policy_specifier: Some(specifier),
    }
}

/// Why a MeshLoadBalancingStrategy load balancer cannot be applied to a cluster (reported as
/// the reason of a [`GenerateError::Policy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadBalancingError {
    /// `leastRequest.activeRequestBias` is not a number.
    #[error("activeRequestBias {value} is not a number")]
    ActiveRequestBias {
        /// The bias as written.
        value: IntOrString,
    },
}

/// Kuma's `LoadBalancerConfigurer`.
///
/// # Errors
/// [`LoadBalancingError`] when `activeRequestBias` is not a number.
fn configure_cluster(cluster: &mut Cluster, lb: &LoadBalancer) -> Result<(), LoadBalancingError> {
    match lb.lb_type {
        LoadBalancerType::RoundRobin => cluster.lb_policy = LbPolicy::RoundRobin as i32,
        LoadBalancerType::Random => cluster.lb_policy = LbPolicy::Random as i32,
        LoadBalancerType::LeastRequest => {
            cluster.lb_policy = LbPolicy::LeastRequest as i32;
            let Some(lr) = &lb.least_request else {
                return Ok(());
            };
            let bias = match &lr.active_request_bias {
                None => None,
                Some(b) => Some(RuntimeDouble {
                    default_value: b.to_f64().ok_or_else(|| {
                        LoadBalancingError::ActiveRequestBias { value: b.clone() }
                    })?,
                    ..Default::default()
                }),
            };
            let choice_count = lr.choice_count.map(|value| UInt32Value { value });
            if bias.is_some() || choice_count.is_some() {
                cluster.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                    choice_count,
                    active_request_bias: bias,
                    ..Default::default()
                }));
            }
        }
        LoadBalancerType::RingHash => {
            cluster.lb_policy = LbPolicy::RingHash as i32;
            let Some(rh) = &lb.ring_hash else {
                return Ok(());
            };
            let hash_function = match rh.hash_function {
                Some(HashFunction::MurmurHash2) => EnvoyHashFunction::MurmurHash2,
                _ => EnvoyHashFunction::XxHash,
            };
            cluster.lb_config = Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
                minimum_ring_size: rh.min_ring_size.map(|v| UInt64Value {
                    value: u64::from(v),
                }),
                maximum_ring_size: rh.max_ring_size.map(|v| UInt64Value {
                    value: u64::from(v),
                }),
                hash_function: hash_function as i32,
            }));
        }
        LoadBalancerType::Maglev => {
            cluster.lb_policy = LbPolicy::Maglev as i32;
            if let Some(size) = lb.maglev.as_ref().and_then(|m| m.table_size) {
                cluster.lb_config = Some(LbConfig::MaglevLbConfig(MaglevLbConfig {
                    table_size: Some(UInt64Value {
                        value: u64::from(size),
                    }),
                }));
            }
        }
    }
    Ok(())
}
