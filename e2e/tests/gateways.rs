//! End to end (issue 38), with real Envoys in an mTLS mesh:
//! - a delegated gateway (the operator's own proxy next to a Kuma sidecar, a Dataplane with
//!   `gateway.type: DELEGATED`) reaches a mesh service through its sidecar's outbound, over mTLS
//!   with the gateway's own identity: a MeshTrafficPermission that lets only
//!   `spiffe://default/edge` into `backend` lets it through, and one for another service does
//!   not;
//! - a builtin gateway (`BUILTIN`, selected by a MeshGateway with an HTTP listener) routes by
//!   the MeshHTTPRoute attached to the MeshGateway: in shadow, the route shows in the
//!   gateway's `_config` diff and the path still answers 404; promoted, a request to the
//!   gateway's listener with that path reaches the backend, and another path is a 404; its
//!   HTTPS listener for `pay.test` terminates TLS with the certificate of its Secret (a client
//!   trusting only that certificate's CA reaches the backend); its TCP listener, once a
//!   MeshTCPRoute is attached, passes the bytes through to the backend;
//! - a MeshGatewayRoute routes the builtin gateway by path to two versions of a service; its
//!   conversion (`umbra_core::convert`, as `umbractl convert`), applied in shadow, shows a
//!   diff that only names the Envoy routes; promoted with the MeshGatewayRoute deleted, the same requests reach the same
//!   versions; a MeshRateLimit on the MeshGateway then answers 429 once its bucket is empty;
//! - a builtin gateway bootstrapped through `POST /bootstrap` takes its listener's connection
//!   limit from the RTDS Runtime `gateway.listeners`, and a changed limit while it runs.

use std::net::SocketAddr;
use std::time::Duration;

use umbra_e2e::{echo_app, envoy_binary, free_port, http, put_yaml, wait_until, Envoy, Zone};

#[path = "support/external_https.rs"]
mod external_https;

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n";

fn permission(from: &str) -> String {
    format!("type: MeshTrafficPermission\nmesh: default\nname: into-backend\nspec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from:\n  - targetRef: {{kind: MeshService, name: {from}}}\n    default: {{action: Allow}}\n")
}

