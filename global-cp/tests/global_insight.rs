//! `GET /global-insight`, `GET /mesh-insights[/{mesh}]` and `GET
//! /meshes/{mesh}/service-insights[/{name}]` on the Global: counts from the store and the DPP
//! insights a zone reported, and Kuma's `GlobalInsight` schema.

use std::sync::Arc;
use umbra_global_cp::testing::app_state;

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_core::resource::Resource;
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::zones::ZoneRegistry;

async fn put(store: &dyn Store, yaml: &str, zone: Option<&str>) {
    store
        .put(Resource::from_bytes(yaml.as_bytes()).unwrap(), None, zone)
        .await
        .unwrap();
}

/// A zone-`z1` Dataplane `local` in `mesh` with `networking`.
async fn dpp(store: &dyn Store, mesh: &str, local: &str, networking: &str) {
    let yaml = format!(
        "type: Dataplane\nmesh: {mesh}\nname: {local}-h1\nlabels: {{kuma.io/zone: z1, kuma.io/display-name: {local}}}\nnetworking: {networking}\n"
    );
    put(store, &yaml, Some("z1")).await;
}

fn connected(zones: &ZoneRegistry, mesh: &str, local: &str) {
    let doc = json!({"mesh": mesh, "name": local, "connected": true, "acked": {}, "nacked": {},
        "responsesSent": 1, "connectTime": "2026-01-01T00:00:00Z"});
    assert!(zones.put_insight(
        "z1",
        &umbra_kds::resource::kds_name(mesh, local),
        umbra_kds::resource::Item::from_doc(&doc),
    ));
}

fn stat(total: u64, online: u64, offline: u64, partial: u64) -> Value {
    json!({"total": total, "online": online, "offline": offline, "partiallyDegraded": partial})
}

