//! Per-DPP inspect on the Global: `GET /meshes/{mesh}/dataplanes/{name}/_config` and
//! `.../_rules` (with `shadow=` and `include=diff`, seed 000) go to the zone that owns the DPP
//! and return what its API returns (same bodies, same 400/404), or a 503 naming the zone when
//! it is offline or does not answer within [`FORWARD_TIMEOUT`] (shorter than the API's request
//! timeout). `name` is the Global's name of the DPP (`<name>-<hash>`) or, when unique in the
//! mesh, its name in its zone. An answer over [`MAX_FORWARDED_BYTES`] is a 502 naming the DPP
//! and the size. `GET /zone-ingresses/{name}/_config` goes the same way to the ingress's zone
//! (an empty mesh in the call names a ZoneIngress, `ZONE_EGRESS_KEY_MESH` a ZoneEgress). The
//! Envoy admin views of a DPP, a ZoneIngress or a ZoneEgress (`xds`, `stats`, `clusters`: the zone's `umbra_zone_cp::envoy_admin`) go the
//! same way, their media type (JSON or text) relayed.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use umbra_api::error::ApiError;
use umbra_kds::pb::dataplane_inspect::Endpoint;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inspect_response::Body as Frame;
use umbra_kds::pb::{DataplaneInspect, QueryPair};

use super::context::{call_error, locate, locate_ingress, record_fanout, InspectContext};
use crate::zones::ZoneRegistry;

/// Deadline of a forwarded per-DPP call (shorter than [`crate::api::REQUEST_TIMEOUT`]).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(8);
/// Largest per-DPP answer the Global relays (bytes).
pub const MAX_FORWARDED_BYTES: u64 = 64 << 20;

/// Forward `_config`, `_rules` or an admin view of DPP `name` to its zone and relay the
/// answer.
///
/// # Errors
/// 404 (mesh, DPP), 400 (ambiguous name), 503 (zone offline or late), 502 (answer too large),
/// 501 (an admin view of a zone that reports no release: one older than the admin views), or
/// the zone's own error.
pub async fn forward(
    cx: &InspectContext,
    mesh: &str,
    name: &str,
    endpoint: Endpoint,
    query: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    let began = std::time::Instant::now();
    let out = forward_call(cx, mesh, name, endpoint, query).await;
    let outcome = match &out {
        Ok(r) if r.status().is_success() => "ok",
        _ => "error",
    };
    record_fanout("forward", began, outcome);
    out
}

/// Why `zone` cannot answer `endpoint`, when it cannot: a zone of a release before the admin
/// views (`xds`, `stats`, `clusters`) reads their endpoint as `_config` (an unknown enum value
/// decodes as the default), and those zones report no release over KDS either. Read from
/// `zones`, this replica's registry: `None` for a zone that is not connected here (offline, the
/// call answers 503; or held by another replica, whose inter-CP server checks the same).
pub fn older_zone(zones: &ZoneRegistry, zone: &str, endpoint: Endpoint) -> Option<String> {
    let admin = matches!(
        endpoint,
        Endpoint::Xds | Endpoint::Stats | Endpoint::Clusters
    );
    (admin && zones.get(zone).is_some_and(|z| z.online && z.version.is_none())).then(|| {
        format!(
            "zone {zone:?} runs an Umbra release that cannot read Envoy admins (it reports no release over KDS); upgrade it"
        )
    })
}

async fn forward_call(
    cx: &InspectContext,
    mesh: &str,
    name: &str,
    endpoint: Endpoint,
    query: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    // An empty mesh: a ZoneIngress; `ZONE_EGRESS_KEY_MESH`: a ZoneEgress.
    let dp = if mesh.is_empty() {
        locate_ingress(&*cx.store, name).await?
    } else if mesh == umbra_core::dataplane::ZONE_EGRESS_KEY_MESH {
        crate::inspect::context::locate_egress(&*cx.store, name).await?
    } else {
        locate(&*cx.store, mesh, name).await?
    };
    if let Some(why) = older_zone(&cx.zones, &dp.zone, endpoint) {
        return Err(ApiError::status(StatusCode::NOT_IMPLEMENTED, why));
    }
    let kind = Kind::Dataplane(DataplaneInspect {
        mesh: mesh.to_owned(),
        name: dp.local.clone(),
        endpoint: endpoint.into(),
        query: query
            .into_iter()
            .map(|(key, value)| QueryPair { key, value })
            .collect(),
    });
    let mut call = cx
        .hub
        .call(&dp.zone, kind, FORWARD_TIMEOUT)
        .await
        .map_err(|e| call_error(&e))?;
    let mut status = 200;
    let mut content_type = String::new();
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
                if !h.content_type.is_empty() {
                    content_type = h.content_type;
                }
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
    // Only the media types a zone sends; anything else is relayed as bytes.
    let content_type = match content_type.as_str() {
        "" | "application/json" => "application/json",
        "text/plain" => "text/plain",
        _ => "application/octet-stream",
    };
    let mut response = (
        status,
        [(header::CONTENT_TYPE, content_type)],
        Body::from(body),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&dp.zone) {
        response.headers_mut().insert("x-umbra-zone", v);
    }
    Ok(response)
}
