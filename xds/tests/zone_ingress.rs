//! Multi-zone generation (issue 18): a sidecar's EDS with another zone's ingress as an endpoint
//! (`tests/data/multi-zone-1.yaml`), and a ZoneIngress's SNI passthrough config, live and with
//! a shadow MeshHTTPRoute split (`tests/data/multi-zone-2.yaml`). Every config is checked by the
//! real Envoy.

use serde_json::{json, Value};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_core::zone_ingress::ZoneIngressSpec;
use umbra_xds::context::{MeshContext, Zones};
use umbra_xds::diff::{apply, diff};
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::ingress::{generate_ingress, IngressMesh};
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

fn mesh_of(resources: &[Resource]) -> umbra_core::mesh::MeshSpec {
    resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap()
}

fn ingresses(resources: &[Resource]) -> Vec<&ZoneIngressSpec> {
    resources
        .iter()
        .filter_map(Resource::as_zone_ingress)
        .collect()
}

fn context(resources: &[Resource], zone: &str) -> MeshContext {
    let zis = ingresses(resources);
    MeshContext::build_in_zone(
        "default",
        &mesh_of(resources),
        resources.iter().filter_map(Resource::as_dataplane),
        Some(Zones {
            local: zone,
            ingresses: &zis,
        }),
    )
}

/// A rendered locality: zone, priority, and each endpoint's address and weight.
type Locality = (Value, Value, Vec<(Value, Value)>);

/// The frontend's live config in zone-1 (checked by Envoy).
fn frontend_config(resources: &[Resource]) -> Value {
    let ctx = context(resources, "zone-1");
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "frontend")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let policies = PolicySet::build("default", resources, View::Live);
    let snap = generate(
        Proxy {
            name: "frontend",
            dataplane: dp,
            admin: None,
            dns: None,
        },
        &ctx,
        &policies,
    )
    .unwrap();
    envoy_validates(&snap);
    snap.to_document().unwrap()
}

