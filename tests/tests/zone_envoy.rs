//! End to end: zone-cp serving real Envoy sidecars over ADS; traffic flows frontend -> backend
//! through the outbound and inbound listeners; a MeshFaultInjection aborts with 503, the same
//! policy as shadow does not, while `_config?shadow=true&include=diff` shows the fault filter.

use std::time::Duration;

use umbra_e2e::{envoy_binary, free_port, http, http_app, wait_until, Envoy, Zone};

const MESH: &str = "type: Mesh\nname: default\n";

fn dataplane(
    name: &str,
    service: &str,
    inbound: u16,
    app: u16,
    outbound: Option<(u16, &str)>,
) -> String {
    let mut y = format!(
        "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n"
    );
    if let Some((port, svc)) = outbound {
        y.push_str(&format!("  outbound:\n  - port: {port}\n    address: 127.0.0.1\n    tags: {{kuma.io/service: {svc}}}\n"));
    }
    y
}

async fn acked(zone: &Zone, name: &str) -> bool {
    let Ok((200, v)) = zone
        .call(
            "GET",
            &format!("/meshes/default/dataplanes+insights/{name}"),
            None,
        )
        .await
    else {
        return false;
    };
    let acked = &v["dataplaneInsight"]["acked"];
    ["Cluster", "Listener"].iter().all(|t| {
        acked
            .as_object()
            .is_some_and(|m| m.keys().any(|k| k.ends_with(t)))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_flows_and_fault_injection_live_vs_shadow() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let zone = Zone::start("zone-1").await?;
    let (backend_app, backend_in, frontend_app, frontend_in, outbound) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let _app = http_app(backend_app, "hello from backend", Duration::ZERO).await?;
    zone.apply("/meshes/default", MESH).await?;
    zone.apply(
        "/meshes/default/dataplanes/backend",
        &dataplane("backend", "backend", backend_in, backend_app, None),
    )
    .await?;
    zone.apply(
        "/meshes/default/dataplanes/frontend",
        &dataplane(
            "frontend",
            "frontend",
            frontend_in,
            frontend_app,
            Some((outbound, "backend")),
        ),
    )
    .await?;

    let backend = Envoy::start(&envoy, "default", "backend", zone.ads)?;
    let frontend = Envoy::start(&envoy, "default", "frontend", zone.ads)?;
    let ready = wait_until(Duration::from_secs(20), || async {
        acked(&zone, "backend").await && acked(&zone, "frontend").await
    })
    .await;
    assert!(
        ready.is_ok(),
        "Envoys did not ACK.\nbackend:\n{}\nfrontend:\n{}",
        backend.log_tail(),
        frontend.log_tail()
    );

    let out = format!("127.0.0.1:{outbound}").parse()?;
    let ok = wait_until(Duration::from_secs(10), || async {
        http(out, "GET", "/", None)
            .await
            .is_ok_and(|(s, _)| s == 200)
    })
    .await;
    assert!(
        ok.is_ok(),
        "no 200 through the sidecars.\nfrontend:\n{}",
        frontend.log_tail()
    );
    let (_, body) = http(out, "GET", "/", None).await?;
    assert_eq!(body, "hello from backend");

    // The fault as shadow: traffic unaffected, inspect shows the fault filter being added.
    let fault = |labels: &str| {
        format!("type: MeshFaultInjection\nmesh: default\nname: abort-all\n{labels}spec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default:\n      http:\n      - abort: {{httpStatus: 503, percentage: 100}}\n")
    };
    zone.apply(
        "/meshes/default/meshfaultinjections/abort-all",
        &fault("labels: {kuma.io/effect: shadow}\n"),
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        http(out, "GET", "/", None).await?.0,
        200,
        "a shadow policy never reaches a proxy"
    );
    let (s, v) = zone
        .call(
            "GET",
            "/meshes/default/dataplanes/backend/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(s, 200);
    assert!(
        v["diff"].to_string().contains("envoy.filters.http.fault"),
        "diff shows the fault filter: {}",
        v["diff"]
    );

    // Live: requests fail with 503.
    zone.apply("/meshes/default/meshfaultinjections/abort-all", &fault(""))
        .await?;
    let aborted = wait_until(Duration::from_secs(10), || async {
        http(out, "GET", "/", None)
            .await
            .is_ok_and(|(s, _)| s == 503)
    })
    .await;
    assert!(
        aborted.is_ok(),
        "fault injection did not abort.\nbackend:\n{}",
        backend.log_tail()
    );

    drop(frontend);
    drop(backend);
    zone.stop().await
}
