//! Names nothing.
pub struct R;
