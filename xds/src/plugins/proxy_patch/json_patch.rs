//! RFC 6902 JSON Patch as Kuma 2.7 applies MeshProxyPatch `jsonPatches`
//! (`pkg/plugins/policies/core/jsonpatch/merge.go`): evanphx/json-patch v5 with the options
//! `SupportNegativeIndices`, `AllowMissingPathOnRemove` and `EnsurePathExistsOnAdd`.
//!
//! - `add` first creates the missing intermediate containers of its path: an array when the
//!   next token is an index or `-`, an object otherwise (arrays are padded with `null`s up to
//!   the index);
//! - `remove` of a path that does not exist does nothing;
//! - array indices may be negative (`-1` is the last element; for `add`, `-1` appends);
//! - `replace`, `move`, `copy` and `test` need their paths to exist, else the patch fails;
//! - the empty path (the whole document) only works with `replace` and `test`; `remove` of it
//!   does nothing, as in evanphx.
//!
//! Unlike evanphx, the work is bounded: at most [`MAX_OPERATIONS`] operations, pointers of at
//! most [`MAX_POINTER_TOKENS`] tokens, documents at most [`MAX_DEPTH`] deep, at most
//! [`MAX_COPY_BYTES`] copied by `copy` operations and at most [`MAX_PADDING`] `null`s padded
//! into an array.

use serde_json::{Map, Value};
use umbra_core::policies::mesh_proxy_patch::JsonPatchBlock;

/// Most operations one `jsonPatches` list may hold.
pub const MAX_OPERATIONS: usize = 1024;
/// Most reference tokens in one JSON pointer.
pub const MAX_POINTER_TOKENS: usize = 64;
/// Deepest document a patch may produce (containers nested).
pub const MAX_DEPTH: usize = 128;
/// Most bytes (serialised JSON) all `copy` operations of one list may copy.
pub const MAX_COPY_BYTES: usize = 4 << 20;
/// Most `null`s one `add` may pad into an array.
pub const MAX_PADDING: usize = 1024;

/// Why a `jsonPatches` list does not apply; its text is the reason a MeshProxyPatch's
/// `GenerateError` reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPatchError {
    /// The list is longer than [`MAX_OPERATIONS`].
    #[error("{count} JSON patch operations, more than the limit of {MAX_OPERATIONS}")]
    TooManyOperations {
        /// How many operations the list holds.
        count: usize,
    },
    /// Operation `index` (0-based) failed.
    #[error("jsonPatches[{index}]: {error}")]
    Operation {
        /// Position of the failing operation in the list.
        index: usize,
        /// Why it failed.
        error: OpError,
    },
}

/// Why one JSON Patch operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// `op` (`add`, `remove`, `replace`) cannot be applied at `path`.
    #[error("{op} operation does not apply for {path:?}: {error}")]
    Path {
        /// The operation.
        op: &'static str,
        /// Its `path`.
        path: String,
        /// What is wrong with the path.
        error: PathError,
    },
    /// `op` (`move`, `copy`) cannot read its `from` path.
    #[error("{op} operation does not apply for from path {from:?}: {error}")]
    From {
        /// The operation.
        op: &'static str,
        /// Its `from`.
        from: String,
        /// What is wrong with the path.
        error: PathError,
    },
    /// `op` (`move`, `copy`) cannot write its `path`.
    #[error("{op} operation does not apply for path {path:?}: {error}")]
    To {
        /// The operation.
        op: &'static str,
        /// Its `path`.
        path: String,
        /// What is wrong with the path.
        error: PathError,
    },
    /// A path is not a JSON pointer (no leading `/`).
    #[error("path {path:?} does not start with '/'")]
    NotAPointer {
        /// The path.
        path: String,
    },
    /// A path has more than [`MAX_POINTER_TOKENS`] tokens.
    #[error("path {path:?} has more than {MAX_POINTER_TOKENS} tokens")]
    PointerTooLong {
        /// The path.
        path: String,
    },
    /// The value would make the document deeper than [`MAX_DEPTH`].
    #[error("the document would nest deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The `copy` operations of the list copy more than [`MAX_COPY_BYTES`].
    #[error("copy operations copy more than the limit of {MAX_COPY_BYTES} bytes")]
    CopyBudget,
    /// A `test` operation found another value.
    #[error("testing value {path:?} failed")]
    TestFailed {
        /// The tested path.
        path: String,
    },
    /// `op` is none of RFC 6902's.
    #[error("unexpected operation: {op:?}")]
    UnexpectedOperation {
        /// The operation as written.
        op: String,
    },
}

