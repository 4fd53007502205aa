//! The steps of a staged rollout (issue 40), one per [`Phase`]: each does its store
//! transaction and records its phase and decision in the rollout ([`super::rollout`] writes
//! it, and documents the whole). What they ask the zones is in [`super::traffic`].

use std::collections::{BTreeMap, BTreeSet};

use umbra_api::error::ApiError;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::rollout::{evaluate_gate, TrafficSample, ROLLOUT_LABEL};
use umbra_core::view::Promotion;

use super::record::{changed_inputs, inputs_of, promoted, Applied, PlanRecord};
use super::stages::{
    copies, dpp_key, promoted_policies, refs, roll_back, selected_dataplanes, stage_tags, Phase,
    RolloutRecord, RolloutState, ACK_DEADLINE,
};
use super::traffic::{pick, read_acks, read_groups};
use super::{fleet_diff, save};
use crate::inspect::context::{mesh_stored, InspectContext};
use crate::inspect::shadow_diff::query::DEFAULT_FLEET_TIMEOUT;
use crate::store::{list_all, now_rfc3339, Stored, Write};

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
    let copies = match copies_of(plan, r, stage) {
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
                there &= matches!(cx.store.get(&c.key()).await,
                    Ok(Some(s)) if s.resource.spec == c.spec && s.resource.meta.labels == c.meta.labels);
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
    let copies = match copies_of(plan, r, stage) {
        Ok(c) => c,
        Err(e) => return roll_back(r, Some(stage), "failed", e),
    };
    // A store that cannot be read now is read again at the next tick.
    let Some((stored, dps)) = read_mesh(cx, &r.mesh).await else {
        return;
    };
    let policies: Vec<Resource> = stored.iter().map(|s| s.resource.clone()).collect();
    let copy_refs = refs(&copies);
    let current: Vec<&Stored> = stored
        .iter()
        .filter(|s| copy_refs.contains(&(s.resource.ty(), s.resource.meta.name.clone())))
        .filter(|s| s.resource.meta.labels.get(ROLLOUT_LABEL) == Some(&r.plan))
        .collect();
    if current.len() != copies.len() {
        return roll_back(
            r,
            Some(stage),
            "failed",
            format!(
                "{} of the stage's {} copies are gone or changed since they were written",
                copies.len() - current.len(),
                copies.len()
            ),
        );
    }
    let already_live = current.iter().all(|s| !s.resource.meta.is_shadow());
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
                "the stage would change {} DPPs outside it ({}{}): its copies would reach DPPs the stage does not select (a builtin gateway whose listener tags they match, or an old type they switch off there); roll it out in one step",
                outside.len(),
                shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                if outside.len() > 10 { ", ..." } else { "" }
            ));
        }
    }
    // The others: the DPPs the plan's policies select that are not staged, nor were by an
    // earlier stage, of the staged DPPs' services.
    let originals = match promoted_policies(plan) {
        Ok(p) => p,
        Err(e) => return roll_back(r, Some(stage), "failed", e.detail),
    };
    let all = selected_dataplanes(&r.mesh, &policies, &refs(&originals), &dps);
    // The DPPs earlier stages put on the new policies are not a comparison.
    let mut earlier = BTreeSet::new();
    for k in 0..stage {
        if let Ok(c) = copies_of(plan, r, k) {
            earlier.extend(refs(&c));
        }
    }
    let earlier = selected_dataplanes(&r.mesh, &policies, &earlier, &dps);
    let services: BTreeSet<&String> = staged.values().flatten().collect();
    let unstaged: BTreeMap<&String, &BTreeSet<String>> = all
        .iter()
        .filter(|(k, _)| !staged.contains_key(*k) && !earlier.contains_key(*k))
        .collect();
    // Only DPPs of the staged DPPs' services compare (others' rates say nothing of them);
    // with none, the gate compares the staged DPPs with their own rates before the stage.
    let others: Vec<String> = unstaged
        .iter()
        .filter(|(_, s)| s.iter().any(|x| services.contains(x)))
        .map(|(k, _)| (*k).clone())
        .collect();
    let staged_keys: BTreeSet<String> = staged.keys().cloned().collect();
    let samples = match read_groups(cx, &r.mesh, &staged_keys, &others).await {
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
    let staged_samples = pick(&samples, staged.keys());
    let others_samples = pick(&samples, others.iter());
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
        acked: None,
        before: staged_samples.clone(),
        staged: staged_samples,
        others: others_samples,
    };
}

