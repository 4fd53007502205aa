//! The zone's KDS client (issue 5): dials the Global, keeps the zone store's Meshes and policies
//! equal to the Global's, and reports the zone's Dataplanes and their insights up.
//!
//! - One gRPC connection, three streams: GlobalToZoneSync (this side requests and applies, see
//!   [`umbra_kds::sync::request`]), ZoneToGlobalSync (this side responds, see
//!   [`umbra_kds::sync::respond`]) and InspectSync (the Global's inspect calls, see
//!   [`crate::remote_inspect`]). When any ends, all are torn down and the zone
//!   reconnects with jittered exponential backoff ([`Backoff`]).
//! - The Global may have several addresses ([`KdsAddresses`]: replicas on one database). The
//!   zone dials them in order and moves to the next whenever a connection does not open
//!   ([`CONNECT_TIMEOUT`]), its three streams do not all come up ([`OPEN_TIMEOUT`], or a
//!   replica refuses the zone: another one holds its lease) or a session ends; it waits only
//!   once per round of failed attempts ([`Rotation`]), so a dead replica fails over at once.
//!   The address connected to is logged and reported (`/ready`: `global.globalAddress`).
//! - Other zones' ZoneIngresses come down like policies (stored under their Global names,
//!   `zone` set to theirs); the zone's own go up with its Dataplanes. One that claims this
//!   zone coming down is NACKed, and a removal never touches a local one. ZoneEgresses go up
//!   only (Kuma's `send_to_global`): the Global never sends any, so a zone sees its own only.
//! - On (re)connect the zone sends the versions it holds, so only the difference comes; with
//!   `--data-dir` the store survives a restart, so that holds across a crash too. Versions
//!   are content digests ([`umbra_kds::resource::content_version`]), the same whichever
//!   Global replica computes them, so that holds across a failover too.
//! - A resource this zone cannot apply (invalid here, unknown mesh) is NACKed on its own; the
//!   others apply. While the Global is unreachable nothing changes: Envoys keep their config.
//! - The zone authenticates with its zone token (`authorization: Bearer`) and sends its
//!   configured name ([`umbra_kds::ZONE_NAME_METADATA`]) so a token for another zone is
//!   refused with a clear reason.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tracing::Instrument as _;
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_kds::pb::kds_service_client::KdsServiceClient;
use umbra_kds::pb::InspectResponse;
use umbra_kds::resource::{
    global_to_zone_types, kds_name, zone_dataplane_upstream, zone_to_global_types, Item,
    COMMIT_TYPE, DATAPLANE_INSIGHT_TYPE,
};
use umbra_kds::sync::{
    request, respond, spawn_reader_noting, Event, Offer, OfferWatch, RespondConfig, SyncError,
    TypeItems, STREAM_QUEUE,
};
use umbra_kds::{
    GLOBAL_STORE_METADATA, MAX_MESSAGE_BYTES, RECORDED_STORE_METADATA, ZONE_NAME_METADATA,
};
use umbra_pki::mesh_ca::MeshCas;

use crate::ads::Insights;
use crate::reconciler::Reconciler;
use crate::store::Store;
use umbra_core::dataplane::DpKey;

mod address;
mod error;
mod reconnect;
mod sink;
pub use address::{KdsAddress, KdsAddresses};
pub use error::{AddressError, KdsClientError};
pub use reconnect::{
    Backoff, Rotation, CONNECT_TIMEOUT, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, LASTED,
    OPEN_TIMEOUT, RECONNECT_BASE, RECONNECT_MAX, STAYED_UP,
};
use sink::{held_versions, StoreSink};

