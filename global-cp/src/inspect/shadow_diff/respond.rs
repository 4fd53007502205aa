//! Answering `GET /meshes/{mesh}/_shadow-diff`: [`shadow_diff`] plans, fans out and folds the
//! results into an [`Aggregate`], then answers one JSON document, or, with
//! `Accept: application/x-ndjson`, streams one line per DPP as it arrives, progress, one line
//! per zone, then the summary. A JSON answer of a complete diff is kept
//! ([`crate::inspect::answer_cache`]) and served again for the same question at the same store
//! revision once every zone it came from confirms its state still holds.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::Instrument as _;
use umbra_api::error::ApiError;
use umbra_core::view::Promotion;

use super::aggregate::{Aggregate, DpOutcome};
use super::fan_out::{fan_out, probe, FanoutEvent};
use super::plan::{Plan, Planner};
use super::query::ShadowDiffQuery;
use super::report::ZoneTally;
use crate::inspect::answer_cache::{Entry, Key};
use crate::inspect::context::{
    for_each_dataplane_page, mesh_exists, mesh_policies, record_fanout, InspectContext,
};

/// Events buffered between the zone calls and the aggregation.
const EVENT_QUEUE: usize = 8;
/// Longest wait for the zones to confirm a kept answer (less when the request's timeout is).
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `GET /meshes/{mesh}/_shadow-diff`: plan, fan out, aggregate; one JSON document, or NDJSON
/// lines when `ndjson`.
///
/// # Errors
/// 400 for bad parameters, 409 for a live `policy=` (or a shadow one to retire), 404 for an
/// unknown mesh, policy or zone, 503 when the store is unavailable. Zones that fail are reported in the result, not as errors.
pub async fn shadow_diff(
    cx: &InspectContext,
    mesh: &str,
    query: &[(String, String)],
    ndjson: bool,
) -> Result<Response, ApiError> {
    let began = std::time::Instant::now();
    let q = ShadowDiffQuery::parse(query)?;
    mesh_exists(&*cx.store, mesh).await?;
    let policies = mesh_policies(&*cx.store, mesh).await?;
    q.promotion.check(mesh, &policies).map_err(ApiError::from)?;
    if let Some(zone) = &q.zone {
        // Known here, or to the replicas (held by another one, or connected to one before).
        if cx.zones.get(zone).is_none() && !cx.hub.known(zone).await {
            return Err(ApiError::not_found(format!(
                "zone {zone:?} is not known to the Global"
            )));
        }
    }
    // Read before planning: the plan reflects at least this revision.
    let key = Key {
        mesh: mesh.to_owned(),
        question: q.question(),
        revision: cx.store.revision().await?,
    };
    let json_answer = |body: Bytes| {
        (
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response()
    };
    if !ndjson {
        if let Some(kept) = cx.hub.answers.get(&key) {
            if probe(
                &cx.hub,
                mesh,
                &q.promotion,
                &kept.tags,
                q.timeout.min(PROBE_TIMEOUT),
            )
            .await
            {
                record_fanout("shadow_diff", began, "ok");
                return Ok(json_answer(kept.body));
            }
            cx.hub.answers.remove(&key);
        }
    }
    let plan = Arc::new(plan_fleet(cx, mesh, &policies, &q.promotion, q.zone.as_deref()).await?);
    let rx = start_fan_out(cx, mesh, &plan, &q.promotion, q.timeout);
    let aggregate = Aggregate::new(&plan, q.full && !ndjson);
    if !ndjson {
        let (aggregate, _, tags) = fold(aggregate, rx, None, |_| Vec::new()).await;
        record_fanout("shadow_diff", began, "ok");
        let body = Bytes::from(aggregate.report(mesh, &plan, &q.promotion, q.full));
        // Kept only when complete and every zone named the state it answered from.
        let tags: Option<BTreeMap<String, String>> = plan
            .zones
            .keys()
            .map(|z| Some((z.clone(), tags.get(z).cloned()??)))
            .collect();
        if let Some(tags) = tags.filter(|_| !aggregate.partial()) {
            cx.hub.answers.put(
                key,
                Entry {
                    tags,
                    body: body.clone(),
                },
            );
        }
        return Ok(json_answer(body));
    }
    let (lines_tx, lines_rx) = mpsc::channel::<Result<Bytes, Infallible>>(EVENT_QUEUE);
    let start = json!({
        "kind": "start",
        "mesh": mesh,
        "policy": match &q.promotion { Promotion::All => None, p => Some(p.to_string()) },
        "retiredPolicies": q.promotion.retired(),
        "shadowPolicies": plan.policies,
        "considered": plan.considered(),
        "zones": plan.zones.keys().collect::<Vec<_>>(),
    });
    let mesh = mesh.to_owned();
    // A child of the request's span: the stream outlives the handler.
    let span = tracing::info_span!("shadow_diff.stream", mesh = %mesh);
    let stream = async move {
        if lines_tx.send(Ok(ndjson_line(&start))).await.is_err() {
            return;
        }
        let full = q.full;
        let considered = plan.considered();
        let render = move |line: Line<'_>| {
            let mut bytes = match line {
                Line::Dp(agg, dp, outcome) => agg.line(dp, outcome, full),
                Line::Progress(done) => serde_json::to_vec(
                    &json!({"kind": "progress", "done": done, "considered": considered}),
                )
                .unwrap_or_default(),
                Line::Zone(tally) => {
                    let mut v = serde_json::to_value(tally).unwrap_or_default();
                    v["kind"] = json!("zone");
                    serde_json::to_vec(&v).unwrap_or_default()
                }
            };
            bytes.push(b'\n');
            bytes
        };
        let (aggregate, open, _) = fold(aggregate, rx, Some(&lines_tx), render).await;
        record_fanout(
            "shadow_diff",
            began,
            if open { "ok" } else { "client_gone" },
        );
        if open {
            let mut body = aggregate.report(&mesh, &plan, &q.promotion, false);
            body.push(b'\n');
            let _ = lines_tx.send(Ok(Bytes::from(body))).await;
        }
    };
    tokio::spawn(stream.instrument(span));
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(lines_rx)),
    )
        .into_response())
}

