//! Self-signed CAs that issue leaf certificates only (path length 0): the zone's data-plane
//! server CA (`umbra-zone-cp`'s `dp_server`), and the CAs kept in a store that issue a
//! process's own TLS certificates ([`StoredCa`]: the zone's Envoy-admin CA,
//! [`crate::envoy_admin`], and the Global replicas' inter-CP CA, [`crate::inter_cp`]). ECDSA
//! P-256 keys (rcgen's default).

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use serde::{Deserialize, Serialize};
use umbra_store::{Store, StoreError};

use crate::mesh_ca::offset;

/// A PEM certificate and its PEM private key. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertPair {
    /// PEM certificate.
    pub cert_pem: String,
    /// PEM (PKCS#8) private key.
    pub key_pem: String,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CertPair { .. }")
    }
}

/// A new self-signed CA named `names` (distinguished-name parts, in order), valid from five
/// minutes ago (clock skew) for `validity`, allowed to sign leaf certificates only
/// (key usages: certificate and CRL signing, digital signature).
///
/// # Errors
/// Key generation or signing fails.
pub fn leaf_ca(names: &[(DnType, &str)], validity: Duration) -> Result<CertPair, rcgen::Error> {
    let now = SystemTime::now();
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    for (ty, value) in names {
        dn.push(ty.clone(), *value);
    }
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = offset(now - Duration::from_secs(300));
    params.not_after = offset(now + validity);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CertPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Why a [`StoredCa`] or a certificate from it could not be had. Messages name the CA.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The store failed.
    #[error("{ca}: {source}")]
    Store {
        /// The CA ([`StoredCa::name`]).
        ca: &'static str,
        /// What the store said.
        #[source]
        source: StoreError,
    },
    /// The stored CA is unreadable, or a certificate could not be issued.
    #[error("{0}")]
    Certificate(String),
}

/// A CA's stored form (JSON `{"certPem", "keyPem"}`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredPem {
    cert_pem: String,
    key_pem: String,
}

/// A leaf-only CA ([`leaf_ca`]) kept in a store under a key purpose
/// ([`Store::signing_key`], insert-if-absent: every process sharing the store gets the one that
/// was stored first), and the leaf certificates it issues.
pub struct StoredCa {
    name: &'static str,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for StoredCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredCa {{ name: {:?}, .. }}", self.name)
    }
}

impl StoredCa {
    /// The CA stored under `purpose` in `store`, created (named `names`, valid for
    /// `validity`) and stored when there is none; whichever caller stores first wins, the
    /// others read its CA. `name` prefixes the errors.
    ///
    /// # Errors
    /// The store fails, or holds a CA that does not parse.
    pub async fn load_or_create(
        store: &dyn Store,
        purpose: &str,
        name: &'static str,
        names: &[(DnType, &str)],
        validity: Duration,
    ) -> Result<StoredCa, CaError> {
        let err = |what: &str, e: &dyn std::fmt::Display| {
            CaError::Certificate(format!("{name}: {what}: {e}"))
        };
        let ca = leaf_ca(names, validity).map_err(|e| err("CA", &e))?;
        let fresh = serde_json::to_vec(&StoredPem {
            cert_pem: ca.cert_pem,
            key_pem: ca.key_pem,
        })
        .map_err(|e| err("encode", &e))?;
        let bytes = store
            .signing_key(purpose, fresh)
            .await
            .map_err(|source| CaError::Store { ca: name, source })?;
        let ca: StoredPem = serde_json::from_slice(&bytes).map_err(|e| err("decode", &e))?;
        Self::from_pem(name, &ca.cert_pem, &ca.key_pem)
    }

    /// A CA named `name` from its PEM certificate and key.
    ///
    /// # Errors
    /// Either PEM does not parse.
    pub fn from_pem(
        name: &'static str,
        cert_pem: &str,
        key_pem: &str,
    ) -> Result<StoredCa, CaError> {
        let key = KeyPair::from_pem(key_pem)
            .map_err(|e| CaError::Certificate(format!("{name}: CA key: {e}")))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(|e| CaError::Certificate(format!("{name}: CA certificate: {e}")))?;
        Ok(StoredCa {
            name,
            cert_pem: cert_pem.to_owned(),
            issuer,
        })
    }

    /// The CA's name, as errors show it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The PEM CA certificate (what peers verify the certificates it issued with).
    #[must_use]
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A new key and a leaf certificate for it: subject `CN=common_name`, `sans`, key usages
    /// digital signature and key encipherment, extended key usages `usages`, valid from five
    /// minutes ago for `validity`.
    ///
    /// # Errors
    /// Key generation or signing fails.
    pub fn issue(
        &self,
        common_name: &str,
        sans: Vec<SanType>,
        usages: Vec<ExtendedKeyUsagePurpose>,
        validity: Duration,
    ) -> Result<CertPair, CaError> {
        let err = |what: &str, e: rcgen::Error| {
            CaError::Certificate(format!("{}: {what}: {e}", self.name))
        };
        let now = SystemTime::now();
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.subject_alt_names = sans;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages;
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now - Duration::from_secs(300));
        params.not_after = offset(now + validity);
        let key = KeyPair::generate().map_err(|e| err("key", e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| err("sign", e))?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}
