//! What the Global offers its zones: every Mesh and policy as KDS items, kept in step with the
//! store by [`follow_store`]: a full read, then the change log from that revision on (every
//! entry, whatever its type, moves the revision on), so no change is missed across gaps or
//! store outages (a wake-up is only a hint). Until that first read, streams wait rather than
//! offer nothing. API writes note their trace context here ([`TraceLinks`]) so the zone's
//! apply joins the `PUT`'s trace.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use umbra_auth::TrustBundle;
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_kds::resource::{
    global_to_zone_types, kds_name, Item, MESH_CA_TYPE, TRUST_BUNDLE_NAME, TRUST_BUNDLE_TYPE,
    ZONE_LABEL,
};
use umbra_kds::sync::{Offer, TypeItems};
use umbra_pki::mesh_ca::MeshCas;
use umbra_runtime::process::TraceContext;

use crate::store::{list_all, Store, StoreError};

/// Changes read from the log per batch.
const CHANGE_BATCH: usize = 1000;

/// Reads of the change log an offer waits for the log to stop moving before it is published
/// anyway.
const MAX_DEFERRED: u32 = 16;

/// Pause after a store error before reading again.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// Read every Mesh and policy from the store into an offer.
async fn load_offer(store: &dyn Store) -> Result<Offer, StoreError> {
    let mut offer = Offer::new();
    for type_url in global_to_zone_types() {
        let Some(ty) = ResourceType::from_name(&type_url) else {
            continue;
        };
        let mut items = TypeItems::default();
        for s in list_all(store, ty, None, &BTreeMap::new()).await? {
            let r = &s.resource;
            items.insert(kds_name(&r.meta.mesh, &r.meta.name), Item::from_resource(r));
        }
        offer.insert(type_url, Arc::new(items));
    }
    Ok(offer)
}

/// Trace context of API writes on their way to the zones, by resource: the handler notes it
/// before writing ([`TraceLinks::note`]), [`follow_store`] takes it when the change reaches
/// the offer and puts it on the KDS item, so a zone's apply joins the `PUT`'s trace. Bounded
/// by [`TraceLinks::CAPACITY`]; a write whose context did not fit is simply untraced.
#[derive(Debug, Default)]
pub struct TraceLinks {
    pending: std::sync::Mutex<std::collections::HashMap<ResourceKey, TraceContext>>,
}

impl TraceLinks {
    /// Most writes remembered at once.
    pub const CAPACITY: usize = 4096;

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<ResourceKey, TraceContext>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remember the current span's trace context for a write of `key` about to happen
    /// (nothing when the current span is not traced).
    pub fn note(&self, key: &ResourceKey) {
        let cx = umbra_runtime::process::current_context();
        if cx.is_empty() {
            return;
        }
        let mut pending = self.pending();
        if pending.len() < Self::CAPACITY || pending.contains_key(key) {
            pending.insert(key.clone(), cx);
        }
    }

    /// Forget `key` (its write failed).
    pub fn forget(&self, key: &ResourceKey) {
        self.pending().remove(key);
    }

    /// The context noted for `key`, removed.
    pub fn take(&self, key: &ResourceKey) -> Option<TraceContext> {
        self.pending().remove(key)
    }
}

/// API writes note their trace here, so the KDS item that carries the change continues it.
impl umbra_api::crud::WriteObserver for TraceLinks {
    fn before_write(&self, key: &ResourceKey) {
        self.note(key);
    }

    fn write_failed(&self, key: &ResourceKey) {
        self.forget(key);
    }
}

/// What the Global offers besides its resources: the trust bundle and the mesh CAs.
#[derive(Debug, Clone)]
pub struct Extras {
    /// Public keys and revocations.
    pub trust: watch::Receiver<Arc<TrustBundle>>,
    /// The mesh CAs ([`umbra_pki::mesh_ca::CaKeeper`]).
    pub cas: watch::Receiver<Arc<MeshCas>>,
}

/// The zone a ZoneIngress item of an offer belongs to (its `kuma.io/zone` label), read from
/// its body; `None` when the body says none.
fn item_zone(item: &Item) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_slice(&item.body).ok()?;
    doc.get("labels")?
        .get(ZONE_LABEL)?
        .as_str()
        .map(str::to_owned)
}

/// The offer as `zone` receives it: without its own ZoneIngresses (which it owns; they come
/// back from nowhere but itself).
pub fn for_zone(offer: &Offer, zone: &str) -> Offer {
    let ty = ResourceType::ZoneIngress.name();
    let Some(items) = offer.get(ty) else {
        return offer.clone();
    };
    let own: Vec<&String> = items
        .items
        .iter()
        .filter(|(_, item)| item_zone(item).as_deref() == Some(zone))
        .map(|(name, _)| name)
        .collect();
    if own.is_empty() {
        return offer.clone();
    }
    let mut filtered = (**items).clone();
    for name in own {
        filtered.remove(name);
    }
    let mut out = offer.clone();
    out.insert(ty.to_owned(), Arc::new(filtered));
    out
}

