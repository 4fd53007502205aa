//! The zone API through the router (no sockets): resource CRUD with validation, paging, the
//! federated read-only rule, and inspect (`_config`, `_rules`) with `shadow` and `include=diff`
//! on the transition seed's Timeout -> MeshTimeout scenario.

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::store::Store;

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<String>,
) -> (StatusCode, Value) {
    let (status, v, _) = umbra_api::testing::call(app, method, uri, &[], body.as_deref()).await;
    (status, v)
}

/// A zone loaded with the seed's kuma-demo scenario (old Timeouts live, MeshTimeouts shadow).
async fn loaded() -> axum::Router {
    let app = router(AppState::new(Store::new(), false));
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../xds/tests/data/timeouts.yaml"
    ))
    .unwrap();
    for r in Resource::all_from_bytes(yaml.as_bytes()).unwrap() {
        let uri = if r.ty() == umbra_core::resource::ResourceType::Mesh {
            format!("/meshes/{}", r.meta.name)
        } else {
            format!(
                "/meshes/{}/{}/{}",
                r.meta.mesh,
                r.ty().plural(),
                r.meta.name
            )
        };
        let (status, body) = call(&app, "PUT", &uri, Some(r.to_value().to_string())).await;
        assert_eq!(status, StatusCode::CREATED, "{uri}: {body}");
    }
    app
}

#[tokio::test]
async fn config_shadow_diff_applies_to_live() {
    let app = loaded().await;
    let (s, live) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/frontend/_config",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(live.get("diff").is_none());
    let (s, shadow) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/frontend/_config?shadow=true&include=diff",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let patch: json_patch::Patch = serde_json::from_value(shadow["diff"].clone()).unwrap();
    let mut doc = live["xds"].clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(
        doc, shadow["xds"],
        "xds is the live document with diff applied"
    );
    assert_eq!(
        patch.0.len(),
        13,
        "the seed's 12 changes (one object replace comes out as two adds)"
    );
    let (s, no_shadow) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/frontend/_config?shadow=false&include=diff",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(no_shadow["diff"], json!([]));
    assert_eq!(no_shadow["xds"], live["xds"]);
}

#[tokio::test]
async fn inspect_rejects_bad_parameters_and_unknown_names() {
    let app = loaded().await;
    for (uri, want) in [
        (
            "/meshes/default/dataplanes/frontend/_config?shadow=yes",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/meshes/default/dataplanes/frontend/_config?include=xds",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/meshes/default/dataplanes/frontend/_rules?include=diff,nope",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/meshes/default/dataplanes/nope/_config",
            StatusCode::NOT_FOUND,
        ),
        (
            "/meshes/nope/dataplanes/frontend/_config",
            StatusCode::NOT_FOUND,
        ),
        (
            "/meshes/nope/dataplanes/frontend/_rules",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (s, body) = call(&app, "GET", uri, None).await;
        assert_eq!(s, want, "{uri}: {body}");
        assert_eq!(body["status"], want.as_u16());
    }
}

#[tokio::test]
async fn rules_show_shadow_policies_and_their_diff() {
    let app = loaded().await;
    let (s, live) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/frontend/_rules",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        live["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["type"] != "MeshTimeout"),
        "shadow MeshTimeouts are not live"
    );
    let (s, shadow) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/frontend/_rules?shadow=true&include=diff",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let mt = shadow["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "MeshTimeout")
        .expect("MeshTimeout rules in the shadow view");
    assert_eq!(
        mt["fromRules"][0]["inbound"],
        json!({"tags": {"kuma.io/service": "frontend_kuma-demo_svc_8080", "kuma.io/protocol": "http"},
            "port": 8080, "address": "10.42.0.29"})
    );
    assert!(!shadow["diff"].as_array().unwrap().is_empty());
    let patch: json_patch::Patch = serde_json::from_value(shadow["diff"].clone()).unwrap();
    let mut doc = live["rules"].clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(doc, shadow["rules"]);
    assert_eq!(
        shadow["resource"],
        json!({"type": "Dataplane", "mesh": "default", "name": "frontend"})
    );
}

