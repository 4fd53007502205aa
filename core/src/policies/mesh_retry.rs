//! MeshRetry: the typed spec (TCP connect attempts, HTTP and gRPC retry policies per `to`
//! item) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshretry/api/v1alpha1/` (`meshretry.go` for the
//! shape and JSON names, `validator.go` for the rules). Validation returns every violation, in
//! Kuma's order, with paths rooted at `spec` (Kuma roots each `default` at `conf`, so a path
//! reads `spec.to[0].default.conf.http.retryOn[1]`).
//!
//! Kuma behaviours reproduced on purpose:
//! - a `tcp`, `http` or `grpc` section with none of its fields is `must not be empty`;
//! - `http.retryOn` takes Kuma's condition names (`5xx`, `GatewayError`, `HttpMethodGet`, ...)
//!   or any HTTP status code Go's `http.StatusText` knows (`500`, `409`); a YAML number is read
//!   as its text, as Kuma's YAML loader does;
//! - `rateLimitedBackOff` needs `resetHeaders` (even when empty), each with a `name`;
//! - `hostSelection`: `OmitHostsWithTags` needs `tags`, `OmitPreviousPriorities` needs a
//!   positive `updateFrequency` and may appear once.
//!
//! Where Kuma keeps a free string that its generator then maps through a table (a missing entry
//! becoming an empty or zero Envoy value), Umbra decodes an enum and refuses other values with
//! the enum's names, as Kuma's published schema does: header match `type` (`Exact`, `Prefix`,
//! `RegularExpression`, `Present`, `Absent`) and reset header `format` (`Seconds`,
//! `UnixTimestamp`). A status code written with a sign (`+500`), which Go's `Atoi` accepts but
//! Kuma's generator then turns into an empty retry condition, is refused as an unknown item.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::envelope::{Absent, Envelope, Items, Lists};
use super::{lenient, validate_items, validate_top_target_ref};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_BE_DEFINED_AND_GREATER_THAN_ZERO,
    MUST_NOT_BE_EMPTY,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
    TargetRefKind::MeshHTTPRoute,
];
/// Kinds allowed in `to[].targetRef` under a MeshGateway or MeshHTTPRoute.
const TO_KINDS_GATEWAY_OR_ROUTE: &[TargetRefKind] = &[TargetRefKind::Mesh];
/// Kinds allowed in `to[].targetRef` otherwise.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];

/// MeshRetry spec: which proxies (`targetRef`) retry what, per destination (`to`).
pub type MeshRetry = Envelope<MeshRetryLists>;

/// What a MeshRetry spec holds: `to` items of [`Conf`], no `from`.
#[derive(Debug, Clone, PartialEq)]
pub enum MeshRetryLists {}

impl Lists for MeshRetryLists {
    const TYPE: ResourceType = ResourceType::MeshRetry;
    type To = Items<Conf>;
    type From = Absent;
}

/// One `to` item.
pub type Item = super::Item<Conf>;

/// Retry settings for one destination group (Kuma's `Conf`); one section per protocol.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// TCP connect retries (TCP outbounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// HTTP retries (HTTP outbounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// gRPC retries (gRPC outbounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Grpc>,
}

/// TCP connect retries (Kuma's `TCP`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tcp {
    /// Envoy tcp_proxy `max_connect_attempts`; required in a `tcp` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connect_attempt: Option<u32>,
}

/// HTTP retry policy (Kuma's `HTTP`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Envoy `num_retries` (Envoy's default is 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<u32>,
    /// Timeout of each attempt, including the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// Exponential back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
    /// Back-off read from upstream rate-limit headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_back_off: Option<RateLimitedBackOff>,
    /// Retry conditions: Kuma's names, `HttpMethod<Method>` or an HTTP status code.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_on: Option<Vec<String>>,
    /// Response headers that make a response retriable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_response_headers: Option<Vec<HeaderMatch>>,
    /// Request headers a request must carry to be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable_request_headers: Option<Vec<HeaderMatch>>,
    /// Host selection predicates for retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_selection: Option<Vec<Predicate>>,
    /// Envoy `host_selection_retry_max_attempts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_selection_max_attempts: Option<i64>,
}

