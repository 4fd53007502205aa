//! Staged rollouts on the Global (issue 40), through the router and the driver's steps
//! ([`tick`]) on the memory store, with no zone: the requests refused (400 for a bad stage
//! list, soak or a target that does not narrow, 404 for an unknown plan, 409 for a second
//! rollout or an applied plan), the stages' copies written shadow then promoted, a gate
//! without evidence failing closed after a "restart" (a fresh context: the driver keeps
//! nothing but the store), the rollback deleting every copy in one transaction with each
//! decision recorded, and a stop. The real thing, with zones, Envoys and traffic, is
//! `e2e/tests/rollout.rs`.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_api::testing::call;
use umbra_global_cp::api::router;
use umbra_global_cp::migration::rollout::tick;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::app_state;

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn timeout(name: &str, target: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {target}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 3s}}\n")
}

async fn post(app: &axum::Router, path: &str, body: &Value) -> (StatusCode, Value) {
    let (s, b, _) = call(
        app,
        "POST",
        path,
        &[("content-type", "application/json")],
        Some(&body.to_string()),
    )
    .await;
    (s, b)
}

async fn get(app: &axum::Router, path: &str) -> (StatusCode, Value) {
    let (s, b, _) = call(app, "GET", path, &[], None).await;
    (s, b)
}

