//! The zone's inspect answers validate against Kuma 2.7.29's published schemas (issue 20):
//! `_rules` (live, and `shadow=true&include=diff`) of a DPP selected by several policy types
//! is an `InspectRules`, with Kuma's `proxyRule`, `fromRules[].inbound.{tags,port}` and one
//! `httpMatches` entry per match. `_config` (`shadow=true&include=diff`) is an
//! `InspectDataplanesConfig` but for its diff operations, which stay RFC 6902 (`replace`, and
//! `remove` without `value`) as transition seed 000 shows them, where Kuma's `JsonPatchItem`
//! allows only `add`/`remove`/`test`, each with a `value` (documented in `openapi.yaml`).

use axum::http::StatusCode;
use serde_json::{json, Value};
use umbra_api::testing::call;
use umbra_api::testing::kuma_schema::assert_valid;
use umbra_core::resource::{Resource, ResourceType};
use umbra_zone_cp::api::{router, AppState};
use umbra_zone_cp::store::Store;

/// The seed's kuma-demo scenario (old Timeouts live, MeshTimeouts shadow), plus a live
/// MeshHTTPRoute with two matches in one rule, a live MeshRetry, a shadow MeshMetric (a proxy
/// rule) and a shadow MeshTrafficPermission (from rules).
async fn loaded() -> axum::Router {
    let app = router(AppState::new(Store::new(), false));
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../xds/tests/data/timeouts.yaml"
    ))
    .unwrap();
    let mut uris = Vec::new();
    for r in Resource::all_from_bytes(yaml.as_bytes()).unwrap() {
        let uri = if r.ty() == ResourceType::Mesh {
            format!("/meshes/{}", r.meta.name)
        } else {
            format!(
                "/meshes/{}/{}/{}",
                r.meta.mesh,
                r.ty().plural(),
                r.meta.name
            )
        };
        uris.push((uri, r.to_value().to_string()));
    }
    let svc = "{kind: MeshService, name: frontend_kuma-demo_svc_8080}";
    for (path, doc) in [
        ("meshhttproutes/route", format!("type: MeshHTTPRoute\nmesh: default\nname: route\nspec:\n  targetRef: {svc}\n  to:\n  - targetRef: {{kind: MeshService, name: backend_kuma-demo_svc_3001}}\n    rules:\n    - matches: [{{path: {{type: PathPrefix, value: /v2}}}}, {{method: GET}}]\n      default: {{}}\n")),
        ("meshretries/retry", format!("type: MeshRetry\nmesh: default\nname: retry\nspec:\n  targetRef: {svc}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{http: {{numRetries: 3}}}}\n")),
        ("meshmetrics/metrics", format!("type: MeshMetric\nmesh: default\nname: metrics\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {svc}\n  default: {{sidecar: {{includeUnused: true}}}}\n")),
        ("meshtrafficpermissions/mtp", format!("type: MeshTrafficPermission\nmesh: default\nname: mtp\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {svc}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default: {{action: Allow}}\n")),
    ] {
        uris.push((format!("/meshes/default/{path}"), doc));
    }
    for (uri, body) in uris {
        let (status, b, _) = call(&app, "PUT", &uri, &[], Some(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{uri}: {b}");
    }
    app
}

fn entry<'a>(answer: &'a Value, ty: &str) -> &'a Value {
    answer["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {answer}"))
}

