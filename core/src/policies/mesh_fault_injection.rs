//! MeshFaultInjection: the typed spec (HTTP aborts, delays and response bandwidth limits per
//! `from`/`to` item) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshfaultinjection/api/v1alpha1/`
//! (`meshfaultinjection.go` for the shape and JSON names, `validator.go` for the rules) and the
//! design in seed 004 (the "Fault Injection policy" MADR). Validation returns every violation,
//! in Kuma's order, with paths rooted at `spec`.
//!
//! Kuma behaviours reproduced on purpose:
//! - when the top-level `targetRef` "includes gateways" (kind `MeshGateway` or `MeshHTTPRoute`,
//!   or `Mesh`/`MeshSubset` whose `proxyTypes` is empty or contains `Gateway`) a non-empty `from`
//!   is rejected as a whole (`spec.from: must not be defined`); otherwise a non-empty `to` is.
//!   So a plain `kind: Mesh` policy with `from` is invalid;
//! - paths put the fault index after the fault kind (`http.delay[1].value`) and the bandwidth
//!   limit is reported as `http.responseBandwidth[i].responseBandwidth`;
//! - missing `httpStatus` counts as `0` (out of range), missing `percentage` as `0` (valid),
//!   missing delay `value` as `0s` (valid), missing `limit` as empty (`must be defined`);
//! - a limit is accepted when it contains `bps` anywhere (Kuma's unanchored regex);
//! - string percentages are parsed like `shopspring/decimal` (`"50.5"`, `"1e2"`, `".5"`);
//! - Go's YAML decoding turns a number given for a string field into a string
//!   (`limit: 1000` → `"1000"`, which then fails the unit check).
//!
//! Seed 004's drafts used `appendAbort` and `disabled`; Kuma 2.7 shipped without them, so they
//! are unknown fields here.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::envelope::{Envelope, Items, Lists};
use super::{lenient, validate_items, validate_top_target_ref};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    in_range, PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_HAVE_BPS_UNIT,
    MUST_NOT_BE_DEFINED, NON_NEGATIVE_WHEN_DEFINED, PERCENTAGE_RANGE, STRING_MUST_BE_NUMBER,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];
/// Kinds allowed in `from[].targetRef`.
const FROM_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshServiceSubset,
    TargetRefKind::MeshService,
];
/// Kinds allowed in `to[].targetRef` (only reachable when the top level includes gateways).
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];

/// MeshFaultInjection spec: which proxies (`targetRef`) and the faults injected into their
/// inbound (`from`) or, for gateways, outbound (`to`) HTTP traffic.
pub type MeshFaultInjection = Envelope<MeshFaultInjectionLists>;

/// What a MeshFaultInjection spec holds: `to` and `from` items of [`Conf`].
#[derive(Debug, Clone, PartialEq)]
pub enum MeshFaultInjectionLists {}

impl Lists for MeshFaultInjectionLists {
    const TYPE: ResourceType = ResourceType::MeshFaultInjection;
    const FROM_FIRST: bool = true;
    type To = Items<Conf>;
    type From = Items<Conf>;
}

/// One `from` or `to` item: a group of clients/destinations and its faults.
pub type Item = super::Item<Conf>;

/// Faults for one group (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// HTTP faults, each applied independently. `None` when absent; `Some(vec![])` (an explicit
    /// `http: []`) is kept because it replaces inherited faults when rules are merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<FaultInjectionConf>>,
}

/// One HTTP fault (Kuma's `FaultInjectionConf`); any combination of the three kinds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultInjectionConf {
    /// Answer a share of requests with a fixed status instead of forwarding them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<AbortConf>,
    /// Delay a share of responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayConf>,
    /// Limit the response bandwidth of a share of requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bandwidth: Option<ResponseBandwidthConf>,
}

