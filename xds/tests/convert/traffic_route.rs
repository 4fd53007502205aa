//! TrafficRoute -> MeshHTTPRoute / MeshTCPRoute / MeshLoadBalancingStrategy equivalence.
//! web calls `backend` (HTTP, v1 and v2), `db` (TCP, v1 and v2) and `other` (HTTP); api calls
//! `backend` and `db`. Routes: the remaining differences are the route plugins' rebuild of
//! every outbound of the proxies a route applies to (normalizePath, legacy listener timeouts,
//! Envoy route names and shapes) and the balancer reaching the service's own cluster; the TCP
//! split is exact. Balancers of routes that send each destination to itself convert to
//! MeshLoadBalancingStrategy alone, with an empty diff.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, tagged_dataplane, MESH};
use super::{
    converts, equivalence, ops, output_spec, output_types, scenario, typed_config, CLUSTER,
};

/// web calls backend (HTTP), db (TCP) and other (HTTP), api calls backend and db; backend and
/// db have a v1 and a v2 Dataplane.
fn topology() -> String {
    let versioned = |name: &str, address: &str, port: u16, protocol: &str, version: &str| {
        let service = &name[..name.rfind('-').unwrap()];
        let tags =
            format!("kuma.io/service: {service}, kuma.io/protocol: {protocol}, version: {version}");
        tagged_dataplane(name, address, port, &tags, &[])
    };
    [
        MESH.to_owned(),
        dataplane(
            "web",
            "10.0.0.10",
            8080,
            "http",
            &[(10001, "backend"), (10002, "db"), (10003, "other")],
        ),
        dataplane(
            "api",
            "10.0.0.20",
            8080,
            "http",
            &[(10001, "backend"), (10002, "db")],
        ),
        versioned("backend-v1", "10.0.0.21", 80, "http", "v1"),
        versioned("backend-v2", "10.0.0.22", 80, "http", "v2"),
        versioned("db-v1", "10.0.0.31", 5432, "tcp", "v1"),
        versioned("db-v2", "10.0.0.32", 5432, "tcp", "v2"),
        dataplane("other", "10.0.0.40", 80, "http", &[]),
        ROUTE_ALL.to_owned(),
    ]
    .concat()
}

/// Kuma's default routing.
const ROUTE_ALL: &str = r#"---
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
    let scenario = scenario(&format!("{}{ROUTES}", topology()));
    let report = converts(
        &scenario,
        &["web", "api"],
        &[
            ResourceType::MeshHTTPRoute,
            ResourceType::MeshTCPRoute,
            ResourceType::MeshLoadBalancingStrategy,
        ],
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
    let rebuilt = |dp: &'static str, port: u16| {
        let outbound = format!("outbound:127.0.0.1:{port}");
        [
            (dp, "add", typed_config(&outbound, "normalizePath")),
            (dp, "add", typed_config(&outbound, &route(0, "name"))),
            (dp, "remove", typed_config(&outbound, "streamIdleTimeout")),
        ]
    };
    let backend =
        |op: &'static str, rest: &str| ("web", op, typed_config("outbound:127.0.0.1:10001", rest));
    let mut expected = ops([
        rebuilt("api", 10001),
        rebuilt("web", 10001),
        rebuilt("web", 10003),
    ]
    .concat()
    .into_iter()
    .chain([
        ("web", "add", format!("{CLUSTER}/backend/lbPolicy")),
        (
            "web",
            "add",
            format!("{CLUSTER}/backend/leastRequestLbConfig"),
        ),
        backend("add", &route(0, "match/path")),
        backend("remove", &route(0, "match/prefix")),
        backend("add", &route(0, "route/regexRewrite")),
        backend("remove", &route(0, "route/prefixRewrite")),
        backend("add", &route(1, "match/headers")),
        backend("replace", &route(1, "match/prefix")),
        backend("add", &route(1, "name")),
        backend("add", &route(1, "requestHeadersToAdd")),
        backend("add", &route(1, "route/cluster")),
        backend("add", &route(1, "route/prefixRewrite")),
        backend("remove", &route(1, "route/weightedClusters")),
        backend("add", "routeConfig/virtualHosts/0/routes/2"),
    ]));
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
    let scenario = scenario(&format!("{}{BALANCERS}", topology()));
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

/// The path of `rest` in route `index` of a connection manager's first virtual host.
fn route(index: usize, rest: &str) -> String {
    format!("routeConfig/virtualHosts/0/routes/{index}/{rest}")
}
