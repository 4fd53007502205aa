//! CircuitBreaker -> MeshCircuitBreaker equivalence: seed 000's example (an empty diff), then
//! CircuitBreakers mesh-wide, per destination and per source with partial confs, whose only
//! remaining differences are the local-origin enforcings MeshCircuitBreaker sets to 0 and a
//! detector count written out.

use serde_json::json;
use umbra_core::resource::{Resource, ResourceType};

use super::scenarios::{kuma_demo, KUMA_DEMO_DPPS as DPPS};
use super::{common, converts, equivalence, ops, output_spec, scenario, CLUSTER};

/// Seed 000's example (`circuit-breakers.yaml`): its kuma-demo topology and the old
/// CircuitBreaker, without the seed's MeshCircuitBreaker replacement.
#[test]
fn the_seed_circuit_breaker_converts_with_an_empty_diff() {
    let resources: Vec<Resource> = common::load("circuit-breakers.yaml")
        .into_iter()
        .filter(|r| r.ty() != ResourceType::MeshCircuitBreaker)
        .collect();
    let report = equivalence(&resources, DPPS);
    assert_eq!(report.conversions.len(), 1);
    assert_eq!(report.ops, []);
    let spec = output_spec(
        &report,
        ResourceType::MeshCircuitBreaker,
        "circuit-breaker-example",
    );
    assert_eq!(
        spec["to"][0]["default"]["outlierDetection"]["detectors"]["successRate"]
            ["standardDeviationFactor"],
        "1.33"
    );
}

/// `cb-backend` sorts before `cb-global`, so its converted policy wins the merge for backend
/// as the more specific CircuitBreaker did; every policy sets the same connection limits, so
/// none leaks into another through the merge (the precedence note).
#[test]
fn partial_circuit_breakers_leave_only_the_announced_enforcings() {
    let resources = scenario(&format!(
        "{}---
type: CircuitBreaker
mesh: default
name: cb-global
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
conf:
  thresholds:
    maxConnections: 10
    maxRequests: 20
---
type: CircuitBreaker
mesh: default
name: cb-backend
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: backend
conf:
  interval: 3s
  thresholds:
    maxConnections: 5
    maxRequests: 7
  detectors:
    totalErrors: {{}}
    gatewayErrors:
      consecutive: 3
    standardDeviation:
      requestVolume: 10
      minimumHosts: 2
      factor: 1.005
    failure:
      threshold: 40
---
type: CircuitBreaker
mesh: default
name: cb-frontend-redis
sources:
- match:
    kuma.io/service: frontend
destinations:
- match:
    kuma.io/service: redis
conf:
  splitExternalAndLocalErrors: true
  thresholds:
    maxConnections: 1
    maxRequests: 2
  detectors:
    localErrors:
      consecutive: 7
",
        kuma_demo("")
    ));
    let report = converts(&resources, DPPS, &[ResourceType::MeshCircuitBreaker]);
    let od = |cluster: &str, field: &str| format!("{CLUSTER}/{cluster}/outlierDetection/{field}");
    // A CircuitBreaker without success rate and failure detectors: the local-origin
    // enforcings MeshCircuitBreaker sets to 0.
    let local_origin = |dp: &'static str| {
        [
            (
                dp,
                "add",
                od("redis", "enforcingFailurePercentageLocalOrigin"),
            ),
            (dp, "add", od("redis", "enforcingLocalOriginSuccessRate")),
        ]
    };
    let expected = ops([
        // backend -> redis: cb-global (no detector).
        &local_origin("backend")[..],
        // frontend -> backend: cb-backend, totalErrors without a count.
        &[("frontend", "add", od("backend", "consecutive5xx"))],
        // frontend -> redis: cb-frontend-redis (a local errors detector only).
        &local_origin("frontend"),
    ]
    .concat());
    assert_eq!(report.ops, expected);

    let backend = output_spec(&report, ResourceType::MeshCircuitBreaker, "cb-backend");
    assert_eq!(
        backend["to"][0]["default"]["outlierDetection"]["detectors"],
        json!({
            "totalFailures": {"consecutive": 5},
            "gatewayFailures": {"consecutive": 3},
            "successRate": {"requestVolume": 10, "minimumHosts": 2, "standardDeviationFactor": "1.004"},
            "failurePercentage": {"threshold": 40},
        })
    );
    let redis = output_spec(
        &report,
        ResourceType::MeshCircuitBreaker,
        "cb-frontend-redis",
    );
    assert_eq!(
        redis["targetRef"],
        json!({"kind": "MeshService", "name": "frontend"})
    );
    let global = output_spec(&report, ResourceType::MeshCircuitBreaker, "cb-global");
    assert_eq!(
        global["to"][0]["default"]["outlierDetection"],
        json!({"detectors": {"totalFailures": {}}})
    );
}
