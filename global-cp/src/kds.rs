//! The Global's KDS server (issue 5; `proto/umbra/kds/v1/kds.proto`): what zones connect to.
//!
//! - GlobalToZoneSync serves the offer ([`crate::offer`]: every Mesh and policy as KDS items) to each zone ([`umbra_kds::sync::respond`]): a zone
//!   that reconnects with `initial_resource_versions` receives only the difference; large types
//!   go in bounded chunks; Meshes go first, and no policy is sent while a Mesh response is in
//!   flight, so a policy never arrives before its Mesh;
//! - ZoneToGlobalSync asks each zone for its Dataplanes, ZoneIngresses and insights
//!   ([`umbra_kds::sync::request`]) and stores them as that zone's: the zone comes from its
//!   token, a resource claiming another zone is NACKed on its own, and a zone can neither
//!   overwrite nor delete another zone's resources.
//! - Each zone's GlobalToZoneSync offer leaves out its own ZoneIngresses
//!   ([`crate::offer::for_zone`]): a zone receives every other zone's. The mesh CAs
//!   (private keys) go only over TLS or to a loopback peer; a zone on plaintext KDS from
//!   elsewhere gets none and says so (its DPPs' identities wait).
//!
//! - InspectSync carries the Global's inspect calls down and the zone's answers up
//!   ([`crate::inspect::hub`]).
//!
//! Every RPC authenticates with `authorization: Bearer <zone token>`; a missing, bad, expired
//! or revoked token is refused (`UNAUTHENTICATED`) and logged, and a token that expires or is
//! revoked ends the streams it opened. One connection holds a zone's lease: another one's
//! streams are refused (`ALREADY_EXISTS`) while it lasts. Every stream's answer carries this
//! Global's store identity (`x-umbra-global-store`).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument as _;
use umbra_kds::pb::kds_service_server::{KdsService, KdsServiceServer};
use umbra_kds::pb::{InspectRequest, InspectResponse};
use umbra_kds::resource::{
    global_to_zone_types, zone_to_global_types, DATAPLANE_INSIGHT_TYPE, MESH_CA_TYPE, ZONE_OWNED,
};
use umbra_kds::sync::{
    request, respond, spawn_reader, Event, OfferWatch, RespondConfig, STREAM_QUEUE,
};
use umbra_kds::{
    GLOBAL_STORE_METADATA, MAX_MESSAGE_BYTES, RECORDED_STORE_METADATA, ZONE_NAME_METADATA,
};

use crate::inspect::hub::InspectHub;
use crate::offer::for_zone;
use crate::replicas::insights::InsightMirror;
use crate::replicas::lease::{StreamRefused, ZoneLeases};
use crate::replicas::{Coordinator, LeaseRefused, Single};
use crate::store::Store;
use crate::tokens::{ZoneIdentity, ZoneTokens};
use crate::zone_sink::{zone_owned_versions, ZoneSink};
use crate::zones::{Direction, Refused, ZoneRegistry};

/// How often the Global pings a zone connection (HTTP/2 PING) and how long it waits for the
/// answer before it drops the connection: a zone whose host left the network is reported
/// offline, and its lease freed for its next connection, within the sum (8 s; measured on test
/// hosts in BENCHMARKS.md, "Partitions on test hosts").
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Serve `server` on `listener` (over TLS with `tls`) until `stop` turns `true`, then drain.
/// HTTP/2 keepalives ([`KEEPALIVE_INTERVAL`], [`KEEPALIVE_TIMEOUT`]) find dead zone
/// connections; per-stream and per-connection windows keep one zone's three streams from
/// starving each other.
///
/// # Errors
/// A TLS configuration the server refuses; a failure of the accept loop.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: KdsServer,
    tls: Option<tonic::transport::Identity>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        // One zone connection carries three streams: a stream whose reader falls behind (a
        // large inspect answer) must not use up the connection's flow-control window and
        // stall the sync streams' ACKs.
        .initial_stream_window_size(Some(umbra_kds::STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(umbra_kds::CONNECTION_WINDOW_BYTES));
    if let Some(identity) = tls {
        builder =
            builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    builder
        .add_service(server.into_server())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            umbra_runtime::process::stopped(stop),
        )
        .await?;
    Ok(())
}

