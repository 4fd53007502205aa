//! TrafficRoute to MeshHTTPRoute, MeshTCPRoute and MeshLoadBalancingStrategy: owns the
//! conversion of the old TrafficRoute policy (issue 19, item 1).
//!
//! The mapping follows seed 000 (which defers routes to Kuma's route-transition MADR) and Kuma
//! 2.7's route semantics as Umbra generates them (`xds/src/plugins/route/`):
//!
//! - `sources[i]` select the proxies (the top-level `targetRef`); each destination service `X`
//!   becomes a `to: {kind: MeshService, name: X}` item of a MeshHTTPRoute (HTTP outbounds)
//!   and of a MeshTCPRoute (other outbounds): the converter does not know the destination's
//!   protocol and the old policy applies to both. One output of each type per source.
//! - `conf.http[]` -> MeshHTTPRoute rules: `match.path` prefix/exact/regex -> `PathPrefix`
//!   (trailing `/` trimmed) / `Exact` / `RegularExpression`, an exact `method`, `headers`
//!   (exact/prefix/regex); `modify.path.rewritePrefix` -> a `URLRewrite` `ReplacePrefixMatch`,
//!   `modify.host.value` -> a `URLRewrite` hostname, `modify.requestHeaders` /
//!   `responseHeaders` -> header modifier filters (`append: true` -> `add`, else `set`;
//!   `remove`); `split`/`destination` -> `backendRefs` (`MeshService`, or
//!   `MeshServiceSubset` with the other tags; a `*` tag value is the outbound's own: the
//!   destination service for `kuma.io/service`, dropped for other tags).
//! - the default `split`/`destination` -> the MeshHTTPRoute's last rule (`PathPrefix /`) and
//!   the MeshTCPRoute's rule.
//! - `conf.loadBalancer` -> a MeshLoadBalancingStrategy to the services the route reaches
//!   (locality awareness disabled: the old balancer did not reorder endpoints).
//! - A TrafficRoute that routes a destination to itself (no HTTP rule, one destination whose
//!   tags are its own service or `*`) is Kuma's default routing: no route output for it (only
//!   the balancer, if any). With destination `*` that is the only convertible shape: a route's
//!   `to` must name a service.
//!
//! Differences that remain: a proxy a MeshHTTPRoute/MeshTCPRoute applies to has every outbound
//! rebuilt by the route plugins (seed 000's leaks: `normalizePath`, the legacy listener
//! timeouts removed, routes named after their matches, non-root prefixes as two routes, rules
//! sorted by specificity), and Kuma stops applying TrafficRoutes and the old Timeout,
//! CircuitBreaker, Retry and HealthCheck to it; old precedence (one TrafficRoute per outbound)
//! becomes merging of every matching route's rules.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::model::{push_unique, ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::old::traffic_route::{
    Conf, Headers, Http, HttpMatch, LoadBalancer, Modify, Split, StringMatcher, TrafficRoute,
};
use crate::policies::mesh_http_route::{compare_match, Match};
use crate::resource::{ResourceType, Spec};
use crate::target_ref::SERVICE_TAG;

/// Methods a MeshHTTPRoute match accepts.
const METHODS: [&str; 9] = [
    "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE",
];

