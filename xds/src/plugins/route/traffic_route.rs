//! The old TrafficRoute (Kuma 2.7 `pkg/xds/generator/outbound_proxy_generator.go`
//! `determineRoutes`, `pkg/xds/envoy/virtualhosts/routes_configurer.go`): for each outbound,
//! the TrafficRoute selected for its service (connection-policy matching, Kuma's
//! `BuildRouteMap`), with `*` destination tags resolved to the outbound's tags. HTTP outbounds
//! get one unnamed route per `http[]` entry (path prefix/exact/regex, headers sorted by name,
//! then `:method`; path/host rewrites; header changes) and a catch-all route for the default
//! `split`/`destination`; TCP outbounds a TCP proxy over the default destinations. Each
//! distinct destination gets its cluster (with the route's `loadBalancer`) and EDS subset; a
//! weight-0 destination is skipped. Route timeouts are 0s here: the old Timeout sets them next.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    self, LbConfig, LbPolicy, LeastRequestLbConfig, RingHashLbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderValue, HeaderValueOption,
};
use envoy_types::pb::envoy::config::route::v3::{
    header_matcher, route, route_action, route_match, HeaderMatcher, Route, RouteMatch,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    string_matcher, RegexMatchAndSubstitute, RegexMatcher, StringMatcher,
};
use envoy_types::pb::google::protobuf::{UInt32Value, UInt64Value};
use umbra_core::old::traffic_route::{
    resolve_wildcards, Headers, HttpMatch, LoadBalancer, Modify, Split as TrSplit,
    StringMatcher as TrMatcher,
};
use umbra_core::old_matching::{select_outbound_connection_policies, OldPolicyRef};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::target_ref::SERVICE_TAG;

use super::backends::{ensure_cluster, route_action, tcp_proxy_filter, Split};
use crate::context::common_protocol;
use crate::names::{outbound_listener_name, sanitize_metric};
use crate::plugins::edit::edit_hcms;
use crate::plugins::input::{Origins, PluginInput};
use crate::snapshot::Snapshot;

/// Apply the TrafficRoute selected for each outbound service.
pub(super) fn apply(snap: &mut Snapshot, input: &PluginInput<'_>, origins: &mut Origins) {
    let dp = input.dataplane;
    let routes: Vec<&Resource> = input
        .old_policies(ResourceType::TrafficRoute)
        .iter()
        .collect();
    let refs: Vec<OldPolicyRef<'_>> = routes
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let chosen = select_outbound_connection_policies(dp, &refs);
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let Some(Spec::TrafficRoute(tr)) = chosen.get(service).map(|i| &routes[*i].spec) else {
            continue;
        };
        let Some(conf) = &tr.conf else { continue };
        let lb = conf.load_balancer.as_ref();
        let resolve = |splits: Vec<TrSplit>| -> Vec<TrSplit> {
            splits
                .into_iter()
                .map(|s| TrSplit {
                    destination: resolve_wildcards(&outbound.tags, &s.destination),
                    weight: s.weight,
                })
                .collect()
        };
        let mut route_list: Vec<(Option<&HttpMatch>, Option<&Modify>, Vec<Split>)> = Vec::new();
        let mut services = BTreeSet::new();
        for http in &conf.http {
            let clusters = clusters(
                snap,
                input,
                origins,
                &resolve(http.splits()),
                lb,
                &mut services,
            );
            if !clusters.is_empty() {
                route_list.push((http.r#match.as_ref(), http.modify.as_ref(), clusters));
            }
        }
        let default = clusters(
            snap,
            input,
            origins,
            &resolve(conf.splits()),
            lb,
            &mut services,
        );
        if !default.is_empty() {
            route_list.push((None, None, default.clone()));
        }
        let protocols = services.iter().map(|s| input.service_protocol(s)).collect();
        let protocol = common_protocol(&protocols);
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        let Some(l) = snap.listeners.get_mut(&listener) else {
            continue;
        };
        let has_hcm = l
            .filter_chains
            .iter()
            .flat_map(|c| &c.filters)
            .any(|f| f.name == crate::names::HCM_FILTER);
        if protocol.is_http() && has_hcm {
            let envoy: Vec<Route> = route_list
                .iter()
                .map(|(m, modify, clusters)| legacy_route(*m, *modify, clusters))
                .collect();
            edit_hcms(l, |hcm| {
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    for vh in &mut rc.virtual_hosts {
                        vh.routes = envoy.clone();
                    }
                }
            });
        } else if !default.is_empty() {
            for chain in &mut l.filter_chains {
                chain.filters = vec![tcp_proxy_filter(&sanitize_metric(service), &default)];
            }
        }
    }
}

/// Kuma's `clustersFromSplit`: a cluster per destination with weight > 0, the route's load
/// balancer on it; the services reached go to `services`.
fn clusters(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
    splits: &[TrSplit],
    lb: Option<&LoadBalancer>,
    services: &mut BTreeSet<String>,
) -> Vec<Split> {
    let mut out = Vec::new();
    for s in splits {
        let weight = s.weight.unwrap_or(0);
        let Some(service) = s.destination.get(SERVICE_TAG) else {
            continue;
        };
        if weight == 0 {
            continue;
        }
        let (cluster, external) = ensure_cluster(snap, input, origins, service, &s.destination);
        if let (Some(lb), Some(c)) = (lb, snap.clusters.get_mut(&cluster)) {
            configure_lb(c, lb);
        }
        services.insert(service.clone());
        out.push(Split {
            cluster,
            weight,
            external,
        });
    }
    out
}

