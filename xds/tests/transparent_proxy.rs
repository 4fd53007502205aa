//! Transparent proxying and the `kuma:dns` listener (issue 37).
//!
//! - Kuma 2.7.29's goldens (`pkg/xds/generator/testdata/transparent-proxy/0{2,4,5,6}` and
//!   `testdata/dns/{1,3}`, Apache-2.0, copied under `tests/data/kuma-2.7.29/`) reproduced from
//!   their test inputs: every resource Kuma lists is compared field by field with Umbra's.
//! - `tests/data/transparent-proxy.yaml`: a full sidecar behind iptables, with `bindToPort:
//!   false` on every inbound and outbound listener (MeshHTTPRoute's rebuilt ones too), the
//!   upstream bind of non-loopback inbound clusters, passthrough on and off, MeshProxyPatch
//!   matching Kuma's origins, and the whole config as an Umbra golden checked by the real
//!   Envoy.

use serde_json::{json, Value};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, DnsInput, Proxy};
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// Parse YAML with Umbra's codec.
fn yaml(text: &str) -> Value {
    umbra_core::codec::decode_one(text.as_bytes(), umbra_core::codec::Limits::default()).unwrap()
}

/// A Kuma golden: `resources: [{name, resource: {'@type', ...}}]`.
fn kuma_golden(path: &str) -> Vec<(String, Value)> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kuma-2.7.29")
        .join(path);
    let doc = yaml(&std::fs::read_to_string(&full).unwrap());
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["resource"].clone(),
            )
        })
        .collect()
}

/// Generate `dp` (named `name`) alone in `mesh`, with `dns`.
fn generate_alone(mesh: Value, dp: &DataplaneSpec, dns: Option<&DnsInput>) -> Snapshot {
    let mesh_spec = serde_json::from_value(mesh).unwrap();
    let ctx = MeshContext::build("default", &mesh_spec, [dp]);
    let policies = PolicySet::build("default", &[], View::Live);
    generate(
        Proxy {
            name: "side-car",
            dataplane: dp,
            admin: None,
            dns,
        },
        &ctx,
        &policies,
    )
    .unwrap()
}

/// Every resource of the Kuma golden is in `doc`, field for field (the golden's top-level
/// `@type` is the resource's type URL).
fn assert_matches_kuma(doc: &Value, golden: &[(String, Value)]) {
    for (name, resource) in golden {
        let mut expected = resource.clone();
        let ty = expected.as_object_mut().unwrap().remove("@type").unwrap();
        let actual = &doc[ty.as_str().unwrap()][name];
        assert_eq!(
            actual,
            &expected,
            "{name} differs from Kuma's:\nUmbra: {}\nKuma:  {}",
            serde_json::to_string_pretty(actual).unwrap(),
            serde_json::to_string_pretty(&expected).unwrap()
        );
    }
}

fn tproxy_dp(tp: Value) -> DataplaneSpec {
    serde_json::from_value(json!({"networking": {"transparentProxying": tp}})).unwrap()
}

