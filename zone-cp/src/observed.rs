//! `GET /meshes/{mesh}/{plural}/{name}/_observed` answered by a zone (issue 40): what an
//! observed shadow policy (`kuma.io/effect: shadow`, `umbra.io/observe: "true"`) would have done
//! to the traffic this zone's DPPs saw, read from their Envoys' own counters
//! ([`umbra_core::observed`]). The Global asks every zone the same over KDS and merges the
//! answers ([`crate::remote_inspect`]).
//!
//! - The DPPs read are those of this zone whose Live config the policy shapes as an observed
//!   input ([`umbra_core::dependencies`], `observed`), sorted by name; at most
//!   [`MAX_DATAPLANES`] of them, the others counted as unread (the report is then `partial`).
//! - Each is read through [`crate::envoy_admin::observer_stats`] (its limits and timeouts),
//!   [`READS_AT_ONCE`] at a time, until the report's deadline ([`API_DEADLINE`] on the zone's
//!   API, the Global's own over KDS); those not read by then are counted as unread. A DPP that cannot be read is listed with the reason and
//!   counted as unread; one whose Envoy has no counter for the policy yet (its config with
//!   the observer not running) is listed with `observing: false`.
//!
//! [`traffic`] reads a staged rollout's traffic counters the same way (asked by the Global over
//! KDS only).
//!
//! Errors: 400 for a type that is not a policy, or one observe mode does not render; 404 for
//! an unknown mesh or policy; 409 for a policy that is not observed.

use axum::http::StatusCode;
use umbra_api::error::ApiError;
use umbra_core::dataplane::DpKey;
use umbra_core::observed::{parse_stats, DataplaneReport, Effect, Report};
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_core::view::{PolicySet, View};

use crate::insight::Insights;
use crate::reconciler::Reconciler;
use crate::store::Store;

/// Most DPPs one report reads.
pub const MAX_DATAPLANES: usize = 1000;
/// Envoy admins read at once by one report.
pub const READS_AT_ONCE: usize = 4;
/// How long a report asked of the zone's API reads Envoys (under the API's request timeout).
pub const API_DEADLINE: std::time::Duration = std::time::Duration::from_secs(8);

/// Zone `zone`'s report on policy `policy` (see the module docs).
///
/// # Errors
/// See the module docs.
pub async fn report(
    store: &Store,
    insights: &Insights,
    reconciler: Option<&Reconciler>,
    zone: &str,
    policy: &ResourceKey,
    deadline: tokio::time::Instant,
) -> Result<Report, ApiError> {
    let (mesh, ty, name) = (policy.mesh.as_str(), policy.ty, policy.name.as_str());
    check(store, mesh, ty, name)?;
    let effect = Effect::of(ty).unwrap_or_default();
    let mut selected = {
        let (store, mesh, name) = (store.clone(), mesh.to_owned(), name.to_owned());
        tokio::task::spawn_blocking(move || observing_dataplanes(&store, &mesh, ty, &name))
            .await
            .map_err(|e| {
                ApiError::status(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("observed task failed: {e}"),
                )
            })?
    };
    let skipped = selected.len().saturating_sub(MAX_DATAPLANES) as u64;
    selected.truncate(MAX_DATAPLANES);
    let shares: Vec<DataplaneReport> = read_each(
        store,
        insights,
        reconciler,
        mesh,
        selected,
        Read::Observers,
        deadline,
    )
    .await
    .into_iter()
    .map(|(dp, text)| match text {
        Ok(text) => DataplaneReport::from_stats(&dp, effect, name, &parse_stats(&text)),
        Err(e) => DataplaneReport::unread(&dp, e),
    })
    .collect();
    Ok(Report::zone(
        mesh,
        (&format!("{}/{name}", ty.name()), effect),
        zone,
        shares,
        skipped,
    ))
}

/// What [`read_each`] reads of each Envoy.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Observe mode's counters ([`crate::envoy_admin::observer_stats`]).
    Observers,
    /// A gate's traffic counters ([`crate::envoy_admin::traffic_stats`]).
    Traffic,
}

/// The stats text of each DPP of `names` in `mesh` (or why it could not be read),
/// [`READS_AT_ONCE`] at a time, in order; those not read by `deadline` say so.
async fn read_each(
    store: &Store,
    insights: &Insights,
    reconciler: Option<&Reconciler>,
    mesh: &str,
    names: Vec<String>,
    what: Read,
    deadline: tokio::time::Instant,
) -> Vec<(String, Result<String, String>)> {
    use futures_util::StreamExt as _;
    let read = move |dp: String| async move {
        let key = DpKey::new(mesh, dp.as_str());
        let stats = async {
            match what {
                Read::Observers => {
                    crate::envoy_admin::observer_stats(store, insights, reconciler, &key).await
                }
                Read::Traffic => {
                    crate::envoy_admin::traffic_stats(store, insights, reconciler, &key).await
                }
            }
        };
        let text = match tokio::time::timeout_at(deadline, stats).await {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(e.detail),
            Err(_) => Err("not read before the deadline".to_owned()),
        };
        (dp, text)
    };
    futures_util::stream::iter(names)
        .map(read)
        .buffered(READS_AT_ONCE)
        .collect()
        .await
}