/// The KDS gRPC service.
#[derive(Debug, Clone)]
pub struct KdsServer {
    store: Arc<dyn Store>,
    tokens: ZoneTokens,
    zones: Arc<ZoneRegistry>,
    /// Zone leases on this replica and across replicas.
    leases: Arc<ZoneLeases>,
    /// With several replicas: where zones' insights are shared.
    insights: Option<Arc<InsightMirror>>,
    inspect: Arc<InspectHub>,
    offer: OfferWatch,
    config: RespondConfig,
    shutdown: watch::Receiver<bool>,
    /// The store's identity, announced on every stream.
    identity: String,
    /// KDS is served over TLS (the mesh CAs may go to any authenticated zone).
    tls: bool,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl KdsServer {
    /// A server syncing `offer` to zones and zone Dataplanes into `store`, carrying `inspect`'s
    /// calls; every stream ends
    /// when `shutdown` turns `true`.
    pub fn new(
        store: Arc<dyn Store>,
        tokens: ZoneTokens,
        zones: Arc<ZoneRegistry>,
        inspect: Arc<InspectHub>,
        offer: OfferWatch,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let mut config = RespondConfig::new(global_to_zone_types());
        // Meshes first: a policy never reaches a zone before its Mesh.
        config.first_type_barrier = true;
        // Generations end with the commit marker: a zone applies each one as one batch.
        config.commit_type = Some(umbra_kds::resource::COMMIT_TYPE.to_owned());
        Self {
            store,
            tokens,
            leases: Arc::new(ZoneLeases::new(Single::shared(), zones.clone())),
            insights: None,
            zones,
            inspect,
            offer,
            config,
            shutdown,
            identity: String::new(),
            tls: false,
        }
    }

    /// Take zone leases through `coordinator` (several replicas; default: this process alone).
    #[must_use]
    pub fn with_coordinator(mut self, coordinator: Arc<dyn Coordinator>) -> Self {
        self.leases = Arc::new(ZoneLeases::new(coordinator, self.zones.clone()));
        self
    }

    /// Share zones' insights with the other replicas through `mirror`.
    #[must_use]
    pub fn with_insights(mut self, mirror: Option<Arc<InsightMirror>>) -> Self {
        self.insights = mirror;
        self
    }

    /// Whether KDS is served over TLS: without it, the mesh CAs go to loopback peers only.
    #[must_use]
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Announce `identity` (the store's, [`crate::store::identity`]) on every stream, so zones
    /// can tell when this Global's data is not what they synced from.
    #[must_use]
    pub fn with_identity(mut self, identity: String) -> Self {
        self.identity = identity;
        self
    }

    /// A streaming answer carrying this Global's store identity.
    fn answer<T>(&self, stream: BoxStream<T>) -> Response<BoxStream<T>> {
        let mut response = Response::new(stream);
        if let Ok(v) = self.identity.parse() {
            response.metadata_mut().insert(GLOBAL_STORE_METADATA, v);
        }
        response
    }

    /// Replace the response bound and ACK deadline (benchmarks, tests).
    #[must_use]
    pub fn with_config(mut self, config: RespondConfig) -> Self {
        self.config = config;
        self
    }

    /// The tonic service.
    pub fn into_server(self) -> KdsServiceServer<Self> {
        KdsServiceServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// The zone a request comes from, from its token (with the token's expiry), and the
    /// connection it arrives on (its peer address).
    fn authenticate<T>(&self, req: &Request<T>, rpc: &str) -> Result<Caller, Status> {
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
        let refuse = |reason: String| {
            tracing::warn!(%peer, rpc, %reason, "KDS: connection refused");
            Status::unauthenticated(reason)
        };
        let token = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                refuse("missing zone token (metadata `authorization: Bearer <token>`)".into())
            })?;
        let identity = self
            .tokens
            .identity(token.trim())
            .map_err(|e| refuse(e.to_string()))?;
        let zone = identity.zone.clone();
        if let Some(claimed) = req
            .metadata()
            .get(ZONE_NAME_METADATA)
            .and_then(|v| v.to_str().ok())
        {
            if claimed != zone {
                return Err(refuse(format!(
                    "the token is for zone {zone:?}, but this zone is configured as {claimed:?}"
                )));
            }
        }
        let recorded_store = req
            .metadata()
            .get(RECORDED_STORE_METADATA)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let version = req
            .metadata()
            .get(umbra_kds::ZONE_VERSION_METADATA)
            .and_then(|v| v.to_str().ok())
            .and_then(umbra_kds::plain_version)
            .map(str::to_owned);
        tracing::info!(%peer, rpc, %zone, version = version.as_deref().unwrap_or("unknown"), "KDS: zone connected");
        Ok(Caller {
            identity,
            connection: peer,
            recorded_store,
            version,
        })
    }
}

/// An authenticated KDS caller.
struct Caller {
    /// Its zone and its token's expiry.
    identity: ZoneIdentity,
    /// The connection it came on (peer address).
    connection: String,
    /// The Global store identity the zone says it recorded (empty: none yet).
    recorded_store: String,
    /// The zone CP's release, as it reports it ([`umbra_kds::ZONE_VERSION_METADATA`]).
    version: Option<String>,
}

/// [`spawn_reader`] noting each message as a sign of life of `zone`.
fn reader<T: Send + 'static>(
    incoming: Streaming<T>,
    zones: Arc<ZoneRegistry>,
    zone: String,
) -> mpsc::Receiver<T> {
    spawn_reader(incoming, move || zones.seen(&zone))
}

