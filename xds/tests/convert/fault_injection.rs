//! FaultInjection -> MeshFaultInjection equivalence: HTTP, HTTP/2 and gRPC inbounds, one
//! FaultInjection per shape of sources (one service, two services, any). What remains is
//! exactly the notes' fields: the `x-kuma-tags` matchers (`headers`), one filter per source and
//! the gRPC inbound that MeshFaultInjection does not configure (`httpFilters`).

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

const SCENARIO: &str = "
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
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.42.0.31
  inbound:
  - port: 8081
    tags:
      kuma.io/service: web
      kuma.io/protocol: http2
---
type: Dataplane
mesh: default
name: api
networking:
  address: 10.42.0.32
  inbound:
  - port: 9090
    tags:
      kuma.io/service: api
      kuma.io/protocol: grpc
---
type: FaultInjection
mesh: default
name: fi-backend
sources:
- match:
    kuma.io/service: frontend
destinations:
- match:
    kuma.io/service: backend
    kuma.io/protocol: http
conf:
  abort:
    httpStatus: 503
    percentage: 50
  delay:
    value: 5s
    percentage: 50.5
---
type: FaultInjection
mesh: default
name: fi-web
sources:
- match:
    kuma.io/service: frontend
- match:
    kuma.io/service: backend
destinations:
- match:
    kuma.io/service: web
    kuma.io/protocol: http2
conf:
  responseBandwidth:
    limit: 100kbps
    percentage: 33.3
---
type: FaultInjection
mesh: default
name: fi-any
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: api
    kuma.io/protocol: grpc
- match:
    kuma.io/service: frontend
    kuma.io/protocol: http
conf:
  delay:
    value: 1s
    percentage: 10
";

const DPPS: &[&str] = &["frontend", "backend", "web", "api"];

#[test]
fn fault_injection_to_mesh_fault_injection_leaves_only_the_announced_matchers() {
    let resources = scenario(SCENARIO);
    let report = equivalence(&resources, DPPS);
    assert_eq!(report.conversions.len(), old_policies(&resources));
    assert_eq!(output_types(&report), [ResourceType::MeshFaultInjection]);
    let expected: Vec<Op> = [
        // api (gRPC): fi-any's gRPC destination is dropped, the fault filter disappears (the
        // router moves up to index 0).
        (
            "api",
            "remove",
            filters("inbound:10.42.0.32:9090", "0/typedConfig/delay"),
        ),
        (
            "api",
            "remove",
            filters("inbound:10.42.0.32:9090", "0/typedConfig/headers"),
        ),
        ("api", "remove", filters("inbound:10.42.0.32:9090", "1")),
        (
            "api",
            "replace",
            filters("inbound:10.42.0.32:9090", "0/name"),
        ),
        (
            "api",
            "replace",
            filters("inbound:10.42.0.32:9090", "0/typedConfig/@type"),
        ),
        // backend: one source, the same fault; only the matcher's form changes.
        (
            "backend",
            "add",
            filters(
                "inbound:10.42.0.30:3001",
                "0/typedConfig/headers/0/stringMatch",
            ),
        ),
        (
            "backend",
            "remove",
            filters(
                "inbound:10.42.0.30:3001",
                "0/typedConfig/headers/0/safeRegexMatch",
            ),
        ),
        // frontend: fi-any's `*` source is `Mesh`, without a matcher.
        (
            "frontend",
            "remove",
            filters("inbound:10.42.0.29:8080", "0/typedConfig/headers"),
        ),
        // web: two sources, two filters (one per client), then the router.
        (
            "web",
            "add",
            filters(
                "inbound:10.42.0.31:8081",
                "0/typedConfig/headers/0/stringMatch",
            ),
        ),
        (
            "web",
            "add",
            filters("inbound:10.42.0.31:8081", "1/typedConfig/headers"),
        ),
        (
            "web",
            "add",
            filters("inbound:10.42.0.31:8081", "1/typedConfig/responseRateLimit"),
        ),
        ("web", "add", filters("inbound:10.42.0.31:8081", "2")),
        (
            "web",
            "remove",
            filters(
                "inbound:10.42.0.31:8081",
                "0/typedConfig/headers/0/safeRegexMatch",
            ),
        ),
        (
            "web",
            "replace",
            filters("inbound:10.42.0.31:8081", "1/name"),
        ),
        (
            "web",
            "replace",
            filters("inbound:10.42.0.31:8081", "1/typedConfig/@type"),
        ),
    ]
    .into_iter()
    .map(|(dp, op, path)| Op {
        dataplane: dp.to_owned(),
        op: op.to_owned(),
        path,
    })
    .collect();
    assert_eq!(report.ops, expected);

    let backend = output_spec(&report, ResourceType::MeshFaultInjection, "fi-backend");
    assert_eq!(
        backend,
        json!({
            "targetRef": {"kind": "MeshServiceSubset", "name": "backend", "tags": {"kuma.io/protocol": "http"}},
            "from": [{
                "targetRef": {"kind": "MeshService", "name": "frontend"},
                "default": {"http": [{
                    "abort": {"httpStatus": 503, "percentage": 50},
                    "delay": {"value": "5s", "percentage": "50.5"},
                }]},
            }],
        })
    );
    // fi-any: only its HTTP destination is converted, under the source name.
    let any = output_spec(&report, ResourceType::MeshFaultInjection, "fi-any");
    assert_eq!(any["targetRef"]["name"], "frontend");
    assert_eq!(any["from"][0]["targetRef"], json!({"kind": "Mesh"}));
    let web = output_spec(&report, ResourceType::MeshFaultInjection, "fi-web");
    assert_eq!(web["from"].as_array().map(Vec::len), Some(2));
}

/// The path of `rest` under the HTTP filters of listener `name`.
fn filters(name: &str, rest: &str) -> String {
    format!(
        "/type.googleapis.com~1envoy.config.listener.v3.Listener/{name}/filterChains/0/filters/0/typedConfig/httpFilters/{rest}"
    )
}
