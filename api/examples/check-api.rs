//! Kuma API conformance against running CPs (issue 20): walks every GET endpoint of a Global
//! and of zones, and validates each 200 answer against the response schema the CP's own
//! `/openapi.yaml` documents for its path template and, where Kuma 2.7.29 publishes one,
//! against Kuma's (`umbra_api::testing::kuma_schema`; fixtures at `UMBRA_CONFORMANCE_DIR`).
//!
//! ```sh
//! cargo run -p umbra-api --features testing --example check-api -- \
//!     --global http://127.0.0.1:5681 \
//!     --zone http://127.0.0.1:15681 --token-file .demo/admin.token
//! ```
//!
//! It prints one line per GET and every violation under it, and exits 1 on any violation, on
//! a GET answering 5xx, or on an answer whose path no template of `/openapi.yaml` matches.
//! Kuma's `InspectDataplanesConfig` is checked but for the documented RFC 6902 diff ops
//! (`replace`, `remove` without `value`), which Kuma's `JsonPatchItem` does not allow.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::Value;
use umbra_api::testing::kuma_schema::{self, OpenApiDoc};

/// The Kuma policies whose `rest.yaml` publishes `<Type>List` and `<Type>Item`.
fn kuma_policy(ty: &str) -> bool {
    let dir = kuma_schema::conformance_dir()
        .join("openapi/policies")
        .join(ty.to_ascii_lowercase());
    dir.join("rest.yaml").is_file()
}

/// One CP being checked.
struct Checker {
    client: reqwest::Client,
    base: String,
    token: String,
    own: OpenApiDoc,
    templates: Vec<String>,
    checked: usize,
    failures: usize,
}

