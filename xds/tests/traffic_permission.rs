//! TrafficPermission and MeshTrafficPermission (RBAC) as Kuma 2.7 generates them.
//!
//! - The transition seed's "TrafficPermission -> MeshTrafficPermission" example
//!   (000_c0dd8fb0a11dab1f.txt) on the kuma-demo topology with mTLS: the redis DPP's diff is
//!   exactly the seed's "policy rename", the frontend DPP's diff swaps the network RBAC for an
//!   HTTP RBAC before the router. Documents and diffs are golden, both views pass
//!   `envoy --mode validate` with the mesh's secrets resolved statically.
//! - Actions through the pipeline (Allow, Deny, AllowWithShadowDeny, negated subsets), the
//!   old-TrafficPermission fallback and the deny-all default.
//! - Principal mapping, ported from the cases of Kuma's `rbac_configurer_test.go` and
//!   `network_rbac_configurer.go`.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use umbra_core::old::Selector;
use umbra_core::resource::{Resource, Spec};
use umbra_core::rules::{Rule, Rules, Subset, Tag};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};
use umbra_xds::plugins::traffic_permission::{
    old_network_rbac, principal_from_selector, principal_from_subset, rbac_rules,
};
use umbra_xds::render::to_json;
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load, snapshot, with_test_secrets};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const NETWORK_RBAC: &str = "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC";
const HTTP_RBAC: &str = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";

fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// JSON Pointer of a listener in a config document.
fn listener_path(name: &str) -> String {
    format!("/{}/{}", escape(LISTENER), escape(name))
}

fn filters<'a>(doc: &'a Value, listener: &str) -> &'a Value {
    &doc[LISTENER][listener]["filterChains"][0]["filters"]
}

/// Validate `snap` with Envoy, its SDS references resolved to the test secrets.
fn envoy_validates_with_mtls(snap: &Snapshot) {
    let bootstrap = with_test_secrets(snap).to_static_bootstrap().unwrap();
    assert!(
        bootstrap
            .to_string()
            .contains("envoy.transport_sockets.tls"),
        "mTLS is on"
    );
    envoy_validates(snap);
}

fn spiffe(service: &str) -> Value {
    json!({"authenticated": {"principalName": {"exact": format!("spiffe://default/{service}")}}})
}

fn sorted_ops(patch: &Value) -> Vec<Value> {
    let mut ops = patch.as_array().unwrap().clone();
    ops.sort_by_key(|op| op["path"].as_str().unwrap().to_owned());
    ops
}

