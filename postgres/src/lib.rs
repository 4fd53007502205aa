//! # umbra-postgres
//!
//! What both control planes keep on PostgreSQL: the [`umbra_store::Store`] contract on it
//! ([`store::PostgresStore`], with its group commit and row decoding), and the coordination of
//! several replicas sharing one database ([`replicas`]: registration, liveness, leader
//! election, and the Global's per-zone KDS leases). The schema is `migrations/` at the
//! workspace root, one set for both roles: the Global's database and each zone's.

pub mod flags;
pub mod group_commit;
pub mod pg_rows;
pub mod replicas;
pub mod store;
