//! The on-disk form of a durable [`MemoryStore`](crate::memory::MemoryStore): a snapshot
//! (`store.json`) and an append-only journal (`journal.ndjson`) under one directory.
//!
//! - Every write is one journal line: the JSON array of its [`Record`]s (a Mesh deletion with
//!   its cascade, a whole KDS response), written and `fdatasync`ed before the write returns, so
//!   what a caller was told is stored survives a SIGKILL the next instant, and a batch is
//!   replayed whole or not at all. The directory is private to the process's user (0700, files
//!   0600): it holds token signing keys.
//! - Opening replays the snapshot, then the journal; a last line cut short or damaged by a
//!   crash was never acknowledged and is dropped. A bad line before the last is corruption and
//!   refuses to open.
//! - [`Journal::compact`] writes a new snapshot (temporary file, fsync, rename, fsync of the
//!   directory) and empties the journal; the store compacts on open and when the journal has
//!   grown past [`Journal::should_compact`].
//!
//! The snapshot is `{"format": 2, "revision": r, "resources": [Entry...], "keys": {...}}`. The
//! zone's earlier `store.json` (a bare array of resources) still loads, at version 1.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use umbra_core::resource::{DecodeError, Resource, ResourceKey, ResourceType};

use crate::Stored;

/// The snapshot file's name under the data directory.
pub const SNAPSHOT_FILE: &str = "store.json";
/// The journal file's name under the data directory.
pub const JOURNAL_FILE: &str = "journal.ndjson";

/// One stored resource as persisted.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Entry {
    resource: Value,
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    revision: u64,
}

impl Entry {
    pub(crate) fn of(s: &Stored) -> Entry {
        Entry {
            resource: s.resource.to_value(),
            version: s.version,
            zone: s.zone.clone(),
            revision: s.revision,
        }
    }

    fn into_stored(self) -> Result<Stored, DecodeError> {
        Ok(Stored {
            resource: Resource::from_value(self.resource)?,
            version: self.version,
            zone: self.zone,
            revision: self.revision,
        })
    }
}

/// One journal line: a change, in the order it was made.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Record {
    /// A resource was created or replaced.
    Put(Entry),
    /// A resource was deleted (a Mesh's owned resources each get their own record).
    Delete {
        /// `type` name.
        #[serde(rename = "type")]
        ty: String,
        /// Mesh (empty for a Mesh).
        mesh: String,
        /// Name.
        name: String,
        /// The revision of the deletion.
        revision: u64,
    },
    /// A signing key was created (base64).
    Key {
        /// What it signs.
        purpose: String,
        /// The key, base64.
        value: String,
    },
}

impl Record {
    pub(crate) fn delete(key: &ResourceKey, revision: u64) -> Record {
        Record::Delete {
            ty: key.ty.name().to_owned(),
            mesh: key.mesh.clone(),
            name: key.name.clone(),
            revision,
        }
    }

    pub(crate) fn key(purpose: &str, value: &[u8]) -> Record {
        Record::Key {
            purpose: purpose.to_owned(),
            value: base64::engine::general_purpose::STANDARD.encode(value),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    revision: u64,
    resources: Vec<Entry>,
    #[serde(default)]
    keys: BTreeMap<String, String>,
}

/// What a data directory held when it was opened.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) resources: BTreeMap<ResourceKey, Stored>,
    pub(crate) keys: HashMap<String, Vec<u8>>,
    /// The highest revision seen.
    pub(crate) revision: u64,
}

/// The open journal of a data directory.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    file: File,
    /// Records in the journal since the last compaction.
    records: usize,
    /// Bytes in the journal that are acknowledged records (a failed append is cut back to it).
    len: u64,
    /// A failed append could not be cut back: nothing more is appended (a record after a torn
    /// one would make the journal unreadable) until the store is opened again.
    broken: bool,
}

fn invalid(path: &Path, what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Journal {
    /// Open (creating) the data directory `dir`: load the snapshot, replay the journal.
    ///
    /// # Errors
    /// I/O errors; undecodable snapshot content or a corrupt journal line before the last.
    pub(crate) fn open(dir: &Path) -> std::io::Result<(Journal, Loaded)> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // An existing directory (and its files) may have been made with looser modes.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        for name in [SNAPSHOT_FILE, JOURNAL_FILE] {
            let p = dir.join(name);
            if p.exists() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
            }
        }
        let mut loaded = load_snapshot(&dir.join(SNAPSHOT_FILE))?;
        let journal_path = dir.join(JOURNAL_FILE);
        let records = replay(&journal_path, &mut loaded)?;
        let file = OpenOptions::new()
            .mode(0o600)
            .create(true)
            .append(true)
            .open(&journal_path)?;
        let len = file.metadata()?.len();
        sync_dir(dir)?;
        Ok((
            Journal {
                dir: dir.to_owned(),
                file,
                records,
                len,
                broken: false,
            },
            loaded,
        ))
    }

    /// Append `records` and fsync them: durable when this returns `Ok`.
    ///
    /// # Errors
    /// I/O errors (then nothing of `records` may be relied on; the caller undoes them).
    pub(crate) fn append(&mut self, records: &[Record]) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other(
                "an earlier journal write failed and could not be undone; restart the zone",
            ));
        }
        // The whole batch is one line: replay applies all of it or, if a crash cut it, none.
        let mut buf = serde_json::to_vec(records).map_err(std::io::Error::other)?;
        buf.push(b'\n');
        let written = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Cut a partly written record off, so later records do not follow a torn one.
            if self.file.set_len(self.len).is_err() {
                self.broken = true;
            }
            return Err(e);
        }
        self.len += buf.len() as u64;
        self.records += records.len();
        Ok(())
    }

    /// `true` when the journal holds more lines than it is worth replaying for a store of
    /// `live` resources (at least 1,024 and twice the live count).
    pub(crate) fn should_compact(&self, live: usize) -> bool {
        self.records > 1024.max(live.saturating_mul(2))
    }

    /// Write the whole state as the new snapshot and empty the journal. A crash at any point
    /// leaves the old snapshot with the full journal, or the new snapshot (with the journal's
    /// records already in it: replaying them again gives the same state).
    ///
    /// # Errors
    /// I/O errors; the previous files stay valid.
    pub(crate) fn compact(
        &mut self,
        resources: &BTreeMap<ResourceKey, Stored>,
        keys: &HashMap<String, Vec<u8>>,
        revision: u64,
    ) -> std::io::Result<()> {
        let snapshot = Snapshot {
            format: 2,
            revision,
            resources: resources.values().map(Entry::of).collect(),
            keys: keys
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        base64::engine::general_purpose::STANDARD.encode(v),
                    )
                })
                .collect(),
        };
        let path = self.dir.join(SNAPSHOT_FILE);
        let tmp = path.with_extension("tmp");
        let mut f = OpenOptions::new()
            .mode(0o600)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec(&snapshot).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        sync_dir(&self.dir)?;
        self.file.set_len(0)?;
        self.len = 0;
        self.records = 0;
        self.file.sync_all()?;
        Ok(())
    }
}

