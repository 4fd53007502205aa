//! End to end, the Global's inspect fan-out (issue 6): global-cp on a real PostgreSQL, two
//! zone-cps as separate processes, a real Envoy on one DPP.
//!
//! The seed's kuma-demo topology (transition seed 000, "Timeout -> MeshTimeout") is split across
//! the zones: `frontend` and `redis` in zone-1, `backend` and a second `frontend` in zone-2. The
//! old Timeouts are live, the MeshTimeout replacements shadow, plus one shadow MeshTimeout
//! that selects only `backend` DPPs.
//!
//! - The fleet-wide diff lists exactly the DPPs whose config changes, each with the patch its
//!   zone gives directly (`_config?shadow=true&include=diff` on the zone), and groups
//!   identical operations across zones; NDJSON streams the same result.
//! - `policy=` isolates one shadow policy's effect; `_resources/dataplanes` lists what a
//!   policy selects.
//! - Per-DPP `_config`/`_rules` on the Global return the zone's own bodies and errors.
//! - Asked again with nothing changed, the kept answer is served without the zones computing
//!   it again.
//! - With zone-2 stopped, the result is partial and names it; a forwarded call to one of its
//!   DPPs is a 503 naming it; zone-1's part is unaffected.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use umbra_e2e::fleet::{global_on_postgres, start_zone, temp_dir};
use umbra_e2e::seed::{plural, register_split_dataplanes, seed_docs};
use umbra_e2e::{envoy_binary, http_with, wait_until, CpProcess, Envoy};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
/// A shadow MeshTimeout selecting only backend DPPs (top-level targetRef).
const BACKEND_ONLY: &str = "type: MeshTimeout\nmesh: default\nname: backend-inbound\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: backend_kuma-demo_svc_3001}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 3h}\n";

async fn get(cp: &CpProcess, path: &str) -> (u16, Value) {
    cp.call("GET", path, None).await.unwrap()
}

