//! Reverse unary calls from the Global to its zones over KDS `InspectSync` (issue 6; DESIGN.md
//! "inspect requests ▼ / responses ▲"): the Global sends an `InspectRequest` down the zone's
//! own connection and the zone answers with one or more `InspectResponse` frames carrying the
//! same id, the last one flagged `last`.
//!
//! - A call is registered in its zone's pending table **before** its request is sent, so a fast
//!   answer always finds it;
//! - every call has a deadline ([`InspectHub::call`]); when it passes, or the caller goes away,
//!   the call is unregistered, and frames that arrive for it later (or for ids never issued)
//!   are dropped with a log line: the stream stays up;
//! - a zone reconnecting replaces its previous link; calls pending on the old link end with
//!   [`CallError::Disconnected`];
//! - every queue is bounded: requests per zone
//!   ([`umbra_kds::sync::STREAM_QUEUE`]), frames per call
//!   ([`CALL_QUEUE`]); a caller that stops reading for [`DELIVERY_TIMEOUT`] loses its call
//!   rather than stalling the zone's other calls;
//! - with several Global replicas, a zone's streams are on one replica only: a call for a zone
//!   this replica has no link to goes through its [`Forwarder`] (the inter-CP client,
//!   [`crate::inter_cp::client`]) to the replica holding the zone, and comes back as the same
//!   [`Call`], with the same deadline and the same errors. [`InspectHub::call_local`] never
//!   forwards (what the inter-CP server answers with, so calls never loop).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use umbra_kds::pb::{inspect_request::Kind, InspectRequest, InspectResponse};

/// Frames buffered per call before the zone's reader waits for the caller.
pub const CALL_QUEUE: usize = 4;
/// How long the zone's reader waits for a caller to take a frame before dropping the call.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Late frames remembered per zone, to log the first late frame of a call once, not each.
const LATE_MEMORY: usize = 64;

/// Why a call produced no (complete) answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The zone has no InspectSync stream open.
    #[error("zone {0:?} is offline (no KDS connection to the Global)")]
    Offline(String),
    /// The zone's request queue stayed full.
    #[error("zone {0:?} is not taking inspect requests (its queue is full)")]
    Busy(String),
    /// The deadline passed before the last frame.
    #[error("zone {zone:?} did not answer within {} ms", timeout.as_millis())]
    Timeout {
        /// The zone.
        zone: String,
        /// The deadline the call had.
        timeout: Duration,
    },
    /// The zone's stream ended before the last frame.
    #[error("zone {0:?} disconnected before answering")]
    Disconnected(String),
    /// The zone is connected to another Global replica (or may be: the replicas' state could
    /// not be read), which could not be asked.
    #[error(
        "zone {zone:?} is connected to another Global replica, which cannot be reached: {reason}"
    )]
    Unreachable {
        /// The zone.
        zone: String,
        /// Why (the replica named, and the transport's or the store's error).
        reason: String,
    },
}

impl CallError {
    /// The `outcome` label of `umbra_inspect_calls_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            CallError::Offline(_) => "offline",
            CallError::Busy(_) => "busy",
            CallError::Timeout { .. } => "timeout",
            CallError::Disconnected(_) => "disconnected",
            CallError::Unreachable { .. } => "unreachable",
        }
    }
}

fn count_call(outcome: &'static str) {
    metrics::counter!(umbra_runtime::metrics::INSPECT_CALLS, "outcome" => outcome).increment(1);
}

type Pending = HashMap<u64, mpsc::Sender<InspectResponse>>;

/// One zone's open InspectSync stream.
#[derive(Debug)]
pub struct ZoneLink {
    zone: String,
    conn: u64,
    tx: mpsc::Sender<InspectRequest>,
    pending: Mutex<Pending>,
    late: Mutex<VecDeque<u64>>,
}

