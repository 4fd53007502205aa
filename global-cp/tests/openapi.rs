//! `/openapi.yaml` is checked against the code: the document lists exactly the router's routes
//! and methods ([`routes`]), every listed route is served, and answers come as YAML on request.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt as _;
use umbra_api::openapi::{declared, documented, unserved};
use umbra_global_cp::api::{router, routes, AppState, OPENAPI_YAML};
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::tokens::ZoneTokens;

fn app() -> axum::Router {
    router(AppState {
        traces: Default::default(),
        store: Arc::new(MemoryStore::new()),
        zones: Arc::default(),
        tokens: ZoneTokens::from_key(b"k"),
        trust: umbra_api::trust::Trust::verifier(Default::default(), Default::default()),
        inspect: Arc::default(),
        config: Arc::default(),
    })
    // As if every request came from loopback (the admin by default).
    .layer(axum::Extension(axum::extract::ConnectInfo(
        std::net::SocketAddr::from(([127, 0, 0, 1], 40000)),
    )))
}

#[test]
fn document_lists_exactly_the_routes() {
    let doc = documented(OPENAPI_YAML).unwrap();
    assert_eq!(doc, declared(&routes()));
}

#[tokio::test]
async fn every_documented_route_is_served_and_yaml_is_negotiated() {
    let app = app();
    assert_eq!(unserved(app.clone(), &routes()).await, Vec::<String>::new());
    let put = Request::builder()
        .method("PUT")
        .uri("/meshes/default")
        .body(Body::from(
            "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
        ))
        .unwrap();
    assert!(app
        .clone()
        .oneshot(put)
        .await
        .unwrap()
        .status()
        .is_success());
    let get = Request::builder()
        .uri("/meshes/default")
        .header("accept", "application/yaml")
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(get).await.unwrap();
    assert_eq!(resp.headers()["content-type"], "application/yaml");
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.starts_with("type: Mesh\nname: default\n"), "{text}");
    // Errors too.
    let missing = Request::builder()
        .uri("/meshes/absent")
        .header("accept", "application/yaml")
        .body(Body::empty())
        .unwrap();
    let resp = app.oneshot(missing).await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["content-type"], "application/yaml");
}
