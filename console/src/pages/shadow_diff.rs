//! The fleet-wide shadow diff on the Global (issue 22):
//! `GET /gui/meshes/{mesh}/shadow-diff?policy=Type/name&policy=...&zone=...`.
//!
//! This module owns the page: the form (which shadow policies to promote, which zones), the
//! call to the API's `GET /meshes/{mesh}/_shadow-diff` with `Accept: application/x-ndjson`,
//! and the page streamed as HTML while the zones answer: the head (layout, form, an open
//! `section#progress`), one fragment per NDJSON event ([`EventRenderer`], pure), then the
//! tail. The diff runs as soon as the page loads, with the query it was given (every shadow
//! policy and every zone by default), so every URL is a deep link to its result.
//!
//! Bounds: an NDJSON line over [`MAX_LINE_BYTES`] stops the page with an error line; at most
//! [`MAX_EVENT_LINES`] progress and zone lines, [`MAX_GROUPS`] groups and [`MAX_FAILURES`]
//! failures are rendered; when the browser goes away the page's stream is dropped, and with
//! it the API's, which stops the fan-out.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
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

/// Longest NDJSON line of the API's answer the page reads (bytes); a longer one ends the
/// page with an error line.
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// Most progress and zone lines rendered; later ones are dropped (the result still comes).
pub const MAX_EVENT_LINES: usize = 10_000;
/// Most operation groups rendered (the largest ones).
pub const MAX_GROUPS: usize = 1_000;
/// Most DPP failures rendered.
pub const MAX_FAILURES: usize = 1_000;
/// Characters of an operation's value shown in its group's summary.
pub const VALUE_PREVIEW_CHARS: usize = 200;
/// Most `policy` and `zone` values read from the page's query.
const MAX_QUERY_ITEMS: usize = 1_000;
/// Largest error answer read before streaming (bytes).
const MAX_ERROR_BYTES: usize = 1 << 20;
/// Each zone's deadline, passed to the API as `timeout=`.
const ZONE_TIMEOUT: &str = "30s";
/// Where the head template splits into the head chunk and the tail chunk. Data rendered
/// into the template is HTML-escaped, so only the template's own comment can match.
const SPLIT: &str = "<!-- shadow-diff: events -->";

/// What the page's query asks for: the shadow policies to promote (`policy=Type/name`,
/// repeated or comma-separated; none means all of them) and the zones (`zone=`, repeated).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `Type/name` of each policy, in the query's order, without duplicates.
    pub policies: Vec<String>,
    /// Zone names, in the query's order, without duplicates.
    pub zones: Vec<String>,
}

/// How many zones a [`Selection`] lets the API diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneScope {
    /// No zone picked: the whole fleet.
    All,
    /// Exactly one zone picked: the API is asked for that zone alone (`zone=`).
    One,
    /// Several zones picked: the API takes one zone or all, so all are asked and the groups
    /// stay fleet-wide.
    Several,
}

impl Selection {
    /// Read the raw query string (`application/x-www-form-urlencoded`); other keys ignored.
    pub fn parse(raw: Option<&str>) -> Self {
        let mut sel = Selection::default();
        let (mut seen_p, mut seen_z) = (BTreeSet::new(), BTreeSet::new());
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
                    if !z.is_empty()
                        && sel.zones.len() < MAX_QUERY_ITEMS
                        && seen_z.insert(z.to_owned())
                    {
                        sel.zones.push(z.to_owned());
                    }
                }
                _ => {}
            }
        }
        sel
    }

    /// Whether the API is asked for all zones, one, or all because several were picked.
    pub fn zone_scope(&self) -> ZoneScope {
        match self.zones.len() {
            0 => ZoneScope::All,
            1 => ZoneScope::One,
            _ => ZoneScope::Several,
        }
    }

    /// The API call: `/meshes/{mesh}/_shadow-diff?timeout=30s[&policy=A,B][&zone=z]` (one
    /// comma-separated `policy=`, and `zone=` only when exactly one zone is picked).
    pub fn api_path(&self, mesh: &str) -> String {
        let mut path = format!("/meshes/{}/_shadow-diff?timeout={ZONE_TIMEOUT}", enc(mesh));
        if !self.policies.is_empty() {
            path.push_str("&policy=");
            path.push_str(&enc(&self.policies.join(",")));
        }
        if let [zone] = self.zones.as_slice() {
            path.push_str("&zone=");
            path.push_str(&enc(zone));
        }
        path
    }

    /// The query of this view's deep link (`?policy=...&zone=...`, or `""`): appended to
    /// `/gui/meshes/{mesh}/shadow-diff` it opens the same diff.
    pub fn query(&self) -> String {
        let pairs: Vec<String> = (self.policies.iter().map(|p| format!("policy={}", enc(p))))
            .chain(self.zones.iter().map(|z| format!("zone={}", enc(z))))
            .collect();
        if pairs.is_empty() {
            String::new()
        } else {
            format!("?{}", pairs.join("&"))
        }
    }
}

