//! Global control plane: the system of record for Meshes and policies.
//!
//! This crate holds the resource [`store`] (one trait; PostgreSQL via sqlx, or memory) with
//! its change log, and [`testing`] support that runs a throwaway PostgreSQL server. The REST
//! API, the KDS server and inspect fan-out (issues 5 and 6) are still to come.

pub mod store;
pub mod testing;
