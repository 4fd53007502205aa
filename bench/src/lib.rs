//! `umbra-bench`: the scale harness of issue 21. Synthetic meshes of N services, M Dataplanes
//! per zone, K zones and P policies of every implemented type (a share of them shadow), run on
//! real `global-cp` and `zone-cp` processes on loopback with simulated Envoys that subscribe,
//! decode and ACK over ADS; each scenario prints what it saw and returns rows of one table
//! (measured figure, target, verdict, published anchor, reproducing command). Bounded in time
//! (every wait has a limit) and writes nothing outside its temp dir.
//!
//! - [`mesh`]: the synthetic meshes and policies;
//! - [`measure`]: `/proc` readings, percentiles and the table;
//! - simulated Envoys: [`umbra_e2e::envoy_sim`] (shared with the in-process zone bench);
//! - [`cluster`]: starting the CPs (this binary re-executed as either) and their data dirs;
//! - [`scenarios`]: generation, fleet diff, propagation, footprint and reconnect storm.

pub mod cluster;
pub mod measure;
pub mod mesh;
pub mod scenarios;
