//! A nested use group: `s` names `p::q`, which names `s`.
pub mod p;
pub mod s;
