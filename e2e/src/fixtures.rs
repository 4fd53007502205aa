//! Resources many end-to-end tests start from: mesh `default` with mTLS, and the
//! MeshTrafficPermission that lets traffic through it.

/// Mesh `default` with mTLS on (the builtin CA `ca-1`) and no default policies.
pub const MTLS_MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n";
/// A MeshTrafficPermission allowing everything in mesh `default`: with mTLS, traffic needs a
/// permission (as in Kuma, nothing is allowed by default).
pub const ALLOW_ALL: &str = "type: MeshTrafficPermission\nmesh: default\nname: allow-all\nspec:\n  targetRef: {kind: Mesh}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {action: Allow}\n";
