//! Merging policy `default`s, as Kuma 2.7's `rules.MergeConfs` does for the policies Umbra
//! supports: the confs are folded left to right with RFC 7396 JSON merge patch (later wins,
//! arrays replaced, `null` deletes), then every list whose JSON name starts with `append`
//! (`appendModifications`) is replaced by the concatenation of that list across all confs, in
//! order (seed 001: "appendModifications allows to append modifications").
//!
//! Confs are JSON values as the typed model serializes them (empty fields omitted), so an
//! explicit empty list stays (Kuma fixture `rules/from/04`).

use serde_json::{Map, Value};

/// RFC 7396 merge of `patch` into `target`.
///
/// A non-object patch replaces the target; `null` members delete; objects merge recursively.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_obj) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch_obj {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Remove `null` members recursively (Kuma's confs never carry them: Go omits nil pointers).
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Merge confs in precedence order (lowest first). `None` when `confs` is empty.
///
/// Associative in the merge-patch part; `append*` lists concatenate in input order.
pub fn merge_confs(confs: &[&Value]) -> Option<Value> {
    let (first, rest) = confs.split_first()?;
    let mut result = (*first).clone();
    strip_nulls(&mut result);
    for c in rest {
        let mut c = (*c).clone();
        strip_nulls(&mut c);
        merge_patch(&mut result, &c);
    }
    if confs.len() > 1 {
        append_lists(&mut result, confs);
    }
    Some(result)
}

/// For every object reachable through objects from the root, set each `append*` array member to
/// the concatenation of the same member across `confs` (confs without it contribute nothing).
fn append_lists(result: &mut Value, confs: &[&Value]) {
    let Value::Object(obj) = result else { return };
    let keys: Vec<String> = obj.keys().cloned().collect();
    for k in keys {
        let is_append = k.starts_with("append") && obj.get(&k).is_some_and(Value::is_array);
        if is_append {
            let mut all = Vec::new();
            for c in confs {
                if let Some(Value::Array(items)) = c.get(&k) {
                    all.extend(items.iter().cloned());
                }
            }
            obj.insert(k, Value::Array(all));
        } else if obj.get(&k).is_some_and(Value::is_object) {
            let sub: Vec<&Value> = confs
                .iter()
                .filter_map(|c| c.get(&k))
                .filter(|v| v.is_object())
                .collect();
            if let Some(child) = obj.get_mut(&k) {
                append_lists(child, &sub);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn later_wins_and_nested_fields_inherit() {
        // seed 002: MeshSubset's 2s overrides Mesh's 10s, idleTimeout 5s is inherited
        let a = json!({"http": {"requestTimeout": "10s", "idleTimeout": "5s"}});
        let b = json!({"http": {"requestTimeout": "2s"}});
        assert_eq!(
            merge_confs(&[&a, &b]).unwrap(),
            json!({"http": {"requestTimeout": "2s", "idleTimeout": "5s"}})
        );
    }

    #[test]
    fn arrays_replace_and_empty_array_stays() {
        let a = json!({"backends": [{"type": "File"}, {"type": "File"}]});
        let b = json!({"backends": []});
        assert_eq!(merge_confs(&[&a, &b]).unwrap(), json!({"backends": []}));
    }

    #[test]
    fn append_lists_concatenate() {
        let a = json!({"appendModifications": [{"cluster": 1}]});
        let b = json!({"appendModifications": [{"cluster": 2}], "x": 1});
        let c = json!({"x": 2});
        assert_eq!(
            merge_confs(&[&a, &b, &c]).unwrap(),
            json!({"appendModifications": [{"cluster": 1}, {"cluster": 2}], "x": 2})
        );
    }

    #[test]
    fn empty_is_none() {
        assert_eq!(merge_confs(&[]), None);
    }

    /// Confs shaped like a typed policy conf: each key always holds the same kind of value
    /// (`a`/`b` scalars, `c` an object, `append*` lists), as serialized typed confs do.
    fn arb_conf() -> impl Strategy<Value = Value> {
        let scalar = prop_oneof![
            Just(json!(1)),
            Just(json!("s")),
            Just(json!(true)),
            Just(json!([1, 2]))
        ];
        let object = proptest::collection::btree_map("[ab]", scalar.clone(), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().collect()));
        (
            proptest::option::of(scalar.clone()),
            proptest::option::of(scalar),
            proptest::option::of(object),
            proptest::option::of(Just(())),
        )
            .prop_map(|(a, b, c, append)| {
                let mut o = Map::new();
                if let Some(a) = a {
                    o.insert("a".into(), a);
                }
                if let Some(b) = b {
                    o.insert("b".into(), b);
                }
                if let Some(c) = c {
                    o.insert("c".into(), c);
                }
                if append.is_some() {
                    o.insert("appendX".into(), json!(["x"]));
                }
                Value::Object(o)
            })
    }

    /// Merge patch is not associative in general (`{c:{b:1}}`, `{c:1}`, `{c:{}}`), but it is for
    /// schema-consistent confs, which is what policies produce.
    #[test]
    fn associativity_needs_consistent_shapes() {
        let (a, b, c) = (json!({"c": {"b": 1}}), json!({"c": 1}), json!({"c": {}}));
        let mut left = a.clone();
        merge_patch(&mut left, &b);
        merge_patch(&mut left, &c);
        let mut bc = b.clone();
        merge_patch(&mut bc, &c);
        let mut right = a;
        merge_patch(&mut right, &bc);
        assert_ne!(left, right);
    }

    proptest! {
        #[test]
        fn merge_patch_is_associative(a in arb_conf(), b in arb_conf(), c in arb_conf()) {
            // (a ⊕ b) ⊕ c == a ⊕ (b ⊕ c) for null-free objects
            let mut left = a.clone();
            merge_patch(&mut left, &b);
            merge_patch(&mut left, &c);
            let mut bc = b.clone();
            merge_patch(&mut bc, &c);
            let mut right = a.clone();
            merge_patch(&mut right, &bc);
            prop_assert_eq!(left, right);
        }

        #[test]
        fn merging_with_self_is_idempotent_without_appends(a in arb_conf()) {
            let mut a = a;
            if let Value::Object(m) = &mut a { m.retain(|k, _| !k.starts_with("append")); }
            prop_assert_eq!(merge_confs(&[&a, &a]).unwrap(), a);
        }

        #[test]
        fn append_length_is_sum(a in arb_conf(), b in arb_conf()) {
            let merged = merge_confs(&[&a, &b]).unwrap();
            let n = |v: &Value| v.get("appendX").and_then(Value::as_array).map_or(0, Vec::len);
            if merged.get("appendX").is_some() {
                prop_assert_eq!(n(&merged), n(&a) + n(&b));
            }
        }
    }
}
