//! Local rate limits: the old RateLimit baked into inbound listeners, then the MeshRateLimit
//! plugin (Kuma 2.7.29).
//!
//! **Old RateLimit** (Kuma's `InboundProxyGenerator` with `RateLimitConfigurer` and
//! `pkg/xds/envoy/routes/v3/ratelimit.go`), in a view where it is in effect (no MeshRateLimit
//! in the mesh, the old-type-off rule of seed 000): per inbound, every RateLimit whose
//! `destinations` match it (Kuma's `SelectInboundConnectionMatchingPolicies`: most specific
//! first source first, newer first on ties). On HTTP, HTTP/2 and gRPC inbounds, each one with
//! an `http` section gets a route before the catch-all one: the same route plus an
//! `x-kuma-tags` regex header match for its `sources` and a `local_ratelimit` per-route config
//! (`requests` tokens every `interval`, `onRateLimit` status and headers); the HTTP connection
//! manager gets an empty `envoy.filters.http.local_ratelimit` filter before the router.
//!
//! **Old RateLimit on outbounds** (Kuma's `OutboundProxyGenerator`, "backwards compatibility
//! to support RateLimit for ExternalServices without ZoneEgress", and `RoutesConfigurer`): on
//! the legacy outbound path of a Mesh without `routing.zoneEgress`, each HTTP outbound whose
//! service a RateLimit selects (Kuma's `SelectOutboundConnectionPolicies`: `sources` match the
//! DPP, `destinations` the service) gets the empty filter before the router, and its routes to
//! an ExternalService (those with `autoHostRewrite`) the per-route config of its `http`
//! section. Mesh services are limited on their inbounds instead.
//!
//! **MeshRateLimit** (`pkg/plugins/policies/meshratelimit/plugin/{v1alpha1/plugin.go,
//! xds/configurer.go}`): for each inbound without an old RateLimit, the `from` rules of its
//! listener computed for the whole mesh (`from` items are `kind: Mesh` only):
//! - `local.http` (not disabled, with a `requestRate`): when the inbound's route configuration
//!   has a single route per virtual host, that route gets the `local_ratelimit` per-route
//!   config (unless it already has one), and the HTTP connection manager the filter before the
//!   router (once);
//! - `local.tcp` (not disabled, with a `connectionRate`): a network
//!   `envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit` filter first in the
//!   filter chain, `num` tokens every `interval`. Kuma adds it to every inbound, HTTP ones
//!   included (it then limits connections).
//!
//! **MeshRateLimit on builtin gateways**: [`apply_gateway`], per listener.
//!
//! Zone egresses get no rate limit from Umbra (named under `notGenerated`).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, RuntimeFractionalPercent,
};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    header_matcher, route, route_action, route_match, HeaderMatcher, Route,
};
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit as HttpLocalRateLimit;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::local_ratelimit::v3::LocalRateLimit as TcpLocalRateLimit;
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, RegexMatcher, StringMatcher};
use envoy_types::pb::envoy::r#type::v3::{
    fractional_percent::DenominatorType, FractionalPercent, HttpStatus, StatusCode, TokenBucket,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use serde::Deserialize;
use umbra_core::dataplane::InboundKey;
use umbra_core::old::rate_limit::Http as OldHttp;
use umbra_core::old_matching::{
    select_inbound_matching_policies, select_outbound_connection_policies, OldPolicyRef,
};
use umbra_core::policies::mesh_rate_limit::{Conf, LocalHttp, LocalTcp};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::rules::Element;

use super::edit::{edit_hcms, insert_before_router, matching_regex, regex_or, MissingRouter};
use super::input::{Origins, PluginInput};
use crate::context::Protocol;
use crate::error::GenerateError;
use crate::names::{inbound_listener_name, outbound_listener_name, KUMA_TAGS_HEADER};
use crate::protobuf::{any, duration, secs};
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// The HTTP local rate limit filter (and its per-route config key).
pub const HTTP_FILTER: &str = "envoy.filters.http.local_ratelimit";
/// The network local rate limit filter, named by its type as Kuma does.
pub const TCP_FILTER: &str = "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit";

