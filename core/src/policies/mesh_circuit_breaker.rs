//! MeshCircuitBreaker: the typed spec (connection limits and outlier detection per
//! `from`/`to` item) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshcircuitbreaker/api/v1alpha1/`
//! (`meshcircuitbreaker.go` for the shape and JSON names, `validator.go` for the rules).
//! Validation returns every violation, in Kuma's order, with paths rooted at `spec`.
//!
//! Kuma's pointer fields are `Option`s here: `*uint32` limits and thresholds become
//! `Option<u32>` (so `0` is "set to zero", which Kuma rejects, while absent is fine), and
//! `standardDeviationFactor` is an [`IntOrString`] (a JSON integer or a decimal string).
//!
//! Kuma behaviours reproduced on purpose:
//! - `outlierDetection` without `detectors` is rejected (`detectors: must be defined`), even
//!   when `disabled: true`;
//! - percentages (`maxEjectionPercent`, `failurePercentage.threshold`) accept `0`, while the
//!   other integers must be greater than zero;
//! - `standardDeviationFactor` is parsed like shopspring/decimal's `NewFromString`
//!   (`"1.9"`, `".5"`, `"1e3"`, `"+2"`); anything else is `invalid number`, zero or less is
//!   `must be greater than 0`.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::envelope::{Envelope, Items, Lists};
use super::mesh_fault_injection::GoDecimal;
use super::{validate_items, validate_top_target_ref, FROM_OR_TO_REQUIRED};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    must_have_at_least_one, PathBuilder, ValidationError, GREATER_THAN_ZERO,
    GREATER_THAN_ZERO_WHEN_DEFINED, MUST_BE_DEFINED, UINT_PERCENTAGE_RANGE,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshService,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshServiceSubset,
];
/// Kinds allowed in `from[].targetRef`.
const FROM_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];
/// Kinds allowed in `to[].targetRef`.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];

/// MeshCircuitBreaker spec: which proxies (`targetRef`) and the circuit breaking settings for
/// their inbound (`from`) and outbound (`to`) traffic.
pub type MeshCircuitBreaker = Envelope<MeshCircuitBreakerLists>;

/// What a MeshCircuitBreaker spec holds: `to` and `from` items of [`Conf`].
#[derive(Debug, Clone, PartialEq)]
pub enum MeshCircuitBreakerLists {}

impl Lists for MeshCircuitBreakerLists {
    const TYPE: ResourceType = ResourceType::MeshCircuitBreaker;
    type To = Items<Conf>;
    type From = Items<Conf>;
}

/// One `from` or `to` item: a client/destination group and its circuit breaking settings.
pub type Item = super::Item<Conf>;

/// Circuit breaking settings for one group (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Limits that open the circuit when exceeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limits: Option<ConnectionLimits>,
    /// Passive health checking: ejecting hosts that misbehave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
}

/// Connection limits (Kuma's `ConnectionLimits`). Each must be greater than 0 when set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionLimits {
    /// Maximum number of connections to the upstream cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// Maximum number of concurrent connection pools per cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_pools: Option<u32>,
    /// Maximum number of pending requests to the upstream cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    /// Maximum number of parallel retries to the upstream cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Maximum number of parallel requests to the upstream cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
}

/// Outlier detection (Kuma's `OutlierDetection`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlierDetection {
    /// When `true`, outlier detection has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Time between ejection sweeps; greater than zero when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Base ejection time (multiplied by the number of ejections); greater than zero when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ejection_time: Option<Duration>,
    /// Maximum % of the cluster that can be ejected, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<u32>,
    /// Whether local origin failures are told apart from external errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_external_and_local_errors: Option<bool>,
    /// The detectors; required by validation whenever `outlierDetection` is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectors: Option<Detectors>,
}

