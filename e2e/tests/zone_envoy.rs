//! End to end: zone-cp serving real Envoy sidecars over ADS; traffic flows frontend -> backend
//! through the outbound and inbound listeners; a MeshFaultInjection aborts with 503, the same
//! policy as shadow does not, while `_config?shadow=true&include=diff` shows the fault filter.

use std::time::Duration;

use umbra_e2e::fixtures::{ALLOW_ALL, MTLS_MESH};
use umbra_e2e::{
    call_json, dataplane_yaml, envoy_binary, free_port, http, http_app, reconciled,
    wait_for_status, wait_until, AdsApi, Envoy, Sidecars, Zone,
};

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
/// [`MESH`] with mTLS from one builtin CA.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_flows_and_fault_injection_live_vs_shadow() -> anyhow::Result<()> {
    fault_injection_live_vs_shadow(AdsApi::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_xds_traffic_flows_and_fault_injection_live_vs_shadow() -> anyhow::Result<()> {
    fault_injection_live_vs_shadow(AdsApi::Delta).await
}

async fn fault_injection_live_vs_shadow(api: AdsApi) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, backend, frontend, out, _app) = topology(&envoy, Duration::ZERO, api).await?;
    let (_, body) = http(out, "GET", "/", None).await?;
    assert_eq!(body, "hello from backend");

    // The fault as shadow: traffic unaffected, inspect shows the fault filter being added.
    let fault = |labels: &str| {
        format!("type: MeshFaultInjection\nmesh: default\nname: abort-all\n{labels}spec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default:\n      http:\n      - abort: {{httpStatus: 503, percentage: 100}}\n")
    };
    let served = |zone: &Zone| {
        let api = zone.api;
        async move {
            let (_, v) = call_json(
                api,
                "GET",
                "/meshes/default/dataplanes+insights/backend",
                None,
            )
            .await?;
            anyhow::Ok(v["dataplaneInsight"]["responsesSent"].clone())
        }
    };
    let sent_before = served(&zone).await?;
    zone.apply(
        "/meshes/default/meshfaultinjections/abort-all",
        &fault("labels: {kuma.io/effect: shadow}\n"),
    )
    .await?;
    // Once the zone has reconciled the write, the backend's Live snapshot is decided: nothing
    // was pushed to it, and traffic is untouched.
    reconciled(zone.api).await?;
    assert_eq!(
        served(&zone).await?,
        sent_before,
        "the shadow policy changed nothing the backend's Envoy is sent"
    );
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
    let aborted = wait_for_status(out, 503, Duration::from_secs(10)).await;
    assert!(
        aborted.is_ok(),
        "fault injection did not abort.\nbackend:\n{}",
        backend.log_tail()
    );

    drop(frontend);
    drop(backend);
    zone.stop().await
}

/// Start a zone with backend (app answering after `delay`) and frontend sidecars; returns the
/// zone, both Envoys and the frontend's outbound address once traffic flows.
async fn topology(envoy: &str, delay: Duration, api: AdsApi) -> anyhow::Result<Topology> {
    topology_with(envoy, delay, api, MESH, &[]).await
}

type Topology = (
    Zone,
    Envoy,
    Envoy,
    std::net::SocketAddr,
    tokio::task::JoinHandle<()>,
);

