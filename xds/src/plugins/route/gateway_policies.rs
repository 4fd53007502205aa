//! The `targetRef` policies Umbra applies to a builtin gateway's listeners, after
//! [`super::gateway`] built them (Kuma 2.7.29: each policy plugin's `applyToGateway(s)` path,
//! over the rules of [`umbra_core::gateway_rules`]):
//! - **MeshRateLimit**: its `to` rules per listener port, as Kuma's `configureGateway`
//!   ([`crate::plugins::rate_limit::apply_gateway`]);
//! - **MeshTimeout**: its `from` rules on the listener, its `to` rules on the routes and on the
//!   clusters the listener sends to ([`crate::plugins::timeout::apply_gateway`]);
//! - **MeshRetry**: its `to` rules on the listener's routes (HTTP) or TCP proxy
//!   ([`crate::plugins::retry::apply_gateway`]);
//! - **MeshAccessLog**: its `to` and `from` rules' loggers on every listener
//!   ([`crate::plugins::access_log::apply_gateway`]; TCP backends named, as on sidecars);
//! - **MeshLoadBalancingStrategy**: its `to` rules per backend service on the listener's
//!   clusters, endpoints and routes ([`crate::plugins::load_balancing::apply_gateway`]);
//! - **MeshFaultInjection**: its `to` rules' fault filters on HTTP listeners
//!   ([`crate::plugins::fault_injection::apply_gateway`]);
//! - **MeshCircuitBreaker** and **MeshHealthCheck**: their `to` rules for each backend's service
//!   on the clusters the listener sends to (Kuma keys MeshHealthCheck's rules by listener and
//!   hostname; Umbra by listener, which differs only when a policy's `targetRef.tags` select some
//!   hostnames' listeners of a port and not others).
//!
//! Before them, [`super::gateway`] applies the old connection policies Kuma applies to
//! gateways ([`super::gateway_old`]).
//!
//! These are [`umbra_core::gateway_rules::GENERATED_ON_GATEWAYS`]; every other policy type
//! selecting a builtin gateway is named under `notGenerated`
//! ([`umbra_core::view::PolicySet::not_generated`]).

use umbra_core::gateway::SelectedGateway;
use umbra_core::gateway_rules::gateway_rules;
use umbra_core::matching::MatchOptions;
use umbra_core::policy::TargetRefPolicy;
use umbra_core::resource::ResourceType;
use umbra_core::view::View;

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::{route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;

use crate::context::Protocol;
use crate::error::GenerateError;
use crate::plugins::edit::{read_hcms, read_tcp_proxies};
use crate::plugins::input::{Origins, PluginInput};
use crate::snapshot::Snapshot;

/// Apply the policies of the view to the listeners of `gateway` in `snap` (see the module
/// docs).
///
/// # Errors
/// [`GenerateError::Policy`] when a policy's merged conf cannot be written.
pub(super) fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
    gateway: &SelectedGateway,
) -> Result<(), GenerateError> {
    let routes: Vec<&TargetRefPolicy> = input.policies.routes.iter().collect();
    let opts = MatchOptions {
        include_shadow: input.policies.view == Some(View::Shadow),
    };
    let list = |ty: ResourceType| input.policies.new.get(&ty).map_or(&[][..], Vec::as_slice);
    let ports = ports(gateway);
    let rate_limits = gateway_rules(
        input.dataplane,
        gateway,
        list(ResourceType::MeshRateLimit),
        &routes,
        opts,
    );
    for (port, rules) in &rate_limits.to {
        for name in listeners_of(snap, &gateway.name, *port) {
            if let Some(listener) = snap.listeners.get_mut(&name) {
                crate::plugins::rate_limit::apply_gateway(listener, rules)?;
            }
        }
    }
    let rules_of =
        |ty: ResourceType| gateway_rules(input.dataplane, gateway, list(ty), &routes, opts);
    let timeouts = rules_of(ResourceType::MeshTimeout);
    let retries = rules_of(ResourceType::MeshRetry);
    let breakers = rules_of(ResourceType::MeshCircuitBreaker);
    let checks = rules_of(ResourceType::MeshHealthCheck);
    let faults = rules_of(ResourceType::MeshFaultInjection);
    let logs = rules_of(ResourceType::MeshAccessLog);
    let balancing = rules_of(ResourceType::MeshLoadBalancingStrategy);
    let mut log_listeners: Vec<crate::plugins::access_log::GatewayListenerRules<'_>> = Vec::new();
    let tags = crate::tags::serialize_tags(&input.dataplane.tag_set());
    for (&port, &protocol) in &ports {
        for name in listeners_of(snap, &gateway.name, port) {
            let clusters: Vec<(String, String, Protocol)> = clusters_of(snap, &name)
                .into_iter()
                .filter_map(|c| {
                    let service = service_of(origins, &c)?;
                    let protocol = input.service_protocol(&service);
                    Some((c, service, protocol))
                })
                .collect();
            crate::plugins::timeout::apply_gateway(
                snap,
                &name,
                timeouts.from.get(&port),
                timeouts.to.get(&port),
                &clusters,
            )?;
            if let (Some(rules), Some(listener)) =
                (retries.to.get(&port), snap.listeners.get_mut(&name))
            {
                crate::plugins::retry::apply_gateway(listener, rules, protocol)?;
            }
            if let (Some(rules), Some(listener), Protocol::Http) = (
                faults.to.get(&port),
                snap.listeners.get_mut(&name),
                protocol,
            ) {
                crate::plugins::fault_injection::apply_gateway(listener, rules)?;
            }
            log_listeners.push((name.clone(), logs.to.get(&port), logs.from.get(&port)));
            if let Some(rules) = balancing.to.get(&port) {
                let backends: Vec<(String, String)> = clusters
                    .iter()
                    .map(|(c, s, _)| (c.clone(), s.clone()))
                    .collect();
                crate::plugins::load_balancing::apply_gateway(
                    snap, input, &name, rules, &backends,
                )?;
            }
            for (cluster, service, _) in &clusters {
                let element = umbra_core::rules::Element::from([(
                    umbra_core::target_ref::SERVICE_TAG.to_owned(),
                    service.clone(),
                )]);
                if let Some(rules) = breakers.to.get(&port) {
                    crate::plugins::circuit_breaker::configure_new(snap, cluster, rules, &element)?;
                }
                if let Some(rules) = checks.to.get(&port) {
                    crate::plugins::health_check::apply_gateway_cluster(
                        snap, cluster, rules, service, protocol, &tags,
                    )?;
                }
            }
        }
    }
    crate::plugins::access_log::apply_gateway(snap, input, origins, &log_listeners)?;
    Ok(())
}

