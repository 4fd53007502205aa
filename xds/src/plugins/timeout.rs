//! The timeout family: the old Timeout and MeshTimeout, see
//! `docs/research/kuma-2.7-policy-plugins.md` §1 (MeshTimeout) and §2 (old Timeout).
//!
//! [`apply`] runs two steps, in Kuma's order:
//!
//! 1. **Old Timeout** (Kuma 2.7 bakes it into the outbound generator:
//!    `pkg/xds/envoy/{listeners,clusters}/v3/timeout_configurer.go`,
//!    `pkg/xds/envoy/virtualhosts/routes_configurer.go`). The one Timeout selected per outbound
//!    service (`select_outbound_connection_policies`, over the Timeouts in effect *and* those a
//!    MeshTimeout supersedes: Kuma computes them unconditionally and MeshTimeout overrides field
//!    by field, seed 000's "leaking" values) sets, on the outbounds the base generator built:
//!    HTTP listeners' HCM `commonHttpProtocolOptions.idleTimeout` (`http.idleTimeout`),
//!    `streamIdleTimeout` (`http.streamIdleTimeout`, for gRPC else `grpc.streamIdleTimeout`) and
//!    route `timeout` (`http.requestTimeout`); TCP listeners' `idleTimeout` (`tcp.idleTimeout`);
//!    the cluster's `connectTimeout` (`connectTimeout`, else 5s) and, for HTTP protocols, its
//!    upstream `commonHttpProtocolOptions` {`idleTimeout`, `maxStreamDuration` (`http.`, for
//!    gRPC else `grpc.maxStreamDuration`; omitted when zero)}. Unset values are 0s.
//! 2. **MeshTimeout** (Kuma 2.7 `meshtimeout/plugin`):
//!    - HTTP listeners: HCM `commonHttpProtocolOptions.idleTimeout` = 0s (idle moves to the
//!      cluster), `requestHeadersTimeout` = conf or 0s, and every route `timeout` =
//!      requestTimeout or 15s and `idleTimeout` = streamIdleTimeout, else the route's own, else
//!      1800s. The HCM `streamIdleTimeout` is left alone (so an old Timeout's value stays, as in
//!      seed 000).
//!    - TCP listeners: tcp_proxy `idleTimeout` = idleTimeout or 3600s.
//!    - Clusters: `connectTimeout` = connectionTimeout or 5s; HTTP/HTTP2 clusters also get
//!      `commonHttpProtocolOptions` {idle 3600s, maxStreamDuration 0s, maxConnectionDuration 0s}
//!      defaults.
//!
//!    Inbounds use the `from` rules of their listener (an inbound no policy selected gets all
//!    defaults, as Kuma does), outbounds the `to` rules for `kuma.io/service`. An outbound that
//!    no timeout policy of either kind covers gets the defaults in every view (Kuma's built-in
//!    behaviour, i.e. its default `mesh-timeout-all` policy), so it never shows up in a shadow
//!    diff.
//!
//! On builtin gateways, MeshTimeout applies per listener: [`apply_gateway`].
//!
//! Errors: a MeshTimeout rule conf that does not fit the model is a
//! [`GenerateError::Policy`] naming the policies and the listener.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::HttpProtocolOptions as CoreHttpProtocolOptions;
use envoy_types::pb::envoy::config::route::v3::route;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use serde::Deserialize;
use umbra_core::old::timeout::TimeoutConf;
use umbra_core::old_matching::{select_outbound_connection_policies, OldPolicyRef};
use umbra_core::policies::mesh_timeout::Conf;
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::rules::{Element, RULE_MATCHES_HASH_TAG};
use umbra_core::target_ref::{PROTOCOL_TAG, SERVICE_TAG};

use super::edit::{edit_hcms, edit_http_protocol_options, edit_tcp_proxies, read_hcms};
use super::input::{Origins, PluginInput};
use crate::context::Protocol;
use crate::error::GenerateError;
use crate::names::{inbound_cluster_name, inbound_listener_name, outbound_listener_name};
use crate::protobuf::{duration, secs};
use crate::snapshot::Snapshot;

