//! # umbra-zone-cp
//!
//! The Zone control plane: the zone store ([`store`], optionally persisted under `--data-dir`),
//! the resource API and inspect endpoints ([`api`], [`inspect`]) with one error type
//! ([`error`]), the reconciler ([`reconciler`]), the ADS server ([`ads`], SotW and delta over
//! [`umbra_xds_protocol::delta`]; its spans and events: [`ads_trace`]), the builtin mesh CA ([`umbra_pki::identity`]) and, in a federated zone, the KDS client
//! ([`kds`]) that syncs policies from the Global and reports Dataplanes up, and the zone's
//! ZoneIngresses ([`ingress`]: what they offer other zones) and ZoneEgresses ([`egress`]: how
//! their Envoys register).
//!
//! Feature `bench-fixtures` (benchmarks only) adds `synthetic`, the benchmarks' synthetic mesh.
//!
//! The binary (`zone-cp`) parses [`Args`] (every flag also an `UMBRA_*` env var) and calls
//! [`run`] with a shutdown future.

pub mod admin_tls;
pub mod ads;
pub mod ads_http;
pub mod ads_trace;
pub mod ads_wire;
pub mod api;
pub mod bootstrap;
pub mod convergence;
pub mod dp_auth;
pub mod dp_server;
pub mod egress;
pub mod envoy_admin;
pub mod global_insight;
/// The one API error type (shared with the Global CP).
pub use umbra_api::error;
pub mod ingress;
pub mod insight;
pub mod inspect;
pub mod inspect_zone_proxies;
pub mod kds;
pub mod node_metadata;
pub mod observed;
pub mod reconciler;
pub mod remote_inspect;
pub mod replica;
pub mod replica_insights;
pub mod store;
#[cfg(feature = "bench-fixtures")]
pub mod synthetic;

use std::future::Future;
use std::net::SocketAddr;

use tracing::Instrument as _;
pub use umbra_postgres::flags::StoreKind;

