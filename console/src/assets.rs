//! The console's static assets, embedded in the binary: one stylesheet (light and dark
//! themes, colour-blind-safe added/removed/changed colours with a symbol beside every colour)
//! and one small script (keyboard shortcuts; every page works without it).

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::render::with_headers;

/// `(file name, content type, body)` of every asset.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/console.js"),
    ),
];

/// `GET /gui/assets/{file}`: an embedded asset (cached for an hour), or a 404.
pub async fn serve(Path(file): Path<String>) -> Response {
    let Some((_, kind, body)) = ASSETS.iter().find(|(name, _, _)| *name == file) else {
        return with_headers((StatusCode::NOT_FOUND, "no such asset").into_response());
    };
    let mut resp = ([(header::CONTENT_TYPE, *kind)], *body).into_response();
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    with_headers(resp)
}
