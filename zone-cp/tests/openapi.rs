//! `/openapi.yaml` is checked against the code: the document lists exactly the router's routes
//! and methods ([`ROUTES`]), and every listed route is really served (answers with the API's own
//! JSON, never the router's bare 404/405).

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;
use umbra_core::codec::{decode_one, Limits};
use umbra_zone_cp::api::{router, AppState, OPENAPI_YAML, ROUTES};
use umbra_zone_cp::store::Store;

#[test]
fn document_lists_exactly_the_routes() {
    let doc = decode_one(OPENAPI_YAML.as_bytes(), Limits::default()).unwrap();
    assert_eq!(doc["openapi"], "3.0.3");
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(p, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|k| *k != "parameters")
                .map(move |m| (p.clone(), m.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .flat_map(|(p, ms)| ms.iter().map(move |m| ((*p).to_owned(), (*m).to_owned())))
        .collect();
    assert_eq!(documented, routed);
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let app = router(AppState {
        store: Store::new(),
        federated: false,
        insights: Default::default(),
    });
    for (path, methods) in ROUTES {
        let uri = path
            .replace("{mesh}", "m")
            .replace("{plural}", "meshtimeouts")
            .replace("{name}", "x");
        for m in *methods {
            let req = Request::builder()
                .method(m.to_uppercase().as_str())
                .uri(&uri)
                .body(Body::from("{}"))
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let status = resp.status();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let routed = status != StatusCode::METHOD_NOT_ALLOWED
                && (status != StatusCode::NOT_FOUND || !body.is_empty());
            assert!(routed, "{m} {uri}: {status} (not routed)");
        }
    }
    let resp = app
        .clone()
        .oneshot(
            Request::builder()
                .uri("/openapi.yaml")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/yaml");
}
