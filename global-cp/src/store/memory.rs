//! The in-memory [`Store`]: the embedded default for trying Umbra. Everything is lost on exit.
//! One mutex makes every operation atomic; the change log is kept whole.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

use super::{
    check_expected, labels_match, mesh_key, query_mesh, stamp_times, unchanged, Change, ListQuery,
    Op, Page, Store, StoreError, Stored, MAX_PAGE,
};

#[derive(Debug, Default)]
struct State {
    resources: BTreeMap<ResourceKey, Stored>,
    log: Vec<Change>,
}

/// The in-memory store.
#[derive(Debug)]
pub struct MemoryStore {
    state: Mutex<State>,
    wake: watch::Sender<u64>,
    keys: Mutex<std::collections::HashMap<String, Vec<u8>>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            wake: watch::channel(0).0,
            keys: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn next_revision(&self) -> u64 {
        self.log.len() as u64 + 1
    }

    fn log(&mut self, key: ResourceKey, op: Op, version: u64) -> u64 {
        let revision = self.next_revision();
        self.log.push(Change {
            revision,
            key,
            op,
            version,
        });
        revision
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn put(
        &self,
        mut resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError> {
        let key = resource.key();
        let mut state = self.lock();
        if key.ty.is_mesh_scoped() && !state.resources.contains_key(&mesh_key(&key.mesh)) {
            return Err(StoreError::NoMesh(key.mesh));
        }
        let existing = state.resources.get(&key);
        let current = existing.map_or(0, |s| s.version);
        check_expected(&key, expected, current)?;
        if let Some(e) = existing.filter(|e| unchanged(e, &resource, zone)) {
            return Ok((e.clone(), false));
        }
        stamp_times(&mut resource, existing);
        let version = current + 1;
        let revision = state.log(key.clone(), Op::Put, version);
        let stored = Stored {
            resource,
            version,
            zone: zone.map(str::to_owned),
            revision,
        };
        state.resources.insert(key, stored.clone());
        drop(state);
        self.wake.send_replace(revision);
        Ok((stored, current == 0))
    }

    async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
        let mut state = self.lock();
        let Some(current) = state.resources.get(key).map(|s| s.version) else {
            return Err(StoreError::NotFound(key.clone()));
        };
        check_expected(key, expected, current)?;
        if key.ty == ResourceType::Mesh {
            let owned: Vec<(ResourceKey, u64)> = state
                .resources
                .iter()
                .filter(|(k, _)| k.ty.is_mesh_scoped() && k.mesh == key.name)
                .map(|(k, s)| (k.clone(), s.version))
                .collect();
            for (k, v) in owned {
                state.resources.remove(&k);
                state.log(k, Op::Delete, v);
            }
        }
        state.resources.remove(key);
        let revision = state.log(key.clone(), Op::Delete, current);
        drop(state);
        self.wake.send_replace(revision);
        Ok(())
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError> {
        Ok(self.lock().resources.get(key).cloned())
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
        let start = usize::try_from(revision)
            .unwrap_or(usize::MAX)
            .min(state.log.len());
        Ok(state.log[start..].iter().take(limit).cloned().collect())
    }

    async fn revision(&self) -> Result<u64, StoreError> {
        Ok(self.lock().log.len() as u64)
    }

    async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        Ok(self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(purpose.to_owned())
            .or_insert(fresh)
            .clone())
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }
}
