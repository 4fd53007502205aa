//! MeshLoadBalancingStrategy (issue 17), on `tests/data/load-balancing.yaml`: least request
//! live, ring hash with hash policies and local zone affinity in shadow.
//! Both configs are checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn route(doc: &Value) -> &Value {
    &doc[LISTENER]["outbound:127.0.0.1:10001"]["filterChains"][0]["filters"][0]["typedConfig"]
        ["routeConfig"]["virtualHosts"][0]["routes"][0]["route"]
}

#[test]
fn least_request_live_and_ring_hash_in_shadow() {
    let resources = load("load-balancing.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    let backend = &live[CLUSTER]["backend"];
    assert_eq!(backend["lbPolicy"], "LEAST_REQUEST");
    assert_eq!(
        backend["leastRequestLbConfig"],
        json!({"choiceCount": 5, "activeRequestBias": {"defaultValue": 1.3}})
    );
    assert!(route(&live).get("hashPolicy").is_none());
    golden("load-balancing.live.json", &live);

    let backend = &shadow[CLUSTER]["backend"];
    assert_eq!(backend["lbPolicy"], "RING_HASH");
    assert_eq!(
        backend["ringHashLbConfig"],
        json!({"minimumRingSize": "64", "maximumRingSize": "1024", "hashFunction": "MURMUR_HASH_2"})
    );
    assert_eq!(
        route(&shadow)["hashPolicy"],
        json!([
            {"header": {"headerName": "x-header"}, "terminal": true},
            {"cookie": {"name": "x-cookie", "ttl": "3600s", "path": "/api"}},
            {"connectionProperties": {"sourceIp": true}},
            {"queryParameter": {"name": "query"}},
            {"filterState": {"key": "x-filter"}},
        ])
    );
    // Locality awareness is generated: the shadow policy's affinity tags make the cluster
    // weigh localities and regroup the endpoints (one zone here: the zone CP's single-zone view).
    assert_eq!(
        backend["commonLbConfig"],
        json!({"localityWeightedLbConfig": {}})
    );
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "web")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let named = PolicySet::build("default", &resources, View::Shadow).not_generated(dp);
    assert!(named.is_empty(), "{named:?}");

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "load-balancing.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}
