//! EDS resources are built once per mesh context and shared by every DPP's snapshot, in both
//! views: generation must hand out the context's allocation, with the endpoints the mesh's
//! Dataplanes give, and a MeshProxyPatch that replaces one must not touch the shared copy.

use umbra_xds::interner::Shared;

use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::Snapshot;

const MESH: &str = r"
type: Mesh
name: default
---
type: Dataplane
mesh: default
name: backend-1
networking:
  address: 10.0.0.2
  inbound:
  - port: 3001
    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v1}
---
type: Dataplane
mesh: default
name: backend-2
networking:
  address: 10.0.0.1
  inbound:
  - port: 3001
    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v2}
---
type: Dataplane
mesh: default
name: web-1
networking:
  address: 10.0.1.1
  inbound:
  - port: 8080
    tags: {kuma.io/service: web}
  outbound:
  - port: 3001
    address: 240.0.0.1
    tags: {kuma.io/service: backend}
  - port: 80
    address: 240.0.0.2
    tags: {kuma.io/service: nobody}
---
type: Dataplane
mesh: default
name: web-2
networking:
  address: 10.0.1.2
  inbound:
  - port: 8080
    tags: {kuma.io/service: web}
  outbound:
  - port: 3001
    address: 240.0.0.1
    tags: {kuma.io/service: backend}
";

fn snapshots(resources: &[Resource], ctx: &MeshContext, view: View) -> Vec<Snapshot> {
    let policies = PolicySet::build("default", resources, view);
    ["web-1", "web-2"]
        .into_iter()
        .map(|name| {
            let dp = resources
                .iter()
                .find(|r| r.ty() == ResourceType::Dataplane && r.meta.name == name)
                .and_then(Resource::as_dataplane)
                .unwrap();
            generate(
                Proxy {
                    name,
                    dataplane: dp,
                    admin: None,
                    dns: None,
                },
                ctx,
                &policies,
            )
            .unwrap()
        })
        .collect()
}

fn context(resources: &[Resource]) -> MeshContext {
    let dps = resources.iter().filter_map(Resource::as_dataplane);
    MeshContext::build("default", &Default::default(), dps)
}

#[test]
fn every_dpp_and_view_shares_the_mesh_contexts_load_assignment() {
    let resources = Resource::all_from_bytes(MESH.as_bytes()).unwrap();
    let ctx = context(&resources);
    let shared = &ctx.load_assignments["backend"];
    let live = snapshots(&resources, &ctx, View::Live);
    let shadow = snapshots(&resources, &ctx, View::Shadow);
    for snap in live.iter().chain(&shadow) {
        assert!(Shared::ptr_eq(&snap.endpoints["backend"], shared));
    }
    // Sorted by address: backend-2 (10.0.0.1) first.
    let doc = umbra_xds::render::to_json(&**shared).unwrap();
    let addresses: Vec<&str> = doc["endpoints"][0]["lbEndpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["endpoint"]["address"]["socketAddress"]["address"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(addresses, ["10.0.0.1", "10.0.0.2"]);
    // A service no Dataplane serves gets its own empty assignment, named after the cluster.
    let nobody = &live[0].endpoints["nobody"];
    assert_eq!(nobody.cluster_name, "nobody");
    assert!(nobody.endpoints.is_empty());
    assert!(!ctx.load_assignments.contains_key("nobody"));
}

#[test]
fn a_proxy_template_replacing_a_load_assignment_leaves_the_shared_one_alone() {
    // web-1 (only) gets a raw ProxyTemplate resource named like the shared EDS resource.
    let template = r"
---
type: ProxyTemplate
mesh: default
name: pin-backend
selectors:
  - match:
      kuma.io/service: web
conf:
  imports:
    - default-proxy
  resources:
    - name: backend
      version: v1
      resource: |
        '@type': type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
        clusterName: backend
";
    let mut resources = Resource::all_from_bytes(MESH.as_bytes()).unwrap();
    resources.extend(Resource::all_from_bytes(template.as_bytes()).unwrap());
    let ctx = context(&resources);
    let before = (*ctx.load_assignments["backend"]).clone();
    assert_eq!(before.endpoints[0].lb_endpoints.len(), 2);
    let live = snapshots(&resources, &ctx, View::Live);
    // Both web DPPs are selected (same service): each holds its own, empty, replacement.
    for snap in &live {
        let replaced = &snap.endpoints["backend"];
        assert!(!Shared::ptr_eq(replaced, &ctx.load_assignments["backend"]));
        assert!(replaced.endpoints.is_empty());
    }
    // The context's copy, which the next DPP and the other view start from, is unchanged.
    assert_eq!(*ctx.load_assignments["backend"], before);
    let shadow = snapshots(&resources, &ctx, View::Shadow);
    let ops = umbra_xds::diff::snapshot_diff(&live[0], &shadow[0]).unwrap();
    assert!(ops.0.is_empty(), "{ops:?}");
}

#[test]
fn a_later_context_adopts_the_earlier_ones_unchanged_load_assignments_only() {
    let resources = Resource::all_from_bytes(MESH.as_bytes()).unwrap();
    let earlier = context(&resources);
    let moved = MESH.replace("address: 10.0.0.2", "address: 10.0.0.3");
    let mut later = context(&Resource::all_from_bytes(moved.as_bytes()).unwrap());
    assert!(!Shared::ptr_eq(
        &earlier.load_assignments["web"],
        &later.load_assignments["web"]
    ));
    let backend_before = later.load_assignments["backend"].clone();
    later.share_load_assignments(&earlier.load_assignments);
    // `web` did not change: one allocation for both. `backend` did: the later one is kept.
    assert!(Shared::ptr_eq(
        &earlier.load_assignments["web"],
        &later.load_assignments["web"]
    ));
    assert!(Shared::ptr_eq(
        &later.load_assignments["backend"],
        &backend_before
    ));
    assert_ne!(
        *earlier.load_assignments["backend"],
        *later.load_assignments["backend"]
    );
}
