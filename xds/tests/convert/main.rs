//! The converter's equivalence proof (issue 19, "Empty-diff proof"): for each old-policy family,
//! a scenario of its own is generated with the old policies live, then again with the old
//! policies replaced by their conversion (promoted: shadow label removed). Every operation of
//! the RFC 6902 diff between the two must be explained by a note of the conversion (an Envoy
//! field it names in `affects`), and every note that names a field must show up in the diff:
//! what the converter says differs is exactly what differs.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeSet;

use serde_json::Value;
use umbra_core::convert::{convert, Conversion, Note, Options, CONVERTED_FROM_NAME_LABEL};
use umbra_core::resource::{Resource, ResourceType, TypeKind, EFFECT_LABEL};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

/// One RFC 6902 operation of a DPP's diff.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Op {
    /// The DPP.
    pub dataplane: String,
    /// `add`, `remove`, `replace`, ...
    pub op: String,
    /// The JSON pointer.
    pub path: String,
}

impl Op {
    /// The operation `op` at `path` of the diff of `dataplane`.
    pub fn new(dataplane: &str, op: &str, path: impl Into<String>) -> Self {
        Op {
            dataplane: dataplane.to_owned(),
            op: op.to_owned(),
            path: path.into(),
        }
    }
}

/// The operations `(dataplane, op, path)`.
pub fn ops<'a>(list: impl IntoIterator<Item = (&'a str, &'a str, String)>) -> Vec<Op> {
    list.into_iter()
        .map(|(dp, op, path)| Op::new(dp, op, path))
        .collect()
}

/// The operations `(op, rest)` of the diff of `dataplane`, each at `path(rest)`.
pub fn ops_on(dataplane: &str, path: impl Fn(&str) -> String, list: &[(&str, &str)]) -> Vec<Op> {
    list.iter()
        .map(|(op, rest)| Op::new(dataplane, op, path(rest)))
        .collect()
}

/// The JSON pointer of the listeners in a generated document.
pub const LISTENER: &str = "/type.googleapis.com~1envoy.config.listener.v3.Listener";
/// The JSON pointer of the clusters in a generated document.
pub const CLUSTER: &str = "/type.googleapis.com~1envoy.config.cluster.v3.Cluster";

/// The path of `rest` under the filters of listener `name`'s first chain.
pub fn filters(name: &str, rest: &str) -> String {
    format!("{LISTENER}/{name}/filterChains/0/filters/{rest}")
}

/// The path of `rest` in the typed config of listener `name`'s first filter (its connection
/// manager or TCP proxy).
pub fn typed_config(name: &str, rest: &str) -> String {
    filters(name, &format!("0/typedConfig/{rest}"))
}

/// What [`equivalence`] found.
#[derive(Debug)]
pub struct Report {
    /// Every conversion, in input order.
    pub conversions: Vec<Conversion>,
    /// Every diff operation over the DPPs, sorted.
    pub ops: Vec<Op>,
}

impl Report {
    /// Every note of every conversion.
    pub fn notes(&self) -> impl Iterator<Item = &Note> {
        self.conversions.iter().flat_map(|c| c.notes.iter())
    }
}

/// The unescaped segments of a JSON pointer.
fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// `true` when `note` explains an operation at `path`: a segment of the path is one of the
/// fields it names.
fn explains(note: &Note, path: &str) -> bool {
    let segs = segments(path);
    note.affects.iter().any(|a| segs.iter().any(|s| s == a))
}

/// The scenario with every converted old policy replaced by its outputs, promoted.
pub fn migrated(scenario: &[Resource], conversions: &[Conversion]) -> Vec<Resource> {
    let converted: BTreeSet<_> = conversions.iter().map(|c| c.source.clone()).collect();
    let mut out: Vec<Resource> = scenario
        .iter()
        .filter(|r| !converted.contains(&r.key()))
        .cloned()
        .collect();
    for c in conversions {
        for o in &c.outputs {
            let mut o = o.clone();
            assert!(o.meta.is_shadow(), "{} is not labelled shadow", o.meta.name);
            assert_eq!(
                o.meta.labels.get(CONVERTED_FROM_NAME_LABEL),
                Some(&c.source.name)
            );
            o.meta.labels.remove(EFFECT_LABEL);
            out.push(o);
        }
    }
    out
}

