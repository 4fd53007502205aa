//! End to end (issue 37): a sidecar reaches an ExternalService through its zone's ZoneEgress,
//! which originates the TLS, with real Envoys for both.
//!
//! The mesh has mTLS and `routing.zoneEgress: true`. A local HTTPS server (its own CA, a
//! certificate for `pay.test`) stands for the payment API; ExternalService `pay` trusts that
//! CA and names the server `pay.test`. The `web` sidecar's plain-HTTP outbound to `pay` goes to
//! the egress over the mesh's mTLS, and:
//! - with no permission naming `pay`, the egress denies it (403, counted by the egress's RBAC
//!   filter), as Kuma 2.7 does;
//! - a MeshTrafficPermission letting `web` reach `pay`, in shadow, shows in the egress's
//!   `_config?shadow=true&include=diff` and changes nothing; promoted, the request arrives at
//!   the server over TLS with SNI `pay.test` and is answered, counted on the egress's
//!   `default_pay` cluster;
//! - with `routing.zoneEgress` switched off (and an old TrafficPermission, Kuma's rule for
//!   sidecars reaching ExternalServices themselves), the sidecar reaches the server itself (the
//!   egress sees nothing more), and switched back on, through the egress again.

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

fn mesh(egress: bool) -> String {
    format!("type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\nrouting: {{zoneEgress: {egress}}}\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n")
}

async fn get(out: SocketAddr) -> (u16, String) {
    match http_with(out, "GET", "/charge", None, &[]).await {
        Ok(r) => r,
        Err(e) => (0, e.to_string()),
    }
}

