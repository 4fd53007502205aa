//! The Global's `_resources/dataplanes` answer validates against Kuma 2.7.29's published
//! `InspectDataplanesForPolicy` (issue 20): `{total, items: [Meta], next?}`, paged with `next`
//! left out on the last page, and filtered by `name=`.

use std::sync::Arc;
use umbra_global_cp::testing::app_state;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_core::resource::Resource;
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;

fn app(store: Arc<dyn Store>) -> axum::Router {
    router(app_state(store, Arc::default()))
}

/// A synced Dataplane as a zone's KDS stores it (Global name, display name and zone labels).
fn dp(name: &str, zone: &str, service: &str) -> Resource {
    let yaml = format!("type: Dataplane\nmesh: default\nname: {name}-{zone}\nlabels: {{kuma.io/display-name: {name}, kuma.io/zone: {zone}}}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: {service}}}\n");
    Resource::all_from_bytes(yaml.as_bytes()).unwrap().remove(0)
}

#[tokio::test]
async fn resources_dataplanes_validate_against_kumas_inspect_dataplanes_for_policy() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = app(store.clone());
    let mesh = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
    let (s, b, _) = call(&app, "PUT", "/meshes/default", &[], Some(mesh)).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let mt = "type: MeshTimeout\nmesh: default\nname: web-timeout\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 10s}\n";
    let (s, b, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/web-timeout",
        &[],
        Some(mt),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    for (name, zone, svc) in [
        ("web-1", "zone-1", "web"),
        ("web-2", "zone-1", "web"),
        ("web-3", "zone-2", "web"),
        ("db-1", "zone-2", "db"),
    ] {
        store
            .put(dp(name, zone, svc), None, Some(zone))
            .await
            .unwrap();
    }
    let base = "/meshes/default/meshtimeouts/web-timeout/_resources/dataplanes";
    let get = |uri: String| {
        let app = app.clone();
        async move {
            let (s, body, _) = call(&app, "GET", &uri, &[], None).await;
            assert_eq!(s, StatusCode::OK, "{uri}: {body}");
            assert_valid("InspectDataplanesForPolicy", &body);
            body
        }
    };
    let names = |body: &Value| -> Vec<String> {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_owned())
            .collect()
    };

    let all = get(base.to_owned()).await;
    assert_eq!(all["total"], 3, "{all}");
    assert!(all.get("next").is_none(), "no next on the last page: {all}");
    assert_eq!(
        names(&all),
        ["web-1-zone-1", "web-2-zone-1", "web-3-zone-2"]
    );
    assert_eq!(all["items"][0]["type"], "Dataplane");
    assert_eq!(all["items"][0]["mesh"], "default");
    assert_eq!(all["items"][0]["zone"], "zone-1");
    assert_eq!(all["items"][0]["displayName"], "web-1");

    let first = get(format!("{base}?size=2&name=web")).await;
    assert_eq!((first["total"].as_u64(), names(&first).len()), (Some(3), 2));
    assert_eq!(first["next"], format!("{base}?offset=2&size=2&name=web"));
    let last = get(first["next"].as_str().unwrap().to_owned()).await;
    assert_eq!(names(&last), ["web-3-zone-2"]);
    assert!(last.get("next").is_none(), "{last}");

    let zone_1 = get(format!("{base}?name=zone-1")).await;
    assert_eq!(names(&zone_1), ["web-1-zone-1", "web-2-zone-1"]);
    assert_eq!(zone_1["total"], 2);
    let none = get(format!("{base}?name=db")).await;
    assert_eq!((none["total"].as_u64(), names(&none).len()), (Some(0), 0));
}
