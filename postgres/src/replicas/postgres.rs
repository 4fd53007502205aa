//! The [`Coordinator`] of replicas on one PostgreSQL (schema: `migrations/
//! 20261127000001_replicas.sql`).
//!
//! Each replica keeps one dedicated database session (not a pooled connection) for its life:
//! on it, it registers a `cp_replicas` row, holds the advisory lock `(1, id)` that says it is
//! alive, heartbeats every [`HEARTBEAT`], and tries the leader lock `(2, 0)` on every beat until
//! it has it (Kuma's `pkg/plugins/leader/postgres` does the same with one lock); it leads
//! once it has held the lock for [`LEADER_GRACE`]. PostgreSQL
//! drops both locks the moment the session ends, so a replica that dies (SIGKILL: its socket
//! closes) frees its leadership and its zone leases at once.
//!
//! A replica PostgreSQL still sees but that stopped heartbeating (a partition, a stalled
//! host) is not alive after [`REPLICA_TTL`]: its leases are free, and the other replicas
//! terminate its session (`pg_terminate_backend`) so that its leader lock goes too. The
//! replica itself gives up its session, leadership and leases after [`SESSION_TIMEOUT`]
//! without a successful beat (shorter than the TTL), so two leaders never overlap, and
//! registers again once it can.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Row};
use tokio::sync::watch;

use super::{count_singleton, Coordinator, LeaseRefused, ReplicaInfo, Role, ZoneHold};
use crate::pg_rows::{rfc3339, unavailable};
use umbra_store::StoreError;

/// How often a replica heartbeats (and tries for leadership).
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A beat that has not succeeded within this ends the replica's session (it stops leading and
/// holding leases, and registers again).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(2);
/// A replica whose last heartbeat is older than this is not alive (longer than
/// [`SESSION_TIMEOUT`] plus a beat, so the replica has already stepped down).
pub const REPLICA_TTL: Duration = Duration::from_secs(5);
/// A replica that took the leader lock leads only after holding it this long: by then a
/// previous leader that lost its session (and so the lock) has noticed and stepped down (it
/// notices within a beat plus [`SESSION_TIMEOUT`], 3 s; half a second more is margin), so two
/// replicas never lead at once. Leadership therefore moves 3.5-4.5 s after a leader dies.
pub const LEADER_GRACE: Duration = Duration::from_millis(3500);
/// Dead replicas' rows are forgotten after this (unless a zone lease still names them).
const FORGET_AFTER: &str = "1 hour";
/// Advisory lock namespaces (`pg_advisory_lock(namespace, key)`).
const LIVENESS: i32 = 1;
const LEADERSHIP: i32 = 2;
/// Pause between attempts to open a session (doubling up to the cap).
const RECONNECT: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// How a replica names itself to the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registration {
    /// Its name (`--replica-name`).
    pub name: String,
    /// Its inter-CP address (`host:port`; empty: none).
    pub inter_cp: String,
    /// Its REST API address.
    pub api: String,
    /// Its data-plane server address (zone CP replicas; empty: none).
    pub xds: String,
    /// Which control plane it is a replica of.
    pub role: Role,
}

/// Replicas on PostgreSQL.
#[derive(Debug)]
pub struct PgCoordinator {
    pool: PgPool,
    registration: Registration,
    me: RwLock<Option<ReplicaInfo>>,
    leader: watch::Sender<bool>,
    session: watch::Sender<u64>,
}

fn ttl_seconds() -> f64 {
    REPLICA_TTL.as_secs_f64()
}

