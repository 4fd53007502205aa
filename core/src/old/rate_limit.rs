//! Old RateLimit policy: a local HTTP rate limit on `destinations` for requests from `sources`,
//! and its validator. The xds crate's rate limit plugin generates it on inbound listeners.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/rate_limit.proto` (shape; `onRateLimit` keeps its
//! camelCase proto name) and `pkg/core/resources/apis/mesh/rate_limit_validator.go` (rules,
//! messages, and Kuma's `conf.http.onRateLimit.header["<i>"]` paths for headers).

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

/// RateLimit spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Selectors of the clients the limit applies to.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the limited dataplanes.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The limit; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<RateLimitConf>,
}

/// `conf` of a RateLimit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitConf {
    /// HTTP limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
}

/// HTTP limit: `requests` per `interval`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Requests allowed per interval; must be set.
    #[serde(default)]
    pub requests: u32,
    /// Interval; must be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Answer past the limit.
    #[serde(
        default,
        rename = "onRateLimit",
        skip_serializing_if = "Option::is_none"
    )]
    pub on_rate_limit: Option<OnRateLimit>,
}

/// Answer past the limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OnRateLimit {
    /// Status code (Envoy's default 429 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u32>,
    /// Headers added to the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header>,
}

/// One header of the answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    /// Name; must be set.
    #[serde(default)]
    pub key: String,
    /// Value; must be set.
    #[serde(default)]
    pub value: String,
    /// Append rather than replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
}

impl RateLimit {
    /// Kuma's `RateLimitResource.Validate`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY,
            &SelectorRules::NON_EMPTY,
        );
        let path = PathBuilder::root().field("conf");
        let Some(conf) = &self.conf else {
            err.violation(&path, "must have conf");
            return err;
        };
        if let Some(http) = &conf.http {
            let hp = path.field("http");
            if http.requests == 0 {
                err.violation(&hp.field("requests"), "requests must be set");
            }
            if http.interval.is_none() {
                err.violation(&hp.field("interval"), "interval must be set");
            }
            for (i, h) in http
                .on_rate_limit
                .iter()
                .flat_map(|o| &o.headers)
                .enumerate()
            {
                let p = hp.field("onRateLimit").field("header").key(&i.to_string());
                if h.key.is_empty() {
                    err.violation(&p, "key must be set");
                }
                if h.value.is_empty() {
                    err.violation(&p, "value must be set");
                }
            }
        }
        err
    }
}