/// Command-line arguments of `zone-cp`. Every value is checked when it is parsed (a value
/// parser per flag), and what one value cannot tell by [`Args::check`]: a malformed flag stops
/// the process with a usage error naming it, before anything is opened or bound.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "zone-cp", about = "Umbra Zone control plane")]
pub struct Args {
    /// Name of this zone: an RFC 1123 label (1-63 characters of a-z, 0-9 and '-'), the name
    /// the Global issues its zone token for.
    #[arg(long, env = "UMBRA_ZONE", value_parser = zone_name)]
    pub zone: String,
    /// KDS address of the Global CP (federated mode: policies become read-only here): a URI
    /// `scheme://host:port`, scheme `http` or `grpc` (plaintext) or `https` or `grpcs` (TLS,
    /// with `--kds-ca-file`); needs a zone token. Several Global replicas: repeat the flag or
    /// separate addresses with commas (the env var takes the comma form); all TLS or all
    /// plaintext, none twice. The zone dials them in turn and moves to the next when one
    /// fails or its session ends.
    #[arg(
        long,
        env = "UMBRA_GLOBAL_KDS_ADDRESS",
        value_delimiter = ',',
        value_parser = kds_address
    )]
    pub global_kds_address: Vec<kds::KdsAddress>,
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
        conflicts_with = "kds_token_file",
        requires = "global_kds_address"
    )]
    pub kds_token: Option<String>,
    /// File holding the zone token, read again on every connection attempt (replace an expiring
    /// token by writing the new one here); it must hold a token at startup.
    #[arg(
        long,
        env = "UMBRA_KDS_TOKEN_FILE",
        requires = "global_kds_address",
        value_parser = umbra_runtime::flags::readable_file
    )]
    pub kds_token_file: Option<std::path::PathBuf>,
    /// PEM CA certificate that signed the Global's KDS TLS certificate (with an `https://` or
    /// `grpcs://` `--global-kds-address`).
    #[arg(
        long,
        env = "UMBRA_KDS_CA_FILE",
        requires = "global_kds_address",
        value_parser = umbra_runtime::flags::pem_certificates
    )]
    pub kds_ca_file: Option<std::path::PathBuf>,
    /// Store backend: `memory` (the default: this process alone serves the zone; durable with
    /// `--data-dir`) or `postgres` (`--postgres-url`): any number of replicas of this zone
    /// share the database, each serves ADS and the API, and one of them (elected) speaks KDS
    /// to the Global and keeps the ZoneIngresses up to date.
    #[arg(long, env = "UMBRA_STORE", value_enum, default_value = "memory")]
    pub store: StoreKind,
    /// PostgreSQL URL of the zone's database (`postgres://user@host:port/db`, as sqlx reads
    /// it), required with `--store postgres`: one database per zone, shared by its replicas
    /// (never the Global's).
    #[arg(
        long,
        env = "UMBRA_POSTGRES_URL",
        hide_env_values = true,
        required_if_eq("store", "postgres")
    )]
    pub postgres_url: Option<String>,
    /// With `--store postgres`: connections this replica opens to PostgreSQL at most.
    #[arg(
        long,
        env = "UMBRA_POSTGRES_MAX_CONNECTIONS",
        default_value_t = 8,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub postgres_max_connections: u32,
    /// This replica's name, as `/ready` and the other replicas show it (default: the host
    /// name).
    #[arg(long, env = "UMBRA_REPLICA_NAME", value_parser = umbra_postgres::flags::replica_name)]
    pub replica_name: Option<String>,
    /// With `--store postgres`: `ip:port` Envoys reach this replica's data-plane server at;
    /// every replica's is listed in the bootstraps handed out, so an Envoy whose replica dies
    /// reconnects to another. Default: `--ads-addr`, which must then not be unspecified.
    #[arg(long, env = "UMBRA_ADVERTISED_XDS_ADDRESS")]
    pub advertised_xds_address: Option<SocketAddr>,
    /// Directory where the zone keeps its store across restarts (`store.json` and
    /// `journal.ndjson`; every write is fsynced there before it is acknowledged), created when
    /// missing; without it the zone starts empty and a federated zone receives everything
    /// again.
    #[arg(long, env = "UMBRA_DATA_DIR", value_parser = umbra_runtime::flags::directory)]
    pub data_dir: Option<std::path::PathBuf>,
    /// API authentication.
    #[command(flatten)]
    pub access: umbra_api::authn::AccessArgs,
    /// How Envoys authenticate on ADS: `dpToken` (a dataplane token bound to the DPP, Kuma's
    /// default) or `none` (anyone reaching the port gets any DPP's config and secrets:
    /// development only).
    #[arg(long, env = "UMBRA_DP_AUTH", value_enum, default_value = "dpToken")]
    pub dp_auth: dp_auth::DpAuth,
    /// Name DPPs reach the data-plane server by (in the generated certificate, and the SNI of
    /// the bootstraps it hands out): a DNS name or an IP address.
    #[arg(
        long,
        env = "UMBRA_DP_SERVER_HOSTNAME",
        default_value = "localhost",
        value_parser = umbra_runtime::flags::host_name
    )]
    pub dp_server_hostname: String,
    /// Host the bootstraps handed out by `POST /bootstrap` point ADS at (Kuma's
    /// `bootstrapServer.params.xdsHost`): a DNS name or an IP address. Default: the host the
    /// request came to (its `Host` header), which is wrong when kuma-dp reached the zone through
    /// another address than its Envoy will use (a load balancer, a NAT, a port forward).
    #[arg(
        long,
        env = "UMBRA_BOOTSTRAP_XDS_HOST",
        value_parser = umbra_runtime::flags::host_name
    )]
    pub bootstrap_xds_host: Option<String>,
    /// Port the bootstraps point ADS at (Kuma's `bootstrapServer.params.xdsPort`). Default:
    /// the request's port, else the data-plane server's own.
    #[arg(long, env = "UMBRA_BOOTSTRAP_XDS_PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub bootstrap_xds_port: Option<u16>,
    /// PEM certificate chain for the data-plane server (ADS and `/bootstrap`) instead of one
    /// from the zone's own CA (with `--dp-server-tls-key-file`, the key of its first
    /// certificate).
    #[arg(
        long,
        env = "UMBRA_DP_SERVER_TLS_CERT_FILE",
        requires = "dp_server_tls_key_file",
        value_parser = umbra_runtime::flags::pem_certificates
    )]
    pub dp_server_tls_cert_file: Option<std::path::PathBuf>,
    /// PEM private key of `--dp-server-tls-cert-file`.
    #[arg(
        long,
        env = "UMBRA_DP_SERVER_TLS_KEY_FILE",
        requires = "dp_server_tls_cert_file",
        value_parser = umbra_runtime::flags::pem_private_key
    )]
    pub dp_server_tls_key_file: Option<std::path::PathBuf>,
    /// PEM CA certificate that signed `--dp-server-tls-cert-file` (handed to DPPs in their
    /// bootstraps and at `GET /dp-server/ca.pem`).
    #[arg(
        long,
        env = "UMBRA_DP_SERVER_TLS_CA_FILE",
        requires = "dp_server_tls_cert_file",
        value_parser = umbra_runtime::flags::pem_certificates
    )]
    pub dp_server_tls_ca_file: Option<std::path::PathBuf>,
}

