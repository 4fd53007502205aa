//! [`GenerateError`], the one error of snapshot generation, shared by every stage of the
//! pipeline. A leaf: it imports nothing from this crate.

/// Why a snapshot could not be generated. Names the policy and the resource involved, so the
/// caller can report it and keep serving the last good snapshot (seed 003).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// A policy could not be applied to a resource.
    #[error("{policy} cannot be applied to {resource}: {reason}")]
    Policy {
        /// `Type/name` of the policy (several, comma-separated, when a merged rule is at fault).
        policy: String,
        /// `typeUrl/name` of the resource (`*` when no single resource is concerned).
        resource: String,
        /// What went wrong.
        reason: String,
    },
    /// The typed configs of a generation could not be sealed ([`crate::draft`]): a bug, never
    /// the policies' fault. The snapshot is not served (the DPP keeps its last good config).
    #[error("internal error sealing {resource}: {reason}")]
    Seal {
        /// `typeUrl/name` of the resource holding the config.
        resource: String,
        /// What went wrong.
        reason: String,
    },
}