/// The clusters listener `name` sends to: its routes' and TCP proxies' clusters.
pub(super) fn clusters_of(snap: &Snapshot, name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(listener) = snap.listeners.get(name) else {
        return out;
    };
    read_hcms(listener, |hcm| {
        if let Some(RouteSpecifier::RouteConfig(rc)) = &hcm.route_specifier {
            for r in rc.virtual_hosts.iter().flat_map(|v| &v.routes) {
                if let Some(route::Action::Route(a)) = &r.action {
                    // Mirrored requests' clusters are the route's backends too.
                    out.extend(a.request_mirror_policies.iter().map(|m| m.cluster.clone()));
                    match &a.cluster_specifier {
                        Some(route_action::ClusterSpecifier::Cluster(c)) => {
                            out.insert(c.clone());
                        }
                        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                            out.extend(w.clusters.iter().map(|c| c.name.clone()));
                        }
                        _ => {}
                    }
                }
            }
        }
    });
    read_tcp_proxies(listener, |tcp| match &tcp.cluster_specifier {
        Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => {
            out.insert(c.clone());
        }
        Some(tcp_proxy::ClusterSpecifier::WeightedClusters(w)) => {
            out.extend(w.clusters.iter().map(|c| c.name.clone()));
        }
        None => {}
    });
    out
}

/// The service cluster `cluster` is of: the service named after it, or the one whose subset
/// cluster it is ([`Origins::service_clusters`]).
pub(super) fn service_of(origins: &Origins, cluster: &str) -> Option<String> {
    origins
        .service_clusters
        .iter()
        .find(|(_, clusters)| clusters.contains(cluster))
        .map(|(service, _)| service.clone())
        .or_else(|| (!cluster.contains(':')).then(|| cluster.to_owned()))
}

/// The listener ports of `gateway`, each with its protocol: one Envoy listener per port
/// (listeners of a port are merged, with one protocol).
pub(super) fn ports(gateway: &SelectedGateway) -> std::collections::BTreeMap<u32, Protocol> {
    gateway
        .listeners
        .iter()
        .map(|l| {
            let tcp = l.protocol == "TCP" || l.protocol == "TLS";
            (l.port, if tcp { Protocol::Tcp } else { Protocol::Http })
        })
        .collect()
}

/// The names of the gateway's listeners on `port` (`<gateway>:<protocol>:<port>`).
pub(super) fn listeners_of(snap: &Snapshot, gateway: &str, port: u32) -> Vec<String> {
    let suffix = format!(":{port}");
    snap.listeners
        .keys()
        .filter(|n| {
            n.strip_prefix(gateway)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|rest| rest.ends_with(&suffix) && rest.matches(':').count() == 1)
        })
        .cloned()
        .collect()
}
