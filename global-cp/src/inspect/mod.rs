//! The Global's inspect API, answered by the zones over KDS, split by job:
//!
//! - [`hub`]: reverse calls to zones over their own KDS connection (pending calls, deadlines,
//!   bounded queues);
//! - [`context`]: what every inspect answer reads (store, hub, zones) and the lookups they
//!   share (a DPP's zone, a mesh's policies, the mesh's Dataplanes page by page);
//! - [`forward`]: per-DPP `_config` and `_rules` (with `shadow=` and `include=diff`, seed 000)
//!   relayed from the zone that owns the DPP;
//! - [`affected`]: `GET /meshes/{mesh}/{plural}/{name}/_resources/dataplanes`, the DPPs whose
//!   config a policy can change;
//! - [`shadow_diff`]: the fleet-wide `GET /meshes/{mesh}/_shadow-diff`: query, plan, fan-out,
//!   aggregation and the report, JSON or streamed NDJSON;
//! - [`observed`]: `GET /meshes/{mesh}/{plural}/{name}/_observed`, an observed shadow
//!   policy's evidence from the Envoys of every zone (issue 40);
//! - [`answer_cache`]: fleet diff answers kept for the same question, revalidated with the
//!   zones before use.

pub mod affected;
pub mod answer_cache;
pub mod context;
pub mod forward;
pub mod hub;
pub mod observed;
pub mod shadow_diff;
