//! umbractl: the Umbra command line. It talks to a control plane's REST API: `--api-url` and
//! `--auth-token` (`UMBRA_API_URL`, `UMBRA_AUTH_TOKEN`; the token goes as `Authorization:
//! Bearer`), else the current context of the config file ([`config`]), else the Global's
//! `http://127.0.0.1:5681` without a token.
//!
//! Commands:
//! - `apply -f FILE|-`, `get <type> [name]`, `delete <type> <name>` ([`resources`]);
//! - `generate zone-token --zone <name> [--valid-for <duration>]` asks the Global for a zone
//!   token (`POST /tokens/zone`, issue 5) and prints it (with `--scope ingress,egress`: a
//!   token for the zone's ZoneIngresses/ZoneEgresses, `POST /tokens/zone-ingress`); `generate
//!   user-token --name <n>
//!   [--group <g>]... [--valid-for <d>]` and `generate dataplane-token --mesh <m> [--name <n>]
//!   [--tag k=v]... [--type dataplane|ingress|egress] [--valid-for <d>]` likewise (admin only,
//!   [`tokens`]);
//! - `config control-planes add|list|switch|remove` keeps named control planes (address,
//!   token, CA) in the config file ([`config`], kumactl's contexts);
//! - `inspect dataplane <name> -m <mesh> --config-dump|--rules [--shadow] [--diff]` shows a
//!   DPP's config or rules (transition seed 000), the diff rendered per resource with old and
//!   new values ([`diff`]); `inspect dataplane <name> --type config-dump|stats|clusters
//!   [--include-eds]` what its real Envoy runs, read from its admin by its zone (kumactl's
//!   `--type`; Kuma's `/meshes/{mesh}/dataplanes/{name}/xds|stats|clusters`);
//! - `inspect shadow-diff -m <mesh> [--policy <Type>/<name>] [--zone z] [--full]` shows the
//!   fleet-wide effect of the shadow policies (a Global's `_shadow-diff`, issue 6);
//! - `inspect dataplanes|meshes|zones|services` prints kumactl's tables from the overviews
//!   ([`overview`]), and `export -m <mesh> --format universal` a whole mesh as the YAML
//!   `apply -f` takes back ([`export`]).
//!
//! - `convert -f old.yaml` and `migrate plan|apply|rollback` ([`migrate`], issue 19).
//!
//! Requests go through [`http`] (the client with the context's token and CA, API errors as a
//! [`CliError`], [`error`]); `-o` formats are [`output`].
//!
//! `-o json` prints the API's JSON instead. Long work shows a progress bar on stderr when it is
//! a terminal (indicatif): `apply` per document, `inspect shadow-diff` from the API's NDJSON
//! `progress` lines.
//!
//! Exit status ([`CliError::exit_code`]), for scripts:
//! - `0` success;
//! - `1` the control plane refused the request (a 4xx other than 404: invalid resource,
//!   conflict, read-only, 401 without a valid token, 403 without the group); the server's
//!   detail and every `{field, reason}` are printed;
//! - `2` bad usage or invalid local input (unreadable file, invalid YAML or resource): nothing
//!   was sent;
//! - `3` the control plane is unreachable, timed out or failed (5xx);
//! - `4` not found (404).

pub mod apply;
pub mod config;
pub mod diff;
pub mod error;
pub mod export;
pub mod http;
pub mod migrate;
pub mod observed;
pub mod output;
pub mod overview;
pub mod resources;
pub mod rollout;
pub mod tokens;

pub use error::CliError;
pub use http::get_json;
pub use output::Output;
pub use tokens::{zone_token, Generate};

use http::{api_error, client, pretty};

use std::time::Duration;

use serde_json::Value;

/// Command line. `Debug` never shows the token.
#[derive(clap::Parser)]
#[command(name = "umbractl", about = "Umbra command line")]
pub struct Cli {
    /// Control plane API URL (default: the current context's, else `http://127.0.0.1:5681`).
    #[arg(long, env = "UMBRA_API_URL", global = true)]
    pub api_url: Option<String>,
    /// User token sent as `Authorization: Bearer` (default: the current context's).
    #[arg(long, env = "UMBRA_AUTH_TOKEN", hide_env_values = true, global = true)]
    pub auth_token: Option<String>,
    /// The contexts file (default `$UMBRA_CONFIG`, else `~/.config/umbra/umbractl.yaml`).
    #[arg(long, global = true)]
    pub config_file: Option<std::path::PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("api_url", &self.api_url)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("config_file", &self.config_file)
            .field("command", &self.command)
            .finish()
    }
}

/// Commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create or update resources from multi-document YAML or JSON (`-` reads stdin).
    Apply {
        /// File to apply (`-` for stdin); repeatable.
        #[arg(short, long = "file", required = true)]
        files: Vec<String>,
        /// Skip the documents that are refused (locally or by the control plane) and apply
        /// the others, then list the skipped ones (exit 1). Without it a file is applied whole
        /// or not at all: a refusal puts back what the run applied before it.
        #[arg(long)]
        continue_on_error: bool,
    },
    /// Show one resource or list a type (`meshes`, `meshtimeouts`, `dataplanes`, `zones`, ...).
    Get {
        /// Resource type, as Kuma names it (`MeshTimeout`, `meshtimeouts`, `timeouts`).
        kind: String,
        /// Name; without it, every resource of the type.
        name: Option<String>,
        /// Mesh (for mesh-scoped types).
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = resources::GetOutput::Table)]
        output: resources::GetOutput,
        /// Resource form of `-o yaml|json`: Kuma's universal form, or its Kubernetes form
        /// (`apiVersion: kuma.io/v1alpha1`, `kind`, `metadata`, `spec`).
        #[arg(long, value_enum, default_value_t = resources::Format::Universal)]
        format: resources::Format,
    },
    /// Delete one resource.
    Delete {
        /// Resource type.
        kind: String,
        /// Name.
        name: String,
        /// Mesh (for mesh-scoped types).
        #[arg(short, long, default_value = "default")]
        mesh: String,
    },
    /// A whole mesh as multi-document YAML that `apply -f` takes back (`kumactl export`).
    Export(export::ExportArgs),
    /// Generate credentials.
    Generate {
        /// What to generate.
        #[command(subcommand)]
        what: Generate,
    },
    /// Inspect DPPs, meshes, zones, services and the effect of shadow policies.
    Inspect {
        /// What to inspect.
        #[command(subcommand)]
        what: Inspect,
    },
    /// Convert old policies (Timeout, ...) to their targetRef equivalents, as shadow (local).
    Convert(migrate::ConvertArgs),
    /// Plan, apply or roll back a migration to the new policies (Global only).
    Migrate {
        /// What to do.
        #[command(subcommand)]
        what: migrate::Migrate,
    },
    /// umbractl's own configuration (contexts).
    Config {
        /// What to configure.
        #[command(subcommand)]
        what: tokens::ConfigCommand,
    },
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
        /// The xDS config Umbra generates (`_config`).
        #[arg(
            long,
            required_unless_present_any = ["rules", "view"],
            conflicts_with_all = ["rules", "view"]
        )]
        config_dump: bool,
        /// What the DPP's Envoy runs, from its admin (kumactl's `--type`): `config-dump`
        /// (Envoy's `/config_dump`, token redacted), `stats`, `clusters`.
        #[arg(long = "type", value_enum, conflicts_with_all = ["rules", "shadow", "diff"])]
        view: Option<AdminView>,
        /// With `--type config-dump`: the endpoints (EDS) too.
        #[arg(long, requires = "view")]
        include_eds: bool,
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
        /// Text output: only the N largest operation groups.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Each zone's deadline (`30s`; at most `120s`).
        #[arg(long)]
        timeout: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// What an observed shadow policy (`umbra.io/observe: "true"`) would have done to its DPPs'
    /// traffic, from their Envoys' counters: fleet-wide on a Global, per zone and per DPP.
    Observed {
        /// The policy: `<Type>/<name>` (e.g. `MeshTrafficPermission/deny-frontend`).
        policy: String,
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// `dataplanes`, `meshes`, `zones`, `services`: kumactl's tables ([`overview`]).
    #[command(flatten)]
    Tables(overview::Tables),
}

/// The command line once the address is resolved.
struct ResolvedCli {
    api_url: String,
    command: Command,
}

/// An Envoy admin view of `inspect dataplane --type` (Kuma's `{type}` path segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdminView {
    /// Envoy's `/config_dump` (`xds`).
    ConfigDump,
    /// Envoy's `/stats`.
    Stats,
    /// Envoy's `/clusters`.
    Clusters,
}

