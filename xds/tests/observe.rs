//! Observe mode (issue 40): a shadow MeshTrafficPermission labelled `umbra.io/observe: "true"`
//! reaches the live proxies as RBAC `shadowRules` that enforce nothing, placed before the
//! enforcing filter; a Shadow view that promotes it enforces it and has no observer for it. The
//! observer's rules are exactly those a Shadow view promoting the observed policies (and no
//! other shadow policy) enforces, for HTTP and TCP inbounds; both views pass
//! `envoy --mode validate`; a view that leaves an observed policy shadow keeps observing it;
//! where nothing can observe it (no mTLS), the policy is listed as not generated.

use serde_json::{json, Value};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, Promotion, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, snapshot, with_test_secrets};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

const MTLS: &str =
    "mtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n";

fn mesh(observe: &str) -> Vec<Resource> {
    mesh_with(observe, MTLS)
}

fn mesh_with(observe: &str, mtls: &str) -> Vec<Resource> {
    let yaml = format!(
        r#"
type: Mesh
name: default
skipCreatingInitialPolicies: ["*"]
{mtls}---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {{kuma.io/service: web, kuma.io/protocol: http}}
---
type: Dataplane
mesh: default
name: db
networking:
  address: 10.0.0.2
  inbound:
  - port: 5432
    tags: {{kuma.io/service: db, kuma.io/protocol: tcp}}
---
type: Dataplane
mesh: default
name: other
networking:
  address: 10.0.0.3
  inbound:
  - port: 8080
    tags: {{kuma.io/service: other, kuma.io/protocol: http}}
---
type: MeshTrafficPermission
mesh: default
name: allow-all
spec:
  targetRef: {{kind: Mesh}}
  from:
  - targetRef: {{kind: Mesh}}
    default: {{action: Allow}}
---
type: MeshTrafficPermission
mesh: default
name: only-client-a
labels: {{kuma.io/effect: shadow{observe}}}
spec:
  targetRef: {{kind: MeshSubset, tags: {{kuma.io/service: web}}}}
  from:
  - targetRef: {{kind: Mesh}}
    default: {{action: Deny}}
  - targetRef: {{kind: MeshService, name: client-a}}
    default: {{action: Allow}}
---
type: MeshTrafficPermission
mesh: default
name: db-from-web
labels: {{kuma.io/effect: shadow{observe}}}
spec:
  targetRef: {{kind: MeshService, name: db}}
  from:
  - targetRef: {{kind: Mesh}}
    default: {{action: Deny}}
  - targetRef: {{kind: MeshService, name: web}}
    default: {{action: Allow}}
---
type: MeshTrafficPermission
mesh: default
name: allow-client-b
labels: {{kuma.io/effect: shadow}}
spec:
  targetRef: {{kind: MeshService, name: web}}
  from:
  - targetRef: {{kind: MeshService, name: client-b}}
    default: {{action: Allow}}
"#
    );
    let rs = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
    for r in &rs {
        assert!(!r.validate().has_violations(), "{}", r.meta.name);
    }
    rs
}

const OBSERVED: &str = ", umbra.io/observe: \"true\"";

fn doc(resources: &[Resource], dp: &str, view: View) -> (Snapshot, Value) {
    let snap = snapshot(resources, dp, view);
    let doc = snap.to_document().unwrap();
    (snap, doc)
}

/// The two observed policies promoted, the other shadow one left out.
fn observed_only() -> Promotion {
    Promotion::Set {
        promote: [
            (
                ResourceType::MeshTrafficPermission,
                "only-client-a".to_owned(),
            ),
            (
                ResourceType::MeshTrafficPermission,
                "db-from-web".to_owned(),
            ),
        ]
        .into(),
        retire: Default::default(),
    }
}

fn dataplane<'a>(resources: &'a [Resource], name: &str) -> &'a DataplaneSpec {
    resources
        .iter()
        .find(|r| r.meta.name == name)
        .and_then(Resource::as_dataplane)
        .unwrap()
}

/// DPP `dp`'s snapshot and document in the Shadow view of `promotion`.
fn promoted(resources: &[Resource], dp: &str, promotion: &Promotion) -> (Snapshot, Value) {
    let set = PolicySet::build_shadow("default", resources, promotion);
    let mesh = resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    let ctx = MeshContext::build(
        "default",
        &mesh,
        resources.iter().filter_map(Resource::as_dataplane),
    );
    let proxy = Proxy {
        name: dp,
        dataplane: dataplane(resources, dp),
        admin: None,
        dns: None,
    };
    let snap = generate(proxy, &ctx, &set).unwrap();
    let doc = snap.to_document().unwrap();
    (snap, doc)
}

