//! Routing (issue 16), generated for real Envoy: an old TrafficRoute live (90/10 split, an
//! `/api` rule with a prefix rewrite, least-request balancing) and its MeshHTTPRoute
//! replacement in shadow (header match, prefix match with URL rewrite, redirect, mirror,
//! 90/10 split) with a MeshTimeout on that route, and a MeshTCPRoute splitting a TCP service.
//! Both snapshots and the diff are golden files; both configs pass `envoy --mode validate`.

use serde_json::{json, Value};
use umbra_core::policies::mesh_http_route::hash_matches;
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

fn hcm(doc: &Value, listener: &str) -> Value {
    doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"].clone()
}

fn routes(doc: &Value) -> Vec<Value> {
    hcm(doc, "outbound:10.1.0.1:3001")["routeConfig"]["virtualHosts"][0]["routes"]
        .as_array()
        .unwrap()
        .clone()
}

/// The cluster of `service` with `version`, found by its endpoints.
fn cluster_with(doc: &Value, service: &str, version: &str) -> String {
    let names: Vec<&String> = doc[EDS]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, cla)| {
            name.starts_with(&format!("{service}-"))
                && cla["endpoints"][0]["lbEndpoints"]
                    .as_array()
                    .is_some_and(|eps| {
                        eps.len() == 1
                            && eps[0]["metadata"]["filterMetadata"]["envoy.lb"]["version"]
                                == version
                    })
        })
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names.len(), 1, "{service} {version}: {names:?}");
    names[0].clone()
}

#[test]
fn traffic_route_live_and_mesh_http_route_shadow() {
    let resources = load("routes.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // Live: the TrafficRoute. Its /api rule first (unnamed, legacy shape), then the split.
    let v1 = cluster_with(&live, "backend", "v1");
    let v2 = cluster_with(&live, "backend", "v2");
    let r = routes(&live);
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["match"]["prefix"], "/api");
    assert_eq!(r[0]["match"]["headers"][0]["name"], "x-team");
    assert_eq!(r[0]["route"]["prefixRewrite"], "/");
    assert_eq!(r[0]["route"]["cluster"], v2.as_str());
    assert_eq!(
        r[0]["requestHeadersToAdd"][0]["header"]["value"],
        "traffic-route"
    );
    assert!(r[0].get("name").is_none());
    assert_eq!(
        r[1]["route"]["weightedClusters"]["clusters"],
        json!([{"name": v1, "weight": 90}, {"name": v2, "weight": 10}])
    );
    assert_eq!(live[CLUSTER][&v1]["lbPolicy"], "LEAST_REQUEST");
    assert_eq!(
        live[CLUSTER][&v2]["transportSocket"]["typedConfig"]["sni"],
        "backend{mesh=default,version=v2}"
    );
    // The TCP service keeps its one cluster live.
    assert_eq!(
        hcm(&live, "outbound:10.1.0.2:5432")["cluster"],
        "db",
        "{}",
        hcm(&live, "outbound:10.1.0.2:5432")
    );

    // Shadow: the MeshHTTPRoute in Kuma's order: the exact path, the longest prefix (two
    // Envoy routes), the header match, the catch-all split. The TrafficRoute is gone.
    let r = routes(&shadow);
    let paths: Vec<Value> = r
        .iter()
        .map(|r| {
            json!([
                r["match"]["path"],
                r["match"]["prefix"],
                r["match"]["headers"][0]["name"]
            ])
        })
        .collect();
    assert_eq!(
        paths,
        [
            json!(["/old", null, null]),
            json!(["/api", null, null]),
            json!([null, "/api/", null]),
            json!([null, "/", "x-version"]),
            json!([null, "/", null]),
        ]
    );
    assert_eq!(r[0]["redirect"]["regexRewrite"]["substitution"], "/new");
    // 301 is MOVED_PERMANENTLY, the enum's zero value: proto3 JSON omits it.
    assert!(r[0]["redirect"].get("responseCode").is_none());
    assert_eq!(r[1]["route"]["regexRewrite"]["substitution"], "/");
    assert_eq!(r[2]["route"]["prefixRewrite"], "/");
    assert_eq!(
        r[2]["requestHeadersToAdd"][0]["appendAction"],
        "OVERWRITE_IF_EXISTS_OR_ADD"
    );
    assert_eq!(r[3]["route"]["cluster"], v2.as_str());
    assert_eq!(
        r[4]["route"]["weightedClusters"]["clusters"],
        json!([{"name": v1, "weight": 90}, {"name": v2, "weight": 10}])
    );
    assert_eq!(
        r[4]["route"]["requestMirrorPolicies"][0]["cluster"],
        v2.as_str()
    );
    assert_eq!(
        r[4]["name"],
        hash_matches(&[serde_json::from_value(
            json!({"path": {"value": "/", "type": "PathPrefix"}})
        )
        .unwrap()])
    );
    assert_eq!(
        hcm(&shadow, "outbound:10.1.0.1:3001")["normalizePath"],
        true
    );
    // The MeshTimeout targets the route: its routes get 3s, the others the default 15s.
    let timeouts: Vec<&Value> = r.iter().map(|r| &r["route"]["timeout"]).collect();
    assert_eq!(timeouts[1..], [&json!("3s"); 4][..], "{timeouts:?}");
    // The least-request balancing came with the TrafficRoute and goes with it.
    assert!(shadow[CLUSTER][&v1].get("lbPolicy").is_none());
    // MeshTCPRoute: db split 50/50 between its versions.
    let db = hcm(&shadow, "outbound:10.1.0.2:5432");
    let (d1, d2) = (
        cluster_with(&shadow, "db", "v1"),
        cluster_with(&shadow, "db", "v2"),
    );
    assert_eq!(
        db["weightedClusters"]["clusters"],
        json!([{"name": d1, "weight": 50}, {"name": d2, "weight": 50}])
    );

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden("routes.live.json", &live);
    golden("routes.shadow.json", &shadow);
    golden(
        "routes.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}
