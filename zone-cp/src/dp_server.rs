//! The data-plane server (issue 15; Kuma 2.7's `pkg/dp-server`): one port serving ADS (gRPC)
//! and the kuma-dp bootstrap endpoint (`POST /bootstrap`, [`crate::bootstrap`]) over TLS.
//!
//! The certificate is the operator's (`--dp-server-tls-cert-file`/`--dp-server-tls-key-file`)
//! or one the zone issues at start from its own CA: a self-signed ECDSA P-256 root created on
//! first start and kept in the zone's store (durable with `--data-dir`, so DPPs keep trusting
//! it across restarts), the server certificate carrying the names of `--dp-server-hostname`
//! (default `localhost`), `127.0.0.1`, `::1`, the bind address and a replica's
//! `--advertised-xds-address`. The CA certificate is what
//! DPPs verify the server with: kuma-dp's `--ca-cert-file`, the zone API's
//! `GET /dp-server/ca.pem`, and the Envoy bootstraps the zone hands out.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde::{Deserialize, Serialize};
use umbra_store::{Store, StoreError};

use umbra_pki::mesh_ca::offset;

/// Store key of the zone's data-plane-server CA (JSON `{"certPem", "keyPem"}`).
pub const CA_KEY: &str = "dp-server-ca";

/// Lifetime of the generated CA (10 years).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Lifetime of a generated server certificate (1 year; a new one is issued on every start).
pub const SERVER_CERT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// The TLS material of the data-plane server. `Debug` never shows the key.
#[derive(Clone)]
pub struct DpServerTls {
    /// PEM CA certificate DPPs trust.
    pub ca_pem: String,
    /// PEM server certificate chain.
    pub cert_pem: String,
    /// PEM private key of the server certificate.
    pub key_pem: String,
    /// A name the certificate is valid for (the SNI Envoy bootstraps use).
    pub server_name: String,
}

impl std::fmt::Debug for DpServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DpServerTls {{ server_name: {:?}, .. }}",
            self.server_name
        )
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCa {
    cert_pem: String,
    key_pem: String,
}

fn fail(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("data-plane server CA: {what}: {e}"))
}

fn new_ca(zone: &str) -> Result<StoredCa, StoreError> {
    let ca = umbra_pki::self_signed::leaf_ca(
        &[
            (DnType::OrganizationName, "Umbra"),
            (DnType::CommonName, &format!("{zone} data-plane server CA")),
        ],
        CA_VALIDITY,
    )
    .map_err(|e| fail("CA", e))?;
    Ok(StoredCa {
        cert_pem: ca.cert_pem,
        key_pem: ca.key_pem,
    })
}

/// The zone's CA (created and stored on first call) and a fresh server certificate it signs
/// for `hostnames` (DNS names or IP addresses; the first is the server name).
///
/// # Errors
/// [`StoreError`] when the store fails or holds an unreadable CA.
pub async fn generated(
    store: &dyn Store,
    zone: &str,
    hostnames: &[String],
) -> Result<DpServerTls, StoreError> {
    let fresh = serde_json::to_vec(&new_ca(zone)?).map_err(|e| fail("encode", e))?;
    let bytes = store.signing_key(CA_KEY, fresh).await?;
    let ca: StoredCa = serde_json::from_slice(&bytes).map_err(|e| fail("decode", e))?;
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| fail("key", e))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(|e| fail("cert", e))?;
    let now = SystemTime::now();
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        hostnames.first().cloned().unwrap_or_default(),
    );
    params.distinguished_name = dn;
    params.subject_alt_names = hostnames
        .iter()
        .map(|h| match h.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => h
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| fail("hostname", e)),
        })
        .collect::<Result<_, _>>()?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = offset(now - Duration::from_secs(300));
    params.not_after = offset(now + SERVER_CERT_VALIDITY);
    let key = KeyPair::generate().map_err(|e| fail("server key", e))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| fail("server cert", e))?;
    Ok(DpServerTls {
        ca_pem: ca.cert_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        server_name: hostnames
            .first()
            .cloned()
            .unwrap_or_else(|| "localhost".into()),
    })
}

