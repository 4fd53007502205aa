//! End to end, staged rollouts (issue 40): a Global, a federated zone-cp and two real Envoys
//! (frontend -> backend, the backend app answering after 200 ms) with traffic flowing the
//! whole time, an old Timeout and an old RateLimit live.
//!
//! 0. A MeshRateLimit staged on frontend: the old RateLimit goes off on frontend only (the
//!    old-type-off rule for exactly the staged DPPs) and backend keeps its limit; the stage
//!    goes live, is stopped and rolled back.
//! 1. A shadow MeshTimeout of 1 ms on frontend's traffic to backend, rolled out in two stages
//!    (`1`, a sample of one DPP the zone selects by its sample point, then `100%`): its first
//!    stage goes live on frontend,
//!    frontend's Envoy times out, and the gate fails on `upstream_rq_timeout` after the soak;
//!    the rollout is rolled back (its copy deleted), the console shows the failed gate's
//!    numbers, and traffic recovers.
//! 2. The old Timeout's converted MeshTimeout, rolled out the same way with `umbractl migrate
//!    apply --stages`: the gate passes and the last stage is the plan's apply in one
//!    transaction (the MeshTimeout live, the Timeout deleted, the copy deleted).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use umbra_e2e::fleet::{start_zone, temp_dir};
use umbra_e2e::{envoy_binary, http, wait_for_status, wait_until, AdsApi, CpProcess, Sidecars};

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const TIMEOUT: &str = "type: Timeout\nmesh: default\nname: timeout-all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 5s, http: {requestTimeout: 10s}}\n";
const TIGHT: &str = "type: MeshTimeout\nmesh: default\nname: tight\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: frontend}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    default: {http: {requestTimeout: 1ms}}\n";
const RATE_LIMIT: &str = "type: RateLimit\nmesh: default\nname: backend-limit\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: backend}}]\nconf: {http: {requests: 1000, interval: 1s}}\n";
const MESH_RATE_LIMIT: &str = "type: MeshRateLimit\nmesh: default\nname: generous\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh, proxyTypes: [Sidecar]}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {local: {http: {requestRate: {num: 1000, interval: 1s}}}}\n";
const CONVERTED: &str = "type: MeshTimeout\nmesh: default\nname: timeout-all\nlabels: {kuma.io/effect: shadow, umbra.io/converted-from-type: Timeout, umbra.io/converted-from: timeout-all}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 5s, http: {requestTimeout: 10s}}\n";

/// Statuses of the requests sent so far (0: no answer).
type Seen = Arc<Mutex<Vec<u16>>>;

/// Send a request through `out` every 50 ms until dropped.
fn traffic(out: SocketAddr) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let status = http(out, "GET", "/", None).await.map_or(0, |(s, _)| s);
            s.lock().unwrap().push(status);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (seen, task)
}

