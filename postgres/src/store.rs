//! The PostgreSQL [`Store`] (sqlx). Schema: `migrations/` at the workspace root, applied by
//! [`PostgresStore::connect`]; a database migrated by a newer Umbra is refused.
//!
//! Every write runs in one transaction that first locks the single `log_head` row, so change
//! revisions are consecutive and in commit order (no reader can see revision `r + 1` and later
//! find `r`). A write either commits whole (resource row, change-log rows, `log_head`) or not
//! at all. After commit, `pg_notify('umbra_changes', revision)` wakes listeners; a background
//! task LISTENs (reconnecting with backoff) and feeds [`Store::subscribe`], and also polls
//! the head every [`POLL`] so a lost notification only delays a wake-up.
//!
//! Keys (`signing_keys`: signing keys, revocation lists, migration plans) are outside the
//! change log. Replicas of the Global sharing the database update them with
//! [`Store::swap_key`], one conditional statement (`UPDATE ... WHERE key = expected`, or
//! `INSERT ... ON CONFLICT DO NOTHING` for an absent key), so no update is lost.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};
use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

use umbra_store::{
    check_expected, check_unused, mesh_key, query_mesh, spec_of, stamp_times, unchanged, Change,
    GatewayFilter, ListQuery, Op, Page, Store, StoreError, Stored, Transacted, Write, MAX_PAGE,
    MESH_USERS,
};

/// The migrations this build knows (embedded at compile time).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

use crate::group_commit::GroupCommit;
pub use crate::pg_rows::CHANNEL;
use crate::pg_rows::{commit_head, parse_time, stored_from_row, to_i64, to_u64, unavailable};

/// Fallback poll of the change-log head while LISTEN is down or a notification is lost.
pub const POLL: Duration = Duration::from_secs(1);

/// Why the store cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The database cannot be reached.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(String),
    /// The database holds migrations this build does not know.
    #[error("the database schema is at migration {found}, newer than this global-cp knows (up to {known}); run a global-cp at least as new as the one that migrated it")]
    TooNew {
        /// Newest migration applied in the database.
        found: i64,
        /// Newest migration this build has.
        known: i64,
    },
    /// Applying migrations failed.
    #[error("migrating the database failed: {0}")]
    Migrate(String),
}

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    wake: watch::Sender<u64>,
    /// Single-resource puts, committed in groups ([`crate::group_commit`]).
    group: GroupCommit,
}

