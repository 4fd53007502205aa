//! The zone's Envoy-admin CA and the certificates issued from it (Kuma 2.7
//! `pkg/envoy/admin/tls/pki.go`): how a zone CP reads the admin of an Envoy on another host.
//!
//! Each zone keeps one CA, created on first use and stored durably under [`CA_KEY`] (Kuma's
//! global secret `envoy-admin-ca`; "Multizone: CA is generated for every zone"). From it:
//!
//! - one **server certificate per proxy** ([`EnvoyAdminCa::server_cert`]), for the proxy's
//!   addresses (IP SANs), which the generated `kuma:envoy:admin` listener presents;
//! - one **client certificate** for the zone CP ([`EnvoyAdminCa::client_cert`]), SAN
//!   `DNS:kuma-cp` ([`CLIENT_SAN`]), which that listener requires.
//!
//! Kuma's keys are RSA 2048; Umbra's are ECDSA P-256 (the listener's shape does not depend on
//! the key type, and Envoy and rustls take both). Rotation is Kuma's: replace the stored CA and
//! restart the zone CP.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde::{Deserialize, Serialize};
use umbra_store::{Store, StoreError};

use crate::mesh_ca::offset;

/// Store key of the zone's Envoy-admin CA (JSON `{"certPem", "keyPem"}`).
pub const CA_KEY: &str = "envoy-admin-ca";

/// The DNS SAN of the zone CP's client certificate, the only one the admin listener admits
/// (Kuma's `ClientCertSAN`).
pub const CLIENT_SAN: &str = "kuma-cp";

/// Lifetime of the CA (10 years, as Kuma's `util_tls.GenerateCA`).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Lifetime of a server or client certificate (10 years, as Kuma's `util_tls.NewCert`: they
/// live as long as the zone CP process that issued them, which re-issues on restart).
pub const CERT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Why the CA or a certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum EnvoyAdminCaError {
    /// The store failed.
    #[error("Envoy-admin CA: {0}")]
    Store(#[from] StoreError),
    /// The stored CA is unreadable, or a certificate could not be issued.
    #[error("Envoy-admin CA: {0}")]
    Certificate(String),
}

fn cert_err(what: &str, e: impl std::fmt::Display) -> EnvoyAdminCaError {
    EnvoyAdminCaError::Certificate(format!("{what}: {e}"))
}

pub use crate::self_signed::CertPair;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCa {
    cert_pem: String,
    key_pem: String,
}

/// The zone's Envoy-admin CA.
pub struct EnvoyAdminCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for EnvoyAdminCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvoyAdminCa { .. }")
    }
}

fn new_ca() -> Result<StoredCa, EnvoyAdminCaError> {
    let ca = crate::self_signed::leaf_ca(
        &[
            (DnType::OrganizationName, "Kuma"),
            (DnType::OrganizationalUnitName, "Mesh"),
            (DnType::CommonName, "Envoy Admin CA"),
        ],
        CA_VALIDITY,
    )
    .map_err(|e| cert_err("CA", e))?;
    Ok(StoredCa {
        cert_pem: ca.cert_pem,
        key_pem: ca.key_pem,
    })
}

impl EnvoyAdminCa {
    /// The zone's CA from `store`, created and stored (once, whichever caller comes first) when
    /// there is none.
    ///
    /// # Errors
    /// The store fails, or holds a CA that does not parse.
    pub async fn load_or_create(store: &dyn Store) -> Result<EnvoyAdminCa, EnvoyAdminCaError> {
        let fresh = serde_json::to_vec(&new_ca()?).map_err(|e| cert_err("encode", e))?;
        let bytes = store.signing_key(CA_KEY, fresh).await?;
        let ca: StoredCa = serde_json::from_slice(&bytes).map_err(|e| cert_err("decode", e))?;
        Self::from_pem(&ca.cert_pem, &ca.key_pem)
    }

    /// A CA from its PEM certificate and key (an operator's, or one exported from Kuma's
    /// `envoy-admin-ca` global secret).
    ///
    /// # Errors
    /// Either PEM does not parse.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<EnvoyAdminCa, EnvoyAdminCaError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| cert_err("CA key", e))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| cert_err("CA certificate", e))?;
        Ok(EnvoyAdminCa {
            cert_pem: cert_pem.to_owned(),
            issuer,
        })
    }

    /// The PEM CA certificate (what the listener trusts client certificates with, and the zone
    /// verifies server certificates with).
    #[must_use]
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    fn issue(
        &self,
        common_name: &str,
        sans: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<CertPair, EnvoyAdminCaError> {
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
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now - Duration::from_secs(300));
        params.not_after = offset(now + CERT_VALIDITY);
        let key = KeyPair::generate().map_err(|e| cert_err("key", e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| cert_err("sign", e))?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The zone CP's client certificate: SAN `DNS:kuma-cp`, client authentication.
    ///
    /// # Errors
    /// Signing fails.
    pub fn client_cert(&self) -> Result<CertPair, EnvoyAdminCaError> {
        let san = CLIENT_SAN
            .to_owned()
            .try_into()
            .map_err(|e| cert_err("SAN", e))?;
        self.issue(
            CLIENT_SAN,
            vec![SanType::DnsName(san)],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    /// A proxy's server certificate for `addresses` (its Dataplane's `networking.address`, and
    /// its advertised address when another; Kuma's `getEnvoyAdminMTLS`): IP SANs, server
    /// authentication.
    ///
    /// # Errors
    /// Signing fails.
    pub fn server_cert(&self, addresses: &[IpAddr]) -> Result<CertPair, EnvoyAdminCaError> {
        let cn = addresses
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        self.issue(
            &cn,
            addresses.iter().copied().map(SanType::IpAddress).collect(),
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ca_is_created_once_and_kept() {
        let store = umbra_store::memory::MemoryStore::new();
        let a = EnvoyAdminCa::load_or_create(&store).await.unwrap();
        let b = EnvoyAdminCa::load_or_create(&store).await.unwrap();
        assert_eq!(a.cert_pem(), b.cert_pem());
        assert!(a.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    }

    #[test]
    fn certificates_carry_the_sans_kuma_expects() {
        let stored = new_ca().unwrap();
        let ca = EnvoyAdminCa::from_pem(&stored.cert_pem, &stored.key_pem).unwrap();
        let sans = |pem: &str| {
            let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
            let cert = pem.parse_x509().unwrap();
            let names = cert.subject_alternative_name().unwrap().unwrap();
            format!("{:?}", names.value.general_names)
        };
        let client = ca.client_cert().unwrap();
        assert_eq!(sans(&client.cert_pem), "[DNSName(\"kuma-cp\")]");
        let ip: IpAddr = "10.77.1.11".parse().unwrap();
        let server = ca.server_cert(&[ip]).unwrap();
        assert_eq!(sans(&server.cert_pem), "[IPAddress([10, 77, 1, 11])]");
        assert!(!format!("{client:?}").contains("PRIVATE"));
        assert!(EnvoyAdminCa::from_pem("x", &stored.key_pem).is_err());
    }
}
