//! MeshProxyPatch and the old ProxyTemplate on the kuma-demo topology: the transition seed's
//! "ProxyTemplate -> MeshProxyPatch" example (000_c0dd8fb0a11dab1f.txt), every operation kind,
//! ProxyTemplate ordering and selection, and errors naming the policy and the resource.

use serde_json::{json, Value};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};
use umbra_xds::generate::GenerateError;
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load, snapshot, try_snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// The kuma-demo Mesh and Dataplanes (from `proxy-patch.yaml`) plus `policies` (YAML).
fn topology_with(policies: &str) -> Vec<Resource> {
    let mut resources: Vec<Resource> = load("proxy-patch.yaml")
        .into_iter()
        .filter(|r| matches!(r.ty(), ResourceType::Mesh | ResourceType::Dataplane))
        .collect();
    resources.extend(Resource::all_from_bytes(policies.as_bytes()).unwrap());
    resources
}

fn doc(snap: &Snapshot) -> Value {
    snap.to_document().unwrap()
}

#[test]
fn seed_proxy_template_to_mesh_proxy_patch() {
    let resources = load("proxy-patch.yaml");
    let live = snapshot(&resources, "frontend", View::Live);
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (doc(&live), doc(&shadow));
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    let patch_json = serde_json::to_value(&patch).unwrap();
    // Exactly the seed's operation.
    assert_eq!(
        patch_json,
        json!([{
            "op": "add",
            "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/test-cluster",
            "value": {"connectTimeout": "5s", "name": "test-cluster", "type": "STATIC"}
        }])
    );
    golden("proxy-patch.shadow-diff.json", &patch_json);
    envoy_validates(&live);
    envoy_validates(&shadow);

    // The policy targets the frontend only: the redis DPP's diff is empty.
    let redis_live = snapshot(&resources, "redis", View::Live);
    let redis_shadow = snapshot(&resources, "redis", View::Shadow);
    let redis_patch = diff(&doc(&redis_live), &doc(&redis_shadow));
    assert_eq!(serde_json::to_value(&redis_patch).unwrap(), json!([]));
}

