//! Checks that keep an OpenAPI document honest against its router (used by both CPs' tests):
//! the document lists exactly the routes and methods a router declares, each declared
//! route is really served (answers with the API's own body, never the router's bare 404/405),
//! and the lists of resource types the document spells out are Umbra's ([`type_lists`]).

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

/// Where the lists of resource types an OpenAPI document spells out disagree with
/// [`ResourceType::ALL`](umbra_core::resource::ResourceType): the `type` enum of the
/// `ResourceInput` body must name exactly the mesh-scoped types, and every alternation in a
/// `pattern` that names `MeshTimeout` (`(MeshTimeout|Timeout|...)`) exactly the policy types.
/// Empty when they agree.
///
/// # Errors
/// When the document does not decode or has no `ResourceInput` schema.
pub fn type_lists(yaml: &str) -> Result<Vec<String>, String> {
    use umbra_core::resource::ResourceType;
    let doc = umbra_core::codec::decode_one(yaml.as_bytes(), umbra_core::codec::Limits::default())
        .map_err(|e| e.to_string())?;
    let names = |keep: fn(ResourceType) -> bool| -> BTreeSet<String> {
        ResourceType::ALL
            .iter()
            .filter(|t| keep(**t))
            .map(|t| t.name().to_owned())
            .collect()
    };
    let mut out = Vec::new();
    let input = doc["components"]["schemas"]["ResourceInput"]["properties"]["type"]["enum"]
        .as_array()
        .ok_or("no ResourceInput type enum")?;
    let listed: BTreeSet<String> = input
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let scoped = names(|t| t.is_mesh_scoped());
    if listed != scoped {
        out.push(format!(
            "ResourceInput type enum: {listed:?}, mesh-scoped types: {scoped:?}"
        ));
    }
    let policies = names(|t| t.kind().is_policy());
    let mut patterns = Vec::new();
    collect_patterns(&doc, &mut patterns);
    for pattern in patterns {
        for group in pattern.split('(').filter(|g| g.contains("MeshTimeout|")) {
            let group = group.split(')').next().unwrap_or_default();
            let listed: BTreeSet<String> = group.split('|').map(str::to_owned).collect();
            if listed != policies {
                out.push(format!(
                    "pattern {pattern:?}: {listed:?}, policy types: {policies:?}"
                ));
            }
        }
    }
    Ok(out)
}

/// Every `pattern` string in `v`.
fn collect_patterns(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("pattern", serde_json::Value::String(p)) => out.push(p.clone()),
                    _ => collect_patterns(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_patterns(v, out)),
        _ => {}
    }
}
