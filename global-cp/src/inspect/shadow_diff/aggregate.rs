//! Folding the zones' DPP results into totals, per-zone tallies and operation groups
//! ([`Aggregate`]); pure. Each distinct operation is held once, with the DPPs sharing it, so
//! memory grows with distinct operations, not with the fleet.

use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;
use umbra_core::view::Promotion;
use umbra_kds::pb::DataplaneDiff;

use super::plan::Plan;
use super::report::{
    ChangeOut, DpLine, DpName, FailureOut, NotGeneratedOut, PatchOut, Report, Totals, ZoneTally,
};

/// DPPs listed per operation group in a `summary`.
pub const SAMPLE: usize = 10;
/// Failures listed in a `summary`.
pub const SUMMARY_FAILURES: usize = 100;

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

    /// The result document as JSON bytes ([`Aggregate::result`] serialized).
    pub fn report(&self, mesh: &str, plan: &Plan, promotion: &Promotion, full: bool) -> Vec<u8> {
        serde_json::to_vec(&self.result(mesh, plan, promotion, full)).unwrap_or_default()
    }

    /// The result document. `full` lists every DPP of each operation, every failure and, when
    /// patches were kept, each changed DPP's patch; otherwise groups list [`SAMPLE`] DPPs and
    /// [`SUMMARY_FAILURES`] failures.
    pub fn result<'a>(
        &'a self,
        mesh: &'a str,
        plan: &'a Plan,
        promotion: &Promotion,
        full: bool,
    ) -> Report<'a> {
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
                    causes: None,
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
        Report {
            kind: "result",
            mesh,
            policy: match promotion {
                Promotion::All => None,
                p => Some(p.to_string()),
            },
            shadow_policies: &plan.policies,
            not_generated: plan
                .not_generated
                .iter()
                .map(|((ty, name, field), (reason, n))| NotGeneratedOut {
                    type_name: ty,
                    name,
                    field: field.as_deref(),
                    reason,
                    dataplanes: *n,
                })
                .collect(),
            format: if full { "full" } else { "summary" },
            partial: self.partial(),
            totals: self.totals(),
            zones: &self.zones,
            changes,
            failures,
            dataplanes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use serde_json::{json, Value};

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
            not_generated: BTreeMap::new(),
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

    /// Operations of the report's groups, in order, with their counts.
    fn order(agg: &Aggregate) -> Vec<(Value, u64)> {
        let report: Value =
            serde_json::from_slice(&agg.report("m", &plan(), &Promotion::All, true)).unwrap();
        report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["operation"].clone(), c["count"].as_u64().unwrap()))
            .collect()
    }

    #[test]
    fn groups_of_the_same_size_order_by_operation_text() {
        const C: &str = r#"{"op":"add","path":"/c","value":3}"#;
        let mut agg = Aggregate::new(&plan(), false);
        agg.add("z1", item("d1", &[A], "")).unwrap();
        agg.add("z1", item("d2", &[C], "")).unwrap();
        agg.add("z1", item("d3", &[B], "")).unwrap();
        let ops: Vec<String> = order(&agg)
            .into_iter()
            .map(|(op, _)| op["op"].as_str().unwrap().to_owned())
            .collect();
        // {"op":"add"... < {"op":"remove"... < {"op":"replace"...
        assert_eq!(ops, ["add", "remove", "replace"]);
    }

    #[test]
    fn an_operation_twice_in_one_patch_counts_its_dataplane_once() {
        let mut agg = Aggregate::new(&plan(), true);
        let (_, outcome) = agg.add("z1", item("d1", &[A, A], "")).unwrap();
        assert_eq!(
            outcome,
            DpOutcome::Changed(vec![0, 0]),
            "the patch keeps both"
        );
        assert_eq!(order(&agg), vec![(serde_json::from_str(A).unwrap(), 1)]);
    }

    #[test]
    fn a_zone_that_never_finishes_stays_pending_and_the_result_partial() {
        let mut agg = Aggregate::new(&plan(), false);
        agg.add("z1", item("d1", &[A], "")).unwrap();
        agg.add("z1", item("d2", &[], "")).unwrap();
        agg.add("z1", item("d3", &[], "")).unwrap();
        assert_eq!(agg.zone_done("z1", Ok(())).unwrap().status, "ok");
        assert!(agg.partial(), "z2 has not answered");
        agg.add("z2", item("d1", &[], "")).unwrap();
        agg.add("z2", item("d4", &[], "")).unwrap();
        assert!(
            agg.partial(),
            "z2 answered for every DPP but has not finished"
        );
        agg.zone_done("z2", Ok(())).unwrap();
        assert!(!agg.partial());
        assert_eq!(agg.done(), 5);
    }
}
