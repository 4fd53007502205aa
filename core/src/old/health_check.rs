//! Old HealthCheck policy: active health checking (TCP or HTTP) of `destinations` by
//! `sources`, and its validator. The xds crate's health check plugin generates it (Kuma bakes
//! it into the outbound clusters).
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/health_check.proto` (shape, JSON names) and
//! `pkg/core/resources/apis/mesh/health_check_validator.go` (rules, messages, order).
//! `tcp.send` and `tcp.receive` are protobuf `BytesValue`s: base64 strings in JSON.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

const POSITIVE: &str = "must have a positive value";

/// HealthCheck spec: how `sources` check the endpoints of `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    /// Selectors of the dataplanes that run the checks.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the checked services (only `kuma.io/service` allowed).
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The checks; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<HealthCheckConf>,
}

/// `conf` of a HealthCheck (Kuma's `HealthCheck.Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheckConf {
    /// Time between checks; required, positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Time to wait for an answer; required, positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Failed checks before a host is unhealthy; positive.
    #[serde(default)]
    pub unhealthy_threshold: u32,
    /// Passed checks before a host is healthy again; positive.
    #[serde(default)]
    pub healthy_threshold: u32,
    /// Jitter before the first check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_jitter: Option<Duration>,
    /// Jitter added to each interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter: Option<Duration>,
    /// Jitter as a percentage of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_jitter_percent: Option<u32>,
    /// Panic threshold, percent in [0, 100].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::serialize_opt_f64"
    )]
    pub healthy_panic_threshold: Option<f64>,
    /// Fail all traffic when in panic mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_traffic_on_panic: Option<bool>,
    /// File for health-check events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_log_path: Option<String>,
    /// Log every failure, not only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_log_health_check_failures: Option<bool>,
    /// Interval used for hosts that received no traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_traffic_interval: Option<Duration>,
    /// TCP check (payload sent and expected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// HTTP check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// Reuse the connection between checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_connection: Option<bool>,
}

/// TCP check: base64 payloads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tcp {
    /// Payload sent (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// Payloads expected (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<Vec<String>>,
}

/// HTTP check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Request path; required.
    #[serde(default)]
    pub path: String,
    /// Headers added to the check request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_to_add: Option<Vec<HeaderValueOption>>,
    /// Statuses counted as healthy, each in [100, 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_statuses: Option<Vec<u32>>,
}

/// One header to add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderValueOption {
    /// The header; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderValue>,
    /// Append rather than replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
}

/// A header key and value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderValue {
    /// Name; must not be empty.
    #[serde(default)]
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// A protobuf `bytes` field as protojson reads it: standard or URL-safe base64, padded or not.
/// `None` when `s` is neither.
pub fn decode_bytes(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine as _;
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(s).ok())
}

impl Tcp {
    /// `send` decoded (`None` when absent; invalid base64 is refused by validation).
    pub fn send_bytes(&self) -> Option<Vec<u8>> {
        self.send.as_deref().and_then(decode_bytes)
    }

    /// `receive` decoded, in order (entries that are not base64 are refused by validation).
    pub fn receive_bytes(&self) -> Option<Vec<Vec<u8>>> {
        self.receive
            .as_ref()
            .map(|r| r.iter().filter_map(|s| decode_bytes(s)).collect())
    }
}

fn duration(err: &mut ValidationError, path: &PathBuilder, d: &Option<Duration>) {
    if d.as_ref().is_none_or(Duration::is_zero) {
        err.violation(path, POSITIVE);
    }
}

