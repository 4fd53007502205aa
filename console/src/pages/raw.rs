//! `GET /gui/api/{*path}`: an API answer as JSON, for the console's "raw JSON" links. The
//! browser's session cookie is not an API credential, so the console asks the API itself
//! (`GET /{path}?{query}`, with the browser's credentials, [`crate::client::Caller`]) and
//! passes the answer on unchanged: status, content type, body. Token and secret endpoints
//! (`/tokens/...`, `/global-secrets/...`) are not served here; an API 401 goes to sign-in.

use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::Response;

use crate::client::Caller;
use crate::error::PageError;
use crate::render::{to_login, with_headers};
use crate::state::Console;

/// API paths the raw view does not serve (first segment).
const REFUSED: &[&str] = &["tokens", "global-secrets", "gui", "global"];

/// The API path of a raw view, or why it is refused.
///
/// # Errors
/// A 404 page error for a refused or malformed path.
pub fn api_path(path: &str, query: Option<&str>) -> Result<String, PageError> {
    let first = path.split('/').next().unwrap_or("");
    if path.is_empty()
        || REFUSED.contains(&first)
        || path.split('/').any(|s| s == ".." || s == ".")
        || path.contains("//")
    {
        return Err(PageError::not_found(format!(
            "/{path} is not an API answer the console shows"
        )));
    }
    Ok(match query {
        Some(q) if !q.is_empty() => format!("/{path}?{q}"),
        _ => format!("/{path}"),
    })
}

/// `GET /gui/api/{*path}`.
pub async fn show(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    RawQuery(query): RawQuery,
) -> Response {
    // The path as the browser sent it, still percent-encoded, so an encoded `/` in a name
    // stays inside its segment.
    let path = uri.path().strip_prefix("/gui/api/").unwrap_or("");
    let target = match api_path(path, query.as_deref()) {
        Ok(t) => t,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    let resp = match caller.stream(&console, &target, "application/json").await {
        Ok(r) => r,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    if resp.status() == StatusCode::UNAUTHORIZED {
        return to_login(&uri.to_string());
    }
    let (mut parts, body) = resp.into_parts();
    // Only what describes the body goes on (no ETag, no cookies).
    let kept: Vec<_> = [header::CONTENT_TYPE, header::CONTENT_LENGTH]
        .into_iter()
        .filter_map(|name| parts.headers.get(&name).cloned().map(|v| (name, v)))
        .collect();
    parts.headers.clear();
    parts.headers.extend(kept);
    with_headers(Response::from_parts(parts, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_views_serve_api_answers_but_not_secrets() {
        assert_eq!(
            api_path("meshes/default/dataplanes/a/_config", Some("shadow=true")).unwrap(),
            "/meshes/default/dataplanes/a/_config?shadow=true"
        );
        assert_eq!(api_path("zones", None).unwrap(), "/zones");
        for bad in [
            "",
            "tokens/user",
            "global-secrets/admin-user-token",
            "gui/zones",
            "meshes/../tokens",
            "meshes//x",
        ] {
            assert!(api_path(bad, None).is_err(), "{bad}");
        }
    }
}
