//! Rows of the PostgreSQL store and the conversions every query shares: a `resources` row as
//! [`Stored`], integers and timestamps between Rust and SQL, how a database failure is
//! reported ([`unavailable`]), and how every write ends ([`commit_head`]). A leaf: the store
//! ([`crate::store`]) and its group commit ([`crate::group_commit`]) both use it.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::{Postgres, Row, Transaction};
use tokio::sync::watch;
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_store::{resource_from_parts, StoreError, Stored};

/// NOTIFY channel for change wake-ups.
pub const CHANNEL: &str = "umbra_changes";

/// A database failure as the store reports it: unreachable, pool timeout, or a generic
/// "database error" (the detail is logged, never answered: no SQL reaches clients).
pub fn unavailable(e: sqlx::Error) -> StoreError {
    StoreError::Unavailable(match &e {
        sqlx::Error::PoolTimedOut => "timed out waiting for a database connection".to_owned(),
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::PoolClosed => {
            "the database cannot be reached".to_owned()
        }
        // Never leak SQL to clients: the detail goes to the log.
        _ => {
            tracing::warn!(error = %e, "database error");
            "database error".to_owned()
        }
    })
}

/// A database integer as a revision or version (negative: 0).
pub fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A revision or version as a database integer (saturating).
pub fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A timestamp as RFC 3339.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// An RFC 3339 timestamp (now when absent or unparsable).
pub fn parse_time(s: Option<&str>) -> time::OffsetDateTime {
    s.and_then(|s| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    })
    .unwrap_or_else(time::OffsetDateTime::now_utc)
}

/// A `resources` row (`SELECT *`) as a [`Stored`] resource.
///
/// # Errors
/// [`StoreError::Corrupt`] for an unknown type or labels and spec that do not decode;
/// [`StoreError::Unavailable`] for a missing column.
pub fn stored_from_row(row: &sqlx::postgres::PgRow) -> Result<Stored, StoreError> {
    let ty_name: String = row.try_get("type").map_err(unavailable)?;
    let mesh: String = row.try_get("mesh").map_err(unavailable)?;
    let name: String = row.try_get("name").map_err(unavailable)?;
    let corrupt = |reason: String| StoreError::Corrupt {
        key: ResourceKey {
            ty: ResourceType::Mesh,
            mesh: mesh.clone(),
            name: name.clone(),
        },
        reason,
    };
    let ty = ResourceType::from_name(&ty_name)
        .ok_or_else(|| corrupt(format!("unknown type {ty_name:?}")))?;
    let key = ResourceKey { ty, mesh, name };
    let spec: Value = row.try_get("spec").map_err(unavailable)?;
    let labels: Value = row.try_get("labels").map_err(unavailable)?;
    let labels: BTreeMap<String, String> =
        serde_json::from_value(labels).map_err(|e| StoreError::Corrupt {
            key: key.clone(),
            reason: format!("labels: {e}"),
        })?;
    let created: time::OffsetDateTime = row.try_get("creation_time").map_err(unavailable)?;
    let modified: time::OffsetDateTime = row.try_get("modification_time").map_err(unavailable)?;
    let resource = resource_from_parts(&key, spec, &labels, rfc3339(created), rfc3339(modified))?;
    Ok(Stored {
        resource,
        version: to_u64(row.try_get("version").map_err(unavailable)?),
        zone: row.try_get("zone").map_err(unavailable)?,
        revision: to_u64(row.try_get("revision").map_err(unavailable)?),
    })
}

/// End a write transaction that appended change rows up to revision `head` (holding the
/// `log_head` row lock): move the head, `pg_notify` the [`CHANNEL`] with it, commit, then wake
/// local subscribers through `wake`.
///
/// # Errors
/// [`StoreError::Unavailable`] when any step fails (then nothing of the transaction is
/// applied).
pub async fn commit_head(
    mut tx: Transaction<'_, Postgres>,
    head: i64,
    wake: &watch::Sender<u64>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE log_head SET revision = $1")
        .bind(head)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(head.to_string())
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    let head = to_u64(head);
    wake.send_if_modified(|r| (head > *r).then(|| *r = head).is_some());
    Ok(())
}
