//! A parent naming its child by a bare path, the child naming its parent in a `super` group.
pub mod outer;