/// The outlier detectors (Kuma's `Detectors`); at least one must be set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Detectors {
    /// Consecutive errors of any kind (5xx, connection failures...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_failures: Option<ConsecutiveFailures>,
    /// Consecutive gateway errors (502, 503, 504).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_failures: Option<ConsecutiveFailures>,
    /// Consecutive locally originated errors (timeouts, resets...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_origin_failures: Option<ConsecutiveFailures>,
    /// Success-rate based detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<SuccessRate>,
    /// Failure-percentage based detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_percentage: Option<FailurePercentage>,
}

/// A consecutive-failures detector (Kuma's `DetectorTotalFailures`, `DetectorGatewayFailures`
/// and `DetectorLocalOriginFailures`, which share this shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsecutiveFailures {
    /// Number of consecutive failures before ejection; greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive: Option<u32>,
}

/// Success-rate detector (Kuma's `DetectorSuccessRateFailures`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuccessRate {
    /// Hosts with enough request volume needed to run detection; greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Requests per interval needed to include a host; greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Ejection threshold factor (integer or decimal string); greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard_deviation_factor: Option<IntOrString>,
}

/// Failure-percentage detector (Kuma's `DetectorFailurePercentageFailures`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailurePercentage {
    /// Hosts needed to run detection; greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_hosts: Option<u32>,
    /// Requests per interval needed to include a host; greater than 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_volume: Option<u32>,
    /// Failure percentage at which a host is ejected, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u32>,
}

/// Kubernetes' `intstr.IntOrString`: a JSON integer (32-bit) or a JSON string, kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrString {
    /// A JSON integer.
    Int(i32),
    /// A JSON string (for decimals such as `"1.9"`).
    String(String),
}

impl IntOrString {
    /// The sign of the value read as a decimal (Kuma's `NewDecimalFromIntOrString`):
    /// `Less`, `Equal` or `Greater` than zero, or `None` when the string is not a number.
    pub fn decimal_sign(&self) -> Option<Ordering> {
        match self {
            Self::Int(i) => Some(i.cmp(&0)),
            Self::String(s) => decimal_string_sign(s),
        }
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(i) => write!(f, "{i}"),
            Self::String(s) => f.write_str(s),
        }
    }
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Int(i) => s.serialize_i32(*i),
            Self::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IntOrString;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 32-bit integer or a string")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrString, E> {
                i32::try_from(v).map(IntOrString::Int).map_err(|_| {
                    E::invalid_value(serde::de::Unexpected::Signed(v), &"a 32-bit integer")
                })
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrString, E> {
                i32::try_from(v).map(IntOrString::Int).map_err(|_| {
                    E::invalid_value(serde::de::Unexpected::Unsigned(v), &"a 32-bit integer")
                })
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v.to_owned()))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// shopspring/decimal's `NewFromString` grammar (the one [`GoDecimal::parse`] implements),
/// reduced to the sign of the value. Returns `None` where Go returns an error.
fn decimal_string_sign(s: &str) -> Option<Ordering> {
    GoDecimal::parse(s).map(|d| d.cmp_int(0))
}

impl MeshCircuitBreaker {
    /// Kuma 2.7's MeshCircuitBreaker validation: every violation, paths rooted at `spec`
    /// (`spec.to[0].default.connectionLimits.maxConnections`). Empty means valid.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        if self.to_items().is_empty() && self.from_items().is_empty() {
            err.violation(&spec, FROM_OR_TO_REQUIRED);
        }
        for (field, items, kinds) in [
            ("from", self.from_items(), FROM_KINDS),
            ("to", self.to_items(), TO_KINDS),
        ] {
            validate_items(&mut err, &spec.field(field), items, kinds, validate_default);
        }
        err
    }
}