impl ZoneLink {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hand one frame from the zone to its call; unknown or late ids are dropped with a log
    /// line (once per id).
    pub async fn deliver(&self, frame: InspectResponse) {
        let id = frame.id;
        let last = frame.last;
        let Some(call) = self.pending().get(&id).cloned() else {
            let mut late = self.late.lock().unwrap_or_else(PoisonError::into_inner);
            if late.contains(&id) {
                tracing::debug!(zone = %self.zone, id, "inspect: another late frame dropped");
            } else {
                tracing::warn!(zone = %self.zone, id, "inspect: dropped a reply for a call that is no longer pending (late or unknown)");
                if late.len() == LATE_MEMORY {
                    late.pop_front();
                }
                late.push_back(id);
            }
            return;
        };
        match tokio::time::timeout(DELIVERY_TIMEOUT, call.send(frame)).await {
            Ok(Ok(())) => {
                if last {
                    self.pending().remove(&id);
                }
            }
            Ok(Err(_)) => {
                self.pending().remove(&id);
            }
            Err(_) => {
                tracing::warn!(zone = %self.zone, id, "inspect: the caller stopped reading; dropping the call");
                self.pending().remove(&id);
            }
        }
    }
}

/// Where a call goes for a zone this replica has no link to: the replica holding the zone's
/// streams, if another live one does (the inter-CP client, [`crate::inter_cp::client`]).
#[async_trait::async_trait]
pub trait Forwarder: Send + Sync + std::fmt::Debug {
    /// Send `kind` (call `id`, ending at `deadline`, `timeout` after it began) to the replica
    /// holding `zone`, and return its answer as a [`Call`] ([`Call::forwarded`]); `Ok(None)`
    /// when no other live replica holds the zone.
    ///
    /// # Errors
    /// The holder's answer ([`CallError::Offline`], [`CallError::Busy`]), or
    /// [`CallError::Unreachable`] when it (or the replicas' state) cannot be reached, or
    /// [`CallError::Timeout`] when that takes past `deadline`.
    async fn forward(
        &self,
        zone: &str,
        id: u64,
        kind: Kind,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Option<Call>, CallError>;

    /// Whether the replicas know `zone`: one holds its streams, or it was connected to one
    /// (its lease is on record).
    async fn known(&self, zone: &str) -> bool;
}

/// The frames of a forwarded call, as the replica holding the zone streams them back.
#[async_trait::async_trait]
pub trait Frames: Send + std::fmt::Debug {
    /// The next frame; `Ok(None)` when the stream ended.
    ///
    /// # Errors
    /// The [`CallError`] the holder ended the call with.
    async fn next(&mut self) -> Result<Option<InspectResponse>, CallError>;