/// Convert every old policy of `scenario`, generate each of `dataplanes` before (old policies
/// live) and after (their conversions live instead), and check that the diff is exactly what
/// the notes announce. Panics with the unexplained operations or the notes without effect.
pub fn equivalence(scenario: &[Resource], dataplanes: &[&str]) -> Report {
    let results = convert(scenario, &Options::default());
    let conversions: Vec<Conversion> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("conversion failed: {e}")))
        .collect();
    assert!(
        !conversions.is_empty(),
        "the scenario has no old policy to convert"
    );
    let after = migrated(scenario, &conversions);
    let mut ops = Vec::new();
    for dp in dataplanes {
        let before = document(scenario, dp);
        let now = document(&after, dp);
        let patch = diff(&before, &now);
        assert_eq!(apply(&before, &patch).unwrap(), now);
        for op in serde_json::to_value(&patch).unwrap().as_array().unwrap() {
            ops.push(Op::new(
                dp,
                op["op"].as_str().unwrap(),
                op["path"].as_str().unwrap(),
            ));
        }
    }
    ops.sort();
    let report = Report { conversions, ops };
    let unexplained: Vec<&Op> = report
        .ops
        .iter()
        .filter(|op| !report.notes().any(|n| explains(n, &op.path)))
        .collect();
    assert!(
        unexplained.is_empty(),
        "operations no note explains: {unexplained:#?}\nnotes: {:#?}",
        report.notes().collect::<Vec<_>>()
    );
    let silent: Vec<&Note> = report
        .notes()
        .filter(|n| !n.affects.is_empty())
        .filter(|n| !report.ops.iter().any(|op| explains(n, &op.path)))
        .collect();
    assert!(
        silent.is_empty(),
        "notes announcing a change the diff does not show: {silent:#?}\nops: {:#?}",
        report.ops
    );
    report
}

/// [`equivalence`] of a scenario that converts whole: every old policy converts, to outputs of
/// the types `types` (sorted) only.
pub fn converts(scenario: &[Resource], dataplanes: &[&str], types: &[ResourceType]) -> Report {
    let report = equivalence(scenario, dataplanes);
    assert_eq!(report.conversions.len(), old_policies(scenario));
    assert_eq!(output_types(&report), types);
    report
}

/// The live configuration of the DPP `dp` generated from `resources`, as JSON.
pub fn document(resources: &[Resource], dp: &str) -> Value {
    common::snapshot(resources, dp, View::Live)
        .to_document()
        .unwrap()
}

/// Parse a multi-document YAML scenario.
pub fn scenario(yaml: &str) -> Vec<Resource> {
    Resource::all_from_bytes(yaml.as_bytes()).unwrap()
}

/// Types of the outputs, sorted and de-duplicated.
pub fn output_types(report: &Report) -> Vec<ResourceType> {
    let set: BTreeSet<ResourceType> = report
        .conversions
        .iter()
        .flat_map(|c| c.outputs.iter().map(Resource::ty))
        .collect();
    set.into_iter().collect()
}

/// Old policies of the scenario (for the assertion that each was converted).
pub fn old_policies(scenario: &[Resource]) -> usize {
    scenario
        .iter()
        .filter(|r| r.ty().kind() == TypeKind::OldPolicy)
        .count()
}

/// The spec of output `name` of type `ty`, as JSON.
pub fn output_spec(report: &Report, ty: ResourceType, name: &str) -> Value {
    report
        .conversions
        .iter()
        .flat_map(|c| c.outputs.iter())
        .find(|o| o.ty() == ty && o.meta.name == name)
        .unwrap_or_else(|| panic!("no output {} {name}", ty.name()))
        .spec_value()
}

// The scenario pieces several families share, then the family modules (one per old-policy
// family), each with its policies and tests.
mod scenarios;

mod circuit_breaker;
mod fault_injection;
mod health_check;
mod precedence;
mod proxy_template;
mod rate_limit;
mod retry;
mod timeout;
mod traffic_log;
mod traffic_permission;
mod traffic_route;
mod traffic_trace;
