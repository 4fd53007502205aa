//! Gateways (issue 38, `tests/data/gateways.yaml`), as far as Umbra generates them today: a
//! delegated gateway in an mTLS mesh gets its outbounds over mTLS; a builtin gateway gets its
//! MeshGateway's HTTP listener routed by the MeshHTTPRoutes attached to it (per hostname, a
//! shadow route in the Shadow view only), an HTTPS listener terminating TLS with its Secret's
//! certificate, and a TCP listener routed by a MeshTCPRoute, with the MeshTimeout targeting
//! the MeshGateway on its routes and clusters; `tests/data/gateway-routes.yaml`: MeshGatewayRoutes
//! route it, convert to MeshHTTPRoutes that route it the same, and a MeshRateLimit limits it.
//! What it does not generate yet (an HTTPS listener whose Secret is missing, a
//! MeshTrafficPermission selecting it) is named under `notGenerated`, never silently dropped.
//! Every config is checked by the real Envoy.

use umbra_core::resource::Resource;
use umbra_core::view::{PolicySet, View};

mod common;
use common::{envoy_validates, golden, load, patch_within, snapshot};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RUNTIME: &str = "type.googleapis.com/envoy.service.runtime.v3.Runtime";

/// The service of a builtin gateway's cluster name (Kuma's `<service>-<16 hex>`, per host).
fn svc(name: &serde_json::Value) -> String {
    let name = name.as_str().unwrap_or_default();
    match name.rsplit_once('-') {
        Some((service, hash))
            if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            service.to_owned()
        }
        _ => name.to_owned(),
    }
}

/// A builtin gateway's (first) cluster of `service` in `doc` (`Null` when none).
fn cluster<'a>(doc: &'a serde_json::Value, service: &str) -> &'a serde_json::Value {
    doc[CLUSTER]
        .as_object()
        .and_then(|o| {
            o.iter()
                .find(|(n, _)| svc(&serde_json::json!(n)) == service)
                .map(|(_, c)| c)
        })
        .unwrap_or(&serde_json::Value::Null)
}

/// The services a gateway route's weighted clusters send to.
fn backends(action: &serde_json::Value) -> Vec<String> {
    action["weightedClusters"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| svc(&c["name"]))
        .collect()
}

/// The route configuration a gateway connection manager `hcm` names (served over RDS, as
/// Kuma serves a gateway's).
fn rds<'a>(doc: &'a serde_json::Value, hcm: &serde_json::Value) -> &'a serde_json::Value {
    let name = hcm["rds"]["routeConfigName"].as_str().unwrap_or_default();
    &doc["type.googleapis.com/envoy.config.route.v3.RouteConfiguration"][name]
}

fn not_generated(resources: &[Resource], dp: &str) -> Vec<(String, String)> {
    let dp = resources
        .iter()
        .find(|r| r.meta.name == dp)
        .and_then(Resource::as_dataplane)
        .unwrap();
    PolicySet::build("default", resources, View::Live)
        .not_generated(dp)
        .into_iter()
        .map(|n| (n.type_name, n.name))
        .collect()
}

