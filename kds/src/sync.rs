//! The two halves of a KDS stream, free of gRPC: the responding side ([`respond`], which owns
//! the resources and sends `DeltaDiscoveryResponse`s) and the requesting side ([`request`],
//! which subscribes, applies what arrives through a [`Sink`] and ACKs or NACKs each response).
//! Each direction of KDS runs one of each: the Global responds on GlobalToZoneSync and
//! requests on ZoneToGlobalSync; a zone does the opposite.
//!
//! Both take bounded channels: a reader task feeds incoming messages in, the transport drains
//! outgoing ones, so a slow peer applies back-pressure instead of growing a queue. Per type at
//! most one response is in flight ([`umbra_xds_protocol::delta::DeltaType`]); a response must be
//! answered within [`RespondConfig::ack_timeout`] or the stream ends (its liveness check), and
//! the peer reconnects and resumes from the versions it holds.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument as _;
use umbra_xds_protocol::delta::{DeltaType, Limit, Reply, REJECTED_RESOURCE_TYPE_URL};
use umbra_xds_protocol::version::ResourceVersions;

use crate::resource::{kds_resource_of, Item};

/// Messages buffered per direction of a stream.
pub const STREAM_QUEUE: usize = 16;

/// gRPC `INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// The resources of one type: name → item, with the versions map the delta state machine reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeItems {
    /// Name → version.
    pub versions: ResourceVersions,
    /// Name → item.
    pub items: BTreeMap<String, Item>,
}

impl TypeItems {
    /// Add or replace `name`.
    pub fn insert(&mut self, name: String, item: Item) {
        self.versions.insert(name.clone(), item.version.clone());
        self.items.insert(name, item);
    }

    /// Remove `name`.
    pub fn remove(&mut self, name: &str) {
        self.versions.remove(name);
        self.items.remove(name);
    }
}

/// Everything the responding side offers, per type URL.
pub type Offer = BTreeMap<String, Arc<TypeItems>>;

/// The offer as published to streams: `None` until the owner has loaded it, so a stream never
/// mistakes "not loaded yet" for "nothing exists" (which would remove everything the peer holds).
pub type OfferWatch = watch::Receiver<Option<Arc<Offer>>>;

/// How the responding side behaves.
#[derive(Debug, Clone)]
pub struct RespondConfig {
    /// Type URLs served, in the order responses go out when several are due.
    pub types: Vec<String>,
    /// Bound on one response (chunking).
    pub limit: Limit,
    /// How long the stream may go without an answer while responses are in flight before it
    /// is declared dead.
    pub ack_timeout: Duration,
    /// The first type is a barrier: while it has a response in flight, no other type is sent
    /// (Global → zone: a policy never arrives before its Mesh).
    pub first_type_barrier: bool,
    /// The commit-marker type ([`crate::resource::COMMIT_TYPE`]), when the peer subscribes to
    /// it: the offer is then served one generation at a time (an offer published while a
    /// generation is in flight waits until everything of it is acknowledged, later ones
    /// replacing it), and each generation ends with the marker, sent right behind the last
    /// response that completes it (no type has a further chunk to send), so the peer, reading
    /// responses in order, can apply the generation as one batch.
    pub commit_type: Option<String>,
}

impl RespondConfig {
    /// `types` with KDS's defaults: 1,000 resources or 1 MiB per response, 30 s to answer.
    pub fn new(types: Vec<String>) -> Self {
        RespondConfig {
            types,
            limit: Limit {
                resources: 1000,
                bytes: 1 << 20,
            },
            ack_timeout: Duration::from_secs(30),
            first_type_barrier: false,
            commit_type: None,
        }
    }
}

/// What happened on a stream, for status reporting (`/zones`, logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A response went out.
    Sent {
        /// Its type URL.
        type_url: String,
        /// Resources in it.
        resources: usize,
        /// Removals in it.
        removed: usize,
    },
    /// The peer accepted a response; it now holds `held` resources of the type.
    Ack {
        /// Its type URL.
        type_url: String,
        /// Resources of the type the peer holds.
        held: usize,
    },
    /// The peer rejected a response.
    Nack {
        /// Its type URL.
        type_url: String,
        /// The peer's reason.
        error: String,
    },
    /// A response arrived and was applied (requesting side).
    Applied {
        /// Its type URL.
        type_url: String,
        /// Resources applied.
        resources: usize,
        /// Removals applied.
        removed: usize,
        /// Per-resource rejections; a NACK went back when not empty.
        rejected: Vec<Refusal>,
    },
}