/// `inspect dataplane --type`: what DPP `name`'s Envoy runs, read by its zone from its admin:
/// the config dump as pretty JSON, stats and clusters as Envoy's text (`-o json`: Envoy's
/// JSON).
///
/// # Errors
/// The API's error (e.g. 409 when no Envoy of the DPP is connected, 501 when it runs on
/// another host than its zone CP).
pub async fn inspect_admin(
    api_url: &str,
    mesh: &str,
    name: &str,
    view: AdminView,
    include_eds: bool,
    output: Output,
) -> anyhow::Result<String> {
    if include_eds && view != AdminView::ConfigDump {
        return Err(
            CliError::Input("--include-eds goes with --type config-dump only".into()).into(),
        );
    }
    let segment = match view {
        AdminView::ConfigDump => "xds",
        AdminView::Stats => "stats",
        AdminView::Clusters => "clusters",
    };
    let path = format!("/meshes/{mesh}/dataplanes/{name}/{segment}");
    match view {
        AdminView::ConfigDump => {
            let eds = if include_eds { "true" } else { "false" };
            Ok(pretty(
                &get_json(api_url, &path, &[("include_eds", eds)]).await?,
            ))
        }
        _ if output == Output::Json => Ok(pretty(
            &get_json(api_url, &path, &[("format", "json")]).await?,
        )),
        _ => http::get_text(api_url, &path, &[("format", "text")]).await,
    }
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
    let note = not_generated_note(&body, style);
    if !diff {
        return Ok(pretty(&body[doc_field]) + &note);
    }
    // The live result gives the values the diff replaces or removes.
    let live = if shadow {
        get_json(api_url, &path, &[("shadow", "false")]).await?[doc_field].take()
    } else {
        body[doc_field].clone()
    };
    Ok(diff::render_patch(&body["diff"], Some(&live), style) + &note)
}