#[test]
fn mesh_proxy_patch_operations() {
    let resources = load("proxy-patch-ops.yaml");
    let frontend = snapshot(&resources, "frontend", View::Live);
    let d = doc(&frontend);
    golden("proxy-patch-ops.frontend.json", &d);
    envoy_validates(&frontend);

    let clusters = &d[CLUSTER];
    // mesh-wide's Add, then frontend's jsonPatch on it (appendModifications concatenated,
    // least specific policy first).
    assert_eq!(
        clusters["test-cluster"],
        json!({"name": "test-cluster", "connectTimeout": "6s", "type": "STATIC"})
    );
    // Merge of `value`: duration replaced, wrapper set, repeated field appended to (empty here).
    let backend = &clusters["backend_kuma-demo_svc_3001"];
    assert_eq!(backend["connectTimeout"], "7s");
    assert_eq!(backend["perConnectionBufferLimitBytes"], 32768);
    assert_eq!(
        backend["circuitBreakers"],
        json!({"thresholds": [{"maxConnections": 100}]})
    );
    assert_eq!(backend["type"], "EDS", "fields not in the value stay");
    // jsonPatches on the inbound cluster: intermediate objects created, field removed.
    let inbound = &clusters["localhost:8080"];
    assert_eq!(
        inbound["commonLbConfig"],
        json!({"healthyPanicThreshold": {"value": 25.0}})
    );
    assert!(inbound.get("altStatName").is_none());
    assert_eq!(inbound["connectTimeout"], "10s");
    // Remove: the redis cluster and its outbound listener are gone; Kuma leaves the EDS
    // resource (nothing references it).
    assert!(clusters.get("redis_kuma-demo_svc_6379").is_none());
    assert!(d[LISTENER].get("outbound:10.43.83.105:6379").is_none());
    assert!(d[ENDPOINTS].get("redis_kuma-demo_svc_6379").is_some());

    let listeners = &d[LISTENER];
    let hcm = |l: &str| listeners[l]["filterChains"][0]["filters"][0]["typedConfig"].clone();
    let inbound_listener = &listeners["inbound:10.42.0.29:8080"];
    assert_eq!(inbound_listener["perConnectionBufferLimitBytes"], 65536);
    // AddBefore router (mesh-wide), then a jsonPatch of the added filter's typedConfig.
    assert_eq!(
        hcm("inbound:10.42.0.29:8080")["httpFilters"],
        json!([
            {"name": "envoy.filters.http.buffer", "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                "maxRequestBytes": 2048}},
            {"name": "envoy.filters.http.router", "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
        ])
    );
    // Outbound listeners have no buffer filter (match.origin: inbound).
    assert_eq!(
        hcm("outbound:10.43.13.71:3001")["httpFilters"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // networkFilter Patch merged into the HCM typedConfig.
    let backend_hcm = hcm("outbound:10.43.13.71:3001");
    assert_eq!(backend_hcm["streamIdleTimeout"], "11s");
    assert_eq!(backend_hcm["statPrefix"], "backend_kuma-demo_svc_3001");
    // virtualHost patches: by route configuration name (merge), by origin and name (jsonPatch).
    assert_eq!(
        backend_hcm["routeConfig"]["virtualHosts"][0]["retryPolicy"],
        json!({"retryOn": "5xx", "numRetries": 3})
    );
    let frontend_vh = &hcm("outbound:10.43.138.50:8080")["routeConfig"]["virtualHosts"][0];
    assert_eq!(
        frontend_vh["routes"][0]["route"]["retryPolicy"],
        json!({"retryOn": "gateway-error"})
    );
    // The inbound virtual host of the same name is not an outbound one.
    assert!(
        hcm("inbound:10.42.0.29:8080")["routeConfig"]["virtualHosts"][0]["routes"][0]["route"]
            .get("retryPolicy")
            .is_none()
    );

    // The backend DPP only gets the mesh-wide policy.
    let backend_dp = snapshot(&resources, "backend", View::Live);
    let b = doc(&backend_dp);
    golden("proxy-patch-ops.backend.json", &b);
    envoy_validates(&backend_dp);
    assert_eq!(b[CLUSTER]["test-cluster"]["connectTimeout"], "5s");
    let filters = &b[LISTENER]["inbound:10.42.0.30:3001"]["filterChains"][0]["filters"][0]
        ["typedConfig"]["httpFilters"];
    assert_eq!(filters[0]["typedConfig"]["maxRequestBytes"], 1024);
    assert_eq!(filters[1]["name"], "envoy.filters.http.router");
    // TCP inbounds have no HCM: the redis DPP only gets test-cluster.
    let redis = snapshot(&resources, "redis", View::Live);
    let r = doc(&redis);
    assert!(r[CLUSTER].get("test-cluster").is_some());
    let no_patch = snapshot(&load("proxy-patch.yaml"), "redis", View::Live);
    let mut without_test_cluster = r.clone();
    without_test_cluster[CLUSTER]
        .as_object_mut()
        .unwrap()
        .remove("test-cluster");
    assert_eq!(without_test_cluster, doc(&no_patch));
}

#[test]
fn proxy_template_modifications_run_after_mesh_proxy_patch() {
    let resources = load("proxy-patch-template.yaml");
    let live = snapshot(&resources, "frontend", View::Live);
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (doc(&live), doc(&shadow));
    golden("proxy-patch-template.frontend.json", &live_doc);
    envoy_validates(&live);
    envoy_validates(&shadow);

    // The shadow MeshProxyPatch adds mpp-cluster at 8s; the template (applied after it, though
    // superseded in the Shadow view, as Kuma 2.7 still applies it) patches it to 9s.
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(
        serde_json::to_value(&patch).unwrap(),
        json!([{
            "op": "add",
            "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/mpp-cluster",
            "value": {"connectTimeout": "9s", "name": "mpp-cluster", "type": "STATIC"}
        }])
    );

    let clusters = &live_doc[CLUSTER];
    // The more specific template wins: no catch-all-cluster on the frontend.
    assert!(clusters.get("catch-all-cluster").is_none());
    // The raw resource, then a patch matching its origin.
    assert_eq!(
        clusters["raw-cluster"],
        json!({"name": "raw-cluster", "connectTimeout": "3s", "type": "STATIC"})
    );
    let listeners = &live_doc[LISTENER];
    let hcm = |l: &str| listeners[l]["filterChains"][0]["filters"][0]["typedConfig"].clone();
    let names: Vec<Value> = hcm("inbound:10.42.0.29:8080")["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].clone())
        .collect();
    assert_eq!(
        names,
        vec![
            json!("envoy.filters.http.cors"),
            json!("envoy.filters.http.router")
        ]
    );
    let vhs = &hcm("outbound:10.43.13.71:3001")["routeConfig"]["virtualHosts"];
    assert_eq!(vhs.as_array().unwrap().len(), 2);
    assert_eq!(vhs[1]["name"], "extra");
    assert_eq!(
        listeners["outbound:10.43.13.71:3001"]["perConnectionBufferLimitBytes"],
        4096
    );
    assert!(listeners["outbound:10.43.138.50:8080"]
        .get("perConnectionBufferLimitBytes")
        .is_none());
    // addAfter a filter that is not there: nothing.
    for l in listeners.as_object().unwrap().values() {
        assert_eq!(l["filterChains"][0]["filters"].as_array().unwrap().len(), 1);
    }

    // Other DPPs get the catch-all template.
    for dp in ["backend", "redis"] {
        let d = doc(&snapshot(&resources, dp, View::Live));
        assert_eq!(
            d[CLUSTER]["catch-all-cluster"]["connectTimeout"], "1s",
            "{dp}"
        );
        assert!(d[CLUSTER].get("raw-cluster").is_none(), "{dp}");
    }
}

fn policy_error(err: GenerateError) -> (String, String, String) {
    let GenerateError::Policy {
        policy,
        resource,
        reason,
    } = err
    else {
        panic!("not a policy error: {err}");
    };
    (policy, resource, reason)
}

#[test]
fn json_patch_on_a_missing_path_names_policy_and_resource() {
    let resources = topology_with(
        r#"
type: MeshProxyPatch
mesh: default
name: mesh-wide
spec:
  targetRef:
    kind: Mesh
  default:
    appendModifications:
      - cluster:
          operation: Patch
          match:
            origin: outbound
          value: 'connectTimeout: 3s'
---
type: MeshProxyPatch
mesh: default
name: broken-patch
labels:
  kuma.io/effect: shadow
spec:
  targetRef:
    kind: MeshService
    name: frontend_kuma-demo_svc_8080
  default:
    appendModifications:
      - cluster:
          operation: Patch
          match:
            name: backend_kuma-demo_svc_3001
          jsonPatches:
            - op: replace
              path: /circuitBreakers/thresholds/0/maxConnections
              value: 1
"#,
    );
    // The Live view does not see the shadow policy.
    let live = try_snapshot(&resources, "frontend", View::Live).unwrap();
    envoy_validates(&live);
    let (policy, resource, reason) =
        policy_error(try_snapshot(&resources, "frontend", View::Shadow).unwrap_err());
    assert_eq!(policy, "MeshProxyPatch/broken-patch");
    assert_eq!(resource, format!("{CLUSTER}/backend_kuma-demo_svc_3001"));
    assert!(
        reason.starts_with("appendModifications[0]: jsonPatches[0]: replace operation")
            && reason.contains("missing path"),
        "{reason}"
    );
    // Other DPPs are unaffected.
    try_snapshot(&resources, "backend", View::Shadow).unwrap();
}

#[test]
fn invalid_results_are_errors_not_panics() {
    let cases = [
        (
            // A JSON patch producing a field Envoy does not have.
            "cluster:\n          operation: Patch\n          match:\n            name: localhost:8080\n          jsonPatches:\n            - op: add\n              path: /noSuchField\n              value: 1",
            format!("{CLUSTER}/localhost:8080"),
            "noSuchField",
        ),
        (
            // A value that is not a Cluster.
            "cluster:\n          operation: Add\n          value: |\n            name: bad\n            connectTimeout: soon",
            format!("{CLUSTER}/bad"),
            "value is not a valid envoy.config.cluster.v3.Cluster",
        ),
        (
            // A filter patch whose typedConfig type differs from the filter's.
            "networkFilter:\n          operation: Patch\n          match:\n            name: envoy.filters.network.http_connection_manager\n            listenerName: inbound:10.42.0.29:8080\n          value: |\n            name: x\n            typedConfig:\n              '@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy\n              statPrefix: x",
            format!("{LISTENER}/inbound:10.42.0.29:8080"),
            "different",
        ),
        (
            // A virtual host patch producing an invalid message (domains is a list).
            "virtualHost:\n          operation: Patch\n          jsonPatches:\n            - op: replace\n              path: /domains\n              value: 7",
            format!("{LISTENER}/inbound:10.42.0.29:8080"),
            "VirtualHost",
        ),
    ];
    for (modification, resource, reason_part) in cases {
        let resources = topology_with(&format!(
            "type: MeshProxyPatch\nmesh: default\nname: bad\nspec:\n  targetRef:\n    kind: Mesh\n  default:\n    appendModifications:\n      - {modification}\n"
        ));
        let (p, r, reason) =
            policy_error(try_snapshot(&resources, "frontend", View::Live).unwrap_err());
        assert_eq!(p, "MeshProxyPatch/bad", "{modification}");
        assert_eq!(r, resource, "{modification}: {reason}");
        assert!(reason.contains(reason_part), "{modification}: {reason}");
    }
}

#[test]
fn proxy_template_errors_name_the_template() {
    let resources = topology_with(
        r#"
type: ProxyTemplate
mesh: default
name: broken-template
selectors:
  - match:
      kuma.io/service: '*'
conf:
  imports:
    - default-proxy
  modifications:
    - listener:
        operation: patch
        match:
          origin: inbound
        value: |
          perConnectionBufferLimitBytes: lots
"#,
    );
    let (policy, resource, reason) =
        policy_error(try_snapshot(&resources, "redis", View::Live).unwrap_err());
    assert_eq!(policy, "ProxyTemplate/broken-template");
    assert_eq!(resource, format!("{LISTENER}/*"));
    assert!(
        reason.starts_with("conf.modifications[0]: value is not a valid"),
        "{reason}"
    );
}

#[test]
fn generation_with_patches_is_deterministic() {
    for file in ["proxy-patch-ops.yaml", "proxy-patch-template.yaml"] {
        let resources = load(file);
        let a = snapshot(&resources, "frontend", View::Shadow);
        let b = snapshot(&resources, "frontend", View::Shadow);
        assert_eq!(doc(&a), doc(&b), "{file}");
        for t in [LISTENER, CLUSTER] {
            assert_eq!(a.version(t).unwrap(), b.version(t).unwrap(), "{file}");
        }
    }
}

/// MeshProxyPatch and the ProxyTemplate are two plugins; the origin of what the first adds
/// (`mesh-proxy-patch`) is still known to the second, as in Kuma's `ResourceSet`.
#[test]
fn proxy_template_sees_the_origin_of_what_mesh_proxy_patch_added() {
    let resources = topology_with(
        r#"
type: MeshProxyPatch
name: mpp
mesh: default
spec:
  targetRef:
    kind: Mesh
  default:
    appendModifications:
    - cluster:
        operation: Add
        value: |
          name: added-by-mpp
          connectTimeout: 5s
          type: STATIC
---
type: ProxyTemplate
mesh: default
name: pt
selectors:
- match:
    kuma.io/service: '*'
conf:
  imports:
  - default-proxy
  modifications:
  - cluster:
      operation: patch
      match:
        origin: mesh-proxy-patch
      value: |
        connectTimeout: 9s
  - cluster:
      operation: patch
      match:
        origin: outbound
      value: |
        connectTimeout: 7s
"#,
    );
    let live = snapshot(&resources, "frontend", View::Live);
    envoy_validates(&live);
    let clusters = &doc(&live)[CLUSTER];
    assert_eq!(clusters["added-by-mpp"]["connectTimeout"], "9s");
    assert_eq!(
        clusters["backend_kuma-demo_svc_3001"]["connectTimeout"],
        "7s"
    );
    assert_eq!(clusters["localhost:8080"]["connectTimeout"], "10s");
}
