//! Old FaultInjection policy: delays, aborts and response bandwidth limits injected into HTTP
//! traffic from `sources` to `destinations`, and its validator.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/fault_injection.proto` (shape, JSON names) and
//! `pkg/core/resources/apis/mesh/fault_injection_validator.go` (rules).
//!
//! Kuma behaviours reproduced on purpose:
//! - neither list requires `kuma.io/service`; every destination must carry `kuma.io/protocol`
//!   set to `http`, `http2` or `grpc`;
//! - a fault section counts only when one of its fields is set (`delay: {}` is absent), and
//!   `conf: must have at least one of the faults configured` does not stop the other checks;
//! - percentages are checked against `[0.0 - 100.0]`, the abort status against Go's list of
//!   known HTTP status codes (`http.StatusText`), the delay itself not at all;
//! - the bandwidth `limit` only has to *contain* `kbps`, `mbps` or `gbps` (lower case, Kuma's
//!   unanchored regexp), so `50mbps` passes validation even though Kuma's Envoy generator only
//!   understands `kbps`, `Mbps` and `Gbps` (see [`ResponseBandwidth::limit_kbps`]).

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::old::serialize_opt_f64;
use crate::validate::{PathBuilder, ValidationError};

/// Protocols a FaultInjection destination may declare with `kuma.io/protocol`.
pub const SUPPORTED_PROTOCOLS: &[&str] = &["http", "http2", "grpc"];

/// Kuma's message for a missing required value.
const CANNOT_BE_EMPTY: &str = "cannot be empty";

/// FaultInjection spec: the faults (`conf`) injected into traffic from dataplanes matching
/// `sources` to services matching `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultInjection {
    /// Selectors of the dataplanes that are sources of traffic.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the destination services; each needs an HTTP `kuma.io/protocol`.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<FaultInjectionConf>,
}

/// `conf` of a FaultInjection (Kuma's `FaultInjection.Conf`): at least one fault.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultInjectionConf {
    /// Delay responses from the destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Delay>,
    /// Answer with a fixed HTTP status instead of forwarding the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<Abort>,
    /// Limit the speed at which the response body is sent.
    #[serde(
        default,
        alias = "response_bandwidth",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_bandwidth: Option<ResponseBandwidth>,
}

/// `conf.delay`: delay a percentage of responses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delay {
    /// Percentage of requests delayed, in `[0.0, 100.0]`.
    #[serde(
        default,
        serialize_with = "serialize_opt_f64",
        skip_serializing_if = "Option::is_none"
    )]
    pub percentage: Option<f64>,
    /// How long the response is delayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Duration>,
}

/// `conf.abort`: answer a percentage of requests with `httpStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Abort {
    /// Percentage of requests aborted, in `[0.0, 100.0]`.
    #[serde(
        default,
        serialize_with = "serialize_opt_f64",
        skip_serializing_if = "Option::is_none"
    )]
    pub percentage: Option<f64>,
    /// HTTP status returned to the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u32>,
}

/// `conf.responseBandwidth`: throttle a percentage of responses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseBandwidth {
    /// Percentage of responses throttled, in `[0.0, 100.0]`.
    #[serde(
        default,
        serialize_with = "serialize_opt_f64",
        skip_serializing_if = "Option::is_none"
    )]
    pub percentage: Option<f64>,
    /// Bandwidth such as `50kbps`, `10Mbps` or `1Gbps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

impl Delay {
    /// `true` when at least one field is set (Kuma compares with an empty message).
    pub fn is_set(&self) -> bool {
        self.percentage.is_some() || self.value.is_some()
    }
}

impl Abort {
    /// `true` when at least one field is set (Kuma compares with an empty message).
    pub fn is_set(&self) -> bool {
        self.percentage.is_some() || self.http_status.is_some()
    }
}

impl ResponseBandwidth {
    /// `true` when at least one field is set (Kuma compares with an empty message).
    pub fn is_set(&self) -> bool {
        self.percentage.is_some() || self.limit.is_some()
    }

    /// The limit in kbps, as Kuma's `ConvertBandwidthToKbps` computes it for Envoy: the first
    /// match of `(\d*)\s?([GMk]?bps)` in `limit`, times 1 (`kbps`), 1000 (`Mbps`) or 1,000,000
    /// (`Gbps`). `None` where Kuma fails to generate the fault: no limit, no match, no digits
    /// (`50mbps` matches only `bps`), plain `bps`, or a value that overflows.
    pub fn limit_kbps(&self) -> Option<u64> {
        bandwidth_kbps(self.limit.as_deref()?)
    }
}

impl FaultInjectionConf {
    /// The delay, when it sets anything.
    pub fn effective_delay(&self) -> Option<&Delay> {
        self.delay.as_ref().filter(|d| d.is_set())
    }

