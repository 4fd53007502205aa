//! Gateways (issue 38, `tests/data/gateways.yaml`), as far as Umbra generates them today: a
//! delegated gateway in an mTLS mesh gets its outbounds over mTLS (checked by the real Envoy),
//! and for a builtin gateway, which Umbra does not generate yet, every policy and route whose
//! top-level `targetRef` is its MeshGateway is named under `notGenerated`, never silently
//! dropped.

use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};

mod common;
use common::{envoy_validates, load, snapshot};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

fn not_generated(resources: &[Resource], dp: &str) -> Vec<(String, String)> {
    let dp = resources
        .iter()
        .find(|r| r.meta.name == dp)
        .and_then(Resource::as_dataplane)
        .unwrap();
    PolicySet::build("default", resources, View::Live)
        .not_generated(dp)
        .into_iter()
        .map(|n| (n.type_name, n.name))
        .collect()
}

#[test]
fn a_delegated_gateway_gets_its_outbounds_over_mtls() {
    let resources = load("gateways.yaml");
    let snap = snapshot(&resources, "edge", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    assert!(doc[LISTENER]
        .as_object()
        .unwrap()
        .contains_key("outbound:127.0.0.1:10001"));
    assert_eq!(
        doc[CLUSTER]["backend"]["transportSocket"]["typedConfig"]["sni"],
        "backend{mesh=default}"
    );
    assert!(
        not_generated(&resources, "edge").is_empty(),
        "nothing concerns a delegated gateway that Umbra leaves out"
    );
}

#[test]
fn policies_targeting_a_builtin_gateway_are_named_not_generated() {
    let resources = load("gateways.yaml");
    assert_eq!(
        not_generated(&resources, "ingress-gw"),
        [
            ("MeshGateway".to_owned(), "public".to_owned()),
            ("MeshHTTPRoute".to_owned(), "public-to-backend".to_owned()),
            ("MeshTimeout".to_owned(), "public-timeout".to_owned()),
        ]
    );
    // A policy targeting the MeshGateway does not concern other DPPs.
    assert!(not_generated(&resources, "backend").is_empty());
}
