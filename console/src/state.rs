//! What the console's handlers share ([`Console`]: the API router it asks, the mode, the
//! parsed templates) and which CP serves it ([`Mode`]).

use std::sync::Arc;

use axum::Router;

/// Which CP serves the console: the Global has zones and the fleet-wide diff; a zone has
/// its own Dataplanes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The Global CP.
    Global,
    /// A (standalone or federated) zone CP.
    Zone,
}

/// What the console's handlers share: the API router it asks, the mode, the templates.
#[derive(Clone)]
pub struct Console {
    /// The CP's API router (already authenticated and layered), asked in-process.
    pub api: Router,
    /// Global or zone.
    pub mode: Mode,
    /// The parsed templates.
    pub templates: Arc<minijinja::Environment<'static>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}
