//! Kuma 2.7.29's builtin gateway goldens replayed against Umbra's generation (issue 38, item 6).
//!
//! `tests/data/kuma-gateway/` holds, verbatim from Kuma's `pkg/plugins/runtime/gateway`, the
//! inputs of `listener_generator_test.go` and `gateway_route_generator_test.go` (each `Entry`'s
//! inline resources and the defaults it deletes: `listener-cases.yaml`, `route-cases.yaml`),
//! the fixtures their suites store (`fixtures/`) and the golden snapshot each case produces
//! (`listener/`, `http/`, `https/`, `tcp/`, `tls/`). Each case is rebuilt as Kuma's suite
//! builds it (the context's fixtures, the Mesh's default policies, the suite's generated
//! service Dataplanes, then the case's resources, later ones replacing earlier ones of the same
//! type, mesh and name), Umbra generates the gateway Dataplane `default`, and the result is
//! compared with Kuma's golden.

use std::path::PathBuf;

use serde_json::{json, Value};
use umbra_core::codec::{decode_documents, decode_one, Limits};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, Proxy};

mod common;

fn data(path: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kuma-gateway")
        .join(path);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One `Entry` of Kuma's tables.
struct Case {
    name: String,
    golden: String,
    contexts: Vec<String>,
    resources: Vec<String>,
    without: Vec<(String, String, String)>,
}

fn cases(file: &str) -> Vec<Case> {
    let doc = decode_one(&data(file), Limits::local_file()).unwrap();
    doc.as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["case"].as_str().unwrap().to_owned(),
            golden: c["golden"].as_str().unwrap().to_owned(),
            contexts: c["contexts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect(),
            resources: c["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect(),
            without: c["without"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| {
                    (
                        w["type"].as_str().unwrap().to_owned(),
                        w["mesh"].as_str().unwrap().to_owned(),
                        w["name"].as_str().unwrap().to_owned(),
                    )
                })
                .collect(),
        })
        .collect()
}

/// The fixtures each context stores before its case (Kuma's `BeforeEach`, then
/// `JustBeforeEach`), in order.
fn fixtures(context: &str) -> Vec<&'static str> {
    match context {
        "gateway" => vec![
            "mesh-default.yaml",
            "dataplane-default.yaml",
            "mesh-tracing.yaml",
            "dataplane-tracing.yaml",
            "traffictrace.yaml",
            "mesh-logging.yaml",
            "dataplane-logging.yaml",
            "trafficlog.yaml",
            "secret-server-certificate.yaml",
        ],
        "http" => vec![
            "mesh-default.yaml",
            "dataplane-default.yaml",
            "gateway-http-multihost.yaml",
            "gateway-http-default.yaml",
        ],
        "https" => vec![
            "mesh-default.yaml",
            "dataplane-default.yaml",
            "gateway-https-multihost.yaml",
            "gateway-https-default.yaml",
            "secret-https-default.yaml",
        ],
        "tcp" => vec!["mesh-default.yaml", "dataplane-default.yaml"],
        "tls" => vec![
            "mesh-default.yaml",
            "dataplane-default.yaml",
            "secret-https-default.yaml",
        ],
        other => panic!("unknown context {other}"),
    }
}

/// The services the route suite gives a Dataplane each (Kuma's `DataplaneGenerator`: addresses
/// from 192.168.1.0/24 after the reserved first, ports from 20001, tags `kuma.io/service` and
/// `kuma.io/protocol: http`).
const SERVICES: &[&str] = &[
    "api-service",
    "echo-exact",
    "echo-mirror",
    "echo-prefix",
    "echo-regex",
    "echo-service",
    "exact-header-match",
    "exact-query-match",
    "exact-service",
    "prefix-service",
    "regex-header-match",
    "regex-query-match",
    "present-header-match",
    "absent-header-match",
];

fn key(r: &Resource) -> (ResourceType, String, String) {
    (r.ty(), r.meta.mesh.clone(), r.meta.name.clone())
}

/// The store of `case` in `context`, as Kuma's suite leaves it.
fn store(context: &str, case: &Case) -> Vec<Resource> {
    let mut docs: Vec<Vec<u8>> = fixtures(context)
        .iter()
        .map(|f| data(&format!("fixtures/{f}")))
        .collect();
    if context != "gateway" {
        for (i, service) in SERVICES.iter().enumerate() {
            let port = 20001 + i;
            docs.push(
                format!("type: Dataplane\nmesh: default\nname: {service}-0\nnetworking:\n  address: 192.168.1.{}\n  inbound:\n  - port: {port}\n    servicePort: {port}\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n", i + 1)
                    .into_bytes(),
            );
        }
    }
    docs.extend(case.resources.iter().map(|r| r.clone().into_bytes()));
    let mut out: Vec<Resource> = Vec::new();
    for doc in docs {
        for r in Resource::all_from_bytes(&doc).unwrap_or_else(|e| panic!("{}: {e}", case.name)) {
            if let umbra_core::resource::Spec::Mesh(spec) = &r.spec {
                let defaults = umbra_core::defaults::mesh_defaults(&r.meta.name, spec);
                out.retain(|o| key(o) != key(&r));
                out.push(r);
                for d in defaults {
                    out.retain(|o| key(o) != key(&d));
                    out.push(d);
                }
                continue;
            }
            out.retain(|o| key(o) != key(&r));
            out.push(r);
        }
    }
    out.retain(|r| {
        !case
            .without
            .iter()
            .any(|(t, m, n)| r.ty().name() == t && &r.meta.mesh == m && &r.meta.name == n)
    });
    out
}

