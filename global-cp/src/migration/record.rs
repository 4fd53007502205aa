//! The pure half of a migration plan (issue 19): what a plan records ([`PlanRecord`]), its
//! fingerprint over the inputs and the diff ([`fingerprint`]), the default retirements of a
//! promotion ([`default_retire`]), and the causes of each remaining difference, from the
//! converter's notes ([`annotate_causes`]). No IO.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use umbra_core::convert::{convert, Options, CONVERTED_FROM_NAME_LABEL, CONVERTED_FROM_TYPE_LABEL};
use umbra_core::resource::{Resource, ResourceKey, ResourceType, TypeKind, EFFECT_LABEL};
use umbra_core::view::PolicyRef;

use crate::inspect::shadow_diff::report::{Cause, ChangeOut, Report};
use crate::store::Stored;

/// One resource a plan depends on, at the version it was planned against.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Input {
    /// Type name (`MeshTimeout`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Name.
    pub name: String,
    /// Store version.
    pub version: u64,
}

/// A resource a plan changes: its version and whole content when planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Planned {
    /// Type name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Name.
    pub name: String,
    /// Store version when planned.
    pub version: u64,
    /// The resource as stored when planned (Kuma's universal document).
    pub resource: Value,
}

impl Planned {
    /// The record of `s`.
    pub fn of(s: &Stored) -> Self {
        Self {
            type_name: s.resource.ty().name().to_owned(),
            name: s.resource.meta.name.clone(),
            version: s.version,
            resource: s.resource.to_value(),
        }
    }

    /// `<Type>/<name>`.
    pub fn shown(&self) -> String {
        format!("{}/{}", self.type_name, self.name)
    }

    /// The resource as planned.
    ///
    /// # Errors
    /// The decode error when the recorded document no longer decodes.
    pub fn decode(&self) -> Result<Resource, umbra_core::resource::DecodeError> {
        Resource::from_value(self.resource.clone())
    }
}

/// When a plan was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// RFC 3339.
    pub at: String,
    /// The store revision of the transaction's last change.
    pub revision: u64,
}

/// What `POST /meshes/{mesh}/_migration/plan` stores (durably, before it answers), among the
/// mesh's plans under [`plans_key`]: enough to check an apply against, and to roll it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// The mesh.
    pub mesh: String,
    /// The fingerprint ([`fingerprint`]).
    pub fingerprint: String,
    /// The promotion as `policy=` reads it (`MeshTimeout/a,-Timeout/b`).
    pub promotion: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// Every policy of the mesh and the Mesh itself, at their versions.
    pub inputs: Vec<Input>,
    /// Shadow policies the plan promotes, as they were.
    pub promote: Vec<Planned>,
    /// Live policies the plan deletes, as they were.
    pub retire: Vec<Planned>,
    /// When it was applied, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
    /// When it was rolled back, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<Applied>,
}

/// The store key ([`crate::store::Store::set_key`]) holding the plans of `mesh` (a JSON array
/// of [`PlanRecord`]s, oldest first, at most [`MAX_PLANS`]).
pub fn plans_key(mesh: &str) -> String {
    format!("migration-plans/{mesh}")
}

/// Plans kept per mesh: planning again and again never grows the store without bound.
pub const MAX_PLANS: usize = 16;

/// Keep `record` among `plans` (replacing the one with its fingerprint), then drop the oldest
/// plans past [`MAX_PLANS`]: first those not applied (or rolled back), then the oldest of the
/// rest (a plan that is applied and not rolled back stays longest, so it can still be rolled
/// back); never `record` itself, whose fingerprint the caller is about to answer.
pub fn keep(plans: &mut Vec<PlanRecord>, record: PlanRecord) {
    plans.retain(|p| p.fingerprint != record.fingerprint);
    plans.push(record);
    while plans.len() > MAX_PLANS {
        // Never the plan just kept (the last one).
        let older = plans.len() - 1;
        let live = |p: &PlanRecord| p.applied.is_some() && p.rolled_back.is_none();
        let victim = plans[..older].iter().position(|p| !live(p)).unwrap_or(0);
        plans.remove(victim);
    }
}

/// The inputs of a plan: every stored policy of the mesh and the Mesh, sorted.
pub fn inputs_of(stored: &[Stored]) -> Vec<Input> {
    let mut out: Vec<Input> = stored
        .iter()
        .map(|s| Input {
            type_name: s.resource.ty().name().to_owned(),
            name: s.resource.meta.name.clone(),
            version: s.version,
        })
        .collect();
    out.sort();
    out
}

