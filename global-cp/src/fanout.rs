//! The Global's inspect API (issue 6), answered by the zones over KDS ([`crate::inspect`]):
//!
//! - **Per-DPP forwarding**: `GET /meshes/{mesh}/dataplanes/{name}/_config` and `.../_rules`
//!   (with `shadow=` and `include=diff`, seed 000) go to the zone that owns the DPP and return
//!   what its API returns (same bodies, same 400/404), or a 503 naming the zone when it is
//!   offline or does not answer within [`FORWARD_TIMEOUT`] (shorter than the API's request
//!   timeout). `name` is the Global's name of the DPP (`<name>-<hash>`) or, when unique in the
//!   mesh, its name in its zone. An answer over [`MAX_FORWARDED_BYTES`] is a 502 naming the DPP
//!   and the size.
//! - **Affected DPPs**: `GET /meshes/{mesh}/{plural}/{name}/_resources/dataplanes` lists the
//!   DPPs (with their zone) whose config the policy can change: those whose generation depends
//!   on it ([`umbra_xds::deps`]: the top-level `targetRef` for new policies, the selecting side
//!   for old ones), computed here from the Dataplanes the zones synced. Paged.
//! - **Fleet-wide shadow diff**: `GET /meshes/{mesh}/_shadow-diff` ([`ShadowDiffQuery`]): which
//!   DPPs' config would change, and how, if the shadow policies (or one, `policy=`) went live.
//!   The Global narrows the work to DPPs whose dependencies differ between the two views
//!   ([`plan`]), asks every zone holding some concurrently (at most [`ZONES_IN_FLIGHT`]), each
//!   with a deadline, and folds the answers as they stream in ([`Aggregate`]): operations are
//!   kept once each with the DPPs sharing them, so memory grows with distinct operations, not
//!   with the fleet. A zone that is offline, late or failing is reported (the result is then
//!   `partial`), never fatal. With `Accept: application/x-ndjson` the result streams: one line
//!   per DPP as it arrives, progress, one line per zone, then the summary.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use umbra_api::error::ApiError;
use umbra_api::paging::PageParams;
use umbra_core::resource::{Resource, ResourceKey, ResourceType, TypeKind};
use umbra_core::view::{PolicySet, Promotion, View};
use umbra_kds::pb::dataplane_inspect::Endpoint;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inspect_response::Body as Frame;
use umbra_kds::pb::{DataplaneDiff, DataplaneInspect, QueryPair, ShadowDiffRequest};
use umbra_kds::resource::DISPLAY_NAME_LABEL;

use crate::api::{store_err, AppState};
use crate::inspect::{CallError, InspectHub};
use crate::store::{list_all, Store, Stored};

/// Deadline of a forwarded per-DPP call (shorter than [`crate::api::REQUEST_TIMEOUT`]).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(8);
/// Largest per-DPP answer the Global relays (bytes).
pub const MAX_FORWARDED_BYTES: u64 = 64 << 20;
/// Zone deadline of a fleet-wide diff without `timeout=`.
pub const DEFAULT_FLEET_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest `timeout=` of a fleet-wide diff.
pub const MAX_FLEET_TIMEOUT: Duration = Duration::from_secs(120);
/// The HTTP timeout of the fleet-wide route: longer than any zone deadline.
pub const FLEET_HTTP_TIMEOUT: Duration = Duration::from_secs(130);
/// Zones asked at once.
pub const ZONES_IN_FLIGHT: usize = 16;
/// DPP names per call to a zone (a zone with more gets several calls, one after another).
pub const NAMES_PER_CALL: usize = 10_000;
/// DPPs listed per operation group in a `summary`.
pub const SAMPLE: usize = 10;
/// Failures listed in a `summary`.
pub const SUMMARY_FAILURES: usize = 100;
/// Events buffered between the zone calls and the aggregation.
const EVENT_QUEUE: usize = 8;

fn call_error(e: &CallError) -> ApiError {
    ApiError::status(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
}

/// A DPP the Global knows, with its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Located {
    zone: String,
    /// Its name in its zone.
    local: String,
}

fn locate_in(stored: &Stored) -> Option<Located> {
    Some(Located {
        zone: stored.zone.clone()?,
        local: stored
            .resource
            .meta
            .labels
            .get(DISPLAY_NAME_LABEL)
            .cloned()
            .unwrap_or_else(|| stored.resource.meta.name.clone()),
    })
}

async fn mesh_exists(store: &dyn Store, mesh: &str) -> Result<(), ApiError> {
    store
        .get(&crate::store::mesh_key(mesh))
        .await
        .map_err(store_err)?
        .map(|_| ())
        .ok_or_else(|| ApiError::not_found(format!("mesh {mesh:?} not found")))
}