/// The names of the resources of `doc` of type `ty`.
fn names(doc: &Value, ty: &str) -> Vec<String> {
    doc.get(ty)
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Kuma's `transparent_proxy_generator_test.go` entries 02, 04, 05 and 06: exactly the
/// passthrough resources of the golden, equal field by field.
#[test]
fn kuma_transparent_proxy_goldens() {
    let cases = [
        (
            json!({"ipFamilyMode": "DualStack", "redirectPortOutbound": 15001, "redirectPortInbound": 15006}),
            "transparent-proxy/02.envoy.golden.yaml",
        ),
        (
            json!({"redirectPortOutbound": 15001, "redirectPortInbound": 15006, "redirectPortInboundV6": 15010}),
            "transparent-proxy/04.envoy.golden.yaml",
        ),
        (
            json!({"redirectPortOutbound": 15001, "redirectPortInbound": 15006, "redirectPortInboundV6": 15066}),
            "transparent-proxy/05.envoy.golden.yaml",
        ),
        (
            json!({"ipFamilyMode": "IPv4", "redirectPortOutbound": 15001, "redirectPortInbound": 15006, "redirectPortInboundV6": 15066}),
            "transparent-proxy/06.envoy.golden.yaml",
        ),
    ];
    for (tp, file) in cases {
        let snap = generate_alone(json!({}), &tproxy_dp(tp), None);
        envoy_validates(&snap);
        let doc = snap.to_document().unwrap();
        let golden = kuma_golden(file);
        assert_matches_kuma(&doc, &golden);
        let mut want: Vec<String> = golden.iter().map(|(n, _)| n.clone()).collect();
        want.sort();
        want.dedup();
        let mut got = names(&doc, CLUSTER);
        got.extend(names(&doc, LISTENER));
        got.sort();
        got.dedup();
        assert_eq!(got, want, "{file}: nothing more, nothing less");
    }
}

/// Kuma's `dns_generator_test.go` entries 1 and 3: the `kuma:dns` listener, with the VIP
/// domains of the DPP's outbounds only (the IPv6 `frontend` VIP has no outbound), IPv6-mapped
/// answers unless `ipFamilyMode: IPv4`.
#[test]
fn kuma_dns_goldens() {
    let dns = DnsInput {
        port: 53001,
        domains: [
            ("httpbin.mesh", "240.0.0.1"),
            ("backend.test-ns.svc.8080.mesh", "240.0.0.0"),
            ("backend_test-ns_svc_8080.mesh", "240.0.0.0"),
            ("frontend.test-ns.svc.8080.mesh", "2001:db8::ff00:42:8329"),
            ("frontend_test-ns_svc_8080.mesh", "2001:db8::ff00:42:8329"),
        ]
        .into_iter()
        .map(|(n, a)| (n.to_owned(), a.to_owned()))
        .collect(),
    };
    let outbounds = json!([
        {"port": 80, "address": "240.0.0.0", "tags": {"kuma.io/service": "backend_test-ns_svc_8080"}},
        {"port": 80, "address": "240.0.0.1", "tags": {"kuma.io/service": "httpbin"}},
    ]);
    let cases = [
        (
            json!({"redirectPortOutbound": 15001, "redirectPortInboundV6": 15002, "redirectPortInbound": 15003}),
            "dns/1-envoy-config.golden.yaml",
        ),
        (
            json!({"redirectPortOutbound": 15001, "redirectPortInbound": 15003, "ipFamilyMode": "IPv4"}),
            "dns/3-envoy-config.golden.yaml",
        ),
    ];
    for (tp, file) in cases {
        let dp: DataplaneSpec = serde_json::from_value(
            json!({"networking": {"outbound": outbounds, "transparentProxying": tp}}),
        )
        .unwrap();
        let snap = generate_alone(json!({}), &dp, Some(&dns));
        envoy_validates(&snap);
        assert_matches_kuma(&snap.to_document().unwrap(), &kuma_golden(file));
    }
    // Kuma's entry 2: no transparentProxying, no listener, whatever the DNS port.
    let plain: DataplaneSpec =
        serde_json::from_value(json!({"networking": {"outbound": outbounds}})).unwrap();
    let snap = generate_alone(json!({}), &plain, Some(&dns));
    assert!(!snap.listeners.contains_key("kuma:dns"));
    // No DNS port (no `dns` input): no listener either.
    let snap = generate_alone(
        json!({}),
        &tproxy_dp(json!({"redirectPortOutbound": 15001})),
        None,
    );
    assert!(!snap.listeners.contains_key("kuma:dns"));
    // A DPP with transparentProxying and no matching VIP still gets the (empty) listener.
    let snap = generate_alone(json!({}), &tproxy_dp(json!({})), Some(&dns));
    let doc = snap.to_document().unwrap();
    let filter = &doc[LISTENER]["kuma:dns"]["listenerFilters"][0]["typedConfig"];
    assert_eq!(filter["statPrefix"], "kuma_dns", "{filter}");
    assert!(filter["serverConfig"]["inlineDnsTable"]
        .get("virtualDomains")
        .is_none_or(|v| v.as_array().is_some_and(Vec::is_empty)));
    assert!(
        names(&doc, CLUSTER).is_empty(),
        "transparentProxying: {{}} has no redirect port: no passthrough"
    );
}

fn web_dns() -> DnsInput {
    DnsInput {
        port: 15054,
        domains: vec![
            ("backend.mesh".to_owned(), "240.0.0.0".to_owned()),
            ("httpbin.mesh".to_owned(), "240.0.0.1".to_owned()),
            ("elsewhere.mesh".to_owned(), "240.0.0.9".to_owned()),
        ],
    }
}

/// Generate `web` of `resources` with [`web_dns`].
fn web(resources: &[Resource]) -> Snapshot {
    let (mesh_name, mesh_spec) = resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) => Some((r.meta.name.clone(), m.clone())),
            _ => None,
        })
        .unwrap();
    let dps: Vec<&DataplaneSpec> = resources
        .iter()
        .filter(|r| r.ty() == ResourceType::Dataplane)
        .filter_map(Resource::as_dataplane)
        .collect();
    let ctx = MeshContext::build(&mesh_name, &mesh_spec, dps.iter().copied());
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "web")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let policies = PolicySet::build(&mesh_name, resources, View::Live);
    let dns = web_dns();
    generate(
        Proxy {
            name: "web",
            dataplane: dp,
            admin: None,
            dns: Some(&dns),
        },
        &ctx,
        &policies,
    )
    .unwrap()
}

