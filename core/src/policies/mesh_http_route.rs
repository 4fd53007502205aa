//! MeshHTTPRoute (Kuma 2.7.29 `pkg/plugins/policies/meshhttproute/api/v1alpha1`): the typed
//! spec, its validator, and what route generation needs from it:
//!
//! - [`hash_matches`]: the rule hash Envoy routes are named by and `__rule-matches-hash__`
//!   subsets use (Kuma's `HashMatches`);
//! - [`to_conf`] / [`merge_confs`]: a `to` item's `default` (Kuma's `GetDefault`: its rules
//!   reversed) and the merge of several (rules concatenated, rules with equal `matches` merged,
//!   later wins, the result reversed back: Kuma's `mergeValuesByKey` + `Transform`);
//! - [`prepare_routes`]: the routes of one outbound, one per match in Gateway API precedence
//!   ([`compare_match`]), with Kuma's catch-all `PathPrefix /` route and default backend.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::backend_ref::BackendRef;
use super::{validate_route_to_target_ref, validate_route_top_target_ref};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::validate::{
    go_quote, must_have_at_least_one, PathBuilder, ValidationError, MUST_BE_DEFINED,
    MUST_NOT_BE_DEFINED,
};

/// MeshHTTPRoute spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshHttpRoute {
    /// Proxies the route applies to.
    pub target_ref: TargetRef,
    /// Per-destination route lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<RouteTo>,
}

/// One `to` entry of a MeshHTTPRoute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteTo {
    /// Hostnames (gateways only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    /// Destination (`MeshService`; `Mesh` under a MeshGateway).
    pub target_ref: TargetRef,
    /// Rules; ordered by match specificity when generated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RouteRule>,
}

/// One rule: its matches (ORed) and what to do with matching requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteRule {
    /// Request matches (ORed); the rule's identity when rules are merged.
    #[serde(default)]
    pub matches: Vec<Match>,
    /// Filters and backends.
    #[serde(default)]
    pub default: RuleConf,
}

/// A rule's configuration (Kuma's `RuleConf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleConf {
    /// Request/response modifications, redirect, rewrite, mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<Filter>>,
    /// Where matching requests go (the destination service when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Vec<BackendRef>>,
}

/// An HTTP request match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Path match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,
    /// HTTP method (`GET`, `POST`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Query parameter matches (ANDed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<QueryParamsMatch>,
    /// Header matches (ANDed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
}

/// Path match; field order `value`, `type` matters for the hash (Go struct order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathMatch {
    /// Path or regex.
    #[serde(default)]
    pub value: String,
    /// `Exact`, `PathPrefix`, `RegularExpression`.
    #[serde(default, rename = "type")]
    pub match_type: String,
}

/// Query parameter match; field order `type`, `name`, `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryParamsMatch {
    /// `Exact` or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub match_type: String,
    /// Parameter name.
    #[serde(default)]
    pub name: String,
    /// Value or regex.
    #[serde(default)]
    pub value: String,
}

/// Header match; field order `type` (omitted when empty), `name`, `value` (omitted when empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// `Exact` (default), `Present`, `RegularExpression`, `Absent`, `Prefix`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub match_type: Option<String>,
    /// Header name.
    #[serde(default)]
    pub name: String,
    /// Value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// One filter (Kuma's `Filter`): `type` names the one member that must be set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Filter {
    /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestRedirect`, `URLRewrite`,
    /// `RequestMirror`.
    #[serde(rename = "type")]
    pub filter_type: String,
    /// For `RequestHeaderModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    /// For `ResponseHeaderModifier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    /// For `RequestRedirect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,
    /// For `URLRewrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
    /// For `RequestMirror`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
}

/// Header changes: `set` overwrites, `add` appends, `remove` deletes. A comma-separated value
/// is several values (Kuma splits it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifier {
    /// Headers to overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<HeaderKeyValue>>,
    /// Headers to append.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Vec<HeaderKeyValue>>,
    /// Header names to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<Vec<String>>,
}

