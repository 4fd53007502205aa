//! Names `s`.
pub struct Q(pub crate::s::S);