    /// The abort, when it sets anything.
    pub fn effective_abort(&self) -> Option<&Abort> {
        self.abort.as_ref().filter(|a| a.is_set())
    }

    /// The response bandwidth limit, when it sets anything.
    pub fn effective_response_bandwidth(&self) -> Option<&ResponseBandwidth> {
        self.response_bandwidth.as_ref().filter(|r| r.is_set())
    }
}

impl FaultInjection {
    /// Kuma's `FaultInjectionResource.Validate`: sources, then destinations, then `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY,
            &SelectorRules {
                protocols: Some(SUPPORTED_PROTOCOLS),
                ..SelectorRules::NON_EMPTY
            },
        );
        self.validate_conf(&mut err);
        err
    }

    fn validate_conf(&self, err: &mut ValidationError) {
        let root = PathBuilder::root().field("conf");
        let empty = FaultInjectionConf::default();
        let conf = self.conf.as_ref().unwrap_or(&empty);
        let (delay, abort, bandwidth) = (
            conf.effective_delay(),
            conf.effective_abort(),
            conf.effective_response_bandwidth(),
        );
        if delay.is_none() && abort.is_none() && bandwidth.is_none() {
            err.violation(&root, "must have at least one of the faults configured");
        }
        if let Some(delay) = delay {
            let path = root.field("delay");
            validate_percentage(err, &path, delay.percentage);
            if delay.value.is_none() {
                err.violation(&path.field("value"), CANNOT_BE_EMPTY);
            }
        }
        if let Some(abort) = abort {
            let path = root.field("abort");
            validate_percentage(err, &path, abort.percentage);
            let path = path.field("httpStatus");
            match abort.http_status {
                None => err.violation(&path, CANNOT_BE_EMPTY),
                Some(code) if !is_known_http_status(code) => {
                    err.violation(&path, "http status code is incorrect");
                }
                Some(_) => {}
            }
        }
        if let Some(bandwidth) = bandwidth {
            let path = root.field("responseBandwidth");
            validate_percentage(err, &path, bandwidth.percentage);
            let path = path.field("limit");
            match &bandwidth.limit {
                None => err.violation(&path, CANNOT_BE_EMPTY),
                Some(limit) if !has_bps_unit(limit) => {
                    err.violation(&path, "has to be in kbps/mbps/gbps units");
                }
                Some(_) => {}
            }
        }
    }
}

/// Kuma's `validatePercentage` at `path.percentage` (NaN passes, as in Go).
fn validate_percentage(err: &mut ValidationError, path: &PathBuilder, percentage: Option<f64>) {
    let path = path.field("percentage");
    match percentage {
        None => err.violation(&path, CANNOT_BE_EMPTY),
        Some(p) if !(p.is_nan() || (0.0..=100.0).contains(&p)) => {
            err.violation(&path, "has to be in [0.0 - 100.0] range");
        }
        Some(_) => {}
    }
}

/// Kuma's unanchored `\d*\s?[gmk]bps`: since the prefix may be empty, the value only has to
/// contain `gbps`, `mbps` or `kbps`.
fn has_bps_unit(limit: &str) -> bool {
    ["gbps", "mbps", "kbps"].iter().any(|u| limit.contains(u))
}

/// `true` for the codes Go's `http.StatusText` names (Go 1.22).
fn is_known_http_status(code: u32) -> bool {
    matches!(
        code,
        100..=103
            | 200..=208
            | 226
            | 300..=305
            | 307
            | 308
            | 400..=418
            | 421..=426
            | 428
            | 429
            | 431
            | 451
            | 500..=508
            | 510
            | 511
    )
}