/// The [`Plan`] of a fleet-wide diff of `mesh` (its `policies` already read) under
/// `promotion`: the DPPs and ingresses whose config can differ, limited to `zone` when given.
///
/// # Errors
/// 503 when the store is unavailable.
pub async fn plan_fleet(
    cx: &InspectContext,
    mesh: &str,
    policies: &[umbra_core::resource::Resource],
    promotion: &Promotion,
    zone: Option<&str>,
) -> Result<Plan, ApiError> {
    let planner = Planner::new(mesh, policies, promotion);
    let mut planner = for_each_dataplane_page(&*cx.store, mesh, planner, Planner::add).await?;
    let ingresses = crate::store::list_all(
        &*cx.store,
        umbra_core::resource::ResourceType::ZoneIngress,
        None,
        &std::collections::BTreeMap::new(),
    )
    .await?;
    planner.add_ingresses(&ingresses);
    let egresses = crate::store::list_all(
        &*cx.store,
        umbra_core::resource::ResourceType::ZoneEgress,
        None,
        &std::collections::BTreeMap::new(),
    )
    .await?;
    planner.add_egresses(&egresses);
    let mut plan = planner.finish();
    if let Some(zone) = zone {
        plan.zones.retain(|z, _| z == zone);
    }
    Ok(plan)
}

/// Ask the zones of `plan` for their diffs under `promotion` (each within `timeout`), in the
/// background; the events arrive on the returned channel.
fn start_fan_out(
    cx: &InspectContext,
    mesh: &str,
    plan: &Plan,
    promotion: &Promotion,
    timeout: std::time::Duration,
) -> mpsc::Receiver<FanoutEvent> {
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    // The request's span goes along, so each zone's inspect call joins its trace.
    tokio::spawn(
        fan_out(
            cx.hub.clone(),
            mesh.to_owned(),
            plan.zones.clone(),
            promotion.clone(),
            timeout,
            tx,
        )
        .instrument(tracing::Span::current()),
    );
    rx
}

/// The whole fleet-wide diff of `plan` under `promotion`, every zone within `timeout`, as
/// the aggregate of every answer (patches kept when `full`).
pub async fn fleet_aggregate(
    cx: &InspectContext,
    mesh: &str,
    plan: &Plan,
    promotion: &Promotion,
    timeout: std::time::Duration,
    full: bool,
) -> Aggregate {
    let rx = start_fan_out(cx, mesh, plan, promotion, timeout);
    fold(Aggregate::new(plan, full), rx, None, |_| Vec::new())
        .await
        .0
}

fn ndjson_line(v: &Value) -> Bytes {
    let mut l = serde_json::to_vec(v).unwrap_or_default();
    l.push(b'\n');
    Bytes::from(l)
}

/// Something [`fold`] reports as it goes.
enum Line<'a> {
    Dp(&'a Aggregate, u32, &'a DpOutcome),
    Progress(usize),
    Zone(&'a ZoneTally),
}

/// Fold every event into `aggregate`. With `out`, each DPP, batch (progress) and zone is
/// rendered by `render` and sent as it comes, waiting when the client reads slowly; folding
/// stops early when the client goes away. Returns the aggregate, whether the client is
/// still there, and the tag of each zone's answer (`None`: it named no single state).
async fn fold(
    mut aggregate: Aggregate,
    mut rx: mpsc::Receiver<FanoutEvent>,
    out: Option<&mpsc::Sender<Result<Bytes, Infallible>>>,
    mut render: impl FnMut(Line<'_>) -> Vec<u8>,
) -> (Aggregate, bool, BTreeMap<String, Option<String>>) {
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut tags = BTreeMap::new();
    while let Some(event) = rx.recv().await {
        let streaming = out.is_some();
        match event {
            FanoutEvent::Batch(zone, items) => {
                for item in items {
                    if let Some((dp, outcome)) = aggregate.add(&zone, item) {
                        if streaming {
                            pending.push(render(Line::Dp(&aggregate, dp, &outcome)));
                        }
                    }
                }
                if streaming {
                    pending.push(render(Line::Progress(aggregate.done())));
                }
            }
            FanoutEvent::ZoneDone(zone, result) => {
                let result = result.map(|tag| {
                    tags.insert(zone.clone(), tag);
                });
                if let Some(tally) = aggregate.zone_done(&zone, result) {
                    if streaming {
                        pending.push(render(Line::Zone(tally)));
                    }
                }
            }
        }
        if let Some(out) = out {
            for line in pending.drain(..) {
                if out.send(Ok(Bytes::from(line))).await.is_err() {
                    return (aggregate, false, tags);
                }
            }
        }
    }
    (aggregate, true, tags)
}
