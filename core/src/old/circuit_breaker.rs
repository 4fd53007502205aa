//! Old CircuitBreaker policy: outlier detection (`detectors`) and connection limits
//! (`thresholds`) for traffic from `sources` to `destinations`, and its validator.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/circuit_breaker.proto` (shape; its field names are
//! already camelCase) and `pkg/core/resources/apis/mesh/circuit_breaker_validator.go` (rules).
//!
//! Kuma behaviours reproduced on purpose:
//! - `destinations` may only use `kuma.io/service` (Kuma's `OnlyServiceTagAllowed`);
//! - `conf` needs at least one detector or threshold; when it has neither (including a missing
//!   `conf`, or `detectors: {}` with `thresholds: {}`) that is the only conf violation;
//! - an empty detector such as `totalErrors: {}` counts as configured, an empty `detectors: {}`
//!   or `thresholds: {}` next to a configured sibling is `can't be empty`;
//! - only `maxEjectionPercent` and `detectors.failure.threshold` are range-checked, with Kuma's
//!   message `has to be in [0.0 - 100.0] range`; durations are not checked at all.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::old::serialize_opt_f64;
use crate::validate::{PathBuilder, ValidationError};

/// Kuma's message for an out-of-range percentage.
const PERCENTAGE_RANGE: &str = "has to be in [0.0 - 100.0] range";

/// CircuitBreaker spec: outlier detection and connection limits (`conf`) for traffic from
/// dataplanes matching `sources` to services matching `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreaker {
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
    /// The circuit breaking settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<CircuitBreakerConf>,
}

/// `conf` of a CircuitBreaker (Kuma's `CircuitBreaker.Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerConf {
    /// Time between ejection analysis sweeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Base ejection time; the real time is this multiplied by the number of ejections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ejection_time: Option<Duration>,
    /// Maximum percentage of upstream hosts that may be ejected, in `[0, 100]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<u32>,
    /// Split mode: distinguish locally originated errors from upstream ones. `None` (absent)
    /// means `false`; an explicit `false` is kept so it round-trips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_external_and_local_errors: Option<bool>,
    /// Outlier detectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectors: Option<Detectors>,
    /// Connection pool limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
}

/// `conf.detectors`: the outlier detectors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Detectors {
    /// Consecutive 5xx and locally originated errors (only 5xx in split mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_errors: Option<Errors>,
    /// Consecutive gateway errors (502, 503, 504).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_errors: Option<Errors>,
    /// Consecutive locally originated errors (split mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_errors: Option<Errors>,
    /// Success-rate detection relative to the cluster mean and standard deviation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard_deviation: Option<StandardDeviation>,
    /// Success-rate detection with an explicit failure threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// A consecutive-errors detector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Errors {
    /// Number of consecutive errors that ejects a host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive: Option<u32>,
}

/// `detectors.standardDeviation`: success-rate outlier detection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StandardDeviation {
    /// Hosts with fewer requests than this are ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Minimum number of hosts with `requestVolume` for the detector to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Ejection threshold is `mean - stdev * factor`.
    #[serde(
        default,
        serialize_with = "serialize_opt_f64",
        skip_serializing_if = "Option::is_none"
    )]
    pub factor: Option<f64>,
}

/// `detectors.failure`: failure-percentage outlier detection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Failure {
    /// Hosts with fewer requests than this are ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Minimum number of hosts with `requestVolume` for the detector to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Failure percentage at or above which a host is ejected, in `[0, 100]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u32>,
}

/// `conf.thresholds`: connection pool limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Thresholds {
    /// Maximum connections to the upstream cluster (Envoy's default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// Maximum pending requests (Envoy's default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    /// Maximum parallel retries (Envoy's default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Maximum parallel requests (Envoy's default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
}

impl Detectors {
    /// `true` when at least one detector is present (Kuma's `HasDetectors`).
    pub fn any(&self) -> bool {
        self.total_errors.is_some()
            || self.gateway_errors.is_some()
            || self.local_errors.is_some()
            || self.standard_deviation.is_some()
            || self.failure.is_some()
    }
}

impl Thresholds {
    /// `true` when at least one limit is set (Kuma's `HasThresholds`).
    pub fn any(&self) -> bool {
        self.max_connections.is_some()
            || self.max_pending_requests.is_some()
            || self.max_retries.is_some()
            || self.max_requests.is_some()
    }
}