#[test]
fn a_delegated_gateway_gets_its_outbounds_over_mtls() {
    let resources = load("gateways.yaml");
    let snap = snapshot(&resources, "edge", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    assert!(doc[LISTENER]
        .as_object()
        .unwrap()
        .contains_key("outbound:127.0.0.1:10001"));
    assert_eq!(
        doc[CLUSTER]["backend"]["transportSocket"]["typedConfig"]["sni"],
        "backend{mesh=default}"
    );
    assert!(
        not_generated(&resources, "edge").is_empty(),
        "nothing concerns a delegated gateway that Umbra leaves out"
    );
}

#[test]
fn a_builtin_gateway_listens_and_routes_by_its_meshhttproutes() {
    let resources = load("gateways.yaml");
    let live = snapshot(&resources, "ingress-gw", View::Live);
    let shadow = snapshot(&resources, "ingress-gw", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let doc = live.to_document().unwrap();
    let listener = &doc[LISTENER]["public:HTTP:8080"];
    assert_eq!(listener["address"]["socketAddress"]["address"], "127.0.0.4");
    assert_eq!(listener["trafficDirection"], "INBOUND");
    let hcm = &listener["filterChains"][0]["filters"][0]["typedConfig"];
    // Kuma's stat prefix: the gateway's service.
    assert_eq!(hcm["statPrefix"], "ingress-gw");
    assert_eq!(hcm["serverName"], "Kuma Gateway");
    let rc = rds(&doc, hcm);
    assert_eq!(rc["name"], "public:HTTP:8080:*");
    let hosts: Vec<&str> = rc["virtualHosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["api.example.com", "*"]);
    // `*`: the rule for every host; api.example.com: its own rule (exact and prefix) first,
    // then that one.
    let paths = |host: usize| -> Vec<String> {
        rc["virtualHosts"][host]["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["match"].to_string())
            .collect()
    };
    assert_eq!(paths(1), [r#"{"prefix":"/"}"#]);
    // MeshTimeout `public-timeout` (to: Mesh, requestTimeout 3s) on every route.
    assert_eq!(rc["virtualHosts"][1]["routes"][0]["route"]["timeout"], "3s");
    assert_eq!(paths(0).len(), 3, "{:?}", paths(0));
    assert!(paths(0)[0].contains("/v1"));
    assert_eq!(paths(0)[2], r#"{"prefix":"/"}"#);
    // The TCP listener proxies to the MeshTCPRoute's backend.
    let tcp = &doc[LISTENER]["public:TCP:9000"]["filterChains"][0]["filters"][0];
    assert_eq!(tcp["name"], "envoy.filters.network.tcp_proxy");
    assert_eq!(svc(&tcp["typedConfig"]["cluster"]), "backend");
    // The backend over the mesh's mTLS.
    assert_eq!(
        cluster(&doc, "backend")["transportSocket"]["typedConfig"]["sni"],
        "backend{mesh=default}"
    );
    // The shadow route adds its rule to `*`, nothing else.
    let patch = patch_within(&doc, &shadow.to_document().unwrap(), "/routes/");
    golden("gateway.ingress-gw.live.json", &doc);
    golden("gateway.ingress-gw.shadow-diff.json", &patch);
}

#[test]
fn an_https_listener_terminates_tls_with_its_certificate_per_hostname() {
    let resources = load("gateways.yaml");
    let snap = snapshot(&resources, "ingress-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let listener = &doc[LISTENER]["public:HTTPS:8443"];
    let chains = listener["filterChains"].as_array().unwrap();
    // Only api.example.com's: the `*` listener's Secret does not exist.
    assert_eq!(chains.len(), 1, "{listener:#}");
    assert_eq!(
        chains[0]["filterChainMatch"]["serverNames"],
        serde_json::json!(["api.example.com"])
    );
    let tls = &chains[0]["transportSocket"]["typedConfig"]["commonTlsContext"];
    assert_eq!(
        tls["tlsCertificateSdsSecretConfigs"][0]["name"],
        "cert.ecdsa:secret:api-cert"
    );
    assert_eq!(tls["alpnProtocols"], serde_json::json!(["h2", "http/1.1"]));
    let rc = rds(&doc, &chains[0]["filters"][0]["typedConfig"]);
    assert_eq!(rc["name"], "public:HTTPS:8443:api.example.com");
    assert_eq!(rc["virtualHosts"][0]["requireTls"], "ALL");
    // The certificate is served over SDS, and never in the config document.
    let secret = &snap.secrets["cert.ecdsa:secret:api-cert"];
    assert!(format!("{secret:?}").contains("BEGIN CERTIFICATE"));
    assert!(!doc.to_string().contains("PRIVATE KEY"));
}

#[test]
fn what_a_builtin_gateway_does_not_generate_is_named() {
    let resources = load("gateways.yaml");
    assert_eq!(
        not_generated(&resources, "ingress-gw"),
        [("MeshGateway".to_owned(), "public".to_owned())]
    );
    let reasons: Vec<String> = {
        let dp = resources
            .iter()
            .find(|r| r.meta.name == "ingress-gw")
            .and_then(Resource::as_dataplane)
            .unwrap();
        PolicySet::build("default", &resources, View::Live)
            .not_generated(dp)
            .into_iter()
            .map(|n| n.reason)
            .collect()
    };
    assert!(
        !reasons[0].contains("TCP 9000"),
        "routed by public-tcp: {reasons:?}"
    );
    assert!(
        reasons[0].contains(r#"HTTPS 8443: Secret "missing-cert" not found"#),
        "{reasons:?}"
    );
    assert!(!reasons[0].contains("api-cert"), "{reasons:?}");
    // A policy targeting the MeshGateway does not concern other DPPs.
    assert!(not_generated(&resources, "backend").is_empty());
    // A Mesh-wide MeshTrafficPermission (Kuma skips builtin gateways) selects the gateway too:
    // named, not applied. An old ProxyTemplate selecting it applies, after every plugin, as
    // on sidecars (its `imports` ignored there too): not named, its modification in the config.
    let mut more = resources.clone();
    more.extend(
        Resource::all_from_bytes(b"type: MeshTrafficPermission\nmesh: default\nname: everywhere\nspec:\n  targetRef: {kind: Mesh}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {action: Deny}\n---\ntype: ProxyTemplate\nmesh: default\nname: all\nselectors: [{match: {kuma.io/service: '*'}}]\nconf:\n  imports: [default-proxy]\n  modifications:\n  - cluster:\n      operation: add\n      value: |\n        name: added-by-template\n        connectTimeout: 5s\n        type: STATIC\n")
            .unwrap(),
    );
    let named = not_generated(&more, "ingress-gw");
    assert!(
        named.contains(&("MeshTrafficPermission".to_owned(), "everywhere".to_owned())),
        "{named:?}"
    );
    assert!(
        !named.iter().any(|(ty, _)| ty == "ProxyTemplate"),
        "{named:?}"
    );
    let snap = snapshot(&more, "ingress-gw", View::Live);
    envoy_validates(&snap);
    assert!(snap.clusters.contains_key("added-by-template"));
}

/// The route matches of virtual host `host` of route configuration `rc`, as JSON text.
fn matches_of(rc: &serde_json::Value, host: &str) -> Vec<String> {
    rc["virtualHosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == host)
        .unwrap_or_else(|| panic!("no virtual host {host} in {rc:#}"))["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["match"].to_string())
        .collect()
}

#[test]
fn mesh_gateway_routes_route_the_gateway_and_convert_to_the_same_routes() {
    let resources = load("gateway-routes.yaml");
    let live = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&live);
    let doc = live.to_document().unwrap();
    let rc = rds(
        &doc,
        &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"],
    );
    let hosts: Vec<&str> = rc["virtualHosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["shop.example.com", "*"]);
    // `*`: route `web` (its /api rule matches the path component exactly and as a prefix);
    // shop.example.com: `shop` (its listener's tag) and `web` (no hostnames: every host of a
    // listener it selects).
    assert_eq!(
        matches_of(rc, "*"),
        [
            r#"{"headers":[{"name":"x-team","stringMatch":{"exact":"blue"}}],"path":"/api"}"#,
            r#"{"headers":[{"name":"x-team","stringMatch":{"exact":"blue"}}],"prefix":"/api/"}"#,
            r#"{"prefix":"/"}"#,
        ]
    );
    assert_eq!(matches_of(rc, "shop.example.com")[0], r#"{"path":"/cart"}"#);
    assert_eq!(matches_of(rc, "shop.example.com").len(), 4);
    // Weighted backends per version, Kuma's gateway route defaults.
    let root = rc["virtualHosts"][1]["routes"][2]["route"].clone();
    assert_eq!(root["idleTimeout"], "5s");
    assert_eq!(root["clusterNotFoundResponseCode"], "INTERNAL_SERVER_ERROR");
    assert_eq!(
        root["weightedClusters"]["clusters"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{root:#}"
    );
    // The TCP listener proxies to the `db` route's backend.
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0];
    assert_eq!(svc(&tcp["typedConfig"]["cluster"]), "db");
    assert!(
        not_generated(&resources, "shop-gw").is_empty(),
        "{:?}",
        not_generated(&resources, "shop-gw")
    );
    golden("gateway.shop-gw.live.json", &doc);

    // Converted, the routes are MeshHTTPRoutes/MeshTCPRoutes targeting the MeshGateway (the
    // shop listener by its tag); in shadow, they route exactly as the MeshGatewayRoutes do.
    let conversions: Vec<_> = umbra_core::convert::convert(&resources, &Default::default())
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let outputs: Vec<Resource> = conversions.iter().flat_map(|c| c.outputs.clone()).collect();
    let targets: Vec<(String, String, serde_json::Value)> = outputs
        .iter()
        .map(|r| {
            let spec = r.spec_value();
            (
                r.ty().name().to_owned(),
                r.meta.name.clone(),
                spec["targetRef"].clone(),
            )
        })
        .collect();
    assert_eq!(
        targets,
        [
            (
                "MeshHTTPRoute".to_owned(),
                "web".to_owned(),
                serde_json::json!({"kind": "MeshGateway", "name": "shop"})
            ),
            (
                "MeshHTTPRoute".to_owned(),
                "shop".to_owned(),
                serde_json::json!({"kind": "MeshGateway", "name": "shop", "tags": {"site": "shop"}})
            ),
            (
                "MeshTCPRoute".to_owned(),
                "db".to_owned(),
                serde_json::json!({"kind": "MeshGateway", "name": "shop"})
            ),
        ]
    );
    let mut with_shadow = resources.clone();
    with_shadow.extend(outputs);
    let shadow = snapshot(&with_shadow, "shop-gw", View::Shadow);
    envoy_validates(&shadow);
    // The same routes; Kuma names the Envoy routes of MeshHTTPRoutes (by their matches) and
    // not those of MeshGatewayRoutes, so the names are all that changes.
    only_route_names_added(&doc, &shadow.to_document().unwrap());
    // Only the new routes in place (the MeshGatewayRoutes deleted): the same config still.
    let promoted: Vec<Resource> = with_shadow
        .into_iter()
        .filter(|r| r.ty() != umbra_core::resource::ResourceType::MeshGatewayRoute)
        .map(|mut r| {
            r.meta.labels.remove("kuma.io/effect");
            r
        })
        .collect();
    only_route_names_added(
        &doc,
        &snapshot(&promoted, "shop-gw", View::Live)
            .to_document()
            .unwrap(),
    );
}

/// `after` is `before` with names added to Envoy routes, and nothing else.
fn only_route_names_added(before: &serde_json::Value, after: &serde_json::Value) {
    let patch = serde_json::to_value(json_patch::diff(before, after)).unwrap();
    let ops = patch.as_array().unwrap();
    assert!(!ops.is_empty(), "the converted routes are named");
    for op in ops {
        let path = op["path"].as_str().unwrap_or_default();
        assert!(
            op["op"] == "add" && path.contains("/routes/") && path.ends_with("/name"),
            "{op:#}"
        );
    }
}

#[test]
fn a_mesh_rate_limit_on_the_gateway_limits_its_routes() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshRateLimit\nmesh: default\nname: gateway-limit\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      local:\n        http: {requestRate: {num: 2, interval: 10s}, onRateLimit: {status: 429}}\n        tcp: {connectionRate: {num: 5, interval: 1s}}\n---\ntype: MeshRateLimit\nmesh: default\nname: sidecars\nspec:\n  targetRef: {kind: Mesh, proxyTypes: [Sidecar]}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {local: {http: {requestRate: {num: 1, interval: 1s}}}}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let chain = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0];
    let filters: Vec<&str> = chain["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        filters,
        [
            "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
            "envoy.filters.network.http_connection_manager"
        ]
    );
    let hcm = &chain["filters"][1]["typedConfig"];
    let http: Vec<&str> = hcm["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        http,
        [
            "envoy.filters.http.local_ratelimit",
            "gzip-compress",
            "envoy.filters.http.router"
        ]
    );
    // Every route of every virtual host: 2 requests per 10s, then 429.
    for vh in rds(&doc, hcm)["virtualHosts"].as_array().unwrap() {
        for r in vh["routes"].as_array().unwrap() {
            let limit = &r["typedPerFilterConfig"]["envoy.filters.http.local_ratelimit"];
            assert_eq!(limit["tokenBucket"]["maxTokens"], 2, "{r:#}");
            assert_eq!(limit["status"]["code"], "TooManyRequests", "{r:#}");
        }
    }
    // Only the MeshGateway's one: the Sidecar-only policy selects nothing here.
    assert!(!doc.to_string().contains(r#""maxTokens":1"#));
    assert!(
        not_generated(&resources, "shop-gw").is_empty(),
        "{:?}",
        not_generated(&resources, "shop-gw")
    );
    // The gateway's config depends on it (a change regenerates the gateway).
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "shop-gw")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let set = PolicySet::build("default", &resources, View::Live);
    let deps = umbra_core::dependencies::dependencies(dp, &set);
    assert!(deps.policies.iter().any(|d| d.name == "gateway-limit"));
    assert!(!deps.policies.iter().any(|d| d.name == "sidecars"));
}

#[test]
fn a_mesh_timeout_from_rule_sets_the_gateway_listeners_timeouts() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshTimeout\nmesh: default\nname: listeners\nspec:\n  targetRef: {kind: Mesh}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 20s, http: {streamIdleTimeout: 7s}}\n  to:\n  - targetRef: {kind: MeshService, name: api}\n    default: {connectionTimeout: 2s, http: {requestTimeout: 9s}}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(hcm["commonHttpProtocolOptions"]["idleTimeout"], "20s");
    assert_eq!(hcm["streamIdleTimeout"], "7s");
    assert_eq!(hcm["requestHeadersTimeout"], "0.500s");
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(tcp["idleTimeout"], "20s");
    // `to` names a service, not the Mesh: no route conf; the api cluster gets its timeouts.
    let route = &rds(&doc, hcm)["virtualHosts"][1]["routes"][0]["route"];
    assert_eq!(backends(route), ["api"]);
    assert!(route.get("timeout").is_none(), "{route:#}");
    assert_eq!(cluster(&doc, "api")["connectTimeout"], "2s");
    assert_eq!(cluster(&doc, "db")["connectTimeout"], "5s");
}

#[test]
fn retries_circuit_breakers_and_health_checks_apply_to_the_gateway() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshRetry\nmesh: default\nname: gw-retry\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      http: {numRetries: 4, retryOn: [5xx]}\n      tcp: {maxConnectAttempt: 3}\n---\ntype: MeshCircuitBreaker\nmesh: default\nname: gw-cb\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: MeshService, name: api}\n    default: {connectionLimits: {maxConnections: 7}}\n---\ntype: MeshHealthCheck\nmesh: default\nname: gw-hc\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {interval: 10s, timeout: 2s, unhealthyThreshold: 3, healthyThreshold: 1, http: {path: /health}, tcp: {}}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    for vh in rds(&doc, hcm)["virtualHosts"].as_array().unwrap() {
        for r in vh["routes"].as_array().unwrap() {
            assert_eq!(r["route"]["retryPolicy"]["numRetries"], 4, "{r:#}");
            assert_eq!(r["route"]["retryPolicy"]["retryOn"], "5xx", "{r:#}");
        }
    }
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(tcp["maxConnectAttempts"], 3);
    // The circuit breaker names one service: its cluster only.
    assert_eq!(
        cluster(&doc, "api")["circuitBreakers"]["thresholds"][0]["maxConnections"],
        7
    );
    assert!(cluster(&doc, "db").get("circuitBreakers").is_none());
    // HTTP listeners' backends get the HTTP check, the TCP listener's a TCP one.
    let hc = |c: &str| cluster(&doc, c)["healthChecks"][0].clone();
    assert_eq!(
        hc("api")["httpHealthCheck"]["path"],
        "/health",
        "{:#}",
        hc("api")
    );
    assert!(hc("db").get("tcpHealthCheck").is_some(), "{:#}", hc("db"));
    assert_eq!(
        cluster(&doc, "api")["healthChecks"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "one check per cluster, not one per listener"
    );
    assert!(
        not_generated(&resources, "shop-gw").is_empty(),
        "{:?}",
        not_generated(&resources, "shop-gw")
    );
}

#[test]
fn tls_listeners_pass_through_or_terminate_by_sni() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        load("gateways.yaml")
            .into_iter()
            .filter(|r| r.meta.name == "api-cert"),
    );
    resources.extend(
        Resource::all_from_bytes(b"type: Dataplane\nmesh: default\nname: tls-gw\nnetworking:\n  address: 127.0.0.7\n  gateway: {type: BUILTIN, tags: {kuma.io/service: tls-gw}}\n---\ntype: MeshGateway\nmesh: default\nname: tls\nselectors:\n- match: {kuma.io/service: tls-gw}\nconf:\n  listeners:\n  - {port: 9443, protocol: TLS, hostname: db.example.com, tls: {mode: PASSTHROUGH}}\n  - {port: 9444, protocol: TLS, tls: {mode: TERMINATE, certificates: [{secret: api-cert}]}}\n---\ntype: MeshTCPRoute\nmesh: default\nname: tls-db\nspec:\n  targetRef: {kind: MeshGateway, name: tls}\n  to:\n  - targetRef: {kind: Mesh}\n    rules:\n    - default:\n        backendRefs: [{kind: MeshService, name: db}]\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "tls-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let passthrough = &doc[LISTENER]["tls:TLS:9443"]["filterChains"][0];
    assert_eq!(
        passthrough["filterChainMatch"],
        serde_json::json!({"serverNames": ["db.example.com"], "transportProtocol": "tls"})
    );
    assert!(
        passthrough.get("transportSocket").is_none(),
        "{passthrough:#}"
    );
    assert_eq!(
        svc(&passthrough["filters"][0]["typedConfig"]["cluster"]),
        "db"
    );
    let terminated = &doc[LISTENER]["tls:TLS:9444"]["filterChains"][0];
    assert_eq!(
        terminated["filterChainMatch"],
        serde_json::json!({"transportProtocol": "tls"})
    );
    let tls = &terminated["transportSocket"]["typedConfig"]["commonTlsContext"];
    assert_eq!(
        tls["tlsCertificateSdsSecretConfigs"][0]["name"],
        "cert.ecdsa:secret:api-cert"
    );
    assert!(tls.get("alpnProtocols").is_none(), "{tls:#}");
    assert_eq!(
        svc(&terminated["filters"][0]["typedConfig"]["cluster"]),
        "db"
    );
    assert!(
        not_generated(&resources, "tls-gw").is_empty(),
        "{:?}",
        not_generated(&resources, "tls-gw")
    );
}

#[test]
fn old_connection_policies_apply_per_listener_and_backend() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: Timeout\nmesh: default\nname: gw-to-api\nsources: [{match: {kuma.io/service: shop-gw}}]\ndestinations: [{match: {kuma.io/service: api}}]\nconf: {connectTimeout: 3s, http: {requestTimeout: 4s}}\n---\ntype: Retry\nmesh: default\nname: all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {http: {numRetries: 2}, tcp: {maxConnectAttempts: 4}}\n---\ntype: CircuitBreaker\nmesh: default\nname: web-v2\nsources: [{match: {kuma.io/service: shop-gw}}]\ndestinations: [{match: {kuma.io/service: web, version: v2}}]\nconf: {thresholds: {maxConnections: 9}}\n---\ntype: FaultInjection\nmesh: default\nname: faults\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: shop-gw}}]\nconf: {abort: {httpStatus: 500, percentage: 50}}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let rc = rds(
        &doc,
        &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"],
    );
    for vh in rc["virtualHosts"].as_array().unwrap() {
        for r in vh["routes"].as_array().unwrap() {
            let action = &r["route"];
            assert_eq!(action["retryPolicy"]["numRetries"], 2, "{r:#}");
            // The Timeout names api only: its routes get its request timeout.
            let to_api = backends(action) == ["api"];
            assert_eq!(action.get("timeout").is_some(), to_api, "{r:#}");
            if to_api {
                assert_eq!(action["timeout"], "4s");
            }
        }
    }
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(tcp["maxConnectAttempts"], 4);
    assert_eq!(cluster(&doc, "api")["connectTimeout"], "3s");
    assert_eq!(cluster(&doc, "db")["connectTimeout"], "5s");
    // The CircuitBreaker names version v2: the v2 subset's cluster only.
    let clusters = doc[CLUSTER].as_object().unwrap();
    let with_breaker: Vec<&String> = clusters
        .iter()
        .filter(|(_, c)| c.get("circuitBreakers").is_some())
        .map(|(n, _)| n)
        .collect();
    // One v2 cluster per host the route reaches it from (Kuma's per-host clusters).
    assert!(!with_breaker.is_empty(), "{with_breaker:?}");
    for name in &with_breaker {
        let eds = &doc["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"]
            [name.as_str()];
        assert!(
            eds.to_string().contains("127.0.0.3") && !eds.to_string().contains("127.0.0.2"),
            "the v2 endpoint only: {eds}"
        );
    }
    // Kuma applies no FaultInjection to builtin gateways: named, with why.
    assert_eq!(
        not_generated(&resources, "shop-gw"),
        [("FaultInjection".to_owned(), "faults".to_owned())]
    );
}

#[test]
fn a_mesh_fault_injection_on_the_gateway_adds_its_faults() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshFaultInjection\nmesh: default\nname: gw-faults\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      http:\n      - abort: {httpStatus: 503, percentage: 10}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    let names: Vec<&str> = hcm["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.http.local_ratelimit",
            "gzip-compress",
            "envoy.filters.http.fault",
            "envoy.filters.http.router"
        ]
    );
    assert_eq!(
        hcm["httpFilters"][2]["typedConfig"]["abort"]["httpStatus"],
        503
    );
    // Not on the TCP listener.
    assert!(!doc[LISTENER]["shop:TCP:9000"].to_string().contains("fault"));
    assert!(not_generated(&resources, "shop-gw").is_empty());
}

/// Kuma's `connection-limited-listener` case, extended: a listener's
/// `resources.connectionLimit` becomes the key of the RTDS Runtime `gateway.listeners` for the
/// listener of its port (the port's first listener decides, as Kuma's `listeners[0]`); a port
/// without one, or with 0, gets no key; a cross-mesh listener is not generated and is named.
#[test]
fn listener_connection_limits_go_to_the_rtds_runtime_and_cross_mesh_listeners_are_named() {
    let mut resources: Vec<Resource> = load("gateway-routes.yaml")
        .into_iter()
        .filter(|r| {
            r.meta.name != "shop" || r.ty() != umbra_core::resource::ResourceType::MeshGateway
        })
        .collect();
    resources.extend(
        Resource::all_from_bytes(b"type: MeshGateway\nmesh: default\nname: shop\nselectors:\n- match: {kuma.io/service: shop-gw}\nconf:\n  listeners:\n  - {port: 8080, protocol: HTTP, hostname: a.test, resources: {connectionLimit: 100}}\n  - {port: 8080, protocol: HTTP, hostname: b.test, resources: {connectionLimit: 5}}\n  - {port: 8082, protocol: HTTP, resources: {connectionLimit: '0'}}\n  - {port: 8083, protocol: HTTP, resources: {connectionLimit: '7'}}\n  - {port: 8081, protocol: HTTP, crossMesh: true}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    assert!(doc[LISTENER].get("shop:HTTP:8080").is_some());
    assert!(
        doc[LISTENER].get("shop:HTTP:8081").is_none(),
        "a cross-mesh listener is not generated"
    );
    assert_eq!(
        doc[RUNTIME],
        serde_json::json!({"gateway.listeners": {
            "name": "gateway.listeners",
            "layer": {
                "envoy.resource_limits.listener.shop:HTTP:8080.connection_limit": 100.0,
                "envoy.resource_limits.listener.shop:HTTP:8083.connection_limit": 7.0,
            },
        }})
    );
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "shop-gw")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let named = PolicySet::build("default", &resources, View::Live).not_generated(dp);
    let reason = &named
        .iter()
        .find(|n| n.type_name == "MeshGateway")
        .expect("the MeshGateway is named")
        .reason;
    assert!(!reason.contains("connectionLimit"), "{reason}");
    assert!(reason.contains("HTTP 8081: crossMesh"), "{reason}");

    // No MeshGateway selects it: the Runtime is still served (its Envoy waits for it), empty.
    let alone: Vec<Resource> = resources
        .into_iter()
        .filter(|r| r.ty() != umbra_core::resource::ResourceType::MeshGateway)
        .collect();
    let doc = snapshot(&alone, "shop-gw", View::Live)
        .to_document()
        .unwrap();
    assert_eq!(
        doc[RUNTIME],
        serde_json::json!({"gateway.listeners": {"name": "gateway.listeners", "layer": {}}})
    );
}

#[test]
fn inline_certificates_are_read_and_file_ones_named() {
    let mut resources = load("gateway-routes.yaml");
    let data = load("gateways.yaml")
        .into_iter()
        .find(|r| r.meta.name == "api-cert")
        .map(|r| r.spec_value()["data"].as_str().unwrap().to_owned())
        .unwrap();
    resources.extend(
        Resource::all_from_bytes(format!("type: Dataplane\nmesh: default\nname: tls-gw\nnetworking:\n  address: 127.0.0.7\n  gateway: {{type: BUILTIN, tags: {{kuma.io/service: tls-gw}}}}\n---\ntype: MeshGateway\nmesh: default\nname: tls\nselectors:\n- match: {{kuma.io/service: tls-gw}}\nconf:\n  listeners:\n  - {{port: 9443, protocol: HTTPS, hostname: x.example.com, tls: {{certificates: [{{inline: {data}}}]}}}}\n  - {{port: 9444, protocol: HTTPS, hostname: y.example.com, tls: {{certificates: [{{file: /etc/certs/y.pem}}]}}}}\n").as_bytes())
            .unwrap(),
    );
    let snap = snapshot(&resources, "tls-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let chain = &doc[LISTENER]["tls:HTTPS:9443"]["filterChains"][0];
    assert_eq!(
        chain["transportSocket"]["typedConfig"]["commonTlsContext"]
            ["tlsCertificateSdsSecretConfigs"][0]["name"],
        "cert.ecdsa:inline:x.example.com"
    );
    assert!(snap.secrets.contains_key("cert.ecdsa:inline:x.example.com"));
    assert!(doc[LISTENER].get("tls:HTTPS:9444").is_none());
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "tls-gw")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let named = PolicySet::build("default", &resources, View::Live).not_generated(dp);
    let reason = &named
        .iter()
        .find(|n| n.type_name == "MeshGateway")
        .unwrap()
        .reason;
    assert!(
        reason.contains("HTTPS 9444: a certificate from file"),
        "{reason}"
    );
    assert!(!reason.contains("9443"), "{reason}");
}

#[test]
fn a_mesh_access_log_on_the_gateway_logs_its_listeners() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshAccessLog\nmesh: default\nname: gw-log\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: Mesh}\n    default:\n      backends:\n      - type: File\n        file: {path: /tmp/gw.log}\n      - type: OpenTelemetry\n        openTelemetry: {endpoint: 'otel-collector:4317'}\n      - type: Tcp\n        tcp: {address: 'logs:9000'}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    let logs = hcm["accessLog"].as_array().unwrap();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(logs[0]["typedConfig"]["path"], "/tmp/gw.log");
    let text = logs[0].to_string();
    assert!(
        text.contains("shop-gw") && !text.contains("%KUMA_SOURCE_SERVICE%"),
        "{text}"
    );
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(tcp["accessLog"].as_array().unwrap().len(), 2);
    assert!(doc[CLUSTER]
        .as_object()
        .unwrap()
        .contains_key("meshaccesslog:opentelemetry:0"));
    // Its Tcp backend is not generated, and named.
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "shop-gw")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let named = PolicySet::build("default", &resources, View::Live).not_generated(dp);
    assert_eq!(named.len(), 1, "{named:?}");
    assert!(
        named[0].reason.contains("Tcp logging backends"),
        "{named:?}"
    );
}

#[test]
fn mesh_trace_and_mesh_proxy_patch_apply_to_the_gateway() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshTrace\nmesh: default\nname: gw-trace\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  default:\n    backends:\n    - type: Zipkin\n      zipkin: {url: 'http://jaeger-collector:9411/api/v2/spans'}\n---\ntype: MeshProxyPatch\nmesh: default\nname: gw-patch\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Add\n        value: |\n          name: test-cluster\n          connectTimeout: 5s\n          type: STATIC\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert!(hcm["tracing"]["provider"].is_object(), "{hcm:#}");
    assert!(doc[CLUSTER]
        .as_object()
        .unwrap()
        .contains_key("test-cluster"));
    assert!(
        not_generated(&resources, "shop-gw").is_empty(),
        "{:?}",
        not_generated(&resources, "shop-gw")
    );
    // A sidecar is not selected by them.
    let web = snapshot(&resources, "web-v1", View::Live)
        .to_document()
        .unwrap();
    assert!(!web[CLUSTER]
        .as_object()
        .unwrap()
        .contains_key("test-cluster"));
}