/// What is wrong with a path an operation reads or writes (`key` is the reference token at
/// fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path (or a parent of it) does not exist, or is the whole document.
    #[error("missing path")]
    Missing,
    /// A token into an array is not an integer.
    #[error("{key:?} is not an array index")]
    NotAnIndex {
        /// The token.
        key: String,
    },
    /// A token an `add` inserts at in an array is neither an integer nor `-`.
    #[error("value was not a proper array index {key}")]
    NotAnInsertIndex {
        /// The token.
        key: String,
    },
    /// An array index is out of range.
    #[error("unable to access invalid index {key}")]
    InvalidIndex {
        /// The token.
        key: String,
    },
    /// An object has no such member.
    #[error("unable to get nonexistent key {key:?}")]
    NoSuchKey {
        /// The token.
        key: String,
    },
    /// A token descends into a string, number, boolean or null.
    #[error("cannot descend into a scalar at {key:?}")]
    Scalar {
        /// The token.
        key: String,
    },
    /// An object member just inserted cannot be found (cannot happen).
    #[error("unable to set key {key:?}")]
    CannotSet {
        /// The token.
        key: String,
    },
    /// `add` would create a parent below a scalar.
    #[error("unable to ensure path for invalid target type at {key:?}")]
    EnsureTargetType {
        /// The token.
        key: String,
    },
    /// `add` would create an array parent for an index below `-1`.
    #[error("unable to ensure path for invalid index {index}")]
    EnsureIndex {
        /// The index.
        index: i64,
    },
    /// `add` would pad an array with more than [`MAX_PADDING`] `null`s.
    #[error("index {index} pads more than {MAX_PADDING} nulls")]
    Padding {
        /// The index.
        index: usize,
    },
    /// `replace` of the whole document by a scalar.
    #[error("the document can only be replaced by an object or an array")]
    RootNotContainer,
}

/// Apply `patches` to `doc` in order. On error `doc` may be partly patched: callers patch a
/// scratch copy.
///
/// # Errors
/// [`JsonPatchError`], naming the failing operation (`jsonPatches[1]: replace operation does
/// not apply for "/x": missing path`).
pub fn apply(doc: &mut Value, patches: &[JsonPatchBlock]) -> Result<(), JsonPatchError> {
    if patches.len() > MAX_OPERATIONS {
        return Err(JsonPatchError::TooManyOperations {
            count: patches.len(),
        });
    }
    let mut copied = 0usize;
    for (index, p) in patches.iter().enumerate() {
        apply_one(doc, p, &mut copied)
            .map_err(|error| JsonPatchError::Operation { index, error })?;
    }
    Ok(())
}

