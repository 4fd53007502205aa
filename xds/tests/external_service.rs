//! ExternalServices on sidecars without a ZoneEgress (issue 37), on
//! `tests/data/external-services.yaml`: the clusters carry their endpoints (STRICT_DNS for
//! names, STATIC for IPs), TLS is originated with the CA a Secret holds, routes rewrite the
//! Host header, old TrafficPermissions decide which DPP reaches which ExternalService, an
//! ExternalService whose Secret is missing is named under `notGenerated`, a MeshTimeout
//! applies to an ExternalService, and a shadow ExternalService shows only in the shadow diff.
//! Every config is checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};
use umbra_xds::diff::diff;

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const CLA: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

fn route(doc: &Value, listener: &str) -> Value {
    doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]["routeConfig"]
        ["virtualHosts"][0]["routes"][0]["route"]
        .clone()
}

fn not_generated(resources: &[Resource], dp: &str, view: View) -> Vec<(String, String)> {
    let spec = resources
        .iter()
        .find(|r| r.meta.name == dp)
        .and_then(Resource::as_dataplane)
        .unwrap();
    PolicySet::build("default", resources, view)
        .not_generated(spec)
        .into_iter()
        .map(|n| (format!("{}/{}", n.type_name, n.name), n.reason))
        .collect()
}

#[test]
fn external_services_without_egress() {
    let resources = load("external-services.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    let api = snapshot(&resources, "api", View::Live);
    envoy_validates(&live);
    envoy_validates(&shadow);
    envoy_validates(&api);
    let (live, shadow, api) = (
        live.to_document().unwrap(),
        shadow.to_document().unwrap(),
        api.to_document().unwrap(),
    );

    // httpbin: a DNS name, HTTP; the endpoints in the cluster, no EDS; Host rewritten; the
    // MeshTimeout's request timeout on its route.
    let httpbin = &live[CLUSTER]["httpbin"];
    assert_eq!(httpbin["type"], "STRICT_DNS", "{httpbin}");
    assert_eq!(httpbin["dnsLookupFamily"], "V4_ONLY");
    assert!(httpbin.get("edsClusterConfig").is_none());
    assert_eq!(
        httpbin["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]
            ["socketAddress"],
        json!({"address": "httpbin.org", "portValue": 80})
    );
    assert!(
        live[CLA].get("httpbin").is_none(),
        "no EDS for an ExternalService"
    );
    assert!(
        httpbin.get("transportSocket").is_none(),
        "no mesh mTLS to the outside"
    );
    let r = route(&live, "outbound:127.0.0.1:10001");
    assert_eq!(r["autoHostRewrite"], true, "{r}");
    assert_eq!(r["timeout"], "7s", "the MeshTimeout applies: {r}");
    // The old RateLimit for web -> httpbin: on the route, through the HCM's filter.
    let hcm =
        &live[LISTENER]["outbound:127.0.0.1:10001"]["filterChains"][0]["filters"][0]["typedConfig"];
    let filters: Vec<&str> = hcm["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.http.local_ratelimit",
            "envoy.filters.http.router"
        ]
    );
    let per_route = &hcm["routeConfig"]["virtualHosts"][0]["routes"][0]["typedPerFilterConfig"]
        ["envoy.filters.http.local_ratelimit"];
    assert_eq!(per_route["tokenBucket"]["maxTokens"], 10, "{per_route}");

    // pay: TLS originated with the Secret's CA, SNI and SAN the host.
    let pay = &live[CLUSTER]["pay"];
    let m = &pay["transportSocketMatches"][0];
    assert_eq!(m["name"], "pay.example.com");
    assert_eq!(
        m["match"],
        json!({"kuma.io/external-service-name": "pay", "kuma.io/protocol": "http"})
    );
    let tls = &m["transportSocket"]["typedConfig"];
    assert_eq!(tls["sni"], "pay.example.com");
    let ca = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mtls-test-ca.pem"),
    )
    .unwrap();
    use base64::Engine as _;
    assert_eq!(
        tls["commonTlsContext"]["validationContext"]["trustedCa"]["inlineBytes"],
        base64::engine::general_purpose::STANDARD.encode(&ca)
    );
    assert_eq!(
        tls["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"],
        json!([
            {"sanType": "DNS", "matcher": {"exact": "pay.example.com"}},
            {"sanType": "IP_ADDRESS", "matcher": {"exact": "pay.example.com"}}
        ])
    );

    // db-ext: the more specific TrafficPermission lets api only: web gets Kuma's mesh cluster
    // with no endpoint, api the ExternalService (an IP: STATIC).
    assert_eq!(live[CLUSTER]["db-ext"]["type"], "EDS");
    assert_eq!(live[CLA]["db-ext"]["endpoints"], Value::Null);
    assert_eq!(api[CLUSTER]["db-ext"]["type"], "STATIC");

    // broken: its Secret is missing, so no endpoint, and it is named.
    assert_eq!(live[CLUSTER]["broken"]["type"], "EDS");
    let named = not_generated(&resources, "web", View::Live);
    assert_eq!(named.len(), 1, "{named:?}");
    assert_eq!(named[0].0, "ExternalService/broken");
    assert!(
        named[0].1.contains("Secret \"missing-ca\" not found"),
        "{}",
        named[0].1
    );

    // Shadow: pay-eu joins pay, with its own server name; nothing else changes.
    let eps = &shadow[CLUSTER]["pay"]["loadAssignment"]["endpoints"][0]["lbEndpoints"];
    assert_eq!(eps.as_array().map(Vec::len), Some(2), "{eps}");
    assert_eq!(
        shadow[CLUSTER]["pay"]["transportSocketMatches"][1]["transportSocket"]["typedConfig"]
            ["sni"],
        "api.pay.example.eu"
    );
    let patch = serde_json::to_value(diff(&live, &shadow)).unwrap();
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .all(|op| op["path"].as_str().unwrap().contains("/pay/")),
        "{patch}"
    );
    golden("external-services.live.json", &live);
    golden("external-services.shadow-diff.json", &patch);
}

#[test]
fn meshhttproute_reads_every_external_service_unfiltered() {
    // With a MeshHTTPRoute, Kuma 2.7's route path ignores TrafficPermissions for
    // ExternalServices: web reaches db-ext too.
    let mut resources = load("external-services.yaml");
    resources.extend(
        Resource::all_from_bytes(
            b"type: MeshHTTPRoute\nmesh: default\nname: to-httpbin\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: httpbin}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshService, name: httpbin}]\n",
        )
        .unwrap(),
    );
    let snap = snapshot(&resources, "web", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    assert_eq!(doc[CLUSTER]["db-ext"]["type"], "STATIC", "unfiltered");
    let r = route(&doc, "outbound:127.0.0.1:10001");
    assert_eq!(r["autoHostRewrite"], true, "{r}");
    assert_eq!(doc[CLUSTER]["httpbin"]["type"], "STRICT_DNS");
}
