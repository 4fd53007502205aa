//! The ADS server for real Envoy sidecars: state of the world (`StreamAggregatedResources`)
//! and incremental (`DeltaAggregatedResources`).
//!
//! An Envoy whose node id is `<mesh>.<dataplane name>` (Kuma's convention) is served that
//! Dataplane's Live snapshot. Per stream and per type URL it tracks the subscribed names, the
//! last version and nonce sent, the last ACKed version and the last NACK (with Envoy's error
//! text); those feed the dataplane insight. Protocol rules (xDS protocol doc):
//! - a request whose `response_nonce` is not the last nonce sent is stale and ignored;
//! - an ACK (matching nonce, no `error_detail`) records the version; a NACK records the error
//!   and the rejected version is not sent again (Envoy keeps its last good config);
//! - changes are pushed in the order CDS, EDS, LDS, RDS, SDS so clusters warm before listeners;
//! - unchanged types are never re-sent (versions are content hashes).
//!
//! Delta xDS (xDS protocol doc, "Incremental xDS") follows the same rules per resource: the
//! zone tracks, per stream and type, the subscription (wildcard for CDS and LDS when the first
//! request names nothing, or `*`; explicit names otherwise), the resource versions Envoy holds
//! (from `initial_resource_versions`, then from ACKs) and at most one response in flight.
//! A response carries only resources whose version differs from what Envoy holds, and
//! `removed_resources` for those it holds that no longer exist (or explicitly subscribed names
//! that do not exist). A NACK records Envoy's error and the rejected resource versions, which
//! are not sent again; the other changes still go out.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use umbra_runtime::metrics::{ADS_STREAMS, XDS_ACKS, XDS_NACKS, XDS_PUSHES};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    Resource as DeltaResource,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};
use umbra_xds_protocol::type_url::{CLUSTER_TYPE, ENDPOINT_TYPE};
use umbra_xds_protocol::version::{type_version, ResourceVersions};

use crate::ads_wire::{resource, resources};
use crate::reconciler::{DpKey, Reconciler, TYPE_ORDER};
use umbra_xds_protocol::delta::{supports_wildcard, DeltaType, Limit, Reply};
use umbra_xds_protocol::sotw::{SotwReply, SotwType};

/// Responses queued per stream before the writer applies back-pressure.
pub const STREAM_QUEUE: usize = 16;

pub use crate::insight::{Insight, Insights, Nack};

/// The ADS service.
#[derive(Debug, Clone)]
pub struct Ads {
    store: crate::store::Store,
    reconciler: Arc<Reconciler>,
    insights: Arc<Insights>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    gate: crate::dp_auth::Gate,
}