/// The gRPC endpoint the client dials for `address`, verifying the Global with the PEM
/// certificates `ca_pem` when the address is TLS. Built once at startup too (where a CA file
/// tonic cannot load stops the zone), and the same way before each connection.
///
/// # Errors
/// A TLS address without CA certificates, CA certificates for a plaintext address, or CA
/// certificates tonic cannot load.
pub fn endpoint(address: &KdsAddress, ca_pem: Option<&[u8]>) -> Result<Endpoint, KdsClientError> {
    let endpoint = Endpoint::from(address.uri().clone())
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .initial_stream_window_size(Some(umbra_kds::STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(umbra_kds::CONNECTION_WINDOW_BYTES));
    match (address.is_tls(), ca_pem) {
        (true, Some(ca)) => endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
            .map_err(KdsClientError::Tls),
        (true, None) => Err(KdsClientError::NeedsCa(address.to_string())),
        (false, Some(_)) => Err(KdsClientError::CaUnused(address.to_string())),
        (false, None) => Ok(endpoint),
    }
}

/// `token` as the zone sends it (`authorization: Bearer <token>`): trimmed, not empty, and
/// only characters gRPC metadata carries. The one rule: `--kds-token` (and a token file at
/// startup) is checked with it, and every connection attempt again.
///
/// # Errors
/// An empty token, or characters gRPC metadata cannot carry.
pub fn bearer(token: &str) -> Result<MetadataValue<tonic::metadata::Ascii>, KdsClientError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(KdsClientError::EmptyToken);
    }
    format!("Bearer {token}")
        .parse()
        .map_err(|_| KdsClientError::TokenNotMetadata)
}

/// How to reach the Global.
#[derive(Debug, Clone)]
pub struct KdsClientConfig {
    /// This zone's name.
    pub zone: String,
    /// The Global's KDS addresses, dialed in turn.
    pub addresses: KdsAddresses,
    /// Where the zone token comes from (read again on every connection attempt).
    pub token: TokenSource,
    /// PEM CA certificate(s) to verify the Global's TLS certificate (system roots are not used).
    pub ca_pem: Option<Vec<u8>>,
    /// Where the Global's trust bundle goes (user and dataplane token keys, revocations).
    pub trust: Arc<umbra_pki::trust::Trust>,
    /// Where the Global's mesh CAs go (kept in the store first).
    pub cas: Arc<watch::Sender<Arc<MeshCas>>>,
}

/// Where the zone token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// Given on the command line or in the environment.
    Value(String),
    /// A file, read again on every connection attempt: an operator replaces an expiring token
    /// by writing the new one there, and the zone reconnects with it.
    File(std::path::PathBuf),
}

/// Never prints the token itself.
impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Value(_) => f.write_str("TokenSource::Value(..)"),
            TokenSource::File(p) => write!(f, "TokenSource::File({})", p.display()),
        }
    }
}

impl TokenSource {
    /// The token now.
    ///
    /// # Errors
    /// An unreadable or empty token file.
    pub fn read(&self) -> Result<String, KdsClientError> {
        let token = match self {
            TokenSource::Value(t) => t.trim().to_owned(),
            TokenSource::File(p) => std::fs::read_to_string(p)
                .map_err(|source| KdsClientError::TokenFile {
                    path: p.clone(),
                    source,
                })?
                .trim()
                .to_owned(),
        };
        if token.is_empty() {
            return Err(KdsClientError::EmptyToken);
        }
        Ok(token)
    }
}

/// What the zone knows of its link to the Global.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KdsStatus {
    /// Both streams are up.
    pub connected: bool,
    /// Connection attempts so far.
    pub attempts: u64,
    /// The Global address (as given) of the current connection; while not connected, the one
    /// being tried or last tried. One of several replicas' when `--global-kds-address`
    /// lists several.
    pub global_address: Option<String>,
    /// Why the last session ended or the last attempt failed.
    pub last_error: Option<String>,
    /// A whole sync from the Global (every type, ended by its commit marker) has been
    /// applied, in this process or in an earlier run whose store the zone loaded
    /// (`--data-dir`). Until then a federated zone is not ready (`/ready` answers 503).
    pub synced: bool,
    /// Responses applied from the Global, per type.
    pub applied: BTreeMap<String, u64>,
    /// Resources the Global's responses carried, per type (removals not counted).
    pub resources_received: BTreeMap<String, u64>,
    /// The last resources this zone refused (NACKed), as `name: reason`.
    pub last_rejected: Vec<String>,
    /// The store identity the Global announced on the current (or last) connection.
    pub global_store: Option<String>,
    /// The Global store identity this zone recorded when it first synced.
    pub recorded_global_store: Option<String>,
    /// The Global's store is not the one this zone synced from (it lost its data, or it is
    /// another Global): the zone applies no deletions from it and keeps serving its last state
    /// until an operator confirms (`POST /global/accept-store`) or the Global's data comes back.
    pub global_store_changed: bool,
}

