//! Old Retry policy: HTTP, gRPC and TCP retries from `sources` to `destinations`, and its
//! validator. The xds crate's retry plugin generates it (Kuma bakes it into the outbound
//! listeners: a virtual host `retryPolicy` for HTTP and gRPC, tcp_proxy `maxConnectAttempts`
//! for TCP).
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/retry.proto` (shape, JSON names) and
//! `pkg/core/resources/apis/mesh/retry_validator.go` (rules, messages and their order).
//!
//! Kuma behaviours reproduced on purpose:
//! - a `conf` without any of `http`, `grpc`, `tcp` is one violation and nothing else is checked;
//! - `backOff.maxInterval` is only checked when `baseInterval` is positive;
//! - repeated gRPC `retryOn` values are reported once per value, sorted.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

const EMPTY_FIELD: &str = "field cannot be empty";
const HAS_TO_BE_DEFINED: &str = "has to be defined";
const GREATER_THAN_0: &str = "has to be greater than 0";
const GREATER_THAN_0_WHEN_DEFINED: &str = "has to be greater than 0 when defined";

/// Retry spec: retries (`conf`) of traffic from `sources` to `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retry {
    /// Selectors of the dataplanes that are sources of traffic.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the destination services (only `kuma.io/service` allowed).
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The retries; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<RetryConf>,
}

/// `conf` of a Retry: one section per protocol.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryConf {
    /// HTTP retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// TCP connect retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// gRPC retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Grpc>,
}

/// Exponential back-off between attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackOff {
    /// First interval; required when `backOff` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_interval: Option<Duration>,
    /// Upper bound of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<Duration>,
}

/// HTTP retries (Kuma's `Retry.Conf.Http`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Number of retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<u32>,
    /// Timeout of each attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// Back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
    /// Status codes that trigger a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_status_codes: Option<Vec<u32>>,
    /// Methods that may be retried (`GET`, `POST`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_methods: Option<Vec<HttpMethod>>,
    /// Envoy `retry_on` conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<Vec<HttpRetryOn>>,
}

/// TCP connect retries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tcp {
    /// Connection attempts; must be positive.
    #[serde(default)]
    pub max_connect_attempts: u32,
}

/// gRPC retries (Kuma's `Retry.Conf.Grpc`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grpc {
    /// gRPC statuses that trigger a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<Vec<GrpcRetryOn>>,
    /// Number of retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<u32>,
    /// Timeout of each attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// Back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
}

/// Kuma's `HttpMethod` enum (`NONE` decodes and is then refused, as in Kuma).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, clippy::upper_case_acronyms)]
pub enum HttpMethod {
    NONE,
    CONNECT,
    DELETE,
    GET,
    HEAD,
    OPTIONS,
    PATCH,
    POST,
    PUT,
    TRACE,
}

/// Kuma's `HttpRetryOn` enum (Envoy's HTTP `retry_on` conditions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum HttpRetryOn {
    #[serde(rename = "all_5xx")]
    All5xx,
    GatewayError,
    Reset,
    ConnectFailure,
    EnvoyRatelimited,
    #[serde(rename = "retriable_4xx")]
    Retriable4xx,
    RefusedStream,
    RetriableStatusCodes,
    RetriableHeaders,
    Http3PostConnectFailure,
}

/// Kuma's `Retry.Conf.Grpc.RetryOn` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum GrpcRetryOn {
    Cancelled,
    DeadlineExceeded,
    Internal,
    ResourceExhausted,
    Unavailable,
}

impl HttpRetryOn {
    /// Envoy's `retry_on` name (Kuma's `HttpRetryOn`: the enum name, `all_5xx` as `5xx`,
    /// underscores as hyphens).
    pub fn envoy_name(self) -> &'static str {
        match self {
            Self::All5xx => "5xx",
            Self::GatewayError => "gateway-error",
            Self::Reset => "reset",
            Self::ConnectFailure => "connect-failure",
            Self::EnvoyRatelimited => "envoy-ratelimited",
            Self::Retriable4xx => "retriable-4xx",
            Self::RefusedStream => "refused-stream",
            Self::RetriableStatusCodes => "retriable-status-codes",
            Self::RetriableHeaders => "retriable-headers",
            Self::Http3PostConnectFailure => "http3-post-connect-failure",
        }
    }
}

impl HttpMethod {
    /// The method's name (`GET`); `NONE` for the placeholder Kuma skips.
    pub fn name(self) -> &'static str {
        match self {
            Self::NONE => "NONE",
            Self::CONNECT => "CONNECT",
            Self::DELETE => "DELETE",
            Self::GET => "GET",
            Self::HEAD => "HEAD",
            Self::OPTIONS => "OPTIONS",
            Self::PATCH => "PATCH",
            Self::POST => "POST",
            Self::PUT => "PUT",
            Self::TRACE => "TRACE",
        }
    }
}

impl GrpcRetryOn {
    /// Envoy's gRPC `retry_on` name (the enum name, underscores as hyphens: `cancelled`,
    /// `deadline-exceeded`, ...).
    pub fn envoy_name(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline-exceeded",
            Self::Internal => "internal",
            Self::ResourceExhausted => "resource-exhausted",
            Self::Unavailable => "unavailable",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::Internal => "internal",
            Self::ResourceExhausted => "resource_exhausted",
            Self::Unavailable => "unavailable",
        }
    }
}