/// The answer's `notGenerated` entries, one line each (empty when none): policies that select
/// the DPP but are not in its config, and fields of its Dataplane Umbra does not act on
/// (`Dataplane/<name> <field>`), so the output above does not show them.
fn not_generated_note(body: &Value, style: diff::Style) -> String {
    body["notGenerated"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            format!(
                "\n{} {}: {}",
                style.paint("33", "not generated:"),
                diff::not_generated_subject(n),
                n["reason"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// `inspect shadow-diff`: the text or JSON to print. The summary is read from the API's
/// streamed form (`application/x-ndjson`), reporting `(done, considered)` DPPs to `progress`
/// as the zones answer; `--full` asks for the one JSON document.
///
/// # Errors
/// The API's error, or a stream that ends without its `result` line.
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
    top: Option<usize>,
    mut progress: impl FnMut(u64, u64),
) -> anyhow::Result<String> {
    let mut query = vec![("format", if full { "full" } else { "summary" })];
    query.extend(policy.map(|p| ("policy", p)));
    query.extend(zone.map(|z| ("zone", z)));
    query.extend(timeout.map(|t| ("timeout", t)));
    let path = format!("/meshes/{mesh}/_shadow-diff");
    let body = if full {
        get_json(api_url, &path, &query).await?
    } else {
        let url = format!("{}{path}", api_url.trim_end_matches('/'));
        let request = client(Duration::from_secs(150))?
            .get(&url)
            .query(&query)
            .header("accept", "application/x-ndjson");
        stream_result(&url, request, &mut progress).await?
    };
    Ok(match output {
        Output::Json => pretty(&body),
        Output::Text => diff::render_fleet_top(&body, style, top),
    })
}

/// Largest NDJSON line accepted from `_shadow-diff` (bytes).
const MAX_LINE_BYTES: usize = 64 << 20;

/// Read an NDJSON `_shadow-diff` answer: `start` gives the number of DPPs considered,
/// `progress` lines how many answered; the `result` line is returned.
async fn stream_result(
    url: &str,
    request: reqwest::RequestBuilder,
    progress: &mut impl FnMut(u64, u64),
) -> Result<Value, CliError> {
    let mut response = request
        .send()
        .await
        .map_err(|e| CliError::Unavailable(format!("cannot reach {url}: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(api_error(url, status, &text));
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut considered = 0;
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| CliError::Unavailable(format!("{url}: reading the answer: {e}")))?;
        let at_end = chunk.is_none();
        if let Some(c) = chunk {
            buf.extend_from_slice(&c);
        }
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match v["kind"].as_str() {
                Some("start") => {
                    considered = v["considered"].as_u64().unwrap_or(0);
                    progress(0, considered);
                }
                Some("progress") => progress(
                    v["done"].as_u64().unwrap_or(0),
                    v["considered"].as_u64().unwrap_or(considered),
                ),
                Some("result") => return Ok(v),
                _ => {}
            }
        }
        if buf.len() > MAX_LINE_BYTES {
            return Err(CliError::Unavailable(format!(
                "{url}: a line of the answer is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        if at_end {
            return Err(CliError::Unavailable(format!(
                "{url}: the answer ended before its result"
            )));
        }
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
fn bar(len: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Run a parsed command line, writing results to stdout.
///
/// # Errors
/// What the command fails with.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config_path = config::path(cli.config_file.as_deref());
    if let Command::Config { what } = cli.command {
        return tokens::configure(&config_path?, what).await;
    }
    let contexts = match &config_path {
        Ok(p) => config::Config::load(p)?,
        Err(_) => config::Config::default(),
    };
    let target = config::resolve(cli.api_url.as_deref(), cli.auth_token.as_deref(), &contexts);
    let api_url = target.api_url.clone();
    http::set_target(target);
    let cli = ResolvedCli {
        api_url,
        command: cli.command,
    };
    match cli.command {
        Command::Apply {
            files,
            continue_on_error,
        } => {
            let sources = files
                .iter()
                .map(|f| resources::read_source(f))
                .collect::<Result<Vec<_>, _>>()?;
            let (docs, refused) = resources::check_documents(&sources);
            let on_error = if continue_on_error {
                apply::OnError::Continue
            } else {
                apply::OnError::RollBack
            };
            let progress = bar(docs.len() as u64, "applying");
            let result = apply::apply(&cli.api_url, &docs, &refused, on_error, |doc, applied| {
                let verb = match applied {
                    resources::Applied::Created => "created".to_owned(),
                    resources::Applied::Updated => "updated".to_owned(),
                    resources::Applied::Skipped(why) => format!("skipped: {why}"),
                };
                progress.suspend(|| println!("{} {verb}", doc.describe()));
                progress.inc(1);
            })
            .await;
            progress.finish_and_clear();
            result?;
        }
        Command::Get {
            kind,
            name,
            mesh,
            output,
            format,
        } => {
            let kind = resources::Kind::parse(&kind)?;
            let value = resources::get(&cli.api_url, kind, &mesh, name.as_deref()).await?;
            let text = resources::render(kind, &value, name.is_some(), output, format, now())?;
            print!("{}", text.trim_end());
            println!();
        }
        Command::Export(args) => {
            print!("{}", export::export(&cli.api_url, &args).await?.trim_end());
            println!();
        }
        Command::Inspect {
            what: Inspect::Tables(what),
        } => {
            print!(
                "{}",
                overview::run(&cli.api_url, what, now()).await?.trim_end()
            );
            println!();
        }
        Command::Delete { kind, name, mesh } => {
            let kind = resources::Kind::parse(&kind)?;
            resources::delete(&cli.api_url, kind, &mesh, &name).await?;
            println!("{} {name} deleted", kind.label());
        }
        Command::Generate {
            what:
                Generate::ZoneToken {
                    zone,
                    scope,
                    valid_for,
                },
        } if scope.is_empty() => {
            println!(
                "{}",
                zone_token(&cli.api_url, &zone, valid_for.as_deref()).await?
            );
        }
        Command::Generate { what } => {
            println!("{}", tokens::generate(&cli.api_url, what).await?);
        }
        Command::Config { .. } => unreachable!("handled above"),
        Command::Convert(args) => println!("{}", migrate::convert_files(&args)?),
        Command::Migrate { what } => {
            println!("{}", migrate::run(&cli.api_url, what).await?.trim_end());
        }
        Command::Inspect {
            what:
                Inspect::Dataplane {
                    name,
                    mesh,
                    view: Some(view),
                    include_eds,
                    output,
                    ..
                },
        } => {
            let text = inspect_admin(&cli.api_url, &mesh, &name, view, include_eds, output).await?;
            print!("{}", text.trim_end());
            println!();
        }
        Command::Inspect {
            what:
                Inspect::Dataplane {
                    name,
                    mesh,
                    config_dump: _,
                    view: None,
                    include_eds: _,
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
                Inspect::Observed {
                    policy,
                    mesh,
                    output,
                },
        } => {
            let text = observed::inspect_observed(&cli.api_url, &mesh, &policy, output).await?;
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
                    top,
                    timeout,
                    output,
                },
        } => {
            let progress = bar(0, "DPPs answered");
            let text = inspect_shadow_diff(
                &cli.api_url,
                &mesh,
                policy.as_deref(),
                zone.as_deref(),
                full,
                timeout.as_deref(),
                output,
                diff::Style::detect(),
                top,
                |done, considered| {
                    progress.set_length(considered);
                    progress.set_position(done);
                },
            )
            .await;
            progress.finish_and_clear();
            let text = text?;
            print!("{}", text.trim_end());
            println!();
        }
    }
    Ok(())
}
