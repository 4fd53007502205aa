//! The zone's KDS client (issue 5): dials the Global, keeps the zone store's Meshes and policies
//! equal to the Global's, and reports the zone's Dataplanes and their insights up.
//!
//! - One gRPC connection, three streams: GlobalToZoneSync (this side requests and applies, see
//!   [`umbra_kds::sync::request`]), ZoneToGlobalSync (this side responds, see
//!   [`umbra_kds::sync::respond`]) and InspectSync (the Global's inspect calls, see
//!   [`crate::remote_inspect`]). When any ends, all are torn down and the zone
//!   reconnects with jittered exponential backoff ([`Backoff`]).
//! - Other zones' ZoneIngresses come down like policies (stored under their Global names,
//!   `zone` set to theirs); the zone's own go up with its Dataplanes. One that claims this
//!   zone coming down is NACKed, and a removal never touches a local one.
//! - On (re)connect the zone sends the versions it holds, so only the difference comes; with
//!   `--data-dir` the store survives a restart, so that holds across a crash too.
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
use rand::Rng as _;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use umbra_api::mesh_ca::{ca_name, MeshCa, MeshCas};
use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_kds::pb::kds_service_client::KdsServiceClient;
use umbra_kds::pb::InspectResponse;
use umbra_kds::resource::{
    global_to_zone_types, kds_name, split_kds_name, zone_dataplane_upstream, zone_to_global_types,
    Item, DATAPLANE_INSIGHT_TYPE, MESH_CA_TYPE, TRUST_BUNDLE_NAME, TRUST_BUNDLE_TYPE,
};
use umbra_kds::sync::{
    request, respond, spawn_reader_noting, Event, Offer, OfferWatch, Received, Refusal,
    RespondConfig, Sink, SyncError, TypeItems, Upsert, STREAM_QUEUE,
};
use umbra_kds::{
    GLOBAL_STORE_METADATA, MAX_MESSAGE_BYTES, RECORDED_STORE_METADATA, ZONE_NAME_METADATA,
};
use umbra_xds::snapshot::ResourceVersions;

use crate::ads::Insights;
use crate::reconciler::Reconciler;
use crate::store::{ReplicaWrite, Store, StoreError};
use umbra_core::dataplane::DpKey;

