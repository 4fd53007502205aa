//! Conformance runner for Kuma v2.7.29's targetRef fixtures.
//!
//! ```text
//! cargo run -p umbra-core --example conformance -- <dir>
//! ```
//!
//! `<dir>` may hold any subset of the fixture folders in the layout of
//! `shared/conformance/kuma-v2.7.29/` (`matchers/{dataplanepolicies,fromrules,torules}`,
//! `rules/{from,to,single}`, `validation/<Policy>`), or be one of them. Prints one line per case
//! (`PASS`/`FAIL <folder>/<case>`, with a structural diff for failures) and a final
//! `N passed, M failed` line; exits non-zero when anything failed.
//!
//! Comparison is structural (like gomega's MatchYAML): mapping key order is ignored, sequence
//! order and scalar types matter. Formats and semantics: the fixtures' README.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use umbra_core::codec::{decode_documents, decode_one, Limits};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::matching::{matched_policies, to_items, MatchOptions};
use umbra_core::policy::TargetRefPolicy;
use umbra_core::resource::{Meta, Resource};
use umbra_core::rules::{build_rules, Item, OriginMeta, Rule, Rules};
use umbra_core::target_ref::TargetRef;

/// Outcome of one fixture case.
#[derive(Debug)]
pub struct CaseResult {
    /// `<folder>/<case>`.
    pub name: String,
    /// `None` on success, else what differed.
    pub failure: Option<String>,
}

const MATCHER_KINDS: &[&str] = &["dataplanepolicies", "fromrules", "torules"];
const RULE_KINDS: &[&str] = &["from", "to", "single"];

/// Run every fixture folder found in `dir` (see the module docs), in a stable order.
pub fn run_dir(dir: &Path) -> Vec<CaseResult> {
    let mut folders: Vec<(String, String, PathBuf)> = Vec::new();
    let mut consider = |p: &Path| {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let parent = p
            .parent()
            .and_then(|q| q.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let known = (parent == "matchers" && MATCHER_KINDS.contains(&name.as_str()))
            || (parent == "rules" && RULE_KINDS.contains(&name.as_str()))
            || parent == "validation";
        if known {
            folders.push((parent, name, p.to_path_buf()));
        }
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        consider(&d);
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                }
            }
        }
    }
    folders.sort();
    folders.dedup();
    let mut results = Vec::new();
    for (parent, kind, path) in folders {
        for case in cases(&path) {
            let name = format!("{parent}/{kind}/{case}");
            let outcome = match parent.as_str() {
                "matchers" => run_matcher_case(&kind, &path, &case),
                "rules" => run_rules_case(&kind, &path, &case),
                _ => run_validation_case(&kind, &path.join(&case)),
            };
            results.push(CaseResult {
                name,
                failure: outcome.err(),
            });
        }
    }
    results
}

/// Case names: the part of each file name before the first `.` (validation: whole file names).
fn cases(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.ends_with(".yaml"))
                .collect()
        })
        .unwrap_or_default();
    let is_validation = folder
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "validation");
    if !is_validation {
        names = names
            .into_iter()
            .filter_map(|n| n.split('.').next().map(str::to_owned))
            .collect();
    }
    names.sort();
    names.dedup();
    names
}

fn read_docs(path: &Path) -> Result<Vec<Value>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    decode_documents(&bytes, Limits::default()).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_one(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    decode_one(&bytes, Limits::default()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse one policy document: typed for the types Umbra models, generic for the others.
fn to_policy(doc: &Value) -> Result<TargetRefPolicy, String> {
    let type_name = doc["type"].as_str().unwrap_or_default().to_owned();
    if let Ok(r) = Resource::from_value(doc.clone()) {
        if let Some(p) = TargetRefPolicy::from_resource(&r) {
            return Ok(p);
        }
    } else if umbra_core::resource::ResourceType::from_name(&type_name).is_some() {
        // A type Umbra models must decode strictly.
        return Err(Resource::from_value(doc.clone())
            .err()
            .map(|e| format!("{type_name} {}: {e}", doc["name"]))
            .unwrap_or_default());
    }
    let meta: Meta = Meta {
        mesh: doc["mesh"].as_str().unwrap_or_default().to_owned(),
        name: doc["name"].as_str().unwrap_or_default().to_owned(),
        labels: serde_json::from_value(doc.get("labels").cloned().unwrap_or(json!({})))
            .map_err(|e| e.to_string())?,
        ..Meta::default()
    };
    let spec = doc.get("spec").cloned().unwrap_or(json!({}));
    TargetRefPolicy::from_spec_value(&type_name, meta, &spec).map_err(|e| e.to_string())
}

fn origin_json(o: &OriginMeta) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(o.type_name));
    m.insert("mesh".into(), json!(o.meta.mesh));
    m.insert("name".into(), json!(o.meta.name));
    m.insert("creationTime".into(), json!("0001-01-01T00:00:00Z"));
    m.insert("modificationTime".into(), json!("0001-01-01T00:00:00Z"));
    if !o.meta.labels.is_empty() {
        m.insert("labels".into(), json!(o.meta.labels));
    }
    Value::Object(m)
}