/// The listeners of `doc` that are the DPP's inbounds and outbounds.
fn interface_listeners(doc: &Value) -> Vec<(&String, &Value)> {
    doc[LISTENER]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(n, _)| {
            (n.starts_with("inbound:") || n.starts_with("outbound:")) && !n.contains("passthrough")
        })
        .collect()
}

#[test]
fn a_sidecar_behind_iptables() {
    let resources = load("transparent-proxy.yaml");
    let snap = web(&resources);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    golden("transparent-proxy.web.json", &doc);

    // Every inbound and outbound listener leaves the port to iptables.
    let listeners = interface_listeners(&doc);
    assert_eq!(listeners.len(), 5, "2 inbounds, 3 outbounds");
    for (name, l) in listeners {
        assert_eq!(l["bindToPort"], false, "{name}");
    }
    // Direct access to backend's inbound, through iptables too.
    assert_eq!(
        doc[LISTENER]["direct_access_10.0.0.3:8080"]["bindToPort"],
        false
    );
    assert_eq!(doc[CLUSTER]["direct_access"]["type"], "ORIGINAL_DST");
    // The passthrough and DNS listeners bind.
    for name in [
        "inbound:passthrough:ipv4",
        "outbound:passthrough:ipv6",
        "kuma:dns",
    ] {
        assert!(doc[LISTENER][name].get("bindToPort").is_none(), "{name}");
    }
    // The workload on the DPP's address is reached from 127.0.0.6; the loopback one directly.
    assert_eq!(
        doc[CLUSTER]["localhost:8080"]["upstreamBindConfig"],
        json!({"sourceAddress": {"address": "127.0.0.6", "portValue": 0}})
    );
    assert!(doc[CLUSTER]["localhost:9090"]
        .get("upstreamBindConfig")
        .is_none());
    // DNS answers the VIPs of web's outbounds only.
    let domains = &doc[LISTENER]["kuma:dns"]["listenerFilters"][0]["typedConfig"]["serverConfig"]
        ["inlineDnsTable"]["virtualDomains"];
    let served: Vec<&str> = domains
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(served, ["backend.mesh", "httpbin.mesh"]);
    assert_eq!(
        domains[0]["endpoint"]["addressList"]["address"],
        json!(["240.0.0.0", "::ffff:f000:0"])
    );

    // backend (no transparentProxying): Envoy binds, no upstream bind, no passthrough, no DNS.
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "backend")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let ctx = MeshContext::build("default", &Default::default(), [dp]);
    let plain = generate(
        Proxy {
            name: "backend",
            dataplane: dp,
            admin: None,
            dns: Some(&web_dns()),
        },
        &ctx,
        &PolicySet::build("default", &resources, View::Live),
    )
    .unwrap()
    .to_document()
    .unwrap();
    assert_eq!(names(&plain, LISTENER), ["inbound:10.0.0.3:8080"]);
    assert!(plain[LISTENER]["inbound:10.0.0.3:8080"]
        .get("bindToPort")
        .is_none());
    assert!(plain[CLUSTER]["localhost:8080"]
        .get("upstreamBindConfig")
        .is_none());
}