fn http_filters<'a>(doc: &'a Value, listener: &str) -> &'a Vec<Value> {
    doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]["httpFilters"]
        .as_array()
        .unwrap()
}

fn network_filters<'a>(doc: &'a Value, listener: &str) -> &'a Vec<Value> {
    doc[LISTENER][listener]["filterChains"][0]["filters"]
        .as_array()
        .unwrap()
}

#[test]
fn an_observed_permission_is_shadow_rules_before_the_enforcing_filter() {
    let resources = mesh(OBSERVED);
    let listener = "inbound:10.0.0.1:80";
    let (live, live_doc) = doc(&resources, "web", View::Live);
    let (shadow, shadow_doc) = promoted(&resources, "web", &observed_only());
    let filters = http_filters(&live_doc, listener);
    assert_eq!(
        filters[0]["name"], "umbra.observe.http.rbac",
        "{filters:#?}"
    );
    let observer = &filters[0]["typedConfig"];
    assert!(
        observer.get("rules").is_none(),
        "enforces nothing: {observer:#}"
    );
    assert_eq!(
        observer["shadowRulesStatPrefix"],
        "umbra_observe.only-client-a."
    );
    // Then one filter per caller the rules name, counting that caller's would-be denials:
    // the would-be rules, plus a policy letting every other caller through.
    assert_eq!(filters[1]["name"], "umbra.observe.rbac.caller.client-a");
    let caller = &filters[1]["typedConfig"];
    assert!(
        caller.get("rules").is_none(),
        "enforces nothing: {caller:#}"
    );
    assert_eq!(
        caller["shadowRulesStatPrefix"],
        "umbra_observe_caller.client-a.only-client-a."
    );
    assert_eq!(
        caller["shadowRules"]["policies"]["MeshTrafficPermission"],
        observer["shadowRules"]["policies"]["MeshTrafficPermission"]
    );
    assert_eq!(
        caller["shadowRules"]["policies"]["umbra-other-callers"]["principals"],
        json!([{"notId": {"authenticated": {"principalName": {"exact": "spiffe://default/client-a"}}}}])
    );
    // The live rules are untouched: allow-all.
    assert_eq!(filters[2]["name"], "envoy.filters.http.rbac");
    assert_eq!(
        filters[2]["typedConfig"]["rules"]["policies"]["MeshTrafficPermission"]["principals"],
        json!([{"any": true}])
    );
    // The observer evaluates exactly what promoting the observed policies enforces; promoting
    // every shadow policy (`allow-client-b` too) enforces more.
    let enforced = http_filters(&shadow_doc, listener);
    assert_eq!(enforced[0]["name"], "envoy.filters.http.rbac");
    assert_eq!(observer["shadowRules"], enforced[0]["typedConfig"]["rules"]);
    assert_eq!(
        observer["shadowRules"]["policies"]["MeshTrafficPermission"]["principals"],
        json!([{"authenticated": {"principalName": {"exact": "spiffe://default/client-a"}}}])
    );
    assert!(
        enforced
            .iter()
            .all(|f| f["name"] != "umbra.observe.http.rbac"),
        "no observer in the Shadow view"
    );
    for s in [&live, &shadow] {
        envoy_validates(&with_test_secrets(s));
    }
}

#[test]
fn a_tcp_inbound_gets_a_network_observer() {
    let resources = mesh(OBSERVED);
    let listener = "inbound:10.0.0.2:5432";
    let (live, live_doc) = doc(&resources, "db", View::Live);
    let (_, shadow_doc) = promoted(&resources, "db", &observed_only());
    let filters = network_filters(&live_doc, listener);
    assert_eq!(
        filters[0]["name"], "umbra.observe.network.rbac",
        "{filters:#?}"
    );
    let observer = &filters[0]["typedConfig"];
    assert!(observer.get("rules").is_none());
    assert_eq!(
        observer["shadowRulesStatPrefix"],
        "umbra_observe.db-from-web."
    );
    assert_eq!(observer["statPrefix"], "inbound_10_0_0_2_5432.");
    assert_eq!(filters[1]["name"], "umbra.observe.rbac.caller.web");
    assert_eq!(
        filters[1]["typedConfig"]["shadowRulesStatPrefix"],
        "umbra_observe_caller.web.db-from-web."
    );
    assert_eq!(filters[2]["name"], "envoy.filters.network.rbac");
    let enforced = network_filters(&shadow_doc, listener);
    assert_eq!(observer["shadowRules"], enforced[0]["typedConfig"]["rules"]);
    envoy_validates(&with_test_secrets(&live));
}

