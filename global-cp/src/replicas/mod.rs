//! Global replicas (issue 36; Kuma 2.7's `pkg/plugins/leader/postgres` and the per-zone KDS
//! lease): what several `global-cp` processes on one PostgreSQL must agree on, behind one
//! [`Coordinator`] trait.
//!
//! - **Replicas**: each process registers itself ([`ReplicaInfo`]) and is alive while its
//!   dedicated database session holds its advisory lock and its heartbeat is fresh;
//! - **Leader**: one replica, elected by a PostgreSQL advisory lock held on that same session,
//!   runs the work that must happen once (zone cleanup). Leadership is lost with the session:
//!   a replica that cannot heartbeat within [`postgres::SESSION_TIMEOUT`] drops it itself, and
//!   the others take over after [`postgres::REPLICA_TTL`] (cutting off a session PostgreSQL
//!   still keeps open for a silent replica), so two leaders never overlap;
//! - **Zone leases**: one connection on one replica holds a zone's KDS streams; the lease lives
//!   in PostgreSQL so that a zone can never sync through two replicas at once, and is free the
//!   moment its holder lets it go or dies;
//! - **Session epochs**: when a replica loses its session it has lost its leases too, so its
//!   zone streams end ([`Coordinator::session`]) and the zones reconnect, to it or another.
//!
//! [`Single`] is the coordinator of a Global that runs alone (the memory store): always the
//! leader, leases kept by the in-process [`crate::zones::ZoneRegistry`] only.

pub mod insights;
pub mod lease;
pub mod postgres;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use crate::store::StoreError;

/// One Global replica as the others see it (`GET /replicas`, `/ready`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaInfo {
    /// Its registration (a new one per database session).
    pub id: i32,
    /// Its name (`--replica-name`; hostname by default).
    pub name: String,
    /// Where other replicas reach its inter-CP server (`host:port`; empty: none).
    pub inter_cp: String,
    /// Where its REST API listens.
    pub api: String,
    /// When it registered (RFC 3339).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339).
    pub heartbeat_at: String,
    /// Alive: its session is open and its heartbeat fresh.
    pub alive: bool,
    /// It is the leader.
    pub leader: bool,
}

/// Who holds a zone's lease, as the store has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum ZoneHold {
    /// A live replica holds it.
    Held {
        /// The replica's registration.
        replica: i32,
        /// The replica's name.
        replica_name: String,
        /// Its inter-CP address.
        inter_cp: String,
        /// The zone's connection on it (peer address).
        connection: String,
    },
    /// Nobody holds it.
    Free {
        /// When the zone was last connected (its holder let it go, or last heartbeat of a
        /// holder that died), RFC 3339.
        since: String,
        /// Seconds since then, by the database's clock.
        #[serde(skip)]
        offline_seconds: f64,
    },
    /// A live replica is removing the zone's resources.
    Cleaning {
        /// The replica.
        replica: i32,
    },
}

/// Why a zone's lease was not granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseRefused {
    /// Another live replica holds it.
    #[error("zone {zone:?} is connected to Global replica {replica:?} (from {connection})")]
    Held {
        /// The zone.
        zone: String,
        /// The holder's name.
        replica: String,
        /// The zone's connection there.
        connection: String,
    },
    /// A live replica is removing the zone's resources.
    #[error("zone {0:?} was offline past --zone-cleanup-after and its resources are being removed; retry in a moment")]
    Cleaning(String),
    /// This replica has no session to PostgreSQL now, so it cannot hold any zone.
    #[error("this Global replica has lost its database session; retry (on another replica)")]
    NoSession,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What several Global replicas agree on. One per process; cheap to share.
#[async_trait::async_trait]
pub trait Coordinator: Send + Sync + std::fmt::Debug {
    /// `true` for a coordinator shared by replicas (PostgreSQL); `false` for [`Single`].
    fn distributed(&self) -> bool;

    /// This replica's current registration (`None` while it has no session).
    fn me(&self) -> Option<ReplicaInfo>;

    /// Whether this replica leads (runs the once-only work); changes as leadership moves.
    fn leader(&self) -> watch::Receiver<bool>;

    /// This replica's session epoch: it changes whenever the session (and with it every lease
    /// this replica held) was lost. A zone stream opened under one epoch ends when it changes.
    fn session(&self) -> watch::Receiver<u64>;

