//! Global control plane: the system of record for Meshes and policies.
//!
//! - [`store`]: the store contract ([`umbra_store`]); PostgreSQL via sqlx (migrations in
//!   `migrations/`) or memory (durable with `--data-dir`), with a commit-ordered change log;
//! - [`api`]: Kuma's resource REST API over the store, `/zones` and zone tokens;
//! - [`kds`]: the KDS server zones dial (policies down, Dataplanes and insights up), one
//!   connection per zone, tokens checked for their whole life; [`offer`]: what it offers;
//! - [`inspect`]: the inspect API answered by the zones over KDS (hub, per-DPP forwarding,
//!   affected DPPs, the fleet-wide shadow diff);
//! - [`migration`]: the migration workflow (plan, apply, roll back the switch from old
//!   policies to their shadow replacements, one store transaction each);
//! - [`tokens`]: zone tokens (issue, verify, revoke); [`zones`]: what the Global knows of each
//!   zone;
//! - [`replicas`]: several Global replicas on one PostgreSQL; [`inter_cp`]: the mTLS gRPC
//!   service over which a replica forwards a zone's inspect calls to the replica holding it;
//! - [`run`]: the `global-cp` process (store, API, KDS; graceful shutdown);
//! - `testing` (feature `testing`, for test harnesses only): a throwaway PostgreSQL server and
//!   the loopback port picker.

pub mod api;
pub mod cleanup;
pub mod global_insight;
pub mod inspect;
pub mod inter_cp;
pub mod kds;
pub mod migration;
pub mod offer;
pub mod replicas;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
pub mod zone_overview;
pub mod zone_sink;
pub mod zones;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tracing::Instrument as _;

/// Which store backs the Global (`--store`).
pub use umbra_postgres::flags::StoreKind;

/// `global-cp` command line; every flag also reads `UMBRA_*` from the environment. Every value
/// is checked when it is parsed (a value parser per flag), and what one value cannot tell by
/// [`Args::check`]: a malformed flag stops the process with a usage error naming it, before
/// anything is opened or bound.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "global-cp", about = "Umbra Global control plane")]
pub struct Args {
    /// Store backend.
    #[arg(long, env = "UMBRA_STORE", value_enum, default_value = "memory")]
    pub store: StoreKind,
    /// PostgreSQL URL (`postgres://user@host:port/db`, as sqlx reads it), required with
    /// `--store postgres`.
    #[arg(long, env = "UMBRA_POSTGRES_URL", required_if_eq("store", "postgres"))]
    pub postgres_url: Option<String>,
    /// With `--store memory`: keep the store (resources, the token signing key, the store's
    /// identity) under this directory, every write fsynced before it is acknowledged. Without
    /// it a memory-store Global loses everything on restart: every policy, every zone's
    /// Dataplanes, and its signing key (zone tokens must be issued again), and its zones see a
    /// Global whose data is gone (they keep serving and wait for an operator). Created when
    /// missing.
    #[arg(long, env = "UMBRA_DATA_DIR", value_parser = umbra_runtime::flags::directory)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Largest number of pooled PostgreSQL connections (at least 1).
    #[arg(
        long,
        env = "UMBRA_POSTGRES_MAX_CONNECTIONS",
        default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub postgres_max_connections: u32,
    /// Address of the REST API.
    #[arg(long, env = "UMBRA_API_ADDR", default_value = "127.0.0.1:5681")]
    pub api_addr: SocketAddr,
    /// Address of the KDS server (zones dial it).
    #[arg(long, env = "UMBRA_KDS_ADDR", default_value = "127.0.0.1:5685")]
    pub kds_addr: SocketAddr,
    /// PEM certificate chain for TLS on the KDS port (with `--kds-tls-key-file`).
    #[arg(
        long,
        env = "UMBRA_KDS_TLS_CERT_FILE",
        requires = "kds_tls_key_file",
        value_parser = umbra_runtime::flags::pem_certificates
    )]
    pub kds_tls_cert_file: Option<std::path::PathBuf>,
    /// PEM private key for TLS on the KDS port (the key of `--kds-tls-cert-file`).
    #[arg(
        long,
        env = "UMBRA_KDS_TLS_KEY_FILE",
        requires = "kds_tls_cert_file",
        value_parser = umbra_runtime::flags::pem_private_key
    )]
    pub kds_tls_key_file: Option<std::path::PathBuf>,
    /// API authentication.
    #[command(flatten)]
    pub access: umbra_api::authn::AccessArgs,
    /// Remove a zone's Dataplanes and ZoneIngresses once it has been offline this long (a Go
    /// duration, `72h`, Kuma's dataplane cleanup age; `0s` never). A reconnect brings them back.
    #[arg(long, env = "UMBRA_ZONE_CLEANUP_AFTER", default_value = "72h", value_parser = parse_period)]
    pub zone_cleanup_after: std::time::Duration,
    /// This replica's name, as `/ready`, `/zones` and the other replicas show it (default:
    /// the host name). With `--store postgres` any number of replicas may share one database:
    /// each serves the API and KDS, one of them (elected) leads the once-only work.
    #[arg(long, env = "UMBRA_REPLICA_NAME", value_parser = replica_name)]
    pub replica_name: Option<String>,
    /// With `--store postgres`: where this replica serves inter-CP calls (gRPC over mutual
    /// TLS, Kuma's inter-CP port): the other replicas forward a zone's inspect calls to the
    /// replica holding the zone's KDS streams ([`inter_cp`]).
    #[arg(long, env = "UMBRA_INTER_CP_ADDR", default_value = "127.0.0.1:5682")]
    pub inter_cp_addr: SocketAddr,
    /// With `--store postgres`: the address the other replicas reach this one's inter-CP
    /// server at, `host` or `host:port` (an IP address or a DNS name; its certificate names
    /// the host). Default: `--inter-cp-addr`, which must then not be unspecified (`0.0.0.0`).
    #[arg(long, env = "UMBRA_INTER_CP_ADVERTISE_ADDRESS", value_parser = inter_cp::advertise_address)]
    pub inter_cp_advertise_address: Option<inter_cp::Advertised>,
}

