//! A stand-in for an API outside the mesh, shared by the ExternalService tests: an HTTPS
//! server with its own CA and a certificate for `pay.test` only, answering `200 pay ok`.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{ExtendedKeyUsagePurpose, SanType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use umbra_pki::self_signed::{leaf_ca, StoredCa};

/// A CA and a server certificate for `pay.test` it signed.
pub struct Pki {
    /// The CA's certificate (PEM).
    pub ca_pem: String,
    /// The server's certificate (PEM).
    pub cert_pem: String,
    /// The server's key (PEM).
    pub key_pem: String,
}

pub fn pki() -> anyhow::Result<Pki> {
    let root = leaf_ca(
        &[(rcgen::DnType::CommonName, "pay test CA")],
        Duration::from_secs(3600),
    )?;
    let ca = StoredCa::from_pem("pay test CA", &root.cert_pem, &root.key_pem)?;
    let leaf = ca.issue(
        "pay.test",
        vec![SanType::DnsName("pay.test".try_into()?)],
        vec![ExtendedKeyUsagePurpose::ServerAuth],
        Duration::from_secs(3600),
    )?;
    Ok(Pki {
        ca_pem: root.cert_pem,
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
    })
}

/// An HTTPS server on `port` answering every request `200 pay ok`; records the SNI of each
/// TLS session it completed.
pub async fn https_server(
    port: u16,
    pki: &Pki,
    snis: Arc<Mutex<Vec<String>>>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes())?;
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, snis) = (acceptor.clone(), snis.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return; // the client refused our certificate
                };
                let sni = tls.get_ref().1.server_name().unwrap_or("").to_owned();
                snis.lock().unwrap().push(sni);
                // One request per connection (HTTP/1.1, keep-alive answered with close).
                let mut buf = vec![0u8; 8192];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = "pay ok";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    }))
}

/// `GET path` over HTTPS to `addr` with SNI `server_name`, trusting only `ca_pem`; the status
/// and the body (HTTP/1.1, `connection: close`).
pub async fn https_get(
    addr: std::net::SocketAddr,
    server_name: &str,
    ca_pem: &str,
    path: &str,
) -> anyhow::Result<(u16, String)> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, ServerName};
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from(server_name.to_owned())?;
    let mut tls =
        tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp)).await??;
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: {server_name}\r\nconnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Ok((status, body))
}