impl PostgresStore {
    /// Connect (pool of `max_connections`), check the schema version and apply pending
    /// migrations, and start the change listener.
    ///
    /// # Errors
    /// [`ConnectError`]: unreachable database, schema newer than this build, failed migration.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, ConnectError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(|e| ConnectError::Connect(e.to_string()))?;
        Self::check_not_newer(&pool).await?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| ConnectError::Migrate(e.to_string()))?;
        let wake = watch::channel(0).0;
        let store = Self {
            group: GroupCommit::start(pool.clone(), wake.clone()),
            pool,
            wake,
        };
        if let Ok(r) = store.revision().await {
            store.wake.send_replace(r);
        }
        tokio::spawn(tracing::Instrument::instrument(
            listen(store.pool.clone(), url.to_owned(), store.wake.clone()),
            tracing::info_span!("store.listen"),
        ));
        Ok(store)
    }

    async fn check_not_newer(pool: &PgPool) -> Result<(), ConnectError> {
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(pool)
            .await
            .map_err(|e| ConnectError::Connect(e.to_string()))?;
        if !exists {
            return Ok(());
        }
        let found: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .map_err(|e| ConnectError::Connect(e.to_string()))?;
        match found {
            Some(found) if found > known => Err(ConnectError::TooNew { found, known }),
            _ => Ok(()),
        }
    }

    /// The connection pool (for tests and health checks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The version of `key` in `tx`, if it exists.
    async fn version_in(
        tx: &mut Transaction<'_, Postgres>,
        key: &ResourceKey,
    ) -> Result<Option<u64>, StoreError> {
        sqlx::query_scalar::<_, i64>(
            "SELECT version FROM resources WHERE type = $1 AND mesh = $2 AND name = $3",
        )
        .bind(key.ty.name())
        .bind(&key.mesh)
        .bind(&key.name)
        .fetch_optional(&mut **tx)
        .await
        .map(|v| v.map(to_u64))
        .map_err(unavailable)
    }

    /// `key` as stored in `tx`, if it exists.
    async fn stored_in(
        tx: &mut Transaction<'_, Postgres>,
        key: &ResourceKey,
    ) -> Result<Option<Stored>, StoreError> {
        sqlx::query("SELECT * FROM resources WHERE type = $1 AND mesh = $2 AND name = $3")
            .bind(key.ty.name())
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&mut **tx)
            .await
            .map_err(unavailable)?
            .map(|row| stored_from_row(&row))
            .transpose()
    }

    /// [`Write::MeshUnchanged`] in `tx` (under the log head's lock): no change to `mesh` logged
    /// after `since`.
    async fn check_unchanged(
        tx: &mut Transaction<'_, Postgres>,
        mesh: &str,
        since: u64,
    ) -> Result<(), StoreError> {
        let row = sqlx::query(
            "SELECT revision, type, mesh, name FROM changes WHERE revision > $1
               AND ((type = 'Mesh' AND name = $2)
                 OR (mesh = $2 AND type NOT IN ('Mesh', 'Dataplane', 'ZoneIngress')))
             ORDER BY revision LIMIT 1",
        )
        .bind(to_i64(since))
        .bind(mesh)
        .fetch_optional(&mut **tx)
        .await
        .map_err(unavailable)?;
        let Some(row) = row else {
            return Ok(());
        };
        let ty: String = row.try_get("type").map_err(unavailable)?;
        let key = ResourceKey {
            ty: ResourceType::from_name(&ty).unwrap_or(ResourceType::Mesh),
            mesh: row.try_get("mesh").map_err(unavailable)?,
            name: row.try_get("name").map_err(unavailable)?,
        };
        Err(StoreError::Changed {
            mesh: mesh.to_owned(),
            since,
            key,
            revision: to_u64(row.try_get("revision").map_err(unavailable)?),
        })
    }

    /// Lock the log head; returns the current revision.
    async fn lock_head(tx: &mut Transaction<'_, Postgres>) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT revision FROM log_head FOR UPDATE")
            .fetch_one(&mut **tx)
            .await
            .map_err(unavailable)
    }

    async fn log(
        tx: &mut Transaction<'_, Postgres>,
        revision: i64,
        key: &ResourceKey,
        op: Op,
        version: u64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO changes (revision, type, mesh, name, op, version) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(revision)
        .bind(key.ty.name())
        .bind(&key.mesh)
        .bind(&key.name)
        .bind(match op {
            Op::Put => "put",
            Op::Delete => "delete",
        })
        .bind(to_i64(version))
        .execute(&mut **tx)
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    /// Insert or replace `resource`'s row at `version` and log it under `revision`.
    async fn write_row(
        tx: &mut Transaction<'_, Postgres>,
        resource: &Resource,
        version: u64,
        zone: Option<&str>,
        revision: i64,
    ) -> Result<(), StoreError> {
        let key = resource.key();
        let labels = serde_json::to_value(&resource.meta.labels).unwrap_or_default();
        sqlx::query(
            "INSERT INTO resources (type, mesh, name, version, spec, labels, zone, creation_time, modification_time, revision)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (type, mesh, name) DO UPDATE SET version = EXCLUDED.version, spec = EXCLUDED.spec,
               labels = EXCLUDED.labels, zone = EXCLUDED.zone, modification_time = EXCLUDED.modification_time,
               revision = EXCLUDED.revision",
        )
        .bind(key.ty.name())
        .bind(&key.mesh)
        .bind(&key.name)
        .bind(to_i64(version))
        .bind(spec_of(resource))
        .bind(labels)
        .bind(zone)
        .bind(parse_time(resource.meta.creation_time.as_deref()))
        .bind(parse_time(resource.meta.modification_time.as_deref()))
        .bind(revision)
        .execute(&mut **tx)
        .await
        .map_err(unavailable)?;
        Self::log(tx, revision, &key, Op::Put, version).await
    }
}

