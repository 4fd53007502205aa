//! The kuma-dp bootstrap contract, free of IO (issue 15; Kuma 2.7's
//! `pkg/xds/bootstrap/types` and its template): the request kuma-dp sends to
//! `POST /bootstrap` on the data-plane server, the answer it expects, and the Envoy bootstrap
//! the zone generates for it ([`generate`]).
//!
//! The Envoy bootstrap (YAML, as Kuma's) names the DPP `<mesh>.<name>` (node id; a zone
//! ingress or egress: `<name>`, with node `cluster` `egress` for an egress), carries the
//! Dataplane in node metadata (`dataplane.resource`) when kuma-dp sent one (with Kuma's other
//! keys: `version`, `features`, `dataplane.admin.port`, `dataplane.admin.address`,
//! `dataplane.proxyType` and `dynamicMetadata`), reaches ADS at the
//! address kuma-dp reached the bootstrap endpoint by (the request's `Host`), over TLS verified
//! with the CA kuma-dp gave (`caCert`) or the zone's own, and sends the dataplane token as gRPC
//! initial metadata `authorization` on every ADS stream.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use umbra_core::resource::{Resource, ResourceType};

/// Envoy admin port when the request names none (kuma-dp's default).
pub use crate::node_metadata::DEFAULT_ADMIN_PORT;

/// Response header naming the bootstrap version (Kuma's `kuma-bootstrap-version`).
pub const VERSION_HEADER: &str = "kuma-bootstrap-version";

/// kuma-dp's version block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// kuma-dp's own version.
    #[serde(default)]
    pub kuma_dp: Value,
    /// The Envoy it runs.
    #[serde(default)]
    pub envoy: Value,
}

/// `POST /bootstrap` body, as kuma-dp 2.7 sends it. Unknown fields are ignored (kuma-dp
/// versions add some); `Debug` never shows the token.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapRequest {
    /// The mesh (required).
    #[serde(default)]
    pub mesh: String,
    /// The DPP name (required).
    #[serde(default)]
    pub name: String,
    /// `dataplane` (default), `ingress` or `egress`.
    #[serde(default)]
    pub proxy_type: String,
    /// Envoy admin port (default [`DEFAULT_ADMIN_PORT`]).
    #[serde(default)]
    pub admin_port: u32,
    /// The dataplane token.
    #[serde(default)]
    pub dataplane_token: String,
    /// The Dataplane, YAML or JSON in universal format (kuma-dp's `--dataplane-file`).
    #[serde(default)]
    pub dataplane_resource: String,
    /// kuma-dp's and Envoy's versions.
    #[serde(default)]
    pub version: Version,
    /// PEM CA kuma-dp verified the control plane with (its `--ca-cert-file`).
    #[serde(default)]
    pub ca_cert: String,
    /// Extra node metadata (kuma-dp's `--dynamic-metadata`), passed to Envoy as node metadata
    /// `dynamicMetadata: {key: value}`, as Kuma does.
    #[serde(default)]
    pub dynamic_metadata: BTreeMap<String, String>,
    /// Features kuma-dp supports.
    #[serde(default)]
    pub features: Vec<String>,
    /// Every other field (`dnsPort`, `emptyDnsPort`, `operatingSystem`, `resources`,
    /// `workdir`, `accessLogSocketPath`, `metricsResources`, ...): accepted, as Kuma's
    /// server does, but not acted on (Umbra generates no DNS or metrics listeners); the
    /// handler logs their names ([`BootstrapRequest::not_acted_on`]).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl std::fmt::Debug for BootstrapRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapRequest")
            .field("mesh", &self.mesh)
            .field("name", &self.name)
            .field("proxy_type", &self.proxy_type)
            .field("admin_port", &self.admin_port)
            .field(
                "dataplane_token",
                &if self.dataplane_token.is_empty() {
                    ""
                } else {
                    "<redacted>"
                },
            )
            .field("dataplane_resource", &!self.dataplane_resource.is_empty())
            .finish_non_exhaustive()
    }
}

