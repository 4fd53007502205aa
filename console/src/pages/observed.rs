//! One observed shadow policy's evidence (issue 40):
//! `/gui/meshes/{mesh}/policies/{plural}/{name}/observed`, the API's `GET
//! /meshes/{mesh}/{plural}/{name}/_observed` (on a Global fleet-wide, on a zone for its DPPs)
//! as a page: what the policy would deny of the traffic its DPPs saw, per calling service, per
//! zone and per DPP, from their Envoys' counters. Linked from the policies page's "observed"
//! badge. The API's errors (404, 409 for a policy that is not observed) are the error page.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::Response;
use serde_json::{json, Value};

use crate::client::{enc, Caller};
use crate::render::page;
use crate::state::Console;

/// `rate` (0..1) as a percentage with one decimal.
fn percent(rate: &Value) -> String {
    format!("{:.1}%", rate.as_f64().unwrap_or(0.0) * 100.0)
}

/// `GET /gui/meshes/{mesh}/policies/{plural}/{name}/observed`.
pub async fn show(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path((mesh, plural, name)): Path<(String, String, String)>,
) -> Response {
    let path = format!(
        "/meshes/{}/{}/{}/_observed",
        enc(&mesh),
        enc(&plural),
        enc(&name)
    );
    let mut report = match caller.get(&console, &path).await {
        Ok(r) => r,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    // Rates as percentages, next to the numbers they come from.
    let rate = report["totals"]["wouldRefuseRate"].clone();
    report["totals"]["percent"] = json!(percent(&rate));
    for list in ["zones", "dataplanes"] {
        for item in report[list].as_array_mut().into_iter().flatten() {
            let rate = if list == "zones" {
                item["totals"]["wouldRefuseRate"].clone()
            } else {
                item["wouldRefuseRate"].clone()
            };
            item["percent"] = json!(percent(&rate));
        }
    }
    let title = report["policy"].as_str().unwrap_or("Observed").to_owned();
    page(
        &console,
        &caller,
        "observed.html",
        &title,
        json!({"mesh": mesh, "plural": plural, "name": name, "report": report, "raw": path}),
    )
}