/// Kuma's `validateDefault`: an absent `default` is the same as an empty one.
fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let conf = match conf {
        Some(c) if c.connection_limits.is_some() || c.outlier_detection.is_some() => c,
        _ => {
            err.violation(
                path,
                "at least one of: 'connectionLimits' or 'outlierDetection' should be configured",
            );
            return;
        }
    };
    if let Some(limits) = &conf.connection_limits {
        let path = path.field("connectionLimits");
        for (field, value) in [
            ("maxConnections", limits.max_connections),
            ("maxConnectionPools", limits.max_connection_pools),
            ("maxPendingRequests", limits.max_pending_requests),
            ("maxRetries", limits.max_retries),
            ("maxRequests", limits.max_requests),
        ] {
            greater_than_zero(err, &path.field(field), value);
        }
    }
    if let Some(od) = &conf.outlier_detection {
        validate_outlier_detection(err, &path.field("outlierDetection"), od);
    }
}

/// Kuma's `validateOutlierDetection` and `validateDetectors`.
fn validate_outlier_detection(
    err: &mut ValidationError,
    path: &PathBuilder,
    od: &OutlierDetection,
) {
    for (field, value) in [
        ("interval", &od.interval),
        ("baseEjectionTime", &od.base_ejection_time),
    ] {
        if value
            .as_ref()
            .is_some_and(|d| d.is_negative() || d.is_zero())
        {
            err.violation(&path.field(field), GREATER_THAN_ZERO_WHEN_DEFINED);
        }
    }
    percentage(
        err,
        &path.field("maxEjectionPercent"),
        od.max_ejection_percent,
    );

    let path = path.field("detectors");
    let Some(detectors) = &od.detectors else {
        err.violation(&path, MUST_BE_DEFINED);
        return;
    };
    if detectors == &Detectors::default() {
        err.violation(
            &path,
            must_have_at_least_one(&[
                "totalFailures",
                "gatewayFailures",
                "localOriginFailures",
                "successRate",
                "failurePercentage",
            ]),
        );
        return;
    }
    for (field, detector) in [
        ("totalFailures", &detectors.total_failures),
        ("gatewayFailures", &detectors.gateway_failures),
        ("localOriginFailures", &detectors.local_origin_failures),
    ] {
        if let Some(d) = detector {
            greater_than_zero(err, &path.field(field).field("consecutive"), d.consecutive);
        }
    }
    if let Some(sr) = &detectors.success_rate {
        let path = path.field("successRate");
        greater_than_zero(err, &path.field("minimumHosts"), sr.minimum_hosts);
        greater_than_zero(err, &path.field("requestVolume"), sr.request_volume);
        if let Some(factor) = &sr.standard_deviation_factor {
            let path = path.field("standardDeviationFactor");
            match factor.decimal_sign() {
                None => err.violation(&path, "invalid number"),
                Some(Ordering::Less | Ordering::Equal) => {
                    err.violation(&path, GREATER_THAN_ZERO);
                }
                Some(Ordering::Greater) => {}
            }
        }
    }
    if let Some(fp) = &detectors.failure_percentage {
        let path = path.field("failurePercentage");
        greater_than_zero(err, &path.field("minimumHosts"), fp.minimum_hosts);
        greater_than_zero(err, &path.field("requestVolume"), fp.request_volume);
        percentage(err, &path.field("threshold"), fp.threshold);
    }
}

/// Kuma's `ValidateIntegerGreaterThanZeroOrNil`.
fn greater_than_zero(err: &mut ValidationError, path: &PathBuilder, value: Option<u32>) {
    if value == Some(0) {
        err.violation(path, GREATER_THAN_ZERO);
    }
}