/// One `--global-kds-address` value (one of a comma-separated list: spaces around it are
/// ignored), parsed by [`kds::KdsAddress`]'s parser.
fn kds_address(text: &str) -> Result<kds::KdsAddress, kds::AddressError> {
    text.trim().parse()
}

/// `--zone`: a valid zone name ([`umbra_kds::valid_zone_name`]).
fn zone_name(text: &str) -> Result<String, String> {
    if umbra_kds::valid_zone_name(text) {
        Ok(text.to_owned())
    } else {
        Err("a zone name is 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit".into())
    }
}

impl Args {
    /// Who may call the API without a token.
    pub fn access_policy(&self) -> umbra_pki::trust::AccessPolicy {
        self.access.policy()
    }

    /// What the value parsers cannot tell from one flag: a Global address needs a zone token
    /// the KDS client can send ([`kds::bearer`]; also the token file's content at start);
    /// several Global addresses must all be TLS or all plaintext, none twice
    /// ([`kds::KdsAddresses::new`]); a TLS address needs `--kds-ca-file` and a plaintext
    /// one refuses it (checked by building the KDS client's endpoint, [`kds::endpoint`]);
    /// `--dp-server-tls-key-file` must be the key of `--dp-server-tls-cert-file` (checked by
    /// building the data-plane server's TLS configuration); the API and ADS listen on
    /// different ports. The message names the flags.
    ///
    /// # Errors
    /// The first problem found.
    pub fn check(&self) -> Result<(), String> {
        umbra_runtime::flags::distinct_listeners(
            ("--api-addr", self.api_addr),
            ("--ads-addr", self.ads_addr),
        )?;
        if let Some(url) = &self.postgres_url {
            umbra_postgres::flags::check_postgres_url(url)?;
        }
        if self.store == StoreKind::Postgres {
            if self.data_dir.is_some() {
                return Err("--data-dir keeps a memory store; with --store postgres the zone's state is in PostgreSQL".into());
            }
            self.advertised_xds()?;
        }
        if let Some(addresses) = self.kds_addresses()? {
            // Checked here rather than by a value parser, whose error would print the token.
            match (&self.kds_token, &self.kds_token_file) {
                (Some(token), _) => {
                    kds::bearer(token).map_err(|e| format!("--kds-token: {e}"))?;
                }
                (None, Some(file)) => {
                    kds::TokenSource::File(file.clone())
                        .read()
                        .and_then(|t| kds::bearer(&t))
                        .map_err(|e| format!("--kds-token-file {}: {e}", file.display()))?;
                }
                (None, None) => {
                    return Err("--global-kds-address needs a zone token: --kds-token or --kds-token-file (UMBRA_KDS_TOKEN[_FILE])".into())
                }
            }
            let ca = self
                .kds_ca_file
                .as_deref()
                .map(|p| {
                    std::fs::read(p).map_err(|e| format!("--kds-ca-file {}: {e}", p.display()))
                })
                .transpose()?;
            for address in addresses.as_slice() {
                kds::endpoint(address, ca.as_deref())
                    .map_err(|e| format!("--global-kds-address {e}"))?;
            }
        }
        if let (Some(cert), Some(key)) =
            (&self.dp_server_tls_cert_file, &self.dp_server_tls_key_file)
        {
            let read = |flag: &str, p: &std::path::Path| {
                std::fs::read_to_string(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
            };
            let tls = dp_server::DpServerTls {
                ca_pem: String::new(),
                cert_pem: read("--dp-server-tls-cert-file", cert)?,
                key_pem: read("--dp-server-tls-key-file", key)?,
                server_name: self.dp_server_hostname.clone(),
            };
            dp_server::server_config(&tls).map_err(|e| {
                format!("--dp-server-tls-cert-file and --dp-server-tls-key-file: {e}")
            })?;
        }
        Ok(())
    }

    /// This replica's name (`--replica-name`, else the host name).
    pub fn replica_name(&self) -> String {
        self.replica_name
            .clone()
            .unwrap_or_else(|| umbra_postgres::flags::host_name("zone-cp"))
    }

    /// Where Envoys reach this replica's data-plane server (`--advertised-xds-address`, else
    /// `--ads-addr`).
    ///
    /// # Errors
    /// `--ads-addr` is unspecified (`0.0.0.0`) and no address is advertised.
    pub fn advertised_xds(&self) -> Result<SocketAddr, String> {
        match self.advertised_xds_address {
            Some(a) => Ok(a),
            None if self.ads_addr.ip().is_unspecified() => Err("--store postgres with --ads-addr on every interface needs --advertised-xds-address (where Envoys reach this replica)".into()),
            None => Ok(self.ads_addr),
        }
    }

    /// The Global's KDS addresses (`None`: standalone), checked as a list.
    ///
    /// # Errors
    /// Mixed TLS and plaintext addresses, or one given twice (the message names the flag).
    pub fn kds_addresses(&self) -> Result<Option<kds::KdsAddresses>, String> {
        if self.global_kds_address.is_empty() {
            return Ok(None);
        }
        kds::KdsAddresses::new(self.global_kds_address.clone())
            .map(Some)
            .map_err(|e| format!("--global-kds-address: {e}"))
    }

    /// The effective configuration `GET /config` answers: Kuma-like `environment`, `mode`
    /// (`zone`, or `zone (federated)` with a Global), `store.type`, `apiServer.http.address`
    /// and `multizone.zone.{name, globalAddress}` (Kuma's string: the Global's addresses
    /// comma-separated), then every flag under `umbra` (camelCase; `globalKdsAddress` is the
    /// list of addresses).
    /// Secrets are left out: the zone token's value reads as [`umbra_api::about::REDACTED`]
    /// when given, and the token, CA and TLS files are named, never read. The Global's
    /// addresses are shown as given: their parser refuses user info and queries, so they carry
    /// no password.
    pub fn config(&self) -> serde_json::Value {
        let federated = !self.global_kds_address.is_empty();
        let addresses: Vec<String> = self
            .global_kds_address
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect();
        let global_address = federated.then(|| addresses.join(","));
        let global_addresses = federated.then_some(addresses);
        let dp_auth =
            clap::ValueEnum::to_possible_value(&self.dp_auth).map(|v| v.get_name().to_owned());
        let mut umbra = serde_json::json!({
            "zone": self.zone,
            "globalKdsAddress": global_addresses,
            "apiAddr": self.api_addr,
            "adsAddr": self.ads_addr,
            "kdsToken": self.kds_token.as_ref().map(|_| umbra_api::about::REDACTED),
            "kdsTokenFile": self.kds_token_file,
            "kdsCaFile": self.kds_ca_file,
            "dataDir": self.data_dir,
            "store": self.store,
            "postgresUrl": self.postgres_url.as_deref().map(umbra_api::about::redact_url),
            "postgresMaxConnections": self.postgres_max_connections,
            "replicaName": self.replica_name,
            "advertisedXdsAddress": self.advertised_xds_address,
            "dpAuth": dp_auth,
            "dpServerHostname": self.dp_server_hostname,
            "bootstrapXdsHost": self.bootstrap_xds_host,
            "bootstrapXdsPort": self.bootstrap_xds_port,
            "dpServerTlsCertFile": self.dp_server_tls_cert_file,
            "dpServerTlsKeyFile": self.dp_server_tls_key_file,
            "dpServerTlsCaFile": self.dp_server_tls_ca_file,
        });
        if let (Some(all), serde_json::Value::Object(access)) = (
            umbra.as_object_mut(),
            umbra_api::about::access_config(&self.access),
        ) {
            all.extend(access);
        }
        serde_json::json!({
            "environment": "universal",
            "mode": if federated { "zone (federated)" } else { "zone" },
            "store": {"type": self.store},
            "apiServer": {"http": {"address": self.api_addr}},
            "multizone": {"zone": {"name": self.zone, "globalAddress": global_address}},
            "umbra": umbra,
        })
    }

    /// Arguments of a zone named `zone` with every default, listening on `api` and `ads`
    /// (for tests and embedders).
    pub fn new(zone: &str, api: SocketAddr, ads: SocketAddr) -> Self {
        use clap::Parser as _;
        let mut args = Self::parse_from(["zone-cp", "--zone", zone]);
        args.api_addr = api;
        args.ads_addr = ads;
        args
    }
}

/// The data-plane server's TLS material: the operator's files, or a certificate from the
/// zone's own CA ([`dp_server::generated`]).
async fn dp_server_tls(
    args: &Args,
    store: &store::Store,
) -> anyhow::Result<dp_server::DpServerTls> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
    };
    match (&args.dp_server_tls_cert_file, &args.dp_server_tls_key_file) {
        (Some(cert), Some(key)) => Ok(dp_server::DpServerTls {
            ca_pem: args
                .dp_server_tls_ca_file
                .as_deref()
                .map(read)
                .transpose()?
                .unwrap_or_default(),
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            server_name: args.dp_server_hostname.clone(),
        }),
        _ => {
            let mut names =
                dp_server::certificate_names(&args.dp_server_hostname, args.ads_addr.ip());
            // A replica is also reached at the address it advertises (bootstraps list it).
            if let Some(advertised) = args.advertised_xds_address {
                let ip = advertised.ip().to_string();
                if !advertised.ip().is_unspecified() && !names.contains(&ip) {
                    names.push(ip);
                }
            }
            Ok(dp_server::generated(&*store.contract(), &args.zone, &names).await?)
        }
    }
}

