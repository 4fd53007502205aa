//! The fleet-wide shadow diff on the Global (issue 22):
//! `GET /gui/meshes/{mesh}/shadow-diff?run=1&policy=Type/name&policy=...&zone=...`.
//!
//! This module owns the page: the form (which shadow policies to promote, one zone or every
//! zone), the call to the API's `GET /meshes/{mesh}/_shadow-diff` with
//! `Accept: application/x-ndjson`, and the page streamed as HTML while the zones answer: the
//! head (layout, form, an open `section#progress`), one fragment per NDJSON event
//! ([`EventRenderer`], pure), then the tail.
//!
//! A diff asks every DPP the shadow policies can affect, so opening the page does not run
//! one: without `run`, `policy` or `zone` in the query it shows only the form (which carries
//! a hidden `run=1`). With `run=1`, a `policy` or a `zone` the diff runs as the page loads,
//! so the page's link ([`Selection::query`], which includes `run=1`) is a deep link to its
//! result. The API takes one zone or none: a query naming several zones is a 400 page.
//!
//! Bounds: an NDJSON line over [`MAX_LINE_BYTES`] (the `result` line: over
//! [`MAX_RESULT_BYTES`]) stops the page with an error line; at most [`MAX_EVENT_LINES`]
//! progress and zone lines, [`MAX_GROUPS`] groups and [`MAX_FAILURES`] failures are rendered
//! (the page links to the API's full answer, through the console's `/gui/api/` route, for
//! the rest); when the browser goes away the page's stream is dropped, and with it the
//! API's, which stops the fan-out.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use minijinja::Environment;
use serde_json::{json, Value};
use umbra_core::resource::{ResourceType, EFFECT_LABEL, EFFECT_SHADOW};

use super::fleet::items;
use super::{enc, get_all, text};
use crate::client::Caller;
use crate::error::PageError;
use crate::render::{render, with_headers};
use crate::state::{Console, Mode};

/// Longest NDJSON line of the API's answer the page reads (bytes), but for the `result`
/// line; a longer one ends the page with an error line.
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// Longest `result` line the page reads (bytes). It carries every change group (each with
/// its sample of DPPs), so on a fleet of thousands of DPPs it is far over [`MAX_LINE_BYTES`].
pub const MAX_RESULT_BYTES: usize = 64 << 20;
/// How the API's `result` line starts (its serialized fields are in declaration order,
/// `kind` first), so that a long line can be told to be the result before it is complete.
const RESULT_PREFIX: &[u8] = br#"{"kind":"result""#;
/// Most progress and zone lines rendered; later ones are dropped (the result still comes).
pub const MAX_EVENT_LINES: usize = 10_000;
/// Most operation groups rendered (the largest ones).
pub const MAX_GROUPS: usize = 1_000;
/// Most DPP failures rendered.
pub const MAX_FAILURES: usize = 1_000;
/// Characters of an operation's value shown in its group's summary.
pub const VALUE_PREVIEW_CHARS: usize = 200;
/// Most `policy` (and `zone`) values read from the page's query.
const MAX_QUERY_ITEMS: usize = 1_000;
/// Largest error answer read before streaming (bytes).
const MAX_ERROR_BYTES: usize = 1 << 20;
/// Each zone's deadline, passed to the API as `timeout=`.
const ZONE_TIMEOUT: &str = "30s";
/// Where the head template splits into the head chunk and the tail chunk. Data rendered
/// into the template is HTML-escaped, so only the template's own comment can match.
const SPLIT: &str = "<!-- shadow-diff: events -->";

/// What the page's query asks for: the shadow policies to promote (`policy=Type/name`,
/// repeated or comma-separated; none means all of them), one zone (`zone=`; none, or an
/// empty value, means every zone), and whether to run the diff (`run=1`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `Type/name` of each policy, in the query's order, without duplicates.
    pub policies: Vec<String>,
    /// The one zone asked, or `None` for the whole fleet.
    pub zone: Option<String>,
    /// The query says `run=1` (the form's hidden field, the page's link).
    pub run: bool,
}

impl Selection {
    /// Read the raw query string (`application/x-www-form-urlencoded`); other keys ignored.
    ///
    /// # Errors
    /// A 400 when it names several zones: the API diffs one zone or every zone.
    pub fn parse(raw: Option<&str>) -> Result<Self, PageError> {
        let mut sel = Selection::default();
        let (mut seen_p, mut seen_z) = (BTreeSet::new(), BTreeSet::new());
        let mut zones: Vec<String> = Vec::new();
        for pair in raw.unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (form_decode(k), form_decode(v));
            match k.as_str() {
                "policy" => {
                    for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                        if sel.policies.len() < MAX_QUERY_ITEMS && seen_p.insert(p.to_owned()) {
                            sel.policies.push(p.to_owned());
                        }
                    }
                }
                "zone" => {
                    let z = v.trim();
                    if !z.is_empty() && zones.len() < MAX_QUERY_ITEMS && seen_z.insert(z.to_owned())
                    {
                        zones.push(z.to_owned());
                    }
                }
                "run" => sel.run = matches!(v.trim(), "1" | "true"),
                _ => {}
            }
        }
        match zones.len() {
            0 | 1 => sel.zone = zones.pop(),
            n => {
                // At most MAX_QUERY_ITEMS are counted; five are named.
                let named: Vec<String> = zones.iter().take(5).cloned().collect();
                return Err(PageError::bad_request(format!(
                    "pick one zone or every zone: the diff asks one zone or the whole fleet, \
                     and this link names {n} ({}{})",
                    named.join(", "),
                    if n > named.len() { ", ..." } else { "" }
                )));
            }
        }
        Ok(sel)
    }

    /// Whether the page runs the diff: `run=1`, a policy or a zone in the query.
    pub fn runs(&self) -> bool {
        self.run || !self.policies.is_empty() || self.zone.is_some()
    }

    /// The API's `policy` and `zone` parameters, each after a `&` (`""` for none): one
    /// comma-separated `policy=`, and `zone=` when one zone is picked.
    fn api_params(&self) -> String {
        let mut params = String::new();
        if !self.policies.is_empty() {
            params.push_str("&policy=");
            params.push_str(&enc(&self.policies.join(",")));
        }
        if let Some(zone) = &self.zone {
            params.push_str("&zone=");
            params.push_str(&enc(zone));
        }
        params
    }

    /// The API call: `/meshes/{mesh}/_shadow-diff?timeout=30s[&policy=A,B][&zone=z]`.
    pub fn api_path(&self, mesh: &str) -> String {
        format!(
            "/meshes/{}/_shadow-diff?timeout={ZONE_TIMEOUT}{}",
            enc(mesh),
            self.api_params()
        )
    }

    /// The API's full answer for the same policies and zone (every DPP of every group, and
    /// each DPP's patch), as JSON through the console's raw API route:
    /// `/gui/api/meshes/{mesh}/_shadow-diff?format=full[&policy=A,B][&zone=z]`. Every part is
    /// percent-encoded, so the link holds no HTML-special character but `&`.
    pub fn full_answer_href(&self, mesh: &str) -> String {
        format!(
            "/gui/api/meshes/{}/_shadow-diff?format=full{}",
            enc(mesh),
            self.api_params()
        )
    }

    /// The query of this view's deep link (`?run=1[&policy=...][&zone=...]`): appended to
    /// `/gui/meshes/{mesh}/shadow-diff` it runs the same diff.
    pub fn query(&self) -> String {
        let mut query = String::from("?run=1");
        for p in &self.policies {
            query.push_str("&policy=");
            query.push_str(&enc(p));
        }
        if let Some(zone) = &self.zone {
            query.push_str("&zone=");
            query.push_str(&enc(zone));
        }
        query
    }
}