#[test]
fn remote_ingresses_are_endpoints_in_their_zone() {
    let resources = load("multi-zone-1.yaml");
    let doc = frontend_config(&resources);
    let cla = &doc[ENDPOINTS]["backend"];
    let localities: Vec<Locality> = cla["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["locality"]["zone"].clone(),
                l.get("priority").cloned().unwrap_or(json!(0)),
                l["lbEndpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        (
                            e["endpoint"]["address"]["socketAddress"]["address"].clone(),
                            e["loadBalancingWeight"].clone(),
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        localities,
        [
            // Local: weight = the number of remote ingresses (one reachable).
            (
                json!("zone-1"),
                json!(0),
                vec![(json!("127.0.0.2"), json!(1))]
            ),
            // zone-2's ingress, once per tag set, weighted by instances; priority 1
            // (locality-aware); zone-3's has no public address, mesh `other` is not ours.
            (
                json!("zone-2"),
                json!(1),
                vec![
                    (json!("192.168.2.1"), json!(2)),
                    (json!("192.168.2.1"), json!(1))
                ]
            ),
        ]
    );
    // The outbound cluster is mTLS with Kuma's SNI: what the remote ingress routes on.
    let sni = &doc[CLUSTER]["backend"]["transportSocket"]["typedConfig"]["sni"];
    assert_eq!(sni, "backend{mesh=default}");
    golden("multi-zone-1.frontend.json", &doc);
}

#[test]
fn without_mtls_or_outside_a_multi_zone_deployment_there_is_no_remote_endpoint() {
    let mut resources = load("multi-zone-1.yaml");
    let single = MeshContext::build(
        "default",
        &mesh_of(&resources),
        resources.iter().filter_map(Resource::as_dataplane),
    );
    assert_eq!(single.endpoints["backend"].len(), 1);
    assert!(single.endpoints["backend"][0].locality.is_none());
    for r in &mut resources {
        if let umbra_core::resource::Spec::Mesh(m) = &mut r.spec {
            m.mtls = None;
        }
    }
    let ctx = context(&resources, "zone-1");
    assert_eq!(
        ctx.endpoints["backend"].len(),
        1,
        "cross-zone needs mTLS (SNI)"
    );
}

fn ingress_snapshot(resources: &[Resource], view: View) -> Snapshot {
    let ctx = context(resources, "zone-2");
    let policies = PolicySet::build("default", resources, view);
    let zi = resources
        .iter()
        .find(|r| r.ty() == ResourceType::ZoneIngress)
        .unwrap();
    generate_ingress(
        &zi.meta.name,
        zi.as_zone_ingress().unwrap(),
        &[IngressMesh {
            ctx: &ctx,
            policies: &policies,
        }],
    )
}

fn server_names(doc: &Value) -> Vec<String> {
    doc[LISTENER]["inbound:127.0.0.20:10001"]["filterChains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["filterChainMatch"]["serverNames"][0]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn the_ingress_passes_connections_through_by_sni() {
    let resources = load("multi-zone-2.yaml");
    let live = ingress_snapshot(&resources, View::Live);
    let shadow = ingress_snapshot(&resources, View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    let listener = &live[LISTENER]["inbound:127.0.0.20:10001"];
    assert_eq!(
        listener["listenerFilters"][0]["name"],
        "envoy.filters.listener.tls_inspector"
    );
    let chain = &listener["filterChains"][0];
    assert_eq!(chain["filterChainMatch"]["transportProtocol"], "tls");
    assert_eq!(server_names(&live), ["backend{mesh=default}"]);
    assert_eq!(
        chain["filters"][0]["typedConfig"]["cluster"],
        "default:backend"
    );
    assert!(
        chain.get("transportSocket").is_none(),
        "mTLS is not terminated"
    );
    let eps = &live[ENDPOINTS]["default:backend"]["endpoints"][0];
    assert_eq!(eps["locality"]["zone"], "zone-2");
    assert_eq!(eps["lbEndpoints"].as_array().unwrap().len(), 3);
    assert!(live[CLUSTER]["default:backend"]
        .get("lbSubsetConfig")
        .is_none());
    golden("multi-zone-2.ingress.live.json", &live);

    // The shadow split adds one SNI per subset, matched on the version metadata.
    assert_eq!(
        server_names(&shadow),
        [
            "backend{mesh=default,version=v1}",
            "backend{mesh=default,version=v2}",
            "backend{mesh=default}"
        ]
    );
    let chains = &shadow[LISTENER]["inbound:127.0.0.20:10001"]["filterChains"];
    assert_eq!(
        chains[0]["filters"][0]["typedConfig"]["metadataMatch"],
        json!({"filterMetadata": {"envoy.lb": {"version": "v1"}}})
    );
    assert_eq!(
        shadow[CLUSTER]["default:backend"]["lbSubsetConfig"],
        json!({"fallbackPolicy": "ANY_ENDPOINT", "subsetSelectors": [{"keys": ["version"], "fallbackPolicy": "NO_FALLBACK"}]})
    );
    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "multi-zone-2.ingress.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}

#[test]
fn an_ingress_with_nothing_to_offer_answers_who_it_is() {
    let mut resources = load("multi-zone-2.yaml");
    resources.retain(|r| r.ty() != ResourceType::Dataplane);
    for r in &mut resources {
        if let umbra_core::resource::Spec::ZoneIngress(zi) = &mut r.spec {
            zi.available_services.clear();
        }
    }
    let snap = ingress_snapshot(&resources, View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let filter = &doc[LISTENER]["inbound:127.0.0.20:10001"]["filterChains"][0]["filters"][0];
    assert_eq!(filter["name"], "envoy.filters.network.direct_response");
    assert_eq!(
        filter["typedConfig"]["response"]["inlineString"],
        r#"{"proxy":"ingress","zone":"zone-2"}"#
    );
}

#[test]
fn mesh_load_balancing_strategy_locality_awareness_uses_the_zones() {
    let mut resources = load("multi-zone-1.yaml");
    // Without the Mesh's locality-aware flag: a MeshLoadBalancingStrategy alone prefers the
    // local zone; with cross-zone failover to zone-3 only, zone-2's ingress is dropped.
    for r in &mut resources {
        if let umbra_core::resource::Spec::Mesh(m) = &mut r.spec {
            m.routing = None;
        }
    }
    let priorities = |resources: &[Resource]| -> Vec<(String, u64)> {
        frontend_config(resources)[ENDPOINTS]["backend"]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["locality"]["zone"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    l.get("priority").and_then(Value::as_u64).unwrap_or(0),
                )
            })
            .collect()
    };
    assert_eq!(
        priorities(&resources),
        [("zone-1".into(), 0), ("zone-2".into(), 0)],
        "no policy, no flag: one priority"
    );
    let mut with_lb = resources.clone();
    with_lb.push(Resource::from_bytes(b"type: MeshLoadBalancingStrategy\nmesh: default\nname: lb\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {loadBalancer: {type: RoundRobin}}\n").unwrap());
    assert_eq!(
        priorities(&with_lb),
        [("zone-1".into(), 0), ("zone-2".into(), 1)],
        "a MeshLoadBalancingStrategy prefers the local zone"
    );
    let mut failover = resources.clone();
    failover.push(Resource::from_bytes(b"type: MeshLoadBalancingStrategy\nmesh: default\nname: lb\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      localityAwareness:\n        crossZone:\n          failover:\n          - to: {type: Only, zones: [zone-3]}\n").unwrap());
    assert_eq!(
        priorities(&failover),
        [("zone-1".into(), 0)],
        "zone-2 is not a failover target"
    );
}
