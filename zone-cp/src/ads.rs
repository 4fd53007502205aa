//! The ADS server (state of the world) for real Envoy sidecars.
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
//! Delta xDS is not served yet (the stream is refused with `UNIMPLEMENTED`, so Envoy falls back
//! to a configuration error rather than silently getting nothing).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};
use umbra_xds::snapshot::{
    Snapshot, CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE,
};

use crate::reconciler::{DpKey, Reconciler, TYPE_ORDER};

/// Responses queued per stream before the writer applies back-pressure.
pub const STREAM_QUEUE: usize = 16;

/// What the zone knows about one DPP's xDS connection (its insight).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Insight {
    /// An ADS stream is open.
    pub connected: bool,
    /// Per type URL: last ACKed version.
    pub acked: BTreeMap<String, String>,
    /// Per type URL: last NACK (version and Envoy's error text).
    pub nacked: BTreeMap<String, Nack>,
    /// Responses sent on the current or last stream.
    pub responses_sent: u64,
}

/// A rejected version and Envoy's reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Nack {
    /// The rejected version.
    pub version: String,
    /// Envoy's `error_detail.message`.
    pub error: String,
}

/// Insights of every DPP, shared by the ADS server and the API.
#[derive(Debug, Default)]
pub struct Insights {
    map: RwLock<HashMap<DpKey, Insight>>,
}

impl Insights {
    /// The insight of a DPP, if it ever connected.
    pub fn get(&self, mesh: &str, name: &str) -> Option<Insight> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(mesh.to_owned(), name.to_owned()))
            .cloned()
    }

    fn update(&self, key: &DpKey, f: impl FnOnce(&mut Insight)) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(map.entry(key.clone()).or_default());
    }
}

/// The ADS service.
#[derive(Debug, Clone)]
pub struct Ads {
    store: crate::store::Store,
    reconciler: Arc<Reconciler>,
    insights: Arc<Insights>,
    shutdown: tokio::sync::watch::Receiver<bool>,
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
        }
    }

    /// The tonic server for this service.
    pub fn into_server(self) -> AggregatedDiscoveryServiceServer<Self> {
        AggregatedDiscoveryServiceServer::new(self)
    }
}

/// Per stream and type URL.
#[derive(Debug, Default)]
struct TypeState {
    subscribed: bool,
    names: Vec<String>,
    sent_version: Option<String>,
    sent_nonce: String,
    nacked_version: Option<String>,
}

fn pack<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn resources(snap: &Snapshot, type_url: &str, names: &[String]) -> Vec<Any> {
    let want = |n: &String| names.is_empty() || names.contains(n);
    match type_url {
        CLUSTER_TYPE => snap
            .clusters
            .iter()
            .filter(|(n, _)| want(n))
            .map(|(_, m)| pack(m))
            .collect(),
        ENDPOINT_TYPE => snap
            .endpoints
            .iter()
            .filter(|(n, _)| want(n))
            .map(|(_, m)| pack(m))
            .collect(),
        LISTENER_TYPE => snap
            .listeners
            .iter()
            .filter(|(n, _)| want(n))
            .map(|(_, m)| pack(m))
            .collect(),
        ROUTE_TYPE => snap
            .routes
            .iter()
            .filter(|(n, _)| want(n))
            .map(|(_, m)| pack(m))
            .collect(),
        SECRET_TYPE => snap
            .secrets
            .iter()
            .filter(|(n, _)| want(n))
            .map(|(_, m)| pack(m))
            .collect(),
        _ => Vec::new(),
    }
}

/// Node metadata key carrying the Dataplane resource inline (as Kuma's kuma-dp sends it).
pub const DATAPLANE_METADATA_KEY: &str = "dataplane.resource";

/// Register the Dataplane an Envoy carries in its node metadata (`dataplane.resource`, YAML or
/// JSON in universal format). It must be a valid Dataplane whose mesh and name match the node
/// id. Nothing to do when the metadata is absent.
///
/// # Errors
/// An `INVALID_ARGUMENT` status listing every problem.
pub fn register_from_metadata(
    store: &crate::store::Store,
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<(), Status> {
    use envoy_types::pb::google::protobuf::value::Kind;
    let Some(text) = node
        .and_then(|n| n.metadata.as_ref())
        .and_then(|m| m.fields.get(DATAPLANE_METADATA_KEY))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
    else {
        return Ok(());
    };
    let resource = umbra_core::resource::Resource::from_bytes(text.as_bytes()).map_err(|e| {
        Status::invalid_argument(format!("node metadata {DATAPLANE_METADATA_KEY}: {e}"))
    })?;
    if resource.ty() != umbra_core::resource::ResourceType::Dataplane
        || resource.meta.mesh != key.0
        || resource.meta.name != key.1
    {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY} must be the Dataplane {}/{} named by the node id",
            key.0, key.1
        )));
    }
    let violations = resource.validate();
    if violations.has_violations() {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY}: {violations}"
        )));
    }
    store
        .put(resource, None)
        .map(|_| ())
        .map_err(|e| Status::failed_precondition(e.to_string()))
}

/// Parse Kuma's node id `<mesh>.<name>`.
pub fn parse_node_id(id: &str) -> Option<DpKey> {
    let (mesh, name) = id.split_once('.')?;
    (!mesh.is_empty() && !name.is_empty()).then(|| (mesh.to_owned(), name.to_owned()))
}

