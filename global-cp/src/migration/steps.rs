//! The steps of a staged rollout (issue 40), one per [`Phase`]: each does its store
//! transaction and records its phase and decision in the rollout ([`super::rollout`] writes
//! it, and documents the whole); and [`read_traffic`], the staged DPPs' counters read through
//! their zones.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::rollout::{evaluate_gate, TrafficSample, ROLLOUT_LABEL};
use umbra_core::view::Promotion;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inspect_response::Body as Frame;
use umbra_kds::pb::TrafficRequest;

use super::record::{changed_inputs, inputs_of, promoted, Applied, PlanRecord};
use super::stages::{
    copies, dpp_key, promoted_policies, refs, roll_back, selected_dataplanes, stage_tags, Phase,
    RolloutRecord, RolloutState,
};
use super::{fleet_diff, save};
use crate::inspect::context::{mesh_stored, InspectContext};
use crate::inspect::shadow_diff::query::DEFAULT_FLEET_TIMEOUT;
use crate::store::{list_all, now_rfc3339, Stored, Write};

/// How long a zone may take to read its DPPs' counters.
pub const TRAFFIC_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) async fn dataplanes(cx: &InspectContext, mesh: &str) -> Result<Vec<Stored>, ApiError> {
    Ok(list_all(
        &*cx.store,
        ResourceType::Dataplane,
        Some(mesh),
        &BTreeMap::new(),
    )
    .await?)
}

pub(super) async fn write_copies(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    plan: &PlanRecord,
    stage: usize,
) {
    let copies = match copies(plan, &stage_tags(r, stage), stage) {
        Ok(c) => c,
        Err(e) => return roll_back(r, Some(stage), "failed", e),
    };
    let writes = copies
        .iter()
        .map(|c| Write::Put {
            resource: Box::new(c.clone()),
            expected: Some(0),
        })
        .collect();
    let revision = match cx.store.transact(writes).await {
        Ok(t) => Some(t.revision),
        Err(e) => {
            // Written before this step was recorded (a restart in between): go on.
            let mut there = true;
            for c in &copies {
                there &= matches!(cx.store.get(&c.key()).await, Ok(Some(s)) if s.resource.spec == c.spec);
            }
            if !there {
                return roll_back(
                    r,
                    Some(stage),
                    "failed",
                    format!("the stage's copies cannot be written: {e}"),
                );
            }
            None
        }
    };
    let names: Vec<String> = copies
        .iter()
        .map(|c| format!("{}/{}", c.ty().name(), c.meta.name))
        .collect();
    r.decide(
        Some(stage),
        "copies written",
        format!("shadow: {}", names.join(", ")),
        revision,
        None,
    );
    r.phase = Phase::Created { stage };
}

