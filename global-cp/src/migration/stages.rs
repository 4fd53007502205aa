//! The pure half of a staged rollout (issue 40): what the Global keeps of a rollout, durably
//! with the plans ([`RolloutRecord`] under [`rollouts_key`]), where it stands ([`Phase`]),
//! every decision with its numbers ([`Decision`]), and which DPPs a stage selects
//! ([`selected_dataplanes`]). No IO; [`super::rollout`] drives it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::rollout::{Stage, Thresholds, TrafficSample, Verdict};
use umbra_core::sample::{self, Share};
use umbra_core::view::{PolicyRef, PolicySet, Promotion};
use umbra_kds::resource::DISPLAY_NAME_LABEL;

use umbra_api::error::ApiError;
use umbra_core::rollout::staged_copy;

use super::record::PlanRecord;
use crate::store::Stored;

/// The store key holding every mesh's rollouts (a JSON array of [`RolloutRecord`]s, oldest
/// first, at most [`MAX_ROLLOUTS`]).
pub fn rollouts_key() -> &'static str {
    "migration-rollouts"
}

/// Longest wait for the staged DPPs' Envoys to acknowledge a stage's copies before the
/// stage fails closed.
pub const ACK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Rollouts kept (running ones are never dropped).
pub const MAX_ROLLOUTS: usize = 32;
/// Longest soak of a stage.
pub const MAX_SOAK: std::time::Duration = std::time::Duration::from_secs(3600);
/// Most stages of a rollout.
pub const MAX_STAGES: usize = 10;

/// One stage as recorded: its tags (`None`: the plan's own apply) and the DPPs it selected
/// when the rollout started (`<zone>/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    /// The stage's tags; absent for the last stage (every DPP). A share's tags are its
    /// rollout sample ([`umbra_core::sample::SAMPLE_TAG`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The share the stage was asked as (`1`, `10%`), for a sample stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
    /// The DPPs the stage's copies select, as computed when the rollout started.
    pub dataplanes: Vec<String>,
}

impl StageRecord {
    /// The stage.
    pub fn stage(&self) -> Stage {
        self.tags.clone().map_or(Stage::All, Stage::Tags)
    }
}

/// Where a rollout stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "step")]
pub enum Phase {
    /// Stage `stage` (0-based) is next: its copies are to be written (shadow).
    Pending {
        /// The stage.
        stage: usize,
    },
    /// Stage `stage`'s copies are written, shadow: its diff is to be checked and the copies
    /// promoted.
    Created {
        /// The stage.
        stage: usize,
    },
    /// Stage `stage`'s copies are live since `since` (RFC 3339). Until `acked`, the staged
    /// DPPs' Envoys are awaited (at most [`ACK_DEADLINE`]); the gate is due a soak after it.
    Live {
        /// The stage.
        stage: usize,
        /// When they went live.
        since: String,
        /// When every staged DPP's Envoy had acknowledged a config with the copies in effect
        /// (RFC 3339): the soak's start. `None` while awaited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        acked: Option<String>,
        /// The staged DPPs (`<zone>/<name>`) and their counters at the soak's start (before
        /// it, when they went live).
        staged: BTreeMap<String, TrafficSample>,
        /// The other DPPs of the same services and theirs, at the same time.
        others: BTreeMap<String, TrafficSample>,
        /// The staged DPPs' counters when the copies went live: their own rates before the
        /// stage. Empty in a record of an earlier release, which did not await ACKs: its
        /// `staged` counters, from the commit, are then both.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        before: BTreeMap<String, TrafficSample>,
    },
    /// The last stage: the plan's own apply is due.
    Final,
    /// The rollout is being undone: every copy is to be deleted.
    RollingBack {
        /// Why.
        reason: String,
    },
    /// Nothing left to do.
    Done,
}

/// How a rollout ended, or that it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutState {
    /// A dry run's answer: what the rollout would be (never stored).
    Planned,
    /// It runs.
    Running,
    /// Every gate passed and the plan is applied.
    Completed,
    /// A gate failed, a stage was refused or it was stopped: every copy is deleted.
    RolledBack,
}

