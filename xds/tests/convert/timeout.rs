//! Timeout -> MeshTimeout equivalence (seed 000's example, extended): three HTTP/TCP/gRPC
//! destinations, Timeouts mesh-wide, per destination and per source, converted and generated in
//! place of the old ones. What remains is exactly the notes' fields: seed 000's "leaking"
//! defaults (`requestHeadersTimeout`, route `idleTimeout`, `maxConnectionDuration` and
//! `maxStreamDuration` 0s, the idle timeout moving from the connection manager to the cluster,
//! the stream idle timeout moving to the routes) and the single `idleTimeout` of MeshTimeout.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, kuma_demo};
use super::{converts, ops, output_spec, scenario, typed_config, CLUSTER};

/// Seed 000's kuma-demo topology, frontend also calling api (gRPC).
fn topology() -> String {
    let api_outbound = "  - port: 5000
    address: 10.43.50.10
    tags:
      kuma.io/service: api
";
    format!(
        "{}{}",
        kuma_demo(api_outbound),
        dataplane("api", "10.42.0.31", 5000, "grpc", &[])
    )
}

const TIMEOUTS: &str = "
---
type: Timeout
mesh: default
name: timeout-global
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
conf:
  connectTimeout: 21s
  tcp:
    idleTimeout: 22s
  http:
    requestTimeout: 23s
    idleTimeout: 24s
    streamIdleTimeout: 25s
    maxStreamDuration: 26s
---
type: Timeout
mesh: default
name: timeout-backend
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: backend
conf:
  connectTimeout: 31s
  http:
    requestTimeout: 33s
    idleTimeout: 34s
---
type: Timeout
mesh: default
name: timeout-frontend-redis
sources:
- match:
    kuma.io/service: frontend
destinations:
- match:
    kuma.io/service: redis
conf:
  connectTimeout: 41s
  tcp:
    idleTimeout: 42s
---
type: Timeout
mesh: default
name: timeout-api
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: api
conf:
  connectTimeout: 9s
  grpc:
    streamIdleTimeout: 7s
    maxStreamDuration: 8s
";

/// The DPPs generated before and after. The Timeouts' names are chosen so that MeshTimeout's
/// merge order (top-level kind, then the lexically smallest name winning) agrees with Kuma's
/// old ranking (the precedence note): `timeout-api` and `timeout-backend` win over
/// `timeout-global`, `timeout-frontend-redis` wins by its `MeshService` top level.
const DPPS: &[&str] = &["frontend", "backend", "redis", "api"];

#[test]
fn timeout_to_mesh_timeout_leaves_only_the_announced_defaults() {
    let resources = scenario(&format!("{}{TIMEOUTS}", topology()));
    let report = converts(&resources, DPPS, &[ResourceType::MeshTimeout]);
    // On an HTTP connection manager MeshTimeout adds requestHeadersTimeout and a route
    // idleTimeout, and replaces `idle` (the idle timeout moving to the cluster, or the stream
    // idle timeout moving to the route).
    let hcm = |dp: &'static str, listener: &str, idle: &str| {
        [
            (dp, "add", typed_config(listener, "requestHeadersTimeout")),
            (dp, "add", typed_config(listener, ROUTE_IDLE)),
            (dp, "replace", typed_config(listener, idle)),
        ]
    };
    // On an HTTP cluster it adds maxConnectionDuration and maxStreamDuration (both 0s).
    let http_cluster = |dp: &'static str, name: &str| {
        [
            (dp, "add", cluster(name, "maxConnectionDuration")),
            (dp, "add", cluster(name, "maxStreamDuration")),
        ]
    };
    let mut expected = ops([
        // The gRPC server: only its inbound listener (MeshTimeout leaves gRPC clusters alone).
        &hcm("api", "inbound:10.42.0.31:5000", HCM_IDLE)[..],
        // backend: its HTTP inbound, and redis (TCP) gets http.idleTimeout 24s, not tcp's 22s.
        &http_cluster("backend", "localhost:3001"),
        &hcm("backend", "inbound:10.42.0.30:3001", HCM_IDLE),
        &[(
            "backend",
            "replace",
            typed_config("outbound:10.43.83.105:6379", "idleTimeout"),
        )],
        // frontend: backend (HTTP, timeout-backend without maxStreamDuration), its inbound and
        // api (gRPC: the stream idle timeout moves to the route, maxStreamDuration is lost);
        // redis (timeout-frontend-redis, TCP) is exact.
        &http_cluster("frontend", "backend"),
        &http_cluster("frontend", "localhost:8080"),
        &hcm("frontend", "inbound:10.42.0.29:8080", HCM_IDLE),
        &hcm("frontend", "outbound:10.43.13.71:3001", HCM_IDLE),
        &hcm("frontend", "outbound:10.43.50.10:5000", "streamIdleTimeout"),
        &[("frontend", "remove", cluster("api", "maxStreamDuration"))],
    ]
    .concat());
    expected.sort();
    assert_eq!(report.ops, expected);

    // Every field explicit, unset ones with the old built-in values; inbound defaults restated.
    let backend = output_spec(&report, ResourceType::MeshTimeout, "timeout-backend");
    assert_eq!(
        backend["to"],
        json!([{
            "targetRef": {"kind": "MeshService", "name": "backend"},
            "default": {
                "connectionTimeout": "31s",
                "idleTimeout": "34s",
                "http": {"requestTimeout": "33s", "streamIdleTimeout": "0s", "maxStreamDuration": "0s"},
            },
        }])
    );
    assert_eq!(backend["from"][0]["default"]["idleTimeout"], "2h");
    let redis = output_spec(&report, ResourceType::MeshTimeout, "timeout-frontend-redis");
    assert_eq!(
        redis["targetRef"],
        json!({"kind": "MeshService", "name": "frontend"})
    );
    assert_eq!(redis["to"][0]["default"]["idleTimeout"], "42s");
    let global = output_spec(&report, ResourceType::MeshTimeout, "timeout-global");
    assert_eq!(global["to"][0]["default"]["idleTimeout"], "24s");
    // The notes behind the diff.
    let fields: Vec<&str> = report.notes().map(|n| n.field.as_str()).collect();
    assert!(fields.contains(&"conf.tcp.idleTimeout"));
    assert!(fields.contains(&"conf.grpc.maxStreamDuration"));
}

const HCM_IDLE: &str = "commonHttpProtocolOptions/idleTimeout";
const ROUTE_IDLE: &str = "routeConfig/virtualHosts/0/routes/0/route/idleTimeout";

/// The path of `field` in the upstream common HTTP options of cluster `name`.
fn cluster(name: &str, field: &str) -> String {
    format!(
        "{CLUSTER}/{name}/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/{field}"
    )
}