/// One query key or value, `+` and `%XX` decoded.
fn form_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// `GET /gui/meshes/{mesh}/shadow-diff`: the form alone when the query asks for no diff
/// ([`Selection::runs`]), else the fleet-wide shadow diff, streamed as zones answer. A 404
/// page on a zone CP; a 400 page for a query naming several zones; the API's error page (its
/// status) when it refuses before streaming (unknown mesh, policy or zone, bad parameter);
/// the sign-in page on a 401.
pub async fn show(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(params): Path<HashMap<String, String>>,
    RawQuery(raw): RawQuery,
) -> Response {
    let here = uri.to_string();
    let mesh = params.get("mesh").cloned().unwrap_or_default();
    if console.mode != Mode::Global {
        return PageError::not_found(
            "the fleet-wide shadow diff is the Global's: open it on the Global CP's console".into(),
        )
        .respond(&console, &caller, &here);
    }
    let sel = match Selection::parse(raw.as_deref()) {
        Ok(sel) => sel,
        Err(e) => return e.respond(&console, &caller, &here),
    };
    let api_path = sel.api_path(&mesh);
    let diff = async {
        if sel.runs() {
            Some(
                caller
                    .stream(&console, &api_path, "application/x-ndjson")
                    .await,
            )
        } else {
            None
        }
    };
    let (diff, policies, zones) = futures_util::future::join3(
        diff,
        shadow_policies(&console, &caller, &mesh),
        caller.get(&console, "/zones"),
    )
    .await;
    let diff = match diff {
        None => None,
        Some(Ok(d)) if d.status().is_success() => Some(d),
        Some(Ok(d)) => return api_error(d).await.respond(&console, &caller, &here),
        Some(Err(e)) => return e.respond(&console, &caller, &here),
    };
    let (policies, mut notes) = match policies {
        Ok(p) => p,
        Err(e) => return e.respond(&console, &caller, &here),
    };
    let zones = match zones {
        Ok(body) => items(&body).to_vec(),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            return e.respond(&console, &caller, &here)
        }
        Err(e) => {
            notes.push(format!("could not list the zones: {}", e.detail));
            Vec::new()
        }
    };
    let mut ctx = head_context(&mesh, &sel, &policies, &zones, notes, &api_path);
    ctx["run"] = json!(diff.is_some());
    let title = format!("Shadow diff · {mesh}");
    let html = match render(&console, &caller, "shadow_diff_head.html", &title, ctx) {
        Ok(h) => h,
        Err(e) => return e.respond(&console, &caller, &here),
    };
    let Some(diff) = diff else {
        return with_headers(Html(html).into_response());
    };
    let Some((head, tail)) = html.split_once(SPLIT) else {
        return PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            title: "Internal Server Error".into(),
            detail: "the shadow diff template has no events marker".into(),
        }
        .respond(&console, &caller, &here);
    };
    let events = EventRenderer::new(
        console.templates.clone(),
        &mesh,
        sel.full_answer_href(&mesh),
    );
    let pump = Pump {
        body: diff.into_body().into_data_stream(),
        buf: Vec::new(),
        scanned: 0,
        events,
        head: Some(head.to_owned()),
        tail: Some(tail.to_owned()),
    };
    let stream = futures_util::stream::unfold(pump, |mut pump| async move {
        let chunk = pump.next_chunk().await?;
        Some((Ok::<Bytes, Infallible>(Bytes::from(chunk)), pump))
    });
    with_headers(
        (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            Body::from_stream(stream),
        )
            .into_response(),
    )
}

/// The API's error answer (before streaming) as a page error with its status.
async fn api_error(resp: Response) -> PageError {
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_ERROR_BYTES)
        .collect()
        .await
        .ok()
        .and_then(|b| serde_json::from_slice(&b.to_bytes()).ok())
        .unwrap_or(Value::Null);
    PageError::from_api(status, &body)
}

/// Every shadow policy of `mesh` (`Type/name`, sorted), listed per policy type with
/// `label=kuma.io/effect:shadow`, and a note per type that could not be listed.
///
/// # Errors
/// The API's 401 (to sign in again); other errors become notes.
async fn shadow_policies(
    console: &Console,
    caller: &Caller,
    mesh: &str,
) -> Result<(Vec<String>, Vec<String>), PageError> {
    let types: Vec<ResourceType> = ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.kind().is_policy())
        .collect();
    let label = enc(&format!("{EFFECT_LABEL}:{EFFECT_SHADOW}"));
    let paths = types
        .iter()
        .map(|t| {
            format!(
                "/meshes/{}/{}?size=1000&label={label}",
                enc(mesh),
                t.plural()
            )
        })
        .collect();
    let answers = get_all(console, caller, paths).await;
    let (mut names, mut notes) = (Vec::new(), Vec::new());
    for (ty, answer) in types.iter().zip(answers) {
        match answer {
            Ok(body) => {
                let listed = items(&body);
                for item in listed {
                    let shadow = item.pointer("/labels").and_then(|l| l.get(EFFECT_LABEL));
                    let name = text(item, "name");
                    if !name.is_empty() && shadow.and_then(Value::as_str) == Some(EFFECT_SHADOW) {
                        names.push(format!("{}/{name}", ty.name()));
                    }
                }
                if body["total"].as_u64().unwrap_or(0) > listed.len() as u64 {
                    notes.push(format!(
                        "only the first {} {} are listed",
                        listed.len(),
                        ty.plural()
                    ));
                }
            }
            Err(e) if e.status == StatusCode::UNAUTHORIZED => return Err(e),
            Err(e) => notes.push(format!("could not list {}: {}", ty.plural(), e.detail)),
        }
    }
    names.sort();
    Ok((names, notes))
}

