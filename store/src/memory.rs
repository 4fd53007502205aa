//! The in-memory [`Store`]: the Global's embedded default for trying Umbra, and the zone's
//! store. Volatile ([`MemoryStore::new`]: everything is lost on exit) or durable
//! ([`MemoryStore::open`]: every change is journaled and fsynced under a directory before the
//! write returns, see [`crate::journal`]).
//!
//! One mutex makes every operation atomic; the change log of this process's life is kept
//! whole (revisions continue across a durable store's restarts). Besides the async
//! [`Store`] contract, the zone reads and writes synchronously from its reconciler, ADS and
//! KDS tasks: [`MemoryStore::get_now`], [`MemoryStore::of_type`], [`MemoryStore::mesh_stored`],
//! [`MemoryStore::put_replica`], [`MemoryStore::apply_replica`] and friends.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

use crate::journal::{Journal, Record};
use crate::{
    check_expected, labels_match, mesh_key, query_mesh, stamp_times, unchanged, Change, ListQuery,
    Op, Page, Store, StoreError, Stored, Transacted, Write, MAX_PAGE,
};

#[derive(Debug, Default)]
struct State {
    resources: BTreeMap<ResourceKey, Stored>,
    /// Changes of this process's life, from revision `log_base + 1`.
    log: Vec<Change>,
    /// The revision reached before this process (a durable store's persisted revision).
    log_base: u64,
    keys: HashMap<String, Vec<u8>>,
    journal: Option<Journal>,
}

/// One write of a batch applied with [`MemoryStore::apply_replica`].
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaWrite {
    /// Store the resource as its owner has it (times kept, no version precondition).
    Put(Box<Resource>),
    /// Delete the resource (a missing one is not an error).
    Delete(ResourceKey),
}

/// One write of a batch applied with [`MemoryStore::apply_mirror`]: the state another store
/// (the system of record) has for a resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Mirrored {
    /// The resource as the system of record stores it: version and owner kept.
    Put(Box<Stored>),
    /// The system of record has no such resource (a missing one is not an error).
    Delete(ResourceKey),
}

/// Changes applied in memory but not yet journaled: what to write, and how to undo them.
#[derive(Debug, Default)]
struct Batch {
    records: Vec<Record>,
    undo: Vec<(ResourceKey, Option<Stored>)>,
}

