//! Staged rollouts on the Global (issue 40), through the router and the driver's steps
//! ([`tick`]) on the memory store and on PostgreSQL, with Dataplanes of zones that are not
//! connected: the requests refused (400 for a bad stage list, soak, thresholds, a target that
//! does not narrow or a stage that selects nothing, 404 for an unknown plan, 409 for a second
//! rollout or an applied plan), which DPPs each stage selects (a dry run stores nothing), a
//! stage's copies written shadow, a stage whose zone does not answer failing closed, the
//! rollback deleting every copy in one transaction with each decision recorded, a stop, and a
//! rollout going on after a restart of the Global on PostgreSQL. Gates on real counters, the
//! refusal of a stage that would change DPPs outside it, and the plan's apply at the end are
//! `e2e/tests/rollout.rs` (zones, Envoys and traffic).

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_api::testing::{get_json as get, post_json as post, put_ok as put};
use umbra_global_cp::api::router;
use umbra_global_cp::migration::rollout::tick;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::app_state;

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn timeout(name: &str, target: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {target}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 3s}}\n")
}

async fn meshtimeouts(app: &axum::Router) -> Vec<(String, bool)> {
    let (_, v) = get(app, "/meshes/default/meshtimeouts").await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_owned(),
                i["labels"]["kuma.io/effect"] == "shadow",
            )
        })
        .collect()
}

const ROLLOUT: &str = "/meshes/default/_migration/rollout";

/// Dataplanes `web` in zone-1 and `api` in zone-2, as their zones sync them.
async fn dataplanes(store: &Arc<dyn Store>) {
    for (name, zone) in [("web", "zone-1"), ("api", "zone-2")] {
        let dp = umbra_core::resource::Resource::from_bytes(format!(
            "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: {name}, kuma.io/zone: {zone}}}\n"
        ).as_bytes())
        .unwrap();
        store.put(dp, None, Some(zone)).await.unwrap();
    }
}

