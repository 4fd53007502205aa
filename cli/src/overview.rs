//! `inspect dataplanes|meshes|zones|services`: kumactl's inspect tables, read from the
//! overviews the API answers (issue 20).
//!
//! - `inspect dataplanes [-m M] [--tag k:v]... [--name x]`: `GET /meshes/{M}/dataplanes+insights`
//!   (every mesh: `GET /dataplanes+insights`), one row per DPP: MESH, NAME, ZONE, TAGS (its
//!   inbound and gateway tags, `key=value[,value]`), STATUS (`Online` when a subscription is
//!   open, as Kuma reads it), LAST CONNECTED AGO (`never` without a subscription), TOTAL
//!   UPDATES and TOTAL ERRORS (xDS responses sent and NACKed on that subscription), CERT
//!   EXPIRATION and CERT REGENERATIONS (the mTLS identity), ENVOY VERSION and NACKS (the xDS
//!   types whose last response Envoy rejected).
//! - `inspect meshes`: `GET /meshes`, then per mesh the `total` of its Dataplane list and of
//!   every policy type `GET /_resources` names: NAME, MTLS (`<type>/<backend>` or `off`),
//!   DATAPLANES, POLICIES, AGE.
//! - `inspect zones` (Global): `GET /zones+insights`: NAME, STATUS, LAST CONNECTED AGO,
//!   SUBSCRIPTIONS, TOTAL UPDATES and TOTAL REJECTED (KDS responses of the last subscription),
//!   DATAPLANES. A zone CP answers that zones are the Global's.
//! - `inspect services [-m M]`: `GET /meshes/{M}/service-insights` (every mesh's when no
//!   `-m`), Kuma's `ServiceInsight` per `kuma.io/service`: MESH, SERVICE, STATUS (`online`,
//!   `partially_degraded`, `offline`, `not_available`), DPPS, ONLINE, and NACKED (DPPs with a
//!   rejected type, counted from the Dataplane overviews: the insight does not carry it).
//!
//! Lists are read page by page ([`PAGE_SIZE`] items, `next` followed) for at most
//! [`MAX_PAGES`] pages; past that the table shows what was read and says so on stderr.
//! `-o json` prints `{total, items}` (the overviews as answered; for meshes and services the
//! rows' data), `-o yaml` the items as YAML documents.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};
use umbra_core::codec::encode_yaml;

use crate::error::CliError;
use crate::http::{client, pretty, send_request};
use crate::resources::{age, GetOutput};

/// Items asked for per page (the API's largest page).
pub const PAGE_SIZE: usize = 1000;

/// Most pages read from one list.
pub const MAX_PAGES: usize = 100;