/// Convert a TrafficRoute.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations;
/// [`ConvertError::Unsupported`] for a destination `*` whose conf is not the default routing;
/// [`ConvertError::Invalid`] when an output does not validate (a prefix or path that is not
/// absolute, a host that is not an RFC 1123 name, ...).
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::TrafficRoute(tr) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a TrafficRoute"));
    };
    let TrafficRoute {
        sources,
        destinations,
        conf,
    } = tr;
    let conf = conf
        .as_ref()
        .ok_or_else(|| ctx.empty("the TrafficRoute has no conf"))?;
    if sources.is_empty() || destinations.is_empty() {
        return Err(ctx.empty("the TrafficRoute has no sources or no destinations"));
    }
    let mut notes = Vec::new();
    let mut http_to: Vec<Value> = Vec::new();
    let mut tcp_to: Vec<Value> = Vec::new();
    let mut lb_to: Vec<Value> = Vec::new();
    let mut lb_visible = false;
    for (i, d) in destinations.iter().enumerate() {
        let field = format!("destinations[{i}]");
        let service = d
            .match_tags
            .get(SERVICE_TAG)
            .map_or("*", String::as_str)
            .to_owned();
        let identity = is_identity(conf, &service);
        if service == "*" {
            if !identity {
                return Err(ctx.unsupported(format!(
                    "{field}: MeshHTTPRoute and MeshTCPRoute `to` must name a service; a TrafficRoute to '*' converts only when it routes each destination to itself"
                )));
            }
            push_unique(&mut lb_to, json!({"kind": "Mesh"}));
            continue;
        }
        let (target, n) = selectors::service_or_mesh(d, &field);
        notes.extend(n);
        if !identity {
            let mut rules = Vec::new();
            let mut catch_all_taken = false;
            let mut converted_matches = Vec::new();
            for (j, h) in conf.http.iter().enumerate() {
                let (rule, m) = http_rule(h, &service, &format!("conf.http[{j}]"), &mut notes);
                if m == Match::catch_all() {
                    catch_all_taken = true;
                }
                converted_matches.push(m);
                rules.push(rule);
            }
            if !rules.is_empty() {
                order_note(&converted_matches, &mut notes);
            }
            let default_refs = backend_refs(&conf.splits(), &service, "conf", &mut notes);
            if catch_all_taken {
                notes.push(Note::new(
                    NoteKind::Semantics,
                    "conf.split",
                    "an HTTP rule already matches every request (prefix /): the default split is unreachable for HTTP and only goes to the MeshTCPRoute",
                ));
            } else {
                rules.push(json!({
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "default": {"backendRefs": default_refs},
                }));
            }
            http_to.push(json!({"targetRef": target, "rules": rules}));
            tcp_to.push(
                json!({"targetRef": target, "rules": [{"default": {"backendRefs": default_refs}}]}),
            );
        }
        if let Some(lb) = &conf.load_balancer {
            let services = reached_services(conf, &service);
            // The destination's own cluster gets MeshLoadBalancingStrategy's balancer even when
            // the route only reaches its subsets: the old balancer only set the route's clusters.
            if !services.get(&service).copied().unwrap_or(false) && !is_round_robin(lb) {
                lb_visible = true;
            }
            for s in services.keys() {
                push_unique(&mut lb_to, json!({"kind": "MeshService", "name": s}));
            }
        }
    }
    let lb_default = match &conf.load_balancer {
        Some(lb) => Some(load_balancer(lb, &mut notes)?),
        None => None,
    };
    if lb_default.is_some() {
        let note = Note::new(
            NoteKind::Semantics,
            "conf.loadBalancer",
            "TrafficRoute sets the balancer on the clusters the route creates; MeshLoadBalancingStrategy on every cluster of the services the route reaches (their own cluster and subsets), from every outbound of the proxy",
        );
        notes.push(if lb_visible {
            note.affecting(&[
                "lbPolicy",
                "leastRequestLbConfig",
                "ringHashLbConfig",
                "maglevLbConfig",
            ])
        } else {
            note
        });
    }
    if http_to.is_empty() {
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf",
            "the TrafficRoute routes each destination to itself, which is Kuma's default routing: no MeshHTTPRoute or MeshTCPRoute is needed (this assumes outbounds carry no tag but kuma.io/service)",
        ));
    } else {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                "conf",
                "once a MeshHTTPRoute or MeshTCPRoute applies to a proxy, the route plugins rebuild all its outbounds: HTTP connection managers get normalizePath and lose the legacy listener timeouts (streamIdleTimeout, commonHttpProtocolOptions; TCP proxies their idleTimeout), Envoy routes are named after the hash of their matches, a non-root path prefix becomes two routes (the exact path, and the prefix with a trailing /) and rules are sorted by specificity",
            )
            .affecting(&[
                "routes",
                "normalizePath",
                "streamIdleTimeout",
                "commonHttpProtocolOptions",
                "idleTimeout",
            ]),
        );
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf",
            "Kuma stops applying TrafficRoutes, and the old Timeout, CircuitBreaker, Retry and HealthCheck (baked into the legacy outbounds), to a proxy a MeshHTTPRoute or MeshTCPRoute applies to: convert those too",
        ));
    }
    notes.push(Note::new(
        NoteKind::Semantics,
        "sources",
        "Kuma applies only the most specific TrafficRoute per proxy and outbound; the rules of every MeshHTTPRoute (MeshTCPRoute) targeting the proxy and destination merge (rules with equal matches are merged, by targetRef kind then name), so rules of less specific routes may apply too",
    ));

    let mut outputs = Vec::new();
    for (name, target) in
        selectors::per_selector(ctx, sources, "sources", "output per source", &mut notes)
    {
        if !http_to.is_empty() {
            outputs.push(ctx.output(
                ResourceType::MeshHTTPRoute,
                &name,
                json!({"targetRef": target, "to": http_to}),
            )?);
            outputs.push(ctx.output(
                ResourceType::MeshTCPRoute,
                &name,
                json!({"targetRef": target, "to": tcp_to}),
            )?);
        }
        if let Some(default) = &lb_default {
            let to: Vec<Value> = lb_to
                .iter()
                .map(|t| json!({"targetRef": t, "default": default}))
                .collect();
            outputs.push(ctx.output(
                ResourceType::MeshLoadBalancingStrategy,
                &name,
                json!({"targetRef": target, "to": to}),
            )?);
        }
    }
    // Destinations share the rules: their notes once.
    let mut unique: Vec<Note> = Vec::new();
    for n in notes {
        push_unique(&mut unique, n);
    }
    Ok((outputs, unique))
}

