//! The Global's REST API through the router (no sockets): CRUD with validation, `If-Match`
//! compare-and-swap, paging, label and name filters, cross-mesh lists, Kuma's error fields,
//! read-only Dataplanes; and on PostgreSQL, a 503 during a database outage and recovery
//! without a restart.

use std::sync::Arc;
use std::time::Duration;
use umbra_global_cp::testing::app_state;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::TempPostgres;
use umbra_global_cp::tokens::ZoneTokens;

fn app(store: Arc<dyn Store>) -> axum::Router {
    router(app_state(store, Arc::default()))
}

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn timeout(name: &str, idle: &str, labels: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {idle}}}\n")
}

#[tokio::test]
async fn crud_validation_cas_paging_and_read_only_dataplanes() {
    let app = app(Arc::new(MemoryStore::new()));
    let (s, _, _) = call(&app, "PUT", "/meshes/default", &[], Some(MESH)).await;
    assert_eq!(s, StatusCode::CREATED);

    // Invalid: every violation, nothing stored.
    let bad = "type: MeshTimeout\nmesh: default\nname: bad\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: -1s, connectionTimeout: nope}\n";
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/bad",
        &[],
        Some(bad),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["invalidParameters"]
            .as_array()
            .is_some_and(|v| !v.is_empty()),
        "{body}"
    );
    let (s, _, _) = call(&app, "GET", "/meshes/default/meshtimeouts/bad", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Path mismatch.
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/other",
        &[],
        Some(&timeout("t", "1s", "")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["invalidParameters"][0]["field"], "name");

    // Create-only, then compare-and-swap updates by version.
    let t = timeout("t", "1s", "");
    let (s, _, etag) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "0")],
        Some(&t),
    )
    .await;
    assert_eq!((s, etag.as_deref()), (StatusCode::CREATED, Some("\"1\"")));
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "0")],
        Some(&t),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    let t2 = timeout("t", "2s", "");
    let (s, _, etag) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "\"1\"")],
        Some(&t2),
    )
    .await;
    assert_eq!((s, etag.as_deref()), (StatusCode::OK, Some("\"2\"")));
    let (s, _, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "1")],
        Some(&t),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::CONFLICT,
        "a stale write is refused, not lost"
    );
    let (s, body, _) = call(&app, "GET", "/meshes/default/meshtimeouts/t", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["spec"]["to"][0]["default"]["idleTimeout"], "2s");
    let (s, _, _) = call(
        &app,
        "DELETE",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "1")],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "x")],
        Some(&t),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _, _) = call(
        &app,
        "DELETE",
        "/meshes/default/meshtimeouts/t",
        &[("if-match", "2")],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);

    // Paging and label filters.
    for i in 0..7 {
        let labels = if i % 2 == 0 {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        let (s, _, _) = call(
            &app,
            "PUT",
            &format!("/meshes/default/meshtimeouts/p{i}"),
            &[],
            Some(&timeout(&format!("p{i}"), "1s", labels)),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (_, page, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?size=3",
        &[],
        None,
    )
    .await;
    assert_eq!(page["total"], 7);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(page["next"], "/meshes/default/meshtimeouts?offset=3&size=3");
    let (_, last, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?size=3&offset=6",
        &[],
        None,
    )
    .await;
    assert!(last.get("next").is_none(), "{last}");
    let (_, shadow, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?label=kuma.io/effect:shadow",
        &[],
        None,
    )
    .await;
    assert_eq!(shadow["total"], 4);
    // `name=` (substring) with `label=`: `next` keeps both filters, and is absent at the end.
    let (_, first, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?label=kuma.io/effect:shadow&size=2&name=p",
        &[],
        None,
    )
    .await;
    assert_eq!(first["total"], 4);
    let next = first["next"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        next,
        "/meshes/default/meshtimeouts?offset=2&size=2&label=kuma.io%2Feffect%3Ashadow&name=p"
    );
    let (_, second, _) = call(&app, "GET", &next, &[], None).await;
    let names: Vec<&str> = second["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["p4", "p6"]);
    assert!(second.get("next").is_none(), "{second}");
    let (_, one, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?name=p1",
        &[],
        None,
    )
    .await;
    assert_eq!(one["total"], 1);
    assert_eq!(one["items"][0]["name"], "p1");
    let (s, bad, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?label=nocolon",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(bad["invalid_parameters"][0]["field"], "label");
    assert_eq!(bad["invalid_parameters"][0]["rule"], "format");
    assert_eq!(bad["type"], "/std-errors");
    assert!(bad["instance"].is_string(), "{bad}");
    let (s, _, _) = call(
        &app,
        "GET",
        "/meshes/default/meshtimeouts?size=0",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _, _) = call(&app, "GET", "/meshes/default/nosuchthings", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Dataplanes come from zones.
    let dp = "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n";
    let (s, _, _) = call(&app, "PUT", "/meshes/default/dataplanes/web", &[], Some(dp)).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    // So do ZoneIngresses.
    let zi = "type: ZoneIngress\nname: zi\nnetworking: {address: 10.0.0.1, port: 10001}\n";
    let (s, _, _) = call(&app, "PUT", "/zone-ingresses/zi", &[], Some(zi)).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let (s, list, _) = call(&app, "GET", "/zoneingresses", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["total"], 0);

    // Deleting the mesh deletes its policies.
    let (s, _, _) = call(&app, "DELETE", "/meshes/default", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    let (_, meshes, _) = call(&app, "GET", "/meshes", &[], None).await;
    assert_eq!(meshes["total"], 0);
    let (s, _, _) = call(&app, "PUT", "/meshes/default/meshtimeouts/t", &[], Some(&t)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "no mesh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_outage_is_a_503_and_the_api_recovers_without_a_restart() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("api").await.unwrap();
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let app = app(store);
    let (s, _, _) = call(&app, "PUT", "/meshes/default", &[], Some(MESH)).await;
    assert_eq!(s, StatusCode::CREATED);
    pg.stop().unwrap();
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[],
        Some(&timeout("t", "1s", "")),
    )
    .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("unavailable")),
        "{body}"
    );
    assert!(!body.to_string().contains("SELECT"), "no SQL leaks: {body}");
    pg.restart().unwrap();
    let mut status = StatusCode::SERVICE_UNAVAILABLE;
    for _ in 0..50 {
        status = call(
            &app,
            "PUT",
            "/meshes/default/meshtimeouts/t",
            &[],
            Some(&timeout("t", "1s", "")),
        )
        .await
        .0;
        if status == StatusCode::CREATED {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        status,
        StatusCode::CREATED,
        "served again once PostgreSQL is back"
    );
    let (_, body, _) = call(&app, "GET", "/meshes/default/meshtimeouts/t", &[], None).await;
    assert_eq!(body["name"], "t");
}

#[tokio::test]
async fn zone_tokens_are_issued_for_valid_zone_names_only() {
    let app = app(Arc::new(MemoryStore::new()));
    let (s, body, _) = call(
        &app,
        "POST",
        "/tokens/zone",
        &[("content-type", "application/json")],
        Some(r#"{"zone": "zone-1", "validFor": "24h"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let token = body.as_str().unwrap();
    assert_eq!(
        ZoneTokens::from_key(b"test key").verify(token).unwrap(),
        "zone-1"
    );
    for (req, field) in [
        (r#"{"zone": "Zone.1"}"#, "zone"),
        (r#"{"zone": "z", "validFor": "-1h"}"#, "validFor"),
        (r#"{"zone": "z", "validFor": "soon"}"#, "validFor"),
        (r#"{"zone": "z", "other": 1}"#, "body"),
    ] {
        let (s, body, _) = call(&app, "POST", "/tokens/zone", &[], Some(req)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{req}");
        assert_eq!(
            body["invalidParameters"][0]["field"], field,
            "{req}: {body}"
        );
    }
    let (s, body, _) = call(&app, "GET", "/zones", &[], None).await;
    assert_eq!((s, body["total"].as_u64()), (StatusCode::OK, Some(0)));
    let (s, _, _) = call(&app, "GET", "/zones/zone-1", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn hostile_bodies_get_clear_errors_in_the_api_shape_and_store_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = app(store.clone());
    let (s, _, _) = call(&app, "PUT", "/meshes/default", &[], Some(MESH)).await;
    assert_eq!(s, StatusCode::CREATED);
    let revision = store.revision().await.unwrap();
    let shaped = |s: StatusCode, body: &Value| {
        assert_eq!(body["status"], s.as_u16(), "{body}");
        assert!(
            body["title"].is_string() && body["detail"].is_string(),
            "{body}"
        );
    };

    // A body of another media type: 415.
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        &[("content-type", "image/png")],
        Some(&timeout("t", "1s", "")),
    )
    .await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    shaped(s, &body);
    // JSON and YAML (with parameters) are taken.
    for ct in [
        "application/yaml; charset=utf-8",
        "text/yaml",
        "application/json",
    ] {
        let body = if ct == "application/json" {
            serde_json::to_string(
                &umbra_core::resource::Resource::from_bytes(timeout("t", "1s", "").as_bytes())
                    .unwrap()
                    .to_value(),
            )
            .unwrap()
        } else {
            timeout("t", "1s", "")
        };
        let (s, v, _) = call(
            &app,
            "PUT",
            "/meshes/default/meshtimeouts/t",
            &[("content-type", ct)],
            Some(&body),
        )
        .await;
        assert!(s.is_success(), "{ct}: {s} {v}");
    }
    let (_, _, _) = call(&app, "DELETE", "/meshes/default/meshtimeouts/t", &[], None).await;
    let revision = revision + 2;
    assert_eq!(store.revision().await.unwrap(), revision);

    // Names a URL path normalises away.
    for name in [".", ".."] {
        let (s, body, _) = call(
            &app,
            "PUT",
            &format!("/meshes/default/meshtimeouts/{name}"),
            &[],
            Some(&timeout(&format!("\"{name}\""), "1s", "")),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{name:?}: {body}");
        assert_eq!(body["invalidParameters"][0]["field"], "name", "{body}");
    }

    // An alias bomb of 1 KiB is refused by the alias budget, before it expands.
    let mut bomb = String::from("type: MeshTimeout\nmesh: default\nname: bomb\nspec:\n  targetRef: {kind: Mesh}\n  x:\n    l0: &l0 [aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb, cccccccccccccccc, dddddddddddddddd, eeeeeeeeeeeeeeee, ffffffffffffffff, gggggggggggggggg, hhhhhhhhhhhhhhhh, iiiiiiiiiiiiiiii]\n");
    for i in 1..9 {
        bomb.push_str(&format!(
            "    l{i}: &l{i} [{}]\n",
            vec![format!("*l{}", i - 1); 9].join(", ")
        ));
    }
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/bomb",
        &[],
        Some(&bomb),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("aliases expand"), "{body}");

    // Over the body limit: 413, in the API's shape.
    let huge = "#".repeat(umbra_api::service::MAX_BODY_BYTES + 1);
    let (s, body, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/huge",
        &[],
        Some(&huge),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    shaped(s, &body);

    // A path no route serves, a method a route does not: the API's shape too.
    let (s, body, _) = call(&app, "GET", "/nowhere", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    shaped(s, &body);
    let (s, body, _) = call(&app, "PATCH", "/meshes/default", &[], None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    shaped(s, &body);

    assert_eq!(
        store.revision().await.unwrap(),
        revision,
        "nothing was stored"
    );
}

/// The path a universal-format document is PUT to.
fn path_of(doc: &Value) -> String {
    let ty = umbra_core::resource::ResourceType::from_name(doc["type"].as_str().unwrap()).unwrap();
    let name = doc["name"].as_str().unwrap();
    match ty {
        umbra_core::resource::ResourceType::Mesh => format!("/meshes/{name}"),
        umbra_core::resource::ResourceType::GlobalSecret => format!("/global-secrets/{name}"),
        _ => format!(
            "/meshes/{}/{}/{name}",
            doc["mesh"].as_str().unwrap(),
            ty.plural()
        ),
    }
}

/// Issue 17: a new Mesh comes with Kuma's default policies unless it skips them, on both
/// stores (PostgreSQL writes them in the Mesh's transaction); a Kuma export with one resource
/// of every type applies unchanged and reads back as written.
#[tokio::test]
async fn mesh_defaults_and_a_kuma_export_of_every_type() {
    let pg = TempPostgres::start_or_skip();
    let mut stores: Vec<(&str, Arc<dyn Store>)> = vec![("memory", Arc::new(MemoryStore::new()))];
    if let Some(pg) = &pg {
        let url = pg.create_database("defaults").await.unwrap();
        stores.push((
            "postgres",
            Arc::new(PostgresStore::connect(&url, 4).await.unwrap()),
        ));
    }
    for (label, store) in stores {
        let app = app(store);
        let (s, body, _) = call(
            &app,
            "PUT",
            "/meshes/fresh",
            &[],
            Some("type: Mesh\nname: fresh\n"),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{label}: {body}");
        let names = |body: &Value| -> Vec<String> {
            body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap().to_owned())
                .collect()
        };
        for (plural, want) in [
            (
                "meshtimeouts",
                vec!["mesh-gateways-timeout-all-fresh", "mesh-timeout-all-fresh"],
            ),
            (
                "meshcircuitbreakers",
                vec!["mesh-circuit-breaker-all-fresh"],
            ),
            ("meshretries", vec!["mesh-retry-all-fresh"]),
        ] {
            let (s, body, _) =
                call(&app, "GET", &format!("/meshes/fresh/{plural}"), &[], None).await;
            assert_eq!(s, StatusCode::OK, "{label}: {body}");
            assert_eq!(names(&body), want, "{label} {plural}");
        }
        // A deleted default stays deleted when the Mesh is updated.
        let (s, _, _) = call(
            &app,
            "DELETE",
            "/meshes/fresh/meshretries/mesh-retry-all-fresh",
            &[],
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let (s, _, _) = call(
            &app,
            "PUT",
            "/meshes/fresh",
            &[],
            Some("type: Mesh\nname: fresh\nrouting: {localityAwareLoadBalancing: true}\n"),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let (_, body, _) = call(&app, "GET", "/meshes/fresh/meshretries", &[], None).await;
        assert!(names(&body).is_empty(), "{label}: {body}");
        // Skipping one type.
        let (s, _, _) = call(&app, "PUT", "/meshes/partial", &[], Some("type: Mesh\nname: partial\nskipCreatingInitialPolicies: [MeshTimeout, MeshRetry]\n")).await;
        assert_eq!(s, StatusCode::CREATED);
        for (plural, count) in [
            ("meshtimeouts", 0),
            ("meshretries", 0),
            ("meshcircuitbreakers", 1),
        ] {
            let (_, body, _) =
                call(&app, "GET", &format!("/meshes/partial/{plural}"), &[], None).await;
            assert_eq!(body["total"], count, "{label} {plural}: {body}");
        }

        // The export: every document applies and reads back as written; nothing else appears.
        let docs = umbra_core::codec::decode_documents(
            include_bytes!("../../deploy/kuma-export.yaml"),
            umbra_core::codec::Limits::default(),
        )
        .unwrap();
        for doc in &docs {
            let (s, body, _) = call(&app, "PUT", &path_of(doc), &[], Some(&doc.to_string())).await;
            assert_eq!(s, StatusCode::CREATED, "{label} {}: {body}", path_of(doc));
            let (s, mut got, _) = call(&app, "GET", &path_of(doc), &[], None).await;
            assert_eq!(s, StatusCode::OK);
            let got = got.as_object_mut().unwrap();
            got.remove("creationTime");
            got.remove("modificationTime");
            assert_eq!(&Value::Object(got.clone()), doc, "{label} {}", path_of(doc));
        }
        let (_, body, _) = call(&app, "GET", "/meshes/legacy/meshtimeouts", &[], None).await;
        assert_eq!(
            names(&body),
            ["timeout-all"],
            "{label}: the export's Mesh skips the defaults"
        );
        let (_, body, _) = call(&app, "GET", "/global-secrets", &[], None).await;
        assert_eq!(
            names(&body),
            ["user-token-signing-key-1"],
            "{label}: {body}"
        );
    }
}

#[tokio::test]
async fn cross_mesh_lists_page_and_filter_every_mesh() {
    let app = app(Arc::new(MemoryStore::new()));
    for (mesh, names) in [("default", ["a1", "b1"]), ("other", ["a2", "b2"])] {
        let body = format!("type: Mesh\nname: {mesh}\nskipCreatingInitialPolicies: ['*']\n");
        let (s, _, _) = call(&app, "PUT", &format!("/meshes/{mesh}"), &[], Some(&body)).await;
        assert_eq!(s, StatusCode::CREATED);
        for name in names {
            let yaml = timeout(name, "1s", "").replace("mesh: default", &format!("mesh: {mesh}"));
            let path = format!("/meshes/{mesh}/meshtimeouts/{name}");
            let (s, body, _) = call(&app, "PUT", &path, &[], Some(&yaml)).await;
            assert_eq!(s, StatusCode::CREATED, "{body}");
        }
    }
    let (s, all, _) = call(&app, "GET", "/meshtimeouts", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let keys: Vec<(String, String)> = all["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| (i["mesh"].to_string(), i["name"].to_string()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(keys.len(), 4, "{all}");
    assert_eq!(all["total"], 4);
    assert!(all.get("next").is_none(), "{all}");
    let (_, page, _) = call(&app, "GET", "/meshtimeouts?name=a&size=1", &[], None).await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["items"][0]["name"], "a1");
    assert_eq!(page["next"], "/meshtimeouts?offset=1&size=1&name=a");
    let (_, rest, _) = call(
        &app,
        "GET",
        "/meshtimeouts?offset=1&size=1&name=a",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (&rest["items"][0]["mesh"], &rest["items"][0]["name"]),
        (&"other".into(), &"a2".into())
    );
    // Unknown types and types that are not mesh-scoped are 404s; static routes still win.
    for path in ["/nosuchthings", "/global%2Dsecrets"] {
        let (s, body, _) = call(&app, "GET", path, &[], None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["type"], "/std-errors");
    }
    let (s, zones, _) = call(&app, "GET", "/zones", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(zones.get("next").is_none(), "{zones}");
    let (s, _, _) = call(&app, "GET", "/meshes", &[], None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn dataplane_overviews_carry_the_insight_the_zone_reported() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let zones: Arc<umbra_global_cp::zones::ZoneRegistry> = Arc::default();
    let app = router(app_state(store.clone(), zones.clone()));
    let (s, _, _) = call(&app, "PUT", "/meshes/default", &[], Some(MESH)).await;
    assert_eq!(s, StatusCode::CREATED);
    for (local, gateway) in [("web-1", ""), ("web-2", ""), ("edge", "BUILTIN")] {
        let networking = if gateway.is_empty() {
            format!("{{address: 10.0.0.1, inbound: [{{port: 80, tags: {{kuma.io/service: {local}}}}}]}}")
        } else {
            "{address: 10.0.0.9, gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}}"
                .to_owned()
        };
        let yaml = format!(
            "type: Dataplane\nmesh: default\nname: {local}-h1\nlabels: {{kuma.io/zone: z1, kuma.io/display-name: {local}}}\nnetworking: {networking}\n"
        );
        store
            .put(
                umbra_core::resource::Resource::from_bytes(yaml.as_bytes()).unwrap(),
                None,
                Some("z1"),
            )
            .await
            .unwrap();
    }
    let nack = serde_json::json!({"version": "v2", "error": "bad filter"});
    let doc = serde_json::json!({"mesh": "default", "name": "web-1", "connected": true,
        "acked": {}, "nacked": {"type.googleapis.com/envoy.config.listener.v3.Listener": nack},
        "responsesSent": 2, "connectTime": "2026-01-01T00:00:00Z"});
    assert!(zones.put_insight(
        "z1",
        &umbra_kds::resource::kds_name("default", "web-1"),
        umbra_kds::resource::Item::from_doc(&doc),
    ));

    let (s, one, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights/web-1-h1",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["type"], "DataplaneOverview");
    assert_eq!(one["name"], "web-1-h1");
    assert_eq!(one["labels"]["kuma.io/display-name"], "web-1");
    let di = &one["dataplaneInsight"];
    assert!(di.get("mesh").is_none(), "{di}");
    assert_eq!(
        di["nacked"]["type.googleapis.com/envoy.config.listener.v3.Listener"],
        nack
    );
    assert_eq!(di["subscriptions"][0]["controlPlaneInstanceId"], "z1");
    assert_eq!(di["subscriptions"][0]["status"]["lds"]["nack"], nack);
    let (s, _, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights/nope",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (s, page, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights?size=2",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"][0]["name"], "edge-h1");
    assert_eq!(page["items"][0]["dataplaneInsight"], serde_json::json!({}));
    assert_eq!(page["items"][1], one);
    assert_eq!(
        page["next"],
        "/meshes/default/dataplanes+insights?offset=2&size=2"
    );
    let (_, web, _) = call(
        &app,
        "GET",
        "/dataplanes+insights?tag=kuma.io/service:web&size=1",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (web["total"].as_u64(), web["items"][0]["name"].as_str()),
        (Some(2), Some("web-1-h1"))
    );
    assert_eq!(
        web["next"],
        "/dataplanes+insights?offset=1&size=1&tag=kuma.io%2Fservice%3Aweb"
    );
    let (_, gw, _) = call(&app, "GET", "/dataplanes+insights?gateway=true", &[], None).await;
    assert_eq!(
        (gw["total"].as_u64(), gw["items"][0]["name"].as_str()),
        (Some(1), Some("edge-h1"))
    );
    let (_, plain, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes?gateway=false&label=kuma.io/zone:z1",
        &[],
        None,
    )
    .await;
    assert_eq!(plain["total"], 2);
    let (s, _, _) = call(&app, "GET", "/meshes/nope/dataplanes+insights", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, bad, _) = call(&app, "GET", "/dataplanes+insights?gateway=maybe", &[], None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(bad["invalid_parameters"][0]["rule"], "enum");
}

#[tokio::test]
async fn zone_overviews_from_the_zone_registry() {
    use umbra_global_cp::zones::{Direction, ZoneRegistry};
    use umbra_kds::sync::Event;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let zones: Arc<ZoneRegistry> = Arc::default();
    let app = router(app_state(store, zones.clone()));
    for zone in ["east", "west", "north"] {
        zones.stream_opened(zone, "10.0.0.1:1").unwrap();
    }
    let sent = Event::Sent {
        type_url: "MeshTimeout".into(),
        resources: 2,
        removed: 0,
    };
    zones.record("east", Direction::GlobalToZone, &sent);
    zones.record("east", Direction::GlobalToZone, &sent);
    zones.record(
        "east",
        Direction::GlobalToZone,
        &Event::Ack {
            type_url: "MeshTimeout".into(),
            held: 2,
        },
    );
    zones.record(
        "east",
        Direction::GlobalToZone,
        &Event::Nack {
            type_url: "MeshTimeout".into(),
            error: "bad".into(),
        },
    );
    zones.stream_closed("west", None);

    let (s, east, _) = call(&app, "GET", "/zones/east+insights", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{east}");
    assert_eq!(east["type"], "ZoneOverview");
    assert_eq!(
        (east["name"].as_str(), east["zone"]["enabled"].as_bool()),
        (Some("east"), Some(true))
    );
    let sub = &east["zoneInsight"]["subscriptions"][0];
    assert_eq!(sub["id"], "east-global-cp-1");
    assert_eq!(sub["globalInstanceId"], "global-cp", "the replica's name");
    assert!(sub["connectTime"].is_string(), "{sub}");
    assert!(sub.get("disconnectTime").is_none(), "{sub}");
    assert_eq!(
        sub["status"]["stat"]["MeshTimeout"],
        serde_json::json!({"responsesSent": "2", "responsesAcknowledged": "1", "responsesRejected": "1"})
    );
    assert_eq!(sub["status"]["total"]["responsesSent"], "2");
    assert_eq!(east["umbra"]["online"], true);
    let (_, west, _) = call(&app, "GET", "/zones/west+insights", &[], None).await;
    assert!(
        west["zoneInsight"]["subscriptions"][0]["disconnectTime"].is_string(),
        "{west}"
    );
    let (s, body, _) = call(&app, "GET", "/zones/south+insights", &[], None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    // `/zones/{name}` itself is unchanged.
    let (_, plain, _) = call(&app, "GET", "/zones/east", &[], None).await;
    assert_eq!(
        (plain["name"].as_str(), plain.get("type")),
        (Some("east"), None)
    );

    let (s, page, _) = call(&app, "GET", "/zones+insights?size=2", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"][0]["name"], "east");
    assert_eq!(page["items"][1]["name"], "north");
    assert_eq!(page["next"], "/zones+insights?offset=2&size=2");
    let (_, named, _) = call(&app, "GET", "/zones+insights?name=st", &[], None).await;
    let names: Vec<&str> = named["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["east", "west"]);
    assert!(named.get("next").is_none());
    let (s, _, _) = call(&app, "GET", "/zones+insights?size=0", &[], None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// ZoneEgresses on the Global: read-only (a PUT or DELETE is a 405), listed as the zones
/// synced them, with Kuma's `ZoneEgressOverview` carrying the insight the zone reported under
/// the egress key; counted in `GlobalInsight`.
#[tokio::test]
async fn zone_egresses_are_read_only_and_overviewed_with_their_zones_insight() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let zones: Arc<umbra_global_cp::zones::ZoneRegistry> = Arc::default();
    let app = router(app_state(store.clone(), zones.clone()));
    let ze = "type: ZoneEgress\nname: ze\nnetworking: {address: 10.0.0.1, port: 10002}\n";
    for method in ["PUT", "DELETE"] {
        let body = (method == "PUT").then_some(ze);
        let (s, b, _) = call(&app, method, "/zoneegresses/ze", &[], body).await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{method}: {b}");
        assert!(
            b["detail"].as_str().unwrap().contains("Zone Egresses"),
            "{b}"
        );
    }
    // As a zone's KDS stream stores it: its Global name, labels, zone and owner.
    let synced = "type: ZoneEgress\nname: ze-1abc\nlabels: {kuma.io/zone: z1, kuma.io/display-name: ze}\nzone: z1\nnetworking: {address: 10.0.0.1, port: 10002}\n";
    store
        .put(
            umbra_core::resource::Resource::from_bytes(synced.as_bytes()).unwrap(),
            None,
            Some("z1"),
        )
        .await
        .unwrap();
    let doc = serde_json::json!({"mesh": umbra_core::dataplane::ZONE_EGRESS_KEY_MESH, "name": "ze",
        "connected": true, "acked": {}, "nacked": {}, "responsesSent": 1,
        "connectTime": "2026-01-01T00:00:00Z"});
    assert!(zones.put_insight(
        "z1",
        &umbra_kds::resource::kds_name(umbra_core::dataplane::ZONE_EGRESS_KEY_MESH, "ze"),
        umbra_kds::resource::Item::from_doc(&doc),
    ));
    let (s, list, _) = call(
        &app,
        "GET",
        "/zoneegresses?label=kuma.io/zone:z1",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["zone"], "z1");
    let (s, one, _) = call(&app, "GET", "/zoneegresses/ze-1abc", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    for path in [
        "/zoneegressoverviews/ze-1abc",
        "/zoneegresses/ze-1abc/_overview",
        "/zoneegresses+insights/ze-1abc",
    ] {
        let (s, o, _) = call(&app, "GET", path, &[], None).await;
        assert_eq!(s, StatusCode::OK, "{path}: {o}");
        assert_eq!(o["type"], "ZoneEgressOverview");
        assert_eq!(o["labels"]["kuma.io/zone"], "z1");
        let sub = &o["zoneEgressInsight"]["subscriptions"][0];
        assert_eq!(sub["controlPlaneInstanceId"], "z1", "{o}");
        assert!(sub.get("disconnectTime").is_none(), "online: {o}");
    }
    let (s, page, _) = call(&app, "GET", "/zoneegressoverviews", &[], None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["zoneEgressInsight"]["connected"], true);
    let (_, insight, _) = call(&app, "GET", "/global-insight", &[], None).await;
    assert_eq!(
        insight["zones"]["zoneEgresses"],
        serde_json::json!({"total": 1, "online": 1}),
        "{insight}"
    );
}
