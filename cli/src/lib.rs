//! umbractl: apply/get/delete/inspect (issue 7).
//!
//! Placeholder crate: the workspace layout of DESIGN.md; its content lands with the issue named above.
