//! KDS and inspect gRPC definitions (issue 5).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
