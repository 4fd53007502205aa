//! The zone's handle on its store: a [`MemoryStore`] (the one store contract both CPs
//! implement, [`umbra_store`]), volatile or durable under `--data-dir` (every write fsynced
//! before it returns, so an API 200 survives a SIGKILL), shared by the API, the reconciler,
//! ADS and the KDS client.
//!
//! The reconciler, ADS and KDS read and write synchronously through the methods here; the
//! resource API goes through the async [`umbra_store::Store`] contract ([`Store::contract`]).
//! The handle also carries the trace context of the latest traced write for the next
//! reconciliation pass ([`Store::note_trace`]).
//!
//! **Replicas** (`--store postgres`, issue 36): several zone CPs share the zone's PostgreSQL
//! store ([`Store::shared`]). Then the contract is PostgreSQL itself, every write here goes
//! to PostgreSQL first (blocking the calling thread for one round trip; the zone's writes are
//! few: KDS batches, ZoneIngress upkeep, issued identities) and the [`MemoryStore`] becomes a
//! mirror that [`crate::replica::follow`] keeps equal to it, so reads stay in memory. A write
//! returns once the mirror has caught up with it (read-your-writes, within
//! [`SETTLE_TIMEOUT`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_store::memory::MemoryStore;
pub use umbra_store::memory::{Mirrored, ReplicaWrite};
pub use umbra_store::{StoreError, Stored};

/// How long a write through a shared store waits for the mirror to show it before returning
/// anyway (the follower then shows it a moment later).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// Key under which the zone keeps the identities its CA issued ([`umbra_pki::identity::Authority::export`]).
pub const CA_IDENTITIES_KEY: &str = "ca-identities";

/// Key under which replicas of a zone keep the Envoy-admin server certificates they issued, by
/// proxy address (JSON), so every replica serves a proxy the same admin listener.
pub const ADMIN_CERTS_KEY: &str = "envoy-admin-certs";

/// Key under which a federated zone keeps the mesh CAs received from the Global (JSON).
pub const MESH_CAS_KEY: &str = "mesh-cas";

/// The key of mesh `mesh`'s DNS VIP view (Kuma's `Config` resource `kuma-<mesh>-dns-vips`).
pub fn dns_vips_key(mesh: &str) -> String {
    format!("kuma-{mesh}-dns-vips")
}

/// Key under which the zone records the Global store identity it synced from.
pub const RECORDED_GLOBAL_STORE: &str = "recorded-global-store";

/// Key under which a federated zone notes that it applied a whole sync from the Global (the
/// time, RFC 3339), so a zone restarted with its `--data-dir` is ready without its Global.
pub const GLOBAL_SYNCED: &str = "global-synced";

