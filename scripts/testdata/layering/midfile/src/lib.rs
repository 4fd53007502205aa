//! A test module in the middle of `b`, then production code of `b` naming `a`: a cycle.
pub mod a;
pub mod b;