/// A header name and value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderKeyValue {
    /// Name.
    pub name: String,
    /// Value (comma-separated values are split).
    pub value: String,
}

/// A redirect answered by the proxy itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRedirect {
    /// `http` or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// Host to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Path to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// Port to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// 301, 302 (default), 303, 307 or 308.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
}

/// A path rewrite: the whole path, or the part the `PathPrefix` match matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathRewrite {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub rewrite_type: String,
    /// For `ReplaceFullPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_full_path: Option<String>,
    /// For `ReplacePrefixMatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_prefix_match: Option<String>,
}

/// A rewrite of the request before it is forwarded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UrlRewrite {
    /// New `Host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// New path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// Gateways only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_to_backend_hostname: bool,
}

/// A copy of matching requests sent to another backend (responses ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestMirror {
    /// Share of requests mirrored, 0–100 (number or decimal string); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Value>,
    /// Where the copies go.
    pub backend_ref: BackendRef,
}

impl RequestMirror {
    /// The percentage as a number (`None` when absent or not a number in 0..=100).
    pub fn percentage(&self) -> Option<f64> {
        let v = match self.percentage.as_ref()? {
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => s.trim().parse::<f64>().ok()?,
            _ => return None,
        };
        (0.0..=100.0).contains(&v).then_some(v)
    }
}

/// Kuma's `HashMatches`: standard padded base64 of SHA-256 over Go's compact JSON of `matches`
/// (Go escapes `<`, `>`, `&`, U+2028 and U+2029 in strings, so we do too).
pub fn hash_matches(matches: &[Match]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let json = serde_json::to_string(matches).unwrap_or_default();
    let json = json
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(json.as_bytes()))
}

const PATH_TYPES: [&str; 3] = ["Exact", "PathPrefix", "RegularExpression"];
const QUERY_TYPES: [&str; 2] = ["Exact", "RegularExpression"];
const HEADER_TYPES: [&str; 5] = ["Exact", "Present", "RegularExpression", "Absent", "Prefix"];
const METHODS: [&str; 9] = [
    "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE",
];
const FILTER_TYPES: [&str; 5] = [
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
    "RequestMirror",
];
const REWRITE_TYPES: [&str; 2] = ["ReplaceFullPath", "ReplacePrefixMatch"];
const STATUS_CODES: [u16; 5] = [301, 302, 303, 307, 308];

fn one_of(err: &mut ValidationError, path: &PathBuilder, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        let list: Vec<String> = allowed.iter().map(|s| go_quote(s)).collect();
        err.violation(path, format!("must be one of {}", list.join(", ")));
    }
}

impl MeshHttpRoute {
    /// Kuma's `validate()` (paths rooted at `spec`): the top-level targetRef, then per `to`
    /// item its targetRef, rules (matches, filters, backendRefs) and hostnames. The enum
    /// checks Kuma leaves to its OpenAPI schema (path/header/query/filter types, methods,
    /// redirect status codes) are made here too, so a typo is a 400, not a silent no-op.
    pub fn validate(&self) -> ValidationError {
        use TargetRefKind::*;
        let (mut err, spec) = validate_route_top_target_ref(&self.target_ref);
        let top_is_gateway = self.target_ref.kind() == MeshGateway;
        for (i, to) in self.to.iter().enumerate() {
            let path = spec.field("to").index(i);
            validate_route_to_target_ref(&mut err, &path, &to.target_ref, top_is_gateway);
            for (j, rule) in to.rules.iter().enumerate() {
                rule.validate_into(&mut err, &path.field("rules").index(j), top_is_gateway);
            }
            if !top_is_gateway && !to.hostnames.is_empty() {
                err.violation(&path.field("hostnames"), MUST_NOT_BE_DEFINED);
            }
        }
        err
    }
}

