//! RateLimit -> MeshRateLimit equivalence: backend and web have HTTP inbounds, callers web and
//! api. The limit converts exactly (token bucket, status, headers); what remains is where it
//! sits: the old RateLimit's own route matching its sources' `x-kuma-tags` before the
//! catch-all, versus MeshRateLimit on the catch-all route (for every client). An HTTP inbound
//! always shows that difference, so this family has no empty-diff scenario.

use serde_json::json;
use umbra_core::convert::NoteKind;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, MESH};
use super::{converts, output_spec, scenario, typed_config, Op};

/// backend and web (HTTP), web calling backend, api calling both.
fn topology() -> String {
    format!(
        "{MESH}{}{}{}",
        dataplane("backend", "10.0.0.11", 80, "http", &[]),
        dataplane("web", "10.0.0.10", 8080, "http", &[(10001, "backend")]),
        dataplane(
            "api",
            "10.0.0.20",
            8080,
            "http",
            &[(10001, "backend"), (10002, "web")]
        ),
    )
}

const LIMITS: &str = r#"
---
type: RateLimit
mesh: default
name: backend-limit
sources:
- match: {kuma.io/service: '*'}
destinations:
- match: {kuma.io/service: backend}
conf:
  http:
    requests: 10
    interval: 1s
    onRateLimit:
      status: 423
      headers:
      - {key: x-limited, value: 'yes', append: true}
      - {key: x-limit, value: '10'}
---
type: RateLimit
mesh: default
name: web-limit-for-api
sources:
- match: {kuma.io/service: api}
destinations:
- match: {kuma.io/service: web}
conf:
  http:
    requests: 100
    interval: 1m
"#;

#[test]
fn rate_limit_moves_to_the_catch_all_route() {
    let scenario = scenario(&format!("{}{LIMITS}", topology()));
    let report = converts(
        &scenario,
        &["backend", "web", "api"],
        &[ResourceType::MeshRateLimit],
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshRateLimit, "backend-limit"),
        json!({
            "targetRef": {"kind": "MeshService", "name": "backend"},
            "from": [{"targetRef": {"kind": "Mesh"}, "default": {"local": {"http": {
                "requestRate": {"num": 10, "interval": "1s"},
                "onRateLimit": {"status": 423, "headers": {
                    "add": [{"name": "x-limited", "value": "yes"}],
                    "set": [{"name": "x-limit", "value": "10"}]}},
            }}}}],
        })
    );
    // web-limit-for-api now limits every client of web.
    assert!(report
        .notes()
        .any(|n| n.kind == NoteKind::Selector && n.field == "sources"));
    // On each limited inbound: the limited copy of the route (first) loses its x-kuma-tags
    // match, and the catch-all route after it goes.
    let mut expected = Vec::new();
    for (dp, listener) in [
        ("backend", "inbound:10.0.0.11:80"),
        ("web", "inbound:10.0.0.10:8080"),
    ] {
        let routes = |rest: &str| {
            typed_config(
                listener,
                &format!("routeConfig/virtualHosts/0/routes/{rest}"),
            )
        };
        expected.push(Op::new(dp, "remove", routes("0/match/headers")));
        expected.push(Op::new(dp, "remove", routes("1")));
    }
    // On the clients (web calls backend, api calls web and backend), the empty local
    // rate-limit filter Kuma puts on their outbounds to a limited service goes: the router
    // takes its place at 0.
    for (dp, listener) in [
        ("web", "outbound:127.0.0.1:10001"),
        ("api", "outbound:127.0.0.1:10001"),
        ("api", "outbound:127.0.0.1:10002"),
    ] {
        let filters = |rest: &str| typed_config(listener, &format!("httpFilters/{rest}"));
        expected.push(Op::new(dp, "remove", filters("0/typedConfig/statPrefix")));
        expected.push(Op::new(dp, "remove", filters("1")));
        expected.push(Op::new(dp, "replace", filters("0/name")));
        expected.push(Op::new(dp, "replace", filters("0/typedConfig/@type")));
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}