fn d(
    v: Option<&umbra_core::duration::Duration>,
    default_secs: i64,
) -> envoy_types::pb::google::protobuf::Duration {
    v.map_or_else(|| secs(default_secs), duration)
}

/// Apply the timeout family to `snap`: the old Timeout of each outbound service, then
/// MeshTimeout.
///
/// # Errors
/// [`GenerateError::Policy`] when a MeshTimeout rule conf does not fit the model.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let old_timeout_services = apply_old(snap, input, origins);
    apply_mesh_timeout(snap, input, origins, &old_timeout_services)
}

/// Step 1: bake the old Timeout selected for each outbound service into its listeners and
/// cluster. Returns the services an old Timeout configured.
fn apply_old(snap: &mut Snapshot, input: &PluginInput<'_>, origins: &Origins) -> BTreeSet<String> {
    let dp = input.dataplane;
    if input.new_routes {
        // Kuma's route plugins overwrite the legacy listeners and clusters it is baked into.
        return BTreeSet::new();
    }
    let timeouts: Vec<&Resource> = input
        .policies
        .old_policies_with_superseded(ResourceType::Timeout)
        .collect();
    let refs: Vec<OldPolicyRef<'_>> = timeouts
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let chosen = select_outbound_connection_policies(dp, &refs);
    let mut services = BTreeSet::new();
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let Some(timeout) = chosen.get(service).and_then(|i| match &timeouts[*i].spec {
            Spec::Timeout(t) => t.conf.as_ref(),
            _ => None,
        }) else {
            continue;
        };
        services.insert(service.to_owned());
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        // The listener once, with the service's own cluster; then its subset clusters.
        for (i, cluster) in origins.clusters_of(service).enumerate() {
            configure_old(
                snap,
                if i == 0 { &listener } else { "" },
                cluster,
                input.service_protocol(service),
                timeout,
            );
        }
    }
    services
}

/// The old Timeout `timeout` on listener `listener` (none when empty) and cluster `cluster` of
/// `protocol`: the
/// fields the outbound generator of Kuma 2.7 sets from it (unset values 0s, connect 5s).
pub(crate) fn configure_old(
    snap: &mut Snapshot,
    listener: &str,
    cluster: &str,
    protocol: Protocol,
    timeout: &TimeoutConf,
) {
    let http = timeout.http.as_ref();
    let grpc = timeout.grpc.as_ref();
    let pick = |v: Option<&umbra_core::duration::Duration>| d(v, 0);
    if let Some(l) = snap.listeners.get_mut(listener) {
        if protocol.is_http() {
            let stream_idle = match protocol {
                Protocol::Grpc => http
                    .and_then(|h| h.stream_idle_timeout.as_ref())
                    .or_else(|| grpc.and_then(|g| g.stream_idle_timeout.as_ref())),
                _ => http.and_then(|h| h.stream_idle_timeout.as_ref()),
            };
            let request = pick(http.and_then(|h| h.request_timeout.as_ref()));
            edit_hcms(l, |hcm| {
                hcm.common_http_protocol_options = Some(CoreHttpProtocolOptions {
                    idle_timeout: Some(pick(http.and_then(|h| h.idle_timeout.as_ref()))),
                    ..Default::default()
                });
                hcm.stream_idle_timeout = Some(pick(stream_idle));
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    for vh in &mut rc.virtual_hosts {
                        for r in &mut vh.routes {
                            if let Some(route::Action::Route(action)) = &mut r.action {
                                action.timeout = Some(request);
                            }
                        }
                    }
                }
            });
        } else {
            let idle = timeout.tcp.as_ref().and_then(|t| t.idle_timeout.as_ref());
            edit_tcp_proxies(l, |tcp| tcp.idle_timeout = Some(pick(idle)));
        }
    }
    if let Some(c) = snap.clusters.get_mut(cluster) {
        c.connect_timeout = Some(d(timeout.connect_timeout.as_ref(), 5));
        if protocol.is_http() {
            let max_stream = match protocol {
                Protocol::Grpc => http
                    .and_then(|h| h.max_stream_duration.as_ref())
                    .or_else(|| grpc.and_then(|g| g.max_stream_duration.as_ref())),
                _ => http.and_then(|h| h.max_stream_duration.as_ref()),
            };
            edit_http_protocol_options(c, |o| {
                o.common_http_protocol_options = Some(CoreHttpProtocolOptions {
                    idle_timeout: Some(pick(http.and_then(|h| h.idle_timeout.as_ref()))),
                    max_stream_duration: max_stream.filter(|v| !v.is_zero()).map(duration),
                    ..Default::default()
                });
            });
        }
    }
}