/// The names a generated certificate carries: `hostname` first, then `localhost`,
/// `127.0.0.1`, `::1` and `bind` when it is a specific address.
pub fn certificate_names(hostname: &str, bind: IpAddr) -> Vec<String> {
    let mut out = vec![hostname.to_owned()];
    for extra in ["localhost".to_owned(), "127.0.0.1".into(), "::1".into()]
        .into_iter()
        .chain((!bind.is_unspecified()).then(|| bind.to_string()))
    {
        if !out.contains(&extra) {
            out.push(extra);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ca_is_kept_and_signs_a_new_server_certificate_each_start() {
        let store = umbra_store::memory::MemoryStore::new();
        let names = certificate_names("zone-1-cp", "0.0.0.0".parse().unwrap());
        assert_eq!(names, ["zone-1-cp", "localhost", "127.0.0.1", "::1"]);
        let a = generated(&store, "zone-1", &names).await.unwrap();
        let b = generated(&store, "zone-1", &names).await.unwrap();
        assert_eq!(a.ca_pem, b.ca_pem, "the CA is created once");
        assert_ne!(a.cert_pem, b.cert_pem);
        assert_eq!(a.server_name, "zone-1-cp");
        assert!(!format!("{a:?}").contains("PRIVATE KEY"));
        // That the server certificate chains to the CA is checked by real Envoy over TLS in
        // the e2e tests (e2e/tests/trust.rs).
    }
}

/// Longest a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server (bounded; the accept loop waits when full).
const ACCEPT_QUEUE: usize = 64;

/// TLS handshakes in progress at once; the accept loop waits for a slot beyond that.
pub const MAX_HANDSHAKES: usize = 1024;

/// A TLS server configuration for `tls` offering ALPN `h2` (Envoy's ADS, Go's kuma-dp) and
/// `http/1.1` (a bootstrap client without HTTP/2).
///
/// # Errors
/// An unreadable certificate chain or key.
pub fn server_config(tls: &DpServerTls) -> anyhow::Result<tokio_rustls::rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject as _;
    let chain = rustls_pki_types::CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("data-plane server certificate: {e}"))?;
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("data-plane server key: {e}"))?;
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(
        std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()),
    )
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// TLS connections accepted on `listener` with `tls`, each handshake on its own task (at most
/// [`MAX_HANDSHAKES`] at once, each within [`HANDSHAKE_TIMEOUT`]; a failed one is logged and
/// dropped), until `stop` turns `true`.
///
/// # Errors
/// An unusable certificate ([`server_config`]).
pub fn tls_incoming(
    listener: tokio::net::TcpListener,
    tls: &DpServerTls,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<
    tokio_stream::wrappers::ReceiverStream<
        std::io::Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>,
    >,
> {
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server_config(tls)?));
    let (tx, rx) = tokio::sync::mpsc::channel(ACCEPT_QUEUE);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    use tracing::Instrument as _;
    let accept = async move {
        let stopped = umbra_runtime::process::stopped(stop);
        tokio::pin!(stopped);
        loop {
            let (tcp, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "data-plane server: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut stopped => return,
            };
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            let handshake = async move {
                let _slot = slot;
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => {
                        tracing::info!(%peer, error = %e, "data-plane server: TLS handshake failed")
                    }
                    Err(_) => tracing::info!(%peer, "data-plane server: TLS handshake timed out"),
                }
            };
            // Each connection is a trace of its own, not part of the accept loop's.
            let span = tracing::info_span!("dp_server.handshake", %peer);
            umbra_runtime::process::set_parent_or_root(&span, &Default::default());
            tokio::spawn(handshake.instrument(span));
        }
    };
    tokio::spawn(accept.instrument(tracing::info_span!("dp_server.accept")));
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// What the bootstrap endpoint needs.
#[derive(Debug, Clone)]
pub struct BootstrapState {
    /// The zone store (the DPP's Dataplane when kuma-dp sends none).
    pub store: crate::store::Store,
    /// Dataplane-token checks ([`crate::dp_auth`]).
    pub gate: crate::dp_auth::Gate,
    /// The CA DPPs trust (put in bootstraps when kuma-dp sends no `caCert`).
    pub ca_pem: String,
    /// The data-plane server's port (when the request's `Host` names none).
    pub port: u16,
    /// `--bootstrap-xds-host`: the ADS host bootstraps name instead of the request's.
    pub xds_host: Option<String>,
    /// `--bootstrap-xds-port`: the ADS port bootstraps name instead of the request's.
    pub xds_port: Option<u16>,
    /// With `--store postgres`: the zone's replicas, whose data-plane servers bootstraps list.
    pub replicas: Option<std::sync::Arc<dyn umbra_postgres::replicas::Coordinator>>,
}

/// The HTTP routes of the data-plane server: `POST /bootstrap`.
pub fn router(state: BootstrapState) -> axum::Router {
    axum::Router::new()
        .route("/bootstrap", axum::routing::post(bootstrap))
        .with_state(state)
}

/// `(host, port)` of a `Host` header value (`name`, `name:port`, `[v6]:port`).
fn split_host(host: &str, default_port: u16) -> (String, u16) {
    if let Some(rest) = host.strip_prefix('[') {
        if let Some((ip, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
            return (ip.to_owned(), port.unwrap_or(default_port));
        }
    }
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h.to_owned(), p.parse().unwrap_or(default_port)),
        _ => (host.to_owned(), default_port),
    }
}

