//! End to end, cross-zone traffic (issue 18): a global-cp and two federated zone-cps as separate
//! processes, real Envoys for a frontend in zone-1, a backend in zone-2 and zone-2's
//! ZoneIngress, all on loopback.
//!
//! - zone-2's ingress registers through its zone's API, its Envoy authenticates with a
//!   zone-ingress token; the zone fills its `availableServices`, KDS carries it to the Global
//!   and on to zone-1, where it becomes the endpoint of `backend`;
//! - zone-2's ZoneEgress (registered through its API, its Envoy authenticated with a token
//!   of scope `egress`) reaches the Global with its insight and never zone-1;
//! - a request from the frontend reaches the backend across zones over mTLS through the
//!   ingress (which passes it through by SNI), and the backend answers with its zone;
//! - inspect covers the ingress (a shadow route's new SNI is in its diff, on its zone, through
//!   the Global and in the fleet-wide diff) and the frontend's cross-zone subset cluster;
//! - both zones' DPPs trust the same root: the mesh's one CA, from the Global;
//! - a MeshTrafficPermission denying the frontend (applied on the Global, enforced by the
//!   backend's sidecar in zone-2 on the frontend's own identity) makes it fail, deleting it
//!   restores it;
//! - each zone stamps its Dataplanes with `kuma.io/zone` (issue 33), on its copy, the Global's
//!   and the DPP's certificate, so zone selectors work: a MeshTrafficPermission denying
//!   `MeshSubset {kuma.io/zone: zone-1}` stops the zone-1 frontend and leaves a zone-2 frontend
//!   of the same service served, and a MeshTimeout whose `targetRef` is that subset reaches the
//!   zone-1 frontend's config only;
//! - a SIGKILLed and restarted zone-2 serves the same certificates, and so does a standalone
//!   zone (its own CA, kept in its store);
//! - when zone-2's backend goes, zone-1's endpoint for it goes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use umbra_e2e::fixtures::{ALLOW_ALL, MTLS_MESH};
use umbra_e2e::{
    dataplane_yaml, echo_app, envoy_binary, free_port, http, wait_until, CpProcess, DpServer, Envoy,
};

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

const SHADOW_ROUTE: &str = "type: MeshHTTPRoute\nmesh: default\nname: backend-v1\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshServiceSubset, name: backend, tags: {version: v1}, weight: 1}]\n";
const DENY_ZONE_1: &str = "type: MeshTrafficPermission\nmesh: default\nname: deny-zone-1\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: MeshSubset, tags: {kuma.io/zone: zone-1}}\n    default: {action: Deny}\n";
const TIMEOUT_ZONE_1: &str = "type: MeshTimeout\nmesh: default\nname: zone-1-callers\nspec:\n  targetRef: {kind: MeshSubset, tags: {kuma.io/zone: zone-1}}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    default: {http: {requestTimeout: 7s}}\n";
const DENY_FRONTEND: &str = "type: MeshTrafficPermission\nmesh: default\nname: deny-frontend\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: MeshService, name: frontend}\n    default: {action: Deny}\n";

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-multizone-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `(status, body)` of `GET /` through `addr`, `(0, error)` when it fails.
async fn get(addr: SocketAddr) -> (u16, String) {
    match http(addr, "GET", "/", None).await {
        Ok(r) => r,
        Err(e) => (0, e.to_string()),
    }
}

/// Whether `GET /` through `addr` answers `status` within 30 s.
async fn answers(addr: SocketAddr, status: u16) -> bool {
    wait_until(Duration::from_secs(30), || async {
        get(addr).await.0 == status
    })
    .await
    .is_ok()
}

