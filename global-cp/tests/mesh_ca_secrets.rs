//! Issue 41: what Kuma's mesh manager checks against the store when a Mesh is written (its
//! `ValidateMTLSBackends`) and when a Secret is deleted (its secret validator), through the
//! Global's API on a memory store: a `provided` CA backend naming Secrets that do not exist is
//! a 400 at `mtls.backends[0].conf.cert` / `.key` with Kuma's reason; once the Secrets exist it
//! is accepted; a Secret the backend uses cannot be deleted; `skipValidation` skips the check;
//! `inline` sources need no Secret.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::app_state;

const YAML: &[(&str, &str)] = &[("content-type", "application/yaml")];

fn provided(mesh: &str, extra: &str) -> String {
    format!(
        "type: Mesh\nname: {mesh}\nmtls:\n{extra}  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: provided\n    conf:\n      cert: {{secret: ca-cert}}\n      key: {{secret: ca-key}}\n"
    )
}

fn secret(mesh: &str, name: &str) -> String {
    format!("type: Secret\nmesh: {mesh}\nname: {name}\ndata: dGVzdA==\n")
}

fn fields(body: &Value) -> Vec<(String, String)> {
    body["invalidParameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["field"].as_str().unwrap_or_default().to_owned(),
                p["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_provided_ca_needs_the_secrets_it_names() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = router(app_state(store, Arc::default()));
    let put = |uri: String, body: String| {
        let app = app.clone();
        async move { call(&app, "PUT", &uri, YAML, Some(&body)).await }
    };
    // The mesh exists first (a Secret lives in a mesh), without mTLS.
    let (status, _, _) = put("/meshes/m1".into(), "type: Mesh\nname: m1\n".into()).await;
    assert_eq!(status, StatusCode::CREATED);

    // Neither Secret exists: Kuma loads the key first and reports it at both fields.
    let (status, body, _) = put("/meshes/m1".into(), provided("m1", "")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let missing = |name: &str| {
        format!(
            "could not load data: Resource not found: type=\"Secret\" name=\"{name}\" mesh=\"m1\""
        )
    };
    assert_eq!(
        fields(&body),
        [
            ("mtls.backends[0].conf.cert".to_owned(), missing("ca-key")),
            ("mtls.backends[0].conf.key".to_owned(), missing("ca-key")),
        ]
    );
    // Nothing was written: the Mesh is still without mTLS.
    let (_, got, _) = call(&app, "GET", "/meshes/m1", &[], None).await;
    assert!(got.get("mtls").is_none(), "{got}");

    // The key exists, the cert does not.
    let (status, _, _) = put("/meshes/m1/secrets/ca-key".into(), secret("m1", "ca-key")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body, _) = put("/meshes/m1".into(), provided("m1", "")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        fields(&body)[0],
        ("mtls.backends[0].conf.cert".to_owned(), missing("ca-cert"))
    );

    // A Secret of another mesh does not count.
    let (status, _, _) = put("/meshes/m2".into(), "type: Mesh\nname: m2\n".into()).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = put("/meshes/m2/secrets/ca-cert".into(), secret("m2", "ca-cert")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = put("/meshes/m1".into(), provided("m1", "")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Both exist: accepted.
    let (status, _, _) = put("/meshes/m1/secrets/ca-cert".into(), secret("m1", "ca-cert")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body, _) = put("/meshes/m1".into(), provided("m1", "")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A Secret the backend uses cannot be deleted (Kuma's secret validator), another can.
    let (status, body, _) = call(&app, "DELETE", "/meshes/m1/secrets/ca-cert", &[], None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        fields(&body),
        [(
            "name".to_owned(),
            "The secret \"ca-cert\" that you are trying to remove is currently in use in Mesh \"m1\" in mTLS backend \"ca-1\". Please remove the reference from the \"ca-1\" backend before removing the secret.".to_owned()
        )]
    );
    let (status, _, _) = call(&app, "DELETE", "/meshes/m2/secrets/ca-cert", &[], None).await;
    assert_eq!(status, StatusCode::OK);

    // `skipValidation` skips the check, as in Kuma.
    let (status, body, _) = put(
        "/meshes/m2".into(),
        provided("m2", "  skipValidation: true\n"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Inline sources name no Secret; data sources must be defined (Kuma's provided CA manager).
    let inline = "type: Mesh\nname: m3\nmtls:\n  backends:\n  - name: ca-1\n    type: provided\n    conf:\n      cert: {inline: dGVzdA==}\n      key: {inlineString: test}\n";
    let (status, body, _) = put("/meshes/m3".into(), inline.into()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let undefined = "type: Mesh\nname: m4\nmtls:\n  backends:\n  - name: ca-1\n    type: provided\n    conf:\n      cert: {}\n";
    let (status, body, _) = put("/meshes/m4".into(), undefined.into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        fields(&body),
        [
            (
                "mtls.backends[0].conf.cert".to_owned(),
                "data source has to be chosen. Available sources: secret, file, inline".to_owned()
            ),
            (
                "mtls.backends[0].conf.key".to_owned(),
                "has to be defined".to_owned()
            ),
        ]
    );
}
