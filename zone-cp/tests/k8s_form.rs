//! The zone's resource API takes Kuma's Kubernetes form (issue 20): a PUT of a
//! `kuma.io/v1alpha1` document stores the same resource as its universal form, the URL's mesh
//! and name must agree with `kuma.io/mesh` and `metadata.name`, and a 400 names the
//! Kubernetes paths in both `invalidParameters` and Kuma's `invalid_parameters`.

use axum::http::StatusCode;
use umbra_api::testing::call;
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::store::Store;

const TIMEOUT: &str = "apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata:\n  name: t\n  namespace: kuma-system\n  labels: {kuma.io/mesh: default, kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: IDLE}\n";

fn fields(body: &serde_json::Value, key: &str) -> Vec<String> {
    body[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {body}"))
        .iter()
        .map(|p| p["field"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn kubernetes_documents_are_stored_as_their_universal_form() {
    let app = router(AppState::new(Store::new(), false));
    let mesh = "apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {}\n";
    let (s, b, _) = call(&app, "PUT", "/meshes/default", &[], Some(mesh)).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");

    let uri = "/meshes/default/meshtimeouts/t";
    let (s, b, _) = call(&app, "PUT", uri, &[], Some(&TIMEOUT.replace("IDLE", "1h"))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let (s, got, _) = call(&app, "GET", uri, &[], None).await;
    assert_eq!(s, StatusCode::OK, "{got}");
    assert_eq!(
        (
            got["type"].as_str(),
            got["mesh"].as_str(),
            got["name"].as_str()
        ),
        (Some("MeshTimeout"), Some("default"), Some("t"))
    );
    assert_eq!(got["labels"]["kuma.io/effect"], "shadow");
    assert!(got["labels"].get("kuma.io/mesh").is_none(), "{got}");
    assert_eq!(got["spec"]["to"][0]["default"]["idleTimeout"], "1h");

    // The URL and the document disagree: the Kubernetes fields are named.
    let (s, b, _) = call(
        &app,
        "PUT",
        "/meshes/other/meshtimeouts/u",
        &[],
        Some(&TIMEOUT.replace("IDLE", "1h")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let want = ["metadata.name", r#"metadata.labels["kuma.io/mesh"]"#];
    assert_eq!(fields(&b, "invalidParameters"), want);
    assert_eq!(fields(&b, "invalid_parameters"), want);

    // Decoding and validation errors too.
    let (s, b, _) = call(
        &app,
        "PUT",
        uri,
        &[],
        Some(&TIMEOUT.replace("IDLE", "soon")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(
        fields(&b, "invalid_parameters"),
        ["spec.to[0].default.idleTimeout"]
    );
    let (s, b, _) = call(
        &app,
        "PUT",
        uri,
        &[],
        Some(&TIMEOUT.replace("name: t", "nom: t")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(fields(&b, "invalid_parameters"), ["metadata.name"]);
}