/// The in-memory store.
#[derive(Debug)]
pub struct MemoryStore {
    state: Mutex<State>,
    wake: watch::Sender<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty, volatile store.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            wake: watch::channel(0).0,
        }
    }

    /// The durable store kept under `dir` (created if missing): what it held is loaded, and
    /// from now on every change is on disk before the write returns.
    ///
    /// # Errors
    /// I/O errors, or content that does not decode (named by file and line or item).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let (mut journal, loaded) = Journal::open(dir)?;
        journal.compact(&loaded.resources, &loaded.keys, loaded.revision)?;
        let revision = loaded.revision;
        Ok(Self {
            state: Mutex::new(State {
                resources: loaded.resources,
                log: Vec::new(),
                log_base: revision,
                keys: loaded.keys,
                journal: Some(journal),
            }),
            wake: watch::channel(revision).0,
        })
    }

    /// Resources loaded or stored (every type).
    pub fn len(&self) -> usize {
        self.lock().resources.len()
    }

    /// `true` when the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latest revision (0 before any change).
    pub fn current_revision(&self) -> u64 {
        self.lock().revision()
    }

    /// One resource, read now.
    pub fn get_now(&self, key: &ResourceKey) -> Option<Stored> {
        self.lock().resources.get(key).cloned()
    }

    /// Every resource of `ty`, in every mesh, by mesh then name.
    pub fn of_type(&self, ty: ResourceType) -> Vec<Stored> {
        self.lock()
            .resources
            .iter()
            .filter(|(k, _)| k.ty == ty)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Resources of `ty` in `mesh` (every Mesh for [`ResourceType::Mesh`]), by name.
    pub fn in_mesh(&self, ty: ResourceType, mesh: &str) -> Vec<Stored> {
        self.lock()
            .resources
            .iter()
            .filter(|(k, _)| k.ty == ty && (!ty.is_mesh_scoped() || k.mesh == mesh))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Every resource of `mesh` (the Mesh included), read under one lock: a consistent view.
    pub fn mesh_stored(&self, mesh: &str) -> Vec<Stored> {
        self.lock()
            .resources
            .iter()
            .filter(|(k, _)| {
                (k.ty.is_mesh_scoped() && k.mesh == mesh)
                    || (k.ty == ResourceType::Mesh && k.name == mesh)
            })
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// [`Store::put`], synchronously.
    ///
    /// # Errors
    /// As [`Store::put`].
    pub fn put_now(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError> {
        self.put_creating_now(resource, expected, zone, Vec::new())
    }

    /// [`Store::put_creating`], synchronously.
    ///
    /// # Errors
    /// As [`Store::put`].
    pub fn put_creating_now(
        &self,
        mut resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
        companions: Vec<Resource>,
    ) -> Result<(Stored, bool), StoreError> {
        let key = resource.key();
        let mut state = self.lock();
        state.check_mesh(&key)?;
        let existing = state.resources.get(&key);
        let current = existing.map_or(0, |s| s.version);
        check_expected(&key, expected, current)?;
        if let Some(e) = existing.filter(|e| unchanged(e, &resource, zone)) {
            return Ok((e.clone(), false));
        }
        stamp_times(&mut resource, existing);
        let stored = Stored {
            resource,
            version: current + 1,
            zone: zone.map(str::to_owned),
            revision: state.revision() + 1,
        };
        let mut changes = vec![(key, Some(stored.clone()))];
        if current == 0 {
            for mut c in companions {
                let ck = c.key();
                if state.resources.contains_key(&ck) || changes.iter().any(|(k, _)| *k == ck) {
                    continue;
                }
                stamp_times(&mut c, None);
                let revision = state.revision() + 1 + changes.len() as u64;
                changes.push((
                    ck,
                    Some(Stored {
                        resource: c,
                        version: 1,
                        zone: zone.map(str::to_owned),
                        revision,
                    }),
                ));
            }
        }
        state.commit(changes)?;
        drop(state);
        self.wake();
        Ok((stored, current == 0))
    }

    /// Store `resource` as the store it comes from has it (e.g. a zone keeping what the Global
    /// sent): its creation and modification times are kept and there is no version
    /// precondition. Returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::NoMesh`]; [`StoreError::Unavailable`] when a durable store cannot write.
    pub fn put_replica(&self, resource: Resource) -> Result<bool, StoreError> {
        self.apply_replica(vec![ReplicaWrite::Put(Box::new(resource))])
            .pop()
            .unwrap_or(Ok(false))
    }

    /// Apply `writes` in order as one durable step (one fsync for the batch). Each write gets
    /// its own outcome: whether it changed anything, or why it was refused (the others still
    /// apply). When a durable store cannot write, nothing of the batch is applied and every
    /// outcome is [`StoreError::Unavailable`].
    pub fn apply_replica(&self, writes: Vec<ReplicaWrite>) -> Vec<Result<bool, StoreError>> {
        let mut state = self.lock();
        let mut batch = Batch::default();
        let outcomes: Vec<Result<bool, StoreError>> = writes
            .into_iter()
            .map(|write| match write {
                ReplicaWrite::Put(resource) => {
                    let resource = *resource;
                    let key = resource.key();
                    state.check_mesh(&key)?;
                    let existing = state.resources.get(&key);
                    if existing.is_some_and(|s| s.resource == resource) {
                        return Ok(false);
                    }
                    let stored = Stored {
                        version: existing.map_or(0, |s| s.version) + 1,
                        resource,
                        zone: None,
                        revision: state.revision() + 1,
                    };
                    state.stage(&mut batch, key, Some(stored));
                    Ok(true)
                }
                ReplicaWrite::Delete(key) => {
                    if !state.resources.contains_key(&key) {
                        return Ok(false);
                    }
                    if key.ty == ResourceType::Mesh {
                        // What this store's zone registered is never deleted from afar.
                        state.check_unused(&key.name)?;
                        let owned: Vec<ResourceKey> = state.owned_by(&key.name).collect();
                        for k in owned {
                            state.stage(&mut batch, k, None);
                        }
                    }
                    state.stage(&mut batch, key, None);
                    Ok(true)
                }
            })
            .collect();
        if let Err(e) = state.persist(batch) {
            return outcomes.iter().map(|_| Err(e.clone())).collect();
        }
        drop(state);
        self.wake();
        outcomes
    }

    /// Make this store a copy of another (a zone CP replica's in-memory mirror of its
    /// zone's PostgreSQL store): each write takes the resource with the version and owner the
    /// system of record gave it (its own revision aside: this store's change log counts its
    /// own changes). Nothing is checked (the system of record did), a Mesh deletion deletes
    /// only the Mesh (the system of record logs what it owned), and an identical write changes
    /// nothing. Returns how many writes changed something.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a durable store cannot write (nothing applied).
    pub fn apply_mirror(&self, writes: Vec<Mirrored>) -> Result<usize, StoreError> {
        let mut state = self.lock();
        let mut batch = Batch::default();
        for write in writes {
            match write {
                Mirrored::Put(stored) => {
                    let key = stored.resource.key();
                    if state.resources.get(&key).is_some_and(|s| {
                        s.version == stored.version
                            && s.zone == stored.zone
                            && s.resource == stored.resource
                    }) {
                        continue;
                    }
                    let revision = state.revision() + 1;
                    state.stage(
                        &mut batch,
                        key,
                        Some(Stored {
                            revision,
                            ..*stored
                        }),
                    );
                }
                Mirrored::Delete(key) => {
                    if state.resources.contains_key(&key) {
                        state.stage(&mut batch, key, None);
                    }
                }
            }
        }
        let changed = batch.undo.len();
        state.persist(batch)?;
        drop(state);
        if changed > 0 {
            self.wake();
        }
        Ok(changed)
    }

    /// [`Store::delete`], synchronously.
    ///
    /// # Errors
    /// As [`Store::delete`].
    pub fn delete_now(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
        let mut state = self.lock();
        let Some(current) = state.resources.get(key).map(|s| s.version) else {
            return Err(StoreError::NotFound(key.clone()));
        };
        check_expected(key, expected, current)?;
        let mut gone: Vec<(ResourceKey, Option<Stored>)> = Vec::new();
        if key.ty == ResourceType::Mesh {
            state.check_unused(&key.name)?;
            gone.extend(state.owned_by(&key.name).map(|k| (k, None)));
        }
        gone.push((key.clone(), None));
        state.commit(gone)?;
        drop(state);
        self.wake();
        Ok(())
    }

    /// [`Store::transact`], synchronously.
    ///
    /// # Errors
    /// As [`Store::transact`].
    pub fn transact_now(&self, writes: Vec<Write>) -> Result<Transacted, StoreError> {
        let mut state = self.lock();
        // Preconditions first, against the state as each earlier write of the batch leaves it.
        let mut versions: BTreeMap<ResourceKey, u64> = BTreeMap::new();
        let mut meshes: BTreeMap<String, bool> = BTreeMap::new();
        for w in &writes {
            if let Write::MeshUnchanged { mesh, since } = w {
                state.check_unchanged(mesh, *since)?;
                continue;
            }
            let key = w.key();
            let current = *versions
                .entry(key.clone())
                .or_insert_with(|| state.resources.get(&key).map_or(0, |s| s.version));
            match w {
                Write::Put {
                    expected, resource, ..
                } => {
                    check_expected(&key, *expected, current)?;
                    if key.ty.is_mesh_scoped() {
                        let present = *meshes
                            .entry(key.mesh.clone())
                            .or_insert_with(|| state.resources.contains_key(&mesh_key(&key.mesh)));
                        if !present {
                            return Err(StoreError::NoMesh(key.mesh.clone()));
                        }
                    }
                    if key.ty == ResourceType::Mesh {
                        meshes.insert(key.name.clone(), true);
                    }
                    // A put that changes nothing keeps the version (as the write pass skips it).
                    let same = state
                        .resources
                        .get(&key)
                        .filter(|e| e.version == current)
                        .is_some_and(|e| unchanged(e, resource, None));
                    versions.insert(key, if same { current } else { current + 1 });
                }
                Write::Delete { expected, .. } => {
                    if key.ty == ResourceType::Mesh {
                        return Err(crate::mesh_delete_in_transaction(&key));
                    }
                    if current == 0 {
                        return Err(StoreError::NotFound(key));
                    }
                    check_expected(&key, *expected, current)?;
                    versions.insert(key, 0);
                }
                Write::MeshUnchanged { .. } => {}
            }
        }
        let mut batch = Batch::default();
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            match w {
                Write::Put { resource, .. } => {
                    let mut resource = *resource;
                    let key = resource.key();
                    let existing = state.resources.get(&key);
                    if let Some(e) = existing.filter(|e| unchanged(e, &resource, None)) {
                        out.push(Some(e.clone()));
                        continue;
                    }
                    stamp_times(&mut resource, existing);
                    let stored = Stored {
                        resource,
                        version: existing.map_or(0, |s| s.version) + 1,
                        zone: None,
                        revision: state.revision() + 1,
                    };
                    state.stage(&mut batch, key, Some(stored.clone()));
                    out.push(Some(stored));
                }
                Write::Delete { key, .. } => {
                    state.stage(&mut batch, key, None);
                    out.push(None);
                }
                Write::MeshUnchanged { .. } => out.push(None),
            }
        }
        state.persist(batch)?;
        let revision = state.revision();
        drop(state);
        self.wake();
        Ok(Transacted {
            revision,
            stored: out,
        })
    }

    /// `Ok` when the Mesh `mesh` could be deleted now: nothing this store's zone registered
    /// (a Dataplane) is in it ([`crate::check_unused`]).
    ///
    /// # Errors
    /// [`StoreError::InUse`].
    pub fn mesh_removable(&self, mesh: &str) -> Result<(), StoreError> {
        self.lock().check_unused(mesh)
    }

    /// The key stored for `purpose`, if any.
    pub fn key(&self, purpose: &str) -> Option<Vec<u8>> {
        self.lock().keys.get(purpose).cloned()
    }

    /// Store `value` as the key for `purpose`, replacing any (durable before it returns).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a durable store cannot write; nothing changed then.
    pub fn put_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.lock().write_key(purpose, value)
    }

    /// [`Store::swap_key`], synchronously: `value` stored for `purpose` only when the key
    /// stored is `expected` (`None`: none is), under the store's lock and journaled as
    /// [`MemoryStore::put_key`] journals (so a reopened store replays it the same). Returns
    /// whether it wrote.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a durable store cannot write; nothing changed then.
    pub fn swap_key_now(
        &self,
        purpose: &str,
        expected: Option<&[u8]>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock();
        if state.keys.get(purpose).map(Vec::as_slice) != expected {
            return Ok(false);
        }
        state.write_key(purpose, value)?;
        Ok(true)
    }

    fn wake(&self) {
        let revision = self.current_revision();
        self.wake.send_replace(revision);
    }
}

impl State {
    fn revision(&self) -> u64 {
        self.log_base + self.log.len() as u64
    }

    /// Journal (a durable store) and keep `value` as the key for `purpose`.
    fn write_key(&mut self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        if let Some(journal) = &mut self.journal {
            journal
                .append(&[Record::key(purpose, &value)])
                .map_err(|e| {
                    StoreError::Unavailable(format!("cannot write the store journal: {e}"))
                })?;
        }
        self.keys.insert(purpose.to_owned(), value);
        Ok(())
    }

    /// [`Write::MeshUnchanged`]: no change to `mesh` logged after `since` (a `since` before
    /// this process's log cannot be shown unchanged and is refused).
    fn check_unchanged(&self, mesh: &str, since: u64) -> Result<(), StoreError> {
        let changed = |key: ResourceKey, revision: u64| StoreError::Changed {
            mesh: mesh.to_owned(),
            since,
            key,
            revision,
        };
        if since < self.log_base {
            return Err(changed(mesh_key(mesh), self.log_base));
        }
        let start = usize::try_from(since - self.log_base).unwrap_or(usize::MAX);
        match self
            .log
            .iter()
            .skip(start)
            .find(|c| crate::changes_mesh(&c.key, mesh))
        {
            Some(c) => Err(changed(c.key.clone(), c.revision)),
            None => Ok(()),
        }
    }

    fn check_mesh(&self, key: &ResourceKey) -> Result<(), StoreError> {
        if key.ty.is_mesh_scoped() && !self.resources.contains_key(&mesh_key(&key.mesh)) {
            return Err(StoreError::NoMesh(key.mesh.clone()));
        }
        Ok(())
    }

    /// [`crate::check_unused`] over what this store holds in `mesh`.
    fn check_unused(&self, mesh: &str) -> Result<(), StoreError> {
        let attached: Vec<ResourceKey> = self
            .owned_by(mesh)
            .filter(|k| crate::MESH_USERS.contains(&k.ty))
            .collect();
        crate::check_unused(mesh, &attached)
    }

    /// Keys of the resources `mesh` owns.
    fn owned_by<'a>(&'a self, mesh: &'a str) -> impl Iterator<Item = ResourceKey> + 'a {
        self.resources
            .keys()
            .filter(move |k| k.ty.is_mesh_scoped() && k.mesh == mesh)
            .cloned()
    }

    /// Make `changes` (in order; `None` deletes) durable and applied, or neither. A put's
    /// `Stored.revision` must be the revision it is logged under.
    fn commit(&mut self, changes: Vec<(ResourceKey, Option<Stored>)>) -> Result<(), StoreError> {
        let mut batch = Batch::default();
        for (key, stored) in changes {
            self.stage(&mut batch, key, stored);
        }
        self.persist(batch)
    }

    /// Apply one change in memory and log it under the next revision, remembering how to
    /// undo it and what to journal.
    fn stage(&mut self, batch: &mut Batch, key: ResourceKey, stored: Option<Stored>) {
        let revision = self.revision() + 1;
        batch.records.push(match &stored {
            Some(s) => Record::Put(crate::journal::Entry::of(s)),
            None => Record::delete(&key, revision),
        });
        let (op, version) = match &stored {
            Some(s) => (Op::Put, s.version),
            None => (
                Op::Delete,
                self.resources.get(&key).map_or(0, |s| s.version),
            ),
        };
        let previous = match stored {
            Some(s) => self.resources.insert(key.clone(), s),
            None => self.resources.remove(&key),
        };
        batch.undo.push((key.clone(), previous));
        self.log.push(Change {
            revision,
            key,
            op,
            version,
        });
    }

    /// Journal what `batch` staged (one fsync); when that fails, undo it all.
    fn persist(&mut self, batch: Batch) -> Result<(), StoreError> {
        let Some(journal) = &mut self.journal else {
            return Ok(());
        };
        if batch.records.is_empty() {
            return Ok(());
        }
        if let Err(e) = journal.append(&batch.records) {
            tracing::error!(error = %e, "cannot write the store journal; the write is refused");
            for (key, previous) in batch.undo.into_iter().rev() {
                self.log.pop();
                match previous {
                    Some(s) => self.resources.insert(key, s),
                    None => self.resources.remove(&key),
                };
            }
            return Err(StoreError::Unavailable(format!(
                "cannot write the store journal: {e}"
            )));
        }
        self.maybe_compact();
        Ok(())
    }

    /// Compact the journal when it has grown past its worth. A failure is logged and retried
    /// on a later write: the journal alone still holds everything.
    fn maybe_compact(&mut self) {
        let revision = self.revision();
        let Some(journal) = &mut self.journal else {
            return;
        };
        if journal.should_compact(self.resources.len()) {
            if let Err(e) = journal.compact(&self.resources, &self.keys, revision) {
                tracing::warn!(error = %e, "cannot compact the store journal; will retry");
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn put(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError> {
        self.put_now(resource, expected, zone)
    }

    async fn put_creating(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
        companions: Vec<Resource>,
    ) -> Result<(Stored, bool), StoreError> {
        self.put_creating_now(resource, expected, zone, companions)
    }

    async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
        self.delete_now(key, expected)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<Transacted, StoreError> {
        self.transact_now(writes)
    }

    async fn get_key(&self, purpose: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.key(purpose))
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError> {
        Ok(self.get_now(key))
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let mesh = query_mesh(query);
        let state = self.lock();
        let matching: Vec<&Stored> = state
            .resources
            .iter()
            .filter(|(k, s)| {
                k.ty == query.ty
                    && mesh.as_ref().is_none_or(|m| &k.mesh == m)
                    && labels_match(&query.labels, &s.resource.meta.labels)
                    && query
                        .name_contains
                        .as_deref()
                        .is_none_or(|n| k.name.contains(n))
                    && query.dataplane.matches(&s.resource.spec)
            })
            .map(|(_, s)| s)
            .collect();
        let total = matching.len() as u64;
        let size = query.size.clamp(1, MAX_PAGE);
        let items: Vec<Stored> = matching
            .into_iter()
            .skip(usize::try_from(query.offset).unwrap_or(usize::MAX))
            .take(usize::try_from(size).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        Ok(Page::new(items, query.offset, total))
    }

    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        let state = self.lock();
        let start = usize::try_from(revision.saturating_sub(state.log_base))
            .unwrap_or(usize::MAX)
            .min(state.log.len());
        Ok(state.log[start..].iter().take(limit).cloned().collect())
    }

    async fn revision(&self) -> Result<u64, StoreError> {
        Ok(self.current_revision())
    }

    async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let mut state = self.lock();
        if let Some(key) = state.keys.get(purpose) {
            return Ok(key.clone());
        }
        state.write_key(purpose, fresh.clone())?;
        Ok(fresh)
    }

    async fn set_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.put_key(purpose, value)
    }

    async fn swap_key(
        &self,
        purpose: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.swap_key_now(purpose, expected.as_deref(), value)
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "umbra-store-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    const TIMEOUT: &str = "type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}, to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]}\n";

    #[test]
    fn a_mirror_takes_versions_and_owners_as_given_and_ignores_repeats() {
        let source = MemoryStore::new();
        let (mesh, _) = source
            .put_now(res("type: Mesh\nname: m\n"), None, None)
            .unwrap();
        let t = res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}}\n");
        source.put_now(t.clone(), None, None).unwrap();
        let changed = res(
            "type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: MeshService, name: x}}\n",
        );
        let (t2, _) = source.put_now(changed, None, Some("zone-1")).unwrap();
        assert_eq!((t2.version, t2.zone.as_deref()), (2, Some("zone-1")));
        let mirror = MemoryStore::new();
        let mut wake = crate::Store::subscribe(&mirror);
        // Out of order (the policy before its Mesh): a mirror checks nothing.
        let writes = vec![
            Mirrored::Put(Box::new(t2.clone())),
            Mirrored::Put(Box::new(mesh.clone())),
        ];
        assert_eq!(mirror.apply_mirror(writes.clone()).unwrap(), 2);
        assert!(wake.has_changed().unwrap());
        wake.borrow_and_update();
        let got = mirror.get_now(&t2.resource.key()).unwrap();
        assert_eq!(
            (got.version, got.zone.as_deref()),
            (t2.version, t2.zone.as_deref())
        );
        assert_eq!(got.resource, t2.resource);
        assert_eq!(
            mirror.apply_mirror(writes).unwrap(),
            0,
            "the same state again"
        );
        assert!(!wake.has_changed().unwrap());
        // A Mesh deletion deletes the Mesh only; what it owned goes by its own entries.
        assert_eq!(
            mirror
                .apply_mirror(vec![Mirrored::Delete(mesh.resource.key())])
                .unwrap(),
            1
        );
        assert!(mirror.get_now(&t2.resource.key()).is_some());
        assert_eq!(
            mirror
                .apply_mirror(vec![
                    Mirrored::Delete(t2.resource.key()),
                    Mirrored::Delete(t2.resource.key()),
                ])
                .unwrap(),
            1
        );
        assert!(mirror.is_empty());
    }

    #[test]
    fn a_durable_store_reopens_with_versions_revisions_and_keys() {
        let dir = temp_dir("reopen");
        let s = MemoryStore::open(&dir).unwrap();
        s.put_now(res("type: Mesh\nname: m\n"), Some(0), None)
            .unwrap();
        let (t, _) = s.put_now(res(TIMEOUT), None, Some("zone-1")).unwrap();
        let (t2, _) = s
            .put_now(res(&TIMEOUT.replace("1s", "2s")), Some(1), Some("zone-1"))
            .unwrap();
        assert_eq!((t.version, t2.version), (1, 2));
        s.put_now(res("type: Mesh\nname: gone\n"), None, None)
            .unwrap();
        s.delete_now(&mesh_key("gone"), None).unwrap();
        let key = tokio_test_block(s.signing_key("zone-token", vec![1, 2, 3])).unwrap();
        let revision = s.current_revision();
        drop(s);
        // It holds signing keys: private to this user.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(crate::journal::SNAPSHOT_FILE)), 0o600);
        assert_eq!(mode(&dir.join(crate::journal::JOURNAL_FILE)), 0o600);

        let back = MemoryStore::open(&dir).unwrap();
        assert_eq!(back.get_now(&t2.resource.key()), Some(t2.clone()));
        assert!(back.get_now(&mesh_key("gone")).is_none());
        assert_eq!(back.current_revision(), revision, "revisions continue");
        assert_eq!(
            tokio_test_block(back.signing_key("zone-token", vec![9])).unwrap(),
            key
        );
        let (t3, _) = back
            .put_now(res(&TIMEOUT.replace("1s", "3s")), Some(2), None)
            .unwrap();
        assert_eq!((t3.version, t3.revision), (3, revision + 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_last_journal_line_is_dropped_and_earlier_corruption_refused() {
        let dir = temp_dir("torn");
        let s = MemoryStore::open(&dir).unwrap();
        s.put_now(res("type: Mesh\nname: m\n"), None, None).unwrap();
        drop(s);
        let journal = dir.join(crate::journal::JOURNAL_FILE);
        let mut bytes = std::fs::read(&journal).unwrap();
        assert!(!bytes.is_empty(), "the write is in the journal");
        let whole = bytes.clone();
        bytes.extend_from_slice(b"{\"put\": {\"resource\": {\"type\": \"Me");
        std::fs::write(&journal, &bytes).unwrap();
        let back = MemoryStore::open(&dir).unwrap();
        assert!(back.get_now(&mesh_key("m")).is_some());
        drop(back);
        // Compaction on open moved everything into the snapshot; corrupt a journal line that
        // is followed by a good one.
        let mut bad = b"{\"nope\": 1}\n".to_vec();
        bad.extend_from_slice(&whole);
        std::fs::write(&journal, &bad).unwrap();
        let err = MemoryStore::open(&dir).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_zones_first_snapshot_format_still_loads() {
        let dir = temp_dir("v1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(crate::journal::SNAPSHOT_FILE),
            br#"[{"type": "MeshTimeout", "mesh": "m", "name": "t", "spec": {"targetRef": {"kind": "Mesh"}}}, {"type": "Mesh", "name": "m"}]"#,
        )
        .unwrap();
        let s = MemoryStore::open(&dir).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get_now(&mesh_key("m")).unwrap().version, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replica_batches_apply_each_write_and_cascade_mesh_deletes() {
        let s = MemoryStore::new();
        let mut mesh = res("type: Mesh\nname: m\n");
        mesh.meta.creation_time = Some("2026-01-01T00:00:00Z".into());
        let out = s.apply_replica(vec![
            ReplicaWrite::Put(Box::new(res(TIMEOUT))),
            ReplicaWrite::Put(Box::new(mesh.clone())),
            ReplicaWrite::Put(Box::new(res(TIMEOUT))),
            ReplicaWrite::Put(Box::new(mesh.clone())),
        ]);
        assert_eq!(
            out,
            vec![
                Err(StoreError::NoMesh("m".into())),
                Ok(true),
                Ok(true),
                Ok(false)
            ]
        );
        assert_eq!(
            s.get_now(&mesh_key("m"))
                .unwrap()
                .resource
                .meta
                .creation_time
                .as_deref(),
            Some("2026-01-01T00:00:00Z"),
            "times are kept"
        );
        let out = s.apply_replica(vec![
            ReplicaWrite::Delete(mesh_key("m")),
            ReplicaWrite::Delete(mesh_key("m")),
        ]);
        assert_eq!(out, vec![Ok(true), Ok(false)]);
        assert!(s.in_mesh(ResourceType::MeshTimeout, "m").is_empty());
        assert_eq!(
            s.current_revision(),
            4,
            "two puts, then the Mesh and its timeout"
        );
    }

    #[test]
    fn swap_key_writes_only_over_the_expected_value_and_is_journaled() {
        let dir = temp_dir("swap");
        let s = MemoryStore::open(&dir).unwrap();
        // Absent: only `None` matches (an empty value is not absence).
        assert!(!s.swap_key_now("k", Some(b""), b"a".to_vec()).unwrap());
        assert_eq!(s.key("k"), None, "a failed swap writes nothing");
        assert!(s.swap_key_now("k", None, b"a".to_vec()).unwrap());
        assert!(!s.swap_key_now("k", None, b"b".to_vec()).unwrap());
        assert!(!s.swap_key_now("k", Some(b"x"), b"b".to_vec()).unwrap());
        assert_eq!(s.key("k"), Some(b"a".to_vec()));
        // Emptied (a dropped key), then only the empty value matches.
        assert!(s.swap_key_now("k", Some(b"a"), Vec::new()).unwrap());
        assert!(!s.swap_key_now("k", None, b"c".to_vec()).unwrap());
        assert!(s.swap_key_now("k", Some(b""), b"c".to_vec()).unwrap());
        // Through the trait too.
        assert!(tokio_test_block(s.swap_key("other", None, vec![1])).unwrap());
        assert!(!tokio_test_block(s.swap_key("other", None, vec![2])).unwrap());
        drop(s);
        // Reopened: the journal replays every swap that wrote (and only those).
        let back = MemoryStore::open(&dir).unwrap();
        assert_eq!(back.key("k"), Some(b"c".to_vec()));
        assert_eq!(back.key("other"), Some(vec![1]));
        // The reopen compacted the journal into the snapshot; a swap after it replays too.
        assert!(back.swap_key_now("k", Some(b"c"), b"d".to_vec()).unwrap());
        drop(back);
        let again = MemoryStore::open(&dir).unwrap();
        assert_eq!(again.key("k"), Some(b"d".to_vec()));
        assert_eq!(again.key("other"), Some(vec![1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Run a store future to completion (the memory store never awaits).
    fn tokio_test_block<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }
}