/// One decision, with its numbers and its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// RFC 3339.
    pub at: String,
    /// The stage (1-based; absent for the rollout as a whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<usize>,
    /// `started`, `copies written`, `stage live`, `gate passed`, `gate failed`, `refused`,
    /// `applied`, `rolled back`, `stopped`.
    pub action: String,
    /// What it is about, in words.
    pub detail: String,
    /// The store revision it wrote at, if it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// A gate's comparisons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// A staged rollout of one plan, as kept durably.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    /// The mesh.
    pub mesh: String,
    /// The plan's fingerprint (also the copies' [`umbra_core::rollout::ROLLOUT_LABEL`]).
    pub plan: String,
    /// The stages, the last one the plan's own apply.
    pub stages: Vec<StageRecord>,
    /// How long each stage soaks before its gate (seconds).
    pub soak_seconds: u64,
    /// The gates' thresholds.
    pub thresholds: Thresholds,
    /// Running or how it ended.
    pub state: RolloutState,
    /// Where it stands.
    pub phase: Phase,
    /// Every decision, oldest first.
    pub decisions: Vec<Decision>,
    /// RFC 3339.
    pub started_at: String,
}

impl RolloutRecord {
    /// Record `action` about `stage` (0-based; `None`: the rollout).
    pub fn decide(
        &mut self,
        stage: Option<usize>,
        action: &str,
        detail: impl Into<String>,
        revision: Option<u64>,
        verdict: Option<Verdict>,
    ) {
        self.decisions.push(Decision {
            at: crate::store::now_rfc3339(),
            stage: stage.map(|s| s + 1),
            action: action.to_owned(),
            detail: detail.into(),
            revision,
            verdict,
        });
    }
}

/// Keep `record` among `rollouts` (replacing the one of its mesh and plan), then drop the
/// oldest finished ones past [`MAX_ROLLOUTS`].
pub fn keep(rollouts: &mut Vec<RolloutRecord>, record: RolloutRecord) {
    rollouts.retain(|r| !(r.mesh == record.mesh && r.plan == record.plan));
    rollouts.push(record);
    while rollouts.len() > MAX_ROLLOUTS {
        match rollouts
            .iter()
            .position(|r| r.state != RolloutState::Running)
        {
            Some(i) => {
                rollouts.remove(i);
            }
            None => break,
        }
    }
}

/// A DPP's key in a rollout: `<zone>/<name in its zone>`.
pub fn dpp_key(zone: &str, name: &str) -> String {
    format!("{zone}/{name}")
}

/// The Dataplanes of `dataplanes` (the Global's, synced by the zones) that one of `policies`
/// selects in the Shadow view of `resources` promoting them (its top-level targetRef; for a
/// type other than MeshHTTPRoute, as the DPP's generation reads it, builtin gateways
/// included), by [`dpp_key`], with each one's `kuma.io/service` values.
pub fn selected_dataplanes(
    mesh: &str,
    resources: &[Resource],
    policies: &BTreeSet<PolicyRef>,
    dataplanes: &[Stored],
) -> BTreeMap<String, BTreeSet<String>> {
    let set = PolicySet::build_shadow(
        mesh,
        resources,
        &Promotion::Set {
            promote: policies.clone(),
            retire: BTreeSet::new(),
        },
    );
    let mut out = BTreeMap::new();
    for s in dataplanes {
        let (Some(zone), Some(dp)) = (&s.zone, s.resource.as_dataplane()) else {
            continue;
        };
        // A DPP's selection lists every MeshHTTPRoute (they resolve references): a route is
        // the DPP's when its own top-level targetRef selects it.
        let deps = umbra_core::dependencies::selection(dp, &set);
        let selects = policies.iter().any(|(ty, name)| {
            if *ty == ResourceType::MeshHTTPRoute {
                set.matched(*ty, dp)
                    .dataplane_policies
                    .iter()
                    .any(|p| &p.meta().name == name)
            } else {
                deps.policies.iter().any(|d| d.ty == *ty && d.name == name)
            }
        });
        if selects {
            let local = local_name(s);
            let services = dp
                .networking
                .inbound
                .iter()
                .filter_map(|i| i.tags.get(umbra_core::target_ref::SERVICE_TAG).cloned())
                .collect();
            out.insert(dpp_key(zone, local), services);
        }
    }
    out
}