fn apply_one(doc: &mut Value, p: &JsonPatchBlock, copied: &mut usize) -> Result<(), OpError> {
    let op = p.op.as_deref().unwrap_or_default();
    let path = p.path.as_deref().unwrap_or_default();
    let value = || p.value.clone().unwrap_or(Value::Null);
    let at = |op: &'static str| {
        move |error| OpError::Path {
            op,
            path: path.to_owned(),
            error,
        }
    };
    match op {
        "add" => {
            let tokens = pointer(path)?;
            let val = value();
            check_depth(&val, tokens.len())?;
            add(doc, &tokens, val).map_err(at("add"))
        }
        "remove" => {
            let tokens = pointer(path)?;
            remove_lenient(doc, &tokens).map_err(at("remove"))
        }
        "replace" => {
            let tokens = pointer(path)?;
            let val = value();
            check_depth(&val, tokens.len())?;
            replace(doc, &tokens, val).map_err(at("replace"))
        }
        "move" => {
            let from_path = p.from.as_deref().unwrap_or_default();
            let from = pointer(from_path)?;
            let to = pointer(path)?;
            let val = take(doc, &from).map_err(|e| OpError::From {
                op: "move",
                from: from_path.to_owned(),
                error: e,
            })?;
            check_depth(&val, to.len())?;
            insert_existing(doc, &to, val).map_err(|e| OpError::To {
                op: "move",
                path: path.to_owned(),
                error: e,
            })
        }
        "copy" => {
            let from_path = p.from.as_deref().unwrap_or_default();
            let from = pointer(from_path)?;
            let to = pointer(path)?;
            let val = get(doc, &from)
                .map_err(|e| OpError::From {
                    op: "copy",
                    from: from_path.to_owned(),
                    error: e,
                })?
                .clone();
            check_depth(&val, to.len())?;
            let size = serde_json::to_vec(&val).map_or(0, |b| b.len());
            *copied = copied.saturating_add(size);
            if *copied > MAX_COPY_BYTES {
                return Err(OpError::CopyBudget);
            }
            insert_existing(doc, &to, val).map_err(|e| OpError::To {
                op: "copy",
                path: path.to_owned(),
                error: e,
            })
        }
        "test" => {
            let tokens = pointer(path)?;
            let expected = value();
            let actual = get(doc, &tokens).ok();
            let ok = match actual {
                None | Some(Value::Null) => expected.is_null(),
                Some(v) => *v == expected,
            };
            if ok {
                Ok(())
            } else {
                Err(OpError::TestFailed {
                    path: path.to_owned(),
                })
            }
        }
        other => Err(OpError::UnexpectedOperation {
            op: other.to_owned(),
        }),
    }
}

/// Reference tokens of a JSON pointer (`~1` is `/`, `~0` is `~`); empty for the root.
fn pointer(path: &str) -> Result<Vec<String>, OpError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(OpError::NotAPointer {
            path: path.to_owned(),
        });
    };
    let tokens: Vec<String> = rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    if tokens.len() > MAX_POINTER_TOKENS {
        return Err(OpError::PointerTooLong {
            path: path.to_owned(),
        });
    }
    Ok(tokens)
}

/// Fails when `value` placed `at` tokens deep would make the document deeper than [`MAX_DEPTH`].
fn check_depth(value: &Value, at: usize) -> Result<(), OpError> {
    let mut stack = vec![(value, at)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        if d >= MAX_DEPTH {
            return Err(OpError::TooDeep);
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    Ok(())
}

/// An index into an array of `len` for reading or replacing (negative counts from the end).
fn read_index(key: &str, len: usize) -> Result<usize, PathError> {
    let idx: i64 = key.parse().map_err(|_| PathError::NotAnIndex {
        key: key.to_owned(),
    })?;
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if idx < 0 { idx + len_i } else { idx };
    if resolved < 0 || resolved >= len_i {
        return Err(PathError::InvalidIndex {
            key: key.to_owned(),
        });
    }
    usize::try_from(resolved).map_err(|_| PathError::InvalidIndex {
        key: key.to_owned(),
    })
}

/// The position an `add` at `key` inserts at, in an array of `len` (`-` appends).
fn insert_index(key: &str, len: usize) -> Result<usize, PathError> {
    if key == "-" {
        return Ok(len);
    }
    let idx: i64 = key.parse().map_err(|_| PathError::NotAnInsertIndex {
        key: key.to_owned(),
    })?;
    let size = i64::try_from(len).unwrap_or(i64::MAX).saturating_add(1);
    if idx >= size || idx < -size {
        return Err(PathError::InvalidIndex {
            key: key.to_owned(),
        });
    }
    let resolved = if idx < 0 { idx + size } else { idx };
    usize::try_from(resolved).map_err(|_| PathError::InvalidIndex {
        key: key.to_owned(),
    })
}

fn child<'v>(v: &'v Value, key: &str) -> Result<&'v Value, PathError> {
    match v {
        Value::Object(m) => m.get(key).ok_or_else(|| PathError::NoSuchKey {
            key: key.to_owned(),
        }),
        Value::Array(a) => read_index(key, a.len()).and_then(|i| {
            a.get(i).ok_or_else(|| PathError::InvalidIndex {
                key: key.to_owned(),
            })
        }),
        _ => Err(PathError::Scalar {
            key: key.to_owned(),
        }),
    }
}

