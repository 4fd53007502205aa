//! ProxyTemplate -> MeshProxyPatch equivalence: templates that do not overlap (one per
//! service), using every modification kind and a raw cluster, convert with an empty diff (the
//! same engine runs both, MeshProxyPatch last among the plugins, just before where the
//! ProxyTemplate ran); raw resources MeshProxyPatch cannot add as they were leave exactly the
//! announced changes.

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{kuma_demo, KUMA_DEMO_DPPS as DPPS};
use super::{converts, document, equivalence, migrated, ops, output_spec, scenario, CLUSTER};

#[test]
fn proxy_templates_convert_with_an_empty_diff() {
    let resources = scenario(&format!(
        "{}---
type: ProxyTemplate
mesh: default
name: frontend-template
selectors:
- match:
    kuma.io/service: frontend
conf:
  imports:
  - default-proxy
  resources:
  - name: raw-cluster
    version: v1
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      name: raw-cluster
      connectTimeout: 2s
      type: STATIC
  modifications:
  - cluster:
      operation: patch
      match:
        name: raw-cluster
        origin: proxy-template-raw
      value: |
        connectTimeout: 3s
  - httpFilter:
      operation: addFirst
      match:
        listenerName: inbound:10.42.0.29:8080
      value: |
        name: envoy.filters.http.cors
        typedConfig:
          '@type': type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors
  - virtualHost:
      operation: add
      match:
        origin: outbound
        routeConfigurationName: outbound:backend
      value: |
        name: extra
        domains:
        - extra.example.com
        routes:
        - match:
            prefix: /
          route:
            cluster: backend
  - listener:
      operation: patch
      match:
        origin: outbound
        tags:
          kuma.io/service: backend
      value: |
        perConnectionBufferLimitBytes: 4096
  - networkFilter:
      operation: addAfter
      match:
        name: envoy.filters.network.no_such_filter
      value: |
        name: envoy.filters.network.never_added
---
type: ProxyTemplate
mesh: default
name: backend-template
selectors:
- match:
    kuma.io/service: backend
conf:
  imports:
  - default-proxy
  modifications:
  - cluster:
      operation: add
      value: |
        name: extra-cluster
        connectTimeout: 1s
        type: STATIC
  - cluster:
      operation: patch
      match:
        origin: outbound
      value: |
        connectTimeout: 7s
  - cluster:
      operation: remove
      match:
        name: extra-cluster
",
        kuma_demo("")
    ));
    let report = converts(&resources, DPPS, &[ResourceType::MeshProxyPatch]);
    assert_eq!(report.ops, []);
    // Every note is about semantics or dropped fields without an effect here.
    assert!(report.notes().all(|n| n.affects.is_empty()));

    let frontend = output_spec(&report, ResourceType::MeshProxyPatch, "frontend-template");
    let mods = &frontend["default"]["appendModifications"];
    assert_eq!(mods.as_array().map(Vec::len), Some(6));
    assert_eq!(mods[0]["cluster"]["operation"], "Add");
    assert_eq!(
        mods[1]["cluster"]["match"],
        json!({"name": "raw-cluster", "origin": "mesh-proxy-patch"})
    );
    assert_eq!(mods[2]["httpFilter"]["operation"], "AddFirst");
    // The modifications had an effect (the diff is empty because both did the same).
    let doc = document(&migrated(&resources, &report.conversions), "frontend");
    assert_eq!(
        doc["type.googleapis.com/envoy.config.cluster.v3.Cluster"]["raw-cluster"]["connectTimeout"],
        "3s"
    );
}

#[test]
fn raw_resources_meshproxypatch_cannot_add_as_they_were_leave_the_announced_changes() {
    let resources = scenario(&format!(
        "{}---
type: ProxyTemplate
mesh: default
name: raw-template
selectors:
- match:
    kuma.io/service: redis
conf:
  imports:
  - default-proxy
  resources:
  - name: raw-route
    resource: |
      '@type': type.googleapis.com/envoy.config.route.v3.RouteConfiguration
      name: raw-route
  - name: unnamed
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      connectTimeout: 2s
      type: STATIC
  - name: keyed
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      name: named
      connectTimeout: 4s
      type: STATIC
",
        kuma_demo("")
    ));
    let report = equivalence(&resources, DPPS);
    let cluster = |rest: &str| format!("{CLUSTER}/{rest}");
    let expected = ops([
        // Keyed by its own name rather than the raw resource's.
        ("redis", "add", cluster("named")),
        // The cluster without a name gets the raw resource's.
        ("redis", "add", cluster("unnamed/name")),
        ("redis", "remove", cluster("keyed")),
        // The route configuration is dropped.
        (
            "redis",
            "remove",
            "/type.googleapis.com~1envoy.config.route.v3.RouteConfiguration".to_owned(),
        ),
    ]);
    assert_eq!(report.ops, expected);
    let spec = output_spec(&report, ResourceType::MeshProxyPatch, "raw-template");
    assert_eq!(
        spec["default"]["appendModifications"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}
