//! `/openapi.yaml` is checked against the code: the document lists exactly the router's routes
//! and methods ([`routes`]), every listed route is served, and answers come as YAML on request.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt as _;
use umbra_api::openapi::{declared, documented, type_lists, unserved};
use umbra_global_cp::api::{router, routes, AppState, OPENAPI_YAML};
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::tokens::ZoneTokens;

fn app() -> axum::Router {
    router(AppState {
        traces: Default::default(),
        store: Arc::new(MemoryStore::new()),
        zones: Arc::default(),
        tokens: ZoneTokens::from_key(b"k"),
        trust: umbra_pki::trust::Trust::verifier(Default::default(), Default::default()),
        inspect: Arc::default(),
        config: Arc::default(),
        replicas: umbra_global_cp::replicas::Single::shared(),
        replica_name: "global-cp".into(),
        subscriptions: None,
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

#[test]
fn the_document_lists_umbras_resource_types() {
    assert_eq!(type_lists(OPENAPI_YAML).unwrap(), Vec::<String>::new());
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

/// ZoneIngresses are read-only on the Global: the document lists no PUT or DELETE for them,
/// and any method but GET is a 405 that says where they are written and allows GET only.
#[tokio::test]
async fn zone_ingresses_are_read_only_here() {
    let doc = documented(OPENAPI_YAML).unwrap();
    let app = app();
    for path in ["/zone-ingresses/{name}", "/zoneingresses/{name}"] {
        assert!(doc.contains(&(path.to_owned(), "get".to_owned())));
        let uri = path.replace("{name}", "ingress-1");
        for method in ["PUT", "DELETE", "POST", "OPTIONS"] {
            assert!(!doc.contains(&(path.to_owned(), method.to_lowercase())));
            let req = Request::builder()
                .method(method)
                .uri(&uri)
                .header("content-type", "application/json")
                .body(Body::from(
                    r#"{"type": "ZoneIngress", "name": "ingress-1", "networking": {"port": 10001}}"#,
                ))
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), 405, "{method} {uri}");
            assert_eq!(resp.headers()["allow"], "GET, HEAD", "{method} {uri}");
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert!(
                body["detail"]
                    .as_str()
                    .unwrap()
                    .contains("registered in their zone"),
                "{method} {uri}: {body}"
            );
        }
    }
}

/// A body is a mapping: serde would read a struct from a sequence too (`[]` as an empty plan
/// request, `["zone-1"]` as a zone), which the document does not allow.
#[tokio::test]
async fn sequences_are_no_bodies() {
    let app = app();
    for (uri, body) in [
        ("/meshes/default/_migration/plan", "[]"),
        ("/meshes/default/_migration/apply", r#"["ab"]"#),
        ("/tokens/zone", r#"["zone-1"]"#),
        ("/tokens/user", r#"["alice"]"#),
        ("/tokens/user/revocations", r#"[null, "ab"]"#),
    ] {
        let req = Request::builder()
            .method("POST")
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 400, "POST {uri} {body}");
    }
}