/// One query key or value, `+` and `%XX` decoded.
fn form_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// `GET /gui/meshes/{mesh}/shadow-diff`: the fleet-wide shadow diff, streamed as zones
/// answer. A 404 page on a zone CP; the API's error page (its status) when it refuses before
/// streaming (unknown mesh, policy or zone, bad parameter); the sign-in page on a 401.
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
    let sel = Selection::parse(raw.as_deref());
    let api_path = sel.api_path(&mesh);
    let (diff, policies, zones) = futures_util::future::join3(
        caller.stream(&console, &api_path, "application/x-ndjson"),
        shadow_policies(&console, &caller, &mesh),
        caller.get(&console, "/zones"),
    )
    .await;
    let diff = match diff {
        Ok(d) if d.status().is_success() => d,
        Ok(d) => return api_error(d).await.respond(&console, &caller, &here),
        Err(e) => return e.respond(&console, &caller, &here),
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
    let ctx = head_context(&mesh, &sel, &policies, &zones, notes, &api_path);
    let title = format!("Shadow diff · {mesh}");
    let html = match render(&console, &caller, "shadow_diff_head.html", &title, ctx) {
        Ok(h) => h,
        Err(e) => return e.respond(&console, &caller, &here),
    };
    let Some((head, tail)) = html.split_once(SPLIT) else {
        return PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            title: "Internal Server Error".into(),
            detail: "the shadow diff template has no events marker".into(),
        }
        .respond(&console, &caller, &here);
    };
    let pump = Pump {
        body: diff.into_body().into_data_stream(),
        buf: Vec::new(),
        scanned: 0,
        events: EventRenderer::new(console.templates.clone(), &mesh),
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

/// The head template's context: the form's choices (listed ones, plus any the link names
/// that are not listed, all kept checked), the scope of the diff, the links.
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
                "checked": sel.zones.iter().any(|s| s == name),
                "listed": true,
            })
        })
        .collect();
    for z in &sel.zones {
        if !zones.iter().any(|l| text(l, "name") == z) {
            zone_choices.push(json!({"name": z, "checked": true, "listed": false}));
        }
    }
    let scope = match sel.zone_scope() {
        ZoneScope::All => "all",
        ZoneScope::One => "one",
        ZoneScope::Several => "several",
    };
    json!({
        "mesh": mesh,
        "action": format!("/gui/meshes/{}/shadow-diff", enc(mesh)),
        "policies": policy_choices,
        "zones": zone_choices,
        "selection": {"policies": sel.policies, "zones": sel.zones},
        "zoneScope": scope,
        "notes": notes,
        "query": sel.query(),
        "apiPath": api_path,
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
            if self.buf.len() > MAX_LINE_BYTES {
                out.push_str(&self.events.fail(&format!(
                    "a line of the API's answer is over {} MiB",
                    MAX_LINE_BYTES >> 20
                )));
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
    /// Progress and zone lines rendered.
    lines: usize,
    /// The note that further lines are dropped is out.
    capped: bool,
    /// A result or an error was rendered: later lines are ignored.
    done: bool,
}

impl EventRenderer {
    /// A renderer for `mesh`'s diff, with the console's templates.
    pub fn new(env: Arc<Environment<'static>>, mesh: &str) -> Self {
        EventRenderer {
            env,
            mesh: mesh.to_owned(),
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
                let html =
                    self.fragment("shadow_diff_result.html", result_view(&self.mesh, &event));
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
/// failures (at most [`MAX_FAILURES`]).
pub fn result_view(mesh: &str, result: &Value) -> Value {
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
        EventRenderer::new(Arc::new(crate::render::environment()), "default")
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
        assert!(html.contains("showing 2 of 5 DPPs"));
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
            "policy=MeshTimeout%2Fa&policy=MeshTimeout/b,MeshTimeout/a&zone=zone-1&zone=&other=1",
        ));
        assert_eq!(sel.policies, ["MeshTimeout/a", "MeshTimeout/b"]);
        assert_eq!(sel.zones, ["zone-1"]);
        assert_eq!(sel.zone_scope(), ZoneScope::One);
        assert_eq!(
            sel.api_path("my mesh"),
            "/meshes/my%20mesh/_shadow-diff?timeout=30s&policy=MeshTimeout%2Fa%2CMeshTimeout%2Fb&zone=zone-1"
        );
        assert_eq!(
            sel.query(),
            "?policy=MeshTimeout%2Fa&policy=MeshTimeout%2Fb&zone=zone-1"
        );
        // Several zones: the whole fleet, no `zone=`.
        let sel = Selection::parse(Some("zone=z1&zone=z2&zone=z1"));
        assert_eq!(sel.zone_scope(), ZoneScope::Several);
        assert_eq!(sel.api_path("m"), "/meshes/m/_shadow-diff?timeout=30s");
        // Nothing: every shadow policy, every zone.
        let sel = Selection::parse(None);
        assert_eq!(sel, Selection::default());
        assert_eq!(sel.zone_scope(), ZoneScope::All);
        assert_eq!(sel.query(), "");
        assert_eq!(Selection::parse(Some("zone=a+b")).zones, ["a b"]);
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
        assert!(page.contains("over 4 MiB"), "{page}");
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
            "/gui/meshes/default/shadow-diff?policy=MeshTimeout/aaa&zone=zone-1&zone=zone-2",
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert_eq!(calls, ["timeout=30s&policy=MeshTimeout%2Faaa"]);
        for part in [
            "<form id=\"shadow-diff-form\" method=\"get\" action=\"/gui/meshes/default/shadow-diff\">",
            "<input type=\"checkbox\" name=\"policy\" value=\"MeshTimeout&#x2f;aaa\" checked>",
            "<input type=\"checkbox\" name=\"zone\" value=\"zone-2\" checked>",
            "id=\"run-diff\"",
            "data-zone-scope=\"several\"",
            "<a id=\"permalink\" href=\"/gui/meshes/default/shadow-diff?policy=MeshTimeout%2Faaa&amp;zone=zone-1&amp;zone=zone-2\">",
            "<section id=\"progress\" aria-live=\"polite\"",
            "6 of 6 DPPs answered",
            "<section id=\"result\" data-partial=\"false\"",
            "id=\"api-call\"",
            "Dataplanes</a>", // the mesh's nav
            "</html>",
        ] {
            assert!(html.contains(part), "{part} missing from\n{html}");
        }
        assert!(!html.contains(SPLIT));
        let (_, _, calls) =
            get_page(Mode::Global, "/gui/meshes/default/shadow-diff?zone=zone-1").await;
        assert_eq!(calls, ["timeout=30s&zone=zone-1"]);
    }

    #[tokio::test]
    async fn api_errors_and_zone_cps_get_error_pages() {
        let (status, html, _) = get_page(Mode::Global, "/gui/meshes/nope/shadow-diff").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(html.contains("mesh &quot;nope&quot; not found"), "{html}");
        let (status, html, calls) = get_page(Mode::Zone, "/gui/meshes/default/shadow-diff").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(html.contains("the Global"));
        assert!(calls.is_empty());
    }
}