    /// Take (or keep) `zone`'s lease for this replica, naming `connection` (informational:
    /// within one replica the [`crate::zones::ZoneRegistry`] decides between connections, see
    /// [`ZoneLeases`]).
    ///
    /// # Errors
    /// [`LeaseRefused`].
    async fn acquire_zone(&self, zone: &str, connection: &str) -> Result<(), LeaseRefused>;

    /// Let `zone`'s lease go, if this replica holds it.
    async fn release_zone(&self, zone: &str);

    /// Every zone with a lease record, by name (empty for [`Single`]: its registry knows).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn zones(&self) -> Result<BTreeMap<String, ZoneHold>, StoreError>;

    /// Mark `zone` as being cleaned up by this replica: `false` (nothing marked) when a live
    /// replica holds it or cleans it.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn begin_cleanup(&self, zone: &str) -> Result<bool, StoreError>;

    /// The cleanup of `zone` by this replica is over.
    async fn end_cleanup(&self, zone: &str);

    /// Every registered replica (alive or recently dead), by id.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn replicas(&self) -> Result<Vec<ReplicaInfo>, StoreError>;
}

/// The coordinator of a Global running alone: always the leader, one session forever.
#[derive(Debug)]
pub struct Single {
    leader: watch::Sender<bool>,
    session: watch::Sender<u64>,
}

impl Default for Single {
    fn default() -> Self {
        Self {
            leader: watch::channel(true).0,
            session: watch::channel(1).0,
        }
    }
}

impl Single {
    /// A shared [`Single`].
    pub fn shared() -> Arc<dyn Coordinator> {
        Arc::new(Self::default())
    }
}

#[async_trait::async_trait]
impl Coordinator for Single {
    fn distributed(&self) -> bool {
        false
    }

    fn me(&self) -> Option<ReplicaInfo> {
        None
    }

    fn leader(&self) -> watch::Receiver<bool> {
        self.leader.subscribe()
    }

    fn session(&self) -> watch::Receiver<u64> {
        self.session.subscribe()
    }

    async fn acquire_zone(&self, _zone: &str, _connection: &str) -> Result<(), LeaseRefused> {
        Ok(())
    }

    async fn release_zone(&self, _zone: &str) {}

    async fn zones(&self) -> Result<BTreeMap<String, ZoneHold>, StoreError> {
        Ok(BTreeMap::new())
    }

    async fn begin_cleanup(&self, _zone: &str) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn end_cleanup(&self, _zone: &str) {}

    async fn replicas(&self) -> Result<Vec<ReplicaInfo>, StoreError> {
        Ok(Vec::new())
    }
}

/// Every zone this replica knows (`local`, its registry) or the replicas hold, with its
/// status: a zone connected to another live replica is online there (`replica` and
/// `connection` name it; the sync counters stay that replica's own). `me` names this replica.
///
/// # Errors
/// [`StoreError::Unavailable`].
pub async fn zone_statuses(
    local: &crate::zones::ZoneRegistry,
    coordinator: &dyn Coordinator,
    me: &str,
) -> Result<BTreeMap<String, crate::zones::ZoneStatus>, StoreError> {
    let mut out: BTreeMap<String, crate::zones::ZoneStatus> = local
        .list()
        .into_iter()
        .map(|mut z| {
            if z.online {
                z.replica = Some(me.to_owned());
            }
            (z.name.clone(), z)
        })
        .collect();
    for (zone, hold) in coordinator.zones().await? {
        let status = out
            .entry(zone.clone())
            .or_insert_with(|| crate::zones::ZoneStatus {
                name: zone,
                ..Default::default()
            });
        if status.online {
            continue;
        }
        if let ZoneHold::Held {
            replica_name,
            connection,
            ..
        } = hold
        {
            status.online = true;
            status.replica = Some(replica_name);
            status.connection = Some(connection);
        }
    }
    Ok(out)
}

/// Counts once-only work as it runs (`umbra_singleton_runs_total{task}`): with several
/// replicas, a test sums it over every replica to prove nothing ran twice.
pub fn count_singleton(task: &'static str) {
    metrics::counter!(SINGLETON_RUNS, "task" => task).increment(1);
}

/// Once-only work done by the leader, per task.
pub const SINGLETON_RUNS: &str = "umbra_singleton_runs_total";
/// 1 while this replica leads, else 0.
pub const LEADER: &str = "umbra_global_leader";

/// Describe this module's metrics.
pub fn describe() {
    metrics::describe_counter!(SINGLETON_RUNS, "Once-only work run by the leader, per task");
    metrics::describe_gauge!(LEADER, "1 while this Global replica is the leader");
}