/// `true` when `tags` (a split destination) is the outbound of `service` itself: its service
/// is `service` or `*`, every other tag is `*`.
fn is_self(tags: &BTreeMap<String, String>, service: &str) -> bool {
    tags.iter()
        .all(|(k, v)| v == "*" || (k == SERVICE_TAG && v == service && service != "*"))
}

/// `true` when `conf` routes the outbound of `service` to itself (Kuma's default routing).
fn is_identity(conf: &Conf, service: &str) -> bool {
    let splits = conf.splits();
    conf.http.is_empty()
        && matches!(splits.as_slice(), [one] if one.weight.unwrap_or(0) > 0 && is_self(&one.destination, service))
}

/// The services the route's splits reach (`*` is `service`), each with whether a split
/// reaches its own cluster (no other tag).
fn reached_services(conf: &Conf, service: &str) -> BTreeMap<String, bool> {
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    let all = conf
        .splits()
        .into_iter()
        .chain(conf.http.iter().flat_map(Http::splits));
    for s in all.filter(|s| s.weight.unwrap_or(0) > 0) {
        let name = match s.destination.get(SERVICE_TAG).map(String::as_str) {
            Some("*") | None => service.to_owned(),
            Some(n) => n.to_owned(),
        };
        let plain = s
            .destination
            .iter()
            .all(|(k, v)| k == SERVICE_TAG || v == "*");
        *out.entry(name).or_default() |= plain;
    }
    out
}

/// A split as `backendRefs` for the outbound of `service`.
fn backend_refs(splits: &[Split], service: &str, field: &str, notes: &mut Vec<Note>) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, s) in splits.iter().enumerate() {
        let name = match s.destination.get(SERVICE_TAG).map(String::as_str) {
            Some("*") | None => service,
            Some(n) => n,
        };
        let mut tags = Map::new();
        for (k, v) in &s.destination {
            if k == SERVICE_TAG {
                continue;
            }
            if v == "*" {
                notes.push(Note::new(
                    NoteKind::Selector,
                    format!("{field}.split[{i}].destination.{k}"),
                    format!("'*' means the outbound's own {k}, which has no backendRef form: the tag is left out (outbounds usually carry only kuma.io/service)"),
                ));
                continue;
            }
            tags.insert(k.clone(), Value::String(v.clone()));
        }
        let weight = s.weight.unwrap_or(0);
        out.push(if tags.is_empty() {
            json!({"kind": "MeshService", "name": name, "weight": weight})
        } else {
            json!({"kind": "MeshServiceSubset", "name": name, "tags": tags, "weight": weight})
        });
    }
    out
}

/// One old `http[]` entry as a MeshHTTPRoute rule, and its match (typed, for ordering).
fn http_rule(h: &Http, service: &str, field: &str, notes: &mut Vec<Note>) -> (Value, Match) {
    let m = h.r#match.clone().unwrap_or_default();
    let matched = http_match(&m, &format!("{field}.match"), notes);
    let prefix = m.path.as_ref().is_some_and(|p| p.prefix.is_some());
    let mut default = Map::new();
    if let Some(modify) = &h.modify {
        let filters = filters(modify, prefix, &format!("{field}.modify"), notes);
        if !filters.is_empty() {
            default.insert("filters".to_owned(), Value::Array(filters));
        }
    }
    default.insert(
        "backendRefs".to_owned(),
        Value::Array(backend_refs(&h.splits(), service, field, notes)),
    );
    let typed: Match = serde_json::from_value(matched.clone()).unwrap_or_default();
    (json!({"matches": [matched], "default": default}), typed)
}

/// A note when MeshHTTPRoute's specificity order differs from the rules' order (first match
/// wins in both).
fn order_note(matches: &[Match], notes: &mut Vec<Note>) {
    let mut sorted: Vec<usize> = (0..matches.len()).collect();
    sorted.sort_by(|a, b| compare_match(&matches[*a], &matches[*b]));
    if sorted.iter().enumerate().any(|(i, j)| i != *j) {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                "conf.http",
                "TrafficRoute tries its HTTP rules in order; MeshHTTPRoute sorts them by specificity (exact path, longest prefix, regex; then method, headers): the order changes, so a request matching several rules may take another one",
            )
            .affecting(&["routes"]),
        );
    }
}

