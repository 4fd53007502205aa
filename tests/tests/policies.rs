//! End to end (issue 17): the resilience policies on real Envoy, with real upstreams.
//!
//! Retries: a frontend sidecar calls `backend`, whose app fails every other request it receives
//! with a 503 ([`umbra_e2e::flaky_app`]).
//! 1. No retry policy (the mesh skips Kuma's defaults): every other request fails.
//! 2. A MeshRetry (`http.numRetries: 1`, Kuma's default conditions, which include 503 as a
//!    gateway error) as shadow: `_config?shadow=true&include=diff` shows the route's
//!    `retryPolicy`; traffic still fails every other time.
//! 3. The label removed: every request succeeds, its failed first attempt retried.
//!
//! Health checks: `backend` has two DPPs; one's sidecar never runs, so its endpoint refuses
//! connections.
//! 1. No health check: requests that land on the dead endpoint fail.
//! 2. A MeshHealthCheck (HTTP check every second, one failure marks a host unhealthy): the dead
//!    endpoint leaves the rotation and every request succeeds.
//!
//! Rate limits: a MeshRateLimit on `backend` (2 requests per minute, answered 429 past the
//! limit) limits requests at the backend's sidecar.
//!
//! Access logs: a MeshAccessLog with a File backend on the frontend's outbound writes one line
//! per request, with Kuma's `%KUMA_*%` values interpolated.

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