/// How to reach the Global.
#[derive(Debug, Clone)]
pub struct KdsClientConfig {
    /// This zone's name.
    pub zone: String,
    /// The Global's KDS URL (`http://host:5685`, or `https://` with TLS).
    pub address: String,
    /// Where the zone token comes from (read again on every connection attempt).
    pub token: TokenSource,
    /// PEM CA certificate(s) to verify the Global's TLS certificate (system roots are not used).
    pub ca_pem: Option<Vec<u8>>,
    /// Where the Global's trust bundle goes (user and dataplane token keys, revocations).
    pub trust: Arc<umbra_api::trust::Trust>,
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
    pub fn read(&self) -> Result<String, String> {
        let token = match self {
            TokenSource::Value(t) => t.trim().to_owned(),
            TokenSource::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("zone token file {}: {e}", p.display()))?
                .trim()
                .to_owned(),
        };
        if token.is_empty() {
            return Err("the zone token is empty".to_owned());
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
    /// Why the last session ended or the last attempt failed.
    pub last_error: Option<String>,
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

/// Exponential backoff with jitter: attempt `n` waits a random time in
/// `[d/2, d]`, `d = min(max, base · 2^n)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starting at `base`, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next wait.
    pub fn next_delay(&mut self) -> Duration {
        let d = self
            .base
            .saturating_mul(1 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = d / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Start over (after a session that worked).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
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
    tokio::spawn(publish_offer(
        config.zone.clone(),
        store.clone(),
        insights,
        offer_tx,
        shutdown.clone(),
    ));
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
    while !*shutdown.borrow() {
        update_status(&status, |s| s.attempts += 1);
        let started = tokio::time::Instant::now();
        let outcome = tokio::select! {
            r = session(&config, &store, reconciler.clone(), offer_rx.clone(), &status) => r,
            () = resync.notified() => Err("reconnecting to resync (an operator accepted the Global's store)".to_owned()),
            _ = shutdown.wait_for(|s| *s) => break,
        };
        update_status(&status, |s| s.connected = false);
        let error = match outcome {
            Ok(()) => "the Global closed the stream".to_owned(),
            Err(e) => e,
        };
        tracing::warn!(zone = %config.zone, global = %config.address, %error, "KDS: disconnected from the Global");
        update_status(&status, |s| s.last_error = Some(error));
        // A session that lasted is not a failure streak.
        if started.elapsed() > Duration::from_secs(30) {
            backoff.reset();
        }
        let delay = backoff.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
}

async fn connect(config: &KdsClientConfig) -> Result<Channel, String> {
    let mut endpoint = Endpoint::from_shared(config.address.clone())
        .map_err(|e| format!("bad Global address {:?}: {e}", config.address))?
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true)
        .initial_stream_window_size(Some(umbra_kds::STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(umbra_kds::CONNECTION_WINDOW_BYTES));
    if let Some(ca) = &config.ca_pem {
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
            .map_err(|e| format!("TLS configuration: {e}"))?;
    }
    endpoint
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {}: {e:?}", config.address))
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

/// One connection: both streams until either ends.
async fn session(
    config: &KdsClientConfig,
    store: &Store,
    reconciler: Option<Arc<Reconciler>>,
    offer: OfferWatch,
    status: &SharedStatus,
) -> Result<(), String> {
    let token = config.token.read()?;
    let channel = connect(config).await?;
    let auth: MetadataValue<_> = format!("Bearer {token}").parse().map_err(|_| {
        "the zone token contains characters not allowed in gRPC metadata".to_owned()
    })?;
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
            Ok(req)
        })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    // Global → zone: subscribe with what the store holds.
    let (req_tx, req_rx) = mpsc::channel::<DeltaDiscoveryRequest>(STREAM_QUEUE);
    let down = client
        .global_to_zone_sync(ReceiverStream::new(req_rx))
        .await
        .map_err(|s| format!("GlobalToZoneSync refused: {}", s.message()))?;
    let protect = check_global_store(store, status, recorded, &down)?;
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
    let responses = spawn_reader_noting(down.into_inner(), || {}, noting(&ended));
    // Zone → Global: answer the Global's requests from the offer.
    let (resp_tx, resp_rx) = mpsc::channel::<DeltaDiscoveryResponse>(STREAM_QUEUE);
    let up = client
        .zone_to_global_sync(ReceiverStream::new(resp_rx))
        .await
        .map_err(|s| format!("ZoneToGlobalSync refused: {}", s.message()))?;
    let requests = spawn_reader_noting(up.into_inner(), || {}, noting(&ended));
    // Inspect: the Global's calls come down, the answers go up (issue 6).
    let (inspect_tx, inspect_rx) = mpsc::channel::<InspectResponse>(STREAM_QUEUE);
    let calls = client
        .inspect_sync(ReceiverStream::new(inspect_rx))
        .await
        .map_err(|s| format!("InspectSync refused: {}", s.message()))?;
    let calls = spawn_reader_noting(calls.into_inner(), || {}, noting(&ended));
    tracing::info!(zone = %config.zone, global = %config.address, "KDS: connected to the Global");
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
    };
    let st = status.clone();
    let observe_down = move |e: Event| {
        umbra_kds::metrics::record("global_to_zone", &e);
        if let Event::Applied {
            type_url,
            resources,
            rejected,
            ..
        } = e
        {
            update_status(&st, |s| {
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
    let inspect = crate::remote_inspect::serve(calls, inspect_tx, store.clone(), reconciler);
    tokio::select! {
        r = down => Err(describe("GlobalToZoneSync", r)),
        r = up => Err(describe("ZoneToGlobalSync", r)),
        () = inspect => Err(describe("InspectSync", Ok(()))),
    }
}

/// Versions of the Meshes, policies, other zones' ZoneIngresses and trust bundle the store
/// holds, per type URL (what the zone sends as `initial_resource_versions`, so a reconnect
/// receives only changes). The zone's own ZoneIngresses are not the Global's to send.
fn held_versions(
    store: &Store,
    types: &[String],
    zone: &str,
) -> BTreeMap<String, ResourceVersions> {
    let mut held: BTreeMap<String, ResourceVersions> = types
        .iter()
        .filter_map(|t| Some((t, ResourceType::from_name(t)?)))
        .map(|(t, ty)| {
            let versions = store
                .list_all(ty)
                .iter()
                .filter(|s| {
                    s.resource
                        .as_zone_ingress()
                        .is_none_or(|zi| zi.is_remote(zone))
                })
                .map(|s| {
                    let r = &s.resource;
                    (
                        kds_name(&r.meta.mesh, &r.meta.name),
                        Item::from_resource(r).version,
                    )
                })
                .collect();
            (t.clone(), versions)
        })
        .collect();
    let cas = store.mesh_cas();
    held.insert(
        MESH_CA_TYPE.to_owned(),
        cas.iter()
            .map(|(name, ca)| {
                let doc = serde_json::to_value(ca).unwrap_or_default();
                (name.clone(), Item::from_doc(&doc).version)
            })
            .collect(),
    );
    if let Some(bundle) = store.trust_bundle() {
        let version = Item::from_doc(&serde_json::to_value(&bundle).unwrap_or_default()).version;
        held.insert(
            TRUST_BUNDLE_TYPE.to_owned(),
            [(TRUST_BUNDLE_NAME.to_owned(), version)]
                .into_iter()
                .collect(),
        );
    }
    held
}

/// `umbra_kds_sync_lag_seconds{type}`: from the resource's `modificationTime` (set by the
/// Global when it stored the change) to now, when it is in the zone store. Only changes made
/// while this session was up count: a resource modified before the zone connected arrives with
/// the initial sync, and its age is not a delivery lag. Skipped when the time is missing or
/// unparsable; a negative lag (clock skew) counts as 0.
fn record_sync_lag(ty: ResourceType, modified: Option<&str>, session_start: time::OffsetDateTime) {
    let Some(t) = modified.and_then(|m| {
        time::OffsetDateTime::parse(m, &time::format_description::well_known::Rfc3339).ok()
    }) else {
        return;
    };
    // A second of tolerance for the millisecond timestamps and small clock skew.
    if t < session_start - time::Duration::seconds(1) {
        return;
    }
    let lag = (time::OffsetDateTime::now_utc() - t)
        .as_seconds_f64()
        .max(0.0);
    metrics::histogram!(umbra_api::metrics::KDS_SYNC_LAG, "type" => ty.name()).record(lag);
}

/// Applies the Global's Meshes and policies to the zone store, and its trust bundle to the
/// zone's [`umbra_api::trust::Trust`].
struct StoreSink {
    /// This zone's name.
    zone: String,
    /// Where the mesh CAs go once kept.
    cas: Arc<watch::Sender<Arc<MeshCas>>>,
    trust: Arc<umbra_api::trust::Trust>,
    store: Store,
    /// When this KDS session connected (for [`record_sync_lag`]).
    session_start: time::OffsetDateTime,
    /// Refuse removals: the Global is not the store this zone synced from.
    protect: bool,
}

impl StoreSink {
    /// Take the Global's trust bundle: checked, kept in the store (durably) before it is
    /// used, so a restart verifies with it too. An unreadable bundle is NACKed and the last
    /// good one stays.
    fn take_trust(&mut self, upserts: Vec<Upsert>) -> Result<Vec<Refusal>, String> {
        let mut refused = Vec::new();
        for u in upserts {
            let bundle = serde_json::from_slice::<umbra_auth::TrustBundle>(&u.body)
                .map_err(|e| e.to_string())
                .and_then(|b| b.check().map(|()| b));
            match bundle {
                Ok(b) if u.name == TRUST_BUNDLE_NAME => {
                    self.store
                        .record_trust_bundle(&b)
                        .map_err(|e| format!("cannot keep the trust bundle: {e}"))?;
                    if self.trust.replace(b) {
                        tracing::info!("KDS: trust bundle from the Global applied (token keys and revocations)");
                    }
                }
                Ok(_) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("the trust bundle is named {TRUST_BUNDLE_NAME:?}"),
                }),
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("unusable trust bundle: {reason}"),
                }),
            }
        }
        Ok(refused)
    }

    /// Take the Global's mesh CAs: each checked (named `<mesh>/<backend>` as its body says,
    /// a certificate and key that parse), the whole set kept in the store (durably) before it
    /// is used. In protected mode (the Global's store is not the one this zone synced from)
    /// nothing changes: new roots would reissue every identity of the zone.
    fn take_cas(
        &mut self,
        upserts: Vec<Upsert>,
        removed: Vec<String>,
    ) -> Result<Vec<Refusal>, String> {
        let mut refused = Vec::new();
        if self.protect {
            for name in upserts.into_iter().map(|u| u.name).chain(removed) {
                refused.push(Refusal {
                    name,
                    reason: "kept the last mesh CAs: the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                });
            }
            return Ok(refused);
        }
        let mut cas = self.store.mesh_cas();
        for u in upserts {
            let ca = serde_json::from_slice::<MeshCa>(&u.body)
                .map_err(|e| format!("not a mesh CA: {e}"))
                .and_then(|ca| {
                    if ca_name(&ca.mesh, &ca.backend) != u.name {
                        return Err(format!(
                            "the body is the CA of {:?}",
                            ca_name(&ca.mesh, &ca.backend)
                        ));
                    }
                    let check = crate::ca::Authority::new();
                    match check
                        .set_cas(&MeshCas::from([(u.name.clone(), ca.clone())]))
                        .pop()
                    {
                        Some((_, reason)) => Err(reason),
                        None => Ok(ca),
                    }
                });
            match ca {
                Ok(ca) => {
                    cas.insert(u.name, ca);
                }
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("unusable mesh CA: {reason}"),
                }),
            }
        }
        // A CA goes with its Mesh only: a removal while the Mesh is still here (an offer that
        // leaves the CAs out, as over plaintext KDS from elsewhere) would take every
        // identity of the mesh down with it.
        for name in removed {
            let mesh = name.split_once('/').map_or(name.as_str(), |(m, _)| m);
            if self.store.get(&ResourceKey::mesh(mesh)).is_some() {
                refused.push(Refusal {
                    name,
                    reason: "kept: its Mesh is still here, and every identity of the mesh is issued from it".to_owned(),
                });
            } else {
                cas.remove(&name);
            }
        }
        self.store
            .record_mesh_cas(&cas)
            .map_err(|e| format!("cannot keep the mesh CAs: {e}"))?;
        let names: Vec<&String> = cas.keys().collect();
        tracing::info!(cas = ?names, "KDS: mesh CAs from the Global applied");
        self.cas.send_replace(Arc::new(cas));
        Ok(refused)
    }

    /// Decode and check one resource the Global sent as `name` of `ty` (a ZoneIngress must be
    /// another zone's).
    fn decode(&self, ty: ResourceType, u: &Upsert) -> Result<Resource, String> {
        let resource = Resource::from_bytes(&u.body).map_err(|e| e.to_string())?;
        if resource.ty() != ty || kds_name(&resource.meta.mesh, &resource.meta.name) != u.name {
            return Err(format!(
                "the body is {} {:?} in mesh {:?}, not {ty} {:?}",
                resource.ty(),
                resource.meta.name,
                resource.meta.mesh,
                u.name
            ));
        }
        let violations = resource.validate();
        if violations.has_violations() {
            return Err(violations.to_string());
        }
        if let Some(zi) = resource.as_zone_ingress() {
            if !zi.is_remote(&self.zone) {
                return Err(format!(
                    "ZoneIngress of zone {:?}: this zone ({:?}) owns its own ingresses and takes only other zones' from the Global",
                    zi.zone, self.zone
                ));
            }
        }
        Ok(resource)
    }
}

#[async_trait::async_trait]
impl Sink for StoreSink {
    /// Decode and validate each resource, then write what is valid (and the removals) to the
    /// store as one durable batch before the ACK goes back. A store that cannot write ends
    /// the stream (the Global resends on reconnect); a resource the store refuses is NACKed.
    async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, String> {
        if received.trace_context.is_empty() {
            return self.write(received);
        }
        // Continue the Global's trace (the `PUT` that made the change) in a `kds.apply` span,
        // and hand it to the reconciliation the write triggers.
        let span = tracing::info_span!(
            "kds.apply",
            type_url = %received.type_url,
            upserts = received.upserts.len(),
            removed = received.removed.len()
        );
        umbra_api::process::set_parent(&span, &received.trace_context);
        let out = span.in_scope(|| self.write(received));
        self.store
            .note_trace(span.in_scope(umbra_api::process::current_context));
        out
    }
}

impl StoreSink {
    /// Write one response to the store (see [`Sink::apply`] above).
    fn write(&mut self, received: Received) -> Result<Vec<Refusal>, String> {
        let type_url = received.type_url.as_str();
        let (upserts, removed) = (received.upserts, received.removed);
        if type_url == MESH_CA_TYPE {
            return self.take_cas(upserts, removed);
        }
        if type_url == TRUST_BUNDLE_TYPE {
            // A removal keeps the last bundle: tokens keep verifying while the Global is away.
            // A Global whose store is not the one this zone synced from has other keys: its
            // bundle waits, like its removals, for the operator (every DPP token would die).
            // Its revocations still apply (a union: nothing is un-revoked), so a token revoked
            // meanwhile does not keep working here.
            if self.protect {
                let mut refused = Vec::new();
                for u in upserts {
                    if let Ok(received) = serde_json::from_slice::<umbra_auth::TrustBundle>(&u.body)
                    {
                        let mut merged = self.trust.bundle().as_ref().clone();
                        merged.revoked.user.extend(received.revoked.user);
                        merged.revoked.dataplane.extend(received.revoked.dataplane);
                        self.store
                            .record_trust_bundle(&merged)
                            .map_err(|e| format!("cannot keep the trust bundle: {e}"))?;
                        self.trust.replace(merged);
                    }
                    refused.push(Refusal {
                        name: u.name,
                        reason: "kept the last trust bundle's keys (its revocations apply): the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                    });
                }
                return Ok(refused);
            }
            return self.take_trust(upserts);
        }
        let Some(ty) = ResourceType::from_name(type_url).filter(|t| *t != ResourceType::Dataplane)
        else {
            return Ok(upserts
                .into_iter()
                .map(|u| Refusal {
                    name: u.name,
                    reason: format!("this zone does not take {type_url} from the Global"),
                })
                .collect());
        };
        let mut refused = Vec::new();
        let mut names = Vec::new();
        let mut writes = Vec::new();
        let mut modified = Vec::new();
        for u in upserts {
            match self.decode(ty, &u) {
                Ok(resource) => {
                    modified.push(resource.meta.modification_time.clone());
                    writes.push(ReplicaWrite::Put(Box::new(resource)));
                    names.push(u.name);
                }
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason,
                }),
            }
        }
        for name in removed {
            if self.protect {
                refused.push(Refusal {
                    name,
                    reason: "kept: the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                });
                continue;
            }
            let (mesh, local) = split_kds_name(&name);
            let key = ResourceKey {
                ty,
                mesh,
                name: local,
            };
            let own = self.store.get(&key).is_some_and(|s| {
                s.resource
                    .as_zone_ingress()
                    .is_some_and(|zi| !zi.is_remote(&self.zone))
            });
            if own {
                refused.push(Refusal {
                    name,
                    reason: "kept: a ZoneIngress of this zone is not the Global's to remove"
                        .to_owned(),
                });
                continue;
            }
            writes.push(ReplicaWrite::Delete(key));
            names.push(name);
        }
        let outcomes = self.store.apply_synced(writes);
        for ((name, outcome), at) in names.into_iter().zip(outcomes).zip(
            modified
                .into_iter()
                .map(Some)
                .chain(std::iter::repeat(None)),
        ) {
            match outcome {
                Ok(_) => {
                    if let Some(at) = at {
                        record_sync_lag(ty, at.as_deref(), self.session_start);
                    }
                }
                Err(e @ StoreError::Unavailable(_)) => return Err(e.to_string()),
                Err(e) => refused.push(Refusal {
                    name,
                    reason: e.to_string(),
                }),
            }
        }
        if !refused.is_empty() {
            tracing::warn!(type_url, ?refused, "KDS: NACK to the Global");
        }
        Ok(refused)
    }
}

/// How long changes are gathered before the offer to the Global is rebuilt.
const OFFER_DEBOUNCE: Duration = Duration::from_millis(50);

/// Keep `tx` offering the zone's Dataplanes and ZoneIngresses (upstream form) and the
/// insights.
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
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let d0 = b.next_delay();
        assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(100));
        let d1 = b.next_delay();
        assert!(d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(200));
        for _ in 0..40 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_secs(1), "{late:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    /// A zone store and a sink writing to it (not protected).
    fn sink() -> (Store, StoreSink) {
        let store = Store::new();
        let sink = StoreSink {
            zone: "zone-2".into(),
            cas: Arc::new(watch::channel(Arc::default()).0),
            trust: umbra_api::trust::Trust::verifier(Default::default(), Default::default()),
            store: store.clone(),
            session_start: time::OffsetDateTime::now_utc(),
            protect: false,
        };
        (store, sink)
    }

    fn received(type_url: &str, upserts: Vec<Upsert>, removed: Vec<String>) -> Received {
        Received {
            type_url: type_url.into(),
            upserts,
            removed,
            trace_context: Default::default(),
        }
    }

    fn up(name: &str, body: Vec<u8>) -> Upsert {
        Upsert {
            name: name.into(),
            version: "v".into(),
            body,
        }
    }

    #[tokio::test]
    async fn the_trust_bundle_is_kept_and_in_protected_mode_only_its_revocations_apply() {
        use umbra_auth::keys::PublicKey;
        let key = |b: u8| PublicKey::new(vec![b; 32]);
        let bundle = |k: u8, revoked: &[&str]| {
            let mut b = umbra_auth::TrustBundle {
                user_keys: vec![key(k)],
                ..Default::default()
            };
            b.revoked.user = revoked.iter().map(|s| (*s).to_owned()).collect();
            serde_json::to_vec(&b).unwrap()
        };
        let (store, mut sink) = sink();
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, bundle(1, &["a"]))],
                vec![],
            ))
            .await
            .unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(sink.trust.bundle().user_keys, [key(1)]);
        assert_eq!(
            store.trust_bundle().unwrap().user_keys,
            [key(1)],
            "kept in the store"
        );
        // A bundle whose key does not match its ID is refused; the last good one stays.
        let mut forged: serde_json::Value = serde_json::from_slice(&bundle(2, &[])).unwrap();
        forged["userKeys"][0]["kid"] = "0000000000000000".into();
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, serde_json::to_vec(&forged).unwrap())],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert_eq!(sink.trust.bundle().user_keys, [key(1)]);
        // Protected: another Global's keys are not taken, its revocations are.
        sink.protect = true;
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, bundle(3, &["b"]))],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "reported, keys kept");
        let now = sink.trust.bundle();
        assert_eq!(now.user_keys, [key(1)]);
        assert!(now.revoked.user.contains("a") && now.revoked.user.contains("b"));
        assert!(store.trust_bundle().unwrap().revoked.user.contains("b"));
    }

    #[tokio::test]
    async fn the_sink_applies_valid_resources_and_refuses_the_rest() {
        let (store, mut sink) = sink();
        let mesh = br#"{"type":"Mesh","name":"m"}"#.to_vec();
        assert!(sink
            .apply(received("Mesh", vec![up("m", mesh)], vec![]))
            .await
            .unwrap()
            .is_empty());
        let good = br#"{"type":"MeshTimeout","mesh":"m","name":"t","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"1s"}}]}}"#.to_vec();
        let invalid = br#"{"type":"MeshTimeout","mesh":"m","name":"bad","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"-1s"}}]}}"#.to_vec();
        let misnamed = good.clone();
        let no_mesh =
            br#"{"type":"MeshTimeout","mesh":"x","name":"t","spec":{"targetRef":{"kind":"Mesh"}}}"#
                .to_vec();
        let refused = sink
            .apply(received(
                "MeshTimeout",
                vec![
                    up("m/t", good),
                    up("m/bad", invalid),
                    up("m/other", misnamed),
                    up("x/t", no_mesh),
                ],
                vec!["m/absent".into()],
            ))
            .await
            .unwrap();
        let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["m/bad", "m/other", "x/t"], "{refused:?}");
        assert_eq!(store.list(ResourceType::MeshTimeout, "m").len(), 1);
        let refused = sink
            .apply(received("Dataplane", vec![up("m/dp", vec![])], vec![]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert!(sink
            .apply(received("MeshTimeout", vec![], vec!["m/t".into()]))
            .await
            .unwrap()
            .is_empty());
        assert!(store.list(ResourceType::MeshTimeout, "m").is_empty());
    }

    #[tokio::test]
    async fn the_global_cannot_delete_a_mesh_while_this_zone_has_dataplanes_in_it() {
        let (store, mut sink) = sink();
        let mesh = br#"{"type":"Mesh","name":"m"}"#.to_vec();
        sink.apply(received("Mesh", vec![up("m", mesh)], vec![]))
            .await
            .unwrap();
        store
            .put(
                Resource::from_bytes(b"type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n").unwrap(),
                None,
            )
            .unwrap();
        let refused = sink
            .apply(received("Mesh", vec![], vec!["m".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].reason.contains("dataplanes attached"),
            "{refused:?}"
        );
        assert_eq!(
            store.list(ResourceType::Dataplane, "m").len(),
            1,
            "the zone's Dataplane stays"
        );
        assert_eq!(store.list(ResourceType::Mesh, "").len(), 1);
    }

    #[tokio::test]
    async fn other_zones_ingresses_come_down_and_ours_stay_ours() {
        let (store, mut sink) = sink();
        let zi = |name: &str, zone: &str| {
            up(name, format!("{{\"type\": \"ZoneIngress\", \"name\": \"{name}\", \"zone\": \"{zone}\", \"networking\": {{\"address\": \"10.0.0.1\", \"port\": 10001, \"advertisedAddress\": \"10.0.0.1\", \"advertisedPort\": 10001}}}}").into_bytes())
        };
        let refused = sink
            .apply(received(
                "ZoneIngress",
                vec![zi("zi-1-abc", "zone-1"), zi("zi-2-abc", "zone-2")],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].name, "zi-2-abc");
        assert!(
            refused[0].reason.contains("owns its own ingresses"),
            "{refused:?}"
        );
        assert_eq!(store.list_all(ResourceType::ZoneIngress).len(), 1);
        // A local ingress is never the Global's to remove.
        store
            .put(Resource::from_bytes(b"type: ZoneIngress\nname: mine\nnetworking: {address: 10.0.0.2, port: 10001}\n").unwrap(), None)
            .unwrap();
        let refused = sink
            .apply(received(
                "ZoneIngress",
                vec![],
                vec!["mine".into(), "zi-1-abc".into()],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        let left: Vec<String> = store
            .list_all(ResourceType::ZoneIngress)
            .into_iter()
            .map(|s| s.resource.meta.name)
            .collect();
        assert_eq!(left, ["mine"]);
        // Held versions name other zones' ingresses only.
        let held = held_versions(&store, &global_to_zone_types(), "zone-2");
        assert!(held["ZoneIngress"].is_empty());
    }

    #[tokio::test]
    async fn mesh_cas_are_checked_kept_and_published() {
        let (store, mut sink) = sink();
        let mut rx = sink.cas.subscribe();
        let ca =
            umbra_api::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap();
        let good = up("m/ca-1", serde_json::to_vec(&ca).unwrap());
        let misnamed = up("m/ca-2", serde_json::to_vec(&ca).unwrap());
        let mut broken = ca.clone();
        broken.backend = "ca-3".into();
        broken.key_pem = "not a key".into();
        let broken = up("m/ca-3", serde_json::to_vec(&broken).unwrap());
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![good, misnamed, broken], vec![]))
            .await
            .unwrap();
        let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["m/ca-2", "m/ca-3"]);
        assert!(
            refused.iter().all(|r| !r.reason.contains("PRIVATE")),
            "{refused:?}"
        );
        assert!(rx.has_changed().unwrap());
        assert_eq!(
            rx.borrow_and_update().keys().collect::<Vec<_>>(),
            ["m/ca-1"]
        );
        assert_eq!(store.mesh_cas()["m/ca-1"], ca, "kept in the store");
        // A CA stays while its Mesh is here; once the Mesh is gone, it goes.
        store
            .put(
                Resource::from_bytes(b"type: Mesh\nname: m\n").unwrap(),
                None,
            )
            .unwrap();
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(store.mesh_cas().len(), 1);
        store.delete(&ResourceKey::mesh("m")).unwrap();
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        assert!(store.mesh_cas().is_empty());
        // Protected mode changes nothing.
        let ca =
            umbra_api::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap();
        sink.apply(received(
            MESH_CA_TYPE,
            vec![up("m/ca-1", serde_json::to_vec(&ca).unwrap())],
            vec![],
        ))
        .await
        .unwrap();
        sink.protect = true;
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert_eq!(store.mesh_cas().len(), 1);
    }
}
