//! The route table of a builtin gateway's virtual hosts (Kuma 2.7.29
//! `pkg/plugins/runtime/gateway`: `route_table_generator.go`, `route/sorter.go`,
//! `route/configurers.go`, `HandlePrefixMatchesAndPopulatePolicies` and the hostname
//! redistribution of `generator.go`): which routes a host gets, Kuma's route order, the exact
//! twin of a root prefix that rewrites, and how each Envoy route is finished (weighted
//! clusters with `x-kuma-tags`, Host rewrites, canonical header names, redirects).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    data_source, header_value_option, DataSource, HeaderValue, HeaderValueOption,
};
use envoy_types::pb::envoy::config::route::v3::{
    redirect_action, route, route_action, route_match, DirectResponseAction, Route, RouteMatch,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use umbra_core::gateway::{GatewayListener, OldRoute};
use umbra_core::gateway_route::host_matches;

use crate::names::KUMA_TAGS_HEADER;
use crate::protobuf::secs;

/// Kuma's service of a backend it could not resolve (`metadata.UnresolvedBackendServiceTag`):
/// routed to a cluster of that name that does not exist.
pub(super) const UNRESOLVED_BACKEND: &str = "kuma.io/unresolved-backend";

/// Kuma's exact `/` twin of a root prefix route that rewrites its path
/// (`HandlePrefixMatchesAndPopulatePolicies`): `/` itself gets the rewrite target as its full
/// path (a `.*` regex rewrite to the prefix rewrite without its trailing `/`, or `/`). `None`
/// for any other route.
pub(super) fn root_exact(r: &Route) -> Option<Route> {
    use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatchAndSubstitute, RegexMatcher};
    let root = matches!(
        r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()),
        Some(route_match::PathSpecifier::Prefix(p)) if p == "/"
    );
    if !root {
        return None;
    }
    let full = |rewrite: &str| RegexMatchAndSubstitute {
        pattern: Some(RegexMatcher {
            regex: ".*".to_owned(),
            ..Default::default()
        }),
        substitution: match rewrite.trim_end_matches('/') {
            "" => "/".to_owned(),
            p => p.to_owned(),
        },
    };
    let mut exact = r.clone();
    match &mut exact.action {
        Some(route::Action::Route(a)) if !a.prefix_rewrite.is_empty() => {
            a.regex_rewrite = Some(full(&a.prefix_rewrite));
            a.prefix_rewrite.clear();
        }
        Some(route::Action::Redirect(rd)) => {
            let Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(p)) =
                &rd.path_rewrite_specifier
            else {
                return None;
            };
            rd.path_rewrite_specifier =
                Some(redirect_action::PathRewriteSpecifier::RegexRewrite(full(p)));
        }
        _ => return None,
    }
    if let Some(m) = exact.r#match.as_mut() {
        m.path_specifier = Some(route_match::PathSpecifier::Path("/".to_owned()));
    }
    Some(exact)
}

