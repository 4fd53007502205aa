//! Config documents and their RFC 6902 diffs (transition seed 000, "Changes in the Inspect API").
//!
//! A config document is `{ "<typeUrl>": { "<resource name>": <proto3 JSON> } }`. The diff between
//! the Live and the Shadow documents is computed with the `json-patch` crate, so paths look like
//! `/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend/connectTimeout` (`/` in a key is
//! escaped as `~1`). The defining property: applying the diff to the live document yields the
//! shadow document exactly.

use serde_json::Value;

pub use json_patch::Patch;

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply JSON Patch: {0}")]
pub struct ApplyError(#[from] json_patch::PatchError);

/// The RFC 6902 patch turning `live` into `shadow` (`[]` when equal).
pub fn diff(live: &Value, shadow: &Value) -> Patch {
    json_patch::diff(live, shadow)
}

/// Apply `patch` to a copy of `doc`. All or nothing: on error `doc` is untouched.
///
/// # Errors
/// [`ApplyError`] when an operation's path does not exist or a `test` fails.
pub fn apply(doc: &Value, patch: &Patch) -> Result<Value, ApplyError> {
    let mut out = doc.clone();
    json_patch::patch(&mut out, patch)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn paths_escape_type_urls() {
        let live = json!({"type.googleapis.com/envoy.config.cluster.v3.Cluster": {}});
        let shadow = json!({"type.googleapis.com/envoy.config.cluster.v3.Cluster": {"test-cluster": {"name": "test-cluster", "connectTimeout": "5s", "type": "STATIC"}}});
        let patch = diff(&live, &shadow);
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/test-cluster", "value": {"name": "test-cluster", "connectTimeout": "5s", "type": "STATIC"}}])
        );
        assert_eq!(apply(&live, &patch).unwrap(), shadow);
        assert!(diff(&live, &live).0.is_empty());
    }

    fn arb_doc() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|i| json!(i)),
            "[a-z0-9/~.:]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c/~.]{1,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn applying_the_diff_yields_the_target(a in arb_doc(), b in arb_doc()) {
            let patch = diff(&a, &b);
            prop_assert_eq!(apply(&a, &patch).unwrap(), b);
        }
    }
}
