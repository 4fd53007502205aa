//! The transition seed's kuma-demo scenario end to end through umbra-core: decode and validate
//! every resource, round-trip them losslessly, then check what the Live and Shadow views give the
//! frontend and redis DPPs (old Timeouts live, MeshTimeouts shadow; the old-vs-new rule).

use serde_json::json;
use umbra_core::old_matching::{
    select_inbound_connection_policies, select_outbound_connection_policies, OldPolicyRef,
};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::rules::Element;
use umbra_core::target_ref::SERVICE_TAG;
use umbra_core::view::{PolicySet, View};

fn load() -> Vec<Resource> {
    Resource::all_from_bytes(include_bytes!("data/kuma-demo.yaml")).expect("kuma-demo.yaml decodes")
}

fn dp<'a>(all: &'a [Resource], name: &str) -> &'a umbra_core::dataplane::DataplaneSpec {
    all.iter()
        .find(|r| r.meta.name == name)
        .and_then(Resource::as_dataplane)
        .unwrap()
}

fn service(s: &str) -> Element {
    Element::from([(SERVICE_TAG.to_owned(), s.to_owned())])
}

#[test]
fn every_resource_is_valid_and_round_trips() {
    let docs = umbra_core::codec::decode_documents(
        include_bytes!("data/kuma-demo.yaml"),
        Default::default(),
    )
    .unwrap();
    let all = load();
    assert_eq!(docs.len(), all.len());
    for (doc, r) in docs.iter().zip(&all) {
        let v = r.validate();
        assert!(!v.has_violations(), "{}: {v}", r.key());
        assert_eq!(&r.to_value(), doc, "{} does not round-trip", r.key());
    }
}

#[test]
fn shadow_view_gives_the_mesh_timeouts_per_destination() {
    let all = load();
    let frontend = dp(&all, "frontend");
    let shadow = PolicySet::build("default", &all, View::Shadow);
    assert_eq!(
        shadow.superseded,
        [ResourceType::Timeout, ResourceType::TrafficPermission]
    );
    let m = shadow.matched(ResourceType::MeshTimeout, frontend);
    // Mesh-level policies sorted by name descending: timeout-global first, then aaa-*.
    let names: Vec<_> = m
        .dataplane_policies
        .iter()
        .map(|p| p.meta().name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "timeout-global",
            "aaa-timeout-to-redis",
            "aaa-timeout-to-frontend",
            "aaa-timeout-to-backend"
        ]
    );
    let conf = |s: &str| {
        m.to_rules
            .compute(&service(s))
            .map(|r| r.conf.clone())
            .unwrap()
    };
    assert_eq!(
        conf("backend_kuma-demo_svc_3001"),
        json!({"connectionTimeout": "31s", "idleTimeout": "34s", "http": {"requestTimeout": "33s", "streamIdleTimeout": "35s", "maxStreamDuration": "36s", "maxConnectionDuration": "37s"}})
    );
    assert_eq!(
        conf("frontend_kuma-demo_svc_8080"),
        json!({"connectionTimeout": "21s", "idleTimeout": "24s", "http": {"requestTimeout": "23s", "streamIdleTimeout": "25s", "maxStreamDuration": "26s", "maxConnectionDuration": "27s"}})
    );
    assert_eq!(
        conf("other"),
        json!({"connectionTimeout": "21s", "idleTimeout": "22s", "http": {"requestTimeout": "23s", "streamIdleTimeout": "25s", "maxStreamDuration": "26s", "maxConnectionDuration": "27s"}})
    );
    let inbound = m
        .from_rules
        .keys()
        .map(ToString::to_string)
        .collect::<Vec<_>>();
    assert_eq!(inbound, ["10.42.0.29:8080"]);
    let from = m
        .from_rules
        .values()
        .next()
        .unwrap()
        .compute(&service("anyone"))
        .unwrap();
    assert_eq!(
        from.conf,
        json!({"connectionTimeout": "10s", "idleTimeout": "2h", "http": {"requestTimeout": "0s", "streamIdleTimeout": "1h"}})
    );
    // Single-item MeshProxyPatch only selects the frontend.
    let mpp = shadow.matched(ResourceType::MeshProxyPatch, frontend);
    assert_eq!(mpp.single_item_rules.0.len(), 1);
    assert!(shadow
        .matched(ResourceType::MeshProxyPatch, dp(&all, "redis"))
        .dataplane_policies
        .is_empty());
}

