//! End to end, the migration workflow (issue 19): global-cp on a real PostgreSQL, two zone-cps
//! as processes, a real Envoy in each zone.
//!
//! The seed's old Timeouts are live; `umbractl convert`'s output (shadow MeshTimeouts) is
//! applied; a plan's fleet diff leaves no change without a converter note to explain it; a
//! concurrent change makes the apply a 409 and nothing moves; a new plan applies: the old
//! Timeouts are gone in every zone, each DPP's config is exactly its live config with the
//! plan's patch applied, and each Envoy takes it as one CDS update (no intermediate config with
//! both families or neither); a rollback brings back exactly the original configs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_e2e::fleet::{global_on_postgres, start_zone, temp_dir};
use umbra_e2e::seed::{plural, register_split_dataplanes, seed_docs};
use umbra_e2e::{envoy_binary, http, wait_until, CpProcess, Envoy};
use umbra_global_cp::testing::TempPostgres;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

async fn get(cp: &CpProcess, path: &str) -> (u16, Value) {
    cp.call("GET", path, None).await.unwrap()
}

async fn post(cp: &CpProcess, path: &str, body: &Value) -> (u16, Value) {
    cp.call("POST", path, Some(&body.to_string()))
        .await
        .unwrap()
}

/// A DPP's live config document on its zone (`_config`'s `xds`).
async fn live_config(zone: &CpProcess, name: &str) -> Value {
    let (status, body) = get(zone, &format!("/meshes/default/dataplanes/{name}/_config")).await;
    assert_eq!(status, 200, "{body}");
    body["xds"].clone()
}

