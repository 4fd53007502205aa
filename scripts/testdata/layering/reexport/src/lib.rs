//! A re-export: `user` names `resource::Meta`, which `resource` re-exports from `meta`;
//! `meta` names `user`: a cycle through the defining module.
pub mod meta;
pub mod resource;
pub mod user;
