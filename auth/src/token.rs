//! The token kinds and their claims, and how a token is checked: signature (`EdDSA`, the key
//! named by the header's `kid`), kind, expiry (with [`LEEWAY_SECS`] of clock skew) and
//! revocation (by `jti`).
//!
//! - A **user token** (`kind: user`) names a user and its groups; every valid user token also
//!   carries [`AUTHENTICATED_GROUP`], and [`ADMIN_GROUP`] makes the admin (Kuma's groups).
//! - A **dataplane token** (`kind: dataplane`) is bound to a mesh and, optionally, a DPP name,
//!   tags (a DPP must carry, for each tag of the token, only values the token allows) and a
//!   proxy type (Kuma's `pkg/tokens/builtin/issuer`, `pkg/xds/auth/universal`).
//! - A **zone-ingress token** (`kind: zone-ingress`) is bound to a zone and a scope: it lets a
//!   ZoneIngress (scope `ingress`) or a ZoneEgress (scope `egress`) of that zone open its ADS
//!   stream (Kuma's `zone-ingress` token, `POST /tokens/zone-ingress`, with the `scope` of
//!   Kuma 2.7's zone token, `pkg/tokens/builtin/zone/scope.go`; a token without `scope`, issued
//!   before scopes, admits ingresses only). It is signed with the user-token key; the signed
//!   `kind` claim keeps the two kinds apart.

use std::collections::{BTreeMap, BTreeSet};

use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::keys::{PublicKey, SigningKey};

/// Clock skew tolerated on a token's expiry (seconds).
pub const LEEWAY_SECS: u64 = 5;

/// Group of the admin (Kuma's `mesh-system:admin`).
pub const ADMIN_GROUP: &str = "mesh-system:admin";

/// Group every authenticated user is in (Kuma's `mesh-system:authenticated`).
pub const AUTHENTICATED_GROUP: &str = "mesh-system:authenticated";

/// Name of the admin user (the admin token's and a loopback caller's when loopback is admin).
pub const ADMIN_USER: &str = "mesh-system:admin";

/// Longest validity a token may ask for (10 years, in seconds).
pub const MAX_VALIDITY_SECS: u64 = 10 * 365 * 24 * 3600;

/// Which kind of token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    /// A user of the API.
    User,
    /// A DPP on ADS.
    Dataplane,
    /// A ZoneIngress on ADS.
    #[serde(rename = "zone-ingress")]
    ZoneIngress,
}

impl TokenKind {
    /// `user`, `dataplane` or `zone-ingress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Dataplane => "dataplane",
            Self::ZoneIngress => "zone-ingress",
        }
    }
}

/// Why a token was refused. Messages never contain the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Malformed, signed by an unknown key, forged, or of another kind.
    #[error("invalid {kind} token: {reason}")]
    Invalid {
        /// `user` or `dataplane`.
        kind: &'static str,
        /// Why.
        reason: String,
    },
    /// Past its `exp` plus the leeway.
    #[error("the {kind} token expired {ago} s ago")]
    Expired {
        /// `user` or `dataplane`.
        kind: &'static str,
        /// Seconds since `exp`.
        ago: u64,
    },
    /// Its ID is on the revocation list.
    #[error("the {kind} token was revoked (id {id})")]
    Revoked {
        /// `user` or `dataplane`.
        kind: &'static str,
        /// The token's `jti`.
        id: String,
    },
    /// Cannot be issued as asked.
    #[error("{field}: {reason}")]
    BadRequest {
        /// Request field (`name`, `groups`, `mesh`, `tags`, `type`, `validFor`).
        field: &'static str,
        /// Why.
        reason: String,
    },
}

/// Claims of a user token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserClaims {
    /// Always [`TokenKind::User`].
    pub kind: TokenKind,
    /// User name.
    pub name: String,
    /// Groups (without the implicit [`AUTHENTICATED_GROUP`]).
    #[serde(default)]
    pub groups: Vec<String>,
    /// Issued at (seconds since the Unix epoch).
    pub iat: u64,
    /// Expires at (seconds since the Unix epoch).
    pub exp: u64,
    /// Token ID (24 hex digits), what a revocation names.
    pub jti: String,
}