/// An Envoy admin counter (`/stats?filter=`), 0 when absent.
async fn envoy_counter(admin: SocketAddr, name: &str) -> u64 {
    let Ok((200, text)) = http(admin, "GET", &format!("/stats?filter=^{name}$"), None).await else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The CDS and LDS updates an Envoy accepted so far.
async fn updates(envoy: &Envoy) -> (u64, u64) {
    (
        envoy_counter(envoy.admin, "cluster_manager.cds.update_success").await,
        envoy_counter(envoy.admin, "listener_manager.lds.update_success").await,
    )
}

/// Count of `type` resources in mesh `default` on `cp`.
async fn total(cp: &CpProcess, plural: &str) -> u64 {
    get(cp, &format!("/meshes/default/{plural}")).await.1["total"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_plan_apply_rollback_across_two_zones() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let Some(pg) = TempPostgres::start_or_skip() else {
        return Ok(());
    };
    let url = pg.create_database("migration_e2e").await?;
    let dir = temp_dir("migration");
    let global = global_on_postgres(GLOBAL, &url, &dir).await?;
    let docs = seed_docs();
    // The Mesh and the old Timeouts (the seed's own MeshTimeouts are left out: convert makes
    // the replacements).
    let mut old = Vec::new();
    for (kind, name, yaml) in &docs {
        match kind.as_str() {
            "Mesh" => global.apply(&format!("/meshes/{name}"), yaml).await?,
            "Timeout" => {
                global
                    .apply(&format!("/meshes/default/{}/{name}", plural(kind)), yaml)
                    .await?;
                old.push(Resource::from_bytes(yaml.as_bytes())?);
            }
            _ => {}
        }
    }
    // umbractl convert: shadow MeshTimeouts, each naming its source.
    let (converted, ok) = umbractl::migrate::convert_documents(
        &old,
        None,
        umbractl::migrate::ConvertOutput::Yaml,
        umbractl::resources::Format::Universal,
    );
    assert!(ok, "{converted}");
    let outputs = Resource::all_from_bytes(converted.as_bytes())?;
    assert_eq!(outputs.len(), 3, "{converted}");
    for o in &outputs {
        assert!(o.meta.is_shadow());
        global
            .apply(
                &format!("/meshes/default/meshtimeouts/{}", o.meta.name),
                &serde_json::to_string(&o.to_value())?,
            )
            .await?;
    }

    let z1 = start_zone(ZONE, &global, "zone-1", &dir).await?;
    let z2 = start_zone(ZONE, &global, "zone-2", &dir).await?;
    for z in [&z1, &z2] {
        wait_until(Duration::from_secs(20), || async {
            total(z, "meshtimeouts").await == 3 && total(z, "timeouts").await == 3
        })
        .await
        .map_err(|_| anyhow::anyhow!("policies did not reach the zone:\n{}", z.log_tail()))?;
    }
    register_split_dataplanes(&docs, &z1, &z2, &global).await?;
    // A real Envoy for each zone's frontend.
    let mut envoys = Vec::new();
    for z in [&z1, &z2] {
        let server = umbra_e2e::DpServer::of(z.api, z.grpc, global.api).await?;
        let envoy = Envoy::start(&envoy_bin, "default", "frontend", &server).await?;
        wait_until(Duration::from_secs(30), || async {
            umbra_e2e::dataplane_acked(z.api, "frontend").await
        })
        .await
        .map_err(|_| anyhow::anyhow!("envoy did not ACK:\n{}", envoy.log_tail()))?;
        envoys.push(envoy);
    }
    let members = [
        (&z1, "zone-1", "frontend"),
        (&z1, "zone-1", "redis"),
        (&z2, "zone-2", "backend"),
        (&z2, "zone-2", "frontend"),
    ];
    let mut before = BTreeMap::new();
    for (z, zone, name) in members {
        before.insert((zone, name), live_config(z, name).await);
    }

    // The plan: the three MeshTimeouts go live, the three Timeouts go; every remaining
    // difference has a cause among the converter's notes.
    let (status, plan) = post(&global, "/meshes/default/_migration/plan", &json!({})).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["partial"], false, "{plan}");
    // The converter named the specific ones to win the merge, as Kuma's old precedence did.
    assert_eq!(
        plan["promote"],
        json!([
            "MeshTimeout/aaa-timeout-to-backend",
            "MeshTimeout/aaa-timeout-to-redis",
            "MeshTimeout/timeout-global"
        ])
    );
    assert_eq!(
        plan["retire"],
        json!([
            "Timeout/timeout-global",
            "Timeout/timeout-to-backend",
            "Timeout/timeout-to-redis"
        ])
    );
    assert_eq!(plan["unexplained"], 0, "changes without a cause: {plan:#}");
    let changes = plan["diff"]["changes"].as_array().unwrap();
    for c in changes {
        assert!(!c["causes"].as_array().unwrap().is_empty(), "{c}");
    }
    let first = plan["fingerprint"].as_str().unwrap().to_owned();

    // A concurrent change: refused, nothing moves.
    let redis = docs
        .iter()
        .find(|d| d.1 == "timeout-to-redis")
        .map(|d| d.2.replace("41s", "40s"))
        .unwrap();
    global
        .apply("/meshes/default/timeouts/timeout-to-redis", &redis)
        .await?;
    let (status, refused) = post(
        &global,
        "/meshes/default/_migration/apply",
        &json!({"plan": first}),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("Timeout/timeout-to-redis"),
        "{refused}"
    );
    assert_eq!(total(&global, "timeouts").await, 3);

    // Re-plan and apply.
    let (status, plan) = post(&global, "/meshes/default/_migration/plan", &json!({})).await;
    assert_eq!(status, 200, "{plan}");
    let second = plan["fingerprint"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    let patches: BTreeMap<(String, String), Value> = plan["diff"]["dataplanes"]
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
    // The zone-2 live configs moved with the Timeout change; take them again.
    for (z, zone, name) in members {
        before.insert((zone, name), live_config(z, name).await);
    }
    let mut counts = Vec::new();
    for e in &envoys {
        counts.push(updates(e).await);
    }
    let (status, applied) = post(
        &global,
        "/meshes/default/_migration/apply",
        &json!({"plan": second}),
    )
    .await;
    assert_eq!(status, 200, "{applied}");
    for z in [&z1, &z2] {
        wait_until(Duration::from_secs(20), || async {
            total(z, "timeouts").await == 0
        })
        .await
        .map_err(|_| anyhow::anyhow!("the Timeouts are still in the zone:\n{}", z.log_tail()))?;
        let (_, mts) = get(z, "/meshes/default/meshtimeouts").await;
        for m in mts["items"].as_array().unwrap() {
            assert!(m["labels"].get("kuma.io/effect").is_none(), "{m}");
        }
        umbra_e2e::reconciled(z.api).await?;
    }
    // What went live is what was reviewed: each DPP's config is its old one with its patch.
    for (z, zone, name) in members {
        let now = live_config(z, name).await;
        let expected = match patches.get(&(zone.to_owned(), name.to_owned())) {
            Some(patch) => umbra_xds::diff::apply(
                &before[&(zone, name)],
                &serde_json::from_value(patch.clone())?,
            )?,
            None => before[&(zone, name)].clone(),
        };
        assert_eq!(now, expected, "{zone}/{name} differs from the plan");
    }
    // Each Envoy took it as one CDS update and at most one LDS update, and ACKed it.
    for (i, (e, z)) in envoys.iter().zip([&z1, &z2]).enumerate() {
        wait_until(Duration::from_secs(20), || async {
            updates(e).await.0 > counts[i].0
        })
        .await
        .map_err(|_| anyhow::anyhow!("envoy took no new CDS:\n{}", e.log_tail()))?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (cds, lds) = updates(e).await;
        assert_eq!(
            cds,
            counts[i].0 + 1,
            "one CDS update, no intermediate config"
        );
        assert!(lds <= counts[i].1 + 1, "at most one LDS update");
        let (_, insight) = get(z, "/meshes/default/dataplanes+insights/frontend").await;
        assert_eq!(
            insight["dataplaneInsight"]["nacked"],
            json!({}),
            "{insight}"
        );
    }

    // Rollback: the Timeouts and the shadow MeshTimeouts again, and the original configs.
    let (status, back) = post(
        &global,
        "/meshes/default/_migration/rollback",
        &json!({"plan": second}),
    )
    .await;
    assert_eq!(status, 200, "{back}");
    for z in [&z1, &z2] {
        wait_until(Duration::from_secs(20), || async {
            total(z, "timeouts").await == 3
        })
        .await
        .map_err(|_| anyhow::anyhow!("the Timeouts did not come back:\n{}", z.log_tail()))?;
        umbra_e2e::reconciled(z.api).await?;
    }
    for (z, zone, name) in members {
        assert_eq!(
            live_config(z, name).await,
            before[&(zone, name)],
            "{zone}/{name}"
        );
    }
    let (status, again) = post(
        &global,
        "/meshes/default/_migration/rollback",
        &json!({"plan": second}),
    )
    .await;
    assert_eq!(status, 409, "{again}");
    drop(envoys);
    Ok(())
}