const MESH_HEALTH_CHECK: &str = "type: MeshHealthCheck\nmesh: default\nname: backend-hc\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    default:\n      interval: 1s\n      timeout: 1s\n      unhealthyThreshold: 1\n      healthyThreshold: 1\n      healthyPanicThreshold: 0\n      http: {path: /}\n";

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_health_check_takes_a_dead_endpoint_out_of_rotation() -> anyhow::Result<()> {
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
    let ports: Vec<u16> = (0..7).map(|_| free_port()).collect();
    let _backend = echo_app(ports[0], "backend").await?;
    let _front = echo_app(ports[1], "frontend").await?;
    // backend-2's app port (ports[2]) and inbound (ports[4]) have no listener: its sidecar
    // never starts, so its endpoint refuses connections.
    for (name, service, inbound, app, out) in [
        ("backend-1", "backend", ports[3], ports[0], None),
        ("backend-2", "backend", ports[4], ports[2], None),
        ("frontend", "frontend", ports[5], ports[1], Some(ports[6])),
    ] {
        put_yaml(
            zone.api,
            &format!("/meshes/default/dataplanes/{name}"),
            &dataplane(name, service, inbound, app, out),
        )
        .await?;
    }
    let dp = zone.dp_server().await?;
    let envoys = [
        Envoy::start_with(&envoy, "default", "backend-1", &dp, None, AdsApi::Sotw).await?,
        Envoy::start_with(&envoy, "default", "frontend", &dp, None, AdsApi::Sotw).await?,
    ];
    let out: SocketAddr = format!("127.0.0.1:{}", ports[6]).parse()?;
    let logs = || {
        envoys
            .iter()
            .map(Envoy::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };

    // 1. No health check: the dead endpoint takes its share of requests, which fail.
    let up = wait_until(Duration::from_secs(30), || async {
        statuses(out, 1).await[0] == 200
    })
    .await;
    assert!(up.is_ok(), "frontend outbound never answered\n{}", logs());
    let seen = statuses(out, 20).await;
    assert!(
        seen.iter().any(|s| *s != 200),
        "with a dead endpoint and no health check some requests fail: {seen:?}"
    );

    // 2. MeshHealthCheck: the dead endpoint is ejected, every request succeeds.
    zone.apply(
        "/meshes/default/meshhealthchecks/backend-hc",
        MESH_HEALTH_CHECK,
    )
    .await?;
    let healthy = wait_until(Duration::from_secs(30), || async {
        statuses(out, 10).await == [200; 10]
    })
    .await;
    assert!(healthy.is_ok(), "MeshHealthCheck not in effect\n{}", logs());
    let seen = statuses(out, 30).await;
    assert_eq!(seen, [200; 30], "the dead endpoint is out of rotation");
    let (_, config) = zone
        .call("GET", "/meshes/default/dataplanes/frontend/_config", None)
        .await?;
    assert!(
        config["xds"].to_string().contains("httpHealthCheck"),
        "{}",
        config["xds"]
    );

    drop(envoys);
    zone.stop().await
}

const MESH_RATE_LIMIT: &str = "type: MeshRateLimit\nmesh: default\nname: backend-rl\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: Mesh}\n    default:\n      local:\n        http:\n          requestRate: {num: 2, interval: 60s}\n          onRateLimit:\n            status: 429\n            headers:\n              set: [{name: x-umbra-limited, value: 'yes'}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_rate_limit_answers_429_past_the_limit() -> anyhow::Result<()> {
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
    let _backend = echo_app(ports[0], "backend").await?;
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
    let up = wait_until(Duration::from_secs(30), || async {
        statuses(out, 1).await[0] == 200
    })
    .await;
    assert!(up.is_ok(), "frontend outbound never answered\n{}", logs());
    assert_eq!(statuses(out, 5).await, [200; 5], "no limit yet");

    zone.apply("/meshes/default/meshratelimits/backend-rl", MESH_RATE_LIMIT)
        .await?;
    // Once the backend's sidecar has the limit, at most 2 requests a minute pass.
    let limited = wait_until(Duration::from_secs(30), || async {
        statuses(out, 1).await[0] == 429
    })
    .await;
    assert!(limited.is_ok(), "MeshRateLimit not in effect\n{}", logs());
    let seen = statuses(out, 5).await;
    assert_eq!(
        seen, [429; 5],
        "the bucket is empty for the rest of the minute"
    );
    let (status, _) = http_with(out, "GET", "/", None, &[]).await?;
    assert_eq!(status, 429);

    drop(envoys);
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_access_log_writes_a_line_per_request() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = std::env::temp_dir().join(format!("umbra-access-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("access.log");
    let zone = Zone::start("zone-1").await?;
    zone.apply(
        "/meshes/default",
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await?;
    let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
    let _backend = echo_app(ports[0], "backend").await?;
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
    zone.apply(
        "/meshes/default/meshaccesslogs/frontend-log",
        &format!("type: MeshAccessLog\nmesh: default\nname: frontend-log\nspec:\n  targetRef: {{kind: MeshService, name: frontend}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend}}\n    default:\n      backends:\n      - type: File\n        file:\n          path: {}\n          format: {{type: Plain, plain: '%KUMA_SOURCE_SERVICE%->%KUMA_DESTINATION_SERVICE% %RESPONSE_CODE% %REQ(:PATH)%'}}\n", log.display()),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let envoys = [
        Envoy::start_with(&envoy, "default", "backend", &dp, None, AdsApi::Sotw).await?,
        Envoy::start_with(&envoy, "default", "frontend", &dp, None, AdsApi::Sotw).await?,
    ];
    let out: SocketAddr = format!("127.0.0.1:{}", ports[4]).parse()?;
    let up = wait_until(Duration::from_secs(30), || async {
        http_with(out, "GET", "/warm-up", None, &[])
            .await
            .is_ok_and(|(s, _)| s == 200)
    })
    .await;
    let logs = || {
        envoys
            .iter()
            .map(Envoy::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(up.is_ok(), "frontend outbound never answered\n{}", logs());
    for path in ["/one", "/two", "/three"] {
        let (status, _) = http_with(out, "GET", path, None, &[]).await?;
        assert_eq!(status, 200);
    }
    // Envoy flushes file access logs about every second.
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let flushed = wait_until(Duration::from_secs(15), || async {
        read().contains("/three")
    })
    .await;
    assert!(
        flushed.is_ok(),
        "no access log lines: {:?}\n{}",
        read(),
        logs()
    );
    let lines: Vec<String> = read()
        .lines()
        .filter(|l| !l.ends_with("/warm-up"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        [
            "frontend->backend 200 /one",
            "frontend->backend 200 /two",
            "frontend->backend 200 /three"
        ]
    );

    drop(envoys);
    let _ = std::fs::remove_dir_all(&dir);
    zone.stop().await
}