async fn plan(global: &CpProcess, policy: &str) -> String {
    let (s, p) = global
        .call(
            "POST",
            "/meshes/default/_migration/plan",
            Some(&json!({"policies": [policy]}).to_string()),
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{p}");
    p["fingerprint"].as_str().unwrap().to_owned()
}

/// Wait until the rollout of `fp` has ended; its record.
async fn ended(global: &CpProcess, fp: &str) -> Value {
    let path = format!("/meshes/default/_migration/rollout?plan={fp}");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let (_, r) = global.call("GET", &path, None).await.unwrap();
        if r["state"] != "running" {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rollout did not end: {r:#}\n{}",
            global.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The names of `plural` in mesh `default` on `cp` (none while the mesh is not there yet, as
/// on a zone before its first sync).
async fn names(cp: &CpProcess, plural: &str) -> Vec<String> {
    let Ok((200, v)) = cp
        .call("GET", &format!("/meshes/default/{plural}"), None)
        .await
    else {
        return Vec::new();
    };
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_gate_rolls_back_and_a_passing_rollout_ends_in_the_plans_apply(
) -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let dir = temp_dir("rollout");
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    global.apply("/meshes/default", MESH).await?;
    global
        .apply("/meshes/default/timeouts/timeout-all", TIMEOUT)
        .await?;
    global
        .apply("/meshes/default/meshtimeouts/tight", TIGHT)
        .await?;
    global
        .apply("/meshes/default/meshtimeouts/timeout-all", CONVERTED)
        .await?;
    global
        .apply("/meshes/default/rate-limits/backend-limit", RATE_LIMIT)
        .await?;
    global
        .apply("/meshes/default/meshratelimits/generous", MESH_RATE_LIMIT)
        .await?;
    let zone = start_zone(ZONE, &global, "zone-1", &dir).await?;
    wait_until(Duration::from_secs(20), || async {
        names(&zone, "meshtimeouts").await.len() == 2
    })
    .await
    .map_err(|_| anyhow::anyhow!("policies did not reach the zone:\n{}", zone.log_tail()))?;
    let dp = umbra_e2e::DpServer::of(zone.api, zone.grpc, global.api).await?;
    let sidecars = Sidecars::start(
        &envoy,
        zone.api,
        &dp,
        Duration::from_millis(200),
        (AdsApi::Sotw, AdsApi::Sotw),
    )
    .await?;
    wait_until(Duration::from_secs(20), || async {
        matches!(global.call("GET", "/meshes/default/dataplanes", None).await,
            Ok((200, v)) if v["total"] == 2)
    })
    .await
    .map_err(|_| anyhow::anyhow!("the Dataplanes did not reach the Global"))?;
    let (seen, task) = traffic(sidecars.out);

    // 0. A MeshRateLimit staged on frontend: the old RateLimit turns off on frontend only
    //    (the old-type-off rule for exactly the staged DPPs); backend, outside the stage,
    //    keeps its limit, so the stage goes live. Then it is stopped and rolled back.
    // Local rate limit filters in a DPP's config.
    let limiters = |name: &'static str| {
        let zone = &zone;
        async move {
            let path = format!("/meshes/default/dataplanes/{name}/_config");
            let (_, v) = zone.call("GET", &path, None).await?;
            let text = v.to_string();
            Ok::<_, anyhow::Error>(text.matches("envoy.filters.http.local_ratelimit").count())
        }
    };
    let frontend_before = limiters("frontend").await?;
    let backend_before = limiters("backend").await?;
    assert!(backend_before > 0, "backend's old RateLimit");
    let fp = plan(&global, "MeshRateLimit/generous").await;
    let (s, started) = global
        .call(
            "POST",
            "/meshes/default/_migration/rollout",
            Some(
                &json!({"plan": fp, "stages": "kuma.io/service=frontend,100%", "soak": "1h"})
                    .to_string(),
            ),
        )
        .await?;
    assert_eq!(s, 200, "{started}");
    let path = format!("/meshes/default/_migration/rollout?plan={fp}");
    wait_until(Duration::from_secs(60), || async {
        matches!(global.call("GET", &path, None).await, Ok((_, r))
            if r["decisions"].as_array().is_some_and(|d| d.iter().any(|d| d["action"] == "stage acknowledged")))
    })
    .await
    .map_err(|_| anyhow::anyhow!("the stage did not go live:\n{}", global.log_tail()))?;
    assert!(
        limiters("frontend").await? > frontend_before,
        "frontend runs the staged MeshRateLimit on its inbound"
    );
    assert_eq!(
        limiters("backend").await?,
        backend_before,
        "backend, outside the stage, keeps its old RateLimit"
    );
    let (s, b) = global
        .call(
            "POST",
            "/meshes/default/_migration/stop",
            Some(&json!({"plan": fp}).to_string()),
        )
        .await?;
    assert_eq!(s, 200, "{b}");
    let r = ended(&global, &fp).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
    assert!(!names(&global, "meshratelimits")
        .await
        .iter()
        .any(|n| n.contains("-stage-")));

    // 1. The 1 ms MeshTimeout: the first stage's gate fails on timeouts and rolls back.
    let fp = plan(&global, "MeshTimeout/tight").await;
    let (s, started) = global
        .call(
            "POST",
            "/meshes/default/_migration/rollout",
            Some(
                &json!({"plan": fp, "stages": "1,100%", "soak": "3s",
                        "thresholds": {"minRequests": 5}})
                .to_string(),
            ),
        )
        .await?;
    assert_eq!(s, 200, "{started}");
    // A share of one DPP: a rollout sample the zone matches on frontend's own spec.
    assert_eq!(
        (
            &started["stages"][0]["share"],
            &started["stages"][0]["dataplanes"]
        ),
        (&json!("1"), &json!(["zone-1/frontend"])),
        "{started:#}"
    );
    // A second rollout in the mesh is refused while this one runs.
    let (s, b) = global
        .call(
            "POST",
            "/meshes/default/_migration/rollout",
            Some(&json!({"plan": fp, "stages": "kuma.io/service=frontend,100%"}).to_string()),
        )
        .await?;
    assert_eq!(s, 409, "{b}");
    let r = ended(&global, &fp).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
    let failed = r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["action"] == "gate failed")
        .unwrap_or_else(|| panic!("no failed gate: {r:#}"));
    assert_eq!(failed["stage"], 1);
    // The soak started once frontend's Envoy had ACKed the copy, not at the commit.
    let actions: Vec<&str> = r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["action"].as_str())
        .collect();
    let at = |a: &str| actions.iter().position(|x| *x == a);
    assert!(
        at("stage live") < at("stage acknowledged") && at("stage acknowledged") < at("gate failed"),
        "{actions:?}"
    );
    assert!(at("stage live").is_some(), "{actions:?}");
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("upstream_rq_timeout"),
        "{failed:#}"
    );
    assert!(
        seen.lock().unwrap().contains(&504),
        "the stage went live on frontend: its Envoy timed out"
    );
    let left = names(&global, "meshtimeouts").await;
    assert!(
        !left.iter().any(|n| n.contains("-stage-")),
        "the copies are deleted: {left:?}"
    );
    // The console shows it, with the failed gate's numbers.
    let (status, html) = http(
        global.api,
        "GET",
        &format!("/gui/meshes/default/rollout?plan={fp}"),
        None,
    )
    .await?;
    assert_eq!(status, 200, "{html}");
    for marker in [
        r#"data-state="rolledBack""#,
        r#"<tr data-action="gate failed""#,
        r#"<span class="chip">1</span> <span class="muted">(a sample)</span>"#,
    ] {
        assert!(html.contains(marker), "{marker}: {html}");
    }
    // The timeout row failed (its rate depends on how many requests of the soak ran before
    // frontend's Envoy took the copy).
    let row = html
        .split(r#"<tr data-counter="upstream_rq_timeout">"#)
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no timeout row: {html}"));
    assert!(row.ends_with("<td>failed</td>"), "{row}");
    // Traffic recovers.
    wait_for_status(sidecars.out, 200, Duration::from_secs(20))
        .await
        .map_err(|_| anyhow::anyhow!("traffic did not recover"))?;

    // 2. The converted MeshTimeout, with umbractl: the gate passes and the plan applies.
    let fp = plan(&global, "MeshTimeout/timeout-all").await;
    let mut lines = Vec::new();
    let text = umbractl::rollout::start_and_follow(
        &format!("http://{}", global.api),
        "default",
        &fp,
        "kuma.io/service=frontend,100%",
        &umbractl::rollout::GateFlags {
            soak: Some("3s".into()),
            min_requests: Some(5),
            ..Default::default()
        },
        umbractl::Output::Text,
        |l| lines.push(l.to_owned()),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", global.log_tail()))?;
    assert!(text.contains(": completed (phase done)"), "{text}");
    let actions: Vec<String> = lines
        .iter()
        .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.to_owned()))
        .collect();
    assert!(
        actions.iter().any(|a| a.starts_with("stage 1 gate passed")),
        "{lines:#?}"
    );
    assert!(
        actions.iter().any(|a| a.starts_with("stage 2 applied")),
        "{lines:#?}"
    );
    assert_eq!(names(&global, "timeouts").await, Vec::<String>::new());
    let (_, mt) = global
        .call("GET", "/meshes/default/meshtimeouts/timeout-all", None)
        .await?;
    assert!(mt["labels"].get("kuma.io/effect").is_none(), "live: {mt}");
    assert!(!names(&global, "meshtimeouts")
        .await
        .iter()
        .any(|n| n.contains("-stage-")));
    // Status reads the same.
    let status = umbractl::rollout::status(
        &format!("http://{}", global.api),
        "default",
        None,
        umbractl::Output::Text,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert!(
        status.contains(&format!("rollout of plan {fp}")),
        "{status}"
    );
    task.abort();
    drop(sidecars);
    Ok(())
}
