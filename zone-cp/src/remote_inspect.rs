//! The zone's half of the inspect fan-out (issue 6): answers the Global's inspect calls, which
//! arrive on the zone's own KDS connection (`InspectSync`, reverse unary), so a zone needs no
//! inbound reachability.
//!
//! - `DataplaneInspect`: one DPP's `_config` or `_rules`, or its Envoy's `xds`, `stats` or
//!   `clusters` ([`crate::envoy_admin`]), exactly as this zone's API answers it (same body and
//!   media type, same errors), as an HTTP-like status and body cut in chunks of
//!   [`CHUNK_BYTES`];
//! - `ShadowDiffRequest`: the RFC 6902 Live → Shadow patch of each listed DPP
//!   ([`MeshShadow`]), computed in parallel on a pool of its own (the reconciler's work is not
//!   starved) and streamed back in batches of at most [`BATCH_ITEMS`] DPPs or [`CHUNK_BYTES`]
//!   as they complete. One DPP whose patch is larger than [`MAX_DIFF_BYTES`] gets an error naming
//!   it and its size instead. The last frame carries the tag of the zone state the answer was
//!   computed from; a request with `if_none_match` is a probe answered at once: does that
//!   tag still hold (the Global's cache of fleet answers revalidates with it)?
//!
//! At most [`MAX_CONCURRENT`] calls run at once (more get a 503 answer at once), and each stops
//! at its deadline (`timeout_ms`, at most [`MAX_TIMEOUT`]) or when the Global stops listening.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

use rayon::prelude::*;
use tokio::sync::{mpsc, Semaphore};
use umbra_api::shared_routes::AdminView;
use umbra_core::view::Promotion;
use umbra_kds::pb::{
    dataplane_inspect::Endpoint, inspect_request::Kind, inspect_response::Body, DataplaneDiff,
    DataplaneDiffs, DataplaneInspect, HttpAnswer, InspectError, InspectRequest, InspectResponse,
    ShadowDiffRequest,
};

use crate::inspect::{self, MeshShadow};
use crate::reconciler::Reconciler;
use crate::store::Store;

/// Inspect calls running at once; more are answered with a 503.
pub const MAX_CONCURRENT: usize = 4;
/// Largest piece of an answer in one message (bytes), well under the KDS message limit and
/// small enough that the queues between zone and Global hold little (16 messages per stream).
pub const CHUNK_BYTES: usize = 256 << 10;
/// Most DPP results in one message.
pub const BATCH_ITEMS: usize = 100;
/// Largest patch of one DPP sent (bytes of its JSON operations).
pub const MAX_DIFF_BYTES: usize = 8 << 20;
/// Longest a call may run, whatever the Global asks.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// Deadline of a call that names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Threads computing shadow diffs, apart from the reconciler's.
fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("inspect-{i}"))
            .build()
            .expect("an inspect thread pool")
    })
}

/// Answer `requests` on `out` until the Global closes the stream; with `reconciler`, its
/// current Live snapshots are reused for shadow diffs.
pub async fn serve(
    mut requests: mpsc::Receiver<InspectRequest>,
    out: mpsc::Sender<InspectResponse>,
    store: Store,
    insights: Arc<crate::insight::Insights>,
    reconciler: Option<Arc<Reconciler>>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT));
    while let Some(req) = requests.recv().await {
        let id = req.id;
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(id, "inspect: too many calls running; answering 503");
            let _ = out
                .send(error(
                    id,
                    503,
                    format!("the zone is busy with {MAX_CONCURRENT} inspect calls; retry later"),
                ))
                .await;
            continue;
        };
        let (out, store, reconciler) = (out.clone(), store.clone(), reconciler.clone());
        let insights = insights.clone();
        let span = tracing::info_span!("inspect", id);
        umbra_runtime::process::set_parent_or_root(&span, &req.trace_context);
        tokio::spawn(
            async move {
                handle(req, &out, store, &insights, reconciler).await;
                drop(permit);
            }
            .instrument(span),
        );
    }
}

fn error(id: u64, status: u32, message: String) -> InspectResponse {
    InspectResponse {
        id,
        last: true,
        body: Some(Body::Error(InspectError { status, message })),
    }
}

