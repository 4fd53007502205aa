//! Test support (feature `testing`): one request through a router without a socket, for the
//! CPs' API tests, and Kuma's published API schemas as an oracle for their answers
//! ([`kuma_schema::assert_valid`]) and [`assert_config_shows_every_flag`] for `/config` (a binary refusing a malformed
//! flag: `umbra_runtime::testing`).

pub mod kuma_schema;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

/// `method uri` with `headers` and an optional body through `app`: the status, the body as JSON
/// (a JSON string when it is not JSON, `null` when empty) and the `ETag`, if any.
///
/// # Panics
/// When the request cannot be built or the body cannot be read (a test failure).
pub async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (StatusCode, Value, Option<String>) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("a valid request");
    // As if from loopback (the default admin when the CP trusts loopback).
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            40000,
        ))));
    let resp = app.clone().oneshot(req).await.expect("the router answers");
    let status = resp.status();
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("a readable body")
        .to_bytes();
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, v, etag)
}

/// `POST path` with `body` as JSON through `app`: the status and the body ([`call`]).
pub async fn post_json(app: &axum::Router, path: &str, body: &Value) -> (StatusCode, Value) {
    let headers = [("content-type", "application/json")];
    let (s, b, _) = call(app, "POST", path, &headers, Some(&body.to_string())).await;
    (s, b)
}

/// `GET path` through `app`: the status and the body ([`call`]).
pub async fn get_json(app: &axum::Router, path: &str) -> (StatusCode, Value) {
    let (s, b, _) = call(app, "GET", path, &[], None).await;
    (s, b)
}

/// `PUT path` with `yaml` through `app`, which must succeed.
///
/// # Panics
/// When the answer is not a success (a test failure).
pub async fn put_ok(app: &axum::Router, path: &str, yaml: &str) {
    let (s, b, _) = call(app, "PUT", path, &[], Some(yaml)).await;
    assert!(s.is_success(), "PUT {path}: {s} {b}");
}

/// Asserts that `config` (a CP's `/config` answer) names every flag of `command` under
/// `umbra`, as the camelCase of the flag's id (`postgres_url` → `postgresUrl`), so a new flag
/// cannot go missing from `/config` unnoticed.
///
/// # Panics
/// On the first flag missing (a test failure).
pub fn assert_config_shows_every_flag(command: &clap::Command, config: &Value) {
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        let key = umbra_core::fields::proto_json_name(id);
        assert!(
            config["umbra"].get(&key).is_some(),
            "--{id} missing from /config as {key}: {config}"
        );
    }
}
