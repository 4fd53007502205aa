//! MeshHTTPRoute's Envoy routes (Kuma 2.7 `meshhttproute/xds/{configurer,match}.go` and
//! `xds/filters`): per generated [`Route`], one Envoy route per path specifier (a non-root
//! `PathPrefix /p` becomes `path: /p` and `prefix: /p/`, so `/prefix` never matches
//! `/prefixes`), named by the rule hash, with the method (`:method` header), query parameters,
//! headers (first entry per name), and the filters: request/response header modifiers (`set`
//! overwrites, `add` appends, comma-separated values split), redirect, URL rewrite (prefix
//! rewrite on `prefix:` routes, a `.*` regex rewrite on `path:` ones), request mirror.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderValue, HeaderValueOption,
    RuntimeFractionalPercent,
};
use envoy_types::pb::envoy::config::route::v3::{
    header_matcher, query_parameter_matcher, redirect_action, route, route_action, route_match,
    HeaderMatcher, QueryParameterMatcher, RedirectAction, Route as EnvoyRoute, RouteMatch,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    string_matcher, RegexMatchAndSubstitute, RegexMatcher, StringMatcher,
};
use envoy_types::pb::envoy::r#type::v3::{fractional_percent, FractionalPercent};
use umbra_core::policies::mesh_http_route::{HeaderModifier, Match, PathRewrite, Route};

use super::backends::{route_action as split_action, Split};

/// The Envoy routes of `route`; `splits` are its backends' clusters, `mirror` the cluster of
/// each RequestMirror filter's backend (by the filter's index).
pub(super) fn envoy_routes(
    route: &Route,
    splits: &[Split],
    mirrors: &BTreeMap<usize, String>,
) -> Vec<EnvoyRoute> {
    let mut out = Vec::new();
    for (m, prefix_match) in route_matches(&route.matched) {
        let mut r = EnvoyRoute {
            name: route.hash.clone(),
            r#match: Some(m),
            action: Some(route::Action::Route(split_action(splits))),
            ..Default::default()
        };
        for (i, f) in route.filters.iter().enumerate() {
            match f.filter_type.as_str() {
                "RequestHeaderModifier" => {
                    if let Some(hm) = &f.request_header_modifier {
                        let (add, remove) = header_modifiers(hm);
                        r.request_headers_to_add.extend(add);
                        r.request_headers_to_remove.extend(remove);
                    }
                }
                "ResponseHeaderModifier" => {
                    if let Some(hm) = &f.response_header_modifier {
                        let (add, remove) = header_modifiers(hm);
                        r.response_headers_to_add.extend(add);
                        r.response_headers_to_remove.extend(remove);
                    }
                }
                "RequestRedirect" => {
                    if let Some(rr) = &f.request_redirect {
                        let mut redirect = RedirectAction {
                            host_redirect: rr.hostname.clone().unwrap_or_default(),
                            port_redirect: rr.port.unwrap_or(0),
                            response_code: match rr.status_code.unwrap_or(302) {
                                301 => redirect_action::RedirectResponseCode::MovedPermanently,
                                303 => redirect_action::RedirectResponseCode::SeeOther,
                                307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
                                308 => redirect_action::RedirectResponseCode::PermanentRedirect,
                                _ => redirect_action::RedirectResponseCode::Found,
                            } as i32,
                            scheme_rewrite_specifier: rr
                                .scheme
                                .clone()
                                .map(redirect_action::SchemeRewriteSpecifier::SchemeRedirect),
                            ..Default::default()
                        };
                        redirect.path_rewrite_specifier =
                            rr.path
                                .as_ref()
                                .and_then(|p| match rewrite(p, &r, prefix_match) {
                                    Some(Rewrite::Prefix(s)) => Some(
                                        redirect_action::PathRewriteSpecifier::PrefixRewrite(s),
                                    ),
                                    Some(Rewrite::Regex(re)) => Some(
                                        redirect_action::PathRewriteSpecifier::RegexRewrite(re),
                                    ),
                                    None => None,
                                });
                        r.action = Some(route::Action::Redirect(redirect));
                    }
                }
                "URLRewrite" => {
                    if let (Some(rw), Some(route::Action::Route(action))) =
                        (&f.url_rewrite, r.action.clone())
                    {
                        let mut action = action;
                        if let Some(h) = &rw.hostname {
                            action.host_rewrite_specifier = Some(
                                route_action::HostRewriteSpecifier::HostRewriteLiteral(h.clone()),
                            );
                        }
                        match rw.path.as_ref().and_then(|p| rewrite(p, &r, prefix_match)) {
                            Some(Rewrite::Prefix(s)) => action.prefix_rewrite = s,
                            Some(Rewrite::Regex(re)) => action.regex_rewrite = Some(re),
                            None => {}
                        }
                        r.action = Some(route::Action::Route(action));
                    }
                }
                "RequestMirror" => {
                    if let (Some(mirror), Some(cluster), Some(route::Action::Route(action))) =
                        (&f.request_mirror, mirrors.get(&i), r.action.as_mut())
                    {
                        action
                            .request_mirror_policies
                            .push(route_action::RequestMirrorPolicy {
                                cluster: cluster.clone(),
                                runtime_fraction: mirror.percentage().map(|p| {
                                    RuntimeFractionalPercent {
                                        default_value: Some(percentage(p)),
                                        ..Default::default()
                                    }
                                }),
                                ..Default::default()
                            });
                    }
                }
                _ => {}
            }
        }
        out.push(r);
    }
    out
}

enum Rewrite {
    Prefix(String),
    Regex(RegexMatchAndSubstitute),
}

