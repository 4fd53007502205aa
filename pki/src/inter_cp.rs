//! The Global replicas' inter-CP CA and the certificate each replica issues itself from it
//! (Kuma 2.7 `pkg/intercp`: "inter-cp-ca", one CA kept in the store every replica shares).
//!
//! Replicas on one store agree on the CA: the first to start creates it and stores it under
//! [`CA_KEY`] ([`umbra_store::Store::signing_key`] keeps the first one stored); the others read
//! it. Each replica then issues itself one certificate per start ([`InterCpCa::replica_cert`]):
//! SAN its advertised host (an IP address or a DNS name), usable both as a server and as a
//! client certificate, since a replica's inter-CP server requires a client certificate from the
//! CA and its client verifies the server against the CA and the host it dials. Rotation: replace
//! the stored CA and restart every replica.

use std::net::IpAddr;
use std::time::Duration;

use rcgen::{DnType, ExtendedKeyUsagePurpose, SanType};
use umbra_store::Store;

use crate::self_signed::{CaError, CertPair, StoredCa};

/// Store key of the inter-CP CA (JSON `{"certPem", "keyPem"}`).
pub const CA_KEY: &str = "inter-cp-ca";

/// Lifetime of the CA (10 years, as the other CAs a CP keeps).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Lifetime of a replica's certificate (10 years: it lives as long as the process that
/// issued it, which issues a new one on every start).
pub const CERT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The CA's name in errors.
const NAME: &str = "inter-CP CA";

/// The CA's distinguished name.
const DN: &[(DnType, &str)] = &[
    (DnType::OrganizationName, "Umbra"),
    (DnType::OrganizationalUnitName, "Global"),
    (DnType::CommonName, "Inter-CP CA"),
];

/// The Global replicas' inter-CP CA.
#[derive(Debug)]
pub struct InterCpCa {
    ca: StoredCa,
}

impl InterCpCa {
    /// The CA from `store`, created and stored (once, whichever replica comes first) when there
    /// is none.
    ///
    /// # Errors
    /// [`CaError::Store`] when the store fails; [`CaError::Certificate`] when it holds a CA
    /// that does not parse.
    pub async fn load_or_create(store: &dyn Store) -> Result<InterCpCa, CaError> {
        Ok(InterCpCa {
            ca: StoredCa::load_or_create(store, CA_KEY, NAME, DN, CA_VALIDITY).await?,
        })
    }

    /// The PEM CA certificate: what a replica trusts its peers' certificates with.
    #[must_use]
    pub fn cert_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// A replica's certificate for `host`, the host part of its advertised inter-CP address:
    /// an IP SAN for an IP address, else a DNS SAN; extended key usages server and client
    /// authentication.
    ///
    /// # Errors
    /// [`CaError::Certificate`]: `host` is neither an IP address nor a valid DNS name, or
    /// signing fails.
    pub fn replica_cert(&self, host: &str) -> Result<CertPair, CaError> {
        let bad = |why: String| CaError::Certificate(format!("{NAME}: SAN {host:?}: {why}"));
        let san = match host.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) if dns_name(host) => SanType::DnsName(
                host.to_owned()
                    .try_into()
                    .map_err(|e| bad(format!("{e}")))?,
            ),
            Err(_) => return Err(bad("neither an IP address nor a DNS name".into())),
        };
        self.ca.issue(
            host,
            vec![san],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            CERT_VALIDITY,
        )
    }
}

/// `true` for a DNS name: at most 253 characters of dot-separated labels, each 1 to 63
/// letters, digits and `-`, not starting or ending with `-`.
fn dns_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sans_and_usages(pem: &str) -> (String, String) {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let names = cert.subject_alternative_name().unwrap().unwrap();
        let usage = cert.extended_key_usage().unwrap().unwrap();
        (
            format!("{:?}", names.value.general_names),
            format!(
                "server={} client={}",
                usage.value.server_auth, usage.value.client_auth
            ),
        )
    }

    #[tokio::test]
    async fn replicas_on_one_store_share_one_ca() {
        let store = umbra_store::memory::MemoryStore::new();
        let a = InterCpCa::load_or_create(&store).await.unwrap();
        let b = InterCpCa::load_or_create(&store).await.unwrap();
        assert_eq!(a.cert_pem(), b.cert_pem());
        let other = InterCpCa::load_or_create(&umbra_store::memory::MemoryStore::new())
            .await
            .unwrap();
        assert_ne!(a.cert_pem(), other.cert_pem());
    }

    #[tokio::test]
    async fn a_replica_certificate_names_its_host_and_serves_both_ends() {
        let ca = InterCpCa::load_or_create(&umbra_store::memory::MemoryStore::new())
            .await
            .unwrap();
        let ip = ca.replica_cert("10.0.0.7").unwrap();
        assert_eq!(
            sans_and_usages(&ip.cert_pem),
            (
                "[IPAddress([10, 0, 0, 7])]".to_owned(),
                "server=true client=true".to_owned()
            )
        );
        let dns = ca.replica_cert("global-2.internal").unwrap();
        assert_eq!(
            sans_and_usages(&dns.cert_pem).0,
            "[DNSName(\"global-2.internal\")]"
        );
        for bad in ["not a host", "", "-x.example", "a..b", "host:5682"] {
            assert!(ca.replica_cert(bad).is_err(), "{bad:?}");
        }
        assert!(!format!("{dns:?}").contains("PRIVATE"));
    }
}
