//! `GET /global-insight`, `GET /mesh-insights[/{mesh}]` and `GET
//! /meshes/{mesh}/service-insights[/{name}]` on a zone: counts from the zone store (no DPP
//! has connected, so every one is offline) and Kuma's `GlobalInsight` schema.

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::store::Store;

fn stat(total: u64, online: u64, offline: u64, partial: u64) -> Value {
    json!({"total": total, "online": online, "offline": offline, "partiallyDegraded": partial})
}

#[tokio::test]
async fn insights_count_the_zone_store() {
    let state = AppState::new(Store::new(), false);
    // web-1 holds a certificate from ca-1 (trusting ca-1 and ca-2), as the reconciler reports.
    state.insights.set_mtls(&std::collections::HashMap::from([(
        umbra_core::dataplane::DpKey::new("default", "web-1"),
        umbra_pki::identity::MtlsStatus {
            certificate_expiration_time: "2026-01-02T00:00:00Z".into(),
            last_certificate_regeneration: "2026-01-01T00:00:00Z".into(),
            certificate_regenerations: 1,
            issued_backend: "ca-1".into(),
            supported_backends: vec!["ca-1".into(), "ca-2".into()],
        },
    )]));
    let app = router(state);
    let puts = [
        ("/meshes/default", "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n"),
        ("/meshes/default/dataplanes/web-1", "type: Dataplane\nmesh: default\nname: web-1\nnetworking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web}}]}\n"),
        ("/meshes/default/dataplanes/web-2", "type: Dataplane\nmesh: default\nname: web-2\nnetworking: {address: 10.0.0.2, inbound: [{port: 80, tags: {kuma.io/service: web}}]}\n"),
        ("/meshes/default/dataplanes/edge", "type: Dataplane\nmesh: default\nname: edge\nnetworking: {address: 10.0.0.9, gateway: {tags: {kuma.io/service: edge}}}\n"),
        ("/meshes/default/external-services/httpbin", "type: ExternalService\nmesh: default\nname: httpbin\ntags: {kuma.io/service: httpbin}\nnetworking: {address: 'httpbin.org:443'}\n"),
    ];
    for (uri, yaml) in puts {
        let (s, body, _) = call(
            &app,
            "PUT",
            uri,
            &[("content-type", "application/yaml")],
            Some(yaml),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{uri}: {body}");
    }

    let (s, gi, _) = call(&app, "GET", "/global-insight", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{gi}");
    assert_valid("GlobalInsight", &gi);
    assert_eq!(gi["meshes"]["total"], 1);
    assert_eq!(
        gi["zones"]["controlPlanes"],
        json!({"total": 0, "online": 0})
    );
    assert_eq!(gi["dataplanes"]["standard"], stat(2, 0, 2, 0));
    assert_eq!(gi["dataplanes"]["gatewayDelegated"], stat(1, 0, 1, 0));
    assert_eq!(gi["services"]["internal"], stat(1, 0, 1, 0));
    assert_eq!(gi["services"]["external"], json!({"total": 1}));
    assert_eq!(gi["services"]["total"], 3);

    let (s, mi, _) = call(&app, "GET", "/mesh-insights/default", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{mi}");
    assert_eq!(mi["type"], "MeshInsight");
    assert_eq!(mi["dataplanes"], stat(3, 0, 3, 0));
    assert_eq!(mi["dataplanesByType"]["gatewayDelegated"], stat(1, 0, 1, 0));
    assert_eq!(
        mi["services"],
        json!({"total": 2, "internal": 1, "external": 1})
    );
    // No DPP reported a version; one holds a certificate.
    assert_eq!(
        mi["dpVersions"],
        json!({"kumaDp": {"unknown": stat(3, 0, 3, 0)}, "envoy": {"unknown": stat(3, 0, 3, 0)}})
    );
    assert_eq!(
        mi["mTLS"],
        json!({"issuedBackends": {"ca-1": stat(1, 0, 1, 0)},
               "supportedBackends": {"ca-1": stat(1, 0, 1, 0), "ca-2": stat(1, 0, 1, 0)}})
    );
    let (_, overview, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights/web-1",
        &[],
        None,
    )
    .await;
    assert_eq!(
        overview["dataplaneInsight"]["mTLS"]["issuedBackend"], "ca-1",
        "{overview}"
    );
    let (s, list, _) = call(&app, "GET", "/mesh-insights", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0], mi);
    let (s, _, _) = call(&app, "GET", "/mesh-insights/nope", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = call(&app, "GET", "/mesh-insights?offset=x", &[], None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // Service insights: never connected, so offline; the ExternalService is not_available.
    let (s, si, _) = call(&app, "GET", "/meshes/default/service-insights", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{si}");
    assert_eq!(si["total"], 3);
    let (s, web, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights/web",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{web}");
    assert_eq!(si["items"][2], web);
    assert_eq!(web["status"], "offline");
    assert_eq!(
        web["dataplanes"],
        json!({"online": 0, "offline": 2, "total": 2})
    );
    assert_eq!(si["items"][0]["serviceType"], "gateway_delegated");
    assert_eq!(si["items"][1]["status"], "not_available");
    let (_, page, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights?size=1&name=e",
        &[],
        None,
    )
    .await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["items"][0]["name"], "edge");
    assert_eq!(
        page["next"],
        "/meshes/default/service-insights?offset=1&size=1&name=e"
    );
    let (s, _, _) = call(
        &app,
        "GET",
        "/meshes/default/service-insights/nope",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