/// An old string matcher as `(type, value)` of MeshHTTPRoute headers.
fn header_match(s: &StringMatcher) -> (&'static str, String) {
    if let Some(p) = &s.prefix {
        ("Prefix", p.clone())
    } else if let Some(r) = &s.regex {
        ("RegularExpression", r.clone())
    } else {
        ("Exact", s.exact.clone().unwrap_or_default())
    }
}

/// An old `match` as a MeshHTTPRoute match.
fn http_match(m: &HttpMatch, field: &str, notes: &mut Vec<Note>) -> Value {
    let mut out = Map::new();
    match &m.path {
        Some(StringMatcher {
            prefix: Some(p), ..
        }) => {
            let trimmed = if p == "/" {
                p.as_str()
            } else {
                p.trim_end_matches('/')
            };
            if trimmed != "/" {
                notes.push(
                    Note::new(
                        NoteKind::Semantics,
                        format!("{field}.path.prefix"),
                        format!("MeshHTTPRoute's PathPrefix {trimmed} matches whole path segments ({trimmed} and {trimmed}/...); TrafficRoute's prefix {p} matched any path starting with it"),
                    )
                    .affecting(&["routes"]),
                );
            }
            out.insert(
                "path".to_owned(),
                json!({"type": "PathPrefix", "value": if trimmed.is_empty() { "/" } else { trimmed }}),
            );
        }
        Some(StringMatcher { regex: Some(r), .. }) => {
            out.insert(
                "path".to_owned(),
                json!({"type": "RegularExpression", "value": r}),
            );
        }
        Some(StringMatcher { exact: Some(e), .. }) => {
            out.insert("path".to_owned(), json!({"type": "Exact", "value": e}));
        }
        _ => {}
    }
    if let Some(method) = &m.method {
        match &method.exact {
            Some(e) if METHODS.contains(&e.as_str()) => {
                out.insert("method".to_owned(), json!(e));
            }
            _ => notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("{field}.method"),
                    "MeshHTTPRoute matches a method exactly, one of CONNECT, DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, TRACE: this method match is dropped, so the rule matches more requests",
                )
                .affecting(&["routes"]),
            ),
        }
    }
    if let Some(headers) = &m.headers {
        let mut list = Vec::new();
        for (name, s) in headers {
            let (ty, value) = header_match(s);
            if ty == "Prefix" && value.is_empty() {
                notes.push(
                    Note::new(
                        NoteKind::Semantics,
                        format!("{field}.headers.{name}"),
                        "an empty prefix becomes MeshHTTPRoute's presence match (same requests)",
                    )
                    .affecting(&["routes"]),
                );
            }
            list.push(json!({"type": ty, "name": name, "value": value}));
        }
        if out.contains_key("method") && !list.is_empty() {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    format!("{field}.headers"),
                    "MeshHTTPRoute puts the :method matcher before the header matchers (TrafficRoute after them): same requests",
                )
                .affecting(&["routes"]),
            );
        }
        out.insert("headers".to_owned(), Value::Array(list));
    }
    Value::Object(out)
}

/// Header changes as a MeshHTTPRoute header modifier (`None` when empty).
fn header_modifier(h: &Headers, field: &str, notes: &mut Vec<Note>) -> Option<Value> {
    let mut set = Vec::new();
    let mut add = Vec::new();
    let mut seen_add = false;
    let mut reordered = false;
    for (i, a) in h.add.iter().enumerate() {
        if a.value.contains(',') {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    format!("{field}.add[{i}].value"),
                    "MeshHTTPRoute adds one header per comma-separated value",
                )
                .affecting(&["routes"]),
            );
        }
        let kv = json!({"name": a.name, "value": a.value});
        if a.append {
            seen_add = true;
            add.push(kv);
        } else {
            reordered |= seen_add;
            set.push(kv);
        }
    }
    if reordered {
        notes.push(
            Note::new(
                NoteKind::Semantics,
                format!("{field}.add"),
                "MeshHTTPRoute applies the overwriting headers (set) before the appended ones (add): the order changes",
            )
            .affecting(&["routes"]),
        );
    }
    let remove: Vec<&str> = h.remove.iter().map(|r| r.name.as_str()).collect();
    let mut m = Map::new();
    if !set.is_empty() {
        m.insert("set".to_owned(), json!(set));
    }
    if !add.is_empty() {
        m.insert("add".to_owned(), json!(add));
    }
    if !remove.is_empty() {
        m.insert("remove".to_owned(), json!(remove));
    }
    (!m.is_empty()).then_some(Value::Object(m))
}