/// kuma-dp's view of the sidecar (Kuma's `KumaSidecarConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KumaSidecarConfiguration {
    /// Networking.
    pub networking: NetworkingConfiguration,
    /// Metrics.
    pub metrics: MetricsConfiguration,
}

/// Networking part of [`KumaSidecarConfiguration`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingConfiguration {
    /// The Dataplane uses transparent proxying.
    pub is_using_transparent_proxy: bool,
    /// CoreDNS template (Go `[]byte`: base64); Umbra has no DNS, so empty.
    #[serde(serialize_with = "go_bytes")]
    pub corefile_template: Vec<u8>,
    /// The Dataplane's address.
    pub address: String,
}

/// Metrics part of [`KumaSidecarConfiguration`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetricsConfiguration {
    /// Metrics kuma-dp aggregates (none).
    pub aggregate: Vec<Value>,
}

/// `POST /bootstrap` answer: the Envoy bootstrap (YAML bytes, base64 in JSON as Go encodes
/// `[]byte`) and kuma-dp's sidecar configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapResponse {
    /// The Envoy bootstrap, YAML.
    #[serde(serialize_with = "go_bytes")]
    pub bootstrap: Vec<u8>,
    /// kuma-dp's part.
    pub kuma_sidecar_configuration: KumaSidecarConfiguration,
}

/// Go's `encoding/json` form of `[]byte`: standard base64 with padding.
fn go_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// What the zone adds to a request to build the bootstrap.
#[derive(Debug, Clone)]
pub struct BootstrapParams {
    /// Host Envoy reaches ADS by (the bootstrap request's `Host`), a name or an IP.
    pub ads_host: String,
    /// ADS port.
    pub ads_port: u16,
    /// PEM CA that signed the data-plane server's certificate (used when the request carries
    /// no `caCert`).
    pub ca_pem: String,
    /// The other live replicas of the zone (`--store postgres`): `(host, port)` of their
    /// data-plane servers, listed after `ads_host` as endpoints of the ADS cluster, so an Envoy
    /// whose replica dies reconnects to another (with a short retry backoff).
    pub replicas: Vec<(String, u16)>,
}

/// How soon an Envoy of a replicated zone tries ADS again after its stream failed (Envoy's
/// `retry_back_off` of the ADS gRPC service; Envoy's own default starts at 500 ms).
const REPLICA_RETRY_BASE: &str = "0.2s";
/// The longest pause between two attempts.
const REPLICA_RETRY_MAX: &str = "1s";

/// A request that cannot be served: `(field, reason)` pairs (fields as in the request JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid bootstrap request: {}", .0.iter().map(|(f, r)| format!("{f}: {r}")).collect::<Vec<_>>().join("; "))]
pub struct BootstrapError(pub Vec<(String, String)>);