/// Why a stream ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The peer asked for a type this side does not serve.
    #[error("unknown type URL {0:?}")]
    UnknownType(String),
    /// A response stayed unanswered past the deadline.
    #[error("no ACK or NACK for {type_url} within {timeout:?}")]
    AckTimeout {
        /// The type URL.
        type_url: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The peer sent something that breaks the protocol.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The sink cannot apply anything now (e.g. the store is down); resume later. Holds the
    /// text of the sink's [`Sink::Error`].
    #[error("cannot apply: {0}")]
    Sink(String),
    /// The outgoing channel closed (the transport is gone).
    #[error("stream closed")]
    Closed,
}

/// Forward `incoming` into a bounded channel from its own task (the stream's reader), calling
/// `on_message` for each message (a sign of life). The task ends with the stream, on a read
/// error, or when the receiving side is dropped.
pub fn spawn_reader<T: Send + 'static>(
    incoming: tonic::Streaming<T>,
    on_message: impl Fn() + Send + 'static,
) -> mpsc::Receiver<T> {
    spawn_reader_noting(incoming, on_message, |_| {})
}

/// [`spawn_reader`], telling `on_error` the status the stream ended with when the peer ended
/// it with one (e.g. Unauthenticated when a token expired), so the reason is not lost.
pub fn spawn_reader_noting<T: Send + 'static>(
    mut incoming: tonic::Streaming<T>,
    on_message: impl Fn() + Send + 'static,
    on_error: impl FnOnce(&tonic::Status) + Send + 'static,
) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    // The reader runs in the caller's span (the zone's KDS session, the Global's stream of a
    // zone), so its log lines name the peer.
    tokio::spawn(
        async move {
            loop {
                let next = tokio::select! {
                    m = incoming.message() => m,
                    () = tx.closed() => break,
                };
                match next {
                    Ok(Some(m)) => {
                        on_message();
                        if tx.send(m).await.is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(status) => {
                        tracing::info!(%status, "KDS: stream read ended");
                        on_error(&status);
                        break;
                    }
                }
            }
        }
        .in_current_span(),
    );
    rx
}