/// The head template's context (`run`, whether the diff runs, is the caller's): the form's
/// choices (listed ones, plus any the link names that are not listed, kept checked), the
/// scope of the diff, the links.
fn head_context(
    mesh: &str,
    sel: &Selection,
    policies: &[String],
    zones: &[Value],
    notes: Vec<String>,
    api_path: &str,
) -> Value {
    let mut policy_choices: Vec<Value> = policies
        .iter()
        .map(|p| json!({"value": p, "checked": sel.policies.contains(p), "listed": true}))
        .collect();
    for p in sel.policies.iter().filter(|p| !policies.contains(p)) {
        policy_choices.push(json!({"value": p, "checked": true, "listed": false}));
    }
    let mut zone_choices: Vec<Value> = zones
        .iter()
        .filter(|z| !text(z, "name").is_empty())
        .map(|z| {
            let name = text(z, "name");
            json!({
                "name": name,
                "online": z["online"].as_bool().unwrap_or(false),
                "checked": sel.zone.as_deref() == Some(name),
                "listed": true,
            })
        })
        .collect();
    if let Some(z) = &sel.zone {
        if !zones.iter().any(|l| text(l, "name") == z) {
            zone_choices.push(json!({"name": z, "checked": true, "listed": false}));
        }
    }
    json!({
        "mesh": mesh,
        "action": format!("/gui/meshes/{}/shadow-diff", enc(mesh)),
        "policies": policy_choices,
        "zones": zone_choices,
        "selection": {"policies": sel.policies, "zone": sel.zone},
        "zoneScope": if sel.zone.is_some() { "one" } else { "all" },
        "notes": notes,
        "query": sel.query(),
        "apiPath": api_path,
        "apiHref": format!("/gui/api{api_path}"),
    })
}

/// Reads the API's NDJSON answer and yields the page's chunks: the head, one chunk per read
/// with the fragments of the lines it completed, then the tail.
struct Pump {
    body: BodyDataStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    events: EventRenderer,
    head: Option<String>,
    tail: Option<String>,
}

impl Pump {
    /// The next chunk of the page, `None` once the tail is out.
    async fn next_chunk(&mut self) -> Option<String> {
        if let Some(head) = self.head.take() {
            return Some(head);
        }
        loop {
            if self.events.is_done() {
                return self.tail.take();
            }
            let mut out = String::new();
            let mut start = 0;
            while let Some(pos) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let end = self.scanned + pos;
                out.push_str(&self.events.line(&self.buf[start..end]));
                start = end + 1;
                self.scanned = start;
                if self.events.is_done() {
                    break;
                }
            }
            self.buf.drain(..start);
            self.scanned = self.buf.len();
            // `buf` now holds the start of one line: the result may be longer than the rest.
            let (cap, what) = if self.buf.trim_ascii_start().starts_with(RESULT_PREFIX) {
                (MAX_RESULT_BYTES, "the API's result line")
            } else {
                (MAX_LINE_BYTES, "a line of the API's answer")
            };
            if self.buf.len() > cap {
                out.push_str(
                    &self
                        .events
                        .fail(&format!("{what} is over {} MiB", cap >> 20)),
                );
            }
            if !out.is_empty() {
                return Some(out);
            }
            match self.body.next().await {
                Some(Ok(bytes)) => self.buf.extend_from_slice(&bytes),
                Some(Err(e)) => {
                    return Some(self.events.fail(&format!("reading the API's answer: {e}")))
                }
                None => {
                    let rest = std::mem::take(&mut self.buf);
                    let mut out = self.events.line(&rest);
                    out.push_str(&self.events.finish());
                    return Some(out);
                }
            }
        }
    }
}

/// Turns the API's NDJSON events (issue 22: `start`, `dataplane`, `progress`, `zone`,
/// `result`) into HTML fragments of the page, in order. Pure: no I/O, one line at a time.
///
/// - `start`: `p.start-line` (DPPs asked, zones included, policies going live);
/// - `progress`: `p.progress-line` with a `<progress>` and "N of M DPPs answered";
/// - `zone`: `p.zone-line[data-zone][data-status]` (`.zone-failed` with the error);
/// - `result`: closes `section#progress` and renders `section#result` ([`result_view`]);
/// - `dataplane` and unknown kinds: nothing (the groups and failures say it all).
///
/// An unreadable line, or the answer ending without a result, closes the progress section
/// with a `p#stream-error`; nothing is rendered after the result or an error.
pub struct EventRenderer {
    env: Arc<Environment<'static>>,
    mesh: String,
    /// The link to the API's full answer ([`Selection::full_answer_href`]).
    full_href: String,
    /// Progress and zone lines rendered.
    lines: usize,
    /// The note that further lines are dropped is out.
    capped: bool,
    /// A result or an error was rendered: later lines are ignored.
    done: bool,
}

impl EventRenderer {
    /// A renderer for `mesh`'s diff, with the console's templates; `full_href` links to the
    /// API's full answer (every DPP of every group), shown next to what the page leaves out.
    pub fn new(env: Arc<Environment<'static>>, mesh: &str, full_href: String) -> Self {
        EventRenderer {
            env,
            mesh: mesh.to_owned(),
            full_href,
            lines: 0,
            capped: false,
            done: false,
        }
    }

    /// Whether the result (or an error) was rendered.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The fragment of one NDJSON line (without its newline); `""` for lines not shown.
    pub fn line(&mut self, line: &[u8]) -> String {
        if self.done || line.iter().all(u8::is_ascii_whitespace) {
            return String::new();
        }
        let event: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return self.fail(&format!("the API sent a line that is not JSON: {e}")),
        };
        match text(&event, "kind") {
            "start" => self.fragment(
                "shadow_diff_event.html",
                json!({
                    "kind": "start",
                    "considered": event["considered"].as_u64().unwrap_or(0),
                    "zones": event["zones"],
                    "shadowPolicies": event["shadowPolicies"],
                    "retired": event["retiredPolicies"],
                }),
            ),
            kind @ ("progress" | "zone") => {
                if self.lines >= MAX_EVENT_LINES {
                    if self.capped {
                        return String::new();
                    }
                    self.capped = true;
                    return self.fragment(
                        "shadow_diff_event.html",
                        json!({"kind": "capped", "max": MAX_EVENT_LINES}),
                    );
                }
                self.lines += 1;
                let mut ctx = event.clone();
                ctx["kind"] = json!(kind);
                self.fragment("shadow_diff_event.html", ctx)
            }
            "result" => {
                let html = self.fragment(
                    "shadow_diff_result.html",
                    result_view(&self.mesh, &event, &self.full_href),
                );
                self.done = true;
                html
            }
            _ => String::new(),
        }
    }

    /// Stop with `message`: close the progress section and say why the diff has no result.
    /// `""` when already done.
    pub fn fail(&mut self, message: &str) -> String {
        if self.done {
            return String::new();
        }
        self.done = true;
        let ctx = json!({"kind": "error", "message": message});
        self.render("shadow_diff_event.html", &ctx).unwrap_or_else(|| {
            "</section><p class=\"error\" id=\"stream-error\" role=\"alert\">The diff stopped.</p>"
                .to_owned()
        })
    }

    /// The answer ended: the error fragment when no result came, else `""`.
    pub fn finish(&mut self) -> String {
        self.fail("the API's answer ended before its result")
    }

    /// `name` rendered with `ctx`; a template error stops the page with an error line.
    fn fragment(&mut self, name: &str, ctx: Value) -> String {
        match self.render(name, &ctx) {
            Some(html) => html,
            None => self.fail(&format!("rendering {name} failed")),
        }
    }

    fn render(&self, name: &str, ctx: &Value) -> Option<String> {
        match self.env.get_template(name).and_then(|t| t.render(ctx)) {
            Ok(html) => Some(html),
            Err(e) => {
                tracing::error!(template = name, error = %e, "console template failed");
                None
            }
        }
    }
}

