//! The old connection policies on a builtin gateway's listeners (Kuma 2.7.29
//! `pkg/plugins/runtime/gateway`: `route_table_generator.go` and `cluster_generator.go` over the
//! matches of [`umbra_core::gateway_old`]), applied before the new policies, which override
//! them field by field as on sidecars:
//! - each route of a virtual host gets, from the policy [`best_for_route`] picks over its
//!   backends (matched with the tags of the virtual host's listener): the Retry's `http` retry
//!   policy, the Timeout's `http.requestTimeout` (when set) and the RateLimit's `http` per-route
//!   `local_ratelimit` config;
//! - a TCP listener's proxy gets the Retry's `tcp.maxConnectAttempts`;
//! - each backend cluster gets, from the policy [`for_destination`] picks for its tags: the
//!   Timeout's cluster timeouts, the CircuitBreaker's thresholds and outlier detection, the
//!   HealthCheck's checks.
//!
//! Which old policies take part follows the sidecar plugins: Timeout, Retry and CircuitBreaker
//! in effect or superseded (Kuma bakes them in and the new plugin overrides), HealthCheck and
//! RateLimit in effect only.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::route::v3::{route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::google::protobuf::UInt32Value;
use umbra_core::gateway::SelectedGateway;
use umbra_core::gateway_old::{best_for_route, for_destination};
use umbra_core::old_matching::OldPolicyRef;
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::target_ref::SERVICE_TAG;

use super::gateway_policies::{clusters_of, listeners_of, service_of};
use crate::context::Protocol;
use crate::error::GenerateError;
use crate::plugins::edit::{edit_hcms, edit_tcp_proxies};
use crate::plugins::input::{Origins, PluginInput};
use crate::protobuf::{any, duration};
use crate::snapshot::Snapshot;

/// The old policies of one type taking part, as matching sees them.
struct Family<'a> {
    policies: Vec<&'a Resource>,
    refs: Vec<OldPolicyRef<'a>>,
}

impl<'a> Family<'a> {
    fn new(policies: Vec<&'a Resource>) -> Self {
        let refs = policies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
            .collect();
        Self { policies, refs }
    }

    /// The policy for backend `destination` of a listener tagged `listener`.
    fn for_destination(
        &self,
        listener: &BTreeMap<String, String>,
        destination: &BTreeMap<String, String>,
    ) -> Option<OldPolicyRef<'a>> {
        for_destination(listener, destination, &self.refs)
    }

    /// The policy for backend `destination` of a listener tagged `listener`, as a resource.
    fn pick(
        &self,
        listener: &BTreeMap<String, String>,
        destination: &BTreeMap<String, String>,
    ) -> Option<&'a Resource> {
        self.for_destination(listener, destination)
            .map(|p| self.policies[p.idx])
    }

    /// The policy of a route to `destinations`.
    fn for_route(
        &self,
        listener: &BTreeMap<String, String>,
        destinations: &[BTreeMap<String, String>],
    ) -> Option<&'a Resource> {
        let picks: Vec<(&str, Option<OldPolicyRef<'a>>)> = destinations
            .iter()
            .map(|d| {
                let service = d.get(SERVICE_TAG).map_or("", String::as_str);
                (service, self.for_destination(listener, d))
            })
            .collect();
        best_for_route(&picks).map(|p| self.policies[p.idx])
    }
}

/// The backend tags of cluster `cluster`: its service and its subset's tags.
fn destination(origins: &Origins, cluster: &str) -> Option<BTreeMap<String, String>> {
    let service = service_of(origins, cluster)?;
    let mut tags = origins
        .subset_tags
        .get(cluster)
        .cloned()
        .unwrap_or_default();
    tags.insert(SERVICE_TAG.to_owned(), service);
    Some(tags)
}