/// Apply the old RateLimits in effect, then MeshRateLimit, to `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when a rate limit cannot be written: an `onRateLimit.status` that
/// is not an HTTP status Envoy knows, a merged MeshRateLimit conf that does not fit the model.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    _origins: &mut Origins,
) -> Result<(), GenerateError> {
    let with_old = apply_old(snap, input)?;
    apply_old_outbound(snap, input)?;
    apply_new(snap, input, &with_old)?;
    observe(snap, input)
}

/// Name of the HTTP filter observe mode adds for a MeshRateLimit (an
/// `envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit`).
pub const OBSERVE_HTTP_FILTER: &str = "umbra.observe.http.local_ratelimit";

/// Observe mode (issue 40): on each inbound whose `from` rules an observed shadow MeshRateLimit
/// contributes to, the `local.http` limit the inbound would get if the observed policies (and
/// no other shadow policy) went live, as a local rate limit filter of its own
/// ([`OBSERVE_HTTP_FILTER`]) with its token bucket at the filter level, `filterEnabled` 100%
/// and `filterEnforced` 0%: Envoy takes a token for every request and counts
/// `<statPrefix>.http_local_rate_limit.ok|rate_limited`, and refuses nothing. The `statPrefix`
/// is `<inbound stat name>.umbra_observe_limit.<policies>`
/// ([`umbra_core::observed::joined_names`]). It goes before the live
/// local rate limit filter (or the router), after RBAC, so it sees the requests the live rate
/// limit sees. The Shadow view would configure the limit per route, one bucket per route of
/// the inbound's single-route virtual hosts; the observer's one bucket per inbound is the same
/// for Kuma's inbound routes. An old RateLimit in effect stays as it is (the Shadow view would
/// switch it off, the old-type-off rule). A MeshRateLimit with `local.tcp` is refused when
/// observed (validation): the network local rate limit cannot count without enforcing.
fn observe(snap: &mut Snapshot, input: &PluginInput<'_>) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let Some((matched, observed)) = input
        .policies
        .observed_matched(ResourceType::MeshRateLimit, dp)
    else {
        return Ok(());
    };
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        let Some(rule) = matched
            .from_rules
            .get(&key)
            .and_then(|rules| rules.compute(&Element::new()))
        else {
            continue;
        };
        let names: BTreeSet<&str> = rule
            .origin
            .iter()
            .map(|o| o.meta.name.as_str())
            .filter(|n| observed.contains(n))
            .collect();
        if names.is_empty() {
            continue; // no observed policy changes this inbound's limit
        }
        let name = inbound_listener_name(&key.address, key.port);
        let (conf, policies) = merged_conf(rule, &name)?;
        let Some(limit) = http_limit(&conf) else {
            continue; // the would-be limit is none: nothing to count
        };
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let mut config = route_config(&limit).map_err(|e| policy_error(policies, &name, e))?;
        config.stat_prefix = format!(
            "{}.{}.{}",
            crate::names::sanitize_metric(&name),
            umbra_core::observed::OBSERVE_LIMIT_STAT,
            umbra_core::observed::joined_names(names.iter().copied())
        );
        let percent = |numerator, runtime_key: &str| RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator,
                denominator: DenominatorType::Hundred as i32,
            }),
            runtime_key: runtime_key.to_owned(),
        };
        config.filter_enabled = Some(percent(100, "umbra_observe_rate_limit_enabled"));
        config.filter_enforced = Some(percent(0, "umbra_observe_rate_limit_enforced"));
        let filter = HttpFilter {
            name: OBSERVE_HTTP_FILTER.to_owned(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&config))),
            ..Default::default()
        };
        edit_hcms(listener, |hcm| {
            let at = hcm
                .http_filters
                .iter()
                .position(|f| f.name == HTTP_FILTER || f.name == crate::names::ROUTER_FILTER)
                .unwrap_or(hcm.http_filters.len());
            hcm.http_filters.insert(at, filter.clone());
        });
    }
    Ok(())
}

