//! Parent of `stored` and `other`.
pub mod other;
pub mod stored;
