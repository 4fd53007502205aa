//! MeshHealthCheck: the typed spec (active health checks of the destinations of `to` items)
//! and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshhealthcheck/api/v1alpha1/`
//! (`meshhealthcheck.go` for the shape and JSON names, `validator.go` for the rules and their
//! order). Paths are rooted at `spec` (`spec.to[0].default.interval`).
//!
//! Kuma behaviours reproduced on purpose:
//! - durations and thresholds must be greater than zero *when defined*; nothing is required
//!   but one of `http`, `tcp`, `grpc` (an empty `http: {}` counts);
//! - `healthyPanicThreshold` is an integer or a decimal string in [0, 100];
//! - `eventLogPath` must be a file path as govalidator's `IsFilePath` reads it (absolute Unix
//!   path, or a Windows drive path);
//! - `http.path`, when given, must not be empty; `expectedStatuses` each in [100, 599].

use serde::{Deserialize, Serialize};

use super::envelope::{Absent, Envelope, Items, Lists};
use super::mesh_fault_injection::{validate_percentage, IntOrString};
use super::{validate_items, validate_top_target_ref};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    in_range, must_have_at_least_one, PathBuilder, ValidationError, GREATER_THAN_ZERO_WHEN_DEFINED,
    MUST_BE_DEFINED, UINT_PERCENTAGE_RANGE, VALID_PATH_WHEN_DEFINED,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];
/// Kinds allowed in `to[].targetRef`.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];

/// MeshHealthCheck spec: which proxies (`targetRef`) check which destinations (`to`), how.
pub type MeshHealthCheck = Envelope<MeshHealthCheckLists>;

/// What a MeshHealthCheck spec holds: `to` items of [`Conf`], no `from`.
#[derive(Debug, Clone, PartialEq)]
pub enum MeshHealthCheckLists {}

impl Lists for MeshHealthCheckLists {
    const TYPE: ResourceType = ResourceType::MeshHealthCheck;
    type To = Items<Conf>;
    type From = Absent;
}

/// One `to` item.
pub type Item = super::Item<Conf>;

/// Health checking of one destination group (Kuma's `Conf`). Durations in Go syntax.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Time between checks (Kuma's default 1m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Time to wait for a check's answer (default 15s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Failed checks before a host is marked unhealthy (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_threshold: Option<i32>,
    /// Passed checks before a host is marked healthy again (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_threshold: Option<i32>,
    /// Random delay before the first check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_jitter: Option<Duration>,
    /// Random delay added to each interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter: Option<Duration>,
    /// Random delay as a percentage of the interval, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter_percent: Option<i32>,
    /// Healthy-host percentage below which Envoy balances over all hosts (panic mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_panic_threshold: Option<IntOrString>,
    /// In panic mode, fail all traffic instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_traffic_on_panic: Option<bool>,
    /// File Envoy writes health check events to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_log_path: Option<String>,
    /// Log every failed check, not only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_log_health_check_failures: Option<bool>,
    /// Interval for hosts that got no traffic yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_traffic_interval: Option<Duration>,
    /// TCP check (TCP destinations, or the fallback of a disabled HTTP/gRPC check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpHealthCheck>,
    /// HTTP check (HTTP and HTTP/2 destinations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpHealthCheck>,
    /// gRPC check (gRPC destinations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcHealthCheck>,
    /// Reuse the connection between checks (Envoy's default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_connection: Option<bool>,
}

/// TCP check (Kuma's `TcpHealthCheck`): text payloads, sent hex-encoded to Envoy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpHealthCheck {
    /// Switch this check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Payload sent; empty means a connect-only check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// Payloads expected in the answer (fuzzy match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<Vec<String>>,
}

/// HTTP check (Kuma's `HttpHealthCheck`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHealthCheck {
    /// Switch this check off (a TCP check, if given, is used instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Request path (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Headers added to the check request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_to_add: Option<HeaderModifier>,
    /// Statuses counted as healthy (Envoy's default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_statuses: Option<Vec<i32>>,
}