/// The outgoing stream: `rx`'s messages, then the error the driver ended with, if any.
fn outgoing<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
    err_rx: mpsc::Receiver<Status>,
) -> BoxStream<T> {
    Box::pin(
        ReceiverStream::new(rx)
            .map(Ok)
            .chain(ReceiverStream::new(err_rx).map(Err)),
    )
}

/// One open stream of a zone, counted on the registry until it is closed (or dropped).
struct OpenStream {
    leases: Arc<ZoneLeases>,
    zone: String,
    /// The token's expiry: the stream ends then.
    expiry: tokio::time::Instant,
    /// The token's ID and the tokens' revocations: the stream ends when it is revoked.
    token_id: String,
    tokens: ZoneTokens,
    /// This replica's session epoch when the stream opened.
    session: watch::Receiver<u64>,
    closed: bool,
}

impl OpenStream {
    /// Open a stream for `caller`. One connection on one replica holds a zone's lease at a
    /// time ([`ZoneLeases::open`]).
    ///
    /// # Errors
    /// AlreadyExists when another connection or replica holds the zone's lease; Unavailable
    /// during a cleanup or without a database session.
    async fn open(
        leases: &Arc<ZoneLeases>,
        tokens: &ZoneTokens,
        global_store: &str,
        caller: &Caller,
        rpc: &str,
    ) -> Result<Self, Status> {
        let zone = caller.identity.zone.clone();
        // Read before the lease is taken: a session lost after this ends the stream.
        let session = leases.coordinator().session();
        if let Err(refused) = leases.open(&zone, &caller.connection).await {
            tracing::warn!(%zone, rpc, connection = %caller.connection, reason = %refused, "KDS: stream refused");
            return Err(match refused {
                StreamRefused::Local(Refused::Leased(holder)) => Status::already_exists(format!(
                    "zone {zone:?} is already connected from {holder}; one connection per zone (retry once it is gone)"
                )),
                StreamRefused::Local(Refused::CleaningUp)
                | StreamRefused::Replicas(LeaseRefused::Cleaning(_)) => Status::unavailable(format!(
                    "zone {zone:?} was offline past --zone-cleanup-after and its resources are being removed; retry in a moment"
                )),
                StreamRefused::Replicas(e @ LeaseRefused::Held { .. }) => {
                    Status::already_exists(format!("{e}; one connection per zone (retry once it is gone)"))
                }
                StreamRefused::Replicas(e) => Status::unavailable(e.to_string()),
            });
        }
        let zones = leases.zones();
        // Only the connection holding the lease speaks for the zone.
        zones.store_view(&zone, global_store, &caller.recorded_store);
        zones.set_version(&zone, caller.version.clone());
        Ok(Self {
            leases: leases.clone(),
            zone,
            expiry: tokio::time::Instant::now() + caller.identity.remaining(),
            token_id: caller.identity.token_id.clone(),
            tokens: tokens.clone(),
            session,
            closed: false,
        })
    }

