//! The zone's resource store: every resource of the zone (Meshes, Dataplanes, policies) in
//! memory, keyed by [`ResourceKey`], with an integer version per resource for compare-and-swap
//! and a store-wide revision that bumps on every change (the reconciler's wake-up).
//!
//! All operations are atomic under one lock; readers get consistent snapshots.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

/// A stored resource: the resource (with creation/modification times filled) and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The resource.
    pub resource: Resource,
    /// Version, 1 on creation, +1 on every update.
    pub version: u64,
    /// The store revision of the write that stored this content. Unique across the store's
    /// life (unlike `version`, which restarts at 1 when a resource is deleted and created
    /// again), so equal revisions mean identical content: the reconciler's change detection.
    pub revision: u64,
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The resource does not exist.
    #[error("{0} not found")]
    NotFound(ResourceKey),
    /// A version precondition failed (stale write).
    #[error("{key} is at version {current}, not {expected}")]
    Conflict {
        /// The resource.
        key: ResourceKey,
        /// The version the writer expected.
        expected: u64,
        /// The version stored.
        current: u64,
    },
    /// The mesh a resource belongs to does not exist.
    #[error("mesh {0:?} does not exist")]
    NoMesh(String),
}

/// The in-memory zone store. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<RwLock<BTreeMap<ResourceKey, Stored>>>,
    revision: Arc<watch::Sender<u64>>,
    /// Trace context of the latest traced write not yet reconciled ([`Store::note_trace`]).
    trace: Arc<std::sync::Mutex<Option<umbra_api::process::TraceContext>>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn mesh_key(mesh: &str) -> ResourceKey {
    ResourceKey {
        ty: ResourceType::Mesh,
        mesh: String::new(),
        name: mesh.to_owned(),
    }
}