use umbra_postgres::flags::replica_name;

/// This host's name (`/proc/sys/kernel/hostname`), or `global-cp` when it cannot be read.
pub fn host_name() -> String {
    umbra_postgres::flags::host_name("global-cp")
}

use umbra_postgres::flags::check_postgres_url;

/// The KDS TLS identity `cert` and `key` (PEM files) name.
///
/// # Errors
/// An unreadable file, or (checked by building tonic's TLS server configuration, which the KDS
/// server uses) a key that is not the certificate's.
fn kds_identity(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tonic::transport::Identity, String> {
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
    };
    let identity = tonic::transport::Identity::from_pem(
        read("--kds-tls-cert-file", cert)?,
        read("--kds-tls-key-file", key)?,
    );
    tonic::transport::Server::builder()
        .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity.clone()))
        .map_err(|e| {
            let why =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            format!("--kds-tls-cert-file and --kds-tls-key-file: {why}")
        })?;
    Ok(identity)
}

/// A Go duration (`72h`, `30s`) as a period; `0s` for none.
fn parse_period(text: &str) -> Result<std::time::Duration, String> {
    let d = umbra_core::duration::Duration::parse(text).map_err(|e| e.to_string())?;
    if d.is_negative() {
        return Err("must not be negative".into());
    }
    Ok(std::time::Duration::from_nanos(
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
    ))
}

/// How [`serve`] runs besides its listeners and store.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Who may call the API without a token.
    pub policy: umbra_pki::trust::AccessPolicy,
    /// Zone cleanup period (`None`: never).
    pub zone_cleanup_after: Option<std::time::Duration>,
    /// What `GET /config` answers ([`Args::config`]); `None`: only `environment` and `mode`.
    pub config: Option<Arc<serde_json::Value>>,
    /// With several replicas on PostgreSQL: the database URL their coordination uses
    /// ([`replicas::postgres`]); `None`: this Global runs alone ([`replicas::Single`]).
    pub postgres_url: Option<String>,
    /// This replica's name (default: [`host_name`]).
    pub replica_name: Option<String>,
    /// With `postgres_url`: the inter-CP listening address ([`inter_cp`]; `None`: a free port
    /// on 127.0.0.1).
    pub inter_cp_addr: Option<SocketAddr>,
    /// With `postgres_url`: the inter-CP address advertised to the other replicas (default:
    /// the listening address).
    pub inter_cp_advertise: Option<inter_cp::Advertised>,
}

impl From<umbra_pki::trust::AccessPolicy> for Settings {
    fn from(policy: umbra_pki::trust::AccessPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }
}

impl Args {
    /// Who may call the API without a token.
    pub fn access_policy(&self) -> umbra_pki::trust::AccessPolicy {
        self.access.policy()
    }

