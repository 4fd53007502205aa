//! Staged rollouts on the Global (issue 40): a plan's policies promoted stage by stage, each
//! stage gated on the staged DPPs' own Envoy counters, the last stage being the plan's apply.
//!
//! - `POST /meshes/{mesh}/_migration/rollout` ([`start`], body [`RolloutRequest`]): checks the
//!   plan (not applied, the mesh unchanged since it), the stage list
//!   ([`umbra_core::rollout::parse_stages`]: tag stages or shares, then `100%`; a share, `1`
//!   or `10%`, becomes a rollout sample over the DPPs the plan's policies select, whose bound
//!   is computed here from their sample points: [`umbra_core::sample`]), that every promoted
//!   policy narrows to every stage, and that no rollout runs in the mesh; computes which DPPs
//!   each stage selects (from the Dataplanes the zones synced); stores the rollout durably
//!   and answers it. The Global's leader then drives it ([`drive`]). With `dryRun: true` it
//!   answers the same (`state: planned`) and stores nothing: the stages' DPPs can be read
//!   before anything happens.
//! - `GET /meshes/{mesh}/_migration/rollout[?plan=]` ([`status`]): the rollout (the latest of
//!   the mesh), its phase and every decision with its numbers and time.
//! - `POST /meshes/{mesh}/_migration/stop` ([`stop`], body `{plan}`): rolls a running rollout
//!   back.
//!
//! **A stage** (tags `T`): (1) every promoted policy's staged copy
//! ([`umbra_core::rollout::staged_copy`], narrowed to `T`, shadow) is written in one
//! transaction; (2) the fleet diff of promoting the copies is computed by the zones: a zone
//! that does not answer (or a DPP without a result) fails the stage closed, and a DPP outside
//! the stage whose config would change refuses it (the old-type-off rule switches old types
//! off on the staged DPPs only: [`umbra_core::view::PolicySet::staged_off`]);
//! (3) the staged DPPs and the not-yet-staged DPPs of their services have their counters read
//! ([`super::traffic::read_groups`]: a staged DPP that cannot be read fails the stage closed,
//! a comparison DPP that cannot be read is left out): the staged DPPs' own rates before the
//! stage; (4) the copies are promoted in one transaction; (5) the zones are asked, every
//! [`TICK`], whether each staged DPP's Envoy has acknowledged a config with the copies in
//! effect ([`super::traffic::read_acks`]); when all have, the counters are read again and the
//! soak starts then, so the gate judges the new config only (a failed generation, a NACK, or
//! [`super::stages::ACK_DEADLINE`] without every ACK fails the stage closed); (6) after the
//! soak the counters are read again and the gate compares them
//! ([`umbra_core::rollout::evaluate_gate`]). A passed gate goes on; anything
//! else rolls back: every copy of the rollout deleted in one transaction. **The last stage**
//! is the plan's apply in one transaction: the promoted policies live, the retired ones
//! deleted, the copies deleted, only if nothing of the mesh but the copies changed since the
//! plan.
//!
//! **Durability.** Every phase change and decision is written to the store (key
//! [`super::stages::rollouts_key`]) with a compare-and-swap on the phase, after the store
//! transaction it records; a Global that restarts (or a replica that becomes leader) resumes
//! from the recorded phase, and each phase's transaction is written so that running it again
//! after it committed is recognised (copies already there, already live, plan already
//! applied). A store that cannot be read is read again at the next tick (a rollout never rolls
//! back for that alone); a stop is refused once the last stage's apply is due. Counters are
//! read twice per stage, each DPP once per read, through the zones' bounded reads.

use std::time::Duration;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_core::resource::Resource;
use umbra_core::rollout::{parse_stages, Stage, Thresholds};

use super::record::{changed_inputs, inputs_of};
use super::stages::{
    copies, keep, promoted_policies, refs, roll_back, rollouts_key, sample_tags,
    selected_dataplanes, Phase, RolloutRecord, RolloutState, StageRecord, MAX_SOAK, MAX_STAGES,
};
use super::{conflict, load, steps};
use crate::inspect::context::{mesh_exists, mesh_stored, InspectContext};
use crate::store::{now_rfc3339, update_key};

/// How often the leader looks at the running rollouts.
pub const TICK: Duration = Duration::from_secs(1);
/// Default soak of a stage.
pub const DEFAULT_SOAK: Duration = Duration::from_secs(60);