/// What changed between the planned `inputs` and `now`: one line per resource added,
/// removed or at another version (`MeshTimeout/a: version 3, planned at 2`).
pub fn changed_inputs(planned: &[Input], now: &[Input]) -> Vec<String> {
    let key = |i: &Input| (i.type_name.clone(), i.name.clone());
    let a: BTreeMap<_, u64> = planned.iter().map(|i| (key(i), i.version)).collect();
    let b: BTreeMap<_, u64> = now.iter().map(|i| (key(i), i.version)).collect();
    let mut out = Vec::new();
    for ((ty, name), v) in &a {
        match b.get(&(ty.clone(), name.clone())) {
            None => out.push(format!("{ty}/{name}: deleted (planned at version {v})")),
            Some(w) if w != v => out.push(format!("{ty}/{name}: version {w}, planned at {v}")),
            Some(_) => {}
        }
    }
    for ((ty, name), w) in &b {
        if !a.contains_key(&(ty.clone(), name.clone())) {
            out.push(format!("{ty}/{name}: created since (version {w})"));
        }
    }
    out
}

/// The live policies promoting `promote` retires by default: the old policy each promoted
/// policy was converted from ([`CONVERTED_FROM_TYPE_LABEL`], [`CONVERTED_FROM_NAME_LABEL`]),
/// when it is stored in the mesh and live.
pub fn default_retire(promote: &BTreeSet<PolicyRef>, policies: &[Resource]) -> BTreeSet<PolicyRef> {
    let mut out = BTreeSet::new();
    for r in policies {
        if !promote.contains(&(r.ty(), r.meta.name.clone())) {
            continue;
        }
        let (Some(ty), Some(name)) = (
            r.meta
                .labels
                .get(CONVERTED_FROM_TYPE_LABEL)
                .and_then(|t| ResourceType::from_name(t))
                .filter(|t| t.kind() == TypeKind::OldPolicy),
            r.meta.labels.get(CONVERTED_FROM_NAME_LABEL),
        ) else {
            continue;
        };
        let live = policies
            .iter()
            .any(|o| o.ty() == ty && o.meta.name == *name && !o.meta.is_shadow());
        if live {
            out.insert((ty, name.clone()));
        }
    }
    out
}