/// `offer` with the trust bundle as its [`TRUST_BUNDLE_TYPE`] item and the mesh CAs as
/// [`MESH_CA_TYPE`] items.
fn with_trust(offer: &Offer, bundle: &TrustBundle, cas: &MeshCas) -> Arc<Offer> {
    let mut out = offer.clone();
    let mut items = TypeItems::default();
    items.insert(
        TRUST_BUNDLE_NAME.to_owned(),
        Item::from_doc(&serde_json::to_value(bundle).unwrap_or_default()),
    );
    out.insert(TRUST_BUNDLE_TYPE.to_owned(), Arc::new(items));
    let mut items = TypeItems::default();
    for (name, ca) in cas {
        items.insert(
            name.clone(),
            Item::from_doc(&serde_json::to_value(ca).unwrap_or_default()),
        );
    }
    out.insert(MESH_CA_TYPE.to_owned(), Arc::new(items));
    Arc::new(out)
}

/// Keep `tx` publishing the store's Meshes and policies, and the `extras` (the trust bundle:
/// public keys and revocations; the mesh CAs), until `shutdown` turns `true`. Store errors are
/// retried every second; the offer then catches up from the change log.
pub async fn follow_store(
    store: Arc<dyn Store>,
    links: Arc<TraceLinks>,
    extras: Extras,
    tx: watch::Sender<Option<Arc<Offer>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Extras {
        trust: mut trust_rx,
        mut cas,
    } = extras;
    let mut wake = store.subscribe();
    let mut state: Option<(u64, Offer)> = None;
    let compose = |offer: &Offer,
                   trust: &mut watch::Receiver<Arc<TrustBundle>>,
                   cas: &mut watch::Receiver<Arc<MeshCas>>| {
        let bundle = trust.borrow_and_update().clone();
        let cas = cas.borrow_and_update().clone();
        with_trust(offer, &bundle, &cas)
    };
    let trust = &mut trust_rx;
    // Reads whose changes are not published yet (the log moved on meanwhile).
    let deferred = AtomicU32::new(0);
    while !*shutdown.borrow() {
        let step = async {
            match state.take() {
                None => {
                    let revision = store.revision().await?;
                    let offer = load_offer(&*store).await?;
                    // Read type by type: consistent only if nothing committed meanwhile; else
                    // the change log catches up first (and publishes, as below).
                    if store.revision().await? <= revision {
                        tx.send_replace(Some(compose(&offer, trust, &mut cas)));
                    } else {
                        deferred.store(1, Ordering::Relaxed);
                    }
                    Ok::<_, StoreError>(Some((revision, offer)))
                }
                Some((mut revision, mut offer)) => {
                    let changes = store.changes_since(revision, CHANGE_BATCH).await;
                    let changes = match changes {
                        Ok(c) => c,
                        Err(e) => {
                            state = Some((revision, offer));
                            return Err(e);
                        }
                    };
                    let mut changed = deferred.load(Ordering::Relaxed) > 0;
                    if changes.is_empty() {
                        if changed && store.revision().await? <= revision {
                            tx.send_replace(Some(compose(&offer, trust, &mut cas)));
                            deferred.store(0, Ordering::Relaxed);
                        }
                        return Ok(Some((revision, offer)));
                    }
                    for change in &changes {
                        // Every change moves the revision on, whatever its type.
                        let at = change.revision;
                        if change.key.ty == ResourceType::Dataplane {
                            revision = at;
                            continue;
                        }
                        let name = kds_name(&change.key.mesh, &change.key.name);
                        let current = match store.get(&change.key).await {
                            Ok(c) => c,
                            Err(e) => {
                                state = Some((revision, offer));
                                return Err(e);
                            }
                        };
                        let items = Arc::make_mut(
                            offer.entry(change.key.ty.name().to_owned()).or_default(),
                        );
                        let trace = links.take(&change.key);
                        match current {
                            Some(s) => {
                                let mut item = Item::from_resource(&s.resource);
                                item.trace_context = trace.unwrap_or_default();
                                items.insert(name, item);
                            }
                            None => items.remove(&name),
                        }
                        revision = at;
                        changed = true;
                    }
                    // Published only when consistent: nothing committed after the last change
                    // read before the reads above ended, so every resource read is as of
                    // `revision` and a transaction (issue 19: a migration's promotions and
                    // deletions) is never offered in part. Under writes that never pause, the
                    // offer goes out anyway after MAX_DEFERRED reads, so zones are never
                    // starved.
                    if changed {
                        let consistent = store.revision().await? <= revision;
                        let waited = deferred.fetch_add(1, Ordering::Relaxed) + 1;
                        if consistent || waited >= MAX_DEFERRED {
                            if !consistent {
                                tracing::debug!(
                                    revision,
                                    "KDS: offer published while the log still moves"
                                );
                            }
                            tx.send_replace(Some(compose(&offer, trust, &mut cas)));
                            deferred.store(0, Ordering::Relaxed);
                        }
                    }
                    Ok(Some((revision, offer)))
                }
            }
        };
        match step.await {
            Ok(Some((revision, offer))) => {
                let caught_up = store
                    .revision()
                    .await
                    .map_or(true, |latest| latest <= revision);
                state = Some((revision, offer));
                if caught_up {
                    tokio::select! {
                        _ = wake.changed() => {}
                        Ok(()) = trust.changed() => {
                            // A key or a revocation: the zones get it now.
                            if let Some((_, offer)) = &state {
                                tx.send_replace(Some(compose(offer, trust, &mut cas)));
                            }
                        }
                        Ok(()) = cas.changed() => {
                            // A new mesh CA: the zones get it now.
                            if let Some((_, offer)) = &state {
                                tx.send_replace(Some(compose(offer, trust, &mut cas)));
                            }
                        }
                        // The wake-up is only a hint: look at the log now and then anyway.
                        () = tokio::time::sleep(STORE_RETRY) => {}
                        _ = shutdown.changed() => {}
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "KDS: cannot read the store; retrying");
                tokio::select! {
                    () = tokio::time::sleep(STORE_RETRY) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use umbra_core::resource::Resource;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    /// A memory store with the Mesh `m` and an offer following it (loaded once returned); the
    /// stop sender must stay alive.
    async fn followed() -> (
        Arc<dyn Store>,
        watch::Receiver<Option<Arc<Offer>>>,
        watch::Sender<bool>,
    ) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store
            .put(res("type: Mesh\nname: m\n"), None, None)
            .await
            .unwrap();
        let (tx, mut rx) = watch::channel(None);
        let (stop_tx, stop) = watch::channel(false);
        let extras = Extras {
            trust: watch::channel(Arc::new(TrustBundle::default())).1,
            cas: watch::channel(Arc::default()).1,
        };
        tokio::spawn(follow_store(
            store.clone(),
            Arc::default(),
            extras,
            tx,
            stop,
        ));
        rx.wait_for(Option::is_some).await.unwrap();
        (store, rx, stop_tx)
    }

    #[tokio::test]
    async fn a_backlog_of_one_whole_batch_reaches_the_offer() {
        let (store, mut rx, _stop) = followed().await;
        // A backlog of exactly one change-log batch: every change reaches the offer (it used
        // to wait for a short read that never came).
        for i in 0..CHANGE_BATCH {
            let t = format!("type: MeshTimeout\nmesh: m\nname: t-{i}\nspec: {{targetRef: {{kind: Mesh}}, to: [{{targetRef: {{kind: Mesh}}, default: {{idleTimeout: 1s}}}}]}}\n");
            store.put(res(&t), None, None).await.unwrap();
        }
        let found = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|o| {
                o.as_ref()
                    .and_then(|o| o.get("MeshTimeout"))
                    .is_some_and(|t| t.items.len() == CHANGE_BATCH)
            }),
        )
        .await
        .is_ok();
        assert!(found, "the last batch was never published");
    }

    #[tokio::test]
    async fn the_offer_follows_policies_past_long_runs_of_dataplane_changes() {
        let (store, mut rx, _stop) = followed().await;
        // More Dataplane changes than one change-log batch, then a policy.
        for i in 0..(CHANGE_BATCH + 5) {
            let dp = format!("type: Dataplane\nmesh: m\nname: dp-{i}\nnetworking: {{address: 10.0.0.1, inbound: [{{port: 80, tags: {{kuma.io/service: s}}}}]}}\n");
            store.put(res(&dp), None, Some("z")).await.unwrap();
        }
        store
            .put(
                res("type: MeshTimeout\nmesh: m\nname: t\nspec: {targetRef: {kind: Mesh}, to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]}\n"),
                None,
                None,
            )
            .await
            .unwrap();
        let found = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|o| {
                o.as_ref()
                    .and_then(|o| o.get("MeshTimeout"))
                    .is_some_and(|t| t.items.contains_key("m/t"))
            }),
        )
        .await
        .is_ok();
        assert!(found, "the policy never reached the offer");
        let offer = rx.borrow().clone().unwrap();
        assert!(
            !offer.contains_key("Dataplane"),
            "Dataplanes are not offered to zones"
        );
    }

    #[test]
    fn a_zone_is_offered_every_ingress_but_its_own() {
        let zi = |name: &str, zone: &str| {
            let r = Resource::from_bytes(format!("type: ZoneIngress\nname: {name}\nlabels: {{kuma.io/zone: {zone}}}\nzone: {zone}\nnetworking: {{address: 10.0.0.1, port: 1}}\n").as_bytes()).unwrap();
            Item::from_resource(&r)
        };
        let mut items = TypeItems::default();
        items.insert("a-1".into(), zi("a-1", "zone-1"));
        items.insert("b-2".into(), zi("b-2", "zone-2"));
        let offer = Offer::from([(ResourceType::ZoneIngress.name().to_owned(), Arc::new(items))]);
        let names = |o: &Offer| -> Vec<String> {
            o[ResourceType::ZoneIngress.name()]
                .items
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(names(&for_zone(&offer, "zone-1")), ["b-2"]);
        assert_eq!(names(&for_zone(&offer, "zone-2")), ["a-1"]);
        assert_eq!(names(&for_zone(&offer, "zone-3")), ["a-1", "b-2"]);
    }
}
