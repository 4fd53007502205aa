//! Issue 41: Kuma's own inputs read as Kuma 2.7 reads them. Proto field names in the
//! protobuf-based resources (protojson takes `reuse_connection` as well as `reuseConnection`),
//! and for every field Umbra does not know, an answer that names it, says Kuma would ignore
//! it and suggests the field it resembles.

use umbra_core::resource::{Resource, Spec};

fn decode(yaml: &str) -> Result<Resource, Vec<(String, String)>> {
    Resource::from_bytes(yaml.as_bytes()).map_err(|e| {
        e.violations()
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    })
}

const HEALTH_CHECK: &str = "type: HealthCheck\nmesh: default\nname: hc\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\nconf:\n  interval: 10s\n  timeout: 2s\n  unhealthyThreshold: 3\n  healthyThreshold: 1\n  REUSE\n  http: {path: /health}\n";

#[test]
fn old_policies_take_proto_names_as_protojson_does() {
    let camel = decode(&HEALTH_CHECK.replace("REUSE", "reuseConnection: false")).unwrap();
    let proto = decode(&HEALTH_CHECK.replace("REUSE", "reuse_connection: false")).unwrap();
    assert_eq!(proto.spec, camel.spec);
    // Several, nested (`unhealthy_threshold` and `http.expected_statuses`).
    let nested = HEALTH_CHECK
        .replace("REUSE", "reuse_connection: false")
        .replace("unhealthyThreshold", "unhealthy_threshold")
        .replace(
            "{path: /health}",
            "{path: /health, expected_statuses: [200]}",
        );
    let with_statuses = HEALTH_CHECK
        .replace("REUSE", "reuseConnection: false")
        .replace(
            "{path: /health}",
            "{path: /health, expectedStatuses: [200]}",
        );
    assert_eq!(
        decode(&nested).unwrap().spec,
        decode(&with_statuses).unwrap().spec
    );
    // Both names of one field: refused, as protojson refuses a duplicate field.
    let both =
        decode(&HEALTH_CHECK.replace("REUSE", "reuse_connection: false\n  reuseConnection: true"))
            .unwrap_err();
    assert_eq!(both[0].0, "conf.reuse_connection", "{both:?}");
}

#[test]
fn tags_and_struct_keys_are_data_and_keep_their_names() {
    let tp = decode("type: TrafficPermission\nmesh: default\nname: tp\nsources:\n- match: {kuma.io/service: web, my_tag: a_b}\ndestinations:\n- match: {kuma.io/service: '*'}\n").unwrap();
    let Spec::TrafficPermission(spec) = &tp.spec else {
        panic!("{tp:?}")
    };
    let json = serde_json::to_value(spec).unwrap();
    assert_eq!(json["sources"][0]["match"]["my_tag"], "a_b", "{json}");
}

#[test]
fn the_mesh_takes_proto_names_in_its_sections_too() {
    let proto = decode("type: Mesh\nname: m\nrouting: {locality_aware_load_balancing: true, zone_egress: true}\nnetworking: {outbound: {passthrough: false}}\nskip_creating_initial_policies: ['*']\nmtls:\n  enabled_backend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n    dp_cert: {rotation: {expiration: 1d}}\n").unwrap();
    let camel = decode("type: Mesh\nname: m\nrouting: {localityAwareLoadBalancing: true, zoneEgress: true}\nnetworking: {outbound: {passthrough: false}}\nskipCreatingInitialPolicies: ['*']\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n    dpCert: {rotation: {expiration: 1d}}\n").unwrap();
    assert_eq!(proto.spec, camel.spec);
}

#[test]
fn unknown_fields_are_named_with_kuma_s_behaviour_and_a_suggestion() {
    let typo = decode("type: Mesh\nname: m\nrouting: {localityAwarenes: true}\n").unwrap_err();
    assert_eq!(typo[0].0, "routing.localityAwarenes");
    assert!(
        typo[0]
            .1
            .contains("did you mean `localityAwareLoadBalancing`?")
            && typo[0].1.contains("Kuma 2.7 would ignore it"),
        "{typo:?}"
    );
    let header = decode("type: MeshTimeout\nmesh: default\nname: t\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 20s, requestHeader: 1s}\n").unwrap_err();
    assert_eq!(header[0].0, "spec.to[0].default.requestHeader");
    assert!(
        header[0]
            .1
            .contains("known fields here: `connectionTimeout`, `idleTimeout`, `http`"),
        "{header:?}"
    );
    // A targetRef policy is decoded by Kuma with encoding/json: JSON names only, and the
    // proto-looking name is pointed at the JSON one.
    let snake = decode("type: MeshTimeout\nmesh: default\nname: t\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idle_timeout: 20s}\n").unwrap_err();
    assert!(
        snake[0].1.contains("did you mean `idleTimeout`?"),
        "{snake:?}"
    );
    // A universal Mesh wrapped in `spec`.
    let wrapped = decode("type: Mesh\nname: m\nspec:\n  mtls: {}\n").unwrap_err();
    assert_eq!(wrapped[0].0, "spec");
    assert!(wrapped[0].1.contains("universal format"), "{wrapped:?}");
}
