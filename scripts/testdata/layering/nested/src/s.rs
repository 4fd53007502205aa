//! Names `p::q` inside a nested group.
use crate::{
    p::{q::Q, r},
    s as _,
};

pub struct S;

pub fn f(_: Q, _: r::R) {}
