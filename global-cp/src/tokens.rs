//! Zone tokens: how a Zone CP proves which zone it is on KDS (issue 5; Kuma's zone token).
//!
//! A token is a JWT (RFC 7519) signed with HS256 by a key the Global keeps in its store
//! ([`Store::signing_key`], created on first use, so tokens outlive restarts with PostgreSQL).
//! Claims: `zone` (the identity; KDS never trusts a zone name from the payload), `iat`, `exp`,
//! `jti`. Issued by `POST /tokens/zone` (`umbractl generate zone-token`).
//!
//! Revocations are kept in the store ([`REVOCATIONS_KEY`]) and added with a compare-and-swap
//! ([`crate::store::update_key`]), so replicas of the Global sharing one PostgreSQL never lose
//! each other's; each replica re-reads the list at least every [`REVOCATION_POLL`]
//! ([`ZoneTokens::follow`]), so a zone token revoked through one replica is refused by every
//! other, and their KDS streams authenticated with it end, within seconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::SecureRandom as _;
use serde::{Deserialize, Serialize};

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::store::{update_key, Store, StoreError};

/// Signing-key purpose in the store.
pub const ZONE_TOKEN_KEY: &str = "zone-token";

/// Longest validity a token may ask for (10 years).
pub const MAX_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Validity when none is asked for (1 year).
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Clock skew tolerated on a token's expiry (seconds).
pub const LEEWAY_SECS: u64 = 5;

/// Now, in seconds since the Unix epoch.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Why a token was not issued or not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The zone name is not a DNS label.
    #[error("zone name {0:?} must be 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit")]
    BadZone(String),
    /// The token is missing, malformed, forged or expired.
    #[error("invalid zone token: {0}")]
    Invalid(String),
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    zone: String,
    iat: u64,
    exp: u64,
    jti: String,
}

/// Who a valid zone token says the caller is, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneIdentity {
    /// The zone.
    pub zone: String,
    /// The token's `exp` (seconds since the Unix epoch); it is refused [`LEEWAY_SECS`] later.
    pub expires_at: u64,
    /// The token's ID (`jti`), what a revocation names.
    pub token_id: String,
}

impl ZoneIdentity {
    /// How long from now until the token is refused (zero when it already is).
    pub fn remaining(&self) -> Duration {
        Duration::from_secs(
            self.expires_at
                .saturating_add(LEEWAY_SECS)
                .saturating_sub(unix_now()),
        )
    }
}

/// Store key holding the revoked zone token IDs (`jti`), one per line (Kuma keeps them in the
/// `zone-token-revocations` secret).
pub const REVOCATIONS_KEY: &str = "zone-token-revocations";

/// Longest pause between two reads of [`REVOCATIONS_KEY`] by [`ZoneTokens::follow`]: how soon
/// a revocation made through another replica of the Global is refused here too.
pub const REVOCATION_POLL: Duration = Duration::from_secs(2);

/// Issues and verifies zone tokens with the Global's key, and knows which were revoked.
#[derive(Clone)]
pub struct ZoneTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// Revoked token IDs, and a wake-up on every revocation (open streams re-check theirs).
    revoked: std::sync::Arc<std::sync::RwLock<std::collections::HashSet<String>>>,
    revocations: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
}

impl std::fmt::Debug for ZoneTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZoneTokens { .. }")
    }
}

/// `true` for a valid zone name (an RFC 1123 label; the rule `zone-cp --zone` checks too).
pub use umbra_kds::valid_zone_name;

/// `n` bytes from the system random number generator.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut key = vec![0u8; n];
    // The system RNG fails only on a broken OS; a zero key would be worse than stopping.
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .expect("the system random number generator works");
    key
}