impl BootstrapRequest {
    /// Names of the fields kuma-dp sent that the bootstrap does not act on (non-empty ones).
    pub fn not_acted_on(&self) -> Vec<&str> {
        self.other
            .iter()
            .filter(|(_, v)| {
                !matches!(v, Value::Null) && **v != json!(0) && **v != json!("") && **v != json!({})
            })
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// Check the request: mesh and name present, a proxy type Umbra serves, and a Dataplane,
    /// when given, that is valid and names the same mesh and DPP. Returns that Dataplane.
    ///
    /// # Errors
    /// [`BootstrapError`] with every problem.
    pub fn validate(&self) -> Result<Option<Resource>, BootstrapError> {
        let mut errors = Vec::new();
        let mut err = |f: &str, r: String| errors.push((f.to_owned(), r));
        let ingress = self.proxy_type == "ingress";
        let egress = self.proxy_type == "egress";
        if self.mesh.is_empty() && !ingress && !egress {
            err("mesh", "required".into());
        }
        if !self.mesh.is_empty() && (ingress || egress) {
            err(
                "mesh",
                format!(
                    "must be empty for a zone {}: it serves every mesh of its zone",
                    self.proxy_type
                ),
            );
        }
        if self.name.is_empty() {
            err("name", "required".into());
        }
        match self.proxy_type.as_str() {
            "" | "dataplane" | "ingress" | "egress" => {}
            other => err(
                "proxyType",
                format!("{other:?} is not one of dataplane, ingress, egress"),
            ),
        }
        if self.admin_port > u32::from(u16::MAX) {
            err("adminPort", format!("{} is not a port", self.admin_port));
        }
        let mut dataplane = None;
        if !self.dataplane_resource.is_empty() {
            let want = if ingress {
                ResourceType::ZoneIngress
            } else if egress {
                ResourceType::ZoneEgress
            } else {
                ResourceType::Dataplane
            };
            match Resource::from_bytes(self.dataplane_resource.as_bytes()) {
                Err(e) => err("dataplaneResource", e.to_string()),
                Ok(r) if r.ty() != want => {
                    err(
                        "dataplaneResource",
                        format!("is a {}, not a {want}", r.ty()),
                    );
                }
                Ok(r) if r.meta.mesh != self.mesh || r.meta.name != self.name => err(
                    "dataplaneResource",
                    format!(
                        "is {} {}/{}, not {}/{} (the request's mesh and name)",
                        r.ty(),
                        r.meta.mesh,
                        r.meta.name,
                        self.mesh,
                        self.name
                    ),
                ),
                Ok(r) => {
                    let violations = r.validate();
                    if violations.has_violations() {
                        err("dataplaneResource", violations.to_string());
                    } else {
                        dataplane = Some(r);
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(dataplane)
        } else {
            Err(BootstrapError(errors))
        }
    }
}

/// Global downstream connections a builtin gateway's Envoy accepts (Kuma's default for
/// `defaults.proxy.gateway.globalDownstreamMaxConnections`).
pub const GATEWAY_MAX_CONNECTIONS: u32 = 50_000;

/// The bootstrap's runtime layers, as Kuma 2.7's template (`pkg/xds/bootstrap/template_v3.go`):
/// a static layer `kuma` (RE2 program size limits) for every proxy; for a builtin gateway
/// (`gateway`), a static layer `gateway` bounding its downstream connections
/// ([`GATEWAY_MAX_CONNECTIONS`]) and the RTDS layer `gateway.listeners` over ADS, which holds
/// its listeners' connection limits (the zone serves the Runtime of that name to every builtin
/// gateway; Envoy waits for it before it initializes its clusters).
fn runtime_layers(gateway: bool) -> Vec<Value> {
    let mut layers = vec![json!({"name": "kuma", "static_layer": {
        "re2.max_program_size.error_level": 4_294_967_295u64,
        "re2.max_program_size.warn_level": 1000,
    }})];
    if gateway {
        layers.push(json!({"name": "gateway", "static_layer": {
            "overload.global_downstream_max_connections": GATEWAY_MAX_CONNECTIONS,
        }}));
        layers.push(json!({"name": "gateway.listeners", "rtds_layer": {
            "name": "gateway.listeners",
            "rtds_config": {"ads": {}, "resource_api_version": "V3"},
        }}));
    }
    layers
}

/// The answer to `req` for the DPP whose Dataplane is `dataplane` (the request's, or the one
/// the zone holds): the Envoy bootstrap and kuma-dp's sidecar configuration.
pub fn generate(
    req: &BootstrapRequest,
    dataplane: &Resource,
    params: &BootstrapParams,
) -> BootstrapResponse {
    // A zone egress's admin port is its ZoneEgress's `networking.admin.port` when set (Kuma's
    // `setAdminPort`), else the request's, else the default.
    let admin_port = dataplane
        .as_zone_egress()
        .and_then(umbra_core::zone_egress::ZoneEgressSpec::admin_port)
        .map(u32::from)
        .or((req.admin_port != 0).then_some(req.admin_port))
        .unwrap_or(DEFAULT_ADMIN_PORT);
    let spec = dataplane.as_dataplane();
    // Kuma's `params.Service` for a zone egress.
    let egress = dataplane
        .as_zone_egress()
        .is_some()
        .then(|| "egress".to_owned());
    let service = egress
        .or_else(|| {
            spec.and_then(|d| d.networking.inbound.first())
                .map(|i| i.service().to_owned())
        })
        .or_else(|| {
            spec.and_then(|d| d.networking.gateway.as_ref())
                .and_then(|g| g.tags.get(umbra_core::target_ref::SERVICE_TAG).cloned())
        })
        .unwrap_or_else(|| req.name.clone());
    // Kuma's node metadata keys: kuma-dp's extra metadata sits under `dynamicMetadata` (never
    // beside the keys the control plane reads), `features` is always a list.
    let mut metadata = serde_json::Map::new();
    metadata.insert("version".into(), json!(req.version));
    metadata.insert("features".into(), json!(req.features));
    if !req.dataplane_resource.is_empty() {
        metadata.insert(
            crate::node_metadata::DATAPLANE_METADATA_KEY.into(),
            json!(req.dataplane_resource),
        );
    }
    metadata.insert("dataplane.admin.port".into(), json!(admin_port.to_string()));
    metadata.insert("dataplane.admin.address".into(), json!("127.0.0.1"));
    if !req.proxy_type.is_empty() {
        metadata.insert("dataplane.proxyType".into(), json!(req.proxy_type));
    }
    if !req.dynamic_metadata.is_empty() {
        metadata.insert("dynamicMetadata".into(), json!(req.dynamic_metadata));
    }
    let mut grpc_service = json!({"envoy_grpc": {"cluster_name": "ads_cluster"}});
    if !req.dataplane_token.is_empty() {
        grpc_service["initial_metadata"] =
            json!([{"key": "authorization", "value": req.dataplane_token.trim()}]);
    }
    let ca = if req.ca_cert.trim().is_empty() {
        &params.ca_pem
    } else {
        &req.ca_cert
    };
    let is_ip = params.ads_host.parse::<std::net::IpAddr>().is_ok();
    // Every replica's data-plane server, this one (as the request reached it) first.
    let mut endpoints = vec![(params.ads_host.clone(), params.ads_port)];
    for r in &params.replicas {
        if !endpoints.contains(r) {
            endpoints.push(r.clone());
        }
    }
    let all_ip = endpoints
        .iter()
        .all(|(h, _)| h.parse::<std::net::IpAddr>().is_ok());
    let mut sans: Vec<Value> = Vec::new();
    for (host, _) in &endpoints {
        let san = json!({
            "san_type": if host.parse::<std::net::IpAddr>().is_ok() { "IP_ADDRESS" } else { "DNS" },
            "matcher": {"exact": host},
        });
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    let lb_endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(host, port)| {
            json!({"endpoint": {"address": {"socket_address": {
                "address": host,
                "port_value": port,
            }}}})
        })
        .collect();
    if endpoints.len() > 1 {
        grpc_service["envoy_grpc"]["retry_policy"] = json!({"retry_back_off": {
            "base_interval": REPLICA_RETRY_BASE,
            "max_interval": REPLICA_RETRY_MAX,
        }});
    }
    let mut bootstrap = json!({
        "node": {
            // A zone ingress or egress is named by its name alone (it belongs to no mesh).
            "id": if matches!(req.proxy_type.as_str(), "ingress" | "egress") {
                req.name.clone()
            } else {
                format!("{}.{}", req.mesh, req.name)
            },
            "cluster": service,
            "metadata": metadata,
        },
        "admin": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}},
        },
        "dynamic_resources": {
            "ads_config": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "set_node_on_first_message_only": true,
                "grpc_services": [grpc_service],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {
            "clusters": [{
                "name": "ads_cluster",
                "type": if all_ip { "STATIC" } else { "STRICT_DNS" },
                // A name such as `localhost` may resolve to ::1 first while the zone listens
                // on IPv4.
                "dns_lookup_family": "V4_PREFERRED",
                "connect_timeout": "1s",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {
                            "connection_keepalive": {"interval": "60s", "timeout": "10s"},
                        }},
                    },
                },
                "upstream_connection_options": {"tcp_keepalive": {"keepalive_probes": 3, "keepalive_time": 10, "keepalive_interval": 10}},
                "transport_socket": {
                    "name": "envoy.transport_sockets.tls",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                        "common_tls_context": {
                            "alpn_protocols": ["h2"],
                            "validation_context": {
                                "trusted_ca": {"inline_string": ca},
                                "match_typed_subject_alt_names": sans,
                            },
                        },
                    },
                },
                "load_assignment": {
                    "cluster_name": "ads_cluster",
                    "endpoints": [{"lb_endpoints": lb_endpoints}],
                },
            }],
        },
    });
    bootstrap["layered_runtime"] = json!({"layers": runtime_layers(
        spec.is_some_and(umbra_core::gateway::is_builtin),
    )});
    // SNI only for a name (RFC 6066 has no IP literals); the SAN match checks either.
    if !is_ip {
        bootstrap["static_resources"]["clusters"][0]["transport_socket"]["typed_config"]["sni"] =
            json!(params.ads_host);
    }
    BootstrapResponse {
        bootstrap: umbra_core::codec::encode_yaml(&bootstrap).into_bytes(),
        kuma_sidecar_configuration: KumaSidecarConfiguration {
            networking: NetworkingConfiguration {
                is_using_transparent_proxy: spec
                    .is_some_and(|d| d.networking.transparent_proxying.is_some()),
                corefile_template: Vec::new(),
                address: spec
                    .map(|d| d.networking.address.clone())
                    .unwrap_or_default(),
            },
            metrics: MetricsConfiguration::default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DP: &str = "type: Dataplane\nmesh: default\nname: web-1\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: 8080\n    servicePort: 18080\n    tags: {kuma.io/service: web}\n";

    fn request(extra: Value) -> BootstrapRequest {
        let mut v = json!({
            "mesh": "default", "name": "web-1", "proxyType": "dataplane",
            "dataplaneToken": "tok.en.sig", "dataplaneResource": DP, "adminPort": 9902,
            "version": {"kumaDp": {"version": "2.7.29"}, "envoy": {"version": "1.30.0", "kumaDpCompatible": true}},
            "operatingSystem": "linux", "workdir": "/tmp", "metricsResources": {"cpu": 1},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn kuma_dp_requests_parse_with_unknown_fields_and_never_show_the_token() {
        let req = request(json!({"someFutureField": [1, 2]}));
        assert_eq!(req.mesh, "default");
        assert_eq!(req.admin_port, 9902);
        let dbg = format!("{req:?}");
        assert!(
            !dbg.contains("tok.en.sig") && dbg.contains("<redacted>"),
            "{dbg}"
        );
        assert!(req.validate().unwrap().is_some());
        assert_eq!(
            req.not_acted_on(),
            [
                "metricsResources",
                "operatingSystem",
                "someFutureField",
                "workdir"
            ]
        );
    }

    #[test]
    fn invalid_requests_name_every_field() {
        let req: BootstrapRequest = serde_json::from_value(
            json!({"proxyType": "gateway", "dataplaneResource": "type: Mesh\nname: x\n"}),
        )
        .unwrap();
        let e = req.validate().unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["mesh", "name", "proxyType", "dataplaneResource"]);
        let other = request(json!({"name": "web-2"}));
        let e = other.validate().unwrap_err();
        assert!(e.0[0].1.contains("not default/web-2"), "{e}");
        // A zone egress has no mesh either, and carries a ZoneEgress (Kuma's `zoneEgressFor`).
        let egress = request(json!({"proxyType": "egress"}));
        let fields: Vec<String> = egress
            .validate()
            .unwrap_err()
            .0
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(fields, ["mesh", "dataplaneResource"]);
        let egress = request(json!({
            "proxyType": "egress", "mesh": "", "name": "ze", "adminPort": 0,
            "dataplaneResource": "type: ZoneEgress\nname: ze\nnetworking: {address: 10.0.0.1, port: 10002, admin: {port: 9903}}\n",
        }));
        let ze = egress.validate().unwrap().unwrap();
        let params = BootstrapParams {
            ads_host: "zone-1-cp".into(),
            ads_port: 5678,
            ca_pem: String::new(),
            replicas: Vec::new(),
        };
        let json = serde_json::to_value(generate(&egress, &ze, &params)).unwrap();
        let yaml = base64::engine::general_purpose::STANDARD
            .decode(json["bootstrap"].as_str().unwrap())
            .unwrap();
        let doc = umbra_core::codec::decode_one(&yaml, Default::default()).unwrap();
        assert_eq!(doc["node"]["id"], "ze", "an egress's node id is its name");
        assert_eq!(doc["node"]["cluster"], "egress");
        assert_eq!(doc["node"]["metadata"]["dataplane.proxyType"], "egress");
        assert_eq!(doc["node"]["metadata"]["dataplane.admin.port"], "9903");
        assert_eq!(
            doc["admin"]["address"]["socket_address"]["port_value"],
            9903
        );
        let bad = request(json!({
            "proxyType": "egress", "mesh": "", "name": "ze",
            "dataplaneResource": "type: ZoneEgress\nname: ze\nnetworking: {address: 10.0.0.1}\n",
        }));
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("networking.port"));
        // A zone ingress has no mesh, and carries a ZoneIngress.
        let ingress = request(json!({"proxyType": "ingress"}));
        let fields: Vec<String> = ingress
            .validate()
            .unwrap_err()
            .0
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(fields, ["mesh", "dataplaneResource"]);
        let ingress = request(json!({
            "proxyType": "ingress", "mesh": "", "name": "zi",
            "dataplaneResource": "type: ZoneIngress\nname: zi\nnetworking: {address: 10.0.0.1, port: 10001}\n",
        }));
        let zi = ingress.validate().unwrap().unwrap();
        let params = BootstrapParams {
            ads_host: "zone-1-cp".into(),
            ads_port: 5678,
            ca_pem: String::new(),
            replicas: Vec::new(),
        };
        let json = serde_json::to_value(generate(&ingress, &zi, &params)).unwrap();
        let yaml = base64::engine::general_purpose::STANDARD
            .decode(json["bootstrap"].as_str().unwrap())
            .unwrap();
        let doc = umbra_core::codec::decode_one(&yaml, Default::default()).unwrap();
        assert_eq!(doc["node"]["id"], "zi", "an ingress's node id is its name");
        assert_eq!(doc["node"]["metadata"]["dataplane.proxyType"], "ingress");
    }

    #[test]
    fn the_answer_is_base64_yaml_with_the_token_and_the_ca() {
        let req = request(json!({}));
        let dp = req.validate().unwrap().unwrap();
        let params = BootstrapParams {
            ads_host: "zone-1-cp".into(),
            ads_port: 5678,
            ca_pem: "-----BEGIN CERTIFICATE-----\nzone\n-----END CERTIFICATE-----\n".into(),
            replicas: Vec::new(),
        };
        let resp = generate(&req, &dp, &params);
        let json = serde_json::to_value(&resp).unwrap();
        let b64 = json["bootstrap"].as_str().unwrap();
        let yaml = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let doc = umbra_core::codec::decode_one(&yaml, Default::default()).unwrap();
        assert_eq!(doc["node"]["id"], "default.web-1");
        assert_eq!(doc["node"]["cluster"], "web");
        assert_eq!(doc["node"]["metadata"]["dataplane.resource"], DP);
        let grpc = &doc["dynamic_resources"]["ads_config"]["grpc_services"][0];
        assert_eq!(grpc["initial_metadata"][0]["value"], "tok.en.sig");
        let cluster = &doc["static_resources"]["clusters"][0];
        assert_eq!(cluster["type"], "STRICT_DNS");
        let tls = &cluster["transport_socket"]["typed_config"];
        assert_eq!(tls["sni"], "zone-1-cp");
        assert_eq!(
            tls["common_tls_context"]["validation_context"]["trusted_ca"]["inline_string"],
            params.ca_pem.as_str(),
            "the zone's CA when kuma-dp gave none"
        );
        assert_eq!(
            doc["admin"]["address"]["socket_address"]["port_value"],
            9902
        );
        assert_eq!(
            json["kumaSidecarConfiguration"]["networking"]["address"],
            "127.0.0.1"
        );
        assert_eq!(
            json["kumaSidecarConfiguration"]["networking"]["corefileTemplate"],
            ""
        );
        assert_eq!(
            json["kumaSidecarConfiguration"]["metrics"]["aggregate"],
            json!([])
        );
        // kuma-dp's own CA wins over the zone's.
        let own = request(
            json!({"caCert": "-----BEGIN CERTIFICATE-----\nown\n-----END CERTIFICATE-----\n"}),
        );
        let doc = umbra_core::codec::decode_one(
            &generate(&own, &dp, &params).bootstrap,
            Default::default(),
        )
        .unwrap();
        let ca = &doc["static_resources"]["clusters"][0]["transport_socket"]["typed_config"]
            ["common_tls_context"]["validation_context"]["trusted_ca"]["inline_string"];
        assert!(ca.as_str().unwrap().contains("own"), "{ca}");
    }

    #[test]
    fn a_minimal_request_takes_every_default() {
        let req: BootstrapRequest =
            serde_json::from_value(json!({"mesh": "default", "name": "web-1"})).unwrap();
        assert_eq!(req.admin_port, 0, "0 stands for DEFAULT_ADMIN_PORT");
        assert!(req.dataplane_token.is_empty() && req.proxy_type.is_empty());
        assert!(format!("{req:?}").contains("dataplane_token: \"\""));
        assert!(req.validate().unwrap().is_none(), "no Dataplane carried");
        let dp = request(json!({})).validate().unwrap().unwrap();
        let params = BootstrapParams {
            ads_host: "10.0.0.1".into(),
            ads_port: 5678,
            ca_pem: "ca".into(),
            replicas: Vec::new(),
        };
        let doc = umbra_core::codec::decode_one(
            &generate(&req, &dp, &params).bootstrap,
            Default::default(),
        )
        .unwrap();
        assert_eq!(
            doc["admin"]["address"]["socket_address"]["port_value"],
            9901
        );
        assert_eq!(doc["node"]["metadata"]["dataplane.admin.port"], "9901");
        assert_eq!(doc["node"]["metadata"]["features"], json!([]));
        assert!(doc["node"]["metadata"].get("dataplane.resource").is_none());
        assert!(doc["node"]["metadata"].get("dynamicMetadata").is_none());
        let grpc = &doc["dynamic_resources"]["ads_config"]["grpc_services"][0];
        assert!(
            grpc.get("initial_metadata").is_none(),
            "no token, no header"
        );
        let cluster = &doc["static_resources"]["clusters"][0];
        assert_eq!(cluster["type"], "STATIC");
        let tls = &cluster["transport_socket"]["typed_config"];
        assert!(tls.get("sni").is_none(), "no SNI for an IP");
        assert_eq!(
            tls["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"][0]
                ["san_type"],
            "IP_ADDRESS"
        );
    }

    /// Kuma's runtime layers: `kuma` for every proxy; a builtin gateway adds `gateway` and the
    /// RTDS layer `gateway.listeners` over ADS; a delegated gateway is a sidecar here.
    #[test]
    fn a_builtin_gateway_gets_the_rtds_layer() {
        let params = BootstrapParams {
            ads_host: "10.0.0.1".into(),
            ads_port: 5678,
            ca_pem: "ca".into(),
            replicas: Vec::new(),
        };
        let layers = |gateway: &str| {
            let dp = format!("type: Dataplane\nmesh: default\nname: gw-1\nnetworking:\n  address: 127.0.0.1\n  gateway:\n    type: {gateway}\n    tags: {{kuma.io/service: edge}}\n");
            let req = request(json!({"name": "gw-1", "dataplaneResource": dp}));
            let dp = req.validate().unwrap().unwrap();
            let doc = umbra_core::codec::decode_one(
                &generate(&req, &dp, &params).bootstrap,
                Default::default(),
            )
            .unwrap();
            doc["layered_runtime"]["layers"].clone()
        };
        let builtin = layers("BUILTIN");
        let names: Vec<&str> = builtin
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["name"].as_str())
            .collect();
        assert_eq!(names, ["kuma", "gateway", "gateway.listeners"]);
        assert_eq!(
            builtin[1]["static_layer"]["overload.global_downstream_max_connections"],
            50_000
        );
        assert_eq!(
            builtin[2]["rtds_layer"],
            json!({"name": "gateway.listeners", "rtds_config": {"ads": {}, "resource_api_version": "V3"}})
        );
        let delegated = layers("DELEGATED");
        assert_eq!(delegated.as_array().map(Vec::len), Some(1));
        assert_eq!(delegated[0]["name"], "kuma");
    }

    #[test]
    fn dynamic_metadata_is_nested_as_kumas_and_shadows_nothing() {
        let req = request(json!({
            "dynamicMetadata": {"team": "web", "dataplane.resource": "x", "features": "y"},
        }));
        let dp = req.validate().unwrap().unwrap();
        let params = BootstrapParams {
            ads_host: "cp".into(),
            ads_port: 5678,
            ca_pem: "ca".into(),
            replicas: Vec::new(),
        };
        let doc = umbra_core::codec::decode_one(
            &generate(&req, &dp, &params).bootstrap,
            Default::default(),
        )
        .unwrap();
        let md = &doc["node"]["metadata"];
        assert_eq!(
            md["dynamicMetadata"],
            json!({"dataplane.resource": "x", "features": "y", "team": "web"})
        );
        assert_eq!(md["dataplane.resource"], DP);
        assert_eq!(md["features"], json!([]));
        assert!(md.get("team").is_none());
        assert_eq!(md["dataplane.proxyType"], "dataplane");
        assert_eq!(md["version"]["kumaDp"]["version"], "2.7.29");
    }

    #[test]
    fn bytes_are_go_base64_with_padding_and_round_trip() {
        let resp = BootstrapResponse {
            bootstrap: b"node: {}\n".to_vec(),
            kuma_sidecar_configuration: KumaSidecarConfiguration {
                networking: NetworkingConfiguration {
                    is_using_transparent_proxy: true,
                    corefile_template: b"ab".to_vec(),
                    address: "10.0.0.1".into(),
                },
                metrics: MetricsConfiguration::default(),
            },
        };
        let json = serde_json::to_value(&resp).unwrap();
        assert_eq!(
            json,
            json!({
                "bootstrap": "bm9kZToge30K",
                "kumaSidecarConfiguration": {
                    "networking": {
                        "isUsingTransparentProxy": true,
                        "corefileTemplate": "YWI=",
                        "address": "10.0.0.1",
                    },
                    "metrics": {"aggregate": []},
                },
            })
        );
        let engine = base64::engine::general_purpose::STANDARD;
        assert_eq!(
            engine.decode(json["bootstrap"].as_str().unwrap()).unwrap(),
            resp.bootstrap
        );
    }
}