/// The old RateLimits selected for the DPP's outbounds (see the module docs).
fn apply_old_outbound(snap: &mut Snapshot, input: &PluginInput<'_>) -> Result<(), GenerateError> {
    let policies: &[Resource] = input.old_policies(ResourceType::RateLimit);
    if policies.is_empty() || input.new_routes || input.policies.zone_egress {
        return Ok(());
    }
    let refs: Vec<OldPolicyRef<'_>> = policies
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let dp = input.dataplane;
    let chosen = select_outbound_connection_policies(dp, &refs);
    for outbound in dp
        .networking
        .outbound
        .iter()
        .filter(|o| o.backend_ref.is_none())
    {
        let Some(r) = chosen.get(outbound.service()).map(|i| &policies[*i]) else {
            continue;
        };
        if !input.service_protocol(outbound.service()).is_http() {
            continue;
        }
        let name = outbound_listener_name(outbound.effective_address(), outbound.port);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let policy = || format!("RateLimit/{}", r.meta.name);
        let config = match &r.spec {
            Spec::RateLimit(rl) => rl.conf.as_ref().and_then(|c| c.http.as_ref()),
            _ => None,
        }
        .map(|http| route_config(&old_limit(http)))
        .transpose()
        .map_err(|e| policy_error(policy(), &name, e))?;
        insert_before_router(listener, &[http_filter()], false)
            .map_err(|e| policy_error(policy(), &name, e))?;
        let Some(config) = config else {
            continue;
        };
        edit_hcms(listener, |hcm| {
            let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier else {
                return;
            };
            for route in rc.virtual_hosts.iter_mut().flat_map(|v| &mut v.routes) {
                let external = matches!(
                    &route.action,
                    Some(route::Action::Route(a)) if matches!(
                        a.host_rewrite_specifier,
                        Some(route_action::HostRewriteSpecifier::AutoHostRewrite(_))
                    )
                );
                if external {
                    route
                        .typed_per_filter_config
                        .insert(HTTP_FILTER.to_owned(), any(&config));
                }
            }
        });
    }
    Ok(())
}

/// A response header added to a limited answer: `(name, value, append)`.
type LimitHeader = (String, String, bool);

/// A route-level rate limit (Kuma's `RateLimitConfiguration`).
struct RouteLimit {
    requests: u32,
    interval: PbDuration,
    /// `(status, headers as (name, value, append))`, when `onRateLimit` is given.
    on_rate_limit: Option<(u32, Vec<LimitHeader>)>,
}

/// Why a RateLimit or MeshRateLimit cannot be configured on an inbound listener (reported as
/// the reason of a [`GenerateError::Policy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitError {
    /// `onRateLimit.status` is not a status code Envoy's `StatusCode` enum has.
    #[error("onRateLimit.status {code} is not an HTTP status Envoy knows")]
    UnknownStatus {
        /// The status as written.
        code: u32,
    },
    /// The listener's HTTP connection manager has no router.
    #[error(transparent)]
    MissingRouter(#[from] MissingRouter),
}