/// Kuma's `ConvertBandwidthToKbps` on the leftmost match of `(\d*)\s?([GMk]?bps)`.
fn bandwidth_kbps(limit: &str) -> Option<u64> {
    let b = limit.as_bytes();
    for start in 0..b.len() {
        if start > 0 && b[start - 1].is_ascii_digit() {
            // Inside a run of digits the outcome is the one tried from the run's start (and
            // skipping keeps the scan linear).
            continue;
        }
        let digits_end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        let mut i = digits_end;
        if b.get(i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r'))
        {
            i += 1;
        }
        let unit = match b.get(i) {
            Some(c @ (b'G' | b'M' | b'k')) => {
                i += 1;
                Some(*c)
            }
            _ => None,
        };
        if !b[i..].starts_with(b"bps") {
            continue;
        }
        let value: u64 = limit.get(start..digits_end)?.parse().ok()?;
        // Go's strconv.Atoi is 64-bit signed.
        if value > i64::MAX as u64 {
            return None;
        }
        let factor: u64 = match unit {
            Some(b'k') => 1,
            Some(b'M') => 1_000,
            Some(b'G') => 1_000_000,
            _ => return None,
        };
        return value.checked_mul(factor);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{self, assert_round_trip, decodes, document, v};

    fn decode(spec: &str) -> FaultInjection {
        test_support::decode(spec)
    }

    fn violations(spec: &str) -> Vec<(String, String)> {
        test_support::violations::<FaultInjection>(spec)
    }

    const FULL: &str = "
sources:
- match:
    service: frontend
    kuma.io/protocol: http
destinations:
- match:
    service: backend
    kuma.io/protocol: http
    region: eu
    kuma.io/valid: abcd.123-456.under_score_.:80
conf:
  delay:
    percentage: 50
    value: 10ms
  abort:
    percentage: 40
    httpStatus: 500
  responseBandwidth:
    percentage: 40
    limit: 50kbps
";

    const SELECTORS: &str = "
sources:
- match:
   service: frontend
   kuma.io/protocol: http
destinations:
- match:
   service: backend
   kuma.io/protocol: http
   region: eu
";

    fn with_selectors(conf: &str) -> String {
        format!("{SELECTORS}{}", conf.trim_start_matches('\n'))
    }

    #[test]
    fn kuma_valid_examples_round_trip() {
        for spec in [
            FULL,
            "
sources:
- match:
    service: frontend
destinations:
- match:
    service: backend
    kuma.io/protocol: http2
conf:
  delay:
    percentage: 50
    value: 10ms
",
            "
sources:
- match:
    service: frontend
    kuma.io/protocol: http
destinations:
- match:
    service: backend
    kuma.io/protocol: grpc
    region: \"*\"
conf:
  delay:
    percentage: 50.5
    value: 10ms
  abort:
    percentage: 40
    httpStatus: 500
  responseBandwidth:
    percentage: 40
    limit: 50kbps
",
        ] {
            assert!(violations(spec).is_empty(), "{spec}");
            assert_round_trip(&document::<FaultInjection>(spec));
        }
        let conf = decode(FULL).conf.unwrap();
        assert_eq!(
            conf.delay,
            Some(Delay {
                percentage: Some(50.0),
                value: Some(Duration::parse("10ms").unwrap()),
            })
        );
        assert_eq!(conf.abort.unwrap().http_status, Some(500));
        assert_eq!(conf.response_bandwidth.unwrap().limit_kbps(), Some(50));
    }

    #[test]
    fn kuma_empty_spec() {
        assert_eq!(
            violations(""),
            [
                v("sources", "must have at least one element"),
                v("destinations", "must have at least one element"),
                v("conf", "must have at least one of the faults configured"),
            ]
        );
    }

    #[test]
    fn kuma_empty_faults() {
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  delay: {}\n  abort: {}\n  responseBandwidth: {}\n"
            )),
            [v("conf", "must have at least one of the faults configured")]
        );
    }

    #[test]
    fn kuma_missing_percentages() {
        let conf = "
conf:
  delay:
    value: 50ms
  abort:
    httpStatus: 500
  responseBandwidth: 
    limit: 50kbps
";
        assert_eq!(
            violations(&with_selectors(conf)),
            [
                v("conf.delay.percentage", "cannot be empty"),
                v("conf.abort.percentage", "cannot be empty"),
                v("conf.responseBandwidth.percentage", "cannot be empty"),
            ]
        );
    }

    #[test]
    fn kuma_missing_main_values() {
        let conf = "
conf:
  delay:
    percentage: 30
  abort:
    percentage: 30
  responseBandwidth: 
    percentage: 30
";
        assert_eq!(
            violations(&with_selectors(conf)),
            [
                v("conf.delay.value", "cannot be empty"),
                v("conf.abort.httpStatus", "cannot be empty"),
                v("conf.responseBandwidth.limit", "cannot be empty"),
            ]
        );
    }

    #[test]
    fn kuma_wrong_formats() {
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  abort:\n    httpStatus: 600\n    percentage: 100\n"
            )),
            [v("conf.abort.httpStatus", "http status code is incorrect")]
        );
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  responseBandwidth:\n    limit: 50mb\n    percentage: 101\n"
            )),
            [
                v(
                    "conf.responseBandwidth.percentage",
                    "has to be in [0.0 - 100.0] range"
                ),
                v(
                    "conf.responseBandwidth.limit",
                    "has to be in kbps/mbps/gbps units"
                ),
            ]
        );
    }

    #[test]
    fn kuma_protocol_rules() {
        let conf = "conf:\n  responseBandwidth:\n    limit: 50mbps\n    percentage: 100\n";
        assert_eq!(
            violations(&format!(
                "sources:\n- match:\n    service: frontend\ndestinations:\n- match:\n    service: backend\n    region: eu\n{conf}"
            )),
            [v("destinations[0].match", "protocol must be specified")]
        );
        assert_eq!(
            violations(&format!(
                "sources:\n- match:\n    service: frontend\ndestinations:\n- match:\n    service: backend\n    region: eu\n    kuma.io/protocol: tcp\n{conf}"
            )),
            [v(
                "destinations[0].match[\"kuma.io/protocol\"]",
                "must be one of the [http, http2, grpc]"
            )]
        );
    }

    #[test]
    fn kuma_invalid_tag_characters() {
        let conf = "conf:\n  responseBandwidth:\n    limit: 50mbps\n    percentage: 100\n";
        let spec = format!(
            "
sources:
- match:
    service: frontend
    kuma.io/protocol: http
    invalidTag: v@/u^e
destinations:
- match:
    service: backend
    kuma.io/protocol: http
    invalidTag: v@/u^e#!
{conf}"
        );
        let msg = "tag value must consist of alphanumeric characters, dots, dashes, slashes and underscores or be \"*\"";
        assert_eq!(
            violations(&spec),
            [
                v("sources[0].match[\"invalidTag\"]", msg),
                v("destinations[0].match[\"invalidTag\"]", msg),
            ]
        );
        let spec = format!(
            "
sources:
- match:
    service: frontend
    kuma.io/protocol: http
    inv@lidT@g#: value
destinations:
- match:
    service: backend
    kuma.io/protocol: http
    inv@lidT@g#: value
{conf}"
        );
        let msg = "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores";
        assert_eq!(
            violations(&spec),
            [
                v("sources[0].match[\"inv@lidT@g#\"]", msg),
                v("destinations[0].match[\"inv@lidT@g#\"]", msg),
            ]
        );
    }

    #[test]
    fn section_with_zero_percentage_counts_as_set() {
        assert_eq!(
            violations(&with_selectors("conf:\n  delay:\n    percentage: 0\n")),
            [v("conf.delay.value", "cannot be empty")]
        );
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  delay:\n    percentage: -0.5\n    value: 0s\n  responseBandwidth:\n    percentage: 1\n    limit: ''\n"
            )),
            [
                v("conf.delay.percentage", "has to be in [0.0 - 100.0] range"),
                v(
                    "conf.responseBandwidth.limit",
                    "has to be in kbps/mbps/gbps units"
                ),
            ]
        );
    }

    #[test]
    fn http_statuses_follow_go() {
        for ok in [100, 103, 200, 226, 308, 418, 425, 451, 511] {
            assert!(is_known_http_status(ok), "{ok}");
        }
        for bad in [0, 99, 104, 209, 306, 419, 420, 427, 430, 509, 512, 600] {
            assert!(!is_known_http_status(bad), "{bad}");
        }
    }

    #[test]
    fn bandwidth_units() {
        assert!(has_bps_unit("50kbps"));
        assert!(has_bps_unit("xkbps"));
        assert!(has_bps_unit("1 gbps"));
        assert!(!has_bps_unit("50Mbps"));
        assert!(!has_bps_unit("50bps"));
        let kbps = |s: &str| bandwidth_kbps(s);
        assert_eq!(kbps("50kbps"), Some(50));
        assert_eq!(kbps("10 Mbps"), Some(10_000));
        assert_eq!(kbps("2Gbps"), Some(2_000_000));
        assert_eq!(kbps("x3kbps"), Some(3));
        assert_eq!(kbps("50mbps"), None);
        assert_eq!(kbps("50bps"), None);
        assert_eq!(kbps("kbps"), None);
        assert_eq!(kbps("99999999999999999999kbps"), None);
        assert_eq!(kbps(""), None);
        assert_eq!(kbps("é5kbps"), Some(5));
        assert_eq!(kbps("12x34kbps"), Some(34));
        assert_eq!(kbps(&"9".repeat(1 << 20)), None);
    }

    #[test]
    fn decode_errors_and_aliases() {
        assert!(!decodes::<FaultInjection>(
            "conf:\n  delay:\n    percent: 5\n"
        ));
        assert!(!decodes::<FaultInjection>(
            "conf:\n  abort:\n    httpStatus: -1\n"
        ));
        assert!(!decodes::<FaultInjection>(
            "conf:\n  delay:\n    value: 5\n"
        ));
        assert!(!decodes::<FaultInjection>(
            "conf:\n  responseBandwidth:\n    limit: 5\n"
        ));
        let fi = decode("conf:\n  response_bandwidth:\n    limit: 1Gbps\n");
        assert_eq!(
            fi.conf
                .unwrap()
                .response_bandwidth
                .unwrap()
                .limit
                .as_deref(),
            Some("1Gbps")
        );
    }
}