/// `networking.outbound.passthrough: false`: the outbound passthrough clusters go, the
/// listeners stay (they drop what they accept), the inbound ones are untouched.
#[test]
fn passthrough_off_drops_only_the_outbound_clusters() {
    let mut resources = load("transparent-proxy.yaml");
    for r in &mut resources {
        if let umbra_core::resource::Spec::Mesh(m) = &mut r.spec {
            m.networking = Some(json!({"outbound": {"passthrough": false}}));
        }
    }
    let snap = web(&resources);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let clusters = names(&doc, CLUSTER);
    assert!(!clusters
        .iter()
        .any(|c| c.starts_with("outbound:passthrough")));
    assert!(clusters.contains(&"inbound:passthrough:ipv4".to_owned()));
    assert!(clusters.contains(&"inbound:passthrough:ipv6".to_owned()));
    for l in ["outbound:passthrough:ipv4", "outbound:passthrough:ipv6"] {
        assert!(doc[LISTENER].get(l).is_some(), "{l}");
    }
}

/// A MeshHTTPRoute rebuilds the outbounds in place: `bindToPort: false` stays, as on Kuma's
/// route-plugin listeners.
#[test]
fn mesh_http_route_outbounds_keep_bind_to_port() {
    let mut resources = load("transparent-proxy.yaml");
    resources.extend(
        Resource::all_from_bytes(
            b"type: MeshHTTPRoute\nmesh: default\nname: to-backend\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend, weight: 100}]\n",
        )
        .unwrap(),
    );
    let snap = web(&resources);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm =
        &doc[LISTENER]["outbound:240.0.0.0:80"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(
        hcm["normalizePath"], true,
        "rebuilt by the route plugin: {hcm}"
    );
    for (name, l) in interface_listeners(&doc) {
        assert_eq!(l["bindToPort"], false, "{name}");
    }
}

/// MeshProxyPatch sees the passthrough resources with origin `transparent`, the direct-access
/// ones with `direct-access` and the DNS listener with `dns`, not as inbound or outbound ones.
#[test]
fn mesh_proxy_patch_matches_kumas_origins() {
    let mut resources = load("transparent-proxy.yaml");
    resources.extend(
        Resource::all_from_bytes(
            b"type: MeshProxyPatch\nmesh: default\nname: origins\nspec:\n  targetRef: {kind: Mesh}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {origin: transparent}\n        value: 'connectTimeout: 9s'\n    - cluster:\n        operation: Patch\n        match: {origin: outbound}\n        value: 'connectTimeout: 8s'\n    - cluster:\n        operation: Patch\n        match: {origin: direct-access}\n        value: 'connectTimeout: 7s'\n    - listener:\n        operation: Patch\n        match: {origin: direct-access}\n        value: 'statPrefix: patched_direct'\n    - listener:\n        operation: Patch\n        match: {origin: dns}\n        value: 'statPrefix: patched_dns'\n    - listener:\n        operation: Patch\n        match: {origin: inbound}\n        value: 'statPrefix: patched_inbound'\n",
        )
        .unwrap(),
    );
    let snap = web(&resources);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    for (name, c) in doc[CLUSTER].as_object().unwrap() {
        let want = if name.contains("passthrough") {
            "9s"
        } else if name == "direct_access" {
            "7s"
        } else if name.starts_with("localhost:") {
            "10s"
        } else {
            "8s"
        };
        assert_eq!(c["connectTimeout"], want, "{name}");
    }
    for (name, l) in doc[LISTENER].as_object().unwrap() {
        let want = match name.as_str() {
            "kuma:dns" => json!("patched_dns"),
            "direct_access_10.0.0.3:8080" => json!("patched_direct"),
            n if n.starts_with("inbound:") && !n.contains("passthrough") => {
                json!("patched_inbound")
            }
            _ => Value::Null,
        };
        assert_eq!(
            l.get("statPrefix").cloned().unwrap_or(Value::Null),
            want,
            "{name}"
        );
    }
}

/// Kuma's `direct_access_proxy_generator_test.go` entries 03 (`*`, the outbound's endpoint
/// left out) and 04 (`backend` only): the `direct_access` cluster and one listener per other
/// DPP's inbound, equal field by field; with mesh mTLS the cluster verifies any service of the
/// mesh. Checked by the real Envoy.
#[test]
fn kuma_direct_access_goldens() {
    let others = [
        (
            "192.168.0.2",
            vec![(1234, "backend"), (1235, "backend-api")],
        ),
        ("192.168.0.3", vec![(1234, "backend")]),
        ("192.168.0.4", vec![(1234, "redis")]),
    ];
    let other_dps: Vec<DataplaneSpec> = others
        .iter()
        .map(|(address, inbounds)| {
            let inbound: Vec<Value> = inbounds
                .iter()
                .map(|(port, s)| json!({"port": port, "tags": {"kuma.io/service": s}}))
                .collect();
            serde_json::from_value(json!({"networking": {"address": address, "inbound": inbound}}))
                .unwrap()
        })
        .collect();
    let web = |services: Value| -> DataplaneSpec {
        serde_json::from_value(json!({"networking": {
            "address": "192.168.0.1",
            "inbound": [{"port": 1234, "tags": {"kuma.io/service": "web"}}],
            "outbound": [{"address": "192.168.0.4", "port": 1234, "tags": {"kuma.io/service": "redis"}}],
            "transparentProxying": {"redirectPortOutbound": 15001, "redirectPortInbound": 15006,
                                    "directAccessServices": services}}}))
        .unwrap()
    };
    let run = |mesh: Value, dp: &DataplaneSpec| -> Snapshot {
        let mesh_spec = serde_json::from_value(mesh).unwrap();
        let all = std::iter::once(dp).chain(other_dps.iter());
        let ctx = MeshContext::build("default", &mesh_spec, all);
        generate(
            Proxy {
                name: "web-1",
                dataplane: dp,
                admin: None,
                dns: None,
            },
            &ctx,
            &PolicySet::build("default", &[], View::Live),
        )
        .unwrap()
    };
    let direct = |doc: &Value| -> Vec<String> {
        let mut n = names(doc, CLUSTER);
        n.extend(names(doc, LISTENER));
        n.retain(|n| n.starts_with("direct_access"));
        n.sort();
        n
    };
    for (services, file) in [
        (json!(["*"]), "direct-access/03.envoy-config.golden.yaml"),
        (
            json!(["backend"]),
            "direct-access/04.envoy-config.golden.yaml",
        ),
    ] {
        let snap = run(json!({}), &web(services));
        envoy_validates(&snap);
        let doc = snap.to_document().unwrap();
        let golden = kuma_golden(file);
        assert_matches_kuma(&doc, &golden);
        let mut want: Vec<String> = golden.iter().map(|(n, _)| n.clone()).collect();
        want.sort();
        assert_eq!(direct(&doc), want, "{file}");
    }
    // No direct access without both redirect ports, or with an empty list.
    let mut no_inbound_port = web(json!(["*"]));
    no_inbound_port
        .networking
        .transparent_proxying
        .as_mut()
        .unwrap()
        .redirect_port_inbound = None;
    for dp in [web(json!([])), no_inbound_port] {
        assert!(direct(&run(json!({}), &dp).to_document().unwrap()).is_empty());
    }
    // Mesh mTLS: Kuma's UnknownDestinationClientSideMTLS.
    let mtls = json!({"mtls": {"enabledBackend": "ca-1", "backends": [{"name": "ca-1", "type": "builtin"}]}});
    let snap = run(mtls, &web(json!(["backend"])));
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let tls = &doc[CLUSTER]["direct_access"]["transportSocket"]["typedConfig"];
    assert!(tls.get("sni").is_none(), "no SNI: {tls}");
    let ctx = &tls["commonTlsContext"];
    assert_eq!(ctx["alpnProtocols"], json!(["kuma"]));
    assert_eq!(
        ctx["combinedValidationContext"]["defaultValidationContext"]["matchTypedSubjectAltNames"],
        json!([{"sanType": "URI", "matcher": {"prefix": "spiffe://default/"}}])
    );
}

/// Kuma's `transparent_proxy_generator_test.go` entry 03: the old TrafficLog chosen for the
/// `pass_through` service logs the outbound passthrough connections (both families), network
/// format, destination `external`. Kuma's test hands the generator the TrafficLog of a DPP
/// with no inbound and no address (`default (unknown)->` in the log line); a TrafficLog
/// selects a DPP by its inbounds, so here the DPP is `web` at 10.0.0.1, and the golden's
/// line reads `default 10.0.0.1(web)->`.
#[test]
fn kuma_transparent_proxy_golden_with_pass_through_log() {
    let dp: DataplaneSpec = serde_json::from_value(json!({"networking": {
        "address": "10.0.0.1",
        "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}],
        "transparentProxying": {"ipFamilyMode": "DualStack", "redirectPortOutbound": 15001,
                                "redirectPortInbound": 15006}}}))
    .unwrap();
    let with_log_path = |path: &str| -> Snapshot {
        let resources = Resource::all_from_bytes(
            format!(
                "type: Mesh\nname: default\nlogging:\n  backends:\n  - name: file\n    type: file\n    conf: {{path: {path}}}\n---\ntype: TrafficLog\nmesh: default\nname: pass-through\nsources: [{{match: {{kuma.io/service: '*'}}}}]\ndestinations: [{{match: {{kuma.io/service: pass_through}}}}]\nconf: {{backend: file}}\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let umbra_core::resource::Spec::Mesh(mesh) = &resources[0].spec else {
            unreachable!()
        };
        let ctx = MeshContext::build("default", mesh, [&dp]);
        generate(
            Proxy {
                name: "side-car",
                dataplane: &dp,
                admin: None,
                dns: None,
            },
            &ctx,
            &PolicySet::build("default", &resources, View::Live),
        )
        .unwrap()
    };
    let golden: Vec<(String, Value)> = kuma_golden("transparent-proxy/03.envoy.golden.yaml")
        .into_iter()
        .map(|(n, r)| {
            let text = r
                .to_string()
                .replace("default (unknown)", "default 10.0.0.1(web)");
            (n, serde_json::from_str(&text).unwrap())
        })
        .collect();
    let snap = with_log_path("/var/log");
    assert_matches_kuma(&snap.to_document().unwrap(), &golden);
    // Envoy opens the log file: the golden's `/var/log` is a directory.
    envoy_validates(&with_log_path("/dev/null"));
}

/// MeshAccessLog (Kuma's `applyToTransparentProxyListeners` and `applyToDirectAccess`): the
/// `to` rules for `pass_through` log the outbound passthrough (destination `external`) and
/// the direct-access listeners (destination the listener's name); a `to` rule for another
/// service does not reach them.
#[test]
fn mesh_access_log_reaches_the_pass_through_listeners() {
    let policy = |to: &str| {
        format!(
            "type: MeshAccessLog\nmesh: default\nname: log\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {to}\n    default:\n      backends:\n      - type: File\n        file:\n          path: /tmp/umbra-passthrough.log\n          format: {{type: Plain, plain: '%KUMA_DESTINATION_SERVICE% %KUMA_TRAFFIC_DIRECTION%'}}\n"
        )
    };
    let logs = |doc: &Value, listener: &str| -> Vec<String> {
        doc[LISTENER][listener]["filterChains"][0]["filters"][0]["typedConfig"]["accessLog"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| {
                l["typedConfig"]["logFormat"]["textFormatSource"]["inlineString"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    for (to, logged) in [
        ("{kind: Mesh}", true),
        ("{kind: MeshService, name: pass_through}", true),
        ("{kind: MeshService, name: httpbin}", false),
    ] {
        let mut resources = load("transparent-proxy.yaml");
        resources.extend(Resource::all_from_bytes(policy(to).as_bytes()).unwrap());
        let snap = web(&resources);
        envoy_validates(&snap);
        let doc = snap.to_document().unwrap();
        let want = |line: &str| {
            if logged {
                vec![line.to_owned()]
            } else {
                vec![]
            }
        };
        for l in ["outbound:passthrough:ipv4", "outbound:passthrough:ipv6"] {
            assert_eq!(logs(&doc, l), want("external OUTBOUND\n"), "{to} {l}");
        }
        assert_eq!(
            logs(&doc, "direct_access_10.0.0.3:8080"),
            want("direct_access_10.0.0.3:8080 OUTBOUND\n"),
            "{to}"
        );
        assert!(logs(&doc, "inbound:passthrough:ipv4").is_empty());
    }
}