impl PgCoordinator {
    /// Register as a replica of the database at `url` and keep the session until `stop` turns
    /// `true` (then the session closes: leadership and leases go at once). Returns once
    /// registered.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the database cannot be reached for the first session.
    pub async fn start(
        url: &str,
        registration: Registration,
        stop: watch::Receiver<bool>,
    ) -> Result<Arc<Self>, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(SESSION_TIMEOUT)
            .connect(url)
            .await
            .map_err(unavailable)?;
        let this = Arc::new(Self {
            pool,
            registration,
            me: RwLock::new(None),
            leader: watch::channel(false).0,
            session: watch::channel(0).0,
        });
        let first = this.open(url).await?;
        tokio::spawn(tracing::Instrument::instrument(
            this.clone().run(url.to_owned(), first, stop),
            tracing::info_span!("replica.session"),
        ));
        Ok(this)
    }

    /// Open a session: register, take the liveness lock.
    async fn open(&self, url: &str) -> Result<(PgConnection, i32), StoreError> {
        let mut conn = tokio::time::timeout(SESSION_TIMEOUT, PgConnection::connect(url))
            .await
            .map_err(|_| StoreError::Unavailable("the database cannot be reached".into()))?
            .map_err(unavailable)?;
        let row = sqlx::query(
            "INSERT INTO cp_replicas (name, inter_cp, api, xds, pid) VALUES ($1, $2, $3, $4, pg_backend_pid())
             RETURNING id, started_at, heartbeat_at",
        )
        .bind(&self.registration.name)
        .bind(&self.registration.inter_cp)
        .bind(&self.registration.api)
        .bind(&self.registration.xds)
        .fetch_one(&mut conn)
        .await
        .map_err(unavailable)?;
        let id: i32 = row.try_get("id").map_err(unavailable)?;
        sqlx::query("SELECT pg_advisory_lock($1, $2)")
            .bind(LIVENESS)
            .bind(id)
            .execute(&mut conn)
            .await
            .map_err(unavailable)?;
        let info = ReplicaInfo {
            id,
            name: self.registration.name.clone(),
            inter_cp: self.registration.inter_cp.clone(),
            api: self.registration.api.clone(),
            xds: self.registration.xds.clone(),
            started_at: rfc3339(row.try_get("started_at").map_err(unavailable)?),
            heartbeat_at: rfc3339(row.try_get("heartbeat_at").map_err(unavailable)?),
            alive: true,
            leader: false,
        };
        *self
            .me
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(info);
        self.session.send_modify(|e| *e += 1);
        tracing::info!(replica = id, name = %self.registration.name, "{} registered", self.registration.role.noun());
        Ok((conn, id))
    }

    /// Keep sessions open, one after another, until `stop`.
    async fn run(
        self: Arc<Self>,
        url: String,
        first: (PgConnection, i32),
        mut stop: watch::Receiver<bool>,
    ) {
        let mut session = Some(first);
        let mut backoff = RECONNECT;
        loop {
            if let Some((conn, id)) = session.take() {
                backoff = RECONNECT;
                let stopped = self.hold(conn, id, &mut stop).await;
                self.lost(id);
                if stopped {
                    return;
                }
            }
            if *stop.borrow() {
                return;
            }
            match self.open(&url).await {
                Ok(s) => session = Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "{}: cannot open a database session; retrying", self.registration.role.noun());
                    let stopped = tokio::select! {
                        () = tokio::time::sleep(backoff) => false,
                        r = stop.wait_for(|s| *s) => r.is_ok(),
                    };
                    if stopped {
                        return;
                    }
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                }
            }
        }
    }

    /// Heartbeat on `conn` until a beat fails or `stop`; `true` when stopped.
    async fn hold(
        &self,
        mut conn: PgConnection,
        id: i32,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // When this session took the leader lock (it keeps it until the session ends).
        let mut locked_at: Option<tokio::time::Instant> = None;
        loop {
            let leading = *self.leader.borrow();
            // Leadership starts when the grace is over, not at the next beat after it.
            let promotion = locked_at.filter(|_| !leading).map(|at| at + LEADER_GRACE);
            let stopped = tokio::select! {
                _ = tick.tick() => false,
                () = async {
                    match promotion {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {
                    // The session held the lock through the grace (its last beat is under a
                    // heartbeat old); the next beat checks it again.
                    self.set_leader(true);
                    continue;
                }
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped || stop.has_changed().is_err() {
                // Closing the session releases leadership and leases at once.
                let _ = conn.close().await;
                return true;
            }
            match tokio::time::timeout(SESSION_TIMEOUT, beat(&mut conn, id, locked_at.is_some()))
                .await
            {
                Ok(Ok(locked)) => {
                    if locked && locked_at.is_none() {
                        locked_at = Some(tokio::time::Instant::now());
                    }
                    let now_leading = locked_at.is_some_and(|at| at.elapsed() >= LEADER_GRACE);
                    if now_leading != leading {
                        self.set_leader(now_leading);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(replica = id, error = %e, "{}: heartbeat failed; giving up this session (leadership and zone leases)", self.registration.role.noun());
                    return false;
                }
                Err(_) => {
                    tracing::warn!(replica = id, timeout = ?SESSION_TIMEOUT, "{}: heartbeat timed out; giving up this session (leadership and zone leases)", self.registration.role.noun());
                    return false;
                }
            }
        }
    }

    fn set_leader(&self, leading: bool) {
        self.leader.send_replace(leading);
        metrics::gauge!(self.registration.role.leader_gauge()).set(if leading { 1.0 } else { 0.0 });
        if let Some(me) = self
            .me
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            me.leader = leading;
        }
        if leading {
            count_singleton("leadership");
            tracing::info!(name = %self.registration.name, "this {} is now the leader", self.registration.role.noun());
        } else {
            tracing::warn!(name = %self.registration.name, "this {} is no longer the leader", self.registration.role.noun());
        }
    }

    /// The session of registration `id` is over: so are its leadership and leases.
    fn lost(&self, id: i32) {
        if *self.leader.borrow() {
            self.set_leader(false);
        }
        *self
            .me
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.session.send_modify(|e| *e += 1);
        tracing::info!(
            replica = id,
            "{} session ended",
            self.registration.role.noun()
        );
    }

    fn my_id(&self) -> Option<i32> {
        self.me
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|m| m.id)
    }
}

/// One beat: refresh the heartbeat, cut off silent replicas, try for the leader lock (unless
/// `locked`: this session holds it). Returns whether this session holds the leader lock.
async fn beat(conn: &mut PgConnection, id: i32, locked: bool) -> Result<bool, StoreError> {
    let updated = sqlx::query("UPDATE cp_replicas SET heartbeat_at = now() WHERE id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(unavailable)?;
    if updated.rows_affected() == 0 {
        return Err(StoreError::Unavailable(
            "this replica's registration is gone".into(),
        ));
    }
    if locked {
        // Forget long-dead replicas no lease names.
        sqlx::query(&format!(
            "DELETE FROM cp_replicas r WHERE r.heartbeat_at < now() - interval '{FORGET_AFTER}'
               AND NOT umbra_replica_alive(r.id, $1 * interval '1 second')
               AND NOT EXISTS (SELECT 1 FROM zone_leases l WHERE l.replica = r.id OR l.cleaning_by = r.id)"
        ))
        .bind(ttl_seconds())
        .execute(&mut *conn)
        .await
        .map_err(unavailable)?;
        return Ok(true);
    }
    // A replica whose heartbeat stopped but whose session PostgreSQL keeps (a partition)
    // would hold the leader lock forever: end its session.
    let cut: Vec<i32> = sqlx::query_scalar(
        "WITH silent AS MATERIALIZED (
           SELECT r.id, r.pid FROM cp_replicas r
           WHERE r.id <> $1 AND r.heartbeat_at < now() - $2 * interval '1 second'
             AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                   AND l.pid = r.pid AND l.objsubid = 2
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())))
         SELECT id FROM silent WHERE pg_terminate_backend(pid)",
    )
    .bind(id)
    .bind(ttl_seconds())
    .fetch_all(&mut *conn)
    .await
    .map_err(unavailable)?;
    for other in cut {
        tracing::warn!(
            replica = other,
            "cut off the database session of a replica that stopped heartbeating"
        );
    }
    sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1, 0)")
        .bind(LEADERSHIP)
        .fetch_one(&mut *conn)
        .await
        .map_err(unavailable)
}