/// The tables `inspect` prints (flattened into [`crate::Inspect`]).
#[derive(Debug, clap::Subcommand)]
pub enum Tables {
    /// Every DPP with its status, like `kumactl inspect dataplanes` (`dataplanes+insights`).
    Dataplanes {
        /// Only this mesh (default: every mesh).
        #[arg(short, long)]
        mesh: Option<String>,
        /// Only DPPs with this inbound or gateway tag, `key:value` (the value matches as a
        /// substring, Kuma's `tag=`); repeatable, all must match.
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Only DPPs whose name contains this.
        #[arg(long)]
        name: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
    /// Every mesh: mTLS backend, DPPs and policies (counted from the lists' `total`).
    Meshes {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
    /// Every zone's KDS connection (`zones+insights`; Global only).
    Zones {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
    /// Services (`service-insights`), with how many DPPs are online and how many have a
    /// NACK (from `dataplanes+insights`).
    Services {
        /// Only this mesh (default: every mesh).
        #[arg(short, long)]
        mesh: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = GetOutput::Table)]
        output: GetOutput,
    },
}

/// A list read page by page: its items, and whether pages were left unread ([`MAX_PAGES`]).
#[derive(Debug, Default)]
pub struct Listed {
    /// Every item read, in the API's order.
    pub items: Vec<Value>,
    /// `true` when the list has more than [`MAX_PAGES`] pages.
    pub truncated: bool,
}

/// `GET` every page of the list at `path` (with `query`), following `next`.
///
/// # Errors
/// The API's error ([`CliError`]).
pub async fn list_all(
    http: &reqwest::Client,
    api_url: &str,
    path: &str,
    query: &[(&str, &str)],
) -> Result<Listed, CliError> {
    let base = api_url.trim_end_matches('/');
    let size = PAGE_SIZE.to_string();
    let mut first: Vec<(&str, &str)> = vec![("size", &size)];
    first.extend_from_slice(query);
    let mut page = get_value(http, &format!("{base}{path}"), &first).await?;
    let mut out = Listed::default();
    for n in 1.. {
        out.items
            .extend(page["items"].as_array().cloned().unwrap_or_default());
        let next = match page["next"].as_str() {
            Some(next) if !next.is_empty() => next.to_owned(),
            _ => break,
        };
        if n >= MAX_PAGES {
            out.truncated = true;
            break;
        }
        let url = if next.starts_with("http://") || next.starts_with("https://") {
            next
        } else {
            format!("{base}{next}")
        };
        page = get_value(http, &url, &[]).await?;
    }
    Ok(out)
}

/// `GET` `url` with `query`; the JSON answer.
pub(crate) async fn get_value(
    http: &reqwest::Client,
    url: &str,
    query: &[(&str, &str)],
) -> Result<Value, CliError> {
    let request = http
        .get(url)
        .query(query)
        .header("accept", "application/json");
    let (_, text) = send_request(url, request).await?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}")))
}

/// Run one `inspect` table command; the text to print. A list cut at [`MAX_PAGES`] is said
/// on stderr.
///
/// # Errors
/// A bad `--tag` ([`CliError::Input`]), the API's error, a zone CP asked for zones.
pub async fn run(api_url: &str, what: Tables, now: i64) -> Result<String, CliError> {
    let http = client(Duration::from_secs(150))?;
    let (listed, output, what_for): (Listed, GetOutput, &str) = match what {
        Tables::Dataplanes {
            mesh,
            tags,
            name,
            output,
        } => {
            for t in &tags {
                if t.split_once(':').is_none_or(|(k, _)| k.is_empty()) {
                    return Err(CliError::Input(format!("--tag {t:?}: expected key:value")));
                }
            }
            let mut query: Vec<(&str, &str)> = tags.iter().map(|t| ("tag", t.as_str())).collect();
            query.extend(name.as_deref().map(|n| ("name", n)));
            let listed = list_all(&http, api_url, &overviews_path(mesh.as_deref()), &query).await?;
            (listed, output, "dataplanes")
        }
        Tables::Services { mesh, output } => {
            let meshes = match &mesh {
                Some(m) => vec![m.clone()],
                None => list_all(&http, api_url, "/meshes", &[])
                    .await?
                    .items
                    .iter()
                    .filter_map(|m| m["name"].as_str().map(str::to_owned))
                    .collect(),
            };
            let mut insights = Listed::default();
            for m in &meshes {
                let path = format!("/meshes/{m}/service-insights");
                let page = list_all(&http, api_url, &path, &[]).await?;
                insights.items.extend(page.items);
                insights.truncated |= page.truncated;
            }
            let overviews = list_all(&http, api_url, &overviews_path(mesh.as_deref()), &[]).await?;
            let items = services(insights.items, &overviews.items);
            let truncated = insights.truncated || overviews.truncated;
            (Listed { items, truncated }, output, "services")
        }
        Tables::Meshes { output } => (meshes(&http, api_url).await?, output, "meshes"),
        Tables::Zones { output } => (zones(&http, api_url).await?, output, "zones"),
    };
    if listed.truncated {
        eprintln!(
            "warning: more than {MAX_PAGES} pages of {PAGE_SIZE} {what_for}; showing the first {}",
            listed.items.len()
        );
    }
    Ok(match output {
        GetOutput::Json => pretty(&json!({"total": listed.items.len(), "items": listed.items})),
        GetOutput::Yaml => listed
            .items
            .iter()
            .map(encode_yaml)
            .collect::<Vec<_>>()
            .join("---\n"),
        GetOutput::Table => table(what_for, &listed.items, now),
    })
}

