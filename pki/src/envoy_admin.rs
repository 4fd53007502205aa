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
use std::time::Duration;

use rcgen::{DnType, ExtendedKeyUsagePurpose, SanType};
use umbra_store::Store;

use crate::self_signed::StoredCa;

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

/// The CA's name in errors.
const NAME: &str = "Envoy-admin CA";

/// The CA's distinguished name (Kuma's).
const DN: &[(DnType, &str)] = &[
    (DnType::OrganizationName, "Kuma"),
    (DnType::OrganizationalUnitName, "Mesh"),
    (DnType::CommonName, "Envoy Admin CA"),
];

/// Why the CA or a certificate could not be had (the store failed; the stored CA is
/// unreadable, or a certificate could not be issued). Messages name the CA.
pub type EnvoyAdminCaError = crate::self_signed::CaError;

pub use crate::self_signed::CertPair;

/// The zone's Envoy-admin CA.
#[derive(Debug)]
pub struct EnvoyAdminCa {
    ca: StoredCa,
}

impl EnvoyAdminCa {
    /// The zone's CA from `store`, created and stored (once, whichever caller comes first) when
    /// there is none.
    ///
    /// # Errors
    /// The store fails, or holds a CA that does not parse.
    pub async fn load_or_create(store: &dyn Store) -> Result<EnvoyAdminCa, EnvoyAdminCaError> {
        let ca = StoredCa::load_or_create(store, CA_KEY, NAME, DN, CA_VALIDITY).await?;
        Ok(EnvoyAdminCa { ca })
    }

    /// A CA from its PEM certificate and key (an operator's, or one exported from Kuma's
    /// `envoy-admin-ca` global secret).
    ///
    /// # Errors
    /// Either PEM does not parse.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<EnvoyAdminCa, EnvoyAdminCaError> {
        Ok(EnvoyAdminCa {
            ca: StoredCa::from_pem(NAME, cert_pem, key_pem)?,
        })
    }

    /// The PEM CA certificate (what the listener trusts client certificates with, and the zone
    /// verifies server certificates with).
    #[must_use]
    pub fn cert_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The zone CP's client certificate: SAN `DNS:kuma-cp`, client authentication.
    ///
    /// # Errors
    /// Signing fails.
    pub fn client_cert(&self) -> Result<CertPair, EnvoyAdminCaError> {
        let san = CLIENT_SAN
            .to_owned()
            .try_into()
            .map_err(|e| EnvoyAdminCaError::Certificate(format!("{NAME}: SAN: {e}")))?;
        self.ca.issue(
            CLIENT_SAN,
            vec![SanType::DnsName(san)],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            CERT_VALIDITY,
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
        self.ca.issue(
            &cn,
            addresses.iter().copied().map(SanType::IpAddress).collect(),
            vec![ExtendedKeyUsagePurpose::ServerAuth],
            CERT_VALIDITY,
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
        let stored = crate::self_signed::leaf_ca(DN, CA_VALIDITY).unwrap();
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
