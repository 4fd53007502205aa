//! Response format: JSON by default, YAML when the request's `Accept` names a YAML media type
//! (`application/yaml`, `application/x-yaml`, `text/yaml`) ahead of JSON, as Kuma's API and
//! `kumactl -o yaml` users expect. Applied as a middleware ([`yaml_output`]) so every JSON
//! answer, errors included, can come back as YAML. Also what comes in: the media types a body
//! may have ([`check_body_type`], else 415), and the error shape of every 4xx, including those
//! the router and body limit produce ([`error_shape`]).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Largest JSON body re-encoded as YAML (bytes); larger answers stay JSON.
pub const MAX_YAML_BODY: usize = 16 << 20;

const YAML_TYPES: &[&str] = &["application/yaml", "application/x-yaml", "text/yaml"];

/// Whether `Accept` asks for YAML before JSON (quality values are not weighed; order is).
pub fn wants_yaml(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    for media in accept.split(',') {
        let media = media
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if YAML_TYPES.contains(&media.as_str()) {
            return true;
        }
        if media == "application/json" {
            return false;
        }
    }
    false
}

/// Middleware: re-encode a JSON response as YAML when the request asked for YAML.
pub async fn yaml_output(req: Request, next: Next) -> Response {
    let yaml = wants_yaml(req.headers());
    let response = next.run(req).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // A body larger than the YAML limit (an Envoy config dump) stays JSON rather than lost.
    let too_large = axum::body::HttpBody::size_hint(response.body()).lower()
        > u64::try_from(MAX_YAML_BODY).unwrap_or(u64::MAX);
    if !yaml || !is_json || too_large {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_YAML_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(umbra_core::codec::encode_yaml(&value)))
}

/// Media types a resource body may be sent as; a body without `Content-Type` is read as YAML
/// (which JSON is a subset of).
pub const BODY_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
];

/// `Ok` when the request's `Content-Type` is absent or one of `allowed` (parameters such as
/// `charset` ignored).
///
/// # Errors
/// A 415 naming the type received and the ones accepted.
pub fn check_body_type(headers: &HeaderMap, allowed: &[&str]) -> Result<(), ApiError> {
    let Some(v) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = v
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if allowed.contains(&essence.as_str()) {
        return Ok(());
    }
    Err(ApiError::status(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "a body of type {essence:?} is not accepted; send one of {}, or no Content-Type",
            allowed.join(", ")
        ),
    ))
}

/// `Ok` unless a JSON request body is something else than an object (`{...}`; an empty body is
/// left to the parser, which refuses it): serde reads a struct from an array too
/// (`["default"]` as `{"mesh": "default"}`), and no body here is meant to be one.
///
/// # Errors
/// A 400 naming `body`, saying it expected `shape`.
pub fn check_json_object(body: &[u8], shape: &str) -> Result<(), ApiError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | None => Ok(()),
        Some(_) => Err(ApiError::bad_parameter(
            "body",
            format!("expected {shape}: a JSON object"),
        )),
    }
}

/// Detail of a 404 for a path no route serves.
pub const NO_ROUTE: &str = "no route for";
/// Detail of a 405 for a method a route does not serve.
pub const NO_METHOD: &str = "method not allowed:";

/// Middleware: every 4xx answer uses the API's error shape ([`ApiError::body`]), also
/// those produced below the handlers: a body over the size limit (413), an unknown path (404),
/// a method a route does not serve (405). Answers already in JSON pass untouched.
pub async fn error_shape(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let response = next.run(req).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() || is_json {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let bytes = axum::body::to_bytes(response.into_body(), 64 << 10)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    let detail = match status {
        StatusCode::NOT_FOUND if text.is_empty() => format!("{NO_ROUTE} {method} {path}"),
        StatusCode::METHOD_NOT_ALLOWED => format!("{NO_METHOD} {method} {path}"),
        _ if text.is_empty() => status.canonical_reason().unwrap_or("error").to_owned(),
        _ => text,
    };
    let mut out = ApiError::status(status, detail).into_response();
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_bodies_are_objects() {
        for ok in [&b"{}"[..], b" \n{\"a\": 1}", b""] {
            assert!(check_json_object(ok, "{a}").is_ok());
        }
        for bad in [&b"[]"[..], b"[\"default\"]", b"null", b" 5"] {
            let e = check_json_object(bad, "{a}").unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert_eq!(e.invalid_parameters[0].field, "body");
        }
    }

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[tokio::test]
    async fn errors_below_the_handlers_get_the_kuma_shape_as_json() {
        use tower::ServiceExt as _;
        let app = axum::Router::new()
            .route("/x", axum::routing::get(|| async { "ok" }))
            .layer(axum::middleware::from_fn(error_shape));
        for (method, path, status) in [
            ("GET", "/nowhere", StatusCode::NOT_FOUND),
            ("DELETE", "/x", StatusCode::METHOD_NOT_ALLOWED),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), status);
            assert_eq!(
                resp.headers()[header::CONTENT_TYPE].to_str().unwrap(),
                "application/json"
            );
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(v["status"], status.as_u16());
            assert_eq!(v["type"], "/std-errors");
            assert_eq!(v["instance"].as_str().map(str::len), Some(32), "{v}");
            assert!(v["detail"].as_str().unwrap().contains(path), "{v}");
            assert_eq!(v["details"], v["detail"]);
        }
    }

    #[test]
    fn yaml_only_when_asked_before_json() {
        assert!(wants_yaml(&accept("application/yaml")));
        assert!(wants_yaml(&accept("text/yaml;q=0.9, application/json")));
        assert!(!wants_yaml(&accept("application/json, application/yaml")));
        assert!(!wants_yaml(&accept("*/*")));
        assert!(!wants_yaml(&HeaderMap::new()));
    }
}
