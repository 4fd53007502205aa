//! End to end: Kuma's mTLS admin listener `kuma:envoy:admin` on a real Envoy whose Dataplane
//! address is not the admin's (127.0.0.2 here, one host; the multi-host tests put it on another
//! host): the zone reads `config_dump`, `stats` and `clusters` through it over HTTPS with its
//! `kuma-cp` client certificate; `/ready` answers in plaintext; a caller without a client
//! certificate, or with one from another CA, gets nothing; `_config` shows the listener with
//! its private key redacted.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rustls_pki_types::pem::PemObject as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use umbra_e2e::{envoy_binary, free_port, http, http_app, wait_until, AdsApi, Envoy, Zone};

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn dataplane(inbound: u16, app: u16) -> String {
    format!(
        "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 127.0.0.2\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: web, kuma.io/protocol: http}}\n"
    )
}

/// Send `GET path` over TLS to `addr` (server name `127.0.0.2`, trusting `ca_pem`), with
/// `client` as the client certificate; what came back (empty when the server refused).
async fn tls_get(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    client: Option<(String, String)>,
    path: &str,
) -> Vec<u8> {
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let Ok(tcp) = tokio::net::TcpStream::connect(addr).await else {
        return Vec::new();
    };
    let name = rustls_pki_types::ServerName::try_from("127.0.0.2").unwrap();
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return Vec::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n");
    if tls.write_all(request.as_bytes()).await.is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zone_reads_an_envoy_admin_through_the_mtls_listener() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let zone = Zone::start("zone-a").await?;
    zone.apply("/meshes/default", MESH).await?;
    let (app, inbound) = (free_port(), free_port());
    let _app = http_app(app, "hello from web", Duration::ZERO).await?;
    let dp = zone.dp_server().await?;
    let web = Envoy::start_with(
        &envoy_bin,
        "default",
        "web",
        &dp,
        Some(&dataplane(inbound, app)),
        AdsApi::Sotw,
    )
    .await?;
    // The listener binds the Dataplane's address on the admin's port.
    let listener: std::net::SocketAddr = format!("127.0.0.2:{}", web.admin.port()).parse()?;
    let through = wait_until(Duration::from_secs(30), || async {
        matches!(
            zone.call("GET", "/meshes/default/dataplanes/web/clusters", None).await,
            Ok((200, v)) if v.as_str().is_some_and(|t| t.contains("kuma:envoy:admin::"))
        )
    })
    .await;
    let (status, body) = zone
        .call("GET", "/meshes/default/dataplanes/web/clusters", None)
        .await?;
    anyhow::ensure!(
        through.is_ok(),
        "the zone reads /clusters through {listener}: {status} {body}\n{}",
        web.log_tail()
    );
    let (status, dump) = zone
        .call("GET", "/meshes/default/dataplanes/web/xds", None)
        .await?;
    assert_eq!(status, 200, "{dump}");
    let text = dump.to_string();
    assert!(text.contains("kuma:envoy:admin"), "{text:.400}");
    let (status, stats) = zone
        .call(
            "GET",
            "/meshes/default/dataplanes/web/stats?format=json",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{stats}");
    // The zone's calls went through the listener's HTTP connection manager.
    let through_listener = stats["stats"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "http.kuma_envoy_admin.downstream_rq_2xx")
        .and_then(|s| s["value"].as_u64());
    assert!(
        through_listener >= Some(2),
        "requests through kuma:envoy:admin: {through_listener:?}"
    );

    // `_config` shows the listener, its private key redacted.
    let (status, config) = zone
        .call("GET", "/meshes/default/dataplanes/web/_config", None)
        .await?;
    assert_eq!(status, 200, "{config}");
    let listener_doc =
        &config["xds"]["type.googleapis.com/envoy.config.listener.v3.Listener"]["kuma:envoy:admin"];
    assert_eq!(
        listener_doc["address"]["socketAddress"],
        serde_json::json!({"address": "127.0.0.2", "portValue": web.admin.port()}),
        "{listener_doc}"
    );
    let tls =
        &listener_doc["filterChains"][1]["transportSocket"]["typedConfig"]["commonTlsContext"];
    assert_eq!(
        tls["tlsCertificates"][0]["privateKey"],
        serde_json::json!({"inlineString": "[redacted]"}),
        "{tls}"
    );
    assert!(!config.to_string().contains("PRIVATE KEY"));
    let ca_pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD.decode(
            tls["validationContext"]["trustedCa"]["inlineBytes"]
                .as_str()
                .unwrap_or_default(),
        )?,
    )?;
    assert!(ca_pem.contains("BEGIN CERTIFICATE"), "{tls}");

    // Plaintext: `/ready` only.
    let (status, ready) = http(listener, "GET", "/ready", None).await?;
    assert_eq!((status, ready.trim()), (200, "LIVE"));
    let (status, _) = http(listener, "GET", "/config_dump", None).await?;
    assert_eq!(status, 404, "plaintext reaches /ready only");
    // TLS without a client certificate, or with one from another CA (with the right SAN):
    // nothing.
    let refused = tls_get(listener, &ca_pem, None, "/config_dump").await;
    assert!(
        !String::from_utf8_lossy(&refused).contains("configs"),
        "no client certificate: {}",
        String::from_utf8_lossy(&refused)
    );
    let other = rcgen::generate_simple_self_signed(vec!["kuma-cp".to_owned()])?;
    let stranger = tls_get(
        listener,
        &ca_pem,
        Some((other.cert.pem(), other.signing_key.serialize_pem())),
        "/config_dump",
    )
    .await;
    assert!(
        !String::from_utf8_lossy(&stranger).contains("configs"),
        "a client certificate of another CA: {}",
        String::from_utf8_lossy(&stranger)
    );
    // The admin itself is on the proxy host's loopback only.
    assert_eq!(web.admin.ip().to_string(), "127.0.0.1");
    drop(web);
    zone.stop().await
}
