//! Zone CP replicas (issue 36, item 4): several `zone-cp` processes serving one zone from its
//! PostgreSQL store (`--store postgres`), as Kuma 2.7 runs several zone CP instances on one
//! database with `pkg/plugins/leader/postgres`.
//!
//! - **The mirror** ([`load`], [`follow`]): each replica keeps the zone's resources in memory
//!   (the [`crate::store::Store`]'s [`umbra_store::memory::MemoryStore`]), equal to PostgreSQL:
//!   loaded whole at start, then brought up to date from the change log
//!   ([`umbra_store::Store::changes_since`]) on every change notification, on every write of
//!   its own, and at least every [`POLL`]. The keys every replica reads synchronously (trust
//!   bundle, mesh CAs, issued identities, the Global's identity and first sync) are re-read at
//!   the same pace, and a change of one is announced ([`key_changes`]). Since every replica
//!   generates from the same resources and keys, they serve the same config (versions are
//!   content hashes).
//! - **The leader** ([`while_leader`]): one replica, elected by the coordinator shared with
//!   the Global ([`umbra_postgres::replicas`]), runs the zone's singletons: the KDS client
//!   to the Global and the ZoneIngress upkeep. It stops them when it loses leadership, and
//!   another replica starts them within the coordinator's bounds.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use umbra_core::resource::ResourceType;
use umbra_store::{ListQuery, StoreError, MAX_PAGE};

use crate::store::{Mirrored, Store};

/// The longest a replica's mirror waits before looking for changes without a wake-up.
pub const POLL: Duration = Duration::from_secs(1);
/// Changes read per round trip while catching up.
const CHANGES_PER_READ: usize = 1000;
/// Pause after a failed round (doubling up to [`RETRY_MAX`]).
const RETRY: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// The keys every replica reads from memory ([`crate::store`]'s accessors), mirrored.
const MIRRORED_KEYS: &[&str] = &[
    crate::store::MESH_CAS_KEY,
    umbra_pki::trust::BUNDLE_KEY,
    crate::store::CA_IDENTITIES_KEY,
    crate::store::GLOBAL_SYNCED,
    crate::store::RECORDED_GLOBAL_STORE,
];

/// Load the whole shared store into `store`'s mirror (the replica serves nothing before).
/// Does nothing for a store that is not shared.
///
/// # Errors
/// [`StoreError::Unavailable`] and the like from PostgreSQL.
pub async fn load(store: &Store) -> Result<(), StoreError> {
    let Some(shared) = store.shared_part() else {
        return Ok(());
    };
    let pg = &*shared.pg;
    // Changes after `head` are caught up afterwards; reading them twice is harmless.
    let head = pg.revision().await?;
    let mut writes = Vec::new();
    let mut present = BTreeSet::new();
    for ty in ResourceType::ALL.iter().copied() {
        let mut query = ListQuery {
            ty,
            mesh: None,
            labels: Default::default(),
            name_contains: None,
            dataplane: Default::default(),
            offset: 0,
            size: MAX_PAGE,
        };
        loop {
            let page = pg.list(&query).await?;
            for stored in page.items {
                present.insert(stored.resource.key());
                writes.push(Mirrored::Put(Box::new(stored)));
            }
            match page.next_offset {
                Some(next) => query.offset = next,
                None => break,
            }
        }
    }
    // A reload (after the change log could not be followed) also drops what is gone.
    for ty in ResourceType::ALL.iter().copied() {
        for stored in store.memory().of_type(ty) {
            let key = stored.resource.key();
            if !present.contains(&key) {
                writes.push(Mirrored::Delete(key));
            }
        }
    }
    store.memory().apply_mirror(writes)?;
    mirror_keys(store).await?;
    shared.applied.send_replace(head);
    Ok(())
}

/// Bring the mirror up to date with the change log, from the revision it has applied.
async fn catch_up(store: &Store) -> Result<(), StoreError> {
    let Some(shared) = store.shared_part() else {
        return Ok(());
    };
    loop {
        let from = *shared.applied.borrow();
        let changes = shared.pg.changes_since(from, CHANGES_PER_READ).await?;
        let Some(last) = changes.last().map(|c| c.revision) else {
            return Ok(());
        };
        let full = changes.len() == CHANGES_PER_READ;
        // Each key once, as it is now (a later change of it in this batch is then no news).
        let mut seen = BTreeSet::new();
        let mut writes = Vec::new();
        for change in changes {
            if !seen.insert(change.key.clone()) {
                continue;
            }
            writes.push(match shared.pg.get(&change.key).await? {
                Some(stored) => Mirrored::Put(Box::new(stored)),
                None => Mirrored::Delete(change.key),
            });
        }
        store.memory().apply_mirror(writes)?;
        shared.applied.send_replace(last);
        if !full {
            return Ok(());
        }
    }
}

