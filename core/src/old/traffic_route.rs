//! Old TrafficRoute: where traffic from `sources` to `destinations` goes: one `destination`
//! (tags) or a weighted `split`, optional HTTP rules (`http[]`: match on method, path and
//! headers, modify path, host and headers, then a destination or split) and a `loadBalancer`.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/traffic_route.proto` (shape, JSON names) and
//! `pkg/core/resources/apis/mesh/traffic_route_validator.go` (rules, in its order: sources,
//! destinations, conf: split/destination, each `http[]` entry, the load balancer). A
//! destination tag value `*` means "the outbound's own value" (Kuma's
//! `resolveTrafficRouteWildcards`); [`resolve_wildcards`] applies it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::old::selectors::{
    deserialize_selectors, validate_selector, validate_sources_and_destinations, Selector,
    SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

/// TrafficRoute spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficRoute {
    /// Selectors of the dataplanes the route applies to.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the destination services (only `kuma.io/service`).
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// Where traffic goes; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<Conf>,
}

/// `conf` of a TrafficRoute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Weighted destinations (exclusive with `destination`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<Split>,
    /// Load balancing of the destination clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
    /// One destination (exclusive with `split`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub destination: BTreeMap<String, String>,
    /// HTTP rules, first match wins, before the default `split`/`destination`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<Http>,
}

/// A weighted destination.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Split {
    /// Weight (required; 0 sends nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Tags of the endpoints (`kuma.io/service` required).
    #[serde(default)]
    pub destination: BTreeMap<String, String>,
}

/// Load balancer: exactly one member set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    /// Round robin (Envoy's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_robin: Option<Empty>,
    /// Least request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub least_request: Option<LeastRequest>,
    /// Ring hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// Random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Empty>,
    /// Maglev.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maglev: Option<Empty>,
}

/// An empty message (`roundRobin: {}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Least-request settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeastRequest {
    /// Hosts sampled per pick (Envoy default 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub choice_count: u32,
}

/// Ring-hash settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RingHash {
    /// `XX_HASH` or `MURMUR_HASH_2`.
    #[serde(default)]
    pub hash_function: String,
    /// Minimum ring size.
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub min_ring_size: u64,
    /// Maximum ring size.
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub max_ring_size: u64,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero64(v: &u64) -> bool {
    *v == 0
}

/// One HTTP rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// What requests it takes (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#match: Option<HttpMatch>,
    /// What it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modify: Option<Modify>,
    /// Weighted destinations (exclusive with `destination`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<Split>,
    /// One destination.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub destination: BTreeMap<String, String>,
}

/// Request match: method, path and headers (by name), all ANDed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMatch {
    /// Method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatcher>,
    /// Path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<StringMatcher>,
    /// Headers by name (`None` = absent, an empty map is a violation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatcher>>,
}

/// One of `prefix`, `exact`, `regex`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringMatcher {
    /// Prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// RE2 regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// Request changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Modify {
    /// Path rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModify>,
    /// Host rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostModify>,
    /// Request header changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<Headers>,
    /// Response header changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Headers>,
}

/// A regex and its substitution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegexReplace {
    /// RE2 pattern.
    #[serde(default)]
    pub pattern: String,
    /// Substitution.
    #[serde(default)]
    pub substitution: String,
}

/// Path rewrite: `rewritePrefix` or `regex`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathModify {
    /// Replace the matched prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_prefix: Option<String>,
    /// Regex rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<RegexReplace>,
}

/// Host rewrite: `value` or `fromPath`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostModify {
    /// Literal host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Host from the path by regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_path: Option<RegexReplace>,
}

/// Header changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Headers {
    /// Headers to add (`append: false` overwrites).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<HeaderAdd>,
    /// Headers to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<HeaderRemove>,
}

/// A header to add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderAdd {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// Append to an existing value instead of overwriting it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
}

/// A header to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderRemove {
    /// Name.
    #[serde(default)]
    pub name: String,
}

const CANNOT_BE_EMPTY: &str = "cannot be empty";
const DESTINATION_RULES: SelectorRules = SelectorRules {
    require_at_least_one_selector: false,
    require_at_least_one_tag: true,
    require_service: true,
    only_service_tag: false,
    protocols: None,
};

impl TrafficRoute {
    /// Kuma's `TrafficRouteResource.Validate`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        );
        let root = PathBuilder::root().field("conf");
        let Some(conf) = &self.conf else {
            err.violation(&root, CANNOT_BE_EMPTY);
            return err;
        };
        validate_split_and_destination(&mut err, &root, &conf.split, &conf.destination);
        for (i, http) in conf.http.iter().enumerate() {
            http.validate_into(&mut err, &root.field("http").index(i));
        }
        if let Some(lb) = &conf.load_balancer {
            if lb
                .least_request
                .as_ref()
                .is_some_and(|l| l.choice_count == 1)
            {
                err.violation_field(
                    "conf.loadBalancer.leastRequest.choiceCount",
                    "value must be greater than or equal to 2",
                );
            }
            if let Some(rh) = &lb.ring_hash {
                if !matches!(rh.hash_function.as_str(), "XX_HASH" | "MURMUR_HASH_2") {
                    err.violation_field(
                        "conf.loadBalancer.ringHash.hashFunction",
                        "must have a valid hash function",
                    );
                }
            }
            let set = [
                lb.round_robin.is_some(),
                lb.least_request.is_some(),
                lb.ring_hash.is_some(),
                lb.random.is_some(),
                lb.maglev.is_some(),
            ];
            if set.iter().filter(|s| **s).count() > 1 {
                err.violation_field(
                    "conf.loadBalancer",
                    "only one of roundRobin, leastRequest, ringHash, random, maglev can be set",
                );
            }
        }
        err
    }
}

