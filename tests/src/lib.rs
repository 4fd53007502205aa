//! End-to-end harness: PostgreSQL, global-cp, zone-cps and real Envoy on loopback (issues 4-6).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