/// LISTEN for change notifications (and poll as a fallback), feeding `wake` with the newest
/// revision. Ends when the pool is closed.
async fn listen(pool: PgPool, url: String, wake: watch::Sender<u64>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if pool.is_closed() {
            return;
        }
        let mut listener = match PgListener::connect(&url).await {
            Ok(mut l) => match l.listen(CHANNEL).await {
                Ok(()) => {
                    backoff = Duration::from_millis(100);
                    Some(l)
                }
                Err(_) => None,
            },
            Err(_) => None,
        };
        loop {
            if pool.is_closed() {
                return;
            }
            let notified = match listener.as_mut() {
                Some(l) => match tokio::time::timeout(POLL, l.recv()).await {
                    Ok(Ok(n)) => n.payload().parse::<u64>().ok(),
                    Ok(Err(_)) => {
                        listener = None;
                        None
                    }
                    Err(_) => None,
                },
                None => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    None
                }
            };
            let head = match notified {
                Some(r) => Some(r),
                None => sqlx::query_scalar::<_, i64>("SELECT revision FROM log_head")
                    .fetch_one(&pool)
                    .await
                    .ok()
                    .map(to_u64),
            };
            if let Some(head) = head {
                wake.send_if_modified(|r| (head > *r).then(|| *r = head).is_some());
            }
            if listener.is_none() {
                break; // reconnect the listener
            }
        }
    }
}

