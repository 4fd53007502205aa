//! A DPP's Envoy configuration: typed resources grouped by xDS type, rendered as the config
//! document of the inspect API (`{ typeUrl: { name: proto3-JSON } }`), hashed into the xDS
//! version, and turned into a static bootstrap for `envoy --mode validate`.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::envoy::service::runtime::v3::Runtime;
use prost::{Message, Name};

use serde_json::{json, Map, Value};

use umbra_xds_protocol::type_url::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, RUNTIME_TYPE, SECRET_TYPE,
};
use umbra_xds_protocol::version::{bytes_version, write_canonical, ResourceVersions, TypeVersions};

use crate::interner::{Interner, Shared};
use crate::render::{to_json, RenderError};

/// Envoy resources of one DPP, each map keyed by resource name (deterministic order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// CDS. Shared ([`Shared`]): a zone makes equal clusters of many DPPs one allocation.
    pub clusters: BTreeMap<String, Shared<Cluster>>,
    /// EDS, keyed by cluster name. Shared with the [`crate::context::MeshContext`] that built
    /// them (and so with every other DPP of the mesh).
    pub endpoints: BTreeMap<String, Shared<ClusterLoadAssignment>>,
    /// LDS. Shared as the clusters are.
    pub listeners: BTreeMap<String, Shared<Listener>>,
    /// RDS (route configurations served separately; sidecars inline theirs in the HCM).
    pub routes: BTreeMap<String, Shared<RouteConfiguration>>,
    /// SDS.
    pub secrets: BTreeMap<String, Shared<Secret>>,
    /// RTDS: a builtin gateway's `gateway.listeners` layer (its listeners' connection limits),
    /// which its bootstrap's runtime waits for ([`crate::plugins`]' gateway generation).
    pub runtimes: BTreeMap<String, Shared<Runtime>>,
}

/// Drop `sdsConfig` from every SDS secret reference (`{name, sdsConfig}`) in `v` that names one
/// of `secrets`: Envoy then takes the static secret of that name.
fn resolve_static_secrets(v: &mut Value, secrets: &BTreeMap<String, Shared<Secret>>) {
    match v {
        Value::Object(m) => {
            let named_static = m
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| secrets.contains_key(n));
            if named_static && m.contains_key("sdsConfig") {
                m.remove("sdsConfig");
            }
            for x in m.values_mut() {
                resolve_static_secrets(x, secrets);
            }
        }
        Value::Array(a) => {
            for x in a {
                resolve_static_secrets(x, secrets);
            }
        }
        _ => {}
    }
}