#[test]
fn redis_diff_is_the_seeds_policy_rename() {
    let resources = load("traffic-permissions.yaml");
    let live = snapshot(&resources, "redis", View::Live);
    let shadow = snapshot(&resources, "redis", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = serde_json::to_value(diff(&live_doc, &shadow_doc)).unwrap();
    golden("traffic-permissions.redis.live.json", &live_doc);
    golden("traffic-permissions.redis.shadow-diff.json", &patch);

    let listener = "inbound:10.42.0.28:6379";
    // Live: the old TrafficPermission `on-redis`, one principal per source, in source order.
    assert_eq!(
        filters(&live_doc, listener)[0],
        json!({
            "name": "envoy.filters.network.rbac",
            "typedConfig": {
                "@type": NETWORK_RBAC,
                "rules": {"policies": {"on-redis": {
                    "permissions": [{"any": true}],
                    "principals": [spiffe("frontend_kuma-demo_svc_8080"), spiffe("backend_kuma-demo_svc_3001")],
                }}},
                "statPrefix": "inbound_10_42_0_28_6379.",
            },
        })
    );
    // The seed's two operations (its `remove` names the policy of the user's cluster,
    // `backend-to-httpbin-…`; here the TrafficPermission is `on-redis`).
    let policies = format!(
        "{}/filterChains/0/filters/0/typedConfig/rules/policies",
        listener_path(listener)
    );
    assert_eq!(
        sorted_ops(&patch),
        [
            json!({
                "op": "add",
                "path": format!("{policies}/MeshTrafficPermission"),
                "value": {
                    "permissions": [{"any": true}],
                    "principals": [spiffe("backend_kuma-demo_svc_3001"), spiffe("frontend_kuma-demo_svc_8080")],
                },
            }),
            json!({"op": "remove", "path": format!("{policies}/on-redis")}),
        ],
        "diff was {}",
        serde_json::to_string_pretty(&patch).unwrap()
    );
    assert_eq!(
        apply(&live_doc, &diff(&live_doc, &shadow_doc)).unwrap(),
        shadow_doc
    );

    envoy_validates_with_mtls(&live);
    envoy_validates_with_mtls(&shadow);
}

#[test]
fn frontend_diff_moves_rbac_into_the_http_connection_manager() {
    let resources = load("traffic-permissions.yaml");
    let live = snapshot(&resources, "frontend", View::Live);
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    let patch = serde_json::to_value(&patch).unwrap();
    golden("traffic-permissions.frontend.live.json", &live_doc);
    golden("traffic-permissions.frontend.shadow-diff.json", &patch);

    let listener = "inbound:10.42.0.29:8080";
    // Only the inbound's filters change (the seed replaces them as a whole; json-patch's diff
    // is finer, the result is the same).
    let prefix = format!("{}/filterChains/0/filters", listener_path(listener));
    for op in patch.as_array().unwrap() {
        let path = op["path"].as_str().unwrap();
        assert!(path.starts_with(&prefix), "unexpected change at {path}");
    }
    // Live: the network RBAC of the TrafficPermission `on-frontend` (source `*`) first.
    let live_filters = filters(&live_doc, listener).as_array().unwrap();
    assert_eq!(live_filters.len(), 2);
    assert_eq!(
        live_filters[0],
        json!({
            "name": "envoy.filters.network.rbac",
            "typedConfig": {
                "@type": NETWORK_RBAC,
                "rules": {"policies": {"on-frontend": {
                    "permissions": [{"any": true}],
                    "principals": [{"any": true}],
                }}},
                "statPrefix": "inbound_10_42_0_29_8080.",
            },
        })
    );
    // Shadow: the seed's value, except the fields MeshTimeout sets there (this scenario has no
    // MeshTimeout): `commonHttpProtocolOptions.idleTimeout` keeps the generator's 7200s, and
    // `requestHeadersTimeout` and the route's `idleTimeout` are absent.
    assert_eq!(
        filters(&shadow_doc, listener),
        &json!([{
            "name": "envoy.filters.network.http_connection_manager",
            "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "commonHttpProtocolOptions": {"idleTimeout": "7200s"},
                "forwardClientCertDetails": "SANITIZE_SET",
                "httpFilters": [
                    {
                        "name": "envoy.filters.http.rbac",
                        "typedConfig": {
                            "@type": HTTP_RBAC,
                            "rules": {"policies": {"MeshTrafficPermission": {
                                "permissions": [{"any": true}],
                                "principals": [{"any": true}],
                            }}},
                        },
                    },
                    {
                        "name": "envoy.filters.http.router",
                        "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                    },
                ],
                "routeConfig": {
                    "name": "inbound:frontend_kuma-demo_svc_8080",
                    "requestHeadersToRemove": ["x-kuma-tags"],
                    "validateClusters": false,
                    "virtualHosts": [{
                        "domains": ["*"],
                        "name": "frontend_kuma-demo_svc_8080",
                        "routes": [{
                            "match": {"prefix": "/"},
                            "route": {"cluster": "localhost:8080", "timeout": "0s"},
                        }],
                    }],
                },
                "setCurrentClientCertDetails": {"uri": true},
                "statPrefix": "localhost_8080",
                "streamIdleTimeout": "3600s",
            },
        }])
    );
    // The HCM itself is untouched apart from the new first HTTP filter.
    let mut expected_hcm = live_filters[1].clone();
    let http_filters = expected_hcm["typedConfig"]["httpFilters"]
        .as_array_mut()
        .unwrap();
    http_filters.insert(
        0,
        filters(&shadow_doc, listener)[0]["typedConfig"]["httpFilters"][0].clone(),
    );
    assert_eq!(filters(&shadow_doc, listener)[0], expected_hcm);

    envoy_validates_with_mtls(&live);
    envoy_validates_with_mtls(&shadow);
}

#[test]
fn backend_without_any_permission_is_denied_in_both_views() {
    // No TrafficPermission selects the backend and no MeshTrafficPermission either: the plugin's
    // deny-all default replaces the old (equally empty) network RBAC in both views.
    let resources = load("traffic-permissions.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    let shadow = snapshot(&resources, "backend", View::Shadow);
    let live_doc = live.to_document().unwrap();
    assert_eq!(live_doc, shadow.to_document().unwrap());
    let f = filters(&live_doc, "inbound:10.42.0.30:3001");
    assert_eq!(f.as_array().unwrap().len(), 1, "no network RBAC left: {f}");
    assert_eq!(
        f[0]["typedConfig"]["httpFilters"][0],
        json!({"name": "envoy.filters.http.rbac", "typedConfig": {"@type": HTTP_RBAC, "rules": {}}})
    );
    envoy_validates_with_mtls(&live);
}

#[test]
fn no_rbac_without_mtls() {
    let mut resources = load("traffic-permissions.yaml");
    for r in &mut resources {
        if let Spec::Mesh(m) = &mut r.spec {
            m.mtls = None;
        }
    }
    for dp in ["frontend", "redis", "backend"] {
        for view in [View::Live, View::Shadow] {
            let doc = snapshot(&resources, dp, view).to_document().unwrap();
            let text = doc.to_string();
            assert!(!text.contains("rbac"), "{dp} {view:?}: {text}");
            assert!(!text.contains("transport_sockets.tls"), "{dp} {view:?}");
        }
    }
}

#[test]
fn actions_negations_and_fallbacks() {
    let resources = load("traffic-permissions-actions.yaml");
    let web = snapshot(&resources, "web", View::Live);
    let db = snapshot(&resources, "db", View::Live);
    let web_doc = web.to_document().unwrap();
    let db_doc = db.to_document().unwrap();
    let got = json!({
        "web inbound:10.0.0.1:8080": filters(&web_doc, "inbound:10.0.0.1:8080"),
        "web inbound:10.0.0.1:9000": filters(&web_doc, "inbound:10.0.0.1:9000"),
        "db inbound:10.0.0.2:5432": filters(&db_doc, "inbound:10.0.0.2:5432"),
    });
    golden("traffic-permissions-actions.filters.json", &got);

    // web:8080, selected by the MeshTrafficPermission: HTTP RBAC, no network RBAC left.
    let web_http = filters(&web_doc, "inbound:10.0.0.1:8080");
    assert_eq!(web_http.as_array().unwrap().len(), 1);
    let rbac = &web_http[0]["typedConfig"]["httpFilters"][0];
    assert_eq!(rbac["name"], "envoy.filters.http.rbac");
    let rbac = &rbac["typedConfig"];
    // Rule building with negations splits the clique {frontend, version=v2} into its four
    // combinations: frontend∧v2 is denied (left out), frontend∧¬v2 allowed, and the two
    // ¬frontend ones keep the Mesh item's AllowWithShadowDeny.
    let not = |p: Value| json!({ "notId": p });
    let v2 = exact("kuma://version/v2");
    let and = |a: Value, b: Value| json!({"andIds": {"ids": [a, b]}});
    let frontend_not_v2 = and(spiffe("frontend"), not(v2.clone()));
    let shadow_denied = [
        and(not(spiffe("frontend")), v2.clone()),
        and(not(spiffe("frontend")), not(v2)),
    ];
    assert_eq!(
        rbac["rules"],
        json!({"policies": {"MeshTrafficPermission": {
            "permissions": [{"any": true}],
            "principals": [frontend_not_v2, shadow_denied[0], shadow_denied[1]],
        }}})
    );
    assert_eq!(
        rbac["shadowRules"],
        json!({"action": "DENY", "policies": {"MeshTrafficPermission": {
            "permissions": [{"any": true}],
            "principals": shadow_denied,
        }}})
    );

    // web:9000, not selected: the DPP has a TrafficPermission match, so the old RBAC stays.
    assert_eq!(
        filters(&web_doc, "inbound:10.0.0.1:9000")[0]["typedConfig"],
        json!({
            "@type": NETWORK_RBAC,
            "rules": {"policies": {"admin-from-ops": {
                "permissions": [{"any": true}],
                "principals": [{"andIds": {"ids": [
                    {"authenticated": {"principalName": {"exact": "kuma://team/sre"}}},
                    spiffe("ops"),
                ]}}],
            }}},
            "statPrefix": "inbound_10_0_0_1_9000.",
        })
    );

    // db: neither policy kind: deny all, as a network RBAC (TCP).
    assert_eq!(
        filters(&db_doc, "inbound:10.0.0.2:5432")[0]["typedConfig"],
        json!({"@type": NETWORK_RBAC, "rules": {}, "statPrefix": "inbound_10_0_0_2_5432."})
    );

    envoy_validates_with_mtls(&web);
    envoy_validates_with_mtls(&db);
}

// ---- principal mapping (the cases of Kuma's rbac_configurer_test.go) ----

fn rule(tags: &[(&str, &str, bool)], action: &str) -> Rule {
    Rule {
        subset: Subset(
            tags.iter()
                .map(|(k, v, not)| {
                    if *not {
                        Tag::ne(*k, *v)
                    } else {
                        Tag::eq(*k, *v)
                    }
                })
                .collect(),
        ),
        conf: json!({ "action": action }),
        origin: Vec::new(),
    }
}

/// `{rules, shadowRules?}` as proto3 JSON.
fn rendered(rules: Vec<Rule>, mesh: &str) -> Value {
    let built = rbac_rules(&Rules(rules), mesh).unwrap();
    let mut out = json!({ "rules": to_json(&built.rules).unwrap() });
    if let Some(s) = &built.shadow_rules {
        out["shadowRules"] = to_json(s).unwrap();
    }
    out
}

fn mtp(principals: Value) -> Value {
    json!({"policies": {"MeshTrafficPermission": {"permissions": [{"any": true}], "principals": principals}}})
}

fn exact(s: &str) -> Value {
    json!({"authenticated": {"principalName": {"exact": s}}})
}

#[test]
fn allow_all_and_deny_all() {
    assert_eq!(
        rendered(vec![rule(&[], "Allow")], "m"),
        json!({"rules": mtp(json!([{"any": true}]))})
    );
    assert_eq!(rendered(vec![rule(&[], "Deny")], "m"), json!({"rules": {}}));
    assert_eq!(rendered(vec![], "m"), json!({"rules": {}}));
    // An action Kuma does not know grants nothing, like Deny.
    assert_eq!(
        rendered(vec![rule(&[], "Maybe")], "m"),
        json!({"rules": {}})
    );
}

#[test]
fn services_and_other_tags_combine_with_and_ids() {
    let got = rendered(
        vec![
            rule(
                &[
                    ("kuma.io/service", "backend", false),
                    ("version", "v1", false),
                ],
                "Allow",
            ),
            rule(
                &[
                    ("kuma.io/service", "web", false),
                    ("kuma.io/zone", "us-east", false),
                ],
                "Allow",
            ),
        ],
        "allow_2_service_mesh",
    );
    assert_eq!(
        got,
        json!({"rules": mtp(json!([
            {"andIds": {"ids": [exact("spiffe://allow_2_service_mesh/backend"), exact("kuma://version/v1")]}},
            {"andIds": {"ids": [exact("spiffe://allow_2_service_mesh/web"), exact("kuma://kuma.io/zone/us-east")]}},
        ]))})
    );
}

#[test]
fn negations_wrap_in_not_id() {
    let got = rendered(
        vec![rule(
            &[
                ("kuma.io/service", "backend", false),
                ("version", "v2", true),
            ],
            "Allow",
        )],
        "mesh",
    );
    assert_eq!(
        got,
        json!({"rules": mtp(json!([{"andIds": {"ids": [
            exact("spiffe://mesh/backend"),
            {"notId": exact("kuma://version/v2")},
        ]}}]))})
    );
    let got = rendered(
        vec![rule(
            &[
                ("kuma.io/service", "backend", true),
                ("version", "v2", false),
            ],
            "Allow",
        )],
        "mesh",
    );
    assert_eq!(
        got,
        json!({"rules": mtp(json!([{"andIds": {"ids": [
            {"notId": exact("spiffe://mesh/backend")},
            exact("kuma://version/v2"),
        ]}}]))})
    );
    // A single negated tag is the notId itself.
    let p = principal_from_subset(&Subset(vec![Tag::ne("kuma.io/service", "a")]), "m");
    assert_eq!(
        to_json(&p).unwrap(),
        json!({"notId": exact("spiffe://m/a")})
    );
}

#[test]
fn shadow_deny_is_allowed_and_shadow_denied() {
    let got = rendered(
        vec![rule(
            &[("kuma.io/service", "backend", false)],
            "AllowWithShadowDeny",
        )],
        "shadow_deny_mesh",
    );
    let backend = exact("spiffe://shadow_deny_mesh/backend");
    assert_eq!(
        got,
        json!({
            "rules": mtp(json!([backend])),
            "shadowRules": {"action": "DENY", "policies": {"MeshTrafficPermission": {
                "permissions": [{"any": true}], "principals": [backend],
            }}},
        })
    );
    // Allow principals come first, then the shadow-denied ones; Deny adds nothing.
    let got = rendered(
        vec![
            rule(&[("kuma.io/service", "a", false)], "AllowWithShadowDeny"),
            rule(&[("kuma.io/service", "b", false)], "Deny"),
            rule(&[("kuma.io/service", "c", false)], "Allow"),
        ],
        "m",
    );
    assert_eq!(
        got["rules"],
        mtp(json!([exact("spiffe://m/c"), exact("spiffe://m/a")]))
    );
    assert_eq!(
        got["shadowRules"]["policies"]["MeshTrafficPermission"]["principals"],
        json!([exact("spiffe://m/a")])
    );
}

#[test]
fn invalid_rule_conf_is_an_error_naming_the_policy() {
    let err = rbac_rules(&Rules(vec![rule(&[], "Allow")]), "m");
    assert!(err.is_ok());
    let mut bad = rule(&[], "Allow");
    bad.conf = json!({"action": 5});
    let err = rbac_rules(&Rules(vec![bad]), "m").unwrap_err();
    assert!(err.to_string().contains("MeshTrafficPermission"), "{err}");
}

fn selector(tags: &[(&str, &str)]) -> Selector {
    Selector {
        match_tags: tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[test]
fn traffic_permission_selector_principals() {
    let p = |tags: &[(&str, &str)]| {
        to_json(&principal_from_selector(&selector(tags), "default")).unwrap()
    };
    assert_eq!(p(&[("kuma.io/service", "*")]), json!({"any": true}));
    assert_eq!(
        p(&[("kuma.io/service", "web")]),
        exact("spiffe://default/web")
    );
    // Other tags become kuma:// identities (sorted by name), `*` values are skipped, the
    // service identity comes last.
    assert_eq!(
        p(&[
            ("kuma.io/service", "web"),
            ("version", "v1"),
            ("env", "*"),
            ("kuma.io/zone", "east"),
        ]),
        json!({"andIds": {"ids": [
            exact("kuma://kuma.io/zone/east"),
            exact("kuma://version/v1"),
            exact("spiffe://default/web"),
        ]}})
    );
    assert_eq!(p(&[("version", "v1")]), exact("kuma://version/v1"));
    assert_eq!(
        p(&[("version", "*"), ("kuma.io/service", "*")]),
        json!({"any": true})
    );
}

#[test]
fn old_rbac_without_traffic_permission_denies_all() {
    assert_eq!(
        to_json(&old_network_rbac("inbound:10.0.0.1:80", None)).unwrap(),
        json!({"rules": {}, "statPrefix": "inbound_10_0_0_1_80."})
    );
    let tp: Vec<Resource> = Resource::all_from_bytes(
        b"type: TrafficPermission\nmesh: demo\nname: tp-1\nsources:\n- match: {kuma.io/service: a}\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: b}\n",
    )
    .unwrap();
    assert_eq!(
        to_json(&old_network_rbac("inbound:[fd00::1]:80", tp.first())).unwrap(),
        json!({
            "rules": {"policies": {"tp-1": {
                "permissions": [{"any": true}],
                "principals": [exact("spiffe://demo/a"), {"any": true}],
            }}},
            "statPrefix": "inbound__fd00__1__80.",
        })
    );
}
