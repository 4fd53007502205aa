//! The migration workflow on the Global (issue 19): plan, apply and roll back the switch from
//! old policies to their shadow `targetRef` replacements, promoting exactly what was reviewed.
//!
//! - `POST /meshes/{mesh}/_migration/plan` ([`plan`]): the fleet-wide diff of promoting the
//!   selected shadow policies (default: every shadow policy of the mesh) together with
//!   deleting the old policies they replace (default: each one's `umbra.io/converted-from`
//!   source, plus any `retire` named), with each change's causes from the converter's notes,
//!   and a **fingerprint** over the inputs (every policy of the mesh at its store version) and
//!   the diff. The plan is stored durably before the answer.
//! - `POST /meshes/{mesh}/_migration/apply` ([`apply`]): only when nothing changed since the
//!   plan: the inputs are at the planned versions and the fleet diff, computed again, has the
//!   same fingerprint (409 naming what changed otherwise; 503 when a zone does not answer, as
//!   the diff cannot then be proven unchanged). Then the shadow labels are removed and the old
//!   policies deleted in **one store transaction** (consecutive revisions, all or nothing, each
//!   write compare-and-swapped against its planned version, and refused if anything else of the
//!   mesh changed after it was read).
//! - `POST /meshes/{mesh}/_migration/rollback` ([`rollback`]): restores the planned state in
//!   one transaction (the promoted policies shadow again, the deleted ones re-created), only
//!   when none of them, nor anything else of the mesh, was touched since the apply (409
//!   otherwise).
//!
//! Plans are kept in the store's key table under [`record::plans_key`] (the latest
//! [`record::MAX_PLANS`] per mesh, an applied one longest), so they survive restarts of the
//! Global like everything else it acknowledged; each save is a compare-and-swap of the mesh's
//! list, so replicas of the Global planning at once keep every plan.

pub mod record;
pub mod rollout;
pub mod stages;
pub mod steps;
pub mod traffic;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use umbra_api::error::ApiError;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicyRef, Promotion};

use crate::inspect::context::{mesh_exists, mesh_stored, InspectContext};
use crate::inspect::shadow_diff::aggregate::Aggregate;
use crate::inspect::shadow_diff::plan::Plan;
use crate::inspect::shadow_diff::query::{fleet_timeout, DEFAULT_FLEET_TIMEOUT};
use crate::inspect::shadow_diff::report::{Report, ZoneTally};
use crate::inspect::shadow_diff::respond::{fleet_aggregate, plan_fleet};
use crate::store::{now_rfc3339, update_key, Store, StoreError, Write};
use record::{
    annotate_causes, changed_inputs, default_retire, fingerprint, inputs_of, plans_key, Applied,
    PlanRecord, Planned,
};

/// The body of `POST /meshes/{mesh}/_migration/plan`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanRequest {
    /// Shadow policies to promote, `<Type>/<name>` (default: every shadow policy of the mesh).
    #[serde(default)]
    pub policies: Vec<String>,
    /// Live policies to delete besides each promoted policy's converted-from source.
    #[serde(default)]
    pub retire: Vec<String>,
    /// Each zone's deadline (`30s` by default, at most 120 s).
    #[serde(default)]
    pub timeout: Option<String>,
}

/// The body of `POST /meshes/{mesh}/_migration/apply` and `.../rollback`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanRef {
    /// The plan's fingerprint.
    pub plan: String,
    /// Each zone's deadline when the diff is computed again (apply only).
    #[serde(default)]
    pub timeout: Option<String>,
}

/// An optional `timeout` ([`fleet_timeout`]; [`DEFAULT_FLEET_TIMEOUT`] when absent).
fn zone_timeout(v: Option<&str>) -> Result<Duration, ApiError> {
    v.map_or(Ok(DEFAULT_FLEET_TIMEOUT), fleet_timeout)
}

fn parse_refs(field: &str, items: &[String]) -> Result<BTreeSet<PolicyRef>, ApiError> {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let p = Promotion::parse(s)
                .map_err(|e| ApiError::bad_parameter(&format!("{field}[{i}]"), e))?;
            match p {
                Promotion::Only { ty, name } => Ok((ty, name)),
                _ => Err(ApiError::bad_parameter(
                    &format!("{field}[{i}]"),
                    format!("{s:?} is not <Type>/<name>"),
                )),
            }
        })
        .collect()
}

fn conflict(detail: impl Into<String>) -> ApiError {
    ApiError::status(StatusCode::CONFLICT, detail)
}