async fn handle(
    req: InspectRequest,
    out: &mpsc::Sender<InspectResponse>,
    store: Store,
    insights: &crate::insight::Insights,
    reconciler: Option<Arc<Reconciler>>,
) {
    let id = req.id;
    let timeout = match req.timeout_ms {
        0 => DEFAULT_TIMEOUT,
        ms => Duration::from_millis(ms).min(MAX_TIMEOUT),
    };
    let deadline = Instant::now() + timeout;
    match req.kind {
        None => {
            let _ = out
                .send(error(id, 400, "the inspect request names no call".into()))
                .await;
        }
        Some(Kind::Dataplane(d)) => {
            let zone = reconciler
                .as_deref()
                .map(Reconciler::zone_view)
                .unwrap_or_default();
            dataplane(id, d, out, store, insights, reconciler.as_deref(), zone).await;
        }
        Some(Kind::Observed(o)) => {
            let zone = reconciler
                .as_deref()
                .map(|r| r.zone().to_owned())
                .unwrap_or_default();
            let answer = match umbra_core::resource::ResourceType::from_name(&o.r#type) {
                None => Err(umbra_api::error::ApiError::bad_parameter(
                    "type",
                    format!("unknown resource type {:?}", o.r#type),
                )),
                Some(ty) => {
                    crate::observed::report(
                        &store,
                        insights,
                        reconciler.as_deref(),
                        &zone,
                        &umbra_core::resource::ResourceKey {
                            ty,
                            mesh: o.mesh,
                            name: o.name,
                        },
                        // A second to send the answer before the Global's deadline.
                        tokio::time::Instant::from_std(
                            deadline
                                .checked_sub(Duration::from_secs(1))
                                .unwrap_or(deadline),
                        ),
                    )
                    .await
                }
            };
            let (status, body) = match answer {
                Ok(r) => (200, serde_json::to_vec(&r).unwrap_or_default()),
                Err(e) => (
                    u32::from(e.status.as_u16()),
                    serde_json::to_vec(&e.body()).unwrap_or_default(),
                ),
            };
            send_http(out, id, status, "application/json", &body).await;
        }
        Some(Kind::Traffic(t)) => {
            let answer = crate::observed::traffic(
                &store,
                insights,
                reconciler.as_deref(),
                &t.mesh,
                t.dataplanes,
                &t.live,
                t.acks_only,
                tokio::time::Instant::from_std(
                    deadline
                        .checked_sub(Duration::from_secs(1))
                        .unwrap_or(deadline),
                ),
            )
            .await;
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            send_http(out, id, 200, "application/json", &body).await;
        }
        Some(Kind::ShadowDiff(d)) => {
            let out = out.clone();
            let span = tracing::Span::current();
            let done = tokio::task::spawn_blocking(move || {
                let _entered = span.enter();
                shadow_diff(id, &d, &out, &store, reconciler.as_deref(), deadline);
            })
            .await;
            if let Err(e) = done {
                tracing::error!(id, error = %e, "inspect: shadow diff task failed");
            }
        }
    }
}

/// One DPP's `_config`, `_rules` or Envoy admin view, as the zone API answers it.
async fn dataplane(
    id: u64,
    d: DataplaneInspect,
    out: &mpsc::Sender<InspectResponse>,
    store: Store,
    insights: &crate::insight::Insights,
    reconciler: Option<&Reconciler>,
    zone: crate::ingress::ZoneView,
) {
    let pairs: Vec<(String, String)> = d
        .query
        .iter()
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect();
    let admin = match d.endpoint() {
        Endpoint::Xds => Some(AdminView::Xds),
        Endpoint::Stats => Some(AdminView::Stats),
        Endpoint::Clusters => Some(AdminView::Clusters),
        Endpoint::Config | Endpoint::Rules => None,
    };
    if let Some(ty) = admin {
        let key = umbra_core::dataplane::DpKey::new(d.mesh.as_str(), d.name.as_str());
        let (status, content_type, body) =
            match crate::envoy_admin::inspect(&store, insights, reconciler, &key, ty, &pairs).await
            {
                Ok(a) => (200, a.content_type, a.body),
                Err(e) => (
                    u32::from(e.status.as_u16()),
                    "application/json",
                    serde_json::to_vec(&e.body()).unwrap_or_default(),
                ),
            };
        send_http(out, id, status, content_type, &body).await;
        return;
    }
    let f = match d.endpoint() {
        Endpoint::Rules => inspect::rules,
        _ => inspect::config,
    };
    // An empty mesh names one of this zone's ZoneIngresses, `:zoneegress` one of its
    // ZoneEgresses (they have `_config` only).
    let answer = match (d.mesh.is_empty(), d.endpoint()) {
        (true, Endpoint::Rules) => Err(umbra_api::error::ApiError::not_found(
            "a zone ingress has no _rules: no policy selects it",
        )),
        (true, _) => crate::inspect_zone_proxies::answer_ingress(store, zone, d.name, &pairs).await,
        (false, Endpoint::Rules) if d.mesh == umbra_core::dataplane::ZONE_EGRESS_KEY_MESH => {
            Err(umbra_api::error::ApiError::not_found(
                "a zone egress has no _rules: no policy selects it",
            ))
        }
        (false, _) if d.mesh == umbra_core::dataplane::ZONE_EGRESS_KEY_MESH => {
            crate::inspect_zone_proxies::answer_egress(store, zone, d.name, &pairs).await
        }
        (false, _) => inspect::answer(store, zone, d.mesh, d.name, &pairs, f).await,
    };
    let (status, body) = match answer {
        Ok(v) => (200, v),
        Err(e) => (u32::from(e.status.as_u16()), e.body()),
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    send_http(out, id, status, "application/json", &bytes).await;
}

/// Send `body` as [`http_frames`] until the Global stops listening.
async fn send_http(
    out: &mpsc::Sender<InspectResponse>,
    id: u64,
    status: u32,
    content_type: &str,
    body: &[u8],
) {
    for frame in http_frames(id, status, content_type, body) {
        if out.send(frame).await.is_err() {
            return;
        }
    }
}

/// `body` cut in [`CHUNK_BYTES`] frames, the last one flagged; the first says the media type
/// (`application/json` is left unsaid).
fn http_frames(id: u64, status: u32, content_type: &str, body: &[u8]) -> Vec<InspectResponse> {
    let total = body.len() as u64;
    let mut chunks: Vec<&[u8]> = body.chunks(CHUNK_BYTES).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| InspectResponse {
            id,
            last: i + 1 == n,
            body: Some(Body::Http(HttpAnswer {
                status,
                total_bytes: total,
                chunk: chunk.to_vec(),
                content_type: if i == 0 && content_type != "application/json" {
                    content_type.to_owned()
                } else {
                    String::new()
                },
            })),
        })
        .collect()
}

/// The tag of this zone's state at store `revision`, as `ShadowDiffRequest.if_none_match`
/// probes it: this process' random instance id and the revision, so a restarted zone (whose
/// revisions may repeat with other content) never matches an older tag. A shadow diff is a
/// function of the mesh's resources and the zone view, both read from the store at that
/// revision, so an equal tag means an equal answer.
fn state_tag(revision: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    static INSTANCE: OnceLock<u64> = OnceLock::new();
    let instance = INSTANCE.get_or_init(|| {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    });
    format!("{instance:016x}-{revision}")
}

/// The diffs of the listed DPPs, streamed in batches; blocking (runs off the async runtime).
/// A probe (`if_none_match` set) answers at once whether the tag still holds.
fn shadow_diff(
    id: u64,
    d: &ShadowDiffRequest,
    out: &mpsc::Sender<InspectResponse>,
    store: &Store,
    reconciler: Option<&Reconciler>,
    deadline: Instant,
) {
    let started = Instant::now();
    let promotion = match Promotion::parse(&d.policy) {
        Ok(p) => p,
        Err(e) => {
            let _ = out.blocking_send(error(id, 400, format!("policy: {e}")));
            return;
        }
    };
    let revision = store.revision();
    let tag = state_tag(revision);
    if !d.if_none_match.is_empty() {
        let unchanged = d.if_none_match == tag;
        let _ = out.blocking_send(InspectResponse {
            id,
            last: true,
            body: Some(Body::Diffs(DataplaneDiffs {
                items: Vec::new(),
                tag,
                unchanged,
            })),
        });
        return;
    }
    let resources =
        crate::reconciler::vips::with_persisted(store, &d.mesh, store.mesh_resources(&d.mesh));
    // The snapshots proxies are served serve as the Live side when they were generated from
    // exactly these resources; otherwise Live is generated too.
    let served = reconciler
        .filter(|_| store.revision() == revision)
        .and_then(|r| r.live_at(revision, &d.mesh));
    let reused = served.as_ref().map_or(0, std::collections::HashMap::len);
    let zone = reconciler.map(Reconciler::zone_view).unwrap_or_default();
    let asks_ingresses = d.dataplanes.iter().any(|n| {
        n.starts_with(umbra_core::dependencies::ingress::FLEET_NAME_PREFIX)
            || n.starts_with(umbra_core::dependencies::egress::FLEET_NAME_PREFIX)
    });
    let shadow = match MeshShadow::prepare(resources, &zone, &d.mesh, &promotion) {
        Ok(s) if asks_ingresses => s
            .with_live_snapshots(served.unwrap_or_default())
            .with_ingresses(store, &zone),
        Ok(s) => s.with_live_snapshots(served.unwrap_or_default()),
        Err(e) => {
            let _ = out.blocking_send(error(id, u32::from(e.status.as_u16()), e.detail));
            return;
        }
    };
    let expired = || Instant::now() > deadline || out.is_closed();
    let threads = pool().current_num_threads().max(1);
    let chunk = (d.dataplanes.len() / (threads * 4)).clamp(1, BATCH_ITEMS);
    pool().install(|| {
        d.dataplanes.par_chunks(chunk).for_each(|names| {
            let mut batch = Batch::new(id);
            for name in names {
                if expired() {
                    return;
                }
                batch.push(diff_item(&shadow, name), out);
            }
            batch.flush(out);
        });
    });
    if expired() {
        tracing::warn!(id, mesh = %d.mesh, dataplanes = d.dataplanes.len(), "inspect: shadow diff stopped at its deadline");
        return;
    }
    let _ = out.blocking_send(InspectResponse {
        id,
        last: true,
        body: Some(Body::Diffs(DataplaneDiffs {
            tag,
            ..DataplaneDiffs::default()
        })),
    });
    tracing::info!(id, mesh = %d.mesh, dataplanes = d.dataplanes.len(), reused_live_snapshots = reused, elapsed_ms = started.elapsed().as_millis() as u64, "inspect: shadow diff done");
}

/// One DPP's result: its operations as JSON, or an error naming it.
fn diff_item(shadow: &MeshShadow, name: &str) -> DataplaneDiff {
    let mut item = DataplaneDiff {
        name: name.to_owned(),
        ..DataplaneDiff::default()
    };
    match shadow.diff(name) {
        Err(e) => item.error = e.to_string(),
        Ok(patch) => {
            let ops: Vec<Vec<u8>> = patch
                .0
                .iter()
                .map(|op| serde_json::to_vec(op).unwrap_or_default())
                .collect();
            let size: usize = ops.iter().map(Vec::len).sum();
            if size > MAX_DIFF_BYTES {
                item.error = format!(
                    "the diff of dataplane {name:?} is {size} bytes, over the {MAX_DIFF_BYTES}-byte limit of one answer; inspect it on its own (_config?shadow=true&include=diff)"
                );
            } else {
                item.operations = ops;
            }
        }
    }
    item
}

/// DPP results waiting to be sent together.
struct Batch {
    id: u64,
    items: Vec<DataplaneDiff>,
    bytes: usize,
}

impl Batch {
    fn new(id: u64) -> Self {
        Self {
            id,
            items: Vec::new(),
            bytes: 0,
        }
    }

    fn push(&mut self, item: DataplaneDiff, out: &mpsc::Sender<InspectResponse>) {
        let size = item.name.len()
            + item.error.len()
            + item.operations.iter().map(Vec::len).sum::<usize>();
        if !self.items.is_empty()
            && (self.items.len() >= BATCH_ITEMS || self.bytes + size > CHUNK_BYTES)
        {
            self.flush(out);
        }
        self.bytes += size;
        self.items.push(item);
    }

    fn flush(&mut self, out: &mpsc::Sender<InspectResponse>) {
        if self.items.is_empty() {
            return;
        }
        self.bytes = 0;
        let _ = out.blocking_send(InspectResponse {
            id: self.id,
            last: false,
            body: Some(Body::Diffs(DataplaneDiffs {
                items: std::mem::take(&mut self.items),
                ..DataplaneDiffs::default()
            })),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_answers_are_chunked_and_flag_the_last_frame() {
        let body = vec![b'x'; CHUNK_BYTES * 2 + 10];
        let frames = http_frames(7, 200, "application/json", &body);
        assert_eq!(frames.len(), 3);
        assert!(frames.iter().take(2).all(|f| !f.last && f.id == 7));
        assert!(frames[2].last);
        let joined: Vec<u8> = frames
            .iter()
            .flat_map(|f| match &f.body {
                Some(Body::Http(h)) => {
                    assert_eq!(h.total_bytes, body.len() as u64);
                    h.chunk.clone()
                }
                _ => panic!("not an HTTP frame"),
            })
            .collect();
        assert_eq!(joined, body);
        let empty = http_frames(8, 404, "application/json", &[]);
        assert_eq!(empty.len(), 1);
        assert!(empty[0].last);
    }
}
