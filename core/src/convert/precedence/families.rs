//! The old families whose precedence the pass reproduces ([`FAMILIES`]), the type each converts
//! to, and how Kuma picks the policy of each ([`Scope`]). Shared by the other submodules.

use crate::resource::ResourceType;

/// How Kuma picks the policy of an old family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One policy per proxy and outbound service (`SelectConnectionPolicies`); the new policy's
    /// `to` items carry the conf.
    Outbound,
    /// One policy per proxy (`SelectDataplanePolicy`); the new policy's top-level `default`
    /// carries the conf.
    Dataplane,
}

/// An old family whose precedence the pass reproduces, and the type it converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The old type.
    pub old: ResourceType,
    /// The new type its outputs have.
    pub new: ResourceType,
    /// How Kuma picks the old policy.
    pub scope: Scope,
}

/// The families the pass applies to (see the module doc for the others).
pub const FAMILIES: &[Family] = &[
    Family {
        old: ResourceType::Timeout,
        new: ResourceType::MeshTimeout,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::CircuitBreaker,
        new: ResourceType::MeshCircuitBreaker,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::Retry,
        new: ResourceType::MeshRetry,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::HealthCheck,
        new: ResourceType::MeshHealthCheck,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::TrafficLog,
        new: ResourceType::MeshAccessLog,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::TrafficTrace,
        new: ResourceType::MeshTrace,
        scope: Scope::Dataplane,
    },
];

/// The family of an old type, when the pass applies to it.
pub fn family(old: ResourceType) -> Option<Family> {
    FAMILIES.iter().copied().find(|f| f.old == old)
}
