//! The TLS material of one replica's inter-CP server and client: the replicas' CA from the
//! store ([`umbra_pki::inter_cp::InterCpCa`]) and this replica's certificate for its advertised
//! host, as tonic's server configuration (client certificate from the CA required) and client
//! configuration (only the CA trusted, this replica's certificate presented).

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};
use umbra_pki::inter_cp::InterCpCa;
use umbra_pki::self_signed::CaError;

use crate::store::Store;

/// Longest TLS handshake either end waits for.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// One replica's inter-CP TLS configuration. `Debug` shows no key.
#[derive(Clone)]
pub struct InterCpTls {
    ca: Certificate,
    identity: Identity,
}

impl std::fmt::Debug for InterCpTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InterCpTls { .. }")
    }
}

impl InterCpTls {
    /// The CA from `store` (created there when none) and a new certificate for `host` (the
    /// advertised host: an IP address or a DNS name).
    ///
    /// # Errors
    /// [`CaError`]: the store fails or holds an unreadable CA, or `host` cannot be a SAN.
    pub async fn load(store: &dyn Store, host: &str) -> Result<InterCpTls, CaError> {
        let ca = InterCpCa::load_or_create(store).await?;
        Self::issue(&ca, host)
    }

    /// [`InterCpTls::load`] with a given CA.
    ///
    /// # Errors
    /// [`CaError::Certificate`]: `host` cannot be a SAN, or signing fails.
    pub fn issue(ca: &InterCpCa, host: &str) -> Result<InterCpTls, CaError> {
        let own = ca.replica_cert(host)?;
        Ok(InterCpTls {
            ca: Certificate::from_pem(ca.cert_pem()),
            identity: Identity::from_pem(own.cert_pem, own.key_pem),
        })
    }

    /// The server's configuration: this replica's certificate, and a client certificate from
    /// the CA required of every caller.
    pub fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
            .client_auth_optional(false)
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// The client's configuration (the host to verify is set per peer): only the CA trusted,
    /// this replica's certificate presented.
    pub fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone())
            .timeout(HANDSHAKE_TIMEOUT)
    }
}