/// The body of `POST /meshes/{mesh}/_migration/rollout`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RolloutRequest {
    /// The plan's fingerprint.
    pub plan: String,
    /// The stage list (`kuma.io/zone=zone-1,100%`).
    pub stages: String,
    /// How long each stage soaks before its gate (`60s` by default, 1 s to 1 h).
    #[serde(default)]
    pub soak: Option<String>,
    /// The gates' thresholds (defaults for the fields left out).
    #[serde(default)]
    pub thresholds: Option<Thresholds>,
    /// Only answer what the rollout would be (its stages and their DPPs); store nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// The body of `POST /meshes/{mesh}/_migration/stop`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StopRequest {
    /// The plan's fingerprint.
    pub plan: String,
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

fn decode_rollouts(bytes: Option<&[u8]>) -> Result<Vec<RolloutRecord>, ApiError> {
    bytes.map_or(Ok(Vec::new()), |b| {
        serde_json::from_slice(b)
            .map_err(|e| internal(format!("the stored rollouts cannot be read: {e}")))
    })
}

async fn read_rollouts(store: &dyn crate::store::Store) -> Result<Vec<RolloutRecord>, ApiError> {
    decode_rollouts(store.get_key(rollouts_key()).await?.as_deref())
}

/// Store `record`, only when the stored one of its plan is at phase `expected` (`None`: only
/// when no rollout runs in its mesh). Returns whether it was stored.
async fn write(
    store: &dyn crate::store::Store,
    record: &RolloutRecord,
    expected: Option<&Phase>,
) -> Result<bool, ApiError> {
    let mut stored = true;
    update_key(store, rollouts_key(), |bytes| {
        let mut all = decode_rollouts(bytes)?;
        let current = all
            .iter()
            .find(|r| r.mesh == record.mesh && r.plan == record.plan);
        let allowed = match expected {
            Some(phase) => current.is_some_and(|c| &c.phase == phase),
            None => !all
                .iter()
                .any(|r| r.mesh == record.mesh && r.state == RolloutState::Running),
        };
        stored = allowed;
        if !allowed {
            return Ok(None);
        }
        keep(&mut all, record.clone());
        serde_json::to_vec(&all).map(Some).map_err(internal)
    })
    .await?;
    Ok(stored)
}