/// Kuma's `NewRateLimitConfiguration`: the per-route `LocalRateLimit`.
fn route_config(limit: &RouteLimit) -> Result<HttpLocalRateLimit, RateLimitError> {
    let hundred = || RuntimeFractionalPercent {
        default_value: Some(FractionalPercent {
            numerator: 100,
            denominator: DenominatorType::Hundred as i32,
        }),
        runtime_key: String::new(),
    };
    let mut status = None;
    let mut headers = Vec::new();
    if let Some((code, list)) = &limit.on_rate_limit {
        if *code != 0 {
            let known = i32::try_from(*code)
                .ok()
                .and_then(|c| StatusCode::try_from(c).ok())
                .is_some();
            if !known {
                return Err(RateLimitError::UnknownStatus { code: *code });
            }
            status = Some(HttpStatus { code: *code as i32 });
        }
        headers = list
            .iter()
            .map(|(key, value, append)| HeaderValueOption {
                header: Some(HeaderValue {
                    key: key.clone(),
                    value: value.clone(),
                    ..Default::default()
                }),
                append_action: if *append {
                    HeaderAppendAction::AppendIfExistsOrAdd
                } else {
                    HeaderAppendAction::OverwriteIfExistsOrAdd
                } as i32,
                ..Default::default()
            })
            .collect();
    }
    Ok(HttpLocalRateLimit {
        stat_prefix: "rate_limit".to_owned(),
        status,
        token_bucket: Some(TokenBucket {
            max_tokens: limit.requests,
            tokens_per_fill: Some(UInt32Value {
                value: limit.requests,
            }),
            fill_interval: Some(limit.interval),
        }),
        filter_enabled: Some(RuntimeFractionalPercent {
            runtime_key: "local_rate_limit_enabled".to_owned(),
            ..hundred()
        }),
        filter_enforced: Some(RuntimeFractionalPercent {
            runtime_key: "local_rate_limit_enforced".to_owned(),
            ..hundred()
        }),
        response_headers_to_add: headers,
        ..Default::default()
    })
}

/// The empty HTTP filter the per-route configs act through (Kuma's gateway HTTP filter chains
/// always carry it).
pub(crate) fn http_filter() -> HttpFilter {
    HttpFilter {
        name: HTTP_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(
            &HttpLocalRateLimit {
                stat_prefix: "rate_limit".to_owned(),
                ..Default::default()
            },
        ))),
        ..Default::default()
    }
}

/// The MeshRateLimit conf `rule` merged for listener `listener`, with the policies it comes
/// from (`MeshRateLimit/<name>, ...`).
///
/// # Errors
/// [`GenerateError::Policy`] when the merged conf does not fit MeshRateLimit.
fn merged_conf(
    rule: &umbra_core::rules::Rule,
    listener: &str,
) -> Result<(Conf, String), GenerateError> {
    let policies = rule
        .origin
        .iter()
        .map(|o| format!("MeshRateLimit/{}", o.meta.name))
        .collect::<Vec<_>>()
        .join(", ");
    let conf = Conf::deserialize(&rule.conf).map_err(|e| {
        policy_error(
            policies.clone(),
            listener,
            format!("merged conf does not fit MeshRateLimit: {e}"),
        )
    })?;
    Ok((conf, policies))
}

fn policy_error(policy: String, listener: &str, reason: impl std::fmt::Display) -> GenerateError {
    GenerateError::Policy {
        policy,
        resource: format!("{LISTENER_TYPE}/{listener}"),
        reason: reason.to_string(),
    }
}

/// Kuma's `RateLimitConfigurationFromProto`.
/// An old RateLimit's `http` section as a per-route `local_ratelimit` config (builtin gateway
/// routes, Kuma's `RateLimitConfigurationFromProto`).
///
/// # Errors
/// [`RateLimitError::UnknownStatus`] for an `onRateLimit.status` Envoy does not know.
pub(crate) fn old_route_config(http: &OldHttp) -> Result<HttpLocalRateLimit, RateLimitError> {
    route_config(&old_limit(http))
}

fn old_limit(http: &OldHttp) -> RouteLimit {
    RouteLimit {
        requests: http.requests,
        interval: http.interval.as_ref().map_or_else(|| secs(0), duration),
        on_rate_limit: Some((
            http.on_rate_limit
                .as_ref()
                .and_then(|o| o.status)
                .unwrap_or(0),
            http.on_rate_limit
                .iter()
                .flat_map(|o| &o.headers)
                .map(|h| (h.key.clone(), h.value.clone(), h.append == Some(true)))
                .collect(),
        )),
    }
}