/// `modify` as MeshHTTPRoute filters; `prefix`: the rule matches a path prefix.
fn filters(modify: &Modify, prefix: bool, field: &str, notes: &mut Vec<Note>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rewrite = Map::new();
    if let Some(p) = &modify.path {
        if let Some(r) = &p.rewrite_prefix {
            if prefix {
                rewrite.insert(
                    "path".to_owned(),
                    json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": r}),
                );
                notes.push(
                    Note::new(
                        NoteKind::Semantics,
                        format!("{field}.path.rewritePrefix"),
                        "MeshHTTPRoute's ReplacePrefixMatch rewrites the exact-path route with a full-path regex and the prefix route (prefix with a trailing /) with a prefix rewrite",
                    )
                    .affecting(&["routes"]),
                );
            } else {
                notes.push(
                    Note::new(
                        NoteKind::Dropped,
                        format!("{field}.path.rewritePrefix"),
                        "a prefix rewrite needs a path prefix match in MeshHTTPRoute: dropped",
                    )
                    .affecting(&["routes"]),
                );
            }
        } else if p.regex.is_some() {
            notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("{field}.path.regex"),
                    "MeshHTTPRoute has no regex path rewrite: dropped",
                )
                .affecting(&["routes"]),
            );
        }
    }
    if let Some(h) = &modify.host {
        if let Some(v) = &h.value {
            rewrite.insert("hostname".to_owned(), json!(v));
        } else if h.from_path.is_some() {
            notes.push(
                Note::new(
                    NoteKind::Dropped,
                    format!("{field}.host.fromPath"),
                    "MeshHTTPRoute has no host rewrite from the path: dropped",
                )
                .affecting(&["routes"]),
            );
        }
    }
    if !rewrite.is_empty() {
        out.push(json!({"type": "URLRewrite", "urlRewrite": rewrite}));
    }
    if let Some(h) = &modify.request_headers {
        if let Some(m) = header_modifier(h, &format!("{field}.requestHeaders"), notes) {
            out.push(json!({"type": "RequestHeaderModifier", "requestHeaderModifier": m}));
        }
    }
    if let Some(h) = &modify.response_headers {
        if let Some(m) = header_modifier(h, &format!("{field}.responseHeaders"), notes) {
            out.push(json!({"type": "ResponseHeaderModifier", "responseHeaderModifier": m}));
        }
    }
    out
}

fn is_round_robin(lb: &LoadBalancer) -> bool {
    lb.round_robin.is_some()
        || (lb.least_request.is_none()
            && lb.ring_hash.is_none()
            && lb.random.is_none()
            && lb.maglev.is_none())
}