/// Now as RFC 3339 with milliseconds (UTC).
fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now
        .replace_nanosecond(u32::from(now.millisecond()) * 1_000_000)
        .unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl Store {
    /// An empty store at revision 0.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(0);
        Self {
            inner: Arc::new(RwLock::new(BTreeMap::new())),
            revision: Arc::new(tx),
            trace: Arc::default(),
        }
    }

    /// Remember the trace context of a write just made (e.g. a KDS apply continuing the
    /// Global's trace), for the reconciliation pass that picks it up ([`Store::take_trace`]).
    /// A later traced write replaces an earlier unreconciled one.
    pub fn note_trace(&self, trace: umbra_api::process::TraceContext) {
        if trace.is_empty() {
            return;
        }
        *self
            .trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(trace);
    }

    /// The trace context noted since the last call, if any.
    pub fn take_trace(&self) -> Option<umbra_api::process::TraceContext> {
        self.trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Subscribe to revision changes (a wake-up; read the store for the state).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        *self.revision.borrow()
    }

    /// Bump the revision (call with the map's write lock held, so revisions order writes).
    fn bump(&self) -> u64 {
        let mut next = 0;
        self.revision.send_modify(|r| {
            *r += 1;
            next = *r;
        });
        next
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<ResourceKey, Stored>> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<ResourceKey, Stored>> {
        self.inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Create or replace `resource`. With `expected_version`, the write only happens when the
    /// stored version matches (0 = must not exist). Returns the stored resource and whether it
    /// was created.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] on a stale version, [`StoreError::NoMesh`] when the mesh is missing.
    pub fn put(
        &self,
        mut resource: Resource,
        expected_version: Option<u64>,
    ) -> Result<(Stored, bool), StoreError> {
        let key = resource.key();
        let mut map = self.write();
        if key.ty.is_mesh_scoped() && !map.contains_key(&mesh_key(&key.mesh)) {
            return Err(StoreError::NoMesh(key.mesh));
        }
        let existing = map.get(&key);
        let current = existing.map_or(0, |s| s.version);
        if let Some(expected) = expected_version {
            if expected != current {
                return Err(StoreError::Conflict {
                    key,
                    expected,
                    current,
                });
            }
        }
        let now = now_rfc3339();
        resource.meta.creation_time = existing
            .and_then(|s| s.resource.meta.creation_time.clone())
            .or_else(|| Some(now.clone()));
        resource.meta.modification_time = Some(now);
        if existing.is_some_and(|s| {
            s.resource.spec == resource.spec && s.resource.meta.labels == resource.meta.labels
        }) {
            // No change: keep the version and revision (no reconciliation needed).
            return Ok((
                existing.cloned().unwrap_or_else(|| Stored {
                    resource,
                    version: current,
                    revision: self.revision(),
                }),
                false,
            ));
        }
        let stored = Stored {
            resource,
            version: current + 1,
            revision: self.bump(),
        };
        map.insert(key, stored.clone());
        drop(map);
        Ok((stored, current == 0))
    }

    /// Store a resource synced from the Global as it is there: its creation and modification
    /// times are kept, there is no version precondition. Returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::NoMesh`] when the mesh is missing.
    pub fn put_synced(&self, resource: Resource) -> Result<bool, StoreError> {
        let key = resource.key();
        let mut map = self.write();
        if key.ty.is_mesh_scoped() && !map.contains_key(&mesh_key(&key.mesh)) {
            return Err(StoreError::NoMesh(key.mesh));
        }
        let existing = map.get(&key);
        if existing.is_some_and(|s| s.resource == resource) {
            return Ok(false);
        }
        let stored = Stored {
            version: existing.map_or(0, |s| s.version) + 1,
            resource,
            revision: self.bump(),
        };
        map.insert(key, stored);
        Ok(true)
    }

    /// Every resource of `ty`, in every mesh.
    pub fn list_all(&self, ty: ResourceType) -> Vec<Stored> {
        self.read()
            .values()
            .filter(|s| s.resource.ty() == ty)
            .cloned()
            .collect()
    }

    /// Write every resource to `path` as a JSON array, atomically (a temporary file renamed
    /// over it after an fsync), so a crash leaves the old or the new file, never half of one.
    ///
    /// # Errors
    /// I/O errors.
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let docs: Vec<serde_json::Value> = self
            .read()
            .values()
            .map(|s| s.resource.to_value())
            .collect();
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec(&docs).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        // Make the rename itself durable.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Load what [`Store::save`] wrote (Meshes first, so every resource finds its Mesh). A
    /// missing file is an empty store.
    ///
    /// # Errors
    /// I/O errors and undecodable content (named by index).
    pub fn load(&self, path: &std::path::Path) -> std::io::Result<usize> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let docs: Vec<serde_json::Value> = serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        let mut resources = Vec::with_capacity(docs.len());
        for (i, doc) in docs.into_iter().enumerate() {
            resources.push(Resource::from_value(doc).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} item {i}: {e}", path.display()),
                )
            })?);
        }
        resources.sort_by_key(|r| r.ty() != ResourceType::Mesh);
        let n = resources.len();
        for r in resources {
            self.put_synced(r)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        }
        Ok(n)
    }

    /// Delete a resource; deleting a Mesh deletes everything it owns.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when it does not exist.
    pub fn delete(&self, key: &ResourceKey) -> Result<(), StoreError> {
        let mut map = self.write();
        if map.remove(key).is_none() {
            return Err(StoreError::NotFound(key.clone()));
        }
        if key.ty == ResourceType::Mesh {
            map.retain(|k, _| k.mesh != key.name);
        }
        self.bump();
        drop(map);
        Ok(())
    }

    /// One resource.
    pub fn get(&self, key: &ResourceKey) -> Option<Stored> {
        self.read().get(key).cloned()
    }

    /// Resources of `ty` in `mesh` (all meshes for Mesh), by name.
    pub fn list(&self, ty: ResourceType, mesh: &str) -> Vec<Stored> {
        self.read()
            .values()
            .filter(|s| {
                s.resource.ty() == ty && (ty == ResourceType::Mesh || s.resource.meta.mesh == mesh)
            })
            .cloned()
            .collect()
    }

    /// Every resource of `mesh` (Mesh included), for generation.
    pub fn mesh_resources(&self, mesh: &str) -> Vec<Resource> {
        self.mesh_stored(mesh)
            .into_iter()
            .map(|s| s.resource)
            .collect()
    }

    /// Every resource of `mesh` (Mesh included) with its version and revision, read under one
    /// lock (a consistent view).
    pub fn mesh_stored(&self, mesh: &str) -> Vec<Stored> {
        self.read()
            .values()
            .filter(|s| {
                s.resource.meta.mesh == mesh
                    || (s.resource.ty() == ResourceType::Mesh && s.resource.meta.name == mesh)
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    #[test]
    fn cas_versions_and_mesh_cascade() {
        let s = Store::new();
        assert_eq!(
            s.put(
                res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}}\n"),
                None
            ),
            Err(StoreError::NoMesh("m".into()))
        );
        let (m, created) = s.put(res("type: Mesh\nname: m\n"), Some(0)).unwrap();
        assert!(created);
        assert_eq!(m.version, 1);
        let t = res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}, to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]}\n");
        assert_eq!(s.put(t.clone(), None).unwrap().0.version, 1);
        let r0 = s.revision();
        assert_eq!(
            s.put(t.clone(), None).unwrap().0.version,
            1,
            "an identical write is a no-op"
        );
        assert_eq!(s.revision(), r0);
        let t2 = res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}, to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 2s}}]}\n");
        assert!(matches!(
            s.put(t2.clone(), Some(5)),
            Err(StoreError::Conflict { current: 1, .. })
        ));
        let (stored, _) = s.put(t2, Some(1)).unwrap();
        assert_eq!(stored.version, 2);
        assert!(stored
            .resource
            .meta
            .creation_time
            .as_deref()
            .is_some_and(|t| t.ends_with('Z')));
        s.delete(&ResourceKey {
            ty: ResourceType::Mesh,
            mesh: String::new(),
            name: "m".into(),
        })
        .unwrap();
        assert!(s.list(ResourceType::MeshTimeout, "m").is_empty());
        assert!(s.revision() > r0);
    }

    #[test]
    fn synced_writes_keep_times_and_the_store_survives_save_and_load() {
        let s = Store::new();
        let mut mesh = res("type: Mesh\nname: m\n");
        mesh.meta.creation_time = Some("2026-01-01T00:00:00Z".into());
        assert!(s.put_synced(mesh.clone()).unwrap());
        assert!(!s.put_synced(mesh.clone()).unwrap(), "unchanged");
        let t = res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}, to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]}\n");
        assert!(s.put_synced(t).unwrap());
        assert_eq!(
            s.list_all(ResourceType::Mesh)[0]
                .resource
                .meta
                .creation_time
                .as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let dir = std::env::temp_dir().join(format!("umbra-zone-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("store.json");
        s.save(&path).unwrap();
        let loaded = Store::new();
        assert_eq!(loaded.load(&path).unwrap(), 2);
        let back: Vec<Resource> = loaded.mesh_resources("m");
        assert_eq!(back, s.mesh_resources("m"));
        assert_eq!(Store::new().load(&dir.join("absent.json")).unwrap(), 0);
        std::fs::write(&path, b"[{\"type\": \"Nope\"}]").unwrap();
        assert!(Store::new()
            .load(&path)
            .unwrap_err()
            .to_string()
            .contains("item 0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
