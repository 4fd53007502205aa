//! MeshGatewayRoute, the old (selector) route of builtin gateways (Kuma 2.7.29
//! `api/mesh/v1alpha1/gateway_route.proto`, `pkg/plugins/runtime/gateway/gateway_route_generator.go`
//! and `match/routes.go`), read into the MeshHTTPRoute model so that generation and
//! `umbractl convert` share one reading of it.
//!
//! - A MeshGatewayRoute applies to a gateway listener when one of its `selectors` matches the
//!   listener's tags (the DPP's gateway tags, the MeshGateway's `tags` and the listener's own,
//!   merged: [`crate::gateway::SelectedGateway::listeners`]).
//! - `conf.http` routes `HTTP` and `HTTPS` listeners, `conf.tcp` routes `TCP` ones.
//! - An HTTP rule becomes a MeshHTTPRoute [`RouteRule`] ([`GatewayRouteConf::http_rules`]):
//!   path `EXACT`/`PREFIX`/`REGEX` become `Exact`/`PathPrefix`/`RegularExpression` (no path is
//!   `PathPrefix /`, as Kuma's `makeRouteMatch`), header `EXACT`/`REGEX`/`ABSENT`/`PRESENT`
//!   and query `EXACT`/`REGEX` likewise; filters `requestHeader`, `responseHeader`, `rewrite`,
//!   `redirect` and `mirror` become `RequestHeaderModifier`, `ResponseHeaderModifier`,
//!   `URLRewrite`, `RequestRedirect` and `RequestMirror`; each backend's `destination`
//!   becomes a `MeshService` (only `kuma.io/service`) or a `MeshServiceSubset` backendRef with
//!   the backend's `weight`.
//! - `conf.http.hostnames` limit the virtual hosts the route joins ([`host_matches`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::policies::backend_ref::BackendRef;
use crate::policies::mesh_http_route::{
    Filter, HeaderKeyValue, HeaderMatch, HeaderModifier, Match, PathMatch, PathRewrite,
    QueryParamsMatch, RequestMirror, RequestRedirect, RouteRule, RuleConf, UrlRewrite,
};
use crate::target_ref::{TargetRefKind, SERVICE_TAG};

/// A MeshGatewayRoute's `conf`: an HTTP or a TCP route.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRouteConf {
    /// `conf.http`.
    #[serde(default)]
    pub http: Option<HttpRoute>,
    /// `conf.tcp`.
    #[serde(default)]
    pub tcp: Option<TcpRoute>,
}

/// `conf.http`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    /// Host names the route serves (all when empty); `*.example.com` wildcards allowed.
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// Rules.
    #[serde(default)]
    pub rules: Vec<HttpRule>,
}

/// `conf.tcp`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TcpRoute {
    /// Rules (their backends are pooled).
    #[serde(default)]
    pub rules: Vec<TcpRule>,
}

/// One TCP rule.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TcpRule {
    /// Backends.
    #[serde(default)]
    pub backends: Vec<Backend>,
}

/// One HTTP rule: matches (ORed), filters, backends.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct HttpRule {
    /// Matches.
    #[serde(default)]
    pub matches: Vec<OldMatch>,
    /// Filters.
    #[serde(default)]
    pub filters: Vec<Map<String, Value>>,
    /// Backends.
    #[serde(default)]
    pub backends: Vec<Backend>,
}

/// A weighted backend: a tag selector of endpoints.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Backend {
    /// Relative weight (0: ignored).
    #[serde(default)]
    pub weight: u32,
    /// Endpoint tags; `kuma.io/service` names the service.
    #[serde(default)]
    pub destination: BTreeMap<String, String>,
}

/// One match of an HTTP rule.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OldMatch {
    /// Path match.
    #[serde(default)]
    pub path: Option<OldValueMatch>,
    /// HTTP method (`GET`, ...).
    #[serde(default)]
    pub method: Option<String>,
    /// Header matches.
    #[serde(default)]
    pub headers: Vec<OldValueMatch>,
    /// Query parameter matches.
    #[serde(default)]
    pub query_parameters: Vec<OldValueMatch>,
}

/// A path, header or query match: `match` type (`EXACT` by default), `name`, `value`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct OldValueMatch {
    /// `EXACT` (default), `PREFIX`, `REGEX`, `ABSENT`, `PRESENT`.
    #[serde(default, rename = "match")]
    pub match_type: Option<String>,
    /// Header or parameter name.
    #[serde(default)]
    pub name: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