/// Abort fault (Kuma's `AbortConf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortConf {
    /// HTTP status returned to the client, `100..=599`. `None` (absent) counts as `0`, as in
    /// Kuma, and is therefore invalid.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i32"
    )]
    pub http_status: Option<i32>,
    /// Share of requests aborted, `0..=100` (`None` counts as `0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<IntOrString>,
}

/// Delay fault (Kuma's `DelayConf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelayConf {
    /// How long responses are delayed; must not be negative (`None` counts as `0s`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::some_duration"
    )]
    pub value: Option<Duration>,
    /// Share of requests delayed, `0..=100` (`None` counts as `0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<IntOrString>,
}

/// Response bandwidth fault (Kuma's `ResponseBandwidthConf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseBandwidthConf {
    /// Limit with a unit: `kbps`, `Mbps` or `Gbps` (e.g. `10kbps`). Numbers are accepted and
    /// turned into strings, like Kuma's YAML decoding does.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub limit: Option<String>,
    /// Share of requests limited, `0..=100` (`None` counts as `0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<IntOrString>,
}

/// Kubernetes' `intstr.IntOrString` as Kuma uses it for percentages: a JSON integer or a string
/// holding a decimal number (`"50.5"`). The variant is kept so a round trip writes the same form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IntOrString {
    /// Written as a JSON number (must fit an `i32`, as in Kuma).
    Int(i32),
    /// Written as a JSON string; validation parses it as a decimal.
    String(String),
}

impl IntOrString {
    /// The value as a decimal, parsed the way Kuma does (`shopspring/decimal`); `None` when a
    /// string does not hold a number.
    pub fn to_decimal(&self) -> Option<GoDecimal> {
        match self {
            IntOrString::Int(i) => Some(GoDecimal::from_int(i64::from(*i))),
            IntOrString::String(s) => GoDecimal::parse(s),
        }
    }

    /// The value as the nearest `f64` (for building Envoy config); `None` when a string does not
    /// hold a number.
    pub fn to_f64(&self) -> Option<f64> {
        self.to_decimal().map(|d| d.to_f64())
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrString::Int(i) => write!(f, "{i}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrString::Int(i) => s.serialize_i32(*i),
            IntOrString::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string holding a decimal number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrString, E> {
                lenient::int32(v).map(IntOrString::Int)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrString, E> {
                lenient::uint32(v).map(IntOrString::Int)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<IntOrString, E> {
                lenient::float_int32(v).map(IntOrString::Int)
            }
        }
        d.deserialize_any(V)
    }
}

/// A decimal number `mantissa × 10^exponent`, parsed with the grammar of `shopspring/decimal`'s
/// `NewFromString` (the library Kuma uses for string percentages): an optional sign, digits with
/// at most one `.` anywhere, and an optional `e`/`E` exponent that fits 32 bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDecimal {
    negative: bool,
    /// Significant digits without leading zeros (empty for zero).
    digits: String,
    exponent: i64,
}

impl GoDecimal {
    /// An integer value.
    pub fn from_int(i: i64) -> Self {
        Self::normalized(i < 0, &i.unsigned_abs().to_string(), 0)
    }