impl RouteRule {
    fn validate_into(&self, err: &mut ValidationError, path: &PathBuilder, top_is_gateway: bool) {
        for (i, m) in self.matches.iter().enumerate() {
            m.validate_into(err, &path.field("matches").index(i));
        }
        let default = path.field("default");
        let filters = self.default.filters.as_deref().unwrap_or_default();
        for (i, f) in filters.iter().enumerate() {
            f.validate_into(
                err,
                &default.field("filters").index(i),
                &self.matches,
                top_is_gateway,
            );
        }
        let backends = self.default.backend_refs.as_deref().unwrap_or_default();
        if backends.is_empty()
            && top_is_gateway
            && !filters.iter().any(|f| f.filter_type == "RequestRedirect")
        {
            err.violation(&default.field("backendRefs"), "must not be empty");
        }
        for (i, b) in backends.iter().enumerate() {
            b.validate_at(err, &default.field("backendRefs").index(i));
        }
    }
}

impl Match {
    fn validate_into(&self, err: &mut ValidationError, path: &PathBuilder) {
        if let Some(p) = &self.path {
            let value = path.field("path").field("value");
            one_of(
                err,
                &path.field("path").field("type"),
                &p.match_type,
                &PATH_TYPES,
            );
            match p.match_type.as_str() {
                "PathPrefix" if p.value != "/" => {
                    if p.value.ends_with('/') {
                        err.violation(&value, "does not need a trailing slash because only a `/`-separated prefix or an entire path is matched");
                    }
                    if !p.value.starts_with('/') {
                        err.violation(&value, "must be an absolute path");
                    }
                }
                "Exact" if !p.value.starts_with('/') => {
                    err.violation(&value, "must be an absolute path");
                }
                "RegularExpression" if p.value.is_empty() => {
                    err.violation(&value, "must not be empty");
                }
                _ => {}
            }
        }
        if let Some(m) = &self.method {
            one_of(err, &path.field("method"), m, &METHODS);
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, q) in self.query_params.iter().enumerate() {
            let qp = path.field("queryParams").index(i);
            one_of(err, &qp.field("type"), &q.match_type, &QUERY_TYPES);
            if !names.insert(q.name.as_str()) {
                err.violation(
                    &qp.field("name"),
                    format!("multiple entries for name {}", q.name),
                );
            }
        }
        for (i, h) in self.headers.iter().enumerate() {
            let hp = path.field("headers").index(i);
            if h.name.is_empty() {
                err.violation(&hp.field("name"), "must not be empty");
            }
            let ty = h.match_type.as_deref().unwrap_or("Exact");
            one_of(err, &hp.field("type"), ty, &HEADER_TYPES);
            if matches!(ty, "Present" | "Absent") && !h.value.is_empty() {
                err.violation(&hp.field("value"), MUST_NOT_BE_DEFINED);
            }
        }
    }

    /// Kuma's catch-all match: `path: {value: /, type: PathPrefix}` and nothing else.
    pub fn catch_all() -> Self {
        Self {
            path: Some(PathMatch {
                value: "/".to_owned(),
                match_type: "PathPrefix".to_owned(),
            }),
            ..Self::default()
        }
    }
}

fn any_match_without_prefix(matches: &[Match]) -> bool {
    matches
        .iter()
        .any(|m| m.path.as_ref().is_none_or(|p| p.match_type != "PathPrefix"))
}