fn load_snapshot(path: &Path) -> std::io::Result<Loaded> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(e),
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(path, e))?;
    let mut loaded = Loaded::default();
    if let Value::Array(docs) = value {
        // The zone's first format: resources only, at version 1.
        for (i, doc) in docs.into_iter().enumerate() {
            let resource =
                Resource::from_value(doc).map_err(|e| invalid(path, format!("item {i}: {e}")))?;
            loaded.revision += 1;
            let stored = Stored {
                resource,
                version: 1,
                zone: None,
                revision: loaded.revision,
            };
            loaded.resources.insert(stored.resource.key(), stored);
        }
        return Ok(loaded);
    }
    let snapshot: Snapshot = serde_json::from_value(value).map_err(|e| invalid(path, e))?;
    if snapshot.format != 2 {
        return Err(invalid(
            path,
            format!(
                "snapshot format {} is not one this Umbra reads (2)",
                snapshot.format
            ),
        ));
    }
    loaded.revision = snapshot.revision;
    for (i, entry) in snapshot.resources.into_iter().enumerate() {
        let stored = entry
            .into_stored()
            .map_err(|e| invalid(path, format!("item {i}: {e}")))?;
        loaded.revision = loaded.revision.max(stored.revision);
        loaded.resources.insert(stored.resource.key(), stored);
    }
    for (purpose, value) in snapshot.keys {
        let key = base64::engine::general_purpose::STANDARD
            .decode(value)
            .map_err(|e| invalid(path, format!("key {purpose:?}: {e}")))?;
        loaded.keys.insert(purpose, key);
    }
    Ok(loaded)
}

/// Apply the journal at `path` to `loaded`; returns the number of records applied.
fn replay(path: &Path, loaded: &mut Loaded) -> std::io::Result<usize> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    // Every acknowledged record ends with a newline; what follows the last one is a write the
    // crash cut short.
    let (complete, torn) = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(end) => bytes.split_at(end + 1),
        None => (&bytes[..0], &bytes[..]),
    };
    if !torn.is_empty() {
        tracing::warn!(path = %path.display(), bytes = torn.len(), "dropping a journal line cut short by a crash");
    }
    let lines: Vec<&[u8]> = complete
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut applied = 0;
    for (i, line) in lines.iter().enumerate() {
        // One line is one append: a batch written and fsynced as a unit (a single record in the
        // first format). Only the last append can be damaged by a crash (each is fsynced before
        // the next begins), so a bad last line was never acknowledged: dropped, not corruption.
        let records = match serde_json::from_slice::<Vec<Record>>(line)
            .or_else(|_| serde_json::from_slice::<Record>(line).map(|r| vec![r]))
        {
            Ok(r) => r,
            Err(e) if i + 1 == lines.len() => {
                tracing::warn!(path = %path.display(), error = %e, "dropping a damaged last journal line (never acknowledged)");
                break;
            }
            Err(e) => return Err(invalid(path, format!("line {}: {e}", i + 1))),
        };
        for record in records {
            apply(path, i + 1, record, loaded)?;
            applied += 1;
        }
    }
    Ok(applied)
}

/// Apply one journal record (from line `n`) to `loaded`.
fn apply(path: &Path, n: usize, record: Record, loaded: &mut Loaded) -> std::io::Result<()> {
    match record {
        Record::Put(entry) => {
            let stored = entry
                .into_stored()
                .map_err(|e| invalid(path, format!("line {n}: {e}")))?;
            loaded.revision = loaded.revision.max(stored.revision);
            loaded.resources.insert(stored.resource.key(), stored);
        }
        Record::Delete {
            ty,
            mesh,
            name,
            revision,
        } => {
            let ty = ResourceType::from_name(&ty)
                .ok_or_else(|| invalid(path, format!("line {n}: unknown type {ty:?}")))?;
            loaded.resources.remove(&ResourceKey { ty, mesh, name });
            loaded.revision = loaded.revision.max(revision);
        }
        Record::Key { purpose, value } => {
            let key = base64::engine::general_purpose::STANDARD
                .decode(value)
                .map_err(|e| invalid(path, format!("line {n}: {e}")))?;
            loaded.keys.insert(purpose, key);
        }
    }
    Ok(())
}