/// The responding side of a stream: once `offer` is loaded, serves it to the peer whose
/// requests arrive on `requests`, until the peer closes its side (`Ok`) or the protocol breaks
/// (`Err`).
///
/// # Errors
/// [`SyncError::UnknownType`], [`SyncError::AckTimeout`], [`SyncError::Closed`] (also when the
/// offer's owner went away).
pub async fn respond(
    mut requests: mpsc::Receiver<DeltaDiscoveryRequest>,
    responses: mpsc::Sender<DeltaDiscoveryResponse>,
    mut offer: OfferWatch,
    config: &RespondConfig,
    observe: &(dyn Fn(Event) + Send + Sync),
) -> Result<(), SyncError> {
    let mut current = offer
        .wait_for(Option::is_some)
        .await
        .map_err(|_| SyncError::Closed)?
        .clone()
        .unwrap_or_default();
    let mut states: HashMap<String, DeltaType> = HashMap::new();
    // Liveness: with responses in flight, the peer must answer something within the timeout.
    let mut last_progress = Instant::now();
    let mut nonce = 0u64;
    let empty = Arc::new(TypeItems::default());
    // Per type, the items the peer is known to hold whole: a pass skips walking them again
    // (a walk is O(resources of the type); after an acknowledged, untruncated update nothing
    // can differ until the offer gives the type new items or the peer asks for something).
    let mut clean: HashMap<String, Arc<TypeItems>> = HashMap::new();
    let commit = config.commit_type.as_deref();
    // The offer generation being served, and one published meanwhile (served next).
    let mut generation = 1u64;
    let mut newest: Option<Arc<Offer>> = None;
    let mut settled = false;
    loop {
        let grouped = commit.is_some_and(|c| states.contains_key(c));
        if let Some(next) = newest.take() {
            if grouped && !settled {
                newest = Some(next);
            } else {
                current = next;
                generation += 1;
            }
        }
        let mut sent = false;
        // Types with nothing left to send for `current` once this pass's responses arrive.
        let mut done = 0usize;
        for (index, type_url) in config.types.iter().enumerate() {
            if Some(type_url.as_str()) == commit {
                continue;
            }
            if index > 0
                && config.first_type_barrier
                && states
                    .get(&config.types[0])
                    .is_none_or(|s| s.pending.is_some())
            {
                break;
            }
            let was_idle = states.values().all(|s| s.pending.is_none());
            let Some(state) = states.get_mut(type_url) else {
                continue;
            };
            let items = current.get(type_url).unwrap_or(&empty);
            // Nothing to look for: the peer holds these very items (an untruncated update of
            // them acknowledged, or nothing to send for them since).
            if state.pending.is_none() && clean.get(type_url).is_some_and(|c| Arc::ptr_eq(c, items))
            {
                done += 1;
                continue;
            }
            let next_nonce = (nonce + 1).to_string();
            let size = |n: &str| items.items.get(n).map_or(0, |i| i.body.len());
            let Some(update) = state.next(&items.versions, &next_nonce, config.limit, &size) else {
                if state.pending.is_none() {
                    done += 1;
                    clean.insert(type_url.clone(), items.clone());
                }
                continue;
            };
            if update.truncated {
                clean.remove(type_url);
            } else {
                done += 1;
                clean.insert(type_url.clone(), items.clone());
            }
            nonce += 1;
            let resources: Vec<_> = update
                .send
                .iter()
                .filter_map(|n| items.items.get(n).map(|i| i.to_xds(n)))
                .collect();
            observe(Event::Sent {
                type_url: type_url.clone(),
                resources: resources.len(),
                removed: update.removed.len(),
            });
            let response = DeltaDiscoveryResponse {
                type_url: type_url.clone(),
                system_version_info: String::new(),
                resources,
                removed_resources: update.removed,
                nonce: next_nonce,
                ..DeltaDiscoveryResponse::default()
            };
            if was_idle {
                // The clock starts with the first response in flight.
                last_progress = Instant::now();
            }
            responses
                .send(response)
                .await
                .map_err(|_| SyncError::Closed)?;
            sent = true;
        }
        if let (Some(commit), true) = (commit, grouped) {
            // Every other type has all of this generation on its way (the peer reads them in
            // order): end the generation with the marker, right behind them.
            let subscribed = states.keys().filter(|t| t.as_str() != commit).count();
            if done == subscribed {
                let marker = commit_marker(generation);
                let next_nonce = (nonce + 1).to_string();
                if let Some(state) = states.get_mut(commit) {
                    if let Some(update) =
                        state.next(&marker.versions, &next_nonce, config.limit, &|_| 0)
                    {
                        nonce += 1;
                        let resources: Vec<_> = update
                            .send
                            .iter()
                            .filter_map(|n| marker.items.get(n).map(|i| i.to_xds(n)))
                            .collect();
                        observe(Event::Sent {
                            type_url: commit.to_owned(),
                            resources: resources.len(),
                            removed: update.removed.len(),
                        });
                        last_progress = Instant::now();
                        responses
                            .send(DeltaDiscoveryResponse {
                                type_url: commit.to_owned(),
                                resources,
                                removed_resources: update.removed,
                                nonce: next_nonce,
                                ..DeltaDiscoveryResponse::default()
                            })
                            .await
                            .map_err(|_| SyncError::Closed)?;
                        sent = true;
                    }
                }
            }
            settled = !sent && states.values().all(|s| s.pending.is_none());
            if settled && newest.is_some() {
                // The generation is done: serve the one that waited now.
                continue;
            }
        }
        let deadline = states
            .iter()
            .find(|(_, s)| s.pending.is_some())
            .map(|(t, _)| (t.clone(), last_progress + config.ack_timeout));
        tokio::select! {
            req = requests.recv() => {
                let Some(req) = req else { return Ok(()) };
                last_progress = Instant::now();
                if !config.types.contains(&req.type_url) {
                    return Err(SyncError::UnknownType(req.type_url));
                }
                let state = states.entry(req.type_url.clone()).or_default();
                match state.on_request(true, &req) {
                    Reply::Ack => observe(Event::Ack {
                        type_url: req.type_url.clone(),
                        held: state.held.len(),
                    }),
                    Reply::Nack(error) => {
                        clean.remove(&req.type_url);
                        observe(Event::Nack {
                            type_url: req.type_url.clone(),
                            error,
                        });
                    }
                    Reply::Subscription | Reply::Stale => {
                        clean.remove(&req.type_url);
                    }
                }
            }
            changed = offer.changed() => {
                if changed.is_err() {
                    return Err(SyncError::Closed);
                }
                if let Some(o) = offer.borrow_and_update().clone() {
                    newest = Some(o);
                }
            }
            () = async {
                match &deadline {
                    Some((_, at)) => tokio::time::sleep_until(*at).await,
                    None => std::future::pending().await,
                }
            } => {
                let type_url = deadline.map(|(t, _)| t).unwrap_or_default();
                return Err(SyncError::AckTimeout { type_url, timeout: config.ack_timeout });
            }
        }
    }
}