/// Re-read the mirrored keys; announce a change ([`key_changes`]).
async fn mirror_keys(store: &Store) -> Result<(), StoreError> {
    let Some(shared) = store.shared_part() else {
        return Ok(());
    };
    let mut changed = false;
    for purpose in MIRRORED_KEYS {
        let value = shared.pg.get_key(purpose).await?;
        if value.is_some() && store.memory().key(purpose) != value {
            store.memory().put_key(purpose, value.unwrap_or_default())?;
            changed = true;
        }
    }
    if changed {
        shared.keys.send_modify(|n| *n += 1);
    }
    Ok(())
}

/// Wake-ups when a mirrored key changed in the shared store (another replica, or this one's
/// leader work, wrote it); `None` for a store that is not shared.
pub fn key_changes(store: &Store) -> Option<watch::Receiver<u64>> {
    store.shared_part().map(|s| s.keys.subscribe())
}

/// Keep `store`'s mirror equal to the shared store until `stop` turns `true` (after
/// [`load`]). A round that fails is retried with backoff; nothing is lost, since the next
/// round resumes from the revision the mirror has applied.
pub async fn follow(store: Store, mut stop: watch::Receiver<bool>) {
    let Some(shared) = store.shared_part().cloned() else {
        return;
    };
    let mut wake = shared.pg.subscribe();
    let mut backoff = RETRY;
    let mut keys_read = tokio::time::Instant::now();
    loop {
        let mut round = catch_up(&store).await;
        if round.is_ok() && keys_read.elapsed() >= POLL {
            round = mirror_keys(&store).await;
            keys_read = tokio::time::Instant::now();
        }
        let pause = match round {
            Ok(()) => {
                backoff = RETRY;
                POLL
            }
            Err(e) => {
                tracing::warn!(error = %e, "zone replica: cannot follow the shared store; retrying");
                backoff = (backoff * 2).min(RETRY_MAX);
                backoff
            }
        };
        tokio::select! {
            r = wake.changed() => if r.is_err() { return },
            () = shared.nudge.notified() => {}
            () = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// How a leader-only task run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The replica is stopping.
    Stop,
    /// Leadership went.
    Lost,
    /// The task returned on its own.
    Returned,
}

/// Run `task` while `leader` says this replica leads, until `stop` turns `true`: started when
/// leadership comes, told to stop (its own stop signal turns `true`) when it goes, and awaited
/// before leadership can start it again, so a replica never runs two. A task that returns on
/// its own while leading is started again after [`POLL`]. Each start is counted
/// (`umbra_singleton_runs_total{task=name}`).
pub async fn while_leader<F, Fut>(
    name: &'static str,
    mut leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
    mut task: F,
) where
    F: FnMut(watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        tokio::select! {
            r = leader.wait_for(|l| *l) => if r.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        tracing::info!(task = name, "this zone CP replica leads: starting");
        umbra_postgres::replicas::count_singleton(name);
        let (child_stop, child_rx) = watch::channel(false);
        let mut running = tokio::spawn(task(child_rx));
        let ended = tokio::select! {
            r = leader.wait_for(|l| !*l) => if r.is_ok() { Ended::Lost } else { Ended::Stop },
            _ = stop.wait_for(|s| *s) => Ended::Stop,
            _ = &mut running => Ended::Returned,
        };
        child_stop.send_replace(true);
        if ended != Ended::Returned {
            let _ = running.await;
        }
        match ended {
            Ended::Stop => return,
            Ended::Lost => {
                tracing::warn!(task = name, "this zone CP replica no longer leads: stopped");
            }
            Ended::Returned => {
                if *stop.borrow() {
                    return;
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// What a federated zone takes from the Global through the shared store: its token verifier
/// and the sender of its mesh CAs.
pub type FederatedKeys = (
    Arc<umbra_pki::trust::Trust>,
    Arc<watch::Sender<Arc<umbra_pki::mesh_ca::MeshCas>>>,
);

/// Take what the shared store's mirrored keys say ([`key_changes`]) until `stop`: on a
/// federated zone (`federated`: its token verifier and mesh CAs), the trust bundle and mesh
/// CAs the leader received from the Global, and whether the zone ever synced (for `/ready`);
/// on every zone, the identities other replicas issued ([`crate::reconciler::Reconciler::adopt_identities`]).
/// The leader wrote most of these itself; taking them again changes nothing.
pub async fn adopt_keys(
    store: Store,
    reconciler: Arc<crate::reconciler::Reconciler>,
    federated: Option<FederatedKeys>,
    kds: crate::kds::SharedStatus,
    mut stop: watch::Receiver<bool>,
) {
    let Some(mut changes) = key_changes(&store) else {
        return;
    };
    let mut identities = store.identities();
    loop {
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        if let Some((trust, cas)) = &federated {
            if let Some(bundle) = store.trust_bundle() {
                trust.replace(bundle);
            }
            let now = store.mesh_cas();
            cas.send_if_modified(|current| {
                let differs = **current != now;
                if differs {
                    *current = Arc::new(now);
                }
                differs
            });
            if store.global_synced() {
                kds.write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .synced = true;
            }
        }
        let now = store.identities();
        if now != identities {
            if let Some(bytes) = &now {
                reconciler.adopt_identities(bytes);
            }
            identities = now;
        }
    }
}
