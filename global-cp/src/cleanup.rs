//! Zone cleanup (issue 18; Kuma's cleanup of what an offline zone left behind): a zone that
//! stays offline longer than `--zone-cleanup-after` has its Dataplanes and ZoneIngresses
//! removed from the Global, and so, through KDS, its ingresses from every other zone's
//! endpoints. Its insights go too. When it reconnects, it sends everything again (the Global
//! then holds none of its versions) and all of it comes back.
//!
//! A zone's offline time runs from its last disconnect, or from this Global's start for a zone
//! that has not connected since (it may have gone while the Global was down). Zones that have
//! connected since the start are known from the registry; the others are found by reading
//! which zones own resources in the store, at the first pass and then once per period (a read
//! of every Dataplane, so not every pass: the store may hold a whole fleet). While a zone is
//! being cleaned up its streams are refused ([`ZoneRegistry::begin_cleanup`]), so a reconnect
//! never races the removals: it waits for the next attempt and then resends everything.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use umbra_kds::resource::{kds_name, zone_form, ZONE_LABEL, ZONE_OWNED};

use crate::replicas::insights::InsightMirror;
use crate::replicas::{count_singleton, Coordinator, Single, ZoneHold};
use crate::store::{list_all, Store, StoreError};
use crate::zones::ZoneRegistry;

/// Removes what zones that stay offline leave behind.
#[derive(Debug)]
pub struct ZoneCleanup {
    store: Arc<dyn Store>,
    zones: Arc<ZoneRegistry>,
    /// How long a zone may stay offline before its resources go.
    after: Duration,
    /// When this Global started.
    started: Instant,
    /// The zones found owning resources at the last full read, and when that was.
    owners: std::sync::Mutex<Option<(Instant, BTreeSet<String>)>>,
    /// The replicas: only the leader cleans up, and zones' leases say which are offline.
    coordinator: Arc<dyn Coordinator>,
    /// Since when this replica leads without a break (`None`: it does not lead).
    leading_since: std::sync::Mutex<Option<Instant>>,
    /// With several replicas: the shared insights, which lose the zone's too.
    mirror: Option<Arc<InsightMirror>>,
}

impl ZoneCleanup {
    /// Clean up zones of `store` offline for longer than `after` (per `zones`).
    pub fn new(store: Arc<dyn Store>, zones: Arc<ZoneRegistry>, after: Duration) -> Self {
        Self {
            store,
            zones,
            after,
            started: Instant::now(),
            owners: std::sync::Mutex::default(),
            coordinator: Single::shared(),
            leading_since: std::sync::Mutex::default(),
            mirror: None,
        }
    }

    /// Clean up only while leading the replicas of `coordinator`, reading which zones are
    /// offline from their leases there as well as from this replica's registry.
    #[must_use]
    pub fn with_coordinator(mut self, coordinator: Arc<dyn Coordinator>) -> Self {
        self.coordinator = coordinator;
        self
    }

    /// Remove cleaned-up zones' insights from the shared `mirror` too.
    #[must_use]
    pub fn with_insights(mut self, mirror: Option<Arc<InsightMirror>>) -> Self {
        self.mirror = mirror;
        self
    }

    /// How long this replica has led without a break (`None`: it does not lead now).
    fn leading_for(&self) -> Option<Duration> {
        let leading = *self.coordinator.leader().borrow();
        let mut since = self
            .leading_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !leading {
            *since = None;
            return None;
        }
        Some(since.get_or_insert_with(Instant::now).elapsed())
    }

