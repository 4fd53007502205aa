//! CircuitBreaker to MeshCircuitBreaker.
//!
//! The mapping follows the transition MADR (seed 000, "CircuitBreaker -> MeshCircuitBreaker",
//! whose example converts with an empty diff) and what Umbra generates for each policy
//! (`xds/src/plugins/circuit_breaker.rs`, after Kuma 2.7's circuit breaker and outlier detection
//! configurers and its `meshcircuitbreaker` plugin):
//!
//! - `sources[i]` (the proxies whose outbound clusters are configured) become the top-level
//!   `targetRef` of one MeshCircuitBreaker each (`<name>-<i+1>` when there are several);
//!   `destinations` become `to` items (`MeshService`, or `Mesh` for `kuma.io/service: '*'`);
//! - `conf.thresholds` → `connectionLimits` (same four fields), only when one is set, as the old
//!   policy then leaves `circuitBreakers` alone;
//! - `interval`, `baseEjectionTime`, `maxEjectionPercent`, `splitExternalAndLocalErrors` →
//!   `outlierDetection.*`; `detectors.totalErrors`/`gatewayErrors`/`localErrors` →
//!   `totalFailures`/`gatewayFailures`/`localOriginFailures`; `standardDeviation` →
//!   `successRate` (`factor` → `standardDeviationFactor`); `failure` → `failurePercentage`;
//! - the old policy always replaces `outlierDetection`, so it is always written: a consecutive
//!   detector without a count (enforced by the old policy with Envoy's default of 5) gets
//!   `consecutive: 5`; a CircuitBreaker without detectors (all unenforced) becomes
//!   `detectors: {totalFailures: {}}`, a detector without a count, which MeshCircuitBreaker
//!   does not enforce either; the factor is written as the thousandths Kuma computed from the
//!   float (`uint32(factor * 1000)`), so Envoy gets the same `successRateStdevFactor`.
//!
//! What stays different is reported as [`Note`]s: the local-origin enforcings MeshCircuitBreaker
//! sets to 0 where the old policy left Envoy's default, counts written out, and the precedence
//! (old: the most specific CircuitBreaker whole; new: merged by top-level kind, then name).

use serde_json::{json, Map, Value};

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::old::circuit_breaker::{CircuitBreakerConf, Errors};
use crate::resource::{ResourceType, Spec};

/// Envoy's default count of a consecutive outlier detector.
const ENVOY_DEFAULT_CONSECUTIVE: u32 = 5;

/// Convert a CircuitBreaker to MeshCircuitBreakers.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf`, sources or destinations;
/// [`ConvertError::Invalid`] when a value MeshCircuitBreaker rejects (a zero limit or
/// duration, a non-positive factor) is carried over.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::CircuitBreaker(cb) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a CircuitBreaker"));
    };
    let Some(conf) = &cb.conf else {
        return Err(ctx.empty("conf is not set: the CircuitBreaker configures nothing"));
    };
    if cb.sources.is_empty() || cb.destinations.is_empty() {
        return Err(
            ctx.empty("a CircuitBreaker without sources or destinations selects no traffic")
        );
    }
    let mut notes = Vec::new();
    let default = to_default(conf, &mut notes);

    let to = selectors::items(
        &cb.destinations,
        "destinations",
        selectors::service_or_mesh,
        &default,
        &mut notes,
    );
    let targets = selectors::distinct_targets(&cb.sources, "sources", &mut notes);
    notes.push(Note::new(
        NoteKind::Semantics,
        "sources",
        "Kuma applies the single most specific CircuitBreaker per outbound service, whole (selector rank, then newest); MeshCircuitBreakers merge field by field (top-level targetRef kind, then name, the lexically smallest name last and winning): a field this policy leaves unset (a connection limit, a detector) is taken from a broader MeshCircuitBreaker instead of Envoy's default, and which policy wins depends on the top-level kinds and the names",
    ));

    let outputs = ctx.output_per_target(
        ResourceType::MeshCircuitBreaker,
        &targets,
        |target| json!({"targetRef": target, "to": to}),
    )?;
    Ok((outputs, notes))
}