/// The commit marker of `generation`: one item, [`crate::resource::COMMIT_NAME`].
fn commit_marker(generation: u64) -> TypeItems {
    let mut items = TypeItems::default();
    items.insert(
        crate::resource::COMMIT_NAME.to_owned(),
        Item::from_doc(&serde_json::json!({ "generation": generation })),
    );
    items
}

/// One resource of a response, for a [`Sink`] to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upsert {
    /// Its KDS name ([`crate::resource::kds_name`]).
    pub name: String,
    /// The version the responder gave it.
    pub version: String,
    /// The resource in Kuma's universal JSON form.
    pub body: Vec<u8>,
}

/// A resource a [`Sink`] refused: it is NACKed by name, everything else counts as applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its KDS name.
    pub name: String,
    /// Why, for the peer's log and the NACK's message.
    pub reason: String,
}

/// One response, as the requesting side hands it to its [`Sink`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    /// The type URL.
    pub type_url: String,
    /// Resources created or changed.
    pub upserts: Vec<Upsert>,
    /// Names removed.
    pub removed: Vec<String>,
    /// The W3C trace context of the response's first traced resource (empty when none), so
    /// the sink can continue the sender's trace.
    pub trace_context: std::collections::HashMap<String, String>,
}

/// Where the requesting side puts what arrives.
#[async_trait::async_trait]
pub trait Sink: Send {
    /// Why nothing can be applied now; its text becomes [`SyncError::Sink`]'s.
    type Error: std::fmt::Display + Send;

    /// Apply one response. Returns the resources refused: they are NACKed by name, everything
    /// else counts as applied.
    ///
    /// # Errors
    /// When nothing can be applied now (the stream ends; the peer resumes later).
    async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, Self::Error>;

