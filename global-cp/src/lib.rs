//! Global control plane: store, REST API, KDS server, fan-out (issues 5, 6).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