fn overviews_path(mesh: Option<&str>) -> String {
    match mesh {
        Some(m) => format!("/meshes/{m}/dataplanes+insights"),
        None => "/dataplanes+insights".to_owned(),
    }
}

/// The meshes, each `{name, mesh: <the Mesh>, dataplanes, policies: {total, <Type>: n}}`.
async fn meshes(http: &reqwest::Client, api_url: &str) -> Result<Listed, CliError> {
    let base = api_url.trim_end_matches('/');
    let types = get_value(http, &format!("{base}/_resources"), &[]).await?;
    let policy_types: Vec<(String, String)> = types["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["scope"] == "Mesh" && d.get("policy").is_some())
        .filter_map(|d| {
            Some((
                d["name"].as_str()?.to_owned(),
                d["path"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let listed = list_all(http, api_url, "/meshes", &[]).await?;
    let mut items = Vec::with_capacity(listed.items.len());
    for mesh in listed.items {
        let at = format!(
            "{base}/meshes/{}",
            mesh["name"].as_str().unwrap_or_default()
        );
        let dataplanes = total(http, &format!("{at}/dataplanes")).await?;
        let mut policies = serde_json::Map::new();
        let mut sum = 0;
        for (ty, path) in &policy_types {
            let n = total(http, &format!("{at}/{path}")).await?;
            if n > 0 {
                policies.insert(ty.clone(), json!(n));
            }
            sum += n;
        }
        policies.insert("total".into(), json!(sum));
        items.push(json!({
            "name": mesh["name"],
            "mesh": mesh,
            "dataplanes": dataplanes,
            "policies": policies,
        }));
    }
    Ok(Listed { items, ..listed })
}

/// The `total` of the list at `url` (one item asked for).
async fn total(http: &reqwest::Client, url: &str) -> Result<u64, CliError> {
    let page = get_value(http, url, &[("size", "1")]).await?;
    Ok(page["total"].as_u64().unwrap_or(0))
}

/// The zone overviews; on a zone CP, an error saying zones are the Global's.
async fn zones(http: &reqwest::Client, api_url: &str) -> Result<Listed, CliError> {
    match list_all(http, api_url, "/zones+insights", &[]).await {
        Err(e) if e.exit_code() == 4 => {
            let base = api_url.trim_end_matches('/');
            let index = get_value(http, &format!("{base}/"), &[]).await;
            let mode = index.as_ref().ok().and_then(|i| i["mode"].as_str());
            match mode {
                Some(mode) if mode.starts_with("zone") => Err(e.context(format!(
                    "zones are the Global's: {base} is a zone control plane ({mode}); point --api-url at the Global"
                ))),
                _ => Err(e),
            }
        }
        other => other,
    }
}

/// The `ServiceInsight`s `insights`, each with `dataplanes.withNack`: how many of the
/// service's DPPs (by inbound or gateway `kuma.io/service`) have a rejected type in
/// `overviews`.
pub fn services(mut insights: Vec<Value>, overviews: &[Value]) -> Vec<Value> {
    let mut nacked: BTreeMap<(String, String), u64> = BTreeMap::new();
    for o in overviews {
        if nacks(&o["dataplaneInsight"]) == 0 {
            continue;
        }
        let mesh = o["mesh"].as_str().unwrap_or_default();
        let networking = &o["dataplane"]["networking"];
        let names: BTreeSet<&str> = networking["inbound"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| &i["tags"])
            .chain([&networking["gateway"]["tags"]])
            .filter_map(|t| t["kuma.io/service"].as_str())
            .collect();
        for name in names {
            *nacked
                .entry((mesh.to_owned(), name.to_owned()))
                .or_default() += 1;
        }
    }
    for s in &mut insights {
        let key = (text(&s["mesh"]), text(&s["name"]));
        let n = nacked.get(&key).copied().unwrap_or(0);
        if let Some(d) = s.get_mut("dataplanes").and_then(Value::as_object_mut) {
            d.insert("withNack".into(), json!(n));
        }
    }
    insights
}

/// Kuma's `IsOnline`: a subscription that connected and has not disconnected. An insight
/// without Kuma's subscriptions (an older zone's) says it with `connected`.
fn online(insight: &Value) -> bool {
    match insight["subscriptions"].as_array() {
        Some(subs) => subs
            .iter()
            .any(|s| s["connectTime"].is_string() && s["disconnectTime"].is_null()),
        None => insight["connected"].as_bool() == Some(true),
    }
}

/// How many xDS types Envoy rejected last (Umbra's `nacked`, else the last subscription's
/// per-type `nack`s).
fn nacks(insight: &Value) -> usize {
    if let Some(n) = insight["nacked"].as_object() {
        return n.len();
    }
    last_subscription(insight)
        .and_then(|s| s["status"].as_object())
        .map_or(0, |st| {
            st.values().filter(|t| t.get("nack").is_some()).count()
        })
}

/// A counter of the last subscription's `status.total` (Kuma's uint64 as a string).
fn total_of(insight: &Value, counter: &str) -> Value {
    last_subscription(insight).map_or(Value::Null, |s| s["status"]["total"][counter].clone())
}

fn last_subscription(insight: &Value) -> Option<&Value> {
    insight["subscriptions"].as_array().and_then(|s| s.last())
}

/// Age of the last subscription's `connectTime`, else `never`.
fn last_connected(insight: &Value, now: i64) -> String {
    match last_subscription(insight).and_then(|s| s["connectTime"].as_str()) {
        Some(t) => age(Some(t), now),
        None => "never".to_owned(),
    }
}

fn status(up: bool) -> String {
    let s = if up { "Online" } else { "Offline" };
    s.to_owned()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "-".to_owned(),
    }
}

/// kumactl's TAGS: every inbound and gateway tag, `key=value[,value]` sorted, space-separated.
fn tags(dataplane: &Value) -> String {
    let net = &dataplane["networking"];
    let mut tags: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let inbound = net["inbound"].as_array().into_iter().flatten();
    for set in inbound.map(|i| &i["tags"]).chain([&net["gateway"]["tags"]]) {
        for (k, v) in set.as_object().into_iter().flatten() {
            if let Some(v) = v.as_str() {
                tags.entry(k).or_default().insert(v);
            }
        }
    }
    let out: Vec<String> = tags
        .into_iter()
        .map(|(k, v)| format!("{k}={}", v.into_iter().collect::<Vec<_>>().join(",")))
        .collect();
    if out.is_empty() {
        "-".to_owned()
    } else {
        out.join(" ")
    }
}

/// The table of `what` (`dataplanes`, `meshes`, `zones`, `services`) for `items`.
pub fn table(what: &str, items: &[Value], now: i64) -> String {
    let (header, rows): (&[&str], Vec<Vec<String>>) = match what {
        "dataplanes" => (
            &[
                "MESH",
                "NAME",
                "ZONE",
                "TAGS",
                "STATUS",
                "LAST CONNECTED AGO",
                "TOTAL UPDATES",
                "TOTAL ERRORS",
                "CERT EXPIRATION",
                "CERT REGENERATIONS",
                "ENVOY VERSION",
                "NACKS",
            ],
            items
                .iter()
                .map(|o| {
                    let insight = &o["dataplaneInsight"];
                    vec![
                        text(&o["mesh"]),
                        text(&o["name"]),
                        text(&o["labels"]["kuma.io/zone"]),
                        tags(&o["dataplane"]),
                        status(online(insight)),
                        last_connected(insight, now),
                        text(&total_of(insight, "responsesSent")),
                        text(&total_of(insight, "responsesRejected")),
                        text(&insight["mTLS"]["certificateExpirationTime"]),
                        text(&insight["mTLS"]["certificateRegenerations"]),
                        last_subscription(insight).map_or_else(
                            || "-".to_owned(),
                            |s| text(&s["version"]["envoy"]["version"]),
                        ),
                        nacks(insight).to_string(),
                    ]
                })
                .collect(),
        ),
        "meshes" => (
            &["NAME", "MTLS", "DATAPLANES", "POLICIES", "AGE"],
            items
                .iter()
                .map(|m| {
                    vec![
                        text(&m["name"]),
                        mtls(&m["mesh"]),
                        text(&m["dataplanes"]),
                        text(&m["policies"]["total"]),
                        age(m["mesh"]["creationTime"].as_str(), now),
                    ]
                })
                .collect(),
        ),
        "zones" => (
            &[
                "NAME",
                "STATUS",
                "LAST CONNECTED AGO",
                "SUBSCRIPTIONS",
                "TOTAL UPDATES",
                "TOTAL REJECTED",
                "DATAPLANES",
            ],
            items
                .iter()
                .map(|z| {
                    let insight = &z["zoneInsight"];
                    let subs = insight["subscriptions"].as_array().map_or(0, Vec::len);
                    let up = if subs > 0 {
                        online(insight)
                    } else {
                        z["umbra"]["online"].as_bool() == Some(true)
                    };
                    let (sent, rejected) = last_subscription(insight).map_or_else(
                        || ("-".to_owned(), "-".to_owned()),
                        |s| {
                            let total = &s["status"]["total"];
                            (
                                text(&total["responsesSent"]),
                                text(&total["responsesRejected"]),
                            )
                        },
                    );
                    vec![
                        text(&z["name"]),
                        status(up),
                        last_connected(insight, now),
                        subs.to_string(),
                        sent,
                        rejected,
                        text(&z["umbra"]["dataplanes"]),
                    ]
                })
                .collect(),
        ),
        _ => (
            &["MESH", "SERVICE", "STATUS", "DPPS", "ONLINE", "NACKED"],
            items
                .iter()
                .map(|s| {
                    let d = &s["dataplanes"];
                    vec![
                        text(&s["mesh"]),
                        text(&s["name"]),
                        text(&s["status"]),
                        text(&d["total"]),
                        text(&d["online"]),
                        text(&d["withNack"]),
                    ]
                })
                .collect(),
        ),
    };
    if rows.is_empty() {
        return format!("No {what} found.");
    }
    columns(header, &rows)
}

/// A Mesh's enabled mTLS backend, `<type>/<name>`, or `off`.
fn mtls(mesh: &Value) -> String {
    let Some(enabled) = mesh["mtls"]["enabledBackend"]
        .as_str()
        .filter(|b| !b.is_empty())
    else {
        return "off".to_owned();
    };
    let ty = mesh["mtls"]["backends"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["name"] == enabled)
        .and_then(|b| b["type"].as_str())
        .unwrap_or("?");
    format!("{ty}/{enabled}")
}

/// `header` and `rows` in aligned columns, three spaces apart.
pub(crate) fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (c, w) in r.iter().zip(&widths) {
            let pad = w.saturating_sub(c.chars().count());
            let _ = write!(line, "{c}{}   ", " ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(now: i64, ago: i64) -> String {
        time::OffsetDateTime::from_unix_timestamp(now - ago)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    }

    fn overview(name: &str, service: &str, insight: Value) -> Value {
        json!({"type": "DataplaneOverview", "mesh": "default", "name": name,
               "labels": {"kuma.io/zone": "zone-1"},
               "dataplane": {"networking": {"address": "10.0.0.1", "inbound": [
                   {"port": 80, "tags": {"kuma.io/service": service, "version": "v1"}},
                   {"port": 81, "tags": {"kuma.io/service": service, "version": "v2"}}]}},
               "dataplaneInsight": insight})
    }

    #[test]
    fn dataplane_rows_read_like_kumactl() {
        let now = 1_000_000;
        let lds = "type.googleapis.com/envoy.config.listener.v3.Listener";
        let items = [
            overview(
                "web-1",
                "web",
                json!({"connected": true, "nacked": {lds: {"version": "2", "error": "bad"}},
                       "mTLS": {"certificateExpirationTime": "2026-01-02T00:00:00Z", "certificateRegenerations": 3},
                       "subscriptions": [{"connectTime": at(now, 300),
                         "status": {"total": {"responsesSent": "12", "responsesRejected": "1"}},
                         "version": {"envoy": {"version": "1.31.2"}}}]}),
            ),
            overview(
                "web-2",
                "web",
                json!({"connected": false, "subscriptions": [
                    {"connectTime": at(now, 90), "disconnectTime": at(now, 30)}]}),
            ),
            overview("api-1", "api", json!({})),
        ];
        let out = table("dataplanes", &items, now);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "MESH",
                "NAME",
                "ZONE",
                "TAGS",
                "STATUS",
                "LAST",
                "CONNECTED",
                "AGO",
                "TOTAL",
                "UPDATES",
                "TOTAL",
                "ERRORS",
                "CERT",
                "EXPIRATION",
                "CERT",
                "REGENERATIONS",
                "ENVOY",
                "VERSION",
                "NACKS"
            ]
        );
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells[cells.len() - 6..],
            ["12", "1", "2026-01-02T00:00:00Z", "3", "1.31.2", "1"],
            "{out}"
        );
        assert!(
            lines[1].contains("kuma.io/service=web version=v1,v2")
                && lines[1].contains("Online")
                && lines[1].contains("5m"),
            "{out}"
        );
        assert!(lines[1].trim_end().ends_with('1'), "one NACKed type: {out}");
        assert!(
            lines[2].contains("Offline") && lines[2].contains("90s"),
            "{out}"
        );
        assert!(
            lines[3].contains("Offline") && lines[3].contains("never"),
            "{out}"
        );
        // Columns line up.
        assert_eq!(lines[0].find("STATUS"), lines[1].find("Online"));

        let insights = vec![
            json!({"type": "ServiceInsight", "mesh": "default", "name": "db", "status": "offline",
                   "dataplanes": {"total": 1, "online": 0, "offline": 1}}),
            json!({"type": "ServiceInsight", "mesh": "default", "name": "web",
                   "status": "partially_degraded",
                   "dataplanes": {"total": 2, "online": 1, "offline": 1}}),
        ];
        let svc = services(insights, &items);
        assert_eq!(
            svc[1]["dataplanes"],
            json!({"total": 2, "online": 1, "offline": 1, "withNack": 1})
        );
        assert_eq!(svc[0]["dataplanes"]["withNack"], 0);
        let out = table("services", &svc, now);
        let row: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(row, ["default", "web", "partially_degraded", "2", "1", "1"]);
        assert_eq!(table("services", &[], now), "No services found.");
    }

    #[test]
    fn zone_and_mesh_rows() {
        let now = 1_000_000;
        let zone = json!({"type": "ZoneOverview", "name": "zone-1", "zoneInsight": {
            "subscriptions": [{"connectTime": at(now, 7200),
                "status": {"total": {"responsesSent": "12", "responsesRejected": "1"}}}]},
            "umbra": {"online": true, "dataplanes": 3}});
        let out = table("zones", &[zone], now);
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row, ["zone-1", "Online", "2h", "1", "12", "1", "3"]);
        let mesh = json!({"name": "default", "dataplanes": 2, "policies": {"total": 8},
            "mesh": {"name": "default", "mtls": {"enabledBackend": "ca-1",
                     "backends": [{"name": "ca-1", "type": "builtin"}]}}});
        let out = table("meshes", &[mesh], now);
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row, ["default", "builtin/ca-1", "2", "8", "-"]);
        assert_eq!(mtls(&json!({"name": "m"})), "off");
    }
}