impl Checker {
    async fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::new();
        let base = base.trim_end_matches('/').to_owned();
        let text = client
            .get(format!("{base}/openapi.yaml"))
            .bearer_auth(token)
            .send()
            .await
            .with_context(|| format!("GET {base}/openapi.yaml"))?
            .error_for_status()?
            .bytes()
            .await?;
        let limits = umbra_core::codec::Limits {
            max_bytes: 16 << 20,
            ..umbra_core::codec::Limits::default()
        };
        let doc = umbra_core::codec::decode_one(&text, limits)
            .map_err(|e| anyhow::anyhow!("{base}/openapi.yaml does not parse: {e}"))?;
        let own = OpenApiDoc::new(doc);
        let templates = own.paths();
        Ok(Checker {
            client,
            base,
            token: token.to_owned(),
            own,
            templates,
            checked: 0,
            failures: 0,
        })
    }

    /// The documented template `path` (no query) is an instance of, preferring literal
    /// segments over parameters (`/meshes/{mesh}/service-insights` over `{plural}`) and a
    /// parameter with a literal suffix over a bare one (`/zones/{name}+insights`).
    fn template(&self, path: &str) -> Option<&str> {
        let segs: Vec<&str> = path.split('/').collect();
        let mut best: Option<(usize, &str)> = None;
        for t in &self.templates {
            let tsegs: Vec<&str> = t.split('/').collect();
            if tsegs.len() != segs.len() {
                continue;
            }
            let mut literal = 0;
            let fits = tsegs.iter().zip(&segs).all(|(t, s)| match t.find('{') {
                None => {
                    literal += 2;
                    t == s
                }
                Some(0) => {
                    let suffix = &t[t.find('}').map_or(t.len(), |i| i + 1)..];
                    literal += usize::from(!suffix.is_empty());
                    s.len() > suffix.len() && s.ends_with(suffix)
                }
                Some(_) => false,
            });
            if fits && best.is_none_or(|(n, _)| literal > n) {
                best = Some((literal, t));
            }
        }
        best.map(|(_, t)| t)
    }

    /// GETs `uri` (a path with its query), validates a 200 against the CP's own schema and
    /// Kuma's `kuma` (when given), prints the outcome, and returns the answer when it is a 200.
    async fn get(&mut self, uri: &str, kuma: Option<&str>) -> Option<Value> {
        self.get_tolerating(uri, kuma, &[]).await
    }

    /// [`Checker::get`], taking the statuses `tolerated` for states the CP documents (a proxy
    /// not connected, an Envoy admin on another host) as conforming answers.
    async fn get_tolerating(
        &mut self,
        uri: &str,
        kuma: Option<&str>,
        tolerated: &[u16],
    ) -> Option<Value> {
        self.checked += 1;
        let mut problems = Vec::new();
        let answer = self
            .client
            .get(format!("{}{uri}", self.base))
            .bearer_auth(&self.token)
            .header("accept", "application/json")
            .send()
            .await;
        let (status, body) = match answer {
            Ok(r) => {
                let status = r.status().as_u16();
                (status, r.text().await.unwrap_or_default())
            }
            Err(e) => {
                println!("FAIL GET {}{uri}: {e}", self.base);
                self.failures += 1;
                return None;
            }
        };
        let path = uri.split('?').next().unwrap_or(uri);
        let template = self.template(path).map(str::to_owned);
        let mut value = None;
        if tolerated.contains(&status) {
            // A documented state, not a failure.
        } else if status >= 500 {
            problems.push(format!("answered {status}: {body}"));
        } else if status == 200 {
            match serde_json::from_str::<Value>(&body) {
                Err(e) => problems.push(format!("not JSON: {e}")),
                Ok(v) => {
                    match &template {
                        None => problems.push("no path of /openapi.yaml matches".into()),
                        Some(t) => match self.own.response_schema(t, "get", "200") {
                            None => problems.push(format!("{t}: no JSON schema documented")),
                            Some(schema) => match kuma_schema::compile(&schema) {
                                Err(e) => problems.push(format!("{t}: schema: {e}")),
                                Ok(validator) => problems.extend(
                                    kuma_schema::check(&validator, &v)
                                        .into_iter()
                                        .map(|l| format!("umbra {t}: {l}")),
                                ),
                            },
                        },
                    }
                    if let Some(name) = kuma {
                        problems.extend(
                            kuma_violations(name, &v)
                                .into_iter()
                                .map(|l| format!("kuma {name}: {l}")),
                        );
                    }
                    value = Some(v);
                }
            }
        }
        let verdict = if problems.is_empty() { "ok" } else { "FAIL" };
        println!(
            "{verdict:4} {status} GET {}{uri}  [{}{}]",
            self.base,
            template.as_deref().unwrap_or("?"),
            kuma.map(|k| format!(" + Kuma {k}")).unwrap_or_default()
        );
        for p in &problems {
            println!("       {p}");
        }
        if !problems.is_empty() {
            self.failures += 1;
        }
        value
    }

    /// GETs a list and the page its `next` names, returning the items of both.
    async fn list(&mut self, uri: &str, kuma: Option<&str>) -> Vec<Value> {
        let Some(page) = self.get(uri, kuma).await else {
            return Vec::new();
        };
        let mut items = page["items"].as_array().cloned().unwrap_or_default();
        if let Some(next) = page.get("next").and_then(Value::as_str) {
            let next = next.strip_prefix(&self.base).unwrap_or(next).to_owned();
            if let Some(more) = self.get(&next, kuma).await {
                items.extend(more["items"].as_array().cloned().unwrap_or_default());
            }
        }
        items
    }

    fn has(&self, template: &str) -> bool {
        self.templates.iter().any(|t| t == template)
    }

    /// Walks every GET endpoint of the CP.
    async fn walk(&mut self) {
        for (uri, kuma) in [
            ("/", None),
            ("/_resources", Some("ResourceTypeDescriptionList")),
            ("/global-insight", Some("GlobalInsight")),
            ("/mesh-insights", None),
            ("/config", None),
            ("/versions", None),
            ("/dataplanes+insights", None),
            ("/zoneegressoverviews", None),
            ("/zoneegresses/_overview", None),
            ("/zoneegresses+insights", None),
        ] {
            self.get(uri, kuma).await;
        }
        let types = self
            .get("/_resources", None)
            .await
            .and_then(|r| r["resources"].as_array().cloned())
            .unwrap_or_default();
        let meshes: Vec<String> = self
            .list("/meshes", None)
            .await
            .iter()
            .filter_map(|m| m["name"].as_str().map(str::to_owned))
            .collect();
        for ty in &types {
            let (Some(name), Some(path)) = (ty["name"].as_str(), ty["path"].as_str()) else {
                continue;
            };
            if ty["scope"] == "Global" {
                for item in self.list(&format!("/{path}"), None).await {
                    if let Some(n) = item["name"].as_str() {
                        self.get(&format!("/{path}/{n}"), None).await;
                        if name == "ZoneIngress" {
                            self.get(&format!("/{path}/{n}/_config"), None).await;
                        }
                        if name == "ZoneEgress" {
                            for overview in [
                                format!("/zoneegressoverviews/{n}"),
                                format!("/{path}/{n}/_overview"),
                                format!("/zoneegresses+insights/{n}"),
                            ] {
                                self.get(&overview, None).await;
                            }
                        }
                    }
                }
            } else {
                let kuma = kuma_policy(name).then(|| format!("{name}List"));
                self.list(&format!("/{path}"), kuma.as_deref()).await;
            }
        }
        for mesh in &meshes {
            self.get(&format!("/mesh-insights/{mesh}"), None).await;
            self.mesh(mesh, &types).await;
        }
        if self.has("/zones") {
            for zone in self.list("/zones", None).await {
                if let Some(z) = zone["name"].as_str() {
                    self.get(&format!("/zones/{z}"), None).await;
                }
            }
            for zone in self.list("/zones+insights", None).await {
                if let Some(z) = zone["name"].as_str() {
                    self.get(&format!("/zones/{z}+insights"), None).await;
                }
            }
        }
    }

    /// Walks what lives in `mesh`.
    async fn mesh(&mut self, mesh: &str, types: &[Value]) {
        let m = format!("/meshes/{mesh}");
        for ty in types.iter().filter(|t| t["scope"] == "Mesh") {
            let (Some(name), Some(path)) = (ty["name"].as_str(), ty["path"].as_str()) else {
                continue;
            };
            let policy = kuma_policy(name);
            let list = policy.then(|| format!("{name}List"));
            let item = policy.then(|| format!("{name}Item"));
            for r in self.list(&format!("{m}/{path}"), list.as_deref()).await {
                let Some(n) = r["name"].as_str() else {
                    continue;
                };
                self.get(&format!("{m}/{path}/{n}"), item.as_deref()).await;
                if name == "Dataplane" {
                    self.dataplane(&m, n).await;
                }
                let affected = "/meshes/{mesh}/{plural}/{name}/_resources/dataplanes";
                if ty.get("policy").is_some() && self.has(affected) {
                    let uri = format!("{m}/{path}/{n}/_resources/dataplanes");
                    self.get(&uri, Some("InspectDataplanesForPolicy")).await;
                }
            }
        }
        for dp in self.list(&format!("{m}/dataplanes+insights"), None).await {
            if let Some(n) = dp["name"].as_str() {
                self.get(&format!("{m}/dataplanes+insights/{n}"), None)
                    .await;
            }
        }
        for svc in self.list(&format!("{m}/service-insights"), None).await {
            if let Some(n) = svc["name"].as_str() {
                self.get(&format!("{m}/service-insights/{n}"), None).await;
            }
        }
        if self.has("/meshes/{mesh}/_shadow-diff") {
            self.get(&format!("{m}/_shadow-diff"), None).await;
            self.get(&format!("{m}/_shadow-diff?format=full"), None)
                .await;
        }
    }

    /// A Dataplane's inspect answers, live and shadow, with and without the diff, and its
    /// Envoy's admin views (JSON).
    async fn dataplane(&mut self, m: &str, name: &str) {
        for query in [
            "",
            "?shadow=true",
            "?include=diff",
            "?shadow=true&include=diff",
        ] {
            let base = format!("{m}/dataplanes/{name}");
            self.get(
                &format!("{base}/_config{query}"),
                Some("InspectDataplanesConfig"),
            )
            .await;
            self.get(&format!("{base}/_rules{query}"), Some("InspectRules"))
                .await;
        }
        // What the DPP's real Envoy runs, read from its admin by its zone.
        let base = format!("{m}/dataplanes/{name}");
        for view in [
            "xds",
            "xds?include_eds=true",
            "clusters?format=json",
            "stats?format=json",
        ] {
            if self.has(&format!(
                "/meshes/{{mesh}}/dataplanes/{{name}}/{}",
                view.split('?').next().unwrap_or(view)
            )) {
                // 409: no Envoy connected; 501: its Envoy runs on another host.
                self.get_tolerating(&format!("{base}/{view}"), None, &[409, 501])
                    .await;
            }
        }
    }
}