/// The old RateLimits in effect; returns the inbounds at least one of them matched (whatever
/// their protocol, like Kuma's `RateLimitsInbound`).
fn apply_old(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
) -> Result<BTreeSet<InboundKey>, GenerateError> {
    let policies: &[Resource] = input.old_policies(ResourceType::RateLimit);
    let mut matched = BTreeSet::new();
    if policies.is_empty() {
        return Ok(matched);
    }
    let refs: Vec<OldPolicyRef<'_>> = policies
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let dp = input.dataplane;
    for (key, indexes) in select_inbound_matching_policies(dp, &refs) {
        if indexes.is_empty() {
            continue;
        }
        matched.insert(key.clone());
        if !Protocol::of_inbound(dp, &key).is_http() {
            continue;
        }
        let name = inbound_listener_name(&key.address, key.port);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let mut routes = Vec::new();
        for i in indexes {
            let r = &policies[i];
            let Spec::RateLimit(rl) = &r.spec else {
                continue;
            };
            let Some(http) = rl.conf.as_ref().and_then(|c| c.http.as_ref()) else {
                continue;
            };
            let config = route_config(&old_limit(http))
                .map_err(|e| policy_error(format!("RateLimit/{}", r.meta.name), &name, e))?;
            let sources: Vec<String> = rl
                .sources
                .iter()
                .map(|s| matching_regex(&s.match_tags))
                .collect();
            routes.push((regex_or(&sources), config));
        }
        add_source_routes(listener, &routes);
        insert_before_router(listener, &[http_filter()], false)
            .map_err(|e| policy_error("RateLimit".to_owned(), &name, e))?;
    }
    Ok(matched)
}

/// Put one route per `(x-kuma-tags regex, config)` before the catch-all route of each virtual
/// host: a copy of it matching the header, with the per-route config.
fn add_source_routes(listener: &mut Listener, routes: &[(String, HttpLocalRateLimit)]) {
    if routes.is_empty() {
        return;
    }
    edit_hcms(listener, |hcm| {
        let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier else {
            return;
        };
        for vh in &mut rc.virtual_hosts {
            let Some(fallback) = vh.routes.last().cloned() else {
                continue;
            };
            let limited = routes.iter().map(|(regex, config)| {
                let mut r: Route = fallback.clone();
                let m = r.r#match.get_or_insert_with(Default::default);
                if m.path_specifier.is_none() {
                    m.path_specifier = Some(route_match::PathSpecifier::Prefix("/".to_owned()));
                }
                if !regex.is_empty() {
                    m.headers.push(HeaderMatcher {
                        name: KUMA_TAGS_HEADER.to_owned(),
                        header_match_specifier: Some(
                            header_matcher::HeaderMatchSpecifier::StringMatch(StringMatcher {
                                match_pattern: Some(string_matcher::MatchPattern::SafeRegex(
                                    RegexMatcher {
                                        regex: regex.clone(),
                                        ..Default::default()
                                    },
                                )),
                                ..Default::default()
                            }),
                        ),
                        ..Default::default()
                    });
                }
                r.typed_per_filter_config
                    .insert(HTTP_FILTER.to_owned(), any(config));
                r
            });
            let at = vh.routes.len() - 1;
            let limited: Vec<Route> = limited.collect();
            vh.routes.splice(at..at, limited);
        }
    });
}

/// MeshRateLimit on every inbound without an old RateLimit.
fn apply_new(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    with_old: &BTreeSet<InboundKey>,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input.policies.matched(ResourceType::MeshRateLimit, dp);
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        if with_old.contains(&key) {
            continue;
        }
        let Some(rules) = matched.from_rules.get(&key) else {
            continue;
        };
        let Some(rule) = rules.compute(&Element::new()) else {
            continue;
        };
        let name = inbound_listener_name(&key.address, key.port);
        let (conf, policies) = merged_conf(rule, &name)?;
        let Some(local) = conf.local else { continue };
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        if let Some(http) = &local.http {
            configure_http(listener, http).map_err(|e| policy_error(policies.clone(), &name, e))?;
        }
        if let Some(tcp) = &local.tcp {
            configure_tcp(listener, tcp);
        }
    }
    Ok(())
}