/// `POST /meshes/{mesh}/_migration/rollout`: see the module docs. Answers the rollout.
///
/// # Errors
/// 400 for a bad body, stage list, soak, thresholds or a policy that does not narrow; 404 for
/// an unknown mesh or plan; 409 when the plan is applied, the mesh changed since it, or a
/// rollout runs in the mesh.
pub async fn start(
    cx: &InspectContext,
    mesh: &str,
    req: RolloutRequest,
) -> Result<Value, ApiError> {
    mesh_exists(&*cx.store, mesh).await?;
    let plan = load(&*cx.store, mesh, &req.plan).await?;
    if plan.applied.is_some() && plan.rolled_back.is_none() {
        return Err(conflict(format!(
            "plan {} is applied already",
            plan.fingerprint
        )));
    }
    let stages = parse_stages(&req.stages).map_err(|e| ApiError::bad_parameter("stages", e))?;
    if stages.len() > MAX_STAGES {
        return Err(ApiError::bad_parameter(
            "stages",
            format!("at most {MAX_STAGES} stages, got {}", stages.len()),
        ));
    }
    let soak = match req.soak.as_deref() {
        None => DEFAULT_SOAK,
        Some(v) => umbra_core::duration::Duration::parse(v)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
            .map(Duration::from_nanos)
            .filter(|d| *d >= Duration::from_secs(1) && *d <= MAX_SOAK)
            .ok_or_else(|| {
                ApiError::bad_parameter(
                    "soak",
                    format!("must be a duration from 1s to 1h, got {v:?}"),
                )
            })?,
    };
    let thresholds = req.thresholds.unwrap_or_default();
    let rates = [
        thresholds.errors_5xx,
        thresholds.timeouts,
        thresholds.resets,
        thresholds.retries,
        thresholds.rbac_denied,
        thresholds.rate_limited,
    ];
    if thresholds.min_requests == 0 {
        return Err(ApiError::bad_parameter(
            "thresholds.minRequests",
            "must be at least 1: a gate without traffic has no evidence",
        ));
    }
    if rates.iter().any(|r| !(0.0..=1.0).contains(r))
        || !(1.0..=f64::MAX).contains(&thresholds.p99_ratio)
    {
        return Err(ApiError::bad_parameter(
            "thresholds",
            "rate margins must be from 0 to 1, p99Ratio at least 1",
        ));
    }
    let stored = mesh_stored(&*cx.store, mesh).await?;
    let changed = changed_inputs(&plan.inputs, &inputs_of(&stored));
    if !changed.is_empty() {
        return Err(conflict(format!(
            "the mesh changed since plan {}: {}; plan again",
            plan.fingerprint,
            changed.join("; ")
        )));
    }
    let policies: Vec<Resource> = stored.iter().map(|s| s.resource.clone()).collect();
    // The plan's copies of its policies must read (a 500 otherwise, not the caller's fault).
    promoted_policies(&plan)?;
    let dps = steps::dataplanes(cx, mesh).await?;
    let originals = promoted_policies(&plan)?;
    let everyone = selected_dataplanes(mesh, &policies, &refs(&originals), &dps);
    let mut records = Vec::with_capacity(stages.len());
    // The DPPs the last share stage took: a later share must not take fewer.
    let mut last_share: Option<(usize, String)> = None;
    for (k, stage) in stages.iter().enumerate() {
        let (tags, selected) = match stage {
            Stage::Share(share) => {
                let tags = sample_tags(&plan.fingerprint, share, &everyone, &dps)
                    .ok_or_else(|| {
                        ApiError::bad_parameter(
                            "stages",
                            format!(
                                "stage {} ({share}) is a share of the DPPs the plan's policies select, and they select none",
                                k + 1
                            ),
                        )
                    })?;
                let copies =
                    copies(&plan, &tags, k).map_err(|e| ApiError::bad_parameter("stages", e))?;
                let mut with = policies.clone();
                with.extend(copies.iter().cloned());
                let selected = selected_dataplanes(mesh, &with, &refs(&copies), &dps);
                if let Some((n, earlier)) = &last_share {
                    if selected.len() < *n {
                        return Err(ApiError::bad_parameter(
                            "stages",
                            format!(
                                "stage {} ({share}) takes {} DPPs, fewer than an earlier stage ({earlier}, {n}): shares grow",
                                k + 1,
                                selected.len()
                            ),
                        ));
                    }
                }
                last_share = Some((selected.len(), share.to_string()));
                records.push(StageRecord {
                    tags: Some(tags),
                    share: Some(share.to_string()),
                    dataplanes: selected.into_keys().collect(),
                });
                continue;
            }
            Stage::Tags(tags) => {
                let copies =
                    copies(&plan, tags, k).map_err(|e| ApiError::bad_parameter("stages", e))?;
                let mut with = policies.clone();
                with.extend(copies.iter().cloned());
                let selected = selected_dataplanes(mesh, &with, &refs(&copies), &dps);
                if selected.is_empty() {
                    return Err(ApiError::bad_parameter(
                        "stages",
                        format!(
                            "stage {} ({}) selects no DPP the plan's policies select: a gate would have no evidence",
                            k + 1,
                            tags.iter().map(|(t, v)| format!("{t}={v}")).collect::<Vec<_>>().join("&")
                        ),
                    ));
                }
                (Some(tags.clone()), selected)
            }
            Stage::All => (None, everyone.clone()),
        };
        records.push(StageRecord {
            tags,
            share: None,
            dataplanes: selected.into_keys().collect(),
        });
    }
    let mut record = RolloutRecord {
        mesh: mesh.to_owned(),
        plan: plan.fingerprint.clone(),
        stages: records,
        soak_seconds: soak.as_secs(),
        thresholds,
        state: RolloutState::Running,
        phase: Phase::Pending { stage: 0 },
        decisions: Vec::new(),
        started_at: now_rfc3339(),
    };
    record.decide(
        None,
        "started",
        format!("{} stages, {} s soak", stages.len(), soak.as_secs()),
        None,
        None,
    );
    if req.dry_run {
        record.state = RolloutState::Planned;
        record.decisions.clear();
        return serde_json::to_value(&record).map_err(internal);
    }
    if !write(&*cx.store, &record, None).await? {
        return Err(conflict(format!(
            "a rollout runs in mesh {mesh:?}: stop it or wait for its end"
        )));
    }
    tracing::info!(%mesh, plan = %record.plan, stages = stages.len(), "staged rollout started");
    serde_json::to_value(&record).map_err(internal)
}

/// `GET /meshes/{mesh}/_migration/rollout[?plan=]`: the rollout of `plan`, or the mesh's
/// latest.
///
/// # Errors
/// 404 when there is none.
pub async fn status(
    cx: &InspectContext,
    mesh: &str,
    plan: Option<&str>,
) -> Result<Value, ApiError> {
    let all = read_rollouts(&*cx.store).await?;
    let found = all
        .iter()
        .filter(|r| r.mesh == mesh && plan.is_none_or(|p| r.plan == p))
        .max_by(|a, b| a.started_at.cmp(&b.started_at));
    let found = found.ok_or_else(|| ApiError::not_found(format!("no rollout in mesh {mesh:?}")))?;
    serde_json::to_value(found).map_err(internal)
}