/// The rollout sample tags of a `share` of `selected` (the DPPs the plan's policies select,
/// by [`dpp_key`]) in rollout `plan`: [`umbra_core::sample::SAMPLE_TAG`] with the bound that
/// takes that many of their sample points. `None` when nothing is selected.
pub fn sample_tags(
    plan: &str,
    share: &Share,
    selected: &BTreeMap<String, BTreeSet<String>>,
    dataplanes: &[Stored],
) -> Option<BTreeMap<String, String>> {
    let seed = sample::seed_of(plan);
    let points: Vec<u64> = dataplanes
        .iter()
        .filter_map(|s| {
            let (zone, dp) = (s.zone.as_ref()?, s.resource.as_dataplane()?);
            selected
                .contains_key(&dpp_key(zone, local_name(s)))
                .then(|| sample::point(&seed, dp))
        })
        .collect();
    let bound = sample::bound_for(&points, sample::share_of(points.len(), share))?;
    let value = sample::Sample { seed, bound }.value();
    Some(BTreeMap::from([(sample::SAMPLE_TAG.to_owned(), value)]))
}

/// A synced Dataplane's name in its zone.
fn local_name(s: &Stored) -> &str {
    s.resource
        .meta
        .labels
        .get(DISPLAY_NAME_LABEL)
        .unwrap_or(&s.resource.meta.name)
}

/// The plan's promoted policies, as planned.
pub fn promoted_policies(plan: &PlanRecord) -> Result<Vec<Resource>, ApiError> {
    plan.promote
        .iter()
        .map(|p| {
            p.decode().map_err(|e| {
                ApiError::status(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the plan's copy of {}: {e}", p.shown()),
                )
            })
        })
        .collect()
}

/// The staged copies of `plan`'s policies for stage `stage` (0-based) of `tags`.
pub fn copies(
    plan: &PlanRecord,
    tags: &BTreeMap<String, String>,
    stage: usize,
) -> Result<Vec<Resource>, String> {
    let policies = promoted_policies(plan).map_err(|e| e.detail)?;
    policies
        .iter()
        .map(|p| {
            staged_copy(p, tags, &plan.fingerprint, stage + 1).map_err(|e| {
                format!(
                    "stage {}: {}/{}: {e}",
                    stage + 1,
                    p.ty().name(),
                    p.meta.name
                )
            })
        })
        .collect()
}

/// `<Type>/<name>` references of `resources`.
pub fn refs(resources: &[Resource]) -> BTreeSet<PolicyRef> {
    resources
        .iter()
        .map(|r| (r.ty(), r.meta.name.clone()))
        .collect()
}

/// Roll `r` back for `reason`, recording `action`.
pub fn roll_back(r: &mut RolloutRecord, stage: Option<usize>, action: &str, reason: String) {
    r.decide(stage, action, reason.clone(), None, None);
    r.phase = Phase::RollingBack { reason };
}

/// The tags of stage `stage` (0-based) of `r` (none for the last stage).
pub fn stage_tags(r: &RolloutRecord, stage: usize) -> BTreeMap<String, String> {
    r.stages
        .get(stage)
        .and_then(|s| s.tags.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mesh: &str, plan: &str, state: RolloutState) -> RolloutRecord {
        RolloutRecord {
            mesh: mesh.into(),
            plan: plan.into(),
            stages: vec![],
            soak_seconds: 1,
            thresholds: Thresholds::default(),
            state,
            phase: Phase::Done,
            decisions: vec![],
            started_at: String::new(),
        }
    }

    #[test]
    fn keeping_replaces_the_same_plan_and_never_drops_a_running_rollout() {
        let mut all = Vec::new();
        keep(&mut all, record("m", "a", RolloutState::Running));
        for i in 0..MAX_ROLLOUTS + 5 {
            keep(
                &mut all,
                record("m", &format!("done-{i}"), RolloutState::RolledBack),
            );
        }
        assert_eq!(all.len(), MAX_ROLLOUTS);
        assert!(all.iter().any(|r| r.plan == "a"));
        keep(&mut all, record("m", "a", RolloutState::Completed));
        assert_eq!(all.iter().filter(|r| r.plan == "a").count(), 1);
        // The phase reads back as written.
        let live = Phase::Live {
            stage: 0,
            since: "t".into(),
            acked: None,
            staged: BTreeMap::from([("z/a".to_owned(), TrafficSample::default())]),
            others: BTreeMap::new(),
            before: BTreeMap::new(),
        };
        let json = serde_json::to_value(&live).unwrap();
        assert_eq!(json["step"], "live");
        assert!(json.get("acked").is_none() && json.get("before").is_none());
        assert_eq!(serde_json::from_value::<Phase>(json).unwrap(), live);
    }
}