    /// What the value parsers cannot tell from one flag: `--postgres-url` must be a URL sqlx
    /// reads (checked here so that no error prints its password), `--kds-tls-key-file` the key
    /// of `--kds-tls-cert-file` (checked by building the KDS server's TLS configuration), and
    /// the API and KDS (and with `--store postgres`, inter-CP) listen on different ports, and
    /// an inter-CP address is advertised ([`inter_cp::advertised`]). The message names the
    /// flags.
    ///
    /// # Errors
    /// The first problem found.
    pub fn check(&self) -> Result<(), String> {
        umbra_runtime::flags::distinct_listeners(
            ("--api-addr", self.api_addr),
            ("--kds-addr", self.kds_addr),
        )?;
        if self.store == StoreKind::Postgres {
            let inter_cp = ("--inter-cp-addr", self.inter_cp_addr);
            umbra_runtime::flags::distinct_listeners(("--api-addr", self.api_addr), inter_cp)?;
            umbra_runtime::flags::distinct_listeners(("--kds-addr", self.kds_addr), inter_cp)?;
            inter_cp::advertised(self.inter_cp_addr, self.inter_cp_advertise_address.as_ref())?;
        }
        if let Some(url) = &self.postgres_url {
            check_postgres_url(url)?;
        }
        if let (Some(cert), Some(key)) = (&self.kds_tls_cert_file, &self.kds_tls_key_file) {
            kds_identity(cert, key)?;
        }
        Ok(())
    }

    /// The effective configuration `GET /config` answers: Kuma-like `environment`, `mode`,
    /// `store.type`, `apiServer.http.address` and `multizone.global.kds.address`, then every
    /// flag under `umbra` (camelCase). The PostgreSQL URL's password is redacted
    /// ([`umbra_api::about::redact_url`]); the KDS TLS files are named, never read.
    pub fn config(&self) -> serde_json::Value {
        let store = match self.store {
            StoreKind::Memory => "memory",
            StoreKind::Postgres => "postgres",
        };
        let cleanup = i64::try_from(self.zone_cleanup_after.as_nanos()).unwrap_or(i64::MAX);
        let mut umbra = serde_json::json!({
            "store": store,
            "postgresUrl": self.postgres_url.as_deref().map(umbra_api::about::redact_url),
            "dataDir": self.data_dir,
            "postgresMaxConnections": self.postgres_max_connections,
            "apiAddr": self.api_addr,
            "kdsAddr": self.kds_addr,
            "kdsTlsCertFile": self.kds_tls_cert_file,
            "kdsTlsKeyFile": self.kds_tls_key_file,
            "zoneCleanupAfter": umbra_core::duration::Duration::from_nanos(cleanup).to_go_string(),
            "replicaName": self.replica_name.clone().unwrap_or_else(host_name),
            "interCpAddr": self.inter_cp_addr,
            "interCpAdvertiseAddress": self.inter_cp_advertise_address.as_ref().map(|a| a.address(self.inter_cp_addr.port())),
        });
        if let (Some(all), serde_json::Value::Object(access)) = (
            umbra.as_object_mut(),
            umbra_api::about::access_config(&self.access),
        ) {
            all.extend(access);
        }
        serde_json::json!({
            "environment": "universal",
            "mode": "global",
            "store": {"type": store},
            "apiServer": {"http": {"address": self.api_addr}},
            "multizone": {"global": {"kds": {
                "address": self.kds_addr,
                "tls": self.kds_tls_cert_file.is_some(),
            }}},
            "umbra": umbra,
        })
    }
}