    /// Resolves once this stream's token is revoked.
    async fn revoked(&self) {
        let mut revocations = self.tokens.revocations();
        loop {
            if self.tokens.is_revoked(&self.token_id) {
                return;
            }
            if revocations.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Resolves once this replica's database session (and so the zone's lease) is lost.
    async fn session_lost(&self) {
        let mut session = self.session.clone();
        if session.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn close(mut self, error: Option<String>) {
        self.closed = true;
        self.leases.closed(&self.zone, error);
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if !self.closed {
            self.leases.closed(&self.zone, None);
        }
    }
}

/// Run `driver` for `stream` until it ends, the caller's token expires or is revoked (the
/// stream then ends with Unauthenticated: a token is checked for its whole life, not only at
/// connect), or shutdown; record and log how it ended.
fn spawn_driver(
    stream: OpenStream,
    rpc: &'static str,
    mut shutdown: watch::Receiver<bool>,
    err_tx: mpsc::Sender<Status>,
    driver: impl std::future::Future<Output = Result<(), umbra_kds::sync::SyncError>> + Send + 'static,
) {
    let span = tracing::info_span!("kds.stream", zone = %stream.zone, rpc);
    tokio::spawn(async move {
        let zone = stream.zone.clone();
        let result = tokio::select! {
            r = driver => r.map_err(|e| Status::aborted(e.to_string())),
            () = tokio::time::sleep_until(stream.expiry) => Err(Status::unauthenticated(format!(
                "the zone token of {zone:?} expired; reconnect with a valid one"
            ))),
            () = stream.revoked() => Err(Status::unauthenticated(format!(
                "the zone token of {zone:?} was revoked; reconnect with a valid one"
            ))),
            () = stream.session_lost() => Err(Status::unavailable(
                "this Global replica lost its database session and with it the zone's lease; reconnect"
            )),
            _ = shutdown.wait_for(|s| *s) => Err(Status::aborted(umbra_kds::sync::SyncError::Closed.to_string())),
        };
        match result {
            Ok(()) => {
                tracing::info!(%zone, rpc, "KDS: stream closed by the zone");
                stream.close(None);
            }
            Err(status) => {
                tracing::warn!(%zone, rpc, error = %status.message(), "KDS: stream ended");
                stream.close(Some(status.message().to_owned()));
                let _ = err_tx.send(status).await;
            }
        }
    }.instrument(span));
}

#[tonic::async_trait]
impl KdsService for KdsServer {
    type GlobalToZoneSyncStream = BoxStream<DeltaDiscoveryResponse>;
    type ZoneToGlobalSyncStream = BoxStream<DeltaDiscoveryRequest>;
    type InspectSyncStream = BoxStream<InspectRequest>;

    async fn inspect_sync(
        &self,
        req: Request<Streaming<InspectResponse>>,
    ) -> Result<Response<Self::InspectSyncStream>, Status> {
        let caller = self.authenticate(&req, "InspectSync")?;
        let stream = OpenStream::open(
            &self.leases,
            &self.tokens,
            &self.identity,
            &caller,
            "InspectSync",
        )
        .await?;
        let zone = caller.identity.zone.clone();
        let mut frames = reader(req.into_inner(), self.zones.clone(), zone.clone());
        let (out_tx, out_rx) = mpsc::channel(STREAM_QUEUE);
        let (err_tx, err_rx) = mpsc::channel(1);
        let link = Detach {
            link: self.inspect.attach(&zone, out_tx),
            hub: self.inspect.clone(),
        };
        spawn_driver(
            stream,
            "InspectSync",
            self.shutdown.clone(),
            err_tx,
            async move {
                while let Some(frame) = frames.recv().await {
                    link.link.deliver(frame).await;
                }
                Ok(())
            },
        );
        Ok(self.answer(outgoing(out_rx, err_rx)))
    }

    async fn global_to_zone_sync(
        &self,
        req: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::GlobalToZoneSyncStream>, Status> {
        let caller = self.authenticate(&req, "GlobalToZoneSync")?;
        let stream = OpenStream::open(
            &self.leases,
            &self.tokens,
            &self.identity,
            &caller,
            "GlobalToZoneSync",
        )
        .await?;
        let zone = caller.identity.zone.clone();
        let secure = self.tls || req.remote_addr().is_some_and(loopback_peer);
        let requests = reader(req.into_inner(), self.zones.clone(), zone.clone());
        let (out_tx, out_rx) = mpsc::channel(STREAM_QUEUE);
        let (err_tx, err_rx) = mpsc::channel(1);
        if !secure {
            tracing::warn!(%zone, peer = %caller.connection, "KDS is plaintext and the zone is not on loopback: the mesh CAs are not sent to it (serve KDS over TLS: --kds-tls-cert-file)");
        }
        let (offer, config, zones, z) = (
            zone_offer(self.offer.clone(), zone.clone(), secure),
            self.config.clone(),
            self.zones.clone(),
            zone.clone(),
        );
        spawn_driver(
            stream,
            "GlobalToZoneSync",
            self.shutdown.clone(),
            err_tx,
            async move {
                let observe = move |e: Event| zones.record(&z, Direction::GlobalToZone, &e);
                respond(requests, out_tx, offer, &config, &observe).await
            },
        );
        Ok(self.answer(outgoing(out_rx, err_rx)))
    }

    async fn zone_to_global_sync(
        &self,
        req: Request<Streaming<DeltaDiscoveryResponse>>,
    ) -> Result<Response<Self::ZoneToGlobalSyncStream>, Status> {
        let caller = self.authenticate(&req, "ZoneToGlobalSync")?;
        let stream = OpenStream::open(
            &self.leases,
            &self.tokens,
            &self.identity,
            &caller,
            "ZoneToGlobalSync",
        )
        .await?;
        let zone = caller.identity.zone.clone();
        let mut initial = BTreeMap::new();
        for ty in ZONE_OWNED {
            initial.insert(
                ty.name().to_owned(),
                zone_owned_versions(&*self.store, ty, &zone)
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?,
            );
        }
        initial.insert(
            DATAPLANE_INSIGHT_TYPE.to_owned(),
            self.zones.insight_versions(&zone),
        );
        let responses = reader(req.into_inner(), self.zones.clone(), zone.clone());
        let (out_tx, out_rx) = mpsc::channel(STREAM_QUEUE);
        let (err_tx, err_rx) = mpsc::channel(1);
        let mut sink = ZoneSink {
            store: self.store.clone(),
            zones: self.zones.clone(),
            zone: zone.clone(),
            mirror: self.insights.clone(),
        };
        let (zones, z) = (self.zones.clone(), zone.clone());
        spawn_driver(
            stream,
            "ZoneToGlobalSync",
            self.shutdown.clone(),
            err_tx,
            async move {
                let observe = move |e: Event| zones.record(&z, Direction::ZoneToGlobal, &e);
                request(
                    &zone_to_global_types(),
                    initial,
                    responses,
                    out_tx,
                    &mut sink,
                    &observe,
                )
                .await
            },
        );
        Ok(self.answer(outgoing(out_rx, err_rx)))
    }
}

/// Detaches an inspect link from its hub when its stream's driver ends, however it ends (which
/// also ends the outgoing stream: the link held its only sender).
struct Detach {
    link: Arc<crate::inspect::hub::ZoneLink>,
    hub: Arc<InspectHub>,
}

impl Drop for Detach {
    fn drop(&mut self) {
        self.hub.detach(&self.link);
    }
}

/// `offer` as `zone` receives it ([`for_zone`]: without its own ZoneIngresses; without the
/// mesh CAs unless `secure`), kept in step
/// by a task that ends with the stream (when the returned watch is dropped) or the offer.
fn zone_offer(mut offer: OfferWatch, zone: String, secure: bool) -> OfferWatch {
    let span = tracing::info_span!("kds.zone_offer", zone = %zone, secure);
    let filter = move |o: &Option<Arc<umbra_kds::sync::Offer>>| {
        o.as_ref().map(|o| {
            let mut o = for_zone(o, &zone);
            if !secure {
                o.insert(MESH_CA_TYPE.to_owned(), Arc::default());
            }
            Arc::new(o)
        })
    };
    let (tx, rx) = watch::channel(filter(&offer.borrow_and_update()));
    let follow = async move {
        loop {
            tokio::select! {
                r = offer.changed() => if r.is_err() { return },
                () = tx.closed() => return,
            }
            let next = filter(&offer.borrow_and_update());
            tx.send_replace(next);
        }
    };
    tokio::spawn(follow.instrument(span));
    rx
}

/// Whether a KDS peer is on this host's loopback, an IPv4-mapped `::ffff:127.0.0.1` (a zone
/// reaching a dual-stack `[::]` listener over 127.0.0.1) included.
fn loopback_peer(peer: std::net::SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_kds::resource::Item;

    #[test]
    fn loopback_peers_include_ipv4_mapped_ones() {
        for (peer, loopback) in [
            ("127.0.0.1:1", true),
            ("[::1]:1", true),
            ("[::ffff:127.0.0.1]:1", true),
            ("10.77.1.5:1", false),
            ("[::ffff:10.77.1.5]:1", false),
        ] {
            assert_eq!(loopback_peer(peer.parse().unwrap()), loopback, "{peer}");
        }
    }

    #[tokio::test]
    async fn the_mesh_cas_go_only_over_a_secure_connection() {
        let mut cas = umbra_kds::sync::TypeItems::default();
        cas.insert(
            "m/ca-1".into(),
            Item::from_doc(&serde_json::json!({"mesh": "m", "backend": "ca-1"})),
        );
        let offer = umbra_kds::sync::Offer::from([(MESH_CA_TYPE.to_owned(), Arc::new(cas))]);
        let (tx, rx) = watch::channel(Some(Arc::new(offer)));
        let count = |o: &OfferWatch| {
            o.borrow()
                .as_ref()
                .map(|o| o[MESH_CA_TYPE].items.len())
                .unwrap_or_default()
        };
        let secure = zone_offer(rx.clone(), "zone-1".into(), true);
        let plain = zone_offer(rx, "zone-1".into(), false);
        assert_eq!(count(&secure), 1);
        assert_eq!(
            count(&plain),
            0,
            "no private key over plaintext to a remote peer"
        );
        drop(tx);
    }
}