fn child_mut<'v>(v: &'v mut Value, key: &str) -> Result<&'v mut Value, PathError> {
    match v {
        Value::Object(m) => m.get_mut(key).ok_or_else(|| PathError::NoSuchKey {
            key: key.to_owned(),
        }),
        Value::Array(a) => {
            let i = read_index(key, a.len())?;
            a.get_mut(i).ok_or_else(|| PathError::InvalidIndex {
                key: key.to_owned(),
            })
        }
        _ => Err(PathError::Scalar {
            key: key.to_owned(),
        }),
    }
}

fn get<'v>(doc: &'v Value, tokens: &[String]) -> Result<&'v Value, PathError> {
    let mut cur = doc;
    for t in tokens {
        cur = child(cur, t).map_err(|_| PathError::Missing)?;
    }
    Ok(cur)
}

/// The container holding the last token; every parent must exist and be a container.
fn parent_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Result<&'v mut Value, PathError> {
    let Some((_, parents)) = tokens.split_last() else {
        return Err(PathError::Missing);
    };
    let mut cur = doc;
    for t in parents {
        cur = child_mut(cur, t).map_err(|_| PathError::Missing)?;
    }
    if cur.is_object() || cur.is_array() {
        Ok(cur)
    } else {
        Err(PathError::Missing)
    }
}

/// Insert `val` at `key` of a container (object: set; array: insert), returning it.
fn insert_at<'v>(
    container: &'v mut Value,
    key: &str,
    val: Value,
) -> Result<&'v mut Value, PathError> {
    match container {
        Value::Object(m) => {
            m.insert(key.to_owned(), val);
            m.get_mut(key).ok_or_else(|| PathError::CannotSet {
                key: key.to_owned(),
            })
        }
        Value::Array(a) => {
            let i = insert_index(key, a.len())?;
            a.insert(i, val);
            a.get_mut(i).ok_or_else(|| PathError::InvalidIndex {
                key: key.to_owned(),
            })
        }
        _ => Err(PathError::Missing),
    }
}

/// evanphx's `ensurePathExists`: create the missing parents of `tokens`.
fn ensure_path(doc: &mut Value, tokens: &[String]) -> Result<(), PathError> {
    let mut cur = doc;
    for (i, part) in tokens.iter().enumerate() {
        let Some(next) = tokens.get(i + 1) else {
            return Ok(());
        };
        if child(cur, part).is_ok() {
            cur = child_mut(cur, part)?;
            if !(cur.is_object() || cur.is_array()) {
                return Err(PathError::EnsureTargetType { key: part.clone() });
            }
            continue;
        }
        if let (Value::Array(a), Ok(idx)) = (&mut *cur, part.parse::<usize>()) {
            if idx > a.len() {
                if idx - a.len() > MAX_PADDING {
                    return Err(PathError::Padding { index: idx });
                }
                a.resize(idx, Value::Null);
            }
        }
        let fresh = if next == "-" {
            Value::Array(Vec::new())
        } else if let Ok(idx) = next.parse::<i64>() {
            if idx < -1 {
                return Err(PathError::EnsureIndex { index: idx });
            }
            let pad = usize::try_from(idx.max(0)).unwrap_or(usize::MAX);
            if pad > MAX_PADDING {
                return Err(PathError::Padding { index: pad });
            }
            Value::Array(vec![Value::Null; pad])
        } else {
            Value::Object(Map::new())
        };
        cur = insert_at(cur, part, fresh)?;
    }
    Ok(())
}

