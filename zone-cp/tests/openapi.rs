//! `/openapi.yaml` is checked against the code: the document lists exactly the router's routes
//! and methods ([`routes`]), and every listed route is really served (answers with the API's own
//! JSON, never the router's bare 404/405).

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt as _;
use umbra_api::openapi::{declared, documented, type_lists, unserved};
use umbra_zone_cp::api::{router, routes, AppState, OPENAPI_YAML};
use umbra_zone_cp::store::Store;

#[test]
fn document_lists_exactly_the_routes() {
    assert_eq!(documented(OPENAPI_YAML).unwrap(), declared(&routes()));
}

#[test]
fn the_document_lists_umbras_resource_types() {
    assert_eq!(type_lists(OPENAPI_YAML).unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let app = router(AppState::new(Store::new(), false));
    assert_eq!(unserved(app.clone(), &routes()).await, Vec::<String>::new());
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