/// The `to` default of `conf`, pushing the notes of what differs.
fn to_default(conf: &CircuitBreakerConf, notes: &mut Vec<Note>) -> Value {
    let mut default = Map::new();
    if let Some(t) = conf.thresholds.as_ref().filter(|t| t.any()) {
        let mut limits = Map::new();
        for (field, value) in [
            ("maxConnections", t.max_connections),
            ("maxPendingRequests", t.max_pending_requests),
            ("maxRequests", t.max_requests),
            ("maxRetries", t.max_retries),
        ] {
            if let Some(v) = value {
                limits.insert(field.to_owned(), json!(v));
            }
        }
        default.insert("connectionLimits".to_owned(), Value::Object(limits));
    }

    let mut od = Map::new();
    if let Some(v) = &conf.interval {
        od.insert("interval".to_owned(), json!(v.as_str()));
    }
    if let Some(v) = &conf.base_ejection_time {
        od.insert("baseEjectionTime".to_owned(), json!(v.as_str()));
    }
    if let Some(v) = conf.max_ejection_percent {
        od.insert("maxEjectionPercent".to_owned(), json!(v));
    }
    if let Some(v) = conf.split_external_and_local_errors {
        od.insert("splitExternalAndLocalErrors".to_owned(), json!(v));
    }

    let mut detectors = Map::new();
    let d = conf.detectors.as_ref();
    for (old, new, envoy, value) in [
        (
            "totalErrors",
            "totalFailures",
            "consecutive5xx",
            d.and_then(|d| d.total_errors.as_ref()),
        ),
        (
            "gatewayErrors",
            "gatewayFailures",
            "consecutiveGatewayFailure",
            d.and_then(|d| d.gateway_errors.as_ref()),
        ),
        (
            "localErrors",
            "localOriginFailures",
            "consecutiveLocalOriginFailure",
            d.and_then(|d| d.local_errors.as_ref()),
        ),
    ] {
        if let Some(e) = value {
            detectors.insert(new.to_owned(), consecutive(old, envoy, e, notes));
        }
    }
    match d.and_then(|d| d.standard_deviation.as_ref()) {
        Some(s) => {
            let mut sr = Map::new();
            if let Some(v) = s.request_volume {
                sr.insert("requestVolume".to_owned(), json!(v));
            }
            if let Some(v) = s.minimum_hosts {
                sr.insert("minimumHosts".to_owned(), json!(v));
            }
            if let Some(f) = s.factor {
                sr.insert(
                    "standardDeviationFactor".to_owned(),
                    json!(factor(f, notes)),
                );
            }
            detectors.insert("successRate".to_owned(), Value::Object(sr));
        }
        None => notes.push(
            Note::new(
                NoteKind::Default,
                "conf.detectors.standardDeviation",
                "without a success rate detector MeshCircuitBreaker sets enforcingLocalOriginSuccessRate to 0 where the old CircuitBreaker left Envoy's default (100); it only matters with splitExternalAndLocalErrors",
            )
            .affecting(&["enforcingLocalOriginSuccessRate"]),
        ),
    }
    match d.and_then(|d| d.failure.as_ref()) {
        Some(f) => {
            let mut fp = Map::new();
            if let Some(v) = f.request_volume {
                fp.insert("requestVolume".to_owned(), json!(v));
            }
            if let Some(v) = f.minimum_hosts {
                fp.insert("minimumHosts".to_owned(), json!(v));
            }
            if let Some(v) = f.threshold {
                fp.insert("threshold".to_owned(), json!(v));
            }
            detectors.insert("failurePercentage".to_owned(), Value::Object(fp));
        }
        None => notes.push(
            Note::new(
                NoteKind::Default,
                "conf.detectors.failure",
                "without a failure percentage detector MeshCircuitBreaker sets enforcingFailurePercentageLocalOrigin to 0 where the old CircuitBreaker left Envoy's default (100); it only matters with splitExternalAndLocalErrors",
            )
            .affecting(&["enforcingFailurePercentageLocalOrigin"]),
        ),
    }
    if detectors.is_empty() {
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf.detectors",
            "the CircuitBreaker has no detector, yet Kuma still replaces the cluster's outlierDetection with every detector unenforced; MeshCircuitBreaker requires a detector, so it is written as `totalFailures: {}` (no count: not enforced either)",
        ));
        detectors.insert("totalFailures".to_owned(), json!({}));
    }
    od.insert("detectors".to_owned(), Value::Object(detectors));
    default.insert("outlierDetection".to_owned(), Value::Object(od));
    Value::Object(default)
}

