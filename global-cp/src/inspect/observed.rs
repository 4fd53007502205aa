//! `GET /meshes/{mesh}/{plural}/{name}/_observed` on the Global (issue 40): what an observed
//! shadow policy would have done to the traffic of every DPP it shapes, fleet-wide, per zone
//! and per DPP ([`umbra_core::observed::Report`]).
//!
//! The zones that own a DPP the policy shapes as an observed input (computed from the
//! Dataplanes they synced, as [`super::affected`] does) are asked at once over KDS
//! (`ObservedRequest`); each reads its Envoys' counters (`umbra_zone_cp::observed`) and
//! answers its report, which are merged here. A zone that is offline, late (past
//! [`OBSERVED_TIMEOUT`]), of an earlier release or failing is listed with the reason and
//! counted as nothing: the report is then `partial`. Refusals (400, 404, 409) are the zones'
//! ([`umbra_api::observed`]).

use std::collections::BTreeSet;
use std::time::Duration;

use umbra_api::error::ApiError;
use umbra_core::observed::{Effect, Report};
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::ObservedRequest;

use super::context::{
    ask_zone_json, for_each_dataplane_page, mesh_exists, mesh_policies, record_fanout,
    InspectContext,
};
use crate::store::Stored;

/// How long the Global waits for a zone's report (under [`crate::api::REQUEST_TIMEOUT`]; the
/// zone stops reading Envoys a second before).
pub const OBSERVED_TIMEOUT: Duration = Duration::from_secs(9);
/// Largest zone report read (bytes).
pub const MAX_REPORT_BYTES: u64 = 32 << 20;

/// The zones owning a DPP whose Live config observes one policy.
struct Observing {
    set: PolicySet,
    ty: ResourceType,
    name: String,
    zones: BTreeSet<String>,
}

impl Observing {
    fn add(&mut self, page: &[Stored]) {
        for s in page {
            let (Some(zone), Some(dp)) = (&s.zone, s.resource.as_dataplane()) else {
                continue;
            };
            if self.zones.contains(zone) {
                continue;
            }
            let observes = umbra_core::dependencies::dependencies(dp, &self.set)
                .policies
                .iter()
                .any(|d| d.ty == self.ty && d.name == self.name && d.observed);
            if observes {
                self.zones.insert(zone.clone());
            }
        }
    }
}

/// The fleet-wide report on policy `name` of type `ty` in `mesh` (see the module docs).
///
/// # Errors
/// 400 (not an observable type), 404 (mesh, policy), 409 (not observed), store failures.
pub async fn observed(
    cx: &InspectContext,
    mesh: &str,
    ty: ResourceType,
    name: &str,
) -> Result<Report, ApiError> {
    umbra_api::observed::check_type(ty)?;
    mesh_exists(&*cx.store, mesh).await?;
    let key = ResourceKey {
        ty,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    let policy = cx.store.get(&key).await.map_err(ApiError::from)?;
    umbra_api::observed::check_policy(&key, policy.as_ref().map(|s| &s.resource))?;
    let began = std::time::Instant::now();
    let resources = mesh_policies(&*cx.store, mesh).await?;
    let observing = Observing {
        set: PolicySet::build(mesh, &resources, View::Live),
        ty,
        name: name.to_owned(),
        zones: BTreeSet::new(),
    };
    let zones = for_each_dataplane_page(&*cx.store, mesh, observing, Observing::add)
        .await?
        .zones;
    let asks = zones.into_iter().map(|zone| async move {
        let answer = ask(cx, &zone, mesh, ty, name).await;
        (zone, answer)
    });
    let answers = futures_util::future::join_all(asks).await;
    let outcome = if answers.iter().all(|(_, a)| a.is_ok()) {
        "ok"
    } else {
        "partial"
    };
    record_fanout("observed", began, outcome);
    let effect = Effect::of(ty).unwrap_or_default();
    Ok(Report::merge(
        mesh,
        (&format!("{}/{name}", ty.name()), effect),
        answers,
    ))
}

/// Zone `zone`'s report, or why there is none.
async fn ask(
    cx: &InspectContext,
    zone: &str,
    mesh: &str,
    ty: ResourceType,
    name: &str,
) -> Result<Report, String> {
    let kind = Kind::Observed(ObservedRequest {
        mesh: mesh.to_owned(),
        r#type: ty.name().to_owned(),
        name: name.to_owned(),
    });
    ask_zone_json(&cx.hub, zone, kind, OBSERVED_TIMEOUT, MAX_REPORT_BYTES).await
}