/// The fingerprint of a plan: SHA-256 (hex) over the mesh, the promotion, every input at its
/// version, and the fleet diff's (`report`, in full) operations with the DPPs each applies to
/// (sorted, so the order in which zones answered does not matter) and its totals. Causes do
/// not count.
pub fn fingerprint(mesh: &str, promotion: &str, inputs: &[Input], report: &Report<'_>) -> String {
    let mut changes: Vec<Value> = report
        .changes
        .iter()
        .map(|c| {
            let mut dps: Vec<Value> = c.dataplanes.iter().map(|d| json!(d)).collect();
            dps.sort_by_key(ToString::to_string);
            json!({"operation": c.operation, "dataplanes": dps})
        })
        .collect();
    changes.sort_by_key(ToString::to_string);
    let doc = json!({
        "mesh": mesh,
        "promotion": promotion,
        "inputs": inputs,
        "changes": changes,
        "totals": report.totals,
    });
    let digest = ring::digest::digest(&ring::digest::SHA256, doc.to_string().as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The promoted policy as it goes live: the stored one without the shadow label.
pub fn promoted(resource: &Resource) -> Resource {
    let mut r = resource.clone();
    r.meta.labels.remove(EFFECT_LABEL);
    r
}

/// Annotate each of a fleet diff's `changes` with its `causes`: the notes of the conversion of
/// the retired old policies (converted together, as `umbractl convert` converts a file, with
/// their `mesh` for the backends some need) whose Envoy fields the operation's path names
/// (seed 000's leaking defaults and the like). Returns how many changes no note explains.
pub fn annotate_causes(
    changes: &mut [ChangeOut<'_>],
    retired: &[Resource],
    mesh: Option<&Resource>,
) -> usize {
    let inputs: Vec<Resource> = mesh
        .into_iter()
        .chain(
            retired
                .iter()
                .filter(|r| r.ty().kind() == TypeKind::OldPolicy),
        )
        .cloned()
        .collect();
    let notes: Vec<(String, umbra_core::convert::Note)> = convert(&inputs, &Options::default())
        .into_iter()
        .filter_map(Result::ok)
        .flat_map(|c| {
            let source = shown(&c.source);
            c.notes.into_iter().map(move |n| (source.clone(), n))
        })
        .collect();
    let mut unexplained = 0;
    for c in changes {
        let operation: Value = serde_json::from_str(c.operation.get()).unwrap_or_default();
        let path = operation
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let segments: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let causes: Vec<Cause> = notes
            .iter()
            .filter(|(_, n)| n.affects.iter().any(|a| segments.contains(a)))
            .map(|(policy, n)| Cause {
                policy: policy.clone(),
                kind: n.kind,
                field: n.field.clone(),
                message: n.message.clone(),
            })
            .collect();
        if causes.is_empty() {
            unexplained += 1;
        }
        c.causes = Some(causes);
    }
    unexplained
}

/// `<Type>/<name>` of a key.
pub fn shown(key: &ResourceKey) -> String {
    format!("{}/{}", key.ty.name(), key.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    fn input(ty: &str, name: &str, version: u64) -> Input {
        Input {
            type_name: ty.into(),
            name: name.into(),
            version,
        }
    }

    #[test]
    fn changed_inputs_name_every_difference() {
        let planned = [input("MeshTimeout", "a", 1), input("Timeout", "b", 2)];
        let now = [input("MeshTimeout", "a", 2), input("MeshRetry", "c", 1)];
        assert_eq!(
            changed_inputs(&planned, &now),
            [
                "MeshTimeout/a: version 2, planned at 1",
                "Timeout/b: deleted (planned at version 2)",
                "MeshRetry/c: created since (version 1)",
            ]
        );
        assert!(changed_inputs(&planned, &planned).is_empty());
    }

    fn raw(v: Value) -> Box<serde_json::value::RawValue> {
        serde_json::value::RawValue::from_string(v.to_string()).unwrap()
    }

    fn change<'a>(
        op: &'a serde_json::value::RawValue,
        dps: &[(&'a str, &'a str)],
    ) -> ChangeOut<'a> {
        ChangeOut {
            operation: op,
            count: dps.len(),
            dataplanes: dps
                .iter()
                .map(|(zone, name)| crate::inspect::shadow_diff::report::DpName { zone, name })
                .collect(),
            causes: None,
        }
    }

    fn report<'a>(changes: Vec<ChangeOut<'a>>) -> Report<'a> {
        Report {
            kind: "result",
            mesh: "m",
            policy: None,
            shadow_policies: &[],
            not_generated: Vec::new(),
            format: "full",
            partial: false,
            totals: crate::inspect::shadow_diff::report::Totals {
                changed: 2,
                ..Default::default()
            },
            zones: &[],
            changes,
            failures: Vec::new(),
            dataplanes: None,
        }
    }

    #[test]
    fn the_fingerprint_ignores_answer_order_and_follows_inputs_and_diff() {
        let (x, y) = (
            raw(json!({"op": "remove", "path": "/x"})),
            raw(json!({"op": "add", "path": "/y", "value": 1})),
        );
        let diff = |dps: &[(&'static str, &'static str)]| {
            report(vec![change(&x, dps), change(&y, &[("z1", "a")])])
        };
        let inputs = [input("MeshTimeout", "a", 1)];
        let a = diff(&[("z1", "a"), ("z2", "b")]);
        let b = diff(&[("z2", "b"), ("z1", "a")]);
        let fa = fingerprint("m", "MeshTimeout/a", &inputs, &a);
        assert_eq!(fa.len(), 64);
        assert_eq!(fa, fingerprint("m", "MeshTimeout/a", &inputs, &b));
        let fewer = diff(&[("z1", "a")]);
        assert_ne!(fa, fingerprint("m", "MeshTimeout/a", &inputs, &fewer));
        assert_ne!(
            fa,
            fingerprint("m", "MeshTimeout/a", &[input("MeshTimeout", "a", 2)], &a)
        );
        assert_ne!(
            fa,
            fingerprint("m", "MeshTimeout/a,-Timeout/b", &inputs, &a)
        );
        assert_ne!(fa, fingerprint("other", "MeshTimeout/a", &inputs, &a));
        // The digest of the document plans were fingerprinted over when the diff was read back
        // from its JSON (kept plans must still match).
        let doc = json!({
            "mesh": "m",
            "promotion": "MeshTimeout/a",
            "inputs": inputs,
            "changes": [
                {"operation": {"op": "add", "path": "/y", "value": 1}, "dataplanes": [{"zone": "z1", "name": "a"}]},
                {"operation": {"op": "remove", "path": "/x"}, "dataplanes": [{"zone": "z1", "name": "a"}, {"zone": "z2", "name": "b"}]},
            ],
            "totals": {"considered": 0, "changed": 2, "unchanged": 0, "failed": 0},
        });
        let digest = ring::digest::digest(&ring::digest::SHA256, doc.to_string().as_bytes());
        let expected: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(fa, expected);
    }

    #[test]
    fn converted_policies_retire_their_live_source_by_default() {
        let policies = vec![
            res("type: Timeout\nmesh: m\nname: old\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 5s}\n"),
            res("type: MeshTimeout\nmesh: m\nname: new\nlabels: {kuma.io/effect: shadow, umbra.io/converted-from-type: Timeout, umbra.io/converted-from: old}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 5s}\n"),
            res("type: MeshTimeout\nmesh: m\nname: gone\nlabels: {kuma.io/effect: shadow, umbra.io/converted-from-type: Timeout, umbra.io/converted-from: absent}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 5s}\n"),
        ];
        let promote: BTreeSet<PolicyRef> = [
            (ResourceType::MeshTimeout, "new".to_owned()),
            (ResourceType::MeshTimeout, "gone".to_owned()),
        ]
        .into();
        assert_eq!(
            default_retire(&promote, &policies),
            BTreeSet::from([(ResourceType::Timeout, "old".to_owned())])
        );
        assert!(default_retire(&BTreeSet::new(), &policies).is_empty());
        let p = promoted(&policies[1]);
        assert!(!p.meta.is_shadow());
        assert_eq!(p.meta.labels.get(CONVERTED_FROM_NAME_LABEL).unwrap(), "old");
    }

    #[test]
    fn plan_records_round_trip() {
        let record = PlanRecord {
            mesh: "m".into(),
            fingerprint: "f".into(),
            promotion: "MeshTimeout/a".into(),
            created_at: "2026-11-26T00:00:00Z".into(),
            inputs: vec![input("Mesh", "m", 1)],
            promote: vec![],
            retire: vec![],
            applied: None,
            rolled_back: None,
        };
        let bytes = serde_json::to_vec(&record).unwrap();
        assert_eq!(
            serde_json::from_slice::<PlanRecord>(&bytes).unwrap(),
            record
        );
        assert_eq!(plans_key("m"), "migration-plans/m");
    }

    #[test]
    fn plans_are_bounded_and_an_applied_one_stays_longest() {
        let plan = |fp: String, applied: bool| PlanRecord {
            mesh: "m".into(),
            fingerprint: fp,
            promotion: String::new(),
            created_at: String::new(),
            inputs: vec![],
            promote: vec![],
            retire: vec![],
            applied: applied.then(|| Applied {
                at: String::new(),
                revision: 1,
            }),
            rolled_back: None,
        };
        let mut plans = Vec::new();
        keep(&mut plans, plan("applied".into(), true));
        for i in 0..40 {
            keep(&mut plans, plan(format!("p{i}"), false));
        }
        assert_eq!(plans.len(), MAX_PLANS);
        assert_eq!(plans[0].fingerprint, "applied");
        assert_eq!(plans.last().unwrap().fingerprint, "p39");
        // Saving a plan again replaces it.
        let mut again = plan("p39".into(), true);
        again.created_at = "later".into();
        keep(&mut plans, again);
        assert_eq!(plans.len(), MAX_PLANS);
        assert_eq!(plans.iter().filter(|p| p.fingerprint == "p39").count(), 1);
        assert_eq!(plans.last().unwrap().created_at, "later");
        // Every kept plan applied: a new one is still kept (the oldest applied one goes).
        let mut applied: Vec<PlanRecord> = (0..MAX_PLANS)
            .map(|i| plan(format!("a{i}"), true))
            .collect();
        keep(&mut applied, plan("new".into(), false));
        assert_eq!(applied.len(), MAX_PLANS);
        assert_eq!(applied.last().unwrap().fingerprint, "new");
        assert_eq!(applied[0].fingerprint, "a1");
    }

    #[test]
    fn causes_come_from_the_retired_policies_conversion_notes() {
        let old = res("type: Timeout\nmesh: m\nname: old\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 5s, http: {requestTimeout: 15s}}\n");
        let (headers, connect) = (
            raw(
                json!({"op": "add", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:10.0.0.1:80/filterChains/0/filters/0/typedConfig/requestHeadersTimeout", "value": "0s"}),
            ),
            raw(
                json!({"op": "replace", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/web/connectTimeout", "value": "9s"}),
            ),
        );
        let mut changes = vec![change(&headers, &[]), change(&connect, &[])];
        let unexplained = annotate_causes(&mut changes, &[old], None);
        assert_eq!(unexplained, 1);
        let causes = changes[0].causes.as_ref().unwrap();
        assert!(!causes.is_empty());
        assert_eq!(causes[0].policy, "Timeout/old");
        assert!(causes[0].message.contains("requestHeadersTimeout"));
        assert_eq!(changes[1].causes, Some(vec![]));
        let shown = json!(changes[0]);
        assert_eq!(
            shown.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["operation", "count", "dataplanes", "causes"]
        );
        assert_eq!(
            shown["causes"][0]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["policy", "kind", "field", "message"]
        );
    }
}