#[tokio::test]
async fn rules_validate_against_kumas_inspect_rules() {
    let app = loaded().await;
    let base = "/meshes/default/dataplanes/frontend/_rules";
    let (s, live, _) = call(&app, "GET", base, &[], None).await;
    assert_eq!(s, StatusCode::OK, "{live}");
    assert_valid("InspectRules", &live);
    let (s, shadow, _) = call(
        &app,
        "GET",
        &format!("{base}?shadow=true&include=diff"),
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{shadow}");
    assert_valid("InspectRules", &shadow);
    assert!(!shadow["diff"].as_array().unwrap().is_empty(), "{shadow}");

    // Kuma's shape, beyond what the schema requires.
    for answer in [&live, &shadow] {
        for e in answer["rules"].as_array().unwrap() {
            assert!(e.get("proxyRules").is_none(), "{e}");
            assert!(e["warnings"].is_array(), "{e}");
            let empty = e["toRules"].as_array().unwrap().is_empty()
                && e["fromRules"].as_array().unwrap().is_empty()
                && e.get("proxyRule").is_none();
            assert!(!empty, "a type with no rule is not listed: {e}");
        }
    }
    let types = |a: &Value| -> Vec<String> {
        a["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["type"].as_str().unwrap().to_owned())
            .collect()
    };
    for ty in ["MeshHTTPRoute", "MeshRetry"] {
        assert!(types(&live).contains(&ty.to_owned()), "{live}");
    }
    for ty in [
        "MeshHTTPRoute",
        "MeshRetry",
        "MeshTimeout",
        "MeshMetric",
        "MeshTrafficPermission",
    ] {
        assert!(types(&shadow).contains(&ty.to_owned()), "{shadow}");
    }
    assert_eq!(
        entry(&shadow, "MeshMetric")["proxyRule"],
        json!({"conf": {"sidecar": {"includeUnused": true}},
            "origin": [{"type": "MeshMetric", "mesh": "default", "name": "metrics"}]})
    );
    let from = &entry(&shadow, "MeshTrafficPermission")["fromRules"][0];
    assert_eq!(
        from["inbound"],
        json!({"tags": {"kuma.io/service": "frontend_kuma-demo_svc_8080", "kuma.io/protocol": "http"},
            "port": 8080, "address": "10.42.0.29"})
    );
    // One httpMatches entry per match of the rule, both under the rule's hash.
    let hash = entry(&live, "MeshHTTPRoute")["toRules"][0]["conf"]["rules"][0]["matches"].clone();
    let typed: Vec<umbra_core::policies::mesh_http_route::Match> =
        serde_json::from_value(hash.clone()).unwrap();
    let h = umbra_core::policies::mesh_http_route::hash_matches(&typed);
    assert_eq!(
        live["httpMatches"],
        json!([{"hash": h, "match": hash[0]}, {"hash": h, "match": hash[1]}])
    );
    // The diff is still an RFC 6902 patch from the live rules to the shadow ones.
    let patch: json_patch::Patch = serde_json::from_value(shadow["diff"].clone()).unwrap();
    let mut doc = live["rules"].clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(doc, shadow["rules"]);
}

#[tokio::test]
async fn config_validates_against_kumas_inspect_dataplanes_config_but_for_the_seeds_diff_ops() {
    let app = loaded().await;
    let base = "/meshes/default/dataplanes/frontend/_config";
    for query in ["", "?include=diff", "?shadow=true"] {
        let (s, answer, _) = call(&app, "GET", &format!("{base}{query}"), &[], None).await;
        assert_eq!(s, StatusCode::OK, "{query}: {answer}");
        assert_valid("InspectDataplanesConfig", &answer);
        assert!(answer["xds"].is_object(), "{answer}");
    }
    let (s, shadow, _) = call(
        &app,
        "GET",
        &format!("{base}?shadow=true&include=diff"),
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{shadow}");
    let diff = shadow["diff"].as_array().unwrap().clone();
    assert!(!diff.is_empty(), "{shadow}");
    // Everything but the diff validates as Kuma publishes it...
    let mut without_diff = shadow.clone();
    without_diff.as_object_mut().unwrap().remove("diff");
    assert_valid("InspectDataplanesConfig", &without_diff);
    // ...and the diff's only departures from Kuma's JsonPatchItem are the seed's RFC 6902 ops:
    // `replace`, and `remove` without a value.
    let departures =
        umbra_api::testing::kuma_schema::violations("InspectDataplanesConfig", &shadow);
    assert!(
        !departures.is_empty(),
        "the seed scenario's diff has replace ops"
    );
    for line in departures {
        let index: usize = line
            .strip_prefix("\"/diff/")
            .and_then(|rest| rest.split(['/', '"']).next())
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("not a diff item: {line}"));
        let op = &diff[index];
        let seed_form =
            op["op"] == "replace" || (op["op"] == "remove" && op.get("value").is_none());
        assert!(seed_form, "{line}: {op}");
    }
    for op in &diff {
        let name = op["op"].as_str().unwrap();
        assert!(["add", "remove", "replace"].contains(&name), "{op}");
        assert!(op["path"].is_string(), "{op}");
        assert_eq!(op.get("value").is_some(), name != "remove", "{op}");
    }
    // It is the RFC 6902 patch from the live config to the shadow one.
    let (_, live, _) = call(&app, "GET", base, &[], None).await;
    let patch: json_patch::Patch = serde_json::from_value(shadow["diff"].clone()).unwrap();
    let mut doc = live["xds"].clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(doc, shadow["xds"]);
}