/// `POST /bootstrap` (kuma-dp 2.7's request and answer, [`crate::bootstrap`]): checks the
/// request (400 with the fields), the dataplane token (401, or 403 for a token bound to
/// another DPP), finds the Dataplane (the request's, else the zone's; 404 when neither) and
/// answers the Envoy bootstrap that reaches ADS at `--bootstrap-xds-host`/`--bootstrap-xds-port`
/// where set, else at the address this request came to.
async fn bootstrap(
    axum::extract::State(st): axum::extract::State<BootstrapState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<axum::response::Response, umbra_api::error::ApiError> {
    use axum::response::IntoResponse as _;
    use umbra_api::error::ApiError;
    let req: crate::bootstrap::BootstrapRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_parameter(
            "body",
            format!("expected kuma-dp's bootstrap request (JSON): {e}"),
        )
    })?;
    let carried = req.validate().map_err(|e| {
        let mut err = ApiError::bad_parameter(
            e.0.first().map_or("body", |(f, _)| f.as_str()),
            e.to_string(),
        );
        err.detail = e.to_string();
        err
    })?;
    // A zone ingress's key has an empty mesh (its bootstrap request has none); a zone egress's
    // is `DpKey::zone_egress`.
    let egress = req.proxy_type == "egress";
    let key = if egress {
        umbra_core::dataplane::DpKey::zone_egress(req.name.as_str())
    } else {
        umbra_core::dataplane::DpKey::new(req.mesh.as_str(), req.name.as_str())
    };
    let stored_key = if req.proxy_type == "ingress" || egress {
        umbra_core::resource::ResourceKey {
            ty: if egress {
                umbra_core::resource::ResourceType::ZoneEgress
            } else {
                umbra_core::resource::ResourceType::ZoneIngress
            },
            mesh: String::new(),
            name: req.name.clone(),
        }
    } else {
        umbra_core::resource::ResourceKey::dataplane(req.mesh.as_str(), req.name.clone())
    };
    let dataplane = carried.or_else(|| st.store.get(&stored_key).map(|s| s.resource));
    let token = (!req.dataplane_token.trim().is_empty()).then(|| req.dataplane_token.trim());
    st.gate
        .check(token, &key, dataplane.as_ref().and_then(|d| d.as_dataplane()))
        .map_err(|status| {
            let code = if status.code() == tonic::Code::PermissionDenied {
                axum::http::StatusCode::FORBIDDEN
            } else {
                axum::http::StatusCode::UNAUTHORIZED
            };
            tracing::warn!(mesh = %key.mesh, dataplane = %key.name, reason = %status.message(), "bootstrap refused");
            ApiError::status(code, status.message())
        })?;
    let dataplane = dataplane.ok_or_else(|| {
        ApiError::not_found(format!(
            "{} {} not found: create it on the zone first, or send it in the request (kuma-dp run --dataplane-file)",
            stored_key.ty, stored_key
        ))
    })?;
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))
        .unwrap_or_else(|| "localhost".into());
    let (request_host, request_port) = split_host(&host, st.port);
    let ads_host = st.xds_host.clone().unwrap_or(request_host);
    let ads_port = st.xds_port.unwrap_or(request_port);
    let replicas = match &st.replicas {
        // The others: this one is `ads_host` already, as the request reached it (its
        // registered address may name it differently, an IP for a name).
        Some(c) => match c.replicas().await {
            Ok(all) => {
                let me = c.me().map(|m| m.id);
                all.into_iter()
                    .filter(|r| r.alive && !r.xds.is_empty() && Some(r.id) != me)
                    .map(|r| split_host(&r.xds, st.port))
                    .collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, "bootstrap: cannot list the zone's replicas; naming this one only");
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let answer = crate::bootstrap::generate(
        &req,
        &dataplane,
        &crate::bootstrap::BootstrapParams {
            ads_host,
            ads_port,
            ca_pem: st.ca_pem.clone(),
            replicas,
        },
    );
    let ignored = req.not_acted_on();
    tracing::info!(mesh = %key.mesh, dataplane = %key.name, not_acted_on = ?ignored, "bootstrap served");
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/json"),
            (
                axum::http::HeaderName::from_static(crate::bootstrap::VERSION_HEADER),
                "3",
            ),
        ],
        axum::Json(answer),
    )
        .into_response())
}

#[cfg(test)]
mod host_tests {
    use super::split_host;

    #[test]
    fn host_headers_split() {
        assert_eq!(split_host("zone-1-cp:5678", 1), ("zone-1-cp".into(), 5678));
        assert_eq!(split_host("zone-1-cp", 1), ("zone-1-cp".into(), 1));
        assert_eq!(split_host("[::1]:5678", 1), ("::1".into(), 5678));
        assert_eq!(split_host("127.0.0.1:9", 1), ("127.0.0.1".into(), 9));
    }
}