#[test]
fn live_view_keeps_the_old_timeouts_most_specific_first() {
    let all = load();
    let frontend = dp(&all, "frontend");
    let live = PolicySet::build("default", &all, View::Live);
    assert!(live.superseded.is_empty());
    assert!(live
        .matched(ResourceType::MeshTimeout, frontend)
        .dataplane_policies
        .is_empty());
    let timeouts = live.old_policies(ResourceType::Timeout);
    let refs: Vec<OldPolicyRef<'_>> = timeouts
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let chosen = select_outbound_connection_policies(frontend, &refs);
    let name = |svc: &str| timeouts[chosen[svc]].meta.name.as_str();
    assert_eq!(name("backend_kuma-demo_svc_3001"), "timeout-to-backend");
    assert_eq!(name("redis_kuma-demo_svc_6379"), "timeout-to-redis");
    assert_eq!(name("frontend_kuma-demo_svc_8080"), "timeout-global");

    let tps = live.old_policies(ResourceType::TrafficPermission);
    let refs: Vec<OldPolicyRef<'_>> = tps
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let redis = dp(&all, "redis");
    let chosen = select_inbound_connection_policies(redis, &refs);
    assert_eq!(
        chosen
            .values()
            .map(|i| tps[*i].meta.name.as_str())
            .collect::<Vec<_>>(),
        ["on-redis"]
    );
    assert!(select_inbound_connection_policies(frontend, &refs).is_empty());
}

#[test]
fn decode_errors_name_the_field() {
    let bad = b"type: MeshTimeout\nmesh: default\nname: x\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5s, idelTimeout: 1s}\n";
    let err = Resource::from_bytes(bad).unwrap_err();
    let v = err.violations();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].field, "spec.to[0].default.idelTimeout");
    assert!(v[0].message.contains("unknown field"), "{}", v[0].message);
    let wrong_type = b"type: MeshTimeout\nmesh: default\nname: x\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5}\n";
    let v = Resource::from_bytes(wrong_type).unwrap_err().violations();
    assert_eq!(v[0].field, "spec.to[0].default.idleTimeout");
    let bad_duration = b"type: MeshTimeout\nmesh: default\nname: x\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5 days}\n";
    let v = Resource::from_bytes(bad_duration).unwrap_err().violations();
    assert_eq!(v[0].field, "spec.to[0].default.idleTimeout");
    assert!(
        Resource::from_bytes(b"type: Nope\nname: x\n")
            .unwrap_err()
            .violations()[0]
            .field
            == "type"
    );
    assert!(
        Resource::from_bytes(b"type: Mesh\nname: x\nspec: {}\n").is_err(),
        "unknown top-level field"
    );
}

proptest::proptest! {
    /// Arbitrary JSON never panics the decoder or the validator.
    #[test]
    fn arbitrary_documents_never_panic(ty in proptest::sample::select(ResourceType::ALL.to_vec()), spec in arb_json()) {
        let mut doc = json!({"type": ty.name(), "mesh": "m", "name": "n"});
        if matches!(ty.kind(), umbra_core::resource::TypeKind::NewPolicy) {
            doc["spec"] = spec;
        } else if let serde_json::Value::Object(m) = spec {
            doc.as_object_mut().unwrap().extend(m);
        }
        if let Ok(r) = Resource::from_value(doc) {
            let _ = r.validate();
            let _ = r.to_value();
        }
    }
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        prop_oneof![
            Just("Mesh"),
            Just("MeshService"),
            Just("5s"),
            Just("-1s"),
            Just("Add"),
            Just("x"),
            Just("")
        ]
        .prop_map(|s| json!(s)),
    ];
    let keys = prop_oneof![
        Just("targetRef"),
        Just("kind"),
        Just("name"),
        Just("to"),
        Just("from"),
        Just("default"),
        Just("http"),
        Just("idleTimeout"),
        Just("appendModifications"),
        Just("cluster"),
        Just("operation"),
        Just("value"),
        Just("sources"),
        Just("destinations"),
        Just("match"),
        Just("conf"),
        Just("networking"),
        Just("inbound"),
        Just("port"),
        Just("tags"),
        Just("action"),
        Just("abort"),
        Just("percentage"),
        Just("connectionLimits"),
    ];
    leaf.prop_recursive(5, 48, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map(keys.clone(), inner, 0..4).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

#[test]
fn missing_item_target_ref_is_a_violation_not_a_decode_error() {
    let doc = b"type: MeshTimeout\nmesh: default\nname: x\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - default: {idleTimeout: 5s}\n";
    let r = Resource::from_bytes(doc).expect("decodes");
    let v = r.validate();
    assert_eq!(v.violations.len(), 1, "{v}");
    assert_eq!(v.violations[0].field, "spec.to[0].targetRef.kind");
    assert_eq!(v.violations[0].message, "must be defined");
}
