//! End to end (issue 16): routes generated for real Envoy, with real upstreams. A frontend
//! sidecar calls `backend`, served by two versions (`version: v1`, `v2`), each an app that
//! answers `<version> <path>` so the test sees which version got the request and the path it
//! got.
//!
//! 1. An old TrafficRoute: `/api/` goes to v2 with its prefix rewritten to `/`, the rest is split
//!    90/10.
//! 2. The MeshHTTPRoute that replaces it, as shadow: `_config?shadow=true&include=diff` shows
//!    the route changes; traffic still follows the TrafficRoute.
//! 3. The label removed: traffic follows the MeshHTTPRoute: `x-version: v2` reaches v2 only,
//!    `/api` reaches v2 rewritten its way, the rest is split 90/10. (As in Kuma 2.7, a
//!    `ReplacePrefixMatch` replaces the matched `/api/` prefix route's prefix verbatim, so the
//!    replacement carries the trailing `/`.)
//!
//! Split tolerance: N = 300 requests at p = 0.1 to v2 give a mean of 30 and a standard
//! deviation of sqrt(300 · 0.1 · 0.9) ≈ 5.2; the test accepts 10..=55 (about 3.8 σ below, 4.8 σ
//! above: a false failure about once in 10⁴ runs), which still tells 90/10 from 50/50 (150)
//! or from no split (0 or 300).

use std::net::SocketAddr;
use std::time::Duration;

use umbra_e2e::{
    echo_app, envoy_binary, free_port, http_with, put_yaml, reconciled, wait_until, AdsApi, Envoy,
    Zone,
};

const N: usize = 300;

fn dataplane(
    name: &str,
    service: &str,
    version: Option<&str>,
    inbound: u16,
    app: u16,
    out: Option<u16>,
) -> String {
    let version = version
        .map(|v| format!(", version: {v}"))
        .unwrap_or_default();
    let mut y = format!(
        "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http{version}}}\n"
    );
    if let Some(port) = out {
        y.push_str(&format!("  outbound:\n  - port: {port}\n    address: 127.0.0.1\n    tags: {{kuma.io/service: backend}}\n"));
    }
    y
}