/// gRPC retry policy (Kuma's `GRPC`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grpc {
    /// Envoy `num_retries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_retries: Option<u32>,
    /// Timeout of each attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// Exponential back-off between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_off: Option<BackOff>,
    /// Back-off read from upstream rate-limit headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limited_back_off: Option<RateLimitedBackOff>,
    /// gRPC status conditions (`Canceled`, `DeadlineExceeded`, `Internal`,
    /// `ResourceExhausted`, `Unavailable`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_string_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_on: Option<Vec<String>>,
}

/// Exponential back-off (Kuma's `BackOff`); at least one interval.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackOff {
    /// Envoy `base_interval` (Envoy's default 25ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_interval: Option<Duration>,
    /// Envoy `max_interval` (Envoy's default 10 × base).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<Duration>,
}

/// Rate-limited back-off (Kuma's `RateLimitedBackOff`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitedBackOff {
    /// Headers carrying the back-off; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_headers: Option<Vec<ResetHeader>>,
    /// Upper bound of the back-off; greater than zero when set (Envoy's default 300s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<Duration>,
}

/// A rate-limit reset header (Kuma's `ResetHeader`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetHeader {
    /// Header name; must not be empty.
    #[serde(default)]
    pub name: String,
    /// How its value is read.
    pub format: ResetHeaderFormat,
}

/// Kuma's `RateLimitFormat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResetHeaderFormat {
    /// Seconds to wait (`Retry-After: 30`); Envoy `SECONDS`.
    Seconds,
    /// A Unix timestamp to wait until; Envoy `UNIX_TIMESTAMP`.
    UnixTimestamp,
}

/// A header match (Kuma's `common_api.HeaderMatch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderMatch {
    /// How `value` is matched; `Exact` when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub match_type: Option<HeaderMatchType>,
    /// Header name.
    #[serde(default)]
    pub name: String,
    /// Value, prefix or regular expression (unused by `Present` and `Absent`).
    #[serde(
        default,
        deserialize_with = "lenient_string",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
}

fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(lenient::opt_string(d)?.unwrap_or_default())
}

/// Kuma's `HeaderMatchType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum HeaderMatchType {
    Exact,
    Present,
    RegularExpression,
    Absent,
    Prefix,
}

/// A host selection predicate (Kuma's `Predicate`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Predicate {
    /// `OmitPreviousHosts`, `OmitHostsWithTags` or `OmitPreviousPriorities`.
    #[serde(default)]
    pub predicate: String,
    /// Tags of the hosts to skip (`OmitHostsWithTags`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Envoy `update_frequency` (`OmitPreviousPriorities`); 0 or absent is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_frequency: Option<i32>,
}

/// `OmitPreviousHosts`: Envoy's `previous_hosts` retry host predicate.
pub const OMIT_PREVIOUS_HOSTS: &str = "OmitPreviousHosts";
/// `OmitHostsWithTags`: Envoy's `omit_host_metadata` retry host predicate.
pub const OMIT_HOSTS_WITH_TAGS: &str = "OmitHostsWithTags";
/// `OmitPreviousPriorities`: Envoy's `previous_priorities` retry priority.
pub const OMIT_PREVIOUS_PRIORITIES: &str = "OmitPreviousPriorities";