/// A fleet diff as the migration reads it: the zones' results folded ([`Aggregate`]) over the
/// DPPs of its [`Plan`]; [`FleetDiff::report`] is the typed result document.
struct FleetDiff {
    plan: Plan,
    aggregate: Aggregate,
    fingerprint: String,
}

impl FleetDiff {
    /// The result document in full format (serialized only in the answer).
    fn report<'a>(&'a self, mesh: &'a str, promotion: &Promotion) -> Report<'a> {
        self.aggregate.result(mesh, &self.plan, promotion, true)
    }
}

/// The fleet diff of `promotion` over `mesh` (full format; each changed DPP's own patch too
/// when `patches`), with its fingerprint.
async fn fleet_diff(
    cx: &InspectContext,
    mesh: &str,
    policies: &[Resource],
    inputs: &[record::Input],
    promotion: &Promotion,
    timeout: Duration,
    patches: bool,
) -> Result<FleetDiff, ApiError> {
    let plan = plan_fleet(cx, mesh, policies, promotion, None).await?;
    let aggregate = fleet_aggregate(cx, mesh, &plan, promotion, timeout, patches).await;
    let report = aggregate.result(mesh, &plan, promotion, true);
    let fingerprint = fingerprint(mesh, &promotion.to_string(), inputs, &report);
    Ok(FleetDiff {
        plan,
        aggregate,
        fingerprint,
    })
}

/// `POST /meshes/{mesh}/_migration/plan`: see the module docs. Answers the plan: its
/// `fingerprint`, what it promotes and retires, the fleet diff (`diff`, the `_shadow-diff`
/// result in full format with each changed DPP's patch, each change with its `causes`) and how many changes no converter
/// note explains (`unexplained`).
///
/// # Errors
/// 400 for a bad body, 404 for an unknown mesh or policy, 409 for a selection that is not
/// shadow/live as required or when there is nothing to promote, 503 when the store is
/// unavailable.
pub async fn plan(cx: &InspectContext, mesh: &str, req: PlanRequest) -> Result<Value, ApiError> {
    let timeout = zone_timeout(req.timeout.as_deref())?;
    mesh_exists(&*cx.store, mesh).await?;
    let stored = mesh_stored(&*cx.store, mesh).await?;
    let policies: Vec<Resource> = stored.iter().map(|s| s.resource.clone()).collect();
    let promote = if req.policies.is_empty() {
        policies
            .iter()
            .filter(|r| r.meta.is_shadow() && r.ty().kind().is_policy())
            .map(|r| (r.ty(), r.meta.name.clone()))
            .collect()
    } else {
        parse_refs("policies", &req.policies)?
    };
    if promote.is_empty() {
        return Err(conflict(format!(
            "mesh {mesh:?} has no shadow policy to promote (label kuma.io/effect: shadow)"
        )));
    }
    let mut retire = default_retire(&promote, &policies);
    retire.extend(parse_refs("retire", &req.retire)?);
    let promotion = Promotion::Set {
        promote: promote.clone(),
        retire: retire.clone(),
    };
    promotion.check(mesh, &policies).map_err(ApiError::from)?;
    let inputs = inputs_of(&stored);
    let diff = fleet_diff(cx, mesh, &policies, &inputs, &promotion, timeout, true).await?;
    let fp = diff.fingerprint.clone();
    let mut report = diff.report(mesh, &promotion);
    let pick = |set: &BTreeSet<PolicyRef>| -> Vec<Planned> {
        stored
            .iter()
            .filter(|s| set.contains(&(s.resource.ty(), s.resource.meta.name.clone())))
            .map(Planned::of)
            .collect()
    };
    let record = PlanRecord {
        mesh: mesh.to_owned(),
        fingerprint: fp.clone(),
        promotion: promotion.to_string(),
        created_at: now_rfc3339(),
        inputs,
        promote: pick(&promote),
        retire: pick(&retire),
        applied: None,
        rolled_back: None,
    };
    let retired: Vec<Resource> = record
        .retire
        .iter()
        .filter_map(|p| p.decode().ok())
        .collect();
    let the_mesh = policies
        .iter()
        .find(|r| r.ty() == ResourceType::Mesh && r.meta.name == mesh);
    let unexplained = annotate_causes(&mut report.changes, &retired, the_mesh);
    save(&*cx.store, &record).await?;
    Ok(json!({
        "mesh": mesh,
        "fingerprint": fp,
        "promote": record.promote.iter().map(Planned::shown).collect::<Vec<_>>(),
        "retire": record.retire.iter().map(Planned::shown).collect::<Vec<_>>(),
        "partial": report.partial,
        "unexplained": unexplained,
        "diff": report,
    }))
}