/// A consecutive detector: its count, Envoy's default when the old one has none.
fn consecutive(old: &str, envoy: &str, e: &Errors, notes: &mut Vec<Note>) -> Value {
    match e.consecutive {
        Some(c) => json!({"consecutive": c}),
        None => {
            notes.push(
                Note::new(
                    NoteKind::Default,
                    format!("conf.detectors.{old}.consecutive"),
                    format!(
                        "unset: the old CircuitBreaker enforced the detector with Envoy's default count; MeshCircuitBreaker only enforces a detector with a count, so it is written as {ENVOY_DEFAULT_CONSECUTIVE} and {envoy} appears in the cluster (same behaviour)"
                    ),
                )
                .affecting(&[envoy]),
            );
            json!({"consecutive": ENVOY_DEFAULT_CONSECUTIVE})
        }
    }
}

/// `factor` as the decimal of Kuma's `uint32(factor * 1000)` thousandths, so the new policy's
/// exact decimal arithmetic gives the same `successRateStdevFactor`.
fn factor(f: f64, notes: &mut Vec<Note>) -> String {
    let millis = go_f64_to_u32(f * 1000.0);
    let mut s = format!("{}.{:03}", millis / 1000, millis % 1000);
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    if s.parse::<f64>().ok() != Some(f) {
        notes.push(Note::new(
            NoteKind::Semantics,
            "conf.detectors.standardDeviation.factor",
            format!(
                "written as {s}: Kuma turns {f} into {millis} thousandths with float arithmetic, MeshCircuitBreaker computes the decimal exactly; {s} gives Envoy the same successRateStdevFactor"
            ),
        ));
    }
    s
}

/// Go's `uint32(x)` for a `float64` as the amd64 compiler emits it (truncation to `int64`, whose
/// out-of-range and NaN result is `i64::MIN`, then the low 32 bits): what Kuma computes.
fn go_f64_to_u32(x: f64) -> u32 {
    // 2^63 as f64; `as` is exact for these bounds.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let i = if (-LIMIT..LIMIT).contains(&x) {
        x.trunc() as i64
    } else {
        i64::MIN
    };
    i as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{self, affects, names, policy, ANY_TO_ANY};
    use crate::convert::Conversion;

    /// The conversion of the CircuitBreaker `cb` with `body` (selectors and conf).
    fn conv(body: &str) -> Result<Conversion, ConvertError> {
        testing::convert(&policy("CircuitBreaker", "cb", body))
    }

    fn ok(body: &str) -> Conversion {
        conv(body).unwrap()
    }

    /// The seed 000 example.
    const SEED: &str = "
