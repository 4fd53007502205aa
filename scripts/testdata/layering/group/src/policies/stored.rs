//! Names `resource`.
use crate::resource::ResourceType;

pub struct StoredPolicy(pub ResourceType);
