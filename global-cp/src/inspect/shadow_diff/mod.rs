//! The fleet-wide shadow diff, `GET /meshes/{mesh}/_shadow-diff`: which DPPs' config would
//! change, and how, if the shadow policies (or one, `policy=`) went live.
//!
//! - [`query`]: the request's parameters;
//! - [`plan`]: narrows the work to DPPs whose dependencies differ between the two views;
//! - [`fan_out`]: asks every zone holding some concurrently, each with a deadline;
//! - [`aggregate`]: folds the answers as they stream in, keeping each operation once with the
//!   DPPs sharing it, so memory grows with distinct operations, not with the fleet;
//! - [`report`]: the shapes of the answer (per-zone tallies, totals, groups, lines);
//! - [`respond`]: drives the four and answers in JSON, or NDJSON as results arrive.
//!
//! A zone that is offline, late or failing is reported (the result is then `partial`), never
//! fatal.

pub mod aggregate;
pub mod fan_out;
pub mod plan;
pub mod query;
pub mod report;
pub mod respond;