impl Filter {
    fn validate_into(
        &self,
        err: &mut ValidationError,
        path: &PathBuilder,
        matches: &[Match],
        top_is_gateway: bool,
    ) {
        let need = |err: &mut ValidationError, field: &str, present: bool| {
            if !present {
                err.violation(&path.field(field), MUST_BE_DEFINED);
            }
            present
        };
        let prefix_only = |err: &mut ValidationError, field: &str, rw: Option<&PathRewrite>| {
            if let Some(rw) = rw {
                let p = path.field(field).field("path");
                one_of(err, &p.field("type"), &rw.rewrite_type, &REWRITE_TYPES);
                if rw.replace_prefix_match.is_some() && any_match_without_prefix(matches) {
                    err.violation(
                        &p.field("replacePrefixMatch"),
                        "can only appear if all matches match a path prefix",
                    );
                }
                let (member, value) = match rw.rewrite_type.as_str() {
                    "ReplaceFullPath" => ("replaceFullPath", &rw.replace_full_path),
                    _ => ("replacePrefixMatch", &rw.replace_prefix_match),
                };
                if value.is_none() && REWRITE_TYPES.contains(&rw.rewrite_type.as_str()) {
                    err.violation(&p.field(member), MUST_BE_DEFINED);
                }
            }
        };
        match self.filter_type.as_str() {
            "RequestHeaderModifier" => {
                if need(
                    err,
                    "requestHeaderModifier",
                    self.request_header_modifier.is_some(),
                ) {
                    if let Some(m) = &self.request_header_modifier {
                        m.validate_into(err, &path.field("requestHeaderModifier"));
                    }
                }
            }
            "ResponseHeaderModifier" => {
                if need(
                    err,
                    "responseHeaderModifier",
                    self.response_header_modifier.is_some(),
                ) {
                    if let Some(m) = &self.response_header_modifier {
                        m.validate_into(err, &path.field("responseHeaderModifier"));
                    }
                }
            }
            "RequestRedirect" => {
                if let Some(r) = self
                    .request_redirect
                    .as_ref()
                    .filter(|_| need(err, "requestRedirect", self.request_redirect.is_some()))
                {
                    prefix_only(err, "requestRedirect", r.path.as_ref());
                    validate_hostname(
                        err,
                        &path.field("requestRedirect").field("hostname"),
                        r.hostname.as_deref(),
                    );
                    if let Some(code) = r.status_code {
                        if !STATUS_CODES.contains(&code) {
                            err.violation(
                                &path.field("requestRedirect").field("statusCode"),
                                "must be one of 301, 302, 303, 307, 308",
                            );
                        }
                    }
                    if let Some(s) = &r.scheme {
                        one_of(
                            err,
                            &path.field("requestRedirect").field("scheme"),
                            s,
                            &["http", "https"],
                        );
                    }
                }
            }
            "URLRewrite" => {
                if let Some(r) = self
                    .url_rewrite
                    .as_ref()
                    .filter(|_| need(err, "urlRewrite", self.url_rewrite.is_some()))
                {
                    prefix_only(err, "urlRewrite", r.path.as_ref());
                    validate_hostname(
                        err,
                        &path.field("urlRewrite").field("hostname"),
                        r.hostname.as_deref(),
                    );
                    if r.host_to_backend_hostname {
                        let p = path.field("urlRewrite").field("hostToBackendHostname");
                        if !top_is_gateway {
                            err.violation(&p, "can only be set with MeshGateway");
                        }
                        if r.hostname.is_some() {
                            err.violation(&p, "cannot be set together with hostname");
                        }
                    }
                }
            }
            "RequestMirror" => {
                if let Some(m) = self
                    .request_mirror
                    .as_ref()
                    .filter(|_| need(err, "requestMirror", self.request_mirror.is_some()))
                {
                    m.backend_ref
                        .validate_at(err, &path.field("requestMirror").field("backendRef"));
                    if m.percentage.is_some() && m.percentage().is_none() {
                        err.violation(
                            &path.field("requestMirror").field("percentage"),
                            "must be a number (or a decimal string) in inclusive range [0, 100]",
                        );
                    }
                }
            }
            other => one_of(err, &path.field("type"), other, &FILTER_TYPES),
        }
    }
}

