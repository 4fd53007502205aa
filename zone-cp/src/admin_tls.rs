//! The zone's side of the mTLS Envoy admin listener (Kuma 2.7 `pkg/envoy/admin/tls`,
//! `pkg/xds/sync/dataplane_watchdog.go` `getEnvoyAdminMTLS`, `pkg/envoy/admin/client.go`):
//! the Envoy-admin CA kept in the zone's store ([`umbra_pki::envoy_admin`]), the server
//! certificate each proxy's `kuma:envoy:admin` listener presents (one per proxy address,
//! issued once per process and reused, so a proxy's config stays stable), and the HTTPS client
//! the zone reads admins with: client certificate `DNS:kuma-cp`, server verified against the
//! CA and the proxy's address (an IP SAN), no proxy from the environment, no redirects.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use umbra_pki::envoy_admin::{EnvoyAdminCa, EnvoyAdminCaError};
use umbra_xds::base::admin::EnvoyAdmin;

/// The zone's Envoy-admin CA, the certificates issued from it and the client that uses them.
pub struct AdminTls {
    ca: EnvoyAdminCa,
    client: reqwest::Client,
    /// Per `(proxy address, admin port)`: the admin input the generator takes. Read by every
    /// regenerated DPP of a pass (in parallel), written once per new address.
    inputs: RwLock<HashMap<(IpAddr, u16), Arc<EnvoyAdmin>>>,
    /// With zone CP replicas: the shared store that keeps the server certificates, so every
    /// replica serves a proxy the same one ([`crate::store::Store::shared_certificate`]).
    shared: Option<crate::store::Store>,
}

impl std::fmt::Debug for AdminTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminTls { .. }")
    }
}

impl AdminTls {
    /// The zone's CA from `store` (created on first start), its client certificate and the
    /// HTTPS client, whose connections open within `connect_timeout`.
    ///
    /// # Errors
    /// The store fails or holds an unreadable CA, or the client cannot be built.
    pub async fn load(
        store: &dyn umbra_store::Store,
        connect_timeout: std::time::Duration,
    ) -> Result<AdminTls, EnvoyAdminCaError> {
        let ca = EnvoyAdminCa::load_or_create(store).await?;
        Self::with_ca(ca, connect_timeout)
    }

    /// [`AdminTls::load`] with a given CA.
    ///
    /// # Errors
    /// The client certificate or the client cannot be made.
    pub fn with_ca(
        ca: EnvoyAdminCa,
        connect_timeout: std::time::Duration,
    ) -> Result<AdminTls, EnvoyAdminCaError> {
        let bad = |e: reqwest::Error| {
            EnvoyAdminCaError::Certificate(format!("Envoy-admin CA: client: {e}"))
        };
        let client_cert = ca.client_cert()?;
        let identity = reqwest::Identity::from_pem(
            format!("{}{}", client_cert.cert_pem, client_cert.key_pem).as_bytes(),
        )
        .map_err(bad)?;
        let root = reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).map_err(bad)?;
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .add_root_certificate(root)
            .identity(identity)
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(bad)?;
        Ok(AdminTls {
            ca,
            client,
            inputs: RwLock::new(HashMap::new()),
            shared: None,
        })
    }

    /// Take server certificates from (and give new ones to) `store` when it is shared by
    /// replicas of the zone.
    #[must_use]
    pub fn with_store(mut self, store: &crate::store::Store) -> Self {
        self.shared = store.is_shared().then(|| store.clone());
        self
    }

    /// The HTTPS client with the zone's client certificate.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The admin input of a proxy at `address` (an IP; its `networking.address`) whose admin
    /// listens on `port`: the CA and a server certificate for `address`, issued on first use.
    /// `None` when `address` is not an IP address (Kuma's certificates carry IP SANs only) or
    /// the certificate cannot be issued (logged).
    pub fn input(&self, address: &str, port: u16) -> Option<Arc<EnvoyAdmin>> {
        let ip: IpAddr = address.parse().ok()?;
        let key = (ip, port);
        if let Some(found) = self
            .inputs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Some(found.clone());
        }
        let issue = || {
            self.ca
                .server_cert(&[ip])
                .inspect_err(
                    |e| tracing::warn!(%address, error = %e, "no Envoy-admin server certificate"),
                )
                .ok()
                .map(|c| (c.cert_pem, c.key_pem))
        };
        let (cert_pem, key_pem) = match &self.shared {
            Some(store) => {
                store.shared_certificate(crate::store::ADMIN_CERTS_KEY, &ip.to_string(), issue)
            }
            None => issue(),
        }?;
        let input = Arc::new(EnvoyAdmin {
            port,
            ca_pem: self.ca.cert_pem().to_owned(),
            cert_pem,
            key_pem,
        });
        Some(
            self.inputs
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_insert(input)
                .clone(),
        )
    }
}

/// Where a proxy's admin input comes from: its admin port as its Envoy reported it, and the
/// certificates of [`AdminTls`]. The reconciler and inspect share one, so the Live snapshot a
/// proxy is served and the views inspect generates carry the same admin resources.
#[derive(Debug, Clone)]
pub struct AdminLookup {
    /// Admin ports reported by Envoys.
    pub insights: Arc<crate::insight::Insights>,
    /// The certificates.
    pub tls: Arc<AdminTls>,
}

impl AdminLookup {
    /// The admin input of proxy `(mesh, name)` (`mesh` empty: a ZoneIngress) at `address`:
    /// `None` until one of its Envoys connected, or when `address` is not an IP address.
    pub fn input(&self, mesh: &str, name: &str, address: &str) -> Option<Arc<EnvoyAdmin>> {
        let port = self.insights.admin_port(mesh, name)?;
        self.tls.input(address, port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inputs_are_issued_once_per_address_and_port() {
        let store = umbra_store::memory::MemoryStore::new();
        let tls = AdminTls::load(&store, std::time::Duration::from_secs(1))
            .await
            .unwrap();
        let a = tls.input("10.0.0.1", 9901).unwrap();
        assert!(Arc::ptr_eq(&a, &tls.input("10.0.0.1", 9901).unwrap()));
        assert!(!Arc::ptr_eq(&a, &tls.input("10.0.0.2", 9901).unwrap()));
        assert_eq!(tls.input("10.0.0.1", 9902).unwrap().port, 9902);
        assert!(tls.input("backend.local", 9901).is_none());
        let again = AdminTls::load(&store, std::time::Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(
            again.input("10.0.0.1", 9901).unwrap().ca_pem,
            a.ca_pem,
            "the CA is kept in the store"
        );
    }
}