fn rule_json(r: &Rule) -> Value {
    json!({
        "Subset": r.subset.0.iter().map(|t| json!({"Key": t.key, "Value": t.value, "Not": t.not})).collect::<Vec<_>>(),
        "Conf": r.conf,
        "Origin": r.origin.iter().map(origin_json).collect::<Vec<_>>(),
    })
}

fn rules_json(rules: &Rules) -> Value {
    Value::Array(rules.0.iter().map(rule_json).collect())
}

fn compare(expected: &Value, actual: &Value) -> Result<(), String> {
    if expected == actual {
        return Ok(());
    }
    let mut diffs = Vec::new();
    diff_values("", expected, actual, &mut diffs);
    Err(diffs.into_iter().take(10).collect::<Vec<_>>().join("\n"))
}

fn diff_values(path: &str, e: &Value, a: &Value, out: &mut Vec<String>) {
    match (e, a) {
        (Value::Object(eo), Value::Object(ao)) => {
            for (k, ev) in eo {
                match ao.get(k) {
                    Some(av) => diff_values(&format!("{path}/{k}"), ev, av, out),
                    None => out.push(format!("    {path}/{k}: missing (expected {ev})")),
                }
            }
            for k in ao.keys().filter(|k| !eo.contains_key(*k)) {
                out.push(format!("    {path}/{k}: unexpected {}", ao[k]));
            }
        }
        (Value::Array(ea), Value::Array(aa)) if ea.len() == aa.len() => {
            for (i, (ev, av)) in ea.iter().zip(aa).enumerate() {
                diff_values(&format!("{path}/{i}"), ev, av, out);
            }
        }
        _ if e != a => out.push(format!("    {path}: expected {e}, got {a}")),
        _ => {}
    }
}

fn run_matcher_case(kind: &str, folder: &Path, case: &str) -> Result<(), String> {
    let dp_doc = read_one(&folder.join(format!("{case}.dataplane.yaml")))?;
    let dp_res = Resource::from_value(dp_doc).map_err(|e| format!("dataplane: {e}"))?;
    let dp: &DataplaneSpec = dp_res
        .as_dataplane()
        .ok_or("dataplane file does not hold a Dataplane")?;
    let docs = read_docs(&folder.join(format!("{case}.policies.yaml")))?;
    let all: Vec<TargetRefPolicy> = docs.iter().map(to_policy).collect::<Result<_, _>>()?;
    let mut types: Vec<&str> = all.iter().map(TargetRefPolicy::type_name).collect();
    types.sort_unstable();
    types.dedup();
    let ty = if kind == "fromrules" {
        "MeshTrafficPermission"
    } else if types.len() == 2 && types.contains(&"MeshHTTPRoute") {
        types
            .iter()
            .copied()
            .find(|t| *t != "MeshHTTPRoute")
            .unwrap_or_default()
    } else {
        types.first().copied().unwrap_or_default()
    };
    let routes: Vec<&TargetRefPolicy> = all
        .iter()
        .filter(|p| p.type_name() == "MeshHTTPRoute")
        .collect();
    let (policies, policy_docs): (Vec<TargetRefPolicy>, Vec<&Value>) = all
        .iter()
        .zip(&docs)
        .filter(|(p, _)| p.type_name() == ty)
        .map(|(p, d)| (p.clone(), d))
        .unzip();
    let matched = matched_policies(dp, &policies, &routes, MatchOptions::default());
    let actual = match kind {
        "dataplanepolicies" => {
            let items: Vec<Value> = matched
                .dataplane_policies
                .iter()
                .map(|p| {
                    // Same-named policies exist (delegated case): find the document by identity.
                    let idx = policies
                        .iter()
                        .position(|q| std::ptr::eq(q, *p))
                        .unwrap_or_default();
                    let mut item = origin_json(&p.origin);
                    item["spec"] = spec_out(policy_docs[idx]);
                    item
                })
                .collect();
            json!({"items": items, "next": null, "total": 0})
        }
        "fromrules" => {
            let mut m = Map::new();
            for (k, rules) in &matched.from_rules {
                m.insert(k.to_string(), rules_json(rules));
            }
            json!({ "Rules": m })
        }
        _ => json!({ "Rules": rules_json(&matched.to_rules) }),
    };
    compare(
        &read_one(&folder.join(format!("{case}.golden.yaml")))?,
        &actual,
    )
}

