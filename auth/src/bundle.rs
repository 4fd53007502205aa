//! The trust bundle: every public key a verifier needs and every revoked token ID. The issuing
//! CP builds it ([`crate::Issuer::bundle`]); a federated zone receives it from the Global over
//! KDS (one item, JSON), keeps it in its store, and verifies user and dataplane tokens with it.
//! It holds no private key, so a zone can verify tokens but never mint one.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::keys::PublicKey;
use crate::token::{
    verify, DataplaneClaims, DataplaneIdentity, Principal, TokenError, TokenKind, UserClaims,
    ZoneIngressClaims, ZoneIngressIdentity, AUTHENTICATED_GROUP,
};

/// Revoked token IDs (`jti`) per kind (Kuma keeps them in `user-token-revocations` and
/// `dataplane-token-revocations-<mesh>` secrets; IDs are random, so one list per kind).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// Revoked user tokens.
    #[serde(default)]
    pub user: BTreeSet<String>,
    /// Revoked dataplane tokens.
    #[serde(default)]
    pub dataplane: BTreeSet<String>,
    /// Revoked zone-ingress tokens.
    #[serde(
        default,
        rename = "zoneIngress",
        skip_serializing_if = "BTreeSet::is_empty"
    )]
    pub zone_ingress: BTreeSet<String>,
}

impl Revoked {
    /// The list of `kind`.
    pub fn of(&self, kind: TokenKind) -> &BTreeSet<String> {
        match kind {
            TokenKind::User => &self.user,
            TokenKind::Dataplane => &self.dataplane,
            TokenKind::ZoneIngress => &self.zone_ingress,
        }
    }

    /// The list of `kind`, to change.
    pub fn of_mut(&mut self, kind: TokenKind) -> &mut BTreeSet<String> {
        match kind {
            TokenKind::User => &mut self.user,
            TokenKind::Dataplane => &mut self.dataplane,
            TokenKind::ZoneIngress => &mut self.zone_ingress,
        }
    }
}

/// Public keys and revocations; JSON `{"userKeys": [..], "dataplaneKeys": {"<mesh>": [..]},
/// "revoked": {"user": [..], "dataplane": [..]}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustBundle {
    /// Keys that sign user tokens.
    #[serde(default)]
    pub user_keys: Vec<PublicKey>,
    /// Per mesh, keys that sign its dataplane tokens.
    #[serde(default)]
    pub dataplane_keys: BTreeMap<String, Vec<PublicKey>>,
    /// Revoked token IDs.
    #[serde(default)]
    pub revoked: Revoked,
}

impl TrustBundle {
    /// Check a bundle received from elsewhere: every key's ID matches the key.
    ///
    /// # Errors
    /// The first inconsistent key.
    pub fn check(&self) -> Result<(), String> {
        let all = self.user_keys.iter().map(|k| ("user", k)).chain(
            self.dataplane_keys
                .iter()
                .flat_map(|(m, ks)| ks.iter().map(move |k| (m.as_str(), k))),
        );
        for (owner, key) in all {
            if !key.is_consistent() {
                return Err(format!(
                    "signing key {:?} ({owner}) does not match its ID",
                    key.kid
                ));
            }
        }
        Ok(())
    }

    /// The user a user token names, at time `now` (seconds since the Unix epoch).
    ///
    /// # Errors
    /// [`TokenError`]: malformed, forged, of another kind, expired or revoked.
    pub fn verify_user(&self, token: &str, now: u64) -> Result<Principal, TokenError> {
        let c: UserClaims = verify(
            token,
            TokenKind::User,
            &self.user_keys,
            &self.revoked.user,
            now,
            |c: &UserClaims| (c.kind, c.exp, c.jti.as_str()),
        )?;
        let mut groups = c.groups;
        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.into());
        }
        Ok(Principal {
            name: c.name,
            groups,
            token_id: Some(c.jti),
            expires_at: Some(c.exp),
        })
    }

    /// What a dataplane token allows, at time `now`. The mesh is read from the token (unsigned
    /// at that point) only to pick the mesh's keys; the signature is then checked with them.
    ///
    /// # Errors
    /// [`TokenError`]: malformed, forged, of another kind, expired or revoked.
    pub fn verify_dataplane(&self, token: &str, now: u64) -> Result<DataplaneIdentity, TokenError> {
        let mesh = unverified_mesh(token).ok_or_else(|| TokenError::Invalid {
            kind: "dataplane",
            reason: "no mesh claim".into(),
        })?;
        let keys = self
            .dataplane_keys
            .get(&mesh)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let claims: DataplaneClaims = verify(
            token,
            TokenKind::Dataplane,
            keys,
            &self.revoked.dataplane,
            now,
            |c: &DataplaneClaims| (c.kind, c.exp, c.jti.as_str()),
        )?;
        Ok(DataplaneIdentity { claims })
    }

    /// What a zone-ingress token allows, at time `now`.
    ///
    /// # Errors
    /// [`TokenError`]: malformed, forged, of another kind, expired or revoked.
    pub fn verify_zone_ingress(
        &self,
        token: &str,
        now: u64,
    ) -> Result<ZoneIngressIdentity, TokenError> {
        let claims: ZoneIngressClaims = verify(
            token,
            TokenKind::ZoneIngress,
            &self.user_keys,
            &self.revoked.zone_ingress,
            now,
            |c: &ZoneIngressClaims| (c.kind, c.exp, c.jti.as_str()),
        )?;
        Ok(ZoneIngressIdentity { claims })
    }

    /// The keys that sign tokens of `kind` (for a dataplane token, of `mesh`).
    pub fn keys(&self, kind: TokenKind, mesh: &str) -> &[PublicKey] {
        match kind {
            TokenKind::User | TokenKind::ZoneIngress => &self.user_keys,
            TokenKind::Dataplane => self
                .dataplane_keys
                .get(mesh)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        }
    }
}

/// The `mesh` claim of a JWT, read without checking anything (to choose the keys).
pub fn unverified_mesh(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("mesh")?.as_str().map(str::to_owned)
}
