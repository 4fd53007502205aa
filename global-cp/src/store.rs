//! The Global CP's system of record: the store contract from [`umbra_store`] (re-exported, so
//! `store::Store`, `store::memory::MemoryStore` and the rest read the same from here) and the
//! production implementation on PostgreSQL ([`postgres`], from [`umbra_postgres`], which the
//! zone CP's replicas use too). Both stores pass one suite (`tests/store.rs`).

pub use umbra_store::*;

pub use umbra_postgres::store as postgres;
pub use umbra_postgres::{group_commit, pg_rows};