struct StreamCtx {
    key: DpKey,
    types: HashMap<String, TypeState>,
    nonce: u64,
}

impl StreamCtx {
    /// Send `type_url` if subscribed and the current version differs from what was sent (and
    /// is not the NACKed one).
    async fn maybe_send(
        &mut self,
        type_url: &str,
        rec: &Reconciler,
        insights: &Insights,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> bool {
        let Some(dp) = rec.get(&self.key.0, &self.key.1) else {
            return true;
        };
        let Some(state) = self.types.get_mut(type_url) else {
            return true;
        };
        if !state.subscribed {
            return true;
        }
        let Some(version) = dp.versions.get(type_url).cloned() else {
            return true;
        };
        if state.nacked_version.is_some() && state.sent_version.as_deref() == Some(version.as_str())
        {
            // The config went back to what Envoy accepted last (e.g. the offending policy was
            // deleted): Envoy is already running it, so the NACK is over.
            state.nacked_version = None;
            insights.update(&self.key, |i| {
                i.nacked.remove(type_url);
            });
        }
        if state.sent_version.as_deref() == Some(version.as_str())
            || state.nacked_version.as_deref() == Some(version.as_str())
        {
            return true;
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources: resources(&dp.snapshot, type_url, &state.names),
            type_url: type_url.to_owned(),
            nonce: nonce.clone(),
            ..Default::default()
        };
        state.sent_version = Some(version);
        state.sent_nonce = nonce;
        insights.update(&self.key, |i| i.responses_sent += 1);
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
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let rec = self.reconciler.clone();
        let insights = self.insights.clone();
        let store = self.store.clone();
        let mut shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut ctx: Option<StreamCtx> = None;
            let mut changes = rec.subscribe();
            loop {
                tokio::select! {
                                    req = requests.next() => {
                                        let req = match req {
                                            Some(Ok(r)) => r,
                                            Some(Err(e)) => { tracing::debug!(error = %e, "ADS stream error"); break }
                                            None => break,
                                        };
                                        if ctx.is_none() {
                                            let id = req.node.as_ref().map(|n| n.id.clone()).unwrap_or_default();
                                            let Some(key) = parse_node_id(&id) else {
                                                let _ = tx.send(Err(Status::invalid_argument(format!("node id {id:?} is not <mesh>.<dataplane name>")))).await;
                                                break;
                                            };
                if let Err(status) = register_from_metadata(&store, &key, req.node.as_ref()) {
                                                let _ = tx.send(Err(status)).await;
                                                break;
                                            }
                                                                        insights.update(&key, |i| { i.connected = true; i.responses_sent = 0; });
                                            tracing::info!(mesh = %key.0, dataplane = %key.1, "Envoy connected");
                                            ctx = Some(StreamCtx { key, types: HashMap::new(), nonce: 0 });
                                        }
                                        let Some(c) = ctx.as_mut() else { break };
                                        let state = c.types.entry(req.type_url.clone()).or_default();
                                        if !req.response_nonce.is_empty() && req.response_nonce != state.sent_nonce {
                                            continue; // stale: answers an older response
                                        }
                                        state.subscribed = true;
                                        state.names = req.resource_names.clone();
                                        if let Some(err) = &req.error_detail {
                                            let rejected = state.sent_version.clone().unwrap_or_default();
                                            state.nacked_version = Some(rejected.clone());
                                            let message = err.message.clone();
                                            tracing::warn!(mesh = %c.key.0, dataplane = %c.key.1, type_url = %req.type_url, error = %message, "NACK");
                                            insights.update(&c.key, |i| { i.nacked.insert(req.type_url.clone(), Nack { version: rejected, error: message }); });
                                            // Envoy keeps its last good config; the ACKed version stays as it was.
                                            if let Some(s) = c.types.get_mut(&req.type_url) { s.sent_version = Some(req.version_info.clone()); }
                                            continue;
                                        }
                                        if !req.response_nonce.is_empty() {
                                            let acked = req.version_info.clone();
                                            insights.update(&c.key, |i| { i.acked.insert(req.type_url.clone(), acked); i.nacked.remove(&req.type_url); });
                                            continue;
                                        }
                                        // A new subscription (or a re-request after reconnect): answer it.
                                        state.sent_version = None;
                                        if !c.maybe_send(&req.type_url, &rec, &insights, &tx).await { break }
                                    }
                                    () = async { let _ = shutdown.wait_for(|s| *s).await; } => break,
                                    changed = changes.changed() => {
                                        if changed.is_err() { break }
                                        let Some(c) = ctx.as_mut() else { continue };
                                        for t in TYPE_ORDER {
                                            if !c.maybe_send(t, &rec, &insights, &tx).await { return }
                                        }
                                    }
                                }
            }
            if let Some(c) = ctx {
                insights.update(&c.key, |i| i.connected = false);
                tracing::info!(mesh = %c.key.0, dataplane = %c.key.1, "Envoy disconnected");
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<DeltaStream>, Status> {
        Err(Status::unimplemented(
            "delta xDS is not served yet; configure Envoy with state-of-the-world ADS (GRPC)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids() {
        assert_eq!(
            parse_node_id("default.frontend"),
            Some(("default".into(), "frontend".into()))
        );
        assert_eq!(
            parse_node_id("default.web.v1"),
            Some(("default".into(), "web.v1".into()))
        );
        assert_eq!(parse_node_id("nodot"), None);
        assert_eq!(parse_node_id(".x"), None);
    }
}