impl CircuitBreaker {
    /// `true` when `conf.detectors` holds at least one detector.
    pub fn has_detectors(&self) -> bool {
        self.conf
            .as_ref()
            .and_then(|c| c.detectors.as_ref())
            .is_some_and(Detectors::any)
    }

    /// `true` when `conf.thresholds` holds at least one limit.
    pub fn has_thresholds(&self) -> bool {
        self.conf
            .as_ref()
            .and_then(|c| c.thresholds.as_ref())
            .is_some_and(Thresholds::any)
    }

    /// Kuma's `CircuitBreakerResource.Validate`: sources, then destinations, then `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        );
        self.validate_conf(&mut err);
        err
    }

    fn validate_conf(&self, err: &mut ValidationError) {
        let root = PathBuilder::root().field("conf");
        let conf = match &self.conf {
            Some(conf) if self.has_detectors() || self.has_thresholds() => conf,
            _ => {
                err.violation(
                    &root,
                    "must have at least one of the detector or threshold configured",
                );
                return;
            }
        };
        if conf.detectors.as_ref().is_some_and(|d| !d.any()) {
            err.violation(&root.field("detectors"), "can't be empty");
        }
        if conf.max_ejection_percent.is_some_and(|p| p > 100) {
            err.violation(&root.field("maxEjectionPercent"), PERCENTAGE_RANGE);
        }
        let threshold = conf
            .detectors
            .as_ref()
            .and_then(|d| d.failure.as_ref())
            .and_then(|f| f.threshold);
        if threshold.is_some_and(|t| t > 100) {
            err.violation(
                &root.field("detectors").field("failure").field("threshold"),
                PERCENTAGE_RANGE,
            );
        }
        if conf.thresholds.as_ref().is_some_and(|t| !t.any()) {
            err.violation(&root.field("thresholds"), "can't be empty");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{self, assert_round_trip, decodes, document, resource, v};
    use crate::resource::Spec;

    fn violations(spec: &str) -> Vec<(String, String)> {
        test_support::violations::<CircuitBreaker>(spec)
    }

    /// The CircuitBreaker of the transition seed (000).
    const SEED: &str = r#"
type: CircuitBreaker
mesh: default
name: circuit-breaker-example
sources:
- match:
    kuma.io/service: "*"
destinations:
- match:
    kuma.io/service: "*"
conf:
  interval: 21s
  baseEjectionTime: 22s
  maxEjectionPercent: 23
  splitExternalAndLocalErrors: false
  thresholds:
    maxConnections: 24
    maxPendingRequests: 25
    maxRequests: 26
    maxRetries: 27
  detectors:
    totalErrors: 
      consecutive: 28
    gatewayErrors: 
      consecutive: 29
    localErrors: 
      consecutive: 30
    standardDeviation:
      requestVolume: 31
      minimumHosts: 32
      factor: 1.33
    failure:
      requestVolume: 34
      minimumHosts: 35
      threshold: 36
"#;

    const SOURCES_AND_DESTINATIONS: &str = "
sources:
- match:
    kuma.io/service: frontend
    region: us
destinations:
- match:
    kuma.io/service: backend
";

    fn with_selectors(conf: &str) -> String {
        format!(
            "{SOURCES_AND_DESTINATIONS}{}",
            conf.trim_start_matches('\n')
        )
    }

    #[test]
    fn seed_example_is_valid_and_round_trips() {
        let resource = resource(SEED);
        assert!(resource.validate().violations.is_empty());
        assert_round_trip(SEED);
        let Spec::CircuitBreaker(cb) = resource.spec else {
            panic!("not a CircuitBreaker");
        };
        let conf = cb.conf.unwrap();
        assert_eq!(conf.interval, Some(Duration::from_secs(21)));
        assert_eq!(conf.base_ejection_time, Some(Duration::from_secs(22)));
        assert_eq!(conf.max_ejection_percent, Some(23));
        assert_eq!(conf.split_external_and_local_errors, Some(false));
        assert_eq!(
            conf.thresholds,
            Some(Thresholds {
                max_connections: Some(24),
                max_pending_requests: Some(25),
                max_requests: Some(26),
                max_retries: Some(27),
            })
        );
        let d = conf.detectors.unwrap();
        assert_eq!(d.total_errors.unwrap().consecutive, Some(28));
        assert_eq!(d.gateway_errors.unwrap().consecutive, Some(29));
        assert_eq!(d.local_errors.unwrap().consecutive, Some(30));
        assert_eq!(d.standard_deviation.unwrap().factor, Some(1.33));
        assert_eq!(d.failure.unwrap().threshold, Some(36));
    }

    #[test]
    fn kuma_valid_examples() {
        for conf in [
            "
conf:
  interval: 1s
  baseEjectionTime: 30s
  maxEjectionPercent: 20
  splitExternalAndLocalErrors: false
  detectors:
    totalErrors:
      consecutive: 20
    gatewayErrors:
      consecutive: 10
    localErrors:
      consecutive: 7
    standardDeviation:
      requestVolume: 10
      minimumHosts: 5
      factor: 1.9
    failure:
      requestVolume: 10
      minimumHosts: 5
      threshold: 85
  thresholds:
    maxConnections: 2
    maxPendingRequests: 2
    maxRetries: 2
    maxRequests: 2
",
            "
conf:
  detectors:
    totalErrors: {}
    standardDeviation: {}
",
            "
conf:
  thresholds:
    maxConnections: 2
",
        ] {
            let spec = with_selectors(conf);
            assert!(violations(&spec).is_empty(), "{spec}");
            assert_round_trip(&document::<CircuitBreaker>(&spec));
        }
    }

    #[test]
    fn kuma_empty_spec() {
        assert_eq!(
            violations(""),
            [
                v("sources", "must have at least one element"),
                v("destinations", "must have at least one element"),
                v(
                    "conf",
                    "must have at least one of the detector or threshold configured"
                ),
            ]
        );
    }

    #[test]
    fn kuma_wrong_format() {
        let spec = "
sources:
- match:
    kuma.io/service: frontend
    region: us
destinations:
- match:
    kuma.io/service: backend
    region: eu
conf:
  maxEjectionPercent: 120
  detectors:
    failure:
      threshold: 850
";
        assert_eq!(
            violations(spec),
            [
                v(
                    "destinations[0].match",
                    "must consist of exactly one tag \"kuma.io/service\""
                ),
                v(
                    "destinations[0].match[\"region\"]",
                    "tag \"region\" is not allowed"
                ),
                v("conf.maxEjectionPercent", PERCENTAGE_RANGE),
                v("conf.detectors.failure.threshold", PERCENTAGE_RANGE),
            ]
        );
    }

    #[test]
    fn kuma_empty_sections() {
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  detectors:\n    totalErrors: {}\n    standardDeviation: {}\n  thresholds: {}\n"
            )),
            [v("conf.thresholds", "can't be empty")]
        );
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  detectors: {}\n  thresholds:\n    maxConnections: 2\n"
            )),
            [v("conf.detectors", "can't be empty")]
        );
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  detectors: {}\n  thresholds: {}\n"
            )),
            [v(
                "conf",
                "must have at least one of the detector or threshold configured"
            )]
        );
    }

    #[test]
    fn no_detector_hides_range_problems() {
        // Kuma returns early when nothing is configured: the bad percentage is not reported.
        assert_eq!(
            violations(&with_selectors("conf:\n  maxEjectionPercent: 101\n")),
            [v(
                "conf",
                "must have at least one of the detector or threshold configured"
            )]
        );
        assert!(violations(&with_selectors(
            "conf:\n  maxEjectionPercent: 100\n  detectors:\n    failure:\n      threshold: 100\n"
        ))
        .is_empty());
    }

    #[test]
    fn decode_errors() {
        assert!(!decodes::<CircuitBreaker>(
            "conf:\n  maxEjectionPercent: -1\n"
        ));
        assert!(!decodes::<CircuitBreaker>(
            "conf:\n  maxEjectionPercent: 4294967296\n"
        ));
        assert!(!decodes::<CircuitBreaker>(
            "conf:\n  detectors:\n    total: {}\n"
        ));
        assert!(!decodes::<CircuitBreaker>("conf:\n  interval: often\n"));
        // `null` is unset: this thresholds block is empty.
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  detectors:\n    failure: {}\n  thresholds:\n    maxConnections:\n"
            )),
            [v("conf.thresholds", "can't be empty")]
        );
    }
}
