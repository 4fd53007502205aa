//! TrafficTrace -> MeshTrace equivalence: web (traced to Datadog with split service names)
//! calls backend (traced to the default Zipkin backend). The tracing settings convert exactly;
//! what remains is the collector cluster's name (`tracing:<backend>` becomes
//! `meshtrace:<provider>`), on the cluster and in every listener's tracing provider. That
//! rename is always there, so this family has no empty-diff scenario.
//!
//! Both backends have a sampling: a backend without one would let the less specific MeshTrace's
//! sampling leak into web's merged MeshTrace (the precedence note).

use serde_json::json;
use umbra_core::resource::ResourceType;

use super::scenarios::{dataplane, MESH};
use super::{converts, output_spec, scenario, typed_config, Op, CLUSTER};

/// The Mesh's tracing backends (Zipkin, the default; Datadog); web calls backend.
fn topology() -> String {
    format!(
        "{MESH}tracing:
  defaultBackend: zipkin
  backends:
  - name: zipkin
    type: zipkin
    sampling: 80
    conf: {{url: 'http://zipkin.local:9411/api/v2/spans', traceId128bit: true}}
  - name: datadog
    type: datadog
    sampling: 12.5
    conf: {{address: 127.0.0.1, port: 8126, splitService: true}}
{}{}",
        dataplane("web", "10.0.0.10", 8080, "http", &[(10001, "backend")]),
        dataplane("backend", "10.0.0.11", 80, "http", &[]),
    )
}

const TRACES: &str = r#"
---
type: TrafficTrace
mesh: default
name: everyone
selectors:
- match: {kuma.io/service: '*'}
---
type: TrafficTrace
mesh: default
name: web
selectors:
- match: {kuma.io/service: web}
conf: {backend: datadog}
"#;

#[test]
fn traffic_trace_renames_the_collector_cluster() {
    let scenario = scenario(&format!("{}{TRACES}", topology()));
    let report = converts(&scenario, &["web", "backend"], &[ResourceType::MeshTrace]);
    assert_eq!(
        output_spec(&report, ResourceType::MeshTrace, "web"),
        json!({"targetRef": {"kind": "MeshService", "name": "web"}, "default": {
            "backends": [{"type": "Datadog", "datadog": {"url": "http://127.0.0.1:8126", "splitService": true}}],
            "sampling": {"overall": "12.5"},
        }})
    );
    assert_eq!(
        output_spec(&report, ResourceType::MeshTrace, "everyone")["default"]["backends"],
        json!([{"type": "Zipkin", "zipkin": {"url": "http://zipkin.local:9411/api/v2/spans", "traceId128bit": true}}])
    );
    let provider = "tracing/provider/typedConfig/collectorCluster";
    let mut expected = Vec::new();
    for (dp, old, new, listeners) in [
        (
            "web",
            "tracing:datadog",
            "meshtrace:datadog",
            &["inbound:10.0.0.10:8080", "outbound:127.0.0.1:10001"][..],
        ),
        (
            "backend",
            "tracing:zipkin",
            "meshtrace:zipkin",
            &["inbound:10.0.0.11:80"][..],
        ),
    ] {
        expected.push(Op::new(dp, "remove", format!("{CLUSTER}/{old}")));
        expected.push(Op::new(dp, "add", format!("{CLUSTER}/{new}")));
        for l in listeners {
            expected.push(Op::new(dp, "replace", typed_config(l, provider)));
        }
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}
