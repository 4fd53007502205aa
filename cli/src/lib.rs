//! umbractl: the Umbra command line. It talks to a control plane's REST API
//! (`--api-url`, default the Global's `http://127.0.0.1:5681`).
//!
//! Commands so far: `generate zone-token --zone <name> [--valid-for <duration>]`, which asks the
//! Global for a zone token (`POST /tokens/zone`, issue 5) and prints it. apply/get/delete/inspect
//! land with issue 7.

use std::time::Duration;

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
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?
        .post(&url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {url}: {e}"))?;
    let status = response.status();
    let text = response.text().await?;
    if !status.is_success() {
        let detail = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["detail"].as_str().map(str::to_owned))
            .unwrap_or(text);
        anyhow::bail!("{url}: {status}: {detail}");
    }
    Ok(text.trim().to_owned())
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
    }
    Ok(())
}
