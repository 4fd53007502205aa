//! Precedence of a list conversion: the outputs of old policies Kuma ranks as more specific
//! are named so that they win the merge (seed 000's `aaa-` prefix), so the migration diff
//! keeps the old values; where the top-level kinds force another order, the precedence note
//! names the Envoy fields that change.

use umbra_core::convert::NoteKind;
use umbra_core::resource::{Resource, ResourceType};

use super::scenarios::kuma_demo;
use super::{common, equivalence, old_policies, output_spec, output_types, scenario, Op, Report};

/// The output names, in conversion order.
fn names(report: &Report) -> Vec<&str> {
    report
        .conversions
        .iter()
        .flat_map(|c| c.outputs.iter().map(|o| o.meta.name.as_str()))
        .collect()
}

/// The precedence note of the conversion of `source`.
fn precedence_note<'r>(report: &'r Report, source: &str) -> &'r umbra_core::convert::Note {
    let c = report
        .conversions
        .iter()
        .find(|c| c.source.name == source)
        .unwrap_or_else(|| panic!("no conversion of {source}"));
    c.notes
        .iter()
        .find(|n| n.message.starts_with("precedence among"))
        .unwrap_or_else(|| panic!("no precedence note for {source}: {:#?}", c.notes))
}

/// Seed 000's scenario: the Mesh, the three Dataplanes and the three old Timeouts of
/// `timeouts.yaml` (not its MeshTimeout replacements).
fn seed_scenario() -> Vec<Resource> {
    common::load("timeouts.yaml")
        .into_iter()
        .filter(|r| r.ty() != ResourceType::MeshTimeout)
        .collect()
}

#[test]
fn seed_000_timeouts_keep_their_values_once_converted() {
    let resources = seed_scenario();
    assert_eq!(old_policies(&resources), 3);
    let report = equivalence(&resources, &["frontend", "backend", "redis"]);
    assert_eq!(output_types(&report), [ResourceType::MeshTimeout]);
    assert_eq!(
        names(&report),
        [
            "timeout-global",
            "aaa-timeout-to-backend",
            "aaa-timeout-to-redis"
        ]
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshTimeout, "aaa-timeout-to-backend")["to"][0]
            ["default"]["connectionTimeout"],
        "31s"
    );
    // The outbounds keep the most specific Timeout's values: no connect timeout or route
    // timeout of backend or redis changes (what remains are seed 000's leaking defaults, e.g.
    // the connection manager's streamIdleTimeout MeshTimeout does not set).
    let outbound = |op: &Op| {
        op.path.contains("backend_kuma-demo_svc_3001")
            || op.path.contains("redis_kuma-demo_svc_6379")
            || op.path.contains("outbound:10.43.13.71:3001")
            || op.path.contains("outbound:10.43.83.105:6379")
    };
    let changed: Vec<&Op> = report
        .ops
        .iter()
        .filter(|op| outbound(op))
        .filter(|op| {
            ["connectTimeout", "timeout"]
                .iter()
                .any(|f| op.path.ends_with(&format!("/{f}")))
        })
        .collect();
    assert!(changed.is_empty(), "{changed:#?}");
    assert!(!report.ops.iter().any(|op| op
        .path
        .contains("Cluster/backend_kuma-demo_svc_3001/connectTimeout")));
    assert!(
        report.ops.iter().any(outbound),
        "the leaking defaults remain"
    );
    // Each precedence note says the order holds, with nothing to explain in the diff.
    for source in ["timeout-global", "timeout-to-backend", "timeout-to-redis"] {
        let n = precedence_note(&report, source);
        assert_eq!(n.kind, NoteKind::Semantics);
        assert!(n.affects.is_empty(), "{n:#?}");
        assert!(n.message.contains("reproduces Kuma's"), "{}", n.message);
    }
    assert!(precedence_note(&report, "timeout-to-backend")
        .message
        .contains("renamed aaa-timeout-to-backend"));
}

/// A mesh-wide CircuitBreaker and a service-specific one whose name sorts after it: the
/// specific one must win on backend.
const CB_MESH_AND_SERVICE: &str = "
---
type: CircuitBreaker
mesh: default
name: cb-all
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
conf:
  interval: 10s
  baseEjectionTime: 30s
  maxEjectionPercent: 20
  thresholds:
    maxConnections: 100
    maxPendingRequests: 100
    maxRequests: 100
    maxRetries: 3
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
---
type: CircuitBreaker
mesh: default
name: cb-to-backend
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: backend
conf:
  interval: 3s
  baseEjectionTime: 5s
  maxEjectionPercent: 50
  thresholds:
    maxConnections: 2
    maxPendingRequests: 2
    maxRequests: 2
    maxRetries: 1
  detectors:
    totalErrors:
      consecutive: 2
    gatewayErrors:
      consecutive: 2
    localErrors:
      consecutive: 2
    standardDeviation:
      requestVolume: 4
      minimumHosts: 2
      factor: 1.5
    failure:
      requestVolume: 4
      minimumHosts: 2
      threshold: 50