/// The zone store. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Store {
    /// The store itself, or (replicas) the mirror of [`Shared::pg`].
    inner: Arc<MemoryStore>,
    /// The system of record several replicas share, if any.
    shared: Option<Arc<Shared>>,
    /// Trace context of the latest traced write not yet reconciled ([`Store::note_trace`]).
    trace: Arc<std::sync::Mutex<Option<umbra_runtime::process::TraceContext>>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl Store {
    /// An empty, volatile store at revision 0.
    pub fn new() -> Self {
        Self::from_inner(MemoryStore::new())
    }

    /// The durable store kept under `dir`, with what it held loaded.
    ///
    /// # Errors
    /// I/O errors and undecodable content ([`MemoryStore::open`]).
    pub fn open(dir: &std::path::Path) -> std::io::Result<Self> {
        Ok(Self::from_inner(MemoryStore::open(dir)?))
    }

    fn from_inner(inner: MemoryStore) -> Self {
        Self {
            inner: Arc::new(inner),
            shared: None,
            trace: Arc::default(),
        }
    }

    /// A store whose system of record is `pg`, shared with the zone's other replicas, mirrored
    /// in memory (empty until [`crate::replica::follow`] has loaded it). Must be made inside
    /// the multi-threaded runtime its writes will block on.
    ///
    /// # Panics
    /// Outside a Tokio runtime; its synchronous writes panic when called from a worker of a
    /// current-thread runtime (they block in place: `zone-cp` runs a multi-threaded one).
    pub fn shared(pg: Arc<dyn umbra_store::Store>) -> Self {
        let mut store = Self::new();
        store.shared = Some(Arc::new(Shared {
            pg,
            handle: tokio::runtime::Handle::current(),
            applied: watch::channel(0).0,
            nudge: tokio::sync::Notify::new(),
            keys: watch::channel(0).0,
        }));
        store
    }

    /// `true` for a store shared by replicas ([`Store::shared`]).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The store behind the shared contract (for the resource API): the system of record.
    pub fn contract(&self) -> Arc<dyn umbra_store::Store> {
        match &self.shared {
            Some(s) => s.pg.clone(),
            None => self.inner.clone(),
        }
    }

    /// The in-memory store: this store, or the mirror of a shared one (for the follower).
    pub(crate) fn memory(&self) -> &MemoryStore {
        &self.inner
    }

    /// The shared system of record's part, if any (for the follower).
    pub(crate) fn shared_part(&self) -> Option<&Arc<Shared>> {
        self.shared.as_ref()
    }

    /// A key of the system of record: kept in memory for reads, written through to a shared
    /// store first.
    fn write_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        if let Some(s) = &self.shared {
            s.block(s.pg.set_key(purpose, value.clone()))?;
        }
        self.inner.put_key(purpose, value)
    }

    /// Resources held (every type).
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// `true` when the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Remember the trace context of a write just made (e.g. a KDS apply continuing the
    /// Global's trace), for the reconciliation pass that picks it up ([`Store::take_trace`]).
    /// A later traced write replaces an earlier unreconciled one.
    pub fn note_trace(&self, trace: umbra_runtime::process::TraceContext) {
        if trace.is_empty() {
            return;
        }
        *self
            .trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(trace);
    }

    /// The trace context noted since the last call, if any.
    pub fn take_trace(&self) -> Option<umbra_runtime::process::TraceContext> {
        self.trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The Global store identity this zone synced from, if recorded.
    pub fn recorded_global_store(&self) -> Option<String> {
        self.inner
            .key(RECORDED_GLOBAL_STORE)
            .and_then(|b| String::from_utf8(b).ok())
    }

    /// Record `identity` as the Global store this zone syncs from (durable with `--data-dir`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub fn record_global_store(&self, identity: &str) -> Result<(), StoreError> {
        self.write_key(RECORDED_GLOBAL_STORE, identity.as_bytes().to_vec())
    }

    /// Whether this (federated) zone ever applied a whole sync from the Global (recorded by
    /// [`Store::record_global_synced`]; with `--data-dir`, also in an earlier run).
    pub fn global_synced(&self) -> bool {
        self.inner.key(GLOBAL_SYNCED).is_some()
    }

    /// Note that this zone applied a whole sync from the Global (durable with `--data-dir`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub fn record_global_synced(&self) -> Result<(), StoreError> {
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        self.write_key(GLOBAL_SYNCED, now.into_bytes())
    }

    /// The trust bundle this (federated) zone last received from the Global, if any.
    pub fn trust_bundle(&self) -> Option<umbra_auth::TrustBundle> {
        self.inner
            .key(umbra_pki::trust::BUNDLE_KEY)
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Keep `bundle` as the Global's trust bundle (durable with `--data-dir`), so a restarted
    /// zone verifies tokens before the Global is back.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub fn record_trust_bundle(&self, bundle: &umbra_auth::TrustBundle) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(bundle)
            .map_err(|e| StoreError::Unavailable(format!("trust bundle: {e}")))?;
        self.write_key(umbra_pki::trust::BUNDLE_KEY, bytes)
    }

    /// The mesh CAs this (federated) zone last received from the Global (none yet: empty).
    pub fn mesh_cas(&self) -> umbra_pki::mesh_ca::MeshCas {
        self.inner
            .key(MESH_CAS_KEY)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Keep `cas` as the Global's mesh CAs (durable with `--data-dir`), so a restarted zone
    /// issues from the same roots before the Global is back.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub fn record_mesh_cas(&self, cas: &umbra_pki::mesh_ca::MeshCas) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(cas)
            .map_err(|e| StoreError::Unavailable(format!("mesh CAs: {e}")))?;
        self.write_key(MESH_CAS_KEY, bytes)
    }

    /// Mesh `mesh`'s persisted DNS VIP view ([`umbra_core::vips::VipView::to_json`]), if any.
    pub fn dns_vips(&self, mesh: &str) -> Option<Vec<u8>> {
        self.inner.key(&dns_vips_key(mesh))
    }

    /// Update mesh `mesh`'s DNS VIP view: `f` gets the persisted one and returns the new one
    /// (`None`: unchanged). In a shared store this is a compare-and-swap on PostgreSQL, so
    /// replicas allocating at once agree (allocation is deterministic: the loser recomputes
    /// from the winner's view). Returns the view now persisted.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Contended`].
    pub fn update_dns_vips(
        &self,
        mesh: &str,
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let key = dns_vips_key(mesh);
        let Some(s) = &self.shared else {
            let current = self.inner.key(&key);
            return match f(current.as_deref()) {
                Some(next) => {
                    self.inner.put_key(&key, next.clone())?;
                    Ok(Some(next))
                }
                None => Ok(current),
            };
        };
        let update = s.block(umbra_store::update_key::<StoreError, _>(
            &*s.pg,
            &key,
            |cur| Ok(f(cur)),
        ))?;
        if let Some(v) = &update.value {
            if self.inner.key(&key).as_ref() != Some(v) {
                self.inner.put_key(&key, v.clone())?;
            }
        }
        Ok(update.value)
    }

    /// The issued identities kept by [`Store::record_identities`], if any.
    pub fn identities(&self) -> Option<Vec<u8>> {
        self.inner.key(CA_IDENTITIES_KEY)
    }

    /// Keep the issued identities (durable with `--data-dir`), so a restarted zone serves the
    /// same certificates. In a shared store, `bytes` is merged with what the other replicas
    /// issued ([`umbra_pki::identity::merge_exported`]: the first valid identity issued for a
    /// DPP wins, so every replica serves the same certificate), and the merge is returned when
    /// it holds identities other than `bytes` (to [`umbra_pki::identity::Authority::restore`]);
    /// `known` tells whether a DPP (mesh, name) still exists, for identities only others hold.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Contended`].
    pub fn record_identities(
        &self,
        bytes: Vec<u8>,
        known: &(dyn Fn(&str, &str) -> bool + Sync),
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(s) = &self.shared else {
            self.inner.put_key(CA_IDENTITIES_KEY, bytes)?;
            return Ok(None);
        };
        let now = std::time::SystemTime::now();
        let update = s.block(umbra_store::update_key::<StoreError, _>(
            &*s.pg,
            CA_IDENTITIES_KEY,
            |stored| {
                let merged = match stored {
                    Some(stored) => umbra_pki::identity::merge_exported(stored, &bytes, now, known),
                    None => bytes.clone(),
                };
                Ok((stored != Some(merged.as_slice())).then_some(merged))
            },
        ))?;
        let merged = update.value.unwrap_or_default();
        self.inner.put_key(CA_IDENTITIES_KEY, merged.clone())?;
        Ok((!umbra_pki::identity::same_exported(&merged, &bytes)).then_some(merged))
    }

    /// The certificate and key (PEM) every replica serves for `name` (the key `purpose` keeps
    /// them, by name): the one another replica stored, else what `issue` makes, stored for the
    /// others (the first stored wins). A store that is not shared, or that fails (logged), only
    /// issues: the certificate is then this process's own.
    pub fn shared_certificate(
        &self,
        purpose: &str,
        name: &str,
        issue: impl FnOnce() -> Option<(String, String)>,
    ) -> Option<(String, String)> {
        type Certs = std::collections::BTreeMap<String, (String, String)>;
        let Some(s) = &self.shared else {
            return issue();
        };
        let read = |bytes: Option<&[u8]>| -> Certs {
            bytes
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default()
        };
        match s.block(s.pg.get_key(purpose)) {
            Ok(stored) => {
                if let Some(found) = read(stored.as_deref()).remove(name) {
                    return Some(found);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, %name, "cannot read the replicas' certificates; issuing one for this replica only");
                return issue();
            }
        }
        let mine = issue()?;
        let update = s.block(umbra_store::update_key::<StoreError, _>(
            &*s.pg,
            purpose,
            |stored| {
                let mut certs = read(stored);
                if certs.contains_key(name) {
                    return Ok(None);
                }
                certs.insert(name.to_owned(), mine.clone());
                serde_json::to_vec(&certs)
                    .map(Some)
                    .map_err(|e| StoreError::Unavailable(format!("certificates: {e}")))
            },
        ));
        match update {
            Ok(u) => read(u.value.as_deref()).remove(name).or(Some(mine)),
            Err(e) => {
                tracing::warn!(error = %e, %name, "cannot share a certificate with the other replicas; serving this replica's own");
                Some(mine)
            }
        }
    }

    /// Subscribe to revision changes (a wake-up; read the store for the state).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        umbra_store::Store::subscribe(&*self.inner)
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.inner.current_revision()
    }

    /// Create or replace `resource` (owned by this zone). With `expected_version`, the write
    /// only happens when the stored version matches (0 = must not exist). Returns the stored
    /// resource and whether it was created.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], [`StoreError::NoMesh`], [`StoreError::Unavailable`] (a
    /// durable store that cannot write; nothing changed).
    pub fn put(
        &self,
        resource: Resource,
        expected_version: Option<u64>,
    ) -> Result<(Stored, bool), StoreError> {
        let Some(s) = &self.shared else {
            return self.inner.put_now(resource, expected_version, None);
        };
        let (stored, created) = s.block(s.pg.put(resource, expected_version, None))?;
        s.settle(stored.revision);
        Ok((stored, created))
    }

    /// Store a resource synced from the Global as it is there (times kept, no version
    /// precondition). Returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::NoMesh`], [`StoreError::Unavailable`].
    pub fn put_synced(&self, resource: Resource) -> Result<bool, StoreError> {
        self.inner.put_replica(resource)
    }

    /// Apply a batch synced from the Global as one durable step; one outcome per write
    /// ([`MemoryStore::apply_replica`]).
    /// In a shared store, the batch commits as one transaction when every write can
    /// apply, else write by write (each its own transaction, with its own outcome); the
    /// Global's times are not kept there (PostgreSQL stamps its own).
    pub fn apply_synced(&self, writes: Vec<ReplicaWrite>) -> Vec<Result<bool, StoreError>> {
        let Some(s) = &self.shared else {
            return self.inner.apply_replica(writes);
        };
        let outcomes = s.block(apply_synced(&*s.pg, writes));
        if let Ok(revision) = s.block(s.pg.revision()) {
            s.settle(revision);
        }
        outcomes
    }

    /// `Ok` when the Global may delete the Mesh `mesh` here: no Dataplane of this zone is in it.
    ///
    /// # Errors
    /// [`StoreError::InUse`].
    pub fn mesh_removable(&self, mesh: &str) -> Result<(), StoreError> {
        self.inner.mesh_removable(mesh)
    }

    /// Every resource of `ty`, in every mesh.
    pub fn list_all(&self, ty: ResourceType) -> Vec<Stored> {
        self.inner.of_type(ty)
    }

    /// Delete a resource; deleting a Mesh deletes everything it owns.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when it does not exist, [`StoreError::Unavailable`].
    pub fn delete(&self, key: &ResourceKey) -> Result<(), StoreError> {
        let Some(s) = &self.shared else {
            return self.inner.delete_now(key, None);
        };
        s.block(s.pg.delete(key, None))?;
        if let Ok(revision) = s.block(s.pg.revision()) {
            s.settle(revision);
        }
        Ok(())
    }

    /// One resource.
    pub fn get(&self, key: &ResourceKey) -> Option<Stored> {
        self.inner.get_now(key)
    }

    /// Resources of `ty` in `mesh` (all meshes for Mesh), by name.
    pub fn list(&self, ty: ResourceType, mesh: &str) -> Vec<Stored> {
        self.inner.in_mesh(ty, mesh)
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
        self.inner.mesh_stored(mesh)
    }
}

