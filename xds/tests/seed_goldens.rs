//! The transition seed's examples (000_c0dd8fb0a11dab1f.txt) as golden tests: the kuma-demo
//! frontend DPP generated in the Live and the Shadow view, the RFC 6902 diff between them checked
//! against the seed's operations, both configs checked by the real Envoy.

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

#[test]
fn generation_is_deterministic() {
    let resources = load("timeouts.yaml");
    let a = snapshot(&resources, "frontend", View::Shadow);
    let b = snapshot(&resources, "frontend", View::Shadow);
    assert_eq!(a, b);
    for t in [LISTENER, CLUSTER] {
        assert_eq!(a.version(t).unwrap(), b.version(t).unwrap());
    }
}
