//! MeshHTTPRoute, modelled as far as policy matching needs it: its top-level `targetRef`,
//! `to[].targetRef`, `to[].rules[].matches` (hashed into `__rule-matches-hash__` subsets, Kuma's
//! `HashMatches`) and the rules' `default` kept verbatim. Umbra does not generate routes from it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{validate_target_ref_at, validate_top_target_ref};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::validate::ValidationError;

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
    /// Destination.
    pub target_ref: TargetRef,
    /// Rules, first match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RouteRule>,
}

/// One rule: matches and what to do (kept verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteRule {
    /// Request matches (ORed).
    #[serde(default)]
    pub matches: Vec<Match>,
    /// Filters and backendRefs (opaque to Umbra for now).
    #[serde(default)]
    pub default: Value,
}

/// An HTTP request match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Path match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,
    /// HTTP method.
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
    /// `Exact`, `Present`, `RegularExpression`, `Absent`, `Prefix`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub match_type: Option<String>,
    /// Header name.
    #[serde(default)]
    pub name: String,
    /// Value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
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

impl MeshHttpRoute {
    /// Validate the targetRefs (paths rooted at `spec`). Rule contents are not checked yet.
    pub fn validate(&self) -> ValidationError {
        use TargetRefKind::*;
        let (mut err, spec) = validate_top_target_ref(
            &self.target_ref,
            &[
                Mesh,
                MeshSubset,
                MeshGateway,
                MeshService,
                MeshServiceSubset,
            ],
            true,
        );
        for (i, to) in self.to.iter().enumerate() {
            validate_target_ref_at(
                &mut err,
                &spec.field("to").index(i).field("targetRef"),
                &to.target_ref,
                &[Mesh, MeshService],
                false,
            );
        }
        err
    }
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
}
