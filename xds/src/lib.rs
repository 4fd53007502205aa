//! Envoy xDS generation (issue 3).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
