//! End to end, observe mode's report (issue 40): a Global, a federated zone-cp and three real
//! Envoys (backend, and two callers of it: frontend and admin) in an mTLS mesh that allows
//! everything. A shadow MeshTrafficPermission labelled `umbra.io/observe: "true"` would deny
//! frontend -> backend. Every request of both callers still answers 200; the Global's
//! `GET .../_observed` (asked of the zone over KDS, read from the backend's Envoy) counts exactly
//! the requests sent, attributes the would-be denials to frontend and none to admin, and the
//! zone's own API answers the same, `umbractl inspect observed` and the console render it. An
//! observed MeshRateLimit limits nothing and reports the requests it would have limited. A policy that is not observed is a 409, a type observe mode
//! does not render a 400.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use umbra_e2e::fixtures::{ALLOW_ALL, MTLS_MESH};
use umbra_e2e::fleet::{start_zone, temp_dir};
use umbra_e2e::{
    dataplane_yaml, envoy_binary, free_port, http, wait_for_status, wait_until, AdsApi, CpProcess,
    Envoy, Sidecars,
};

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

const DENY_FRONTEND: &str = "type: MeshTrafficPermission\nmesh: default\nname: deny-frontend\nlabels: {kuma.io/effect: shadow, umbra.io/observe: 'true'}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: MeshService, name: frontend}\n    default: {action: Deny}\n";

const LIMIT_BACKEND: &str = "type: MeshRateLimit\nmesh: default\nname: limit-backend\nlabels: {kuma.io/effect: shadow, umbra.io/observe: 'true'}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: Mesh}\n    default:\n      local:\n        http:\n          requestRate: {num: 2, interval: 60s}\n";

const REPORT: &str = "/meshes/default/meshtrafficpermissions/deny-frontend/_observed";