fn validate_split_and_destination(
    err: &mut ValidationError,
    path: &PathBuilder,
    split: &[Split],
    destination: &BTreeMap<String, String>,
) {
    if split.is_empty() && destination.is_empty() {
        err.violation(path, "requires either \"destination\" or \"split\"");
    }
    if !split.is_empty() && !destination.is_empty() {
        err.violation(
            path,
            "\"split\" cannot be defined at the same time as \"destination\"",
        );
    }
    if !split.is_empty() {
        let sp = path.field("split");
        let mut total: u64 = 0;
        for (i, s) in split.iter().enumerate() {
            match s.weight {
                None => err.violation(&sp.index(i).field("weight"), "needs to be defined"),
                Some(w) => total += u64::from(w),
            }
            err.add(validate_selector(
                &sp.index(i).field("destination"),
                &s.destination,
                &DESTINATION_RULES,
            ));
        }
        if total == 0 {
            err.violation(
                &sp,
                "there must be at least one split entry with weight above 0",
            );
        }
    }
    if !destination.is_empty() {
        err.add(validate_selector(
            &path.field("destination"),
            destination,
            &DESTINATION_RULES,
        ));
    }
}

impl Http {
    fn validate_into(&self, err: &mut ValidationError, path: &PathBuilder) {
        let mp = path.field("match");
        let m = self.r#match.clone().unwrap_or_default();
        if m.path.is_none() && m.method.is_none() && m.headers.is_none() {
            err.violation(&mp, "must be present and contain at least one of the elements: \"method\", \"path\" or \"headers\"");
        } else {
            if let Some(s) = &m.method {
                s.validate_into(err, &mp.field("method"));
            }
            if let Some(s) = &m.path {
                s.validate_into(err, &mp.field("path"));
            }
            if let Some(h) = &m.headers {
                if h.is_empty() {
                    err.violation(&mp.field("headers"), "must contain at least one element");
                }
                for (name, s) in h {
                    let hp = mp.field("headers").key(name);
                    if name.is_empty() {
                        err.violation(&hp, CANNOT_BE_EMPTY);
                    }
                    s.validate_into(err, &hp);
                }
            }
        }
        if let Some(modify) = &self.modify {
            let mo = path.field("modify");
            if let Some(p) = &modify.path {
                let pp = mo.field("path");
                match (&p.rewrite_prefix, &p.regex) {
                    (Some(prefix), None) => {
                        if prefix.is_empty() {
                            err.violation(&pp.field("rewritePrefix"), CANNOT_BE_EMPTY);
                        } else if m
                            .path
                            .as_ref()
                            .and_then(|p| p.prefix.as_deref())
                            .unwrap_or("")
                            .is_empty()
                        {
                            err.violation(
                                &pp.field("rewritePrefix"),
                                "can only be set when .http.match.path.prefix is not empty",
                            );
                        }
                    }
                    (None, Some(r)) => regex_replace(err, &pp.field("regex"), r),
                    _ => err.violation(&pp, "either \"rewritePrefix\" or \"regex\" has to be set"),
                }
            }
            if let Some(h) = &modify.host {
                let hp = mo.field("host");
                match (&h.value, &h.from_path) {
                    (Some(v), None) => {
                        if v.is_empty() {
                            err.violation(&hp.field("value"), CANNOT_BE_EMPTY);
                        }
                    }
                    (None, Some(r)) => regex_replace(err, &hp.field("fromPath"), r),
                    _ => err.violation(&hp, "either \"value\" or \"fromPath\" has to be set"),
                }
            }
            for (field, headers) in [
                ("requestHeaders", &modify.request_headers),
                ("responseHeaders", &modify.response_headers),
            ] {
                let Some(headers) = headers else { continue };
                let hp = mo.field(field);
                for (i, add) in headers.add.iter().enumerate() {
                    header_name(err, &hp.field("add").index(i).field("name"), &add.name);
                    if add.value.is_empty() {
                        err.violation(&hp.field("add").index(i).field("value"), CANNOT_BE_EMPTY);
                    }
                }
                for (i, remove) in headers.remove.iter().enumerate() {
                    header_name(
                        err,
                        &hp.field("remove").index(i).field("name"),
                        &remove.name,
                    );
                }
            }
        }
        validate_split_and_destination(err, path, &self.split, &self.destination);
    }
}