/// Apply the old connection policies to the listeners of `gateway` (see the module docs);
/// `ports` are its listener ports with their protocol.
///
/// # Errors
/// [`GenerateError::Policy`] when a RateLimit's `onRateLimit.status` is not a status Envoy
/// knows.
pub(super) fn apply<'a>(
    snap: &mut Snapshot,
    input: &PluginInput<'a>,
    origins: &Origins,
    gateway: &SelectedGateway,
    ports: &BTreeMap<u32, Protocol>,
) -> Result<(), GenerateError> {
    let with_superseded =
        |ty: ResourceType| Family::new(input.policies.old_policies_with_superseded(ty).collect());
    let in_effect = |ty: ResourceType| Family::new(input.old_policies(ty).iter().collect());
    let timeouts = with_superseded(ResourceType::Timeout);
    let retries = with_superseded(ResourceType::Retry);
    let breakers = with_superseded(ResourceType::CircuitBreaker);
    let checks = in_effect(ResourceType::HealthCheck);
    let limits = in_effect(ResourceType::RateLimit);
    if [&timeouts, &retries, &breakers, &checks, &limits]
        .iter()
        .all(|f| f.refs.is_empty())
    {
        return Ok(());
    }
    for (port, protocol) in ports {
        let on_port: Vec<_> = gateway
            .listeners
            .iter()
            .filter(|l| l.port == *port)
            .collect();
        let Some(wildcard) = on_port
            .iter()
            .find(|l| l.hostname == "*")
            .or_else(|| on_port.first())
        else {
            continue;
        };
        // A virtual host's listener: the one with its hostname, else the `*` one.
        let tags_of = |host: &str| {
            &on_port
                .iter()
                .find(|l| l.hostname == host)
                .unwrap_or(wildcard)
                .tags
        };
        for name in listeners_of(snap, &gateway.name, *port) {
            let clusters = clusters_of(snap, &name);
            let Some(listener) = snap.listeners.get_mut(&name) else {
                continue;
            };
            let mut error = None;
            if *protocol == Protocol::Http {
                edit_hcms(listener, |hcm| {
                    let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier else {
                        return;
                    };
                    for vh in &mut rc.virtual_hosts {
                        let tags = tags_of(&vh.name);
                        for r in &mut vh.routes {
                            let Some(route::Action::Route(action)) = &mut r.action else {
                                continue;
                            };
                            let dests: Vec<_> = route_clusters(action)
                                .iter()
                                .filter_map(|c| destination(origins, c))
                                .collect();
                            if let Some(Spec::Retry(p)) =
                                retries.for_route(tags, &dests).map(|r| &r.spec)
                            {
                                if let Some(policy) = p.conf.as_ref().and_then(|c| {
                                    crate::plugins::retry::old_retry_policy(c, Protocol::Http)
                                }) {
                                    action.retry_policy = Some(policy);
                                }
                            }
                            if let Some(Spec::Timeout(p)) =
                                timeouts.for_route(tags, &dests).map(|r| &r.spec)
                            {
                                let request = p
                                    .conf
                                    .as_ref()
                                    .and_then(|c| c.http.as_ref())
                                    .and_then(|h| h.request_timeout.as_ref())
                                    .filter(|t| !t.is_zero());
                                if let Some(t) = request {
                                    action.timeout = Some(duration(t));
                                }
                            }
                            if let Some(Spec::RateLimit(p)) =
                                limits.for_route(tags, &dests).map(|r| &r.spec)
                            {
                                if let Some(http) = p.conf.as_ref().and_then(|c| c.http.as_ref()) {
                                    match crate::plugins::rate_limit::old_route_config(http) {
                                        Ok(config) => {
                                            r.typed_per_filter_config.insert(
                                                crate::plugins::rate_limit::HTTP_FILTER.to_owned(),
                                                any(&config),
                                            );
                                        }
                                        Err(e) => {
                                            error = Some(GenerateError::Policy {
                                                policy: "RateLimit".to_owned(),
                                                resource: format!(
                                                    "{}/{name}",
                                                    umbra_xds_protocol::type_url::LISTENER_TYPE
                                                ),
                                                reason: e.to_string(),
                                            });
                                        }
                                    }
                                }
                            }
                        }
                    }
                });
            } else {
                let dests: Vec<_> = clusters
                    .iter()
                    .filter_map(|c| destination(origins, c))
                    .collect();
                let attempts = match retries.for_route(&wildcard.tags, &dests).map(|r| &r.spec) {
                    Some(Spec::Retry(p)) => p
                        .conf
                        .as_ref()
                        .and_then(|c| c.tcp.as_ref())
                        .map(|t| t.max_connect_attempts),
                    _ => None,
                };
                if let Some(value) = attempts.filter(|v| *v > 0) {
                    edit_tcp_proxies(listener, |tcp| {
                        tcp.max_connect_attempts = Some(UInt32Value { value });
                    });
                }
            }
            if let Some(e) = error {
                return Err(e);
            }
            for cluster in &clusters {
                let Some(dest) = destination(origins, cluster) else {
                    continue;
                };
                // Kuma's gateway cluster protocol: the backend's `kuma.io/protocol` tag, else
                // the route's (`InferServiceProtocol`), not the service's.
                let service_protocol = match dest.get("kuma.io/protocol") {
                    Some(p) => Protocol::parse(Some(p)),
                    None if *protocol == Protocol::Http => Protocol::Http,
                    None => Protocol::Tcp,
                };
                // A per-host cluster answers to its host's policies.
                let source = origins.host_tags.get(cluster).unwrap_or(&wildcard.tags);
                let pick = |f: &Family<'a>| f.pick(source, &dest);
                if let Some(Spec::Timeout(p)) = pick(&timeouts).map(|r| &r.spec) {
                    if let Some(conf) = &p.conf {
                        crate::plugins::timeout::configure_old(
                            snap,
                            "",
                            cluster,
                            service_protocol,
                            conf,
                        );
                    }
                }
                let Some(c) = snap.clusters.get_mut(cluster) else {
                    continue;
                };
                if let Some(Spec::CircuitBreaker(p)) = pick(&breakers).map(|r| &r.spec) {
                    if let Some(conf) = &p.conf {
                        crate::plugins::circuit_breaker::configure_old(c, conf);
                    }
                }
                if let Some(Spec::HealthCheck(p)) = pick(&checks).map(|r| &r.spec) {
                    if let Some(conf) = &p.conf {
                        crate::plugins::health_check::configure_old(c, conf, *protocol);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The clusters a route action sends to.
fn route_clusters(action: &envoy_types::pb::envoy::config::route::v3::RouteAction) -> Vec<String> {
    match &action.cluster_specifier {
        Some(route_action::ClusterSpecifier::Cluster(c)) => vec![c.clone()],
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
            w.clusters.iter().map(|c| c.name.clone()).collect()
        }
        _ => Vec::new(),
    }
}
