//! Fleet-wide shadow diff answers kept for the same question asked again (issue 21: "asked
//! again with nothing changed"). An entry is the JSON answer of one complete fleet diff (no
//! zone failed or timed out) under a [`Key`]: the mesh, the question (policy, zone, format)
//! and the Global store's revision when it was planned, so the DPPs planned are the same; and
//! the tag each zone gave its answer (`DataplaneDiffs.tag`: its process instance and store
//! revision). An entry is served only after every one of those zones confirms, by a probe
//! (`ShadowDiffRequest.if_none_match`), that its tag still holds; otherwise the diff is
//! computed again. NDJSON answers (streamed as zones answer) are not kept.
//!
//! Bounded: at most [`CAPACITY`] entries (the oldest is dropped) of at most [`MAX_BODY`]
//! bytes each.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use axum::body::Bytes;

/// Entries kept.
pub const CAPACITY: usize = 8;
/// Largest answer kept (bytes); a larger one is answered and not kept.
pub const MAX_BODY: usize = 16 << 20;

/// What an answer is kept under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The mesh.
    pub mesh: String,
    /// The question in canonical form (policy, zone, summary or full).
    pub question: String,
    /// The Global store's revision the plan was made at.
    pub revision: u64,
}

/// A kept answer.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Each zone asked, and the tag of its answer.
    pub tags: BTreeMap<String, String>,
    /// The JSON answer.
    pub body: Bytes,
}

/// The kept answers; share it with `Arc` (it lives in the inspect hub).
#[derive(Debug, Default)]
pub struct AnswerCache {
    entries: Mutex<VecDeque<(Key, Entry)>>,
}

impl AnswerCache {
    /// The entry kept under `key`, if any (to be revalidated before use).
    pub fn get(&self, key: &Key) -> Option<Entry> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e.clone())
    }

    /// Keep `entry` under `key`, replacing an older one; dropped when its body is over
    /// [`MAX_BODY`]. The oldest entry goes when [`CAPACITY`] is reached.
    pub fn put(&self, key: Key, entry: Entry) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(k, _)| k != &key);
        if entry.body.len() > MAX_BODY {
            return;
        }
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back((key, entry));
    }

    /// Forget the entry under `key` (its zones no longer confirm it).
    pub fn remove(&self, key: &Key) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(k, _)| k != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(q: &str, revision: u64) -> Key {
        Key {
            mesh: "default".into(),
            question: q.into(),
            revision,
        }
    }

    fn entry(body: &str) -> Entry {
        Entry {
            tags: BTreeMap::from([("zone-1".into(), "a-1".into())]),
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn keeps_by_exact_key_and_replaces() {
        let c = AnswerCache::default();
        c.put(key("q", 1), entry("one"));
        assert_eq!(c.get(&key("q", 1)).unwrap().body, "one");
        assert!(c.get(&key("q", 2)).is_none());
        assert!(c.get(&key("other", 1)).is_none());
        c.put(key("q", 1), entry("two"));
        assert_eq!(c.get(&key("q", 1)).unwrap().body, "two");
        c.remove(&key("q", 1));
        assert!(c.get(&key("q", 1)).is_none());
    }

    #[test]
    fn bounded_in_entries_and_size() {
        let c = AnswerCache::default();
        for i in 0..CAPACITY as u64 + 3 {
            c.put(key("q", i), entry("x"));
        }
        assert!(c.get(&key("q", 0)).is_none());
        assert!(c.get(&key("q", 2)).is_none());
        assert!(c.get(&key("q", CAPACITY as u64 + 2)).is_some());
        c.put(
            key("big", 0),
            Entry {
                tags: BTreeMap::new(),
                body: Bytes::from(vec![b' '; MAX_BODY + 1]),
            },
        );
        assert!(c.get(&key("big", 0)).is_none());
    }
}