type: CircuitBreaker
mesh: default
name: circuit-breaker-example
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
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
";

    #[test]
    fn the_seed_example_converts_to_the_seed_replacement() {
        let c = testing::ok(SEED);
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshCircuitBreaker);
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({
                "targetRef": {"kind": "Mesh"},
                "to": [{
                    "targetRef": {"kind": "Mesh"},
                    "default": {
                        "connectionLimits": {
                            "maxConnections": 24,
                            "maxPendingRequests": 25,
                            "maxRequests": 26,
                            "maxRetries": 27,
                        },
                        "outlierDetection": {
                            "interval": "21s",
                            "baseEjectionTime": "22s",
                            "maxEjectionPercent": 23,
                            "splitExternalAndLocalErrors": false,
                            "detectors": {
                                "totalFailures": {"consecutive": 28},
                                "gatewayFailures": {"consecutive": 29},
                                "localOriginFailures": {"consecutive": 30},
                                "successRate": {
                                    "requestVolume": 31,
                                    "minimumHosts": 32,
                                    "standardDeviationFactor": "1.33",
                                },
                                "failurePercentage": {
                                    "requestVolume": 34,
                                    "minimumHosts": 35,
                                    "threshold": 36,
                                },
                            },
                        },
                    },
                }],
            })
        );
        // Only the precedence note: the config is the same.
        assert_eq!(c.notes.len(), 1);
        assert_eq!(c.notes[0].kind, NoteKind::Semantics);
        assert!(c.notes[0].affects.is_empty());
    }

    #[test]
    fn thresholds_only_still_replace_outlier_detection() {
        let c = ok(&format!(
            "{}conf:\n  thresholds:\n    maxConnections: 3\n",
            testing::WEB_TO_BACKEND
        ));
        let spec = c.outputs[0].spec_value();
        assert_eq!(
            spec["targetRef"],
            json!({"kind": "MeshService", "name": "web"})
        );
        assert_eq!(
            spec["to"][0],
            json!({
                "targetRef": {"kind": "MeshService", "name": "backend"},
                "default": {
                    "connectionLimits": {"maxConnections": 3},
                    "outlierDetection": {"detectors": {"totalFailures": {}}},
                },
            })
        );
        assert_eq!(
            affects(&c),
            [
                (
                    "conf.detectors.standardDeviation",
                    vec!["enforcingLocalOriginSuccessRate".to_owned()]
                ),
                (
                    "conf.detectors.failure",
                    vec!["enforcingFailurePercentageLocalOrigin".to_owned()]
                ),
            ]
        );
        assert!(c
            .notes
            .iter()
            .any(|n| n.field == "conf.detectors" && n.kind == NoteKind::Semantics));
    }

    #[test]
    fn detectors_without_counts_get_envoys_default() {
        let c = ok(&format!(
            "{ANY_TO_ANY}conf:
  detectors:
    totalErrors: {{}}
    gatewayErrors: {{}}
    localErrors:
      consecutive: 2
    standardDeviation: {{}}
    failure: {{}}
"
        ));
        let d = &c.outputs[0].spec_value()["to"][0]["default"];
        assert!(d.get("connectionLimits").is_none());
        assert_eq!(
            d["outlierDetection"]["detectors"],
            json!({
                "totalFailures": {"consecutive": 5},
                "gatewayFailures": {"consecutive": 5},
                "localOriginFailures": {"consecutive": 2},
                "successRate": {},
                "failurePercentage": {},
            })
        );
        assert_eq!(
            affects(&c),
            [
                (
                    "conf.detectors.totalErrors.consecutive",
                    vec!["consecutive5xx".to_owned()]
                ),
                (
                    "conf.detectors.gatewayErrors.consecutive",
                    vec!["consecutiveGatewayFailure".to_owned()]
                ),
            ]
        );
    }

    #[test]
    fn the_factor_is_the_thousandths_kuma_computed() {
        let mut notes = Vec::new();
        assert_eq!(factor(1.33, &mut notes), "1.33");
        assert_eq!(factor(2.0, &mut notes), "2");
        assert_eq!(factor(0.5, &mut notes), "0.5");
        assert!(notes.is_empty());
        // 1.005 * 1000 is 1004.999... in binary floating point: Kuma truncates to 1004.
        assert_eq!(factor(1.005, &mut notes), "1.004");
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].field, "conf.detectors.standardDeviation.factor");
        assert!(notes[0].affects.is_empty());
        // A non-positive factor gives a policy MeshCircuitBreaker rejects.
        let r = conv(&format!(
            "{ANY_TO_ANY}conf:\n  detectors:\n    standardDeviation:\n      factor: 0\n"
        ));
        assert!(matches!(r, Err(ConvertError::Invalid { .. })), "{r:?}");
    }

    #[test]
    fn several_sources_and_destinations() {
        let c = ok("
sources:
- match:
    kuma.io/service: web
- match:
    kuma.io/service: api
    version: v1
destinations:
- match:
    kuma.io/service: backend
- match:
    kuma.io/service: redis
conf:
  thresholds:
    maxRetries: 1
");
        assert_eq!(names(&c), ["cb-1", "cb-2"]);
        let spec = c.outputs[1].spec_value();
        assert_eq!(
            spec["targetRef"],
            json!({"kind": "MeshServiceSubset", "name": "api", "tags": {"version": "v1"}})
        );
        assert_eq!(spec["to"].as_array().unwrap().len(), 2);
        assert_eq!(
            spec["to"][1]["targetRef"],
            json!({"kind": "MeshService", "name": "redis"})
        );
    }

    #[test]
    fn errors() {
        let no_conf = conv(ANY_TO_ANY);
        assert!(matches!(no_conf, Err(ConvertError::Empty { .. })));
        let no_destinations = conv(
            "
sources:
- match:
    kuma.io/service: '*'
conf:
  thresholds:
    maxRetries: 1
",
        );
        assert!(matches!(no_destinations, Err(ConvertError::Empty { .. })));
        // The old policy accepts a zero limit, MeshCircuitBreaker does not.
        let zero = conv(&format!(
            "{ANY_TO_ANY}conf:\n  thresholds:\n    maxRetries: 0\n"
        ));
        assert!(
            matches!(zero, Err(ConvertError::Invalid { .. })),
            "{zero:?}"
        );
    }
}