/// The spec as Umbra re-serializes it (typed round trip for modelled types).
fn spec_out(doc: &Value) -> Value {
    match Resource::from_value(doc.clone()) {
        Ok(r) => r.spec_value(),
        Err(_) => doc.get("spec").cloned().unwrap_or(json!({})),
    }
}

fn run_rules_case(kind: &str, folder: &Path, case: &str) -> Result<(), String> {
    let input_path = folder.join(format!("{case}.input.yaml"));
    let text = std::fs::read_to_string(&input_path).map_err(|e| e.to_string())?;
    if !text.starts_with('#') {
        return Err("input must start with a # comment line".into());
    }
    let docs = read_docs(&input_path)?;
    let all: Vec<TargetRefPolicy> = docs.iter().map(to_policy).collect::<Result<_, _>>()?;
    let actual = match kind {
        "from" => {
            let items: Vec<Item<'_>> = all
                .iter()
                .flat_map(|p| {
                    p.from.iter().map(move |i| Item {
                        target_ref: i.target_ref.clone(),
                        conf: &i.conf,
                        origin: &p.origin,
                    })
                })
                .collect();
            let rules = build_rules(&items, true).map_err(|e| e.to_string())?;
            json!({"Rules": {"127.0.0.1:80": rules_json(&rules)}})
        }
        "to" => {
            let routes: Vec<&TargetRefPolicy> = all
                .iter()
                .filter(|p| p.type_name() == "MeshHTTPRoute")
                .collect();
            let policies: Vec<&TargetRefPolicy> = all
                .iter()
                .filter(|p| p.type_name() != "MeshHTTPRoute")
                .collect();
            let items = to_items(&policies, &routes).map_err(|e| e.to_string())?;
            json!({"Rules": rules_json(&build_rules(&items, false).map_err(|e| e.to_string())?)})
        }
        _ => {
            let empty = json!({});
            let items: Vec<Item<'_>> = all
                .iter()
                .map(|p| Item {
                    target_ref: TargetRef::mesh(),
                    conf: p.single.as_ref().unwrap_or(&empty),
                    origin: &p.origin,
                })
                .collect();
            json!({"Rules": rules_json(&build_rules(&items, false).map_err(|e| e.to_string())?)})
        }
    };
    compare(
        &read_one(&folder.join(format!("{case}.golden.yaml")))?,
        &actual,
    )
}

fn run_validation_case(policy_type: &str, file: &Path) -> Result<(), String> {
    let doc = read_one(file)?;
    let expected: Vec<BTreeMap<String, String>> = match doc["expected"].get("violations") {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let resource =
        Resource::from_value(doc["policy"].clone()).map_err(|e| format!("decode error: {e}"))?;
    let got: Vec<BTreeMap<String, String>> = resource
        .validate_spec()
        .violations
        .into_iter()
        .map(|v| {
            BTreeMap::from([
                ("field".to_owned(), v.field),
                ("message".to_owned(), v.message),
            ])
        })
        .collect();
    let (mut e, mut g) = (expected, got);
    if policy_type == "MeshFaultInjection" {
        e.sort();
        g.sort();
    }
    compare(&json!(e), &json!(g))
}

#[allow(dead_code)]
fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: conformance <fixtures dir>");
        std::process::exit(2);
    };
    let results = run_dir(Path::new(&dir));
    let mut failed = 0;
    for r in &results {
        match &r.failure {
            None => println!("PASS {}", r.name),
            Some(why) => {
                failed += 1;
                println!("FAIL {}\n{why}", r.name);
            }
        }
    }
    println!("{} passed, {} failed", results.len() - failed, failed);
    if failed > 0 || results.is_empty() {
        std::process::exit(1);
    }
}