async fn report(cp: &CpProcess) -> Value {
    let (status, body) = cp.call("GET", REPORT, None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// `(requests, wouldRefuse, frontend's wouldRefuse)` of a report, asserting its shape.
fn counts(r: &Value) -> (u64, u64, u64) {
    let frontend = r["callers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["service"] == "frontend")
        .map_or(0, |c| c["wouldRefuse"].as_u64().unwrap());
    (
        r["totals"]["requests"].as_u64().unwrap(),
        r["totals"]["wouldRefuse"].as_u64().unwrap(),
        frontend,
    )
}

async fn send(out: SocketAddr, n: usize) {
    for _ in 0..n {
        let (status, _) = http(out, "GET", "/", None).await.unwrap();
        assert_eq!(status, 200, "observing must deny nothing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_reports_an_observed_permissions_would_be_denials_per_caller(
) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = temp_dir("observe");
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    global.apply("/meshes/default", MTLS_MESH).await?;
    global
        .apply(
            "/meshes/default/meshtrafficpermissions/allow-all",
            ALLOW_ALL,
        )
        .await?;
    let zone = start_zone(ZONE, &global, "zone-1", &dir).await?;
    wait_until(Duration::from_secs(20), || async {
        matches!(
            zone.call(
                "GET",
                "/meshes/default/meshtrafficpermissions/allow-all",
                None
            )
            .await,
            Ok((200, _))
        )
    })
    .await
    .map_err(|_| anyhow::anyhow!("the policy did not reach the zone:\n{}", zone.log_tail()))?;

    // backend and frontend, then admin, a second caller of backend.
    let dp = umbra_e2e::DpServer::of(zone.api, zone.grpc, global.api).await?;
    let sidecars = Sidecars::start(
        &envoy,
        zone.api,
        &dp,
        Duration::ZERO,
        (AdsApi::Sotw, AdsApi::Sotw),
    )
    .await?;
    let admin_out = free_port();
    zone.apply(
        "/meshes/default/dataplanes/admin",
        &dataplane_yaml(
            "admin",
            "admin",
            free_port(),
            free_port(),
            Some((admin_out, "backend")),
        ),
    )
    .await?;
    let admin = Envoy::start(&envoy, "default", "admin", &dp).await?;
    let admin_out: SocketAddr = format!("127.0.0.1:{admin_out}").parse()?;
    wait_for_status(admin_out, 200, Duration::from_secs(20))
        .await
        .map_err(|_| anyhow::anyhow!("no 200 through admin:\n{}", admin.log_tail()))?;

    // The observed policy, written on the Global; nothing is observing until the backend's
    // Envoy runs the config with the observer. Meanwhile every request answers 200.
    global
        .apply(
            "/meshes/default/meshtrafficpermissions/deny-frontend",
            DENY_FRONTEND,
        )
        .await?;
    let observing = wait_until(Duration::from_secs(20), || async {
        let (_, r) = global.call("GET", REPORT, None).await.unwrap();
        r["totals"]["observing"] == 1
    })
    .await;
    assert!(
        observing.is_ok(),
        "the backend never reported its observer.\nglobal:\n{}\nzone:\n{}\nbackend:\n{}",
        global.log_tail(),
        zone.log_tail(),
        sidecars.backend.log_tail()
    );

    // Exactly 5 requests of frontend and 3 of admin: all answered 200, all counted, the 5 of
    // frontend attributed to it as would-be denials.
    let before = report(&global).await;
    send(sidecars.out, 5).await;
    send(admin_out, 3).await;
    let after = report(&global).await;
    let (b, a) = (counts(&before), counts(&after));
    assert_eq!(
        (a.0 - b.0, a.1 - b.1, a.2 - b.2),
        (8, 5, 5),
        "requests, would-be denials, frontend's: {after:#}"
    );
    assert_eq!(after["partial"], false, "{after:#}");
    assert_eq!(
        after["otherCallersWouldRefuse"], 0,
        "admin is not denied: {after:#}"
    );
    assert_eq!(after["callers"].as_array().unwrap().len(), 1, "{after:#}");
    assert_eq!(after["zones"][0]["zone"], "zone-1");
    let dps = after["dataplanes"].as_array().unwrap();
    assert_eq!(dps.len(), 1, "only backend is selected: {after:#}");
    assert_eq!(dps[0]["name"], "backend");
    assert_eq!(dps[0]["zone"], "zone-1");
    assert_eq!(dps[0]["observing"], true);

    // umbractl renders it from the Global.
    let text = umbractl::observed::inspect_observed(
        &format!("http://{}", global.api),
        "default",
        "MeshTrafficPermission/deny-frontend",
        umbractl::Output::Text,
    )
    .await?;
    assert!(
        text.starts_with(&format!(
            "MeshTrafficPermission/deny-frontend in mesh default: would deny {} of {} requests",
            a.1, a.0
        )),
        "{text}"
    );
    assert!(text.contains(&format!("frontend={}", a.2)), "{text}");

    // The console's policies page badges the policy and links its evidence page.
    let (status, html) = http(global.api, "GET", "/gui/meshes/default/policies", None).await?;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("/gui/meshes/default/policies/meshtrafficpermissions/deny-frontend/observed"),
        "{html}"
    );
    let (status, html) = http(
        global.api,
        "GET",
        "/gui/meshes/default/policies/meshtrafficpermissions/deny-frontend/observed",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(&format!(
            "Would deny <strong>{}</strong> of {} requests",
            a.1, a.0
        )),
        "{html}"
    );
    assert!(html.contains(r#"<tr data-caller="frontend">"#), "{html}");

    // The zone's own API answers the same counts (nothing was sent since).
    let local = report(&zone).await;
    assert_eq!(counts(&local), a, "{local:#}");
    assert_eq!(local["totals"], after["totals"]);

    // Refusals: a policy that is not observed, a type observe mode does not render, an
    // unknown policy.
    let (s, b) = global
        .call(
            "GET",
            "/meshes/default/meshtrafficpermissions/allow-all/_observed",
            None,
        )
        .await?;
    assert_eq!(s, 409, "{b}");
    let (s, b) = global
        .call(
            "GET",
            "/meshes/default/meshtimeouts/deny-frontend/_observed",
            None,
        )
        .await?;
    assert_eq!(s, 400, "{b}");
    let (s, b) = zone
        .call(
            "GET",
            "/meshes/default/meshtrafficpermissions/absent/_observed",
            None,
        )
        .await?;
    assert_eq!(s, 404, "{b}");

    // An observed MeshRateLimit of 2 requests a minute on backend: 6 quick requests of
    // frontend all answer 200; the report counts them and at least 2 (at most 4, if the
    // bucket refilled once meanwhile) that the limit would have refused.
    global
        .apply(
            "/meshes/default/meshratelimits/limit-backend",
            LIMIT_BACKEND,
        )
        .await?;
    let limit = "/meshes/default/meshratelimits/limit-backend/_observed";
    let observing = wait_until(Duration::from_secs(20), || async {
        let (_, r) = global.call("GET", limit, None).await.unwrap();
        r["totals"]["observing"] == 1
    })
    .await;
    assert!(
        observing.is_ok(),
        "the backend never reported its rate-limit observer.\nbackend:\n{}",
        sidecars.backend.log_tail()
    );
    let (_, before) = global.call("GET", limit, None).await?;
    send(sidecars.out, 6).await;
    let (status, after) = global.call("GET", limit, None).await?;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["effect"], "limit");
    let delta =
        |k: &str| after["totals"][k].as_u64().unwrap() - before["totals"][k].as_u64().unwrap();
    assert_eq!(delta("requests"), 6, "{after:#}");
    assert!(
        (2..=4).contains(&delta("wouldRefuse")),
        "would-be rate-limited: {after:#}"
    );
    assert_eq!(after["callers"], serde_json::json!([]));
    let (status, html) = http(
        global.api,
        "GET",
        "/gui/meshes/default/policies/meshratelimits/limit-backend/observed",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Would limit <strong>"), "{html}");
    drop((admin, sidecars));
    Ok(())
}