/// What an HTTP `retryOn` item means in Envoy's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpRetryOn {
    /// An Envoy `retry_on` condition (`5xx`, `gateway-error`, ...).
    Condition(&'static str),
    /// A retriable status code (Envoy `retriable_status_codes`).
    StatusCode(u32),
    /// A retriable method (Envoy `retriable_request_headers` on `:method`).
    Method(&'static str),
}

/// Kuma's `HttpRetryOnEnumToEnvoyValue`, conditions only.
const HTTP_CONDITIONS: &[(&str, &str)] = &[
    ("5xx", "5xx"),
    ("GatewayError", "gateway-error"),
    ("Reset", "reset"),
    ("Retriable4xx", "retriable-4xx"),
    ("ConnectFailure", "connect-failure"),
    ("EnvoyRatelimited", "envoy-ratelimited"),
    ("RefusedStream", "refused-stream"),
    ("Http3PostConnectFailure", "http3-post-connect-failure"),
];

/// Kuma's `HttpMethod<Method>` items and their method.
const HTTP_METHODS: &[(&str, &str)] = &[
    ("HttpMethodConnect", "CONNECT"),
    ("HttpMethodDelete", "DELETE"),
    ("HttpMethodGet", "GET"),
    ("HttpMethodHead", "HEAD"),
    ("HttpMethodOptions", "OPTIONS"),
    ("HttpMethodPatch", "PATCH"),
    ("HttpMethodPost", "POST"),
    ("HttpMethodPut", "PUT"),
    ("HttpMethodTrace", "TRACE"),
];

/// Kuma's `GrpcRetryOnEnumToEnvoyValue`.
const GRPC_CONDITIONS: &[(&str, &str)] = &[
    ("Canceled", "canceled"),
    ("DeadlineExceeded", "deadline-exceeded"),
    ("Internal", "internal"),
    ("ResourceExhausted", "resource-exhausted"),
    ("Unavailable", "unavailable"),
];

/// The status codes Go's `http.StatusText` names (Go 1.22's table).
fn go_status_text_known(code: u32) -> bool {
    matches!(code,
        100..=103 | 200..=208 | 226 | 300..=305 | 307 | 308 | 400..=418 | 421..=426 | 428 | 429
        | 431 | 451 | 500..=508 | 510 | 511)
}

impl HttpRetryOn {
    /// Parse one HTTP `retryOn` item; `None` for an unknown item.
    pub fn parse(item: &str) -> Option<Self> {
        if let Some((_, envoy)) = HTTP_CONDITIONS.iter().find(|(k, _)| *k == item) {
            return Some(Self::Condition(envoy));
        }
        if let Some((_, method)) = HTTP_METHODS.iter().find(|(k, _)| *k == item) {
            return Some(Self::Method(method));
        }
        if !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit()) {
            let code: u32 = item.parse().ok()?;
            return go_status_text_known(code).then_some(Self::StatusCode(code));
        }
        None
    }
}

/// The Envoy gRPC `retry_on` condition of a gRPC `retryOn` item; `None` for an unknown item.
pub fn grpc_retry_on(item: &str) -> Option<&'static str> {
    GRPC_CONDITIONS
        .iter()
        .find(|(k, _)| *k == item)
        .map(|(_, v)| *v)
}

impl MeshRetry {
    /// Kuma 2.7's MeshRetry validation: every violation, paths rooted at `spec`. Empty means
    /// valid.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        if self.to_items().is_empty() {
            err.violation(&spec.field("to"), "needs at least one item");
        }
        let kinds = match self.target_ref.kind {
            Some(TargetRefKind::MeshGateway | TargetRefKind::MeshHTTPRoute) => {
                TO_KINDS_GATEWAY_OR_ROUTE
            }
            _ => TO_KINDS,
        };
        validate_items(
            &mut err,
            &spec.field("to"),
            self.to_items(),
            kinds,
            |err, path, conf| validate_default(err, &path.field("conf"), conf),
        );
        err
    }
}

/// Kuma's `validateDefault` at `path` (`...default.conf`); an absent `default` is empty.
fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let empty = Conf::default();
    let conf = conf.unwrap_or(&empty);
    if conf.tcp.is_none() && conf.http.is_none() && conf.grpc.is_none() {
        err.violation(
            path,
            "at least one of the 'tcp', 'http', 'grpc' must be specified",
        );
    }
    if let Some(tcp) = &conf.tcp {
        if tcp.max_connect_attempt.is_none() {
            err.violation(&path.field("tcp"), MUST_NOT_BE_EMPTY);
        }
    }
    if let Some(http) = &conf.http {
        validate_http(err, &path.field("http"), http);
    }
    if let Some(grpc) = &conf.grpc {
        validate_grpc(err, &path.field("grpc"), grpc);
    }
}