/// Shared [`KdsStatus`].
pub type SharedStatus = Arc<std::sync::RwLock<KdsStatus>>;

fn update_status(status: &SharedStatus, f: impl FnOnce(&mut KdsStatus)) {
    f(&mut status
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner));
}

/// Run the client until `shutdown` turns `true`. With `reconciler`, the Global's shadow-diff
/// calls reuse the Live snapshots proxies are served.
pub async fn run(
    config: KdsClientConfig,
    store: Store,
    insights: Arc<Insights>,
    reconciler: Option<Arc<Reconciler>>,
    status: SharedStatus,
    resync: Arc<tokio::sync::Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (offer_tx, offer_rx) = watch::channel(None);
    tokio::spawn(
        publish_offer(
            config.zone.clone(),
            store.clone(),
            insights.clone(),
            offer_tx,
            shutdown.clone(),
        )
        .instrument(tracing::info_span!("kds.publish_offer", zone = %config.zone)),
    );
    let mut rotation = Rotation::new(
        config.addresses.len(),
        Backoff::new(RECONNECT_BASE, RECONNECT_MAX),
    );
    let mut attempt = 0_u64;
    while !*shutdown.borrow() {
        let address = config.addresses.at(rotation.current()).clone();
        update_status(&status, |s| {
            s.attempts += 1;
            s.global_address = Some(address.to_string());
        });
        attempt += 1;
        // When the three streams came up (set by the session).
        let mut up_since = None;
        let session = session(
            &config,
            &address,
            &store,
            &insights,
            reconciler.clone(),
            offer_rx.clone(),
            &status,
            &mut up_since,
        )
        .instrument(
            tracing::info_span!("kds.session", zone = %config.zone, global = %address, attempt),
        );
        let outcome = tokio::select! {
            r = session => r,
            () = resync.notified() => Err("reconnecting to resync (an operator accepted the Global's store)".to_owned()),
            _ = shutdown.wait_for(|s| *s) => break,
        };
        update_status(&status, |s| s.connected = false);
        let error = match outcome {
            Ok(()) => "the Global closed the stream".to_owned(),
            Err(e) => e,
        };
        let up_for = up_since.map(|t: tokio::time::Instant| t.elapsed());
        let wait = rotation.ended(up_for);
        let next = config.addresses.at(rotation.current());
        if up_for.is_some() {
            tracing::warn!(zone = %config.zone, global = %address, %error, next = %next, "KDS: disconnected from the Global");
        } else {
            tracing::warn!(zone = %config.zone, global = %address, %error, next = %next, "KDS: cannot sync with the Global at this address");
        }
        update_status(&status, |s| s.last_error = Some(error));
        if let Some(delay) = wait {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    }
    // Stopped (the zone shuts down, or a zone replica stopped leading): no stream is open.
    update_status(&status, |s| s.connected = false);
}

async fn connect(address: &KdsAddress, ca_pem: Option<&[u8]>) -> Result<Channel, KdsClientError> {
    endpoint(address, ca_pem)?
        .connect()
        .await
        .map_err(|source| KdsClientError::Connect {
            address: address.to_string(),
            source,
        })
}

/// Compare the store identity the Global announced on `down` with the one this zone recorded
/// (recording it on the first sync). Returns whether deletions from this Global must be
/// refused: it is not the store this zone synced from.
///
/// # Errors
/// A Global that announces no identity; a store that cannot record it.
fn check_global_store<T>(
    store: &Store,
    status: &SharedStatus,
    recorded: Option<String>,
    down: &tonic::Response<T>,
) -> Result<bool, String> {
    let offered = down
        .metadata()
        .get(GLOBAL_STORE_METADATA)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "the Global announced no store identity".to_owned())?;
    let recorded = match recorded {
        Some(r) => r,
        None => {
            store
                .record_global_store(&offered)
                .map_err(|e| e.to_string())?;
            offered.clone()
        }
    };
    let changed = recorded != offered;
    if changed {
        tracing::warn!(%recorded, %offered, "KDS: the Global's store is not the one this zone synced from; keeping this zone's state and applying no deletions until an operator confirms (POST /global/accept-store)");
    }
    update_status(status, |s| {
        s.global_store = Some(offered);
        s.recorded_global_store = Some(recorded);
        s.global_store_changed = changed;
    });
    Ok(changed)
}

