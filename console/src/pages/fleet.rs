//! The fleet at a glance: zones (`/gui/zones`, from `GET /zones`: online, KDS streams,
//! connect and last-seen times, Dataplane counts, ingresses, sync ACK/NACK tallies), meshes
//! (`/gui/meshes`, from `GET /meshes` and each mesh's Dataplane count) and the control plane's
//! replicas (`/gui/replicas`, from `GET /ready`: each replica, the leader, who holds KDS).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{enc, get_all, text};
use crate::client::Caller;
use crate::error::PageError;
use crate::query::PageQuery;
use crate::render::page;
use crate::state::Console;

/// `GET /gui/zones`: every zone the Global knows (404 on a zone CP).
pub async fn zones(State(console): State<Console>, caller: Caller, uri: Uri) -> Response {
    if console.mode != crate::state::Mode::Global {
        return PageError::not_found("a zone CP has no zones page: see the Global's".into())
            .respond(&console, &caller, &uri.to_string());
    }
    match caller.get(&console, "/zones").await {
        Ok(body) => {
            let mut online = 0;
            let mut dataplanes = 0;
            let zones: Vec<Value> = items(&body)
                .iter()
                .map(|z| {
                    online += usize::from(z["online"].as_bool().unwrap_or(false));
                    dataplanes += z["dataplanes"].as_u64().unwrap_or(0);
                    let (mut acks, mut nacks) = (0, 0);
                    if let Some(types) = z["globalToZone"].as_object() {
                        for t in types.values() {
                            acks += t["acks"].as_u64().unwrap_or(0);
                            nacks += t["nacks"].as_u64().unwrap_or(0);
                        }
                    }
                    let mut z = z.clone();
                    z["acks"] = json!(acks);
                    z["nacks"] = json!(nacks);
                    z
                })
                .collect();
            let ctx = json!({"zones": zones, "online": online, "dataplanes": dataplanes});
            page(&console, &caller, "zones.html", "Zones", ctx)
        }
        Err(e) => e.respond(&console, &caller, &uri.to_string()),
    }
}

/// Query of the meshes page.
#[derive(Debug, Deserialize)]
pub struct MeshesQuery {
    /// Count only this zone's Dataplanes.
    zone: Option<String>,
}

/// `GET /gui/meshes[?zone=]`: every mesh with its mTLS backend and Dataplane count.
pub async fn meshes(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    PageQuery(q): PageQuery<MeshesQuery>,
) -> Response {
    let zone = q.zone.filter(|z| !z.is_empty());
    let body = match caller.get(&console, "/meshes?size=1000").await {
        Ok(b) => b,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    let list = items(&body);
    let zone_filter = zone
        .as_deref()
        .map(|z| format!("&label={}", enc(&format!("kuma.io/zone:{z}"))))
        .unwrap_or_default();
    let paths = list
        .iter()
        .map(|m| {
            format!(
                "/meshes/{}/dataplanes?size=1{zone_filter}",
                enc(text(m, "name"))
            )
        })
        .collect();
    let counts = get_all(&console, &caller, paths).await;
    let meshes: Vec<Value> = list
        .iter()
        .zip(counts)
        .map(|(m, count)| {
            json!({
                "name": text(m, "name"),
                "mtls": m.pointer("/mtls/enabledBackend"),
                "dataplanes": count.map(|c| c["total"].clone()).unwrap_or(json!("?")),
                "modificationTime": text(m, "modificationTime"),
            })
        })
        .collect();
    page(
        &console,
        &caller,
        "meshes.html",
        "Meshes",
        json!({"meshes": meshes, "zone": zone}),
    )
}

/// `GET /gui/meshes/{mesh}`: the mesh's Dataplanes.
pub async fn mesh(Path(mesh): Path<String>) -> Response {
    Redirect::to(&format!("/gui/meshes/{}/dataplanes", enc(&mesh))).into_response()
}

/// `GET /gui/replicas`: the replicas of this control plane (Global or zone) as its `/ready`
/// names them: which one answered, which leads (on a zone, the one holding the KDS stream to
/// the Global), each one's addresses, heartbeat and (Global) the zones it holds.
pub async fn replicas(State(console): State<Console>, caller: Caller, uri: Uri) -> Response {
    match caller.get(&console, "/ready").await {
        Ok(ready) => {
            let list = ready["replicas"].as_array().cloned().unwrap_or_default();
            let ctx = json!({
                "me": ready["replica"],
                "leader": ready["leader"],
                "replicated": ready.get("replicas").is_some(),
                "replicas": list,
                "global": ready.get("global"),
            });
            page(&console, &caller, "replicas.html", "Replicas", ctx)
        }
        Err(e) => e.respond(&console, &caller, &uri.to_string()),
    }
}

/// The `items` of a list answer.
pub fn items(body: &Value) -> &[Value] {
    body["items"].as_array().map(Vec::as_slice).unwrap_or(&[])
}
