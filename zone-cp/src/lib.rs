//! # umbra-zone-cp
//!
//! The Zone control plane (issue 4, in progress): the zone store ([`store`]), the resource API
//! and inspect endpoints ([`api`], [`inspect`]) with one error type ([`error`]). The ADS server,
//! reconciler and KDS client are still to come.
//!
//! The binary (`zone-cp`) parses [`Args`] (every flag also an `UMBRA_*` env var) and calls
//! [`run`] with a shutdown future.

pub mod ads;
pub mod api;
pub mod ca;
/// The one API error type (shared with the Global CP).
pub use umbra_api::error;
pub mod inspect;
pub mod reconciler;
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

/// Serve the API and ADS until `shutdown` resolves, then drain both.
///
/// # Errors
/// When an address cannot be bound or a server fails.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = store::Store::new();
    let insights = std::sync::Arc::new(ads::Insights::default());
    let reconciler = std::sync::Arc::new(reconciler::Reconciler::new(store.clone()));
    let state = api::AppState {
        store: store.clone(),
        federated: args.global_kds_address.is_some(),
        insights: insights.clone(),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let api_listener = tokio::net::TcpListener::bind(args.api_addr).await?;
    let ads_listener = tokio::net::TcpListener::bind(args.ads_addr).await?;
    tracing::info!(zone = %args.zone, api = %api_listener.local_addr()?, ads = %ads_listener.local_addr()?, "zone-cp listening");
    let rec_task = tokio::spawn(reconciler.clone().run(stop_rx.clone()));
    let mut api_stop = stop_rx.clone();
    let api = axum::serve(api_listener, api::router(state)).with_graceful_shutdown(async move {
        let _ = api_stop.wait_for(|s| *s).await;
    });
    let mut ads_stop = stop_rx.clone();
    let ads = tonic::transport::Server::builder()
        .add_service(ads::Ads::new(store, reconciler, insights, stop_rx.clone()).into_server())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(ads_listener),
            async move {
                let _ = ads_stop.wait_for(|s| *s).await;
            },
        );
    let (a, b) = tokio::join!(api, ads);
    a?;
    b?;
    let _ = rec_task.await;
    Ok(())
}
