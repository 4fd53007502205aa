//! What the Global tells about itself through the router (no sockets): `GET /_resources`
//! answers Kuma's `ResourceTypeDescriptionList`, validated against Kuma 2.7.29's published
//! schema, with Dataplanes and ZoneIngresses read-only and outside federation; `GET /config`
//! is the admin's only and never shows the PostgreSQL password; `GET /versions` names the
//! Envoy versions.

use std::sync::Arc;
use umbra_global_cp::testing::app_state;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_global_cp::api::{router, AppState};
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::tokens::ZoneTokens;
use umbra_global_cp::Args;

fn app() -> axum::Router {
    router(app_state(Arc::new(MemoryStore::new()), Arc::default()))
}

const PASSWORD: &str = "Pg-S3cret-pw";

/// Paths of a certificate file and a key file in PEM (contents the flags' parsers accept; the
/// pair itself is checked by `Args::check`, which the router tests do not run).
fn tls_files() -> (String, String) {
    let dir = std::env::temp_dir().join(format!("umbra-global-about-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("kds.crt"), dir.join("kds.key"));
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    (cert.display().to_string(), key.display().to_string())
}

/// A Global started with a PostgreSQL URL carrying a password (in the user info and as a
/// query parameter) and a store that issues user tokens.
async fn configured_app() -> axum::Router {
    use clap::Parser as _;
    let url =
        format!("postgres://umbra:{PASSWORD}@db:5432/umbra?sslmode=disable&password={PASSWORD}");
    let (cert, key) = tls_files();
    let args = Args::parse_from([
        "global-cp",
        "--store",
        "postgres",
        "--postgres-url",
        &url,
        "--kds-tls-cert-file",
        &cert,
        "--kds-tls-key-file",
        &key,
    ]);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    router(AppState {
        traces: Default::default(),
        store: store.clone(),
        zones: Arc::default(),
        tokens: ZoneTokens::from_key(b"test key"),
        trust: umbra_pki::trust::Trust::authority(store, Default::default())
            .await
            .expect("a trust authority"),
        inspect: Arc::default(),
        config: Arc::new(args.config()),
        replicas: umbra_global_cp::replicas::Single::shared(),
        replica_name: "global-cp".into(),
        subscriptions: None,
    })
}

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .and_then(|l| l.iter().find(|d| d["name"] == name))
        .unwrap_or_else(|| panic!("{name} in {list}"))
}

#[tokio::test]
async fn resource_types_are_kumas_description_list() {
    let (s, body, _) = call(&app(), "GET", "/_resources", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid("ResourceTypeDescriptionList", &body);
    let dp = find(&body, "Dataplane");
    assert_eq!(dp["readOnly"], true);
    assert_eq!(dp["includeInFederation"], false);
    assert_eq!(find(&body, "ZoneIngress")["readOnly"], true);
    let ze = find(&body, "ZoneEgress");
    assert_eq!(
        (&ze["readOnly"], &ze["includeInFederation"], &ze["path"]),
        (&true.into(), &false.into(), &"zoneegresses".into())
    );
    let route = find(&body, "MeshHTTPRoute");
    assert_eq!(route["readOnly"], false);
    assert_eq!(route["includeInFederation"], true);
    assert_eq!(route["pluralDisplayName"], "Mesh HTTP Routes");
    assert_eq!(route["policy"]["hasFromTargetRef"], false);
}

#[tokio::test]
async fn config_is_redacted_and_the_admins_only() {
    let app = configured_app().await;
    let (s, body, _) = call(&app, "GET", "/config", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let text = body.to_string();
    assert!(!text.contains(PASSWORD), "the password leaks: {text}");
    assert!(
        !text.contains("S3cret"),
        "part of the password leaks: {text}"
    );
    assert_eq!(body["environment"], "universal");
    assert_eq!(body["mode"], "global");
    assert_eq!(body["store"]["type"], "postgres");
    assert_eq!(
        body["umbra"]["postgresUrl"],
        "postgres://umbra:*****@db:5432/umbra?sslmode=disable&password=*****"
    );
    // Key files by path only.
    assert_eq!(body["umbra"]["kdsTlsKeyFile"], tls_files().1);
    assert_eq!(body["multizone"]["global"]["kds"]["tls"], true);

    // A user outside mesh-system:admin gets a 403, with or without a password to hide.
    let (s, token, _) = call(
        &app,
        "POST",
        "/tokens/user",
        &[("content-type", "application/json")],
        Some(r#"{"name": "alice", "groups": ["team-a"], "validFor": "1h"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{token}");
    let bearer = format!("Bearer {}", token.as_str().expect("a token"));
    let (s, body, _) = call(&app, "GET", "/config", &[("authorization", &bearer)], None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    assert!(!body.to_string().contains(PASSWORD));
    // Everyone authenticated reads the versions.
    let (s, body, _) = call(
        &app,
        "GET",
        "/versions",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(
        body["kumaDp"][env!("CARGO_PKG_VERSION")]["envoy"],
        umbra_api::about::ENVOY_CONSTRAINT
    );
}

#[test]
fn config_shows_every_flag() {
    use clap::{CommandFactory as _, Parser as _};
    let config = Args::parse_from(["global-cp"]).config();
    umbra_api::testing::assert_config_shows_every_flag(&Args::command(), &config);
}
