//! A group under a prefix: `resource` names `policies::stored` as `policies::{stored::X, ..}`.
pub mod policies;
pub mod resource;