/// The plans of `mesh` stored as `bytes` (none stored: none).
fn decode_plans(mesh: &str, bytes: Option<&[u8]>) -> Result<Vec<PlanRecord>, ApiError> {
    let Some(bytes) = bytes else {
        return Ok(Vec::new());
    };
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::status(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the stored migration plans of mesh {mesh:?} cannot be read: {e}"),
        )
    })
}

async fn read_plans(store: &dyn Store, mesh: &str) -> Result<Vec<PlanRecord>, ApiError> {
    decode_plans(mesh, store.get_key(&plans_key(mesh)).await?.as_deref())
}

/// Keep `record` among its mesh's plans ([`record::keep`]), durably before it returns: a
/// compare-and-swap of the mesh's list ([`update_key`]), so plans saved at once through other
/// replicas of the Global sharing the store are all kept.
async fn save(store: &dyn Store, record: &PlanRecord) -> Result<(), ApiError> {
    update_key(store, &plans_key(&record.mesh), |stored| {
        let mut plans = decode_plans(&record.mesh, stored)?;
        record::keep(&mut plans, record.clone());
        serde_json::to_vec(&plans)
            .map(Some)
            .map_err(|e| ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    })
    .await?;
    Ok(())
}

async fn load(store: &dyn Store, mesh: &str, fp: &str) -> Result<PlanRecord, ApiError> {
    if fp.is_empty() || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_parameter(
            "plan",
            format!("{fp:?} is not a plan fingerprint (hex)"),
        ));
    }
    read_plans(store, mesh)
        .await?
        .into_iter()
        .find(|p| p.fingerprint == fp)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no migration plan {fp} for mesh {mesh:?} (the latest {} plans of a mesh are kept)",
                record::MAX_PLANS
            ))
        })
}

fn undecodable(p: &Planned, e: &umbra_core::resource::DecodeError) -> ApiError {
    ApiError::status(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the plan's copy of {} cannot be read: {e}", p.shown()),
    )
}

fn store_conflict(e: StoreError, what: &str) -> ApiError {
    match e {
        StoreError::Conflict { .. } | StoreError::NotFound(_) | StoreError::Changed { .. } => {
            conflict(format!("{what}: {e}; nothing was changed"))
        }
        e => ApiError::from(e),
    }
}

/// `POST /meshes/{mesh}/_migration/apply`: see the module docs. Answers `{applied: true,
/// revision, promoted, retired}`.
///
/// # Errors
/// 404 for an unknown mesh or plan, 409 when anything changed since the plan (naming what),
/// 503 when a zone did not answer or the store is unavailable.
pub async fn apply(cx: &InspectContext, mesh: &str, req: PlanRef) -> Result<Value, ApiError> {
    let timeout = zone_timeout(req.timeout.as_deref())?;
    mesh_exists(&*cx.store, mesh).await?;
    let mut record = load(&*cx.store, mesh, &req.plan).await?;
    // The mesh is read at `read_at` at the latest; the transaction commits only if nothing of
    // it changed after (a policy created or edited while the zones recompute the diff).
    let read_at = cx.store.revision().await?;
    let stored = mesh_stored(&*cx.store, mesh).await?;
    let inputs = inputs_of(&stored);
    let changed = changed_inputs(&record.inputs, &inputs);
    if !changed.is_empty() {
        return Err(conflict(format!(
            "the mesh changed since plan {}: {}; plan again",
            record.fingerprint,
            changed.join("; ")
        )));
    }
    let promotion = Promotion::parse(&record.promotion)
        .map_err(|e| ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let policies: Vec<Resource> = stored.iter().map(|s| s.resource.clone()).collect();
    let diff = fleet_diff(cx, mesh, &policies, &inputs, &promotion, timeout, false).await?;
    let (report, fp) = (diff.report(mesh, &promotion), &diff.fingerprint);
    if report.partial {
        return Err(ApiError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not every zone answered, so the fleet diff cannot be shown unchanged since plan {}: {}; try again when the zones are back",
                record.fingerprint,
                failing_zones(report.zones)
            ),
        ));
    }
    if *fp != record.fingerprint {
        return Err(conflict(format!(
            "the fleet diff changed since plan {} (now {fp}: the DPPs or what they run differ); plan again and review",
            record.fingerprint
        )));
    }
    let mut writes = Vec::new();
    for p in &record.promote {
        let r = p.decode().map_err(|e| undecodable(p, &e))?;
        writes.push(Write::Put {
            resource: Box::new(record::promoted(&r)),
            expected: Some(p.version),
        });
    }
    for p in &record.retire {
        let r = p.decode().map_err(|e| undecodable(p, &e))?;
        writes.push(Write::Delete {
            key: r.key(),
            expected: Some(p.version),
        });
    }
    writes.push(Write::MeshUnchanged {
        mesh: mesh.to_owned(),
        since: read_at,
    });
    let revision = cx
        .store
        .transact(writes)
        .await
        .map_err(|e| store_conflict(e, "the mesh changed while applying"))?
        .revision;
    record.applied = Some(Applied {
        at: now_rfc3339(),
        revision,
    });
    record.rolled_back = None;
    if let Err(e) = save(&*cx.store, &record).await {
        // The transaction is what counts; the record's note of it is informational.
        tracing::warn!(error = ?e, plan = %record.fingerprint, "migration applied but its record was not updated");
    }
    tracing::info!(%mesh, plan = %record.fingerprint, revision, "migration plan applied");
    Ok(json!({
        "applied": true,
        "plan": record.fingerprint,
        "revision": revision,
        "promoted": record.promote.iter().map(Planned::shown).collect::<Vec<_>>(),
        "retired": record.retire.iter().map(Planned::shown).collect::<Vec<_>>(),
    }))
}