/// Step 2: MeshTimeout. `old_timeout_services` are the outbound services an old Timeout
/// configured in step 1.
fn apply_mesh_timeout(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &Origins,
    old_timeout_services: &BTreeSet<String>,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input.policies.matched(ResourceType::MeshTimeout, dp);
    let any_policy = !matched.to_rules.is_empty() || !matched.from_rules.is_empty();
    for inbound in &dp.networking.inbound {
        if !any_policy {
            break;
        }
        let key = dp.inbound_key(inbound);
        let listener = inbound_listener_name(&key.address, key.port);
        let conf = match matched.from_rules.get(&key) {
            None => Some(Conf::default()),
            Some(rules) => Confs::new(rules).compute(&Element::new(), &listener)?,
        };
        let protocol = Protocol::parse(inbound.tags.get(PROTOCOL_TAG).map(String::as_str));
        let cluster = inbound_cluster_name(inbound.effective_service_port());
        configure(
            snap,
            &listener,
            &cluster,
            protocol,
            conf.as_ref(),
            &BTreeMap::new(),
        );
    }
    let mut to_confs = Confs::new(&matched.to_rules);
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        let computed = if any_policy {
            to_confs.compute(
                &Element::from([(SERVICE_TAG.to_owned(), service.to_owned())]),
                &listener,
            )?
        } else {
            None
        };
        let conf = match computed {
            Some(c) => Some(c),
            // No timeout policy of either kind covers this outbound: Kuma's built-in defaults
            // (the values of its default MeshTimeout), the same in every view, so a shadow
            // MeshTimeout that does not cover it shows no change.
            None if !old_timeout_services.contains(service) => Some(Conf::default()),
            // An old Timeout covers it and no MeshTimeout is in this view: Kuma's plugin does
            // not run and the old values stand.
            None if !any_policy => continue,
            // Kuma: rules exist but none matches: only the unconditional HCM idle reset.
            None => None,
        };
        // Routes generated from a MeshHTTPRoute are named by its rule hash; a MeshTimeout
        // targeting that route gives them their own conf (Kuma's `configureRequestTimeout`).
        let mut route_confs = BTreeMap::new();
        if any_policy {
            for name in route_names(snap, &listener) {
                let element = Element::from([
                    (SERVICE_TAG.to_owned(), service.to_owned()),
                    (RULE_MATCHES_HASH_TAG.to_owned(), name.clone()),
                ]);
                if let Some(c) = to_confs.compute(&element, &listener)? {
                    route_confs.insert(name, c);
                }
            }
        }
        // The listener once, with the service's own cluster; then its subset clusters.
        for (i, cluster) in origins.clusters_of(service).enumerate() {
            configure(
                snap,
                if i == 0 { &listener } else { "" },
                cluster,
                input.service_protocol(service),
                conf.as_ref(),
                &route_confs,
            );
        }
    }
    Ok(())
}