async fn get(out: SocketAddr, path: &str, headers: &[(&str, &str)]) -> String {
    match http_with(out, "GET", path, None, headers).await {
        Ok((200, body)) => body,
        Ok((status, body)) => format!("status {status}: {body}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Wait until `/` answers from v1 or v2 ten times in a row: both backends' sidecars serve
/// (one route reaching v2 says nothing of v1's listener, which may still be warming).
async fn both_backends_serve(out: SocketAddr) {
    let ready = wait_until(Duration::from_secs(20), || async {
        for _ in 0..10 {
            let body = get(out, "/", &[]).await;
            if body != "v1 /" && body != "v2 /" {
                return false;
            }
        }
        true
    })
    .await;
    assert!(
        ready.is_ok(),
        "/ does not reach both backends: {:?}",
        get(out, "/", &[]).await
    );
}

/// How many of `N` requests to `/` reached v2 (every answer must come from v1 or v2).
async fn v2_share(out: SocketAddr) -> usize {
    both_backends_serve(out).await;
    let mut v2 = 0;
    for _ in 0..N {
        let body = get(out, "/", &[]).await;
        assert!(
            body == "v1 /" || body == "v2 /",
            "unexpected answer {body:?}"
        );
        v2 += usize::from(body == "v2 /");
    }
    v2
}

const TRAFFIC_ROUTE: &str = "type: TrafficRoute\nmesh: default\nname: backend-canary\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: backend}\nconf:\n  http:\n  - match: {path: {prefix: /api/}}\n    modify: {path: {rewritePrefix: /}}\n    destination: {kuma.io/service: backend, version: v2}\n  split:\n  - {weight: 90, destination: {kuma.io/service: backend, version: v1}}\n  - {weight: 10, destination: {kuma.io/service: backend, version: v2}}\n";

fn mesh_http_route(labels: &str) -> String {
    format!("type: MeshHTTPRoute\nmesh: default\nname: backend-canary\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend}}\n    rules:\n    - matches:\n      - path: {{type: PathPrefix, value: /}}\n        headers: [{{name: x-version, value: v2}}]\n      default:\n        backendRefs: [{{kind: MeshServiceSubset, name: backend, tags: {{version: v2}}}}]\n    - matches:\n      - path: {{type: PathPrefix, value: /api}}\n      default:\n        filters:\n        - type: URLRewrite\n          urlRewrite: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: /v2-api/}}}}\n        backendRefs: [{{kind: MeshServiceSubset, name: backend, tags: {{version: v2}}}}]\n    - matches:\n      - path: {{type: PathPrefix, value: /}}\n      default:\n        backendRefs:\n        - {{kind: MeshServiceSubset, name: backend, tags: {{version: v1}}, weight: 90}}\n        - {{kind: MeshServiceSubset, name: backend, tags: {{version: v2}}, weight: 10}}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_route_then_shadow_mesh_http_route_then_promoted() -> anyhow::Result<()> {
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
    zone.apply(
        "/meshes/default/traffic-routes/backend-canary",
        TRAFFIC_ROUTE,
    )
    .await?;
    let ports: Vec<u16> = (0..7).map(|_| free_port()).collect();
    let _v1 = echo_app(ports[0], "v1").await?;
    let _v2 = echo_app(ports[1], "v2").await?;
    let _front = echo_app(ports[2], "frontend").await?;
    for (name, service, version, inbound, app, out) in [
        (
            "backend-v1",
            "backend",
            Some("v1"),
            ports[3],
            ports[0],
            None,
        ),
        (
            "backend-v2",
            "backend",
            Some("v2"),
            ports[4],
            ports[1],
            None,
        ),
        (
            "frontend",
            "frontend",
            None,
            ports[5],
            ports[2],
            Some(ports[6]),
        ),
    ] {
        put_yaml(
            zone.api,
            &format!("/meshes/default/dataplanes/{name}"),
            &dataplane(name, service, version, inbound, app, out),
        )
        .await?;
    }
    let dp = zone.dp_server().await?;
    let mut envoys = Vec::new();
    for name in ["backend-v1", "backend-v2", "frontend"] {
        envoys.push(Envoy::start_with(&envoy, "default", name, &dp, None, AdsApi::Sotw).await?);
    }
    let out: SocketAddr = format!("127.0.0.1:{}", ports[6]).parse()?;
    let logs = |envoys: &[Envoy]| {
        envoys
            .iter()
            .map(Envoy::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };

    // 1. TrafficRoute: /api/x reaches v2 as /x; the rest is split 90/10.
    let routed = wait_until(Duration::from_secs(30), || async {
        get(out, "/api/x", &[]).await == "v2 /x"
    })
    .await;
    assert!(
        routed.is_ok(),
        "TrafficRoute /api rule not in effect: {:?}\n{}",
        get(out, "/api/x", &[]).await,
        logs(&envoys)
    );
    let v2 = v2_share(out).await;
    assert!(
        (10..=55).contains(&v2),
        "TrafficRoute 90/10 split sent {v2}/{N} to v2"
    );

    // 2. The replacing MeshHTTPRoute as shadow: the diff shows it, traffic does not change.
    zone.apply(
        "/meshes/default/meshhttproutes/backend-canary",
        &mesh_http_route("labels: {kuma.io/effect: shadow}\n"),
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
    assert_eq!(s, 200);
    let diff = v["diff"].to_string();
    assert!(
        diff.contains("x-version") && diff.contains("/v2-api"),
        "diff shows the new routes: {diff}"
    );
    let (_, live) = zone
        .call("GET", "/meshes/default/dataplanes/frontend/_config", None)
        .await?;
    assert!(
        !live["xds"].to_string().contains("x-version"),
        "a shadow route never reaches a proxy"
    );
    assert_eq!(
        get(out, "/api/x", &[]).await,
        "v2 /x",
        "the TrafficRoute still routes"
    );

    // 3. Promoted: traffic follows the MeshHTTPRoute (TrafficRoute off for this DPP).
    zone.apply(
        "/meshes/default/meshhttproutes/backend-canary",
        &mesh_http_route(""),
    )
    .await?;
    let promoted = wait_until(Duration::from_secs(30), || async {
        get(out, "/api/x", &[]).await == "v2 /v2-api/x"
    })
    .await;
    assert!(
        promoted.is_ok(),
        "MeshHTTPRoute not in effect: {:?}\n{}",
        get(out, "/api/x", &[]).await,
        logs(&envoys)
    );
    for _ in 0..50 {
        assert_eq!(
            get(out, "/hello", &[("x-version", "v2")]).await,
            "v2 /hello",
            "x-version: v2 goes to v2 only"
        );
    }
    // `/apiary` is not under the `/api` prefix (Kuma matches whole path segments).
    let apiary = get(out, "/apiary", &[("x-version", "v2")]).await;
    assert_eq!(apiary, "v2 /apiary");
    let v2 = v2_share(out).await;
    assert!(
        (10..=55).contains(&v2),
        "MeshHTTPRoute 90/10 split sent {v2}/{N} to v2"
    );

    drop(envoys);
    zone.stop().await
}
