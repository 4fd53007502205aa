//! The policies Kuma creates with every new Mesh (`pkg/defaults/mesh` at v2.7.29):
//! `mesh-timeout-all-<mesh>`, `mesh-gateways-timeout-all-<mesh>`,
//! `mesh-circuit-breaker-all-<mesh>` and `mesh-retry-all-<mesh>`, with Kuma's values
//! (`pkg/plugins/policies/core/defaults/consts.go`: connect 5s, idle 1h, stream idle 30m,
//! request 15s; gateways idle 5m, stream idle 5s, request headers 500ms).
//!
//! A Mesh whose `skipCreatingInitialPolicies` lists `"*"` gets none; one that lists a type
//! (`MeshRetry`) gets the others. A mesh being migrated from old policies is created with
//! `["*"]`: its export carries the defaults it really has, and a new default MeshTimeout would
//! switch its old Timeouts off (transition seed 000's old-type-off rule).
//! Kuma's optional `allow-all`/`route-all` (its `createMeshRoutingResources`, off by default)
//! are not created.

use crate::mesh::MeshSpec;
use crate::resource::{Resource, ResourceType};

/// `(name prefix, type, spec)` of each default, in Kuma's values and duration spelling.
const DEFAULTS: &[(&str, ResourceType, &str)] = &[
    (
        "mesh-timeout-all",
        ResourceType::MeshTimeout,
        "targetRef: {kind: Mesh, proxyTypes: [Sidecar]}
from:
- targetRef: {kind: Mesh}
  default:
    connectionTimeout: 10s
    idleTimeout: 2h0m0s
    http: {requestTimeout: 0s, streamIdleTimeout: 1h0m0s, maxStreamDuration: 0s}
to:
- targetRef: {kind: Mesh}
  default:
    connectionTimeout: 5s
    idleTimeout: 1h0m0s
    http: {requestTimeout: 15s, streamIdleTimeout: 30m0s}
",
    ),
    (
        "mesh-gateways-timeout-all",
        ResourceType::MeshTimeout,
        "targetRef: {kind: Mesh, proxyTypes: [Gateway]}
from:
- targetRef: {kind: Mesh}
  default:
    idleTimeout: 5m0s
    http: {streamIdleTimeout: 5s, requestHeadersTimeout: 500ms}
to:
- targetRef: {kind: Mesh}
  default:
    idleTimeout: 1h0m0s
    http: {streamIdleTimeout: 5s}
",
    ),
    (
        "mesh-circuit-breaker-all",
        ResourceType::MeshCircuitBreaker,
        "targetRef: {kind: Mesh}
to:
- targetRef: {kind: Mesh}
  default:
    connectionLimits: {maxConnections: 1024, maxPendingRequests: 1024, maxRequests: 1024, maxRetries: 3}
",
    ),
    (
        "mesh-retry-all",
        ResourceType::MeshRetry,
        "targetRef: {kind: Mesh}
to:
- targetRef: {kind: Mesh}
  default:
    tcp: {maxConnectAttempt: 5}
    http:
      numRetries: 5
      perTryTimeout: 16s
      backOff: {baseInterval: 25ms, maxInterval: 250ms}
    grpc:
      numRetries: 5
      perTryTimeout: 16s
      backOff: {baseInterval: 25ms, maxInterval: 250ms}
",
    ),
];

/// The default policies of a new Mesh `mesh` with `spec`, minus those its
/// `skipCreatingInitialPolicies` skips. Each is named `<prefix>-<mesh>` and carries no labels.
pub fn mesh_defaults(mesh: &str, spec: &MeshSpec) -> Vec<Resource> {
    let skip = spec
        .skip_creating_initial_policies
        .as_deref()
        .unwrap_or_default();
    if skip.iter().any(|s| s == "*") {
        return Vec::new();
    }
    DEFAULTS
        .iter()
        .filter(|(_, ty, _)| !skip.iter().any(|s| s == ty.name()))
        .filter_map(|(prefix, ty, spec)| {
            let doc = format!(
                "type: {}\nmesh: {mesh}\nname: {prefix}-{mesh}\nspec:\n{}",
                ty.name(),
                spec.lines().map(|l| format!("  {l}\n")).collect::<String>()
            );
            // The texts are constants checked by the tests below; a mesh name that makes the
            // document invalid (too long) yields no default rather than a broken one.
            Resource::from_bytes(doc.as_bytes())
                .ok()
                .filter(|r| !r.validate().has_violations())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kuma_defaults_are_valid_and_skippable() {
        let all = mesh_defaults("default", &MeshSpec::default());
        let names: Vec<String> = all.iter().map(|r| r.key().to_string()).collect();
        assert_eq!(
            names,
            [
                "MeshTimeout/default/mesh-timeout-all-default",
                "MeshTimeout/default/mesh-gateways-timeout-all-default",
                "MeshCircuitBreaker/default/mesh-circuit-breaker-all-default",
                "MeshRetry/default/mesh-retry-all-default",
            ]
        );
        let skip = |list: &[&str]| MeshSpec {
            skip_creating_initial_policies: Some(list.iter().map(|s| s.to_string()).collect()),
            ..MeshSpec::default()
        };
        assert!(mesh_defaults("m", &skip(&["*"])).is_empty());
        let no_timeouts = mesh_defaults("m", &skip(&["MeshTimeout"]));
        assert_eq!(no_timeouts.len(), 2);
        assert!(no_timeouts
            .iter()
            .all(|r| r.ty() != ResourceType::MeshTimeout));
    }
}
