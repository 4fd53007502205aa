//! Config documents and their RFC 6902 diffs (transition seed 000, "Changes in the Inspect API").
//!
//! A config document is `{ "<typeUrl>": { "<resource name>": <proto3 JSON> } }`. The diff between
//! the Live and the Shadow documents is computed with the `json-patch` crate, so paths look like
//! `/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend/connectTimeout` (`/` in a key is
//! escaped as `~1`). The defining property: applying the diff to the live document yields the
//! shadow document exactly.

use serde_json::Value;

pub use json_patch::Patch;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use json_patch::{AddOperation, PatchOperation, RemoveOperation};
use prost::Name;

use crate::render::{to_json, RenderError};
use crate::snapshot::{HeldResource, Snapshot};
use umbra_xds_protocol::type_url::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, RUNTIME_TYPE, SECRET_TYPE,
};

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

/// The diff between two snapshots' config documents without rendering what did not change:
/// resources equal in both (compared as typed messages) are skipped, changed ones are rendered
/// and diffed under `/<typeUrl>/<name>`, added and removed ones become `add`/`remove`.
///
/// Applying the result to `live.to_document()` yields `shadow.to_document()` exactly (tested
/// against [`diff`] of the full documents). For the typical shadow question (a few resources
/// change) this renders a handful of resources instead of two whole configs.
///
/// # Errors
/// [`RenderError`] if a changed resource cannot be rendered.
pub fn snapshot_diff(live: &Snapshot, shadow: &Snapshot) -> Result<Patch, RenderError> {
    snapshot_diff_with(live, shadow, None)
}

/// Per-resource diffs shared by many [`snapshot_diff_cached`] calls, for questions that diff
/// thousands of DPPs at once (the fleet-wide shadow diff, issue 6).
///
/// The DPPs of a zone share most changed resources (the same outbound listener and cluster of
/// a service, changed the same way by the same policy), so a changed resource's operations
/// are computed once per distinct `(type, name, live bytes, shadow bytes)`: the key holds the
/// protobuf encodings themselves, so a hit is exact, never a hash collision (lookups borrow
/// them; only a stored entry copies them). At most `max_entries` are kept, holding at most
/// [`DIFF_CACHE_MAX_KEY_BYTES`] of encodings; past that, misses are computed and not stored.
#[derive(Debug)]
pub struct DiffCache {
    entries: Mutex<Entries>,
    max_entries: usize,
}

/// The most bytes of encodings a [`DiffCache`]'s keys hold (64 MiB).
pub const DIFF_CACHE_MAX_KEY_BYTES: usize = 64 << 20;

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<DiffKey, Arc<[PatchOperation]>, foldhash::fast::RandomState>,
    key_bytes: usize,
}

impl Entries {
    fn insert(&mut self, key: DiffKey, ops: Arc<[PatchOperation]>, max_entries: usize) {
        let bytes = key.live.len() + key.shadow.len() + key.name.len();
        if self.map.len() < max_entries
            && self.key_bytes + bytes <= DIFF_CACHE_MAX_KEY_BYTES
            && self.map.insert(key, ops).is_none()
        {
            // Counted once: two threads may have computed (and insert) the same key.
            self.key_bytes += bytes;
        }
    }
}

#[derive(Debug)]
struct DiffKey {
    type_url: &'static str,
    name: String,
    live: Vec<u8>,
    shadow: Vec<u8>,
}

/// A key's parts, borrowed: lookups build no key (no copy of the encodings).
trait KeyParts {
    fn parts(&self) -> (&str, &str, &[u8], &[u8]);
}

impl KeyParts for DiffKey {
    fn parts(&self) -> (&str, &str, &[u8], &[u8]) {
        (self.type_url, &self.name, &self.live, &self.shadow)
    }
}

impl KeyParts for (&str, &str, &[u8], &[u8]) {
    fn parts(&self) -> (&str, &str, &[u8], &[u8]) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for DiffKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl std::hash::Hash for dyn KeyParts + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl std::hash::Hash for DiffKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self as &dyn KeyParts).hash(state);
    }
}

