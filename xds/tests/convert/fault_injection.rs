//! FaultInjection -> MeshFaultInjection equivalence: HTTP, HTTP/2 and gRPC inbounds, one
//! FaultInjection per shape of sources (one service, two services, any). What remains is
//! exactly the notes' fields: the `x-kuma-tags` matchers (`headers`), one filter per source and
//! the gRPC inbound that MeshFaultInjection does not configure (`httpFilters`).

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, MESH};
use super::{converts, ops_on, output_spec, scenario, typed_config};

/// frontend and backend (HTTP), web (HTTP/2) and api (gRPC) servers.
fn topology() -> String {
    [
        dataplane("frontend", "10.42.0.29", 8080, "http", &[]),
        dataplane("backend", "10.42.0.30", 3001, "http", &[]),
        dataplane("web", "10.42.0.31", 8081, "http2", &[]),
        dataplane("api", "10.42.0.32", 9090, "grpc", &[]),
    ]
    .concat()
}

const FAULT_INJECTIONS: &str = "
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
    let resources = scenario(&format!("{MESH}{}{FAULT_INJECTIONS}", topology()));
    let report = converts(&resources, DPPS, &[ResourceType::MeshFaultInjection]);
    // The matcher of a client's `x-kuma-tags` changes form.
    let matcher = [
        ("add", "0/typedConfig/headers/0/stringMatch"),
        ("remove", "0/typedConfig/headers/0/safeRegexMatch"),
    ];
    let mut expected = [
        // api (gRPC): fi-any's gRPC destination is dropped, the fault filter disappears (the
        // router moves up to index 0).
        ops_on(
            "api",
            |rest| filters("inbound:10.42.0.32:9090", rest),
            &[
                ("remove", "0/typedConfig/delay"),
                ("remove", "0/typedConfig/headers"),
                ("remove", "1"),
                ("replace", "0/name"),
                ("replace", "0/typedConfig/@type"),
            ],
        ),
        // backend: one source, the same fault; only the matcher's form changes.
        ops_on(
            "backend",
            |rest| filters("inbound:10.42.0.30:3001", rest),
            &matcher,
        ),
        // frontend: fi-any's `*` source is `Mesh`, without a matcher.
        ops_on(
            "frontend",
            |rest| filters("inbound:10.42.0.29:8080", rest),
            &[("remove", "0/typedConfig/headers")],
        ),
        // web: two sources, two filters (one per client), then the router.
        ops_on(
            "web",
            |rest| filters("inbound:10.42.0.31:8081", rest),
            &[
                matcher[0],
                matcher[1],
                ("add", "1/typedConfig/headers"),
                ("add", "1/typedConfig/responseRateLimit"),
                ("add", "2"),
                ("replace", "1/name"),
                ("replace", "1/typedConfig/@type"),
            ],
        ),
    ]
    .concat();
    expected.sort();
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
    typed_config(name, &format!("httpFilters/{rest}"))
}