/// The DPP called `name` in `mesh`: its Global name, or its unique name in its zone.
async fn locate(store: &dyn Store, mesh: &str, name: &str) -> Result<Located, ApiError> {
    mesh_exists(store, mesh).await?;
    let key = ResourceKey {
        ty: ResourceType::Dataplane,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    if let Some(found) = store
        .get(&key)
        .await
        .map_err(store_err)?
        .as_ref()
        .and_then(locate_in)
    {
        return Ok(found);
    }
    let labels = BTreeMap::from([(DISPLAY_NAME_LABEL.to_owned(), name.to_owned())]);
    let same = list_all(store, ResourceType::Dataplane, Some(mesh), &labels)
        .await
        .map_err(store_err)?;
    match same.as_slice() {
        [one] => locate_in(one)
            .ok_or_else(|| ApiError::not_found(format!("dataplane {name:?} has no zone"))),
        [] => Err(ApiError::not_found(format!(
            "dataplane {name:?} not found in mesh {mesh:?}"
        ))),
        many => Err(ApiError::bad_parameter(
            "name",
            format!(
                "{} dataplanes are called {name:?} in their zones; use the Global name: {}",
                many.len(),
                many.iter()
                    .map(|s| s.resource.meta.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Forward `_config` or `_rules` of DPP `name` to its zone and relay the answer.
///
/// # Errors
/// 404 (mesh, DPP), 400 (ambiguous name), 503 (zone offline or late), 502 (answer too large),
/// or the zone's own error.
pub async fn forward(
    st: &AppState,
    mesh: &str,
    name: &str,
    endpoint: Endpoint,
    query: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    let began = std::time::Instant::now();
    let out = forward_call(st, mesh, name, endpoint, query).await;
    let outcome = match &out {
        Ok(r) if r.status().is_success() => "ok",
        _ => "error",
    };
    record_fanout("forward", began, outcome);
    out
}

async fn forward_call(
    st: &AppState,
    mesh: &str,
    name: &str,
    endpoint: Endpoint,
    query: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    let dp = locate(&*st.store, mesh, name).await?;
    let kind = Kind::Dataplane(DataplaneInspect {
        mesh: mesh.to_owned(),
        name: dp.local.clone(),
        endpoint: endpoint.into(),
        query: query
            .into_iter()
            .map(|(key, value)| QueryPair { key, value })
            .collect(),
    });
    let mut call = st
        .inspect
        .call(&dp.zone, kind, FORWARD_TIMEOUT)
        .await
        .map_err(|e| call_error(&e))?;
    let mut status = 200;
    let mut body = Vec::new();
    while let Some(frame) = call.next().await.map_err(|e| call_error(&e))? {
        match frame.body {
            Some(Frame::Http(h)) => {
                if h.total_bytes > MAX_FORWARDED_BYTES {
                    return Err(ApiError::status(
                        StatusCode::BAD_GATEWAY,
                        format!(
                            "the answer of zone {:?} for dataplane {name:?} is {} bytes, over the Global's {MAX_FORWARDED_BYTES}-byte limit; ask the zone directly",
                            dp.zone, h.total_bytes
                        ),
                    ));
                }
                status = h.status;
                body.extend_from_slice(&h.chunk);
            }
            Some(Frame::Error(e)) => {
                return Err(ApiError::status(
                    StatusCode::from_u16(u16::try_from(e.status).unwrap_or(502))
                        .unwrap_or(StatusCode::BAD_GATEWAY),
                    e.message,
                ))
            }
            _ => {
                return Err(ApiError::status(
                    StatusCode::BAD_GATEWAY,
                    format!("zone {:?} sent an unexpected answer", dp.zone),
                ))
            }
        }
    }
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&dp.zone) {
        response.headers_mut().insert("x-umbra-zone", v);
    }
    Ok(response)
}

/// Every Mesh-scoped policy of `mesh` and its Mesh, read from the store.
async fn mesh_policies(store: &dyn Store, mesh: &str) -> Result<Vec<Resource>, ApiError> {
    let mut out = Vec::new();
    for ty in ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.kind() != TypeKind::Infra)
    {
        let items = list_all(store, ty, Some(mesh), &BTreeMap::new())
            .await
            .map_err(store_err)?;
        out.extend(items.into_iter().map(|s| s.resource));
    }
    if let Some(m) = store
        .get(&crate::store::mesh_key(mesh))
        .await
        .map_err(store_err)?
    {
        out.push(m.resource);
    }
    Ok(out)
}

/// The Dataplanes whose generation depends on one policy, as list items.
struct Selecting {
    set: PolicySet,
    ty: ResourceType,
    name: String,
    selected: Vec<Value>,
}

impl Selecting {
    fn add(&mut self, page: &[Stored]) {
        for s in page {
            let Some(dp) = s.resource.as_dataplane() else {
                continue;
            };
            let depends = umbra_xds::deps::dependencies(dp, &self.set)
                .policies
                .iter()
                .any(|d| d.ty == self.ty && d.name == self.name);
            if depends {
                let r = &s.resource;
                self.selected.push(json!({
                    "type": "Dataplane",
                    "mesh": r.meta.mesh,
                    "name": r.meta.name,
                    "zone": s.zone,
                    "displayName": r.meta.labels.get(DISPLAY_NAME_LABEL),
                    "labels": r.meta.labels,
                }));
            }
        }
    }
}

/// `GET /meshes/{mesh}/{plural}/{name}/_resources/dataplanes`: the DPPs the policy selects.
///
/// # Errors
/// 400 for a type that is not a policy, 404 for an unknown mesh or policy.
pub async fn affected(
    st: &AppState,
    mesh: &str,
    ty: ResourceType,
    name: &str,
    query: &[(String, String)],
    path: &str,
) -> Result<Json<Value>, ApiError> {
    let page = PageParams::parse(query)?;
    if ty.kind() == TypeKind::Infra {
        return Err(ApiError::bad_parameter(
            "type",
            format!(
                "{} is not a policy type; only policies select dataplanes",
                ty.name()
            ),
        ));
    }
    mesh_exists(&*st.store, mesh).await?;
    let key = ResourceKey {
        ty,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    let policy = st
        .store
        .get(&key)
        .await
        .map_err(store_err)?
        .ok_or_else(|| ApiError::not_found(format!("{key} not found")))?;
    let resources = mesh_policies(&*st.store, mesh).await?;
    // A shadow policy is looked at in the view where it is live.
    let set = if policy.resource.meta.is_shadow() {
        PolicySet::build_shadow(
            mesh,
            &resources,
            &Promotion::Only {
                ty,
                name: name.to_owned(),
            },
        )
    } else {
        PolicySet::build(mesh, &resources, View::Live)
    };
    let selecting = Selecting {
        set,
        ty,
        name: name.to_owned(),
        selected: Vec::new(),
    };
    let selected = for_each_dataplane_page(&*st.store, mesh, selecting, Selecting::add)
        .await?
        .selected;
    let total = selected.len();
    let items = selected
        .into_iter()
        .skip(page.offset)
        .take(page.size)
        .collect();
    Ok(Json(page.body(items, total, path)))
}

/// The query of `GET /meshes/{mesh}/_shadow-diff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowDiffQuery {
    /// `policy=<Type>/<name>`: only that shadow policy goes live (default: all of them).
    pub promotion: Promotion,
    /// `zone=`: only this zone's DPPs.
    pub zone: Option<String>,
    /// `format=full` (default `summary`): each DPP's patch and every DPP of each operation.
    pub full: bool,
    /// `timeout=` (a duration like `10s`, at most [`MAX_FLEET_TIMEOUT`]): each zone's deadline.
    pub timeout: Duration,
}

impl ShadowDiffQuery {
    /// Parse the query pairs.
    ///
    /// # Errors
    /// A 400 naming the parameter.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut q = Self {
            promotion: Promotion::All,
            zone: None,
            full: false,
            timeout: DEFAULT_FLEET_TIMEOUT,
        };
        for (k, v) in pairs {
            match k.as_str() {
                "policy" => {
                    q.promotion =
                        Promotion::parse(v).map_err(|e| ApiError::bad_parameter("policy", e))?;
                }
                "zone" => q.zone = Some(v.clone()).filter(|z| !z.is_empty()),
                "format" => {
                    q.full = match v.as_str() {
                        "summary" => false,
                        "full" => true,
                        other => {
                            return Err(ApiError::bad_parameter(
                                "format",
                                format!("must be summary or full, got {other:?}"),
                            ))
                        }
                    }
                }
                "timeout" => {
                    let d = umbra_core::duration::Duration::parse(v)
                        .ok()
                        .filter(|d| !d.is_negative())
                        .and_then(|d| u64::try_from(d.as_nanos()).ok())
                        .map(Duration::from_nanos)
                        .filter(|d| !d.is_zero() && *d <= MAX_FLEET_TIMEOUT)
                        .ok_or_else(|| {
                            ApiError::bad_parameter(
                                "timeout",
                                format!(
                                    "must be a duration like 10s, above 0 and at most {} s, got {v:?}",
                                    MAX_FLEET_TIMEOUT.as_secs()
                                ),
                            )
                        })?;
                    q.timeout = d;
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

/// Which DPPs a fleet-wide diff asks about: those whose config can differ between the views.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// `"<Type>/<name>"` of the shadow policies going live.
    pub policies: Vec<String>,
    /// Zone → names in that zone of its DPPs to diff (sorted).
    pub zones: BTreeMap<String, Vec<String>>,
}

impl Plan {
    /// DPPs to diff, over all zones.
    pub fn considered(&self) -> usize {
        self.zones.values().map(Vec::len).sum()
    }
}

/// Narrows a fleet-wide diff of a mesh to the DPPs (Global-stored Dataplanes, each with its
/// zone) whose dependencies differ between the Live view and the Shadow view with the
/// promotion ([`umbra_xds::deps::views_differ`]): the other DPPs' configs are identical in
/// both, so no zone needs to generate them. Pure; fed page by page, so only names are kept.
#[derive(Debug)]
pub struct Planner {
    live: PolicySet,
    shadow: PolicySet,
    plan: Plan,
}

impl Planner {
    /// A planner for `mesh` with its `policies`.
    pub fn new(mesh: &str, policies: &[Resource], promotion: &Promotion) -> Self {
        Self {
            live: PolicySet::build(mesh, policies, View::Live),
            shadow: PolicySet::build_shadow(mesh, policies, promotion),
            plan: Plan {
                policies: promotion.promoted(mesh, policies),
                zones: BTreeMap::new(),
            },
        }
    }

    /// Consider these Dataplanes.
    pub fn add(&mut self, dataplanes: &[Stored]) {
        for s in dataplanes {
            let (Some(dp), Some(at)) = (s.resource.as_dataplane(), locate_in(s)) else {
                continue;
            };
            if umbra_xds::deps::views_differ(dp, &self.live, &self.shadow) {
                self.plan.zones.entry(at.zone).or_default().push(at.local);
            }
        }
    }

    /// The plan (names sorted per zone).
    pub fn finish(mut self) -> Plan {
        for names in self.plan.zones.values_mut() {
            names.sort();
        }
        self.plan
    }
}

/// Dataplanes read per store page while walking a mesh's (they can be large; callers keep
/// only what they need of each).
const DATAPLANE_PAGE: u64 = 200;

/// Feed `mesh`'s Dataplanes to `f` with `acc`, [`DATAPLANE_PAGE`] at a time, off the async
/// runtime; returns `acc`.
async fn for_each_dataplane_page<T: Send + 'static>(
    store: &dyn Store,
    mesh: &str,
    mut acc: T,
    f: impl Fn(&mut T, &[Stored]) + Send + Copy + 'static,
) -> Result<T, ApiError> {
    let mut offset = 0;
    loop {
        let page = store
            .list(&crate::store::ListQuery {
                ty: ResourceType::Dataplane,
                mesh: Some(mesh.to_owned()),
                labels: BTreeMap::new(),
                offset,
                size: DATAPLANE_PAGE,
            })
            .await
            .map_err(store_err)?;
        let next = page.next_offset;
        acc = tokio::task::spawn_blocking(move || {
            f(&mut acc, &page.items);
            acc
        })
        .await
        .map_err(|e| ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        match next {
            Some(n) => offset = n,
            None => return Ok(acc),
        }
    }
}

/// What a zone's calls produced, as the aggregation sees it.
#[derive(Debug)]
pub enum FanoutEvent {
    /// A batch of DPP results from `zone`.
    Batch(String, Vec<DataplaneDiff>),
    /// `zone` is done: `Ok` when it answered for every DPP asked, else why not.
    ZoneDone(String, Result<(), String>),
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
        p @ Promotion::Only { .. } => p.to_string(),
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

async fn ask_zone(
    hub: &InspectHub,
    zone: &str,
    mesh: &str,
    policy: &str,
    names: Vec<String>,
    timeout: Duration,
    events: &mpsc::Sender<FanoutEvent>,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
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
                    if !d.items.is_empty()
                        && events
                            .send(FanoutEvent::Batch(zone.to_owned(), d.items))
                            .await
                            .is_err()
                    {
                        return Ok(());
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
    Ok(())
}

/// How a zone's part of a fleet-wide diff went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneTally {
    /// The zone.
    pub zone: String,
    /// `pending` (still running), `ok`, or `failed` (see `error`).
    pub status: &'static str,
    /// DPPs asked about.
    pub considered: usize,
    /// DPPs whose config changes.
    pub changed: usize,
    /// DPPs whose config stays the same.
    pub unchanged: usize,
    /// DPPs without a result (their own error, or the zone's).
    pub failed: usize,
    /// Why the zone did not answer in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Fleet-wide totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// DPPs the shadow policies can affect (asked about).
    pub considered: usize,
    /// DPPs whose config changes.
    pub changed: usize,
    /// DPPs whose config stays the same.
    pub unchanged: usize,
    /// DPPs without a result.
    pub failed: usize,
}

/// One operation and the DPPs whose patch holds it.
#[derive(Debug)]
struct Group {
    op: Box<RawValue>,
    dataplanes: Vec<u32>,
}

/// A DPP of the result: zone index and name in the zone.
#[derive(Debug)]
struct DpRef {
    zone: u32,
    name: String,
}

/// What one DPP result was, for the streamed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DpOutcome {
    /// The patch's operations (indices into the groups).
    Changed(Vec<u32>),
    /// Same config in both views.
    Unchanged,
    /// No result, and why.
    Failed(String),
}

/// Folds DPP results into totals, per-zone tallies and operation groups; pure.
///
/// Each distinct operation is held once, with the DPPs sharing it; with `keep_patches` each
/// changed DPP also keeps its operation indices (for `format=full` as one JSON document).
#[derive(Debug)]
pub struct Aggregate {
    keep_patches: bool,
    index: HashMap<Vec<u8>, u32>,
    groups: Vec<Group>,
    dataplanes: Vec<DpRef>,
    patches: Vec<(u32, Vec<u32>)>,
    failures: Vec<(u32, String)>,
    zones: Vec<ZoneTally>,
    zone_index: HashMap<String, u32>,
    expected: HashMap<String, HashSet<String>>,
}

impl Aggregate {
    /// An aggregation expecting `plan`'s DPPs.
    pub fn new(plan: &Plan, keep_patches: bool) -> Self {
        let mut agg = Self {
            keep_patches,
            index: HashMap::new(),
            groups: Vec::new(),
            dataplanes: Vec::new(),
            patches: Vec::new(),
            failures: Vec::new(),
            zones: Vec::new(),
            zone_index: HashMap::new(),
            expected: HashMap::new(),
        };
        for (zone, names) in &plan.zones {
            agg.zone_index.insert(
                zone.clone(),
                u32::try_from(agg.zones.len()).unwrap_or(u32::MAX),
            );
            agg.zones.push(ZoneTally {
                zone: zone.clone(),
                status: "pending",
                considered: names.len(),
                ..ZoneTally::default()
            });
            agg.expected
                .insert(zone.clone(), names.iter().cloned().collect());
        }
        agg
    }

    fn push_dp(&mut self, zone: u32, name: String) -> u32 {
        self.dataplanes.push(DpRef { zone, name });
        u32::try_from(self.dataplanes.len() - 1).unwrap_or(u32::MAX)
    }

    /// Fold one DPP result from `zone`. `None` when the zone was not asked about it (or
    /// answered twice): such results are ignored.
    pub fn add(&mut self, zone: &str, item: DataplaneDiff) -> Option<(u32, DpOutcome)> {
        let z = *self.zone_index.get(zone)?;
        if !self.expected.get_mut(zone)?.remove(&item.name) {
            tracing::debug!(%zone, dataplane = %item.name, "shadow diff: result not asked for; ignored");
            return None;
        }
        let tally = &mut self.zones[z as usize];
        let dp = if !item.error.is_empty() {
            tally.failed += 1;
            let dp = self.push_dp(z, item.name);
            self.failures.push((dp, item.error.clone()));
            return Some((dp, DpOutcome::Failed(item.error)));
        } else if item.operations.is_empty() {
            tally.unchanged += 1;
            let dp = self.push_dp(z, item.name);
            return Some((dp, DpOutcome::Unchanged));
        } else {
            self.push_dp(z, item.name)
        };
        let mut ids = Vec::with_capacity(item.operations.len());
        for op in item.operations {
            let id = match self.index.get(&op) {
                Some(id) => *id,
                None => {
                    let Some(raw) = String::from_utf8(op.clone())
                        .ok()
                        .and_then(|s| RawValue::from_string(s).ok())
                    else {
                        let error = "the zone sent an operation that is not JSON".to_owned();
                        self.zones[z as usize].failed += 1;
                        self.failures.push((dp, error.clone()));
                        return Some((dp, DpOutcome::Failed(error)));
                    };
                    let id = u32::try_from(self.groups.len()).unwrap_or(u32::MAX);
                    self.groups.push(Group {
                        op: raw,
                        dataplanes: Vec::new(),
                    });
                    self.index.insert(op, id);
                    id
                }
            };
            ids.push(id);
        }
        for id in &ids {
            let members = &mut self.groups[*id as usize].dataplanes;
            // The same operation twice in one patch counts the DPP once.
            if members.last() != Some(&dp) {
                members.push(dp);
            }
        }
        self.zones[z as usize].changed += 1;
        if self.keep_patches {
            self.patches.push((dp, ids.clone()));
        }
        Some((dp, DpOutcome::Changed(ids)))
    }

    /// `zone` finished: `Ok`, or why it stopped. The DPPs it did not answer for count as
    /// failed with that reason.
    pub fn zone_done(&mut self, zone: &str, result: Result<(), String>) -> Option<&ZoneTally> {
        let z = *self.zone_index.get(zone)? as usize;
        let missing: Vec<String> = self
            .expected
            .get_mut(zone)
            .map(|m| m.drain().collect())
            .unwrap_or_default();
        let mut missing = missing;
        missing.sort();
        let reason = match &result {
            Ok(()) if missing.is_empty() => None,
            Ok(()) => Some(format!("zone {zone:?} did not answer for these dataplanes")),
            Err(e) => Some(e.clone()),
        };
        for name in missing {
            let dp = self.push_dp(u32::try_from(z).unwrap_or(u32::MAX), name);
            self.failures.push((dp, reason.clone().unwrap_or_default()));
            self.zones[z].failed += 1;
        }
        let tally = &mut self.zones[z];
        tally.status = if reason.is_some() { "failed" } else { "ok" };
        tally.error = reason;
        Some(&self.zones[z])
    }

    /// Fleet-wide totals so far.
    pub fn totals(&self) -> Totals {
        self.zones.iter().fold(Totals::default(), |t, z| Totals {
            considered: t.considered + z.considered,
            changed: t.changed + z.changed,
            unchanged: t.unchanged + z.unchanged,
            failed: t.failed + z.failed,
        })
    }

    /// DPP results folded so far.
    pub fn done(&self) -> usize {
        self.dataplanes.len()
    }

    /// `true` when a zone did not answer in full.
    pub fn partial(&self) -> bool {
        self.zones.iter().any(|z| z.status != "ok")
    }

    fn dp(&self, i: u32) -> DpName<'_> {
        let d = &self.dataplanes[i as usize];
        DpName {
            zone: &self.zones[d.zone as usize].zone,
            name: &d.name,
        }
    }

    fn ops(&self, ids: &[u32]) -> Vec<&RawValue> {
        ids.iter().map(|i| &*self.groups[*i as usize].op).collect()
    }

    /// The streamed line of DPP `dp`'s outcome (`patch` when `with_patch`).
    pub fn line(&self, dp: u32, outcome: &DpOutcome, with_patch: bool) -> Vec<u8> {
        let DpName { zone, name } = self.dp(dp);
        let line = match outcome {
            DpOutcome::Changed(ids) => serde_json::to_vec(&DpLine {
                kind: "dataplane",
                zone,
                name,
                status: "changed",
                operations: ids.len(),
                patch: with_patch.then(|| self.ops(ids)),
                error: None,
            }),
            DpOutcome::Unchanged => serde_json::to_vec(&DpLine {
                kind: "dataplane",
                zone,
                name,
                status: "unchanged",
                operations: 0,
                patch: with_patch.then(Vec::new),
                error: None,
            }),
            DpOutcome::Failed(e) => serde_json::to_vec(&DpLine {
                kind: "dataplane",
                zone,
                name,
                status: "failed",
                operations: 0,
                patch: None,
                error: Some(e),
            }),
        };
        line.unwrap_or_default()
    }

    /// The result document (JSON). `full` lists every DPP of each operation, every failure
    /// and, when patches were kept, each changed DPP's patch; otherwise groups list
    /// [`SAMPLE`] DPPs and [`SUMMARY_FAILURES`] failures.
    pub fn report(&self, mesh: &str, plan: &Plan, promotion: &Promotion, full: bool) -> Vec<u8> {
        let mut order: Vec<usize> = (0..self.groups.len()).collect();
        order.sort_by(|a, b| {
            let (ga, gb) = (&self.groups[*a], &self.groups[*b]);
            gb.dataplanes
                .len()
                .cmp(&ga.dataplanes.len())
                .then_with(|| ga.op.get().cmp(gb.op.get()))
        });
        let changes = order
            .iter()
            .map(|i| {
                let g = &self.groups[*i];
                let shown = if full { g.dataplanes.len() } else { SAMPLE };
                ChangeOut {
                    operation: &g.op,
                    count: g.dataplanes.len(),
                    dataplanes: g
                        .dataplanes
                        .iter()
                        .take(shown)
                        .map(|d| self.dp(*d))
                        .collect(),
                }
            })
            .collect();
        let shown = if full { usize::MAX } else { SUMMARY_FAILURES };
        let failures = self
            .failures
            .iter()
            .take(shown)
            .map(|(d, e)| {
                let DpName { zone, name } = self.dp(*d);
                FailureOut {
                    zone,
                    name,
                    error: e,
                }
            })
            .collect();
        let dataplanes = (full && self.keep_patches).then(|| {
            let mut list: Vec<&(u32, Vec<u32>)> = self.patches.iter().collect();
            list.sort_by(|a, b| {
                let (da, db) = (self.dp(a.0), self.dp(b.0));
                (da.zone, da.name).cmp(&(db.zone, db.name))
            });
            list.into_iter()
                .map(|(d, ids)| {
                    let DpName { zone, name } = self.dp(*d);
                    PatchOut {
                        zone,
                        name,
                        patch: self.ops(ids),
                    }
                })
                .collect()
        });
        let report = Report {
            kind: "result",
            mesh,
            policy: match promotion {
                Promotion::All => None,
                p @ Promotion::Only { .. } => Some(p.to_string()),
            },
            shadow_policies: &plan.policies,
            format: if full { "full" } else { "summary" },
            partial: self.partial(),
            totals: self.totals(),
            zones: &self.zones,
            changes,
            failures,
            dataplanes,
        };
        serde_json::to_vec(&report).unwrap_or_default()
    }
}

#[derive(Serialize)]
struct DpName<'a> {
    zone: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct DpLine<'a> {
    kind: &'static str,
    zone: &'a str,
    name: &'a str,
    status: &'static str,
    operations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Vec<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct ChangeOut<'a> {
    operation: &'a RawValue,
    count: usize,
    dataplanes: Vec<DpName<'a>>,
}

#[derive(Serialize)]
struct FailureOut<'a> {
    zone: &'a str,
    name: &'a str,
    error: &'a str,
}

#[derive(Serialize)]
struct PatchOut<'a> {
    zone: &'a str,
    name: &'a str,
    patch: Vec<&'a RawValue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    kind: &'static str,
    mesh: &'a str,
    policy: Option<String>,
    shadow_policies: &'a [String],
    format: &'static str,
    partial: bool,
    totals: Totals,
    zones: &'a [ZoneTally],
    changes: Vec<ChangeOut<'a>>,
    failures: Vec<FailureOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dataplanes: Option<Vec<PatchOut<'a>>>,
}

/// `GET /meshes/{mesh}/_shadow-diff`: plan, fan out, aggregate; one JSON document, or NDJSON
/// lines when `ndjson`.
///
/// # Errors
/// 400 for bad parameters or a live `policy=`, 404 for an unknown mesh, policy or zone, 503
/// when the store is unavailable. Zones that fail are reported in the result, not as errors.
pub async fn shadow_diff(
    st: &AppState,
    mesh: &str,
    query: &[(String, String)],
    ndjson: bool,
) -> Result<Response, ApiError> {
    let began = std::time::Instant::now();
    let q = ShadowDiffQuery::parse(query)?;
    mesh_exists(&*st.store, mesh).await?;
    let policies = mesh_policies(&*st.store, mesh).await?;
    q.promotion.check(mesh, &policies).map_err(ApiError::from)?;
    if let Some(zone) = &q.zone {
        if st.zones.get(zone).is_none() && !st.inspect.online(zone) {
            return Err(ApiError::not_found(format!(
                "zone {zone:?} is not known to the Global"
            )));
        }
    }
    let planner = Planner::new(mesh, &policies, &q.promotion);
    let mut plan = for_each_dataplane_page(&*st.store, mesh, planner, Planner::add)
        .await?
        .finish();
    if let Some(zone) = &q.zone {
        plan.zones.retain(|z, _| z == zone);
    }
    let plan = Arc::new(plan);
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    // The request's span goes along, so each zone's inspect call joins its trace.
    tokio::spawn(
        fan_out(
            st.inspect.clone(),
            mesh.to_owned(),
            plan.zones.clone(),
            q.promotion.clone(),
            q.timeout,
            tx,
        )
        .instrument(tracing::Span::current()),
    );
    let aggregate = Aggregate::new(&plan, q.full && !ndjson);
    if !ndjson {
        let (aggregate, _) = fold(aggregate, rx, None, |_| Vec::new()).await;
        record_fanout("shadow_diff", began, "ok");
        let body = aggregate.report(mesh, &plan, &q.promotion, q.full);
        return Ok((
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response());
    }
    let (lines_tx, lines_rx) = mpsc::channel::<Result<Bytes, Infallible>>(EVENT_QUEUE);
    let start = json!({
        "kind": "start",
        "mesh": mesh,
        "policy": match &q.promotion { Promotion::All => None, p => Some(p.to_string()) },
        "shadowPolicies": plan.policies,
        "considered": plan.considered(),
        "zones": plan.zones.keys().collect::<Vec<_>>(),
    });
    let mesh = mesh.to_owned();
    tokio::spawn(async move {
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
        let (aggregate, open) = fold(aggregate, rx, Some(&lines_tx), render).await;
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
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(lines_rx)),
    )
        .into_response())
}

/// `umbra_fanout_seconds{kind, outcome}`: a forwarded call (`forward`) from the request to the
/// zone's answer, a fleet diff (`shadow_diff`) from the request to the last zone's answer.
fn record_fanout(kind: &'static str, start: std::time::Instant, outcome: &'static str) {
    metrics::histogram!(
        umbra_api::metrics::FANOUT_SECONDS,
        "kind" => kind,
        "outcome" => outcome
    )
    .record(start.elapsed().as_secs_f64());
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
/// stops early when the client goes away. Returns the aggregate and whether the client is
/// still there.
async fn fold(
    mut aggregate: Aggregate,
    mut rx: mpsc::Receiver<FanoutEvent>,
    out: Option<&mpsc::Sender<Result<Bytes, Infallible>>>,
    mut render: impl FnMut(Line<'_>) -> Vec<u8>,
) -> (Aggregate, bool) {
    let mut pending: Vec<Vec<u8>> = Vec::new();
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
                    return (aggregate, false);
                }
            }
        }
    }
    (aggregate, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, ops: &[&str], error: &str) -> DataplaneDiff {
        DataplaneDiff {
            name: name.into(),
            operations: ops.iter().map(|o| o.as_bytes().to_vec()).collect(),
            error: error.into(),
        }
    }

    const A: &str = r#"{"op":"replace","path":"/a","value":1}"#;
    const B: &str = r#"{"op":"remove","path":"/b"}"#;

    fn plan() -> Plan {
        Plan {
            policies: vec!["MeshTimeout/t".into()],
            zones: BTreeMap::from([
                ("z1".into(), vec!["d1".into(), "d2".into(), "d3".into()]),
                ("z2".into(), vec!["d1".into(), "d4".into()]),
            ]),
        }
    }

    #[test]
    fn groups_identical_operations_across_zones_largest_first() {
        let plan = plan();
        let mut agg = Aggregate::new(&plan, true);
        assert!(
            matches!(agg.add("z1", item("d1", &[A, B], "")), Some((_, DpOutcome::Changed(ids))) if ids.len() == 2)
        );
        assert_eq!(
            agg.add("z1", item("d2", &[], "")).unwrap().1,
            DpOutcome::Unchanged
        );
        assert!(
            matches!(agg.add("z1", item("d3", &[], "boom")).unwrap().1, DpOutcome::Failed(e) if e == "boom")
        );
        agg.add("z2", item("d1", &[A], "")).unwrap();
        // Not asked for, or twice: ignored.
        assert!(agg.add("z2", item("d9", &[A], "")).is_none());
        assert!(agg.add("z2", item("d1", &[A], "")).is_none());
        assert!(agg.add("z3", item("d1", &[A], "")).is_none());
        assert_eq!(agg.zone_done("z1", Ok(())).unwrap().status, "ok");
        // z2 never answered for d4.
        let z2 = agg.zone_done("z2", Ok(())).unwrap().clone();
        assert_eq!((z2.status, z2.failed, z2.changed), ("failed", 1, 1));
        assert_eq!(
            agg.totals(),
            Totals {
                considered: 5,
                changed: 2,
                unchanged: 1,
                failed: 2
            }
        );
        assert!(agg.partial());
        let report: Value =
            serde_json::from_slice(&agg.report("m", &plan, &Promotion::All, true)).unwrap();
        assert_eq!(
            report["changes"][0]["operation"],
            json!({"op":"replace","path":"/a","value":1})
        );
        assert_eq!(report["changes"][0]["count"], 2);
        assert_eq!(
            report["changes"][0]["dataplanes"],
            json!([{"zone": "z1", "name": "d1"}, {"zone": "z2", "name": "d1"}])
        );
        assert_eq!(report["changes"][1]["count"], 1);
        assert_eq!(
            report["dataplanes"][0]["patch"],
            json!([{"op":"replace","path":"/a","value":1}, {"op":"remove","path":"/b"}])
        );
        assert_eq!(report["failures"].as_array().unwrap().len(), 2);
        assert_eq!(report["failures"][1]["name"], "d4");
        assert_eq!(report["partial"], true);
        assert!(report["policy"].is_null());
    }

    #[test]
    fn a_failed_zone_fails_its_missing_dataplanes_with_its_reason() {
        let plan = plan();
        let mut agg = Aggregate::new(&plan, false);
        agg.add("z2", item("d1", &[B], "")).unwrap();
        let t = agg
            .zone_done(
                "z2",
                Err("zone \"z2\" did not answer within 3000 ms".into()),
            )
            .unwrap()
            .clone();
        assert_eq!((t.changed, t.failed), (1, 1));
        assert!(t.error.unwrap().contains("3000 ms"));
        let report: Value =
            serde_json::from_slice(&agg.report("m", &plan, &Promotion::All, false)).unwrap();
        assert!(report.get("dataplanes").is_none());
        assert_eq!(report["zones"][0]["status"], "pending");
        assert_eq!(
            report["failures"][0]["error"],
            "zone \"z2\" did not answer within 3000 ms"
        );
        // A zone sending something that is not JSON fails that DPP only.
        assert!(matches!(
            agg.add("z1", item("d1", &["{nope"], "")).unwrap().1,
            DpOutcome::Failed(_)
        ));
        assert!(matches!(
            agg.add("z1", item("d2", &[A], "")).unwrap().1,
            DpOutcome::Changed(_)
        ));
    }

    #[test]
    fn query_parsing() {
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        let q = ShadowDiffQuery::parse(&pairs(&[
            ("policy", "MeshTimeout/x"),
            ("format", "full"),
            ("zone", "z1"),
            ("timeout", "5s"),
        ]))
        .unwrap();
        assert!(q.full);
        assert_eq!(q.zone.as_deref(), Some("z1"));
        assert_eq!(q.timeout, Duration::from_secs(5));
        assert_eq!(q.promotion.to_string(), "MeshTimeout/x");
        for bad in [
            ("format", "json"),
            ("timeout", "0s"),
            ("timeout", "1h"),
            ("policy", "x"),
        ] {
            let e = ShadowDiffQuery::parse(&pairs(&[bad])).unwrap_err();
            assert_eq!(e.invalid_parameters[0].field, bad.0);
        }
    }
}
