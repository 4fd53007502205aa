//! RateLimit -> MeshRateLimit equivalence: backend and web have HTTP inbounds, callers web and
//! api. The limit converts exactly (token bucket, status, headers); what remains is where it
//! sits: the old RateLimit's own route matching its sources' `x-kuma-tags` before the
//! catch-all, versus MeshRateLimit on the catch-all route (for every client). An HTTP inbound
//! always shows that difference, so this family has no empty-diff scenario.

use serde_json::json;
use umbra_core::convert::NoteKind;
use umbra_core::resource::ResourceType;

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

const SCENARIO: &str = r#"
type: Mesh
name: default
skipCreatingInitialPolicies: ["*"]
---
type: Dataplane
mesh: default
name: backend
networking:
  address: 10.0.0.11
  inbound:
  - port: 80
    tags: {kuma.io/service: backend, kuma.io/protocol: http}
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.10
  inbound:
  - port: 8080
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: backend}}
---
type: Dataplane
mesh: default
name: api
networking:
  address: 10.0.0.20
  inbound:
  - port: 8080
    tags: {kuma.io/service: api, kuma.io/protocol: http}
  outbound:
  - {port: 10001, tags: {kuma.io/service: backend}}
  - {port: 10002, tags: {kuma.io/service: web}}
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

const LISTENER: &str = "/type.googleapis.com~1envoy.config.listener.v3.Listener";

#[test]
fn rate_limit_moves_to_the_catch_all_route() {
    let scenario = scenario(SCENARIO);
    let report = equivalence(&scenario, &["backend", "web", "api"]);
    assert_eq!(report.conversions.len(), old_policies(&scenario));
    assert_eq!(output_types(&report), [ResourceType::MeshRateLimit]);
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
        let routes =
            format!("{LISTENER}/{listener}/filterChains/0/filters/0/typedConfig/routeConfig/virtualHosts/0/routes");
        expected.push(Op {
            dataplane: dp.to_owned(),
            op: "remove".to_owned(),
            path: format!("{routes}/0/match/headers"),
        });
        expected.push(Op {
            dataplane: dp.to_owned(),
            op: "remove".to_owned(),
            path: format!("{routes}/1"),
        });
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}
