//! TrafficPermission -> MeshTrafficPermission equivalence (mTLS on, as RBAC needs): seed 000's
//! two TrafficPermissions plus one with tag subsets, over HTTP and TCP inbounds. What remains is
//! exactly the notes' fields: the RBAC policy key (`policies`), the RBAC filter moving into the
//! HTTP connection manager on HTTP inbounds (`filters`, `httpFilters`) and the principals' order.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, tagged_dataplane, MESH};
use super::{converts, document, filters, migrated, ops_on, output_spec, scenario, Op};

/// The Mesh with mTLS, frontend and backend (HTTP, with one more tag each), redis (TCP).
fn topology() -> String {
    format!(
        "{MESH}mtls:
  enabledBackend: ca-1
  backends:
  - name: ca-1
    type: builtin
{}{}{}",
        tagged_dataplane(
            "frontend",
            "10.42.0.29",
            8080,
            "kuma.io/service: frontend, kuma.io/protocol: http, env: prod",
            &[]
        ),
        tagged_dataplane(
            "backend",
            "10.42.0.30",
            3001,
            "kuma.io/service: backend, kuma.io/protocol: http, version: v1",
            &[]
        ),
        dataplane("redis", "10.42.0.28", 6379, "tcp", &[]),
    )
}

const PERMISSIONS: &str = "
---
type: TrafficPermission
name: on-redis
mesh: default
sources:
- match:
    kuma.io/service: frontend
- match:
    kuma.io/service: backend
destinations:
- match:
    kuma.io/service: redis
---
type: TrafficPermission
name: on-frontend
mesh: default
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: frontend
---
type: TrafficPermission
name: on-backend
mesh: default
sources:
- match:
    kuma.io/service: frontend
    env: prod
    version: '*'
destinations:
- match:
    kuma.io/service: backend
    version: v1
";

const DPPS: &[&str] = &["frontend", "backend", "redis"];

#[test]
fn traffic_permission_to_mesh_traffic_permission_leaves_only_the_rbac_form() {
    let resources = scenario(&format!("{}{PERMISSIONS}", topology()));
    let report = converts(&resources, DPPS, &[ResourceType::MeshTrafficPermission]);
    // On HTTP inbounds the network RBAC filter (filters[0]) gives way to the connection
    // manager (filters[1] moves up), which gains an HTTP RBAC filter: the diff turns filters[0]
    // into the connection manager field by field and removes filters[1].
    let http_inbound = |dp: &str, listener: &str| {
        let path = |rest: &str| filters(listener, rest);
        ops_on(
            dp,
            path,
            &[
                ("add", "0/typedConfig/commonHttpProtocolOptions"),
                ("add", "0/typedConfig/forwardClientCertDetails"),
                ("add", "0/typedConfig/httpFilters"),
                ("add", "0/typedConfig/routeConfig"),
                ("add", "0/typedConfig/setCurrentClientCertDetails"),
                ("add", "0/typedConfig/streamIdleTimeout"),
                ("remove", "0/typedConfig/rules"),
                ("remove", "1"),
                ("replace", "0/name"),
                ("replace", "0/typedConfig/@type"),
                ("replace", "0/typedConfig/statPrefix"),
            ],
        )
    };
    let mut expected: Vec<Op> = Vec::new();
    expected.extend(http_inbound("backend", "inbound:10.42.0.30:3001"));
    expected.extend(http_inbound("frontend", "inbound:10.42.0.29:8080"));
    // On TCP inbounds only the policy key changes.
    for (op, key) in [("add", "MeshTrafficPermission"), ("remove", "on-redis")] {
        expected.push(Op::new(
            "redis",
            op,
            filters(
                "inbound:10.42.0.28:6379",
                &format!("0/typedConfig/rules/policies/{key}"),
            ),
        ));
    }
    assert_eq!(report.ops, expected);

    // The HTTP RBAC filter holds the same principals as the old network one.
    let doc = document(&migrated(&resources, &report.conversions), "backend");
    let hcm = &doc["type.googleapis.com/envoy.config.listener.v3.Listener"]
        ["inbound:10.42.0.30:3001"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(
        hcm["httpFilters"][0]["typedConfig"]["rules"]["policies"]["MeshTrafficPermission"]
            ["principals"],
        json!([{"andIds": {"ids": [
            {"authenticated": {"principalName": {"exact": "kuma://env/prod"}}},
            {"authenticated": {"principalName": {"exact": "spiffe://default/frontend"}}},
        ]}}])
    );

    let redis = output_spec(&report, ResourceType::MeshTrafficPermission, "on-redis");
    assert_eq!(
        redis,
        json!({
            "targetRef": {"kind": "MeshService", "name": "redis"},
            "from": [
                {"targetRef": {"kind": "MeshService", "name": "frontend"}, "default": {"action": "Allow"}},
                {"targetRef": {"kind": "MeshService", "name": "backend"}, "default": {"action": "Allow"}},
            ],
        })
    );
    let backend = output_spec(&report, ResourceType::MeshTrafficPermission, "on-backend");
    assert_eq!(
        backend["targetRef"],
        json!({"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v1"}})
    );
}
