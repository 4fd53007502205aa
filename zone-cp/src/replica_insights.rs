//! The insights of a replicated zone's proxies, shared by its zone CP replicas through the
//! zone's PostgreSQL (table `dataplane_insights`, `migrations/20261127000004_dataplane_insights.sql`;
//! issue 36, item 4).
//!
//! The replica an Envoy's ADS stream is open to owns that proxy's insight: it writes it
//! ([`share`]: what changed, every [`POLL`]). A closed stream is written only by the replica
//! the row names, so a replica an Envoy left cannot overwrite where it went. Every replica
//! mirrors the others' rows into its own [`Insights`] ([`Insights::adopt`]): new rows by
//! sequence every [`POLL`], and the whole table every [`FULL_READ`], which also shows a proxy
//! whose replica died (its row still says connected) as disconnected. So any replica answers
//! for any Envoy, its KDS reports every proxy's insight when it leads, and it generates the
//! same configuration for a proxy as the replica serving it (the admin port is part of it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Row;
use tokio::sync::watch;
use umbra_core::dataplane::DpKey;
use umbra_postgres::pg_rows::unavailable;
use umbra_postgres::replicas::{postgres::REPLICA_TTL, Coordinator};
use umbra_store::StoreError;

use crate::insight::{AdminEndpoint, Insight, Insights};

/// How often this replica writes what changed and reads new rows.
pub const POLL: Duration = Duration::from_secs(1);
/// How often the whole table is read again.
pub const FULL_READ: Duration = Duration::from_secs(10);
/// Rows read per incremental query.
const PAGE: i64 = 5_000;

/// A row's body: the insight and where its Envoy's admin listens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Body {
    insight: Insight,
    #[serde(default)]
    admin: Option<AdminEndpoint>,
}

/// Shares `insights` with the other replicas of the zone whose database is at `url`.
#[derive(Debug)]
pub struct InsightShare {
    pool: PgPool,
    insights: Arc<Insights>,
    coordinator: Arc<dyn Coordinator>,
}

impl InsightShare {
    /// Connect to the zone's database at `url`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub async fn connect(
        url: &str,
        insights: Arc<Insights>,
        coordinator: Arc<dyn Coordinator>,
    ) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(unavailable)?;
        Ok(Self {
            pool,
            insights,
            coordinator,
        })
    }

    /// Write this replica's insights that changed since `written` (updated on success).
    async fn write(&self, written: &mut HashMap<DpKey, Body>) -> Result<(), StoreError> {
        let Some(me) = self.coordinator.me() else {
            return Ok(());
        };
        for (key, insight) in self.insights.local() {
            let body = Body {
                admin: insight.admin,
                insight,
            };
            if written.get(&key) == Some(&body) {
                continue;
            }
            let json = serde_json::to_value(&body)
                .map_err(|e| StoreError::Unavailable(format!("insight: {e}")))?;
            // A connected stream takes the row; a closed one only updates its own.
            sqlx::query(
                "INSERT INTO dataplane_insights (mesh, name, replica, body) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (mesh, name) DO UPDATE SET replica = EXCLUDED.replica,
                   body = EXCLUDED.body, seq = nextval('dataplane_insights_seq'), at = now()
                 WHERE $5::boolean OR dataplane_insights.replica = EXCLUDED.replica",
            )
            .bind(&key.mesh)
            .bind(&key.name)
            .bind(me.id)
            .bind(&json)
            .bind(body.insight.connected)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
            written.insert(key, body);
        }
        Ok(())
    }

    /// Take the other replicas' rows with a sequence above `*after` (all with 0), up to
    /// [`PAGE`] of them, and move `*after` on; returns how many rows were read. A row whose
    /// writer is not alive any more shows its proxy disconnected.
    async fn read(&self, after: &mut i64) -> Result<usize, StoreError> {
        let me = self.coordinator.me().map(|m| m.id);
        let rows = sqlx::query(
            "SELECT mesh, name, replica, body, seq,
               umbra_replica_alive(replica, $2 * interval '1 second') AS alive,
               to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS at
             FROM dataplane_insights WHERE seq > $1 ORDER BY seq LIMIT $3",
        )
        .bind(*after)
        .bind(REPLICA_TTL.as_secs_f64())
        .bind(PAGE)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        for row in &rows {
            let seq: i64 = row.try_get("seq").map_err(unavailable)?;
            *after = (*after).max(seq);
            let replica: i32 = row.try_get("replica").map_err(unavailable)?;
            if Some(replica) == me {
                continue;
            }
            let json: serde_json::Value = row.try_get("body").map_err(unavailable)?;
            let Ok(Body { mut insight, admin }) = serde_json::from_value::<Body>(json) else {
                continue;
            };
            insight.admin = admin;
            let alive: bool = row.try_get("alive").map_err(unavailable)?;
            if insight.connected && !alive {
                // Its replica died with the stream open: the Envoy left it.
                insight.connected = false;
                insight.disconnect_time = row.try_get("at").map_err(unavailable)?;
            }
            let key = DpKey::new(
                row.try_get::<String, _>("mesh").map_err(unavailable)?,
                row.try_get::<String, _>("name").map_err(unavailable)?,
            );
            self.insights.adopt(&key, insight);
        }
        Ok(rows.len())
    }

    /// Read every row with a sequence above `*after`, page by page.
    async fn read_all(&self, after: &mut i64) -> Result<(), StoreError> {
        while self.read(after).await? == usize::try_from(PAGE).unwrap_or(usize::MAX) {}
        Ok(())
    }
}

/// Share insights until `stop`: write this replica's changes and read the others' every
/// [`POLL`] (sooner after a change here), the whole table every [`FULL_READ`]. Failures are
/// logged and retried on the next round.
pub async fn share(share: InsightShare, mut stop: watch::Receiver<bool>) {
    let mut changes = share.insights.subscribe();
    let mut written = HashMap::new();
    let mut after = 0_i64;
    // The first round reads everything.
    let mut full: Option<tokio::time::Instant> = None;
    loop {
        if let Err(e) = share.write(&mut written).await {
            tracing::warn!(error = %e, "cannot share this replica's proxy insights; retrying");
            // Written again whole once the database is back.
            written.clear();
        }
        // A sequence value taken before another may commit after it, so the incremental read
        // alone could miss a row; the full read also notices writers that died.
        let read = if full.is_none_or(|f| f.elapsed() >= FULL_READ) {
            full = Some(tokio::time::Instant::now());
            let mut from_start = 0;
            let read = share.read_all(&mut from_start).await;
            after = after.max(from_start);
            read
        } else {
            share.read_all(&mut after).await
        };
        if let Err(e) = read {
            tracing::warn!(error = %e, "cannot read the replicas' proxy insights");
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            () = tokio::time::sleep(POLL) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        // Coalesce a burst of stream events into one write.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