/// A staged rollout's traffic samples (issue 40) of DPPs `names` of `mesh` in this zone: the
/// `TrafficRequest` answer of the KDS proto, `{"samples": {name: TrafficSample}, "errors":
/// {name: why}}`, every DPP named in one of the two (at most [`MAX_DATAPLANES`]: the others are
/// errors), read until `deadline`. With `live` policies (`Type/name`, the stage's copies),
/// also `"acked": [name]`, `"waiting": {name: why}` and `"rejected": {name: why}` (a failed
/// generation or a NACK): whether each DPP's Envoy runs a config
/// with them in effect ([`crate::convergence`]), checked before its counters are read; with
/// `acks_only`, no counter is read (`samples` is empty).
#[allow(clippy::too_many_arguments)]
pub async fn traffic(
    store: &Store,
    insights: &Insights,
    reconciler: Option<&Reconciler>,
    mesh: &str,
    mut names: Vec<String>,
    live: &[String],
    acks_only: bool,
    deadline: tokio::time::Instant,
) -> serde_json::Value {
    let mut errors = serde_json::Map::new();
    for dp in names.iter().skip(MAX_DATAPLANES) {
        errors.insert(
            dp.clone(),
            format!("over the {MAX_DATAPLANES} DPPs one request reads").into(),
        );
    }
    names.truncate(MAX_DATAPLANES);
    let (mut acked, mut waiting, mut rejected) =
        (Vec::new(), serde_json::Map::new(), serde_json::Map::new());
    if !live.is_empty() {
        use crate::convergence::{acknowledged, NotRunning, Stage};
        let stage = Stage::read(store, mesh, live);
        for dp in &names {
            let state = match &stage {
                Ok(stage) => acknowledged(store, insights, reconciler, mesh, dp, stage),
                Err(why) => Err(NotRunning::Waiting(why.clone())),
            };
            match state {
                Ok(()) => acked.push(serde_json::Value::String(dp.clone())),
                Err(NotRunning::Waiting(why)) => {
                    waiting.insert(dp.clone(), why.into());
                }
                Err(NotRunning::Rejected(why)) => {
                    rejected.insert(dp.clone(), why.into());
                }
            }
        }
    }
    if acks_only && !live.is_empty() {
        return serde_json::json!({"samples": {}, "errors": errors, "acked": acked, "waiting": waiting, "rejected": rejected});
    }
    let mut samples = serde_json::Map::new();
    for (dp, text) in read_each(
        store,
        insights,
        reconciler,
        mesh,
        names,
        Read::Traffic,
        deadline,
    )
    .await
    {
        match text {
            Ok(text) => {
                let sample = umbra_core::rollout::TrafficSample::parse(&text);
                samples.insert(dp, serde_json::to_value(sample).unwrap_or_default());
            }
            Err(e) => {
                errors.insert(dp, e.into());
            }
        }
    }
    if live.is_empty() {
        return serde_json::json!({"samples": samples, "errors": errors});
    }
    serde_json::json!({"samples": samples, "errors": errors, "acked": acked, "waiting": waiting, "rejected": rejected})
}

/// The refusals of the module docs.
fn check(store: &Store, mesh: &str, ty: ResourceType, name: &str) -> Result<(), ApiError> {
    umbra_api::observed::check_type(ty)?;
    if store.get(&ResourceKey::mesh(mesh)).is_none() {
        return Err(ApiError::not_found(format!("mesh {mesh:?} not found")));
    }
    let key = ResourceKey {
        ty,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    let policy = store.get(&key);
    umbra_api::observed::check_policy(&key, policy.as_ref().map(|s| &s.resource))
}

/// The names of this zone's Dataplanes in `mesh` whose Live config observes policy `ty`/`name`,
/// sorted.
fn observing_dataplanes(store: &Store, mesh: &str, ty: ResourceType, name: &str) -> Vec<String> {
    let resources = store.mesh_resources(mesh);
    let set = PolicySet::build(mesh, &resources, View::Live);
    let mut names: Vec<String> = resources
        .iter()
        .filter_map(|r| Some((r, r.as_dataplane()?)))
        .filter(|(_, dp)| {
            umbra_core::dependencies::dependencies(dp, &set)
                .policies
                .iter()
                .any(|d| d.ty == ty && d.name == name && d.observed)
        })
        .map(|(r, _)| r.meta.name.clone())
        .collect();
    names.sort();
    names
}