#[test]
fn without_the_label_or_the_selection_nothing_reaches_a_proxy() {
    // Not observed: the shadow policies never reach a proxy (seed 000).
    let unobserved = mesh("");
    let (_, web) = doc(&unobserved, "web", View::Live);
    assert!(http_filters(&web, "inbound:10.0.0.1:80")
        .iter()
        .all(|f| f["name"] != "umbra.observe.http.rbac"));
    // Observed, but selecting another DPP: `other` is untouched, equal to its config with
    // no shadow policy at all.
    let observed = mesh(OBSERVED);
    let (_, other) = doc(&observed, "other", View::Live);
    let (_, other_unobserved) = doc(&unobserved, "other", View::Live);
    assert_eq!(other, other_unobserved);
}

/// The observed policies are inputs of the Live config: a DPP they select depends on them,
/// one they do not select does not.
#[test]
fn observed_policies_are_live_dependencies_of_the_dpps_they_select() {
    let resources = mesh(OBSERVED);
    let set = PolicySet::build("default", &resources, View::Live);
    let names = |dp: &str| -> Vec<String> {
        umbra_core::dependencies::dependencies(dataplane(&resources, dp), &set)
            .policies
            .iter()
            .map(|d| d.name.to_owned())
            .collect()
    };
    assert!(names("web").contains(&"only-client-a".to_owned()));
    assert!(!names("web").contains(&"db-from-web".to_owned()));
    assert!(names("db").contains(&"db-from-web".to_owned()));
    assert!(!names("other")
        .iter()
        .any(|n| n == "only-client-a" || n == "db-from-web"));
}

/// An observed policy in effect is another input than the same policy observed: the views of
/// `web` differ (the fleet diff asks for it), though both list the same policies.
#[test]
fn observing_and_enforcing_are_different_inputs() {
    let resources = mesh(OBSERVED);
    let live = PolicySet::build("default", &resources, View::Live);
    let shadow = PolicySet::build_shadow("default", &resources, &observed_only());
    let web = dataplane(&resources, "web");
    assert!(umbra_core::dependencies::views_differ(web, &live, &shadow));
    assert!(umbra_core::dependencies::selections_differ(
        web, &live, &shadow
    ));
    let other = dataplane(&resources, "other");
    assert!(!umbra_core::dependencies::views_differ(
        other, &live, &shadow
    ));
}

/// Promoting one observed policy keeps observing the other: `web`'s observer stays when only
/// `db-from-web` is promoted, and goes when `only-client-a` is.
#[test]
fn a_promotion_keeps_observing_what_it_leaves_shadow() {
    let resources = mesh(OBSERVED);
    let listener = "inbound:10.0.0.1:80";
    let only = |name: &str| Promotion::Only {
        ty: ResourceType::MeshTrafficPermission,
        name: name.to_owned(),
    };
    let (_, doc) = promoted(&resources, "web", &only("db-from-web"));
    assert_eq!(
        http_filters(&doc, listener)[0]["name"],
        "umbra.observe.http.rbac"
    );
    let (_, doc) = promoted(&resources, "web", &only("only-client-a"));
    assert!(http_filters(&doc, listener)
        .iter()
        .all(|f| f["name"] != "umbra.observe.http.rbac"));
}

/// Without mTLS no inbound has RBAC, so nothing observes the policy: it is listed as not
/// generated for the DPPs it selects (and only those), rather than silently ignored.
#[test]
fn without_mtls_an_observed_permission_is_not_generated() {
    let resources = mesh_with(OBSERVED, "");
    let live = PolicySet::build("default", &resources, View::Live);
    let listed = |dp: &str| -> Vec<String> {
        live.not_generated(dataplane(&resources, dp))
            .iter()
            .map(|n| serde_json::to_value(n).unwrap().to_string())
            .collect()
    };
    let web = listed("web");
    assert!(
        web.iter()
            .any(|n| n.contains("only-client-a") && n.contains("without mTLS")),
        "{web:?}"
    );
    assert!(listed("other").iter().all(|n| !n.contains("only-client-a")));
    // With mTLS it is rendered, so not listed.
    let with = PolicySet::build("default", &mesh(OBSERVED), View::Live);
    assert!(with.not_generated(dataplane(&resources, "web")).is_empty());
}