impl PartialEq for DiffKey {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for DiffKey {}

impl DiffCache {
    /// An empty cache keeping at most `max_entries` resource diffs.
    pub fn new(max_entries: usize) -> Self {
        Self {
            entries: Mutex::new(Entries::default()),
            max_entries,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resource diffs held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// `true` when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`snapshot_diff`] with changed resources' operations taken from, or added to, `cache`.
/// SDS secrets are not compared: inspect documents never hold key material (a served Live
/// snapshot carries the DPP's identity, a generated one does not), and policies do not change
/// secrets. Otherwise the result is identical to [`snapshot_diff`]'s.
///
/// # Errors
/// [`RenderError`] if a changed resource cannot be rendered.
pub fn snapshot_diff_cached(
    live: &Snapshot,
    shadow: &Snapshot,
    cache: &DiffCache,
) -> Result<Patch, RenderError> {
    snapshot_diff_with(live, shadow, Some(cache))
}

/// The types a diff walks; the cached diff leaves secrets out.
fn diff_types(cached: bool) -> &'static [&'static str] {
    const ALL: &[&str] = &[
        CLUSTER_TYPE,
        ENDPOINT_TYPE,
        LISTENER_TYPE,
        ROUTE_TYPE,
        RUNTIME_TYPE,
        SECRET_TYPE,
    ];
    if cached {
        &ALL[..5]
    } else {
        ALL
    }
}

fn snapshot_diff_with(
    live: &Snapshot,
    shadow: &Snapshot,
    cache: Option<&DiffCache>,
) -> Result<Patch, RenderError> {
    let live_doc_has = |t: &str| type_present(live, t);
    let shadow_doc_has = |t: &str| type_present(shadow, t);
    let mut ops = Vec::new();
    for &t in diff_types(cache.is_some()) {
        match (live_doc_has(t), shadow_doc_has(t)) {
            (false, false) => continue,
            (true, false) => {
                ops.push(PatchOperation::Remove(RemoveOperation {
                    path: pointer(&[t]),
                }));
                continue;
            }
            (false, true) => {
                let whole = shadow.to_document()?.get(t).cloned().unwrap_or(Value::Null);
                ops.push(PatchOperation::Add(AddOperation {
                    path: pointer(&[t]),
                    value: whole,
                }));
                continue;
            }
            (true, true) => {}
        }
        match t {
            CLUSTER_TYPE => diff_map(t, &live.clusters, &shadow.clusters, cache, &mut ops)?,
            ENDPOINT_TYPE => diff_map(t, &live.endpoints, &shadow.endpoints, cache, &mut ops)?,
            LISTENER_TYPE => diff_map(t, &live.listeners, &shadow.listeners, cache, &mut ops)?,
            ROUTE_TYPE => diff_map(t, &live.routes, &shadow.routes, cache, &mut ops)?,
            RUNTIME_TYPE => diff_map(t, &live.runtimes, &shadow.runtimes, cache, &mut ops)?,
            _ => diff_map(t, &live.secrets, &shadow.secrets, cache, &mut ops)?,
        }
    }
    Ok(Patch(redact_ops(ops)))
}

/// `ops` with no private key in them ([`crate::render::redact_sensitive`]): values are
/// redacted, and an operation inside a sensitive field becomes one `replace` of that field with
/// its redacted form, so the patch still applies to redacted documents.
fn redact_ops(ops: Vec<PatchOperation>) -> Vec<PatchOperation> {
    use crate::render::{redact_sensitive, redacted_data_source, SENSITIVE_FIELDS};
    use json_patch::ReplaceOperation;
    let mut out: Vec<PatchOperation> = Vec::with_capacity(ops.len());
    for mut op in ops {
        let inside = {
            let path = match &op {
                PatchOperation::Add(o) => &o.path,
                PatchOperation::Remove(o) => &o.path,
                PatchOperation::Replace(o) => &o.path,
                PatchOperation::Move(o) => &o.path,
                PatchOperation::Copy(o) => &o.path,
                PatchOperation::Test(o) => &o.path,
            };
            // Most paths name no sensitive field: only those are split into tokens (a sensitive
            // token's text appears in the pointer as is: it has no `~` or `/` to escape).
            let named = SENSITIVE_FIELDS.iter().any(|f| path.as_str().contains(f));
            let tokens: Vec<_> = if named {
                path.tokens().map(|t| t.decoded().into_owned()).collect()
            } else {
                Vec::new()
            };
            tokens
                .iter()
                .position(|t| SENSITIVE_FIELDS.contains(&t.as_str()))
                .filter(|i| i + 1 < tokens.len())
                .map(|i| {
                    json_patch::jsonptr::PointerBuf::from_tokens(
                        tokens[..=i].iter().map(json_patch::jsonptr::Token::new),
                    )
                })
        };
        if let Some(field) = inside {
            let replaced = PatchOperation::Replace(ReplaceOperation {
                path: field,
                value: redacted_data_source(),
            });
            if out.last() != Some(&replaced) {
                out.push(replaced);
            }
            continue;
        }
        match &mut op {
            PatchOperation::Add(o) => redact_sensitive(&mut o.value),
            PatchOperation::Replace(o) => redact_sensitive(&mut o.value),
            PatchOperation::Test(o) => redact_sensitive(&mut o.value),
            _ => {}
        }
        out.push(op);
    }
    out
}

fn type_present(s: &Snapshot, t: &str) -> bool {
    match t {
        CLUSTER_TYPE => !s.clusters.is_empty(),
        ENDPOINT_TYPE => !s.endpoints.is_empty(),
        LISTENER_TYPE => !s.listeners.is_empty(),
        ROUTE_TYPE => !s.routes.is_empty(),
        RUNTIME_TYPE => !s.runtimes.is_empty(),
        _ => !s.secrets.is_empty(),
    }
}

fn pointer(parts: &[&str]) -> json_patch::jsonptr::PointerBuf {
    json_patch::jsonptr::PointerBuf::from_tokens(
        parts.iter().map(|p| json_patch::jsonptr::Token::new(*p)),
    )
}

fn diff_map<H: HeldResource>(
    type_url: &'static str,
    live: &BTreeMap<String, H>,
    shadow: &BTreeMap<String, H>,
    cache: Option<&DiffCache>,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), RenderError> {
    for (name, l) in live {
        match shadow.get(name) {
            None => ops.push(PatchOperation::Remove(RemoveOperation {
                path: pointer(&[type_url, name]),
            })),
            Some(s) if s.same(l) => {}
            Some(s) => match cache {
                None => crate::wire_diff::encoded_diff(
                    &H::Resource::full_name(),
                    l.wire(),
                    s.wire(),
                    &mut pointer(&[type_url, name]),
                    ops,
                )?,
                Some(cache) => {
                    ops.extend(
                        cached_ops::<H::Resource>(cache, type_url, name, l.wire(), s.wire())?
                            .iter()
                            .cloned(),
                    );
                }
            },
        }
    }
    for (name, s) in shadow {
        if !live.contains_key(name) {
            ops.push(PatchOperation::Add(AddOperation {
                path: pointer(&[type_url, name]),
                value: to_json(s.resource())?,
            }));
        }
    }
    Ok(())
}

fn cached_ops<M: Name>(
    cache: &DiffCache,
    type_url: &'static str,
    name: &str,
    live: &[u8],
    shadow: &[u8],
) -> Result<Arc<[PatchOperation]>, RenderError> {
    if let Some(hit) = cache
        .lock()
        .map
        .get(&(type_url, name, live, shadow) as &dyn KeyParts)
    {
        return Ok(hit.clone());
    }
    let key = DiffKey {
        type_url,
        name: name.to_owned(),
        live: live.to_vec(),
        shadow: shadow.to_vec(),
    };
    // Computed outside the lock: two threads may compute the same entry; both results are equal.
    let mut out = Vec::new();
    crate::wire_diff::encoded_diff(
        &M::full_name(),
        &key.live,
        &key.shadow,
        &mut pointer(&[type_url, name]),
        &mut out,
    )?;
    let out: Arc<[PatchOperation]> = out.into();
    cache.lock().insert(key, out.clone(), cache.max_entries);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A diff inside a private key (the admin listener's, rotated) is one `replace` of the key
    /// with its redacted form, cached or not; other operations are untouched.
    #[test]
    fn a_changed_private_key_is_replaced_by_its_redacted_form() {
        let snap = |key: &str, port: u16| {
            let mut s = Snapshot::default();
            let admin = crate::base::admin::EnvoyAdmin {
                port,
                ca_pem: "caPEM".into(),
                cert_pem: "certPEM".into(),
                key_pem: key.into(),
            };
            crate::base::admin::generate(&mut s, "192.168.0.1", &admin);
            s
        };
        let (live, shadow) = (snap("old-key", 9901), snap("new-key", 9902));
        for patch in [
            snapshot_diff(&live, &shadow).unwrap(),
            snapshot_diff_cached(&live, &shadow, &DiffCache::new(10)).unwrap(),
        ] {
            let text = serde_json::to_string(&patch).unwrap();
            for key in ["old-key", "new-key"] {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(key);
                assert!(!text.contains(&b64) && !text.contains(key), "{text}");
            }
            let redacted: Vec<_> = patch
                .0
                .iter()
                .filter(|op| matches!(op, PatchOperation::Replace(o) if o.path.as_str().ends_with("/privateKey") && o.value == crate::render::redacted_data_source()))
                .collect();
            assert_eq!(redacted.len(), 1, "{text}");
            assert!(text.contains("portValue"), "the port change stays: {text}");
        }
    }

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
