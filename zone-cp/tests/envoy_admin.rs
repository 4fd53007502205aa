//! The zone's Envoy admin views (`GET /meshes/{mesh}/dataplanes/{name}/xds|stats|clusters`,
//! `umbra_zone_cp::envoy_admin`) through the API, against a stand-in admin on loopback (the
//! end-to-end test `e2e/tests/multi_zone.rs` reads real Envoys): every state a caller can
//! meet (unknown proxy, bad query, no Envoy connected, an Envoy on another host that
//! reports 127.0.0.1, a proxy whose admin listener is not generated, an admin that
//! does not answer, a stream that outlived its successor) and the token redaction.

use axum::http::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use umbra_api::testing::call;
use umbra_core::dataplane::DpKey;
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::insight::AdminEndpoint;
use umbra_zone_cp::store::Store;

const DUMP: &str = r#"{"configs":[{"bootstrap":{"dynamic_resources":{"ads_config":{"grpc_services":[{"initial_metadata":[{"key":"authorization","value":"secret.token.value"}]}]}}}}]}"#;

/// A stand-in Envoy admin on loopback answering every request with `DUMP` (JSON) for
/// `/config_dump`, and the request line as text otherwise; returns its port.
async fn admin() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_string();
                let line = request.lines().next().unwrap_or_default().to_owned();
                let (ty, body) = if line.contains("/config_dump") {
                    ("application/json", DUMP.to_owned())
                } else {
                    ("text/plain", line)
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {ty}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn admin_views_answer_every_state_and_redact_the_token() {
    let state = AppState::new(Store::new(), false);
    let insights = state.insights.clone();
    let app = router(state);
    for (uri, yaml) in [
        ("/meshes/default", "type: Mesh\nname: default\n"),
        ("/meshes/default/dataplanes/web", "type: Dataplane\nmesh: default\nname: web\nnetworking: {address: 127.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web}}]}\n"),
        ("/meshes/default/dataplanes/far", "type: Dataplane\nmesh: default\nname: far\nnetworking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: far}}]}\n"),
    ] {
        let (s, body, _) = call(&app, "PUT", uri, &[("content-type", "application/yaml")], Some(yaml)).await;
        assert_eq!(s, StatusCode::CREATED, "{uri}: {body}");
    }
    let get = |uri: &'static str| {
        let app = app.clone();
        async move { call(&app, "GET", uri, &[], None).await }
    };
    let key = DpKey::new("default", "web");

    // Unknown proxy, unknown mesh, bad query.
    assert_eq!(
        get("/meshes/default/dataplanes/nobody/xds").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get("/meshes/nope/dataplanes/web/stats").await.0,
        StatusCode::NOT_FOUND
    );
    let (s, body, _) = get("/meshes/default/dataplanes/web/stats?usedonly=maybe").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("usedonly"), "{body}");

    // No Envoy connected yet.
    let (s, body, _) = get("/meshes/default/dataplanes/web/xds").await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");

    // A proxy at 127.0.0.1 whose Envoy connected from another host: its admin cannot be
    // reached (127.0.0.1 is its own host's); said so, nothing called.
    let remote = insights.open_stream(
        &key,
        AdminEndpoint {
            port: admin().await,
            local: false,
            dns_port: None,
        },
        None,
    );
    let (s, body, _) = get("/meshes/default/dataplanes/web/clusters").await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.to_string().contains("another host"), "{body}");
    // A proxy on another address is read through its admin listener, which this reconciler
    // (without the Envoy-admin CA) never generated: said so, nothing called.
    insights.open_stream(
        &DpKey::new("default", "far"),
        AdminEndpoint {
            port: admin().await,
            local: false,
            dns_port: None,
        },
        None,
    );
    let (s, body, _) = get("/meshes/default/dataplanes/far/clusters").await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.to_string().contains("kuma:envoy:admin"), "{body}");

    // An Envoy on this host whose admin does not answer: 502.
    let dead = insights.open_stream(
        &key,
        AdminEndpoint {
            port: closed_port().await,
            local: true,
            dns_port: None,
        },
        None,
    );
    assert!(dead > remote, "each stream is a new generation");
    let (s, body, _) = get("/meshes/default/dataplanes/web/stats").await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{body}");

    // Its admin answers: the config dump with the token redacted, stats as Envoy's text with
    // Kuma's default `usedonly`.
    let live = insights.open_stream(
        &key,
        AdminEndpoint {
            port: admin().await,
            local: true,
            dns_port: None,
        },
        None,
    );
    // The older stream ends after the new one opened: the proxy stays connected.
    insights.close_stream(&key, dead);
    let (s, dump, _) = get("/meshes/default/dataplanes/web/xds").await;
    assert_eq!(s, StatusCode::OK, "{dump}");
    let text = dump.to_string();
    assert!(
        !text.contains("secret.token.value") && text.contains("[redacted]"),
        "{text}"
    );
    let (s, stats, _) = get("/meshes/default/dataplanes/web/stats").await;
    assert_eq!(s, StatusCode::OK, "{stats}");
    assert_eq!(stats, Value::String("GET /stats?usedonly HTTP/1.1".into()));
    let (_, stats, _) =
        get("/meshes/default/dataplanes/web/stats?usedonly=false&format=text").await;
    assert_eq!(stats, Value::String("GET /stats HTTP/1.1".into()));

    // Its stream ends: no Envoy connected again.
    insights.close_stream(&key, live);
    assert_eq!(
        get("/meshes/default/dataplanes/web/xds").await.0,
        StatusCode::CONFLICT
    );
}
