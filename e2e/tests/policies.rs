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

use tokio::task::JoinHandle;
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

/// The scene every test here shares: a zone whose mesh `default` has no default policies, a
/// `frontend` sidecar whose outbound `out` reaches `backend`, and the `backend` DPPs.
struct Scene {
    zone: Zone,
    envoys: Vec<Envoy>,
    out: SocketAddr,
    _apps: Vec<JoinHandle<()>>,
}

/// A `backend` DPP of a [`Scene`]: its name and app (an app on a free port, or no app and no
/// sidecar: a dead endpoint).
enum Backend {
    /// `flaky_app` or `echo_app` on the DPP's app port, and a sidecar.
    Up { name: &'static str, flaky: bool },
    /// Registered, but nothing listens on its inbound.
    Dead { name: &'static str },
}

impl Scene {
    /// Start the scene with `policies` (path, YAML) applied before the sidecars start, and wait
    /// until a request through the frontend's outbound reaches a backend (a 200: an Envoy
    /// 503 only says the frontend's sidecar is up, and under load the backend's may not be
    /// yet); `None` when Envoy is not installed.
    async fn start(
        backends: &[Backend],
        policies: &[(&str, String)],
    ) -> anyhow::Result<Option<Scene>> {
        let Some(envoy) = envoy_binary() else {
            eprintln!("skipping: envoy not installed");
            return Ok(None);
        };
        let zone = Zone::start("zone-1").await?;
        zone.apply(
            "/meshes/default",
            "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
        )
        .await?;
        let mut apps = Vec::new();
        let mut sidecars = Vec::new();
        for b in backends {
            let (app, inbound) = (free_port(), free_port());
            let name = match b {
                Backend::Up { name, flaky } => {
                    apps.push(if *flaky {
                        flaky_app(app).await?
                    } else {
                        echo_app(app, "backend").await?
                    });
                    sidecars.push(*name);
                    *name
                }
                Backend::Dead { name } => name,
            };
            put_yaml(
                zone.api,
                &format!("/meshes/default/dataplanes/{name}"),
                &dataplane(name, "backend", inbound, app, None),
            )
            .await?;
        }
        let (app, inbound, outbound) = (free_port(), free_port(), free_port());
        apps.push(echo_app(app, "frontend").await?);
        put_yaml(
            zone.api,
            "/meshes/default/dataplanes/frontend",
            &dataplane("frontend", "frontend", inbound, app, Some(outbound)),
        )
        .await?;
        sidecars.push("frontend");
        for (path, yaml) in policies {
            zone.apply(path, yaml).await?;
        }
        let dp = zone.dp_server().await?;
        let mut envoys = Vec::new();
        for name in sidecars {
            envoys.push(Envoy::start_with(&envoy, "default", name, &dp, None, AdsApi::Sotw).await?);
        }
        let scene = Scene {
            zone,
            envoys,
            out: format!("127.0.0.1:{outbound}").parse()?,
            _apps: apps,
        };
        let up = wait_until(Duration::from_secs(30), || async {
            statuses(scene.out, 1).await[0] == 200
        })
        .await;
        assert!(
            up.is_ok(),
            "no request through the frontend's outbound reached a backend\n{}",
            scene.logs()
        );
        Ok(Some(scene))
    }

    /// The sidecars' log tails.
    fn logs(&self) -> String {
        self.envoys
            .iter()
            .map(Envoy::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    async fn stop(self) -> anyhow::Result<()> {
        drop(self.envoys);
        self.zone.stop().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_retry_retries_a_failed_first_attempt() -> anyhow::Result<()> {
    let backends = [Backend::Up {
        name: "backend",
        flaky: true,
    }];
    let Some(scene) = Scene::start(&backends, &[]).await? else {
        return Ok(());
    };
    let (zone, out) = (&scene.zone, scene.out);

    // 1. No retries: the flaky backend shows through.
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
    assert!(
        promoted.is_ok(),
        "MeshRetry not in effect\n{}",
        scene.logs()
    );
    let seen = statuses(out, 20).await;
    assert_eq!(seen, [200; 20], "each failed first attempt is retried");
    scene.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_health_check_takes_a_dead_endpoint_out_of_rotation() -> anyhow::Result<()> {
    let backends = [
        Backend::Up {
            name: "backend-1",
            flaky: false,
        },
        Backend::Dead { name: "backend-2" },
    ];
    let Some(scene) = Scene::start(&backends, &[]).await? else {
        return Ok(());
    };
    let (zone, out) = (&scene.zone, scene.out);

    // 1. No health check: the dead endpoint takes its share of requests, which fail.
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
    assert!(
        healthy.is_ok(),
        "MeshHealthCheck not in effect\n{}",
        scene.logs()
    );
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
    scene.stop().await
}

const MESH_RATE_LIMIT: &str = "type: MeshRateLimit\nmesh: default\nname: backend-rl\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: Mesh}\n    default:\n      local:\n        http:\n          requestRate: {num: 2, interval: 60s}\n          onRateLimit:\n            status: 429\n            headers:\n              set: [{name: x-umbra-limited, value: 'yes'}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_rate_limit_answers_429_past_the_limit() -> anyhow::Result<()> {
    let backends = [Backend::Up {
        name: "backend",
        flaky: false,
    }];
    let Some(scene) = Scene::start(&backends, &[]).await? else {
        return Ok(());
    };
    let out = scene.out;
    assert_eq!(statuses(out, 5).await, [200; 5], "no limit yet");

    scene
        .zone
        .apply("/meshes/default/meshratelimits/backend-rl", MESH_RATE_LIMIT)
        .await?;
    // Once the backend's sidecar has the limit, at most 2 requests a minute pass.
    let limited = wait_until(Duration::from_secs(30), || async {
        statuses(out, 1).await[0] == 429
    })
    .await;
    assert!(
        limited.is_ok(),
        "MeshRateLimit not in effect\n{}",
        scene.logs()
    );
    let seen = statuses(out, 5).await;
    assert_eq!(
        seen, [429; 5],
        "the bucket is empty for the rest of the minute"
    );
    scene.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_access_log_writes_a_line_per_request() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("umbra-access-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("access.log");
    let policy = format!("type: MeshAccessLog\nmesh: default\nname: frontend-log\nspec:\n  targetRef: {{kind: MeshService, name: frontend}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend}}\n    default:\n      backends:\n      - type: File\n        file:\n          path: {}\n          format: {{type: Plain, plain: '%KUMA_SOURCE_SERVICE%->%KUMA_DESTINATION_SERVICE% %RESPONSE_CODE% %REQ(:PATH)%'}}\n", log.display());
    let backends = [Backend::Up {
        name: "backend",
        flaky: false,
    }];
    let policies = [("/meshes/default/meshaccesslogs/frontend-log", policy)];
    let Some(scene) = Scene::start(&backends, &policies).await? else {
        return Ok(());
    };
    for path in ["/one", "/two", "/three"] {
        let (status, _) = http_with(scene.out, "GET", path, None, &[]).await?;
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
        scene.logs()
    );
    // The scene's start-up requests (`/`) are logged too.
    let lines: Vec<String> = read()
        .lines()
        .filter(|l| !l.ends_with(" /"))
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
    let _ = std::fs::remove_dir_all(&dir);
    scene.stop().await
}
