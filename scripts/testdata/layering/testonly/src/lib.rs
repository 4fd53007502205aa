//! Only test code of `b` names `a`: no cycle.
pub mod a;
pub mod b;