impl Retry {
    /// Kuma's `RetryResource.Validate`: sources, destinations, then `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        );
        let path = PathBuilder::root().field("conf");
        let Some(conf) = &self.conf else {
            err.violation(&path, HAS_TO_BE_DEFINED);
            return err;
        };
        if conf.http.is_none() && conf.grpc.is_none() && conf.tcp.is_none() {
            err.violation(&path, "missing protocol [grpc|http|tcp] configuration");
            return err;
        }
        if let Some(http) = &conf.http {
            validate_http(&mut err, &path.field("http"), http);
        }
        if let Some(grpc) = &conf.grpc {
            validate_grpc(&mut err, &path.field("grpc"), grpc);
        }
        if let Some(tcp) = &conf.tcp {
            if tcp.max_connect_attempts == 0 {
                err.violation(
                    &path.field("tcp").field("maxConnectAttempts"),
                    GREATER_THAN_0,
                );
            }
        }
        err
    }
}

fn positive_when_defined(err: &mut ValidationError, path: &PathBuilder, d: &Option<Duration>) {
    if d.as_ref().is_some_and(Duration::is_zero) {
        err.violation(path, GREATER_THAN_0_WHEN_DEFINED);
    }
}

fn validate_back_off(err: &mut ValidationError, path: &PathBuilder, b: &Option<BackOff>) {
    let Some(b) = b else { return };
    match &b.base_interval {
        None => err.violation(&path.field("baseInterval"), HAS_TO_BE_DEFINED),
        Some(base) if base.is_zero() => err.violation(&path.field("baseInterval"), GREATER_THAN_0),
        Some(_) => positive_when_defined(err, &path.field("maxInterval"), &b.max_interval),
    }
}

fn validate_http(err: &mut ValidationError, path: &PathBuilder, http: &Http) {
    if http.num_retries.is_none()
        && http.per_try_timeout.is_none()
        && http.back_off.is_none()
        && http.retriable_status_codes.is_none()
        && http.retriable_methods.is_none()
        && http.retry_on.is_none()
    {
        err.violation(path, EMPTY_FIELD);
    }
    if http.num_retries == Some(0) {
        err.violation(&path.field("numRetries"), GREATER_THAN_0_WHEN_DEFINED);
    }
    positive_when_defined(err, &path.field("perTryTimeout"), &http.per_try_timeout);
    validate_back_off(err, &path.field("backOff"), &http.back_off);
    for (i, m) in http.retriable_methods.iter().flatten().enumerate() {
        if *m == HttpMethod::NONE {
            err.violation(&path.field("retriableMethods").index(i), EMPTY_FIELD);
        }
    }
    for (i, r) in http.retry_on.iter().flatten().enumerate() {
        if *r == HttpRetryOn::RetriableStatusCodes && http.retriable_status_codes.is_none() {
            err.violation(
                &path.field("retryOn").index(i),
                "retriableStatusCodes cannot be empty when this option is specified",
            );
        }
    }
}

fn validate_grpc(err: &mut ValidationError, path: &PathBuilder, grpc: &Grpc) {
    if grpc.num_retries.is_none()
        && grpc.per_try_timeout.is_none()
        && grpc.back_off.is_none()
        && grpc.retry_on.is_none()
    {
        err.violation(path, EMPTY_FIELD);
    }
    let mut repeated: Vec<String> = Vec::new();
    let values = grpc.retry_on.as_deref().unwrap_or_default();
    let mut kinds: Vec<GrpcRetryOn> = values.to_vec();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let at: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v == kind)
            .map(|(i, _)| i.to_string())
            .collect();
        if at.len() > 1 {
            repeated.push(format!(
                "repeated value {:?} at indexes [{}]",
                kind.name(),
                at.join(", ")
            ));
        }
    }
    repeated.sort();
    for v in repeated {
        err.violation(&path.field("retryOn"), v);
    }
    if grpc.num_retries == Some(0) {
        err.violation(&path.field("numRetries"), GREATER_THAN_0_WHEN_DEFINED);
    }
    positive_when_defined(err, &path.field("perTryTimeout"), &grpc.per_try_timeout);
    validate_back_off(err, &path.field("backOff"), &grpc.back_off);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(yaml: &str) -> Vec<String> {
        crate::policies::test_support::bare_messages::<Retry>(yaml)
    }

    const SELECTORS: &str = "sources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: backend}\n";

    #[test]
    fn kuma_retry_rules() {
        assert!(errors(&format!("{SELECTORS}conf:\n  http: {{numRetries: 3, perTryTimeout: 1s, backOff: {{baseInterval: 25ms, maxInterval: 1s}}, retriableStatusCodes: [503], retryOn: [retriable_status_codes, gateway_error], retriableMethods: [GET]}}\n  tcp: {{maxConnectAttempts: 2}}\n")).is_empty());
        assert_eq!(errors(SELECTORS), ["conf: has to be defined"]);
        assert_eq!(
            errors(&format!("{SELECTORS}conf: {{}}\n")),
            ["conf: missing protocol [grpc|http|tcp] configuration"]
        );
        assert_eq!(
            errors(&format!("{SELECTORS}conf:\n  http: {{numRetries: 0, backOff: {{maxInterval: 0s}}, retryOn: [retriable_status_codes], retriableMethods: [NONE]}}\n  tcp: {{maxConnectAttempts: 0}}\n  grpc: {{retryOn: [internal, cancelled, internal]}}\n")),
            [
                "conf.http.numRetries: has to be greater than 0 when defined",
                "conf.http.backOff.baseInterval: has to be defined",
                "conf.http.retriableMethods[0]: field cannot be empty",
                "conf.http.retryOn[0]: retriableStatusCodes cannot be empty when this option is specified",
                "conf.grpc.retryOn: repeated value \"internal\" at indexes [0, 2]",
                "conf.tcp.maxConnectAttempts: has to be greater than 0",
            ]
        );
    }
}