impl ZoneTokens {
    /// Tokens signed with the store's zone-token key (created now if there is none).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    pub async fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let key = store.signing_key(ZONE_TOKEN_KEY, random_bytes(32)).await?;
        let tokens = Self::from_key(&key);
        let revoked = store.signing_key(REVOCATIONS_KEY, Vec::new()).await?;
        tokens.add_revoked(umbra_pki::trust::parse_lines(&revoked));
        Ok(tokens)
    }

    /// Tokens signed with `key`, none revoked.
    pub fn from_key(key: &[u8]) -> Self {
        Self {
            encoding: EncodingKey::from_secret(key),
            decoding: DecodingKey::from_secret(key),
            revoked: std::sync::Arc::default(),
            revocations: std::sync::Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Add `ids` to the revoked ones; when any is new, wake the open streams. Returns whether
    /// any was new.
    fn add_revoked(&self, ids: BTreeSet<String>) -> bool {
        let mut revoked = self
            .revoked
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut added = false;
        for id in ids {
            added |= revoked.insert(id);
        }
        drop(revoked);
        if added {
            self.revocations.send_modify(|n| *n += 1);
        }
        added
    }

    /// Add the revocations `store` holds that are not known here yet (made through another
    /// replica of the Global): refused from now on, and open KDS streams authenticated with
    /// them end. Returns whether there were any.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`]; nothing changed then.
    pub async fn refresh(&self, store: &dyn Store) -> Result<bool, StoreError> {
        let stored = store.get_key(REVOCATIONS_KEY).await?.unwrap_or_default();
        Ok(self.add_revoked(umbra_pki::trust::parse_lines(&stored)))
    }

    /// [`ZoneTokens::refresh`] every [`REVOCATION_POLL`] (and on store wake-ups) until
    /// `shutdown` turns `true`; a failure is logged and retried on the next round.
    pub async fn follow(
        self,
        store: Arc<dyn Store>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut wake = store.subscribe();
        while !*shutdown.borrow() {
            if let Err(e) = self.refresh(&*store).await {
                tracing::warn!(error = %e, "cannot read the zone-token revocations; retrying");
            }
            tokio::select! {
                _ = wake.changed() => {}
                () = tokio::time::sleep(REVOCATION_POLL) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// `true` when the token with ID `id` was revoked.
    pub fn is_revoked(&self, id: &str) -> bool {
        self.revoked
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(id)
    }

    /// Wake-ups on every revocation.
    pub fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    /// The ID (`jti`) of `token`, a token this Global signed (expired or not).
    ///
    /// # Errors
    /// [`TokenError::Invalid`] for a malformed or forged token.
    pub fn token_id(&self, token: &str) -> Result<String, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_exp = false;
        validation.set_required_spec_claims(&["exp", "iat"]);
        jsonwebtoken::decode::<Claims>(token.trim(), &self.decoding, &validation)
            .map(|d| d.claims.jti)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }

    /// Revoke the token with ID `id`: added to the list in `store` (a compare-and-swap that
    /// keeps what other replicas added) durably before this returns, refused from now on
    /// (with every other ID the list holds), and open KDS streams authenticated with it end
    /// within a moment.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Contended`]; nothing is revoked then.
    pub async fn revoke(&self, store: &dyn Store, id: &str) -> Result<(), StoreError> {
        if self.is_revoked(id) {
            return Ok(());
        }
        let list = update_key(store, REVOCATIONS_KEY, |stored| {
            let mut all = umbra_pki::trust::parse_lines(stored.unwrap_or_default());
            let new = all.insert(id.to_owned());
            Ok::<_, StoreError>(new.then(|| umbra_pki::trust::join_lines(&all)))
        })
        .await?;
        let mut all = umbra_pki::trust::parse_lines(&list.value.unwrap_or_default());
        all.insert(id.to_owned());
        self.add_revoked(all);
        Ok(())
    }

    /// A token for `zone`, valid for `valid_for` (capped at [`MAX_VALIDITY`]).
    ///
    /// # Errors
    /// [`TokenError::BadZone`].
    pub fn issue(&self, zone: &str, valid_for: Duration) -> Result<String, TokenError> {
        self.issue_at(zone, valid_for, unix_now())
    }

    /// [`ZoneTokens::issue`] as if the time were `now` (seconds since the Unix epoch).
    ///
    /// # Errors
    /// [`TokenError::BadZone`].
    pub fn issue_at(
        &self,
        zone: &str,
        valid_for: Duration,
        now: u64,
    ) -> Result<String, TokenError> {
        if !valid_zone_name(zone) {
            return Err(TokenError::BadZone(zone.to_owned()));
        }
        let claims = Claims {
            zone: zone.to_owned(),
            iat: now,
            exp: now.saturating_add(valid_for.min(MAX_VALIDITY).as_secs()),
            jti: random_bytes(12)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }

    /// The zone a token was issued to.
    ///
    /// # Errors
    /// [`TokenError::Invalid`] for a malformed, forged or expired token.
    pub fn verify(&self, token: &str) -> Result<String, TokenError> {
        self.verify_at(token, unix_now())
    }

    /// [`ZoneTokens::verify`] as if the time were `now` (seconds since the Unix epoch): a
    /// token whose `exp` is more than [`LEEWAY_SECS`] before `now` is expired.
    ///
    /// # Errors
    /// [`TokenError::Invalid`] for a malformed, forged or expired token.
    pub fn verify_at(&self, token: &str, now: u64) -> Result<String, TokenError> {
        self.identity_at(token, now).map(|id| id.zone)
    }

    /// The zone a token was issued to and when it expires, checked against the clock now.
    ///
    /// # Errors
    /// As [`ZoneTokens::verify`].
    pub fn identity(&self, token: &str) -> Result<ZoneIdentity, TokenError> {
        self.identity_at(token, unix_now())
    }

    fn identity_at(&self, token: &str, now: u64) -> Result<ZoneIdentity, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        // Expiry is checked below against `now`, not the library's clock.
        validation.validate_exp = false;
        validation.set_required_spec_claims(&["exp", "iat"]);
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map_err(|e| TokenError::Invalid(e.to_string()))?;
        if data.claims.exp.saturating_add(LEEWAY_SECS) < now {
            return Err(TokenError::Invalid(format!(
                "the token expired {} s ago",
                now - data.claims.exp
            )));
        }
        if !valid_zone_name(&data.claims.zone) {
            return Err(TokenError::Invalid(
                "the zone claim is not a zone name".into(),
            ));
        }
        if self.is_revoked(&data.claims.jti) {
            return Err(TokenError::Invalid("the token was revoked".into()));
        }
        Ok(ZoneIdentity {
            zone: data.claims.zone,
            expires_at: data.claims.exp,
            token_id: data.claims.jti,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_verify_and_refuse() {
        let tokens = ZoneTokens::from_key(b"k1");
        let t = tokens.issue("zone-1", Duration::from_secs(60)).unwrap();
        assert_eq!(tokens.verify(&t).unwrap(), "zone-1");
        assert!(matches!(
            ZoneTokens::from_key(b"k2").verify(&t),
            Err(TokenError::Invalid(_))
        ));
        assert!(tokens.verify("garbage").is_err());
        assert_eq!(
            tokens.issue("Zone.1", Duration::from_secs(60)),
            Err(TokenError::BadZone("Zone.1".into()))
        );
        // Expiry, on a given clock: valid until exp plus the leeway, refused one second later.
        let issued_at = 1_800_000_000;
        let t = tokens
            .issue_at("z", Duration::from_secs(60), issued_at)
            .unwrap();
        assert_eq!(tokens.verify_at(&t, issued_at).unwrap(), "z");
        assert_eq!(
            tokens.verify_at(&t, issued_at + 60 + LEEWAY_SECS).unwrap(),
            "z"
        );
        let expired = tokens.verify_at(&t, issued_at + 60 + LEEWAY_SECS + 1);
        assert!(
            matches!(&expired, Err(TokenError::Invalid(m)) if m.contains("expired")),
            "{expired:?}"
        );
        // A token issued long ago is refused on the real clock too.
        let old = tokens
            .issue_at("z", Duration::from_secs(60), unix_now() - 3600)
            .unwrap();
        assert!(tokens.verify(&old).is_err());
        // A forged signature cannot move exp.
        let mut parts: Vec<&str> = old.split('.').collect();
        parts[2] = "AAAA";
        assert!(tokens.verify(&parts.join(".")).is_err());
    }
}
