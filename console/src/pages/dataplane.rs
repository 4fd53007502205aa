//! One DPP, `GET /gui/meshes/{mesh}/dataplanes/{name}[?zone=]`: its identity and xDS state,
//! the policy rules it matches in the Live and the Shadow view side by side, the shadow
//! policies Umbra does not generate, and its config with the shadow diff laid out per xDS
//! resource ([`crate::diff_view`]).
//!
//! Everything comes from the CP's own API, asked concurrently on the caller's behalf:
//! `GET /meshes/{mesh}/dataplanes+insights/{name}`, `.../dataplanes/{name}/_rules` (Live and
//! `?shadow=true`), `.../_config` (Live) and `.../_config?shadow=true&include=diff`.
//!
//! On the Global `{name}` is the Global's name of the DPP (`<name>-<hash>`), or its name in
//! its zone with `?zone=` (as the fleet shadow diff links it): that is resolved first through
//! `GET /meshes/{mesh}/dataplanes?label=kuma.io/display-name:..&label=kuma.io/zone:..`. A
//! zone-local name without `?zone=` is resolved the same way when it is unique in the mesh.
//!
//! The insight decides the page (its error is the page's error; an empty `dataplaneInsight`,
//! `{}`, reads "no insight reported", as on the Dataplanes page); a rules or config answer
//! that fails (zone offline, a policy that cannot be applied) is shown in its own section. A
//! query that does not parse is a 400 page.
//!
//! The raw JSON links go through the console's API pass-through, `/gui/api/{path}` (the same
//! API `GET` with the browser's credentials), not to the API paths, which want an
//! `Authorization` header a browser does not send.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use umbra_core::resource::DISPLAY_NAME_LABEL;
use umbra_core::target_ref::{PROTOCOL_TAG, SERVICE_TAG};

use super::dataplanes::{insight_reported, ZONE_LABEL};
use super::{enc, text};
use crate::client::Caller;
use crate::diff_view::{
    per_resource, short_type, ConfigDiff, MAX_RESOURCES, MAX_TOTAL_ROWS, TIME_BUDGET,
};
use crate::error::PageError;
use crate::query::PageQuery;
use crate::render::page;
use crate::state::{Console, Mode};

/// Prefix of the console's API pass-through: `/gui/api{path}` answers the API's `GET {path}`
/// with the browser's credentials (the raw JSON links).
const API_PASS_THROUGH: &str = "/gui/api";

/// Path of the page. Named fields (not a tuple): the `/gui/{*rest}` mount may leave its own
/// parameter beside these.
#[derive(Debug, Deserialize)]
pub struct DpPath {
    /// The mesh.
    mesh: String,
    /// The Dataplane: the Global's name, or the zone-local one with `?zone=`.
    name: String,
}

/// Query of the page.
#[derive(Debug, Default, Deserialize)]
pub struct ShowQuery {
    /// On the Global: `{name}` is the DPP's name in this zone.
    zone: Option<String>,
}

/// `GET /gui/meshes/{mesh}/dataplanes/{name}[?zone=]`: the DPP page (template
/// `dataplane.html`), or the error page (400 for a query that does not parse, 404 for an
/// unknown mesh or DPP, the API's status otherwise; a 401 goes to the sign-in page).
pub async fn show(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(DpPath { mesh, name }): Path<DpPath>,
    PageQuery(q): PageQuery<ShowQuery>,
) -> Response {
    let zone = q.zone.filter(|z| !z.is_empty());
    match view(&console, &caller, &mesh, &name, zone.as_deref()).await {
        Ok((title, ctx)) => page(&console, &caller, "dataplane.html", &title, ctx),
        Err(e) => e.respond(&console, &caller, &uri.to_string()),
    }
}

/// The five API answers a page is built from.
struct Answers {
    insight: Result<Value, PageError>,
    live_rules: Result<Value, PageError>,
    shadow_rules: Result<Value, PageError>,
    live_config: Result<Value, PageError>,
    shadow_config: Result<Value, PageError>,
}

impl Answers {
    /// The first 401 among the answers: the whole page goes to the sign-in page.
    fn unauthorized(&self) -> Option<PageError> {
        [
            &self.insight,
            &self.live_rules,
            &self.shadow_rules,
            &self.live_config,
            &self.shadow_config,
        ]
        .into_iter()
        .find_map(|a| match a {
            Err(e) if e.status == StatusCode::UNAUTHORIZED => Some(e.clone()),
            _ => None,
        })
    }
}

