//! # umbra-zone-cp
//!
//! The Zone control plane (issue 4, in progress): the zone store ([`store`]), the resource API
//! and inspect endpoints ([`api`], [`inspect`]) with one error type ([`error`]). The ADS server,
//! reconciler and KDS client are still to come.
//!
//! The binary (`zone-cp`) parses [`Args`] (every flag also an `UMBRA_*` env var) and calls
//! [`run`] with a shutdown future.

pub mod api;
pub mod error;
pub mod inspect;
pub mod store;

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
}

/// Serve the API until `shutdown` resolves, then drain.
///
/// # Errors
/// When the API address cannot be bound.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = api::AppState {
        store: store::Store::new(),
        federated: args.global_kds_address.is_some(),
    };
    let listener = tokio::net::TcpListener::bind(args.api_addr).await?;
    tracing::info!(zone = %args.zone, api = %listener.local_addr()?, "zone-cp API listening");
    axum::serve(listener, api::router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
