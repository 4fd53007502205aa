//! # umbra-auth
//!
//! Who a caller is, from a token, with no IO (issue 15; Kuma 2.7's `pkg/core/tokens`,
//! `pkg/plugins/authn/api-server/tokens` and `pkg/xds/auth` are the reference):
//! - [`keys`]: Ed25519 signing keys (PKCS#8 in a store) and their public halves, named by a
//!   key ID derived from the public key;
//! - [`token`]: the token kinds the CPs issue, user tokens (a name and groups; the
//!   `mesh-system:admin` group is the admin) and dataplane tokens (bound to a mesh and a DPP
//!   name or tags), as JWTs (RFC 7519) signed with `EdDSA`, and zone-ingress tokens (bound
//!   to a zone);
//! - [`bundle`]: the [`bundle::TrustBundle`], every public key and revoked token ID, which is
//!   all a verifier needs (a federated zone receives it from the Global over KDS and can then
//!   verify, never issue);
//! - [`issuer`]: the private keys of the CP that issues tokens (the Global, or a standalone
//!   zone).
//!
//! Zone tokens (KDS) stay with the Global (`umbra_global_cp::tokens`): only it verifies them.

pub mod bundle;
pub mod issuer;
pub mod keys;
pub mod token;

pub use bundle::TrustBundle;
pub use issuer::Issuer;
pub use token::{DataplaneIdentity, Principal, TokenError, TokenKind, ZoneIngressIdentity};

/// Now, in seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