/// The mesh, a shadow MeshTimeout `t`, the two Dataplanes, and a plan promoting `t`.
async fn planned(store: &Arc<dyn Store>, app: &axum::Router) -> String {
    put(app, "/meshes/default", MESH).await;
    put(
        app,
        "/meshes/default/meshtimeouts/t",
        &timeout("t", "{kind: Mesh}"),
    )
    .await;
    dataplanes(store).await;
    let (s, plan) = post(
        app,
        "/meshes/default/_migration/plan",
        &json!({"policies": ["MeshTimeout/t"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    plan["fingerprint"].as_str().unwrap().to_owned()
}

fn actions(r: &Value) -> Vec<&str> {
    r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["action"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn refusals_dry_runs_copies_and_a_stop() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let app = router(app_state(store.clone(), Arc::default()));
    planned(&store, &app).await;
    put(
        &app,
        "/meshes/default/meshtimeouts/on-gateway",
        &timeout("on-gateway", "{kind: MeshGateway, name: edge}"),
    )
    .await;
    // Planned again: the mesh changed.
    let (s, plan) = post(
        &app,
        "/meshes/default/_migration/plan",
        &json!({"policies": ["MeshTimeout/t"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    let fp = plan["fingerprint"].as_str().unwrap().to_owned();

    // Refusals, before anything is stored.
    for (body, status, field) in [
        (
            json!({"plan": fp, "stages": "100%"}),
            StatusCode::BAD_REQUEST,
            "stages",
        ),
        (
            json!({"plan": fp, "stages": "0%,100%"}),
            StatusCode::BAD_REQUEST,
            "stages",
        ),
        (
            json!({"plan": fp, "stages": "50%,10%,100%"}),
            StatusCode::BAD_REQUEST,
            "shares grow",
        ),
        (
            // 2 DPPs, then 50% of the 2: fewer.
            json!({"plan": fp, "stages": "2,50%,100%"}),
            StatusCode::BAD_REQUEST,
            "fewer than an earlier stage",
        ),
        (
            json!({"plan": fp, "stages": "kuma.io/zone=zone-3,100%"}),
            StatusCode::BAD_REQUEST,
            "selects no DPP",
        ),
        (
            json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "soak": "2h"}),
            StatusCode::BAD_REQUEST,
            "soak",
        ),
        (
            json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "thresholds": {"timeouts": 2.0}}),
            StatusCode::BAD_REQUEST,
            "thresholds",
        ),
        (
            json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "thresholds": {"minRequests": 0}}),
            StatusCode::BAD_REQUEST,
            "minRequests",
        ),
        (
            json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "thresholds": {"nope": 1}}),
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            json!({"plan": "abcd", "stages": "kuma.io/zone=zone-1,100%"}),
            StatusCode::NOT_FOUND,
            "",
        ),
    ] {
        let (s, b) = post(&app, ROLLOUT, &body).await;
        assert_eq!(s, status, "{body}: {b}");
        assert!(b.to_string().contains(field), "{b}");
    }
    let (s, b) = post(
        &app,
        "/meshes/default/_migration/plan",
        &json!({"policies": ["MeshTimeout/on-gateway"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let gateway_fp = b["fingerprint"].as_str().unwrap().to_owned();
    let (s, b) = post(
        &app,
        ROLLOUT,
        &json!({"plan": gateway_fp, "stages": "a=b,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.to_string().contains("cannot be narrowed"), "{b}");

    // Which DPPs each stage selects, before anything happens: a dry run stores nothing.
    let body = json!({"plan": fp, "stages": "kuma.io/zone=zone-1,kuma.io/zone=zone-2,100%", "dryRun": true});
    let (s, r) = post(&app, ROLLOUT, &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["state"], "planned");
    let dpps: Vec<&Value> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["dataplanes"])
        .collect();
    assert_eq!(
        dpps,
        [
            &json!(["zone-1/web"]),
            &json!(["zone-2/api"]),
            &json!(["zone-1/web", "zone-2/api"])
        ]
    );
    // A share: one DPP of the two the plan selects, by its sample point, the same every time.
    let body = json!({"plan": fp, "stages": "1,100%", "dryRun": true});
    let (s, r) = post(&app, ROLLOUT, &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["stages"][0]["share"], "1", "{r:#}");
    assert_eq!(r["stages"][0]["dataplanes"].as_array().unwrap().len(), 1);
    let sample = r["stages"][0]["tags"][umbra_core::sample::SAMPLE_TAG]
        .as_str()
        .unwrap();
    let sample = umbra_core::sample::Sample::parse(sample).unwrap();
    assert_eq!(sample.seed, umbra_core::sample::seed_of(&fp));
    let (_, again) = post(&app, ROLLOUT, &body).await;
    assert_eq!(again["stages"], r["stages"]);
    let (s, _) = get(&app, ROLLOUT).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing was stored");

    // Started: stored before the answer; a second one in the mesh is refused.
    let (s, r) = post(
        &app,
        ROLLOUT,
        &json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "soak": "1s"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (&r["state"], &r["phase"]["step"]),
        (&json!("running"), &json!("pending"))
    );
    let (s, b) = post(
        &app,
        ROLLOUT,
        &json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");

    // Stage 1's copy, written shadow and narrowed.
    let cx = app_state(store.clone(), Arc::default()).inspect_context();
    tick(&cx).await;
    assert!(meshtimeouts(&app)
        .await
        .contains(&("t-stage-1".to_owned(), true)));
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "created", "{r:#}");
    let (_, copy) = get(&app, "/meshes/default/meshtimeouts/t-stage-1").await;
    assert_eq!(
        copy["spec"]["targetRef"],
        json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}})
    );
    assert_eq!(copy["labels"]["umbra.io/rollout"], json!(fp));

    // Stopped: the next step deletes the copy.
    let (s, r) = post(
        &app,
        "/meshes/default/_migration/stop",
        &json!({"plan": fp}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["phase"]["step"], "rollingBack");
    tick(&cx).await;
    let (_, r) = get(&app, &format!("{ROLLOUT}?plan={fp}")).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
    assert_eq!(
        actions(&r),
        ["started", "copies written", "stopped", "rolled back"]
    );
    assert!(
        r["decisions"][3]["revision"].is_u64(),
        "one transaction deleted the copy"
    );
    assert!(!meshtimeouts(&app)
        .await
        .iter()
        .any(|(n, _)| n.contains("-stage-")));
    let (s, _) = post(
        &app,
        "/meshes/default/_migration/stop",
        &json!({"plan": fp}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "not running any more");

    // The plan itself is untouched: still shadow.
    assert!(meshtimeouts(&app).await.contains(&("t".to_owned(), true)));

    // An applied plan cannot be rolled out (a mesh without DPPs, so no zone need answer).
    put(&app, "/meshes/other", &MESH.replace("default", "other")).await;
    put(
        &app,
        "/meshes/other/meshtimeouts/t",
        &timeout("t", "{kind: Mesh}").replace("mesh: default", "mesh: other"),
    )
    .await;
    let (s, plan) = post(&app, "/meshes/other/_migration/plan", &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    let other = plan["fingerprint"].as_str().unwrap().to_owned();
    let (s, b) = post(
        &app,
        "/meshes/other/_migration/apply",
        &json!({"plan": other}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = post(
        &app,
        "/meshes/other/_migration/rollout",
        &json!({"plan": other, "stages": "kuma.io/zone=zone-1,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert!(b.to_string().contains("applied already"), "{b}");
}

/// The steps of a rollout whose staged DPPs' zone does not answer: the stage never goes live
/// (its diff cannot be shown to leave the other DPPs alone) and its copy is deleted.
async fn fails_closed(store: Arc<dyn Store>, restart: impl Fn() -> Arc<dyn Store>) {
    let app = router(app_state(store.clone(), Arc::default()));
    let fp = planned(&store, &app).await;
    let (s, r) = post(
        &app,
        ROLLOUT,
        &json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    tick(&app_state(store.clone(), Arc::default()).inspect_context()).await; // the copy
    drop(app);
    // A restart (on PostgreSQL, a new connection): the driver keeps nothing but the store.
    let store = restart();
    let app = router(app_state(store.clone(), Arc::default()));
    let cx = app_state(store.clone(), Arc::default()).inspect_context();
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "created", "{r:#}");
    tick(&cx).await; // the stage's diff: zone-1 is not connected
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "rollingBack", "{r:#}");
    assert!(
        r["phase"]["reason"]
            .as_str()
            .unwrap()
            .contains("failing closed"),
        "{r:#}"
    );
    tick(&cx).await;
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
    assert_eq!(
        actions(&r),
        ["started", "copies written", "failed", "rolled back"]
    );
    assert!(!meshtimeouts(&app)
        .await
        .iter()
        .any(|(n, _)| n.contains("-stage-")));
}

#[tokio::test]
async fn a_zone_that_cannot_be_read_fails_the_stage_closed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let again = store.clone();
    fails_closed(store, move || again.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_rollout_goes_on_after_a_restart_of_the_global() {
    use umbra_global_cp::store::postgres::PostgresStore;
    let Some(pg) = umbra_global_cp::testing::TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("rollout").await.unwrap();
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let handle = tokio::runtime::Handle::current();
    let reconnect = move || -> Arc<dyn Store> {
        let url = url.clone();
        let store = tokio::task::block_in_place(|| {
            handle.block_on(async move { PostgresStore::connect(&url, 4).await.unwrap() })
        });
        Arc::new(store)
    };
    fails_closed(store, reconnect).await;
}
