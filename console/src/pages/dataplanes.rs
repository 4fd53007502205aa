//! Dataplanes of a mesh (`/gui/meshes/{mesh}/dataplanes[?zone=&label=&offset=]`): each DPP
//! with its zone, address, services, and its ADS state from the insight its zone reports:
//! connected, ACKed types, and every NACK with Envoy's error; "no insight reported" when the
//! insight is empty (`{}`, the Global's answer when the zone reported none). One page of
//! [`PAGE_SIZE`] at a time, read in one call: `GET /meshes/{mesh}/dataplanes+insights`
//! (Kuma's `DataplaneOverview`s, each `{dataplane, dataplaneInsight}`).
//!
//! On the Global the zone filter lists the zones (`GET /zones`); when they cannot be listed
//! the page says so instead of the filter. A query that does not parse is a 400 page.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use umbra_core::resource::DISPLAY_NAME_LABEL;
use umbra_core::target_ref::{SERVICE_TAG, ZONE_TAG};

use super::fleet::items;
use super::{enc, text, PAGE_SIZE};
use crate::client::Caller;
use crate::diff_view::short_type;
use crate::error::PageError;
use crate::query::PageQuery;
use crate::render::page;
use crate::state::{Console, Mode};

/// The label naming a Dataplane's zone on the Global (the same key as the zone tag,
/// [`ZONE_TAG`]).
pub const ZONE_LABEL: &str = ZONE_TAG;

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

/// Whether a `dataplaneInsight` holds a report: a non-empty object (the Global answers `{}`,
/// or no insight at all, when the zone reported none).
pub fn insight_reported(dataplane_insight: &Value) -> bool {
    dataplane_insight.as_object().is_some_and(|o| !o.is_empty())
}

/// One table row from a Dataplane (list item) and its insight answer (`{dataplane,
/// dataplaneInsight}`, or the error of asking for it). Its `ads` is `connected`,
/// `disconnected`, `none` (no insight reported) or `unavailable` (the insight could not be
/// read: `insightError` says why).
pub fn row(dp: &Value, insight: Result<&Value, &PageError>) -> Value {
    let labels = &dp["labels"];
    let name = text(dp, "name");
    let display = labels[DISPLAY_NAME_LABEL].as_str().unwrap_or(name);
    let services: Vec<&str> = dp
        .pointer("/networking/inbound")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|i| i["tags"][SERVICE_TAG].as_str())
                .collect()
        })
        .unwrap_or_default();
    let di = insight
        .ok()
        .map(|i| &i["dataplaneInsight"])
        .filter(|d| insight_reported(d));
    let connected = di.and_then(|d| d["connected"].as_bool());
    let ads = match (&insight, di) {
        (Err(_), _) => "unavailable",
        (Ok(_), None) => "none",
        (Ok(_), Some(_)) if connected == Some(true) => "connected",
        (Ok(_), Some(_)) => "disconnected",
    };
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
        "zone": labels[ZONE_LABEL].as_str(),
        "address": dp.pointer("/networking/address"),
        "services": services,
        "gateway": dp.pointer("/networking/gateway").is_some(),
        "ads": ads,
        "insightError": insight.err().map(|e| e.detail.as_str()),
        "connected": connected,
        "acked": acked,
        "nacks": nacks,
        "responsesSent": di.and_then(|d| d["responsesSent"].as_u64()),
    })
}

