//! `deploy/kuma-export.yaml`, the example Kuma 2.7 export: one resource of every type Kuma 2.7
//! users apply (all but Dataplane, ZoneIngress and ZoneEgress, which zones register), each valid,
//! each decoding to its own type and round-tripping unchanged.

use std::collections::BTreeSet;

use umbra_core::resource::{Resource, ResourceType};

const EXPORT: &str = include_str!("../../deploy/kuma-export.yaml");

#[test]
fn the_example_export_has_every_type_valid_and_lossless() {
    let docs = umbra_core::codec::decode_documents(
        EXPORT.as_bytes(),
        umbra_core::codec::Limits::default(),
    )
    .unwrap();
    let mut seen = BTreeSet::new();
    for doc in docs {
        let r = Resource::from_value(doc.clone()).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let errors = r.validate();
        assert!(!errors.has_violations(), "{}: {errors}", r.key());
        assert_eq!(r.to_value(), doc, "{} does not round-trip", r.key());
        seen.insert(r.ty());
    }
    let missing: Vec<&str> = ResourceType::ALL
        .iter()
        .filter(|t| {
            !matches!(
                t,
                ResourceType::Dataplane | ResourceType::ZoneIngress | ResourceType::ZoneEgress
            ) && !seen.contains(t)
        })
        .map(|t| t.name())
        .collect();
    assert!(
        missing.is_empty(),
        "types missing from the export: {missing:?}"
    );
}

#[test]
fn stored_only_types_refuse_what_kuma_refuses() {
    let cases = [
        // Unknown field inside a schema-checked default.
        ("type: MeshMetric\nmesh: m\nname: h\nspec:\n  targetRef: {kind: Mesh}\n  default: {sidecarr: {}}\n", "spec.default"),
        // Wrong JSON type.
        ("type: MeshMetric\nmesh: m\nname: a\nspec:\n  targetRef: {kind: Mesh}\n  default: {sidecar: {includeUnused: 3}}\n", "spec.default.sidecar.includeUnused"),
        // Enum.
        ("type: MeshMetric\nmesh: m\nname: l\nspec:\n  targetRef: {kind: Mesh}\n  default: {backends: [{type: Graphite}]}\n", "spec.default.backends[0].type"),
        // targetRef kind per level.
        ("type: MeshMetric\nmesh: m\nname: t\nspec:\n  targetRef: {kind: MeshHTTPRoute, name: r}\n  default: {}\n", "spec.targetRef.kind"),
        // Old policies: Kuma's validators.
        ("type: Retry\nmesh: m\nname: r\nsources: [{match: {kuma.io/service: a}}]\ndestinations: [{match: {kuma.io/service: b}}]\nconf: {}\n", "conf"),
        ("type: RateLimit\nmesh: m\nname: r\nsources: [{match: {kuma.io/service: a}}]\ndestinations: [{match: {kuma.io/service: b}}]\nconf: {http: {requests: 0}}\n", "conf.http.requests"),
        ("type: ExternalService\nmesh: m\nname: e\nnetworking: {address: nowhere}\ntags: {kuma.io/service: e}\n", "networking.address"),
        ("type: GlobalSecret\nmesh: m\nname: g\ndata: eA==\n", "mesh"),
    ];
    for (doc, field) in cases {
        let r = Resource::from_bytes(doc.as_bytes()).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let errors = r.validate();
        assert!(
            errors.violations.iter().any(|v| v.field == field),
            "{doc}: expected a violation at {field}, got {errors}"
        );
    }
    // Unknown top-level fields of stored types are decode errors with their path.
    let e =
        Resource::from_bytes(b"type: TrafficTrace\nmesh: m\nname: t\nselectors: []\nconff: {}\n")
            .unwrap_err();
    assert!(e.to_string().contains("conff"), "{e}");
    // Typed (generated) new policies too, enums included.
    let e = Resource::from_bytes(b"type: MeshLoadBalancingStrategy\nmesh: m\nname: l\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {loadBalancer: {type: Random2}}\n")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.to[0].default.loadBalancer.type"),
        "{e}"
    );
    let e = Resource::from_bytes(b"type: MeshHealthCheck\nmesh: m\nname: h\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {intervall: 10s}\n")
        .unwrap_err();
    assert!(e.to_string().contains("intervall"), "{e}");
}

/// `deploy/policies.yaml`, what the docker-compose deployment applies, is valid too.
#[test]
fn the_compose_policies_are_valid() {
    let text = include_str!("../../deploy/policies.yaml");
    let resources = Resource::all_from_bytes(text.as_bytes()).unwrap();
    for r in &resources {
        let errors = r.validate();
        assert!(!errors.has_violations(), "{}: {errors}", r.key());
    }
    assert!(resources
        .iter()
        .any(|r| r.ty() == ResourceType::MeshTrafficPermission));
}
