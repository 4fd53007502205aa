//! ZoneEgress generation (issue 37, `tests/data/zone-egress.yaml`): a sidecar of a Mesh with
//! `routing.zoneEgress: true` reaches ExternalServices and other zones through its zone's
//! egress (EDS over mTLS, the egress's identity verified), and the egress terminates the
//! mesh's mTLS for ExternalServices (RBAC from MeshTrafficPermission, deny by default, TLS
//! origination) and passes other zones' traffic through by SNI. Live and Shadow, checked by the
//! real Envoy, golden files for both proxies and the shadow diff.

use serde_json::{json, Value};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_core::zone_ingress::ZoneIngressSpec;
use umbra_xds::context::{EgressAddress, MeshContext, Zones};
use umbra_xds::egress::{generate_egress, EgressMesh};
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy_validates, golden, load, patch_within};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const EGRESS_LISTENER: &str = "inbound:127.0.0.30:10002";

fn context(resources: &[Resource], egresses: &[EgressAddress]) -> MeshContext {
    let mesh = resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    assert!(mesh.zone_egress_enabled());
    let zis: Vec<&ZoneIngressSpec> = resources
        .iter()
        .filter_map(Resource::as_zone_ingress)
        .collect();
    let mut ctx = MeshContext::build_in_zone(
        "default",
        &mesh,
        resources.iter().filter_map(Resource::as_dataplane),
        Some(Zones {
            local: "zone-1",
            ingresses: &zis,
        }),
    );
    ctx.route_through_egress(egresses);
    ctx
}

fn egress_at() -> Vec<EgressAddress> {
    vec![EgressAddress {
        address: "127.0.0.30".to_owned(),
        port: 10002,
    }]
}

fn sidecar(resources: &[Resource], view: View) -> Snapshot {
    let ctx = context(resources, &egress_at());
    let policies = PolicySet::build("default", resources, view);
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "web")
        .and_then(Resource::as_dataplane)
        .unwrap();
    generate(
        Proxy {
            name: "web",
            dataplane: dp,
            admin: None,
            dns: None,
        },
        &ctx,
        &policies,
    )
    .unwrap()
}

fn egress(resources: &[Resource], view: View) -> Snapshot {
    let ctx = context(resources, &egress_at());
    let policies = PolicySet::build("default", resources, view);
    let ze = resources
        .iter()
        .find(|r| r.ty() == ResourceType::ZoneEgress)
        .and_then(Resource::as_zone_egress)
        .unwrap();
    generate_egress(
        ze,
        "zone-1",
        &[EgressMesh {
            ctx: &ctx,
            policies: &policies,
        }],
    )
    .unwrap()
}

fn addresses(cla: &Value) -> Vec<(String, String)> {
    cla["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            let zone = l["locality"]["zone"].as_str().unwrap_or("").to_owned();
            l["lbEndpoints"].as_array().unwrap().iter().map(move |e| {
                let a = &e["endpoint"]["address"]["socketAddress"];
                (zone.clone(), format!("{}:{}", a["address"], a["portValue"]))
            })
        })
        .collect()
}

#[test]
fn a_sidecar_reaches_external_services_and_other_zones_through_the_egress() {
    let resources = load("zone-egress.yaml");
    let snap = sidecar(&resources, View::Live);
    envoy_validates(&snap);
    let doc = snap.to_document().unwrap();
    let httpbin = &doc[CLUSTER]["httpbin"];
    assert_eq!(
        httpbin["type"], "EDS",
        "no endpoints of its own: the egress"
    );
    let tls = &httpbin["transportSocket"]["typedConfig"];
    assert_eq!(tls["sni"], "httpbin{mesh=default}");
    assert_eq!(
        tls["commonTlsContext"]["combinedValidationContext"]["defaultValidationContext"]
            ["matchTypedSubjectAltNames"][0]["matcher"]["exact"],
        "spiffe://default/zone-egress"
    );
    assert!(
        httpbin["typedExtensionProtocolOptions"]
            .to_string()
            .contains("httpProtocolOptions"),
        "HTTP/1.1, the ExternalService's protocol"
    );
    assert_eq!(
        addresses(&doc[ENDPOINTS]["httpbin"]),
        [("zone-1".to_owned(), "\"127.0.0.30\":10002".to_owned())]
    );
    // Another zone's service: through the egress too, its own identity still verified.
    assert_eq!(
        addresses(&doc[ENDPOINTS]["backend"]),
        [("zone-2".to_owned(), "\"127.0.0.30\":10002".to_owned())]
    );
    assert_eq!(
        doc[CLUSTER]["backend"]["transportSocket"]["typedConfig"]["commonTlsContext"]
            ["combinedValidationContext"]["defaultValidationContext"]["matchTypedSubjectAltNames"]
            [0]["matcher"]["exact"],
        "spiffe://default/backend"
    );
    // Nothing about the ExternalServices is left out any more.
    let policies = PolicySet::build("default", &resources, View::Live);
    let dp = resources
        .iter()
        .find(|r| r.meta.name == "web")
        .and_then(Resource::as_dataplane)
        .unwrap();
    let not_generated: Vec<_> = policies
        .not_generated(dp)
        .into_iter()
        .filter(|n| n.type_name == "ExternalService")
        .collect();
    assert!(not_generated.is_empty(), "{not_generated:?}");
    golden("zone-egress.web.json", &doc);
}

