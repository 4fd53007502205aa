//! Global control plane: the system of record for Meshes and policies.
//!
//! - [`store`]: one trait; PostgreSQL via sqlx (migrations in `migrations/`) or memory, with a
//!   commit-ordered change log;
//! - [`api`]: Kuma's resource REST API over the store;
//! - [`run`]: the `global-cp` process (store + API, graceful shutdown);
//! - [`testing`]: a throwaway PostgreSQL server for tests.
//!
//! KDS (syncing zones) and inspect fan-out (issues 5 and 6) are still to come.

pub mod api;
pub mod store;
pub mod testing;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Which store backs the Global.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// In memory (embedded default for trying Umbra; lost on exit).
    Memory,
    /// PostgreSQL (`--postgres-url`), for production.
    Postgres,
}

/// `global-cp` command line; every flag also reads `UMBRA_*` from the environment.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "global-cp", about = "Umbra Global control plane")]
pub struct Args {
    /// Store backend.
    #[arg(long, env = "UMBRA_STORE", value_enum, default_value = "memory")]
    pub store: StoreKind,
    /// PostgreSQL URL (`postgres://user@host:port/db`), required with `--store postgres`.
    #[arg(long, env = "UMBRA_POSTGRES_URL")]
    pub postgres_url: Option<String>,
    /// Largest number of pooled PostgreSQL connections.
    #[arg(long, env = "UMBRA_POSTGRES_MAX_CONNECTIONS", default_value_t = 16)]
    pub postgres_max_connections: u32,
    /// Address of the REST API.
    #[arg(long, env = "UMBRA_API_ADDR", default_value = "127.0.0.1:5681")]
    pub api_addr: SocketAddr,
}

/// Open the store `args` name (PostgreSQL: connect and migrate).
///
/// # Errors
/// A missing URL, an unreachable database, or a schema newer than this build.
pub async fn open_store(args: &Args) -> anyhow::Result<Arc<dyn store::Store>> {
    Ok(match args.store {
        StoreKind::Memory => Arc::new(store::memory::MemoryStore::new()),
        StoreKind::Postgres => {
            let url = args.postgres_url.as_deref().ok_or_else(|| {
                anyhow::anyhow!("--store postgres needs --postgres-url (or UMBRA_POSTGRES_URL)")
            })?;
            Arc::new(
                store::postgres::PostgresStore::connect(url, args.postgres_max_connections).await?,
            )
        }
    })
}

/// Run the Global until `shutdown` completes, then drain in-flight requests.
///
/// # Errors
/// When the store cannot be opened or the API address cannot be bound.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = open_store(&args).await?;
    let listener = tokio::net::TcpListener::bind(args.api_addr).await?;
    tracing::info!(api = %listener.local_addr()?, store = ?args.store, "global-cp listening");
    axum::serve(listener, api::router(store))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