/// MeshTimeout on one builtin gateway listener `listener` (Kuma's `applyToGateway`,
/// `ConfigureGatewayListener`, `ConfigureRouteAction`, `applyToClusters`):
/// - the `from` rules' Mesh-wide conf, when there is one, sets the listener's timeouts with the
///   gateway defaults: HTTP `commonHttpProtocolOptions.idleTimeout` (`idleTimeout`, 5m),
///   `requestHeadersTimeout` (0.5s), `streamIdleTimeout` (5s) and `requestTimeout` when set;
///   TCP the proxy's `idleTimeout` (5m);
/// - the `to` rules set each route's `timeout` (`http.requestTimeout`, 15s) and `idleTimeout`
///   (`http.streamIdleTimeout`, else the route's own) from the rule for its name
///   (`__rule-matches-hash__`), else from the Mesh-wide conf;
/// - each of `clusters` (`(cluster, service, protocol)`, the listener's backends) gets the
///   cluster timeouts of the `to` rule for its service, as an outbound's.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged conf does not fit MeshTimeout.
pub(crate) fn apply_gateway(
    snap: &mut Snapshot,
    listener: &str,
    from: Option<&umbra_core::rules::Rules>,
    to: Option<&umbra_core::rules::Rules>,
    clusters: &[(String, String, Protocol)],
) -> Result<(), GenerateError> {
    let from_conf = match from {
        Some(rules) => Confs::new(rules).compute(&Element::new(), listener)?,
        None => None,
    };
    if let (Some(conf), Some(l)) = (&from_conf, snap.listeners.get_mut(listener)) {
        let http = conf.http.as_ref();
        edit_hcms(l, |hcm| {
            hcm.common_http_protocol_options
                .get_or_insert_with(CoreHttpProtocolOptions::default)
                .idle_timeout = Some(d(conf.idle_timeout.as_ref(), 300));
            hcm.request_headers_timeout = Some(
                http.and_then(|h| h.request_headers_timeout.as_ref())
                    .map_or_else(|| crate::protobuf::millis(500), duration),
            );
            hcm.stream_idle_timeout = Some(d(http.and_then(|h| h.stream_idle_timeout.as_ref()), 5));
            if let Some(t) = http.and_then(|h| h.request_timeout.as_ref()) {
                hcm.request_timeout = Some(duration(t));
            }
        });
        edit_tcp_proxies(l, |tcp| {
            tcp.idle_timeout = Some(d(conf.idle_timeout.as_ref(), 300));
        });
    }
    let Some(to) = to else { return Ok(()) };
    let mut confs = Confs::new(to);
    let mesh = confs.compute(&Element::new(), listener)?;
    let mut route_confs = BTreeMap::new();
    for name in route_names(snap, listener) {
        let element = Element::from([(RULE_MATCHES_HASH_TAG.to_owned(), name.clone())]);
        if let Some(c) = confs.compute(&element, listener)?.or_else(|| mesh.clone()) {
            route_confs.insert(name, c);
        }
    }
    if let Some(l) = snap.listeners.get_mut(listener) {
        edit_hcms(l, |hcm| {
            if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                for r in rc.virtual_hosts.iter_mut().flat_map(|v| &mut v.routes) {
                    // An unnamed route (a MeshGatewayRoute's) takes the Mesh-wide conf.
                    let Some(conf) = route_confs.get(&r.name).or(mesh.as_ref()) else {
                        continue;
                    };
                    let http = conf.http.as_ref();
                    if let Some(route::Action::Route(action)) = &mut r.action {
                        action.timeout = Some(d(http.and_then(|h| h.request_timeout.as_ref()), 15));
                        action.idle_timeout =
                            match http.and_then(|h| h.stream_idle_timeout.as_ref()) {
                                Some(v) => Some(duration(v)),
                                None => action.idle_timeout.or(Some(secs(1800))),
                            };
                    }
                }
            }
        });
    }
    for (cluster, service, protocol) in clusters {
        let element = Element::from([(SERVICE_TAG.to_owned(), service.clone())]);
        if let Some(conf) = confs.compute(&element, listener)? {
            configure(snap, "", cluster, *protocol, Some(&conf), &BTreeMap::new());
        }
    }
    Ok(())
}

/// Typed confs of a rule list, deserialized once per rule (many outbounds share a rule).
struct Confs<'a> {
    rules: &'a umbra_core::rules::Rules,
    typed: Vec<Option<Conf>>,
}

impl<'a> Confs<'a> {
    fn new(rules: &'a umbra_core::rules::Rules) -> Self {
        Self {
            rules,
            typed: vec![None; rules.0.len()],
        }
    }

