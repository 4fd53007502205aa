//! Re-exports `Meta`.
pub use crate::meta::Meta;