/// A zone with the mTLS mesh, MeshTrafficPermission `into-backend` (`permission`) and the
/// backend: its app (answering `backend`) and its Dataplane.
async fn with_backend(permission: &str) -> anyhow::Result<(Zone, tokio::task::JoinHandle<()>)> {
    let zone = Zone::start("zone-1").await?;
    zone.apply("/meshes/default", MESH).await?;
    zone.apply(
        "/meshes/default/meshtrafficpermissions/into-backend",
        permission,
    )
    .await?;
    let (inbound, app_port) = (free_port(), free_port());
    let app = echo_app(app_port, "backend").await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/backend",
        &format!("type: Dataplane\nmesh: default\nname: backend\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app_port}\n    tags: {{kuma.io/service: backend, kuma.io/protocol: http}}\n"),
    )
    .await?;
    Ok((zone, app))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegated_gateway_reaches_a_mesh_service_over_mtls() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _app) = with_backend(&permission("edge")).await?;
    let out = free_port();
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/edge",
        &format!("type: Dataplane\nmesh: default\nname: edge\nnetworking:\n  address: 127.0.0.1\n  gateway:\n    type: DELEGATED\n    tags: {{kuma.io/service: edge}}\n  outbound:\n  - port: {out}\n    tags: {{kuma.io/service: backend}}\n"),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let backend = Envoy::start(&envoy, "default", "backend", &dp).await?;
    let edge = Envoy::start(&envoy, "default", "edge", &dp).await?;
    let addr: SocketAddr = format!("127.0.0.1:{out}").parse()?;
    let get = || async move {
        http(addr, "GET", "/", None)
            .await
            .unwrap_or((0, String::new()))
    };

    let reached = wait_until(Duration::from_secs(30), || async { get().await.0 == 200 }).await;
    let (_, config) = zone
        .call("GET", "/meshes/default/dataplanes/edge/_config", None)
        .await?;
    assert!(
        reached.is_ok(),
        "backend not reached through the gateway: {:?}\nedge config: {config}\n--- edge:\n{}\n--- backend:\n{}",
        get().await,
        edge.log_tail(),
        backend.log_tail()
    );
    assert!(get().await.1.contains("backend"), "{:?}", get().await);

    // Only the gateway's identity was let in: permitting another service shuts it out.
    zone.apply(
        "/meshes/default/meshtrafficpermissions/into-backend",
        &permission("web"),
    )
    .await?;
    let denied = wait_until(Duration::from_secs(20), || async { get().await.0 == 403 }).await;
    assert!(denied.is_ok(), "still let in: {:?}", get().await);
    drop(edge);
    drop(backend);
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builtin_gateway_routes_by_the_meshhttproute_on_its_meshgateway() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _app) = with_backend(&permission("edge")).await?;
    let (port, tls_port, tcp_port) = (free_port(), free_port(), free_port());
    let pki = external_https::pki()?;
    let bundle = format!("{}{}", pki.cert_pem, pki.key_pem);
    zone.apply(
        "/meshes/default/secrets/pay-cert",
        &format!(
            "type: Secret\nmesh: default\nname: pay-cert\ndata: {}\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bundle)
        ),
    )
    .await?;
    zone.apply(
        "/meshes/default/meshgateways/public",
        &format!("type: MeshGateway\nmesh: default\nname: public\nselectors:\n- match: {{kuma.io/service: edge}}\nconf:\n  listeners:\n  - port: {port}\n    protocol: HTTP\n  - port: {tls_port}\n    protocol: HTTPS\n    hostname: pay.test\n    tls: {{mode: TERMINATE, certificates: [{{secret: pay-cert}}]}}\n  - port: {tcp_port}\n    protocol: TCP\n"),
    )
    .await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/gw",
        "type: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 127.0.0.1\n  gateway:\n    type: BUILTIN\n    tags: {kuma.io/service: edge}\n",
    )
    .await?;
    let route = "type: MeshHTTPRoute\nmesh: default\nname: public-api\nspec:\n  targetRef: {kind: MeshGateway, name: public}\n  to:\n  - targetRef: {kind: Mesh}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /api}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend}]\n";
    zone.apply(
        "/meshes/default/meshhttproutes/public-api",
        &route.replace(
            "name: public-api\n",
            "name: public-api\nlabels: {kuma.io/effect: shadow}\n",
        ),
    )
    .await?;
    let dp = zone.dp_server().await?;
    let backend = Envoy::start(&envoy, "default", "backend", &dp).await?;
    let gw = Envoy::start(&envoy, "default", "gw", &dp).await?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let get = |path: &'static str| async move {
        http(addr, "GET", path, None)
            .await
            .unwrap_or((0, String::new()))
    };

    // The listener is up, with no route yet: 404.
    let up = wait_until(Duration::from_secs(30), || async {
        get("/api").await.0 == 404
    })
    .await;
    assert!(
        up.is_ok(),
        "gateway listener: {:?}\n{}",
        get("/api").await,
        gw.log_tail()
    );
    let (status, inspect) = zone
        .call(
            "GET",
            "/meshes/default/dataplanes/gw/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{inspect}");
    let diff = inspect["diff"].to_string();
    assert!(diff.contains("/api") && diff.contains("backend"), "{diff}");
    for _ in 0..3 {
        assert_eq!(
            get("/api").await.0,
            404,
            "a shadow route changes no traffic"
        );
    }

    // Promoted: /api reaches the backend through the gateway, over the mesh's mTLS.
    zone.apply("/meshes/default/meshhttproutes/public-api", route)
        .await?;
    let routed = wait_until(Duration::from_secs(20), || async {
        get("/api/orders").await.0 == 200
    })
    .await;
    assert!(
        routed.is_ok(),
        "not routed: {:?}\n--- gw:\n{}\n--- backend:\n{}",
        get("/api/orders").await,
        gw.log_tail(),
        backend.log_tail()
    );
    assert!(get("/api/orders").await.1.contains("backend"));
    assert_eq!(get("/other").await.0, 404, "no rule matches: 404");

    // HTTPS: TLS terminated with pay.test's certificate, then the same route.
    let tls_addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse()?;
    let ca = pki.ca_pem.as_str();
    let https = || async move {
        external_https::https_get(tls_addr, "pay.test", ca, "/api/charge")
            .await
            .unwrap_or_else(|e| (0, e.to_string()))
    };
    let terminated = wait_until(Duration::from_secs(20), || async { https().await.0 == 200 }).await;
    assert!(
        terminated.is_ok(),
        "HTTPS through the gateway: {:?}\n{}",
        https().await,
        gw.log_tail()
    );
    assert!(https().await.1.contains("backend"));

    // TCP: the MeshTCPRoute's backend, the bytes passed through (over the mesh's mTLS).
    zone.apply(
        "/meshes/default/meshtcproutes/public-tcp",
        "type: MeshTCPRoute\nmesh: default\nname: public-tcp\nspec:\n  targetRef: {kind: MeshGateway, name: public}\n  to:\n  - targetRef: {kind: Mesh}\n    rules:\n    - default:\n        backendRefs: [{kind: MeshService, name: backend}]\n",
    )
    .await?;
    let tcp_addr: SocketAddr = format!("127.0.0.1:{tcp_port}").parse()?;
    let tcp = || async move {
        http(tcp_addr, "GET", "/raw", None)
            .await
            .unwrap_or((0, String::new()))
    };
    let passed = wait_until(Duration::from_secs(20), || async { tcp().await.0 == 200 }).await;
    assert!(passed.is_ok(), "TCP through the gateway: {:?}", tcp().await);
    assert!(tcp().await.1.contains("backend"));
    drop(gw);
    drop(backend);
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_gateway_route_converted_to_a_meshhttproute_routes_the_same_traffic(
) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let zone = Zone::start("zone-1").await?;
    zone.apply("/meshes/default", MESH).await?;
    zone.apply(
        "/meshes/default/meshtrafficpermissions/into-backend",
        "type: MeshTrafficPermission\nmesh: default\nname: into-backend\nspec:\n  targetRef: {kind: Mesh}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {action: Allow}\n",
    )
    .await?;
    // backend in two versions, each answering its name.
    let mut apps = Vec::new();
    for (name, version) in [("backend-v1", "v1"), ("backend-v2", "v2")] {
        let (inbound, app_port) = (free_port(), free_port());
        apps.push(echo_app(app_port, name).await?);
        put_yaml(
            zone.api,
            &format!("/meshes/default/dataplanes/{name}"),
            &format!("type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app_port}\n    tags: {{kuma.io/service: backend, kuma.io/protocol: http, version: {version}}}\n"),
        )
        .await?;
    }
    let port = free_port();
    let gateway = format!("type: MeshGateway\nmesh: default\nname: public\nselectors:\n- match: {{kuma.io/service: edge}}\nconf:\n  listeners:\n  - port: {port}\n    protocol: HTTP\n");
    zone.apply("/meshes/default/meshgateways/public", &gateway)
        .await?;
    // The old route: /v2 to version v2, everything else to v1.
    let old_route = "type: MeshGatewayRoute\nmesh: default\nname: public-routes\nselectors:\n- match: {kuma.io/service: edge}\nconf:\n  http:\n    rules:\n    - matches: [{path: {match: PREFIX, value: /v2}}]\n      backends: [{weight: 1, destination: {kuma.io/service: backend, version: v2}}]\n    - matches: [{path: {match: PREFIX, value: /}}]\n      backends: [{weight: 1, destination: {kuma.io/service: backend, version: v1}}]\n";
    zone.apply("/meshes/default/meshgatewayroutes/public-routes", old_route)
        .await?;
    put_yaml(
        zone.api,
        "/meshes/default/dataplanes/gw",
        "type: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 127.0.0.1\n  gateway:\n    type: BUILTIN\n    tags: {kuma.io/service: edge}\n",
    )
    .await?;
    let dp = zone.dp_server().await?;
    let _v1 = Envoy::start(&envoy, "default", "backend-v1", &dp).await?;
    let _v2 = Envoy::start(&envoy, "default", "backend-v2", &dp).await?;
    let gw = Envoy::start(&envoy, "default", "gw", &dp).await?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let get = |path: &'static str| async move {
        http(addr, "GET", path, None)
            .await
            .map(|(s, body)| (s, body.split_whitespace().next().unwrap_or("").to_owned()))
            .unwrap_or((0, String::new()))
    };
    // Each path reaches its version (the echo app answers its name, then the path), several
    // times (the two versions' clusters may come up in
    // either order).
    let routes_by_version = || async {
        for _ in 0..3 {
            if get("/v2/items").await != (200, "backend-v2".to_owned())
                || get("/items").await != (200, "backend-v1".to_owned())
                || get("/v2").await != (200, "backend-v2".to_owned())
            {
                return false;
            }
        }
        true
    };
    let routed = wait_until(Duration::from_secs(30), routes_by_version).await;
    assert!(
        routed.is_ok(),
        "MeshGatewayRoute: {:?} {:?}\n{}",
        get("/v2/items").await,
        get("/items").await,
        gw.log_tail()
    );

    // Converted as `umbractl convert` converts it (with its MeshGateway): a shadow
    // MeshHTTPRoute targeting the MeshGateway, whose shadow config is the live one.
    let inputs = umbra_core::resource::Resource::all_from_bytes(
        format!("{MESH}---\n{gateway}---\n{old_route}").as_bytes(),
    )?;
    let conversions = umbra_core::convert::convert(&inputs, &Default::default());
    let outputs: Vec<_> = conversions
        .into_iter()
        .map(|c| c.map_err(|e| anyhow::anyhow!("{e}")))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flat_map(|c| c.outputs)
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let new_route = &outputs[0];
    assert_eq!(new_route.ty().name(), "MeshHTTPRoute");
    let path = format!("/meshes/default/meshhttproutes/{}", new_route.meta.name);
    zone.apply(&path, &serde_json::to_string(&new_route.to_value())?)
        .await?;
    let (status, inspect) = zone
        .call(
            "GET",
            "/meshes/default/dataplanes/gw/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{inspect}");
    // The conversion routes exactly as the MeshGatewayRoute: the diff only names the Envoy
    // routes (Kuma names those of MeshHTTPRoutes by their matches, not MeshGatewayRoutes').
    let ops = inspect["diff"].as_array().cloned().unwrap_or_default();
    assert!(!ops.is_empty(), "{inspect:#}");
    for op in &ops {
        let path = op["path"].as_str().unwrap_or_default();
        assert!(
            op["op"] == "add" && path.contains("/routes/") && path.ends_with("/name"),
            "the conversion routes exactly as the MeshGatewayRoute: {inspect:#}"
        );
    }

    // Promoted and the old route deleted: the same traffic, now routed by the MeshHTTPRoute.
    let mut promoted = new_route.to_value();
    promoted["labels"]
        .as_object_mut()
        .map(|l| l.remove("kuma.io/effect"));
    zone.apply(&path, &serde_json::to_string(&promoted)?)
        .await?;
    let (status, body) = zone
        .call(
            "DELETE",
            "/meshes/default/meshgatewayroutes/public-routes",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    for _ in 0..5 {
        assert!(
            routes_by_version().await,
            "after promotion: {:?} {:?} {:?}\n{}",
            get("/v2/items").await,
            get("/items").await,
            get("/v2").await,
            gw.log_tail()
        );
    }

    // A MeshRateLimit on the MeshGateway: 2 requests a minute, then 429 from the gateway.
    zone.apply(
        "/meshes/default/meshratelimits/gateway-limit",
        "type: MeshRateLimit\nmesh: default\nname: gateway-limit\nspec:\n  targetRef: {kind: MeshGateway, name: public}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      local:\n        http: {requestRate: {num: 2, interval: 60s}, onRateLimit: {status: 429}}\n",
    )
    .await?;
    let limited = wait_until(Duration::from_secs(20), || async {
        get("/items").await.0 == 429
    })
    .await;
    assert!(limited.is_ok(), "never limited: {:?}", get("/items").await);
    // Each route has its own bucket (a per-route config, as Kuma writes it): /v2's third
    // request is refused too.
    let mut answers = Vec::new();
    for _ in 0..3 {
        let (status, body) = http(addr, "GET", "/v2/items", None).await?;
        answers.push((status, body.trim().to_owned()));
    }
    assert_eq!(
        answers[2],
        (429, "local_rate_limited".to_owned()),
        "{answers:?}"
    );
    drop(gw);
    drop(apps);
    zone.stop().await
}