/// A live stage whose staged DPPs' Envoys are awaited: once every one runs a config with the
/// stage's copies in effect ([`read_acks`]), their counters and the comparison DPPs' are read
/// again (the soak's start) and the soak starts; a DPP whose generation failed or whose Envoy
/// NACKed, or [`ACK_DEADLINE`] passing, fails the stage closed.
pub(super) async fn await_acks(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    plan: &PlanRecord,
    stage: usize,
    since: &str,
) {
    let Phase::Live { staged, others, .. } = &r.phase else {
        return;
    };
    let (before, others) = (staged.clone(), others.clone());
    let copies = match copies_of(plan, r, stage) {
        Ok(c) => c,
        Err(e) => return roll_back(r, Some(stage), "failed", e),
    };
    let live: Vec<String> = copies
        .iter()
        .map(|c| format!("{}/{}", c.ty().name(), c.meta.name))
        .collect();
    let keys: BTreeSet<String> = before.keys().cloned().collect();
    let acks = read_acks(cx, &r.mesh, &keys, &live).await;
    if let Some((dpp, why)) = acks.rejected.iter().next() {
        return roll_back(
            r,
            Some(stage),
            "failed",
            format!("staged DPP {dpp} does not run the stage's copies: {why}: failing closed"),
        );
    }
    let waited = elapsed(since);
    if !keys.iter().all(|k| acks.acked.contains(k)) {
        if waited < ACK_DEADLINE.as_secs() {
            tracing::debug!(plan = %r.plan, stage = stage + 1, waiting = ?acks.waiting, "rollout: awaiting the staged DPPs' Envoys");
            return;
        }
        let (dpp, why) = acks
            .waiting
            .iter()
            .next()
            .map_or(("?", "no answer"), |(d, w)| (d.as_str(), w.as_str()));
        return roll_back(
            r,
            Some(stage),
            "failed",
            format!(
                "{} of the {} staged DPPs did not acknowledge the stage's copies within {} s ({dpp}: {why}): failing closed",
                keys.len() - acks.acked.len(),
                keys.len(),
                ACK_DEADLINE.as_secs()
            ),
        );
    }
    let others_keys: Vec<String> = others.keys().cloned().collect();
    let samples = match read_groups(cx, &r.mesh, &keys, &others_keys).await {
        Ok(s) => s,
        Err(e) => {
            return roll_back(
                r,
                Some(stage),
                "failed",
                format!("counters at the soak's start: {e}: failing closed"),
            )
        }
    };
    let staged_now = pick(&samples, keys.iter());
    let others_now = pick(&samples, others_keys.iter());
    let unreported = if acks.unreported.is_empty() {
        String::new()
    } else {
        let zones: Vec<&str> = acks.unreported.iter().map(String::as_str).collect();
        format!(
            " (zones {} do not report ACKs, an earlier release: their DPPs are not awaited)",
            zones.join(", ")
        )
    };
    r.decide(
        Some(stage),
        "stage acknowledged",
        format!(
            "every staged DPP's Envoy ({}) runs the stage's copies, {waited} s after they went live; the {} s soak starts{unreported}",
            keys.len(),
            r.soak_seconds
        ),
        None,
        None,
    );
    r.phase = Phase::Live {
        stage,
        since: since.to_owned(),
        acked: Some(now_rfc3339()),
        staged: staged_now,
        others: others_now,
        before,
    };
}