/// Claims of a dataplane token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataplaneClaims {
    /// Always [`TokenKind::Dataplane`].
    pub kind: TokenKind,
    /// The mesh.
    pub mesh: String,
    /// The DPP name; empty: any DPP of the mesh that matches the tags.
    #[serde(default)]
    pub name: String,
    /// Tag → allowed values.
    #[serde(default)]
    pub tags: BTreeMap<String, BTreeSet<String>>,
    /// Proxy type (`dataplane`, `ingress`, `egress`).
    #[serde(rename = "type", default = "default_proxy_type")]
    pub proxy_type: String,
    /// Issued at (seconds since the Unix epoch).
    pub iat: u64,
    /// Expires at (seconds since the Unix epoch).
    pub exp: u64,
    /// Token ID (24 hex digits).
    pub jti: String,
}

/// Claims of a zone-ingress token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneIngressClaims {
    /// Always [`TokenKind::ZoneIngress`].
    pub kind: TokenKind,
    /// The zone whose ingresses the token admits.
    pub zone: String,
    /// Which zone proxies it admits (Kuma's zone-token scope: [`INGRESS_SCOPE`],
    /// [`EGRESS_SCOPE`]); [`INGRESS_SCOPE`] alone when the claim is absent.
    #[serde(default = "ingress_only")]
    pub scope: Vec<String>,
    /// Issued at (seconds since the Unix epoch).
    pub iat: u64,
    /// Expires at (seconds since the Unix epoch).
    pub exp: u64,
    /// Token ID (24 hex digits).
    pub jti: String,
}

/// Kuma's zone-token scope admitting ZoneIngresses.
pub const INGRESS_SCOPE: &str = "ingress";

/// Kuma's zone-token scope admitting ZoneEgresses.
pub const EGRESS_SCOPE: &str = "egress";

/// The scope of a zone-ingress token issued before scopes, or asked for without one.
pub fn ingress_only() -> Vec<String> {
    vec![INGRESS_SCOPE.to_owned()]
}

/// What a valid zone-ingress token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneIngressIdentity {
    /// The claims.
    pub claims: ZoneIngressClaims,
}

impl ZoneIngressIdentity {
    /// Check that this token admits a ZoneIngress of `zone` (scope [`INGRESS_SCOPE`]).
    ///
    /// # Errors
    /// Why not (never the token).
    pub fn authorizes(&self, zone: &str) -> Result<(), String> {
        self.authorizes_scope(zone, INGRESS_SCOPE)
    }

    /// Check that this token admits a zone proxy of `scope` ([`INGRESS_SCOPE`] or
    /// [`EGRESS_SCOPE`]) of `zone`, as Kuma's `authZoneEntity` does
    /// (`pkg/xds/auth/universal/authenticator.go`): the scope first, then the zone.
    ///
    /// # Errors
    /// Why not (never the token), in Kuma's words for the scope.
    pub fn authorizes_scope(&self, zone: &str, scope: &str) -> Result<(), String> {
        if !self.claims.scope.iter().any(|s| s == scope) {
            return Err(format!(
                "token cannot be used to authenticate zone entity ({scope} is out of token's scope: {:?})",
                self.claims.scope
            ));
        }
        if self.claims.zone == zone {
            Ok(())
        } else {
            Err(format!(
                "the token is for the zone proxies of zone {:?}, not {zone:?}",
                self.claims.zone
            ))
        }
    }
}

fn default_proxy_type() -> String {
    "dataplane".into()
}

/// Who a valid user token (or the loopback rule) says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// User name.
    pub name: String,
    /// Groups, including [`AUTHENTICATED_GROUP`].
    pub groups: Vec<String>,
    /// The token's ID (`None` for a loopback caller acting as admin).
    pub token_id: Option<String>,
    /// The token's `exp` (`None` for a loopback caller).
    pub expires_at: Option<u64>,
}

impl Principal {
    /// The admin, as a loopback caller is when loopback is admin.
    pub fn loopback_admin() -> Self {
        Self {
            name: ADMIN_USER.into(),
            groups: vec![ADMIN_GROUP.into(), AUTHENTICATED_GROUP.into()],
            token_id: None,
            expires_at: None,
        }
    }

    /// `true` when in [`ADMIN_GROUP`].
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == ADMIN_GROUP)
    }
}

/// What a valid dataplane token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataplaneIdentity {
    /// The claims.
    pub claims: DataplaneClaims,
}

impl DataplaneIdentity {
    /// The token's ID.
    pub fn token_id(&self) -> &str {
        &self.claims.jti
    }