    /// A commit marker arrived ([`crate::resource::COMMIT_TYPE`]): make what
    /// [`Sink::apply`] kept aside since the last one durable, as one batch. The default, for a
    /// sink that writes in `apply`, does nothing.
    ///
    /// # Errors
    /// When the batch cannot be written now (the stream ends; the peer resumes later).
    async fn commit(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The requesting side of a stream: subscribes (wildcard) to `types`, saying it holds
/// `initial` (type URL → name → version), applies each response through `sink` and answers it
/// with an ACK, or a NACK naming every refused resource. A response of the commit-marker type
/// ([`crate::resource::COMMIT_TYPE`], when `types` holds it) makes the sink commit what it
/// kept aside ([`Sink::commit`]) before it is acknowledged. Runs until the peer closes (`Ok`).
///
/// # Errors
/// [`SyncError::Protocol`] for a response of a type not asked for, [`SyncError::Sink`],
/// [`SyncError::Closed`].
pub async fn request<S: Sink>(
    types: &[String],
    mut initial: BTreeMap<String, ResourceVersions>,
    mut responses: mpsc::Receiver<DeltaDiscoveryResponse>,
    requests: mpsc::Sender<DeltaDiscoveryRequest>,
    sink: &mut S,
    observe: &(dyn Fn(Event) + Send + Sync),
) -> Result<(), SyncError> {
    for type_url in types {
        let subscribe = DeltaDiscoveryRequest {
            type_url: type_url.clone(),
            initial_resource_versions: initial
                .remove(type_url)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            ..DeltaDiscoveryRequest::default()
        };
        requests
            .send(subscribe)
            .await
            .map_err(|_| SyncError::Closed)?;
    }
    while let Some(response) = responses.recv().await {
        if !types.contains(&response.type_url) {
            return Err(SyncError::Protocol(format!(
                "response for {:?}, which was not requested",
                response.type_url
            )));
        }
        if response.type_url == crate::resource::COMMIT_TYPE {
            sink.commit()
                .await
                .map_err(|e| SyncError::Sink(e.to_string()))?;
            observe(Event::Applied {
                type_url: response.type_url.clone(),
                resources: response.resources.len(),
                removed: 0,
                rejected: Vec::new(),
            });
            let answer = DeltaDiscoveryRequest {
                type_url: response.type_url,
                response_nonce: response.nonce,
                ..DeltaDiscoveryRequest::default()
            };
            requests.send(answer).await.map_err(|_| SyncError::Closed)?;
            continue;
        }
        let mut rejected = Vec::new();
        let mut upserts = Vec::with_capacity(response.resources.len());
        let mut trace = std::collections::HashMap::new();
        for r in &response.resources {
            match kds_resource_of(r) {
                Ok(k) => {
                    if trace.is_empty() {
                        trace = k.trace_context;
                    }
                    upserts.push(Upsert {
                        name: r.name.clone(),
                        version: r.version.clone(),
                        body: k.json,
                    });
                }
                Err(e) => rejected.push(Refusal {
                    name: r.name.clone(),
                    reason: e.to_string(),
                }),
            }
        }
        let (resources, removed) = (upserts.len(), response.removed_resources.len());
        rejected.extend(
            sink.apply(Received {
                type_url: response.type_url.clone(),
                upserts,
                removed: response.removed_resources,
                trace_context: trace,
            })
            .await
            .map_err(|e| SyncError::Sink(e.to_string()))?,
        );
        let error_detail = (!rejected.is_empty()).then(|| RpcStatus {
            code: INVALID_ARGUMENT,
            message: rejected
                .iter()
                .map(|r| format!("{}: {}", r.name, r.reason))
                .collect::<Vec<_>>()
                .join("; "),
            // Name each refused resource: the responder then counts the rest as applied.
            details: rejected
                .iter()
                .map(|r| envoy_types::pb::google::protobuf::Any {
                    type_url: REJECTED_RESOURCE_TYPE_URL.to_owned(),
                    value: r.name.clone().into_bytes(),
                })
                .collect(),
        });
        observe(Event::Applied {
            type_url: response.type_url.clone(),
            resources,
            removed,
            rejected,
        });
        let answer = DeltaDiscoveryRequest {
            type_url: response.type_url,
            response_nonce: response.nonce,
            error_detail,
            ..DeltaDiscoveryRequest::default()
        };
        requests.send(answer).await.map_err(|_| SyncError::Closed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that refuses names starting with "bad" and records what it applied.
    #[derive(Default)]
    struct Recorder {
        applied: Arc<Mutex<BTreeMap<String, String>>>,
    }

    #[async_trait::async_trait]
    impl Sink for Recorder {
        type Error = String;

        async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, String> {
            let mut map = self.applied.lock().unwrap();
            let mut refused = Vec::new();
            for u in received.upserts {
                if u.name.starts_with("bad") {
                    refused.push(Refusal {
                        name: u.name,
                        reason: "refused".into(),
                    });
                } else {
                    map.insert(u.name, u.version);
                }
            }
            for name in received.removed {
                map.remove(&name);
            }
            Ok(refused)
        }
    }

    fn offer(names: &[(&str, &str)]) -> Option<Arc<Offer>> {
        let mut items = TypeItems::default();
        for (n, body) in names {
            items.insert(
                (*n).to_owned(),
                Item::from_doc(&serde_json::json!({ "name": n, "body": body })),
            );
        }
        Some(Arc::new(BTreeMap::from([(
            "T".to_owned(),
            Arc::new(items),
        )])))
    }

    /// Both halves wired back to back in memory; returns what the requester holds once quiet.
    async fn sync(
        offer_rx: OfferWatch,
        initial: BTreeMap<String, ResourceVersions>,
        applied: Arc<Mutex<BTreeMap<String, String>>>,
        limit: Limit,
    ) -> (tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>) {
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, resp_rx) = mpsc::channel(STREAM_QUEUE);
        let mut config = RespondConfig::new(vec!["T".into()]);
        config.limit = limit;
        let responder = tokio::spawn(async move {
            let _ = respond(req_rx, resp_tx, offer_rx, &config, &|_| {}).await;
        });
        let requester = tokio::spawn(async move {
            let mut sink = Recorder { applied };
            let _ = request(&["T".into()], initial, resp_rx, req_tx, &mut sink, &|_| {}).await;
        });
        (responder, requester)
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    #[tokio::test]
    async fn chunks_resume_and_isolate_a_bad_resource() {
        let (tx, rx) = watch::channel(offer(&[("a", "1"), ("b", "1"), ("bad", "1"), ("c", "1")]));
        let applied = Arc::new(Mutex::new(BTreeMap::new()));
        let limit = Limit {
            resources: 2,
            bytes: usize::MAX,
        };
        let (r1, r2) = sync(rx, BTreeMap::new(), applied.clone(), limit).await;
        settle().await;
        let held = applied.lock().unwrap().clone();
        assert_eq!(
            held.keys().collect::<Vec<_>>(),
            ["a", "b", "c"],
            "the bad resource alone is refused, the rest arrives in chunks"
        );
        // An update flows; a removal flows.
        tx.send(offer(&[("a", "2"), ("b", "1"), ("bad", "1")]))
            .unwrap();
        settle().await;
        let now = applied.lock().unwrap().clone();
        assert_eq!(now.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_ne!(now["a"], held["a"]);
        r1.abort();
        r2.abort();

        // Reconnect holding an old "a" and a stale "x": only the difference is sent.
        let (_tx2, rx2) = watch::channel(offer(&[("a", "2"), ("b", "1")]));
        let mut initial = now.clone();
        initial.insert("x".into(), "old".into());
        initial.insert("a".into(), "old".into());
        let sent = Arc::new(Mutex::new(initial.clone()));
        let (r1, r2) = sync(
            rx2,
            BTreeMap::from([("T".to_owned(), initial)]),
            sent.clone(),
            Limit::NONE,
        )
        .await;
        settle().await;
        assert_eq!(
            *sent.lock().unwrap(),
            now,
            "x removed, a updated, b untouched"
        );
        r1.abort();
        r2.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_response_ends_the_stream() {
        let (_tx, rx) = watch::channel(offer(&[("a", "1")]));
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, mut resp_rx) = mpsc::channel(STREAM_QUEUE);
        let config = RespondConfig::new(vec!["T".into()]);
        req_tx
            .send(DeltaDiscoveryRequest {
                type_url: "T".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let task =
            tokio::spawn(async move { respond(req_rx, resp_tx, rx, &config, &|_| {}).await });
        assert_eq!(resp_rx.recv().await.unwrap().resources.len(), 1);
        let err = task.await.unwrap().unwrap_err();
        assert!(matches!(err, SyncError::AckTimeout { .. }), "{err}");
        drop(req_tx);
    }

    #[tokio::test]
    async fn unknown_types_end_the_stream() {
        let (_tx, rx) = watch::channel(offer(&[]));
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, _resp_rx) = mpsc::channel(STREAM_QUEUE);
        let config = RespondConfig::new(vec!["T".into()]);
        req_tx
            .send(DeltaDiscoveryRequest {
                type_url: "Secret".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let err = respond(req_rx, resp_tx, rx, &config, &|_| {})
            .await
            .unwrap_err();
        assert_eq!(err, SyncError::UnknownType("Secret".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_offered_before_the_offer_is_loaded_and_the_first_type_leads() {
        let (tx, rx) = watch::channel(None);
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, mut resp_rx) = mpsc::channel(STREAM_QUEUE);
        let mut config = RespondConfig::new(vec!["M".into(), "T".into()]);
        config.first_type_barrier = true;
        let task =
            tokio::spawn(async move { respond(req_rx, resp_tx, rx, &config, &|_| {}).await });
        for t in ["M", "T"] {
            let held = BTreeMap::from([("x".to_owned(), "v".to_owned())]);
            req_tx
                .send(DeltaDiscoveryRequest {
                    type_url: t.into(),
                    initial_resource_versions: held.into_iter().collect(),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        // Not loaded: no response at all (in particular no removal of what the peer holds).
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(resp_rx.try_recv().is_err());
        let item = |n: &str| Item::from_doc(&serde_json::json!({ "name": n }));
        let mut m = TypeItems::default();
        m.insert("m1".into(), item("m1"));
        let mut t = TypeItems::default();
        t.insert("m1/p".into(), item("p"));
        tx.send(Some(Arc::new(BTreeMap::from([
            ("M".to_owned(), Arc::new(m)),
            ("T".to_owned(), Arc::new(t)),
        ]))))
        .unwrap();
        let first = resp_rx.recv().await.unwrap();
        assert_eq!(first.type_url, "M");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(resp_rx.try_recv().is_err(), "T waits for M's answer");
        req_tx
            .send(DeltaDiscoveryRequest {
                type_url: "M".into(),
                response_nonce: first.nonce.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let second = resp_rx.recv().await.unwrap();
        assert_eq!(second.type_url, "T");
        assert_eq!(second.resources[0].name, "m1/p");
        task.abort();
    }

    #[tokio::test]
    async fn a_nack_naming_the_bad_resource_keeps_the_rest_applied() {
        let (_tx, rx) = watch::channel(offer(&[("a", "1"), ("bad", "1"), ("c", "1")]));
        let applied = Arc::new(Mutex::new(BTreeMap::new()));
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, resp_rx) = mpsc::channel(STREAM_QUEUE);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let s2 = sent.clone();
        let config = RespondConfig::new(vec!["T".into()]);
        let responder = tokio::spawn(async move {
            let observe = move |e: Event| {
                if let Event::Sent { resources, .. } = e {
                    s2.lock().unwrap().push(resources);
                }
            };
            let _ = respond(req_rx, resp_tx, rx, &config, &observe).await;
        });
        let a2 = applied.clone();
        let requester = tokio::spawn(async move {
            let mut sink = Recorder { applied: a2 };
            let _ = request(
                &["T".into()],
                BTreeMap::new(),
                resp_rx,
                req_tx,
                &mut sink,
                &|_| {},
            )
            .await;
        });
        settle().await;
        assert_eq!(applied.lock().unwrap().len(), 2);
        assert_eq!(
            *sent.lock().unwrap(),
            [3],
            "one response, nothing resent one by one"
        );
        responder.abort();
        requester.abort();
    }

    /// (type URL, name) → version.
    type Held = BTreeMap<(String, String), String>;

    /// A sink that keeps each response aside until the commit marker, and records every state
    /// it committed.
    #[derive(Default)]
    struct Grouped {
        staged: Vec<(String, String, Option<String>)>,
        state: Held,
        commits: Arc<Mutex<Vec<Held>>>,
    }

    #[async_trait::async_trait]
    impl Sink for Grouped {
        type Error = String;

        async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, String> {
            for u in received.upserts {
                self.staged
                    .push((received.type_url.clone(), u.name, Some(u.version)));
            }
            for name in received.removed {
                self.staged.push((received.type_url.clone(), name, None));
            }
            Ok(Vec::new())
        }

        async fn commit(&mut self) -> Result<(), String> {
            for (t, n, v) in self.staged.drain(..) {
                match v {
                    Some(v) => self.state.insert((t, n), v),
                    None => self.state.remove(&(t, n)),
                };
            }
            self.commits.lock().unwrap().push(self.state.clone());
            Ok(())
        }
    }

    fn two_types(m: &str, t: &str) -> Option<Arc<Offer>> {
        let item = |body: &str| {
            let mut items = TypeItems::default();
            items.insert(
                "x".to_owned(),
                Item::from_doc(&serde_json::json!({ "body": body })),
            );
            Arc::new(items)
        };
        Some(Arc::new(BTreeMap::from([
            ("M".to_owned(), item(m)),
            ("T".to_owned(), item(t)),
        ])))
    }

    /// Both halves back to back, the responder ending generations with the commit marker and
    /// the requester keeping responses aside until it ([`Grouped`]); returns the tasks and
    /// every state the requester committed.
    fn grouped_sync(
        offer: OfferWatch,
        mut config: RespondConfig,
    ) -> (
        tokio::task::JoinHandle<()>,
        tokio::task::JoinHandle<()>,
        Arc<Mutex<Vec<Held>>>,
    ) {
        use crate::resource::COMMIT_TYPE;
        let (req_tx, req_rx) = mpsc::channel(STREAM_QUEUE);
        let (resp_tx, resp_rx) = mpsc::channel(STREAM_QUEUE);
        config.types.push(COMMIT_TYPE.into());
        config.commit_type = Some(COMMIT_TYPE.to_owned());
        let types = config.types.clone();
        let responder = tokio::spawn(async move {
            let _ = respond(req_rx, resp_tx, offer, &config, &|_| {}).await;
        });
        let commits = Arc::new(Mutex::new(Vec::new()));
        let mut sink = Grouped {
            commits: commits.clone(),
            ..Grouped::default()
        };
        let requester = tokio::spawn(async move {
            let _ = request(&types, BTreeMap::new(), resp_rx, req_tx, &mut sink, &|_| {}).await;
        });
        (responder, requester, commits)
    }

    #[tokio::test]
    async fn a_generation_of_the_offer_arrives_as_one_commit() {
        let (tx, rx) = watch::channel(two_types("m1", "t1"));
        let mut config = RespondConfig::new(vec!["M".into(), "T".into()]);
        config.first_type_barrier = true;
        let (responder, requester, commits) = grouped_sync(rx, config);
        settle().await;
        let version = |body: &str| Item::from_doc(&serde_json::json!({ "body": body })).version;
        let state = |m: &str, t: &str| {
            BTreeMap::from([
                (("M".to_owned(), "x".to_owned()), version(m)),
                (("T".to_owned(), "x".to_owned()), version(t)),
            ])
        };
        assert_eq!(
            *commits.lock().unwrap(),
            [state("m1", "t1")],
            "the initial sync is one commit"
        );
        // Both types change in one offer: never one without the other. Offers published while a
        // generation is in flight wait and coalesce, never interleave.
        tx.send(two_types("m2", "t2")).unwrap();
        tokio::task::yield_now().await;
        tx.send(two_types("m3", "t3")).unwrap();
        settle().await;
        let seen = commits.lock().unwrap().clone();
        assert_eq!(seen.last(), Some(&state("m3", "t3")));
        for c in &seen {
            let m = &c[&("M".to_owned(), "x".to_owned())];
            let t = &c[&("T".to_owned(), "x".to_owned())];
            let pair = [("m1", "t1"), ("m2", "t2"), ("m3", "t3")]
                .iter()
                .any(|(a, b)| *m == version(a) && *t == version(b));
            assert!(pair, "a commit mixed generations: {c:?}");
        }
        responder.abort();
        requester.abort();
    }

    #[tokio::test]
    async fn a_chunked_generation_commits_only_after_its_last_chunk() {
        let mut items = TypeItems::default();
        for n in ["a", "b", "c"] {
            items.insert(n.to_owned(), Item::from_doc(&serde_json::json!({ "n": n })));
        }
        let (_tx, rx) = watch::channel(Some(Arc::new(BTreeMap::from([(
            "T".to_owned(),
            Arc::new(items),
        )]))));
        let mut config = RespondConfig::new(vec!["T".into()]);
        config.limit = Limit {
            resources: 1,
            bytes: usize::MAX,
        };
        let (responder, requester, commits) = grouped_sync(rx, config);
        settle().await;
        let seen = commits.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "one commit, after the third chunk: {seen:?}");
        assert_eq!(seen[0].len(), 3);
        responder.abort();
        requester.abort();
    }
}
