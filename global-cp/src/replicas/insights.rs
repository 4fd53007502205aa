//! The insights zones report, shared by every Global replica through PostgreSQL (table
//! `zone_insights`, `migrations/20261127000002_zone_insights.sql`).
//!
//! The replica holding a zone's KDS stream writes what the zone sends ([`InsightMirror::write`],
//! in the same step as its in-memory registry, before the batch is acknowledged); every
//! replica mirrors the table into its own [`ZoneRegistry`] ([`InsightMirror::follow`]): new
//! rows by sequence every [`POLL`], and the whole table every [`FULL_READ`] (a sequence value
//! taken before another one may commit after it, so the incremental read alone could miss a
//! row). Zones this replica holds are skipped: their registry entries are the freshest. So any
//! replica answers a DPP's overview, and a zone that moves to another replica resumes its
//! insight stream with only what changed (the initial versions come from the mirror).
//! Removals are kept as rows without a body for [`FORGET_REMOVED`], so mirrors learn them.
//!
//! The same task publishes this replica's KDS subscription of each zone it has held (table
//! `zone_subscriptions`, `migrations/20261127000005_zone_subscriptions.sql`; Kuma's
//! `KDSSubscription` JSON, rewritten when it changes, at most every [`POLL`]), which
//! [`InsightMirror::subscriptions`] reads back, so any replica answers a zone's `ZoneOverview`
//! with every replica's subscription ([`crate::zone_overview::merge_subscriptions`]).
//! Subscriptions older than [`FORGET_SUBSCRIPTIONS`] are forgotten, except each zone's newest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Row;
use tokio::sync::watch;
use umbra_kds::resource::Item;

use crate::store::pg_rows::unavailable;
use crate::store::StoreError;
use crate::zone_overview::StoredSubscription;
use crate::zones::ZoneRegistry;

/// How often new rows are mirrored.
pub const POLL: Duration = Duration::from_secs(1);
/// How often the whole table is read again.
pub const FULL_READ: Duration = Duration::from_secs(15);
/// How long a removal is remembered.
const FORGET_REMOVED: &str = "1 hour";
/// How long a zone's subscription on a replica is remembered once newer ones exist.
pub const FORGET_SUBSCRIPTIONS: &str = "1 day";
/// Rows read per incremental query.
const PAGE: i64 = 5_000;

/// Zone insights in PostgreSQL, mirrored into this replica's registry.
#[derive(Debug)]
pub struct InsightMirror {
    pool: PgPool,
    zones: Arc<ZoneRegistry>,
}