/// The raw JSON links of DPP `name` in `mesh` (percent-encoded): the API paths the page reads,
/// through the console's pass-through ([`API_PASS_THROUGH`]).
fn api_paths(mesh: &str, name: &str) -> Value {
    let (m, n) = (enc(mesh), enc(name));
    let base = format!("{API_PASS_THROUGH}/meshes/{m}/dataplanes/{n}");
    json!({
        "insight": format!("{API_PASS_THROUGH}/meshes/{m}/dataplanes+insights/{n}"),
        "rules": format!("{base}/_rules"),
        "shadowRules": format!("{base}/_rules?shadow=true&include=diff"),
        "config": format!("{base}/_config"),
        "shadowConfig": format!("{base}/_config?shadow=true&include=diff"),
    })
}

/// Ask the API for everything about DPP `name`, concurrently.
async fn fetch(console: &Console, caller: &Caller, mesh: &str, name: &str) -> Answers {
    let (m, n) = (enc(mesh), enc(name));
    let base = format!("/meshes/{m}/dataplanes/{n}");
    let insight = format!("/meshes/{m}/dataplanes+insights/{n}");
    let live_rules = format!("{base}/_rules");
    let shadow_rules = format!("{base}/_rules?shadow=true");
    let live_config = format!("{base}/_config");
    let shadow_config = format!("{base}/_config?shadow=true&include=diff");
    let (insight, live_rules, shadow_rules, live_config, shadow_config) =
        futures_util::future::join5(
            caller.get(console, &insight),
            caller.get(console, &live_rules),
            caller.get(console, &shadow_rules),
            caller.get(console, &live_config),
            caller.get(console, &shadow_config),
        )
        .await;
    Answers {
        insight,
        live_rules,
        shadow_rules,
        live_config,
        shadow_config,
    }
}

/// The Global's names of the Dataplanes of `mesh` called `local` in their zone (in `zone`
/// only, when given); at most two (enough to tell unique from ambiguous).
async fn global_names(
    console: &Console,
    caller: &Caller,
    mesh: &str,
    local: &str,
    zone: Option<&str>,
) -> Result<Vec<(String, String)>, PageError> {
    let mut path = format!(
        "/meshes/{}/dataplanes?size=2&label={}",
        enc(mesh),
        enc(&format!("{DISPLAY_NAME_LABEL}:{local}"))
    );
    if let Some(z) = zone {
        path.push_str(&format!("&label={}", enc(&format!("{ZONE_LABEL}:{z}"))));
    }
    let body = caller.get(console, &path).await?;
    Ok(body["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|d| {
            (
                text(d, "name").to_owned(),
                text(&d["labels"], ZONE_LABEL).to_owned(),
            )
        })
        .filter(|(n, _)| !n.is_empty())
        .collect())
}

/// The page's title and template context for DPP `name` of `mesh` (`zone`: see [`show`]).
async fn view(
    console: &Console,
    caller: &Caller,
    mesh: &str,
    name: &str,
    zone: Option<&str>,
) -> Result<(String, Value), PageError> {
    let global = console.mode == Mode::Global;
    let mut resolved = name.to_owned();
    if let (true, Some(z)) = (global, zone) {
        let found = global_names(console, caller, mesh, name, Some(z)).await?;
        resolved = found.into_iter().next().map(|(n, _)| n).ok_or_else(|| {
            PageError::not_found(format!(
                "zone {z} has no Dataplane named {name} in mesh {mesh}"
            ))
        })?;
    }
    let mut answers = fetch(console, caller, mesh, &resolved).await;
    if let Some(e) = answers.unauthorized() {
        return Err(e);
    }
    // On the Global, a zone-local name without `?zone=`: the Global's name if it is unique.
    if let (true, None, Err(e)) = (global, zone, &answers.insight) {
        if e.status == StatusCode::NOT_FOUND {
            let found = global_names(console, caller, mesh, name, None).await?;
            match found.as_slice() {
                [(n, _)] => {
                    resolved = n.clone();
                    answers = fetch(console, caller, mesh, &resolved).await;
                    if let Some(e) = answers.unauthorized() {
                        return Err(e);
                    }
                }
                [(_, z1), (_, z2), ..] => {
                    return Err(PageError::not_found(format!(
                        "several zones ({z1}, {z2}, ...) have a Dataplane named {name} in mesh {mesh}: add ?zone=<zone>"
                    )))
                }
                [] => {}
            }
        }
    }
    let insight = answers.insight?;
    let dp = header(&resolved, &insight);
    let title = format!("Dataplane {}", text(&dp, "displayName"));
    let rules = rules_view(&answers.live_rules, &answers.shadow_rules);
    let not_generated = not_generated(&answers.shadow_config, &answers.shadow_rules);
    let (diff, config_error) = match (answers.live_config, answers.shadow_config) {
        (Ok(live), Ok(shadow)) => match config_diff(live, shadow).await {
            Ok(d) => (Some(d), None),
            Err(e) => (None, Some(e.detail)),
        },
        (Err(e), _) => (None, Some(format!("Live config: {}", e.detail))),
        (_, Err(e)) => (None, Some(format!("Shadow config: {}", e.detail))),
    };
    let ctx = json!({
        "mesh": mesh,
        "name": resolved,
        "requested": name,
        "zone": zone,
        "dp": dp,
        "rules": rules,
        "notGenerated": not_generated,
        "diff": diff,
        "configError": config_error,
        "api": api_paths(mesh, &resolved),
        "diffBudget": {
            "resources": MAX_RESOURCES,
            "rows": MAX_TOTAL_ROWS,
            "time": format!("{TIME_BUDGET:?}"),
        },
    });
    Ok((title, ctx))
}