pub(super) async fn go_live(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    plan: &PlanRecord,
    stage: usize,
) {
    let copies = match copies(plan, &stage_tags(r, stage), stage) {
        Ok(c) => c,
        Err(e) => return roll_back(r, Some(stage), "failed", e),
    };
    let stored = match mesh_stored(&*cx.store, &r.mesh).await {
        Ok(s) => s,
        Err(e) => {
            return roll_back(
                r,
                Some(stage),
                "failed",
                format!("the store cannot be read: {}", e.detail),
            )
        }
    };
    let policies: Vec<Resource> = stored.iter().map(|s| s.resource.clone()).collect();
    let dps = match dataplanes(cx, &r.mesh).await {
        Ok(d) => d,
        Err(e) => {
            return roll_back(
                r,
                Some(stage),
                "failed",
                format!("the store cannot be read: {}", e.detail),
            )
        }
    };
    let copy_refs = refs(&copies);
    let current: Vec<&Stored> = stored
        .iter()
        .filter(|s| copy_refs.contains(&(s.resource.ty(), s.resource.meta.name.clone())))
        .collect();
    let already_live =
        current.len() == copies.len() && current.iter().all(|s| !s.resource.meta.is_shadow());
    let staged = selected_dataplanes(&r.mesh, &policies, &copy_refs, &dps);
    if !already_live {
        // The stage's own diff: only the staged DPPs may change.
        let promotion = Promotion::Set {
            promote: copy_refs.clone(),
            retire: BTreeSet::new(),
        };
        let inputs = inputs_of(&stored);
        let diff = match fleet_diff(
            cx,
            &r.mesh,
            &policies,
            &inputs,
            &promotion,
            DEFAULT_FLEET_TIMEOUT,
            false,
        )
        .await
        {
            Ok(d) => d,
            Err(e) => {
                return roll_back(
                    r,
                    Some(stage),
                    "failed",
                    format!("the stage's fleet diff failed: {}", e.detail),
                )
            }
        };
        let report = diff.report(&r.mesh, &promotion);
        if report.partial || report.totals.failed > 0 {
            return roll_back(
                r,
                Some(stage),
                "failed",
                format!(
                    "the stage's fleet diff is not whole ({} DPPs without a result, zones: {}): failing closed",
                    report.totals.failed,
                    report
                        .zones
                        .iter()
                        .map(|z| format!("{} {}", z.zone, z.status))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        let outside: BTreeSet<String> = report
            .changes
            .iter()
            .flat_map(|c| &c.dataplanes)
            .map(|d| dpp_key(d.zone, d.name))
            .filter(|k| !staged.contains_key(k))
            .collect();
        if !outside.is_empty() {
            let shown: Vec<&String> = outside.iter().take(10).collect();
            return roll_back(r, Some(stage), "refused", format!(
                "the stage would change {} DPPs outside it ({}{}): an old policy type switched off mesh-wide by its staged replacement (seed 000's rule) changes the others too; roll it out in one step",
                outside.len(),
                shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                if outside.len() > 10 { ", ..." } else { "" }
            ));
        }
    }
    // The others: the DPPs the plan's policies select that are not staged, of the staged
    // DPPs' services when some are.
    let originals = match promoted_policies(plan) {
        Ok(p) => p,
        Err(e) => return roll_back(r, Some(stage), "failed", e.detail),
    };
    let all = selected_dataplanes(&r.mesh, &policies, &refs(&originals), &dps);
    let services: BTreeSet<&String> = staged.values().flatten().collect();
    let unstaged: BTreeMap<&String, &BTreeSet<String>> = all
        .iter()
        .filter(|(k, _)| !staged.contains_key(*k))
        .collect();
    let same: Vec<String> = unstaged
        .iter()
        .filter(|(_, s)| s.iter().any(|x| services.contains(x)))
        .map(|(k, _)| (*k).clone())
        .collect();
    let others: Vec<String> = if same.is_empty() {
        unstaged.keys().map(|k| (*k).clone()).collect()
    } else {
        same
    };
    let keys: BTreeSet<String> = staged
        .keys()
        .cloned()
        .chain(others.iter().cloned())
        .collect();
    let samples = match read_traffic(cx, &r.mesh, &keys).await {
        Ok(s) => s,
        Err(e) => {
            return roll_back(
                r,
                Some(stage),
                "failed",
                format!("counters before the stage: {e}: failing closed"),
            )
        }
    };
    let mut revision = None;
    if !already_live {
        let writes = current
            .iter()
            .map(|s| Write::Put {
                resource: Box::new(promoted(&s.resource)),
                expected: Some(s.version),
            })
            .collect();
        match cx.store.transact(writes).await {
            Ok(t) => revision = Some(t.revision),
            Err(e) => {
                return roll_back(
                    r,
                    Some(stage),
                    "failed",
                    format!("the stage's copies cannot be promoted: {e}"),
                )
            }
        }
    }
    let pick = |ks: &mut dyn Iterator<Item = &String>| -> BTreeMap<String, TrafficSample> {
        ks.filter_map(|k| samples.get(k).map(|s| (k.clone(), *s)))
            .collect()
    };
    let staged_samples = pick(&mut staged.keys());
    let others_samples = pick(&mut others.iter());
    r.decide(
        Some(stage),
        "stage live",
        format!(
            "{} staged DPPs ({}), compared with {} others",
            staged_samples.len(),
            staged_samples
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            others_samples.len()
        ),
        revision,
        None,
    );
    r.phase = Phase::Live {
        stage,
        since: now_rfc3339(),
        staged: staged_samples,
        others: others_samples,
    };
}

/// Seconds since RFC 3339 `since` (0 when it cannot be read).
fn elapsed(since: &str) -> u64 {
    let Ok(t) = time::OffsetDateTime::parse(since, &time::format_description::well_known::Rfc3339)
    else {
        return 0;
    };
    u64::try_from((time::OffsetDateTime::now_utc() - t).whole_seconds()).unwrap_or(0)
}

pub(super) async fn gate(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    stage: usize,
    since: &str,
    staged: &BTreeMap<String, TrafficSample>,
    others: &BTreeMap<String, TrafficSample>,
) {
    if elapsed(since) < r.soak_seconds {
        return;
    }
    let keys: BTreeSet<String> = staged.keys().chain(others.keys()).cloned().collect();
    let now = match read_traffic(cx, &r.mesh, &keys).await {
        Ok(s) => s,
        Err(e) => {
            return roll_back(
                r,
                Some(stage),
                "gate failed",
                format!("counters after the soak: {e}: failing closed"),
            )
        }
    };
    let delta = |group: &BTreeMap<String, TrafficSample>| -> Vec<TrafficSample> {
        group
            .iter()
            .filter_map(|(k, before)| now.get(k).map(|n| n.since(before)))
            .collect()
    };
    let staged_delta = TrafficSample::sum(&delta(staged));
    let others_delta = TrafficSample::sum(&delta(others));
    let before = TrafficSample::sum(staged.values());
    let verdict = evaluate_gate(&staged_delta, &others_delta, &before, &r.thresholds);
    if verdict.passed {
        let detail = format!(
            "{} requests on the staged DPPs during the soak",
            staged_delta.requests
        );
        r.decide(Some(stage), "gate passed", detail, None, Some(verdict));
        let next = stage + 1;
        r.phase = if next + 1 >= r.stages.len() {
            Phase::Final
        } else {
            Phase::Pending { stage: next }
        };
    } else {
        let reason = format!("stage {} gate failed: {}", stage + 1, verdict.reason);
        r.decide(
            Some(stage),
            "gate failed",
            verdict.reason.clone(),
            None,
            Some(verdict),
        );
        r.phase = Phase::RollingBack { reason };
    }
}

/// The rollout's copies in the store now.
async fn stored_copies(cx: &InspectContext, r: &RolloutRecord) -> Result<Vec<Stored>, ApiError> {
    Ok(mesh_stored(&*cx.store, &r.mesh)
        .await?
        .into_iter()
        .filter(|s| s.resource.meta.labels.get(ROLLOUT_LABEL) == Some(&r.plan))
        .collect())
}

pub(super) async fn apply(cx: &InspectContext, r: &mut RolloutRecord, mut plan: PlanRecord) {
    let last = r.stages.len().saturating_sub(1);
    let read_at = match cx.store.revision().await {
        Ok(v) => v,
        Err(e) => {
            return roll_back(
                r,
                Some(last),
                "failed",
                format!("the store cannot be read: {e}"),
            )
        }
    };
    let stored = match mesh_stored(&*cx.store, &r.mesh).await {
        Ok(s) => s,
        Err(e) => {
            return roll_back(
                r,
                Some(last),
                "failed",
                format!("the store cannot be read: {}", e.detail),
            )
        }
    };
    let (copies, rest): (Vec<&Stored>, Vec<&Stored>) = stored
        .iter()
        .partition(|s| s.resource.meta.labels.get(ROLLOUT_LABEL) == Some(&r.plan));
    let rest: Vec<Stored> = rest.into_iter().cloned().collect();
    let changed = changed_inputs(&plan.inputs, &inputs_of(&rest));
    if !changed.is_empty() {
        // Applied before this step was recorded (a restart in between)?
        if copies.is_empty() && applied_already(&plan, &rest) {
            r.decide(
                Some(last),
                "applied",
                "the plan was applied before a restart",
                None,
                None,
            );
            r.state = RolloutState::Completed;
            r.phase = Phase::Done;
            return;
        }
        return roll_back(
            r,
            Some(last),
            "failed",
            format!("the mesh changed since the plan: {}", changed.join("; ")),
        );
    }
    let mut writes = Vec::new();
    for p in &plan.promote {
        match p.decode() {
            Ok(res) => writes.push(Write::Put {
                resource: Box::new(promoted(&res)),
                expected: Some(p.version),
            }),
            Err(e) => return roll_back(r, Some(last), "failed", format!("{}: {e}", p.shown())),
        }
    }
    for p in &plan.retire {
        match p.decode() {
            Ok(res) => writes.push(Write::Delete {
                key: res.key(),
                expected: Some(p.version),
            }),
            Err(e) => return roll_back(r, Some(last), "failed", format!("{}: {e}", p.shown())),
        }
    }
    for c in &copies {
        writes.push(Write::Delete {
            key: c.resource.key(),
            expected: Some(c.version),
        });
    }
    writes.push(Write::MeshUnchanged {
        mesh: r.mesh.clone(),
        since: read_at,
    });
    match cx.store.transact(writes).await {
        Ok(t) => {
            plan.applied = Some(Applied {
                at: now_rfc3339(),
                revision: t.revision,
            });
            plan.rolled_back = None;
            if let Err(e) = save(&*cx.store, &plan).await {
                tracing::warn!(error = ?e, plan = %plan.fingerprint, "rollout applied but the plan's record was not updated");
            }
            let detail = format!(
                "promoted {}; retired {}; {} copies deleted",
                plan.promote
                    .iter()
                    .map(super::record::Planned::shown)
                    .collect::<Vec<_>>()
                    .join(", "),
                plan.retire
                    .iter()
                    .map(super::record::Planned::shown)
                    .collect::<Vec<_>>()
                    .join(", "),
                copies.len()
            );
            r.decide(Some(last), "applied", detail, Some(t.revision), None);
            r.state = RolloutState::Completed;
            r.phase = Phase::Done;
            tracing::info!(mesh = %r.mesh, plan = %r.plan, revision = t.revision, "staged rollout applied");
        }
        Err(e) => roll_back(
            r,
            Some(last),
            "failed",
            format!("the plan's apply failed: {e}"),
        ),
    }
}

/// `plan`'s apply is what `stored` shows: each promoted policy live at the version after the
/// planned one, each retired one gone.
fn applied_already(plan: &PlanRecord, stored: &[Stored]) -> bool {
    let find = |ty: &str, name: &str| {
        stored
            .iter()
            .find(|s| s.resource.ty().name() == ty && s.resource.meta.name == name)
    };
    plan.promote.iter().all(|p| {
        find(&p.type_name, &p.name)
            .is_some_and(|s| s.version == p.version + 1 && !s.resource.meta.is_shadow())
    }) && plan
        .retire
        .iter()
        .all(|p| find(&p.type_name, &p.name).is_none())
}

pub(super) async fn undo(cx: &InspectContext, r: &mut RolloutRecord, reason: &str) {
    let copies = match stored_copies(cx, r).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(plan = %r.plan, error = %e.detail, "rollout: cannot read its copies to roll back; retrying");
            return;
        }
    };
    let mut revision = None;
    if !copies.is_empty() {
        let writes = copies
            .iter()
            .map(|c| Write::Delete {
                key: c.resource.key(),
                expected: Some(c.version),
            })
            .collect();
        match cx.store.transact(writes).await {
            Ok(t) => revision = Some(t.revision),
            Err(e) => {
                tracing::warn!(plan = %r.plan, error = %e, "rollout: its copies cannot be deleted yet; retrying");
                return;
            }
        }
    }
    r.decide(
        None,
        "rolled back",
        format!("{} copies deleted: {reason}", copies.len()),
        revision,
        None,
    );
    r.state = RolloutState::RolledBack;
    r.phase = Phase::Done;
    tracing::warn!(mesh = %r.mesh, plan = %r.plan, %reason, "staged rollout rolled back");
}

/// The counters of DPPs `keys` (`<zone>/<name>`) of `mesh`, asked of their zones at once.
///
/// # Errors
/// The first zone that cannot be asked or DPP that cannot be read, named: a gate fails closed.
pub async fn read_traffic(
    cx: &InspectContext,
    mesh: &str,
    keys: &BTreeSet<String>,
) -> Result<BTreeMap<String, TrafficSample>, String> {
    let mut by_zone: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for k in keys {
        let (zone, name) = k.split_once('/').unwrap_or(("", k));
        by_zone.entry(zone).or_default().push(name.to_owned());
    }
    let asks = by_zone
        .into_iter()
        .map(|(zone, names)| async move { (zone, ask_traffic(cx, zone, mesh, names).await) });
    let mut out = BTreeMap::new();
    for (zone, answer) in futures_util::future::join_all(asks).await {
        let answer = answer.map_err(|e| format!("zone {zone:?}: {e}"))?;
        if let Some((name, why)) = answer["errors"].as_object().and_then(|m| m.iter().next()) {
            return Err(format!(
                "zone {zone:?}: DPP {name:?}: {}",
                why.as_str().unwrap_or("unreadable")
            ));
        }
        for (name, sample) in answer["samples"].as_object().into_iter().flatten() {
            let sample: TrafficSample = serde_json::from_value(sample.clone())
                .map_err(|e| format!("zone {zone:?}: DPP {name:?}: {e}"))?;
            out.insert(dpp_key(zone, name), sample);
        }
    }
    if let Some(missing) = keys.iter().find(|k| !out.contains_key(*k)) {
        return Err(format!("DPP {missing:?} was not read"));
    }
    Ok(out)
}

async fn ask_traffic(
    cx: &InspectContext,
    zone: &str,
    mesh: &str,
    names: Vec<String>,
) -> Result<Value, String> {
    let kind = Kind::Traffic(TrafficRequest {
        mesh: mesh.to_owned(),
        dataplanes: names,
    });
    let mut call = cx
        .hub
        .call(zone, kind, TRAFFIC_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let (mut status, mut body) = (200, Vec::new());
    while let Some(frame) = call.next().await.map_err(|e| e.to_string())? {
        match frame.body {
            Some(Frame::Http(h)) => {
                status = h.status;
                body.extend_from_slice(&h.chunk);
            }
            // A zone of an earlier release reads the request as naming no call.
            Some(Frame::Error(e)) => {
                return Err(format!("it answered {}: {}", e.status, e.message))
            }
            _ => return Err("it sent an unexpected answer".into()),
        }
    }
    if status != 200 {
        return Err(format!("it answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("its answer does not read: {e}"))
}