/// `POST /meshes/{mesh}/_migration/stop`: roll a running rollout back (the leader deletes its
/// copies at its next tick).
///
/// # Errors
/// 404 when there is no such rollout, 409 when it does not run.
pub async fn stop(cx: &InspectContext, mesh: &str, req: StopRequest) -> Result<Value, ApiError> {
    for _ in 0..8 {
        let all = read_rollouts(&*cx.store).await?;
        let Some(r) = all
            .into_iter()
            .find(|r| r.mesh == mesh && r.plan == req.plan)
        else {
            return Err(ApiError::not_found(format!(
                "no rollout of plan {} in mesh {mesh:?}",
                req.plan
            )));
        };
        if matches!(r.phase, Phase::Final) {
            return Err(conflict(format!(
                "the rollout of plan {} is applying the plan (its last stage): roll the plan back once it is applied",
                req.plan
            )));
        }
        if r.state != RolloutState::Running || matches!(r.phase, Phase::RollingBack { .. }) {
            return Err(conflict(format!(
                "the rollout of plan {} is not running",
                req.plan
            )));
        }
        let mut next = r.clone();
        next.phase = Phase::RollingBack {
            reason: "stopped by an operator".into(),
        };
        next.decide(None, "stopped", "stopped by an operator", None, None);
        if write(&*cx.store, &next, Some(&r.phase)).await? {
            return serde_json::to_value(&next).map_err(internal);
        }
    }
    Err(ApiError::status(
        StatusCode::SERVICE_UNAVAILABLE,
        "the rollout kept changing; try again",
    ))
}

/// Drive the running rollouts while this replica leads (`leader`), every [`TICK`], until
/// `shutdown`.
pub async fn drive(
    cx: InspectContext,
    leader: tokio::sync::watch::Receiver<bool>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if *leader.borrow() {
            tick(&cx).await;
        }
    }
}

/// One step of every running rollout, each recorded after its store transaction (what
/// [`drive`] does every [`TICK`] while leading; a store that cannot be read is retried at the
/// next tick).
pub async fn tick(cx: &InspectContext) {
    let rollouts = match read_rollouts(&*cx.store).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e.detail, "rollouts: cannot read them; retrying");
            return;
        }
    };
    for mut r in rollouts
        .into_iter()
        .filter(|r| r.state == RolloutState::Running)
    {
        let before = r.phase.clone();
        let decisions = r.decisions.len();
        step(cx, &mut r).await;
        if r.phase != before || r.decisions.len() != decisions {
            match write(&*cx.store, &r, Some(&before)).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    plan = %r.plan,
                    "rollout: its record moved on meanwhile; this step's record is dropped"
                ),
                Err(e) => tracing::warn!(
                    plan = %r.plan,
                    error = %e.detail,
                    "rollout: its step is done but not recorded; it is recognised when run again"
                ),
            }
        }
    }
}

/// One step of rollout `r` (see the module docs): its store transaction, then its phase and
/// decision in `r` (the caller writes them).
async fn step(cx: &InspectContext, r: &mut RolloutRecord) {
    let plan = match load(&*cx.store, &r.mesh, &r.plan).await {
        Ok(p) => Some(p),
        // Dropped from the plans kept: the rollout cannot go on, its copies go.
        Err(e) if e.status == StatusCode::NOT_FOUND => None,
        // The store cannot be read now: again at the next tick.
        Err(e) => {
            tracing::warn!(plan = %r.plan, error = %e.detail, "rollout: its plan cannot be read; retrying");
            return;
        }
    };
    let Some(plan) = plan else {
        match r.phase.clone() {
            Phase::RollingBack { reason } => steps::undo(cx, r, None, &reason).await,
            Phase::Done => {}
            _ => roll_back(r, None, "failed", "the plan is no longer kept".to_owned()),
        }
        return;
    };
    match r.phase.clone() {
        Phase::Pending { stage } => steps::write_copies(cx, r, &plan, stage).await,
        Phase::Created { stage } => steps::go_live(cx, r, &plan, stage).await,
        // A record of an earlier release (no `before`): its soak ran from the commit.
        Phase::Live {
            stage,
            since,
            acked: None,
            staged,
            others,
            before,
        } if before.is_empty() => {
            steps::gate(cx, r, stage, &since, &staged, &others, &staged).await
        }
        Phase::Live {
            stage,
            since,
            acked: None,
            ..
        } => steps::await_acks(cx, r, &plan, stage, &since).await,
        Phase::Live {
            stage,
            acked: Some(acked),
            staged,
            others,
            before,
            ..
        } => steps::gate(cx, r, stage, &acked, &staged, &others, &before).await,
        Phase::Final => steps::apply(cx, r, plan).await,
        Phase::RollingBack { reason } => steps::undo(cx, r, Some(&plan), &reason).await,
        Phase::Done => {}
    }
}