/// Kuma's `ValidateUInt32PercentageOrNil`.
fn percentage(err: &mut ValidationError, path: &PathBuilder, value: Option<u32>) {
    if value.is_some_and(|v| v > 100) {
        err.violation(path, UINT_PERCENTAGE_RANGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{assert_round_trip, decodes, document, v};

    fn violations(spec: &str) -> Vec<(String, String)> {
        crate::policies::test_support::violations::<MeshCircuitBreaker>(spec)
    }

    fn to_default(default: &str) -> String {
        let body: String = default.lines().map(|l| format!("      {l}\n")).collect();
        format!(
            "targetRef:\n  kind: MeshService\n  name: web-frontend\nto:\n  - targetRef:\n      kind: MeshService\n      name: web-backend\n    default:\n{body}"
        )
    }

    const FULL: &str = "
targetRef:
  kind: MeshService
  name: web-frontend
from:
  - targetRef:
      kind: Mesh
    default:
      connectionLimits:
        maxConnections: 12
        maxConnectionPools: 12
        maxPendingRequests: 92
        maxRetries: 8
        maxRequests: 128
      outlierDetection:
        disabled: false
        interval: 11s
        baseEjectionTime: 38s
        maxEjectionPercent: 22
        splitExternalAndLocalErrors: true
        detectors:
          totalFailures:
            consecutive: 10
          gatewayFailures:
            consecutive: 10
          localOriginFailures:
            consecutive: 10
          successRate:
            minimumHosts: 5
            requestVolume: 10
            standardDeviationFactor: \"1.9\"
          failurePercentage:
            requestVolume: 10
            minimumHosts: 5
            threshold: 31
to:
  - targetRef:
      kind: Mesh
    default:
      outlierDetection:
        detectors:
          successRate:
            standardDeviationFactor: 1900
";

    #[test]
    fn valid_examples() {
        assert!(violations(FULL).is_empty());
        assert!(violations(&to_default("connectionLimits: { }")).is_empty());
        assert!(violations(
            "
targetRef:
  kind: MeshGateway
  name: edge
to:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      connectionLimits: { }
"
        )
        .is_empty());
        // 0 is a valid percentage.
        assert!(violations(&to_default(
            "outlierDetection:\n  maxEjectionPercent: 0\n  detectors:\n    failurePercentage:\n      threshold: 0"
        ))
        .is_empty());
    }

    #[test]
    fn round_trip_is_lossless() {
        for spec in [
            FULL,
            "targetRef:\n  kind: Mesh\nfrom: []\n",
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      connectionLimits: {}\n",
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n",
        ] {
            assert_round_trip(&document::<MeshCircuitBreaker>(spec));
        }
    }

    #[test]
    fn decode_errors() {
        for default in [
            "connectionLimits:\n  maxConnections: -1",
            "connectionLimits:\n  maxConnections: 4294967296",
            "connectionLimits:\n  maxConections: 1",
            "outlierDetection:\n  detectors:\n    successRate:\n      standardDeviationFactor: 1.9",
            "outlierDetection:\n  detectors:\n    successRate:\n      standardDeviationFactor: 2147483648",
            "outlierDetection:\n  detectors:\n    successRate:\n      standardDeviationFactor: true",
            "outlierDetection:\n  interval: 5",
        ] {
            assert!(
                !decodes::<MeshCircuitBreaker>(&to_default(default)),
                "{default}"
            );
        }
    }

    #[test]
    fn empty_from_and_to() {
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\n"),
            [v("spec", "at least one of 'from', 'to' has to be defined")]
        );
    }

    #[test]
    fn unsupported_kinds() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshHTTPRoute
  name: route
from:
  - targetRef:
      kind: MeshGatewayRoute
    default:
      connectionLimits: { }
to:
  - targetRef:
      kind: MeshServiceSubset
    default:
      connectionLimits: { }
"
            ),
            [
                v("spec.targetRef.kind", "value is not supported"),
                v("spec.from[0].targetRef.kind", "value is not supported"),
                v("spec.to[0].targetRef.kind", "value is not supported"),
            ]
        );
    }

    #[test]
    fn missing_configuration() {
        assert_eq!(
            violations(
                "targetRef:\n  kind: MeshService\n  name: web-frontend\nto:\n  - targetRef:\n      kind: MeshService\n      name: web-backend\n"
            ),
            [v(
                "spec.to[0].default",
                "at least one of: 'connectionLimits' or 'outlierDetection' should be configured"
            )]
        );
    }

    #[test]
    fn zeros_are_rejected() {
        let p = "spec.to[0].default.outlierDetection";
        assert_eq!(
            violations(&to_default(
                "outlierDetection:
  interval: 0s
  baseEjectionTime: -1s
  maxEjectionPercent: 0
  detectors:
    totalFailures:
      consecutive: 0
    gatewayFailures:
      consecutive: 0
    localOriginFailures:
      consecutive: 0
    successRate:
      minimumHosts: 0
      requestVolume: 0
      standardDeviationFactor: 0
    failurePercentage:
      requestVolume: 0
      minimumHosts: 0
      threshold: 0"
            )),
            [
                v(&format!("{p}.interval"), GREATER_THAN_ZERO_WHEN_DEFINED),
                v(
                    &format!("{p}.baseEjectionTime"),
                    GREATER_THAN_ZERO_WHEN_DEFINED
                ),
                v(
                    &format!("{p}.detectors.totalFailures.consecutive"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.gatewayFailures.consecutive"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.localOriginFailures.consecutive"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.successRate.minimumHosts"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.successRate.requestVolume"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.successRate.standardDeviationFactor"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.failurePercentage.minimumHosts"),
                    GREATER_THAN_ZERO
                ),
                v(
                    &format!("{p}.detectors.failurePercentage.requestVolume"),
                    GREATER_THAN_ZERO
                ),
            ]
        );
    }

    #[test]
    fn detectors() {
        let p = "spec.to[0].default.outlierDetection.detectors";
        assert_eq!(
            violations(&to_default("outlierDetection:\n  disabled: true")),
            [v(p, MUST_BE_DEFINED)]
        );
        assert_eq!(
            violations(&to_default(
                "outlierDetection:\n  maxEjectionPercent: 101\n  detectors: {}"
            )),
            [
                v(
                    "spec.to[0].default.outlierDetection.maxEjectionPercent",
                    UINT_PERCENTAGE_RANGE
                ),
                v(
                    p,
                    "must have at least one defined: totalFailures, gatewayFailures, localOriginFailures, successRate, failurePercentage"
                ),
            ]
        );
        assert_eq!(
            violations(&to_default(
                "outlierDetection:\n  detectors:\n    successRate:\n      standardDeviationFactor: \"xyz\"\n    failurePercentage:\n      threshold: 101"
            )),
            [
                v(
                    &format!("{p}.successRate.standardDeviationFactor"),
                    "invalid number"
                ),
                v(
                    &format!("{p}.failurePercentage.threshold"),
                    UINT_PERCENTAGE_RANGE
                ),
            ]
        );
    }

    #[test]
    fn decimal_strings_follow_shopspring() {
        use Ordering::*;
        for (s, want) in [
            ("1.9", Some(Greater)),
            ("1900", Some(Greater)),
            (".5", Some(Greater)),
            ("1.", Some(Greater)),
            ("+2", Some(Greater)),
            ("1e3", Some(Greater)),
            ("1E-3", Some(Greater)),
            ("-0.1", Some(Less)),
            ("-.5", Some(Less)),
            (".-5", Some(Less)),
            ("0", Some(Equal)),
            ("-0", Some(Equal)),
            ("0.000", Some(Equal)),
            ("123456789012345678901234567890", Some(Greater)),
            ("", None),
            (".", None),
            ("-", None),
            ("xyz", None),
            ("1.2.3", None),
            ("1e", None),
            ("e5", None),
            ("1e5e5", None),
            (" 1", None),
            ("1_000", None),
            ("1e2147483648", None),
            ("1.5e-2147483648", None),
            ("١", None),
        ] {
            assert_eq!(decimal_string_sign(s), want, "{s:?}");
        }
        assert_eq!(IntOrString::Int(-3).decimal_sign(), Some(Less));
    }
}