/// Umbra's snapshot of the gateway Dataplane `default` (of the case's MeshGateway's mesh), as
/// a Kuma golden: `{Clusters, Endpoints, Listeners, Routes, Runtimes, Secrets}`, each
/// `{Resources: {name: proto3 JSON}}`.
fn umbra(store: &[Resource], mesh: &str) -> (umbra_xds::snapshot::Snapshot, Value) {
    let mesh_spec = store
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) if r.meta.name == mesh => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    let in_mesh: Vec<Resource> = store
        .iter()
        .filter(|r| r.meta.mesh == mesh || r.meta.name == mesh && r.ty() == ResourceType::Mesh)
        .cloned()
        .collect();
    let dps = in_mesh
        .iter()
        .filter(|r| r.ty() == ResourceType::Dataplane)
        .filter_map(Resource::as_dataplane);
    let mut ctx = MeshContext::build(mesh, &mesh_spec, dps);
    // The zone's egresses, as the zone gives them (its `egress::addresses`).
    let mut egresses: Vec<umbra_xds::context::EgressAddress> = store
        .iter()
        .filter_map(Resource::as_zone_egress)
        .filter(|ze| !ze.networking.address.is_empty() && ze.networking.port != 0)
        .map(|ze| umbra_xds::context::EgressAddress {
            address: ze.networking.address.clone(),
            port: ze.networking.port,
        })
        .collect();
    egresses.sort();
    egresses.dedup();
    ctx.route_through_egress(&egresses);
    let dp = in_mesh
        .iter()
        .find(|r| r.ty() == ResourceType::Dataplane && r.meta.name == "default")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let policies = PolicySet::build(mesh, &in_mesh, View::Live);
    let snap = generate(
        Proxy {
            name: "default",
            dataplane: dp,
            admin: None,
            dns: None,
        },
        &ctx,
        &policies,
    )
    .unwrap();
    // The zone adds the mesh's identity and CA secrets when it serves a DPP whose config uses
    // them; here with Kuma's test values (`xds.TestSecrets`: `CERT`, `KEY`, `CA`).
    let mut snap = snap;
    let uses_identity = snap
        .to_document()
        .unwrap()
        .to_string()
        .contains(&format!("identity_cert:secret:{mesh}"));
    if uses_identity {
        for secret in umbra_xds::generate::mesh_secrets(mesh, b"CERT", b"KEY", b"CA") {
            snap.secrets.insert(secret.name.clone(), secret.into());
        }
    }
    let doc = snap.to_document().unwrap();
    let section = |t: &str| json!({"Resources": doc.get(format!("type.googleapis.com/{t}")).cloned().unwrap_or(json!({}))});
    let doc = json!({
        "Clusters": section("envoy.config.cluster.v3.Cluster"),
        "Endpoints": section("envoy.config.endpoint.v3.ClusterLoadAssignment"),
        "Listeners": section("envoy.config.listener.v3.Listener"),
        "Routes": section("envoy.config.route.v3.RouteConfiguration"),
        "Runtimes": section("envoy.service.runtime.v3.Runtime"),
        "Secrets": section("envoy.extensions.transport_sockets.tls.v3.Secret"),
    });
    (snap, doc)
}

/// Normalization 2 (cosmetic): a certificate chain's PEM ends with one newline in
/// Umbra's SDS secrets, with an empty line after it in Kuma's. Compared trimmed.
fn pem_ends(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(s)) = o
                .get_mut("certificateChain")
                .and_then(|c| c.get_mut("inlineString"))
            {
                *s = format!("{}\n", s.trim_end());
            }
            o.values_mut().for_each(pem_ends);
        }
        Value::Array(a) => a.iter_mut().for_each(pem_ends),
        _ => {}
    }
}

/// Numbers compared as numbers: proto3 JSON renders a `double` 100 as `100.0`, Kuma's YAML as
/// `100`.
fn numbers(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                *v = json!(f);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(numbers),
        Value::Object(o) => o.values_mut().for_each(numbers),
        _ => {}
    }
}

/// Kuma's golden `dir/file`.
fn kuma(dir: &str, file: &str) -> Value {
    let docs = decode_documents(&data(&format!("{dir}/{file}")), Limits::local_file()).unwrap();
    docs.into_iter().next().unwrap()
}