    /// The call ended (`outcome`: `ok` after the last frame, else [`CallError::outcome`]).
    fn ended(&mut self, outcome: &'static str);
}

/// Every zone's inspect link; share it with `Arc`.
#[derive(Debug, Default)]
pub struct InspectHub {
    /// Fleet diff answers kept for the same question asked again, each revalidated with its
    /// zones before it is served.
    pub answers: crate::inspect::answer_cache::AnswerCache,
    links: Mutex<HashMap<String, Arc<ZoneLink>>>,
    next_id: AtomicU64,
    next_conn: AtomicU64,
    forwarder: std::sync::OnceLock<Arc<dyn Forwarder>>,
}

impl InspectHub {
    /// An empty hub.
    pub fn new() -> Self {
        Self::default()
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ZoneLink>>> {
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register `zone`'s new stream, whose requests go to `tx`; it replaces an older one.
    pub fn attach(&self, zone: &str, tx: mpsc::Sender<InspectRequest>) -> Arc<ZoneLink> {
        let link = Arc::new(ZoneLink {
            zone: zone.to_owned(),
            conn: self.next_conn.fetch_add(1, Ordering::Relaxed),
            tx,
            pending: Mutex::new(HashMap::new()),
            late: Mutex::new(VecDeque::new()),
        });
        self.links().insert(zone.to_owned(), link.clone());
        link
    }

    /// Forget `link` if it is still its zone's current one. Its pending calls end with
    /// [`CallError::Disconnected`].
    pub fn detach(&self, link: &ZoneLink) {
        let mut links = self.links();
        if links.get(&link.zone).is_some_and(|l| l.conn == link.conn) {
            links.remove(&link.zone);
        }
        drop(links);
        link.pending().clear();
    }

    /// Calls for zones without a link here go through `forwarder` from now on (set once;
    /// later calls are ignored).
    pub fn forward_with(&self, forwarder: Arc<dyn Forwarder>) {
        let _ = self.forwarder.set(forwarder);
    }

    /// `true` when `zone` has an inspect stream open on this replica.
    pub fn online(&self, zone: &str) -> bool {
        self.links().contains_key(zone)
    }

    /// `true` when `zone` has an inspect stream open here, or the replicas know it
    /// ([`Forwarder::known`]: held by another replica, or connected to one before).
    pub async fn known(&self, zone: &str) -> bool {
        if self.online(zone) {
            return true;
        }
        match self.forwarder.get() {
            Some(f) => f.known(zone).await,
            None => false,
        }
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Send `kind` to `zone` with `timeout` as its deadline (also sent to the zone, which stops
    /// working on it then): over the zone's stream on this replica, else through the
    /// [`Forwarder`] to the replica holding it. Read the answer with [`Call::next`].
    ///
    /// # Errors
    /// [`CallError::Offline`] when no replica has a stream of the zone, [`CallError::Busy`]
    /// when the request cannot be queued before the deadline, [`CallError::Unreachable`] when
    /// the replica holding the zone cannot be asked.
    pub async fn call(&self, zone: &str, kind: Kind, timeout: Duration) -> Result<Call, CallError> {
        if !self.online(zone) {
            if let Some(forwarder) = self.forwarder.get() {
                let deadline = Instant::now() + timeout;
                let id = self.next_id();
                match forwarder.forward(zone, id, kind, deadline, timeout).await? {
                    Some(call) => return Ok(call),
                    None => {
                        count_call("offline");
                        return Err(CallError::Offline(zone.to_owned()));
                    }
                }
            }
        }
        self.call_local(zone, kind, timeout).await
    }

    /// [`InspectHub::call`] over this replica's own stream of `zone` only, never forwarded.
    ///
    /// # Errors
    /// [`CallError::Offline`] without a stream here, [`CallError::Busy`] when the request
    /// cannot be queued before the deadline.
    pub async fn call_local(
        &self,
        zone: &str,
        kind: Kind,
        timeout: Duration,
    ) -> Result<Call, CallError> {
        let deadline = Instant::now() + timeout;
        let Some(link) = self.links().get(zone).cloned() else {
            count_call("offline");
            return Err(CallError::Offline(zone.to_owned()));
        };
        let id = self.next_id();
        let (tx, rx) = mpsc::channel(CALL_QUEUE);
        // Registered before it is sent: the answer cannot outrun it.
        link.pending().insert(id, tx);
        let call = Call {
            zone: zone.to_owned(),
            id,
            source: Source::Local {
                rx,
                _registration: Registration {
                    link: link.clone(),
                    id,
                },
            },
            deadline,
            timeout,
            finished: false,
        };
        let request = InspectRequest {
            id,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            trace_context: umbra_runtime::process::current_context(),
            kind: Some(kind),
        };
        let err = match tokio::time::timeout_at(deadline, link.tx.send(request)).await {
            Ok(Ok(())) => return Ok(call),
            Ok(Err(_)) => CallError::Disconnected(zone.to_owned()),
            Err(_) => CallError::Busy(zone.to_owned()),
        };
        count_call(err.outcome());
        Err(err)
    }
}

/// Removes a call from its zone's pending table when the call is dropped.
#[derive(Debug)]
struct Registration {
    link: Arc<ZoneLink>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.link.pending().remove(&self.id);
    }
}

/// Where a call's frames come from.
#[derive(Debug)]
enum Source {
    /// This replica's stream of the zone.
    Local {
        rx: mpsc::Receiver<InspectResponse>,
        _registration: Registration,
    },
    /// Another replica, holding the zone ([`Forwarder`]).
    Forwarded(Box<dyn Frames>),
}

/// An issued call: its frames, until the last one or the deadline.
#[derive(Debug)]
pub struct Call {
    zone: String,
    id: u64,
    source: Source,
    deadline: Instant,
    timeout: Duration,
    finished: bool,
}

impl Call {
    /// A call to `zone` forwarded to the replica holding it ([`Forwarder::forward`]): its
    /// frames come from `frames`, until the last one or `deadline` (`timeout` after the call
    /// began).
    pub fn forwarded(
        zone: &str,
        id: u64,
        frames: Box<dyn Frames>,
        deadline: Instant,
        timeout: Duration,
    ) -> Call {
        Call {
            zone: zone.to_owned(),
            id,
            source: Source::Forwarded(frames),
            deadline,
            timeout,
            finished: false,
        }
    }

    /// The next frame; `Ok(None)` after the last one.
    ///
    /// # Errors
    /// [`CallError::Timeout`] past the deadline, [`CallError::Disconnected`] when the zone's
    /// stream ended first; for a forwarded call, the error the holder ended it with.
    pub async fn next(&mut self) -> Result<Option<InspectResponse>, CallError> {
        if self.finished {
            return Ok(None);
        }
        let got = match &mut self.source {
            Source::Local { rx, .. } => {
                tokio::time::timeout_at(self.deadline, async { Ok(rx.recv().await) }).await
            }
            Source::Forwarded(frames) => {
                tokio::time::timeout_at(self.deadline, frames.next()).await
            }
        };
        let out = match got {
            Ok(Ok(Some(frame))) => {
                self.finished = frame.last;
                if frame.last {
                    self.count("ok");
                }
                return Ok(Some(frame));
            }
            Ok(Ok(None)) => CallError::Disconnected(self.zone.clone()),
            Ok(Err(e)) => e,
            Err(_) => CallError::Timeout {
                zone: self.zone.clone(),
                timeout: self.timeout,
            },
        };
        // Ended without its last frame: counted once.
        self.finished = true;
        self.count(out.outcome());
        Err(out)
    }

    fn count(&mut self, outcome: &'static str) {
        match &mut self.source {
            Source::Local { .. } => count_call(outcome),
            Source::Forwarded(frames) => frames.ended(outcome),
        }
    }

    /// The call's id (as logged by both sides).
    pub fn id(&self) -> u64 {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_kds::pb::{inspect_response::Body, DataplaneDiffs, ShadowDiffRequest};

    fn kind() -> Kind {
        Kind::ShadowDiff(ShadowDiffRequest::default())
    }

    fn frame(id: u64, last: bool) -> InspectResponse {
        InspectResponse {
            id,
            last,
            body: Some(Body::Diffs(DataplaneDiffs::default())),
        }
    }

    #[tokio::test]
    async fn answers_reach_their_call_and_late_ones_are_dropped() {
        let hub = InspectHub::new();
        assert_eq!(
            hub.call("z", kind(), Duration::from_secs(1))
                .await
                .unwrap_err(),
            CallError::Offline("z".into())
        );
        let (tx, mut rx) = mpsc::channel(4);
        let link = hub.attach("z", tx);
        assert!(hub.online("z"));

        // A call is pending before its request leaves, and gets its frames in order.
        let mut call = hub.call("z", kind(), Duration::from_secs(5)).await.unwrap();
        let sent = rx.recv().await.unwrap();
        assert_eq!(sent.id, call.id());
        assert_eq!(sent.timeout_ms, 5000);
        link.deliver(frame(sent.id, false)).await;
        link.deliver(frame(sent.id, true)).await;
        assert!(!call.next().await.unwrap().unwrap().last);
        assert!(call.next().await.unwrap().unwrap().last);
        assert_eq!(call.next().await.unwrap(), None);
        assert!(link.pending().is_empty());

        // Past its deadline a call times out and unregisters; its late answer is dropped and
        // the link keeps working.
        let mut slow = hub
            .call("z", kind(), Duration::from_millis(20))
            .await
            .unwrap();
        let slow_id = rx.recv().await.unwrap().id;
        assert!(matches!(slow.next().await, Err(CallError::Timeout { .. })));
        drop(slow);
        assert!(link.pending().is_empty());
        link.deliver(frame(slow_id, true)).await;
        link.deliver(frame(9999, true)).await;
        let mut next = hub.call("z", kind(), Duration::from_secs(5)).await.unwrap();
        let id = rx.recv().await.unwrap().id;
        link.deliver(frame(id, true)).await;
        assert!(next.next().await.unwrap().unwrap().last);

        // A replaced link does not detach the new one; detaching ends pending calls.
        let (tx2, _rx2) = mpsc::channel(4);
        let newer = hub.attach("z", tx2);
        hub.detach(&link);
        assert!(hub.online("z"));
        let mut orphan = hub.call("z", kind(), Duration::from_secs(5)).await.unwrap();
        hub.detach(&newer);
        assert!(!hub.online("z"));
        assert_eq!(
            orphan.next().await.unwrap_err(),
            CallError::Disconnected("z".into())
        );
    }

    /// A forwarder holding every zone but `nowhere`, whose frames come from a channel.
    #[derive(Debug)]
    struct Elsewhere {
        frames: Mutex<Option<mpsc::Receiver<InspectResponse>>>,
    }

    #[derive(Debug)]
    struct Relayed(mpsc::Receiver<InspectResponse>);

    #[async_trait::async_trait]
    impl Frames for Relayed {
        async fn next(&mut self) -> Result<Option<InspectResponse>, CallError> {
            Ok(self.0.recv().await)
        }

        fn ended(&mut self, _outcome: &'static str) {}
    }

    #[async_trait::async_trait]
    impl Forwarder for Elsewhere {
        async fn forward(
            &self,
            zone: &str,
            id: u64,
            _kind: Kind,
            deadline: Instant,
            timeout: Duration,
        ) -> Result<Option<Call>, CallError> {
            if zone == "nowhere" {
                return Ok(None);
            }
            let frames = self.frames.lock().unwrap().take().expect("one call");
            Ok(Some(Call::forwarded(
                zone,
                id,
                Box::new(Relayed(frames)),
                deadline,
                timeout,
            )))
        }

        async fn known(&self, zone: &str) -> bool {
            zone != "nowhere"
        }
    }

    #[tokio::test]
    async fn calls_for_zones_held_elsewhere_are_forwarded_with_their_deadline() {
        let hub = InspectHub::new();
        let (tx, rx) = mpsc::channel(4);
        hub.forward_with(Arc::new(Elsewhere {
            frames: Mutex::new(Some(rx)),
        }));
        assert!(!hub.online("z") && hub.known("z").await && !hub.known("nowhere").await);
        // Never forwarded by the local-only call.
        assert_eq!(
            hub.call_local("z", kind(), Duration::from_secs(1))
                .await
                .unwrap_err(),
            CallError::Offline("z".into())
        );
        assert_eq!(
            hub.call("nowhere", kind(), Duration::from_secs(1))
                .await
                .unwrap_err(),
            CallError::Offline("nowhere".into())
        );
        // Frames before the deadline, then the call's own timeout.
        let mut call = hub
            .call("z", kind(), Duration::from_millis(200))
            .await
            .unwrap();
        tx.send(frame(7, false)).await.unwrap();
        assert!(!call.next().await.unwrap().unwrap().last);
        assert_eq!(
            call.next().await.unwrap_err(),
            CallError::Timeout {
                zone: "z".into(),
                timeout: Duration::from_millis(200)
            }
        );
        assert_eq!(call.next().await.unwrap(), None);
        drop(tx);
    }

    #[tokio::test]
    async fn a_full_request_queue_is_busy_not_stuck() {
        let hub = InspectHub::new();
        let (tx, _rx) = mpsc::channel(1);
        hub.attach("z", tx);
        let _first = hub
            .call("z", kind(), Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(
            hub.call("z", kind(), Duration::from_millis(50))
                .await
                .unwrap_err(),
            CallError::Busy("z".into())
        );
    }
}
