//! The console's views, one module each; this module holds the index and the 404 page, and
//! the helpers views share (query strings, bounded concurrent API calls).

pub mod dataplane;
pub mod dataplanes;
pub mod fleet;
pub mod observed;
pub mod policies;
pub mod raw;
pub mod rollout;
pub mod shadow_diff;

use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Redirect, Response};
use futures_util::StreamExt as _;
use serde_json::Value;

use crate::client::Caller;
use crate::error::PageError;
use crate::state::{Console, Mode};

/// Most API calls a page makes at once (per-DPP insights, per-policy selections).
pub const CONCURRENT_CALLS: usize = 16;

/// Most items a list page shows; the rest are reached with `offset=`.
pub const PAGE_SIZE: usize = 100;

/// `GET /gui/`: the zones on a Global, the meshes on a zone.
pub async fn index(State(console): State<Console>) -> Response {
    Redirect::to(match console.mode {
        Mode::Global => "/gui/zones",
        Mode::Zone => "/gui/meshes",
    })
    .into_response()
}

/// Any other `/gui/...` path: the console's 404 page.
pub async fn not_found(State(console): State<Console>, caller: Caller, uri: Uri) -> Response {
    PageError::not_found(format!("the console has no page at {}", uri.path())).respond(
        &console,
        &caller,
        &uri.to_string(),
    )
}

pub use crate::client::enc;

/// `GET` every path in `paths` from the API, at most [`CONCURRENT_CALLS`] at once; each answer
/// in the order of `paths` (an error answer as `Err`).
pub async fn get_all(
    console: &Console,
    caller: &Caller,
    paths: Vec<String>,
) -> Vec<Result<Value, PageError>> {
    futures_util::stream::iter(paths)
        .map(|p| async move { caller.get(console, &p).await })
        .buffered(CONCURRENT_CALLS)
        .collect()
        .await
}

/// A string field of a JSON object, or `""`.
pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}