/// Kuma's `LbConfigurer`: the cluster's `lbPolicy` and its config.
fn configure_lb(c: &mut Cluster, lb: &LoadBalancer) {
    if lb.round_robin.is_some() {
        c.lb_policy = LbPolicy::RoundRobin as i32;
    } else if let Some(lr) = &lb.least_request {
        c.lb_policy = LbPolicy::LeastRequest as i32;
        if lr.choice_count > 0 {
            c.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                choice_count: Some(UInt32Value {
                    value: lr.choice_count,
                }),
                ..Default::default()
            }));
        }
    } else if let Some(rh) = &lb.ring_hash {
        c.lb_policy = LbPolicy::RingHash as i32;
        let hash_function = match rh.hash_function.as_str() {
            "MURMUR_HASH_2" => cluster::ring_hash_lb_config::HashFunction::MurmurHash2,
            _ => cluster::ring_hash_lb_config::HashFunction::XxHash,
        };
        c.lb_config = Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
            hash_function: hash_function as i32,
            minimum_ring_size: (rh.min_ring_size > 0).then_some(UInt64Value {
                value: rh.min_ring_size,
            }),
            maximum_ring_size: (rh.max_ring_size > 0).then_some(UInt64Value {
                value: rh.max_ring_size,
            }),
        }));
    } else if lb.random.is_some() {
        c.lb_policy = LbPolicy::Random as i32;
    } else if lb.maglev.is_some() {
        c.lb_policy = LbPolicy::Maglev as i32;
    }
}

fn string_matcher(m: &TrMatcher) -> StringMatcher {
    let pattern = if let Some(p) = &m.prefix {
        string_matcher::MatchPattern::Prefix(p.clone())
    } else if let Some(r) = &m.regex {
        string_matcher::MatchPattern::SafeRegex(RegexMatcher {
            regex: r.clone(),
            ..Default::default()
        })
    } else {
        string_matcher::MatchPattern::Exact(m.exact.clone().unwrap_or_default())
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    }
}

fn header_matcher(name: &str, m: &TrMatcher) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_owned(),
        header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(
            string_matcher(m),
        )),
        ..Default::default()
    }
}

fn legacy_route(m: Option<&HttpMatch>, modify: Option<&Modify>, clusters: &[Split]) -> Route {
    let path_specifier = match m.and_then(|m| m.path.as_ref()) {
        Some(p) if p.prefix.is_some() => {
            route_match::PathSpecifier::Prefix(p.prefix.clone().unwrap_or_default())
        }
        Some(p) if p.regex.is_some() => route_match::PathSpecifier::SafeRegex(RegexMatcher {
            regex: p.regex.clone().unwrap_or_default(),
            ..Default::default()
        }),
        Some(p) => route_match::PathSpecifier::Path(p.exact.clone().unwrap_or_default()),
        None => route_match::PathSpecifier::Prefix("/".to_owned()),
    };
    let mut headers: Vec<HeaderMatcher> = m
        .and_then(|m| m.headers.as_ref())
        .into_iter()
        .flatten()
        .map(|(name, matcher)| header_matcher(name, matcher))
        .collect();
    if let Some(method) = m.and_then(|m| m.method.as_ref()) {
        headers.push(header_matcher(":method", method));
    }
    let mut action = route_action(clusters);
    let mut r = Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(path_specifier),
            headers,
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(modify) = modify {
        if let Some(p) = &modify.path {
            if let Some(prefix) = &p.rewrite_prefix {
                action.prefix_rewrite = prefix.clone();
            } else if let Some(re) = &p.regex {
                action.regex_rewrite = Some(regex_replace(&re.pattern, &re.substitution));
            }
        }
        if let Some(h) = &modify.host {
            if let Some(v) = &h.value {
                action.host_rewrite_specifier = Some(
                    route_action::HostRewriteSpecifier::HostRewriteLiteral(v.clone()),
                );
            } else if let Some(re) = &h.from_path {
                action.host_rewrite_specifier =
                    Some(route_action::HostRewriteSpecifier::HostRewritePathRegex(
                        regex_replace(&re.pattern, &re.substitution),
                    ));
            }
        }
        let (add, remove) = headers_changes(modify.request_headers.as_ref());
        r.request_headers_to_add = add;
        r.request_headers_to_remove = remove;
        let (add, remove) = headers_changes(modify.response_headers.as_ref());
        r.response_headers_to_add = add;
        r.response_headers_to_remove = remove;
    }
    r.action = Some(route::Action::Route(action));
    r
}

fn regex_replace(pattern: &str, substitution: &str) -> RegexMatchAndSubstitute {
    RegexMatchAndSubstitute {
        pattern: Some(RegexMatcher {
            regex: pattern.to_owned(),
            ..Default::default()
        }),
        substitution: substitution.to_owned(),
    }
}

fn headers_changes(h: Option<&Headers>) -> (Vec<HeaderValueOption>, Vec<String>) {
    let Some(h) = h else {
        return (Vec::new(), Vec::new());
    };
    let add = h
        .add
        .iter()
        .map(|a| HeaderValueOption {
            header: Some(HeaderValue {
                key: a.name.clone(),
                value: a.value.clone(),
                ..Default::default()
            }),
            append_action: if a.append {
                HeaderAppendAction::AppendIfExistsOrAdd
            } else {
                HeaderAppendAction::OverwriteIfExistsOrAdd
            } as i32,
            ..Default::default()
        })
        .collect();
    (add, h.remove.iter().map(|r| r.name.clone()).collect())
}
