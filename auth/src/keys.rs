//! Ed25519 signing keys: the private key as PKCS#8 v2 (what the CPs keep in their store, under
//! purposes such as [`USER_TOKEN_KEY`]) and its public half with a key ID (`kid`, the first 16
//! hex digits of the public key's SHA-256), which tokens carry in their JWT header so a
//! verifier picks the right key.

use base64::Engine as _;
use ring::signature::KeyPair as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Store purpose of the user-token signing key (Kuma's `user-token-signing-key-1`).
pub const USER_TOKEN_KEY: &str = "user-token-signing-key";

/// Store purpose of the dataplane-token signing key of `mesh` (Kuma's
/// `dataplane-token-signing-key-<mesh>`, created with the Mesh).
pub fn dataplane_token_key(mesh: &str) -> String {
    format!("dataplane-token-signing-key/{mesh}")
}

/// A key that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Ed25519 signing key: {0}")]
pub struct KeyError(pub String);

/// An Ed25519 private key. `Debug` never shows the key.
#[derive(Clone)]
pub struct SigningKey {
    pkcs8: Vec<u8>,
    public: PublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey {{ kid: {:?}, .. }}", self.public.kid)
    }
}

impl SigningKey {
    /// A new random key.
    ///
    /// # Panics
    /// When the system random number generator fails (a broken OS).
    pub fn generate() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
            .expect("the system random number generator works");
        Self::from_pkcs8(doc.as_ref()).expect("ring reads the key it generated")
    }

    /// The key stored as `pkcs8` (PKCS#8 v1 or v2 DER).
    ///
    /// # Errors
    /// [`KeyError`] when the bytes are not an Ed25519 PKCS#8 document.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, KeyError> {
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8)
            .map_err(|e| KeyError(e.to_string()))?;
        Ok(Self {
            pkcs8: pkcs8.to_vec(),
            public: PublicKey::new(pair.public_key().as_ref().to_vec()),
        })
    }

    /// The PKCS#8 document (what the store keeps).
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The key ID tokens signed with this key carry.
    pub fn kid(&self) -> &str {
        &self.public.kid
    }

    pub(crate) fn encoding_key(&self) -> jsonwebtoken::EncodingKey {
        jsonwebtoken::EncodingKey::from_ed_der(&self.pkcs8)
    }
}

/// An Ed25519 public key and its ID; JSON `{"kid": "<16 hex>", "ed25519": "<base64>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicKey {
    /// Key ID: the first 16 hex digits of the SHA-256 of the key.
    pub kid: String,
    /// The 32-byte public key, base64 (standard, padded) in JSON.
    #[serde(with = "b64")]
    pub ed25519: Vec<u8>,
}

impl PublicKey {
    /// The public key `raw` (32 bytes) with its derived ID.
    pub fn new(raw: Vec<u8>) -> Self {
        let digest = Sha256::digest(&raw);
        let kid = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Self { kid, ed25519: raw }
    }

    /// `true` when the ID is the one derived from the key and the key has 32 bytes (a bundle
    /// received over the network is checked with this).
    pub fn is_consistent(&self) -> bool {
        self.ed25519.len() == 32 && Self::new(self.ed25519.clone()).kid == self.kid
    }

    pub(crate) fn decoding_key(&self) -> jsonwebtoken::DecodingKey {
        jsonwebtoken::DecodingKey::from_ed_der(&self.ed25519)
    }
}

mod b64 {
    use base64::Engine as _;

    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

/// Base64 (standard, padded), for callers that ship key bytes as text.
pub fn to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_pkcs8_and_names_itself() {
        let k = SigningKey::generate();
        let again = SigningKey::from_pkcs8(k.pkcs8()).unwrap();
        assert_eq!(k.public(), again.public());
        assert_eq!(k.kid().len(), 16);
        assert!(k.public().is_consistent());
        assert_ne!(SigningKey::generate().kid(), k.kid());
        assert!(SigningKey::from_pkcs8(b"not a key").is_err());
        let mut forged = k.public().clone();
        forged.ed25519[0] ^= 1;
        assert!(!forged.is_consistent(), "a kid must match its key");
        assert!(!format!("{k:?}").contains(&to_base64(k.pkcs8())));
    }
}
