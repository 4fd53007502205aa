//! The timeout family (old Timeout and MeshTimeout, `plugins/timeout.rs`): the transition seed's
//! "Timeout -> MeshTimeout" example (000_c0dd8fb0a11dab1f.txt) as golden tests, the kuma-demo
//! frontend DPP generated in the Live and the Shadow view with the RFC 6902 diff between them
//! checked against the seed's operations; the old Timeout per destination protocol; every
//! config checked by the real Envoy.

use serde_json::{json, Value};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff, snapshot_diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Leaf changes of a patch: `(path, value)` with `add`/`replace` of objects expanded into their
/// leaves, so an op "finer" or "coarser" than the seed's compares equal.
fn leaf_changes(patch: &Value) -> Vec<(String, Value)> {
    fn walk(path: &str, v: &Value, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    walk(&format!("{path}/{}", escape(k)), x, out);
                }
            }
            _ => out.push((path.to_owned(), v.clone())),
        }
    }
    let mut out = Vec::new();
    for op in patch.as_array().unwrap() {
        match op["op"].as_str().unwrap() {
            "add" | "replace" => walk(op["path"].as_str().unwrap(), &op["value"], &mut out),
            other => out.push((
                op["path"].as_str().unwrap().to_owned(),
                json!({ "op": other }),
            )),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn timeout_to_mesh_timeout_changes_exactly_the_seeds_fields() {
    let resources = load("timeouts.yaml");
    let live = snapshot(&resources, "frontend", View::Live);
    let shadow = snapshot(&resources, "frontend", View::Shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());
    let patch = diff(&live_doc, &shadow_doc);
    assert_eq!(apply(&live_doc, &patch).unwrap(), shadow_doc);
    // The render-only-what-changed diff is equivalent.
    let fast = snapshot_diff(&live, &shadow).unwrap();
    assert_eq!(apply(&live_doc, &fast).unwrap(), shadow_doc);
    assert_eq!(
        leaf_changes(&serde_json::to_value(&fast).unwrap()),
        leaf_changes(&serde_json::to_value(&patch).unwrap())
    );
    let patch_json = serde_json::to_value(&patch).unwrap();
    golden("timeouts.live.json", &live_doc);
    golden("timeouts.shadow-diff.json", &patch_json);

    let l = |name: &str, rest: &str| {
        format!(
            "/{}/{}/filterChains/0/filters/0/typedConfig/{rest}",
            escape(LISTENER),
            escape(name)
        )
    };
    let c = |name: &str, rest: &str| {
        format!(
            "/{}/{}/typedExtensionProtocolOptions/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/commonHttpProtocolOptions/{rest}",
            escape(CLUSTER),
            escape(name)
        )
    };
    let route_idle = "routeConfig/virtualHosts/0/routes/0/route/idleTimeout";
    // The seed's 12 operations, with the correction: maxConnectionDuration is 37s
    // (backend) and 27s (frontend), as the MeshTimeouts are written.
    let mut expected = vec![
        (
            c("backend_kuma-demo_svc_3001", "maxConnectionDuration"),
            json!("37s"),
        ),
        (
            c("frontend_kuma-demo_svc_8080", "maxConnectionDuration"),
            json!("27s"),
        ),
        (c("localhost:8080", "idleTimeout"), json!("7200s")),
        (c("localhost:8080", "maxConnectionDuration"), json!("0s")),
        (c("localhost:8080", "maxStreamDuration"), json!("0s")),
        (
            l(
                "inbound:10.42.0.29:8080",
                "commonHttpProtocolOptions/idleTimeout",
            ),
            json!("0s"),
        ),
        (
            l("inbound:10.42.0.29:8080", "requestHeadersTimeout"),
            json!("0s"),
        ),
        (l("inbound:10.42.0.29:8080", route_idle), json!("3600s")),
        (
            l(
                "outbound:10.43.13.71:3001",
                "commonHttpProtocolOptions/idleTimeout",
            ),
            json!("0s"),
        ),
        (
            l("outbound:10.43.13.71:3001", "requestHeadersTimeout"),
            json!("0s"),
        ),
        (l("outbound:10.43.13.71:3001", route_idle), json!("35s")),
        (
            l(
                "outbound:10.43.138.50:8080",
                "commonHttpProtocolOptions/idleTimeout",
            ),
            json!("0s"),
        ),
        (
            l("outbound:10.43.138.50:8080", "requestHeadersTimeout"),
            json!("0s"),
        ),
        (l("outbound:10.43.138.50:8080", route_idle), json!("25s")),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    let mut got = leaf_changes(&patch_json);
    // The seed replaces localhost:8080's whole commonHttpProtocolOptions object; its idleTimeout
    // (7200s) is unchanged, so a finer diff does not mention it.
    if !got
        .iter()
        .any(|(p, _)| p == &c("localhost:8080", "idleTimeout"))
    {
        got.push((c("localhost:8080", "idleTimeout"), json!("7200s")));
        got.sort_by(|a, b| a.0.cmp(&b.0));
    }
    assert_eq!(
        got,
        expected,
        "diff was {}",
        serde_json::to_string_pretty(&patch_json).unwrap()
    );

    envoy_validates(&live);
    envoy_validates(&shadow);
}

/// The typed config of the first filter of listener `name` in `doc`.
fn filter(doc: &Value, name: &str) -> Value {
    doc[LISTENER][name]["filterChains"][0]["filters"][0]["typedConfig"].clone()
}

/// The upstream `commonHttpProtocolOptions` of cluster `name` in `doc` (`null` when absent).
fn upstream_common(doc: &Value, name: &str) -> Value {
    doc[CLUSTER][name]["typedExtensionProtocolOptions"]
        ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]["commonHttpProtocolOptions"]
        .clone()
}

#[test]
fn old_timeout_per_protocol() {
    let resources = load("timeouts-protocols.yaml");
    let live = snapshot(&resources, "client", View::Live);
    let shadow = snapshot(&resources, "client", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // gRPC, only `grpc` set: its streamIdleTimeout and maxStreamDuration, on both outbounds of
    // the service; everything else 0s, connect 5s.
    for l in ["outbound:10.1.0.1:1001", "outbound:10.1.0.2:1002"] {
        let hcm = filter(&live, l);
        assert_eq!(hcm["streamIdleTimeout"], "51s", "{l}");
        assert_eq!(
            hcm["commonHttpProtocolOptions"],
            json!({"idleTimeout": "0s"}),
            "{l}"
        );
        let route = &hcm["routeConfig"]["virtualHosts"][0]["routes"][0]["route"];
        assert_eq!(route["timeout"], "0s", "{l}");
        assert!(route.get("idleTimeout").is_none(), "{l}");
    }
    assert_eq!(live[CLUSTER]["grpc-svc"]["connectTimeout"], "5s");
    assert_eq!(
        upstream_common(&live, "grpc-svc"),
        json!({"idleTimeout": "0s", "maxStreamDuration": "52s"})
    );

    // gRPC with `http` and `grpc`: `http` wins, and its zero maxStreamDuration is omitted.
    assert_eq!(
        filter(&live, "outbound:[fd00::7]:1007")["streamIdleTimeout"],
        "61s"
    );
    assert_eq!(
        upstream_common(&live, "grpc2-svc"),
        json!({"idleTimeout": "0s"})
    );

    // HTTP/2: connect and request timeouts.
    let h2 = filter(&live, "outbound:10.1.0.3:1003");
    assert_eq!(h2["streamIdleTimeout"], "0s");
    assert_eq!(
        h2["routeConfig"]["virtualHosts"][0]["routes"][0]["route"]["timeout"],
        "82s"
    );
    assert_eq!(live[CLUSTER]["h2-svc"]["connectTimeout"], "81s");

    // TCP: the proxy's idle timeout; no upstream HTTP options.
    assert_eq!(
        filter(&live, "outbound:10.1.0.4:1004")["idleTimeout"],
        "71s"
    );
    assert_eq!(live[CLUSTER]["tcp-svc"]["connectTimeout"], "5s");
    assert_eq!(upstream_common(&live, "tcp-svc"), Value::Null);

    // No timeout policy of either kind: Kuma's built-in MeshTimeout defaults, in both views for
    // the service nothing serves.
    let http = filter(&live, "outbound:10.1.0.5:1005");
    assert_eq!(http["requestHeadersTimeout"], "0s");
    assert_eq!(
        http["routeConfig"]["virtualHosts"][0]["routes"][0]["route"],
        json!({"cluster": "http-svc", "timeout": "15s", "idleTimeout": "1800s"})
    );
    assert_eq!(
        upstream_common(&live, "http-svc"),
        json!({"idleTimeout": "3600s", "maxStreamDuration": "0s", "maxConnectionDuration": "0s"})
    );
    for doc in [&live, &shadow] {
        assert_eq!(
            filter(doc, "outbound:10.1.0.6:1006")["idleTimeout"],
            "3600s"
        );
        assert_eq!(doc[CLUSTER]["nobody"]["connectTimeout"], "5s");
    }

    // The shadow MeshTimeout overrides the old Timeout's TCP idle timeout and sets http-svc's
    // idle timeout; the other old values stay.
    assert_eq!(
        filter(&shadow, "outbound:10.1.0.4:1004")["idleTimeout"],
        "92s"
    );
    assert_eq!(upstream_common(&shadow, "http-svc")["idleTimeout"], "91s");
    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    // Only what the MeshTimeout covers changes (and the inbound, whose HCM idle timeout every
    // MeshTimeout view resets).
    let changed: std::collections::BTreeSet<String> = serde_json::to_value(&patch)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            op["path"]
                .as_str()
                .unwrap()
                .split('/')
                .nth(2)
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        changed,
        [
            "http-svc",
            "inbound:10.0.0.1:8080",
            "outbound:10.1.0.4:1004"
        ]
        .map(str::to_owned)
        .into()
    );
}
