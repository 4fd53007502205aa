//! # umbra-zone-cp
//!
//! The Zone control plane: the zone store ([`store`], optionally persisted under `--data-dir`),
//! the resource API and inspect endpoints ([`api`], [`inspect`]) with one error type
//! ([`error`]), the reconciler ([`reconciler`]), the ADS server ([`ads`], SotW and delta over
//! [`umbra_xds::delta`]), the builtin mesh CA ([`ca`]) and, in a federated zone, the KDS client
//! ([`kds`]) that syncs policies from the Global and reports Dataplanes up.
//!
//! The binary (`zone-cp`) parses [`Args`] (every flag also an `UMBRA_*` env var) and calls
//! [`run`] with a shutdown future.

pub mod ads;
pub mod api;
pub mod ca;
/// The one API error type (shared with the Global CP).
pub use umbra_api::error;
pub mod inspect;
pub mod kds;
pub mod reconciler;
pub mod remote_inspect;
pub mod store;
pub mod synthetic;

use std::future::Future;
use std::net::SocketAddr;

/// Command-line arguments of `zone-cp`.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "zone-cp", about = "Umbra Zone control plane")]
pub struct Args {
    /// Name of this zone.
    #[arg(long, env = "UMBRA_ZONE")]
    pub zone: String,
    /// KDS address of the Global CP (federated mode: policies become read-only here).
    #[arg(long, env = "UMBRA_GLOBAL_KDS_ADDRESS")]
    pub global_kds_address: Option<String>,
    /// Address of the HTTP API.
    #[arg(long, env = "UMBRA_API_ADDR", default_value = "127.0.0.1:5681")]
    pub api_addr: SocketAddr,
    /// Address of the ADS server (Envoy).
    #[arg(long, env = "UMBRA_ADS_ADDR", default_value = "127.0.0.1:5678")]
    pub ads_addr: SocketAddr,
    /// Zone token issued by the Global (`umbractl generate zone-token`).
    #[arg(
        long,
        env = "UMBRA_KDS_TOKEN",
        hide_env_values = true,
        conflicts_with = "kds_token_file"
    )]
    pub kds_token: Option<String>,
    /// File holding the zone token, read again on every connection attempt (replace an expiring
    /// token by writing the new one here).
    #[arg(long, env = "UMBRA_KDS_TOKEN_FILE")]
    pub kds_token_file: Option<std::path::PathBuf>,
    /// PEM CA certificate that signed the Global's KDS TLS certificate (use an `https://`
    /// `--global-kds-address`).
    #[arg(long, env = "UMBRA_KDS_CA_FILE")]
    pub kds_ca_file: Option<std::path::PathBuf>,
    /// Directory where the zone keeps its store across restarts (`store.json` and
    /// `journal.ndjson`; every write is fsynced there before it is acknowledged); without it
    /// the zone starts empty and a federated zone receives everything again.
    #[arg(long, env = "UMBRA_DATA_DIR")]
    pub data_dir: Option<std::path::PathBuf>,
}

/// The KDS client configuration `args` describe, if federated.
///
/// # Errors
/// A Global address without a token, or unreadable token or CA files.
fn kds_config(args: &Args) -> anyhow::Result<Option<kds::KdsClientConfig>> {
    let Some(address) = &args.global_kds_address else {
        return Ok(None);
    };
    let read =
        |p: &std::path::Path| std::fs::read(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()));
    let token = match (&args.kds_token, &args.kds_token_file) {
        (Some(t), _) => kds::TokenSource::Value(t.clone()),
        (None, Some(f)) => {
            let source = kds::TokenSource::File(f.clone());
            // Fail at start on a missing file; later reads pick up a replaced token.
            source.read().map_err(anyhow::Error::msg)?;
            source
        }
        (None, None) => anyhow::bail!(
            "--global-kds-address needs a zone token: --kds-token or --kds-token-file (UMBRA_KDS_TOKEN[_FILE])"
        ),
    };
    Ok(Some(kds::KdsClientConfig {
        zone: args.zone.clone(),
        address: address.clone(),
        token,
        ca_pem: args.kds_ca_file.as_deref().map(read).transpose()?,
    }))
}

/// Serve the API and ADS until `shutdown` resolves, then drain both.
///
/// # Errors
/// When an address cannot be bound or a server fails.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    umbra_api::metrics::install();
    umbra_kds::metrics::describe();
    let kds_config = kds_config(&args)?;
    let store = match &args.data_dir {
        Some(dir) => {
            let store = store::Store::open(dir)
                .map_err(|e| anyhow::anyhow!("zone store under {}: {e}", dir.display()))?;
            tracing::info!(dir = %dir.display(), resources = store.len(), "zone store loaded");
            store
        }
        None => store::Store::new(),
    };
    let insights = std::sync::Arc::new(ads::Insights::default());
    let reconciler = std::sync::Arc::new(reconciler::Reconciler::new(store.clone()));
    let kds_status = kds::SharedStatus::default();
    let kds_resync = std::sync::Arc::new(tokio::sync::Notify::new());
    let state = api::AppState {
        store: store.clone(),
        federated: args.global_kds_address.is_some(),
        insights: insights.clone(),
        reconciler: reconciler.clone(),
        kds: kds_status.clone(),
        kds_resync: kds_resync.clone(),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let api_listener = umbra_api::process::listen(args.api_addr)?;
    let ads_listener = umbra_api::process::listen(args.ads_addr)?;
    tracing::info!(zone = %args.zone, api = %api_listener.local_addr()?, ads = %ads_listener.local_addr()?, "zone-cp listening");
    let rec_task = tokio::spawn(reconciler.clone().run(stop_rx.clone()));
    let kds_task = kds_config.map(|c| {
        tracing::info!(global = %c.address, "federated: policies come from the Global over KDS");
        tokio::spawn(kds::run(
            c,
            store.clone(),
            insights.clone(),
            Some(reconciler.clone()),
            kds_status.clone(),
            kds_resync.clone(),
            stop_rx.clone(),
        ))
    });
    let api = umbra_api::process::serve_http(api_listener, api::router(state), stop_rx.clone());
    let ads = ads::Ads::new(store, reconciler, insights, stop_rx.clone())
        .listen(ads_listener, stop_rx.clone());
    let (a, b) = tokio::join!(api, ads);
    a?;
    b?;
    let _ = rec_task.await;
    if let Some(t) = kds_task {
        let _ = t.await;
    }
    Ok(())
}

/// The `zone-cp` command: log to stderr (`RUST_LOG`, default `info`), parse [`Args`] from the
/// command line and environment, and [`run`] until SIGINT or SIGTERM.
///
/// # Errors
/// What [`run`] returns, or a failure to start the runtime.
pub fn cli_main() -> anyhow::Result<()> {
    use clap::Parser as _;
    umbra_api::service::main("umbra-zone-cp", |shutdown| run(Args::parse(), shutdown))
}