impl HeaderModifier {
    fn validate_into(&self, err: &mut ValidationError, path: &PathBuilder) {
        if self.set.is_none() && self.add.is_none() && self.remove.is_none() {
            err.violation(path, must_have_at_least_one(&["set", "add", "remove"]));
            return;
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut check = |err: &mut ValidationError, p: PathBuilder, name: &str| {
            if name.is_empty() {
                err.violation(&p, "must not be empty");
            }
            if !seen.insert(name.to_ascii_lowercase()) {
                err.violation(&p, "duplicate header name");
            }
        };
        for (i, h) in self.set.iter().flatten().enumerate() {
            check(err, path.field("set").index(i).field("name"), &h.name);
        }
        for (i, h) in self.add.iter().flatten().enumerate() {
            check(err, path.field("add").index(i).field("name"), &h.name);
        }
        for (i, h) in self.remove.iter().flatten().enumerate() {
            check(err, path.field("remove").index(i), h);
        }
    }
}

/// Kuma's `validatePreciseHostname`: not an IP (Kubernetes' strict `IsValidIP`: an address in
/// canonical form, not IPv4-mapped), and Kubernetes' `IsDNS1123Subdomain` (its messages; no
/// per-label length limit).
fn validate_hostname(err: &mut ValidationError, path: &PathBuilder, hostname: Option<&str>) {
    let Some(h) = hostname else { return };
    let is_ip = match h.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => true,
        Ok(std::net::IpAddr::V6(a)) => a.to_ipv4_mapped().is_none() && a.to_string() == h,
        Err(_) => false,
    };
    if is_ip {
        err.violation(path, "cannot be an IP address");
        return;
    }
    for message in crate::go_net::dns1123_subdomain_violations(h) {
        err.violation(path, message);
    }
}

/// One `to` item's `default` as Kuma's `To.GetDefault` builds it: `{rules: <rules reversed>}`
/// (plus `hostnames` when set), JSON.
pub fn to_conf(to: &RouteTo) -> Value {
    let mut rules = to.rules.clone();
    rules.reverse();
    let mut conf = serde_json::json!({ "rules": rules });
    if !to.hostnames.is_empty() {
        conf["hostnames"] = serde_json::json!(to.hostnames);
    }
    conf
}

/// Merge MeshHTTPRoute confs (each from [`to_conf`]) in precedence order, lowest first, as
/// Kuma's `MergeConfs` does for `PolicyDefault`: the `rules` lists are concatenated; a rule
/// whose `matches` equal an earlier one's absorbs it (defaults merged with RFC 7396, the later
/// wins) and takes the later position; then the list is reversed (Kuma's `Transform`), so the
/// highest-precedence policy's rules come first, in their written order. `hostnames` are the
/// union, in order. `None` when `confs` is empty.
pub fn merge_confs(confs: &[&Value]) -> Option<Value> {
    if confs.is_empty() {
        return None;
    }
    let mut all: Vec<(Value, Vec<Value>)> = Vec::new(); // (matches, defaults); Null = skipped
    let mut hostnames: Vec<Value> = Vec::new();
    for conf in confs {
        for h in conf
            .get("hostnames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !hostnames.contains(h) {
                hostnames.push(h.clone());
            }
        }
        for rule in conf
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let matches = rule.get("matches").cloned().unwrap_or(Value::Null);
            let mut defaults = Vec::new();
            if let Some(earlier) = all.iter_mut().find(|(m, d)| !d.is_empty() && *m == matches) {
                defaults = std::mem::take(&mut earlier.1);
            }
            defaults.push(rule.get("default").cloned().unwrap_or(Value::Null));
            all.push((matches, defaults));
        }
    }
    let mut rules: Vec<Value> = all
        .into_iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(matches, defaults)| {
            let refs: Vec<&Value> = defaults.iter().collect();
            let default = crate::merge::merge_confs(&refs).unwrap_or(Value::Null);
            serde_json::json!({ "matches": matches, "default": default })
        })
        .collect();
    rules.reverse();
    let mut out = serde_json::json!({ "rules": rules });
    if !hostnames.is_empty() {
        out["hostnames"] = Value::Array(hostnames);
    }
    Some(out)
}

/// The merged `default` of the MeshHTTPRoute rules for one destination (Kuma's
/// `PolicyDefault`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PolicyDefault {
    /// Rules, highest precedence first.
    #[serde(default)]
    pub rules: Vec<RouteRule>,
    /// Gateway hostnames.
    #[serde(default)]
    pub hostnames: Vec<String>,
}

