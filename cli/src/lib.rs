//! umbractl: the Umbra command line. It talks to a control plane's REST API
//! (`--api-url`, default the Global's `http://127.0.0.1:5681`).
//!
//! Commands so far:
//! - `generate zone-token --zone <name> [--valid-for <duration>]` asks the Global for a zone
//!   token (`POST /tokens/zone`, issue 5) and prints it;
//! - `inspect dataplane <name> -m <mesh> --config-dump|--rules [--shadow] [--diff]` shows a
//!   DPP's config or rules (transition seed 000), the diff rendered per resource with old and
//!   new values ([`diff`]);
//! - `inspect shadow-diff -m <mesh> [--policy <Type>/<name>] [--zone z] [--full]` shows the
//!   fleet-wide effect of the shadow policies (a Global's `_shadow-diff`, issue 6).
//!
//! `-o json` prints the API's JSON instead. A failed request exits with status 1 and the
//! server's detail and `{field, reason}` list. apply/get/delete land with issue 7.

pub mod diff;

use std::time::Duration;

use serde_json::Value;

/// Command line.
#[derive(Debug, clap::Parser)]
#[command(name = "umbractl", about = "Umbra command line")]
pub struct Cli {
    /// Control plane API URL.
    #[arg(
        long,
        env = "UMBRA_API_URL",
        default_value = "http://127.0.0.1:5681",
        global = true
    )]
    pub api_url: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Generate credentials.
    Generate {
        /// What to generate.
        #[command(subcommand)]
        what: Generate,
    },
    /// Inspect DPPs and the effect of shadow policies.
    Inspect {
        /// What to inspect.
        #[command(subcommand)]
        what: Inspect,
    },
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Readable text (diffs per resource, coloured on a terminal).
    Text,
    /// The API's JSON, pretty-printed.
    Json,
}

/// Things `inspect` shows.
#[derive(Debug, clap::Subcommand)]
pub enum Inspect {
    /// One DPP (on a Global, its zone answers): its xDS config or its matched rules.
    Dataplane {
        /// The DPP's name (on a Global: its Global name, or its name in its zone when unique).
        name: String,
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// The xDS config dump (`_config`).
        #[arg(long, required_unless_present = "rules", conflicts_with = "rules")]
        config_dump: bool,
        /// The matched rules per policy type (`_rules`).
        #[arg(long)]
        rules: bool,
        /// Take shadow policies (`kuma.io/effect: shadow`) into account.
        #[arg(long)]
        shadow: bool,
        /// Show the RFC 6902 diff from the live result instead of the result.
        #[arg(long)]
        diff: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Fleet-wide: which DPPs' config the shadow policies would change, and how (Global only).
    ShadowDiff {
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// Promote only this shadow policy (`<Type>/<name>`, e.g. `MeshTimeout/timeout-global`).
        #[arg(long)]
        policy: Option<String>,
        /// Only this zone's DPPs.
        #[arg(long)]
        zone: Option<String>,
        /// Every DPP of each operation and each DPP's patch.
        #[arg(long)]
        full: bool,
        /// Each zone's deadline (`30s`; at most `120s`).
        #[arg(long)]
        timeout: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

/// Things `generate` makes.
#[derive(Debug, clap::Subcommand)]
pub enum Generate {
    /// A zone token, for `zone-cp --kds-token` (issued and signed by the Global).
    ZoneToken {
        /// Zone name (an RFC 1123 label).
        #[arg(long)]
        zone: String,
        /// Validity, as a Go duration (`24h`, `8760h`); the Global's default is one year.
        #[arg(long)]
        valid_for: Option<String>,
    },
}

/// Ask the Global at `api_url` for a token for `zone`.
///
/// # Errors
/// The API's error detail (e.g. an invalid zone name), or why it could not be reached.
pub async fn zone_token(
    api_url: &str,
    zone: &str,
    valid_for: Option<&str>,
) -> anyhow::Result<String> {
    let mut body = serde_json::json!({ "zone": zone });
    if let Some(v) = valid_for {
        body["validFor"] = v.into();
    }
    let url = format!("{}/tokens/zone", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(30))?
        .post(&url)
        .header("content-type", "application/json")
        .body(body.to_string());
    let text = send(&url, request).await?;
    Ok(text.trim().to_owned())
}

/// The failure of a request, from the API's error body: status, detail and every
/// `{field, reason}`.
fn api_error(url: &str, status: reqwest::StatusCode, body: &str) -> anyhow::Error {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return anyhow::anyhow!("{url}: {status}: {}", body.trim());
    };
    let mut msg = format!(
        "{url}: {status}: {}",
        v["detail"].as_str().unwrap_or(body.trim())
    );
    for p in v["invalidParameters"].as_array().into_iter().flatten() {
        msg.push_str(&format!(
            "\n  {}: {}",
            p["field"].as_str().unwrap_or_default(),
            p["reason"].as_str().unwrap_or_default()
        ));
    }
    anyhow::anyhow!(msg)
}

fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(timeout).build()?)
}