#[tokio::test]
async fn invalid_resources_get_every_violation_and_are_not_stored() {
    let app = loaded().await;
    let bad = json!({"type": "MeshTimeout", "mesh": "default", "name": "bad", "spec": {
        "targetRef": {"kind": "Mesh"},
        "to": [{"targetRef": {"kind": "MeshService"}, "default": {"idleTimeout": "-1s"}}]
    }});
    let (s, body) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/bad",
        Some(bad.to_string()),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let fields: Vec<&str> = body["invalidParameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.to[0].targetRef.name",
            "spec.to[0].default.idleTimeout"
        ]
    );
    let (s, _) = call(&app, "GET", "/meshes/default/meshtimeouts/bad", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, body) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/other",
        Some(
            "type: MeshTimeout\nmesh: default\nname: bad\nspec: {targetRef: {kind: Mesh}}\n".into(),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["invalidParameters"][0]["field"], "name");
    let (s, body) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/x",
        Some("{not yaml: [".into()),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, _) = call(&app, "PUT", "/meshes/default/nopes/x", Some("{}".into())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn lists_are_paged() {
    let app = loaded().await;
    let (s, page) = call(&app, "GET", "/meshes/default/dataplanes?size=2", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["next"], "/meshes/default/dataplanes?offset=2&size=2");
    let (_, last) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes?offset=2&size=2",
        None,
    )
    .await;
    assert_eq!(last["items"].as_array().unwrap().len(), 1);
    assert!(last.get("next").is_none(), "{last}");
    let (s, bad) = call(&app, "GET", "/meshes/default/dataplanes?size=0", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(bad["invalid_parameters"][0]["rule"], "range", "{bad}");
    // Across meshes, filtered by name; `next` keeps the filter.
    let (s, all) = call(&app, "GET", "/dataplanes?name=end&size=1", None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 2);
    assert_eq!(all["items"][0]["name"], "backend");
    assert_eq!(all["next"], "/dataplanes?offset=1&size=1&name=end");
    let (s, _) = call(&app, "GET", "/nopes", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Kuma's `tag=` (fuzzy, any inbound) and `gateway=` on Dataplanes, paged after filtering.
    let (s, tagged) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes?tag=kuma.io/protocol:http&size=1",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{tagged}");
    assert_eq!(
        (
            tagged["total"].as_u64(),
            tagged["items"][0]["name"].as_str()
        ),
        (Some(2), Some("backend"))
    );
    assert_eq!(
        tagged["next"],
        "/meshes/default/dataplanes?offset=1&size=1&tag=kuma.io%2Fprotocol%3Ahttp"
    );
    let (_, fuzzy) = call(
        &app,
        "GET",
        "/dataplanes?tag=kuma.io/service:end_kuma&tag=kuma.io/protocol:",
        None,
    )
    .await;
    assert_eq!(
        (fuzzy["total"].as_u64(), fuzzy["items"][0]["name"].as_str()),
        (Some(2), Some("backend"))
    );
    let (_, gw) = call(&app, "GET", "/meshes/default/dataplanes?gateway=true", None).await;
    assert_eq!(gw["total"], 0);
    let (_, gw) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes?gateway=false",
        None,
    )
    .await;
    assert_eq!(gw["total"], 3);
    for (uri, field, rule) in [
        (
            "/meshes/default/dataplanes?tag=nocolon",
            "tag",
            json!("format"),
        ),
        (
            "/meshes/default/dataplanes?gateway=yes",
            "gateway",
            json!("enum"),
        ),
        ("/meshes/default/meshtimeouts?tag=a:b", "tag", Value::Null),
    ] {
        let (s, bad) = call(&app, "GET", uri, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {bad}");
        assert_eq!(bad["invalid_parameters"][0]["field"], field, "{uri}");
        assert_eq!(bad["invalid_parameters"][0]["rule"], rule, "{uri}: {bad}");
    }
}

#[tokio::test]
async fn dataplane_overviews_one_and_paged_lists_with_filters() {
    let app = loaded().await;
    let (s, one) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights/backend",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["type"], "DataplaneOverview");
    assert_eq!(
        (one["mesh"].as_str(), one["name"].as_str()),
        (Some("default"), Some("backend"))
    );
    assert!(one["creationTime"].is_string(), "{one}");
    assert_eq!(one["dataplane"]["networking"]["address"], "10.42.0.30");
    // Never connected: Umbra's fields say so, and there is no subscription.
    assert_eq!(one["dataplaneInsight"]["connected"], false);
    assert!(
        one["dataplaneInsight"].get("subscriptions").is_none(),
        "{one}"
    );
    let (s, _) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights/nope",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (s, page) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights?size=2",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 3);
    let names: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["backend", "frontend"]);
    assert_eq!(page["items"][0], one);
    assert_eq!(
        page["next"],
        "/meshes/default/dataplanes+insights?offset=2&size=2"
    );
    let (_, last) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes+insights?offset=2&size=2",
        None,
    )
    .await;
    assert_eq!(last["items"][0]["name"], "redis");
    assert!(last.get("next").is_none(), "{last}");
    let (_, tagged) = call(
        &app,
        "GET",
        "/dataplanes+insights?tag=kuma.io/protocol:http&name=end&size=1",
        None,
    )
    .await;
    assert_eq!(
        (
            tagged["total"].as_u64(),
            tagged["items"][0]["name"].as_str()
        ),
        (Some(2), Some("backend"))
    );
    assert_eq!(
        tagged["next"],
        "/dataplanes+insights?offset=1&size=1&tag=kuma.io%2Fprotocol%3Ahttp&name=end"
    );
    let (_, gw) = call(&app, "GET", "/dataplanes+insights?gateway=builtin", None).await;
    assert_eq!(gw["total"], 0);
    let (s, _) = call(&app, "GET", "/meshes/nope/dataplanes+insights", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, bad) = call(&app, "GET", "/dataplanes+insights?tag=x", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
}

