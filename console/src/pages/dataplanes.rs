//! Dataplanes of a mesh (`/gui/meshes/{mesh}/dataplanes[?zone=&label=&offset=]`): each DPP
//! with its zone, address, services, and its ADS state from the insight its zone reports
//! (`GET /meshes/{mesh}/dataplanes+insights/{name}`): connected, ACKed types, and the last
//! NACK with Envoy's error. One page of [`PAGE_SIZE`] at a time, insights asked
//! [`super::CONCURRENT_CALLS`] at once.

use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use super::fleet::items;
use super::{enc, get_all, text, PAGE_SIZE};
use crate::client::Caller;
use crate::render::page;
use crate::state::Console;

/// Query of the Dataplanes page.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Only this zone's Dataplanes.
    pub zone: Option<String>,
    /// `key:value`: only Dataplanes carrying this label.
    pub label: Option<String>,
    /// First item shown.
    pub offset: Option<usize>,
}

/// The short name of an xDS type URL (`Cluster` for `...cluster.v3.Cluster`).
pub fn short_type(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

/// One table row from a Dataplane (list item) and its insight answer (`{dataplane,
/// dataplaneInsight}`, or `None` when it could not be read).
pub fn row(dp: &Value, insight: Option<&Value>) -> Value {
    let labels = &dp["labels"];
    let name = text(dp, "name");
    let display = labels["kuma.io/display-name"].as_str().unwrap_or(name);
    let services: Vec<&str> = dp
        .pointer("/networking/inbound")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|i| i.pointer("/tags/kuma.io~1service")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    let di = insight.map(|i| &i["dataplaneInsight"]);
    let acked: Vec<&str> = di
        .and_then(|d| d["acked"].as_object())
        .map(|m| m.keys().map(|k| short_type(k)).collect())
        .unwrap_or_default();
    let nacks: Vec<Value> = di
        .and_then(|d| d["nacked"].as_object())
        .map(|m| {
            m.iter()
                .map(|(k, n)| json!({"type": short_type(k), "version": n["version"], "error": n["error"]}))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "name": name,
        "display": display,
        "zone": labels["kuma.io/zone"].as_str(),
        "address": dp.pointer("/networking/address"),
        "services": services,
        "gateway": dp.pointer("/networking/gateway").is_some(),
        "insight": insight.is_some(),
        "connected": di.and_then(|d| d["connected"].as_bool()),
        "acked": acked,
        "nacks": nacks,
        "responsesSent": di.and_then(|d| d["responsesSent"].as_u64()),
    })
}

/// `GET /gui/meshes/{mesh}/dataplanes`.
pub async fn list(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(mesh): Path<String>,
    Query(q): Query<ListQuery>,
) -> Response {
    let offset = q.offset.unwrap_or(0);
    let zone = q.zone.filter(|z| !z.is_empty());
    let label = q.label.filter(|l| !l.is_empty());
    let mut filters = String::new();
    if let Some(z) = &zone {
        filters.push_str(&format!("&label={}", enc(&format!("kuma.io/zone:{z}"))));
    }
    if let Some(l) = &label {
        filters.push_str(&format!("&label={}", enc(l)));
    }
    let path = format!(
        "/meshes/{}/dataplanes?size={PAGE_SIZE}&offset={offset}{filters}",
        enc(&mesh)
    );
    let body = match caller.get(&console, &path).await {
        Ok(b) => b,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    let dps = items(&body);
    let paths = dps
        .iter()
        .map(|dp| {
            format!(
                "/meshes/{}/dataplanes+insights/{}",
                enc(&mesh),
                enc(text(dp, "name"))
            )
        })
        .collect();
    let insights = get_all(&console, &caller, paths).await;
    let rows: Vec<Value> = dps
        .iter()
        .zip(&insights)
        .map(|(dp, i)| row(dp, i.as_ref().ok()))
        .collect();
    let nacking = rows
        .iter()
        .filter(|r| r["nacks"].as_array().is_some_and(|n| !n.is_empty()))
        .count();
    let connected = rows
        .iter()
        .filter(|r| r["connected"] == json!(true))
        .count();
    // Zones to filter by: on the Global, every zone; on a zone, none.
    let zones: Vec<String> = if console.mode == crate::state::Mode::Global {
        caller
            .get(&console, "/zones")
            .await
            .map(|z| {
                items(&z)
                    .iter()
                    .map(|z| text(z, "name").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut base = format!("/gui/meshes/{}/dataplanes?", enc(&mesh));
    if let Some(z) = &zone {
        base.push_str(&format!("zone={}&", enc(z)));
    }
    if let Some(l) = &label {
        base.push_str(&format!("label={}&", enc(l)));
    }
    let ctx = json!({
        "mesh": mesh,
        "rows": rows,
        "total": body["total"],
        "offset": offset,
        "size": PAGE_SIZE,
        "base": base,
        "zone": zone,
        "label": label,
        "zones": zones,
        "nacking": nacking,
        "connected": connected,
    });
    page(&console, &caller, "dataplanes.html", "Dataplanes", ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_carries_the_ads_state_and_the_last_nack() {
        let dp = json!({"name": "web-1-abc", "labels": {"kuma.io/display-name": "web-1", "kuma.io/zone": "z1"},
            "networking": {"address": "10.0.0.1", "inbound": [{"port": 80, "tags": {"kuma.io/service": "web"}}]}});
        let insight = json!({"dataplane": dp, "dataplaneInsight": {"connected": true,
            "acked": {"type.googleapis.com/envoy.config.cluster.v3.Cluster": "v1"},
            "nacked": {"type.googleapis.com/envoy.config.listener.v3.Listener": {"version": "v2", "error": "bad filter"}},
            "responsesSent": 4}});
        let r = row(&dp, Some(&insight));
        assert_eq!(r["display"], "web-1");
        assert_eq!(r["zone"], "z1");
        assert_eq!(r["services"], json!(["web"]));
        assert_eq!(r["acked"], json!(["Cluster"]));
        assert_eq!(
            r["nacks"],
            json!([{"type": "Listener", "version": "v2", "error": "bad filter"}])
        );
        assert_eq!(r["connected"], true);
        let r = row(&dp, None);
        assert_eq!(r["insight"], false);
        assert_eq!(r["connected"], Value::Null);
    }
}
