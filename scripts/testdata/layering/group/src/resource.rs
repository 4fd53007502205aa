//! Names `policies::stored` through a group.
use crate::policies::{other::Other, stored::StoredPolicy};

pub enum ResourceType {
    Mesh,
}

pub fn f(_: StoredPolicy, _: Other) {}
