//! A synthetic mesh for benchmarks (issue 6's fleet-wide shadow diff): services behind VIPs,
//! DPPs with many outbounds, and the old-to-new Timeout transition (live Timeouts, their
//! MeshTimeout replacements as shadow). Used by `cargo bench -p umbra-zone-cp --bench shadow`
//! and `umbra-bench fleet-diff`, so both measure the same topology. Compiled only with the
//! crate's `bench-fixtures` feature (which both enable), never into the zone-cp binary.

/// The 20 policies of mesh `default`: 10 live Timeouts (one for every service, nine for
/// `svc-1`..`svc-9`) and their 10 MeshTimeout replacements labelled shadow (one Mesh-wide, so
/// they affect every DPP), as YAML.
pub fn policies() -> Vec<String> {
    let mut out = vec![
        "type: Timeout\nmesh: default\nname: timeout-all\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\nconf:\n  connectTimeout: 21s\n  http: {requestTimeout: 23s, idleTimeout: 24s}\n".to_owned(),
        "type: MeshTimeout\nmesh: default\nname: timeout-all\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 21s, idleTimeout: 24s, http: {requestTimeout: 23s}}\n".to_owned(),
    ];
    for i in 1..10 {
        out.push(format!("type: Timeout\nmesh: default\nname: timeout-svc-{i}\nsources:\n- match: {{kuma.io/service: '*'}}\ndestinations:\n- match: {{kuma.io/service: svc-{i}}}\nconf:\n  connectTimeout: {i}s\n  http: {{requestTimeout: 3{i}s}}\n"));
        out.push(format!("type: MeshTimeout\nmesh: default\nname: timeout-svc-{i}\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-{i}}}\n    default: {{connectionTimeout: {i}s, http: {{requestTimeout: 4{i}s}}}}\n"));
    }
    out
}

/// The shadow policies of the benches' two shapes (`migration` or `one-service`, as YAML), or
/// `None` for another name: `migration` is [`policies`]; `one-service` is a live Mesh-wide
/// MeshTimeout (`all`, the first) and one shadow MeshTimeout to `svc-1`, which changes the
/// resources of one outbound of the DPPs calling `svc-1` only. Each shape's first policy is
/// live and holds `21s`, which the fleet-diff bench replaces to change something between runs.
pub fn shape(name: &str) -> Option<Vec<String>> {
    match name {
        "migration" => Some(policies()),
        "one-service" => Some(vec![
            "type: MeshTimeout\nmesh: default\nname: all\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 21s, idleTimeout: 24s}\n".to_owned(),
            "type: MeshTimeout\nmesh: default\nname: to-svc-1\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: svc-1}\n    default: {http: {requestTimeout: 41s}}\n".to_owned(),
        ]),
        _ => None,
    }
}

/// Dataplane `dp-<i>` of mesh `default` as YAML: address `10.<zone>.x.y`, one HTTP inbound of
/// service `svc-(i % services)`, and `outbounds` outbounds to the next services' VIPs
/// (`240.0.x.y:80`, the same for every DPP).
pub fn dataplane(zone: usize, i: usize, services: usize, outbounds: usize) -> String {
    let svc = i % services;
    let mut y = format!(
        "type: Dataplane\nmesh: default\nname: dp-{i}\nnetworking:\n  address: 10.{zone}.{}.{}\n  inbound:\n  - port: 8080\n    tags: {{kuma.io/service: svc-{svc}, kuma.io/protocol: http}}\n  outbound:\n",
        i / 250,
        i % 250
    );
    for k in 1..=outbounds {
        let t = (svc + k) % services;
        y.push_str(&format!(
            "  - {{address: 240.0.{}.{}, port: 80, tags: {{kuma.io/service: svc-{t}}}}}\n",
            t / 250,
            t % 250
        ));
    }
    y
}

#[cfg(test)]
mod tests {
    use umbra_core::resource::Resource;

    #[test]
    fn everything_is_a_valid_resource() {
        let one_service = super::shape("one-service").unwrap();
        assert!(one_service[0].contains("21s") && super::policies()[0].contains("21s"));
        for p in super::policies().into_iter().chain(one_service) {
            let r = Resource::from_bytes(p.as_bytes()).unwrap();
            assert!(!r.validate().has_violations(), "{p}");
        }
        let dp = Resource::from_bytes(super::dataplane(3, 501, 100, 50).as_bytes()).unwrap();
        assert!(!dp.validate().has_violations());
        assert_eq!(dp.as_dataplane().unwrap().networking.outbound.len(), 50);
        assert_eq!(dp.as_dataplane().unwrap().networking.address, "10.3.2.1");
    }
}
