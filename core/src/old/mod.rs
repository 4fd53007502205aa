//! The old source/destination policies (Timeout, CircuitBreaker, FaultInjection,
//! TrafficPermission, ProxyTemplate): typed specs, validators, and the selector type they share.
//! Matching them to a DPP lives in [`crate::old_matching`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod circuit_breaker;
pub mod fault_injection;
pub mod proxy_template;
pub mod timeout;
pub mod traffic_permission;

/// One entry of `sources`, `destinations` or `selectors`: `{match: {tag: value}}`, where a value
/// of `*` matches any value of that tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Tag requirements, all of which must hold.
    #[serde(rename = "match", default)]
    pub match_tags: BTreeMap<String, String>,
}

impl Selector {
    /// `true` when every tag of the selector is present in `tags` with an equal value or `*`.
    pub fn matches(&self, tags: &BTreeMap<String, String>) -> bool {
        self.match_tags
            .iter()
            .all(|(k, v)| tags.get(k).is_some_and(|tv| v == "*" || v == tv))
    }
}
