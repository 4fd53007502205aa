//! Timeout -> MeshTimeout equivalence (seed 000's example, extended): three HTTP/TCP/gRPC
//! destinations, Timeouts mesh-wide, per destination and per source, converted and generated in
//! place of the old ones. What remains is exactly the notes' fields: seed 000's "leaking"
//! defaults (`requestHeadersTimeout`, route `idleTimeout`, `maxConnectionDuration` and
//! `maxStreamDuration` 0s, the idle timeout moving from the connection manager to the cluster,
//! the stream idle timeout moving to the routes) and the single `idleTimeout` of MeshTimeout.

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
  outbound:
  - port: 3001
    address: 10.43.13.71
    tags:
      kuma.io/service: backend
  - port: 6379
    address: 10.43.83.105
    tags:
      kuma.io/service: redis
  - port: 5000
    address: 10.43.50.10
    tags:
      kuma.io/service: api
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
---
type: Dataplane
mesh: default
name: api
networking:
  address: 10.42.0.31
  inbound:
  - port: 5000
    tags:
      kuma.io/service: api
      kuma.io/protocol: grpc
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
    let resources = scenario(SCENARIO);
    let report = equivalence(&resources, DPPS);
    assert_eq!(report.conversions.len(), old_policies(&resources));
    assert_eq!(output_types(&report), [ResourceType::MeshTimeout]);
    let expected: Vec<Op> = [
        // The gRPC server: only its inbound listener (MeshTimeout leaves gRPC clusters alone).
        (
            "api",
            "add",
            listener("inbound:10.42.0.31:5000", "requestHeadersTimeout"),
        ),
        (
            "api",
            "add",
            listener("inbound:10.42.0.31:5000", ROUTE_IDLE),
        ),
        (
            "api",
            "replace",
            listener("inbound:10.42.0.31:5000", HCM_IDLE),
        ),
        // backend: its HTTP inbound, and redis (TCP) gets http.idleTimeout 24s, not tcp's 22s.
        (
            "backend",
            "add",
            cluster("localhost:3001", "maxConnectionDuration"),
        ),
        (
            "backend",
            "add",
            cluster("localhost:3001", "maxStreamDuration"),
        ),
        (
            "backend",
            "add",
            listener("inbound:10.42.0.30:3001", "requestHeadersTimeout"),
        ),
        (
            "backend",
            "add",
            listener("inbound:10.42.0.30:3001", ROUTE_IDLE),
        ),
        (
            "backend",
            "replace",
            listener("inbound:10.42.0.30:3001", HCM_IDLE),
        ),
        (
            "backend",
            "replace",
            listener("outbound:10.43.83.105:6379", "idleTimeout"),
        ),
        // frontend: backend (HTTP, timeout-backend without maxStreamDuration), its inbound and
        // api (gRPC: the stream idle timeout moves to the route, maxStreamDuration is lost);
        // redis (timeout-frontend-redis, TCP) is exact.
        (
            "frontend",
            "add",
            cluster("backend", "maxConnectionDuration"),
        ),
        ("frontend", "add", cluster("backend", "maxStreamDuration")),
        (
            "frontend",
            "add",
            cluster("localhost:8080", "maxConnectionDuration"),
        ),
        (
            "frontend",
            "add",
            cluster("localhost:8080", "maxStreamDuration"),
        ),
        (
            "frontend",
            "add",
            listener("inbound:10.42.0.29:8080", "requestHeadersTimeout"),
        ),
        (
            "frontend",
            "add",
            listener("inbound:10.42.0.29:8080", ROUTE_IDLE),
        ),
        (
            "frontend",
            "add",
            listener("outbound:10.43.13.71:3001", "requestHeadersTimeout"),
        ),
        (
            "frontend",
            "add",
            listener("outbound:10.43.13.71:3001", ROUTE_IDLE),
        ),
        (
            "frontend",
            "add",
            listener("outbound:10.43.50.10:5000", "requestHeadersTimeout"),
        ),
        (
            "frontend",
            "add",
            listener("outbound:10.43.50.10:5000", ROUTE_IDLE),
        ),
        ("frontend", "remove", cluster("api", "maxStreamDuration")),
        (
            "frontend",
            "replace",
            listener("inbound:10.42.0.29:8080", HCM_IDLE),
        ),
        (
            "frontend",
            "replace",
            listener("outbound:10.43.13.71:3001", HCM_IDLE),
        ),
        (
            "frontend",
            "replace",
            listener("outbound:10.43.50.10:5000", "streamIdleTimeout"),
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

const LISTENER: &str = "type.googleapis.com~1envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com~1envoy.config.cluster.v3.Cluster";
const HCM_IDLE: &str = "commonHttpProtocolOptions/idleTimeout";
const ROUTE_IDLE: &str = "routeConfig/virtualHosts/0/routes/0/route/idleTimeout";

/// The path of `rest` in the first filter of listener `name`.
fn listener(name: &str, rest: &str) -> String {
    format!("/{LISTENER}/{name}/filterChains/0/filters/0/typedConfig/{rest}")
}

/// The path of `field` in the upstream common HTTP options of cluster `name`.
fn cluster(name: &str, field: &str) -> String {
    format!(
        "/{CLUSTER}/{name}/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/{field}"
    )
}