/// Send `request` (to `url`); the body of a 2xx answer, else [`api_error`].
async fn send(url: &str, request: reqwest::RequestBuilder) -> anyhow::Result<String> {
    let response = request
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {url}: {e}"))?;
    let status = response.status();
    let text = response.text().await?;
    if status.is_success() {
        Ok(text)
    } else {
        Err(api_error(url, status, &text))
    }
}

/// `GET` `path` (with `query`) on the API at `api_url`; the JSON body.
///
/// # Errors
/// The API's error ([`api_error`]), or why it could not be reached.
pub async fn get_json(api_url: &str, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(150))?
        .get(&url)
        .query(query)
        .header("accept", "application/json");
    let text = send(&url, request).await?;
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{url}: the answer is not JSON: {e}"))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// `inspect dataplane`: the text or JSON to print.
///
/// # Errors
/// The API's error.
#[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
pub async fn inspect_dataplane(
    api_url: &str,
    mesh: &str,
    name: &str,
    rules: bool,
    shadow: bool,
    diff: bool,
    output: Output,
    style: diff::Style,
) -> anyhow::Result<String> {
    let endpoint = if rules { "_rules" } else { "_config" };
    let path = format!("/meshes/{mesh}/dataplanes/{name}/{endpoint}");
    let shadow_q = if shadow { "true" } else { "false" };
    let mut query = vec![("shadow", shadow_q)];
    if diff {
        query.push(("include", "diff"));
    }
    let body = get_json(api_url, &path, &query).await?;
    if output == Output::Json {
        return Ok(pretty(&body));
    }
    let doc_field = if rules { "rules" } else { "xds" };
    if !diff {
        return Ok(pretty(&body[doc_field]));
    }
    // The live result gives the values the diff replaces or removes.
    let live = if shadow {
        get_json(api_url, &path, &[("shadow", "false")]).await?[doc_field].take()
    } else {
        body[doc_field].clone()
    };
    Ok(diff::render_patch(&body["diff"], Some(&live), style))
}

/// `inspect shadow-diff`: the text or JSON to print.
///
/// # Errors
/// The API's error.
#[allow(clippy::too_many_arguments)]
pub async fn inspect_shadow_diff(
    api_url: &str,
    mesh: &str,
    policy: Option<&str>,
    zone: Option<&str>,
    full: bool,
    timeout: Option<&str>,
    output: Output,
    style: diff::Style,
) -> anyhow::Result<String> {
    let mut query = vec![("format", if full { "full" } else { "summary" })];
    query.extend(policy.map(|p| ("policy", p)));
    query.extend(zone.map(|z| ("zone", z)));
    query.extend(timeout.map(|t| ("timeout", t)));
    let body = get_json(api_url, &format!("/meshes/{mesh}/_shadow-diff"), &query).await?;
    Ok(match output {
        Output::Json => pretty(&body),
        Output::Text => diff::render_fleet(&body, style),
    })
}

/// Run a parsed command line, writing results to stdout.
///
/// # Errors
/// What the command fails with.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Generate {
            what: Generate::ZoneToken { zone, valid_for },
        } => {
            println!(
                "{}",
                zone_token(&cli.api_url, &zone, valid_for.as_deref()).await?
            );
        }
        Command::Inspect {
            what:
                Inspect::Dataplane {
                    name,
                    mesh,
                    config_dump: _,
                    rules,
                    shadow,
                    diff,
                    output,
                },
        } => {
            let text = inspect_dataplane(
                &cli.api_url,
                &mesh,
                &name,
                rules,
                shadow,
                diff,
                output,
                diff::Style::detect(),
            )
            .await?;
            print!("{}", text.trim_end());
            println!();
        }
        Command::Inspect {
            what:
                Inspect::ShadowDiff {
                    mesh,
                    policy,
                    zone,
                    full,
                    timeout,
                    output,
                },
        } => {
            let text = inspect_shadow_diff(
                &cli.api_url,
                &mesh,
                policy.as_deref(),
                zone.as_deref(),
                full,
                timeout.as_deref(),
                output,
                diff::Style::detect(),
            )
            .await?;
            print!("{}", text.trim_end());
            println!();
        }
    }
    Ok(())
}