fn path_rank(t: &str) -> u8 {
    match t {
        "Exact" => 0,
        "PathPrefix" => 1,
        "RegularExpression" => 2,
        _ => 3,
    }
}

/// Kuma's `CompareMatch` (Gateway API precedence): exact path, then the longest prefix (or
/// regex), then a method, then more headers, then more query parameters. `Less` = more
/// specific.
pub fn compare_match(a: &Match, b: &Match) -> Ordering {
    let path = match (&a.path, &b.path) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
        (Some(a), Some(b)) if a.match_type == b.match_type => match a.match_type.as_str() {
            "PathPrefix" | "RegularExpression" => b.value.len().cmp(&a.value.len()),
            _ => Ordering::Equal,
        },
        (Some(a), Some(b)) => path_rank(&a.match_type).cmp(&path_rank(&b.match_type)),
    };
    path.then_with(|| match (&a.method, &b.method) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        _ => Ordering::Equal,
    })
    .then_with(|| b.headers.len().cmp(&a.headers.len()))
    .then_with(|| b.query_params.len().cmp(&a.query_params.len()))
}

/// One generated route of an outbound: a single match of a rule (a rule with several matches
/// gives several routes), the rule's hash, filters and backends.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// [`hash_matches`] of the rule's whole `matches` list: the Envoy route's name.
    pub hash: String,
    /// This route's match (path filled in with the catch-all prefix when absent).
    pub matched: Match,
    /// The rule's filters.
    pub filters: Vec<Filter>,
    /// The rule's backends (the destination itself, weight 100, when the rule has none).
    pub backend_refs: Vec<BackendRef>,
}

