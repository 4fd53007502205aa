//! Control-plane replicas on one PostgreSQL (issue 36; Kuma 2.7's `pkg/plugins/leader/postgres`
//! and the per-zone KDS lease): what several processes of one role (Global replicas on the
//! Global's database, zone CP replicas on their zone's) must agree on, behind one
//! [`Coordinator`] trait.
//!
//! - **Replicas**: each process registers itself ([`ReplicaInfo`]) and is alive while its
//!   dedicated database session holds its advisory lock and its heartbeat is fresh;
//! - **Leader**: one replica, elected by a PostgreSQL advisory lock held on that same session,
//!   runs the work that must happen once (the Global's zone cleanup; a zone's KDS client and
//!   its singletons). Leadership is lost with the session: a replica that cannot heartbeat
//!   within [`postgres::SESSION_TIMEOUT`] drops it itself, and the others take over after
//!   [`postgres::REPLICA_TTL`] (cutting off a session PostgreSQL still keeps open for a silent
//!   replica), so two leaders never overlap;
//! - **Zone leases** (Global replicas only): one connection on one replica holds a zone's KDS
//!   streams; the lease lives in PostgreSQL so that a zone can never sync through two replicas
//!   at once, and is free the moment its holder lets it go or dies;
//! - **Session epochs**: when a replica loses its session it has lost its leases too, so its
//!   zone streams end ([`Coordinator::session`]) and the zones reconnect, to it or another.
//!
//! [`Single`] is the coordinator of a process that runs alone (a memory store): always the
//! leader, leases kept by the caller's in-process registry only.

pub mod postgres;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use umbra_store::StoreError;

/// One replica as the others see it (`GET /replicas`, `/ready`).
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
    /// Where Envoys reach its data-plane server (ADS and `/bootstrap`, `host:port`; zone CP
    /// replicas only, empty otherwise).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub xds: String,
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

/// What several replicas of one role agree on. One per process; cheap to share.
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
    /// within one replica the Global's zone registry decides between connections, see
    /// its `ZoneLeases`).
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

/// Counts once-only work as it runs (`umbra_singleton_runs_total{task}`): with several
/// replicas, a test sums it over every replica to prove nothing ran twice.
pub fn count_singleton(task: &'static str) {
    metrics::counter!(SINGLETON_RUNS, "task" => task).increment(1);
}

/// Once-only work done by the leader, per task.
pub const SINGLETON_RUNS: &str = "umbra_singleton_runs_total";
/// 1 while this Global replica leads, else 0.
pub const LEADER: &str = "umbra_global_leader";
/// 1 while this zone CP replica leads its zone, else 0.
pub const ZONE_LEADER: &str = "umbra_zone_leader";

/// Which control plane the replicas are (for logs and the leader gauge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Role {
    /// Replicas of the Global CP ([`LEADER`]).
    #[default]
    Global,
    /// Replicas of one zone's CP ([`ZONE_LEADER`]).
    Zone,
}

impl Role {
    /// The gauge that is 1 while a replica of this role leads.
    pub fn leader_gauge(self) -> &'static str {
        match self {
            Self::Global => LEADER,
            Self::Zone => ZONE_LEADER,
        }
    }

    /// How logs name a replica of this role.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Global => "Global replica",
            Self::Zone => "zone CP replica",
        }
    }
}

/// Describe this module's metrics.
pub fn describe() {
    metrics::describe_counter!(SINGLETON_RUNS, "Once-only work run by the leader, per task");
    metrics::describe_gauge!(LEADER, "1 while this Global replica is the leader");
    metrics::describe_gauge!(ZONE_LEADER, "1 while this zone CP replica leads its zone");
}
