//! The migration workflow's API on the Global (issue 19), through the router on the memory
//! store and on PostgreSQL: plan (fingerprint, default retirements, stored), apply refused
//! after a concurrent change (409 naming it), re-plan, apply in one transaction (one run of
//! consecutive revisions), rollback restoring both families, a second rollback refused. The
//! zones' side (fleet diff, one KDS update, real Envoy) is `e2e/tests/migration.rs`.

use std::sync::Arc;
use umbra_global_cp::testing::app_state;

use axum::http::StatusCode;
use serde_json::json;
use umbra_api::testing::{call, get_json as get, post_json as post, put_ok as put};
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::{Op, Store};
use umbra_global_cp::testing::TempPostgres;

fn app(store: Arc<dyn Store>) -> axum::Router {
    router(app_state(store, Arc::default()))
}

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const OLD: &str = "type: Timeout\nmesh: default\nname: timeout-all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 5s}\n";
const OTHER_OLD: &str = "type: Timeout\nmesh: default\nname: timeout-web\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 3s}\n";

fn new_timeout(name: &str, from: &str, connect: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nlabels: {{kuma.io/effect: shadow, umbra.io/converted-from-type: Timeout, umbra.io/converted-from: {from}}}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: {connect}}}\n")
}

async fn lifecycle(store: Arc<dyn Store>) {
    let app = app(store.clone());
    put(&app, "/meshes/default", MESH).await;
    put(&app, "/meshes/default/timeouts/timeout-all", OLD).await;
    put(&app, "/meshes/default/timeouts/timeout-web", OTHER_OLD).await;
    put(
        &app,
        "/meshes/default/meshtimeouts/timeout-all",
        &new_timeout("timeout-all", "timeout-all", "5s"),
    )
    .await;

    // Bad requests: unknown fields; then a live policy to promote and a shadow one to retire,
    // which are well-formed but conflict with the policies' state (409).
    let plan_path = "/meshes/default/_migration/plan";
    let (s, b) = post(&app, plan_path, &json!({"nope": 1})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    // A JSON body of whitespace alone holds no value (schemathesis sent `\r`); only an empty
    // body reads as `{}`.
    for body in ["\r", " \n", "[]"] {
        let (s, b, _) = call(
            &app,
            "POST",
            plan_path,
            &[("content-type", "application/json")],
            Some(body),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body:?}: {b}");
        assert!(b.to_string().contains("body"), "{b}");
    }
    let (s, b, _) = call(&app, "POST", plan_path, &[], Some("")).await;
    assert_eq!(s, StatusCode::OK, "an empty body: {b}");
    let (s, b) = post(
        &app,
        plan_path,
        &json!({"policies": ["Timeout/timeout-all"]}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    let (s, b) = post(
        &app,
        plan_path,
        &json!({"retire": ["MeshTimeout/timeout-all"]}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    let (s, b) = post(
        &app,
        plan_path,
        &json!({"policies": ["MeshTimeout/absent"]}),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{b}");
    let (s, _) = post(&app, "/meshes/nowhere/_migration/plan", &json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The plan: every shadow policy, and the old policy it was converted from.
    let (s, plan) = post(&app, plan_path, &json!({})).await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    assert_eq!(plan["promote"], json!(["MeshTimeout/timeout-all"]));
    assert_eq!(plan["retire"], json!(["Timeout/timeout-all"]));
    assert_eq!(plan["partial"], json!(false));
    let first = plan["fingerprint"].as_str().unwrap().to_owned();
    assert_eq!(first.len(), 64);
    // Planning again with nothing changed gives the same fingerprint.
    let (_, again) = post(&app, plan_path, &json!({})).await;
    assert_eq!(again["fingerprint"], plan["fingerprint"]);

    // A concurrent change: the apply is refused and names it; nothing changes.
    put(
        &app,
        "/meshes/default/timeouts/timeout-web",
        &OTHER_OLD.replace("3s", "4s"),
    )
    .await;
    let head = store.revision().await.unwrap();
    let apply_path = "/meshes/default/_migration/apply";
    let (s, b) = post(&app, apply_path, &json!({"plan": first})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains("Timeout/timeout-web: version 2, planned at 1"),
        "{detail}"
    );
    assert_eq!(store.revision().await.unwrap(), head, "nothing written");
    let (s, b) = post(&app, apply_path, &json!({"plan": "0123abcd"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{b}");
    let (s, b) = post(&app, apply_path, &json!({"plan": "not hex"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");

    // Re-plan, retiring the other Timeout too, and apply: one transaction.
    let (s, plan) = post(
        &app,
        plan_path,
        &json!({"policies": ["MeshTimeout/timeout-all"], "retire": ["Timeout/timeout-web"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    assert_eq!(
        plan["retire"],
        json!(["Timeout/timeout-all", "Timeout/timeout-web"])
    );
    let second = plan["fingerprint"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    let head = store.revision().await.unwrap();
    let (s, applied) = post(&app, apply_path, &json!({"plan": second})).await;
    assert_eq!(s, StatusCode::OK, "{applied}");
    assert_eq!(applied["revision"], json!(head + 3));
    let log = store.changes_since(head, 10).await.unwrap();
    assert_eq!(
        log.iter()
            .map(|c| (c.key.name.as_str(), c.op))
            .collect::<Vec<_>>(),
        [
            ("timeout-all", Op::Put),
            ("timeout-all", Op::Delete),
            ("timeout-web", Op::Delete)
        ]
    );
    let (s, live) = get(&app, "/meshes/default/meshtimeouts/timeout-all").await;
    assert_eq!(s, StatusCode::OK);
    assert!(live["labels"].get("kuma.io/effect").is_none(), "{live}");
    assert_eq!(live["labels"]["umbra.io/converted-from"], "timeout-all");
    for old in ["timeout-all", "timeout-web"] {
        let (s, _) = get(&app, &format!("/meshes/default/timeouts/{old}")).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{old} is gone");
    }
    // Applying twice: the planned versions are gone.
    let (s, b) = post(&app, apply_path, &json!({"plan": second})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");

    // Rollback restores both families in one step; a second one is refused.
    let rollback_path = "/meshes/default/_migration/rollback";
    let head = store.revision().await.unwrap();
    let (s, back) = post(&app, rollback_path, &json!({"plan": second})).await;
    assert_eq!(s, StatusCode::OK, "{back}");
    assert_eq!(back["revision"], json!(head + 3));
    let (_, shadow) = get(&app, "/meshes/default/meshtimeouts/timeout-all").await;
    assert_eq!(shadow["labels"]["kuma.io/effect"], "shadow");
    let (s, web) = get(&app, "/meshes/default/timeouts/timeout-web").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(web["conf"]["connectTimeout"], "4s");
    let (s, b) = post(&app, rollback_path, &json!({"plan": second})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert!(
        b["detail"].as_str().unwrap().contains("exists again"),
        "{b}"
    );

    // A rollback refused when a policy was touched after the apply.
    let (_, plan) = post(&app, plan_path, &json!({})).await;
    let third = plan["fingerprint"].as_str().unwrap().to_owned();
    let (s, _) = post(&app, apply_path, &json!({"plan": third})).await;
    assert_eq!(s, StatusCode::OK);
    let (_, mut live) = get(&app, "/meshes/default/meshtimeouts/timeout-all").await;
    live["spec"]["to"][0]["default"]["connectionTimeout"] = json!("6s");
    let (s, b, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/timeout-all",
        &[("content-type", "application/json")],
        Some(&live.to_string()),
    )
    .await;
    assert!(s.is_success(), "{b}");
    let head = store.revision().await.unwrap();
    let (s, b) = post(&app, rollback_path, &json!({"plan": third})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert!(
        b["detail"]
            .as_str()
            .unwrap()
            .contains("MeshTimeout/timeout-all: at version"),
        "{b}"
    );
    assert_eq!(store.revision().await.unwrap(), head, "nothing written");

    // Nothing shadow left to promote: 409.
    let (s, b) = post(&app, plan_path, &json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
}

#[tokio::test]
async fn plan_apply_rollback_on_the_memory_store() {
    lifecycle(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_apply_rollback_on_postgres_and_plans_outlive_a_restart() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("migration").await.unwrap();
    let store = PostgresStore::connect(&url, 4).await.unwrap();
    lifecycle(Arc::new(store)).await;
    // A plan made before a restart of the Global applies after it.
    let store = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let app1 = app(store.clone());
    put(
        &app1,
        "/meshes/default/meshtimeouts/later",
        &new_timeout("later", "none", "7s"),
    )
    .await;
    let (s, plan) = post(
        &app1,
        "/meshes/default/_migration/plan",
        &json!({"policies": ["MeshTimeout/later"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    drop(app1);
    let restarted = app(Arc::new(PostgresStore::connect(&url, 4).await.unwrap()));
    let (s, b) = post(
        &restarted,
        "/meshes/default/_migration/apply",
        &json!({"plan": plan["fingerprint"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // A policy created since the apply keeps the rollback from restoring what was reviewed.
    put(
        &restarted,
        "/meshes/default/meshtimeouts/newer",
        &new_timeout("newer", "none", "8s").replace("kuma.io/effect: shadow, ", ""),
    )
    .await;
    let (s, b) = post(
        &restarted,
        "/meshes/default/_migration/rollback",
        &json!({"plan": plan["fingerprint"]}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert!(b["detail"].as_str().unwrap().contains("newer"), "{b}");
}