/// Kuma's path rewrite: `ReplaceFullPath` is a `.*` regex rewrite; `ReplacePrefixMatch` (only
/// on prefix matches) a prefix rewrite on the `prefix:` route and a full-path regex rewrite on
/// the `path:` route of the same match.
fn rewrite(p: &PathRewrite, r: &EnvoyRoute, prefix_match: bool) -> Option<Rewrite> {
    let full = |s: &str| {
        Rewrite::Regex(RegexMatchAndSubstitute {
            pattern: Some(RegexMatcher {
                regex: ".*".to_owned(),
                ..Default::default()
            }),
            substitution: s.to_owned(),
        })
    };
    match p.rewrite_type.as_str() {
        "ReplaceFullPath" => p.replace_full_path.as_deref().map(full),
        "ReplacePrefixMatch" if prefix_match => {
            let value = p.replace_prefix_match.as_deref()?;
            match r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
                Some(route_match::PathSpecifier::Path(_)) => Some(full(value)),
                Some(route_match::PathSpecifier::Prefix(_)) => {
                    Some(Rewrite::Prefix(value.to_owned()))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Kuma's `ConvertPercentage`: whole percentages over HUNDRED, others over MILLION.
fn percentage(p: f64) -> FractionalPercent {
    if p.fract() == 0.0 {
        FractionalPercent {
            numerator: p as u32,
            denominator: fractional_percent::DenominatorType::Hundred as i32,
        }
    } else {
        FractionalPercent {
            numerator: (p * 10_000.0).round() as u32,
            denominator: fractional_percent::DenominatorType::Million as i32,
        }
    }
}

fn header_modifiers(m: &HeaderModifier) -> (Vec<HeaderValueOption>, Vec<String>) {
    let mut out = Vec::new();
    let opt = |name: &str, value: &str, action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_owned(),
            value: value.to_owned(),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    for kv in m.set.iter().flatten() {
        for (i, v) in kv.value.split(',').enumerate() {
            let action = if i == 0 {
                HeaderAppendAction::OverwriteIfExistsOrAdd
            } else {
                HeaderAppendAction::AppendIfExistsOrAdd
            };
            out.push(opt(&kv.name, v, action));
        }
    }
    for kv in m.add.iter().flatten() {
        for v in kv.value.split(',') {
            out.push(opt(&kv.name, v, HeaderAppendAction::AppendIfExistsOrAdd));
        }
    }
    (out, m.remove.clone().unwrap_or_default())
}

fn exact(s: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Exact(s.to_owned())),
        ..Default::default()
    }
}

fn regex(s: &str) -> RegexMatcher {
    RegexMatcher {
        regex: s.to_owned(),
        ..Default::default()
    }
}

/// Kuma's `routeMatch`: the Envoy matches of one match (two for a non-root `PathPrefix`), each
/// with whether it came from a prefix match.
fn route_matches(m: &Match) -> Vec<(RouteMatch, bool)> {
    use route_match::PathSpecifier;
    let mut paths: Vec<Option<PathSpecifier>> = match &m.path {
        None => vec![None],
        Some(p) => match p.match_type.as_str() {
            "Exact" => vec![Some(PathSpecifier::Path(p.value.clone()))],
            "PathPrefix" if p.value == "/" => vec![Some(PathSpecifier::Prefix("/".to_owned()))],
            "PathPrefix" => {
                let trimmed = p.value.trim_end_matches('/');
                vec![
                    Some(PathSpecifier::Path(trimmed.to_owned())),
                    Some(PathSpecifier::Prefix(format!("{trimmed}/"))),
                ]
            }
            _ => vec![Some(PathSpecifier::SafeRegex(regex(&p.value)))],
        },
    };
    let prefix_match = m
        .path
        .as_ref()
        .is_some_and(|p| p.match_type == "PathPrefix");
    paths
        .drain(..)
        .map(|path_specifier| {
            let mut rm = RouteMatch {
                path_specifier,
                ..Default::default()
            };
            if let Some(method) = &m.method {
                rm.headers.push(HeaderMatcher {
                    name: ":method".to_owned(),
                    header_match_specifier: Some(
                        header_matcher::HeaderMatchSpecifier::StringMatch(exact(method)),
                    ),
                    ..Default::default()
                });
            }
            let mut seen = std::collections::BTreeSet::new();
            for q in &m.query_params {
                if !seen.insert(q.name.as_str()) {
                    continue;
                }
                let matcher = if q.match_type == "RegularExpression" {
                    StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex(
                            &q.value,
                        ))),
                        ..Default::default()
                    }
                } else {
                    exact(&q.value)
                };
                rm.query_parameters.push(QueryParameterMatcher {
                    name: q.name.clone(),
                    query_parameter_match_specifier: Some(
                        query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(matcher),
                    ),
                });
            }
            let mut seen = std::collections::BTreeSet::new();
            for h in &m.headers {
                if !seen.insert(h.name.as_str()) {
                    continue;
                }
                use header_matcher::HeaderMatchSpecifier as S;
                let spec = match h.match_type.as_deref().unwrap_or("Exact") {
                    "Present" => S::PresentMatch(true),
                    "Absent" => S::PresentMatch(false),
                    "RegularExpression" => S::StringMatch(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex(
                            &h.value,
                        ))),
                        ..Default::default()
                    }),
                    "Prefix" if h.value.is_empty() => S::PresentMatch(true),
                    "Prefix" => S::StringMatch(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::Prefix(h.value.clone())),
                        ..Default::default()
                    }),
                    _ => S::StringMatch(exact(&h.value)),
                };
                rm.headers.push(HeaderMatcher {
                    name: h.name.clone(),
                    header_match_specifier: Some(spec),
                    ..Default::default()
                });
            }
            (rm, prefix_match)
        })
        .collect()
}