/// Stat prefixes name the observed policies joined by dots, each sanitized to
/// `[a-zA-Z0-9_-]`, so a reader splits them back unambiguously.
#[test]
fn stat_prefixes_split_back_into_the_policy_names() {
    use umbra_xds::plugins::traffic_permission::{observe_caller_stat_prefix, observe_stat_prefix};
    let set: std::collections::BTreeSet<&str> = ["b.policy", "a_policy"].into();
    assert_eq!(
        observe_stat_prefix(&set),
        "umbra_observe.a_policy.b_policy."
    );
    assert_eq!(
        observe_caller_stat_prefix("web_default_svc_80", &set),
        "umbra_observe_caller.web_default_svc_80.a_policy.b_policy."
    );
}

const OBSERVED_LIMIT: &str = r#"
type: MeshRateLimit
mesh: default
name: limit-web
labels: {kuma.io/effect: shadow, umbra.io/observe: "true"}
spec:
  targetRef: {kind: MeshService, name: web}
  from:
  - targetRef: {kind: Mesh}
    default:
      local:
        http:
          requestRate: {num: 5, interval: 1s}
          onRateLimit: {status: 429}
"#;

/// A shadow MeshRateLimit labelled observe (issue 40) reaches the live HTTP inbound as a local
/// rate limit filter of its own that counts and never enforces (`filterEnforced` 0%), with the
/// bucket the Shadow view enforces per route; the Shadow view has the enforcing per-route
/// limit and no observer; both views pass `envoy --mode validate`.
#[test]
fn an_observed_rate_limit_counts_and_enforces_nothing() {
    let mut resources = mesh(OBSERVED);
    let limit = Resource::from_bytes(OBSERVED_LIMIT.as_bytes()).unwrap();
    assert!(!limit.validate().has_violations(), "{}", limit.validate());
    resources.push(limit);
    let listener = "inbound:10.0.0.1:80";
    let (live, live_doc) = doc(&resources, "web", View::Live);
    let filters = http_filters(&live_doc, listener);
    let names: Vec<&str> = filters.iter().filter_map(|f| f["name"].as_str()).collect();
    let at = names
        .iter()
        .position(|n| *n == "umbra.observe.http.local_ratelimit")
        .unwrap_or_else(|| panic!("no rate-limit observer: {names:?}"));
    assert_eq!(names[at + 1], "envoy.filters.http.router", "{names:?}");
    let observer = &filters[at]["typedConfig"];
    assert_eq!(
        observer["statPrefix"],
        "inbound_10_0_0_1_80.umbra_observe_limit.limit-web"
    );
    // Proto3 JSON leaves a zero numerator out: 0 of 100 requests enforced.
    assert!(
        observer["filterEnforced"]["defaultValue"].is_object(),
        "{observer:#}"
    );
    assert_eq!(
        observer["filterEnforced"]["defaultValue"]["numerator"]
            .as_u64()
            .unwrap_or(0),
        0
    );
    assert_eq!(
        observer["filterEnabled"]["defaultValue"]["numerator"],
        json!(100)
    );
    // No route of the live config limits anything.
    let routes = &live_doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]
        ["routeConfig"]["virtualHosts"][0]["routes"];
    assert!(
        routes[0]["typedPerFilterConfig"]
            .get("envoy.filters.http.local_ratelimit")
            .is_none(),
        "{routes:#}"
    );
    // The Shadow view promoting it enforces the same bucket on the route, without observer.
    let only = Promotion::Only {
        ty: ResourceType::MeshRateLimit,
        name: "limit-web".to_owned(),
    };
    let (shadow, shadow_doc) = promoted(&resources, "web", &only);
    let enforced = &shadow_doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]
        ["routeConfig"]["virtualHosts"][0]["routes"][0]["typedPerFilterConfig"]
        ["envoy.filters.http.local_ratelimit"];
    assert_eq!(enforced["tokenBucket"], observer["tokenBucket"]);
    assert_eq!(
        enforced["filterEnforced"]["defaultValue"]["numerator"],
        json!(100)
    );
    assert!(http_filters(&shadow_doc, listener)
        .iter()
        .all(|f| f["name"] != "umbra.observe.http.local_ratelimit"));
    for s in [&live, &shadow] {
        envoy_validates(&with_test_secrets(s));
    }
    // It does not select `other`, whose config is untouched.
    let (_, other) = doc(&resources, "other", View::Live);
    assert!(http_filters(&other, "inbound:10.0.0.3:8080")
        .iter()
        .all(|f| f["name"] != "umbra.observe.http.local_ratelimit"));
}
