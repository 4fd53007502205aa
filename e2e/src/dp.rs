//! Reaching a zone's data-plane server as a DPP does: its CA and dataplane tokens
//! ([`DpServer`]) and a minimal HTTPS client for `POST /bootstrap` ([`https_post`]).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{call_json, dechunk};

/// How an Envoy reaches a zone's data-plane server: its address, the CA its TLS certificate
/// chains to (the zone's `GET /dp-server/ca.pem`) and the API that issues dataplane tokens
/// (the zone's own when standalone, the Global's when federated; loopback is admin there).
#[derive(Debug, Clone)]
pub struct DpServer {
    /// ADS (and `/bootstrap`) address.
    pub addr: SocketAddr,
    /// PEM CA certificate.
    pub ca_pem: String,
    /// API issuing dataplane tokens.
    pub issuer_api: SocketAddr,
    /// The other replicas' data-plane servers (a zone on PostgreSQL, issue 36): Envoys list
    /// them after `addr` in their ADS cluster, as the zone's own `POST /bootstrap` does.
    pub replicas: Vec<SocketAddr>,
}

impl DpServer {
    /// The data-plane server at `ads` of the zone whose API is `zone_api`, tokens from
    /// `issuer_api`.
    ///
    /// # Errors
    /// The zone's API does not give its CA.
    pub async fn of(
        zone_api: SocketAddr,
        ads: SocketAddr,
        issuer_api: SocketAddr,
    ) -> anyhow::Result<DpServer> {
        let (status, body) = call_json(zone_api, "GET", "/dp-server/ca.pem", None).await?;
        let ca_pem = body.as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(
            status == 200 && ca_pem.contains("BEGIN CERTIFICATE"),
            "GET /dp-server/ca.pem: {status} {body}"
        );
        Ok(DpServer {
            addr: ads,
            ca_pem,
            issuer_api,
            replicas: Vec::new(),
        })
    }

    /// This data-plane server, with the other replicas' (`others`) listed after it.
    #[must_use]
    pub fn with_replicas(mut self, others: &[SocketAddr]) -> Self {
        self.replicas = others.iter().copied().filter(|a| *a != self.addr).collect();
        self
    }

    /// A dataplane token for DPP `mesh.name`, valid for an hour.
    ///
    /// # Errors
    /// The issuer refused.
    pub async fn token(&self, mesh: &str, name: &str) -> anyhow::Result<String> {
        let body = serde_json::json!({"mesh": mesh, "name": name, "validFor": "1h"}).to_string();
        let (status, token) =
            call_json(self.issuer_api, "POST", "/tokens/dataplane", Some(&body)).await?;
        anyhow::ensure!(status == 200, "POST /tokens/dataplane: {status} {token}");
        Ok(token.as_str().unwrap_or_default().trim().to_owned())
    }
}

/// `POST path` with a JSON `body` to `addr` over TLS (HTTP/1.1, no ALPN, as a minimal client),
/// verifying the server as `server_name` with the PEM CA `ca_pem`: status, headers (lower-case
/// names) and body.
///
/// # Errors
/// A TLS or connection failure (an unverifiable certificate among them), a 10 s timeout.
pub async fn https_post(
    addr: SocketAddr,
    server_name: &str,
    ca_pem: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<(u16, Vec<(String, String)>, String)> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let name = rustls_pki_types::ServerName::try_from(server_name.to_owned())?;
    let fut = async {
        let tcp = TcpStream::connect(addr).await?;
        let mut tls = connector.connect(name, tcp).await?;
        let req = format!(
            "POST {path} HTTP/1.1\r\nhost: {server_name}:{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            addr.port(),
            body.len()
        );
        tls.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        // The server may end TLS without close_notify after `connection: close`.
        let _ = tls.read_to_end(&mut raw).await;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no HTTP status in {head:?}"))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_owned()
        };
        anyhow::Ok((status, headers, body))
    };
    tokio::time::timeout(Duration::from_secs(10), fut).await?
}