/// Ops of a patch as a set of canonical JSON strings (order inside a patch is not compared
/// across separately computed patches).
fn op_set(patch: &Value) -> BTreeSet<String> {
    patch
        .as_array()
        .unwrap()
        .iter()
        .map(|op| serde_json::to_string(op).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_shadow_diff_matches_zones_and_reports_missing_zones() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let url = pg.create_database("fanout_e2e").await?;
    let dir = temp_dir("fanout");
    let global = global_on_postgres(GLOBAL, &url, &dir).await?;
    let docs = seed_docs();
    // Mesh and policies go to the Global.
    for (kind, name, yaml) in &docs {
        match kind.as_str() {
            "Mesh" => global.apply(&format!("/meshes/{name}"), yaml).await?,
            "Dataplane" => {}
            k => {
                global
                    .apply(&format!("/meshes/default/{}/{name}", plural(k)), yaml)
                    .await?;
            }
        }
    }
    global
        .apply("/meshes/default/meshtimeouts/backend-inbound", BACKEND_ONLY)
        .await?;

    let z1 = start_zone(ZONE, &global, "zone-1", &dir).await?;
    let mut z2 = start_zone(ZONE, &global, "zone-2", &dir).await?;
    for z in [&z1, &z2] {
        wait_until(Duration::from_secs(20), || async {
            get(z, "/meshes/default/meshtimeouts").await.1["total"] == 5
        })
        .await
        .map_err(|_| anyhow::anyhow!("policies did not reach the zone:\n{}", z.log_tail()))?;
    }
    register_split_dataplanes(&docs, &z1, &z2, &global).await?;
    // A real proxy on zone-1's frontend: it gets the Live config, never the shadow one.
    let dp = umbra_e2e::DpServer::of(z1.api, z1.grpc, global.api).await?;
    let envoy = Envoy::start(&envoy_bin, "default", "frontend", &dp).await?;
    let acked = wait_until(Duration::from_secs(30), || async {
        umbra_e2e::dataplane_acked(z1.api, "frontend").await
    })
    .await;
    assert!(acked.is_ok(), "envoy did not ACK:\n{}", envoy.log_tail());

    // What each zone says directly, per DPP.
    let members = [
        ("zone-1", &z1, "frontend"),
        ("zone-1", &z1, "redis"),
        ("zone-2", &z2, "backend"),
        ("zone-2", &z2, "frontend"),
    ];
    let mut direct: BTreeMap<(String, String), Value> = BTreeMap::new();
    for (zone, cp, name) in members {
        let (status, body) = get(
            cp,
            &format!("/meshes/default/dataplanes/{name}/_config?shadow=true&include=diff"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        direct.insert((zone.to_owned(), name.to_owned()), body["diff"].clone());
    }
    assert!(
        direct.values().any(|d| !d.as_array().unwrap().is_empty()),
        "the seed's shadow MeshTimeouts change something"
    );

    // Fleet-wide, full: exactly the DPPs whose config changes, with the zones' patches.
    let (status, full) = get(&global, "/meshes/default/_shadow-diff?format=full").await;
    assert_eq!(status, 200, "{full}");
    assert_eq!(full["partial"], false, "{full}");
    assert_eq!(full["totals"]["considered"], 4, "{full}");
    let changed: BTreeMap<(String, String), Value> = full["dataplanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                (
                    d["zone"].as_str().unwrap().to_owned(),
                    d["name"].as_str().unwrap().to_owned(),
                ),
                d["patch"].clone(),
            )
        })
        .collect();
    let expected_changed: BTreeSet<&(String, String)> = direct
        .iter()
        .filter(|(_, d)| !d.as_array().unwrap().is_empty())
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed.keys().collect::<BTreeSet<_>>(), expected_changed);
    for (k, patch) in &changed {
        assert_eq!(patch, &direct[k], "patch of {k:?} differs from its zone's");
    }
    assert_eq!(
        full["totals"]["changed"].as_u64().unwrap() as usize,
        expected_changed.len()
    );
    assert_eq!(
        full["shadowPolicies"],
        json!([
            "MeshTimeout/aaa-timeout-to-backend",
            "MeshTimeout/aaa-timeout-to-frontend",
            "MeshTimeout/aaa-timeout-to-redis",
            "MeshTimeout/backend-inbound",
            "MeshTimeout/timeout-global"
        ])
    );
    // Groups: largest first, every member's patch holds the operation, counts add up.
    let changes = full["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    let counts: Vec<u64> = changes
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    for c in changes {
        let op = serde_json::to_string(&c["operation"]).unwrap();
        let members = c["dataplanes"].as_array().unwrap();
        assert_eq!(members.len() as u64, c["count"].as_u64().unwrap());
        for m in members {
            let key = (
                m["zone"].as_str().unwrap().to_owned(),
                m["name"].as_str().unwrap().to_owned(),
            );
            assert!(op_set(&direct[&key]).contains(&op), "{op} not in {key:?}");
        }
    }
    // The two frontends (one per zone) share their outbound changes.
    assert!(
        changes.iter().any(|c| {
            let zones: BTreeSet<&str> = c["dataplanes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["zone"].as_str().unwrap())
                .collect();
            zones.len() == 2
        }),
        "no operation shared across zones: {changes:?}"
    );

    // The summary agrees, and so does the NDJSON stream.
    let (_, summary) = get(&global, "/meshes/default/_shadow-diff").await;
    assert_eq!(summary["totals"], full["totals"]);
    assert!(summary.get("dataplanes").is_none());
    // Asked again with nothing changed (issue 21): the kept answer is served once both zones
    // confirm their state still holds; neither computes it again. (With zone-2 gone, below,
    // the same question is computed again and comes out partial.)
    let computed = |z: &CpProcess| z.log_text().matches("inspect: shadow diff done").count();
    let before = (computed(&z1), computed(&z2));
    let (_, again) = get(&global, "/meshes/default/_shadow-diff").await;
    assert_eq!(again, summary);
    assert_eq!(
        (computed(&z1), computed(&z2)),
        before,
        "a zone computed the kept answer again"
    );
    let (status, text) = http_with(
        global.api,
        "GET",
        "/meshes/default/_shadow-diff",
        None,
        &[("accept", "application/x-ndjson")],
    )
    .await?;
    assert_eq!(status, 200, "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "start");
    assert_eq!(lines.last().unwrap()["kind"], "result");
    assert_eq!(lines.last().unwrap()["totals"], full["totals"]);
    let dp_lines = lines.iter().filter(|l| l["kind"] == "dataplane").count();
    assert_eq!(dp_lines, 4);
    assert_eq!(lines.iter().filter(|l| l["kind"] == "zone").count(), 2);
    assert!(lines.iter().any(|l| l["kind"] == "progress"));

    // policy=: only that shadow policy goes live. backend-inbound selects backend DPPs only,
    // but as a first live MeshTimeout it also switches the old Timeouts off, so every DPP
    // whose dependencies differ is considered; only backend's config changes.
    let (status, one) = get(
        &global,
        "/meshes/default/_shadow-diff?format=full&policy=MeshTimeout/backend-inbound",
    )
    .await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["policy"], "MeshTimeout/backend-inbound");
    let names: Vec<(&str, &str)> = one["dataplanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["zone"].as_str().unwrap(), d["name"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("zone-2", "backend")], "{one}");
    let (status, direct_one) = get(
        &z2,
        "/meshes/default/dataplanes/backend/_config?shadow=true&include=diff",
    )
    .await;
    assert_eq!(status, 200);
    assert_ne!(
        one["dataplanes"][0]["patch"], direct_one["diff"],
        "promoting one policy is not promoting all"
    );
    // Its own value (idleTimeout 3h) is part of the change.
    assert!(
        one["dataplanes"][0]["patch"]
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["value"] == "10800s"),
        "{one}"
    );
    // zone= narrows to one zone.
    let (_, only_z1) = get(&global, "/meshes/default/_shadow-diff?zone=zone-1").await;
    assert_eq!(only_z1["zones"].as_array().unwrap().len(), 1);
    assert_eq!(only_z1["totals"]["considered"], 2);
    // Bad parameters are 400s naming them; a live policy cannot be promoted (409: its state
    // refuses it, the request is well formed).
    for (q, field, want) in [
        ("format=yaml", "format", 400),
        ("policy=MeshTimeout", "policy", 400),
        ("policy=Timeout/timeout-global", "policy", 409),
        ("timeout=forever", "timeout", 400),
    ] {
        let (status, body) = get(&global, &format!("/meshes/default/_shadow-diff?{q}")).await;
        assert_eq!(status, want, "{q}: {body}");
        assert_eq!(body["invalidParameters"][0]["field"], field, "{q}: {body}");
    }
    assert_eq!(
        get(
            &global,
            "/meshes/default/_shadow-diff?policy=MeshTimeout/nope"
        )
        .await
        .0,
        404
    );
    assert_eq!(
        get(&global, "/meshes/default/_shadow-diff?zone=zone-9")
            .await
            .0,
        404
    );
    assert_eq!(get(&global, "/meshes/nope/_shadow-diff").await.0, 404);

    // Affected DPPs, computed on the Global.
    let (status, selected) = get(
        &global,
        "/meshes/default/meshtimeouts/backend-inbound/_resources/dataplanes",
    )
    .await;
    assert_eq!(status, 200, "{selected}");
    assert_eq!(selected["total"], 1);
    assert_eq!(selected["items"][0]["zone"], "zone-2");
    assert_eq!(selected["items"][0]["displayName"], "backend");
    let (_, all) = get(
        &global,
        "/meshes/default/meshtimeouts/timeout-global/_resources/dataplanes?size=3",
    )
    .await;
    assert_eq!(all["total"], 4);
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    assert!(all["next"].as_str().unwrap().contains("offset=3"));

    // Per-DPP forwarding: same bodies as the zone, by Global name or unique zone name.
    let backend_global = selected["items"][0]["name"].as_str().unwrap().to_owned();
    for path in [
        "_config?shadow=true&include=diff",
        "_config",
        "_rules?shadow=true&include=diff",
    ] {
        let (s1, via_global) = get(
            &global,
            &format!("/meshes/default/dataplanes/{backend_global}/{path}"),
        )
        .await;
        let (s2, from_zone) = get(&z2, &format!("/meshes/default/dataplanes/backend/{path}")).await;
        assert_eq!((s1, &via_global), (s2, &from_zone), "{path}");
    }
    let (s, redis) = get(
        &global,
        "/meshes/default/dataplanes/redis/_config?shadow=true&include=diff",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        redis["diff"],
        direct[&("zone-1".to_owned(), "redis".to_owned())]
    );
    let (s, bad) = get(
        &global,
        &format!("/meshes/default/dataplanes/{backend_global}/_config?shadow=maybe"),
    )
    .await;
    let (_, bad_zone) = get(
        &z2,
        "/meshes/default/dataplanes/backend/_config?shadow=maybe",
    )
    .await;
    // The zone's error, relayed as it is; `instance` names each answer, so it differs.
    let without_instance = |mut v: Value| {
        v.as_object_mut().map(|o| o.remove("instance"));
        v
    };
    assert_eq!(
        (s, without_instance(bad)),
        (400, without_instance(bad_zone))
    );
    let (s, ambiguous) = get(&global, "/meshes/default/dataplanes/frontend/_config").await;
    assert_eq!(s, 400, "{ambiguous}");
    assert_eq!(
        get(&global, "/meshes/default/dataplanes/nope/_config")
            .await
            .0,
        404
    );

    // umbractl renders both, from the Global.
    let url = format!("http://{}", global.api);
    let plain = umbractl::diff::Style { color: false };
    let mut seen = Vec::new();
    let text = umbractl::inspect_shadow_diff(
        &url,
        "default",
        None,
        None,
        false,
        None,
        umbractl::Output::Text,
        plain,
        None,
        |done, considered| seen.push((done, considered)),
    )
    .await?;
    assert!(text.contains("dataplanes: 4 considered"), "{text}");
    // Progress comes from the streamed form: it starts at 0 and reaches every DPP.
    assert_eq!(seen.first(), Some(&(0, 4)), "{seen:?}");
    assert_eq!(seen.last(), Some(&(4, 4)), "{seen:?}");
    assert!(text.contains("zone zone-2: ok"), "{text}");
    assert!(text.contains("@ Cluster "), "{text}");
    let text = umbractl::inspect_dataplane(
        &url,
        "default",
        &backend_global,
        false,
        true,
        true,
        umbractl::Output::Text,
        plain,
    )
    .await?;
    let first_op = &direct[&("zone-2".to_owned(), "backend".to_owned())][0];
    assert!(
        text.contains(&format!("  {} ", first_op["op"].as_str().unwrap())),
        "{text}"
    );
    assert!(
        text.contains("  - ") && text.contains("  + "),
        "old and new values: {text}"
    );
    let err = umbractl::inspect_shadow_diff(
        &url,
        "default",
        Some("MeshTimeout"),
        None,
        false,
        None,
        umbractl::Output::Json,
        plain,
        None,
        |_, _| {},
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("400") && err.contains("policy: "), "{err}");

    // Zone-2 goes away: its part is reported missing, zone-1's is unaffected.
    z2.kill();
    wait_until(Duration::from_secs(20), || async {
        get(&global, "/zones/zone-2").await.1["online"] == false
    })
    .await
    .map_err(|_| anyhow::anyhow!("zone-2 still online:\n{}", global.log_tail()))?;
    let (status, partial) = get(&global, "/meshes/default/_shadow-diff?timeout=3s").await;
    assert_eq!(status, 200, "{partial}");
    assert_eq!(partial["partial"], true);
    let zones: BTreeMap<&str, &Value> = partial["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| (z["zone"].as_str().unwrap(), z))
        .collect();
    assert_eq!(zones["zone-1"]["status"], "ok");
    assert_eq!(zones["zone-2"]["status"], "failed");
    assert!(
        zones["zone-2"]["error"]
            .as_str()
            .unwrap()
            .contains("zone-2"),
        "{partial}"
    );
    assert_eq!(zones["zone-2"]["failed"], 2);
    assert_eq!(partial["totals"]["failed"], 2);
    let (s, offline) = get(
        &global,
        &format!("/meshes/default/dataplanes/{backend_global}/_config"),
    )
    .await;
    assert_eq!(s, 503, "{offline}");
    assert!(
        offline["detail"].as_str().unwrap().contains("zone-2"),
        "{offline}"
    );
    drop(envoy);
    Ok(())
}

/// Issue 17: a Kuma 2.7 export with one resource of every type (`deploy/kuma-export.yaml`)
/// applies with `umbractl apply -f` on a fresh Global, syncs to a zone, and the fleet-wide
/// diff of its shadow-labelled half (the new policies replacing the old ones) is computed over
/// the zone's DPPs, naming what Umbra does not generate. `UMBRA_PRINT_EXPORT_DIFF=1` prints
/// the text `umbractl inspect shadow-diff` shows (the README's example).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuma_export_applies_and_its_shadow_half_diffs_across_the_fleet() -> anyhow::Result<()> {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let url = pg.create_database("export_e2e").await?;
    let dir = temp_dir("fanout");
    let global = global_on_postgres(GLOBAL, &url, &dir).await?;
    let api = format!("http://{}", global.api);
    let export = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/kuma-export.yaml");
    umbractl::run(umbractl::Cli {
        api_url: Some(api.clone()),
        auth_token: None,
        config_file: Some(dir.join("umbractl.yaml")),
        command: umbractl::Command::Apply {
            files: vec![export.display().to_string()],
            continue_on_error: false,
        },
    })
    .await?;
    let z1 = start_zone(ZONE, &global, "zone-1", &dir).await?;
    wait_until(Duration::from_secs(20), || async {
        get(&z1, "/meshes/legacy/meshmetrics").await.1["total"] == 1
    })
    .await
    .map_err(|_| anyhow::anyhow!("the export did not reach the zone:\n{}", z1.log_tail()))?;
    let dp = |name: &str, service: &str, protocol: &str, port: u16, outbound: &str| {
        format!("type: Dataplane\nmesh: legacy\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {port}\n    servicePort: {}\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: {protocol}}}\n{outbound}", port + 1000)
    };
    let web_outbounds = "  outbound:\n  - {port: 7001, tags: {kuma.io/service: backend}}\n  - {port: 7002, tags: {kuma.io/service: db}}\n";
    for (name, yaml) in [
        ("web", dp("web", "web", "http", 6000, web_outbounds)),
        ("backend", dp("backend", "backend", "http", 6001, "")),
        ("db", dp("db", "db", "tcp", 6002, "")),
    ] {
        z1.apply(&format!("/meshes/legacy/dataplanes/{name}"), &yaml)
            .await?;
    }
    wait_until(Duration::from_secs(20), || async {
        get(&global, "/meshes/legacy/dataplanes").await.1["total"] == 3
    })
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "dataplanes did not reach the Global:\n{}",
            global.log_tail()
        )
    })?;

    let (status, full) = get(&global, "/meshes/legacy/_shadow-diff?format=full").await;
    assert_eq!(status, 200, "{full}");
    assert_eq!(full["partial"], false, "{full}");
    let changed: BTreeSet<String> = full["dataplanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        changed,
        ["backend", "db", "web"].map(str::to_owned).into(),
        "{full:#}"
    );
    for d in full["dataplanes"].as_array().unwrap() {
        assert!(d.get("error").is_none(), "{d:#}");
    }
    let text = full.to_string();
    for generated in ["retryPolicy", "healthChecks", "local_ratelimit", "tracing"] {
        assert!(
            text.contains(generated),
            "{generated} is in the diff: {full:#}"
        );
    }
    let not_generated: BTreeSet<String> = full["notGenerated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{}/{}",
                n["type"].as_str().unwrap(),
                n["name"].as_str().unwrap()
            )
        })
        .collect();
    // What the promotion brings in that Umbra does not generate (the fleet diff names the
    // shadow view's additions; what both views share is on every DPP's `_config`).
    assert_eq!(
        not_generated,
        ["MeshMetric/metrics-default"].map(str::to_owned).into(),
    );

    let text = umbractl::inspect_shadow_diff(
        &api,
        "legacy",
        None,
        None,
        false,
        None,
        umbractl::Output::Text,
        umbractl::diff::Style { color: false },
        None,
        |_, _| {},
    )
    .await?;
    assert!(text.contains("dataplanes: 3 considered"), "{text}");
    if std::env::var_os("UMBRA_PRINT_EXPORT_DIFF").is_some() {
        println!("{text}");
    }
    Ok(())
}
