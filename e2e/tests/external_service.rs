//! End to end (issue 37): a sidecar calls an ExternalService over TLS it originates.
//!
//! A local HTTPS server (its own CA, a certificate for `pay.test` only) stands for the payment
//! API outside the mesh. The zone has two ExternalServices for it: `pay` trusts that CA (a
//! Secret holds it) and names the server `pay.test`; `pay-wrong-ca` trusts another CA. The
//! `web` sidecar's plain-HTTP outbounds reach them through a real Envoy:
//! - through `pay`, the request arrives over TLS with SNI `pay.test` and is answered;
//! - through `pay-wrong-ca`, Envoy refuses the server's certificate: the server answers
//!   nothing and the app gets a 503;
//! - with the TrafficPermission removed, `pay` is no longer reachable (Kuma's rule without a
//!   ZoneEgress), and put back, it is again.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use umbra_e2e::{echo_app, envoy_binary, free_port, http_with, put_yaml, wait_until, Envoy, Zone};

#[path = "support/external_https.rs"]
mod external_https;
use external_https::{https_server, pki};

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

const ALLOW_ALL: &str = "type: TrafficPermission\nmesh: default\nname: allow-all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\n";

async fn get(out: SocketAddr) -> (u16, String) {
    match http_with(out, "GET", "/charge", None, &[]).await {
        Ok(r) => r,
        Err(e) => (0, e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_originates_tls_to_an_external_service() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (good, other) = (pki()?, pki()?);
    let server_port = free_port();
    let snis = Arc::new(Mutex::new(Vec::new()));
    let _server = https_server(server_port, &good, snis.clone()).await?;

    let zone = Zone::start("zone-1").await?;
    zone.apply(
        "/meshes/default",
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await?;
    for (name, ca) in [("pay-ca", &good.ca_pem), ("other-ca", &other.ca_pem)] {
        zone.apply(
            &format!("/meshes/default/secrets/{name}"),
            &format!(
                "type: Secret\nmesh: default\nname: {name}\ndata: {}\n",
                b64(ca)
            ),
        )
        .await?;
    }
    for (name, ca) in [("pay", "pay-ca"), ("pay-wrong-ca", "other-ca")] {
        zone.apply(
            &format!("/meshes/default/external-services/{name}"),
            &format!(
                "type: ExternalService\nmesh: default\nname: {name}\ntags: {{kuma.io/service: {name}, kuma.io/protocol: http}}\nnetworking:\n  address: 127.0.0.1:{server_port}\n  tls:\n    enabled: true\n    serverName: pay.test\n    caCert: {{secret: {ca}}}\n"
            ),
        )
        .await?;
    }
    zone.apply("/meshes/default/traffic-permissions/allow-all", ALLOW_ALL)
        .await?;
    let (inbound, app, out_pay, out_wrong) = (free_port(), free_port(), free_port(), free_port());
    let _app = echo_app(app, "web").await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/web",
        &format!(
            "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    tags: {{kuma.io/service: web, kuma.io/protocol: http}}\n  outbound:\n  - port: {out_pay}\n    tags: {{kuma.io/service: pay}}\n  - port: {out_wrong}\n    tags: {{kuma.io/service: pay-wrong-ca}}\n"
        ),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let sidecar = Envoy::start(&envoy, "default", "web", &dp).await?;
    let pay: SocketAddr = format!("127.0.0.1:{out_pay}").parse()?;
    let wrong: SocketAddr = format!("127.0.0.1:{out_wrong}").parse()?;

    // Through `pay`: TLS with SNI pay.test, answered.
    let reached = wait_until(Duration::from_secs(20), || async {
        get(pay).await == (200, "pay ok".to_owned())
    })
    .await;
    assert!(
        reached.is_ok(),
        "pay not reached: {:?}\n{}",
        get(pay).await,
        sidecar.log_tail()
    );
    assert!(
        snis.lock().unwrap().iter().all(|s| s == "pay.test"),
        "{:?}",
        snis.lock().unwrap()
    );

    // Through `pay-wrong-ca`: Envoy refuses the certificate; the server serves no request.
    let before = snis.lock().unwrap().len();
    for _ in 0..5 {
        let (status, body) = get(wrong).await;
        assert_eq!(
            status, 503,
            "a CA that did not sign the server's certificate: {body}"
        );
    }
    assert_eq!(
        snis.lock().unwrap().len(),
        before,
        "no TLS session completed with the wrong CA"
    );

    // Kuma's rule without a ZoneEgress: no TrafficPermission, no ExternalService.
    let (status, body) = zone
        .call(
            "DELETE",
            "/meshes/default/traffic-permissions/allow-all",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    let cut = wait_until(Duration::from_secs(20), || async {
        get(pay).await.0 == 503
    })
    .await;
    assert!(cut.is_ok(), "pay still reached: {:?}", get(pay).await);
    zone.apply("/meshes/default/traffic-permissions/allow-all", ALLOW_ALL)
        .await?;
    let back = wait_until(Duration::from_secs(20), || async {
        get(pay).await == (200, "pay ok".to_owned())
    })
    .await;
    assert!(back.is_ok(), "pay not reached again: {:?}", get(pay).await);

    drop(sidecar);
    zone.stop().await
}
