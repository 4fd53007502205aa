//! A DPP's Envoy configuration: typed resources grouped by xDS type, rendered as the config
//! document of the inspect API (`{ typeUrl: { name: proto3-JSON } }`), hashed into the xDS
//! version, and turned into a static bootstrap for `envoy --mode validate`.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use prost::{Message, Name};
use serde_json::{json, Map, Value};

use crate::render::{to_json, RenderError};

/// CDS type URL.
pub const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// EDS type URL.
pub const ENDPOINT_TYPE: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// LDS type URL.
pub const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// RDS type URL.
pub const ROUTE_TYPE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// SDS type URL.
pub const SECRET_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Envoy resources of one DPP, each map keyed by resource name (deterministic order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// CDS.
    pub clusters: BTreeMap<String, Cluster>,
    /// EDS, keyed by cluster name.
    pub endpoints: BTreeMap<String, ClusterLoadAssignment>,
    /// LDS.
    pub listeners: BTreeMap<String, Listener>,
    /// RDS (route configurations served separately; sidecars inline theirs in the HCM).
    pub routes: BTreeMap<String, RouteConfiguration>,
    /// SDS.
    pub secrets: BTreeMap<String, Secret>,
}

fn render_map<M: Message + Name>(m: &BTreeMap<String, M>) -> Result<Value, RenderError> {
    let mut out = Map::new();
    for (name, msg) in m {
        out.insert(name.clone(), to_json(msg)?);
    }
    Ok(Value::Object(out))
}

impl Snapshot {
    /// The config document: `{ "<typeUrl>": { "<name>": <proto3 JSON> } }`, one key per xDS
    /// type that has resources (the shape the transition seed's diffs use).
    ///
    /// # Errors
    /// [`RenderError`] if a resource's type is missing from the descriptor pool.
    pub fn to_document(&self) -> Result<Value, RenderError> {
        let mut doc = Map::new();
        let mut put = |type_url: &str, v: Value| {
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                doc.insert(type_url.to_owned(), v);
            }
        };
        put(CLUSTER_TYPE, render_map(&self.clusters)?);
        put(ENDPOINT_TYPE, render_map(&self.endpoints)?);
        put(LISTENER_TYPE, render_map(&self.listeners)?);
        put(ROUTE_TYPE, render_map(&self.routes)?);
        put(SECRET_TYPE, render_map(&self.secrets)?);
        Ok(Value::Object(doc))
    }

    /// Content hash of one xDS type's resources (hex SHA-256 over names and encoded bytes): the
    /// xDS `version_info`. Equal content, equal version.
    pub fn version(&self, type_url: &str) -> String {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        let mut feed = |name: &str, bytes: Vec<u8>| {
            h.update((name.len() as u64).to_be_bytes());
            h.update(name.as_bytes());
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(&bytes);
        };
        match type_url {
            CLUSTER_TYPE => self
                .clusters
                .iter()
                .for_each(|(n, m)| feed(n, m.encode_to_vec())),
            ENDPOINT_TYPE => self
                .endpoints
                .iter()
                .for_each(|(n, m)| feed(n, m.encode_to_vec())),
            LISTENER_TYPE => self
                .listeners
                .iter()
                .for_each(|(n, m)| feed(n, m.encode_to_vec())),
            ROUTE_TYPE => self
                .routes
                .iter()
                .for_each(|(n, m)| feed(n, m.encode_to_vec())),
            SECRET_TYPE => self
                .secrets
                .iter()
                .for_each(|(n, m)| feed(n, m.encode_to_vec())),
            _ => {}
        }
        let digest = h.finalize();
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A static Envoy bootstrap holding this snapshot, for `envoy --mode validate`: EDS clusters
    /// become STATIC with their ClusterLoadAssignment inlined, secrets go to static secrets.
    ///
    /// # Errors
    /// [`RenderError`] if a resource cannot be rendered.
    pub fn to_static_bootstrap(&self) -> Result<Value, RenderError> {
        let mut clusters = Vec::new();
        for (name, c) in &self.clusters {
            let mut c = c.clone();
            if c.eds_cluster_config.is_some() {
                use envoy_types::pb::envoy::config::cluster::v3::cluster::{
                    ClusterDiscoveryType, DiscoveryType,
                };
                c.eds_cluster_config = None;
                c.cluster_discovery_type =
                    Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
                c.load_assignment = Some(self.endpoints.get(name).cloned().unwrap_or_else(|| {
                    ClusterLoadAssignment {
                        cluster_name: name.clone(),
                        ..Default::default()
                    }
                }));
            }
            clusters.push(to_json(&c)?);
        }
        let listeners: Vec<Value> = self
            .listeners
            .values()
            .map(to_json)
            .collect::<Result<_, _>>()?;
        let secrets: Vec<Value> = self
            .secrets
            .values()
            .map(to_json)
            .collect::<Result<_, _>>()?;
        Ok(json!({
            "node": {"id": "umbra-validate", "cluster": "umbra-validate"},
            "staticResources": {"listeners": listeners, "clusters": clusters, "secrets": secrets},
        }))
    }
}
