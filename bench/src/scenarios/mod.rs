//! The harness's scenarios, one module each; every one returns its rows of the result table.

pub mod fleet_diff;
pub mod fleet_envoys;
pub mod generate;
pub mod propagation;
pub mod reconcile;