/// Kuma's violations of `value` against `name`, but for the documented RFC 6902 diff ops of
/// `_config` (`replace`, and `remove` without a `value`).
fn kuma_violations(name: &str, value: &Value) -> Vec<String> {
    let found = kuma_schema::violations(name, value);
    if name != "InspectDataplanesConfig" {
        return found;
    }
    found
        .into_iter()
        .filter(|line| {
            let op = line
                .strip_prefix("\"/diff/")
                .and_then(|rest| rest.split(['/', '"']).next())
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| value["diff"].get(i));
            !op.is_some_and(|op| {
                op["op"] == "replace" || (op["op"] == "remove" && op.get("value").is_none())
            })
        })
        .collect()
}

struct Args {
    cps: Vec<(String, String)>,
    token: String,
}

fn args() -> anyhow::Result<Args> {
    let mut cps = Vec::new();
    let mut token = std::env::var("UMBRA_AUTH_TOKEN").unwrap_or_default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--global" => cps.push(("global".to_owned(), value()?)),
            "--zone" => cps.push(("zone".to_owned(), value()?)),
            "--token-file" => {
                let path = value()?;
                token = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {path}"))?
                    .trim()
                    .to_owned();
            }
            other => bail!(
                "unknown argument {other}; usage: check-api [--global URL] [--zone URL]... \
                 [--token-file FILE]"
            ),
        }
    }
    if cps.is_empty() {
        bail!("give at least one --global or --zone URL");
    }
    Ok(Args { cps, token })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("check-api: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut failed = BTreeSet::new();
    let mut total = 0;
    for (kind, url) in &args.cps {
        let mut checker = match Checker::new(url, &args.token).await {
            Ok(c) => c,
            Err(e) => {
                println!("FAIL {kind} {url}: {e:#}");
                failed.insert(url.clone());
                continue;
            }
        };
        println!("== {kind} CP {url}");
        checker.walk().await;
        println!(
            "== {kind} CP {url}: {} GETs, {} failing",
            checker.checked, checker.failures
        );
        total += checker.checked;
        if checker.failures > 0 {
            failed.insert(url.clone());
        }
    }
    if failed.is_empty() {
        println!("check-api: {total} GETs conform");
        ExitCode::SUCCESS
    } else {
        println!("check-api: violations on {failed:?}");
        ExitCode::FAILURE
    }
}