    /// The conf of the first rule containing `element`; a conf that does not fit the
    /// MeshTimeout model is an error naming the policies that gave it and the listener.
    fn compute(
        &mut self,
        element: &Element,
        listener: &str,
    ) -> Result<Option<Conf>, GenerateError> {
        let Some(i) = self
            .rules
            .0
            .iter()
            .position(|r| r.subset.contains_element(element))
        else {
            return Ok(None);
        };
        if self.typed[i].is_none() {
            let rule = &self.rules.0[i];
            let conf = Conf::deserialize(&rule.conf).map_err(|e| GenerateError::Policy {
                policy: rule
                    .origin
                    .iter()
                    .map(|o| format!("MeshTimeout/{}", o.meta.name))
                    .collect::<Vec<_>>()
                    .join(", "),
                resource: format!("{}/{listener}", umbra_xds_protocol::type_url::LISTENER_TYPE),
                reason: format!("merged conf does not fit MeshTimeout: {e}"),
            })?;
            self.typed[i] = Some(conf);
        }
        Ok(self.typed[i].clone())
    }
}

/// The names of the routes of `listener`'s inline route configuration (non-empty ones).
fn route_names(snap: &Snapshot, listener: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(l) = snap.listeners.get(listener) {
        read_hcms(l, |hcm| {
            if let Some(RouteSpecifier::RouteConfig(rc)) = &hcm.route_specifier {
                for vh in &rc.virtual_hosts {
                    out.extend(
                        vh.routes
                            .iter()
                            .map(|r| r.name.clone())
                            .filter(|n| !n.is_empty()),
                    );
                }
            }
        });
    }
    out.sort();
    out.dedup();
    out
}

fn configure(
    snap: &mut Snapshot,
    listener: &str,
    cluster: &str,
    protocol: Protocol,
    conf: Option<&Conf>,
    route_confs: &BTreeMap<String, Conf>,
) {
    let http = conf.and_then(|c| c.http.as_ref());
    if let Some(l) = snap.listeners.get_mut(listener) {
        if protocol.is_http() {
            edit_hcms(l, |hcm| {
                let common = hcm
                    .common_http_protocol_options
                    .get_or_insert_with(CoreHttpProtocolOptions::default);
                common.idle_timeout = Some(secs(0));
                let Some(conf) = conf else { return };
                hcm.request_headers_timeout =
                    Some(d(http.and_then(|h| h.request_headers_timeout.as_ref()), 0));
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    for vh in &mut rc.virtual_hosts {
                        for r in &mut vh.routes {
                            let http = route_confs.get(&r.name).map_or(http, |c| c.http.as_ref());
                            if let Some(route::Action::Route(action)) = &mut r.action {
                                action.timeout =
                                    Some(d(http.and_then(|h| h.request_timeout.as_ref()), 15));
                                action.idle_timeout =
                                    match http.and_then(|h| h.stream_idle_timeout.as_ref()) {
                                        Some(v) => Some(duration(v)),
                                        None => action.idle_timeout.or(Some(secs(1800))),
                                    };
                            }
                        }
                    }
                }
                let _ = conf;
            });
        } else if let Some(conf) = conf {
            edit_tcp_proxies(l, |tcp| {
                tcp.idle_timeout = Some(d(conf.idle_timeout.as_ref(), 3600))
            });
        }
    }
    let Some(conf) = conf else { return };
    if let Some(c) = snap.clusters.get_mut(cluster) {
        c.connect_timeout = Some(d(conf.connection_timeout.as_ref(), 5));
        if matches!(protocol, Protocol::Http | Protocol::Http2) {
            edit_http_protocol_options(c, |o| {
                let common = o
                    .common_http_protocol_options
                    .get_or_insert_with(CoreHttpProtocolOptions::default);
                common.idle_timeout = Some(d(conf.idle_timeout.as_ref(), 3600));
                common.max_stream_duration =
                    Some(d(http.and_then(|h| h.max_stream_duration.as_ref()), 0));
                common.max_connection_duration =
                    Some(d(http.and_then(|h| h.max_connection_duration.as_ref()), 0));
            });
        }
    }
}
