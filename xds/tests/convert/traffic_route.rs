//! TrafficRoute -> MeshHTTPRoute / MeshTCPRoute / MeshLoadBalancingStrategy equivalence.
//! web calls `backend` (HTTP, v1 and v2), `db` (TCP, v1 and v2) and `other` (HTTP); api calls
//! `backend` and `db`. Routes: the remaining differences are the route plugins' rebuild of
//! every outbound of the proxies a route applies to (normalizePath, legacy listener timeouts,
//! Envoy route names and shapes) and the balancer reaching the service's own cluster; the TCP
//! split is exact. Balancers of routes that send each destination to itself convert to
//! MeshLoadBalancingStrategy alone, with an empty diff.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

const LISTENER: &str = "/type.googleapis.com~1envoy.config.listener.v3.Listener";
const CLUSTER: &str = "/type.googleapis.com~1envoy.config.cluster.v3.Cluster";

const MESH_AND_DPPS: &str = r#"
type: Mesh
name: default
skipCreatingInitialPolicies: ["*"]
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.10
  inbound:
  - port: 8080
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: backend}}
  - {port: 10002, tags: {kuma.io/service: db}}
  - {port: 10003, tags: {kuma.io/service: other}}
---
type: Dataplane
mesh: default
name: api
networking:
  address: 10.0.0.20
  inbound:
  - port: 8080
    tags: {kuma.io/service: api, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: backend}}
  - {port: 10002, tags: {kuma.io/service: db}}
---
type: Dataplane
mesh: default
name: backend-v1
networking:
  address: 10.0.0.21
  inbound:
  - port: 80
    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v1}
---
type: Dataplane
mesh: default
name: backend-v2
networking:
  address: 10.0.0.22
  inbound:
  - port: 80
    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v2}
---
type: Dataplane
mesh: default
name: db-v1
networking:
  address: 10.0.0.31
  inbound:
  - port: 5432
    tags: {kuma.io/service: db, kuma.io/protocol: tcp, version: v1}
---
type: Dataplane
mesh: default
name: db-v2
networking:
  address: 10.0.0.32
  inbound:
  - port: 5432
    tags: {kuma.io/service: db, kuma.io/protocol: tcp, version: v2}
---
type: Dataplane
mesh: default
name: other
networking:
  address: 10.0.0.40
  inbound:
  - port: 80
    tags: {kuma.io/service: other, kuma.io/protocol: http}
---
type: TrafficRoute
mesh: default
name: route-all
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: '*'}
conf:
  destination: {kuma.io/service: '*'}
"#;

const ROUTES: &str = r#"
---
type: TrafficRoute
mesh: default
name: backend-canary
sources:
- match: {kuma.io/service: web}
destinations:
- match: {kuma.io/service: backend}
conf:
  loadBalancer:
    leastRequest: {choiceCount: 3}
  http:
  - match:
      path: {prefix: /api}
      headers:
        x-team: {exact: blue}
    modify:
      path: {rewritePrefix: /}
      requestHeaders:
        add: [{name: x-routed-by, value: traffic-route}]
    destination: {kuma.io/service: backend, version: v2}
  split:
  - weight: 90
    destination: {kuma.io/service: '*', version: v1}
  - weight: 10
    destination: {kuma.io/service: '*', version: v2}
---
type: TrafficRoute
mesh: default
name: db-split
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: db}
conf:
  split:
  - weight: 50
    destination: {kuma.io/service: db, version: v1}
  - weight: 50
    destination: {kuma.io/service: db, version: v2}
"#;

const BALANCERS: &str = r#"
---
type: TrafficRoute
mesh: default
name: ring-hash-all
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: '*'}
conf:
  destination: {kuma.io/service: '*'}
  loadBalancer:
    ringHash: {hashFunction: MURMUR_HASH_2, minRingSize: 64, maxRingSize: 1024}
---
type: TrafficRoute
mesh: default
name: web-to-db-least-request
sources:
- match: {kuma.io/service: web}
destinations:
- match: {kuma.io/service: db}
conf:
  destination: {kuma.io/service: db}
  loadBalancer:
    leastRequest: {choiceCount: 4}
"#;