#[tokio::test]
async fn insights_count_meshes_dataplanes_services_and_policies() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let zones: Arc<ZoneRegistry> = Arc::default();
    let app = router(app_state(store.clone(), zones.clone()));
    for mesh in ["default", "other"] {
        let yaml = format!("type: Mesh\nname: {mesh}\nskipCreatingInitialPolicies: ['*']\n");
        put(&*store, &yaml, None).await;
    }
    let web = "{address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web}}]}";
    dpp(&*store, "default", "web-1", web).await;
    dpp(&*store, "default", "web-2", web).await; // no insight: offline
    dpp(&*store, "default", "db-1", "{address: 10.0.0.2, inbound: [{port: 80, tags: {kuma.io/service: db}, health: {ready: true}}, {port: 81, tags: {kuma.io/service: db}, health: {ready: false}}]}").await;
    dpp(
        &*store,
        "default",
        "edge",
        "{address: 10.0.0.9, gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}}",
    )
    .await;
    dpp(
        &*store,
        "other",
        "api-1",
        "{address: 10.0.0.3, inbound: [{port: 80, tags: {kuma.io/service: api}}]}",
    )
    .await;
    for (mesh, local) in [
        ("default", "web-1"),
        ("default", "db-1"),
        ("default", "edge"),
        ("other", "api-1"),
    ] {
        connected(&zones, mesh, local);
    }
    put(&*store, "type: ExternalService\nmesh: default\nname: httpbin\ntags: {kuma.io/service: httpbin}\nnetworking: {address: 'httpbin.org:443'}\n", None).await;
    put(&*store, "type: MeshTimeout\nmesh: default\nname: t1\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5s}\n", None).await;
    zones.stream_opened("z1", "c1").unwrap();

    let (s, gi, _) = call(&app, "GET", "/global-insight", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{gi}");
    assert_valid("GlobalInsight", &gi);
    assert_eq!(gi["meshes"]["total"], 2);
    assert_eq!(gi["policies"]["total"], 1);
    assert_eq!(
        gi["zones"]["controlPlanes"],
        json!({"total": 1, "online": 1})
    );
    assert_eq!(
        gi["zones"]["zoneIngresses"],
        json!({"total": 0, "online": 0})
    );
    assert_eq!(gi["dataplanes"]["standard"], stat(4, 2, 1, 1));
    assert_eq!(gi["dataplanes"]["gatewayBuiltin"], stat(1, 1, 0, 0));
    assert_eq!(gi["dataplanes"]["gatewayDelegated"], stat(0, 0, 0, 0));
    // web: one DPP online, one offline; db: its DPP degraded; api: online.
    assert_eq!(gi["services"]["internal"], stat(3, 1, 0, 2));
    assert_eq!(gi["services"]["external"], json!({"total": 1}));
    assert_eq!(gi["services"]["gatewayBuiltin"], stat(1, 1, 0, 0));
    assert_eq!(gi["services"]["total"], 5);
    assert!(
        gi["createdAt"].as_str().is_some_and(|t| t.contains('T')),
        "{gi}"
    );

    let (s, mi, _) = call(&app, "GET", "/mesh-insights/default", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{mi}");
    assert_eq!(mi["type"], "MeshInsight");
    assert_eq!(mi["name"], "default");
    assert!(mi["creationTime"].is_string(), "{mi}");
    assert_eq!(mi["dataplanes"], stat(4, 2, 1, 1));
    assert_eq!(mi["dataplanesByType"]["standard"], stat(3, 1, 1, 1));
    assert_eq!(mi["dataplanesByType"]["gateway"], stat(1, 1, 0, 0));
    assert_eq!(mi["policies"], json!({"MeshTimeout": {"total": 1}}));
    assert_eq!(mi["resources"]["Dataplane"], json!({"total": 4}));
    assert_eq!(mi["resources"]["ExternalService"], json!({"total": 1}));
    assert_eq!(
        mi["services"],
        json!({"total": 3, "internal": 2, "external": 1})
    );

    let (s, list, _) = call(&app, "GET", "/mesh-insights?size=1", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2);
    assert_eq!(list["items"][0]["name"], "default");
    assert!(
        list["next"]
            .as_str()
            .is_some_and(|n| n.contains("offset=1")),
        "{list}"
    );
    let (_, rest, _) = call(&app, "GET", "/mesh-insights?offset=1", &[], None).await;
    assert_eq!(rest["items"][0]["name"], "other");
    assert_eq!(rest["items"][0]["dataplanes"], stat(1, 1, 0, 0));
    assert!(rest.get("next").is_none(), "{rest}");

    let (s, _, _) = call(&app, "GET", "/mesh-insights/nope", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = call(&app, "GET", "/mesh-insights?size=0", &[], None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn service_insights_status_paging_filter_and_404() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let zones: Arc<ZoneRegistry> = Arc::default();
    let app = router(app_state(store.clone(), zones.clone()));
    put(
        &*store,
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
        None,
    )
    .await;
    let web = "{address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web, kuma.io/zone: z1}}]}";
    dpp(&*store, "default", "web-1", web).await;
    dpp(&*store, "default", "web-2", web).await; // no insight: offline
    let api = "{address: 10.0.0.4, inbound: [{port: 80, tags: {kuma.io/service: api}}]}";
    dpp(&*store, "default", "api-1", api).await;
    dpp(
        &*store,
        "default",
        "db-1",
        "{address: 10.0.0.2, inbound: [{port: 80, tags: {kuma.io/service: db}}]}",
    )
    .await;
    dpp(
        &*store,
        "default",
        "edge",
        "{address: 10.0.0.9, gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}}",
    )
    .await;
    for local in ["web-1", "edge"] {
        connected(&zones, "default", local);
    }
    let doc = json!({"mesh": "default", "name": "api-1", "connected": true, "acked": {},
        "nacked": {}, "responsesSent": 1, "connectTime": "2026-01-01T00:00:00Z",
        "mTLS": {"issuedBackend": "ca-1"}});
    assert!(zones.put_insight(
        "z1",
        &umbra_kds::resource::kds_name("default", "api-1"),
        umbra_kds::resource::Item::from_doc(&doc),
    ));
    put(&*store, "type: ExternalService\nmesh: default\nname: httpbin\ntags: {kuma.io/service: httpbin}\nnetworking: {address: 'httpbin.org:443'}\n", None).await;

    let (s, list, _) = call(&app, "GET", "/meshes/default/service-insights", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 5);
    let by_name = |n: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} missing: {list}"))
    };
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "db", "edge", "httpbin", "web"]);
    let web = by_name("web");
    assert_eq!(web["type"], "ServiceInsight");
    assert_eq!(web["mesh"], "default");
    assert_eq!(web["status"], "partially_degraded");
    assert_eq!(
        web["dataplanes"],
        json!({"online": 1, "offline": 1, "total": 2})
    );
    assert_eq!(web["serviceType"], "internal");
    assert_eq!(web["zones"], json!(["z1"]));
    assert!(web["creationTime"].is_string(), "{web}");
    let api = by_name("api");
    assert_eq!(api["status"], "online");
    assert_eq!(api["issuedBackends"], json!({"ca-1": 1}));
    assert_eq!(by_name("db")["status"], "offline");
    assert_eq!(by_name("db")["dataplanes"]["total"], 1);
    assert_eq!(by_name("edge")["serviceType"], "gateway_builtin");
    assert_eq!(by_name("edge")["status"], "online");
    let httpbin = by_name("httpbin");
    assert_eq!(
        (httpbin["status"].as_str(), httpbin["serviceType"].as_str()),
        (Some("not_available"), Some("external"))
    );
    assert_eq!(httpbin["addressPort"], "httpbin.org:443");
    assert_eq!(httpbin["dataplanes"]["total"], 0);

    let (s, one, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights/web",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one, web);
    let (s, page, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights?size=2&offset=1&name=e",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    // "e" is in edge and web: the second page of size 2 holds web only.
    assert_eq!(page["total"], 2);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["items"][0]["name"], "web");
    assert!(page.get("next").is_none(), "{page}");
    let (_, first, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights?size=2",
        &[],
        None,
    )
    .await;
    assert_eq!(
        first["next"],
        "/meshes/default/service-insights?offset=2&size=2"
    );
    let (_, typed, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights?type=external,gateway_builtin",
        &[],
        None,
    )
    .await;
    assert_eq!(typed["total"], 2, "{typed}");
    for uri in [
        "/meshes/default/service-insights/nope",
        "/meshes/nope/service-insights",
        "/meshes/nope/service-insights/web",
    ] {
        let (s, body, _) = call(&app, "GET", uri, &[], None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}: {body}");
    }
    let (s, all, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights?type=",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "an empty type= is no filter: {all}");
    // Exactly what /openapi.yaml documents (Schemathesis holds the CP to it): the types as
    // spelled, comma-separated, and no NUL in name=.
    for uri in [
        "/meshes/default/service-insights?type=nope",
        "/meshes/default/service-insights?type=External",
        "/meshes/default/service-insights?type=external,%20internal",
        "/meshes/default/service-insights?name=a%00b",
        "/meshes/default/service-insights?size=0",
    ] {
        let (s, body, _) = call(&app, "GET", uri, &[], None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {body}");
    }
}
