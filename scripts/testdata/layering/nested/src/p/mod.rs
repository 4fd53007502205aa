//! Parent of `q` and `r`.
pub mod q;
pub mod r;