/// `GET /gui/meshes/{mesh}/dataplanes`: the page (template `dataplanes.html`), or the error
/// page (400 for a query that does not parse, the API's status when the Dataplanes cannot be
/// listed; a 401 goes to the sign-in page).
pub async fn list(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(mesh): Path<String>,
    PageQuery(q): PageQuery<ListQuery>,
) -> Response {
    let offset = q.offset.unwrap_or(0);
    let zone = q.zone.filter(|z| !z.is_empty());
    let label = q.label.filter(|l| !l.is_empty());
    let mut filters = String::new();
    if let Some(z) = &zone {
        filters.push_str(&format!("&label={}", enc(&format!("{ZONE_LABEL}:{z}"))));
    }
    if let Some(l) = &label {
        filters.push_str(&format!("&label={}", enc(l)));
    }
    let path = format!(
        "/meshes/{}/dataplanes+insights?size={PAGE_SIZE}&offset={offset}{filters}",
        enc(&mesh)
    );
    let body = match caller.get(&console, &path).await {
        Ok(b) => b,
        Err(e) => return e.respond(&console, &caller, &uri.to_string()),
    };
    let rows: Vec<Value> = items(&body)
        .iter()
        .map(|overview| row(&overview["dataplane"], Ok(overview)))
        .collect();
    let nacking = rows
        .iter()
        .filter(|r| r["nacks"].as_array().is_some_and(|n| !n.is_empty()))
        .count();
    let connected = rows.iter().filter(|r| r["ads"] == "connected").count();
    // Zones to filter by: on the Global, every zone (or why they could not be listed); on a
    // zone, none.
    let (zones, zones_error): (Vec<String>, Option<String>) = if console.mode == Mode::Global {
        match caller.get(&console, "/zones").await {
            Ok(z) => (
                items(&z)
                    .iter()
                    .map(|z| text(z, "name").to_owned())
                    .collect(),
                None,
            ),
            Err(e) => (Vec::new(), Some(e.detail)),
        }
    } else {
        (Vec::new(), None)
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
        "zonesError": zones_error,
        "nacking": nacking,
        "connected": connected,
    });
    page(&console, &caller, "dataplanes.html", "Dataplanes", ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use axum::{Json, Router};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    fn dp(name: &str) -> Value {
        json!({"name": format!("{name}-abc"), "labels": {"kuma.io/display-name": name, "kuma.io/zone": "z1"},
            "networking": {"address": "10.0.0.1", "inbound": [{"port": 80, "tags": {"kuma.io/service": "web"}}]}})
    }

    #[test]
    fn a_row_carries_the_ads_state_and_the_last_nack() {
        let dp = dp("web-1");
        let insight = json!({"dataplane": dp, "dataplaneInsight": {"connected": true,
            "acked": {"type.googleapis.com/envoy.config.cluster.v3.Cluster": "v1"},
            "nacked": {"type.googleapis.com/envoy.config.listener.v3.Listener": {"version": "v2", "error": "bad filter"}},
            "responsesSent": 4}});
        let r = row(&dp, Ok(&insight));
        assert_eq!(r["display"], "web-1");
        assert_eq!(r["zone"], "z1");
        assert_eq!(r["services"], json!(["web"]));
        assert_eq!(r["acked"], json!(["Cluster"]));
        assert_eq!(
            r["nacks"],
            json!([{"type": "Listener", "version": "v2", "error": "bad filter"}])
        );
        assert_eq!(
            (&r["ads"], &r["connected"]),
            (&json!("connected"), &json!(true))
        );
        assert_eq!(r["insightError"], Value::Null);
        assert_eq!(r["responsesSent"], 4);
    }

    #[test]
    fn an_empty_insight_is_none_reported_and_a_failed_one_says_why() {
        let dp = dp("web-1");
        // The Global's answer when the zone reported no insight: `{}`, or none at all.
        for empty in [json!({}), Value::Null] {
            let r = row(
                &dp,
                Ok(&json!({"dataplane": dp, "dataplaneInsight": empty})),
            );
            assert_eq!(r["ads"], "none", "{empty}");
            assert_eq!(r["connected"], Value::Null);
            assert_eq!(r["acked"], json!([]));
        }
        let r = row(&dp, Ok(&json!({"dataplane": dp})));
        assert_eq!(r["ads"], "none");
        let r = row(
            &dp,
            Ok(
                &json!({"dataplane": dp, "dataplaneInsight": {"connected": false, "responsesSent": 2}}),
            ),
        );
        assert_eq!(
            (&r["ads"], &r["connected"]),
            (&json!("disconnected"), &json!(false))
        );
        let r = row(
            &dp,
            Ok(&json!({"dataplane": dp, "dataplaneInsight": {"responsesSent": 2}})),
        );
        assert_eq!(r["ads"], "disconnected");
        let e = PageError::bad_gateway("zone z1 is offline".into());
        let r = row(&dp, Err(&e));
        assert_eq!(
            (&r["ads"], &r["insightError"]),
            (&json!("unavailable"), &json!("zone z1 is offline"))
        );
        assert_eq!(r["connected"], Value::Null);
    }

    /// A fake API with two Dataplane overviews (connected, no insight reported) and a failing
    /// `/zones`.
    fn api() -> Router {
        Router::new()
            .route(
                "/meshes/{mesh}/dataplanes+insights",
                get(|| async {
                    Json(json!({"total": 2, "items": [
                        {"type": "DataplaneOverview", "dataplane": dp("up"),
                            "dataplaneInsight": {"connected": true, "nacked": {
                                "type.googleapis.com/envoy.config.listener.v3.Listener":
                                    {"version": "v2", "error": "bad filter"}}}},
                        {"type": "DataplaneOverview", "dataplane": dp("quiet"), "dataplaneInsight": {}},
                    ]}))
                }),
            )
            .route(
                "/zones",
                get(|| async {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        Json(json!({"title": "Service Unavailable", "detail": "zones store down"})),
                    )
                }),
            )
    }

    async fn get_page(uri: &str) -> (StatusCode, String) {
        let app = crate::mount(api(), Mode::Global);
        let resp = app
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// The `.ads-state` cell of the row of Dataplane `display`.
    fn ads_cell<'a>(html: &'a str, display: &str) -> &'a str {
        let row = html
            .split("<tr data-dataplane=")
            .find(|r| r.starts_with(&format!("\"{display}\"")))
            .unwrap_or_else(|| panic!("no row {display} in\n{html}"));
        let cell = row.split("class=\"ads-state\">").nth(1).unwrap();
        &cell[..cell.find("</td>").unwrap()]
    }

    #[tokio::test]
    async fn the_page_reads_overviews_in_one_call_and_tells_a_missing_zone_filter() {
        let (status, html) = get_page("/gui/meshes/default/dataplanes").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(ads_cell(&html, "up").contains("● connected"), "{html}");
        let quiet = ads_cell(&html, "quiet");
        assert!(quiet.contains("no insight reported"), "{quiet}");
        assert!(!quiet.contains("disconnected"), "{quiet}");
        assert!(
            html.contains("bad filter"),
            "every NACK with Envoy's error: {html}"
        );
        assert!(!html.contains("id=\"zone-filter\""), "{html}");
        assert!(
            html.contains("zone filter unavailable: zones store down"),
            "{html}"
        );
    }

    #[tokio::test]
    async fn a_query_that_does_not_parse_is_a_400_page() {
        let (status, html) = get_page("/gui/meshes/default/dataplanes?offset=abc").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
        assert!(html.contains("offset"), "{html}");
    }
}