/// Replace every RDS reference (`rds: {routeConfigName}`) in `v` that names one of `routes`
/// with that route configuration inline (`routeConfig`): a static bootstrap has no ADS.
fn inline_rds(
    v: &mut Value,
    routes: &BTreeMap<String, Shared<RouteConfiguration>>,
) -> Result<(), RenderError> {
    match v {
        Value::Object(m) => {
            let named = m
                .get("rds")
                .and_then(|r| r.get("routeConfigName"))
                .and_then(Value::as_str)
                .and_then(|n| routes.get(n));
            if let Some(rc) = named {
                let rc = to_json(&**rc)?;
                m.remove("rds");
                m.insert("routeConfig".to_owned(), rc);
            }
            for x in m.values_mut() {
                inline_rds(x, routes)?;
            }
        }
        Value::Array(a) => {
            for x in a {
                inline_rds(x, routes)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A value of one of [`Snapshot`]'s maps: an xDS resource behind a [`Shared`] allocation,
/// with its encoding.
pub trait HeldResource {
    /// The resource's message type.
    type Resource: Message + Name + PartialEq;

    /// The resource.
    fn resource(&self) -> &Self::Resource;

    /// Its protobuf encoding, computed once per allocation ([`Shared::wire`]).
    fn wire(&self) -> &[u8];

    /// Equal content (the same allocation first).
    fn same(&self, other: &Self) -> bool;
}

impl<T: Message + Name + PartialEq> HeldResource for Shared<T> {
    type Resource = T;
    fn resource(&self) -> &T {
        self
    }
    fn wire(&self) -> &[u8] {
        Shared::wire(self)
    }
    fn same(&self, other: &Self) -> bool {
        self == other
    }
}

fn render_map<H: HeldResource>(m: &BTreeMap<String, H>) -> Result<Value, RenderError> {
    let mut out = Map::new();
    for (name, held) in m {
        out.insert(name.clone(), to_json(held.resource())?);
    }
    Ok(Value::Object(out))
}

impl Snapshot {
    /// The config document: `{ "<typeUrl>": { "<name>": <proto3 JSON> } }`, one key per xDS
    /// type that has resources (the shape the transition seed's diffs use), private keys
    /// redacted ([`crate::render::redact_sensitive`]).
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
        put(RUNTIME_TYPE, render_map(&self.runtimes)?);
        put(SECRET_TYPE, render_map(&self.secrets)?);
        let mut doc = Value::Object(doc);
        crate::render::redact_sensitive(&mut doc);
        Ok(doc)
    }

    /// Content hash of one xDS type's resources (hex SHA-256): the xDS `version_info`. Equal
    /// content, equal version.
    ///
    /// The hash is taken over canonical JSON (object keys sorted), not over prost's encoding:
    /// envoy-types generates `HashMap`s for proto maps (`Metadata.filter_metadata`,
    /// `Struct.fields`), so the wire bytes of equal messages can differ in map order.
    ///
    /// # Errors
    /// [`RenderError`] if a resource cannot be rendered.
    pub fn version(&self, type_url: &str) -> Result<String, RenderError> {
        use sha2::Digest as _;
        // Render only the asked type (empty for a type without resources, as before).
        let rendered = match type_url {
            CLUSTER_TYPE => render_map(&self.clusters)?,
            ENDPOINT_TYPE => render_map(&self.endpoints)?,
            LISTENER_TYPE => render_map(&self.listeners)?,
            ROUTE_TYPE => render_map(&self.routes)?,
            SECRET_TYPE => render_map(&self.secrets)?,
            RUNTIME_TYPE => render_map(&self.runtimes)?,
            _ => Value::Object(Map::new()),
        };
        let mut canonical = String::new();
        if rendered.as_object().is_some_and(|o| !o.is_empty()) {
            write_canonical(&rendered, &mut canonical);
        }
        let digest = sha2::Sha256::digest(canonical.as_bytes());
        Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Per type URL, per resource name: the resource's version, as the zone serves them (the
    /// delta xDS `Resource.version`, and through [`type_version`](umbra_xds_protocol::version::type_version) the SotW `version_info`).
    ///
    /// A resource equal (as a typed message) to the same-named resource of `previous` keeps
    /// the version `previous` gave it; any other gets a fresh content hash of its protobuf
    /// encoding ([`bytes_version`] of [`Shared::wire`]: the encoding is kept, and is what ADS
    /// sends, so a resource is encoded once per generation). Typed equality compares proto maps as maps, so equal
    /// content never changes version when regenerated. The one case a fresh hash does not
    /// settle is a proto map with several entries nested inside an `Any` (kept as bytes, whose
    /// map order varies): equal content there can get a new version, which costs a redundant
    /// push, never a missed one. This avoids the canonical JSON rendering of [`Snapshot::version`]
    /// (about 1 ms per DPP, see BENCHMARKS.md) on the reconciler's path.
    pub fn resource_versions(&self, previous: Option<(&Snapshot, &TypeVersions)>) -> TypeVersions {
        let mut copy = self.clone();
        copy.resource_versions_sharing(previous)
    }

    /// [`Snapshot::resource_versions`], and every resource equal to the same-named one of
    /// `previous` takes `previous`'s allocation (with its kept encoding), so that interning it
    /// ([`SnapshotInterner::intern`]) and comparing it later need no second deep comparison.
    /// Cloning a snapshot clones its `Arc`s only, so [`Snapshot::resource_versions`] is this on
    /// a copy.
    pub fn resource_versions_sharing(
        &mut self,
        previous: Option<(&Snapshot, &TypeVersions)>,
    ) -> TypeVersions {
        fn of<H: HeldResource + Clone>(
            current: &mut BTreeMap<String, H>,
            previous: Option<(&BTreeMap<String, H>, Option<&ResourceVersions>)>,
        ) -> ResourceVersions {
            current
                .iter_mut()
                .map(|(name, m)| {
                    let kept = previous.and_then(|(resources, versions)| {
                        let p = resources.get(name).filter(|p| p.same(m))?;
                        let v = versions.and_then(|v| v.get(name))?;
                        *m = p.clone();
                        Some(v)
                    });
                    let version = kept.cloned().unwrap_or_else(|| bytes_version(m.wire()));
                    (name.clone(), version)
                })
                .collect()
        }
        let prev = |t: &str| previous.map(|(_, v)| v.get(t));
        let mut out = TypeVersions::new();
        out.insert(
            CLUSTER_TYPE,
            of(
                &mut self.clusters,
                previous.map(|(p, _)| &p.clusters).zip(prev(CLUSTER_TYPE)),
            ),
        );
        out.insert(
            ENDPOINT_TYPE,
            of(
                &mut self.endpoints,
                previous.map(|(p, _)| &p.endpoints).zip(prev(ENDPOINT_TYPE)),
            ),
        );
        out.insert(
            LISTENER_TYPE,
            of(
                &mut self.listeners,
                previous.map(|(p, _)| &p.listeners).zip(prev(LISTENER_TYPE)),
            ),
        );
        out.insert(
            ROUTE_TYPE,
            of(
                &mut self.routes,
                previous.map(|(p, _)| &p.routes).zip(prev(ROUTE_TYPE)),
            ),
        );
        out.insert(
            SECRET_TYPE,
            of(
                &mut self.secrets,
                previous.map(|(p, _)| &p.secrets).zip(prev(SECRET_TYPE)),
            ),
        );
        out.insert(
            RUNTIME_TYPE,
            of(
                &mut self.runtimes,
                previous.map(|(p, _)| &p.runtimes).zip(prev(RUNTIME_TYPE)),
            ),
        );
        out
    }

    /// A static Envoy bootstrap holding this snapshot, for `envoy --mode validate`: EDS clusters
    /// become STATIC with their ClusterLoadAssignment inlined, secrets go to static secrets, and
    /// every SDS reference (`{name, sdsConfig}`, e.g. a TLS context's certificate or CA) whose
    /// name is one of the snapshot's secrets loses its `sdsConfig`, so Envoy resolves it to the
    /// static secret of that name instead of waiting for ADS. References to secrets the snapshot
    /// does not hold keep their ADS source (Envoy accepts them without checking the TLS context).
    /// RTDS runtimes become static runtime layers of the same name; route configurations served
    /// over RDS are inlined where their connection managers name them.
    ///
    /// # Errors
    /// [`RenderError`] if a resource cannot be rendered.
    pub fn to_static_bootstrap(&self) -> Result<Value, RenderError> {
        let mut clusters = Vec::new();
        for (name, c) in &self.clusters {
            let mut c: Cluster = (**c).clone();
            if c.eds_cluster_config.is_some() {
                use envoy_types::pb::envoy::config::cluster::v3::cluster::{
                    ClusterDiscoveryType, DiscoveryType,
                };
                c.eds_cluster_config = None;
                c.cluster_discovery_type =
                    Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
                c.load_assignment = Some(self.endpoints.get(name).map_or_else(
                    || ClusterLoadAssignment {
                        cluster_name: name.clone(),
                        ..Default::default()
                    },
                    |e| (**e).clone(),
                ));
            }
            let mut c = to_json(&c)?;
            resolve_static_secrets(&mut c, &self.secrets);
            clusters.push(c);
        }
        let mut listeners: Vec<Value> = self
            .listeners
            .values()
            .map(|l| to_json(&**l))
            .collect::<Result<_, _>>()?;
        for l in &mut listeners {
            resolve_static_secrets(l, &self.secrets);
            inline_rds(l, &self.routes)?;
        }
        let secrets: Vec<Value> = self
            .secrets
            .values()
            .map(|s| to_json(&**s))
            .collect::<Result<_, _>>()?;
        let mut bootstrap = json!({
            "node": {"id": "umbra-validate", "cluster": "umbra-validate"},
            "staticResources": {"listeners": listeners, "clusters": clusters, "secrets": secrets},
        });
        // RTDS layers become static layers of the same name, holding the same keys.
        if !self.runtimes.is_empty() {
            let layers: Vec<Value> = self
                .runtimes
                .values()
                .map(|r| {
                    let rendered = to_json(&**r)?;
                    Ok(json!({
                        "name": r.name,
                        "staticLayer": rendered.get("layer").cloned().unwrap_or(json!({})),
                    }))
                })
                .collect::<Result<_, RenderError>>()?;
            bootstrap["layeredRuntime"] = json!({ "layers": layers });
        }
        Ok(bootstrap)
    }
}

/// Equal resources of many snapshots held once, with their encoding (issue 21: a zone's RSS
/// per DPP; issue 39: encode once): an outbound cluster is usually the same for every DPP
/// calling the service, an outbound listener for every DPP of the calling service, the mesh's
/// CA secret for every DPP of the mesh. Keyed by resource version, checked for equality
/// ([`Interner`]).
#[derive(Debug, Default)]
pub struct SnapshotInterner {
    clusters: Interner<Cluster>,
    endpoints: Interner<ClusterLoadAssignment>,
    listeners: Interner<Listener>,
    routes: Interner<RouteConfiguration>,
    secrets: Interner<Secret>,
    runtimes: Interner<Runtime>,
}

fn intern_map<T: PartialEq>(
    interner: &Interner<T>,
    resources: &mut BTreeMap<String, Shared<T>>,
    versions: Option<&ResourceVersions>,
) {
    let Some(versions) = versions else { return };
    for (name, r) in resources {
        if let Some(version) = versions.get(name) {
            interner.intern(version, r);
        }
    }
}

impl SnapshotInterner {
    /// Replace each resource of `snapshot` with the equal one already held (and so with its
    /// encoding, [`Shared::wire`]), or hold it; `versions` are the snapshot's
    /// ([`Snapshot::resource_versions`]). A resource that kept its version from the DPP's
    /// previous snapshot finds that snapshot's allocation here, encoding included.
    pub fn intern(&self, snapshot: &mut Snapshot, versions: &TypeVersions) {
        intern_map(
            &self.clusters,
            &mut snapshot.clusters,
            versions.get(CLUSTER_TYPE),
        );
        intern_map(
            &self.endpoints,
            &mut snapshot.endpoints,
            versions.get(ENDPOINT_TYPE),
        );
        intern_map(
            &self.listeners,
            &mut snapshot.listeners,
            versions.get(LISTENER_TYPE),
        );
        intern_map(&self.routes, &mut snapshot.routes, versions.get(ROUTE_TYPE));
        intern_map(
            &self.secrets,
            &mut snapshot.secrets,
            versions.get(SECRET_TYPE),
        );
        intern_map(
            &self.runtimes,
            &mut snapshot.runtimes,
            versions.get(RUNTIME_TYPE),
        );
    }

    /// Forget what no snapshot holds any more (call after a pass); how many resources are
    /// held.
    pub fn sweep(&self) -> usize {
        self.clusters.sweep()
            + self.endpoints.sweep()
            + self.listeners.sweep()
            + self.routes.sweep()
            + self.secrets.sweep()
            + self.runtimes.sweep()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::Metadata;
    use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};
    use umbra_xds_protocol::version::type_version;

    fn listener_with_tags(n: usize) -> Listener {
        let fields = (0..n)
            .map(|i| {
                (
                    format!("tag{i}"),
                    PbValue {
                        kind: Some(Kind::StringValue(format!("v{i}"))),
                    },
                )
            })
            .collect();
        Listener {
            name: "inbound:10.0.0.1:80".into(),
            metadata: Some(Metadata {
                filter_metadata: [("io.kuma.tags".to_owned(), Struct { fields })]
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn versions_are_content_hashes_independent_of_map_order() {
        let mut a = Snapshot::default();
        let mut b = Snapshot::default();
        a.listeners
            .insert("l".into(), listener_with_tags(16).into());
        b.listeners
            .insert("l".into(), listener_with_tags(16).into());
        assert_eq!(
            a.version(LISTENER_TYPE).unwrap(),
            b.version(LISTENER_TYPE).unwrap()
        );
        b.listeners
            .insert("l".into(), listener_with_tags(15).into());
        assert_ne!(
            a.version(LISTENER_TYPE).unwrap(),
            b.version(LISTENER_TYPE).unwrap()
        );
        assert_eq!(
            a.version(CLUSTER_TYPE).unwrap(),
            Snapshot::default().version(CLUSTER_TYPE).unwrap()
        );
    }

    #[test]
    fn resource_versions_survive_regeneration_and_track_changes() {
        let mut a = Snapshot::default();
        a.listeners
            .insert("l".into(), listener_with_tags(16).into());
        a.listeners.insert("k".into(), listener_with_tags(2).into());
        let va = a.resource_versions(None);
        // Regenerated with the same content: map order may differ in the encoding, versions
        // do not.
        let mut b = Snapshot::default();
        b.listeners
            .insert("l".into(), listener_with_tags(16).into());
        b.listeners.insert("k".into(), listener_with_tags(2).into());
        let vb = b.resource_versions(Some((&a, &va)));
        assert_eq!(va, vb);
        assert_eq!(
            type_version(&va[LISTENER_TYPE]),
            type_version(&vb[LISTENER_TYPE])
        );
        // One resource changes: only its version moves.
        b.listeners
            .insert("l".into(), listener_with_tags(15).into());
        let vc = b.resource_versions(Some((&a, &va)));
        assert_ne!(vc[LISTENER_TYPE]["l"], va[LISTENER_TYPE]["l"]);
        assert_eq!(vc[LISTENER_TYPE]["k"], va[LISTENER_TYPE]["k"]);
        assert_ne!(
            type_version(&vc[LISTENER_TYPE]),
            type_version(&va[LISTENER_TYPE])
        );
        assert_eq!(
            type_version(&vc[CLUSTER_TYPE]),
            type_version(&ResourceVersions::new())
        );
    }

    #[test]
    fn static_bootstrap_resolves_sds_references_to_snapshot_secrets() {
        use envoy_types::pb::envoy::config::core::v3::{
            config_source, AggregatedConfigSource, ConfigSource,
        };
        use envoy_types::pb::envoy::config::listener::v3::FilterChain;
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
            CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
        };
        let sds = |name: &str| SdsSecretConfig {
            name: name.into(),
            sds_config: Some(ConfigSource {
                config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
                    AggregatedConfigSource {},
                )),
                ..Default::default()
            }),
        };
        let tls = DownstreamTlsContext {
            common_tls_context: Some(CommonTlsContext {
                tls_certificate_sds_secret_configs: vec![sds("held"), sds("missing")],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut s = Snapshot::default();
        s.listeners.insert(
            "l".into(),
            crate::interner::Shared::from(Listener {
                name: "l".into(),
                filter_chains: vec![FilterChain {
                    transport_socket: Some(
                        envoy_types::pb::envoy::config::core::v3::TransportSocket {
                            name: "envoy.transport_sockets.tls".into(),
                            config_type: Some(
                                envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                                    crate::protobuf::any(&tls),
                                ),
                            ),
                        },
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        );
        s.secrets.insert(
            "held".into(),
            Secret {
                name: "held".into(),
                ..Default::default()
            }
            .into(),
        );
        let b = s.to_static_bootstrap().unwrap();
        let refs = &b["staticResources"]["listeners"][0]["filterChains"][0]["transportSocket"]
            ["typedConfig"]["commonTlsContext"]["tlsCertificateSdsSecretConfigs"];
        assert_eq!(refs[0], json!({"name": "held"}));
        assert!(refs[1].get("sdsConfig").is_some());
        assert_eq!(b["staticResources"]["secrets"][0]["name"], "held");
    }

    #[test]
    fn static_bootstrap_inlines_eds() {
        use envoy_types::pb::envoy::config::cluster::v3::cluster::{
            ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
        };
        let mut s = Snapshot::default();
        s.clusters.insert(
            "backend".into(),
            crate::interner::Shared::from(Cluster {
                name: "backend".into(),
                cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
                eds_cluster_config: Some(EdsClusterConfig::default()),
                ..Default::default()
            }),
        );
        let b = s.to_static_bootstrap().unwrap();
        let c = &b["staticResources"]["clusters"][0];
        assert_eq!(c["type"], "STATIC");
        assert_eq!(c["loadAssignment"]["clusterName"], "backend");
        assert!(c.get("edsClusterConfig").is_none());
    }
}
