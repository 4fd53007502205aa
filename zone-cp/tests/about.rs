//! What a zone tells about itself through the router (no sockets): `GET /_resources` answers
//! Kuma's `ResourceTypeDescriptionList`, validated against Kuma 2.7.29's published schema;
//! a standalone zone writes everything, a federated one only what it owns. `GET /config` is
//! the admin's only and never shows the zone token or a password; `GET /versions` names the
//! Envoy versions.

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::store::Store;
use umbra_zone_cp::Args;

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .and_then(|l| l.iter().find(|d| d["name"] == name))
        .unwrap_or_else(|| panic!("{name} in {list}"))
}

#[tokio::test]
async fn resource_types_follow_the_zones_write_mode() {
    let standalone = router(AppState::new(Store::new(), false));
    let (s, body, _) = call(&standalone, "GET", "/_resources", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid("ResourceTypeDescriptionList", &body);
    assert!(body["resources"]
        .as_array()
        .is_some_and(|l| !l.is_empty() && l.iter().all(|d| d["readOnly"] == false)));

    let federated = router(AppState::new(Store::new(), true));
    let (s, body, _) = call(&federated, "GET", "/_resources", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid("ResourceTypeDescriptionList", &body);
    assert_eq!(find(&body, "Dataplane")["readOnly"], false);
    assert_eq!(find(&body, "Dataplane")["includeInFederation"], false);
    assert_eq!(find(&body, "MeshTimeout")["readOnly"], true);
    assert_eq!(find(&body, "Mesh")["scope"], "Global");
}

const SECRET: &str = "Zt0ken-S3cret";

#[tokio::test]
async fn config_is_redacted_and_the_admins_only() {
    use clap::Parser as _;
    let ca = std::env::temp_dir().join(format!("umbra-zone-about-{}.pem", std::process::id()));
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let ca = ca.display().to_string();
    let args = Args::parse_from([
        "zone-cp",
        "--zone",
        "z1",
        "--global-kds-address",
        "grpcs://global:5685",
        "--kds-token",
        SECRET,
        "--kds-ca-file",
        &ca,
    ]);
    let store = Store::new();
    let mut state = AppState::new(store.clone(), false);
    state.config = std::sync::Arc::new(args.config());
    // A standalone zone's trust, so the test can issue a non-admin user token.
    state.trust = umbra_pki::trust::Trust::authority(store.contract(), Default::default())
        .await
        .expect("a trust authority");
    let app = router(state);

    let (s, body, _) = call(&app, "GET", "/config", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let text = body.to_string();
    assert!(!text.contains(SECRET), "a secret leaks: {text}");
    assert!(!text.contains("S3cret"), "part of a secret leaks: {text}");
    assert_eq!(body["mode"], "zone (federated)");
    assert_eq!(body["multizone"]["zone"]["name"], "z1");
    assert_eq!(
        body["multizone"]["zone"]["globalAddress"],
        "grpcs://global:5685"
    );
    assert_eq!(body["umbra"]["kdsToken"], "*****");
    assert_eq!(body["umbra"]["kdsCaFile"], ca);
    assert_eq!(body["umbra"]["dpAuth"], "dpToken");

    let (s, token, _) = call(
        &app,
        "POST",
        "/tokens/user",
        &[("content-type", "application/json")],
        Some(r#"{"name": "bob", "groups": ["team-b"], "validFor": "1h"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{token}");
    let bearer = format!("Bearer {}", token.as_str().expect("a token"));
    let (s, body, _) = call(&app, "GET", "/config", &[("authorization", &bearer)], None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
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
    let config = Args::parse_from(["zone-cp", "--zone", "z1"]).config();
    umbra_api::testing::assert_config_shows_every_flag(&Args::command(), &config);
}
