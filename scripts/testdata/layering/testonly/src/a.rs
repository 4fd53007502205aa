//! Names `b`.
pub fn a() -> crate::b::B {
    crate::b::B
}