/// The serial numbers of the mesh CA and identity certificates an Envoy holds (admin `/certs`).
async fn certs(envoy: &Envoy) -> (Vec<String>, Vec<String>) {
    let Ok((200, text)) = http(envoy.admin, "GET", "/certs", None).await else {
        return (Vec::new(), Vec::new());
    };
    let v: Value = serde_json::from_str(&text).unwrap_or_default();
    let mut ca = Vec::new();
    let mut chain = Vec::new();
    // Only the mesh's mTLS contexts (with an identity): the ADS connection's CA is the zone's
    // own data-plane server CA.
    let with_identity = v["certificates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["cert_chain"].as_array().is_some_and(|a| !a.is_empty()));
    for c in with_identity {
        for (key, out) in [("ca_cert", &mut ca), ("cert_chain", &mut chain)] {
            for cert in c[key].as_array().into_iter().flatten() {
                if let Some(s) = cert["serial_number"].as_str() {
                    out.push(s.to_owned());
                }
            }
        }
    }
    ca.sort();
    ca.dedup();
    chain.sort();
    chain.dedup();
    (ca, chain)
}

/// The `lbEndpoints` of `backend` in the frontend's live config on zone-1.
async fn backend_endpoints(zone: &CpProcess) -> Vec<Value> {
    let (_, body) = zone
        .call("GET", "/meshes/default/dataplanes/frontend/_config", None)
        .await
        .unwrap_or_default();
    body["xds"]["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"]["backend"]
        ["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["lbEndpoints"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// zone-1 and zone-2 federated to `global`, each with a `--data-dir` under `dir`.
async fn start_zones(
    global: &CpProcess,
    dir: &std::path::Path,
) -> anyhow::Result<(CpProcess, CpProcess)> {
    let mut zones = Vec::new();
    for zone in ["zone-1", "zone-2"] {
        let token = umbra_e2e::zone_token(global, zone).await?;
        let data = dir.join(format!("{zone}-data"));
        zones.push(
            umbra_e2e::start_federated_zone(
                ZONE,
                global,
                zone,
                &token,
                &["--data-dir".into(), data.display().to_string()],
                dir.join(format!("{zone}.log")),
            )
            .await?,
        );
    }
    let zone2 = zones.pop().expect("two zones started");
    let zone1 = zones.pop().expect("two zones started");
    Ok((zone1, zone2))
}

/// The hosts of cluster `backend` a running Envoy holds (admin `/clusters`: what the zone
/// really pushed, not what inspect generates).
async fn envoy_backend_hosts(envoy: &Envoy) -> Vec<String> {
    let Ok((200, text)) = http(envoy.admin, "GET", "/clusters", None).await else {
        return vec!["(admin unreachable)".into()];
    };
    let mut hosts: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("backend::"))
        .filter_map(|rest| rest.split_once("::").map(|(host, _)| host.to_owned()))
        .filter(|host| host.contains(':') && !host.contains('_'))
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

struct Fleet {
    global: CpProcess,
    zone1: CpProcess,
    zone2: CpProcess,
}

impl Fleet {
    fn logs(&self) -> String {
        format!(
            "--- global:\n{}\n--- zone-1:\n{}\n--- zone-2:\n{}",
            self.global.log_tail(),
            self.zone1.log_tail(),
            self.zone2.log_tail()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_in_zone_1_calls_a_backend_in_zone_2_through_its_ingress() -> anyhow::Result<()>
{
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = temp_dir();
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    global.apply("/meshes/default", MTLS_MESH).await?;
    global
        .apply(
            "/meshes/default/meshtrafficpermissions/allow-all",
            ALLOW_ALL,
        )
        .await?;
    let (zone1, zone2) = start_zones(&global, &dir).await?;
    let mut fleet = Fleet {
        global,
        zone1,
        zone2,
    };
    for z in [&fleet.zone1, &fleet.zone2] {
        wait_until(Duration::from_secs(20), || async {
            matches!(
                z.call(
                    "GET",
                    "/meshes/default/meshtrafficpermissions/allow-all",
                    None
                )
                .await,
                Ok((200, _))
            )
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}: the zones did not get the mesh\n{}", fleet.logs()))?;
    }

    // zone-2: the backend and the ingress.
    let (backend_app, backend_in) = (free_port(), free_port());
    let _app = echo_app(backend_app, "backend in zone-2").await?;
    fleet
        .zone2
        .apply(
            "/meshes/default/dataplanes/backend",
            &dataplane_yaml("backend", "backend", backend_in, backend_app, None),
        )
        .await?;
    let dp2 = DpServer::of(fleet.zone2.api, fleet.zone2.grpc, fleet.global.api).await?;
    let backend = Envoy::start(&envoy_bin, "default", "backend", &dp2).await?;
    let ingress_port = free_port();
    fleet
        .zone2
        .apply(
            "/zone-ingresses/ingress",
            &format!("type: ZoneIngress\nname: ingress\nnetworking:\n  address: 127.0.0.1\n  port: {ingress_port}\n  advertisedAddress: 127.0.0.1\n  advertisedPort: {ingress_port}\n"),
        )
        .await?;
    let (status, token) = fleet
        .global
        .call(
            "POST",
            "/tokens/zone-ingress",
            Some(r#"{"zone": "zone-2", "validFor": "1h"}"#),
        )
        .await?;
    anyhow::ensure!(status == 200, "zone-ingress token: {status} {token}");
    let ingress = Envoy::start_zone_proxy(
        &envoy_bin,
        "ingress",
        "ingress",
        &dp2,
        token.as_str().unwrap_or_default().trim(),
    )?;

    // zone-1: the frontend.
    let (frontend_app, frontend_in, outbound) = (free_port(), free_port(), free_port());
    fleet
        .zone1
        .apply(
            "/meshes/default/dataplanes/frontend",
            &dataplane_yaml(
                "frontend",
                "frontend",
                frontend_in,
                frontend_app,
                Some((outbound, "backend")),
            ),
        )
        .await?;
    let dp1 = DpServer::of(fleet.zone1.api, fleet.zone1.grpc, fleet.global.api).await?;
    let frontend = Envoy::start(&envoy_bin, "default", "frontend", &dp1).await?;
    let out: SocketAddr = format!("127.0.0.1:{outbound}").parse()?;
    let envoy_logs = |fleet: &Fleet| {
        format!(
            "{}\n--- frontend:\n{}\n--- ingress:\n{}\n--- backend:\n{}",
            fleet.logs(),
            frontend.log_tail(),
            ingress.log_tail(),
            backend.log_tail()
        )
    };
    let crossed = wait_until(Duration::from_secs(60), || async {
        get(out).await == (200, "backend in zone-2 /".to_owned())
    })
    .await;
    anyhow::ensure!(
        crossed.is_ok(),
        "no answer from zone-2 ({:?}); frontend endpoints {:?}\n{}",
        get(out).await,
        backend_endpoints(&fleet.zone1).await,
        envoy_logs(&fleet)
    );

    // The ingress as the Global and zone-1 see it: zone-2's, offering backend.
    let (_, list) = fleet.global.call("GET", "/zone-ingresses", None).await?;
    let item = &list["items"][0];
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(item["zone"], "zone-2", "{item}");
    assert_eq!(item["labels"]["kuma.io/zone"], "zone-2", "{item}");
    assert_eq!(
        item["availableServices"][0]["tags"]["kuma.io/service"], "backend",
        "{item}"
    );
    let (_, list) = fleet.zone1.call("GET", "/zone-ingresses", None).await?;
    assert_eq!(list["total"], 1, "{list}");
    let endpoints = backend_endpoints(&fleet.zone1).await;
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    assert_eq!(
        endpoints[0]["endpoint"]["address"]["socketAddress"]["portValue"], ingress_port,
        "zone-1 reaches backend through zone-2's ingress"
    );

    zone_egress_goes_to_the_global_only(&fleet, &envoy_bin, &dp2).await?;

    // Inspect covers the ingress (on its zone, and forwarded by the Global) and the
    // cross-zone cluster: a shadow route to backend v1 would add an SNI the ingress passes
    // through, and a subset cluster to the frontend.
    fleet
        .global
        .apply("/meshes/default/meshhttproutes/backend-v1", SHADOW_ROUTE)
        .await?;
    let sni = "backend{mesh=default,version=v1}";
    let seen = wait_until(Duration::from_secs(20), || async {
        let (status, body) = fleet
            .global
            .call(
                "GET",
                "/zone-ingresses/ingress/_config?shadow=true&include=diff",
                None,
            )
            .await
            .unwrap_or_default();
        status == 200 && body["diff"].to_string().contains(sni)
    })
    .await;
    let (status, body) = fleet
        .global
        .call(
            "GET",
            "/zone-ingresses/ingress/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    anyhow::ensure!(
        seen.is_ok(),
        "no SNI in the ingress's shadow diff: {status} {body}"
    );
    let live_sni = &body["xds"]["type.googleapis.com/envoy.config.listener.v3.Listener"];
    assert!(
        live_sni.to_string().contains("backend{mesh=default}"),
        "{body}"
    );
    let (status, direct) = fleet
        .zone2
        .call(
            "GET",
            "/zone-ingresses/ingress/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{direct}");
    assert_eq!(
        direct["diff"], body["diff"],
        "the Global relays the zone's answer"
    );
    let (status, frontend_diff) = fleet
        .zone1
        .call(
            "GET",
            "/meshes/default/dataplanes/frontend/_config?shadow=true&include=diff",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{frontend_diff}");
    assert!(
        frontend_diff["diff"].to_string().contains(sni),
        "the frontend's shadow subset cluster asks zone-2's ingress for {sni}: {frontend_diff}"
    );
    // The fleet-wide diff covers the ingress, with the patch its zone gives.
    let (status, fleet_diff) = fleet
        .global
        .call("GET", "/meshes/default/_shadow-diff?format=full", None)
        .await?;
    assert_eq!(status, 200, "{fleet_diff}");
    let entry = fleet_diff["dataplanes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["name"] == "zone-ingress/ingress")
        .unwrap_or_else(|| panic!("no ingress in the fleet diff: {fleet_diff}"));
    assert_eq!(entry["zone"], "zone-2", "{entry}");
    assert_eq!(entry["patch"], direct["diff"], "the zone's own patch");
    assert!(
        fleet_diff["dataplanes"]
            .to_string()
            .contains("\"frontend\""),
        "and the frontend: {fleet_diff}"
    );
    let (status, body) = fleet
        .global
        .call("DELETE", "/meshes/default/meshhttproutes/backend-v1", None)
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");

    // One CA for the mesh: both zones' DPPs hold the same root.
    let (ca1, _) = certs(&frontend).await;
    let (ca2, chain2) = certs(&backend).await;
    assert!(!ca1.is_empty(), "the frontend holds the mesh root");
    assert_eq!(ca1, ca2, "zone-1 and zone-2 trust the same root");

    envoy_admin_through_the_zones(&fleet, &frontend).await?;

    // A MeshTrafficPermission denying the frontend, enforced in zone-2 on its identity.
    fleet
        .global
        .apply(
            "/meshes/default/meshtrafficpermissions/deny-frontend",
            DENY_FRONTEND,
        )
        .await?;
    let denied = answers(out, 403).await;
    anyhow::ensure!(
        denied,
        "not denied: {:?}\n{}",
        get(out).await,
        envoy_logs(&fleet)
    );
    let (status, body) = fleet
        .global
        .call(
            "DELETE",
            "/meshes/default/meshtrafficpermissions/deny-frontend",
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    let allowed = answers(out, 200).await;
    anyhow::ensure!(
        allowed,
        "not allowed again: {:?}\n{}",
        get(out).await,
        envoy_logs(&fleet)
    );

    zone_selectors(&fleet, &envoy_bin, &dp2, &frontend, out).await?;

    // zone-2 SIGKILLed and restarted: the same root and the same identity certificates.
    fleet.zone2.restart().await?;
    let back = wait_until(Duration::from_secs(30), || async {
        umbra_e2e::dataplane_acked(fleet.zone2.api, "backend").await && get(out).await.0 == 200
    })
    .await;
    anyhow::ensure!(
        back.is_ok(),
        "not serving after the restart\n{}",
        envoy_logs(&fleet)
    );
    let (ca2_after, chain2_after) = certs(&backend).await;
    assert_eq!(ca2_after, ca2, "same root after the restart");
    assert_eq!(
        chain2_after, chain2,
        "same identity certificate after the restart"
    );

    // The backend goes: zone-1's endpoint for it goes (from what its Envoy holds).
    assert_eq!(
        envoy_backend_hosts(&frontend).await,
        [format!("127.0.0.1:{ingress_port}")],
        "the frontend's Envoy reaches backend through zone-2's ingress"
    );
    drop(backend);
    let (status, body) = fleet
        .zone2
        .call("DELETE", "/meshes/default/dataplanes/backend", None)
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    let gone = wait_until(Duration::from_secs(30), || async {
        envoy_backend_hosts(&frontend).await.is_empty()
    })
    .await;
    anyhow::ensure!(
        gone.is_ok(),
        "zone-1's frontend still has {:?}\n{}",
        envoy_backend_hosts(&frontend).await,
        fleet.logs()
    );
    fleet.zone1.kill();
    Ok(())
}

/// `GET /zones/{zone}` on the Global.
/// A ZoneEgress registered in zone-2, whose Envoy connects with a zone-ingress token of
/// scope `egress`, reaches the Global with its zone and
/// its insight (Kuma's `ZoneEgressOverview`), and never zone-1 (Kuma's `send_to_global`).
async fn zone_egress_goes_to_the_global_only(
    fleet: &Fleet,
    envoy_bin: &str,
    dp2: &DpServer,
) -> anyhow::Result<()> {
    let port = free_port();
    fleet
        .zone2
        .apply(
            "/zoneegresses/egress",
            &format!("type: ZoneEgress\nname: egress\nnetworking: {{address: 127.0.0.1, port: {port}}}\n"),
        )
        .await?;
    let (status, token) = fleet
        .global
        .call(
            "POST",
            "/tokens/zone-ingress",
            Some(r#"{"zone": "zone-2", "scope": ["egress"], "validFor": "1h"}"#),
        )
        .await?;
    anyhow::ensure!(status == 200, "egress token: {status} {token}");
    let egress = Envoy::start_zone_proxy(
        envoy_bin,
        "egress",
        "egress",
        dp2,
        token.as_str().unwrap_or_default().trim(),
    )?;
    let connected = wait_until(Duration::from_secs(30), || async {
        let (status, o) = fleet
            .global
            .call("GET", "/zoneegressoverviews?name=egress", None)
            .await
            .unwrap_or_default();
        status == 200
            && o["total"] == 1
            && o["items"][0]["zoneEgressInsight"]["connected"] == true
            && o["items"][0]["zoneEgressInsight"]["subscriptions"][0]["controlPlaneInstanceId"]
                == "zone-2"
    })
    .await;
    let (_, overview) = fleet
        .global
        .call("GET", "/zoneegressoverviews", None)
        .await?;
    anyhow::ensure!(
        connected.is_ok(),
        "the Global has no connected zone-2 egress: {overview}\n{}\n--- egress:\n{}",
        fleet.logs(),
        egress.log_tail()
    );
    let item = &overview["items"][0];
    assert_eq!(item["zoneEgress"]["zone"], "zone-2", "{item}");
    assert_eq!(item["labels"]["kuma.io/zone"], "zone-2", "{item}");
    assert_eq!(item["labels"]["kuma.io/display-name"], "egress", "{item}");
    let (_, list) = fleet.global.call("GET", "/zoneegresses", None).await?;
    assert_eq!(list["total"], 1, "{list}");
    let (status, _) = fleet
        .global
        .call(
            "DELETE",
            &format!(
                "/zoneegresses/{}",
                item["name"].as_str().unwrap_or_default()
            ),
            None,
        )
        .await?;
    assert_eq!(status, 405, "read-only on the Global");
    // Its Envoy's admin (Kuma's `/zoneegresses/{name}/stats`), through the Global.
    let (status, stats) = fleet
        .global
        .call("GET", "/zoneegresses/egress/stats", None)
        .await?;
    assert_eq!(status, 200, "{stats}");
    assert!(stats.to_string().contains("server."), "{stats}");
    // Its `_config`, computed by zone-2 (no mesh of this fleet routes through an egress: no
    // listener, and nothing left out).
    let (status, config) = fleet
        .global
        .call("GET", "/zoneegresses/egress/_config?include=diff", None)
        .await?;
    assert_eq!(status, 200, "{config}");
    assert!(config["xds"].is_object(), "{config}");
    assert_eq!(config["diff"], serde_json::json!([]), "{config}");
    // On its zone: its own insight; on zone-1, nothing, ever (the ingress synced meanwhile).
    let (_, own) = fleet
        .zone2
        .call("GET", "/zoneegresses+insights/egress", None)
        .await?;
    assert_eq!(own["zoneEgressInsight"]["connected"], true, "{own}");
    let (_, other) = fleet.zone1.call("GET", "/zoneegresses", None).await?;
    assert_eq!(
        other["total"], 0,
        "zone-1 never receives zone-2's egress: {other}"
    );
    Ok(())
}

async fn zone_status(global: &CpProcess, zone: &str) -> Value {
    global
        .call("GET", &format!("/zones/{zone}"), None)
        .await
        .map(|(_, v)| v)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_offline_past_the_cleanup_period_loses_its_resources_until_it_returns(
) -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = temp_dir();
    let global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &["--zone-cleanup-after".into(), "2s".into()],
        &[],
        dir.join("global.log"),
    )
    .await?;
    global.apply("/meshes/default", MTLS_MESH).await?;
    let (zone1, mut zone2) = start_zones(&global, &dir).await?;
    for z in [&zone1, &zone2] {
        wait_until(Duration::from_secs(20), || async {
            matches!(z.call("GET", "/meshes/default", None).await, Ok((200, _)))
        })
        .await?;
    }
    zone2
        .apply(
            "/meshes/default/dataplanes/backend",
            &dataplane_yaml("backend", "backend", free_port(), free_port(), None),
        )
        .await?;
    zone2
        .apply(
            "/zone-ingresses/ingress",
            "type: ZoneIngress\nname: ingress\nnetworking: {address: 127.0.0.1, port: 10001, advertisedAddress: 127.0.0.1, advertisedPort: 10001}\n",
        )
        .await?;
    zone1
        .apply(
            "/meshes/default/dataplanes/frontend",
            &dataplane_yaml(
                "frontend",
                "frontend",
                free_port(),
                free_port(),
                Some((free_port(), "backend")),
            ),
        )
        .await?;
    // A real Envoy for the frontend: what zone-1 pushes, not only what inspect generates.
    let dp1 = DpServer::of(zone1.api, zone1.grpc, global.api).await?;
    let frontend = Envoy::start(&envoy_bin, "default", "frontend", &dp1).await?;
    let logs = |zone2: &CpProcess| {
        format!(
            "--- global:\n{}\n--- zone-1:\n{}\n--- zone-2:\n{}\n--- frontend:\n{}",
            global.log_tail(),
            zone1.log_tail(),
            zone2.log_tail(),
            frontend.log_tail()
        )
    };
    let synced = wait_until(Duration::from_secs(20), || async {
        backend_endpoints(&zone1).await.len() == 1
            && envoy_backend_hosts(&frontend).await == ["127.0.0.1:10001"]
    })
    .await;
    anyhow::ensure!(
        synced.is_ok(),
        "zone-1 never saw zone-2's ingress\n{}",
        logs(&zone2)
    );
    let status = zone_status(&global, "zone-2").await;
    assert_eq!(status["online"], true, "{status}");
    assert_eq!(status["dataplanes"], 1, "{status}");
    assert_eq!(status["zoneIngresses"][0]["name"], "ingress", "{status}");
    assert_eq!(status["zoneIngresses"][0]["instances"], 1, "{status}");

    // zone-2 dies: after the period its resources go from the Global and from zone-1.
    zone2.kill();
    let cleaned = wait_until(Duration::from_secs(20), || async {
        let s = zone_status(&global, "zone-2").await;
        s["online"] == false && s["dataplanes"] == 0 && s["zoneIngresses"] == serde_json::json!([])
    })
    .await;
    anyhow::ensure!(
        cleaned.is_ok(),
        "not cleaned up: {}\n{}",
        zone_status(&global, "zone-2").await,
        logs(&zone2)
    );
    let gone = wait_until(Duration::from_secs(20), || async {
        backend_endpoints(&zone1).await.is_empty()
            && envoy_backend_hosts(&frontend).await.is_empty()
    })
    .await;
    anyhow::ensure!(
        gone.is_ok(),
        "zone-1 still reaches zone-2: {:?}, its Envoy {:?}",
        backend_endpoints(&zone1).await,
        envoy_backend_hosts(&frontend).await
    );
    assert_eq!(
        zone_status(&global, "zone-1").await["dataplanes"],
        1,
        "zone-1 keeps its own"
    );

    // zone-2 comes back: everything it has comes back.
    zone2.restart().await?;
    let back = wait_until(Duration::from_secs(30), || async {
        envoy_backend_hosts(&frontend).await == ["127.0.0.1:10001"]
            && zone_status(&global, "zone-2").await["dataplanes"] == 1
    })
    .await;
    anyhow::ensure!(
        back.is_ok(),
        "zone-2's resources did not come back\n{}",
        logs(&zone2)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_zone_keeps_its_ca_and_identities_across_a_sigkill() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = temp_dir();
    let data = dir.join("zone-data");
    let args = vec![
        "--zone".to_owned(),
        "solo".to_owned(),
        "--data-dir".to_owned(),
        data.display().to_string(),
    ];
    let mut zone = CpProcess::start(ZONE, "--ads-addr", &args, &[], dir.join("zone.log")).await?;
    zone.apply("/meshes/default", MTLS_MESH).await?;
    let (app, inbound) = (free_port(), free_port());
    zone.apply(
        "/meshes/default/dataplanes/backend",
        &dataplane_yaml("backend", "backend", inbound, app, None),
    )
    .await?;
    let dp = DpServer::of(zone.api, zone.grpc, zone.api).await?;
    let backend = Envoy::start(&envoy_bin, "default", "backend", &dp).await?;
    let issued = wait_until(Duration::from_secs(20), || async {
        let (ca, chain) = certs(&backend).await;
        !ca.is_empty() && !chain.is_empty()
    })
    .await;
    anyhow::ensure!(
        issued.is_ok(),
        "no identity\n{}\n{}",
        zone.log_tail(),
        backend.log_tail()
    );
    let before = certs(&backend).await;
    zone.restart().await?;
    let back = wait_until(Duration::from_secs(30), || async {
        umbra_e2e::dataplane_acked(zone.api, "backend").await
    })
    .await;
    anyhow::ensure!(
        back.is_ok(),
        "not back after the restart\n{}",
        zone.log_tail()
    );
    // The stream is back: any new secret would arrive with it. Watch for a while.
    for _ in 0..10 {
        assert_eq!(
            certs(&backend).await,
            before,
            "the same root and the same identity after a SIGKILL"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Kuma's `/meshes/{mesh}/dataplanes/{name}/xds|stats|clusters` and
/// `/zoneingresses/{name}/...`: the real Envoy's admin, read by its zone and forwarded by the
/// Global, the dataplane token redacted.
async fn envoy_admin_through_the_zones(fleet: &Fleet, frontend: &Envoy) -> anyhow::Result<()> {
    // The token the frontend's Envoy sends, from its own admin.
    let (_, own) = umbra_e2e::call_json(frontend.admin, "GET", "/config_dump", None).await?;
    let token = own["configs"][0]["bootstrap"]["dynamic_resources"]["ads_config"]["grpc_services"]
        [0]["initial_metadata"][0]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    anyhow::ensure!(
        token.len() > 20,
        "the frontend's Envoy sends a token: {own}"
    );
    for (who, cp) in [("zone-1", &fleet.zone1), ("the Global", &fleet.global)] {
        let (status, dump) = cp
            .call(
                "GET",
                "/meshes/default/dataplanes/frontend/xds?include_eds=true",
                None,
            )
            .await?;
        assert_eq!(status, 200, "{who}: {dump}");
        let text = dump.to_string();
        assert!(!text.contains(&token), "{who} redacts the dataplane token");
        assert!(text.contains("[redacted]"), "{who}: {text:.300}");
        assert!(
            text.contains("EndpointsConfigDump") && text.contains("backend"),
            "{who}: the running config with its endpoints: {text:.300}"
        );
        let (status, clusters) = cp
            .call("GET", "/meshes/default/dataplanes/frontend/clusters", None)
            .await?;
        assert_eq!(status, 200, "{who}: {clusters}");
        assert!(
            clusters.as_str().is_some_and(|t| t.contains("backend::")),
            "{who}: Envoy's text /clusters: {clusters}"
        );
        let (status, stats) = cp
            .call(
                "GET",
                "/meshes/default/dataplanes/frontend/stats?format=json",
                None,
            )
            .await?;
        assert_eq!(status, 200, "{who}: {stats}");
        assert!(stats["stats"].is_array(), "{who}: JSON stats: {stats:.300}");
        let (status, body) = cp
            .call(
                "GET",
                "/meshes/default/dataplanes/frontend/stats?format=xml",
                None,
            )
            .await?;
        assert_eq!(status, 400, "{who}: {body}");
        let (status, body) = cp
            .call("GET", "/meshes/default/dataplanes/nobody/xds", None)
            .await?;
        assert_eq!(status, 404, "{who}: {body}");
    }
    // The frontend's overview on the Global: its certificate, its Envoy's version and the
    // xDS counters, as its zone reported them.
    let overview = || async {
        let (_, list) = fleet
            .global
            .call(
                "GET",
                "/meshes/default/dataplanes+insights?name=frontend",
                None,
            )
            .await
            .unwrap_or_default();
        list["items"][0]["dataplaneInsight"].clone()
    };
    let reported = wait_until(Duration::from_secs(20), || async {
        let i = overview().await;
        i["mTLS"]["issuedBackend"] == "ca-1"
            && i["subscriptions"][0]["status"]["total"]["responsesAcknowledged"]
                .as_str()
                .is_some_and(|n| n != "0")
    })
    .await;
    let insight = overview().await;
    anyhow::ensure!(
        reported.is_ok(),
        "the frontend's insight on the Global: {insight}"
    );
    assert_eq!(
        insight["mTLS"]["supportedBackends"],
        serde_json::json!(["ca-1"]),
        "{insight}"
    );
    assert!(
        insight["mTLS"]["certificateRegenerations"].as_u64() >= Some(1),
        "{insight}"
    );
    let sub = &insight["subscriptions"][0];
    assert!(
        sub["version"]["envoy"]["version"]
            .as_str()
            .is_some_and(|v| v.split('.').count() == 3),
        "the Envoy's version from its node: {sub}"
    );
    assert!(sub["status"]["cds"]["responsesSent"].is_string(), "{sub}");

    // Each zone's release, as its KDS connection reported it (Kuma's ZoneOverview).
    let (_, zone) = fleet
        .global
        .call("GET", "/zones/zone-2+insights", None)
        .await?;
    assert_eq!(
        zone["zoneInsight"]["subscriptions"][0]["version"]["kumaCp"],
        serde_json::json!({"version": env!("CARGO_PKG_VERSION"), "kumaCpGlobalCompatible": true}),
        "{zone}"
    );

    // A ZoneIngress, on its zone and through the Global.
    for (who, cp) in [("zone-2", &fleet.zone2), ("the Global", &fleet.global)] {
        let (status, stats) = cp.call("GET", "/zoneingresses/ingress/stats", None).await?;
        assert_eq!(status, 200, "{who}: {stats}");
        assert!(
            stats.as_str().is_some_and(|t| t.contains("server.live")),
            "{who}: Envoy's text /stats: {stats}"
        );
    }
    Ok(())
}

/// Whether DPP `name`'s live config on `zone` has a 7 s request timeout on a route (the
/// MeshTimeout `zone-1-callers`).
async fn has_request_timeout(zone: &CpProcess, name: &str) -> bool {
    let path = format!("/meshes/default/dataplanes/{name}/_config");
    let (_, body) = zone.call("GET", &path, None).await.unwrap_or_default();
    body["xds"]["type.googleapis.com/envoy.config.listener.v3.Listener"]
        .to_string()
        .contains("\"timeout\":\"7s\"")
}

/// The URI SANs of the identity certificates an Envoy holds (admin `/certs`).
async fn identity_uris(envoy: &Envoy) -> Vec<String> {
    let Ok((200, text)) = http(envoy.admin, "GET", "/certs", None).await else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&text).unwrap_or_default();
    let mut uris: Vec<String> = v["certificates"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["cert_chain"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| {
            c["subject_alt_names"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|san| san["uri"].as_str().map(str::to_owned))
        .collect();
    uris.sort();
    uris.dedup();
    uris
}

/// Issue 33: zones stamp `kuma.io/zone` on their Dataplanes, and policies selecting by zone
/// work. A second `frontend` (same service) runs in zone-2 next to the backend; only the zone
/// tells the two callers apart.
async fn zone_selectors(
    fleet: &Fleet,
    envoy_bin: &str,
    dp2: &DpServer,
    frontend: &Envoy,
    out: SocketAddr,
) -> anyhow::Result<()> {
    // The tag is on zone-1's copy, the Global's, and in the frontend's certificate, though the
    // Dataplane was written without it.
    let (_, own) = fleet
        .zone1
        .call("GET", "/meshes/default/dataplanes/frontend", None)
        .await?;
    assert_eq!(
        own["networking"]["inbound"][0]["tags"]["kuma.io/zone"], "zone-1",
        "{own}"
    );
    let synced = wait_until(Duration::from_secs(20), || async {
        let (_, list) = fleet
            .global
            .call(
                "GET",
                "/meshes/default/dataplanes?tag=kuma.io/zone:zone-1",
                None,
            )
            .await
            .unwrap_or_default();
        list["total"] == 1
    })
    .await;
    anyhow::ensure!(
        synced.is_ok(),
        "the Global's copy of the frontend has no zone tag\n{}",
        fleet.logs()
    );
    let uris = identity_uris(frontend).await;
    assert!(
        uris.contains(&"kuma://kuma.io/zone/zone-1".to_owned()),
        "the frontend's certificate names its zone: {uris:?}"
    );

    // A zone-2 frontend: a client that claims zone-1 is corrected to its own zone.
    let (app, inbound, outbound) = (free_port(), free_port(), free_port());
    let claimed = dataplane_yaml(
        "frontend-2",
        "frontend",
        inbound,
        app,
        Some((outbound, "backend")),
    )
    .replace(
        "kuma.io/protocol: http}",
        "kuma.io/protocol: http, kuma.io/zone: zone-1}",
    );
    fleet
        .zone2
        .apply("/meshes/default/dataplanes/frontend-2", &claimed)
        .await?;
    let (_, own) = fleet
        .zone2
        .call("GET", "/meshes/default/dataplanes/frontend-2", None)
        .await?;
    assert_eq!(
        own["networking"]["inbound"][0]["tags"]["kuma.io/zone"], "zone-2",
        "{own}"
    );
    let frontend2 = Envoy::start(envoy_bin, "default", "frontend-2", dp2).await?;
    let out2: SocketAddr = format!("127.0.0.1:{outbound}").parse()?;
    let local = answers(out2, 200).await;
    anyhow::ensure!(
        local,
        "zone-2's frontend does not reach backend: {:?}\n{}",
        get(out2).await,
        frontend2.log_tail()
    );

    // Deny zone-1: the zone-1 frontend is refused, the zone-2 one keeps being served.
    fleet
        .global
        .apply(
            "/meshes/default/meshtrafficpermissions/deny-zone-1",
            DENY_ZONE_1,
        )
        .await?;
    let denied = answers(out, 403).await;
    anyhow::ensure!(
        denied,
        "zone-1 not denied: {:?}\n{}",
        get(out).await,
        fleet.logs()
    );
    for _ in 0..20 {
        assert_eq!(get(out2).await.0, 200, "zone-2's own caller stays served");
        assert_eq!(get(out).await.0, 403, "zone-1's caller stays denied");
    }
    let (status, body) = fleet
        .global
        .call(
            "DELETE",
            "/meshes/default/meshtrafficpermissions/deny-zone-1",
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    let allowed = answers(out, 200).await;
    anyhow::ensure!(allowed, "zone-1 not allowed again: {:?}", get(out).await);

    // A MeshTimeout whose targetRef is zone-1's DPPs: the zone-1 frontend's route to backend
    // gets it, the zone-2 frontend's does not.
    fleet
        .global
        .apply(
            "/meshes/default/meshtimeouts/zone-1-callers",
            TIMEOUT_ZONE_1,
        )
        .await?;
    let applied = wait_until(Duration::from_secs(20), || {
        has_request_timeout(&fleet.zone1, "frontend")
    })
    .await;
    anyhow::ensure!(
        applied.is_ok(),
        "the zone-1 frontend has no 7s request timeout\n{}",
        fleet.logs()
    );
    // Only once zone-2 holds the policy and reconciled it does its absence say anything.
    let synced = wait_until(Duration::from_secs(20), || async {
        matches!(
            fleet
                .zone2
                .call("GET", "/meshes/default/meshtimeouts/zone-1-callers", None)
                .await,
            Ok((200, _))
        )
    })
    .await;
    anyhow::ensure!(synced.is_ok(), "zone-2 did not get the MeshTimeout");
    umbra_e2e::reconciled(fleet.zone2.api).await?;
    assert!(
        !has_request_timeout(&fleet.zone2, "frontend-2").await,
        "the zone-2 frontend is not selected by a zone-1 MeshSubset"
    );
    let (status, body) = fleet
        .global
        .call(
            "DELETE",
            "/meshes/default/meshtimeouts/zone-1-callers",
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    drop(frontend2);
    let (status, body) = fleet
        .zone2
        .call("DELETE", "/meshes/default/dataplanes/frontend-2", None)
        .await?;
    anyhow::ensure!(status == 200, "{status} {body}");
    Ok(())
}