/// A builtin gateway bootstrapped as kuma-dp is (`POST /bootstrap`: its Envoy's runtime has the
/// RTDS layer `gateway.listeners` over ADS) takes its listener's `resources.connectionLimit`
/// from the Runtime the zone serves: with a limit of 1 and one connection held open, the next
/// connection is closed and counted in `downstream_cx_overflow`; raised to 2 in the
/// MeshGateway, the new limit reaches the running Envoy over RTDS and the request passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_listener_connection_limit_is_served_over_rtds() -> anyhow::Result<()> {
    use base64::Engine as _;
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _app) = with_backend(&permission("edge")).await?;
    let (port, admin) = (free_port(), free_port());
    let gateway = |limit: u32| {
        format!("type: MeshGateway\nmesh: default\nname: limited\nselectors:\n- match: {{kuma.io/service: edge}}\nconf:\n  listeners:\n  - port: {port}\n    protocol: HTTP\n    resources: {{connectionLimit: {limit}}}\n")
    };
    zone.apply("/meshes/default/meshgateways/limited", &gateway(1))
        .await?;
    zone.apply(
        "/meshes/default/meshhttproutes/limited-api",
        "type: MeshHTTPRoute\nmesh: default\nname: limited-api\nspec:\n  targetRef: {kind: MeshGateway, name: limited}\n  to:\n  - targetRef: {kind: Mesh}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend}]\n",
    )
    .await?;
    let dp = zone.dp_server().await?;
    let _backend = Envoy::start(&envoy, "default", "backend", &dp).await?;
    // kuma-dp's way: the Dataplane and its token in a bootstrap request.
    let dataplane = "type: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 127.0.0.1\n  gateway:\n    type: BUILTIN\n    tags: {kuma.io/service: edge}\n";
    let body = serde_json::json!({
        "mesh": "default", "name": "gw", "proxyType": "dataplane", "adminPort": admin,
        "dataplaneToken": dp.token("default", "gw").await?, "dataplaneResource": dataplane,
        "version": {"kumaDp": {"version": "2.7.29"}, "envoy": {"version": "1.30.2", "kumaDpCompatible": true}},
    })
    .to_string();
    let (status, _, answer) =
        umbra_e2e::https_post(dp.addr, "localhost", &dp.ca_pem, "/bootstrap", &body).await?;
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer)?;
    let config = base64::engine::general_purpose::STANDARD
        .decode(answer["bootstrap"].as_str().unwrap_or_default())?;
    assert!(String::from_utf8_lossy(&config).contains("rtds_layer"));
    let admin: SocketAddr = format!("127.0.0.1:{admin}").parse()?;
    let gw = Envoy::from_bootstrap(&envoy, "gw", &config, admin)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let get = || async move {
        http(addr, "GET", "/api", None)
            .await
            .map_or(0, |(status, _)| status)
    };
    let up = wait_until(Duration::from_secs(30), || async { get().await == 200 }).await;
    assert!(up.is_ok(), "gateway: {}\n{}", get().await, gw.log_tail());
    let stat = |name: &'static str| async move {
        let (_, text) = http(admin, "GET", &format!("/stats?filter={name}"), None)
            .await
            .unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with(&format!("listener.127.0.0.1_{port}.{name}:")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    let (_, runtime) = http(admin, "GET", "/runtime", None).await?;
    let key = format!("envoy.resource_limits.listener.limited:HTTP:{port}.connection_limit");
    assert!(runtime.contains(&key), "{runtime}");

    // One connection held open after a keep-alive request (an idle one would wait in the TLS
    // inspector, not count), the listener at its limit of 1.
    let mut held = tokio::net::TcpStream::connect(addr).await?;
    {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        held.write_all(b"GET /api HTTP/1.1\r\nHost: gw.test\r\n\r\n")
            .await?;
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), held.read(&mut buf)).await??;
        assert!(
            String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
    }
    let active = wait_until(Duration::from_secs(10), || async {
        stat("downstream_cx_active").await == 1
    })
    .await;
    assert!(active.is_ok(), "{}", gw.log_tail());
    assert_eq!(get().await, 0, "a connection past the limit is closed");
    assert!(stat("downstream_cx_overflow").await >= 1);

    // Raised to 2: the Runtime changes, the running Envoy takes it, the request passes.
    zone.apply("/meshes/default/meshgateways/limited", &gateway(2))
        .await?;
    let raised = wait_until(Duration::from_secs(20), || async { get().await == 200 }).await;
    assert!(raised.is_ok(), "{}", gw.log_tail());
    let (_, runtime) = http(admin, "GET", "/runtime", None).await?;
    let layer: serde_json::Value = serde_json::from_str(&runtime)?;
    assert_eq!(layer["entries"][&key]["final_value"], "2", "{runtime}");
    drop(held);
    zone.stop().await
}