/// `loadBalancer` as MeshLoadBalancingStrategy's `default`.
fn load_balancer(lb: &LoadBalancer, notes: &mut Vec<Note>) -> Result<Value, ConvertError> {
    let balancer = if let Some(lr) = &lb.least_request {
        let mut m = Map::new();
        if lr.choice_count > 0 {
            m.insert("choiceCount".to_owned(), json!(lr.choice_count));
        }
        json!({"type": "LeastRequest", "leastRequest": m})
    } else if let Some(rh) = &lb.ring_hash {
        let mut m = Map::new();
        m.insert(
            "hashFunction".to_owned(),
            json!(if rh.hash_function == "MURMUR_HASH_2" {
                "MurmurHash2"
            } else {
                "XXHash"
            }),
        );
        for (k, v, old) in [
            ("minRingSize", rh.min_ring_size, "minRingSize"),
            ("maxRingSize", rh.max_ring_size, "maxRingSize"),
        ] {
            if v == 0 {
                continue;
            }
            match u32::try_from(v) {
                Ok(v) => {
                    m.insert(k.to_owned(), json!(v));
                }
                Err(_) => notes.push(
                    Note::new(
                        NoteKind::Dropped,
                        format!("conf.loadBalancer.ringHash.{old}"),
                        "MeshLoadBalancingStrategy ring sizes are 32-bit: dropped",
                    )
                    .affecting(&["ringHashLbConfig"]),
                ),
            }
        }
        json!({"type": "RingHash", "ringHash": m})
    } else if lb.random.is_some() {
        json!({"type": "Random", "random": {}})
    } else if lb.maglev.is_some() {
        json!({"type": "Maglev", "maglev": {}})
    } else {
        json!({"type": "RoundRobin", "roundRobin": {}})
    };
    Ok(json!({"loadBalancer": balancer, "localityAwareness": {"disabled": true}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{
        convert, has as testing_has, policy, ANY_TO_ANY, WEB_TO_BACKEND as SEL,
    };
    use crate::convert::Conversion;
    use crate::resource::Resource;

    fn tr(body: &str) -> Resource {
        policy("TrafficRoute", "tr", body)
    }

    fn run(body: &str) -> Conversion {
        convert(&tr(body)).unwrap()
    }

    fn spec(c: &Conversion, ty: ResourceType) -> Value {
        c.outputs
            .iter()
            .find(|o| o.ty() == ty)
            .unwrap_or_else(|| panic!("no {ty}"))
            .spec_value()
    }

    fn has(c: &Conversion, kind: NoteKind, field: &str) -> bool {
        testing_has(&c.notes, kind, field)
    }

    #[test]
    fn split_becomes_http_and_tcp_routes() {
        let c = run(&format!("{SEL}conf:\n  split:\n  - weight: 90\n    destination: {{kuma.io/service: '*', version: v1}}\n  - weight: 10\n    destination: {{kuma.io/service: backend-v2}}\n"));
        let types: Vec<ResourceType> = c.outputs.iter().map(Resource::ty).collect();
        assert_eq!(
            types,
            [ResourceType::MeshHTTPRoute, ResourceType::MeshTCPRoute]
        );
        let refs = json!([
            {"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v1"}, "weight": 90},
            {"kind": "MeshService", "name": "backend-v2", "weight": 10},
        ]);
        assert_eq!(
            spec(&c, ResourceType::MeshHTTPRoute),
            json!({"targetRef": {"kind": "MeshService", "name": "web"}, "to": [{
                "targetRef": {"kind": "MeshService", "name": "backend"},
                "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "default": {"backendRefs": refs}}],
            }]})
        );
        assert_eq!(
            spec(&c, ResourceType::MeshTCPRoute),
            json!({"targetRef": {"kind": "MeshService", "name": "web"}, "to": [{
                "targetRef": {"kind": "MeshService", "name": "backend"},
                "rules": [{"default": {"backendRefs": refs}}],
            }]})
        );
        let rebuilt = c
            .notes
            .iter()
            .find(|n| n.affects.contains(&"normalizePath".to_owned()))
            .unwrap();
        assert_eq!(rebuilt.kind, NoteKind::Semantics);
    }

    #[test]
    fn http_rules_map_match_modify_and_destination() {
        let c = run(&format!(
            "{SEL}conf:\n  destination: {{kuma.io/service: backend}}\n  http:\n  - match:\n      path: {{prefix: /api/}}\n      method: {{exact: POST}}\n      headers:\n        x-a: {{exact: '1'}}\n        x-b: {{prefix: p}}\n        x-c: {{regex: '^c$'}}\n    modify:\n      path: {{rewritePrefix: /v2}}\n      host: {{value: api.example.com}}\n      requestHeaders:\n        add: [{{name: x-set, value: s}}, {{name: x-add, value: a, append: true}}]\n        remove: [{{name: x-rm}}]\n      responseHeaders:\n        add: [{{name: x-resp, value: '1,2', append: true}}]\n    split:\n    - weight: 1\n      destination: {{kuma.io/service: backend, version: v2}}\n  - match:\n      path: {{exact: /exact}}\n    destination: {{kuma.io/service: backend}}\n  - match:\n      path: {{regex: '^/r'}}\n      method: {{prefix: G}}\n    destination: {{kuma.io/service: backend}}\n"
        ));
        let http = spec(&c, ResourceType::MeshHTTPRoute);
        let rules = &http["to"][0]["rules"];
        assert_eq!(
            rules[0],
            json!({
                "matches": [{
                    "path": {"type": "PathPrefix", "value": "/api"},
                    "method": "POST",
                    "headers": [
                        {"type": "Exact", "name": "x-a", "value": "1"},
                        {"type": "Prefix", "name": "x-b", "value": "p"},
                        {"type": "RegularExpression", "name": "x-c", "value": "^c$"},
                    ],
                }],
                "default": {
                    "filters": [
                        {"type": "URLRewrite", "urlRewrite": {
                            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"},
                            "hostname": "api.example.com"}},
                        {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                            "set": [{"name": "x-set", "value": "s"}],
                            "add": [{"name": "x-add", "value": "a"}],
                            "remove": ["x-rm"]}},
                        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                            "add": [{"name": "x-resp", "value": "1,2"}]}},
                    ],
                    "backendRefs": [{"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}, "weight": 1}],
                },
            })
        );
        assert_eq!(
            rules[1]["matches"],
            json!([{"path": {"type": "Exact", "value": "/exact"}}])
        );
        // The prefix method match is dropped.
        assert_eq!(
            rules[2]["matches"],
            json!([{"path": {"type": "RegularExpression", "value": "^/r"}}])
        );
        assert!(has(&c, NoteKind::Dropped, "conf.http[2].match.method"));
        // Catch-all last with the default destination.
        assert_eq!(
            rules[3],
            json!({"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "default": {"backendRefs": [{"kind": "MeshService", "name": "backend", "weight": 1}]}})
        );
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.http[0].match.path.prefix"
        ));
        assert!(has(&c, NoteKind::Semantics, "conf.http[0].match.headers"));
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.http[0].modify.path.rewritePrefix"
        ));
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.http[0].modify.responseHeaders.add[0].value"
        ));
        // Exact sorts before the prefix rule: the order changes.
        assert!(has(&c, NoteKind::Semantics, "conf.http"));
        // set after add would be reordered; here set comes first: no note.
        assert!(!has(
            &c,
            NoteKind::Semantics,
            "conf.http[0].modify.requestHeaders.add"
        ));
    }

    #[test]
    fn untranslatable_modifications_are_dropped() {
        let c = run(&format!(
            "{SEL}conf:\n  destination: {{kuma.io/service: backend}}\n  http:\n  - match:\n      path: {{prefix: /a}}\n    modify:\n      path: {{regex: {{pattern: '^/a', substitution: /b}}}}\n      host: {{fromPath: {{pattern: '^/(.*)', substitution: '\\1'}}}}\n      requestHeaders:\n        add: [{{name: x-1, value: a, append: true}}, {{name: x-2, value: b}}]\n    destination: {{kuma.io/service: backend}}\n"
        ));
        let rules = &spec(&c, ResourceType::MeshHTTPRoute)["to"][0]["rules"];
        assert_eq!(
            rules[0]["default"]["filters"],
            json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "x-2", "value": "b"}], "add": [{"name": "x-1", "value": "a"}]}}])
        );
        assert!(has(&c, NoteKind::Dropped, "conf.http[0].modify.path.regex"));
        assert!(has(
            &c,
            NoteKind::Dropped,
            "conf.http[0].modify.host.fromPath"
        ));
        assert!(has(
            &c,
            NoteKind::Semantics,
            "conf.http[0].modify.requestHeaders.add"
        ));
        // In order: no order note.
        assert!(!has(&c, NoteKind::Semantics, "conf.http"));
    }

    #[test]
    fn a_catch_all_rule_replaces_the_default_rule() {
        let c = run(&format!(
            "{SEL}conf:\n  destination: {{kuma.io/service: backend, version: v1}}\n  http:\n  - match:\n      path: {{prefix: /}}\n    destination: {{kuma.io/service: backend, version: v2}}\n"
        ));
        let rules = &spec(&c, ResourceType::MeshHTTPRoute)["to"][0]["rules"];
        assert_eq!(rules.as_array().unwrap().len(), 1);
        assert_eq!(
            rules[0]["default"]["backendRefs"][0]["tags"]["version"],
            "v2"
        );
        assert_eq!(
            spec(&c, ResourceType::MeshTCPRoute)["to"][0]["rules"][0]["default"]["backendRefs"][0]
                ["tags"]["version"],
            "v1"
        );
        assert!(has(&c, NoteKind::Semantics, "conf.split"));
    }

    #[test]
    fn routing_to_itself_needs_no_route() {
        // Kuma's route-all, with a balancer.
        let c = run(&format!("{ANY_TO_ANY}conf:\n  destination: {{kuma.io/service: '*'}}\n  loadBalancer: {{ringHash: {{hashFunction: MURMUR_HASH_2, minRingSize: 64}}}}\n"));
        let types: Vec<ResourceType> = c.outputs.iter().map(Resource::ty).collect();
        assert_eq!(types, [ResourceType::MeshLoadBalancingStrategy]);
        assert_eq!(
            spec(&c, ResourceType::MeshLoadBalancingStrategy),
            json!({"targetRef": {"kind": "Mesh"}, "to": [{"targetRef": {"kind": "Mesh"}, "default": {
                "loadBalancer": {"type": "RingHash", "ringHash": {"hashFunction": "MurmurHash2", "minRingSize": 64}},
                "localityAwareness": {"disabled": true}}}]})
        );
        // The balancer lands on the clusters the route used: no visible difference.
        assert!(c.notes.iter().all(|n| n.affects.is_empty()));
        // Without a balancer: nothing at all.
        let c = run(&format!(
            "{SEL}conf:\n  destination: {{kuma.io/service: backend}}\n"
        ));
        assert!(c.outputs.is_empty());
        assert!(has(&c, NoteKind::Semantics, "conf"));
    }

    #[test]
    fn a_balancer_on_subsets_only_also_reaches_the_service_cluster() {
        let c = run(&format!("{SEL}conf:\n  destination: {{kuma.io/service: backend, version: v2}}\n  loadBalancer: {{leastRequest: {{choiceCount: 3}}}}\n"));
        assert_eq!(
            spec(&c, ResourceType::MeshLoadBalancingStrategy)["to"],
            json!([{"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {
                "loadBalancer": {"type": "LeastRequest", "leastRequest": {"choiceCount": 3}},
                "localityAwareness": {"disabled": true}}}])
        );
        let n = c
            .notes
            .iter()
            .find(|n| n.field == "conf.loadBalancer")
            .unwrap();
        assert!(n.affects.contains(&"lbPolicy".to_owned()));
        // Round robin is Envoy's default: nothing visible.
        let c = run(&format!("{SEL}conf:\n  destination: {{kuma.io/service: backend, version: v2}}\n  loadBalancer: {{roundRobin: {{}}}}\n"));
        let n = c
            .notes
            .iter()
            .find(|n| n.field == "conf.loadBalancer")
            .unwrap();
        assert!(n.affects.is_empty());
    }

    #[test]
    fn balancer_kinds() {
        let mut notes = Vec::new();
        let lb = |y: &str| -> LoadBalancer { serde_json::from_str(y).unwrap() };
        assert_eq!(
            load_balancer(&lb(r#"{"random": {}}"#), &mut notes).unwrap()["loadBalancer"],
            json!({"type": "Random", "random": {}})
        );
        assert_eq!(
            load_balancer(&lb(r#"{"maglev": {}}"#), &mut notes).unwrap()["loadBalancer"],
            json!({"type": "Maglev", "maglev": {}})
        );
        assert_eq!(
            load_balancer(&lb(r#"{"leastRequest": {}}"#), &mut notes).unwrap()["loadBalancer"],
            json!({"type": "LeastRequest", "leastRequest": {}})
        );
        assert_eq!(
            load_balancer(
                &lb(r#"{"ringHash": {"hashFunction": "XX_HASH", "maxRingSize": 8589934592}}"#),
                &mut notes
            )
            .unwrap()["loadBalancer"],
            json!({"type": "RingHash", "ringHash": {"hashFunction": "XXHash"}})
        );
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].field, "conf.loadBalancer.ringHash.maxRingSize");
    }

    #[test]
    fn destinations_and_sources() {
        // A wildcard destination with a split cannot name the `to` service.
        let e = convert(&tr(&format!(
            "{ANY_TO_ANY}conf:\n  destination: {{kuma.io/service: '*', version: v2}}\n"
        )))
        .unwrap_err();
        assert!(matches!(e, ConvertError::Unsupported { .. }), "{e}");
        // Two sources, two destinations.
        let c = run("sources:\n- match: {kuma.io/service: web}\n- match: {kuma.io/service: api, team: a}\ndestinations:\n- match: {kuma.io/service: backend}\n- match: {kuma.io/service: db}\nconf:\n  destination: {kuma.io/service: '*', version: v2}\n");
        let names: Vec<(ResourceType, &str)> = c
            .outputs
            .iter()
            .map(|o| (o.ty(), o.meta.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (ResourceType::MeshHTTPRoute, "tr-1"),
                (ResourceType::MeshTCPRoute, "tr-1"),
                (ResourceType::MeshHTTPRoute, "tr-2"),
                (ResourceType::MeshTCPRoute, "tr-2"),
            ]
        );
        let http = c.outputs[2].spec_value();
        assert_eq!(
            http["targetRef"],
            json!({"kind": "MeshServiceSubset", "name": "api", "tags": {"team": "a"}})
        );
        assert_eq!(
            http["to"][1]["rules"][0]["default"]["backendRefs"],
            json!([{"kind": "MeshServiceSubset", "name": "db", "tags": {"version": "v2"}, "weight": 1}])
        );
        assert!(has(&c, NoteKind::Selector, "sources[1]"));
        // Errors.
        let e = convert(&tr(SEL)).unwrap_err();
        assert!(matches!(e, ConvertError::Empty { .. }));
        let e = convert(&tr(&format!("{SEL}conf:\n  destination: {{kuma.io/service: backend}}\n  http:\n  - match: {{path: {{prefix: /a}}}}\n    modify: {{host: {{value: Not_A_Host}}}}\n    destination: {{kuma.io/service: backend}}\n")))
        .unwrap_err();
        assert!(matches!(e, ConvertError::Invalid { .. }), "{e}");
    }

    #[test]
    fn wildcard_subset_tags_are_left_out() {
        let c = run(&format!(
            "{SEL}conf:\n  destination: {{kuma.io/service: backend, version: '*', zone: z1}}\n"
        ));
        assert_eq!(
            spec(&c, ResourceType::MeshTCPRoute)["to"][0]["rules"][0]["default"]["backendRefs"],
            json!([{"kind": "MeshServiceSubset", "name": "backend", "tags": {"zone": "z1"}, "weight": 1}])
        );
        assert!(has(
            &c,
            NoteKind::Selector,
            "conf.split[0].destination.version"
        ));
    }
}
