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

use super::{equivalence, old_policies, output_spec, output_types, scenario, Op};

const SCENARIO: &str = r#"
type: Mesh
name: default
skipCreatingInitialPolicies: ["*"]
tracing:
  defaultBackend: zipkin
  backends:
  - name: zipkin
    type: zipkin
    sampling: 80
    conf: {url: 'http://zipkin.local:9411/api/v2/spans', traceId128bit: true}
  - name: datadog
    type: datadog
    sampling: 12.5
    conf: {address: 127.0.0.1, port: 8126, splitService: true}
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
name: backend
networking:
  address: 10.0.0.11
  inbound:
  - port: 80
    tags: {kuma.io/service: backend, kuma.io/protocol: http}
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

const LISTENER: &str = "/type.googleapis.com~1envoy.config.listener.v3.Listener";
const CLUSTER: &str = "/type.googleapis.com~1envoy.config.cluster.v3.Cluster";

#[test]
fn traffic_trace_renames_the_collector_cluster() {
    let scenario = scenario(SCENARIO);
    let report = equivalence(&scenario, &["web", "backend"]);
    assert_eq!(report.conversions.len(), old_policies(&scenario));
    assert_eq!(output_types(&report), [ResourceType::MeshTrace]);
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
    let provider =
        "filterChains/0/filters/0/typedConfig/tracing/provider/typedConfig/collectorCluster";
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
        let op = |op: &str, path: String| Op {
            dataplane: dp.to_owned(),
            op: op.to_owned(),
            path,
        };
        expected.push(op("remove", format!("{CLUSTER}/{old}")));
        expected.push(op("add", format!("{CLUSTER}/{new}")));
        for l in listeners {
            expected.push(op("replace", format!("{LISTENER}/{l}/{provider}")));
        }
    }
    expected.sort();
    assert_eq!(report.ops, expected);
}
