//! When the reconciler works: its loop ([`Reconciler::run`]: a pass per burst of store,
//! mesh CA, admin-port and identity changes, and when a certificate is due), and waiting for
//! the snapshot a new ADS stream should answer with ([`Reconciler::admin_settled`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{DpKey, Reconciler, ADMIN_SETTLE, COALESCE, SETTLE};

impl Reconciler {
    /// Wait (at most [`ADMIN_SETTLE`]) until `key`'s snapshot was generated with the admin
    /// `port` its Envoy reported on a new ADS stream (`changes`: [`Reconciler::subscribe`]), so
    /// that the stream's first answer already carries the admin listener and cluster, rather
    /// than a config without them at once followed by one with them (a listener drained and
    /// added again; on a zone replica the Envoy just failed over to, a change of versions it
    /// had). Immediate when the snapshot has it (the port was known: an adopted insight, a
    /// reconnect), when its generation failed, or when snapshots do not follow admin ports.
    pub async fn admin_settled(
        &self,
        key: &DpKey,
        port: Option<u16>,
        changes: &mut watch::Receiver<u64>,
    ) {
        let Some(port) = port.filter(|_| self.follows_admin_ports()) else {
            return;
        };
        let settled = || {
            self.get(&key.mesh, &key.name)
                .is_some_and(|s| s.admin_port == Some(port) || s.error.is_some())
        };
        let deadline = tokio::time::Instant::now() + ADMIN_SETTLE;
        while !settled() {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return,
            }
        }
    }

    /// Reconcile on every store change until `shutdown` flips to `true`: [`SETTLE`] after the
    /// change when the last pass ended at least [`COALESCE`] ago, else when it has, so that the
    /// changes of a burst are handled once. Also wakes when an identity certificate is due for
    /// rotation ([`Authority::next_rotation`]); nothing else runs while nothing changes.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut revisions = self.store.subscribe();
        let mut cas = self.cas.clone();
        let mut admins = match &self.insights {
            Some(i) => i.subscribe_admin(),
            None => watch::channel(0).1,
        };
        // The blocking passes log under the task's span (the zone's `reconciler`).
        let (this, span) = (self.clone(), tracing::Span::current());
        let _ = tokio::task::spawn_blocking(move || span.in_scope(|| this.reconcile_once())).await;
        let mut last_pass = tokio::time::Instant::now();
        loop {
            // At least a second apart, whatever the clock says.
            let rotation = self.ca.next_rotation().map(|at| {
                at.duration_since(std::time::SystemTime::now())
                    .unwrap_or_default()
                    .max(Duration::from_secs(1))
            });
            tokio::select! {
                r = revisions.changed() => if r.is_err() { return },
                Ok(()) = cas.changed() => {}
                Ok(()) = admins.changed() => {}
                () = self.kick.notified() => {}
                _ = shutdown.changed() => return,
                () = async {
                    match rotation {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
            // Passes are at least COALESCE apart: a change after a quiet moment waits SETTLE
            // only, a burst waits for the rest of it.
            let woke = tokio::time::Instant::now();
            tokio::time::sleep_until((last_pass + COALESCE).max(woke + SETTLE)).await;
            revisions.borrow_and_update();
            cas.borrow_and_update();
            admins.borrow_and_update();
            let (this, span) = (self.clone(), tracing::Span::current());
            let _ =
                tokio::task::spawn_blocking(move || span.in_scope(|| this.reconcile_once())).await;
            last_pass = tokio::time::Instant::now();
        }
    }
}