/// The mesh's policies (and Mesh) and Dataplanes, or `None` when the store cannot be read now
/// (logged; the step runs again at the next tick).
async fn read_mesh(cx: &InspectContext, mesh: &str) -> Option<(Vec<Stored>, Vec<Stored>)> {
    let read = async {
        Ok::<_, ApiError>((
            mesh_stored(&*cx.store, mesh).await?,
            dataplanes(cx, mesh).await?,
        ))
    };
    match read.await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(%mesh, error = %e.detail, "rollout: the store cannot be read; retrying");
            None
        }
    }
}

/// Stage `stage`'s copies of `plan`'s policies in rollout `r`.
fn copies_of(plan: &PlanRecord, r: &RolloutRecord, stage: usize) -> Result<Vec<Resource>, String> {
    copies(plan, &stage_tags(r, stage), stage)
}

/// Seconds since RFC 3339 `since` (0 when it cannot be read).
fn elapsed(since: &str) -> u64 {
    let Ok(t) = time::OffsetDateTime::parse(since, &time::format_description::well_known::Rfc3339)
    else {
        return 0;
    };
    u64::try_from((time::OffsetDateTime::now_utc() - t).whole_seconds()).unwrap_or(0)
}

/// The gate of a live stage whose soak started at `acked`: `staged` and `others` are the
/// counters at the soak's start, `before` the staged DPPs' when the copies went live.
pub(super) async fn gate(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    stage: usize,
    acked: &str,
    staged: &BTreeMap<String, TrafficSample>,
    others: &BTreeMap<String, TrafficSample>,
    before: &BTreeMap<String, TrafficSample>,
) {
    if elapsed(acked) < r.soak_seconds {
        return;
    }
    let staged_keys: BTreeSet<String> = staged.keys().cloned().collect();
    let others_keys: Vec<String> = others.keys().cloned().collect();
    let now = match read_groups(cx, &r.mesh, &staged_keys, &others_keys).await {
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
    let before = TrafficSample::sum(before.values());
    let verdict = evaluate_gate(&staged_delta, &others_delta, &before, &r.thresholds);
    if verdict.passed {
        let detail = format!(
            "{} requests sent and {} received by the staged DPPs during the soak",
            staged_delta.requests, staged_delta.inbound
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

pub(super) async fn apply(cx: &InspectContext, r: &mut RolloutRecord, mut plan: PlanRecord) {
    let last = r.stages.len().saturating_sub(1);
    // A store that cannot be read now is read again at the next tick.
    let Ok(read_at) = cx.store.revision().await else {
        return;
    };
    let Some((stored, _)) = read_mesh(cx, &r.mesh).await else {
        return;
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
        Err(e) => {
            // Another leader's apply of the same plan may have won: then it is applied.
            if let Some((stored, _)) = read_mesh(cx, &r.mesh).await {
                let left = stored
                    .iter()
                    .any(|s| s.resource.meta.labels.get(ROLLOUT_LABEL) == Some(&r.plan));
                if !left && applied_already(&plan, &stored) {
                    r.decide(
                        Some(last),
                        "applied",
                        "the plan was applied meanwhile",
                        None,
                        None,
                    );
                    r.state = RolloutState::Completed;
                    r.phase = Phase::Done;
                    return;
                }
            }
            roll_back(
                r,
                Some(last),
                "failed",
                format!("the plan's apply failed: {e}"),
            );
        }
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

pub(super) async fn undo(
    cx: &InspectContext,
    r: &mut RolloutRecord,
    plan: Option<&PlanRecord>,
    reason: &str,
) {
    let Some((stored, _)) = read_mesh(cx, &r.mesh).await else {
        return;
    };
    let copies: Vec<&Stored> = stored
        .iter()
        .filter(|s| s.resource.meta.labels.get(ROLLOUT_LABEL) == Some(&r.plan))
        .collect();
    // A stop that raced the last stage's apply: the plan is applied, there is nothing to undo
    // (a migration rollback undoes an applied plan).
    if copies.is_empty() && plan.is_some_and(|p| p.applied.is_some() && applied_already(p, &stored))
    {
        r.decide(
            None,
            "applied",
            format!("the plan was applied before it could be rolled back ({reason})"),
            None,
            None,
        );
        r.state = RolloutState::Completed;
        r.phase = Phase::Done;
        return;
    }
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