/// The system of record replicas share, and how this replica's mirror follows it.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The zone's PostgreSQL store.
    pub(crate) pg: Arc<dyn umbra_store::Store>,
    /// The runtime the synchronous writes block on.
    handle: tokio::runtime::Handle,
    /// The revision of the system of record the mirror has caught up with.
    pub(crate) applied: watch::Sender<u64>,
    /// Wakes the follower (this replica just wrote).
    pub(crate) nudge: tokio::sync::Notify,
    /// Bumped when a mirrored key changed ([`crate::replica::key_changes`]).
    pub(crate) keys: watch::Sender<u64>,
}

impl Shared {
    /// Run `f` to completion from synchronous code: on a runtime worker thread (which it
    /// frees for other tasks meanwhile), a blocking thread or a thread of its own.
    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        tokio::task::block_in_place(|| self.handle.block_on(f))
    }

    /// Wait (up to [`SETTLE_TIMEOUT`]) until the mirror shows revision `revision`.
    fn settle(&self, revision: u64) {
        self.nudge.notify_one();
        let mut applied = self.applied.subscribe();
        let _ = self.block(tokio::time::timeout(
            SETTLE_TIMEOUT,
            applied.wait_for(|r| *r >= revision),
        ));
    }
}

/// Apply a batch synced from the Global to the shared store: one transaction when every write
/// applies, else write by write, each with its own outcome (whether it changed anything, as
/// the memory store reports them). A Mesh deletion is its own write (it takes what the mesh
/// owns).
async fn apply_synced(
    pg: &dyn umbra_store::Store,
    writes: Vec<ReplicaWrite>,
) -> Vec<Result<bool, StoreError>> {
    let head = match pg.revision().await {
        Ok(head) => head,
        Err(e) => return writes.iter().map(|_| Err(e.clone())).collect(),
    };
    // Deleting what is absent is no change, which a transaction would refuse: write by write.
    let mut whole = Vec::with_capacity(writes.len());
    for w in &writes {
        whole.push(match w {
            ReplicaWrite::Put(r) => Some(umbra_store::Write::Put {
                resource: r.clone(),
                expected: None,
            }),
            ReplicaWrite::Delete(k) if k.ty != ResourceType::Mesh => match pg.get(k).await {
                Ok(Some(_)) => Some(umbra_store::Write::Delete {
                    key: k.clone(),
                    expected: None,
                }),
                _ => None,
            },
            ReplicaWrite::Delete(_) => None,
        });
    }
    if let Some(whole) = whole
        .into_iter()
        .collect::<Option<Vec<umbra_store::Write>>>()
    {
        match pg.transact(whole).await {
            Ok(done) => {
                return done
                    .stored
                    .iter()
                    .map(|s| Ok(s.as_ref().is_none_or(|s| s.revision > head)))
                    .collect()
            }
            Err(e @ StoreError::Unavailable(_)) => {
                return writes.iter().map(|_| Err(e.clone())).collect()
            }
            Err(_) => {}
        }
    }
    let mut outcomes = Vec::with_capacity(writes.len());
    for w in writes {
        outcomes.push(match w {
            ReplicaWrite::Put(r) => pg
                .put(*r, None, None)
                .await
                .map(|(stored, _)| stored.revision > head),
            ReplicaWrite::Delete(k) => match pg.delete(&k, None).await {
                Ok(()) => Ok(true),
                Err(StoreError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            },
        });
    }
    outcomes
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
        s.delete(&umbra_store::mesh_key("m")).unwrap();
        assert!(s.list(ResourceType::MeshTimeout, "m").is_empty());
        assert!(s.revision() > r0);
    }

    #[test]
    fn synced_writes_keep_times_and_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("umbra-zone-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::open(&dir).unwrap();
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
        let before = s.mesh_stored("m");
        drop(s);
        let loaded = Store::open(&dir).unwrap();
        assert_eq!(loaded.mesh_stored("m"), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
