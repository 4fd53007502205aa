//! Response format: JSON by default, YAML when the request's `Accept` names a YAML media type
//! (`application/yaml`, `application/x-yaml`, `text/yaml`) ahead of JSON, as Kuma's API and
//! `kumactl -o yaml` users expect. Applied as a middleware ([`yaml_output`]) so every JSON
//! answer, errors included, can come back as YAML.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

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
    if !yaml || !is_json {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
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