/// Kuma's hostname order (`match.SortHostnamesByExactnessDec`, `IsMoreExact`): names before
/// wildcards, wildcards with more labels first, otherwise by text.
pub(super) fn more_exact_first(a: &str, b: &str) -> std::cmp::Ordering {
    let wild = |h: &str| h.split('.').next() == Some("*");
    let labels = |h: &str| h.split('.').count();
    wild(a)
        .cmp(&wild(b))
        .then_with(|| {
            if wild(a) {
                labels(b).cmp(&labels(a))
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .then_with(|| a.cmp(b))
}

/// Go's `http.CanonicalHeaderKey`: the first letter and each letter after a `-` upper case,
/// the others lower case; a name with a character outside HTTP's token set is left as it is.
fn canonical_header_key(name: &str) -> String {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return name.to_owned();
    }
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// Kuma's gateway route order (`pkg/plugins/runtime/gateway/route/sorter.go`
/// `isMoreSpecific`) on the Envoy routes' matches: exact paths first, longer first; then
/// prefixes, longer first; then regexes, longer first (equal lengths tie); then a method
/// match; then more header matches (exact, regex, present, absent; not prefix); then more
/// query matches; then the path text. Kuma sorts unstably: ties keep Umbra's generation order.
pub(super) fn kuma_route_order(a: &Route, b: &Route) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    if more_specific(a, b) {
        Ordering::Less
    } else if more_specific(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn more_specific(lhs: &Route, rhs: &Route) -> bool {
    use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
    use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
    use route_match::PathSpecifier;
    struct Key<'a> {
        exact: &'a str,
        prefix: &'a str,
        regex: &'a str,
        method: bool,
        headers: usize,
        queries: usize,
    }
    fn key_of(r: &Route) -> Key<'_> {
        let m = r.r#match.as_ref();
        let (mut exact, mut prefix, mut regex) = ("", "", "");
        match m.and_then(|m| m.path_specifier.as_ref()) {
            Some(PathSpecifier::Path(p)) => exact = p,
            Some(PathSpecifier::Prefix(p)) => prefix = p,
            Some(PathSpecifier::SafeRegex(re)) => regex = &re.regex,
            _ => {}
        }
        let headers = m.map_or(&[][..], |m| m.headers.as_slice());
        let method = headers.iter().any(|h| h.name == ":method");
        let counted = headers
            .iter()
            .filter(|h| h.name != ":method")
            .filter(|h| match &h.header_match_specifier {
                Some(HeaderMatchSpecifier::StringMatch(sm)) => {
                    !matches!(sm.match_pattern, Some(MatchPattern::Prefix(_)))
                }
                _ => true,
            })
            .count();
        Key {
            exact,
            prefix,
            regex,
            method,
            headers: counted,
            queries: m.map_or(0, |m| m.query_parameters.len()),
        }
    }
    let (l, r) = (key_of(lhs), key_of(rhs));
    if !l.exact.is_empty() {
        if r.exact.is_empty() || l.exact.len() > r.exact.len() {
            return true;
        }
        if l.exact.len() < r.exact.len() {
            return false;
        }
    } else if !r.exact.is_empty() {
        return false;
    }
    if !l.prefix.is_empty() {
        if r.prefix.is_empty() || l.prefix.len() > r.prefix.len() {
            return true;
        }
        if l.prefix.len() < r.prefix.len() {
            return false;
        }
    } else if !r.prefix.is_empty() {
        return false;
    }
    if !l.regex.is_empty() {
        return r.regex.is_empty() || l.regex.len() > r.regex.len();
    } else if !r.regex.is_empty() {
        return false;
    }
    if l.method != r.method {
        return l.method;
    }
    if l.headers != r.headers {
        return l.headers > r.headers;
    }
    if l.queries != r.queries {
        return l.queries > r.queries;
    }
    format!("{}{}{}", l.exact, l.prefix, l.regex) < format!("{}{}{}", r.exact, r.prefix, r.regex)
}

/// The virtual hosts of one port, each with its listener and whether it is implicit: each
/// listener's hostname, then under the `*` listener (`wildcard`) each hostname a route names
/// (a MeshHTTPRoute's `to[].hostnames`, a MeshGatewayRoute's `conf.http.hostnames`) that no
/// listener has (Kuma's `RedistributeWildcardRoutes`). Sorted as Kuma sorts them: by name,
/// descending, so exact names come before `*.` wildcards and `*` is last.
pub(super) fn hostnames<'a>(
    listeners: &[&'a GatewayListener],
    attached: &[&umbra_core::policy::TargetRefPolicy],
    old: &[OldRoute<'_>],
    wildcard: Option<&'a GatewayListener>,
) -> Vec<(String, &'a GatewayListener, bool)> {
    let mut out: Vec<(String, &GatewayListener, bool)> = listeners
        .iter()
        .map(|l| (l.hostname.clone(), *l, false))
        .collect();
    if let Some(any) = wildcard {
        let mut named: BTreeSet<&str> = attached
            .iter()
            .filter_map(|p| p.route.as_ref())
            .flat_map(|r| &r.to)
            .flat_map(|t| &t.hostnames)
            .map(String::as_str)
            .collect();
        named.extend(
            old.iter()
                .filter(|r| r.selects(&any.tags) && r.conf.http.is_some())
                .flat_map(|r| r.conf.hostnames())
                .map(String::as_str),
        );
        for h in named {
            if !out.iter().any(|(o, _, _)| o == h) {
                out.push((h.to_owned(), any, true));
            }
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The MeshGatewayRoutes (with an HTTP conf) of virtual host `host` of `listener` (Kuma's
/// `RedistributeWildcardRoutes` then `GenerateEnvoyRouteEntries`): the listener's routes
/// without hostnames or naming `host`, unless the host is `implicit` (made for a route's
/// hostname under the `*` listener); and, for a named host, the `*` listener's routes naming
/// it. `*` itself gets the routes without hostnames.
pub(super) fn old_http_routes<'r, 'a>(
    old: &'r [OldRoute<'a>],
    host: &str,
    listener: &GatewayListener,
    implicit: bool,
    wildcard: Option<&GatewayListener>,
) -> Vec<&'r OldRoute<'a>> {
    let http = old.iter().filter(|r| r.conf.http.is_some());
    let mut out: Vec<&OldRoute<'a>> = Vec::new();
    if !implicit {
        out.extend(http.clone().filter(|r| {
            r.selects(&listener.tags)
                && (r.conf.hostnames().is_empty()
                    || (host != "*" && host_matches(host, r.conf.hostnames())))
        }));
    }
    if let Some(w) = wildcard.filter(|_| host != "*") {
        // Kuma's redistribution is one way: a route naming `*.example.com` joins the host
        // `foo.example.com` (its suffix), one naming `foo.example.com` never joins `*.com`.
        let redistributed = |names: &[String]| {
            names.iter().any(|n| {
                n == host
                    || n.strip_prefix("*.")
                        .is_some_and(|suffix| host.ends_with(suffix))
            })
        };
        // Then Kuma's `match.Hostnames` on what was redistributed (`*.example.com` is moved to
        // `fooexample.com` by its suffix, and filtered out there).
        out.extend(http.filter(|r| {
            r.selects(&w.tags)
                && redistributed(r.conf.hostnames())
                && host_matches(host, r.conf.hostnames())
        }));
    }
    out.sort_by(|a, b| a.resource.meta.name.cmp(&b.resource.meta.name));
    out.dedup_by(|a, b| a.resource.meta.name == b.resource.meta.name);
    out
}

/// Kuma's answer on a virtual host no route reaches: 404 with its message.
pub(super) fn no_route() -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 404,
            body: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(
                    "This is a Kuma MeshGateway. No routes match this MeshGateway!\n".to_owned(),
                )),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}
/// A gateway route as Kuma's route table generator makes it (`RouteActionForward`): idle
/// timeout 5s, 500 for an unknown cluster, no timeout; backends always as weighted
/// clusters (a lone one of weight 1), sorted by name, each mesh cluster (not an
/// ExternalService's, in `external`) adding `x-kuma-tags` with the gateway's tags; without
/// a name when it comes from a MeshGatewayRoute (`unnamed`). Redirects drop the query
/// (`StripQuery: true`) and, naming no port, redirect to the listener's `port` (Kuma's
/// `RouteActionRedirect`). `tags`: the gateway's, for `x-kuma-tags`.
pub(super) fn gateway_route(
    tags: &BTreeMap<String, BTreeSet<String>>,
    mut r: Route,
    external: &BTreeSet<&str>,
    unnamed: bool,
    port: u32,
) -> Route {
    use envoy_types::pb::envoy::config::route::v3::{
        weighted_cluster::ClusterWeight, WeightedCluster,
    };
    use route_action::ClusterSpecifier;
    if unnamed {
        r.name.clear();
    }
    // Kuma's route table replaces the Host header by rewriting the host
    // (`RouteReplaceHostHeader`) for a set of `:authority`, `Host` or `host`.
    let mut host = None;
    r.request_headers_to_add.retain(|o| {
        let set = o.append_action
            == header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
        match o.header.as_ref() {
            Some(h) if set && matches!(h.key.as_str(), ":authority" | "Host" | "host") => {
                host = Some(h.value.clone());
                false
            }
            _ => true,
        }
    });
    if let (Some(host), Some(route::Action::Route(a))) = (host, r.action.as_mut()) {
        a.host_rewrite_specifier =
            Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(host));
    }
    // Kuma's route builder writes header names in Go's canonical form.
    for h in r
        .request_headers_to_add
        .iter_mut()
        .chain(r.response_headers_to_add.iter_mut())
        .filter_map(|o| o.header.as_mut())
    {
        h.key = canonical_header_key(&h.key);
    }
    // Kuma's prefix matches end with `/`, and so do their prefix rewrites.
    let prefix_match = matches!(
        r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()),
        Some(route_match::PathSpecifier::Prefix(_))
    );
    let slash = |rewrite: &mut String| {
        if prefix_match && !rewrite.is_empty() {
            *rewrite = format!("{}/", rewrite.trim_end_matches('/'));
        }
    };
    match &mut r.action {
        Some(route::Action::Route(a)) => {
            slash(&mut a.prefix_rewrite);
            a.idle_timeout = Some(secs(5));
            a.cluster_not_found_response_code =
                route_action::ClusterNotFoundResponseCode::InternalServerError as i32;
            a.timeout = None;
            let mut clusters = match a.cluster_specifier.take() {
                Some(ClusterSpecifier::Cluster(name)) => vec![ClusterWeight {
                    name,
                    weight: Some(UInt32Value { value: 1 }),
                    ..Default::default()
                }],
                Some(ClusterSpecifier::WeightedClusters(w)) => w.clusters,
                other => {
                    a.cluster_specifier = other;
                    return r;
                }
            };
            // Kuma's `byName`: one entry per cluster, the last one's weight.
            clusters.reverse();
            clusters.sort_by(|x, y| x.name.cmp(&y.name));
            clusters.dedup_by(|x, y| x.name == y.name);
            for c in &mut clusters {
                if !external.contains(c.name.as_str()) {
                    c.request_headers_to_add.push(HeaderValueOption {
                        header: Some(HeaderValue {
                            key: KUMA_TAGS_HEADER.to_owned(),
                            value: crate::tags::serialize_tags(tags),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }
            }
            a.cluster_specifier = Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters,
                ..Default::default()
            }));
        }
        Some(route::Action::Redirect(redirect)) => {
            if let Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(p)) =
                &mut redirect.path_rewrite_specifier
            {
                slash(p);
            }
            redirect.strip_query = true;
            if redirect.port_redirect == 0 {
                redirect.port_redirect = port;
            }
        }
        _ => {}
    }
    r
}
