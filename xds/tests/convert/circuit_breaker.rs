//! CircuitBreaker -> MeshCircuitBreaker equivalence: seed 000's example (an empty diff), then
//! CircuitBreakers mesh-wide, per destination and per source with partial confs, whose only
//! remaining differences are the local-origin enforcings MeshCircuitBreaker sets to 0 and a
//! detector count written out.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

/// The kuma-demo topology of seed 000: frontend calls backend (HTTP) and redis (TCP).
const TOPOLOGY: &str = "
type: Mesh
name: default
skipCreatingInitialPolicies: ['*']
---
type: Dataplane
mesh: default
name: frontend
networking:
  address: 10.42.0.29
  inbound:
  - port: 8080
    tags:
      kuma.io/service: frontend
      kuma.io/protocol: http
  outbound:
  - port: 3001
    address: 10.43.13.71
    tags:
      kuma.io/service: backend
  - port: 6379
    address: 10.43.83.105
    tags:
      kuma.io/service: redis
---
type: Dataplane
mesh: default
name: backend
networking:
  address: 10.42.0.30
  inbound:
  - port: 3001
    tags:
      kuma.io/service: backend
      kuma.io/protocol: http
  outbound:
  - port: 6379
    address: 10.43.83.105
    tags:
      kuma.io/service: redis
---
type: Dataplane
mesh: default
name: redis
networking:
  address: 10.42.0.28
  inbound:
  - port: 6379
    tags:
      kuma.io/service: redis
      kuma.io/protocol: tcp
";

const DPPS: &[&str] = &["frontend", "backend", "redis"];

#[test]
fn the_seed_circuit_breaker_converts_with_an_empty_diff() {
    let resources = scenario(&format!(
        "{TOPOLOGY}---
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
"
    ));
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
        "{TOPOLOGY}---
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
"
    ));
    let report = equivalence(&resources, DPPS);
    assert_eq!(report.conversions.len(), old_policies(&resources));
    assert_eq!(output_types(&report), [ResourceType::MeshCircuitBreaker]);
    let od = |cluster: &str, field: &str| {
        format!("/type.googleapis.com~1envoy.config.cluster.v3.Cluster/{cluster}/outlierDetection/{field}")
    };
    let expected: Vec<Op> = [
        // backend -> redis: cb-global (no detector): the two local-origin enforcings.
        (
            "backend",
            od("redis", "enforcingFailurePercentageLocalOrigin"),
        ),
        ("backend", od("redis", "enforcingLocalOriginSuccessRate")),
        // frontend -> backend: cb-backend, totalErrors without a count.
        ("frontend", od("backend", "consecutive5xx")),
        // frontend -> redis: cb-frontend-redis, no success rate or failure detector.
        (
            "frontend",
            od("redis", "enforcingFailurePercentageLocalOrigin"),
        ),
        ("frontend", od("redis", "enforcingLocalOriginSuccessRate")),
    ]
    .into_iter()
    .map(|(dp, path)| Op {
        dataplane: dp.to_owned(),
        op: "add".to_owned(),
        path,
    })
    .collect();
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