impl Ads {
    /// A service serving `reconciler`'s snapshots and recording into `insights`; every stream
    /// ends when `shutdown` turns `true` (so the server can drain).
    pub fn new(
        store: crate::store::Store,
        reconciler: Arc<Reconciler>,
        insights: Arc<Insights>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            store,
            reconciler,
            insights,
            shutdown,
            gate: crate::dp_auth::Gate::open(),
        }
    }

    /// This service with DPP authentication `gate` ([`crate::dp_auth`]).
    #[must_use]
    pub fn with_gate(mut self, gate: crate::dp_auth::Gate) -> Self {
        self.gate = gate;
        self
    }

    /// The service to route ADS requests to ([`crate::ads_http`]: tonic decodes requests,
    /// each response is encoded into a buffer of its own size).
    pub fn into_server(self) -> crate::ads_http::AdsService<Self> {
        crate::ads_http::AdsService(self)
    }

    /// A stream's first request: the DPP named by the node id, authenticated by the stream's
    /// `token` ([`crate::dp_auth::Gate::check`]), registered from the node metadata if it
    /// carries a Dataplane, marked connected. Returns the DPP, what the token allows (`None`
    /// without authentication) and the stream's generation ([`Insights::open_stream`]). `peer`
    /// (the stream's remote address) tells whether the Envoy's admin is reachable from here
    /// ([`crate::insight::AdminEndpoint`]).
    fn open(
        &self,
        node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
        token: Option<&str>,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<(DpKey, Option<crate::dp_auth::ProxyIdentity>, u64), Status> {
        let key = crate::node_metadata::proxy_key(node)?;
        // `::ffff:127.0.0.1` (an IPv4 Envoy on a dual-stack listener) is loopback too.
        let local = peer.is_some_and(|p| p.ip().to_canonical().is_loopback());
        if key.is_zone_ingress() {
            let admin = crate::insight::AdminEndpoint {
                port: crate::node_metadata::admin_port(node, None),
                local,
                dns_port: None,
            };
            return self.open_ingress(node, token, key, admin);
        }
        if key.is_zone_egress() {
            let ctx = crate::egress::StreamContext {
                store: &self.store,
                gate: &self.gate,
                insights: &self.insights,
            };
            return crate::egress::open_stream(&ctx, node, token, key, local);
        }
        let carried = dataplane_from_metadata(&key, node)?;
        let stored = self
            .store
            .get(&umbra_core::resource::ResourceKey::dataplane(
                key.mesh.as_str(),
                key.name.clone(),
            ))
            .map(|s| s.resource);
        let spec = carried
            .as_ref()
            .or(stored.as_ref())
            .and_then(umbra_core::resource::Resource::as_dataplane);
        let refused = |e: &Status| {
            tracing::warn!(mesh = %key.mesh, dataplane = %key.name, code = ?e.code(), reason = %e.message(), "ADS stream refused");
        };
        let identity = self.gate.check(token, &key, spec).inspect_err(refused)?;
        // A Dataplane the stream would replace must be one the token allows too: a token bound
        // to tags may not overwrite another service's DPP by sending its own tags.
        if let (Some(_), Some(existing)) = (
            carried.as_ref(),
            stored
                .as_ref()
                .and_then(umbra_core::resource::Resource::as_dataplane),
        ) {
            self.gate
                .check(token, &key, Some(existing))
                .inspect_err(refused)?;
        }
        if identity.is_none() {
            tracing::warn!(mesh = %key.mesh, dataplane = %key.name, "ADS stream NOT authenticated (--dp-auth none)");
        }
        let admin = crate::insight::AdminEndpoint {
            port: crate::node_metadata::admin_port(node, spec),
            local,
            dns_port: crate::node_metadata::dns_port(node),
        };
        if let Some(resource) = carried {
            crate::node_metadata::register_dataplane(&self.store, &self.gate.zone, resource)?;
        }
        let stream =
            self.insights
                .open_stream(&key, admin, crate::node_metadata::proxy_version(node));
        tracing::info!(mesh = %key.mesh, dataplane = %key.name, authenticated = identity.is_some(), "Envoy connected");
        Ok((key, identity, stream))
    }

    /// [`Ads::open`] for a ZoneIngress (`key` with an empty mesh): authenticated with a
    /// zone-ingress token, registered from the node metadata when it carries the ZoneIngress
    /// (keeping the `zone` and `availableServices` the zone computed for it).
    fn open_ingress(
        &self,
        node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
        token: Option<&str>,
        key: DpKey,
        admin: crate::insight::AdminEndpoint,
    ) -> Result<(DpKey, Option<crate::dp_auth::ProxyIdentity>, u64), Status> {
        let identity = self.gate.check(token, &key, None).inspect_err(|e| {
            tracing::warn!(zone_ingress = %key.name, code = ?e.code(), reason = %e.message(), "ADS stream refused");
        })?;
        if identity.is_none() {
            tracing::warn!(zone_ingress = %key.name, "ADS stream NOT authenticated (--dp-auth none)");
        }
        crate::node_metadata::register_zone_ingress(&self.store, &self.gate.zone, &key, node)?;
        let stream =
            self.insights
                .open_stream(&key, admin, crate::node_metadata::proxy_version(node));
        tracing::info!(zone_ingress = %key.name, authenticated = identity.is_some(), "Envoy connected");
        Ok((key, identity, stream))
    }

    /// [`crate::dp_auth::still_allowed`] for the DPP as stored now.
    fn still_allowed(
        &self,
        identity: Option<&crate::dp_auth::ProxyIdentity>,
        key: &DpKey,
    ) -> Result<(), Status> {
        let Some(identity) = identity.and_then(crate::dp_auth::ProxyIdentity::dataplane) else {
            return Ok(());
        };
        let identity = Some(identity);
        let stored = self
            .store
            .get(&umbra_core::resource::ResourceKey::dataplane(
                key.mesh.as_str(),
                key.name.clone(),
            ));
        let spec = stored.as_ref().and_then(|s| s.resource.as_dataplane());
        crate::dp_auth::still_allowed(identity, key, spec)
    }

    /// Serve ADS on `listener`, with the HTTP routes of `http` (the bootstrap endpoint) on the
    /// same port, over TLS with `tls` ([`crate::dp_server::tls_incoming`]: ALPN `h2` and
    /// `http/1.1`), until `stop` turns `true`, then drain.
    ///
    /// # Errors
    /// An unusable certificate or a failure of the server.
    pub async fn listen(
        self,
        listener: tokio::net::TcpListener,
        tls: Option<&crate::dp_server::DpServerTls>,
        http: axum::Router,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        // HTTP/1.1 too: a bootstrap client that does not speak HTTP/2.
        let mut builder = tonic::transport::Server::builder().accept_http1(true);
        let routes = tonic::service::Routes::from(http).add_service(self.into_server());
        let router = builder.add_routes(routes);
        match tls {
            Some(t) => {
                let incoming = crate::dp_server::tls_incoming(listener, t, stop.clone())?;
                router
                    .serve_with_incoming_shutdown(incoming, umbra_runtime::process::stopped(stop))
                    .await?;
            }
            None => {
                router
                    .serve_with_incoming_shutdown(
                        tokio_stream::wrappers::TcpListenerStream::new(listener),
                        umbra_runtime::process::stopped(stop),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Stream `generation` of `key` ended (a newer stream of the same proxy stays connected).
    fn close(&self, key: &DpKey, generation: u64) {
        self.insights.close_stream(key, generation);
        tracing::info!(mesh = %key.mesh, dataplane = %key.name, "Envoy disconnected");
    }
}

pub use crate::node_metadata::{
    dataplane_from_metadata, register_dataplane, DATAPLANE_METADATA_KEY,
};

struct StreamCtx {
    key: DpKey,
    /// Which stream of the DPP this is: only its own events touch the insight.
    generation: u64,
    types: HashMap<String, SotwType>,
    nonce: u64,
    traces: crate::ads_trace::Traces,
}

impl StreamCtx {
    /// Apply a SotW request ([`SotwType::on_request`]) and record ACKs and NACKs. `true` when
    /// the request opens (or reopens) a subscription, or changes its resource names, and must
    /// be answered now.
    fn on_request(&mut self, req: &DiscoveryRequest, insights: &Insights) -> bool {
        let state = self.types.entry(req.type_url.clone()).or_default();
        match state.on_request(req) {
            SotwReply::Stale => false,
            SotwReply::Subscribe => true,
            SotwReply::Ack {
                version,
                resubscribed,
            } => {
                count(XDS_ACKS, &req.type_url, "sotw");
                self.traces
                    .acked(&self.key, &req.type_url, &version, "sotw");
                insights.update_stream(&self.key, self.generation, |i| {
                    i.acknowledged(&req.type_url);
                    i.acked.insert(req.type_url.clone(), version);
                    i.nacked.remove(&req.type_url);
                });
                resubscribed
            }
            SotwReply::Nack { rejected, message } => {
                tracing::warn!(mesh = %self.key.mesh, dataplane = %self.key.name, type_url = %req.type_url, error = %message, "NACK");
                count(XDS_NACKS, &req.type_url, "sotw");
                insights.update_stream(&self.key, self.generation, |i| {
                    i.rejected(&req.type_url);
                    i.nacked.insert(
                        req.type_url.clone(),
                        Nack {
                            version: rejected,
                            error: message,
                        },
                    );
                });
                false
            }
        }
    }

    /// Send `type_url` when [`SotwType::next`] says so.
    async fn maybe_send(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> bool {
        let Some(dp) = rec.get(&self.key.mesh, &self.key.name) else {
            return true;
        };
        let Some(state) = self.types.get_mut(type_url) else {
            return true;
        };
        let Some(version) = dp.versions.get(type_url).cloned() else {
            return true;
        };
        let step = state.next(&version);
        if step.nack_over {
            // The config went back to what Envoy accepted last (e.g. the offending policy was
            // deleted): Envoy is already running it.
            insights.update_stream(&self.key, self.generation, |i| {
                i.nacked.remove(type_url);
            });
        }
        if !step.send {
            return true;
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources: resources(&dp, type_url, state.names()),
            type_url: type_url.to_owned(),
            nonce: nonce.clone(),
            ..Default::default()
        };
        tracing::debug!(type_url, %version, %nonce, "xDS push");
        state.sent(version, nonce);
        if type_url == CLUSTER_TYPE {
            // The clusters it changes warm on an EDS response (SotwType::resend).
            if let Some(eds) = self.types.get_mut(ENDPOINT_TYPE) {
                eds.resend();
            }
        }
        insights.update_stream(&self.key, self.generation, |i| i.sent(type_url));
        count(XDS_PUSHES, type_url, "sotw");
        self.traces
            .pushed(rec.push_trace(), &self.key, type_url, "sotw");
        tx.send(Ok(response)).await.is_ok()
    }
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;
type DeltaStream = Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ResponseStream;
    type DeltaAggregatedResourcesStream = DeltaStream;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let token = crate::dp_auth::credential(request.metadata());
        let peer = request.remote_addr();
        Ok(Response::new(self.serve::<StreamCtx>(
            request.into_inner(),
            token,
            peer,
        )))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<DeltaStream>, Status> {
        let token = crate::dp_auth::credential(request.metadata());
        let peer = request.remote_addr();
        Ok(Response::new(self.serve::<DeltaCtx>(
            request.into_inner(),
            token,
            peer,
        )))
    }
}

/// One ADS flavour's per-stream state (SotW: [`StreamCtx`], delta: [`DeltaCtx`]), driven by
/// [`Ads::serve`].
trait Flavour: Send + Sized + 'static {
    /// `sotw` or `delta` (the `api` of its spans and metrics).
    const API: &'static str;
    type Request: prost::Message + Default + Send + 'static;
    type Response: Send + 'static;
    /// Stream state for the DPP a stream's first request named, the `generation`-th stream of
    /// that DPP ([`Insights::open_stream`]).
    fn new(key: DpKey, generation: u64) -> Self;
    fn key(&self) -> &DpKey;
    fn generation(&self) -> u64;
    fn node(req: &Self::Request) -> Option<&envoy_types::pb::envoy::config::core::v3::Node>;
    fn type_url(req: &Self::Request) -> &str;
    /// Apply a request; `true` when its type may have something to send now.
    fn on_request(&mut self, req: &Self::Request, insights: &Insights) -> bool;
    /// Send what `type_url` needs, if anything; `false` when the stream is gone.
    fn push(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<Self::Response, Status>>,
    ) -> impl std::future::Future<Output = bool> + Send;
}

impl Ads {
    /// Drive one ADS stream: its requests (the first names the DPP and is authenticated with
    /// `token`, which every later request and every trust change checks again) and the
    /// reconciler's wake-ups, until the client goes away, the token expires or is revoked, or
    /// the zone shuts down. Responses go through a queue of [`STREAM_QUEUE`].
    fn serve<F: Flavour>(
        &self,
        mut requests: Streaming<F::Request>,
        token: Option<String>,
        peer: Option<std::net::SocketAddr>,
    ) -> Pin<Box<dyn Stream<Item = Result<F::Response, Status>> + Send>> {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let ads = self.clone();
        use tracing::Instrument as _;
        let span = crate::ads_trace::stream_span(F::API, peer);
        let task = async move {
            let _gauge = StreamGauge::open();
            let mut stream: Option<F> = None;
            let mut changes = ads.reconciler.subscribe();
            let mut shutdown = ads.shutdown.clone();
            let mut trust = ads.gate.trust.subscribe();
            // The bundle the token last verified with (none yet: the first request checks).
            let mut checked = None;
            // What the stream's token allows (`None` without authentication).
            let mut identity: Option<crate::dp_auth::ProxyIdentity> = None;
            // Far in the future until a token with an expiry opens the stream.
            let expiry = tokio::time::sleep(std::time::Duration::from_secs(u32::MAX.into()));
            tokio::pin!(expiry);
            loop {
                tokio::select! {
                    req = requests.next() => {
                        let req = match req {
                            Some(Ok(r)) => r,
                            Some(Err(e)) => { tracing::debug!(error = %e, "ADS stream error"); break }
                            None => break,
                        };
                        match stream.as_ref() {
                            None => match ads.open(F::node(&req), token.as_deref(), peer) {
                                Ok((key, id, generation)) => {
                                    identity = id;
                                    if let Some(exp) = identity.as_ref().map(crate::dp_auth::ProxyIdentity::expires_at) {
                                        let left = exp
                                            .saturating_add(umbra_auth::token::LEEWAY_SECS)
                                            .saturating_sub(umbra_auth::unix_now());
                                        expiry.as_mut().reset(
                                            tokio::time::Instant::now()
                                                + std::time::Duration::from_secs(left),
                                        );
                                    }
                                    crate::ads_trace::opened(&key);
                                    ads.reconciler.admin_settled(&key, ads.insights.admin_port(&key.mesh, &key.name), &mut changes).await;
                                    stream = Some(F::new(key, generation));
                                }
                                Err(status) => { let _ = tx.send(Err(status)).await; break }
                            },
                            Some(c) => {
                                if let Err(status) = ads.gate.recheck_since(token.as_deref(), c.key(), &mut checked) {
                                    tracing::warn!(reason = %status.message(), "ADS stream ended: its token no longer verifies");
                                    let _ = tx.send(Err(status)).await;
                                    break;
                                }
                            }
                        }
                        let Some(c) = stream.as_mut() else { break };
                        if c.on_request(&req, &ads.insights)
                            && !c.push(F::type_url(&req), &ads.reconciler, &ads.insights, &tx).await
                        {
                            break;
                        }
                    }
                    () = async { let _ = shutdown.wait_for(|s| *s).await; } => break,
                    () = &mut expiry, if stream.is_some() => {
                        let key = stream.as_ref().map_or_else(|| DpKey::new("", ""), |c| c.key().clone());
                        let status = ads.gate.recheck(token.as_deref(), &key).err().unwrap_or_else(|| {
                            Status::unauthenticated(format!("dataplane {}/{}: the dataplane token expired", key.mesh, key.name))
                        });
                        tracing::warn!(reason = %status.message(), "ADS stream ended: its token expired");
                        let _ = tx.send(Err(status)).await;
                        break;
                    }
                    Ok(()) = trust.changed(), if stream.is_some() => {
                        let Some(c) = stream.as_ref() else { continue };
                        if let Err(status) = ads.gate.recheck_since(token.as_deref(), c.key(), &mut checked) {
                            tracing::warn!(reason = %status.message(), "ADS stream ended: its token was revoked");
                            let _ = tx.send(Err(status)).await;
                            break;
                        }
                    }
                    changed = changes.changed() => {
                        if changed.is_err() { break }
                        let Some(c) = stream.as_mut() else { continue };
                        // Before pushing: the token still verifies (a revocation that came with
                        // this change), and a tag-bound token still allows the DPP as stored now.
                        let still = ads.gate.recheck_since(token.as_deref(), c.key(), &mut checked).and_then(|()| {
                            ads.still_allowed(identity.as_ref(), c.key())
                        });
                        if let Err(status) = still {
                            tracing::warn!(reason = %status.message(), "ADS stream ended: its token no longer allows this DPP");
                            let _ = tx.send(Err(status)).await;
                            break;
                        }
                        let mut gone = false;
                        for t in TYPE_ORDER {
                            if !c.push(t, &ads.reconciler, &ads.insights, &tx).await { gone = true; break }
                        }
                        // The client went away: end the stream (and mark it closed below).
                        if gone { break }
                    }
                }
            }
            if let Some(c) = stream {
                ads.close(c.key(), c.generation());
            }
        };
        tokio::spawn(task.instrument(span));
        Box::pin(ReceiverStream::new(rx))
    }
}

impl Flavour for StreamCtx {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    const API: &'static str = "sotw";
    fn new(key: DpKey, generation: u64) -> Self {
        StreamCtx {
            key,
            generation,
            types: HashMap::new(),
            nonce: 0,
            traces: Default::default(),
        }
    }
    fn key(&self) -> &DpKey {
        &self.key
    }
    fn generation(&self) -> u64 {
        self.generation
    }
    fn node(req: &DiscoveryRequest) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        req.node.as_ref()
    }
    fn type_url(req: &DiscoveryRequest) -> &str {
        &req.type_url
    }
    fn on_request(&mut self, req: &DiscoveryRequest, insights: &Insights) -> bool {
        StreamCtx::on_request(self, req, insights)
    }
    async fn push(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> bool {
        // A CDS response owes EDS right behind it, on whatever path CDS went out.
        self.maybe_send(type_url, rec, insights, tx).await
            && (type_url != CLUSTER_TYPE || self.maybe_send(ENDPOINT_TYPE, rec, insights, tx).await)
    }
}

impl Flavour for DeltaCtx {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    const API: &'static str = "delta";
    fn new(key: DpKey, generation: u64) -> Self {
        DeltaCtx {
            key,
            generation,
            types: HashMap::new(),
            nonce: 0,
            traces: Default::default(),
            recorded: HashMap::new(),
            nacked: std::collections::HashSet::new(),
        }
    }
    fn key(&self) -> &DpKey {
        &self.key
    }
    fn generation(&self) -> u64 {
        self.generation
    }
    fn node(
        req: &DeltaDiscoveryRequest,
    ) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        req.node.as_ref()
    }
    fn type_url(req: &DeltaDiscoveryRequest) -> &str {
        &req.type_url
    }
    fn on_request(&mut self, req: &DeltaDiscoveryRequest, insights: &Insights) -> bool {
        DeltaCtx::on_request(self, req, insights)
    }
    async fn push(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    ) -> bool {
        DeltaCtx::push(self, type_url, rec, insights, tx).await
            && (type_url != CLUSTER_TYPE
                || DeltaCtx::push(self, ENDPOINT_TYPE, rec, insights, tx).await)
    }
}

/// A delta stream: its DPP and per-type state.
struct DeltaCtx {
    key: DpKey,
    /// Which stream of the DPP this is: only its own events touch the insight.
    generation: u64,
    types: HashMap<String, DeltaType>,
    nonce: u64,
    traces: crate::ads_trace::Traces,
    /// Per type URL, the held version last recorded as ACKed without a response.
    recorded: HashMap<String, String>,
    /// Type URLs whose last answer was a NACK: what is held then is not known to be accepted
    /// (a rejected removal leaves the resource with Envoy), so nothing is recorded until an ACK.
    nacked: std::collections::HashSet<String>,
}

impl DeltaCtx {
    /// Apply a request; `true` when the type may have something to send now.
    fn on_request(&mut self, req: &DeltaDiscoveryRequest, insights: &Insights) -> bool {
        let state = self.types.entry(req.type_url.clone()).or_default();
        match state.on_request(supports_wildcard(&req.type_url), req) {
            // A stale request can still change subscriptions; `next` sends nothing while a
            // response is in flight, so re-evaluating is always safe.
            Reply::Subscription | Reply::Stale => true,
            Reply::Ack => {
                self.nacked.remove(&req.type_url);
                count(XDS_ACKS, &req.type_url, "delta");
                let held = type_version(&state.held);
                let rejected = !state.rejected.is_empty();
                self.traces.acked(&self.key, &req.type_url, &held, "delta");
                insights.update_stream(&self.key, self.generation, |i| {
                    i.acknowledged(&req.type_url);
                    i.acked.insert(req.type_url.clone(), held);
                    if !rejected {
                        i.nacked.remove(&req.type_url);
                    }
                });
                true
            }
            Reply::Nack(message) => {
                self.nacked.insert(req.type_url.clone());
                let version = state
                    .rejected
                    .values()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",");
                tracing::warn!(mesh = %self.key.mesh, dataplane = %self.key.name, type_url = %req.type_url, error = %message, "NACK (delta)");
                count(XDS_NACKS, &req.type_url, "delta");
                insights.update_stream(&self.key, self.generation, |i| {
                    i.rejected(&req.type_url);
                    i.nacked.insert(
                        req.type_url.clone(),
                        Nack {
                            version,
                            error: message,
                        },
                    );
                });
                true
            }
        }
    }

    /// Send what `type_url` needs, if anything; `false` when the stream is gone.
    async fn push(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    ) -> bool {
        let Some(dp) = rec.get(&self.key.mesh, &self.key.name) else {
            return true;
        };
        let Some(state) = self.types.get_mut(type_url) else {
            return true;
        };
        let empty = ResourceVersions::new();
        let current = dp.resources.get(type_url).unwrap_or(&empty);
        let nonce = (self.nonce + 1).to_string();
        let had_rejections = !state.rejected.is_empty();
        let update = state.next(current, &nonce, Limit::NONE, &|_| 0);
        if had_rejections && state.rejected.is_empty() {
            // The rejected resources moved on or went back to what Envoy holds.
            insights.update_stream(&self.key, self.generation, |i| {
                i.nacked.remove(type_url);
            });
        }
        let Some(update) = update else {
            // Nothing owed and nothing in flight: Envoy holds the current resources. After a
            // reconnect that told them (`initial_resource_versions`) no response, hence no
            // ACK, follows: record what it holds as ACKed once (crate::convergence reads it).
            if state.pending.is_none()
                && state.rejected.is_empty()
                && !self.nacked.contains(type_url)
            {
                let held = type_version(&state.held);
                if self.recorded.get(type_url) != Some(&held) {
                    self.recorded.insert(type_url.to_owned(), held.clone());
                    insights.update_stream(&self.key, self.generation, |i| {
                        i.acked.insert(type_url.to_owned(), held);
                    });
                }
            }
            return true;
        };
        self.nonce += 1;
        let resources = update
            .send
            .iter()
            .filter_map(|name| {
                Some(DeltaResource {
                    name: name.clone(),
                    version: current.get(name)?.clone(),
                    resource: resource(&dp.snapshot, type_url, name),
                    ..Default::default()
                })
            })
            .collect();
        let response = DeltaDiscoveryResponse {
            system_version_info: dp.versions.get(type_url).cloned().unwrap_or_default(),
            resources,
            type_url: type_url.to_owned(),
            removed_resources: update.removed,
            nonce,
            ..Default::default()
        };
        if type_url == CLUSTER_TYPE {
            // The clusters it changes warm on an EDS response (DeltaType::resend).
            if let Some(eds) = self.types.get_mut(ENDPOINT_TYPE) {
                eds.resend(&update.send);
            }
        }
        tracing::debug!(type_url, version = %response.system_version_info, nonce = %response.nonce, "xDS push");
        insights.update_stream(&self.key, self.generation, |i| i.sent(type_url));
        count(XDS_PUSHES, type_url, "delta");
        self.traces
            .pushed(rec.push_trace(), &self.key, type_url, "delta");
        tx.send(Ok(response)).await.is_ok()
    }
}

/// Count one xDS event (`umbra_xds_{pushes,acks,nacks}_total{type_url, api}`).
fn count(name: &'static str, type_url: &str, api: &'static str) {
    metrics::counter!(name, "type_url" => type_url.to_owned(), "api" => api).increment(1);
}

/// Keeps `umbra_ads_streams` right for the life of one stream task.
struct StreamGauge;

impl StreamGauge {
    fn open() -> Self {
        metrics::gauge!(ADS_STREAMS).increment(1.0);
        StreamGauge
    }
}

impl Drop for StreamGauge {
    fn drop(&mut self) {
        metrics::gauge!(ADS_STREAMS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::{Message, Name};
    use umbra_xds::snapshot::Snapshot;

    #[test]
    fn node_ids() {
        assert_eq!(
            DpKey::from_node_id("default.frontend"),
            Some(DpKey::new("default", "frontend"))
        );
        assert_eq!(
            DpKey::from_node_id("default.web.v1"),
            Some(DpKey::new("default", "web.v1"))
        );
        assert_eq!(DpKey::from_node_id("nodot"), None);
        assert_eq!(DpKey::from_node_id(".x"), None);
    }

    /// Issue 39: streams send the encoding the snapshot keeps; serving encodes nothing.
    #[test]
    fn serving_a_snapshot_sends_its_kept_encodings() {
        use envoy_types::pb::envoy::config::cluster::v3::Cluster;
        use umbra_xds::interner::encodings_on_this_thread;
        let mut snapshot = Snapshot::default();
        for name in ["a", "b"] {
            let c = Cluster {
                name: name.into(),
                ..Default::default()
            };
            snapshot.clusters.insert(name.into(), c.into());
        }
        let dp = crate::reconciler::DpSnapshot {
            resources: snapshot.resource_versions(None),
            snapshot: Arc::new(snapshot),
            ..Default::default()
        };
        let before = encodings_on_this_thread();
        for _stream in 0..3 {
            let sent = resources(&dp, CLUSTER_TYPE, &[]);
            assert_eq!(sent.len(), 2);
            for (any, name) in sent.iter().zip(["a", "b"]) {
                assert_eq!(any.value, dp.snapshot.clusters[name].encode_to_vec());
                assert_eq!(any.type_url, Cluster::type_url());
            }
            assert_eq!(resources(&dp, CLUSTER_TYPE, &["b".to_owned()]).len(), 1);
        }
        assert_eq!(
            encodings_on_this_thread(),
            before,
            "no stream encoded anything"
        );
    }
}
