//! TrafficLog -> MeshAccessLog (issue 17), on `tests/data/access-logs.yaml`: TrafficLogs to the
//! Mesh's file backend live, the MeshAccessLogs replacing them in shadow (File, JSON File,
//! OpenTelemetry; a Tcp backend named as not generated). Both configs are checked by the real
//! Envoy.

use serde_json::{json, Value};
use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const FILE_LOG: &str = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog";

fn filter<'a>(doc: &'a Value, listener: &str) -> &'a Value {
    &doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]
}

fn not_generated(resources: &[Resource], view: View) -> Vec<String> {
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "web")
        .and_then(Resource::as_dataplane)
        .unwrap();
    PolicySet::build("default", resources, view)
        .not_generated(dp)
        .into_iter()
        .map(|n| format!("{}/{}", n.type_name, n.name))
        .collect()
}

#[test]
fn traffic_log_live_and_mesh_access_log_in_shadow() {
    let resources = load("access-logs.yaml");
    let live = snapshot(&resources, "web", View::Live);
    let shadow = snapshot(&resources, "web", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // Live: the Mesh's file backend on both outbounds (named, and as the default backend),
    // its format interpolated; nothing on the inbound.
    let file_log = |path: &str, text: &str| {
        json!([{
            "name": "envoy.access_loggers.file",
            "typedConfig": {"@type": FILE_LOG, "path": path, "logFormat": {"textFormatSource": {"inlineString": text}}},
        }])
    };
    assert_eq!(
        filter(&live, "outbound:127.0.0.1:10001")["accessLog"],
        file_log("/tmp/umbra-access.log", "web -> backend %RESPONSE_CODE%\n")
    );
    assert_eq!(
        filter(&live, "outbound:127.0.0.1:10002")["accessLog"],
        file_log("/tmp/umbra-access.log", "web -> db %RESPONSE_CODE%\n")
    );
    assert!(filter(&live, "inbound:10.0.0.10:8080")
        .get("accessLog")
        .is_none());
    assert_eq!(not_generated(&resources, View::Live), Vec::<String>::new());
    golden("access-logs.live.json", &live);

    // Shadow: MeshAccessLog replaces the TrafficLogs.
    assert_eq!(
        filter(&shadow, "inbound:10.0.0.10:8080")["accessLog"],
        file_log("/tmp/umbra-inbound.log", "default INBOUND 10.0.0.10:0\n")
    );
    let logs = &filter(&shadow, "outbound:127.0.0.1:10001")["accessLog"];
    assert_eq!(
        logs[0]["typedConfig"]["logFormat"],
        json!({"jsonFormat": {"source": "web", "destination": "backend"}, "omitEmptyValues": true})
    );
    let otel = &logs[1]["typedConfig"];
    assert_eq!(logs[1]["name"], "envoy.access_loggers.open_telemetry");
    assert_eq!(
        otel["commonConfig"]["grpcService"]["envoyGrpc"]["clusterName"],
        "meshaccesslog:opentelemetry:0"
    );
    assert_eq!(
        otel["body"],
        json!({"kvlistValue": {"values": [{"key": "destination", "value": {"stringValue": "backend"}}]}})
    );
    assert_eq!(
        otel["attributes"],
        json!({"values": [{"key": "mesh", "value": {"stringValue": "default"}}]})
    );
    let collector = &shadow[CLUSTER]["meshaccesslog:opentelemetry:0"];
    assert_eq!(collector["type"], "STRICT_DNS");
    assert_eq!(collector["dnsLookupFamily"], "V4_ONLY");
    assert_eq!(
        collector["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]
            ["socketAddress"],
        json!({"address": "otel-collector", "portValue": 4317})
    );
    // db: the Tcp backend of `db-tcp-log` replaces the list (Kuma merges policies of one
    // top-level kind by name, descending, so `db-tcp-log` comes after `log-all`), and is not
    // generated.
    assert!(
        filter(&shadow, "outbound:127.0.0.1:10002")
            .get("accessLog")
            .is_none(),
        "{:#}",
        filter(&shadow, "outbound:127.0.0.1:10002")
    );
    assert_eq!(
        not_generated(&resources, View::Shadow),
        ["MeshAccessLog/db-tcp-log"]
    );

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "access-logs.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}

#[test]
fn traffic_log_to_a_tcp_backend_is_named_not_generated() {
    let mut resources = load("access-logs.yaml");
    resources.retain(|r| r.ty().name() != "MeshAccessLog");
    let doc = "type: TrafficLog\nmesh: default\nname: to-db\nsources:\n- match: {kuma.io/service: web}\ndestinations:\n- match: {kuma.io/service: db}\nconf: {backend: logstash}\n";
    let tcp = Resource::from_bytes(doc.as_bytes()).unwrap();
    resources.retain(|r| r.meta.name != "to-db");
    resources.push(tcp);
    assert_eq!(not_generated(&resources, View::Live), ["TrafficLog/to-db"]);
    let live = snapshot(&resources, "web", View::Live);
    envoy_validates(&live);
    let live = live.to_document().unwrap();
    assert!(filter(&live, "outbound:127.0.0.1:10002")
        .get("accessLog")
        .is_none());
}

/// Kuma's route plugins rebuild a DPP's outbound listeners without the TrafficLog once a
/// MeshHTTPRoute gives it a `to` rule.
#[test]
fn traffic_log_leaves_outbounds_rebuilt_by_a_mesh_http_route() {
    let mut resources = load("access-logs.yaml");
    resources.push(Resource::from_bytes(b"type: MeshHTTPRoute\nmesh: default\nname: to-backend\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend}]\n").unwrap());
    let live = snapshot(&resources, "web", View::Live);
    envoy_validates(&live);
    let live = live.to_document().unwrap();
    assert!(filter(&live, "outbound:127.0.0.1:10001")
        .get("accessLog")
        .is_none());
}
