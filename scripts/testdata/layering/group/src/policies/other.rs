//! Names nothing.
pub struct Other;