/// One replayed case: its golden's label (`<dir>/<file>`), Kuma's golden and Umbra's
/// snapshot, both normalized.
struct Replayed {
    label: String,
    name: String,
    kuma: Value,
    umbra: Value,
    snapshot: umbra_xds::snapshot::Snapshot,
}

/// Every case of `file` in its contexts.
fn replay(file: &str) -> Vec<Replayed> {
    let mut out = Vec::new();
    for case in cases(file) {
        for context in &case.contexts {
            let store = store(context, &case);
            let mesh = store
                .iter()
                .rev()
                .find(|r| r.ty() == ResourceType::MeshGateway)
                .map_or("default".to_owned(), |r| r.meta.mesh.clone());
            let dir = if context == "gateway" {
                "listener"
            } else {
                context.as_str()
            };
            let (snapshot, mut umbra) = umbra(&store, &mesh);
            numbers(&mut umbra);
            pem_ends(&mut umbra);
            let mut kuma = kuma(dir, &case.golden);
            numbers(&mut kuma);
            // Normalization 1: no config document of Umbra's carries key material.
            umbra_xds::render::redact_sensitive(&mut kuma);
            pem_ends(&mut kuma);
            out.push(Replayed {
                label: format!("{dir}/{}", case.golden),
                name: case.name.clone(),
                kuma,
                umbra,
                snapshot,
            });
        }
    }
    out
}

/// The differences left after the normalizations above, each deliberate: the golden, the
/// number of RFC 6902 operations turning Umbra's document into Kuma's (any other count fails,
/// so a change in either shows), and why.
const KNOWN: &[(&str, usize, &str)] = &[
    (
        "listener/tcp-listener.yaml",
        1,
        "a TCP listener no route routes is not generated (connections are refused) and is \
         named under `notGenerated`; Kuma listens with an empty filter chain that closes every \
         connection",
    ),
    (
        "listener/connection-limited-listener.yaml",
        2,
        "the same unrouted TCP listener; its connection limit has no listener to apply to, so \
         the `gateway.listeners` Runtime holds no key for it",
    ),
    (
        "http/cross-mesh-gateway.yaml",
        18,
        "cross-mesh listeners are not generated (named under `notGenerated` with `crossMesh`)",
    ),
    (
        "https/cross-mesh-gateway.yaml",
        18,
        "cross-mesh listeners are not generated (named under `notGenerated` with `crossMesh`)",
    ),
    (
        "http/26-gateway-route.yaml",
        4,
        "zone egress on and no ZoneEgress running: Kuma's cluster for the ExternalService, \
         having no endpoint to tell it the service is external, verifies the ExternalService's \
         own identity and takes no MeshTimeout; Umbra builds it as it does when an egress runs \
         (the egress's identity, the MeshTimeout). No request can leave either way",
    ),
    (
        "https/26-gateway-route.yaml",
        4,
        "as http/26-gateway-route.yaml",
    ),
    (
        "tcp/tcp-route.yaml",
        6,
        "backends without a weight pooled from several MeshGatewayRoutes: Kuma writes them as \
         TCP weighted clusters of weight 0, which Envoy refuses (`ClusterWeight.weight` must be \
         at least 1: checked with `envoy --mode validate`), so its listener never loads; Umbra \
         keeps the lone weightless backend of its route (weight 1) and leaves weightless ones \
         among several out",
    ),
    (
        "tls/tcp-route.yaml",
        8,
        "as tcp/tcp-route.yaml, per TLS hostname",
    ),
];

/// Every golden of Kuma's gateway listener and route suites reproduces, after the named
/// normalizations, except the [`KNOWN`] differences; and every Umbra snapshot of them is
/// accepted by the real Envoy.
#[test]
fn kumas_gateway_goldens_replay() {
    let mut all = replay("listener-cases.yaml");
    all.extend(replay("route-cases.yaml"));
    assert_eq!(
        all.len(),
        7 + 39 * 2 + 2 + 1,
        "every Entry in every context"
    );
    let mut failures = Vec::new();
    for r in &all {
        let ops = serde_json::to_value(json_patch::diff(&r.umbra, &r.kuma)).unwrap();
        let n = ops.as_array().map_or(0, Vec::len);
        match KNOWN.iter().find(|(label, _, _)| *label == r.label) {
            None if n == 0 => {}
            Some((_, expected, _)) if *expected == n => {}
            Some(_) if n == 0 => failures.push(format!(
                "{} ({}): now matches Kuma; drop its KNOWN entry",
                r.label, r.name
            )),
            _ => failures.push(format!(
                "{} ({}): {n} operations turn Umbra's into Kuma's:\n{}",
                r.label,
                r.name,
                serde_json::to_string_pretty(&ops).unwrap()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for r in &all {
        common::envoy_validates(&r.snapshot);
    }
}