    /// The zones owning resources in the store, read again when the last read is older than
    /// the period.
    async fn owners(&self) -> Result<BTreeSet<String>, StoreError> {
        let cached = self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some((_, zones)) = cached.filter(|(at, _)| at.elapsed() < self.after) {
            return Ok(zones);
        }
        let mut out = BTreeSet::new();
        for ty in ZONE_OWNED {
            for s in list_all(&*self.store, ty, None, &BTreeMap::new()).await? {
                if let Some(zone) = s.zone {
                    out.insert(zone);
                }
            }
        }
        *self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now(), out.clone()));
        Ok(out)
    }

    /// One pass: remove the resources of every zone offline for longer than the period.
    /// Returns the zones whose resources were removed.
    ///
    /// # Errors
    /// [`StoreError`]; what was removed stays removed, the rest waits for the next pass.
    pub async fn run_once(&self) -> Result<Vec<String>, StoreError> {
        let mut cleaned = Vec::new();
        let Some(leading_for) = self.leading_for() else {
            return Ok(cleaned); // another replica leads and cleans up
        };
        let distributed = self.coordinator.distributed();
        let holds = self.coordinator.zones().await?;
        let mut zones = self.owners().await?;
        zones.extend(self.zones.list().into_iter().map(|z| z.name));
        for zone in zones {
            let local = self.zones.offline_for(&zone);
            let offline_for = match (local, holds.get(&zone)) {
                (Some(None), _) => continue, // online here
                (_, Some(ZoneHold::Held { .. } | ZoneHold::Cleaning { .. })) => continue,
                (
                    _,
                    Some(ZoneHold::Free {
                        offline_seconds, ..
                    }),
                ) => Duration::from_secs_f64(offline_seconds.max(0.0)),
                (Some(Some(d)), None) => d,
                // Not seen since this replica started (or, with replicas, since it leads): it
                // may have gone while no Global was watching.
                (None, None) if distributed => leading_for.min(self.started.elapsed()),
                (None, None) => self.started.elapsed(),
            };
            if offline_for < self.after {
                continue;
            }
            if !self.coordinator.begin_cleanup(&zone).await? {
                continue;
            }
            if !self.zones.begin_cleanup(&zone) {
                self.coordinator.end_cleanup(&zone).await;
                continue;
            }
            let result = self.remove(&zone).await;
            self.zones.end_cleanup(&zone);
            self.coordinator.end_cleanup(&zone).await;
            let removed = result?;
            if removed > 0 {
                count_singleton("zone_cleanup");
                tracing::warn!(%zone, removed, offline_secs = offline_for.as_secs(), "zone offline for longer than --zone-cleanup-after: its Dataplanes and ZoneIngresses are removed (a reconnect brings them back)");
                cleaned.push(zone);
            }
        }
        Ok(cleaned)
    }

    async fn remove(&self, zone: &str) -> Result<usize, StoreError> {
        let labels = BTreeMap::from([(ZONE_LABEL.to_owned(), zone.to_owned())]);
        let mut removed = 0;
        let mut insights = BTreeSet::new();
        for ty in ZONE_OWNED {
            for s in list_all(&*self.store, ty, None, &labels).await? {
                if s.zone.as_deref() != Some(zone) {
                    continue;
                }
                match self.store.delete(&s.resource.key(), Some(s.version)).await {
                    Ok(()) | Err(StoreError::NotFound(_)) => removed += 1,
                    // Changed meanwhile: the next pass looks again.
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
                if let Some(form) = zone_form(&s.resource) {
                    insights.insert(kds_name(&form.meta.mesh, &form.meta.name));
                }
            }
        }
        if let Some(mirror) = &self.mirror {
            let names: Vec<String> = insights.iter().cloned().collect();
            mirror.write(zone, &[], &names).await?;
        }
        for name in insights {
            self.zones.remove_insight(zone, &name);
        }
        Ok(removed)
    }

    /// Run a pass every quarter of the period (between 100 ms and 30 s) until `shutdown`
    /// turns `true`.
    pub async fn follow(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let every = (self.after / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        loop {
            if let Err(e) = self.run_once().await {
                tracing::warn!(error = %e, "zone cleanup: cannot read or write the store; retrying");
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
        }
    }
}