fn regex_replace(err: &mut ValidationError, path: &PathBuilder, r: &RegexReplace) {
    if r.pattern.is_empty() {
        err.violation(&path.field("pattern"), CANNOT_BE_EMPTY);
    }
    if r.substitution.is_empty() {
        err.violation(&path.field("substitution"), CANNOT_BE_EMPTY);
    }
}

fn header_name(err: &mut ValidationError, path: &PathBuilder, name: &str) {
    if name.is_empty() {
        err.violation(path, CANNOT_BE_EMPTY);
    } else if name.starts_with(':') || name == "host" || name == "Host" {
        err.violation(
            path,
            "host header and HTTP/2 pseudo-headers are not allowed to be modified",
        );
    }
}

impl StringMatcher {
    fn validate_into(&self, err: &mut ValidationError, path: &PathBuilder) {
        match (&self.exact, &self.prefix, &self.regex) {
            (Some(_), None, None) => {}
            (None, Some(p), None) => {
                if p.is_empty() {
                    err.violation(&path.field("prefix"), CANNOT_BE_EMPTY);
                }
            }
            (None, None, Some(r)) => {
                if r.is_empty() {
                    err.violation(&path.field("regex"), CANNOT_BE_EMPTY);
                }
            }
            (None, None, None) => err.violation(
                path,
                "cannot be empty. Available options: \"exact\", \"split\" or \"regex\"",
            ),
            _ => err.violation(
                path,
                "only one of \"prefix\", \"exact\", \"regex\" can be set",
            ),
        }
    }
}

impl Conf {
    /// Kuma's `GetSplitWithDestination`: `destination` as one split of weight 1, else `split`.
    pub fn splits(&self) -> Vec<Split> {
        splits(&self.split, &self.destination)
    }
}

impl Http {
    /// Kuma's `GetSplitWithDestination` for an HTTP rule.
    pub fn splits(&self) -> Vec<Split> {
        splits(&self.split, &self.destination)
    }
}

fn splits(split: &[Split], destination: &BTreeMap<String, String>) -> Vec<Split> {
    if destination.is_empty() {
        split.to_vec()
    } else {
        vec![Split {
            weight: Some(1),
            destination: destination.clone(),
        }]
    }
}

/// Kuma's `handleWildcardTagsFor`: the route's tags without `*` values, plus every outbound tag
/// the route does not set (so `kuma.io/service: '*'` becomes the outbound's service).
pub fn resolve_wildcards(
    outbound_tags: &BTreeMap<String, String>,
    route_tags: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = route_tags
        .iter()
        .filter(|(_, v)| *v != "*")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in outbound_tags {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{v, violations};

    const SD: &str = "sources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: backend}\n";

    #[test]
    fn valid_split_and_http() {
        let spec = format!("{SD}conf:\n  split:\n  - weight: 90\n    destination: {{kuma.io/service: backend, version: v1}}\n  - weight: 10\n    destination: {{kuma.io/service: backend, version: v2}}\n  http:\n  - match: {{path: {{prefix: /api}}}}\n    modify: {{path: {{rewritePrefix: /}}}}\n    destination: {{kuma.io/service: backend, version: v2}}\n  loadBalancer: {{leastRequest: {{choiceCount: 4}}}}\n");
        assert!(violations::<TrafficRoute>(&spec).is_empty());
    }

    #[test]
    fn violations_follow_kuma() {
        let spec = format!("{SD}conf:\n  split:\n  - destination: {{version: v1}}\n  http:\n  - match: {{}}\n    modify: {{path: {{rewritePrefix: /x}}, requestHeaders: {{add: [{{name: host, value: a}}]}}}}\n  loadBalancer: {{ringHash: {{hashFunction: MD5}}}}\n");
        assert_eq!(
            violations::<TrafficRoute>(&spec),
            [
                v("conf.split[0].weight", "needs to be defined"),
                v("conf.split[0].destination", "mandatory tag \"kuma.io/service\" is missing"),
                v("conf.split", "there must be at least one split entry with weight above 0"),
                v("conf.http[0].match", "must be present and contain at least one of the elements: \"method\", \"path\" or \"headers\""),
                v("conf.http[0].modify.path.rewritePrefix", "can only be set when .http.match.path.prefix is not empty"),
                v("conf.http[0].modify.requestHeaders.add[0].name", "host header and HTTP/2 pseudo-headers are not allowed to be modified"),
                v("conf.http[0]", "requires either \"destination\" or \"split\""),
                v("conf.loadBalancer.ringHash.hashFunction", "must have a valid hash function"),
            ]
        );
        assert_eq!(
            violations::<TrafficRoute>(SD),
            [v("conf", "cannot be empty")]
        );
    }

    #[test]
    fn wildcards_take_the_outbound_value() {
        let out = BTreeMap::from([("kuma.io/service".to_owned(), "backend".to_owned())]);
        let route = BTreeMap::from([
            ("kuma.io/service".to_owned(), "*".to_owned()),
            ("version".to_owned(), "v2".to_owned()),
        ]);
        let got = resolve_wildcards(&out, &route);
        assert_eq!(got["kuma.io/service"], "backend");
        assert_eq!(got["version"], "v2");
    }
}