#[test]
fn traffic_route_rebuilds_outbounds_and_keeps_the_tcp_split() {
    let scenario = scenario(&format!("{MESH_AND_DPPS}{ROUTES}"));
    let report = equivalence(&scenario, &["web", "api"]);
    assert_eq!(report.conversions.len(), old_policies(&scenario));
    assert_eq!(
        output_types(&report),
        [
            ResourceType::MeshHTTPRoute,
            ResourceType::MeshTCPRoute,
            ResourceType::MeshLoadBalancingStrategy
        ]
    );
    // route-all is the default routing: nothing replaces it.
    assert!(report.conversions[0].outputs.is_empty());
    assert_eq!(
        output_spec(&report, ResourceType::MeshHTTPRoute, "backend-canary")["to"][0]["rules"][0],
        json!({
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"},
                "headers": [{"type": "Exact", "name": "x-team", "value": "blue"}]}],
            "default": {
                "filters": [
                    {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}},
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-routed-by", "value": "traffic-route"}]}},
                ],
                "backendRefs": [{"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}, "weight": 1}],
            },
        })
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshTCPRoute, "db-split"),
        json!({"targetRef": {"kind": "Mesh"}, "to": [{
            "targetRef": {"kind": "MeshService", "name": "db"},
            "rules": [{"default": {"backendRefs": [
                {"kind": "MeshServiceSubset", "name": "db", "tags": {"version": "v1"}, "weight": 50},
                {"kind": "MeshServiceSubset", "name": "db", "tags": {"version": "v2"}, "weight": 50},
            ]}}],
        }]})
    );
    // web's backend outbound: the /api rule becomes two routes (exact /api with a full-path
    // regex rewrite, prefix /api/ with the prefix rewrite), routes get names; every HTTP
    // outbound of a proxy a route applies to (web's backend and other, api's backend) gets
    // normalizePath and loses the legacy streamIdleTimeout; the balancer also reaches the
    // plain backend cluster. The db TCP split is exact.
    let backend = "outbound:127.0.0.1:10001/filterChains/0/filters/0/typedConfig";
    let other = "outbound:127.0.0.1:10003/filterChains/0/filters/0/typedConfig";
    let routes = format!("{backend}/routeConfig/virtualHosts/0/routes");
    let mut expected: Vec<Op> = [
        ("api", "add", format!("{LISTENER}/{backend}/normalizePath")),
        (
            "api",
            "add",
            format!("{LISTENER}/{backend}/routeConfig/virtualHosts/0/routes/0/name"),
        ),
        (
            "api",
            "remove",
            format!("{LISTENER}/{backend}/streamIdleTimeout"),
        ),
        ("web", "add", format!("{CLUSTER}/backend/lbPolicy")),
        (
            "web",
            "add",
            format!("{CLUSTER}/backend/leastRequestLbConfig"),
        ),
        ("web", "add", format!("{LISTENER}/{backend}/normalizePath")),
        (
            "web",
            "remove",
            format!("{LISTENER}/{backend}/streamIdleTimeout"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/0/match/path")),
        (
            "web",
            "remove",
            format!("{LISTENER}/{routes}/0/match/prefix"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/0/name")),
        (
            "web",
            "add",
            format!("{LISTENER}/{routes}/0/route/regexRewrite"),
        ),
        (
            "web",
            "remove",
            format!("{LISTENER}/{routes}/0/route/prefixRewrite"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/1/match/headers")),
        (
            "web",
            "replace",
            format!("{LISTENER}/{routes}/1/match/prefix"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/1/name")),
        (
            "web",
            "add",
            format!("{LISTENER}/{routes}/1/requestHeadersToAdd"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/1/route/cluster")),
        (
            "web",
            "add",
            format!("{LISTENER}/{routes}/1/route/prefixRewrite"),
        ),
        (
            "web",
            "remove",
            format!("{LISTENER}/{routes}/1/route/weightedClusters"),
        ),
        ("web", "add", format!("{LISTENER}/{routes}/2")),
        ("web", "add", format!("{LISTENER}/{other}/normalizePath")),
        (
            "web",
            "add",
            format!("{LISTENER}/{other}/routeConfig/virtualHosts/0/routes/0/name"),
        ),
        (
            "web",
            "remove",
            format!("{LISTENER}/{other}/streamIdleTimeout"),
        ),
    ]
    .into_iter()
    .map(|(dp, op, path)| Op {
        dataplane: dp.to_owned(),
        op: op.to_owned(),
        path,
    })
    .collect();
    expected.sort();
    assert_eq!(report.ops, expected);
    // The notes that explain them.
    let explaining: Vec<&str> = report
        .notes()
        .filter(|n| !n.affects.is_empty())
        .map(|n| n.field.as_str())
        .collect();
    assert_eq!(
        explaining,
        [
            "conf.http[0].match.path.prefix",
            "conf.http[0].modify.path.rewritePrefix",
            "conf.loadBalancer",
            "conf",
            "conf",
        ]
    );
}

#[test]
fn traffic_route_balancers_convert_with_an_empty_diff() {
    let scenario = scenario(&format!("{MESH_AND_DPPS}{BALANCERS}"));
    let report = equivalence(&scenario, &["web", "api"]);
    assert_eq!(report.ops, []);
    assert_eq!(
        output_types(&report),
        [ResourceType::MeshLoadBalancingStrategy]
    );
    assert_eq!(
        output_spec(
            &report,
            ResourceType::MeshLoadBalancingStrategy,
            "web-to-db-least-request"
        ),
        json!({"targetRef": {"kind": "MeshService", "name": "web"}, "to": [{
            "targetRef": {"kind": "MeshService", "name": "db"},
            "default": {"loadBalancer": {"type": "LeastRequest", "leastRequest": {"choiceCount": 4}},
                "localityAwareness": {"disabled": true}},
        }]})
    );
    assert!(report.notes().all(|n| n.affects.is_empty()));
}
