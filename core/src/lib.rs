//! # umbra-core
//!
//! Umbra's pure core, shared by every binary: no async runtime, no IO.
//!
//! - [`codec`]: YAML/JSON bytes to documents, bounded against hostile input;
//! - [`resource`]: Kuma's universal resource envelope and the typed specs
//!   ([`mesh`], [`dataplane`], [`policies`], [`old`]);
//! - [`validate`]: `{field, message}` violations with Kuma's field paths;
//! - [`target_ref`]: `targetRef` and its validation;
//! - [`duration`]: Go/Kuma durations (`21s`, `2h`, `500ms`).

pub mod codec;
pub mod dataplane;
pub mod duration;
pub mod matching;
pub mod merge;
pub mod mesh;
pub mod old;
pub mod old_matching;
pub mod policies;
pub mod policy;
pub mod resource;
pub mod rules;
pub mod target_ref;
pub mod validate;
pub mod view;
