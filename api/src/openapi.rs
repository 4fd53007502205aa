//! Checks that keep an OpenAPI document honest against its router (used by both CPs' tests):
//! the document lists exactly the routes and methods a router declares, and each declared
//! route is really served (answers with the API's own body, never the router's bare 404/405).

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt as _;

/// `(path, method)` pairs of an OpenAPI 3 document given as YAML.
///
/// # Errors
/// When the document does not decode or has no `paths` mapping.
pub fn documented(yaml: &str) -> Result<BTreeSet<(String, String)>, String> {
    let doc = umbra_core::codec::decode_one(yaml.as_bytes(), umbra_core::codec::Limits::default())
        .map_err(|e| e.to_string())?;
    let paths = doc["paths"].as_object().ok_or("no paths")?;
    Ok(paths
        .iter()
        .flat_map(|(p, ops)| {
            ops.as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .filter(|k| *k != "parameters")
                .map(move |m| (p.clone(), m.clone()))
        })
        .collect())
}

/// `(path, method)` pairs of a route table.
pub fn declared(routes: &[(&str, &[&str])]) -> BTreeSet<(String, String)> {
    routes
        .iter()
        .flat_map(|(p, ms)| ms.iter().map(move |m| ((*p).to_owned(), (*m).to_owned())))
        .collect()
}

/// The declared routes `app` does not serve (path parameters filled with sample values), as
/// `"METHOD uri: status"`.
pub async fn unserved(app: axum::Router, routes: &[(&str, &[&str])]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, methods) in routes {
        let uri = path
            .replace("{mesh}", "m")
            .replace("{plural}", "meshtimeouts")
            .replace("{name}", "x");
        for m in *methods {
            let Ok(req) = Request::builder()
                .method(m.to_uppercase().as_str())
                .uri(&uri)
                .body(Body::from("{}"))
            else {
                out.push(format!("{m} {uri}: bad request"));
                continue;
            };
            let Ok(resp) = app.clone().oneshot(req).await;
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            // The router's own 404/405 (no route, no such method), in the API's error shape.
            let detail = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["detail"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let routed = !(status == StatusCode::METHOD_NOT_ALLOWED
                && detail.starts_with(crate::negotiate::NO_METHOD))
                && !(status == StatusCode::NOT_FOUND
                    && (body.is_empty() || detail.starts_with(crate::negotiate::NO_ROUTE)));
            if !routed {
                out.push(format!("{m} {uri}: {status}"));
            }
        }
    }
    out
}