/// The diff of the Live and the Shadow config per resource, off the async runtime (CPU work
/// bounded by [`crate::diff_view::Budget::DEFAULT`]).
async fn config_diff(mut live: Value, mut shadow: Value) -> Result<ConfigDiff, PageError> {
    let (live_xds, shadow_xds, diff) = (
        live["xds"].take(),
        shadow["xds"].take(),
        shadow["diff"].take(),
    );
    tokio::task::spawn_blocking(move || per_resource(&live_xds, &shadow_xds, &diff))
        .await
        .map_err(|e| PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            title: "Internal Server Error".into(),
            detail: format!("laying out the config diff: {e}"),
        })
}

/// The header's facts from a `dataplanes+insights` answer: `{name, displayName, zone,
/// address, inbound: [{service, port, servicePort, protocol}], gateway, outbounds,
/// insight (whether the zone reported one: not an empty `dataplaneInsight`), connected,
/// responsesSent, xds: [{typeUrl, short, acked, nack: {version, error}}], nacks: [{short,
/// error}], envoyVersion (the last subscription's), mtls: {backend, expires, regenerations}
/// (Kuma's `mTLS`, null outside mTLS meshes)}`.
fn header(name: &str, body: &Value) -> Value {
    let dp = &body["dataplane"];
    let ins = &body["dataplaneInsight"];
    let labels = &dp["labels"];
    let net = &dp["networking"];
    let display = Some(text(labels, DISPLAY_NAME_LABEL))
        .filter(|s| !s.is_empty())
        .unwrap_or(name);
    let inbound: Vec<Value> = net["inbound"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            json!({
                "service": text(&i["tags"], SERVICE_TAG),
                "protocol": text(&i["tags"], PROTOCOL_TAG),
                "port": i["port"],
                "servicePort": i["servicePort"],
            })
        })
        .collect();
    let mut types: BTreeMap<String, (Value, Value)> = BTreeMap::new();
    for (t, v) in ins["acked"].as_object().into_iter().flatten() {
        types.entry(t.clone()).or_default().0 = v.clone();
    }
    for (t, v) in ins["nacked"].as_object().into_iter().flatten() {
        types.entry(t.clone()).or_default().1 = v.clone();
    }
    let xds: Vec<Value> = types
        .iter()
        .map(|(t, (acked, nack))| json!({"typeUrl": t, "short": short_type(t), "acked": acked, "nack": nack}))
        .collect();
    let nacks: Vec<Value> = types
        .iter()
        .filter(|(_, (_, nack))| !nack.is_null())
        .map(|(t, (_, nack))| {
            let error = nack["error"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| nack.to_string());
            json!({"short": short_type(t), "version": nack["version"], "error": error})
        })
        .collect();
    json!({
        "name": name,
        "displayName": display,
        "zone": Some(text(labels, ZONE_LABEL)).filter(|z| !z.is_empty()),
        "address": text(net, "address"),
        "inbound": inbound,
        "gateway": net.pointer("/gateway/tags").map(|t| text(t, SERVICE_TAG)),
        "outbounds": net["outbound"].as_array().map_or(0, Vec::len),
        "insight": insight_reported(ins),
        "connected": ins["connected"].as_bool().unwrap_or(false),
        "responsesSent": ins["responsesSent"],
        "xds": xds,
        "nacks": nacks,
        "envoyVersion": ins["subscriptions"]
            .as_array()
            .and_then(|s| s.last())
            .and_then(|s| s.pointer("/version/envoy/version")),
        "mtls": ins.get("mTLS").filter(|m| m.is_object()).map(|m| json!({
            "backend": m["issuedBackend"],
            "expires": m["certificateExpirationTime"],
            "regenerations": m["certificateRegenerations"],
        })),
    })
}