/// MeshRateLimit on one builtin gateway listener (Kuma's `applyToGateways` /
/// `configureGateway` / `ConfigureGatewayRoute`): `rules` are the listener's `to` rules
/// ([`umbra_core::gateway_rules`]). The Mesh-wide conf (`local.http`, `local.tcp`) configures
/// the filter chains as on an inbound (the HTTP filter before the router, the TCP network
/// filter first); then each route gets the `local_ratelimit` per-route config of the rule for
/// its name (`__rule-matches-hash__`, a MeshRateLimit targeting a MeshHTTPRoute), else the
/// Mesh-wide one, unless it has one already. Where only a route's rule limits, Kuma adds the
/// per-route config without the HTTP filter (so nothing is limited); Umbra adds the filter.
///
/// # Errors
/// [`GenerateError::Policy`] for a merged conf that does not fit MeshRateLimit or an unknown
/// `onRateLimit.status`.
pub(crate) fn apply_gateway(
    listener: &mut Listener,
    rules: &umbra_core::rules::Rules,
) -> Result<(), GenerateError> {
    let name = listener.name.clone();
    let conf_of = |element: &Element| -> Result<Option<(Conf, String)>, GenerateError> {
        let Some(rule) = rules.compute(element) else {
            return Ok(None);
        };
        merged_conf(rule, &name).map(Some)
    };
    let limit_of =
        |conf: &Option<(Conf, String)>| -> Result<Option<HttpLocalRateLimit>, GenerateError> {
            let Some((conf, policies)) = conf else {
                return Ok(None);
            };
            let Some(limit) = http_limit(conf) else {
                return Ok(None);
            };
            route_config(&limit)
                .map(Some)
                .map_err(|e| policy_error(policies.clone(), &name, e))
        };
    let mesh = conf_of(&Element::new())?;
    if let Some((
        Conf {
            local: Some(local), ..
        },
        policies,
    )) = &mesh
    {
        if let Some(http) = &local.http {
            configure_http(listener, http).map_err(|e| policy_error(policies.clone(), &name, e))?;
        }
        if let Some(tcp) = &local.tcp {
            configure_tcp(listener, tcp);
        }
    }
    let default = limit_of(&mesh)?;
    let mut names = Vec::new();
    edit_hcms(listener, |hcm| {
        if let Some(RouteSpecifier::RouteConfig(rc)) = &hcm.route_specifier {
            names.extend(
                rc.virtual_hosts
                    .iter()
                    .flat_map(|v| &v.routes)
                    .map(|r| r.name.clone()),
            );
        }
    });
    let mut per_route = std::collections::BTreeMap::new();
    for route in names {
        let element = Element::from([(
            umbra_core::rules::RULE_MATCHES_HASH_TAG.to_owned(),
            route.clone(),
        )]);
        if let Some(limit) = limit_of(&conf_of(&element)?)?.or_else(|| default.clone()) {
            per_route.insert(route, any(&limit));
        }
    }
    if per_route.is_empty() {
        return Ok(());
    }
    let mut needs_filter = false;
    edit_hcms(listener, |hcm| {
        if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
            for r in rc.virtual_hosts.iter_mut().flat_map(|v| &mut v.routes) {
                if let Some(config) = per_route.get(&r.name) {
                    r.typed_per_filter_config
                        .entry(HTTP_FILTER.to_owned())
                        .or_insert_with(|| config.clone());
                }
            }
        }
        needs_filter |= !hcm.http_filters.iter().any(|f| f.name == HTTP_FILTER);
    });
    if needs_filter {
        insert_before_router(listener, &[http_filter()], true)
            .map_err(|e| policy_error("MeshRateLimit".to_owned(), &name, e))?;
    }
    Ok(())
}

/// The `local.http` limit of a merged conf ([`new_limit`]).
fn http_limit(conf: &Conf) -> Option<RouteLimit> {
    conf.local
        .as_ref()
        .and_then(|l| l.http.as_ref())
        .and_then(new_limit)
}