/// [`topology`] in a mesh given as YAML (named `default`), with `(path, YAML)` resources put
/// before the sidecars start.
async fn topology_with(
    envoy: &str,
    delay: Duration,
    api: AdsApi,
    mesh: &str,
    resources: &[(&str, &str)],
) -> anyhow::Result<Topology> {
    let zone = Zone::start("zone-1").await?;
    zone.apply("/meshes/default", mesh).await?;
    for (path, yaml) in resources {
        zone.apply(path, yaml).await?;
    }
    let dp = zone.dp_server().await?;
    let s = Sidecars::start(envoy, zone.api, &dp, delay, (api, api)).await?;
    Ok((zone, s.backend, s.frontend, s.out, s.app))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_builtin_ca_serves_identities_over_sds_and_traffic_permissions_apply(
) -> anyhow::Result<()> {
    mtls_scenario(AdsApi::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_xds_mtls_builtin_ca_serves_identities_over_sds() -> anyhow::Result<()> {
    mtls_scenario(AdsApi::Delta).await
}

async fn mtls_scenario(api: AdsApi) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    // Traffic only flows once both sidecars have their identity and the mesh CA over SDS and
    // the TLS handshake verifies `spiffe://default/backend`.
    let (zone, backend, frontend, out, _app) = topology_with(
        &envoy,
        Duration::ZERO,
        api,
        MTLS_MESH,
        &[(
            "/meshes/default/meshtrafficpermissions/allow-all",
            ALLOW_ALL,
        )],
    )
    .await?;
    let (_, v) = zone
        .call("GET", "/meshes/default/dataplanes+insights/frontend", None)
        .await?;
    assert!(
        v["dataplaneInsight"]["acked"]
            .as_object()
            .is_some_and(|m| m.keys().any(|k| k.ends_with("Secret"))),
        "secrets ACKed: {v}"
    );
    // Deny frontend -> backend: the RBAC filter on backend's inbound answers 403.
    zone.apply(
        "/meshes/default/meshtrafficpermissions/deny-frontend",
        "type: MeshTrafficPermission\nmesh: default\nname: deny-frontend\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: MeshService, name: frontend}\n    default: {action: Deny}\n",
    )
    .await?;
    let denied = wait_for_status(out, 403, Duration::from_secs(10)).await;
    assert!(
        denied.is_ok(),
        "no 403 after Deny.\nbackend:\n{}",
        backend.log_tail()
    );
    drop(frontend);
    zone.stop().await
}

/// Observe mode (issue 40): a shadow MeshTrafficPermission labelled `umbra.io/observe: "true"`
/// that would deny frontend -> backend denies nothing, and the backend's real Envoy counts
/// every request it would have denied (`...rbac.umbra_observe.<policy>.shadow_denied`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_permission_counts_would_be_denials_and_denies_nothing() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, backend, frontend, out, _app) = topology_with(
        &envoy,
        Duration::ZERO,
        AdsApi::Sotw,
        MTLS_MESH,
        &[(
            "/meshes/default/meshtrafficpermissions/allow-all",
            ALLOW_ALL,
        )],
    )
    .await?;
    zone.apply(
        "/meshes/default/meshtrafficpermissions/deny-frontend",
        "type: MeshTrafficPermission\nmesh: default\nname: deny-frontend\nlabels: {kuma.io/effect: shadow, umbra.io/observe: 'true'}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: MeshService, name: frontend}\n    default: {action: Deny}\n",
    )
    .await?;
    let shadow_denied = |admin| async move {
        let Ok((200, text)) = http(admin, "GET", "/stats?filter=umbra_observe", None).await else {
            return 0;
        };
        text.lines()
            .filter(|l| l.contains("rbac.umbra_observe.deny-frontend.shadow_denied: "))
            .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<u64>().ok())
            .sum::<u64>()
    };
    // Requests flow while the zone pushes the observer; the backend's Envoy starts counting.
    // While its inbound listener is replaced, a request may meet a draining connection (a
    // reset, not a denial): none may be refused by RBAC (403).
    let mut during = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while shadow_denied(backend.admin).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no shadow denial counted.\nbackend:\n{}",
            backend.log_tail()
        );
        if let Ok((status, _)) = http(out, "GET", "/", None).await {
            during.push(status);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !during.contains(&403),
        "observing must deny nothing: {during:?}"
    );
    // Once pushed, every request goes through.
    for _ in 0..5 {
        let status = http(out, "GET", "/", None).await?.0;
        assert_eq!(status, 200, "observing must deny nothing");
    }
    let before = shadow_denied(backend.admin).await;
    for _ in 0..3 {
        assert_eq!(http(out, "GET", "/", None).await?.0, 200);
    }
    assert!(
        shadow_denied(backend.admin).await >= before + 3,
        "each request is counted"
    );
    drop(frontend);
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_timeout_request_timeout_gives_504() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _backend, frontend, out, _app) =
        topology(&envoy, Duration::from_secs(3), AdsApi::Sotw).await?;
    zone.apply(
        "/meshes/default/meshtimeouts/one-second",
        "type: MeshTimeout\nmesh: default\nname: one-second\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    default: {http: {requestTimeout: 1s}}\n",
    )
    .await?;
    let timed_out = wait_for_status(out, 504, Duration::from_secs(15)).await;
    assert!(
        timed_out.is_ok(),
        "no 504.\nfrontend:\n{}",
        frontend.log_tail()
    );
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_cluster_warms_at_once() -> anyhow::Result<()> {
    changed_cluster_scenario(AdsApi::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_xds_a_changed_cluster_warms_at_once() -> anyhow::Result<()> {
    changed_cluster_scenario(AdsApi::Delta).await
}

/// A change of an EDS cluster (its connect timeout, by a MeshTimeout) takes effect on a
/// running Envoy at once, one change at a time and two back to back: Envoy re-warms the changed cluster and waits for
/// its endpoints in an EDS response, which the zone sends right behind every CDS response
/// (xDS protocol doc, "Resource warming"). Unanswered, the cluster would run its old config
/// until its 15 s `initial_fetch_timeout` ran out.
async fn changed_cluster_scenario(api: AdsApi) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _backend, frontend, out, _app) = topology(&envoy, Duration::ZERO, api).await?;
    // The connect timeout of frontend's active `backend` cluster, and whether any cluster is
    // still warming.
    let state = |admin| async move {
        let (_, active) = http(
            admin,
            "GET",
            "/config_dump?resource=dynamic_active_clusters",
            None,
        )
        .await
        .ok()?;
        let (_, warming) = http(
            admin,
            "GET",
            "/config_dump?resource=dynamic_warming_clusters",
            None,
        )
        .await
        .ok()?;
        let active: serde_json::Value = serde_json::from_str(&active).ok()?;
        let warming: serde_json::Value = serde_json::from_str(&warming).ok()?;
        let timeout = active["configs"]
            .as_array()?
            .iter()
            .find(|c| c["cluster"]["name"] == "backend")?["cluster"]["connect_timeout"]
            .as_str()?
            .to_owned();
        let warming = warming["configs"].as_array().is_some_and(|c| !c.is_empty());
        Some((timeout, warming))
    };
    let connect = |secs: u32| {
        format!("type: MeshTimeout\nmesh: default\nname: connect\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend}}\n    default: {{connectionTimeout: {secs}s}}\n")
    };
    // One change at a time, then two back to back (the second's CDS can go out while the
    // first's EDS response is still in flight: the EDS it owes must follow all the same).
    for (first, secs) in [(None, 3), (None, 7), (None, 4), (Some(6), 2), (Some(9), 5)] {
        if let Some(first) = first {
            zone.apply("/meshes/default/meshtimeouts/connect", &connect(first))
                .await?;
        }
        zone.apply("/meshes/default/meshtimeouts/connect", &connect(secs))
            .await?;
        let started = std::time::Instant::now();
        let want = format!("{secs}s");
        let warmed = wait_until(Duration::from_secs(12), || {
            let want = want.clone();
            async move { state(frontend.admin).await == Some((want, false)) }
        })
        .await;
        assert!(
            warmed.is_ok() && started.elapsed() < Duration::from_secs(8),
            "connect timeout {secs}s not active within 8 s ({:?}; state {:?}):\n{}",
            started.elapsed(),
            state(frontend.admin).await,
            frontend.log_tail()
        );
        wait_for_status(out, 200, Duration::from_secs(5)).await?;
    }
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nack_keeps_last_good_config_and_recovers() -> anyhow::Result<()> {
    nack_scenario(AdsApi::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_xds_nack_keeps_last_good_config_and_recovers() -> anyhow::Result<()> {
    nack_scenario(AdsApi::Delta).await
}

async fn nack_scenario(api: AdsApi) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _backend, frontend, out, _app) = topology(&envoy, Duration::ZERO, api).await?;
    // Envoy rejects a negative connect timeout (proto validation); Umbra's generation does not.
    zone.apply(
        "/meshes/default/meshproxypatches/bad-timeout",
        "type: MeshProxyPatch\nmesh: default\nname: bad-timeout\nspec:\n  targetRef: {kind: MeshService, name: frontend}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: backend}\n        value: 'connectTimeout: -1s'\n",
    )
    .await?;
    let nacked = wait_until(Duration::from_secs(10), || async {
        let Ok((200, v)) = zone
            .call("GET", "/meshes/default/dataplanes+insights/frontend", None)
            .await
        else {
            return false;
        };
        v["dataplaneInsight"]["nacked"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
    })
    .await;
    assert!(
        nacked.is_ok(),
        "no NACK recorded.\nfrontend:\n{}",
        frontend.log_tail()
    );
    let (_, v) = zone
        .call("GET", "/meshes/default/dataplanes+insights/frontend", None)
        .await?;
    let error = v["dataplaneInsight"]["nacked"].to_string();
    assert!(error.contains("duration"), "Envoy's error text: {error}");
    assert_eq!(
        http(out, "GET", "/", None).await?.0,
        200,
        "traffic keeps flowing on the previous config"
    );
    let (_, b) = zone
        .call("GET", "/meshes/default/dataplanes+insights/backend", None)
        .await?;
    assert!(
        b["dataplaneInsight"]["nacked"]
            .as_object()
            .is_none_or(|m| m.is_empty()),
        "other dataplanes unaffected: {b}"
    );
    // Deleting the policy recovers.
    zone.call(
        "DELETE",
        "/meshes/default/meshproxypatches/bad-timeout",
        None,
    )
    .await?;
    let recovered = wait_until(Duration::from_secs(10), || async {
        let Ok((200, v)) = zone
            .call("GET", "/meshes/default/dataplanes+insights/frontend", None)
            .await
        else {
            return false;
        };
        v["dataplaneInsight"]["nacked"]
            .as_object()
            .is_some_and(|m| m.is_empty())
    })
    .await;
    assert!(
        recovered.is_ok(),
        "NACK not cleared after deleting the policy"
    );
    assert_eq!(http(out, "GET", "/", None).await?.0, 200);
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_envoy_gets_its_full_config_again() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (zone, _backend, frontend, out, _app) =
        topology(&envoy, Duration::ZERO, AdsApi::Sotw).await?;
    drop(frontend);
    let down = wait_until(Duration::from_secs(5), || async {
        http(out, "GET", "/", None).await.is_err()
    })
    .await;
    assert!(down.is_ok(), "the old Envoy is gone");
    let frontend = Envoy::start(&envoy, "default", "frontend", &zone.dp_server().await?).await?;
    let back = wait_for_status(out, 200, Duration::from_secs(20)).await;
    assert!(
        back.is_ok(),
        "restarted Envoy did not get its config.\n{}",
        frontend.log_tail()
    );
    zone.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataplane_registers_through_envoy_node_metadata() -> anyhow::Result<()> {
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
    // Neither Dataplane is PUT: both come from the Envoys' node metadata.
    let dp = zone.dp_server().await?;
    let backend = Envoy::start_with_dataplane(
        &envoy,
        "default",
        "backend",
        &dp,
        Some(&dataplane_yaml(
            "backend",
            "backend",
            backend_in,
            backend_app,
            None,
        )),
    )
    .await?;
    let frontend = Envoy::start_with_dataplane(
        &envoy,
        "default",
        "frontend",
        &dp,
        Some(&dataplane_yaml(
            "frontend",
            "frontend",
            frontend_in,
            frontend_app,
            Some((outbound, "backend")),
        )),
    )
    .await?;
    let registered = wait_until(Duration::from_secs(20), || async {
        matches!(
            zone.call("GET", "/meshes/default/dataplanes/frontend", None)
                .await,
            Ok((200, _))
        ) && matches!(
            zone.call("GET", "/meshes/default/dataplanes/backend", None)
                .await,
            Ok((200, _))
        )
    })
    .await;
    assert!(
        registered.is_ok(),
        "not registered.\n{}",
        frontend.log_tail()
    );
    let out: std::net::SocketAddr = format!("127.0.0.1:{outbound}").parse()?;
    let ok = wait_for_status(out, 200, Duration::from_secs(20)).await;
    assert!(
        ok.is_ok(),
        "no traffic.\nbackend:\n{}\nfrontend:\n{}",
        backend.log_tail(),
        frontend.log_tail()
    );
    drop(frontend);
    drop(backend);
    zone.stop().await
}