";

/// A CircuitBreaker for frontend's outbounds that Kuma ranks equal to cb-to-backend on
/// frontend -> backend (one exact and one wildcard tag each): without creation times Umbra
/// (and Kuma, for equal times) picks cb-to-backend, first by name, but the conversion's
/// `MeshService` top level wins the merge.
const CB_FROM_FRONTEND: &str = "
---
type: CircuitBreaker
mesh: default
name: cb-zz-frontend
sources:
- match:
    kuma.io/service: frontend
destinations:
- match:
    kuma.io/service: '*'
conf:
  interval: 7s
  baseEjectionTime: 7s
  maxEjectionPercent: 70
  thresholds:
    maxConnections: 7
    maxPendingRequests: 7
    maxRequests: 7
    maxRetries: 7
  detectors:
    totalErrors:
      consecutive: 7
    gatewayErrors:
      consecutive: 7
    localErrors:
      consecutive: 7
    standardDeviation:
      requestVolume: 7
      minimumHosts: 7
      factor: 1.7
    failure:
      requestVolume: 7
      minimumHosts: 7
      threshold: 70
";

const CB_DPPS: &[&str] = &["frontend", "backend", "redis"];

#[test]
fn a_service_specific_circuit_breaker_wins_over_the_mesh_wide_one() {
    let resources = scenario(&format!("{}{CB_MESH_AND_SERVICE}", kuma_demo("")));
    let report = equivalence(&resources, CB_DPPS);
    // "cb-all" sorts before "cb-to-backend": the specific one is renamed to sort first.
    assert_eq!(names(&report), ["cb-all", "aaa-cb-to-backend"]);
    // Every field is set by both policies: the diff is empty, the precedence holds.
    assert_eq!(report.ops, []);
    for source in ["cb-all", "cb-to-backend"] {
        let n = precedence_note(&report, source);
        assert!(n.affects.is_empty(), "{n:#?}");
        assert!(n.message.contains("reproduces Kuma's"), "{}", n.message);
    }
}

#[test]
fn a_top_level_kind_that_forces_another_winner_is_explained() {
    let resources = scenario(&format!(
        "{}{CB_MESH_AND_SERVICE}{CB_FROM_FRONTEND}",
        kuma_demo("")
    ));
    let report = equivalence(&resources, CB_DPPS);
    assert_eq!(
        names(&report),
        ["cb-all", "aaa-cb-to-backend", "cb-zz-frontend"]
    );
    // frontend -> backend: Kuma (first by name among equal ranks) keeps cb-to-backend, the
    // merge gives cb-zz-frontend's MeshService top level: frontend's backend cluster changes.
    let n = precedence_note(&report, "cb-to-backend");
    assert_eq!(n.affects, ["circuitBreakers", "outlierDetection"]);
    assert!(n.message.contains("cannot reproduce"), "{}", n.message);
    assert!(n.message.contains("cb-zz-frontend"), "{}", n.message);
    assert!(report
        .ops
        .iter()
        .all(|op| op.dataplane == "frontend" && op.path.contains("Cluster/backend/")));
    assert!(!report.ops.is_empty());
    // frontend -> redis: cb-zz-frontend ranks above cb-all in Kuma too.
    let n = precedence_note(&report, "cb-zz-frontend");
    assert!(n.affects.is_empty(), "{n:#?}");
    assert!(precedence_note(&report, "cb-all").affects.is_empty());
}

#[test]
fn creation_times_that_agree_with_the_top_level_kind_leave_an_empty_diff() {
    // cb-zz-frontend created after cb-to-backend: Kuma picks it for frontend -> backend too.
    let resources = scenario(&format!(
        "{}{}{}",
        kuma_demo(""),
        CB_MESH_AND_SERVICE.replace(
            "name: cb-to-backend\n",
            "name: cb-to-backend\ncreationTime: '2024-01-01T00:00:00Z'\n"
        ),
        CB_FROM_FRONTEND.replace(
            "name: cb-zz-frontend\n",
            "name: cb-zz-frontend\ncreationTime: '2024-02-01T00:00:00Z'\n"
        ),
    ));
    let report = equivalence(&resources, CB_DPPS);
    assert_eq!(report.ops, []);
    assert!(report.notes().all(|n| n.affects.is_empty()));
}