impl HealthCheck {
    /// Kuma's `HealthCheckResource.Validate`: sources, destinations, then `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        );
        let path = PathBuilder::root().field("conf");
        let Some(conf) = &self.conf else {
            err.violation(&path, "has to be defined");
            return err;
        };
        duration(&mut err, &path.field("interval"), &conf.interval);
        duration(&mut err, &path.field("timeout"), &conf.timeout);
        if conf.unhealthy_threshold == 0 {
            err.violation(&path.field("unhealthyThreshold"), POSITIVE);
        }
        if conf.healthy_threshold == 0 {
            err.violation(&path.field("healthyThreshold"), POSITIVE);
        }
        for (name, d) in [
            ("initialJitter", &conf.initial_jitter),
            ("intervalJitter", &conf.interval_jitter),
            ("noTrafficInterval", &conf.no_traffic_interval),
        ] {
            if d.is_some() {
                duration(&mut err, &path.field(name), d);
            }
        }
        if conf
            .healthy_panic_threshold
            .is_some_and(|p| !(0.0..=100.0).contains(&p))
        {
            err.violation(
                &path.field("healthyPanicThreshold"),
                "must be in range [0.0 - 100.0]",
            );
        }
        if let Some(http) = &conf.http {
            let hp = path.field("http");
            if http.path.is_empty() {
                err.violation(&hp.field("path"), "has to be defined and cannot be empty");
            }
            for (i, s) in http.expected_statuses.iter().flatten().enumerate() {
                if !(100..600).contains(s) {
                    err.violation(
                        &hp.field("expectedStatuses").index(i),
                        "must be in range [100, 600)",
                    );
                }
            }
            for (i, h) in http.request_headers_to_add.iter().flatten().enumerate() {
                let p = hp.field("requestHeadersToAdd").index(i).field("header");
                match &h.header {
                    None => err.violation(&p, "has to be defined"),
                    Some(h) if h.key.is_empty() => {
                        err.violation(&p.field("key"), "cannot be empty")
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(tcp) = &conf.tcp {
            // Kuma's protojson loader refuses a `bytes` value that is not base64.
            let tp = path.field("tcp");
            if tcp
                .send
                .as_deref()
                .is_some_and(|s| decode_bytes(s).is_none())
            {
                err.violation(&tp.field("send"), "must be base64");
            }
            for (i, r) in tcp.receive.iter().flatten().enumerate() {
                if decode_bytes(r).is_none() {
                    err.violation(&tp.field("receive").index(i), "must be base64");
                }
            }
        }
        if conf.tcp.is_some() && conf.http.is_some() {
            err.violation(&path, "http and tcp cannot be defined at the same time");
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(yaml: &str) -> Vec<String> {
        crate::policies::test_support::bare_messages::<HealthCheck>(yaml)
    }

    const SELECTORS: &str = "sources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: backend}\n";

    #[test]
    fn kuma_health_check_rules() {
        assert!(errors(&format!("{SELECTORS}conf: {{interval: 10s, timeout: 2s, unhealthyThreshold: 3, healthyThreshold: 1, http: {{path: /health, expectedStatuses: [200]}}}}\n")).is_empty());
        assert_eq!(
            errors(&format!("{SELECTORS}conf: {{interval: 0s, unhealthyThreshold: 1, healthyThreshold: 1, healthyPanicThreshold: 101, tcp: {{}}, http: {{expectedStatuses: [99], requestHeadersToAdd: [{{}}, {{header: {{value: x}}}}]}}}}\n")),
            [
                "conf.interval: must have a positive value",
                "conf.timeout: must have a positive value",
                "conf.healthyPanicThreshold: must be in range [0.0 - 100.0]",
                "conf.http.path: has to be defined and cannot be empty",
                "conf.http.expectedStatuses[0]: must be in range [100, 600)",
                "conf.http.requestHeadersToAdd[0].header: has to be defined",
                "conf.http.requestHeadersToAdd[1].header.key: cannot be empty",
                "conf: http and tcp cannot be defined at the same time",
            ]
        );
        assert_eq!(
            errors(&format!("{SELECTORS}conf: {{interval: 1s, timeout: 1s, unhealthyThreshold: 1, healthyThreshold: 1, tcp: {{send: 'not base64!', receive: [Zm9v, '%%']}}}}\n")),
            [
                "conf.tcp.send: must be base64",
                "conf.tcp.receive[1]: must be base64",
            ]
        );
        assert_eq!(decode_bytes("Zm9v"), Some(b"foo".to_vec()));
        assert_eq!(decode_bytes("Zm9vYg"), Some(b"foob".to_vec()));
    }
}