    /// Parse like `decimal.NewFromString`; `None` where it returns an error.
    pub fn parse(s: &str) -> Option<Self> {
        let (mantissa, mut exponent) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], i64::from(parse_go_int32(&s[i + 1..])?)),
            None => (s, 0),
        };
        let mut parts = mantissa.splitn(3, '.');
        let int_part = parts.next().unwrap_or_default();
        let frac_part = parts.next();
        if parts.next().is_some() {
            return None; // "too many .s"
        }
        let mut int_string = int_part.to_owned();
        if let Some(frac) = frac_part {
            int_string.push_str(frac);
            exponent -= i64::try_from(frac.len()).ok()?;
        }
        // Go's ParseInt / big.Int.SetString in base 10: optional sign, then at least one digit.
        let (negative, digits) = match int_string.as_bytes().first() {
            Some(b'-') => (true, &int_string[1..]),
            Some(b'+') => (false, &int_string[1..]),
            _ => (false, int_string.as_str()),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if i32::try_from(exponent).is_err() {
            return None; // "fractional part too long"
        }
        Some(Self::normalized(negative, digits, exponent))
    }

    fn normalized(negative: bool, digits: &str, exponent: i64) -> Self {
        let digits = digits.trim_start_matches('0');
        Self {
            negative: negative && !digits.is_empty(),
            digits: digits.to_owned(),
            exponent,
        }
    }

    /// `true` for zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// `true` below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Compare with an integer, exactly.
    pub fn cmp_int(&self, other: i64) -> Ordering {
        let other = GoDecimal::from_int(other);
        match (self.negative, other.negative) {
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let magnitude = cmp_magnitude(self, &other);
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// The nearest `f64`.
    pub fn to_f64(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{}e{}", self.digits, self.exponent)
            .parse()
            .unwrap_or(0.0)
    }
}

/// Compare `|a|` and `|b|` without materialising huge exponents.
fn cmp_magnitude(a: &GoDecimal, b: &GoDecimal) -> Ordering {
    match (a.is_zero(), b.is_zero()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // Position of the leading digit: value is in [10^(p-1), 10^p).
    let lead = |d: &GoDecimal| i128::from(d.exponent) + d.digits.len() as i128;
    match lead(a).cmp(&lead(b)) {
        Ordering::Equal => {}
        other => return other,
    }
    let (ad, bd) = (a.digits.as_bytes(), b.digits.as_bytes());
    for i in 0..ad.len().max(bd.len()) {
        let x = ad.get(i).copied().unwrap_or(b'0');
        let y = bd.get(i).copied().unwrap_or(b'0');
        match x.cmp(&y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    Ordering::Equal
}

/// Go's `strconv.ParseInt(s, 10, 32)`.
fn parse_go_int32(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl MeshFaultInjection {
    /// Kuma 2.7's MeshFaultInjection validation: every violation, paths rooted at `spec`
    /// (`spec.from[0].default.http.abort[0].httpStatus`). Empty means valid.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        let gateways = self.target_ref.includes_gateways();
        for (field, items, forbidden, kinds) in [
            ("from", self.from_items(), gateways, FROM_KINDS),
            ("to", self.to_items(), !gateways, TO_KINDS),
        ] {
            let path = spec.field(field);
            // A forbidden list is rejected as a whole; its items are not looked at.
            if forbidden && !items.is_empty() {
                err.violation(&path, MUST_NOT_BE_DEFINED);
                continue;
            }
            validate_items(&mut err, &path, items, kinds, |err, path, conf| {
                if let Some(conf) = conf {
                    validate_conf(err, path, conf);
                }
            });
        }
        err
    }
}

/// Kuma's `validateDefault`: the index goes after the fault kind (`http.delay[1].value`).
fn validate_conf(err: &mut ValidationError, path: &PathBuilder, conf: &Conf) {
    let http = path.field("http");
    for (i, fault) in conf.http.iter().flatten().enumerate() {
        if let Some(abort) = &fault.abort {
            let path = http.field("abort").index(i);
            let status = abort.http_status.unwrap_or(0);
            if !(100..600).contains(&status) {
                err.violation(&path.field("httpStatus"), in_range(100, 599));
            }
            validate_percentage(err, &path.field("percentage"), abort.percentage.as_ref());
        }
        if let Some(delay) = &fault.delay {
            let path = http.field("delay").index(i);
            if delay.value.as_ref().is_some_and(Duration::is_negative) {
                err.violation(&path.field("value"), NON_NEGATIVE_WHEN_DEFINED);
            }
            validate_percentage(err, &path.field("percentage"), delay.percentage.as_ref());
        }
        if let Some(bandwidth) = &fault.response_bandwidth {
            let path = http.field("responseBandwidth").index(i);
            validate_bandwidth(
                err,
                &path.field("responseBandwidth"),
                bandwidth.limit.as_deref().unwrap_or_default(),
            );
            validate_percentage(
                err,
                &path.field("percentage"),
                bandwidth.percentage.as_ref(),
            );
        }
    }
}

/// Kuma's `ValidatePercentage` with zero allowed; an absent value is Go's zero value, `0`.
pub(crate) fn validate_percentage(
    err: &mut ValidationError,
    path: &PathBuilder,
    p: Option<&IntOrString>,
) {
    let Some(p) = p else { return };
    match p.to_decimal() {
        None => err.violation(path, STRING_MUST_BE_NUMBER),
        Some(d) if d.is_negative() || d.cmp_int(100) == Ordering::Greater => {
            err.violation(path, PERCENTAGE_RANGE);
        }
        Some(_) => {}
    }
}

/// Kuma's `ValidateBandwidth`: its regex `(\d*)\s?([GMk]?bps)` is unanchored, so any value
/// containing `bps` passes.
fn validate_bandwidth(err: &mut ValidationError, path: &PathBuilder, limit: &str) {
    if limit.is_empty() {
        err.violation(path, MUST_BE_DEFINED);
    } else if !limit.contains("bps") {
        err.violation(path, MUST_HAVE_BPS_UNIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{
        assert_round_trip, bare_violations, resource, v, yaml_value,
    };
    use crate::resource::{Resource, Spec};
    use crate::validate::Violation;

    fn spec_of(r: &Resource) -> &MeshFaultInjection {
        match &r.spec {
            Spec::MeshFaultInjection(s) => s,
            other => panic!("not a MeshFaultInjection: {other:?}"),
        }
    }

    /// Validate a spec given as YAML (just the `spec` content, like Kuma's tests).
    fn violations(spec_yaml: &str) -> Vec<(String, String)> {
        bare_violations::<MeshFaultInjection>(spec_yaml)
    }

    const VALID: &str = r#"
type: MeshFaultInjection
mesh: mesh-1
name: fi1
spec:
  targetRef:
    kind: MeshService
    name: backend
  from:
    - targetRef:
        kind: MeshService
        name: web-backend
      default:
        http:
          - abort:
              httpStatus: 503
              percentage: 50
            delay:
              value: 10s
              percentage: 5
          - delay:
              value: 5s
              percentage: 5
          - responseBandwidth:
              limit: 100mbps
              percentage: 5
          - abort:
              httpStatus: 500
              percentage: "50.5"
"#;

    #[test]
    fn accepts_valid_resource_and_round_trips() {
        let r = resource(VALID);
        assert_eq!(r.validate(), ValidationError::new());
        let spec = spec_of(&r);
        let http = spec.from_items()[0]
            .default
            .as_ref()
            .and_then(|c| c.http.as_ref())
            .unwrap();
        assert_eq!(http.len(), 4);
        assert_eq!(
            http[0].abort.as_ref().unwrap().percentage,
            Some(IntOrString::Int(50))
        );
        assert_eq!(
            http[3].abort.as_ref().unwrap().percentage,
            Some(IntOrString::String("50.5".into()))
        );
        assert_eq!(http[3].abort.as_ref().unwrap().http_status, Some(500));
        assert_round_trip(VALID);
    }

    #[test]
    fn empty_faults_and_gateway_to_round_trip() {
        let empty = "type: MeshFaultInjection\nmesh: m\nname: a\nspec:\n  targetRef:\n    kind: MeshService\n    name: backend\n  from:\n    - targetRef:\n        kind: MeshService\n        name: web-backend\n      default:\n        http: []\n";
        assert!(resource(empty).validate_spec().violations.is_empty());
        assert_round_trip(empty);
        let gw = "type: MeshFaultInjection\nmesh: m\nname: b\nspec:\n  targetRef:\n    kind: Mesh\n    proxyTypes: [Gateway]\n  to:\n    - targetRef:\n        kind: Mesh\n      default:\n        http: []\n";
        assert!(resource(gw).validate_spec().violations.is_empty());
        assert_round_trip(gw);
    }

    #[test]
    fn incorrect_values() {
        let got = violations(
            r#"
targetRef:
  kind: MeshService
  name: backend
from:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      http:
      - abort:
          httpStatus: 677
          percentage: 111
      - delay:
          value: -5s
          percentage: 1111
      - responseBandwidth:
          limit: 1000
          percentage: 1111
"#,
        );
        let p = "spec.from[0].default.http";
        assert_eq!(
            got,
            vec![
                v(
                    &format!("{p}.abort[0].httpStatus"),
                    "must be in inclusive range [100, 599]"
                ),
                v(&format!("{p}.abort[0].percentage"), PERCENTAGE_RANGE),
                v(&format!("{p}.delay[1].value"), NON_NEGATIVE_WHEN_DEFINED),
                v(&format!("{p}.delay[1].percentage"), PERCENTAGE_RANGE),
                v(
                    &format!("{p}.responseBandwidth[2].responseBandwidth"),
                    MUST_HAVE_BPS_UNIT
                ),
                v(
                    &format!("{p}.responseBandwidth[2].percentage"),
                    PERCENTAGE_RANGE
                ),
            ]
        );
    }

    #[test]
    fn empty_values_use_go_zero_values() {
        let got = violations(
            r#"
targetRef:
  kind: MeshService
  name: backend
from:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      http:
      - abort: {}
      - delay: {}
      - responseBandwidth:
          limit: 1000
      - responseBandwidth: {}
"#,
        );
        let p = "spec.from[0].default.http";
        assert_eq!(
            got,
            vec![
                v(
                    &format!("{p}.abort[0].httpStatus"),
                    "must be in inclusive range [100, 599]"
                ),
                v(
                    &format!("{p}.responseBandwidth[2].responseBandwidth"),
                    MUST_HAVE_BPS_UNIT
                ),
                v(
                    &format!("{p}.responseBandwidth[3].responseBandwidth"),
                    MUST_BE_DEFINED
                ),
            ]
        );
    }

    #[test]
    fn incorrect_value_in_percentage() {
        let got = violations(
            "targetRef:\n  kind: MeshService\n  name: backend\nfrom:\n  - targetRef:\n      kind: MeshService\n      name: web-backend\n    default:\n      http:\n      - responseBandwidth:\n          limit: 1000\n          percentage: \"xyz\"",
        );
        assert_eq!(
            got,
            vec![
                v(
                    "spec.from[0].default.http.responseBandwidth[0].responseBandwidth",
                    MUST_HAVE_BPS_UNIT
                ),
                v(
                    "spec.from[0].default.http.responseBandwidth[0].percentage",
                    STRING_MUST_BE_NUMBER
                ),
            ]
        );
    }

    #[test]
    fn mesh_gateway_rejects_from_and_narrows_to() {
        let got = violations(
            r#"
targetRef:
  kind: MeshGateway
  name: edge
to:
  - targetRef:
      kind: Mesh
    default:
      http:
      - abort:
          httpStatus: 503
          percentage: 50
  - targetRef:
      kind: MeshService
      name: backend
    default:
      http:
      - abort:
          httpStatus: 503
          percentage: 50
from:
  - targetRef:
      kind: Mesh
    default:
      http:
      - abort:
          httpStatus: 503
          percentage: 50
"#,
        );
        assert_eq!(
            got,
            vec![
                v("spec.from", MUST_NOT_BE_DEFINED),
                v("spec.to[1].targetRef.kind", "value is not supported"),
            ]
        );
    }

    #[test]
    fn includes_gateways_quirk() {
        // A plain `kind: Mesh` includes gateways, so `from` is rejected and its items are not
        // looked at.
        let from = "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Foo\n";
        assert_eq!(violations(from), vec![v("spec.from", MUST_NOT_BE_DEFINED)]);
        // Sidecar-only Mesh: `from` allowed, `to` rejected.
        let sidecar = "targetRef:\n  kind: Mesh\n  proxyTypes: [Sidecar]\nfrom:\n  - targetRef:\n      kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n";
        assert_eq!(violations(sidecar), vec![v("spec.to", MUST_NOT_BE_DEFINED)]);
        // MeshSubset with both proxy types includes gateways.
        let subset = "targetRef:\n  kind: MeshSubset\n  proxyTypes: [Sidecar, Gateway]\n  tags:\n    a: b\nfrom:\n  - targetRef:\n      kind: Mesh\n";
        assert_eq!(
            violations(subset),
            vec![v("spec.from", MUST_NOT_BE_DEFINED)]
        );
        // Empty lists are fine either way.
        let empty = "targetRef:\n  kind: MeshService\n  name: a\nfrom: []\nto: []\n";
        assert!(violations(empty).is_empty());
    }

    #[test]
    fn target_ref_kinds() {
        let top = "targetRef:\n  kind: MeshHTTPRoute\n  name: r\n";
        assert_eq!(
            violations(top),
            vec![v("spec.targetRef.kind", "value is not supported")]
        );
        let from = "targetRef:\n  kind: MeshService\n  name: a\nfrom:\n  - targetRef:\n      kind: MeshGateway\n      name: g\n  - targetRef:\n      kind: MeshServiceSubset\n      name: b\n      tags:\n        version: v1\n";
        assert_eq!(
            violations(from),
            vec![v("spec.from[0].targetRef.kind", "value is not supported")]
        );
        // Listener tags are allowed on a top-level MeshGateway.
        let gw = "targetRef:\n  kind: MeshGateway\n  name: g\n  tags:\n    port: '80'\n";
        assert!(violations(gw).is_empty());
    }

    #[test]
    fn percentages_and_status_edges() {
        let spec = |fault: &str| {
            format!("targetRef:\n  kind: MeshService\n  name: a\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      http:\n      - {fault}\n")
        };
        for ok in [
            "abort: {httpStatus: 100, percentage: 0}",
            "abort: {httpStatus: 599, percentage: 100}",
            "abort: {httpStatus: 503, percentage: '100.000'}",
            "abort: {httpStatus: 503, percentage: '1e2'}",
            "abort: {httpStatus: 503, percentage: '.5'}",
            "abort: {httpStatus: 503, percentage: '5.'}",
            "abort: {httpStatus: 503, percentage: '-0'}",
            "abort: {httpStatus: 503.0, percentage: 50.0}",
            "delay: {value: 0s}",
            "responseBandwidth: {limit: 10kbps}",
            "responseBandwidth: {limit: '50 mbps'}",
            "responseBandwidth: {limit: 'whatever bps'}",
        ] {
            assert!(violations(&spec(ok)).is_empty(), "{ok}");
        }
        let at = |f: &str| format!("spec.from[0].default.http.{f}");
        for (bad, field, msg) in [
            (
                "abort: {httpStatus: 99, percentage: 1}",
                at("abort[0].httpStatus"),
                "must be in inclusive range [100, 599]",
            ),
            (
                "abort: {httpStatus: 600, percentage: 1}",
                at("abort[0].httpStatus"),
                "must be in inclusive range [100, 599]",
            ),
            (
                "abort: {httpStatus: 503, percentage: -1}",
                at("abort[0].percentage"),
                PERCENTAGE_RANGE,
            ),
            (
                "abort: {httpStatus: 503, percentage: '100.0001'}",
                at("abort[0].percentage"),
                PERCENTAGE_RANGE,
            ),
            (
                "abort: {httpStatus: 503, percentage: '1.01e2'}",
                at("abort[0].percentage"),
                PERCENTAGE_RANGE,
            ),
            (
                "abort: {httpStatus: 503, percentage: ''}",
                at("abort[0].percentage"),
                STRING_MUST_BE_NUMBER,
            ),
            (
                "abort: {httpStatus: 503, percentage: '1.2.3'}",
                at("abort[0].percentage"),
                STRING_MUST_BE_NUMBER,
            ),
            (
                "abort: {httpStatus: 503, percentage: ' 5'}",
                at("abort[0].percentage"),
                STRING_MUST_BE_NUMBER,
            ),
            (
                "delay: {value: -1ms, percentage: '50%'}",
                at("delay[0].value"),
                NON_NEGATIVE_WHEN_DEFINED,
            ),
            (
                "responseBandwidth: {limit: 10kb}",
                at("responseBandwidth[0].responseBandwidth"),
                MUST_HAVE_BPS_UNIT,
            ),
        ] {
            let got = violations(&spec(bad));
            assert_eq!(got.first(), Some(&v(&field, msg)), "{bad}: {got:?}");
        }
    }

    #[test]
    fn go_decimal_grammar() {
        for (s, ok) in [
            ("50", true),
            ("+50", true),
            ("-5", true),
            ("50.5", true),
            (".5", true),
            ("5.", true),
            ("1e2", true),
            ("1E-2", true),
            ("1.5e+1", true),
            ("", false),
            (".", false),
            ("-", false),
            ("e5", false),
            ("1e", false),
            ("1e2e3", false),
            ("1_000", false),
            ("0x10", false),
            ("1e99999999999", false),
            ("NaN", false),
        ] {
            assert_eq!(GoDecimal::parse(s).is_some(), ok, "{s}");
        }
        let d = |s: &str| GoDecimal::parse(s).unwrap();
        assert_eq!(d("100").cmp_int(100), Ordering::Equal);
        assert_eq!(d("1e2").cmp_int(100), Ordering::Equal);
        assert_eq!(d("0.1e3").cmp_int(100), Ordering::Equal);
        assert_eq!(d("100.0000001").cmp_int(100), Ordering::Greater);
        assert_eq!(d("99.99").cmp_int(100), Ordering::Less);
        assert_eq!(d("-0.0").cmp_int(0), Ordering::Equal);
        assert_eq!(d("-1e-9").cmp_int(0), Ordering::Less);
        assert_eq!(d("1e-2147483648").cmp_int(0), Ordering::Greater);
        assert_eq!(d("50.5").to_f64(), 50.5);
        assert_eq!(IntOrString::Int(7).to_f64(), Some(7.0));
    }

    #[test]
    fn lenient_scalars_follow_go() {
        let spec = "targetRef: {kind: Mesh, proxyTypes: [Sidecar]}\nfrom:\n- targetRef: {kind: Mesh}\n  default:\n    http:\n    - responseBandwidth: {limit: 1.5}\n    - responseBandwidth: {limit: true}\n";
        let mfi: MeshFaultInjection = serde_json::from_value(yaml_value(spec)).unwrap();
        let http = mfi.from_items()[0]
            .default
            .as_ref()
            .unwrap()
            .http
            .as_ref()
            .unwrap();
        assert_eq!(
            http[0]
                .response_bandwidth
                .as_ref()
                .unwrap()
                .limit
                .as_deref(),
            Some("1.5")
        );
        assert_eq!(
            http[1]
                .response_bandwidth
                .as_ref()
                .unwrap()
                .limit
                .as_deref(),
            Some("true")
        );
    }

    #[test]
    fn decode_rejects_what_kuma_cannot_decode_and_unknown_fields() {
        let bad = |fault: &str| {
            let spec = format!("targetRef: {{kind: MeshService, name: a}}\nfrom:\n- targetRef: {{kind: Mesh}}\n  default:\n    http:\n    - {fault}\n");
            serde_json::from_value::<MeshFaultInjection>(yaml_value(&spec)).is_err()
        };
        assert!(bad("abort: {httpStatus: 503, percentage: 50.5}"));
        assert!(bad("abort: {httpStatus: '503'}"));
        assert!(bad("abort: {httpStatus: 5000000000}"));
        assert!(bad("abort: {percentage: true}"));
        assert!(bad("delay: {value: 5}"));
        assert!(bad("delay: {value: null}"));
        assert!(bad("delay: {value: 5days}"));
        assert!(bad("appendAbort: {httpStatus: 500}"));
        assert!(!bad("abort: {httpStatus: null, percentage: null}"));
    }

    #[test]
    fn missing_target_refs_are_go_zero_values() {
        assert_eq!(
            violations("from:\n  - default: {}\n"),
            vec![
                v("spec.targetRef.kind", MUST_BE_DEFINED),
                v("spec.from[0].targetRef.kind", MUST_BE_DEFINED),
            ]
        );
        assert_eq!(
            violations("targetRef: {kind: MeshService, name: a}\nfrom:\n  - default: {}\n"),
            vec![v("spec.from[0].targetRef.kind", MUST_BE_DEFINED)]
        );
    }

    proptest::proptest! {
        #[test]
        fn decimal_parse_never_panics_and_agrees_with_f64(s in "[-+]?[0-9]{0,4}[.]?[0-9]{0,4}([eE][-+]?[0-9]{0,2})?") {
            if let Some(d) = GoDecimal::parse(&s) {
                let f = d.to_f64();
                proptest::prop_assert_eq!(d.cmp_int(100) == Ordering::Greater, f > 100.0);
                proptest::prop_assert_eq!(d.is_negative(), f < 0.0);
            }
        }

        #[test]
        fn decimal_parse_any_text(s in "(?s).{0,24}") {
            let _ = GoDecimal::parse(&s);
        }
    }

    #[test]
    fn seed_004_examples() {
        // "All services to one service": `from` a Mesh carrying a name.
        let all = r#"
type: MeshFaultInjection
mesh: default
name: default-fault-injection
spec:
  targetRef:
    kind: MeshService
    name: backend
  from:
    - targetRef:
        kind: Mesh
        name: default
      default:
        http:
          delay:
            percentage: "50.5"
            value: 5s
"#;
        // The draft wrote `http` as a single object; Kuma 2.7 wants a list.
        assert!(Resource::from_bytes(all.as_bytes()).is_err());
        let fixed = all
            .replace("          delay:", "          - delay:")
            .replace(
                "            percentage: \"50.5\"\n            value: 5s",
                "              percentage: \"50.5\"\n              value: 5s",
            );
        let r = resource(&fixed);
        assert_eq!(
            r.validate_spec().violations,
            vec![Violation {
                field: "spec.from[0].targetRef.name".into(),
                message: "using name with kind Mesh is not yet supported".into(),
            }]
        );
        assert_round_trip(&fixed);

        // "Requests to one service failing": `to` under a sidecar-only target is rejected.
        let to = r#"
type: MeshFaultInjection
mesh: default
name: default-fault-injection
spec:
  targetRef:
    kind: MeshService
    name: backend
  to:
    - targetRef:
        kind: MeshService
        name: backend2
      default:
        http:
          - abort:
              httpStatus: 500
              percentage: "50"
"#;
        let r = resource(to);
        assert_eq!(
            r.validate_spec().violations,
            vec![Violation {
                field: "spec.to".into(),
                message: MUST_NOT_BE_DEFINED.into(),
            }]
        );
        assert_round_trip(to);

        // `appendAbort` from the draft did not ship.
        let append = "type: MeshFaultInjection\nmesh: default\nname: x\nspec:\n  targetRef:\n    kind: MeshService\n    name: backend\n  from:\n    - targetRef:\n        kind: MeshService\n        name: frontend\n      default:\n        http:\n          appendAbort:\n            httpStatus: 500\n            percentage: \"50\"\n";
        assert!(Resource::from_bytes(append.as_bytes()).is_err());
    }
}