/// Kuma's `prepareRoutes` for an outbound to `service` (its own outbound `tags`): the rules of
/// `conf` sorted by [`compare_match`] (stable), one route per match, then the catch-all
/// `PathPrefix /` route unless a rule has exactly that match. Routes without a path match get
/// the catch-all path; routes without backends get `service` with weight 100.
pub fn prepare_routes(
    conf: Option<&PolicyDefault>,
    service: &str,
    tags: &BTreeMap<String, String>,
) -> Vec<Route> {
    let mut keyed: Vec<(&Match, &RouteRule)> = conf
        .map(|c| c.rules.as_slice())
        .unwrap_or_default()
        .iter()
        .flat_map(|r| r.matches.iter().map(move |m| (m, r)))
        .collect();
    keyed.sort_by(|a, b| compare_match(a.0, b.0));
    let catch_all = Match::catch_all();
    let mut routes: Vec<Route> = keyed
        .into_iter()
        .map(|(m, rule)| Route {
            hash: hash_matches(&rule.matches),
            matched: m.clone(),
            filters: rule.default.filters.clone().unwrap_or_default(),
            backend_refs: rule.default.backend_refs.clone().unwrap_or_default(),
        })
        .collect();
    if !routes.iter().any(|r| r.matched == catch_all) {
        routes.push(Route {
            hash: hash_matches(std::slice::from_ref(&catch_all)),
            matched: catch_all.clone(),
            filters: Vec::new(),
            backend_refs: Vec::new(),
        });
    }
    for r in &mut routes {
        if r.matched.path.is_none() {
            r.matched.path = catch_all.path.clone();
        }
        if r.backend_refs.is_empty() {
            r.backend_refs = vec![BackendRef::service(service, tags.clone(), 100)];
        }
    }
    routes
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_kuma_example() {
        // Example from the conformance README: [{"path":{"value":"/","type":"Exact"}}]
        let m: Vec<Match> =
            serde_json::from_str(r#"[{"path":{"type":"Exact","value":"/"}}]"#).unwrap();
        assert_eq!(
            hash_matches(&m),
            "JNNc6//C3P17nUsOJm5f4kqG+U3v8pXhS0od9C3+oss="
        );
    }

    use crate::policies::test_support::{v, violations};

    fn rule(path: &str, ty: &str, backend: &str) -> RouteRule {
        serde_json::from_value(serde_json::json!({
            "matches": [{"path": {"value": path, "type": ty}}],
            "default": {"backendRefs": [{"kind": "MeshServiceSubset", "name": "b", "tags": {"version": backend}}]}
        }))
        .unwrap()
    }

    #[test]
    fn routes_sort_by_specificity_and_end_with_catch_all() {
        let conf = PolicyDefault {
            rules: vec![
                rule("/a", "PathPrefix", "v1"),
                rule("/a/b", "PathPrefix", "v2"),
                rule("/x", "Exact", "v3"),
                rule("^/r.*", "RegularExpression", "v4"),
            ],
            hostnames: Vec::new(),
        };
        let routes = prepare_routes(Some(&conf), "b", &BTreeMap::new());
        let paths: Vec<&str> = routes
            .iter()
            .map(|r| r.matched.path.as_ref().unwrap().value.as_str())
            .collect();
        assert_eq!(paths, ["/x", "/a/b", "/a", "^/r.*", "/"]);
        let last = routes.last().unwrap();
        assert_eq!(last.hash, "9Zuf5Tg79OuZcQITwBbQykxAk2u4fRKrwYn3//AL4Yo=");
        assert_eq!(last.backend_refs[0].name, "b");
        assert_eq!(last.backend_refs[0].weight, Some(100));
        assert_eq!(prepare_routes(None, "b", &BTreeMap::new()).len(), 1);
    }

    #[test]
    fn merge_keeps_highest_precedence_first_and_merges_equal_matches() {
        let low = to_conf(&RouteTo {
            hostnames: Vec::new(),
            target_ref: TargetRef::mesh_service("b"),
            rules: vec![
                rule("/a", "PathPrefix", "v1"),
                rule("/c", "PathPrefix", "v1"),
            ],
        });
        let high = to_conf(&RouteTo {
            hostnames: Vec::new(),
            target_ref: TargetRef::mesh_service("b"),
            rules: vec![
                rule("/b", "PathPrefix", "v2"),
                rule("/a", "PathPrefix", "v2"),
            ],
        });
        let merged: PolicyDefault =
            serde_json::from_value(merge_confs(&[&low, &high]).unwrap()).unwrap();
        let got: Vec<(String, String)> = merged
            .rules
            .iter()
            .map(|r| {
                (
                    r.matches[0].path.as_ref().unwrap().value.clone(),
                    r.default.backend_refs.as_ref().unwrap()[0].tags["version"].clone(),
                )
            })
            .collect();
        let want = [("/b", "v2"), ("/a", "v2"), ("/c", "v1")];
        assert_eq!(
            got,
            want.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
        );
    }

    #[test]
    fn validation_follows_kuma() {
        let spec = "targetRef: {kind: MeshService, name: web}\nto:\n- targetRef: {kind: Mesh}\n  hostnames: [a.com]\n  rules:\n  - matches:\n    - path: {type: PathPrefix, value: /api/}\n      method: FETCH\n      headers: [{type: Present, name: x, value: y}]\n    default:\n      filters:\n      - type: URLRewrite\n        urlRewrite: {hostname: 10.0.0.1}\n      - type: RequestHeaderModifier\n        requestHeaderModifier: {}\n      backendRefs: [{kind: MeshService, name: b, port: 80}]\n";
        assert_eq!(
            violations::<MeshHttpRoute>(spec),
            [
                v("spec.to[0].targetRef.kind", "value is not supported"),
                v("spec.to[0].rules[0].matches[0].path.value", "does not need a trailing slash because only a `/`-separated prefix or an entire path is matched"),
                v("spec.to[0].rules[0].matches[0].method", "must be one of \"CONNECT\", \"DELETE\", \"GET\", \"HEAD\", \"OPTIONS\", \"PATCH\", \"POST\", \"PUT\", \"TRACE\""),
                v("spec.to[0].rules[0].matches[0].headers[0].value", "must not be defined"),
                v("spec.to[0].rules[0].default.filters[0].urlRewrite.hostname", "cannot be an IP address"),
                v("spec.to[0].rules[0].default.filters[1].requestHeaderModifier", "must have at least one defined: set, add, remove"),
                v("spec.to[0].rules[0].default.backendRefs[0].port", "must not be defined: Umbra routes to kuma.io/service names and has no MeshService resources a port could refer to"),
                v("spec.to[0].hostnames", "must not be defined"),
            ]
        );
    }

    /// Kuma 2.7.29 `meshhttproute/api/v1alpha1/validation_test.go`, "invalid hostnames": every
    /// hostname and message (Kubernetes' strict IP check, then `IsDNS1123Subdomain`); plus
    /// hostnames Kuma takes: a long label, leading-zero "IPs" (not IPs to Kubernetes'
    /// strict check, so RFC 1123 names), an uncompressed IPv6 is refused by the name rule.
    #[test]
    fn precise_hostnames_follow_kuma() {
        let long1 = format!(
            "a23456789-a23456789-a234567890.{}a23456789.com",
            "a23456789.".repeat(21)
        );
        let long2 = format!(
            "a23456789-a23456789-a234567890.{}a2345678.com.",
            "a23456789.".repeat(21)
        );
        let hosts = [
            "127.0.0.1",
            "2001:db8:3333:4444:5555:6666:7777:8888",
            "a..bc",
            "ec2-35-160-210-253.us-west-2-.compute.amazonaws.com",
            "-ec2_35$160%210-253.us-west-2-.compute.amazonaws.com",
            "ec2-35-160-210-253.us-west-2-.compute.amazonaws.com.",
            long1.as_str(),
            "mx.foo.com.",
            long2.as_str(),
        ];
        let mut filters = String::new();
        for (ty, field) in [
            ("RequestRedirect", "requestRedirect"),
            ("URLRewrite", "urlRewrite"),
        ] {
            for h in hosts {
                filters.push_str(&format!(
                    "      - type: {ty}\n        {field}: {{hostname: '{h}'}}\n"
                ));
            }
        }
        let spec = format!("targetRef: {{kind: MeshService, name: frontend}}\nto:\n- targetRef: {{kind: MeshService, name: frontend}}\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: /}}\n    default:\n      filters:\n{filters}      backendRefs: [{{kind: MeshService, name: b}}]\n");
        let rfc = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let long = "must be no more than 253 characters";
        let ip = "cannot be an IP address";
        let mut want = Vec::new();
        for (offset, field) in [(0, "requestRedirect"), (9, "urlRewrite")] {
            let at = |i: usize| {
                format!(
                    "spec.to[0].rules[0].default.filters[{}].{field}.hostname",
                    i + offset
                )
            };
            for (i, messages) in [
                vec![ip],
                vec![ip],
                vec![rfc],
                vec![rfc],
                vec![rfc],
                vec![rfc],
                vec![long],
                vec![rfc],
                vec![long, rfc],
            ]
            .into_iter()
            .enumerate()
            {
                for m in messages {
                    want.push(v(&at(i), m));
                }
            }
        }
        assert_eq!(violations::<MeshHttpRoute>(&spec), want);

        for ok in [
            "example.com",
            &format!("{}.com", "a".repeat(100)),
            "010.0.0.1",
            "kuma-demo.svc",
        ] {
            let spec = format!("targetRef: {{kind: MeshService, name: frontend}}\nto:\n- targetRef: {{kind: MeshService, name: frontend}}\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: /}}\n    default:\n      filters:\n      - type: URLRewrite\n        urlRewrite: {{hostname: '{ok}'}}\n      backendRefs: [{{kind: MeshService, name: b}}]\n");
            assert_eq!(violations::<MeshHttpRoute>(&spec), [], "{ok}");
        }
    }
}