#[tokio::test]
async fn federated_zones_refuse_policy_writes_but_accept_dataplanes() {
    let store = Store::new();
    store
        .put(
            Resource::from_bytes(
                b"type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
            )
            .unwrap(),
            None,
        )
        .unwrap();
    let app = router(AppState::new(store, true));
    let (s, body) = call(
        &app,
        "PUT",
        "/meshes/default",
        Some("type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n".into()),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("Global"));
    let dp = "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n";
    let (s, body) = call(
        &app,
        "PUT",
        "/meshes/default/dataplanes/web",
        Some(dp.into()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (s, _) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/t",
        Some("type: MeshTimeout\nmesh: default\nname: t\nspec: {targetRef: {kind: Mesh}}\n".into()),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}

/// `(status, ETag, body)` of a request with optional `If-Match`.
async fn call_versioned(
    app: &axum::Router,
    method: &str,
    uri: &str,
    if_match: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Option<String>, Value) {
    let headers: Vec<(&str, &str)> = if_match.map(|v| ("if-match", v)).into_iter().collect();
    let (status, body, etag) = umbra_api::testing::call(app, method, uri, &headers, body).await;
    (status, etag, body)
}

#[tokio::test]
async fn a_standalone_zone_checks_if_match_and_sends_etags() {
    let app = router(AppState::new(Store::new(), false));
    let (status, etag, _) = call_versioned(
        &app,
        "PUT",
        "/meshes/m",
        Some("0"),
        Some("type: Mesh\nname: m\nskipCreatingInitialPolicies: ['*']\n"),
    )
    .await;
    assert_eq!(
        (status, etag.as_deref()),
        (StatusCode::CREATED, Some("\"1\""))
    );
    let policy = |idle: &str| {
        format!("type: MeshTimeout\nmesh: m\nname: t\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {idle}}}\n")
    };
    let uri = "/meshes/m/meshtimeouts/t";
    let (status, etag, _) = call_versioned(&app, "PUT", uri, None, Some(&policy("1s"))).await;
    assert_eq!(
        (status, etag.as_deref()),
        (StatusCode::CREATED, Some("\"1\""))
    );
    let (status, etag, _) = call_versioned(&app, "GET", uri, None, None).await;
    assert_eq!((status, etag.as_deref()), (StatusCode::OK, Some("\"1\"")));

    // A stale version is refused and changes nothing.
    let (status, _, body) =
        call_versioned(&app, "PUT", uri, Some("\"7\""), Some(&policy("2s"))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (_, _, stored) = call_versioned(&app, "GET", uri, None, None).await;
    assert_eq!(stored["spec"]["to"][0]["default"]["idleTimeout"], "1s");

    // The current one is taken, and the answer carries the new version.
    let (status, etag, body) =
        call_versioned(&app, "PUT", uri, Some("\"1\""), Some(&policy("2s"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(etag.as_deref(), Some("\"2\""));
    assert_eq!(body["spec"]["to"][0]["default"]["idleTimeout"], "2s");

    // Deletes check it too.
    let (status, _, _) = call_versioned(&app, "DELETE", uri, Some("1"), None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _, _) = call_versioned(&app, "DELETE", uri, Some("2"), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = call_versioned(&app, "GET", uri, None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// MeshHTTPRoutes are generated (issue 16): `_rules` lists their rules and `httpMatches`,
/// `_config` carries their Envoy routes (a shadow route only in the shadow view, as a diff),
/// a MeshTimeout on a route is applied, and nothing is listed as not generated.
#[tokio::test]
async fn routes_are_generated_and_inspectable() {
    let app = loaded().await;
    let route = |name: &str, shadow: bool| {
        let labels = if shadow {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        format!("type: MeshHTTPRoute\nmesh: default\nname: {name}\n{labels}spec:\n  targetRef: {{kind: MeshService, name: frontend_kuma-demo_svc_8080}}\n  to:\n  - targetRef: {{kind: MeshService, name: backend_kuma-demo_svc_3001}}\n    rules:\n    - matches: [{{path: {{type: PathPrefix, value: /v2}}}}]\n      default: {{}}\n")
    };
    for (name, shadow) in [("live-route", false), ("shadow-route", true)] {
        let (s, b) = call(
            &app,
            "PUT",
            &format!("/meshes/default/meshhttproutes/{name}"),
            Some(route(name, shadow)),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let (s, b) = call(
        &app,
        "PUT",
        "/meshes/default/meshtimeouts/on-route",
        Some("type: MeshTimeout\nmesh: default\nname: on-route\nspec:\n  targetRef: {kind: MeshHTTPRoute, name: live-route}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {http: {requestTimeout: 2s}}\n".into()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let base = "/meshes/default/dataplanes/frontend";
    let v2 = umbra_core::policies::mesh_http_route::hash_matches(&[serde_json::from_value(
        json!({"path": {"value": "/v2", "type": "PathPrefix"}}),
    )
    .unwrap()]);
    let (s, rules) = call(&app, "GET", &format!("{base}/_rules"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(rules["notGenerated"], json!([]));
    assert_eq!(
        rules["httpMatches"],
        json!([{"hash": v2, "match": {"path": {"value": "/v2", "type": "PathPrefix"}}}])
    );
    let types: Vec<&str> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"MeshHTTPRoute"), "{types:?}");
    let routes = |doc: &Value| -> Vec<Value> {
        doc["type.googleapis.com/envoy.config.listener.v3.Listener"]["outbound:10.43.13.71:3001"]
            ["filterChains"][0]["filters"][0]["typedConfig"]["routeConfig"]["virtualHosts"][0]
            ["routes"]
            .as_array()
            .unwrap()
            .clone()
    };
    let (s, live) = call(&app, "GET", &format!("{base}/_config"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(live["notGenerated"], json!([]));
    let r = routes(&live["xds"]);
    // `/v2` (path and prefix routes, the MeshTimeout's 2s), then the catch-all.
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(r[0]["name"], v2.as_str());
    assert_eq!(r[0]["match"]["path"], "/v2");
    assert_eq!(r[1]["match"]["prefix"], "/v2/");
    assert_eq!(r[0]["route"]["timeout"], "2s");
    assert_eq!(r[2]["route"]["timeout"], "15s");
    let (_, shadow) = call(
        &app,
        "GET",
        &format!("{base}/_config?shadow=true&include=diff"),
        None,
    )
    .await;
    assert_eq!(shadow["notGenerated"], json!([]));
    // The shadow route has the same matches as the live one: merged, the shadow one (same
    // precedence, later name) only adds its origin; the config is unchanged.
    assert_eq!(routes(&shadow["xds"]).len(), 3);
}

/// Types Umbra stores but does not generate (issue 17) are named in every answer about a DPP
/// they concern, live or shadow, with the reason; `_rules` still computes their rules.
#[tokio::test]
async fn stored_only_types_are_named_as_not_generated() {
    let app = loaded().await;
    for (path, doc) in [
        ("meshmetrics/metrics-frontend", "type: MeshMetric\nmesh: default\nname: metrics-frontend\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: frontend_kuma-demo_svc_8080}\n  default: {sidecar: {includeUnused: true}}\n"),
        // Generated (issue 17): never listed.
        ("meshtraces/trace-frontend", "type: MeshTrace\nmesh: default\nname: trace-frontend\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: frontend_kuma-demo_svc_8080}\n  default: {backends: [{type: Zipkin, zipkin: {url: 'http://zipkin:9411/api/v2/spans'}}]}\n"),
        // Generated (issue 17): never listed.
        ("meshretries/retry-frontend", "type: MeshRetry\nmesh: default\nname: retry-frontend\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: frontend_kuma-demo_svc_8080}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {http: {numRetries: 3}}\n"),
        ("health-checks/hc", "type: HealthCheck\nmesh: default\nname: hc\nsources: [{match: {kuma.io/service: frontend_kuma-demo_svc_8080}}]\ndestinations: [{match: {kuma.io/service: backend_kuma-demo_svc_3001}}]\nconf: {interval: 10s, timeout: 2s, unhealthyThreshold: 3, healthyThreshold: 1}\n"),
        ("traffic-traces/tt", "type: TrafficTrace\nmesh: default\nname: tt\nselectors: [{match: {kuma.io/service: backend_kuma-demo_svc_3001}}]\nconf: {backend: zipkin}\n"),
        ("traffic-logs/tl", "type: TrafficLog\nmesh: default\nname: tl\nsources: [{match: {kuma.io/service: frontend_kuma-demo_svc_8080}}]\ndestinations: [{match: {kuma.io/service: backend_kuma-demo_svc_3001}}]\n"),
        // Generated (issue 37), but this one's CA Secret does not exist: it gives no endpoint.
        ("external-services/httpbin", "type: ExternalService\nmesh: default\nname: httpbin\ntags: {kuma.io/service: httpbin}\nnetworking: {address: 'httpbin.org:443', tls: {enabled: true, caCert: {secret: httpbin-ca}}}\n"),
        // Generated, and resolvable: never listed.
        ("external-services/example", "type: ExternalService\nmesh: default\nname: example\ntags: {kuma.io/service: example}\nnetworking: {address: 'example.com:443'}\n"),
    ] {
        let (s, b) = call(&app, "PUT", &format!("/meshes/default/{path}"), Some(doc.into())).await;
        assert_eq!(s, StatusCode::CREATED, "{path}: {b}");
    }
    let base = "/meshes/default/dataplanes/frontend";
    let listed = |body: &Value| -> Vec<String> {
        body["notGenerated"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                assert!(
                    n["reason"]
                        .as_str()
                        .unwrap()
                        .contains("not generated by Umbra"),
                    "{n}"
                );
                format!(
                    "{}/{}",
                    n["type"].as_str().unwrap(),
                    n["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (_, live) = call(&app, "GET", &format!("{base}/_config"), None).await;
    // The TrafficLog (no logging backend in the mesh: it logs nothing) is generated; the
    // TrafficTrace selects the backend DPP only.
    assert_eq!(listed(&live), ["ExternalService/httpbin"]);
    // The old HealthCheck is generated: on the backend cluster.
    assert!(
        live["xds"].to_string().contains("healthChecks"),
        "{}",
        live["xds"]
    );
    let (_, shadow) = call(
        &app,
        "GET",
        &format!("{base}/_config?shadow=true&include=diff"),
        None,
    )
    .await;
    // The shadow view adds the shadow MeshMetric.
    assert_eq!(
        listed(&shadow),
        ["ExternalService/httpbin", "MeshMetric/metrics-frontend"]
    );
    // The shadow MeshRetry is generated: it is in the diff, not in the list.
    assert!(
        shadow["diff"].to_string().contains("retryPolicy"),
        "{}",
        shadow["diff"]
    );
    let (_, rules) = call(&app, "GET", &format!("{base}/_rules?shadow=true"), None).await;
    assert!(listed(&rules).contains(&"MeshMetric/metrics-frontend".to_owned()));
    let metric = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "MeshMetric")
        .unwrap_or_else(|| panic!("{rules}"));
    assert_eq!(
        metric["proxyRule"]["conf"]["sidecar"]["includeUnused"],
        json!(true),
        "{metric}"
    );
    // The shadow MeshTrace is generated: its tracing is in the diff.
    assert!(
        shadow["diff"].to_string().contains("meshtrace:zipkin"),
        "{}",
        shadow["diff"]
    );
    // The backend DPP is selected by no stored-only policy; the TrafficTrace selecting it is
    // generated (its backend is not in this mesh's `tracing`, so it traces nothing).
    let (_, backend) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/backend/_config",
        None,
    )
    .await;
    assert_eq!(listed(&backend), ["ExternalService/httpbin"]);
    let (_, backend_shadow) = call(
        &app,
        "GET",
        "/meshes/default/dataplanes/backend/_config?shadow=true",
        None,
    )
    .await;
    assert_eq!(listed(&backend_shadow), ["ExternalService/httpbin"]);
}

#[tokio::test]
async fn zone_ingresses_register_here_and_only_this_zones() {
    let mut state = AppState::new(Store::new(), true);
    state.reconciler = std::sync::Arc::new(
        umbra_zone_cp::reconciler::Reconciler::new(state.store.clone()).with_zone("zone-1", true),
    );
    // Another zone's ingress, as synced from the Global: read-only here.
    let remote = Resource::from_bytes(b"type: ZoneIngress\nname: far-abc\nzone: zone-2\nnetworking: {address: 10.0.0.2, port: 10001}\n").unwrap();
    state.store.put_synced(remote).unwrap();
    let app = router(state);
    for method in ["DELETE", "PUT"] {
        let body = (method == "PUT").then(|| {
            json!({"type": "ZoneIngress", "name": "far-abc", "networking": {"address": "10.0.0.3", "port": 1}}).to_string()
        });
        let (status, body) = call(&app, method, "/zone-ingresses/far-abc", body).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}: {body}");
    }
    let zi = |name: &str, zone: &str| {
        json!({"type": "ZoneIngress", "name": name, "zone": zone,
               "networking": {"address": "10.0.0.1", "port": 10001}})
        .to_string()
    };
    // Federated or not, the zone registers its own ingresses (Kuma's path and its alias).
    let (status, body) = call(&app, "PUT", "/zone-ingresses/zi-1", Some(zi("zi-1", ""))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(
        &app,
        "PUT",
        "/zoneingresses/zi-2",
        Some(zi("zi-2", "zone-1")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Another zone's: refused with the field.
    let (status, body) = call(
        &app,
        "PUT",
        "/zone-ingresses/zi-3",
        Some(zi("zi-3", "zone-2")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["invalidParameters"][0]["field"], "zone", "{body}");
    // Kuma's validation.
    let bad = json!({"type": "ZoneIngress", "name": "zi-4", "networking": {"port": 0}}).to_string();
    let (status, body) = call(&app, "PUT", "/zone-ingresses/zi-4", Some(bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["invalidParameters"][0]["field"], "networking.port",
        "{body}"
    );
    let (status, list) = call(&app, "GET", "/zone-ingresses", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 3, "{list}");
    let (status, _) = call(&app, "DELETE", "/zoneingresses/zi-2", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&app, "GET", "/zone-ingresses/zi-2", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Its config, live (no meshes: it answers who it is).
    let (status, body) = call(
        &app,
        "GET",
        "/zone-ingresses/zi-1/_config?include=diff",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["diff"], json!([]));
    assert!(
        body["xds"].to_string().contains("direct_response"),
        "{body}"
    );
}

/// ZoneEgresses (Kuma's `zoneegresses`): written on a zone, federated or not, in universal or
/// Kubernetes form, validated with Kuma's messages, another zone's refused; their overviews
/// at Kuma's paths and `+insights`.
#[tokio::test]
async fn zone_egresses_register_here_with_kumas_validation_and_overviews() {
    let mut state = AppState::new(Store::new(), true);
    state.reconciler = std::sync::Arc::new(
        umbra_zone_cp::reconciler::Reconciler::new(state.store.clone()).with_zone("zone-1", true),
    );
    let app = router(state);
    let ze = |name: &str, zone: &str| {
        json!({"type": "ZoneEgress", "name": name, "zone": zone,
               "networking": {"address": "10.0.0.1", "port": 10002, "admin": {"port": 9902}}})
        .to_string()
    };
    let (status, body) = call(&app, "PUT", "/zoneegresses/ze-1", Some(ze("ze-1", ""))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(
        &app,
        "PUT",
        "/zoneegresses/ze-1",
        Some(ze("ze-1", "zone-1")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Kubernetes form (namespaced in kuma-system, as Kuma's CRD).
    let k8s = "apiVersion: kuma.io/v1alpha1\nkind: ZoneEgress\nmetadata:\n  name: ze-2\n  namespace: kuma-system\nspec:\n  networking: {address: 10.0.0.2, port: 10002}\n";
    let (status, body) = call(&app, "PUT", "/zoneegresses/ze-2", Some(k8s.into())).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(&app, "GET", "/zoneegresses/ze-2", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"type": "ZoneEgress", "name": "ze-2", "creationTime": body["creationTime"],
               "modificationTime": body["modificationTime"],
               "networking": {"address": "10.0.0.2", "port": 10002}})
    );
    // Another zone's: refused with the field.
    let (status, body) = call(
        &app,
        "PUT",
        "/zoneegresses/ze-3",
        Some(ze("ze-3", "zone-2")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["invalidParameters"][0]["field"], "zone", "{body}");
    // Kuma's validation (zone_egress_validator_test.go), every violation with its field.
    let bad = json!({"type": "ZoneEgress", "name": "ze-4",
                     "networking": {"address": "127.0.0.1", "port": 10001, "admin": {"port": 10001}}});
    let (status, body) = call(&app, "PUT", "/zoneegresses/ze-4", Some(bad.to_string())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["invalidParameters"],
        json!([{"field": "networking.admin.port", "reason": "must differ from port"}]),
        "{body}"
    );
    let bad = json!({"type": "ZoneEgress", "name": "ze-4", "networking": {"address": "0.0.0.0"}});
    let (status, body) = call(&app, "PUT", "/zoneegresses/ze-4", Some(bad.to_string())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let fields: Vec<&str> = body["invalidParameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["field"].as_str())
        .collect();
    assert_eq!(
        fields,
        ["networking.address.address", "networking.port"],
        "{body}"
    );
    let unknown = json!({"type": "ZoneEgress", "name": "ze-4", "networking": {"port": 1, "advertisedPort": 2}});
    let (status, body) = call(&app, "PUT", "/zoneegresses/ze-4", Some(unknown.to_string())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Not a ZoneIngress, and not under a mesh.
    let (status, body) = call(&app, "GET", "/zone-ingresses/ze-1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = call(&app, "GET", "/meshes/default/zoneegresses", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, list) = call(&app, "GET", "/zoneegresses?size=1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 2, "{list}");
    assert!(
        list["next"]
            .as_str()
            .unwrap()
            .starts_with("/zoneegresses?offset=1"),
        "{list}"
    );
    // Overviews: Kuma's ZoneEgressOverview, no insight until its Envoy connects.
    for path in [
        "/zoneegressoverviews/ze-1",
        "/zoneegresses/ze-1/_overview",
        "/zoneegresses+insights/ze-1",
    ] {
        let (status, o) = call(&app, "GET", path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {o}");
        assert_eq!(o["type"], "ZoneEgressOverview", "{path}");
        assert_eq!(o["name"], "ze-1");
        assert_eq!(o["zoneEgress"]["zone"], "zone-1");
        assert_eq!(o["zoneEgress"]["networking"]["admin"]["port"], 9902);
        assert!(o["zoneEgressInsight"].is_object(), "{o}");
    }
    for path in [
        "/zoneegressoverviews",
        "/zoneegresses/_overview",
        "/zoneegresses+insights",
    ] {
        let (status, page) = call(&app, "GET", &format!("{path}?name=ze-2"), None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {page}");
        assert_eq!(page["total"], 1, "{path}: {page}");
        assert_eq!(page["items"][0]["type"], "ZoneEgressOverview");
    }
    let (status, _) = call(&app, "GET", "/zoneegressoverviews/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Its Envoy admin views (Kuma's `inspectZoneEgressAdmin`): none connected yet.
    let (status, body) = call(&app, "GET", "/zoneegresses/ze-1/stats", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("zone egress"),
        "{body}"
    );
    let (status, _) = call(&app, "GET", "/zoneegresses/nope/xds", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The resource type list names it, writable on a zone.
    let (_, types) = call(&app, "GET", "/_resources", None).await;
    let ze_type = types["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ZoneEgress")
        .cloned()
        .unwrap();
    assert_eq!(ze_type["path"], "zoneegresses");
    assert_eq!(ze_type["readOnly"], false);
    let (status, _) = call(&app, "DELETE", "/zoneegresses/ze-2", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, "GET", "/zoneegresses/ze-2", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
