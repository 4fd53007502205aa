//! End to end (issue 17): the resilience policies on real Envoy, with real upstreams.
//!
//! Retries: a frontend sidecar calls `backend`, whose app fails every other request it receives
//! with a 503 ([`umbra_e2e::flaky_app`]).
//! 1. No retry policy (the mesh skips Kuma's defaults): every other request fails.
//! 2. A MeshRetry (`http.numRetries: 1`, Kuma's default conditions, which include 503 as a
//!    gateway error) as shadow: `_config?shadow=true&include=diff` shows the route's
//!    `retryPolicy`; traffic still fails every other time.
//! 3. The label removed: every request succeeds, its failed first attempt retried.

use std::net::SocketAddr;
use std::time::Duration;

use umbra_e2e::{
    echo_app, envoy_binary, flaky_app, free_port, http_with, put_yaml, reconciled, wait_until,
    AdsApi, Envoy, Zone,
};

fn dataplane(name: &str, service: &str, inbound: u16, app: u16, out: Option<u16>) -> String {
    let mut y = format!(
        "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n"
    );
    if let Some(port) = out {
        y.push_str(&format!("  outbound:\n  - port: {port}\n    address: 127.0.0.1\n    tags: {{kuma.io/service: backend}}\n"));
    }
    y
}

fn mesh_retry(labels: &str) -> String {
    format!("type: MeshRetry\nmesh: default\nname: backend-retry\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend}}\n    default:\n      http: {{numRetries: 1}}\n")
}

/// Statuses of `n` sequential `GET /` through `out` (0 for a transport error).
async fn statuses(out: SocketAddr, n: usize) -> Vec<u16> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(match http_with(out, "GET", "/", None, &[]).await {
            Ok((status, _)) => status,
            Err(_) => 0,
        });
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_retry_retries_a_failed_first_attempt() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let zone = Zone::start("zone-1").await?;
    zone.apply(
        "/meshes/default",
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await?;
    let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
    let _backend = flaky_app(ports[0]).await?;
    let _front = echo_app(ports[1], "frontend").await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/backend",
        &dataplane("backend", "backend", ports[2], ports[0], None),
    )
    .await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/frontend",
        &dataplane("frontend", "frontend", ports[3], ports[1], Some(ports[4])),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let envoys = [
        Envoy::start_with(&envoy, "default", "backend", &dp, None, AdsApi::Sotw).await?,
        Envoy::start_with(&envoy, "default", "frontend", &dp, None, AdsApi::Sotw).await?,
    ];
    let out: SocketAddr = format!("127.0.0.1:{}", ports[4]).parse()?;
    let logs = || {
        envoys
            .iter()
            .map(Envoy::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };

    // 1. No retries: the flaky backend shows through.
    let up = wait_until(Duration::from_secs(30), || async {
        statuses(out, 1).await[0] != 0
    })
    .await;
    assert!(up.is_ok(), "frontend outbound never answered\n{}", logs());
    let seen = statuses(out, 10).await;
    assert!(
        seen.contains(&503) && seen.contains(&200),
        "without retries every other request fails: {seen:?}"
    );

    // 2. MeshRetry in shadow: the diff carries the route's retry policy, traffic unchanged.
    zone.apply(
        "/meshes/default/meshretries/backend-retry",
        &mesh_retry("labels: {kuma.io/effect: shadow}\n"),
    )
    .await?;
    reconciled(zone.api).await?;
    let (s, v) = zone
        .call(
            "GET",
            "/meshes/default/dataplanes/frontend/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(s, 200, "{v}");
    let diff = v["diff"].to_string();
    assert!(
        diff.contains("retryPolicy") && diff.contains("gateway-error"),
        "diff shows the retry policy: {diff}"
    );
    let not_generated = v["notGenerated"].to_string();
    assert!(
        !not_generated.contains("MeshRetry"),
        "MeshRetry is generated: {not_generated}"
    );
    let seen = statuses(out, 10).await;
    assert!(
        seen.contains(&503),
        "a shadow MeshRetry never reaches a proxy: {seen:?}"
    );

    // 3. Promoted: every request succeeds.
    zone.apply("/meshes/default/meshretries/backend-retry", &mesh_retry(""))
        .await?;
    let promoted = wait_until(Duration::from_secs(30), || async {
        statuses(out, 4).await == [200; 4]
    })
    .await;
    assert!(promoted.is_ok(), "MeshRetry not in effect\n{}", logs());
    let seen = statuses(out, 20).await;
    assert_eq!(seen, [200; 20], "each failed first attempt is retried");

    drop(envoys);
    zone.stop().await
}
