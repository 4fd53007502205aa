//! The Global CP's system of record: the store contract from [`umbra_store`] (re-exported, so
//! `store::Store`, `store::memory::MemoryStore` and the rest read the same from here) and the
//! production implementation on PostgreSQL ([`postgres`]). Both stores pass one suite
//! (`tests/store.rs`).

pub use umbra_store::*;

pub mod group_commit;
pub mod pg_rows;
pub mod postgres;