fn add(doc: &mut Value, tokens: &[String], val: Value) -> Result<(), PathError> {
    ensure_path(doc, tokens)?;
    insert_existing(doc, tokens, val)
}

/// `add` without creating parents (the second half of `move` and `copy`).
fn insert_existing(doc: &mut Value, tokens: &[String], val: Value) -> Result<(), PathError> {
    let Some(key) = tokens.last() else {
        return Err(PathError::Missing);
    };
    let parent = parent_mut(doc, tokens)?;
    insert_at(parent, key, val).map(|_| ())
}

/// `remove` with `AllowMissingPathOnRemove`: a missing path is not an error.
fn remove_lenient(doc: &mut Value, tokens: &[String]) -> Result<(), PathError> {
    let Some(key) = tokens.last() else {
        return Ok(());
    };
    let Ok(parent) = parent_mut(doc, tokens) else {
        return Ok(());
    };
    match parent {
        Value::Object(m) => {
            m.remove(key);
            Ok(())
        }
        Value::Array(a) => {
            let idx: i64 = key.parse().map_err(|_| PathError::NotAnIndex {
                key: key.to_owned(),
            })?;
            let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
            let resolved = if idx < 0 { idx + len } else { idx };
            if let Ok(i) = usize::try_from(resolved) {
                if i < a.len() {
                    a.remove(i);
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Remove and return the value at `tokens`, which must exist (the first half of `move`).
fn take(doc: &mut Value, tokens: &[String]) -> Result<Value, PathError> {
    let Some(key) = tokens.last() else {
        return Err(PathError::Missing);
    };
    let parent = parent_mut(doc, tokens)?;
    match parent {
        Value::Object(m) => m.remove(key).ok_or(PathError::Missing),
        Value::Array(a) => {
            let i = read_index(key, a.len())?;
            Ok(a.remove(i))
        }
        _ => Err(PathError::Missing),
    }
}

fn replace(doc: &mut Value, tokens: &[String], val: Value) -> Result<(), PathError> {
    let Some(key) = tokens.last() else {
        if val.is_object() || val.is_array() {
            *doc = val;
            return Ok(());
        }
        return Err(PathError::RootNotContainer);
    };
    let parent = parent_mut(doc, tokens)?;
    let slot = child_mut(parent, key).map_err(|_| PathError::Missing)?;
    *slot = val;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block(v: Value) -> JsonPatchBlock {
        serde_json::from_value(v).unwrap()
    }

    fn run(doc: Value, ops: Value) -> Result<Value, String> {
        let patches: Vec<JsonPatchBlock> =
            ops.as_array().unwrap().iter().cloned().map(block).collect();
        let mut doc = doc;
        apply(&mut doc, &patches)
            .map(|()| doc)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn add_creates_missing_parents() {
        let got = run(
            json!({"a": 1}),
            json!([
                {"op": "add", "path": "/b/c", "value": 2},
                {"op": "add", "path": "/d/0/e", "value": 3},
                {"op": "add", "path": "/f/-", "value": 4},
                {"op": "add", "path": "/g/2", "value": 5},
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({"a": 1, "b": {"c": 2}, "d": [{"e": 3}], "f": [4], "g": [null, null, 5]})
        );
    }

    #[test]
    fn remove_of_missing_path_is_a_no_op() {
        let doc = json!({"a": [1, 2]});
        let got = run(
            doc.clone(),
            json!([
                {"op": "remove", "path": "/x/y"},
                {"op": "remove", "path": "/a/5"},
                {"op": "remove", "path": "/a/-9"},
                {"op": "remove", "path": ""},
            ]),
        )
        .unwrap();
        assert_eq!(got, doc);
    }

    #[test]
    fn negative_indices() {
        let got = run(
            json!({"a": [1, 2, 3]}),
            json!([
                {"op": "replace", "path": "/a/-1", "value": 30},
                {"op": "remove", "path": "/a/-3"},
                {"op": "add", "path": "/a/-1", "value": 40},
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"a": [2, 30, 40]}));
    }

    #[test]
    fn strict_operations_fail_on_missing_paths() {
        for ops in [
            json!([{"op": "replace", "path": "/missing", "value": 1}]),
            json!([{"op": "replace", "path": "/a/missing/x", "value": 1}]),
            json!([{"op": "move", "from": "/missing", "path": "/b"}]),
            json!([{"op": "copy", "from": "/a", "path": "/x/y"}]),
            json!([{"op": "add", "path": "", "value": {}}]),
            json!([{"op": "test", "path": "/a", "value": 2}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"op": "add", "path": "a", "value": 1}]),
        ] {
            let err = run(json!({"a": {"b": 1}}), ops.clone()).unwrap_err();
            assert!(err.starts_with("jsonPatches[0]: "), "{ops}: {err}");
        }
    }

    #[test]
    fn move_copy_replace_root_and_escapes() {
        let got = run(
            json!({"a/b": {"c~d": 1}, "x": [1]}),
            json!([
                {"op": "copy", "from": "/a~1b/c~0d", "path": "/copied"},
                {"op": "move", "from": "/x", "path": "/y"},
                {"op": "test", "path": "/copied", "value": 1},
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"a/b": {"c~d": 1}, "copied": 1, "y": [1]}));
        let got = run(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": {"b": 2}}]),
        )
        .unwrap();
        assert_eq!(got, json!({"b": 2}));
    }

    #[test]
    fn work_is_bounded() {
        // Exponential growth by self-copies stops at the copy budget.
        let mut ops = Vec::new();
        for _ in 0..64 {
            ops.push(json!({"op": "copy", "from": "/a", "path": "/b"}));
            ops.push(json!({"op": "copy", "from": "/b", "path": "/a/-"}));
        }
        let err = run(json!({"a": ["xxxxxxxxxxxxxxxx"]}), Value::Array(ops)).unwrap_err();
        assert!(err.contains("bytes") || err.contains("deeper"), "{err}");
        // Depth grows by moving whole subtrees under deep paths: refused before the stack is
        // at risk.
        let deep = vec!["k"; 62].join("/");
        let mut ops = Vec::new();
        for round in 0..4 {
            let (src, dst) = if round % 2 == 0 {
                ("x", "y")
            } else {
                ("y", "x")
            };
            ops.push(json!({"op": "add", "path": format!("/{dst}/{deep}"), "value": {}}));
            ops.push(json!({"op": "move", "from": format!("/{src}"), "path": format!("/{dst}/{deep}/z")}));
        }
        let err = run(json!({"x": {}}), Value::Array(ops)).unwrap_err();
        assert!(err.contains("deeper"), "{err}");
        let err = run(
            json!({}),
            json!([{"op": "add", "path": "/a/100000", "value": 1}]),
        )
        .unwrap_err();
        assert!(err.contains("pads"), "{err}");
        let too_long = format!("/{}", vec!["a"; 65].join("/"));
        assert!(run(
            json!({}),
            json!([{"op": "add", "path": too_long, "value": 1}])
        )
        .is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(
            ops in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["add", "remove", "replace", "move", "copy", "test", "x"]),
                    "(/[a-c0-9~-]{0,2}){0,4}",
                    "(/[a-c0-9~-]{0,2}){0,4}",
                    proptest::option::of(0i32..3),
                ),
                0..12,
            )
        ) {
            let patches: Vec<JsonPatchBlock> = ops
                .into_iter()
                .map(|(op, path, from, v)| JsonPatchBlock {
                    op: Some(op.to_owned()),
                    path: Some(path),
                    value: v.map(|v| json!({"v": v, "l": [v]})),
                    from: Some(from),
                })
                .collect();
            let mut doc = json!({"a": [1, {"b": 2}], "c": {"0": [3]}});
            let _ = apply(&mut doc, &patches);
        }
    }
}
