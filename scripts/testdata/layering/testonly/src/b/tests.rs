//! Test code of `b`: names `a`.
use crate::a::a;