/// The `WHERE` of a list: `$1` type, `$2` mesh (NULL: every mesh), `$3` labels (`@>`), `$4`
/// name substring (NULL: any), and the Dataplane filter ([`umbra_store::DataplaneFilter`],
/// the same rules as the memory store): `$5` tags (Kuma's `MatchTagsFuzzy`: the gateway's tags
/// on a gateway, else some inbound's, contain every value), `$6` gateway kind (NULL, `any`,
/// `none`, `builtin`, `delegated`), `$7` whether any Dataplane filter is given (then only
/// Dataplanes match, and ExternalServices whose `tags` contain every `$5` value when no gateway
/// kind is asked for).
const LIST_WHERE: &str = "WHERE type = $1 AND ($2::text IS NULL OR mesh = $2) AND labels @> $3
    AND ($4::text IS NULL OR strpos(name, $4) > 0)
    AND (NOT $7::bool OR (type = 'Dataplane'
      AND ($5::jsonb = '{}'::jsonb OR CASE WHEN jsonb_typeof(spec->'networking'->'gateway') = 'object'
        THEN NOT EXISTS (SELECT 1 FROM jsonb_each_text($5::jsonb) f
          WHERE COALESCE(strpos(spec->'networking'->'gateway'->'tags'->>f.key, f.value), 0) = 0)
        ELSE EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(spec->'networking'->'inbound') = 'array'
            THEN spec->'networking'->'inbound' ELSE '[]'::jsonb END) i
          WHERE NOT EXISTS (SELECT 1 FROM jsonb_each_text($5::jsonb) f
            WHERE COALESCE(strpos(i->'tags'->>f.key, f.value), 0) = 0)) END)
      AND ($6::text IS NULL OR CASE $6::text
        WHEN 'any' THEN jsonb_typeof(spec->'networking'->'gateway') = 'object'
        WHEN 'none' THEN jsonb_typeof(spec->'networking'->'gateway') IS DISTINCT FROM 'object'
        WHEN 'builtin' THEN jsonb_typeof(spec->'networking'->'gateway') = 'object'
          AND spec->'networking'->'gateway'->>'type' = 'BUILTIN'
        ELSE jsonb_typeof(spec->'networking'->'gateway') = 'object'
          AND COALESCE(spec->'networking'->'gateway'->>'type', 'DELEGATED') = 'DELEGATED' END))
      OR (type = 'ExternalService' AND $6::text IS NULL AND NOT EXISTS (SELECT 1 FROM jsonb_each_text($5::jsonb) f
          WHERE COALESCE(strpos(spec->'tags'->>f.key, f.value), 0) = 0)))";

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn put(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError> {
        self.group
            .put(resource, expected, zone.map(str::to_owned))
            .await
    }

    async fn put_creating(
        &self,
        mut resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
        companions: Vec<Resource>,
    ) -> Result<(Stored, bool), StoreError> {
        let key = resource.key();
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let head = Self::lock_head(&mut tx).await?;
        if key.ty.is_mesh_scoped()
            && Self::version_in(&mut tx, &mesh_key(&key.mesh))
                .await?
                .is_none()
        {
            return Err(StoreError::NoMesh(key.mesh));
        }
        let existing = Self::stored_in(&mut tx, &key).await?;
        let current = existing.as_ref().map_or(0, |s| s.version);
        check_expected(&key, expected, current)?;
        if let Some(e) = existing.as_ref().filter(|e| unchanged(e, &resource, zone)) {
            return Ok((e.clone(), false));
        }
        stamp_times(&mut resource, existing.as_ref());
        let version = current + 1;
        let revision = head + 1;
        Self::write_row(&mut tx, &resource, version, zone, revision).await?;
        let mut last = revision;
        if current == 0 {
            for mut c in companions {
                if Self::version_in(&mut tx, &c.key()).await?.is_some() {
                    continue;
                }
                stamp_times(&mut c, None);
                last += 1;
                Self::write_row(&mut tx, &c, 1, zone, last).await?;
            }
        }
        commit_head(tx, last, &self.wake).await?;
        Ok((
            Stored {
                resource,
                version,
                zone: zone.map(str::to_owned),
                revision: to_u64(revision),
            },
            current == 0,
        ))
    }

    async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let mut head = Self::lock_head(&mut tx).await?;
        let Some(current) = Self::version_in(&mut tx, key).await? else {
            return Err(StoreError::NotFound(key.clone()));
        };
        check_expected(key, expected, current)?;
        if key.ty == ResourceType::Mesh {
            // Under the log head's lock no Dataplane can arrive between this check and the
            // deletion.
            let users: Vec<&str> = MESH_USERS.iter().map(|t| t.name()).collect();
            let attached = sqlx::query(
                "SELECT type, name FROM resources WHERE mesh = $1 AND type = ANY($2) ORDER BY type, name LIMIT 1000",
            )
            .bind(&key.name)
            .bind(&users)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
            let attached: Vec<ResourceKey> = attached
                .iter()
                .filter_map(|row| {
                    Some(ResourceKey {
                        ty: ResourceType::from_name(
                            row.try_get::<String, _>("type").ok()?.as_str(),
                        )?,
                        mesh: key.name.clone(),
                        name: row.try_get("name").ok()?,
                    })
                })
                .collect();
            check_unused(&key.name, &attached)?;
            let owned = sqlx::query(
                "DELETE FROM resources WHERE mesh = $1 AND type <> 'Mesh' RETURNING type, mesh, name, version",
            )
            .bind(&key.name)
            .fetch_all(&mut *tx)
            .await
            .map_err(unavailable)?;
            let mut owned: Vec<(ResourceKey, u64)> = owned
                .iter()
                .filter_map(|row| {
                    let ty =
                        ResourceType::from_name(row.try_get::<String, _>("type").ok()?.as_str())?;
                    Some((
                        ResourceKey {
                            ty,
                            mesh: row.try_get("mesh").ok()?,
                            name: row.try_get("name").ok()?,
                        },
                        to_u64(row.try_get("version").ok()?),
                    ))
                })
                .collect();
            owned.sort();
            for (k, v) in owned {
                head += 1;
                Self::log(&mut tx, head, &k, Op::Delete, v).await?;
            }
        }
        sqlx::query("DELETE FROM resources WHERE type = $1 AND mesh = $2 AND name = $3")
            .bind(key.ty.name())
            .bind(&key.mesh)
            .bind(&key.name)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        head += 1;
        Self::log(&mut tx, head, key, Op::Delete, current).await?;
        commit_head(tx, head, &self.wake).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<Transacted, StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let mut head = Self::lock_head(&mut tx).await?;
        let first = head;
        // Under the log head's lock no other writer runs: read, check, then write.
        let mut known: BTreeMap<ResourceKey, Option<Stored>> = BTreeMap::new();
        for w in &writes {
            if let Write::MeshUnchanged { mesh, since } = w {
                Self::check_unchanged(&mut tx, mesh, *since).await?;
                continue;
            }
            let key = w.key();
            if key.ty == ResourceType::Mesh && matches!(w, Write::Delete { .. }) {
                return Err(umbra_store::mesh_delete_in_transaction(&key));
            }
            if known.contains_key(&key) {
                continue;
            }
            let row = Self::stored_in(&mut tx, &key).await?;
            known.insert(key, row);
        }
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            let key = w.key();
            let existing = known.get(&key).cloned().flatten();
            let current = existing.as_ref().map_or(0, |s| s.version);
            match w {
                Write::Put { resource, expected } => {
                    let mut resource = *resource;
                    check_expected(&key, expected, current)?;
                    if key.ty.is_mesh_scoped() {
                        let mk = mesh_key(&key.mesh);
                        let in_batch = known.get(&mk).is_some_and(Option::is_some);
                        let exists = in_batch || Self::version_in(&mut tx, &mk).await?.is_some();
                        if !exists {
                            return Err(StoreError::NoMesh(key.mesh));
                        }
                    }
                    if let Some(e) = existing.as_ref().filter(|e| unchanged(e, &resource, None)) {
                        out.push(Some(e.clone()));
                        continue;
                    }
                    stamp_times(&mut resource, existing.as_ref());
                    head += 1;
                    let version = current + 1;
                    Self::write_row(&mut tx, &resource, version, None, head).await?;
                    let stored = Stored {
                        resource,
                        version,
                        zone: None,
                        revision: to_u64(head),
                    };
                    known.insert(key, Some(stored.clone()));
                    out.push(Some(stored));
                }
                Write::Delete { expected, .. } => {
                    if current == 0 {
                        return Err(StoreError::NotFound(key));
                    }
                    check_expected(&key, expected, current)?;
                    sqlx::query(
                        "DELETE FROM resources WHERE type = $1 AND mesh = $2 AND name = $3",
                    )
                    .bind(key.ty.name())
                    .bind(&key.mesh)
                    .bind(&key.name)
                    .execute(&mut *tx)
                    .await
                    .map_err(unavailable)?;
                    head += 1;
                    Self::log(&mut tx, head, &key, Op::Delete, current).await?;
                    known.insert(key, None);
                    out.push(None);
                }
                Write::MeshUnchanged { .. } => out.push(None),
            }
        }
        let done = Transacted {
            revision: to_u64(head),
            stored: out,
        };
        if head == first {
            // Nothing changed: nothing to commit or announce.
            return Ok(done);
        }
        commit_head(tx, head, &self.wake).await?;
        Ok(done)
    }

    async fn get_key(&self, purpose: &str) -> Result<Option<Vec<u8>>, StoreError> {
        sqlx::query_scalar::<_, Vec<u8>>("SELECT key FROM signing_keys WHERE name = $1")
            .bind(purpose)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError> {
        sqlx::query("SELECT * FROM resources WHERE type = $1 AND mesh = $2 AND name = $3")
            .bind(key.ty.name())
            .bind(&key.mesh)
            .bind(&key.name)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?
            .map(|row| stored_from_row(&row))
            .transpose()
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let mesh = query_mesh(query);
        let labels = serde_json::to_value(&query.labels).unwrap_or_default();
        let tags = serde_json::to_value(&query.dataplane.tags).unwrap_or_default();
        let gateway = query.dataplane.gateway.map(|g| match g {
            GatewayFilter::Any => "any",
            GatewayFilter::None => "none",
            GatewayFilter::Builtin => "builtin",
            GatewayFilter::Delegated => "delegated",
        });
        let size = query.size.clamp(1, MAX_PAGE);
        let total: i64 =
            sqlx::query_scalar(&format!("SELECT count(*) FROM resources {LIST_WHERE}"))
                .bind(query.ty.name())
                .bind(&mesh)
                .bind(&labels)
                .bind(&query.name_contains)
                .bind(&tags)
                .bind(gateway)
                .bind(!query.dataplane.is_empty())
                .fetch_one(&self.pool)
                .await
                .map_err(unavailable)?;
        let rows = sqlx::query(&format!(
            "SELECT * FROM resources {LIST_WHERE} ORDER BY mesh, name LIMIT $8 OFFSET $9"
        ))
        .bind(query.ty.name())
        .bind(&mesh)
        .bind(&labels)
        .bind(&query.name_contains)
        .bind(&tags)
        .bind(gateway)
        .bind(!query.dataplane.is_empty())
        .bind(to_i64(size))
        .bind(to_i64(query.offset))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        let items = rows
            .iter()
            .map(stored_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let total = to_u64(total);
        Ok(Page::new(items, query.offset, total))
    }

    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        let rows = sqlx::query(
            "SELECT revision, type, mesh, name, op, version FROM changes WHERE revision > $1 ORDER BY revision LIMIT $2",
        )
        .bind(to_i64(revision))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(unavailable)?;
        rows.iter()
            .map(|row| {
                let ty: String = row.try_get("type").map_err(unavailable)?;
                let mesh: String = row.try_get("mesh").map_err(unavailable)?;
                let name: String = row.try_get("name").map_err(unavailable)?;
                let ty = ResourceType::from_name(&ty).ok_or_else(|| StoreError::Corrupt {
                    key: mesh_key(&mesh),
                    reason: format!("change log names unknown type {ty:?}"),
                })?;
                let op: String = row.try_get("op").map_err(unavailable)?;
                Ok(Change {
                    revision: to_u64(row.try_get("revision").map_err(unavailable)?),
                    key: ResourceKey { ty, mesh, name },
                    op: if op == "delete" { Op::Delete } else { Op::Put },
                    version: to_u64(row.try_get("version").map_err(unavailable)?),
                })
            })
            .collect()
    }

    async fn revision(&self) -> Result<u64, StoreError> {
        sqlx::query_scalar::<_, i64>("SELECT revision FROM log_head")
            .fetch_one(&self.pool)
            .await
            .map(to_u64)
            .map_err(unavailable)
    }

    async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        sqlx::query(
            "INSERT INTO signing_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(purpose)
        .bind(fresh)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        sqlx::query_scalar::<_, Vec<u8>>("SELECT key FROM signing_keys WHERE name = $1")
            .bind(purpose)
            .fetch_one(&self.pool)
            .await
            .map_err(unavailable)
    }

    async fn set_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO signing_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET key = EXCLUDED.key",
        )
        .bind(purpose)
        .bind(value)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    async fn swap_key(
        &self,
        purpose: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        // One statement each: a concurrent writer's row lock makes this one wait, then the
        // condition is checked again against what that writer committed.
        let done = match expected {
            None => sqlx::query(
                "INSERT INTO signing_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(purpose)
            .bind(value),
            Some(expected) => {
                sqlx::query("UPDATE signing_keys SET key = $3 WHERE name = $1 AND key = $2")
                    .bind(purpose)
                    .bind(expected)
                    .bind(value)
            }
        }
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() == 1)
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }
}