impl InsightMirror {
    /// A mirror of the database at `url` into `zones`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub async fn connect(url: &str, zones: Arc<ZoneRegistry>) -> Result<Arc<Self>, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(unavailable)?;
        Ok(Arc::new(Self { pool, zones }))
    }

    /// Record what `zone` reported: `puts` (KDS name, insight) and `removes` (KDS names),
    /// durably before it returns.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`]; nothing is recorded then.
    pub async fn write(
        &self,
        zone: &str,
        puts: &[(String, Item)],
        removes: &[String],
    ) -> Result<(), StoreError> {
        if puts.is_empty() && removes.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        if !puts.is_empty() {
            let names: Vec<&str> = puts.iter().map(|(n, _)| n.as_str()).collect();
            let versions: Vec<&str> = puts.iter().map(|(_, i)| i.version.as_str()).collect();
            let bodies: Vec<&[u8]> = puts.iter().map(|(_, i)| i.body.as_slice()).collect();
            sqlx::query(
                "INSERT INTO zone_insights (zone, name, version, body)
                 SELECT $1, n, v, b FROM UNNEST($2::text[], $3::text[], $4::bytea[]) AS t(n, v, b)
                 ON CONFLICT (zone, name) DO UPDATE SET version = EXCLUDED.version,
                   body = EXCLUDED.body, seq = nextval('zone_insights_seq'), at = now()
                 WHERE zone_insights.version IS DISTINCT FROM EXCLUDED.version",
            )
            .bind(zone)
            .bind(&names)
            .bind(&versions)
            .bind(&bodies)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        }
        if !removes.is_empty() {
            sqlx::query(
                "UPDATE zone_insights SET version = NULL, body = NULL,
                   seq = nextval('zone_insights_seq'), at = now()
                 WHERE zone = $1 AND name = ANY($2) AND version IS NOT NULL",
            )
            .bind(zone)
            .bind(removes)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        }
        tx.commit().await.map_err(unavailable)
    }

    /// Write this replica's (`me`) subscription of each zone it has held that differs from
    /// what `written` says was last written (and record it there).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`]; `written` is unchanged then, so the next call retries.
    pub async fn publish_subscriptions(
        &self,
        me: &str,
        written: &mut HashMap<String, serde_json::Value>,
    ) -> Result<(), StoreError> {
        let changed: Vec<(String, serde_json::Value)> = self
            .zones
            .list()
            .iter()
            .filter_map(|z| {
                let sub = crate::zone_overview::subscription(z, me)?;
                (written.get(&z.name) != Some(&sub)).then(|| (z.name.clone(), sub))
            })
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let zones: Vec<&str> = changed.iter().map(|(z, _)| z.as_str()).collect();
        let subs: Vec<&serde_json::Value> = changed.iter().map(|(_, s)| s).collect();
        sqlx::query(
            "INSERT INTO zone_subscriptions (zone, replica, subscription)
             SELECT z, $1, s FROM UNNEST($2::text[], $3::jsonb[]) AS t(z, s)
             ON CONFLICT (zone, replica) DO UPDATE SET subscription = EXCLUDED.subscription,
               at = now()",
        )
        .bind(me)
        .bind(&zones)
        .bind(&subs)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        written.extend(changed);
        Ok(())
    }

    /// The subscriptions every replica recorded, of `zone` (every zone for `None`), by zone.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub async fn subscriptions(
        &self,
        zone: Option<&str>,
    ) -> Result<BTreeMap<String, Vec<StoredSubscription>>, StoreError> {
        let rows = sqlx::query(
            r#"SELECT zone, replica, subscription,
                 to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS at
               FROM zone_subscriptions WHERE $1::text IS NULL OR zone = $1"#,
        )
        .bind(zone)
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        let mut out: BTreeMap<String, Vec<StoredSubscription>> = BTreeMap::new();
        for row in rows {
            let zone: String = row.try_get("zone").map_err(unavailable)?;
            out.entry(zone).or_default().push(StoredSubscription {
                replica: row.try_get("replica").map_err(unavailable)?,
                subscription: row.try_get("subscription").map_err(unavailable)?,
                at: row.try_get("at").map_err(unavailable)?,
            });
        }
        Ok(out)
    }

    /// Mirror rows with a sequence above `after` (all of them for `None`) into the registry,
    /// skipping zones this replica holds. Returns the highest sequence seen.
    async fn mirror(&self, after: Option<i64>) -> Result<Option<i64>, StoreError> {
        let mut cursor = after;
        let mut last = after;
        loop {
            let rows = sqlx::query(
                "SELECT zone, name, version, body, seq FROM zone_insights
                 WHERE $1::bigint IS NULL OR seq > $1 ORDER BY seq LIMIT $2",
            )
            .bind(cursor)
            .bind(PAGE)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
            let full = rows.len() as i64 == PAGE;
            for row in rows {
                let zone: String = row.try_get("zone").map_err(unavailable)?;
                let name: String = row.try_get("name").map_err(unavailable)?;
                let seq: i64 = row.try_get("seq").map_err(unavailable)?;
                last = Some(last.map_or(seq, |l| l.max(seq)));
                cursor = Some(seq);
                if self.zones.get(&zone).is_some_and(|z| z.online) {
                    continue; // held here: the registry is the freshest
                }
                let version: Option<String> = row.try_get("version").map_err(unavailable)?;
                let body: Option<Vec<u8>> = row.try_get("body").map_err(unavailable)?;
                match (version, body) {
                    (Some(version), Some(body)) => {
                        self.zones.put_insight(
                            &zone,
                            &name,
                            Item {
                                version,
                                body,
                                trace_context: Default::default(),
                            },
                        );
                    }
                    _ => self.zones.remove_insight(&zone, &name),
                }
            }
            if !full {
                return Ok(last);
            }
        }
    }

    /// Keep the registry in step with the table and publish this replica's (`me`)
    /// subscriptions until `stop` turns `true`; the leader also forgets old removals and
    /// subscriptions. Errors are logged and retried at the next poll.
    pub async fn follow(
        self: Arc<Self>,
        me: String,
        leader: watch::Receiver<bool>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut seen: Option<i64> = None;
        let mut last_full = tokio::time::Instant::now();
        let mut first = true;
        let mut written = HashMap::new();
        loop {
            if let Err(e) = self.publish_subscriptions(&me, &mut written).await {
                tracing::warn!(error = %e, "cannot record this replica's zone subscriptions; retrying");
            }
            let full = first || last_full.elapsed() >= FULL_READ;
            let result = if full {
                self.mirror(None).await
            } else {
                self.mirror(seen).await
            };
            match result {
                Ok(s) => {
                    if full {
                        last_full = tokio::time::Instant::now();
                        first = false;
                    }
                    seen = s.max(seen);
                }
                Err(e) => tracing::warn!(error = %e, "cannot mirror the zones' insights; retrying"),
            }
            if full && *leader.borrow() {
                let forgot = sqlx::query(&format!(
                    "DELETE FROM zone_insights WHERE version IS NULL AND at < now() - interval '{FORGET_REMOVED}'"
                ))
                .execute(&self.pool)
                .await;
                if let Err(e) = forgot {
                    tracing::warn!(error = %e, "cannot forget removed insights");
                }
                let forgot = sqlx::query(&format!(
                    "DELETE FROM zone_subscriptions s
                     WHERE at < now() - interval '{FORGET_SUBSCRIPTIONS}'
                       AND EXISTS (SELECT 1 FROM zone_subscriptions n
                                   WHERE n.zone = s.zone AND n.at > s.at)"
                ))
                .execute(&self.pool)
                .await;
                if let Err(e) = forgot {
                    tracing::warn!(error = %e, "cannot forget old zone subscriptions");
                }
            }
            let stopped = tokio::select! {
                () = tokio::time::sleep(POLL) => false,
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                return;
            }
        }
    }
}
