//! Zone control plane: KDS client, reconciler, ADS server, inspect API (issue 4).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