fn failing_zones(zones: &[ZoneTally]) -> String {
    zones
        .iter()
        .filter(|z| z.status != "ok")
        .map(|z| format!("zone {} {}", z.zone, z.error.as_deref().unwrap_or("failed")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `POST /meshes/{mesh}/_migration/rollback`: see the module docs. Answers
/// `{rolledBack: true, revision, restored}`.
///
/// # Errors
/// 404 for an unknown mesh or plan, 409 when the plan is not applied or anything it changed
/// was touched since (naming what), 503 when the store is unavailable.
pub async fn rollback(cx: &InspectContext, mesh: &str, req: PlanRef) -> Result<Value, ApiError> {
    mesh_exists(&*cx.store, mesh).await?;
    let mut record = load(&*cx.store, mesh, &req.plan).await?;
    let mut touched = Vec::new();
    let mut writes = Vec::new();
    for p in &record.promote {
        let r = p.decode().map_err(|e| undecodable(p, &e))?;
        let now = cx.store.get(&r.key()).await?;
        let live = record::promoted(&r);
        let applied = now.as_ref().is_some_and(|s| {
            s.version == p.version + 1
                && s.resource.spec == live.spec
                && s.resource.meta.labels == live.meta.labels
        });
        if !applied {
            touched.push(match now {
                None => format!("{}: deleted since", p.shown()),
                Some(s) if s.version == p.version => format!("{}: not applied", p.shown()),
                Some(s) => format!(
                    "{}: at version {}, the apply left it at {}",
                    p.shown(),
                    s.version,
                    p.version + 1
                ),
            });
        }
        writes.push(Write::Put {
            resource: Box::new(r),
            expected: Some(p.version + 1),
        });
    }
    for p in &record.retire {
        let r = p.decode().map_err(|e| undecodable(p, &e))?;
        if let Some(s) = cx.store.get(&r.key()).await? {
            touched.push(format!(
                "{}: exists again (version {})",
                p.shown(),
                s.version
            ));
        }
        writes.push(Write::Put {
            resource: Box::new(r),
            expected: Some(0),
        });
    }
    if !touched.is_empty() {
        return Err(conflict(format!(
            "plan {} cannot be rolled back: {}",
            record.fingerprint,
            touched.join("; ")
        )));
    }
    // Nothing of the mesh may have changed since the apply (a policy created since would
    // keep the restored old policies switched off).
    if let Some(applied) = &record.applied {
        writes.push(Write::MeshUnchanged {
            mesh: mesh.to_owned(),
            since: applied.revision,
        });
    }
    let revision = cx
        .store
        .transact(writes)
        .await
        .map_err(|e| store_conflict(e, "the mesh changed since the apply"))?
        .revision;
    record.rolled_back = Some(Applied {
        at: now_rfc3339(),
        revision,
    });
    if let Err(e) = save(&*cx.store, &record).await {
        tracing::warn!(error = ?e, plan = %record.fingerprint, "migration rolled back but its record was not updated");
    }
    tracing::info!(%mesh, plan = %record.fingerprint, revision, "migration plan rolled back");
    Ok(json!({
        "rolledBack": true,
        "plan": record.fingerprint,
        "revision": revision,
        "restored": record
            .promote
            .iter()
            .chain(&record.retire)
            .map(Planned::shown)
            .collect::<Vec<_>>(),
    }))
}
