//! A mesh's staged rollout (issue 40): `/gui/meshes/{mesh}/rollout[?plan=]`, the Global's `GET
//! /meshes/{mesh}/_migration/rollout`: its state and phase, each stage's tags and DPPs, and
//! every decision with its time and, for a gate, each counter compared (the staged DPPs' rate,
//! the others', their own before the stage, the margin). Linked from the policies page on the
//! Global. No rollout is the API's 404, as an error page.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::Response;
use serde_json::json;

use crate::client::{enc, Caller};
use crate::query::PageQuery;
use crate::render::page;
use crate::state::Console;

/// Query of the rollout page.
#[derive(Debug, Default, serde::Deserialize)]
pub struct RolloutQuery {
    /// The plan's fingerprint (default: the mesh's latest rollout).
    pub plan: Option<String>,
}

/// `GET /gui/meshes/{mesh}/rollout`.
pub async fn show(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(mesh): Path<String>,
    PageQuery(q): PageQuery<RolloutQuery>,
) -> Response {
    let mut path = format!("/meshes/{}/_migration/rollout", enc(&mesh));
    if let Some(plan) = q.plan.as_deref().filter(|p| !p.is_empty()) {
        path.push_str(&format!("?plan={}", enc(plan)));
    }
    let mut rollout = match caller.get(&console, &path).await {
        Ok(r) => r,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    // Rates with four decimals, a dash where there was nothing to compare with.
    let shown = |v: &serde_json::Value| {
        v.as_f64()
            .map_or_else(|| "—".to_owned(), |r| format!("{r:.4}"))
    };
    for d in rollout["decisions"].as_array_mut().into_iter().flatten() {
        for c in d["verdict"]["checks"].as_array_mut().into_iter().flatten() {
            for key in ["staged", "others", "before"] {
                let text = shown(&c[key]);
                c[format!("{key}Text")] = json!(text);
            }
        }
    }
    page(
        &console,
        &caller,
        "rollout.html",
        "Staged rollout",
        json!({"mesh": mesh, "rollout": rollout, "raw": path}),
    )
}