/// The zone's store as `args` choose it: memory (durable under `--data-dir`), or the zone's
/// PostgreSQL shared with its other replicas, loaded into this replica's mirror, with the
/// coordinator that registers this replica and elects the zone's leader (until `stop`).
///
/// # Errors
/// The directory or the database cannot be opened, or the database's schema is newer.
async fn open_store(
    args: &Args,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(
    store::Store,
    Option<std::sync::Arc<dyn umbra_postgres::replicas::Coordinator>>,
)> {
    let Some(url) = args
        .postgres_url
        .as_deref()
        .filter(|_| args.store == StoreKind::Postgres)
    else {
        let store = match &args.data_dir {
            Some(dir) => {
                let store = store::Store::open(dir)
                    .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", dir.display()))?;
                tracing::info!(dir = %dir.display(), resources = store.len(), "zone store loaded");
                store
            }
            None => store::Store::new(),
        };
        return Ok((store, None));
    };
    let pg = umbra_postgres::store::PostgresStore::connect(url, args.postgres_max_connections)
        .await
        .map_err(|e| anyhow::anyhow!("--postgres-url: {e}"))?;
    let store = store::Store::shared(std::sync::Arc::new(pg));
    replica::load(&store).await?;
    tracing::info!(resources = store.len(), "zone store loaded from PostgreSQL");
    let name = args.replica_name();
    let coordinator = umbra_postgres::replicas::postgres::PgCoordinator::start(
        url,
        umbra_postgres::replicas::postgres::Registration {
            name,
            api: args.api_addr.to_string(),
            xds: args
                .advertised_xds()
                .map_err(anyhow::Error::msg)?
                .to_string(),
            role: umbra_postgres::replicas::Role::Zone,
            ..Default::default()
        },
        stop,
    )
    .await?;
    Ok((store, Some(coordinator)))
}

/// The KDS client configuration `args` describe, if federated.
///
/// # Errors
/// A Global address without a token, addresses that do not go together (mixed TLS and
/// plaintext, one given twice), or unreadable token or CA files.
fn kds_config(
    args: &Args,
    trust: std::sync::Arc<umbra_pki::trust::Trust>,
    cas: std::sync::Arc<tokio::sync::watch::Sender<std::sync::Arc<umbra_pki::mesh_ca::MeshCas>>>,
) -> anyhow::Result<Option<kds::KdsClientConfig>> {
    let Some(addresses) = args.kds_addresses().map_err(anyhow::Error::msg)? else {
        return Ok(None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| anyhow::anyhow!("--kds-ca-file {}: {e}", p.display()))
    };
    // [`Args::check`] has made sure of a token (and a token file holding one at start; later
    // reads pick up a replaced token).
    let token = match (&args.kds_token, &args.kds_token_file) {
        (Some(t), _) => kds::TokenSource::Value(t.clone()),
        (None, Some(f)) => kds::TokenSource::File(f.clone()),
        (None, None) => anyhow::bail!("--global-kds-address needs a zone token"),
    };
    Ok(Some(kds::KdsClientConfig {
        trust,
        cas,
        zone: args.zone.clone(),
        addresses,
        token,
        ca_pem: args.kds_ca_file.as_deref().map(read).transpose()?,
    }))
}

/// Serve the API and ADS until `shutdown` resolves, then drain both and the zone's tasks
/// within [`umbra_runtime::process::DRAIN_DEADLINE`] (what is left then is aborted).
///
/// # Errors
/// Arguments [`Args::check`] refuses (before anything is opened or bound), or when an
/// address cannot be bound or a server fails.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    args.check().map_err(anyhow::Error::msg)?;
    umbra_runtime::metrics::install();
    umbra_kds::metrics::describe();
    umbra_store::metered::describe();
    let drain = umbra_runtime::process::Shutdown::new(umbra_runtime::process::DRAIN_DEADLINE);
    drain.trigger_on(shutdown);
    let stop_rx = drain.receiver();
    let (store, coordinator) = open_store(&args, stop_rx.clone()).await?;
    let policy = args.access_policy();
    let federated = !args.global_kds_address.is_empty();
    let trust = if federated {
        // Tokens come from the Global; until its bundle arrives, the one kept from last time.
        umbra_pki::trust::Trust::verifier(store.trust_bundle().unwrap_or_default(), policy)
    } else {
        umbra_pki::trust::Trust::authority(store.contract(), policy).await?
    };
    // The mesh CAs: from the Global (kept in the store since last time) in a federated zone,
    // this zone's own, kept in its store, when standalone (issue 18).
    let (cas_tx, cas_rx) = tokio::sync::watch::channel(std::sync::Arc::new(store.mesh_cas()));
    let cas_tx = std::sync::Arc::new(cas_tx);
    let keeper = (!federated).then(|| {
        std::sync::Arc::new(umbra_pki::mesh_ca::CaKeeper::new(
            store.contract(),
            cas_tx.clone(),
        ))
    });
    if let Some(k) = &keeper {
        // Before the first reconciliation, so DPPs of mTLS meshes get identities from the start.
        if let Err(e) = k.sync().await {
            tracing::warn!(error = %e, "cannot load the mesh CAs yet; retrying in the background");
        }
    }
    let kds_config = kds_config(&args, trust.clone(), cas_tx.clone())?;
    let tls = dp_server_tls(&args, &store).await?;
    if kds_config.as_ref().is_some_and(|c| !c.addresses.is_tls()) {
        tracing::warn!("KDS to the Global is plaintext: policies and the trust bundle (the keys tokens are checked with) travel unprotected; use an https:// address with --kds-ca-file");
    }
    if args.dp_auth == dp_auth::DpAuth::None {
        tracing::warn!("--dp-auth none: ADS does NOT authenticate Envoys; anyone reaching the data-plane port gets any DPP's configuration and certificates. Development only.");
    }
    let insights = std::sync::Arc::new(match &coordinator {
        Some(_) => ads::Insights::for_replica(&args.replica_name()),
        None => ads::Insights::default(),
    });
    // The Envoy-admin CA: created once, kept in the store (Kuma's `envoy-admin-ca`).
    let admin_tls = std::sync::Arc::new(
        admin_tls::AdminTls::load(&*store.contract(), envoy_admin::CONNECT_TIMEOUT)
            .await?
            .with_store(&store),
    );
    let reconciler = std::sync::Arc::new(
        reconciler::Reconciler::new(store.clone())
            .with_zone(&args.zone, federated)
            .with_cas(cas_rx)
            .with_insights(insights.clone())
            .with_admin_tls(admin_tls),
    );
    // A zone that synced with its Global before (a `--data-dir` store) serves that state and
    // is ready without it; a new one is not until its first sync (see `api::ready`).
    let kds_status = kds::SharedStatus::default();
    if federated {
        kds_status
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .synced = store.global_synced();
    }
    let kds_resync = std::sync::Arc::new(tokio::sync::Notify::new());
    let state = api::AppState {
        store: store.clone(),
        federated,
        insights: insights.clone(),
        reconciler: reconciler.clone(),
        kds: kds_status.clone(),
        kds_resync: kds_resync.clone(),
        trust: trust.clone(),
        dp_server_ca: (!tls.ca_pem.is_empty()).then(|| tls.ca_pem.clone()),
        config: std::sync::Arc::new(args.config()),
        replicas: coordinator.clone(),
    };
    let api_listener = umbra_runtime::process::listen(args.api_addr)?;
    let ads_listener = umbra_runtime::process::listen(args.ads_addr)?;
    tracing::info!(zone = %args.zone, api = %api_listener.local_addr()?, ads = %ads_listener.local_addr()?, "zone-cp listening");
    let zone = args.zone.as_str();
    let mut tasks = umbra_runtime::process::Tasks::default();
    tasks.spawn(
        "reconciler",
        reconciler
            .clone()
            .run(stop_rx.clone())
            .instrument(tracing::info_span!("reconciler", zone)),
    );
    tasks.spawn(
        "trust",
        trust
            .clone()
            .follow_meshes(stop_rx.clone())
            .instrument(tracing::info_span!("trust.follow_meshes", zone)),
    );
    if let Some(k) = keeper {
        tasks.spawn(
            "mesh CAs",
            k.follow(stop_rx.clone())
                .instrument(tracing::info_span!("mesh_ca.follow", zone)),
        );
    }
    // The zone's singletons: on the elected leader only when replicas share the store.
    let leader = coordinator.as_ref().map(|c| c.leader());
    let ingress_store = store.clone();
    let ingress_zone = args.zone.clone();
    let ingress = move |stop| {
        ingress::track_available_services(ingress_store.clone(), ingress_zone.clone(), stop)
            .instrument(tracing::info_span!("ingress.available_services"))
    };
    match &leader {
        Some(l) => tasks.spawn(
            "ingress",
            replica::while_leader("ingress", l.clone(), stop_rx.clone(), ingress),
        ),
        None => tasks.spawn("ingress", ingress(stop_rx.clone())),
    }
    if let Some(c) = kds_config {
        tracing::info!(global = %c.addresses, "federated: policies come from the Global over KDS");
        let span = tracing::info_span!("kds.client", zone, global = %c.addresses);
        let (store, insights, reconciler) = (store.clone(), insights.clone(), reconciler.clone());
        let (kds_status, kds_resync) = (kds_status.clone(), kds_resync.clone());
        let client = move |stop| {
            kds::run(
                c.clone(),
                store.clone(),
                insights.clone(),
                Some(reconciler.clone()),
                kds_status.clone(),
                kds_resync.clone(),
                stop,
            )
            .instrument(span.clone())
        };
        match &leader {
            Some(l) => tasks.spawn(
                "KDS client",
                replica::while_leader("kds-client", l.clone(), stop_rx.clone(), client),
            ),
            None => tasks.spawn("KDS client", client(stop_rx.clone())),
        }
    }
    if let (Some(c), Some(url)) = (&coordinator, &args.postgres_url) {
        let share =
            replica_insights::InsightShare::connect(url, insights.clone(), c.clone()).await?;
        tasks.spawn(
            "replica insights",
            replica_insights::share(share, stop_rx.clone())
                .instrument(tracing::info_span!("replica.insights", zone)),
        );
    }
    if store.is_shared() {
        tasks.spawn(
            "replica mirror",
            replica::follow(store.clone(), stop_rx.clone())
                .instrument(tracing::info_span!("replica.mirror", zone)),
        );
        tasks.spawn(
            "replica keys",
            replica::adopt_keys(
                store.clone(),
                reconciler.clone(),
                federated.then(|| (trust.clone(), cas_tx.clone())),
                kds_status.clone(),
                stop_rx.clone(),
            )
            .instrument(tracing::info_span!("replica.keys", zone)),
        );
    }
    let api = umbra_runtime::process::serve_http(
        api_listener,
        umbra_console::mount(api::router(state), umbra_console::Mode::Zone),
        stop_rx.clone(),
    );
    let gate = dp_auth::Gate {
        mode: args.dp_auth,
        trust,
        zone: args.zone.clone(),
    };
    let bootstrap = dp_server::router(dp_server::BootstrapState {
        store: store.clone(),
        gate: gate.clone(),
        ca_pem: tls.ca_pem.clone(),
        port: ads_listener.local_addr()?.port(),
        xds_host: args.bootstrap_xds_host.clone(),
        xds_port: args.bootstrap_xds_port,
        replicas: coordinator.clone(),
    });
    let ads = ads::Ads::new(store, reconciler, insights, stop_rx.clone())
        .with_gate(gate)
        .listen(ads_listener, Some(&tls), bootstrap, stop_rx.clone());
    // After the signal, the servers and then the tasks get until the drain deadline.
    if let Some((a, b)) = drain.bounded(async { tokio::join!(api, ads) }).await {
        a?;
        b?;
    }
    drain.drain(tasks).await;
    Ok(())
}