async fn put(app: &axum::Router, path: &str, yaml: &str) {
    let (s, b, _) = call(app, "PUT", path, &[], Some(yaml)).await;
    assert!(s.is_success(), "PUT {path}: {s} {b}");
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

#[tokio::test]
async fn stages_go_live_a_gate_without_evidence_fails_closed_and_everything_is_recorded() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let app = router(app_state(store.clone(), Arc::default()));
    put(&app, "/meshes/default", MESH).await;
    put(
        &app,
        "/meshes/default/meshtimeouts/t",
        &timeout("t", "{kind: Mesh}"),
    )
    .await;
    put(
        &app,
        "/meshes/default/meshtimeouts/on-gateway",
        &timeout("on-gateway", "{kind: MeshGateway, name: edge}"),
    )
    .await;
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
            json!({"plan": fp, "stages": "10%,100%"}),
            StatusCode::BAD_REQUEST,
            "stages",
        ),
        (
            json!({"plan": fp, "stages": "a=b,100%", "soak": "2h"}),
            StatusCode::BAD_REQUEST,
            "soak",
        ),
        (
            json!({"plan": fp, "stages": "a=b,100%", "thresholds": {"timeouts": 2.0}}),
            StatusCode::BAD_REQUEST,
            "thresholds",
        ),
        (
            json!({"plan": fp, "stages": "a=b,100%", "thresholds": {"nope": 1}}),
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            json!({"plan": "abcd", "stages": "a=b,100%"}),
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
    assert_eq!(r["state"], "running");
    assert_eq!(r["phase"]["step"], "pending");
    assert_eq!(r["stages"][0]["tags"], json!({"kuma.io/zone": "zone-1"}));
    let (s, b) = post(&app, ROLLOUT, &json!({"plan": fp, "stages": "a=b,100%"})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");

    // Stage 1: its copy written shadow, then (its diff changing nothing outside it: there is
    // no DPP) promoted.
    let cx = app_state(store.clone(), Arc::default()).inspect_context();
    tick(&cx).await;
    assert!(meshtimeouts(&app)
        .await
        .contains(&("t-stage-1".to_owned(), true)));
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "created", "{r:#}");
    tick(&cx).await;
    assert!(meshtimeouts(&app)
        .await
        .contains(&("t-stage-1".to_owned(), false)));
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "live", "{r:#}");
    let (_, copy) = get(&app, "/meshes/default/meshtimeouts/t-stage-1").await;
    assert_eq!(
        copy["spec"]["targetRef"],
        json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}})
    );
    assert_eq!(copy["labels"]["umbra.io/rollout"], json!(fp));

    // A "restart": a fresh context reads where the rollout stands. After the soak, the gate
    // has no traffic to judge (no DPP sent any request) and fails closed; the next step
    // deletes the copy.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let restarted = app_state(store.clone(), Arc::default()).inspect_context();
    tick(&restarted).await;
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "rollingBack", "{r:#}");
    tick(&restarted).await;
    let (_, r) = get(&app, &format!("{ROLLOUT}?plan={fp}")).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
    let actions: Vec<&str> = r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "started",
            "copies written",
            "stage live",
            "gate failed",
            "rolled back"
        ]
    );
    let failed = &r["decisions"][3];
    assert_eq!(failed["stage"], 1);
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("fewer than the 20"),
        "{failed}"
    );
    assert!(r["decisions"][4]["revision"].is_u64());
    assert!(!meshtimeouts(&app)
        .await
        .iter()
        .any(|(n, _)| n.contains("-stage-")));
    // The plan itself is untouched: still shadow, still appliable.
    assert!(meshtimeouts(&app).await.contains(&("t".to_owned(), true)));

    // Stop: a new rollout of the same plan, stopped after its copies are written.
    let (s, r) = post(
        &app,
        ROLLOUT,
        &json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    tick(&cx).await;
    let (s, r) = post(
        &app,
        "/meshes/default/_migration/stop",
        &json!({"plan": fp}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["phase"]["step"], "rollingBack");
    tick(&cx).await;
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["state"], "rolledBack", "{r:#}");
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

    // An applied plan cannot be rolled out.
    let (s, b) = post(
        &app,
        "/meshes/default/_migration/apply",
        &json!({"plan": fp}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = post(&app, ROLLOUT, &json!({"plan": fp, "stages": "a=b,100%"})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
}

/// A stage whose DPPs' zone does not answer fails closed: the stage never goes live and its
/// copy is deleted. Which DPPs each stage selects is answered before anything happens (a dry
/// run stores nothing).
#[tokio::test]
async fn a_zone_that_cannot_be_read_fails_the_stage_closed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let app = router(app_state(store.clone(), Arc::default()));
    put(&app, "/meshes/default", MESH).await;
    put(
        &app,
        "/meshes/default/meshtimeouts/t",
        &timeout("t", "{kind: Mesh}"),
    )
    .await;
    for (name, zone) in [("web", "zone-1"), ("api", "zone-2")] {
        let dp = umbra_core::resource::Resource::from_bytes(format!(
            "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: {name}, kuma.io/zone: {zone}}}\n"
        ).as_bytes())
        .unwrap();
        store.put(dp, None, Some(zone)).await.unwrap();
    }
    let (s, plan) = post(
        &app,
        "/meshes/default/_migration/plan",
        &json!({"policies": ["MeshTimeout/t"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    let fp = plan["fingerprint"].as_str().unwrap().to_owned();
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
    let (s, _) = get(&app, ROLLOUT).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a dry run stores nothing");

    let (s, r) = post(
        &app,
        ROLLOUT,
        &json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let cx = app_state(store.clone(), Arc::default()).inspect_context();
    tick(&cx).await; // the copy
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
    assert!(!r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["action"] == "stage live"));
    assert!(!meshtimeouts(&app)
        .await
        .iter()
        .any(|(n, _)| n.contains("-stage-")));
}

/// On PostgreSQL, a rollout started before a restart of the Global (a new connection, a new
/// context: nothing kept in memory) goes on after it, from its recorded phase, to its end: with
/// `minRequests: 0` the gate of a mesh without traffic passes, and the last stage is the plan's
/// apply in one transaction (its revision the store's last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_resumes_after_a_restart_on_postgres_and_ends_in_the_plans_apply() {
    use umbra_global_cp::store::postgres::PostgresStore;
    let Some(pg) = umbra_global_cp::testing::TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("rollout").await.unwrap();
    let fp = {
        let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
        let app = router(app_state(store.clone(), Arc::default()));
        put(&app, "/meshes/default", MESH).await;
        put(
            &app,
            "/meshes/default/meshtimeouts/t",
            &timeout("t", "{kind: Mesh}"),
        )
        .await;
        let (s, plan) = post(
            &app,
            "/meshes/default/_migration/plan",
            &json!({"policies": ["MeshTimeout/t"]}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{plan}");
        let fp = plan["fingerprint"].as_str().unwrap().to_owned();
        let body = json!({"plan": fp, "stages": "kuma.io/zone=zone-1,100%", "soak": "1s", "thresholds": {"minRequests": 0}});
        let (s, r) = post(&app, ROLLOUT, &body).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        tick(&app_state(store.clone(), Arc::default()).inspect_context()).await;
        assert!(meshtimeouts(&app)
            .await
            .contains(&("t-stage-1".to_owned(), true)));
        fp
    };
    // The restart.
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let app = router(app_state(store.clone(), Arc::default()));
    let cx = app_state(store.clone(), Arc::default()).inspect_context();
    tick(&cx).await;
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "live", "{r:#}");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    tick(&cx).await;
    let (_, r) = get(&app, ROLLOUT).await;
    assert_eq!(r["phase"]["step"], "final", "{r:#}");
    tick(&cx).await;
    let (_, r) = get(&app, &format!("{ROLLOUT}?plan={fp}")).await;
    assert_eq!(r["state"], "completed", "{r:#}");
    let actions: Vec<&str> = r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "started",
            "copies written",
            "stage live",
            "gate passed",
            "applied"
        ]
    );
    let applied = r["decisions"][4]["revision"].as_u64().unwrap();
    assert_eq!(
        store.revision().await.unwrap(),
        applied,
        "the apply is the last write"
    );
    assert_eq!(
        meshtimeouts(&app).await,
        [("t".to_owned(), false)],
        "live, copies gone"
    );
    // The plan is recorded as applied: a second apply is refused.
    let (s, b) = post(&app, ROLLOUT, &json!({"plan": fp, "stages": "a=b,100%"})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
}