/// gRPC check (Kuma's `GrpcHealthCheck`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcHealthCheck {
    /// Switch this check off (a TCP check, if given, is used instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Service name of the `grpc.health.v1.Health` check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// `:authority` of the check request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
}

/// Headers to add (Kuma's `HeaderModifier`): a comma-separated value is one header each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifier {
    /// Headers set (replacing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<HeaderKeyValue>,
    /// Headers added (appending).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<HeaderKeyValue>,
}

/// One header (Kuma's `HeaderKeyValue`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderKeyValue {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

impl MeshHealthCheck {
    /// Kuma 2.7's MeshHealthCheck validation: every violation, paths rooted at `spec`.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        validate_items(
            &mut err,
            &spec.field("to"),
            self.to_items(),
            TO_KINDS,
            validate_default,
        );
        err
    }
}

/// govalidator's `IsFilePath`: an absolute Unix path (no NUL) or a Windows drive path.
pub(crate) fn is_file_path(s: &str) -> bool {
    let unix = s.starts_with('/') && !s.contains('\0');
    let bytes = s.as_bytes();
    let windows = bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && bytes[2] == b'\\'
        && !s[3..].contains(['/', ':', '*', '?', '"', '<', '>', '|', '\r', '\n'])
        && !s[3..].contains("\\\\")
        && !s[3..].starts_with('\\')
        && s.len() - 3 <= 32767;
    unix || windows
}

/// Kuma's `validateDefault`; an absent `default` is an empty one.
fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let empty = Conf::default();
    let conf = conf.unwrap_or(&empty);
    let positive_duration = |err: &mut ValidationError, field: &str, d: &Option<Duration>| {
        if d.as_ref().is_some_and(|d| d.is_zero() || d.is_negative()) {
            err.violation(&path.field(field), GREATER_THAN_ZERO_WHEN_DEFINED);
        }
    };
    positive_duration(err, "interval", &conf.interval);
    positive_duration(err, "timeout", &conf.timeout);
    for (field, v) in [
        ("unhealthyThreshold", conf.unhealthy_threshold),
        ("healthyThreshold", conf.healthy_threshold),
    ] {
        if v.is_some_and(|v| v <= 0) {
            err.violation(&path.field(field), GREATER_THAN_ZERO_WHEN_DEFINED);
        }
    }
    positive_duration(err, "initialJitter", &conf.initial_jitter);
    positive_duration(err, "intervalJitter", &conf.interval_jitter);
    if conf
        .interval_jitter_percent
        .is_some_and(|p| !(0..=100).contains(&p))
    {
        err.violation(&path.field("intervalJitterPercent"), UINT_PERCENTAGE_RANGE);
    }
    validate_percentage(
        err,
        &path.field("healthyPanicThreshold"),
        conf.healthy_panic_threshold.as_ref(),
    );
    positive_duration(err, "noTrafficInterval", &conf.no_traffic_interval);
    if conf
        .event_log_path
        .as_deref()
        .is_some_and(|p| !is_file_path(p))
    {
        err.violation(&path.field("eventLogPath"), VALID_PATH_WHEN_DEFINED);
    }
    if let Some(http) = &conf.http {
        let http_path = path.field("http");
        if http.path.as_deref() == Some("") {
            err.violation(&http_path.field("path"), MUST_BE_DEFINED);
        }
        for (i, status) in http.expected_statuses.iter().flatten().enumerate() {
            if !(100..600).contains(status) {
                err.violation(
                    &http_path.field("expectedStatuses").index(i),
                    in_range(100, 599),
                );
            }
        }
    }
    if conf.http.is_none() && conf.tcp.is_none() && conf.grpc.is_none() {
        err.violation(path, must_have_at_least_one(&["http", "tcp", "grpc"]));
    }
}

#[cfg(test)]
#[path = "mesh_health_check_tests.rs"]
mod tests;