/// Why a stream the zone opens was refused (the Global's status, e.g. AlreadyExists while
/// another connection holds the zone's lease).
fn refused(rpc: &'static str) -> impl Fn(tonic::Status) -> String {
    move |s| format!("{rpc} refused ({:?}): {}", s.code(), s.message())
}

/// One connection to the Global at `address`: its three streams until one ends. Sets
/// `up_since` once all three are up.
#[allow(clippy::too_many_arguments)]
async fn session(
    config: &KdsClientConfig,
    address: &KdsAddress,
    store: &Store,
    insights: &Arc<Insights>,
    reconciler: Option<Arc<Reconciler>>,
    offer: OfferWatch,
    status: &SharedStatus,
    up_since: &mut Option<tokio::time::Instant>,
) -> Result<(), String> {
    // The session's error is reported as text (the KDS status, the log).
    let auth = config
        .token
        .read()
        .and_then(|t| bearer(&t))
        .map_err(|e| e.to_string())?;
    let channel = connect(address, config.ca_pem.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let zone_name: MetadataValue<_> = config
        .zone
        .parse()
        .map_err(|_| "the zone name is not valid gRPC metadata".to_owned())?;
    let recorded = store.recorded_global_store();
    let recorded_md: MetadataValue<_> =
        recorded.clone().unwrap_or_default().parse().map_err(|_| {
            "the recorded Global store identity is not valid gRPC metadata".to_owned()
        })?;
    let mut client =
        KdsServiceClient::with_interceptor(channel, move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("authorization", auth.clone());
            req.metadata_mut()
                .insert(ZONE_NAME_METADATA, zone_name.clone());
            req.metadata_mut()
                .insert(RECORDED_STORE_METADATA, recorded_md.clone());
            req.metadata_mut().insert(
                umbra_kds::ZONE_VERSION_METADATA,
                MetadataValue::from_static(env!("CARGO_PKG_VERSION")),
            );
            Ok(req)
        })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    // The status the Global ends a stream with (an expired token, a second connection) says
    // why the session ended.
    let ended: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let noting = |ended: &Arc<std::sync::Mutex<Option<String>>>| {
        let ended = ended.clone();
        move |status: &tonic::Status| {
            let mut e = ended
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            e.get_or_insert_with(|| format!("{:?}: {}", status.code(), status.message()));
        }
    };
    let (req_tx, req_rx) = mpsc::channel::<DeltaDiscoveryRequest>(STREAM_QUEUE);
    let (resp_tx, resp_rx) = mpsc::channel::<DeltaDiscoveryResponse>(STREAM_QUEUE);
    let (inspect_tx, inspect_rx) = mpsc::channel::<InspectResponse>(STREAM_QUEUE);
    // All three streams come up within OPEN_TIMEOUT, or this address is left for the next.
    let open = async {
        // Global → zone: subscribe with what the store holds.
        let down = client
            .global_to_zone_sync(ReceiverStream::new(req_rx))
            .await
            .map_err(refused("GlobalToZoneSync"))?;
        let protect = check_global_store(store, status, recorded, &down)?;
        let responses = spawn_reader_noting(down.into_inner(), || {}, noting(&ended));
        // Zone → Global: answer the Global's requests from the offer.
        let up = client
            .zone_to_global_sync(ReceiverStream::new(resp_rx))
            .await
            .map_err(refused("ZoneToGlobalSync"))?;
        let requests = spawn_reader_noting(up.into_inner(), || {}, noting(&ended));
        // Inspect: the Global's calls come down, the answers go up (issue 6).
        let calls = client
            .inspect_sync(ReceiverStream::new(inspect_rx))
            .await
            .map_err(refused("InspectSync"))?;
        let calls = spawn_reader_noting(calls.into_inner(), || {}, noting(&ended));
        Ok::<_, String>((protect, responses, requests, calls))
    };
    let (protect, responses, requests, calls) = tokio::time::timeout(OPEN_TIMEOUT, open)
        .await
        .map_err(|_| {
        format!("the KDS streams did not all come up within {OPEN_TIMEOUT:?}")
    })??;
    *up_since = Some(tokio::time::Instant::now());
    tracing::info!(zone = %config.zone, global = %address, "KDS: connected to the Global");
    update_status(status, |s| {
        s.connected = true;
        s.last_error = None;
    });

    let types = global_to_zone_types();
    let initial = held_versions(store, &types, &config.zone);
    let mut sink = StoreSink {
        zone: config.zone.clone(),
        cas: config.cas.clone(),
        trust: config.trust.clone(),
        store: store.clone(),
        session_start: time::OffsetDateTime::now_utc(),
        protect,
        group_commit: true,
        staged: Vec::new(),
    };
    let st = status.clone();
    let synced_store = store.clone();
    let synced_store_zone = config.zone.clone();
    let observe_down = move |e: Event| {
        umbra_kds::metrics::record("global_to_zone", &e);
        if let Event::Applied {
            type_url,
            resources,
            rejected,
            ..
        } = e
        {
            // The commit marker ends a generation the sink has just written: the zone now
            // holds a whole sync from the Global (noted once, durably, for later restarts).
            let commit = type_url == COMMIT_TYPE;
            if commit && !synced_store.global_synced() {
                if let Err(e) = synced_store.record_global_synced() {
                    tracing::warn!(error = %e, "KDS: cannot note the first sync in the store");
                }
                tracing::info!(zone = %synced_store_zone, "KDS: first sync from the Global applied; the zone is ready");
            }
            update_status(&st, |s| {
                s.synced |= commit;
                *s.applied.entry(type_url.clone()).or_default() += 1;
                *s.resources_received.entry(type_url).or_default() += resources as u64;
                if !rejected.is_empty() {
                    s.last_rejected = rejected
                        .iter()
                        .map(|r| format!("{}: {}", r.name, r.reason))
                        .collect();
                }
            });
        }
    };
    let down = request(&types, initial, responses, req_tx, &mut sink, &observe_down);
    let config_up = RespondConfig::new(zone_to_global_types());
    let up = respond(requests, resp_tx, offer, &config_up, &|e| {
        umbra_kds::metrics::record("zone_to_global", &e);
    });
    let describe = |dir: &str, r: Result<(), SyncError>| {
        let why = ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match (r, why) {
            (_, Some(why)) => format!("{dir} ended by the Global: {why}"),
            (Ok(()), None) => format!("{dir} stream closed by the Global"),
            (Err(e), None) => format!("{dir}: {e}"),
        }
    };
    let inspect = crate::remote_inspect::serve(
        calls,
        inspect_tx,
        store.clone(),
        insights.clone(),
        reconciler,
    );
    tokio::select! {
        r = down => Err(describe("GlobalToZoneSync", r)),
        r = up => Err(describe("ZoneToGlobalSync", r)),
        () = inspect => Err(describe("InspectSync", Ok(()))),
    }
}