#[test]
fn without_an_egress_in_the_zone_external_services_have_no_endpoint() {
    let resources = load("zone-egress.yaml");
    let ctx = context(&resources, &[]);
    let policies = PolicySet::build("default", &resources, View::Live);
    let eps = umbra_xds::base::external::egress_endpoints(&ctx, &policies, "httpbin");
    assert!(eps.is_empty());
    assert!(ctx.endpoints.get("backend").is_none_or(Vec::is_empty));
}

fn chain<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc[LISTENER][EGRESS_LISTENER]["filterChains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no chain {name}"))
}

fn http_filters(chain: &Value) -> Vec<Value> {
    chain["filters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "envoy.filters.network.http_connection_manager")
        .unwrap()["typedConfig"]["httpFilters"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_egress_originates_external_services_and_passes_other_zones_through() {
    let resources = load("zone-egress.yaml");
    let live = egress(&resources, View::Live);
    let shadow = egress(&resources, View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live_doc, shadow_doc) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    let listener = &live_doc[LISTENER][EGRESS_LISTENER];
    assert_eq!(listener["trafficDirection"], "INBOUND");
    assert_eq!(
        listener["listenerFilters"][0]["name"],
        "envoy.filters.listener.tls_inspector"
    );
    let names: Vec<Value> = listener["filterChains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            json!([
                c.get("name").cloned().unwrap_or(Value::Null),
                c["filterChainMatch"]["serverNames"]
            ])
        })
        .collect();
    // Other zones first (passthrough, no name), then the ExternalServices of this zone; far-db
    // (zone-2's) is not originated here.
    assert_eq!(
        names,
        [
            json!([null, ["backend{mesh=default}"]]),
            json!(["db-ext_default", ["db-ext{mesh=default}"]]),
            json!(["httpbin_default", ["httpbin{mesh=default}"]]),
            json!(["pay_default", ["pay{mesh=default}"]]),
        ]
    );
    // Passthrough: no TLS termination.
    assert!(listener["filterChains"][0].get("transportSocket").is_none());
    assert_eq!(
        addresses(&live_doc[ENDPOINTS]["default:backend"]),
        [("zone-2".to_owned(), "\"192.168.2.1\":10001".to_owned())]
    );
    // Terminated with the mesh's mTLS, any peer of the mesh, client certificate required.
    let httpbin = chain(&live_doc, "httpbin_default");
    let down = &httpbin["transportSocket"]["typedConfig"];
    assert_eq!(down["requireClientCertificate"], true);
    // web may reach httpbin; pay and db-ext are denied (no permission names them).
    let rbac = &http_filters(httpbin)[0];
    assert_eq!(rbac["name"], "envoy.filters.http.rbac");
    assert_eq!(
        rbac["typedConfig"]["rules"]["policies"]["MeshTrafficPermission"]["principals"][0]
            ["authenticated"]["principalName"]["exact"],
        "spiffe://default/web"
    );
    let pay = chain(&live_doc, "pay_default");
    assert_eq!(http_filters(pay)[0]["typedConfig"]["rules"], json!({}));
    let db = chain(&live_doc, "db-ext_default");
    assert_eq!(db["filters"][0]["name"], "envoy.filters.network.rbac");
    assert_eq!(db["filters"][0]["typedConfig"]["rules"], json!({}));
    assert_eq!(db["filters"][1]["name"], "envoy.filters.network.tcp_proxy");
    // TLS is originated by the egress, to the ExternalService's server name.
    let pay_cluster = &live_doc[CLUSTER]["default:pay"];
    assert_eq!(pay_cluster["type"], "STRICT_DNS");
    assert_eq!(pay_cluster["altStatName"], "default_pay");
    assert_eq!(
        pay_cluster["transportSocketMatches"][0]["transportSocket"]["typedConfig"]["sni"],
        "api.pay.example.com"
    );
    assert_eq!(live_doc[CLUSTER]["default:db-ext"]["type"], "STATIC");
    assert!(live_doc[CLUSTER].get("default:far-db").is_none());

    // The shadow permission opens pay to web: one RBAC change, nothing else.
    assert_eq!(
        http_filters(chain(&shadow_doc, "pay_default"))[0]["typedConfig"]["rules"]["policies"]
            ["MeshTrafficPermission"]["principals"][0]["authenticated"]["principalName"]["exact"],
        "spiffe://default/web"
    );
    let patch = patch_within(&live_doc, &shadow_doc, "filterChains/3");
    golden("zone-egress.egress.live.json", &live_doc);
    golden("zone-egress.egress.shadow-diff.json", &patch);
}