/// The `zone-cp` command: log to stderr (`RUST_LOG`, default `info`), parse [`Args`] from the
/// command line and environment (a malformed flag exits with status 2 and a message naming
/// it: [`umbra_runtime::flags::parse_checked`] with [`Args::check`]), and [`run`] until SIGINT or
/// SIGTERM.
///
/// # Errors
/// What [`run`] returns, or a failure to start the runtime.
pub fn cli_main() -> anyhow::Result<()> {
    umbra_api::service::main("umbra-zone-cp", |shutdown| {
        run(umbra_runtime::flags::parse_checked(Args::check), shutdown)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    /// `zone-cp --zone z1 --kds-token t <extra>`, parsed and checked as the binary does;
    /// the error as the user reads it.
    fn parse(extra: &[&str]) -> Result<Args, String> {
        let mut argv = vec!["zone-cp", "--zone", "z1", "--kds-token", "t"];
        argv.extend_from_slice(extra);
        let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
        args.check()?;
        Ok(args)
    }

    fn addresses(args: &Args) -> Vec<String> {
        args.kds_addresses()
            .expect("addresses that go together")
            .map(|l| l.as_slice().iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    #[test]
    fn several_global_addresses_repeated_or_comma_separated() {
        let args = parse(&[
            "--global-kds-address",
            "http://g-1:5685",
            "--global-kds-address",
            "grpc://g-2:5685,http://10.0.0.3:5685",
        ])
        .unwrap();
        assert_eq!(
            addresses(&args),
            ["http://g-1:5685", "grpc://g-2:5685", "http://10.0.0.3:5685"]
        );
        let config = args.config();
        assert_eq!(config["mode"], "zone (federated)");
        assert_eq!(
            config["multizone"]["zone"]["globalAddress"],
            "http://g-1:5685,grpc://g-2:5685,http://10.0.0.3:5685"
        );
        assert_eq!(
            config["umbra"]["globalKdsAddress"],
            serde_json::json!(["http://g-1:5685", "grpc://g-2:5685", "http://10.0.0.3:5685"])
        );
        // Spaces around the commas are the writer's, not part of an address.
        let args = parse(&["--global-kds-address", "http://g-1:5685 , http://g-2:5685"]).unwrap();
        assert_eq!(addresses(&args), ["http://g-1:5685", "http://g-2:5685"]);
        // One address (a Global, or a load balancer in front of several) is as before.
        let args = parse(&["--global-kds-address", "grpc://lb:5685"]).unwrap();
        assert_eq!(addresses(&args), ["grpc://lb:5685"]);
        assert_eq!(
            args.config()["multizone"]["zone"]["globalAddress"],
            "grpc://lb:5685"
        );
        // None: standalone.
        let args = Args::try_parse_from(["zone-cp", "--zone", "z1"]).unwrap();
        assert!(args.kds_addresses().unwrap().is_none());
        assert!(args.config()["multizone"]["zone"]["globalAddress"].is_null());
        assert!(args.config()["umbra"]["globalKdsAddress"].is_null());
    }

    #[test]
    fn each_global_address_is_parsed_on_its_own() {
        for bad in [
            "http://g-1:5685,",
            "http://g-1:5685,,http://g-2:5685",
            "http://g-1:5685,g-2:5685",
            "http://g-1:5685;http://g-2:5685",
            "http://g-1:5685 http://g-2:5685",
        ] {
            let e = parse(&["--global-kds-address", bad]).unwrap_err();
            assert!(e.contains("--global-kds-address"), "{bad}: {e}");
        }
    }

    #[test]
    fn tls_and_plaintext_global_addresses_do_not_mix() {
        for mixed in [
            &["--global-kds-address", "grpcs://g-1:5685,http://g-2:5685"][..],
            &[
                "--global-kds-address",
                "http://g-1:5685",
                "--global-kds-address",
                "https://g-2:5685",
            ][..],
        ] {
            let e = parse(mixed).unwrap_err();
            assert!(
                e.starts_with("--global-kds-address: ")
                    && e.contains("is TLS")
                    && e.contains("is plaintext"),
                "{mixed:?}: {e}"
            );
        }
        // All TLS is fine as far as the addresses go (it then needs --kds-ca-file).
        let e = parse(&["--global-kds-address", "grpcs://g-1:5685,https://g-2:5685"]).unwrap_err();
        assert!(
            e.contains("--kds-ca-file") && !e.contains("plaintext"),
            "{e}"
        );
    }

    #[test]
    fn a_global_address_given_twice_is_refused() {
        for twice in [
            &["--global-kds-address", "http://g:5685,http://g:5685"][..],
            &[
                "--global-kds-address",
                "grpc://g:5685",
                "--global-kds-address",
                "http://G:5685",
            ][..],
        ] {
            let e = parse(twice).unwrap_err();
            assert!(
                e.starts_with("--global-kds-address: ") && e.contains("given twice"),
                "{twice:?}: {e}"
            );
        }
    }
}