impl GatewayRouteConf {
    /// Read a MeshGatewayRoute's `conf` (`None` when it does not read).
    pub fn read(conf: Option<&Map<String, Value>>) -> Option<Self> {
        serde_json::from_value(Value::Object(conf?.clone())).ok()
    }

    /// The HTTP rules in the MeshHTTPRoute model (see the module docs).
    pub fn http_rules(&self) -> Vec<RouteRule> {
        self.http
            .iter()
            .flat_map(|h| &h.rules)
            .map(|r| RouteRule {
                matches: r.matches.iter().map(new_match).collect(),
                default: RuleConf {
                    filters: (!r.filters.is_empty())
                        .then(|| r.filters.iter().filter_map(new_filter).collect()),
                    backend_refs: Some(backend_refs(&r.backends)),
                },
            })
            .collect()
    }

    /// The backends of every TCP rule, pooled (Kuma forwards to all of them, weighted).
    pub fn tcp_backends(&self) -> Vec<BackendRef> {
        let all: Vec<Backend> = self
            .tcp
            .iter()
            .flat_map(|t| &t.rules)
            .flat_map(|r| r.backends.iter().cloned())
            .collect();
        backend_refs(&all)
    }

    /// `conf.http.hostnames`.
    pub fn hostnames(&self) -> &[String] {
        self.http.as_ref().map_or(&[], |h| &h.hostnames)
    }
}

/// Whether `host` (a virtual host's name) and one of `names` match (Kuma's
/// `match.Hostnames`: either contains the other, `*` and `*.<suffix>` wildcards on both
/// sides).
pub fn host_matches(host: &str, names: &[String]) -> bool {
    names.iter().any(|n| contains(host, n) || contains(n, host))
}

/// Kuma's `Hostname.contains`: `pattern` (possibly a `*` or `*.<suffix>` wildcard) covers
/// `name`: equal, `*`, or `name` ends with `.<suffix>` (a wildcard `name` with a longer
/// suffix included).
fn contains(pattern: &str, name: &str) -> bool {
    if pattern == name || pattern == "*" {
        return true;
    }
    match pattern.strip_prefix('*') {
        Some(suffix) if suffix.starts_with('.') => {
            let name = name.strip_prefix('*').unwrap_or(name);
            name.len() > suffix.len() && name.ends_with(suffix)
        }
        _ => false,
    }
}

