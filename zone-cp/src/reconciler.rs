//! The reconciler: keeps every DPP's Live snapshot current. It wakes on store revision changes
//! (coalescing bursts), regenerates, and publishes only snapshots whose content changed
//! (per-type versions are content hashes). If a DPP's generation fails because of a policy, that
//! DPP keeps its last good snapshot and the error (naming the policy) is recorded; every other
//! DPP is unaffected. Nothing runs while nothing changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::{
    Snapshot, CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE,
};

use crate::store::Store;

/// The xDS types served, in the order changes are pushed (clusters and endpoints warm before
/// listeners and routes).
pub const TYPE_ORDER: [&str; 5] = [
    CLUSTER_TYPE,
    ENDPOINT_TYPE,
    LISTENER_TYPE,
    ROUTE_TYPE,
    SECRET_TYPE,
];

/// How long the reconciler waits after a change for more changes before regenerating.
pub const COALESCE: Duration = Duration::from_millis(20);

/// A DPP's current Live snapshot with its per-type versions and last generation error.
#[derive(Debug, Clone, Default)]
pub struct DpSnapshot {
    /// The last good snapshot.
    pub snapshot: Arc<Snapshot>,
    /// Version (content hash) per type URL.
    pub versions: BTreeMap<&'static str, String>,
    /// The last generation error, if the latest attempt failed (the snapshot is then the last
    /// good one).
    pub error: Option<String>,
}

/// Key of a DPP: `(mesh, name)`.
pub type DpKey = (String, String);

/// The reconciler; share it with `Arc`.
#[derive(Debug)]
pub struct Reconciler {
    store: Store,
    state: RwLock<HashMap<DpKey, Arc<DpSnapshot>>>,
    changed: watch::Sender<u64>,
}

impl Reconciler {
    /// A reconciler over `store` (nothing generated until [`Reconciler::reconcile_once`] or
    /// [`Reconciler::run`]).
    pub fn new(store: Store) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            store,
            state: RwLock::new(HashMap::new()),
            changed,
        }
    }

    /// Subscribe to "some snapshot changed" wake-ups.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The current snapshot of a DPP.
    pub fn get(&self, mesh: &str, name: &str) -> Option<Arc<DpSnapshot>> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(mesh.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Regenerate every DPP from the store once; publish changed ones. Returns how many
    /// snapshots changed.
    pub fn reconcile_once(&self) -> usize {
        let meshes = self.store.list(ResourceType::Mesh, "");
        let mut next: HashMap<DpKey, Arc<DpSnapshot>> = HashMap::new();
        let previous = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut changed = 0;
        for mesh in meshes {
            let mesh_name = mesh.resource.meta.name.clone();
            let resources = self.store.mesh_resources(&mesh_name);
            let spec = match &mesh.resource.spec {
                umbra_core::resource::Spec::Mesh(m) => m.clone(),
                _ => continue,
            };
            let ctx = MeshContext::build(
                &mesh_name,
                &spec,
                resources.iter().filter_map(Resource::as_dataplane),
            );
            let policies = PolicySet::build(&mesh_name, &resources, View::Live);
            for r in resources
                .iter()
                .filter(|r| r.ty() == ResourceType::Dataplane)
            {
                let Some(dp) = r.as_dataplane() else { continue };
                let key = (mesh_name.clone(), r.meta.name.clone());
                let old = previous.get(&key).cloned();
                let entry = match generate(
                    Proxy {
                        name: &r.meta.name,
                        dataplane: dp,
                    },
                    &ctx,
                    &policies,
                ) {
                    // Equal typed messages mean equal content: skip rendering for versions. (Not
                    // equal can still be equal content, as `Any` bytes may differ in map order;
                    // the content-hash comparison below settles those.)
                    Ok(snapshot)
                        if old
                            .as_ref()
                            .is_some_and(|o| o.error.is_none() && *o.snapshot == snapshot) =>
                    {
                        old.clone().unwrap_or_default()
                    }
                    Ok(snapshot) => {
                        let versions = TYPE_ORDER
                            .iter()
                            .map(|t| {
                                (
                                    *t,
                                    snapshot.version(t).unwrap_or_else(|e| format!("error:{e}")),
                                )
                            })
                            .collect::<BTreeMap<_, _>>();
                        match &old {
                            Some(o) if o.versions == versions && o.error.is_none() => o.clone(),
                            _ => {
                                changed += 1;
                                Arc::new(DpSnapshot {
                                    snapshot: Arc::new(snapshot),
                                    versions,
                                    error: None,
                                })
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(mesh = %mesh_name, dataplane = %r.meta.name, error = %e, "generation failed; keeping the last good snapshot");
                        let mut kept = old.as_deref().cloned().unwrap_or_default();
                        let message = e.to_string();
                        if kept.error.as_deref() != Some(message.as_str()) {
                            changed += 1;
                        }
                        kept.error = Some(message);
                        Arc::new(kept)
                    }
                };
                next.insert(key, entry);
            }
        }
        // Dataplanes that disappeared count as changes too (their streams must notice).
        changed += previous.keys().filter(|k| !next.contains_key(*k)).count();
        *self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        if changed > 0 {
            self.changed.send_modify(|v| *v += 1);
        }
        changed
    }

    /// Reconcile on every store change until `shutdown` flips to `true`; bursts of changes
    /// within [`COALESCE`] are handled once.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut revisions = self.store.subscribe();
        let this = self.clone();
        let _ = tokio::task::spawn_blocking(move || this.reconcile_once()).await;
        loop {
            tokio::select! {
                r = revisions.changed() => if r.is_err() { return },
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep(COALESCE).await;
            revisions.borrow_and_update();
            let this = self.clone();
            let _ = tokio::task::spawn_blocking(move || this.reconcile_once()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &Store, y: &str) {
        store
            .put(Resource::from_bytes(y.as_bytes()).unwrap(), None)
            .unwrap();
    }

    #[test]
    fn bad_policy_keeps_last_good_snapshot_and_spares_others() {
        let store = Store::new();
        put(&store, "type: Mesh\nname: m\n");
        put(&store, "type: Dataplane\nmesh: m\nname: a\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a, kuma.io/protocol: http}\n");
        put(&store, "type: Dataplane\nmesh: m\nname: b\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: b, kuma.io/protocol: http}\n");
        let rec = Reconciler::new(store.clone());
        assert_eq!(rec.reconcile_once(), 2);
        assert_eq!(
            rec.reconcile_once(),
            0,
            "nothing changed, nothing published"
        );
        let a_before = rec.get("m", "a").unwrap();
        // A patch on a missing path, selecting only `a`.
        put(&store, "type: MeshProxyPatch\nmesh: m\nname: broken\nspec:\n  targetRef: {kind: MeshService, name: a}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: 'localhost:80'}\n        jsonPatches:\n        - {op: replace, path: /no/such/path, value: 1}\n");
        rec.reconcile_once();
        let a = rec.get("m", "a").unwrap();
        assert!(
            a.error
                .as_deref()
                .is_some_and(|e| e.contains("MeshProxyPatch/broken")),
            "{:?}",
            a.error
        );
        assert_eq!(
            a.versions, a_before.versions,
            "a keeps its last good snapshot"
        );
        assert!(rec.get("m", "b").unwrap().error.is_none());
    }
}