/// The result template's context, from the API's `result` line of `mesh`'s diff: totals,
/// zone tallies, the zones that failed (when `partial`), the shadow policies not generated,
/// the groups (largest first, at most [`MAX_GROUPS`], each with its DPP links) and the
/// failures (at most [`MAX_FAILURES`]); `full_href` links to the API's full answer, for the
/// DPPs beyond each group's sample and the groups beyond [`MAX_GROUPS`].
pub fn result_view(mesh: &str, result: &Value, full_href: &str) -> Value {
    let list = |k: &str| result[k].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut changes: Vec<&Value> = list("changes").iter().collect();
    // The API sends them largest first already; a stable sort keeps its order among equals.
    changes.sort_by_key(|c| std::cmp::Reverse(c["count"].as_u64().unwrap_or(0)));
    let groups: Vec<Value> = changes
        .iter()
        .take(MAX_GROUPS)
        .map(|c| group_view(mesh, c))
        .collect();
    let failed_zones: Vec<Value> = list("zones")
        .iter()
        .filter(|z| text(z, "status") != "ok")
        .map(|z| json!({"zone": text(z, "zone"), "status": text(z, "status"), "error": z["error"]}))
        .collect();
    let failures: Vec<Value> = list("failures")
        .iter()
        .take(MAX_FAILURES)
        .map(|f| {
            let (zone, name) = (text(f, "zone"), text(f, "name"));
            json!({"zone": zone, "name": name, "error": f["error"], "href": dp_href(mesh, zone, name)})
        })
        .collect();
    let totals = &result["totals"];
    let count = |k: &str| totals[k].as_u64().unwrap_or(0);
    json!({
        "mesh": mesh,
        "partial": result["partial"].as_bool().unwrap_or(false),
        "totals": {
            "considered": count("considered"),
            "changed": count("changed"),
            "unchanged": count("unchanged"),
            "failed": count("failed"),
        },
        "zones": list("zones"),
        "failedZones": failed_zones,
        "notGenerated": list("notGenerated"),
        "shadowPolicies": list("shadowPolicies"),
        "groups": groups,
        "groupsTotal": changes.len(),
        "failures": failures,
        "failuresTotal": list("failures").len(),
        "fullHref": full_href,
    })
}

/// One operation group: count, op (class and symbol), the path split into xDS type, resource
/// name and field path, the value (compact preview, and pretty in full when cut), DPP links.
fn group_view(mesh: &str, change: &Value) -> Value {
    let op = &change["operation"];
    let kind = text(op, "op");
    let (class, symbol) = match kind {
        "add" => ("op-add", "+"),
        "remove" => ("op-remove", "\u{2212}"),
        "replace" => ("op-replace", "~"),
        other => ("op-other", other),
    };
    let path = text(op, "path");
    let split = split_path(path);
    let value = op.get("value").map(|v| {
        let compact = serde_json::to_string(v).unwrap_or_default();
        let truncated = compact.chars().count() > VALUE_PREVIEW_CHARS;
        let short = if truncated {
            let mut s: String = compact.chars().take(VALUE_PREVIEW_CHARS).collect();
            s.push('…');
            s
        } else {
            compact
        };
        let full = if truncated {
            serde_json::to_string_pretty(v).unwrap_or_default()
        } else {
            String::new()
        };
        json!({"short": short, "truncated": truncated, "full": full})
    });
    let count = change["count"].as_u64().unwrap_or(0);
    let dataplanes: Vec<Value> = change["dataplanes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|d| {
            let (zone, name) = (text(d, "zone"), text(d, "name"));
            json!({"zone": zone, "name": name, "href": dp_href(mesh, zone, name)})
        })
        .collect();
    json!({
        "count": count,
        "op": kind,
        "class": class,
        "symbol": symbol,
        "path": path,
        "typeUrl": split.type_url,
        "type": split.type_name,
        "resource": split.resource,
        "field": split.field,
        "value": value,
        "shown": dataplanes.len(),
        "sampled": (dataplanes.len() as u64) < count,
        "dataplanes": dataplanes,
    })
}

/// The console page of a DPP in a zone: `/gui/meshes/{mesh}/dataplanes/{name}?zone={zone}`.
/// Each part is percent-encoded ([`enc`]: only ASCII letters, digits and `%XX` remain), so
/// the link holds no HTML-special character and the templates print it as it is.
fn dp_href(mesh: &str, zone: &str, name: &str) -> String {
    format!(
        "/gui/meshes/{}/dataplanes/{}?zone={}",
        enc(mesh),
        enc(name),
        enc(zone)
    )
}

/// An operation's JSON pointer into a DPP's config, split for reading.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SplitPath {
    /// The xDS type URL (`type.googleapis.com/envoy.config.cluster.v3.Cluster`), or `""`.
    pub type_url: String,
    /// Its short name (`Cluster`), or `""`.
    pub type_name: String,
    /// The xDS resource's name, or `""`.
    pub resource: String,
    /// The field path inside the resource, one item per pointer token (unescaped).
    pub field: Vec<String>,
}

