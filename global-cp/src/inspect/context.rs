//! What every inspect answer on the Global reads ([`InspectContext`]: the store, the zones'
//! inspect hub, the zone registry) and the lookups they share: which zone owns a DPP
//! ([`locate`]), a mesh's policies ([`mesh_policies`]), a mesh's Dataplanes page by page off the
//! runtime ([`for_each_dataplane_page`]), and the fan-out latency metric ([`record_fanout`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use umbra_api::error::ApiError;
use umbra_core::resource::{Resource, ResourceKey, ResourceType, TypeKind};
use umbra_kds::resource::DISPLAY_NAME_LABEL;

use super::hub::{CallError, InspectHub};
use crate::store::{list_all, mesh_key, ListQuery, Store, Stored};
use crate::zones::ZoneRegistry;

/// What the inspect answers read.
#[derive(Debug, Clone)]
pub struct InspectContext {
    /// The Global's store (Meshes, policies, the zones' Dataplanes).
    pub store: Arc<dyn Store>,
    /// Calls to zones over their KDS connections.
    pub hub: Arc<InspectHub>,
    /// The zones the Global knows.
    pub zones: Arc<ZoneRegistry>,
}

/// A failed zone call as the API answers it: 503 naming the zone and why.
pub fn call_error(e: &CallError) -> ApiError {
    ApiError::status(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
}

/// A DPP the Global knows, with its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Its zone.
    pub zone: String,
    /// Its name in its zone.
    pub local: String,
}

