//! A zone's KDS lease on this replica, across both places that keep it: the in-process
//! [`ZoneRegistry`] (which connection on this replica holds the zone) and the [`Coordinator`]
//! (which replica holds it). Taking and letting go of one zone's lease are serialised per
//! zone, so a lease is never released in the store while this replica has a stream of the
//! zone open (a late release of a previous connection would otherwise free the lease under a
//! new one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Coordinator, LeaseRefused};
use crate::zones::{Refused, ZoneRegistry};

/// Why a zone's stream may not open here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamRefused {
    /// This replica refuses it ([`Refused`]).
    #[error("{0:?}")]
    Local(Refused),
    /// The replicas refuse it ([`LeaseRefused`]).
    #[error(transparent)]
    Replicas(#[from] LeaseRefused),
}

/// The zone leases of this replica.
#[derive(Debug)]
pub struct ZoneLeases {
    coordinator: Arc<dyn Coordinator>,
    zones: Arc<ZoneRegistry>,
    /// Per zone, held while its lease is being taken or let go.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ZoneLeases {
    /// Leases of `zones` under `coordinator`.
    pub fn new(coordinator: Arc<dyn Coordinator>, zones: Arc<ZoneRegistry>) -> Self {
        Self {
            coordinator,
            zones,
            turns: Mutex::default(),
        }
    }

    /// The registry of this replica.
    pub fn zones(&self) -> &Arc<ZoneRegistry> {
        &self.zones
    }

    /// The coordinator.
    pub fn coordinator(&self) -> &Arc<dyn Coordinator> {
        &self.coordinator
    }

    fn turn(&self, zone: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(zone.to_owned())
            .or_default()
            .clone()
    }

    /// A stream of `zone` opens on `connection`: counted on the registry, and the zone's lease
    /// taken (or kept) for this replica. Nothing stays counted when it is refused.
    ///
    /// # Errors
    /// [`StreamRefused`].
    pub async fn open(&self, zone: &str, connection: &str) -> Result<(), StreamRefused> {
        let turn = self.turn(zone);
        let _turn = turn.lock().await;
        self.zones
            .stream_opened(zone, connection)
            .map_err(StreamRefused::Local)?;
        if let Err(e) = self.coordinator.acquire_zone(zone, connection).await {
            self.zones.stream_closed(zone, Some(e.to_string()));
            return Err(e.into());
        }
        Ok(())
    }

    /// A stream of `zone` ended (`error`: why): uncounted now, and when it was the zone's last
    /// stream here, the lease is let go (in the background, under the zone's turn, and only if
    /// no stream of the zone opened here meanwhile).
    pub fn closed(self: &Arc<Self>, zone: &str, error: Option<String>) {
        self.zones.stream_closed(zone, error);
        if !self.coordinator.distributed() || self.zones.get(zone).is_some_and(|z| z.streams > 0) {
            return;
        }
        let this = self.clone();
        let zone = zone.to_owned();
        tokio::spawn(async move {
            let turn = this.turn(&zone);
            let _turn = turn.lock().await;
            if this.zones.get(&zone).is_some_and(|z| z.streams == 0) {
                this.coordinator.release_zone(&zone).await;
            }
        });
    }
}
