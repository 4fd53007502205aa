//! Self-signed CAs that issue leaf certificates only (path length 0), for a zone's own TLS:
//! the data-plane server CA (`umbra-zone-cp`'s `dp_server`) and the Envoy-admin CA
//! ([`crate::envoy_admin`]). ECDSA P-256 keys (rcgen's default).

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

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