/// Kuma's `RateLimitConfigurationFromPolicy`: `None` when disabled or without a rate.
fn new_limit(http: &LocalHttp) -> Option<RouteLimit> {
    if http.disabled == Some(true) {
        return None;
    }
    let rate = http.request_rate.as_ref()?;
    let on_rate_limit = http.on_rate_limit.as_ref().map(|o| {
        let mut headers = Vec::new();
        if let Some(h) = &o.headers {
            headers.extend(
                h.add
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone(), true)),
            );
            for h in &h.set {
                headers.extend(
                    h.value
                        .split(',')
                        .map(|v| (h.name.clone(), v.to_owned(), false)),
                );
            }
        }
        (o.status.unwrap_or(0), headers)
    });
    Some(RouteLimit {
        requests: rate.num,
        interval: rate.interval.as_ref().map_or_else(|| secs(0), duration),
        on_rate_limit,
    })
}

/// Kuma's `configureHttpListener`.
fn configure_http(listener: &mut Listener, http: &LocalHttp) -> Result<(), RateLimitError> {
    let Some(limit) = new_limit(http) else {
        return Ok(());
    };
    let config = any(&route_config(&limit)?);
    let mut needs_filter = false;
    edit_hcms(listener, |hcm| {
        if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
            for vh in &mut rc.virtual_hosts {
                // More than one route: an old RateLimit's routes are there (Kuma's check).
                if vh.routes.len() > 1 {
                    return;
                }
                for r in &mut vh.routes {
                    r.typed_per_filter_config
                        .entry(HTTP_FILTER.to_owned())
                        .or_insert_with(|| config.clone());
                }
            }
        }
        if !hcm.http_filters.iter().any(|f| f.name == HTTP_FILTER) {
            needs_filter = true;
        }
    });
    if needs_filter {
        insert_before_router(listener, &[http_filter()], true)?;
    }
    Ok(())
}

/// Kuma's `configureTcpListener`: the network filter first in every filter chain.
fn configure_tcp(listener: &mut Listener, tcp: &LocalTcp) {
    if tcp.disabled == Some(true) {
        return;
    }
    let Some(rate) = &tcp.connection_rate else {
        return;
    };
    let config = TcpLocalRateLimit {
        stat_prefix: "tcp_rate_limit".to_owned(),
        token_bucket: Some(TokenBucket {
            max_tokens: rate.num,
            tokens_per_fill: Some(UInt32Value { value: rate.num }),
            fill_interval: Some(rate.interval.as_ref().map_or_else(|| secs(0), duration)),
        }),
        ..Default::default()
    };
    for chain in &mut listener.filter_chains {
        chain.filters.insert(
            0,
            Filter {
                name: TCP_FILTER.to_owned(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&config))),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_statuses_are_refused() {
        let limit = |status| RouteLimit {
            requests: 1,
            interval: secs(1),
            on_rate_limit: Some((status, vec![])),
        };
        assert!(route_config(&limit(429)).is_ok());
        assert_eq!(route_config(&limit(0)).unwrap().status, None);
        assert!(route_config(&limit(123))
            .unwrap_err()
            .to_string()
            .contains("not an HTTP status"));
    }

    #[test]
    fn set_headers_split_on_commas_after_add() {
        let http: LocalHttp = serde_json::from_value(serde_json::json!({
            "requestRate": {"num": 5, "interval": "1s"},
            "onRateLimit": {"status": 429, "headers": {
                "set": [{"name": "s", "value": "1,2"}],
                "add": [{"name": "a", "value": "x,y"}],
            }},
        }))
        .unwrap();
        let limit = new_limit(&http).unwrap();
        assert_eq!(
            limit.on_rate_limit.unwrap().1,
            [
                ("a".into(), "x,y".into(), true),
                ("s".into(), "1".into(), false),
                ("s".into(), "2".into(), false),
            ]
        );
        let off: LocalHttp = serde_json::from_value(
            serde_json::json!({"disabled": true, "requestRate": {"num": 1, "interval": "1s"}}),
        )
        .unwrap();
        assert!(new_limit(&off).is_none());
    }
}