#[test]
fn a_mesh_load_balancing_strategy_on_the_gateway_configures_its_backends() {
    let mut resources = load("gateway-routes.yaml");
    resources.extend(
        Resource::all_from_bytes(b"type: MeshLoadBalancingStrategy\nmesh: default\nname: gw-lb\nspec:\n  targetRef: {kind: MeshGateway, name: shop}\n  to:\n  - targetRef: {kind: MeshService, name: api}\n    default:\n      loadBalancer:\n        type: RingHash\n        ringHash:\n          hashPolicies:\n          - type: Header\n            header: {name: x-user}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    assert_eq!(cluster(&doc, "api")["lbPolicy"], "RING_HASH");
    assert!(cluster(&doc, "db").get("lbPolicy").is_none());
    let rc = rds(
        &doc,
        &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"],
    );
    for vh in rc["virtualHosts"].as_array().unwrap() {
        for r in vh["routes"].as_array().unwrap() {
            let to_api = backends(&r["route"]) == ["api"];
            assert_eq!(r["route"].get("hashPolicy").is_some(), to_api, "{r:#}");
        }
    }
    assert!(not_generated(&resources, "shop-gw").is_empty());
}

#[test]
fn an_old_traffic_log_and_traffic_trace_apply_to_the_gateway_listeners() {
    let mut resources: Vec<Resource> = load("gateway-routes.yaml")
        .into_iter()
        .filter(|r| r.ty() != umbra_core::resource::ResourceType::Mesh)
        .collect();
    resources.extend(
        Resource::all_from_bytes(b"type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\ntracing:\n  defaultBackend: zipkin\n  backends:\n  - name: zipkin\n    type: zipkin\n    conf: {url: 'http://zipkin:9411/api/v2/spans'}\nlogging:\n  defaultBackend: file\n  backends:\n  - name: file\n    type: file\n    format: '%KUMA_SOURCE_SERVICE%->%KUMA_DESTINATION_SERVICE% %KUMA_TRAFFIC_DIRECTION%'\n    conf: {path: /tmp/access.log}\n---\ntype: TrafficLog\nmesh: default\nname: all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\n---\ntype: TrafficTrace\nmesh: default\nname: all\nselectors: [{match: {kuma.io/service: '*'}}]\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let hcm = &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(hcm["tracing"]["spawnUpstreamSpan"], true, "{hcm:#}");
    let text = hcm["accessLog"].to_string();
    assert!(text.contains("shop-gw->* INBOUND"), "{text}");
    let tcp = &doc[LISTENER]["shop:TCP:9000"]["filterChains"][0]["filters"][0]["typedConfig"];
    assert!(tcp["accessLog"].to_string().contains("/tmp/access.log"));
    assert!(not_generated(&resources, "shop-gw").is_empty());
}

#[test]
fn gateway_redirects_drop_the_query_and_a_lone_backend_needs_no_weight() {
    let mut resources: Vec<Resource> = load("gateway-routes.yaml")
        .into_iter()
        .filter(|r| r.ty() != umbra_core::resource::ResourceType::MeshGatewayRoute)
        .collect();
    resources.extend(
        Resource::all_from_bytes(b"type: MeshGatewayRoute\nmesh: default\nname: web\nselectors:\n- match: {kuma.io/service: shop-gw}\nconf:\n  http:\n    rules:\n    - matches: [{path: {match: EXACT, value: /old}}]\n      filters:\n      - redirect: {scheme: https, hostname: new.example.com, statusCode: 301}\n    - matches: [{path: {match: PREFIX, value: /}}]\n      backends:\n      - destination: {kuma.io/service: web}\n")
            .unwrap(),
    );
    let snap = snapshot(&resources, "shop-gw", View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let rc = rds(
        &doc,
        &doc[LISTENER]["shop:HTTP:8080"]["filterChains"][0]["filters"][0]["typedConfig"],
    );
    let routes = rc["virtualHosts"][1]["routes"].as_array().unwrap();
    let redirect = routes
        .iter()
        .find(|r| r["match"]["path"] == "/old")
        .unwrap_or_else(|| panic!("{rc:#}"));
    assert_eq!(redirect["redirect"]["stripQuery"], true, "{redirect:#}");
    assert_eq!(redirect["redirect"]["hostRedirect"], "new.example.com");
    let root = routes
        .iter()
        .find(|r| r["match"]["prefix"] == "/")
        .unwrap_or_else(|| panic!("{rc:#}"));
    assert_eq!(backends(&root["route"]), ["web"], "{root:#}");
}