    /// Check that this token may serve DPP `mesh`/`name` of `proxy_type`, whose tags are
    /// `tags` (`None` when the DPP is not known yet).
    ///
    /// # Errors
    /// Why not, naming the mismatching part (never the token).
    pub fn authorizes(
        &self,
        mesh: &str,
        name: &str,
        proxy_type: &str,
        tags: Option<&BTreeMap<String, BTreeSet<String>>>,
    ) -> Result<(), String> {
        let c = &self.claims;
        if c.mesh != mesh {
            return Err(format!("the token is for mesh {:?}, not {mesh:?}", c.mesh));
        }
        if !c.name.is_empty() && c.name != name {
            return Err(format!(
                "the token is for dataplane {:?}, not {name:?}",
                c.name
            ));
        }
        if c.proxy_type != proxy_type {
            return Err(format!(
                "the token is for proxy type {:?}, not {proxy_type:?}",
                c.proxy_type
            ));
        }
        if c.tags.is_empty() {
            return Ok(());
        }
        let Some(tags) = tags else {
            return Err(format!(
                "the token is bound to tags and dataplane {mesh}/{name} is not registered yet (send it in the node metadata or create it first)"
            ));
        };
        for (tag, allowed) in &c.tags {
            let Some(values) = tags.get(tag).filter(|v| !v.is_empty()) else {
                return Err(format!(
                    "the dataplane has no tag {tag:?}, which the token requires"
                ));
            };
            if let Some(v) = values.iter().find(|v| !allowed.contains(*v)) {
                return Err(format!(
                    "the dataplane has {tag}={v:?}, which the token does not allow (allowed: {allowed:?})"
                ));
            }
        }
        Ok(())
    }
}

pub(crate) fn new_jti() -> String {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 12];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("the system random number generator works");
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sign `claims` with `key` (header `alg: EdDSA`, `kid`).
pub(crate) fn sign<C: Serialize>(key: &SigningKey, claims: &C) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(key.kid().to_owned());
    // Serialising plain claims and signing with a key ring parsed cannot fail.
    jsonwebtoken::encode(&header, claims, &key.encoding_key()).expect("a token signs")
}

/// Decode and check `token`: signed by one of `keys` (by `kid`), of `kind`, not past `exp` +
/// [`LEEWAY_SECS`] at `now`, not in `revoked`. `exp`/`jti` are read by `parts`.
pub(crate) fn verify<C: for<'de> Deserialize<'de>>(
    token: &str,
    kind: TokenKind,
    keys: &[PublicKey],
    revoked: &BTreeSet<String>,
    now: u64,
    parts: impl Fn(&C) -> (TokenKind, u64, &str),
) -> Result<C, TokenError> {
    let k = kind.as_str();
    let invalid = |reason: String| TokenError::Invalid { kind: k, reason };
    let token = token.trim();
    let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(e.to_string()))?;
    if header.alg != Algorithm::EdDSA {
        return Err(invalid(format!(
            "algorithm {:?} is not accepted",
            header.alg
        )));
    }
    let kid = header
        .kid
        .ok_or_else(|| invalid("the token names no signing key (kid)".into()))?;
    let key = keys
        .iter()
        .find(|key| key.kid == kid)
        .ok_or_else(|| invalid(format!("signed by an unknown key {kid:?}")))?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.validate_exp = false;
    validation.set_required_spec_claims(&["exp", "iat", "jti"]);
    let claims = jsonwebtoken::decode::<C>(token, &key.decoding_key(), &validation)
        .map_err(|e| invalid(e.to_string()))?
        .claims;
    let (got, exp, jti) = parts(&claims);
    if got != kind {
        return Err(invalid(format!("it is a {} token", got.as_str())));
    }
    if exp.saturating_add(LEEWAY_SECS) < now {
        return Err(TokenError::Expired {
            kind: k,
            ago: now - exp,
        });
    }
    if revoked.contains(jti) {
        return Err(TokenError::Revoked {
            kind: k,
            id: jti.to_owned(),
        });
    }
    Ok(claims)
}

/// The `jti` of `token` if it is signed by one of `keys`, whatever its expiry or revocation
/// (what a revocation by token names).
///
/// # Errors
/// [`TokenError::Invalid`] for a malformed or forged token.
pub fn token_id(token: &str, kind: TokenKind, keys: &[PublicKey]) -> Result<String, TokenError> {
    #[derive(Deserialize)]
    struct Id {
        kind: TokenKind,
        exp: u64,
        jti: String,
    }
    verify::<Id>(token, kind, keys, &BTreeSet::new(), 0, |c| {
        (c.kind, c.exp, &c.jti)
    })
    .map(|c| c.jti)
}

/// The tail of a token fit for logs: its last 6 characters (never the whole token).
pub fn redacted(token: &str) -> String {
    let t = token.trim();
    let tail: String = t
        .chars()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("…{tail}")
}