/// Where a Global-stored Dataplane lives: its zone and its name there (`None` for one with no
/// zone).
pub fn locate_in(stored: &Stored) -> Option<Located> {
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

/// `Ok` when `mesh` exists.
///
/// # Errors
/// 404 naming the mesh; store failures.
pub async fn mesh_exists(store: &dyn Store, mesh: &str) -> Result<(), ApiError> {
    store
        .get(&mesh_key(mesh))
        .await
        .map_err(ApiError::from)?
        .map(|_| ())
        .ok_or_else(|| ApiError::not_found(format!("mesh {mesh:?} not found")))
}

/// The DPP called `name` in `mesh`: its Global name, or its unique name in its zone.
///
/// # Errors
/// 404 (mesh, DPP, no zone), 400 (the name is ambiguous across zones), store failures.
pub async fn locate(store: &dyn Store, mesh: &str, name: &str) -> Result<Located, ApiError> {
    mesh_exists(store, mesh).await?;
    locate_of(store, ResourceType::Dataplane, mesh, name).await
}

/// Where the ZoneIngress `name` (its Global name, or its name in its zone when unique) lives.
///
/// # Errors
/// 404 when there is none, 400 when several zones have one of that name.
pub async fn locate_ingress(store: &dyn Store, name: &str) -> Result<Located, ApiError> {
    locate_of(store, ResourceType::ZoneIngress, "", name).await
}

/// Where the ZoneEgress `name` (its Global name, or its name in its zone when unique) lives.
///
/// # Errors
/// 404 when there is none, 400 when several zones have one of that name.
pub async fn locate_egress(store: &dyn Store, name: &str) -> Result<Located, ApiError> {
    locate_of(store, ResourceType::ZoneEgress, "", name).await
}

async fn locate_of(
    store: &dyn Store,
    ty: ResourceType,
    mesh: &str,
    name: &str,
) -> Result<Located, ApiError> {
    let key = ResourceKey {
        ty,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    if let Some(found) = store
        .get(&key)
        .await
        .map_err(ApiError::from)?
        .as_ref()
        .and_then(locate_in)
    {
        return Ok(found);
    }
    let labels = BTreeMap::from([(DISPLAY_NAME_LABEL.to_owned(), name.to_owned())]);
    let scope = (!mesh.is_empty()).then_some(mesh);
    let same = list_all(store, ty, scope, &labels)
        .await
        .map_err(ApiError::from)?;
    let what = match ty {
        ResourceType::ZoneIngress => "zone ingress",
        ResourceType::ZoneEgress => "zone egress",
        _ => "dataplane",
    };
    match same.as_slice() {
        [one] => locate_in(one)
            .ok_or_else(|| ApiError::not_found(format!("{what} {name:?} has no zone"))),
        [] if mesh.is_empty() => Err(ApiError::not_found(format!("{what} {name:?} not found"))),
        [] => Err(ApiError::not_found(format!(
            "{what} {name:?} not found in mesh {mesh:?}"
        ))),
        many => Err(ApiError::bad_parameter(
            "name",
            format!(
                "{} {what}s are called {name:?} in their zones; use the Global name: {}",
                many.len(),
                many.iter()
                    .map(|s| s.resource.meta.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Every Mesh-scoped policy of `mesh` and its Mesh, read from the store.
///
/// # Errors
/// Store failures.
pub async fn mesh_policies(store: &dyn Store, mesh: &str) -> Result<Vec<Resource>, ApiError> {
    Ok(mesh_stored(store, mesh)
        .await?
        .into_iter()
        .map(|s| s.resource)
        .collect())
}

/// [`mesh_policies`] as stored (versions included): every policy of `mesh`, its
/// ExternalServices and MeshGateways, and the Mesh last.
///
/// # Errors
/// 503 when the store is unavailable.
pub async fn mesh_stored(store: &dyn Store, mesh: &str) -> Result<Vec<Stored>, ApiError> {
    let mut out = Vec::new();
    for ty in ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.kind() != TypeKind::Infra && t.is_mesh_scoped() && *t != ResourceType::Secret)
    {
        out.extend(
            list_all(store, ty, Some(mesh), &BTreeMap::new())
                .await
                .map_err(ApiError::from)?,
        );
    }
    if let Some(m) = store.get(&mesh_key(mesh)).await.map_err(ApiError::from)? {
        out.push(m);
    }
    Ok(out)
}

/// Dataplanes read per store page while walking a mesh's (they can be large; callers keep
/// only what they need of each).
pub const DATAPLANE_PAGE: u64 = 200;

/// Feed `mesh`'s Dataplanes to `f` with `acc`, [`DATAPLANE_PAGE`] at a time, off the async
/// runtime; returns `acc`.
///
/// # Errors
/// Store failures; a panic in `f` (500).
pub async fn for_each_dataplane_page<T: Send + 'static>(
    store: &dyn Store,
    mesh: &str,
    mut acc: T,
    f: impl Fn(&mut T, &[Stored]) + Send + Copy + 'static,
) -> Result<T, ApiError> {
    let mut offset = 0;
    loop {
        let page = store
            .list(&ListQuery {
                ty: ResourceType::Dataplane,
                mesh: Some(mesh.to_owned()),
                labels: BTreeMap::new(),
                name_contains: None,
                dataplane: Default::default(),
                offset,
                size: DATAPLANE_PAGE,
            })
            .await
            .map_err(ApiError::from)?;
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

/// `umbra_fanout_seconds{kind, outcome}`: a forwarded call (`forward`) from the request to the
/// zone's answer, a fleet diff (`shadow_diff`) from the request to the last zone's answer.
pub fn record_fanout(kind: &'static str, start: std::time::Instant, outcome: &'static str) {
    metrics::histogram!(
        umbra_runtime::metrics::FANOUT_SECONDS,
        "kind" => kind,
        "outcome" => outcome
    )
    .record(start.elapsed().as_secs_f64());
}

/// Ask `zone` `kind` (a call answered with `HttpAnswer` frames carrying JSON) within `timeout`
/// and read the answer, at most `max_bytes`, as `T`.
///
/// # Errors
/// Why, in words about the zone ("it answered 404: ...", "its answer is N bytes, over ..."):
/// the zone cannot be asked, answers an error frame (a zone of an earlier release reads an
/// unknown call as naming none and answers 400), a status other than 200 (with its
/// `detail`), more than `max_bytes`, or something that does not read as `T`.
pub async fn ask_zone_json<T: serde::de::DeserializeOwned>(
    hub: &InspectHub,
    zone: &str,
    kind: umbra_kds::pb::inspect_request::Kind,
    timeout: std::time::Duration,
    max_bytes: u64,
) -> Result<T, String> {
    use umbra_kds::pb::inspect_response::Body as Frame;
    let mut call = hub
        .call(zone, kind, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let (mut status, mut body) = (200, Vec::new());
    while let Some(frame) = call.next().await.map_err(|e| e.to_string())? {
        match frame.body {
            Some(Frame::Http(h)) => {
                if h.total_bytes > max_bytes {
                    return Err(format!(
                        "its answer is {} bytes, over the Global's {max_bytes}-byte limit",
                        h.total_bytes
                    ));
                }
                status = h.status;
                body.extend_from_slice(&h.chunk);
            }
            Some(Frame::Error(e)) => {
                return Err(format!("it answered {}: {}", e.status, e.message))
            }
            _ => return Err("it sent an unexpected answer".to_owned()),
        }
    }
    if status != 200 {
        let detail = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["detail"].as_str().map(str::to_owned))
            .unwrap_or_default();
        return Err(format!("it answered {status}: {detail}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("its answer does not read: {e}"))
}