/// The matched rules of both views per policy type (sorted by type): `{types: [{type,
/// comparable, differs, live, shadow}], differing, liveError, shadowError}`, where `live`
/// and `shadow` are the type's entry of each `_rules` answer (or null when the type has no
/// rule there) and `differs` says they are not equal (only when both answers came).
fn rules_view(live: &Result<Value, PageError>, shadow: &Result<Value, PageError>) -> Value {
    let mut by_type: BTreeMap<String, [Option<&Value>; 2]> = BTreeMap::new();
    for (side, answer) in [live, shadow].into_iter().enumerate() {
        let entries = answer.as_ref().ok().and_then(|a| a["rules"].as_array());
        for entry in entries.into_iter().flatten() {
            if let Some(slot) = by_type
                .entry(text(entry, "type").to_owned())
                .or_default()
                .get_mut(side)
            {
                *slot = Some(entry);
            }
        }
    }
    let comparable = live.is_ok() && shadow.is_ok();
    let mut differing = 0;
    let types: Vec<Value> = by_type
        .into_iter()
        .map(|(ty, [l, s])| {
            let differs = comparable && l != s;
            differing += usize::from(differs);
            json!({"type": ty, "comparable": comparable, "differs": differs, "live": l, "shadow": s})
        })
        .collect();
    json!({
        "types": types,
        "differing": differing,
        "liveError": live.as_ref().err().map(|e| e.detail.clone()),
        "shadowError": shadow.as_ref().err().map(|e| e.detail.clone()),
    })
}