/// How long changes are gathered before the offer to the Global is rebuilt.
const OFFER_DEBOUNCE: Duration = Duration::from_millis(50);

/// Keep `tx` offering the zone's Dataplanes, ZoneIngresses and ZoneEgresses (upstream form)
/// and the insights (a ZoneEgress's under `<ZONE_EGRESS_KEY_MESH>/<name>`).
async fn publish_offer(
    zone: String,
    store: Store,
    insights: Arc<Insights>,
    tx: watch::Sender<Option<Arc<Offer>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut store_rx = store.subscribe();
    let mut insights_rx = insights.subscribe();
    // Dataplane key → (store revision, item): unchanged Dataplanes are not re-serialized.
    let mut cache: HashMap<ResourceKey, (u64, Item)> = HashMap::new();
    loop {
        let mut dataplanes = TypeItems::default();
        let mut seen = HashMap::new();
        for s in store.list_all(ResourceType::Dataplane) {
            let key = s.resource.key();
            let item = match cache.remove(&key) {
                Some((rev, item)) if rev == s.revision => item,
                _ => Item::from_resource(&zone_dataplane_upstream(&s.resource, &zone)),
            };
            dataplanes.insert(kds_name(&key.mesh, &key.name), item.clone());
            seen.insert(key, (s.revision, item));
        }
        let mut ingresses = TypeItems::default();
        for s in store.list_all(ResourceType::ZoneIngress) {
            if s.resource
                .as_zone_ingress()
                .is_some_and(|zi| zi.is_remote(&zone))
            {
                continue; // another zone's, synced from the Global
            }
            let key = s.resource.key();
            let item = match cache.remove(&key) {
                Some((rev, item)) if rev == s.revision => item,
                _ => Item::from_resource(&zone_dataplane_upstream(&s.resource, &zone)),
            };
            ingresses.insert(kds_name(&key.mesh, &key.name), item.clone());
            seen.insert(key, (s.revision, item));
        }
        let mut egresses = TypeItems::default();
        for s in store.list_all(ResourceType::ZoneEgress) {
            let key = s.resource.key();
            let item = match cache.remove(&key) {
                Some((rev, item)) if rev == s.revision => item,
                _ => Item::from_resource(&zone_dataplane_upstream(&s.resource, &zone)),
            };
            egresses.insert(kds_name(&key.mesh, &key.name), item.clone());
            seen.insert(key, (s.revision, item));
        }
        cache = seen;
        let mut insight_items = TypeItems::default();
        for (DpKey { mesh, name }, insight) in insights.all() {
            let mut doc = serde_json::to_value(&insight).unwrap_or_default();
            if let Some(o) = doc.as_object_mut() {
                o.insert("mesh".into(), mesh.clone().into());
                o.insert("name".into(), name.clone().into());
            }
            insight_items.insert(kds_name(&mesh, &name), Item::from_doc(&doc));
        }
        let offer = Offer::from([
            (
                ResourceType::Dataplane.name().to_owned(),
                Arc::new(dataplanes),
            ),
            (
                ResourceType::ZoneIngress.name().to_owned(),
                Arc::new(ingresses),
            ),
            (
                ResourceType::ZoneEgress.name().to_owned(),
                Arc::new(egresses),
            ),
            (DATAPLANE_INSIGHT_TYPE.to_owned(), Arc::new(insight_items)),
        ]);
        tx.send_if_modified(|current| {
            if current.as_deref() == Some(&offer) {
                false
            } else {
                *current = Some(Arc::new(offer));
                true
            }
        });
        tokio::select! {
            r = store_rx.changed() => if r.is_err() { return },
            r = insights_rx.changed() => if r.is_err() { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
        tokio::time::sleep(OFFER_DEBOUNCE).await;
        store_rx.borrow_and_update();
        insights_rx.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_addresses_need_a_ca_and_plaintext_ones_refuse_it() {
        let tls: KdsAddress = "https://global:5685".parse().unwrap();
        let plain: KdsAddress = "http://global:5685".parse().unwrap();
        assert!(matches!(
            endpoint(&tls, None),
            Err(KdsClientError::NeedsCa(a)) if a == "https://global:5685"
        ));
        assert!(endpoint(&plain, Some(b"pem"))
            .unwrap_err()
            .to_string()
            .contains("would not be used"));
        assert!(endpoint(&plain, None).is_ok());
    }

    #[test]
    fn a_token_must_fit_in_grpc_metadata() {
        assert!(bearer(" t0ken\n").is_ok());
        assert!(matches!(bearer(" \n"), Err(KdsClientError::EmptyToken)));
        assert!(bearer("a\u{1}b")
            .unwrap_err()
            .to_string()
            .contains("not allowed"));
    }
}