#[async_trait::async_trait]
impl Coordinator for PgCoordinator {
    fn distributed(&self) -> bool {
        true
    }

    fn me(&self) -> Option<ReplicaInfo> {
        self.me
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn leader(&self) -> watch::Receiver<bool> {
        self.leader.subscribe()
    }

    fn session(&self) -> watch::Receiver<u64> {
        self.session.subscribe()
    }

    async fn acquire_zone(&self, zone: &str, connection: &str) -> Result<(), LeaseRefused> {
        let me = self.my_id().ok_or(LeaseRefused::NoSession)?;
        let granted = sqlx::query(
            "INSERT INTO zone_leases AS l (zone, replica, connection) VALUES ($1, $2, $3)
             ON CONFLICT (zone) DO UPDATE SET replica = EXCLUDED.replica,
               connection = EXCLUDED.connection,
               acquired_at = CASE WHEN l.released_at IS NULL AND l.replica = EXCLUDED.replica
                   THEN l.acquired_at ELSE now() END,
               released_at = NULL, cleaning_by = NULL
             WHERE (l.cleaning_by IS NULL OR NOT umbra_replica_alive(l.cleaning_by, $4 * interval '1 second'))
               AND (l.replica = EXCLUDED.replica OR l.released_at IS NOT NULL
                    OR NOT umbra_replica_alive(l.replica, $4 * interval '1 second'))
             RETURNING l.replica",
        )
        .bind(zone)
        .bind(me)
        .bind(connection)
        .bind(ttl_seconds())
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        if granted.is_some() {
            return Ok(());
        }
        let holder = sqlx::query(
            "SELECT l.connection, l.cleaning_by, COALESCE(r.name, '') AS name
             FROM zone_leases l LEFT JOIN cp_replicas r ON r.id = l.replica WHERE l.zone = $1",
        )
        .bind(zone)
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        let Some(holder) = holder else {
            // Released between the two statements: the zone retries.
            return Err(LeaseRefused::Store(StoreError::Unavailable(
                "the zone's lease changed hands; retry".into(),
            )));
        };
        if holder
            .try_get::<Option<i32>, _>("cleaning_by")
            .map_err(unavailable)?
            .is_some()
        {
            return Err(LeaseRefused::Cleaning(zone.to_owned()));
        }
        Err(LeaseRefused::Held {
            zone: zone.to_owned(),
            replica: holder.try_get("name").map_err(unavailable)?,
            connection: holder.try_get("connection").map_err(unavailable)?,
        })
    }

    async fn release_zone(&self, zone: &str) {
        let Some(me) = self.my_id() else {
            return; // the session is gone, and the lease with it
        };
        let released = sqlx::query(
            "UPDATE zone_leases SET released_at = now()
             WHERE zone = $1 AND replica = $2 AND released_at IS NULL",
        )
        .bind(zone)
        .bind(me)
        .execute(&self.pool)
        .await;
        if let Err(e) = released {
            // The lease then ends with this replica's session or liveness.
            tracing::warn!(%zone, error = %e, "cannot release the zone's lease");
        }
    }

    async fn zones(&self) -> Result<BTreeMap<String, ZoneHold>, StoreError> {
        let rows = sqlx::query(
            "SELECT l.zone, l.replica, l.connection, l.released_at IS NULL AS held,
               umbra_replica_alive(l.replica, $1 * interval '1 second') AS alive,
               l.cleaning_by, COALESCE(umbra_replica_alive(l.cleaning_by, $1 * interval '1 second'), false) AS cleaning,
               COALESCE(r.name, '') AS name, COALESCE(r.inter_cp, '') AS inter_cp,
               COALESCE(l.released_at, r.heartbeat_at, l.acquired_at) AS since,
               EXTRACT(EPOCH FROM now() - COALESCE(l.released_at, r.heartbeat_at, l.acquired_at))::float8 AS offline
             FROM zone_leases l LEFT JOIN cp_replicas r ON r.id = l.replica",
        )
        .bind(ttl_seconds())
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        let mut out = BTreeMap::new();
        for row in rows {
            let zone: String = row.try_get("zone").map_err(unavailable)?;
            let hold = if row.try_get::<bool, _>("cleaning").map_err(unavailable)? {
                ZoneHold::Cleaning {
                    replica: row
                        .try_get::<Option<i32>, _>("cleaning_by")
                        .map_err(unavailable)?
                        .unwrap_or_default(),
                }
            } else if row.try_get::<bool, _>("held").map_err(unavailable)?
                && row.try_get::<bool, _>("alive").map_err(unavailable)?
            {
                ZoneHold::Held {
                    replica: row.try_get("replica").map_err(unavailable)?,
                    replica_name: row.try_get("name").map_err(unavailable)?,
                    inter_cp: row.try_get("inter_cp").map_err(unavailable)?,
                    connection: row.try_get("connection").map_err(unavailable)?,
                }
            } else {
                ZoneHold::Free {
                    since: rfc3339(row.try_get("since").map_err(unavailable)?),
                    offline_seconds: row.try_get("offline").map_err(unavailable)?,
                }
            };
            out.insert(zone, hold);
        }
        Ok(out)
    }

    async fn begin_cleanup(&self, zone: &str) -> Result<bool, StoreError> {
        let Some(me) = self.my_id() else {
            return Ok(false);
        };
        let marked = sqlx::query(
            "INSERT INTO zone_leases AS l (zone, replica, connection, released_at, cleaning_by)
             VALUES ($1, $2, '', now(), $2)
             ON CONFLICT (zone) DO UPDATE SET cleaning_by = EXCLUDED.cleaning_by
             WHERE (l.cleaning_by IS NULL OR NOT umbra_replica_alive(l.cleaning_by, $3 * interval '1 second'))
               AND (l.released_at IS NOT NULL OR NOT umbra_replica_alive(l.replica, $3 * interval '1 second'))
             RETURNING l.zone",
        )
        .bind(zone)
        .bind(me)
        .bind(ttl_seconds())
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(marked.is_some())
    }

    async fn end_cleanup(&self, zone: &str) {
        let Some(me) = self.my_id() else {
            return;
        };
        if let Err(e) = sqlx::query(
            "UPDATE zone_leases SET cleaning_by = NULL WHERE zone = $1 AND cleaning_by = $2",
        )
        .bind(zone)
        .bind(me)
        .execute(&self.pool)
        .await
        {
            // The mark ends with this replica's liveness anyway.
            tracing::warn!(%zone, error = %e, "cannot clear the zone's cleanup mark");
        }
    }

    async fn replicas(&self) -> Result<Vec<ReplicaInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT r.id, r.name, r.inter_cp, r.api, r.xds, r.started_at, r.heartbeat_at,
               umbra_replica_alive(r.id, $1 * interval '1 second') AS alive,
               EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                 AND l.pid = r.pid AND l.objsubid = 2 AND l.classid::bigint = $2 AND l.objid::bigint = 0
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS leads
             FROM cp_replicas r ORDER BY r.id",
        )
        .bind(ttl_seconds())
        .bind(i64::from(LEADERSHIP))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|row| {
                let alive: bool = row.try_get("alive").map_err(unavailable)?;
                Ok(ReplicaInfo {
                    id: row.try_get("id").map_err(unavailable)?,
                    name: row.try_get("name").map_err(unavailable)?,
                    inter_cp: row.try_get("inter_cp").map_err(unavailable)?,
                    api: row.try_get("api").map_err(unavailable)?,
                    xds: row.try_get("xds").map_err(unavailable)?,
                    started_at: rfc3339(row.try_get("started_at").map_err(unavailable)?),
                    heartbeat_at: rfc3339(row.try_get("heartbeat_at").map_err(unavailable)?),
                    alive,
                    leader: alive && row.try_get::<bool, _>("leads").map_err(unavailable)?,
                })
            })
            .collect()
    }
}