/// Open the store `args` name (PostgreSQL: connect and migrate).
///
/// # Errors
/// A missing URL, an unreachable database, or a schema newer than this build.
pub async fn open_store(args: &Args) -> anyhow::Result<Arc<dyn store::Store>> {
    Ok(match args.store {
        StoreKind::Memory => match &args.data_dir {
            Some(dir) => Arc::new(
                store::memory::MemoryStore::open(dir)
                    .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", dir.display()))?,
            ),
            None => Arc::new(store::memory::MemoryStore::new()),
        },
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

/// Run the Global until `shutdown` completes, then drain in-flight requests, KDS streams and
/// the Global's tasks within [`umbra_runtime::process::DRAIN_DEADLINE`] (what is left then is
/// aborted).
///
/// # Errors
/// Arguments [`Args::check`] refuses (before anything is opened or bound), or when the store
/// cannot be opened or an address cannot be bound.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    args.check().map_err(anyhow::Error::msg)?;
    let tls = match (&args.kds_tls_cert_file, &args.kds_tls_key_file) {
        (Some(cert), Some(key)) => Some(kds_identity(cert, key).map_err(anyhow::Error::msg)?),
        _ => None,
    };
    let store = open_store(&args).await?;
    let api = umbra_runtime::process::listen(args.api_addr)?;
    let kds = umbra_runtime::process::listen(args.kds_addr)?;
    tracing::info!(api = %api.local_addr()?, kds = %kds.local_addr()?, store = ?args.store, tls = tls.is_some(), localhost_is_admin = args.access.localhost_is_admin, "global-cp listening");
    let settings = Settings {
        policy: args.access_policy(),
        zone_cleanup_after: Some(args.zone_cleanup_after).filter(|d| !d.is_zero()),
        config: Some(Arc::new(args.config())),
        postgres_url: match args.store {
            StoreKind::Postgres => args.postgres_url.clone(),
            StoreKind::Memory => None,
        },
        replica_name: args.replica_name.clone(),
        inter_cp_addr: Some(args.inter_cp_addr),
        inter_cp_advertise: args.inter_cp_advertise_address.clone(),
    };
    serve(store, api, kds, tls, settings, shutdown).await
}

/// Serve the REST API on `api` (authenticated under `settings.policy`) and KDS on `kds` (TLS
/// with `tls`) over `store` until `shutdown` completes, then drain. With
/// `settings.zone_cleanup_after`, zones offline for longer lose their resources ([`cleanup`]).
/// With `settings.postgres_url`, this is one of several replicas: it also serves inter-CP on
/// `settings.inter_cp_addr` ([`inter_cp`]).
///
/// # Errors
/// When the signing keys cannot be read from the store, the inter-CP address cannot be bound
/// or a server fails.
pub async fn serve(
    store: Arc<dyn store::Store>,
    api: tokio::net::TcpListener,
    kds: tokio::net::TcpListener,
    tls: Option<tonic::transport::Identity>,
    settings: impl Into<Settings>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let settings: Settings = settings.into();
    let policy = settings.policy;
    umbra_runtime::metrics::install();
    umbra_kds::metrics::describe();
    umbra_store::metered::describe();
    replicas::describe();
    inter_cp::describe();
    let store: Arc<dyn store::Store> = Arc::new(store::metered::Metered::new(store));
    let tokens = tokens::ZoneTokens::load(&*store).await?;
    let trust = umbra_pki::trust::Trust::authority(store.clone(), policy).await?;
    if !policy.localhost_is_admin {
        tracing::info!("--localhost-is-admin=false: every API call needs a user token; fetch the admin token on this host with GET /global-secrets/admin-user-token");
    }
    let identity = store::identity(&*store, tokens::random_bytes(16)).await?;
    tracing::info!(store_identity = %identity, "store identity");
    let zones = Arc::new(zones::ZoneRegistry::default());
    let inspect = Arc::new(inspect::hub::InspectHub::new());
    let drain = umbra_runtime::process::Shutdown::new(umbra_runtime::process::DRAIN_DEADLINE);
    drain.trigger_on(shutdown);
    let stop_rx = drain.receiver();
    let mut tasks = umbra_runtime::process::Tasks::default();
    let replica_name = settings.replica_name.clone().unwrap_or_else(host_name);
    let inter_cp = settings
        .postgres_url
        .as_ref()
        .map(|_| {
            inter_cp::InterCp::bind(settings.inter_cp_addr, settings.inter_cp_advertise.as_ref())
        })
        .transpose()?;
    let coordinator: Arc<dyn replicas::Coordinator> = match &settings.postgres_url {
        Some(url) => replicas::postgres::PgCoordinator::start(
            url,
            replicas::postgres::Registration {
                name: replica_name.clone(),
                inter_cp: inter_cp
                    .as_ref()
                    .map(|i| i.address().to_owned())
                    .unwrap_or_default(),
                api: api.local_addr()?.to_string(),
                ..Default::default()
            },
            stop_rx.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("registering this Global replica: {e}"))?,
        None => replicas::Single::shared(),
    };
    let insights = match &settings.postgres_url {
        Some(url) => {
            let mirror = replicas::insights::InsightMirror::connect(url, zones.clone()).await?;
            tasks.spawn(
                "insight mirror",
                mirror
                    .clone()
                    .follow(replica_name.clone(), coordinator.leader(), stop_rx.clone())
                    .instrument(tracing::info_span!("replica.insights")),
            );
            Some(mirror)
        }
        None => None,
    };
    let inter_cp = match inter_cp {
        Some(i) => Some(
            i.start(
                &*store,
                inspect.clone(),
                zones.clone(),
                coordinator.clone(),
                stop_rx.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let (offer_tx, offer_rx) = tokio::sync::watch::channel(None);
    let traces = Arc::new(offer::TraceLinks::default());
    // One CA per mesh, owned here and synced to every zone (issue 18).
    let (cas_tx, cas_rx) = tokio::sync::watch::channel(std::sync::Arc::default());
    let ca_keeper = std::sync::Arc::new(umbra_pki::mesh_ca::CaKeeper::new(
        store.clone(),
        std::sync::Arc::new(cas_tx),
    ));
    tasks.spawn(
        "mesh CAs",
        ca_keeper
            .follow(stop_rx.clone())
            .instrument(tracing::info_span!("mesh_ca.follow")),
    );
    tasks.spawn(
        "offer",
        offer::follow_store(
            store.clone(),
            traces.clone(),
            offer::Extras {
                trust: trust.subscribe(),
                cas: cas_rx,
            },
            offer_tx,
            stop_rx.clone(),
        )
        .instrument(tracing::info_span!("kds.offer")),
    );
    tasks.spawn(
        "trust",
        trust
            .clone()
            .follow_meshes(stop_rx.clone())
            .instrument(tracing::info_span!("trust.follow_meshes")),
    );
    tasks.spawn(
        "zone-token revocations",
        tokens
            .clone()
            .follow(store.clone(), stop_rx.clone())
            .instrument(tracing::info_span!("tokens.follow")),
    );
    if let Some(after) = settings.zone_cleanup_after {
        let c = cleanup::ZoneCleanup::new(store.clone(), zones.clone(), after)
            .with_coordinator(coordinator.clone())
            .with_insights(insights.clone());
        tasks.spawn(
            "zone cleanup",
            Arc::new(c)
                .follow(stop_rx.clone())
                .instrument(tracing::info_span!("zone_cleanup", after = ?after)),
        );
    }
    tasks.spawn(
        "staged rollouts",
        migration::rollout::drive(
            inspect::context::InspectContext {
                store: store.clone(),
                hub: inspect.clone(),
                zones: zones.clone(),
            },
            coordinator.leader(),
            stop_rx.clone(),
        )
        .instrument(tracing::info_span!("rollouts")),
    );
    let state = api::AppState {
        traces,
        store: store.clone(),
        zones: zones.clone(),
        tokens: tokens.clone(),
        trust,
        inspect: inspect.clone(),
        config: settings.config.unwrap_or_else(|| {
            Arc::new(serde_json::json!({"environment": "universal", "mode": "global"}))
        }),
        replicas: coordinator.clone(),
        replica_name: replica_name.into(),
        subscriptions: insights.clone(),
    };
    let api = umbra_runtime::process::serve_http(
        api,
        umbra_console::mount(api::router(state), umbra_console::Mode::Global),
        stop_rx.clone(),
    );
    let kds = kds::serve(
        kds,
        kds::KdsServer::new(store, tokens, zones, inspect, offer_rx, stop_rx.clone())
            .with_identity(identity)
            .with_tls(tls.is_some())
            .with_coordinator(coordinator)
            .with_insights(insights),
        tls,
        stop_rx.clone(),
    );
    let inter_cp = async move {
        match inter_cp {
            Some(server) => server.await,
            None => Ok(()),
        }
    };
    // After the signal, the servers and then the tasks get until the drain deadline.
    if let Some((a, k, i)) = drain
        .bounded(async { tokio::join!(api, kds, inter_cp) })
        .await
    {
        a?;
        k?;
        i?;
    }
    drain.drain(tasks).await;
    Ok(())
}

/// The `global-cp` command: log to stderr (`RUST_LOG`, default `info`), parse [`Args`] from the
/// command line and environment (a malformed flag exits with status 2 and a message naming
/// it: [`umbra_runtime::flags::parse_checked`] with [`Args::check`]), and [`run`] until SIGINT or
/// SIGTERM.
///
/// # Errors
/// What [`run`] returns, or a failure to start the runtime.
pub fn cli_main() -> anyhow::Result<()> {
    umbra_api::service::main("umbra-global-cp", |shutdown| {
        run(umbra_runtime::flags::parse_checked(Args::check), shutdown)
    })
}
