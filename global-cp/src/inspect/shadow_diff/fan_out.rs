//! Asking the zones of a [`Plan`](super::plan::Plan) for their DPPs' diffs: at most
//! [`ZONES_IN_FLIGHT`] zones at once, [`NAMES_PER_CALL`] names per call, each zone within its
//! deadline; results go out as [`FanoutEvent`]s as they arrive. [`probe`] asks the zones of a
//! kept answer whether the state it was computed from still holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tracing::Instrument as _;
use umbra_core::view::Promotion;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inspect_response::Body as Frame;
use umbra_kds::pb::{DataplaneDiff, ShadowDiffRequest};

use crate::inspect::hub::{CallError, InspectHub};

/// Zones asked at once.
pub const ZONES_IN_FLIGHT: usize = 16;
/// DPP names per call to a zone (a zone with more gets several calls, one after another).
pub const NAMES_PER_CALL: usize = 10_000;

/// What a zone's calls produced, as the aggregation sees it.
#[derive(Debug)]
pub enum FanoutEvent {
    /// A batch of DPP results from `zone`.
    Batch(String, Vec<DataplaneDiff>),
    /// `zone` is done: `Ok` when it answered for every DPP asked (with the tag of the state
    /// it answered from, when every call gave the same one), else why not.
    ZoneDone(String, Result<Option<String>, String>),
}

/// Ask each zone of `plan` (at most [`ZONES_IN_FLIGHT`] at once) for its DPPs' diffs, each
/// zone within `timeout`; results go to `events` as they arrive. Returns when every zone is
/// done or the receiver is gone.
pub async fn fan_out(
    hub: Arc<InspectHub>,
    mesh: String,
    plan_zones: BTreeMap<String, Vec<String>>,
    promotion: Promotion,
    timeout: Duration,
    events: mpsc::Sender<FanoutEvent>,
) {
    let permits = Arc::new(Semaphore::new(ZONES_IN_FLIGHT));
    let policy = match &promotion {
        Promotion::All => String::new(),
        p => p.to_string(),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for (zone, names) in plan_zones {
        let (hub, events, permits, mesh, policy) = (
            hub.clone(),
            events.clone(),
            permits.clone(),
            mesh.clone(),
            policy.clone(),
        );
        tasks.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let started = tokio::time::Instant::now();
            let result = ask_zone(&hub, &zone, &mesh, &policy, names, timeout, &events).await;
            if let Err(e) = &result {
                tracing::warn!(%zone, %mesh, error = %e, "shadow diff: zone did not answer in full");
            }
            tracing::debug!(%zone, %mesh, elapsed_ms = started.elapsed().as_millis() as u64, "shadow diff: zone done");
            let _ = events.send(FanoutEvent::ZoneDone(zone, result)).await;
        }.instrument(tracing::Span::current()));
    }
    while tasks.join_next().await.is_some() {}
}

/// One zone's part: its names in chunks, within `timeout` in all.
async fn ask_zone(
    hub: &InspectHub,
    zone: &str,
    mesh: &str,
    policy: &str,
    names: Vec<String>,
    timeout: Duration,
    events: &mpsc::Sender<FanoutEvent>,
) -> Result<Option<String>, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut tags: Vec<String> = Vec::new();
    for chunk in names.chunks(NAMES_PER_CALL) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(CallError::Timeout {
                zone: zone.to_owned(),
                timeout,
            }
            .to_string());
        }
        let kind = Kind::ShadowDiff(ShadowDiffRequest {
            mesh: mesh.to_owned(),
            dataplanes: chunk.to_vec(),
            policy: policy.to_owned(),
            if_none_match: String::new(),
        });
        let mut call = hub
            .call(zone, kind, left)
            .await
            .map_err(|e| e.to_string())?;
        while let Some(frame) = call.next().await.map_err(|e| match e {
            // The deadline is the zone's, not this chunk's.
            CallError::Timeout { zone, .. } => CallError::Timeout { zone, timeout }.to_string(),
            e => e.to_string(),
        })? {
            match frame.body {
                Some(Frame::Diffs(d)) => {
                    if !d.tag.is_empty() {
                        tags.push(d.tag);
                    }
                    if !d.items.is_empty()
                        && events
                            .send(FanoutEvent::Batch(zone.to_owned(), d.items))
                            .await
                            .is_err()
                    {
                        return Ok(None);
                    }
                }
                Some(Frame::Error(e)) => {
                    return Err(format!(
                        "zone {zone:?} answered {}: {}",
                        e.status, e.message
                    ))
                }
                _ => return Err(format!("zone {zone:?} sent an unexpected answer")),
            }
        }
    }
    // One tag per call; the answer is one state only when every call named the same.
    let calls = names.len().div_ceil(NAMES_PER_CALL).max(1);
    Ok((tags.len() == calls && tags.iter().all(|t| *t == tags[0])).then(|| tags[0].clone()))
}

/// Whether every zone of `tags` confirms, within `timeout`, that the state its tag names still
/// holds for `mesh` under `promotion` (one probe per zone, all at once; a zone that fails or
/// is offline does not confirm).
pub async fn probe(
    hub: &Arc<InspectHub>,
    mesh: &str,
    promotion: &Promotion,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
) -> bool {
    let policy = match promotion {
        Promotion::All => String::new(),
        p => p.to_string(),
    };
    let mut probes = tokio::task::JoinSet::new();
    for (zone, tag) in tags {
        let kind = Kind::ShadowDiff(ShadowDiffRequest {
            mesh: mesh.to_owned(),
            dataplanes: Vec::new(),
            policy: policy.clone(),
            if_none_match: tag.clone(),
        });
        let (hub, zone) = (hub.clone(), zone.clone());
        probes.spawn(async move {
            let Ok(mut call) = hub.call(&zone, kind, timeout).await else {
                return false;
            };
            matches!(
                call.next().await,
                Ok(Some(umbra_kds::pb::InspectResponse { body: Some(Frame::Diffs(d)), .. })) if d.unchanged
            )
        });
    }
    let mut confirmed = true;
    while let Some(answer) = probes.join_next().await {
        confirmed &= answer.unwrap_or(false);
    }
    confirmed
}