fn validate_http(err: &mut ValidationError, path: &PathBuilder, http: &Http) {
    if http.num_retries.is_none()
        && http.per_try_timeout.is_none()
        && http.back_off.is_none()
        && http.retry_on.is_none()
        && http.retriable_request_headers.is_none()
        && http.retriable_response_headers.is_none()
        && http.rate_limited_back_off.is_none()
        && http.host_selection.is_none()
    {
        err.violation(path, MUST_NOT_BE_EMPTY);
    }
    validate_back_off(err, path, http.back_off.as_ref());
    validate_rate_limited_back_off(err, path, http.rate_limited_back_off.as_ref());
    unknown_items(err, path, http.retry_on.as_deref(), |i| {
        HttpRetryOn::parse(i).is_some()
    });
    if let Some(predicates) = &http.host_selection {
        validate_host_selection(err, &path.field("hostSelection"), predicates);
    }
}

fn validate_grpc(err: &mut ValidationError, path: &PathBuilder, grpc: &Grpc) {
    if grpc.num_retries.is_none()
        && grpc.per_try_timeout.is_none()
        && grpc.back_off.is_none()
        && grpc.retry_on.is_none()
        && grpc.rate_limited_back_off.is_none()
    {
        err.violation(path, MUST_NOT_BE_EMPTY);
    }
    validate_back_off(err, path, grpc.back_off.as_ref());
    validate_rate_limited_back_off(err, path, grpc.rate_limited_back_off.as_ref());
    unknown_items(err, path, grpc.retry_on.as_deref(), |i| {
        grpc_retry_on(i).is_some()
    });
}

/// Kuma's `unknown item '<item>'` at `path.retryOn[i]` for each item `known` refuses.
fn unknown_items(
    err: &mut ValidationError,
    path: &PathBuilder,
    items: Option<&[String]>,
    known: impl Fn(&str) -> bool,
) {
    for (i, item) in items.unwrap_or_default().iter().enumerate() {
        if !known(item) {
            err.violation(
                &path.field("retryOn").index(i),
                format!("unknown item '{item}'"),
            );
        }
    }
}

fn validate_back_off(err: &mut ValidationError, path: &PathBuilder, b: Option<&BackOff>) {
    if b.is_some_and(|b| b.base_interval.is_none() && b.max_interval.is_none()) {
        err.violation(&path.field("backOff"), MUST_NOT_BE_EMPTY);
    }
}

fn validate_rate_limited_back_off(
    err: &mut ValidationError,
    path: &PathBuilder,
    r: Option<&RateLimitedBackOff>,
) {
    let Some(r) = r else { return };
    let path = path.field("rateLimitedBackOff");
    if let Some(max) = &r.max_interval {
        if max.is_zero() || max.is_negative() {
            err.violation(
                &path.field("maxInterval"),
                MUST_BE_DEFINED_AND_GREATER_THAN_ZERO,
            );
        }
    }
    match &r.reset_headers {
        None => err.violation(&path.field("resetHeaders"), MUST_BE_DEFINED),
        Some(headers) => {
            for (i, h) in headers.iter().enumerate() {
                if h.name.is_empty() {
                    err.violation(
                        &path.field("resetHeaders").index(i).field("name"),
                        MUST_BE_DEFINED,
                    );
                }
            }
        }
    }
}

fn validate_host_selection(
    err: &mut ValidationError,
    path: &PathBuilder,
    predicates: &[Predicate],
) {
    let mut priority_set = false;
    for (i, p) in predicates.iter().enumerate() {
        let at = path.index(i);
        match p.predicate.as_str() {
            OMIT_HOSTS_WITH_TAGS => {
                if p.tags.is_none() {
                    err.violation(&at.field("tags"), MUST_BE_DEFINED);
                }
            }
            OMIT_PREVIOUS_PRIORITIES => {
                if priority_set {
                    err.violation(
                        &at.field("predicate"),
                        format!("{OMIT_PREVIOUS_PRIORITIES} must only be specified once"),
                    );
                }
                if p.update_frequency.unwrap_or(0) <= 0 {
                    err.violation(
                        &at.field("updateFrequency"),
                        MUST_BE_DEFINED_AND_GREATER_THAN_ZERO,
                    );
                }
                priority_set = true;
            }
            OMIT_PREVIOUS_HOSTS => {}
            other => err.violation(
                &at.field("predicate"),
                format!("unknown predicate type '{other}'"),
            ),
        }
    }
}

#[cfg(test)]
#[path = "mesh_retry_tests.rs"]
mod tests;