/// The value of counter `name` in the Envoy whose admin is `admin` (0 when absent).
async fn counter(admin: SocketAddr, name: &str) -> u64 {
    let Ok((_, body)) =
        http_with(admin, "GET", &format!("/stats?filter=^{name}$"), None, &[]).await
    else {
        return 0;
    };
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

const DENIED: &str = "http.pay.rbac.denied";
const ANSWERED: &str = "cluster.default_pay.upstream_rq_200";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_reaches_an_external_service_through_the_zone_egress() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let pki = pki()?;
    let server_port = free_port();
    let snis = Arc::new(Mutex::new(Vec::new()));
    let _server = https_server(server_port, &pki, snis.clone()).await?;

    let zone = Zone::start("zone-1").await?;
    zone.apply("/meshes/default", &mesh(true)).await?;
    zone.apply(
        "/meshes/default/secrets/pay-ca",
        &format!(
            "type: Secret\nmesh: default\nname: pay-ca\ndata: {}\n",
            b64(&pki.ca_pem)
        ),
    )
    .await?;
    zone.apply(
        "/meshes/default/external-services/pay",
        &format!(
            "type: ExternalService\nmesh: default\nname: pay\ntags: {{kuma.io/service: pay, kuma.io/protocol: http}}\nnetworking:\n  address: 127.0.0.1:{server_port}\n  tls:\n    enabled: true\n    serverName: pay.test\n    caCert: {{secret: pay-ca}}\n"
        ),
    )
    .await?;
    let egress_port = free_port();
    zone.apply(
        "/zoneegresses/egress",
        &format!("type: ZoneEgress\nname: egress\nnetworking: {{address: 127.0.0.1, port: {egress_port}}}\n"),
    )
    .await?;
    let (inbound, app, out_pay) = (free_port(), free_port(), free_port());
    let _app = echo_app(app, "web").await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/web",
        &format!(
            "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    tags: {{kuma.io/service: web, kuma.io/protocol: http}}\n  outbound:\n  - port: {out_pay}\n    tags: {{kuma.io/service: pay}}\n"
        ),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let (status, token) = zone
        .call(
            "POST",
            "/tokens/zone-ingress",
            Some(r#"{"zone": "zone-1", "scope": ["egress"], "validFor": "1h"}"#),
        )
        .await?;
    anyhow::ensure!(status == 200, "egress token: {status} {token}");
    let egress = Envoy::start_zone_proxy(
        &envoy,
        "egress",
        "egress",
        &dp,
        token.as_str().unwrap_or_default().trim(),
    )?;
    let sidecar = Envoy::start(&envoy, "default", "web", &dp).await?;
    let pay: SocketAddr = format!("127.0.0.1:{out_pay}").parse()?;

    // No permission names `pay`: the egress denies it.
    let denied = wait_until(Duration::from_secs(30), || async {
        get(pay).await.0 == 403 && counter(egress.admin, DENIED).await > 0
    })
    .await;
    assert!(
        denied.is_ok(),
        "not denied by the egress: {:?}, {DENIED} = {}\n--- sidecar:\n{}\n--- egress:\n{}",
        get(pay).await,
        counter(egress.admin, DENIED).await,
        sidecar.log_tail(),
        egress.log_tail()
    );
    assert!(
        snis.lock().unwrap().is_empty(),
        "nothing reached the server"
    );

    // The permission in shadow first: the egress's diff shows it, nothing changes.
    let permission = "type: MeshTrafficPermission\nmesh: default\nname: web-to-pay\nspec:\n  targetRef: {kind: MeshService, name: pay}\n  from:\n  - targetRef: {kind: MeshService, name: web}\n    default: {action: Allow}\n";
    zone.apply(
        "/meshes/default/meshtrafficpermissions/web-to-pay",
        &permission.replace(
            "name: web-to-pay\n",
            "name: web-to-pay\nlabels: {kuma.io/effect: shadow}\n",
        ),
    )
    .await?;
    let (status, inspect) = zone
        .call(
            "GET",
            "/zoneegresses/egress/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{inspect}");
    let diff = inspect["diff"].as_array().cloned().unwrap_or_default();
    assert!(
        !diff.is_empty()
            && diff.iter().all(|op| op["path"]
                .as_str()
                .is_some_and(|p| p.contains("/filterChains/"))),
        "the egress's shadow diff: {diff:?}"
    );
    assert!(
        diff.iter()
            .any(|op| op.to_string().contains("spiffe://default/web")),
        "{diff:?}"
    );
    assert_eq!(inspect["notGenerated"], serde_json::json!([]), "{inspect}");
    for _ in 0..3 {
        assert_eq!(
            get(pay).await.0,
            403,
            "a shadow permission changes no traffic"
        );
    }

    // Promoted: through the egress, which originates TLS with SNI pay.test.
    zone.apply(
        "/meshes/default/meshtrafficpermissions/web-to-pay",
        permission,
    )
    .await?;
    let reached = wait_until(Duration::from_secs(20), || async {
        get(pay).await == (200, "pay ok".to_owned())
    })
    .await;
    assert!(
        reached.is_ok(),
        "pay not reached: {:?}\n--- egress:\n{}",
        get(pay).await,
        egress.log_tail()
    );
    for _ in 0..3 {
        assert_eq!(get(pay).await, (200, "pay ok".to_owned()));
    }
    let through_egress = counter(egress.admin, ANSWERED).await;
    assert!(through_egress >= 4, "{ANSWERED} = {through_egress}");
    assert!(
        snis.lock().unwrap().iter().all(|s| s == "pay.test"),
        "{:?}",
        snis.lock().unwrap()
    );

    // The egress switched off: the sidecar reaches the server itself (with Kuma's rule for
    // sidecars without an egress: an old TrafficPermission must let it).
    zone.apply(
        "/meshes/default/traffic-permissions/web-to-pay",
        "type: TrafficPermission\nmesh: default\nname: web-to-pay\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: pay}}]\n",
    )
    .await?;
    zone.apply("/meshes/default", &mesh(false)).await?;
    let direct = wait_until(Duration::from_secs(20), || async {
        let before = counter(egress.admin, ANSWERED).await;
        get(pay).await == (200, "pay ok".to_owned())
            && counter(egress.admin, ANSWERED).await == before
    })
    .await;
    assert!(direct.is_ok(), "not direct: {:?}", get(pay).await);
    let at_switch = counter(egress.admin, ANSWERED).await;
    for _ in 0..3 {
        assert_eq!(get(pay).await, (200, "pay ok".to_owned()));
    }
    assert_eq!(counter(egress.admin, ANSWERED).await, at_switch);

    // And back on: through the egress again.
    zone.apply("/meshes/default", &mesh(true)).await?;
    let again = wait_until(Duration::from_secs(20), || async {
        get(pay).await == (200, "pay ok".to_owned())
            && counter(egress.admin, ANSWERED).await > at_switch
    })
    .await;
    assert!(again.is_ok(), "not through the egress again");
    drop(sidecar);
    drop(egress);
    zone.stop().await
}