/// The shadow policies selecting the DPP whose effect Umbra does not generate, and the fields
/// of its Dataplane Umbra does not act on (`[{type, name, field?, reason}]`), from the Shadow
/// config answer, else the Shadow rules answer.
fn not_generated(config: &Result<Value, PageError>, rules: &Result<Value, PageError>) -> Value {
    [config, rules]
        .into_iter()
        .filter_map(|a| a.as_ref().ok())
        .find_map(|a| a.get("notGenerated").filter(|v| v.is_array()).cloned())
        .unwrap_or_else(|| json!([]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::RawQuery;
    use axum::http::Request;
    use axum::routing::get;
    use axum::{Json, Router};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const GLOBAL_NAME: &str = "frontend-1-8e7de3a575575735";

    fn insight() -> Value {
        json!({
            "dataplane": {
                "type": "Dataplane", "mesh": "default", "name": GLOBAL_NAME,
                "labels": {"kuma.io/display-name": "frontend-1", "kuma.io/zone": "zone-1"},
                "networking": {
                    "address": "127.42.1.29",
                    "inbound": [{"port": 8080, "servicePort": 18080, "tags": {"kuma.io/protocol": "http", "kuma.io/service": "frontend_kuma-demo_svc_8080"}}],
                    "outbound": [{"address": "127.43.1.71", "port": 3001, "tags": {"kuma.io/service": "backend"}}],
                },
            },
            "dataplaneInsight": {
                "connected": true,
                "acked": {CLUSTER: "v7", "type.googleapis.com/envoy.config.listener.v3.Listener": "v6"},
                "nacked": {"type.googleapis.com/envoy.config.listener.v3.Listener": {"version": "v7", "error": "bad <listener>"}},
                "responsesSent": 9,
                "mTLS": {"issuedBackend": "ca-1", "certificateExpirationTime": "2026-11-27T12:00:00Z",
                         "certificateRegenerations": 2, "lastCertificateRegeneration": "2026-11-26T12:00:00Z",
                         "supportedBackends": ["ca-1"]},
                "subscriptions": [{"id": "z/1", "controlPlaneInstanceId": "zone-1", "connectTime": "2026-11-26T12:00:00Z",
                                   "status": {}, "version": {"envoy": {"version": "1.31.2", "build": "x"}}}],
            },
        })
    }

    fn timeout_rule(idle: &str) -> Value {
        json!({
            "type": "MeshTimeout",
            "toRules": [{"matchers": [{"key": "kuma.io/service", "value": "backend", "not": false}], "conf": {"idleTimeout": idle}, "origin": [{"type": "MeshTimeout", "mesh": "default", "name": "timeout-global"}]}],
            "fromRules": [{"inbound": {"tags": {"kuma.io/service": "frontend_kuma-demo_svc_8080"}, "port": 8080, "address": "127.42.1.29"}, "rules": [{"matchers": [], "conf": {"http": {"requestTimeout": "1s"}}, "origin": []}]}],
            "warnings": [],
        })
    }

    fn rules(q: &str) -> Value {
        let mut types = vec![
            json!({"type": "MeshMetric", "toRules": [], "fromRules": [], "warnings": [],
                "proxyRule": {"conf": {"sidecar": {"includeUnused": true}}, "origin": [{"type": "MeshMetric", "mesh": "default", "name": "metrics-all"}]}}),
        ];
        types.push(timeout_rule(if q.contains("shadow=true") {
            "44s"
        } else {
            "10s"
        }));
        json!({"resource": {}, "rules": types, "httpMatches": [], "notGenerated": []})
    }

    fn config(q: &str) -> Value {
        let connect = if q.contains("shadow=true") {
            "7s"
        } else {
            "5s"
        };
        let mut body = json!({
            "xds": {CLUSTER: {"backend_kuma-demo_svc_3001": {"name": "backend_kuma-demo_svc_3001", "connectTimeout": connect}}},
            "notGenerated": [],
        });
        if q.contains("shadow=true") {
            body["notGenerated"] = json!([{"type": "MeshRetry", "name": "on-route", "reason": "targets a MeshHTTPRoute"}]);
            body["diff"] = json!([{"op": "replace", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend_kuma-demo_svc_3001/connectTimeout", "value": "7s"}]);
        }
        body
    }

    /// A fake API answering for one DPP (Global name `GLOBAL_NAME`, `frontend-1` in zone-1).
    fn api() -> Router {
        let known = |n: &str| n == GLOBAL_NAME;
        Router::new()
            .route(
                "/meshes/{mesh}/dataplanes+insights/{name}",
                get(move |Path((_, n)): Path<(String, String)>| async move {
                    if known(&n) {
                        Ok(Json(insight()))
                    } else {
                        Err((
                            StatusCode::NOT_FOUND,
                            Json(json!({"title": "Not Found", "detail": format!("{n} not found")})),
                        ))
                    }
                }),
            )
            .route(
                "/meshes/{mesh}/dataplanes/{name}/_rules",
                get(|RawQuery(q): RawQuery| async move { Json(rules(&q.unwrap_or_default())) }),
            )
            .route(
                "/meshes/{mesh}/dataplanes/{name}/_config",
                get(|RawQuery(q): RawQuery| async move { Json(config(&q.unwrap_or_default())) }),
            )
            .route(
                "/meshes/{mesh}/dataplanes",
                get(|RawQuery(q): RawQuery| async move {
                    let q = q.unwrap_or_default();
                    let q = percent_encoding::percent_decode_str(&q).decode_utf8_lossy();
                    let hit = q.contains("label=kuma.io/display-name:frontend-1")
                        && !q.contains("label=kuma.io/zone:zone-2");
                    let items = if hit {
                        vec![json!({"name": GLOBAL_NAME, "labels": {"kuma.io/zone": "zone-1"}})]
                    } else {
                        vec![]
                    };
                    Json(json!({"total": items.len(), "items": items}))
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
        // minijinja writes `/` as `&#x2f;`.
        let html = String::from_utf8(body.to_vec())
            .unwrap()
            .replace("&#x2f;", "/");
        (status, html)
    }

    #[tokio::test]
    async fn the_page_shows_header_rules_side_by_side_and_the_diff_per_resource() {
        let (status, html) =
            get_page(&format!("/gui/meshes/default/dataplanes/{GLOBAL_NAME}")).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        for want in [
            "Dataplane frontend-1",
            "zone-1",
            "127.42.1.29",
            "frontend_kuma-demo_svc_8080",
            "bad &lt;listener&gt;",
            "<code>1.31.2</code>",
            "<span class=\"chip\">ca-1</span>, expires <time>2026-11-27T12:00:00Z</time>",
            "id=\"rules\"",
            "<section class=\"rules-type differs\" data-type=\"MeshTimeout\"",
            "<section class=\"rules-type\" data-type=\"MeshMetric\"",
            "Proxy rule</h5>",
            "MeshMetric/metrics-all",
            "includeUnused",
            "class=\"rules-live\"",
            "class=\"rules-shadow\"",
            "kuma.io/service=backend",
            "timeout-global",
            "id=\"not-generated\"",
            "on-route",
            "id=\"config-diff\"",
            "data-resource=\"Cluster/backend_kuma-demo_svc_3001\"",
            "~ changed",
            "table class=\"diff-table\"",
            "<tr class=\"changed\"><td class=\"ln\">",
            "<td class=\"old\"><span class=\"sr-only\">changed</span>",
            "<td class=\"new\">",
            "<colgroup><col class=\"ln\"><col><col class=\"ln\"><col></colgroup>",
            "&quot;7s&quot;",
            "/gui/meshes/default/shadow-diff",
            "href=\"/gui/api/meshes/default/dataplanes/frontend-1-8e7de3a575575735/_config?shadow=true&amp;include=diff\"",
            "href=\"/gui/api/meshes/default/dataplanes+insights/frontend-1-8e7de3a575575735\"",
        ] {
            assert!(html.contains(want), "missing {want:?} in\n{html}");
        }
        assert!(
            html.contains("all</code>"),
            "an empty matcher list reads `all`"
        );
        // Every raw JSON link goes through the console's pass-through.
        assert!(!html.contains("href=\"/meshes/"), "{html}");
    }

    #[tokio::test]
    async fn a_query_that_does_not_parse_is_a_400_page() {
        let (status, html) = get_page(&format!(
            "/gui/meshes/default/dataplanes/{GLOBAL_NAME}?zone=a&zone=b"
        ))
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
        assert!(html.contains("duplicate field"), "{html}");
    }

    #[tokio::test]
    async fn a_zone_local_name_is_resolved_with_its_zone() {
        let (status, html) =
            get_page("/gui/meshes/default/dataplanes/frontend-1?zone=zone-1").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(
            html.contains(&format!(
                "/meshes/default/dataplanes/{}/_rules",
                enc(GLOBAL_NAME)
            )),
            "{html}"
        );
        let (status, html) =
            get_page("/gui/meshes/default/dataplanes/frontend-1?zone=zone-2").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
        assert!(
            html.contains("zone zone-2 has no Dataplane named frontend-1"),
            "{html}"
        );
        // Without the zone: resolved when unique.
        let (status, _) = get_page("/gui/meshes/default/dataplanes/frontend-1").await;
        assert_eq!(status, StatusCode::OK);
        let (status, _) = get_page("/gui/meshes/default/dataplanes/nobody").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn rules_of_a_type_differ_only_when_both_views_answered() {
        let live = Ok(rules(""));
        let shadow = Ok(rules("shadow=true"));
        let v = rules_view(&live, &shadow);
        assert_eq!(v["differing"], 1);
        assert_eq!(v["types"][0]["type"], "MeshMetric");
        assert_eq!(v["types"][0]["differs"], false);
        assert_eq!(v["types"][1]["differs"], true);
        let failed = Err(PageError::bad_gateway("zone-1 is offline".into()));
        let v = rules_view(&live, &failed);
        assert_eq!(v["differing"], 0);
        assert_eq!(v["shadowError"], "zone-1 is offline");
        assert!(v["types"][1]["shadow"].is_null());
    }

    #[test]
    fn the_header_reads_acks_and_nacks_per_type() {
        let h = header(GLOBAL_NAME, &insight());
        assert_eq!(h["displayName"], "frontend-1");
        assert_eq!(h["xds"][0]["short"], "Cluster");
        assert_eq!(h["xds"][1]["nack"]["error"], "bad <listener>");
        assert_eq!(h["nacks"][0]["short"], "Listener");
        assert_eq!(h["envoyVersion"], "1.31.2");
        assert_eq!(
            h["mtls"],
            json!({"backend": "ca-1", "expires": "2026-11-27T12:00:00Z", "regenerations": 2})
        );
        let bare = header(
            "x",
            &json!({"dataplane": {"networking": {}}, "dataplaneInsight": {}}),
        );
        assert_eq!(
            (bare["displayName"].as_str(), bare["insight"].as_bool()),
            (Some("x"), Some(false))
        );
        let missing = header("x", &json!({"dataplane": {}}));
        assert_eq!(missing["insight"], false);
        let down = header(
            "x",
            &json!({"dataplane": {}, "dataplaneInsight": {"connected": false}}),
        );
        assert_eq!(
            (&down["insight"], &down["connected"]),
            (&json!(true), &json!(false))
        );
    }
}
