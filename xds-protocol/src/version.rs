//! Versions of xDS resources and types, and the canonical JSON encoding KDS hashes: a resource's
//! version is a content hash, so equal content has equal versions on every CP and every run.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::Value;

/// Versions of one type's resources: resource name → version.
pub type ResourceVersions = BTreeMap<String, String>;

/// [`ResourceVersions`] per type URL.
pub type TypeVersions = BTreeMap<&'static str, ResourceVersions>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh resource version: hex of the first 16 bytes of the SHA-256 of the message's
/// protobuf encoding.
pub fn encoding_version<M: Message>(m: &M) -> String {
    bytes_version(&m.encode_to_vec())
}

/// The version of a resource whose protobuf encoding is `encoded` (what
/// [`encoding_version`] gives for the message): hex of the first 16 bytes of its SHA-256.
pub fn bytes_version(encoded: &[u8]) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::digest(encoded)[..16])
}

/// The version of a whole type (the SotW `version_info`, the delta `system_version_info`): hex
/// of the first 16 bytes of the SHA-256 over every `name` and version, in name order. Equal
/// per-resource versions, equal type version; an empty type has a fixed version.
pub fn type_version(versions: &ResourceVersions) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for (name, version) in versions {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update(version.as_bytes());
    }
    hex(&h.finalize()[..16])
}

/// Compact JSON with object keys sorted, recursively (a canonical form for hashing), appended
/// to `out`. Also used for KDS content versions.
pub fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