/// The services (`destination["kuma.io/service"]`) a MeshGatewayRoute `conf` sends to: its
/// HTTP rules' backends and mirrors, its TCP rules' backends, read from the JSON itself.
pub fn destination_services(conf: Option<&Map<String, Value>>) -> Vec<&str> {
    let Some(conf) = conf else {
        return Vec::new();
    };
    let rules = ["http", "tcp"]
        .into_iter()
        .filter_map(|k| conf.get(k)?.get("rules")?.as_array())
        .flatten();
    let mut out = Vec::new();
    for rule in rules {
        let backends = rule.get("backends").and_then(Value::as_array);
        let mirrors = rule
            .get("filters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("mirror")?.get("backend"));
        for b in backends.into_iter().flatten().chain(mirrors) {
            if let Some(s) = b
                .pointer("/destination/kuma.io~1service")
                .and_then(Value::as_str)
            {
                out.push(s);
            }
        }
    }
    out
}

/// Backends as backendRefs; a lone backend without a weight (0) gets weight 1, as Kuma's
/// `RouteActionForward` forces it ("only one destination: 100%").
fn backend_refs(backends: &[Backend]) -> Vec<BackendRef> {
    let mut out: Vec<BackendRef> = backends.iter().map(backend_ref).collect();
    if let [only] = out.as_mut_slice() {
        if only.weight == Some(0) {
            only.weight = Some(1);
        }
    }
    out
}

/// A backend `{weight, destination}` as a backendRef.
pub fn backend_ref(b: &Backend) -> BackendRef {
    let name = b.destination.get(SERVICE_TAG).cloned().unwrap_or_default();
    let tags: BTreeMap<String, String> = b
        .destination
        .iter()
        .filter(|(k, _)| k.as_str() != SERVICE_TAG)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    BackendRef {
        kind: Some(if tags.is_empty() {
            TargetRefKind::MeshService
        } else {
            TargetRefKind::MeshServiceSubset
        }),
        name,
        tags,
        weight: Some(b.weight),
        ..BackendRef::default()
    }
}

fn new_match(m: &OldMatch) -> Match {
    let path = match &m.path {
        Some(p) => PathMatch {
            value: p.value.clone(),
            match_type: match p.match_type.as_deref().unwrap_or("EXACT") {
                "PREFIX" => "PathPrefix",
                "REGEX" => "RegularExpression",
                _ => "Exact",
            }
            .to_owned(),
        },
        None => PathMatch {
            value: "/".to_owned(),
            match_type: "PathPrefix".to_owned(),
        },
    };
    Match {
        path: Some(path),
        method: m.method.clone().filter(|m| !m.is_empty() && m != "NONE"),
        query_params: m
            .query_parameters
            .iter()
            .map(|q| QueryParamsMatch {
                match_type: match q.match_type.as_deref().unwrap_or("EXACT") {
                    "REGEX" => "RegularExpression",
                    _ => "Exact",
                }
                .to_owned(),
                name: q.name.clone(),
                value: q.value.clone(),
            })
            .collect(),
        headers: m
            .headers
            .iter()
            .map(|h| HeaderMatch {
                match_type: Some(
                    match h.match_type.as_deref().unwrap_or("EXACT") {
                        "REGEX" => "RegularExpression",
                        "ABSENT" => "Absent",
                        "PRESENT" => "Present",
                        _ => "Exact",
                    }
                    .to_owned(),
                ),
                name: h.name.clone(),
                value: h.value.clone(),
            })
            .collect(),
    }
}

fn header_modifier(v: &Value) -> HeaderModifier {
    let pairs = |key: &str| -> Option<Vec<HeaderKeyValue>> {
        let list = v.get(key)?.as_array()?;
        Some(
            list.iter()
                .map(|h| HeaderKeyValue {
                    name: str_of(h, "name"),
                    value: str_of(h, "value"),
                })
                .collect(),
        )
    };
    HeaderModifier {
        set: pairs("set"),
        add: pairs("add"),
        remove: v.get("remove").and_then(Value::as_array).map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        }),
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn path_rewrite(v: &Value) -> Option<PathRewrite> {
    if let Some(full) = v.get("replaceFull").and_then(Value::as_str) {
        return Some(PathRewrite {
            rewrite_type: "ReplaceFullPath".to_owned(),
            replace_full_path: Some(full.to_owned()),
            replace_prefix_match: None,
        });
    }
    let prefix = v.get("replacePrefixMatch").and_then(Value::as_str)?;
    Some(PathRewrite {
        rewrite_type: "ReplacePrefixMatch".to_owned(),
        replace_full_path: None,
        replace_prefix_match: Some(prefix.to_owned()),
    })
}

fn new_filter(f: &Map<String, Value>) -> Option<Filter> {
    let empty = |filter_type: &str| Filter {
        filter_type: filter_type.to_owned(),
        request_header_modifier: None,
        response_header_modifier: None,
        request_redirect: None,
        url_rewrite: None,
        request_mirror: None,
    };
    if let Some(h) = f.get("requestHeader") {
        return Some(Filter {
            request_header_modifier: Some(header_modifier(h)),
            ..empty("RequestHeaderModifier")
        });
    }
    if let Some(h) = f.get("responseHeader") {
        return Some(Filter {
            response_header_modifier: Some(header_modifier(h)),
            ..empty("ResponseHeaderModifier")
        });
    }
    if let Some(r) = f.get("rewrite") {
        return Some(Filter {
            url_rewrite: Some(UrlRewrite {
                hostname: None,
                path: path_rewrite(r),
                host_to_backend_hostname: r
                    .get("hostToBackendHostname")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            }),
            ..empty("URLRewrite")
        });
    }
    if let Some(r) = f.get("redirect") {
        let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
        let number = |k: &str| r.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
        return Some(Filter {
            request_redirect: Some(RequestRedirect {
                scheme: text("scheme"),
                hostname: text("hostname"),
                path: r.get("path").and_then(path_rewrite),
                port: number("port").and_then(|p| u32::try_from(p).ok()),
                status_code: number("statusCode").and_then(|s| u16::try_from(s).ok()),
            }),
            ..empty("RequestRedirect")
        });
    }
    if let Some(m) = f.get("mirror") {
        let backend: Backend = serde_json::from_value(m.get("backend")?.clone()).ok()?;
        let mut backend_ref = backend_ref(&backend);
        backend_ref.weight = None;
        return Some(Filter {
            request_mirror: Some(RequestMirror {
                percentage: m.get("percentage").cloned(),
                backend_ref,
            }),
            ..empty("RequestMirror")
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_rule_reads_as_a_mesh_http_route_rule() {
        let conf: Map<String, Value> = serde_json::from_str(
            r#"{"http": {"hostnames": ["*.example.com"], "rules": [
                {"matches": [{"path": {"match": "PREFIX", "value": "/api"}, "method": "GET",
                              "headers": [{"match": "PRESENT", "name": "x-a", "value": ""}],
                              "queryParameters": [{"name": "q", "value": "1"}]},
                             {"headers": [{"name": "x-b", "value": "b"}]}],
                 "filters": [{"requestHeader": {"set": [{"name": "x-c", "value": "c"}], "remove": ["x-d"]}},
                             {"rewrite": {"replacePrefixMatch": "/", "hostToBackendHostname": true}},
                             {"mirror": {"backend": {"destination": {"kuma.io/service": "shadow"}}, "percentage": 10}}],
                 "backends": [{"weight": 3, "destination": {"kuma.io/service": "web", "version": "v2"}},
                              {"weight": 1, "destination": {"kuma.io/service": "web"}}]}]}}"#,
        )
        .unwrap();
        let read = GatewayRouteConf::read(Some(&conf)).unwrap();
        assert!(host_matches("api.example.com", read.hostnames()));
        assert!(!host_matches("example.com", read.hostnames()));
        // Both ways, wildcards on either side (Kuma's match.Hostnames).
        assert!(host_matches(
            "*.example.com",
            &["api.example.com".to_owned()]
        ));
        assert!(host_matches("*.com", &["*.example.com".to_owned()]));
        assert!(!host_matches(
            "*.example.com",
            &["api.other.com".to_owned()]
        ));
        let rules = read.http_rules();
        assert_eq!(rules.len(), 1);
        let m = &rules[0].matches;
        assert_eq!(m[0].path.as_ref().unwrap().match_type, "PathPrefix");
        assert_eq!(m[0].method.as_deref(), Some("GET"));
        assert_eq!(m[0].headers[0].match_type.as_deref(), Some("Present"));
        assert_eq!(m[0].query_params[0].match_type, "Exact");
        // No path: Kuma matches every path.
        assert_eq!(m[1].path.as_ref().unwrap().value, "/");
        let filters = rules[0].default.filters.as_ref().unwrap();
        let kinds: Vec<&str> = filters.iter().map(|f| f.filter_type.as_str()).collect();
        assert_eq!(
            kinds,
            ["RequestHeaderModifier", "URLRewrite", "RequestMirror"]
        );
        assert!(
            filters[1]
                .url_rewrite
                .as_ref()
                .unwrap()
                .host_to_backend_hostname
        );
        let backends = rules[0].default.backend_refs.as_ref().unwrap();
        assert_eq!(backends[0].kind, Some(TargetRefKind::MeshServiceSubset));
        assert_eq!(backends[0].tags["version"], "v2");
        assert_eq!(backends[0].weight, Some(3));
        assert_eq!(backends[1].kind, Some(TargetRefKind::MeshService));
    }

    #[test]
    fn tcp_backends_are_pooled() {
        let conf: Map<String, Value> = serde_json::from_str(
            r#"{"tcp": {"rules": [{"backends": [{"weight": 1, "destination": {"kuma.io/service": "db"}}]},
                                  {"backends": [{"weight": 2, "destination": {"kuma.io/service": "db2"}}]}]}}"#,
        )
        .unwrap();
        let read = GatewayRouteConf::read(Some(&conf)).unwrap();
        let names: Vec<String> = read.tcp_backends().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["db", "db2"]);
        assert!(read.http_rules().is_empty());
        // A lone backend without a weight gets all the traffic (Kuma forces weight 1).
        let conf: Map<String, Value> = serde_json::from_str(
            r#"{"http": {"rules": [{"matches": [{"path": {"match": "PREFIX", "value": "/"}}],
                                    "backends": [{"destination": {"kuma.io/service": "web"}}]}]}}"#,
        )
        .unwrap();
        let read = GatewayRouteConf::read(Some(&conf)).unwrap();
        let rules = read.http_rules();
        assert_eq!(
            rules[0].default.backend_refs.as_ref().unwrap()[0].weight,
            Some(1)
        );
    }
}