/// Split `/type.googleapis.com~1envoy.config.cluster.v3.Cluster/name/field/...` (RFC 6901:
/// `~1` is `/`, `~0` is `~`) into type, resource name and field path; a pointer not starting
/// with a type URL is all field path.
pub fn split_path(path: &str) -> SplitPath {
    let tokens: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    match tokens.split_first() {
        Some((ty, rest)) if ty.starts_with("type.googleapis.com/") => {
            let (resource, field) = rest
                .split_first()
                .map_or((String::new(), &[][..]), |(r, f)| (r.clone(), f));
            SplitPath {
                type_name: ty.rsplit(['.', '/']).next().unwrap_or_default().to_owned(),
                type_url: ty.clone(),
                resource,
                field: field.to_vec(),
            }
        }
        _ => SplitPath {
            field: tokens,
            ..SplitPath::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet-wide diff of mesh `default` as a running Global streamed it
    /// (`/tmp/shapes/fleet.ndjson`): two zones, six DPPs, four shadow MeshTimeouts.
    const FLEET: &str = r#"{"kind":"start","mesh":"default","policy":null,"retiredPolicies":[],"shadowPolicies":["MeshTimeout/aaa-timeout-to-backend","MeshTimeout/aaa-timeout-to-frontend","MeshTimeout/aaa-timeout-to-redis","MeshTimeout/timeout-global"],"considered":6,"zones":["zone-1","zone-2"]}
{"kind":"dataplane","zone":"zone-2","name":"backend-2","status":"changed","operations":5}
{"kind":"progress","done":1,"considered":6}
{"kind":"dataplane","zone":"zone-2","name":"frontend-2","status":"changed","operations":18}
{"kind":"progress","done":2,"considered":6}
{"kind":"dataplane","zone":"zone-2","name":"payments-2","status":"changed","operations":5}
{"kind":"progress","done":3,"considered":6}
{"zone":"zone-2","status":"ok","considered":3,"changed":3,"unchanged":0,"failed":0,"kind":"zone"}
{"kind":"dataplane","zone":"zone-1","name":"backend-1","status":"changed","operations":5}
{"kind":"progress","done":4,"considered":6}
{"kind":"dataplane","zone":"zone-1","name":"redis-1","status":"unchanged","operations":0}
{"kind":"progress","done":5,"considered":6}
{"kind":"dataplane","zone":"zone-1","name":"frontend-1","status":"changed","operations":18}
{"kind":"progress","done":6,"considered":6}
{"zone":"zone-1","status":"ok","considered":3,"changed":2,"unchanged":1,"failed":0,"kind":"zone"}
{"kind":"result","mesh":"default","policy":null,"shadowPolicies":["MeshTimeout/aaa-timeout-to-backend","MeshTimeout/aaa-timeout-to-frontend","MeshTimeout/aaa-timeout-to-redis","MeshTimeout/timeout-global"],"notGenerated":[],"format":"summary","partial":false,"totals":{"considered":6,"changed":5,"unchanged":1,"failed":0},"zones":[{"zone":"zone-1","status":"ok","considered":3,"changed":2,"unchanged":1,"failed":0},{"zone":"zone-2","status":"ok","considered":3,"changed":3,"unchanged":0,"failed":0}],"changes":[{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend_kuma-demo_svc_3001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"frontend-2"},{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/frontend_kuma-demo_svc_8080/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"frontend-2"},{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:13001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"backend-2"},{"zone":"zone-1","name":"backend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:13001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxStreamDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"backend-2"},{"zone":"zone-1","name":"backend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:18080/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"frontend-2"},{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:18080/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxStreamDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"frontend-2"},{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/payments_kuma-demo_svc_5001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":2,"dataplanes":[{"zone":"zone-2","name":"frontend-2"},{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:15001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxConnectionDuration","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"payments-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.cluster.v3.Cluster/localhost:15001/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/maxStreamDuration","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"payments-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.29:8080/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.29:8080/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"3600s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.30:3001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"backend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.30:3001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"3600s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"backend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.29:8080/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.29:8080/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"3600s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.30:3001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"backend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.30:3001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"3600s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"backend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.40:5001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"payments-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.40:5001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"3600s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"payments-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.50:8080/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.50:8080/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"25s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.71:3001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.71:3001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"35s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.90:5001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.90:5001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"25s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.50:8080/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.50:8080/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"25s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.71:3001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.71:3001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"35s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.90:5001/filterChains/0/filters/0/typedConfig/requestHeadersTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"add","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.90:5001/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes/0/route/idleTimeout","value":"25s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.29:8080/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.1.30:3001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"backend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.29:8080/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.30:3001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"backend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:127.42.2.40:5001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"payments-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.105:6379/filterChains/0/filters/0/typedConfig/idleTimeout","value":"44s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.50:8080/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.71:3001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.1.90:5001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-1","name":"frontend-1"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.105:6379/filterChains/0/filters/0/typedConfig/idleTimeout","value":"44s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.50:8080/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.71:3001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]},{"operation":{"op":"replace","path":"/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:127.43.2.90:5001/filterChains/0/filters/0/typedConfig/commonHttpProtocolOptions/idleTimeout","value":"0s"},"count":1,"dataplanes":[{"zone":"zone-2","name":"frontend-2"}]}],"failures":[]}"#;

    fn renderer() -> EventRenderer {
        EventRenderer::new(
            Arc::new(crate::render::environment()),
            "default",
            "/gui/api/meshes/default/_shadow-diff?format=full&policy=MeshTimeout%2Fa".into(),
        )
    }

    fn feed(r: &mut EventRenderer, lines: &str) -> String {
        lines.lines().map(|l| r.line(l.as_bytes())).collect()
    }

    /// The `data-count` of every group, in page order.
    fn counts(html: &str) -> Vec<u64> {
        html.split("<details class=\"group\" data-count=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn a_fleet_diff_renders_progress_zones_and_groups_largest_first() {
        let mut r = renderer();
        let html = feed(&mut r, FLEET);
        assert!(r.is_done());
        assert!(
            html.contains("<p class=\"start-line\" data-considered=\"6\">"),
            "{html}"
        );
        assert!(html.contains("(zone-1, zone-2)"));
        assert_eq!(html.matches("<p class=\"progress-line\">").count(), 6);
        assert!(html.contains("<progress max=\"6\" value=\"6\">"));
        assert!(html.contains("6 of 6 DPPs answered"));
        assert!(html.contains(
            "<p class=\"zone-line\" data-zone=\"zone-2\" data-status=\"ok\">zone-2 answered: 3 changed, 0 unchanged</p>"
        ));
        assert!(html.contains("</section>\n<section id=\"result\" data-partial=\"false\""));
        assert!(!html.contains("banner partial"));
        assert!(html.contains("data-considered=\"6\" data-changed=\"5\""));
        // Every group of the result, largest first.
        let result: Value = serde_json::from_str(FLEET.lines().last().unwrap()).unwrap();
        let groups = counts(&html);
        assert_eq!(groups.len(), result["changes"].as_array().unwrap().len());
        assert!(groups.windows(2).all(|w| w[0] >= w[1]), "{groups:?}");
        assert_eq!(groups[0], 2);
        // The path split: xDS type, resource, field path; links to each DPP, encoded.
        assert!(html.contains("<span class=\"xds-type\" title=\"type.googleapis.com&#x2f;envoy.config.cluster.v3.Cluster\">Cluster</span> <strong class=\"xds-name\">backend_kuma-demo_svc_3001</strong>"));
        assert!(html.contains("<span class=\"op op-add\" title=\"add\">+</span>"));
        assert!(html.contains("<span class=\"op op-replace\" title=\"replace\">~</span>"));
        assert!(html.contains(
            "<a class=\"dp-link\" href=\"/gui/meshes/default/dataplanes/frontend-2?zone=zone-2\">zone-2/frontend-2</a>"
        ));
        // The API's dataplane lines are not rendered, and nothing after the result.
        assert!(!html.contains("data-status=\"changed\""));
        assert_eq!(
            r.line(b"{\"kind\":\"progress\",\"done\":7,\"considered\":6}"),
            ""
        );
        assert_eq!(r.finish(), "");
    }

    #[test]
    fn a_partial_result_names_the_failed_zone_and_escapes_values() {
        let long = "x".repeat(300);
        let result = json!({
            "kind": "result", "mesh": "default", "partial": true,
            "shadowPolicies": ["MeshTimeout/a"],
            "notGenerated": [{"type": "MeshTrace", "name": "t<b>", "reason": "not generated yet", "dataplanes": 2}],
            "totals": {"considered": 9, "changed": 6, "unchanged": 0, "failed": 3},
            "zones": [
                {"zone": "zone-1", "status": "ok", "considered": 6, "changed": 6, "unchanged": 0, "failed": 0},
                {"zone": "zone-2", "status": "failed", "considered": 3, "changed": 0, "unchanged": 0, "failed": 3, "error": "deadline exceeded"},
            ],
            "changes": [
                {"operation": {"op": "add", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener/l1/x", "value": "<script>alert(1)</script>"},
                 "count": 1, "dataplanes": [{"zone": "zone-1", "name": "a"}]},
                {"operation": {"op": "remove", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/c~1d/y~0z"},
                 "count": 5, "dataplanes": [{"zone": "zone-1", "name": "web 1/a?b&c"}, {"zone": "zone-1", "name": "b"}]},
                {"operation": {"op": "replace", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/c/z", "value": {"long": long}},
                 "count": 3, "dataplanes": [{"zone": "zone-1", "name": "a"}, {"zone": "zone-1", "name": "b"}, {"zone": "zone-1", "name": "c"}]},
            ],
            "failures": [{"zone": "zone-2", "name": "d", "error": "zone zone-2: deadline exceeded"}],
        });
        let lines = format!(
            "{}\n{}\n",
            r#"{"kind":"zone","zone":"zone-2","status":"failed","considered":3,"changed":0,"unchanged":0,"failed":3,"error":"deadline <exceeded>"}"#,
            result
        );
        let mut r = renderer();
        let html = feed(&mut r, &lines);
        assert!(html.contains("<p class=\"zone-line zone-failed\" data-zone=\"zone-2\" data-status=\"failed\">zone-2 failed: deadline &lt;exceeded&gt;</p>"), "{html}");
        assert!(html.contains("<section id=\"result\" data-partial=\"true\""));
        assert!(html.contains("<div class=\"banner partial\""));
        assert!(html.contains("<li class=\"zone-failed\" data-zone=\"zone-2\"><strong>zone-2</strong>: deadline exceeded</li>"));
        assert_eq!(counts(&html), [5, 3, 1]);
        assert!(html.contains("<span class=\"op op-remove\" title=\"remove\">\u{2212}</span>"));
        // RFC 6901 tokens unescaped for reading.
        assert!(html.contains(
            "<strong class=\"xds-name\">c&#x2f;d</strong> <span class=\"field\">y~z</span>"
        ));
        assert!(html
            .contains("href=\"/gui/meshes/default/dataplanes/web%201%2Fa%3Fb%26c?zone=zone-1\""));
        // A sampled group links to the API's full answer, through the console's API route.
        assert!(html.contains("showing 2 of 5 DPPs · <a class=\"full-answer\" href=\"&#x2f;gui&#x2f;api&#x2f;meshes&#x2f;default&#x2f;_shadow-diff?format=full&amp;policy=MeshTimeout%2Fa\">every DPP of every group, as JSON</a>"), "{html}");
        assert_eq!(html.matches("class=\"muted small sample\"").count(), 1);
        assert!(!html.contains("<script>alert"));
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;")
                || html.contains("&lt;script&gt;alert(1)&lt;/script&gt;")
        );
        assert!(html.contains("<pre class=\"value-full\">"));
        assert!(html.contains('…'));
        assert!(html.contains("id=\"not-generated\""));
        assert!(html.contains("t&lt;b&gt;"));
        assert!(html.contains("<section id=\"failures\""));
        assert!(html.contains("href=\"/gui/meshes/default/dataplanes/d?zone=zone-2\">zone-2/d</a>"));
    }

    #[test]
    fn an_unreadable_line_or_a_missing_result_stops_the_page() {
        let mut r = renderer();
        let html = r.line(b"{not json");
        assert!(html.starts_with("</section>"), "{html}");
        assert!(html.contains("id=\"stream-error\""));
        assert!(r.is_done());
        assert_eq!(
            r.line(b"{\"kind\":\"progress\",\"done\":1,\"considered\":2}"),
            ""
        );
        assert_eq!(r.finish(), "");

        let mut r = renderer();
        assert!(r
            .line(b"{\"kind\":\"progress\",\"done\":1,\"considered\":2}")
            .contains("1 of 2"));
        assert_eq!(r.line(b"   "), "");
        assert_eq!(
            r.line(b"{\"kind\":\"dataplane\",\"zone\":\"z\",\"name\":\"n\"}"),
            ""
        );
        let end = r.finish();
        assert!(
            end.contains("</section>") && end.contains("ended before its result"),
            "{end}"
        );
    }

    #[test]
    fn progress_lines_are_bounded() {
        let mut r = renderer();
        let line = b"{\"kind\":\"progress\",\"done\":1,\"considered\":2}";
        let html: String = (0..MAX_EVENT_LINES + 5).map(|_| r.line(line)).collect();
        assert_eq!(html.matches("progress-line").count(), MAX_EVENT_LINES);
        assert_eq!(html.matches("progress-capped").count(), 1);
        assert!(!r.is_done());
    }

    #[test]
    fn paths_split_into_type_resource_and_field() {
        let s = split_path("/type.googleapis.com~1envoy.config.cluster.v3.Cluster/c1/a/0/b~1c");
        assert_eq!(s.type_name, "Cluster");
        assert_eq!(
            s.type_url,
            "type.googleapis.com/envoy.config.cluster.v3.Cluster"
        );
        assert_eq!(s.resource, "c1");
        assert_eq!(s.field, ["a", "0", "b/c"]);
        let s = split_path("/type.googleapis.com~1envoy.config.cluster.v3.Cluster/c1");
        assert_eq!((s.resource.as_str(), s.field.len()), ("c1", 0));
        let s = split_path("/a/b");
        assert_eq!(
            (s.type_name.as_str(), s.field.clone()),
            ("", vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(split_path(""), SplitPath::default());
    }

    #[test]
    fn the_query_becomes_one_api_call() {
        let sel = Selection::parse(Some(
            "policy=MeshTimeout%2Fa&policy=MeshTimeout/b,MeshTimeout/a&zone=zone-1&zone=&zone=zone-1&other=1",
        ))
        .unwrap();
        assert_eq!(sel.policies, ["MeshTimeout/a", "MeshTimeout/b"]);
        assert_eq!(sel.zone.as_deref(), Some("zone-1"));
        assert!(!sel.run && sel.runs(), "a policy or a zone runs the diff");
        assert_eq!(
            sel.api_path("my mesh"),
            "/meshes/my%20mesh/_shadow-diff?timeout=30s&policy=MeshTimeout%2Fa%2CMeshTimeout%2Fb&zone=zone-1"
        );
        assert_eq!(
            sel.full_answer_href("my mesh"),
            "/gui/api/meshes/my%20mesh/_shadow-diff?format=full&policy=MeshTimeout%2Fa%2CMeshTimeout%2Fb&zone=zone-1"
        );
        assert_eq!(
            sel.query(),
            "?run=1&policy=MeshTimeout%2Fa&policy=MeshTimeout%2Fb&zone=zone-1"
        );
        // Several zones: the API asks one zone or all, so the page refuses to guess.
        let e = Selection::parse(Some("zone=z1&zone=z2&zone=z1")).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.detail.starts_with("pick one zone or every zone"),
            "{}",
            e.detail
        );
        assert!(e.detail.contains("names 2 (z1, z2)"), "{}", e.detail);
        // Nothing: the form alone; `run=1` (or "every zone", `zone=`): every policy and zone.
        let sel = Selection::parse(None).unwrap();
        assert_eq!(sel, Selection::default());
        assert!(!sel.runs());
        assert!(!Selection::parse(Some("zone=&run=0")).unwrap().runs());
        let sel = Selection::parse(Some("run=1&zone=")).unwrap();
        assert!(sel.runs() && sel.zone.is_none());
        assert_eq!(sel.api_path("m"), "/meshes/m/_shadow-diff?timeout=30s");
        assert_eq!(sel.query(), "?run=1");
        assert_eq!(
            Selection::parse(Some("zone=a+b")).unwrap().zone.as_deref(),
            Some("a b")
        );
    }

    fn pump(chunks: Vec<Vec<u8>>) -> Pump {
        let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
        Pump {
            body: Body::from_stream(stream).into_data_stream(),
            buf: Vec::new(),
            scanned: 0,
            events: renderer(),
            head: Some("HEAD".into()),
            tail: Some("TAIL".into()),
        }
    }

    async fn drain(mut p: Pump) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(c) = p.next_chunk().await {
            out.push(c);
        }
        out
    }

    #[tokio::test]
    async fn the_pump_reads_lines_across_chunks_and_ends_with_the_tail() {
        let bytes = FLEET.as_bytes();
        let chunks: Vec<Vec<u8>> = bytes.chunks(97).map(<[u8]>::to_vec).collect();
        let out = drain(pump(chunks)).await;
        assert_eq!(out.first().map(String::as_str), Some("HEAD"));
        assert_eq!(out.last().map(String::as_str), Some("TAIL"));
        let page = out.concat();
        assert_eq!(page.matches("progress-line").count(), 6);
        assert_eq!(page.matches("<section id=\"result\"").count(), 1);
        assert!(!page.contains("stream-error"));
        // No trailing newline after the result: still read.
        let out = drain(pump(vec![FLEET.trim_end().as_bytes().to_vec()])).await;
        assert!(out.concat().contains("<section id=\"result\""));
    }

    #[tokio::test]
    async fn the_pump_stops_on_a_missing_result_or_an_overlong_line() {
        let out = drain(pump(vec![
            b"{\"kind\":\"progress\",\"done\":1,\"considered\":2}\n".to_vec(),
        ]))
        .await;
        let page = out.concat();
        assert!(
            page.contains("1 of 2") && page.contains("ended before its result"),
            "{page}"
        );
        assert!(page.ends_with("TAIL"));
        let big = vec![b'x'; MAX_LINE_BYTES / 2];
        let out = drain(pump(vec![big.clone(), big.clone(), big, b"\n".to_vec()])).await;
        let page = out.concat();
        assert!(
            page.contains("a line of the API&#x27;s answer is over 4 MiB"),
            "{page}"
        );
        assert!(page.ends_with("TAIL"));
    }

    /// A `result` line of `groups` groups, each with a 4 KiB value (about 4.1 KiB a group).
    fn big_result(groups: usize) -> Vec<u8> {
        let value = "v".repeat(4 << 10);
        let changes: Vec<Value> = (0..groups)
            .map(|i| {
                json!({"operation": {"op": "add", "path": format!("/a/{i}"), "value": value},
                       "count": 20, "dataplanes": [{"zone": "z", "name": format!("dp-{i}")}]})
            })
            .collect();
        let result = json!({"kind": "result", "mesh": "default", "partial": false,
            "totals": {"considered": 20, "changed": 20, "unchanged": 0, "failed": 0},
            "zones": [], "changes": changes, "failures": []});
        let mut line = serde_json::to_vec(&result).unwrap();
        line.push(b'\n');
        line
    }

    #[tokio::test]
    async fn the_result_line_may_be_long_and_its_groups_are_capped() {
        // About 8 MiB: over the cap of other lines, within the result's.
        let line = big_result(2_000);
        assert!(line.len() > 2 * MAX_LINE_BYTES && line.len() < MAX_RESULT_BYTES);
        let chunks: Vec<Vec<u8>> = line.chunks(1 << 20).map(<[u8]>::to_vec).collect();
        let page = drain(pump(chunks)).await.concat();
        assert!(
            !page.contains("stream-error"),
            "{}",
            &page[..page.len().min(2_000)]
        );
        assert_eq!(counts(&page).len(), MAX_GROUPS);
        assert!(page
            .contains("Showing the 1000 largest of 2000 groups; <a class=\"full-answer\" href="));
        assert_eq!(page.matches("showing 1 of 20 DPPs").count(), MAX_GROUPS);
        assert!(page.ends_with("TAIL"));

        // Over the result's own cap: the page stops, saying so.
        let mut huge = br#"{"kind":"result","changes":[""#.to_vec();
        let mut chunks = vec![huge.clone()];
        huge = vec![b'x'; 8 << 20];
        chunks.extend(std::iter::repeat_n(huge, MAX_RESULT_BYTES / (8 << 20) + 1));
        let page = drain(pump(chunks)).await.concat();
        assert!(
            page.contains("the API&#x27;s result line is over 64 MiB"),
            "{page}"
        );
        assert!(page.ends_with("TAIL"));
    }

    /// A stand-in for the Global's API: two zones, one shadow MeshTimeout, the captured
    /// diff, a 404 for any other mesh; it records each diff call's query.
    fn fake_api(calls: Arc<std::sync::Mutex<Vec<String>>>) -> axum::Router {
        use axum::routing::get;
        let zones = get(|| async {
            axum::Json(json!({"total": 2, "items": [
                {"name": "zone-1", "online": true}, {"name": "zone-2", "online": false}]}))
        });
        let mesh = get(
            move |Path((mesh, what)): Path<(String, String)>, RawQuery(q): RawQuery| {
                let calls = calls.clone();
                async move {
                    if mesh != "default" {
                        let body = json!({"title": "Not Found", "status": 404,
                            "detail": format!("mesh {mesh:?} not found")});
                        return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
                    }
                    match what.as_str() {
                        "_shadow-diff" => {
                            calls.lock().unwrap().push(q.unwrap_or_default());
                            let chunks = FLEET.lines().map(|l| Ok::<_, Infallible>(format!("{l}\n")));
                            let body = Body::from_stream(futures_util::stream::iter(chunks.collect::<Vec<_>>()));
                            ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
                        }
                        "meshtimeouts" => axum::Json(json!({"total": 1, "items": [
                            {"type": "MeshTimeout", "name": "aaa", "labels": {"kuma.io/effect": "shadow"}}]}))
                        .into_response(),
                        _ => axum::Json(json!({"total": 0, "items": []})).into_response(),
                    }
                }
            },
        );
        axum::Router::new()
            .route("/zones", zones)
            .route("/meshes/{mesh}/{what}", mesh)
    }

    async fn get_page(mode: Mode, uri: &str) -> (StatusCode, String, Vec<String>) {
        use tower::ServiceExt as _;
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let app = crate::mount(fake_api(calls.clone()), mode);
        let req = axum::http::Request::get(uri).body(Body::empty()).unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let calls = calls.lock().unwrap().clone();
        (status, String::from_utf8(body.to_vec()).unwrap(), calls)
    }

    #[tokio::test]
    async fn the_page_streams_the_form_the_progress_and_the_result() {
        let (status, html, calls) = get_page(
            Mode::Global,
            "/gui/meshes/default/shadow-diff?run=1&policy=MeshTimeout/aaa&zone=zone-2",
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert_eq!(calls, ["timeout=30s&policy=MeshTimeout%2Faaa&zone=zone-2"]);
        for part in [
            "<form id=\"shadow-diff-form\" method=\"get\" action=\"/gui/meshes/default/shadow-diff\">",
            "<input type=\"checkbox\" name=\"policy\" value=\"MeshTimeout&#x2f;aaa\" checked>",
            "<input type=\"radio\" name=\"zone\" value=\"\" id=\"zone-every\">",
            "<input type=\"radio\" name=\"zone\" value=\"zone-2\" checked>",
            "<input type=\"radio\" name=\"zone\" value=\"zone-1\">",
            "<input type=\"hidden\" name=\"run\" value=\"1\">",
            "id=\"run-diff\"",
            "data-zone-scope=\"one\"",
            "<a id=\"permalink\" href=\"/gui/meshes/default/shadow-diff?run=1&amp;policy=MeshTimeout%2Faaa&amp;zone=zone-2\">",
            "<section id=\"progress\" aria-live=\"polite\"",
            "6 of 6 DPPs answered",
            "<section id=\"result\" data-partial=\"false\"",
            "<p class=\"muted small\" id=\"api-call\">From the API: <a href=\"&#x2f;gui&#x2f;api&#x2f;meshes&#x2f;default&#x2f;_shadow-diff?timeout=30s&amp;policy=MeshTimeout%2Faaa&amp;zone=zone-2\">",
            "Dataplanes</a>", // the mesh's nav
            "</html>",
        ] {
            assert!(html.contains(part), "{part} missing from\n{html}");
        }
        assert!(!html.contains(SPLIT) && !html.contains("id=\"form-hint\""));
        // The form's "every zone" and its hidden `run=1`: the whole fleet.
        let (status, html, calls) =
            get_page(Mode::Global, "/gui/meshes/default/shadow-diff?zone=&run=1").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(calls, ["timeout=30s"]);
        assert!(html
            .contains("<input type=\"radio\" name=\"zone\" value=\"\" id=\"zone-every\" checked>"));
        assert!(
            html.contains("data-zone-scope=\"all\"") && html.contains("<section id=\"result\"")
        );
        // A zone alone runs it too.
        let (_, _, calls) =
            get_page(Mode::Global, "/gui/meshes/default/shadow-diff?zone=zone-1").await;
        assert_eq!(calls, ["timeout=30s&zone=zone-1"]);
    }

    #[tokio::test]
    async fn the_bare_page_is_the_form_alone() {
        for uri in [
            "/gui/meshes/default/shadow-diff",
            "/gui/meshes/default/shadow-diff?zone=",
        ] {
            let (status, html, calls) = get_page(Mode::Global, uri).await;
            assert_eq!(status, StatusCode::OK, "{html}");
            assert!(calls.is_empty(), "{uri}: no diff runs: {calls:?}");
            for part in [
                "<p id=\"form-hint\">Pick shadow policies and a zone, or run the diff of every shadow policy over the whole fleet.</p>",
                "<form id=\"shadow-diff-form\"",
                "<input type=\"checkbox\" name=\"policy\" value=\"MeshTimeout&#x2f;aaa\">",
                "<input type=\"radio\" name=\"zone\" value=\"\" id=\"zone-every\" checked>",
                "<input type=\"hidden\" name=\"run\" value=\"1\">",
                "id=\"run-diff\"",
                "</html>",
            ] {
                assert!(html.contains(part), "{part} missing from\n{html}");
            }
            for absent in [
                "id=\"progress\"",
                "id=\"result\"",
                "id=\"permalink\"",
                SPLIT,
            ] {
                assert!(!html.contains(absent), "{absent} in\n{html}");
            }
        }
    }

    #[tokio::test]
    async fn several_zones_are_a_bad_request() {
        let (status, html, calls) = get_page(
            Mode::Global,
            "/gui/meshes/default/shadow-diff?run=1&zone=zone-1&zone=zone-2",
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(html.contains("pick one zone or every zone"), "{html}");
        assert!(calls.is_empty());
    }

    #[tokio::test]
    async fn api_errors_and_zone_cps_get_error_pages() {
        let (status, html, _) = get_page(Mode::Global, "/gui/meshes/nope/shadow-diff?run=1").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(html.contains("mesh &quot;nope&quot; not found"), "{html}");
        let (status, html, calls) = get_page(Mode::Zone, "/gui/meshes/default/shadow-diff").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(html.contains("the Global"));
        assert!(calls.is_empty());
    }
}
