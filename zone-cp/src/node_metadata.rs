//! The Dataplane an Envoy carries in its node metadata (`dataplane.resource`, as kuma-dp sends
//! it): parsed and checked against the node id ([`dataplane_from_metadata`]), and registered in
//! the zone store ([`register_dataplane`]) once the stream is authenticated.

use tonic::Status;
use umbra_core::dataplane::DpKey;

/// Node metadata key carrying the Dataplane resource inline (as Kuma's kuma-dp sends it).
pub const DATAPLANE_METADATA_KEY: &str = "dataplane.resource";

/// Node metadata key naming the proxy type (`dataplane`, `ingress`, `egress`; Kuma's kuma-dp).
pub const PROXY_TYPE_METADATA_KEY: &str = "dataplane.proxyType";

pub(crate) fn string_metadata(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    key: &str,
) -> Option<String> {
    use envoy_types::pb::google::protobuf::value::Kind;
    node.and_then(|n| n.metadata.as_ref())
        .and_then(|m| m.fields.get(key))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
}

/// Kuma's default Envoy admin port (kuma-dp's).
pub const DEFAULT_ADMIN_PORT: u32 = 9901;

/// Node metadata key with the Envoy admin port (kuma-dp's, a decimal string).
pub const ADMIN_PORT_METADATA_KEY: &str = "dataplane.admin.port";

/// The Envoy admin port of a stream's proxy: node metadata `dataplane.admin.port`, else
/// `networking.admin.port` of its Dataplane (`dataplane`), else [`DEFAULT_ADMIN_PORT`] (what
/// the bootstrap binds when kuma-dp names none). Only the port is taken from the proxy; the address is always loopback (Kuma does not trust a proxy's
/// admin address either: it would turn the control plane into a client of any host).
pub fn admin_port(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    dataplane: Option<&umbra_core::dataplane::DataplaneSpec>,
) -> u16 {
    let from_node = port_metadata(node, ADMIN_PORT_METADATA_KEY);
    let from_resource = || {
        dataplane
            .and_then(|d| d.networking.admin.as_ref())
            .and_then(|a| a.get("port"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
    };
    from_node
        .or_else(from_resource)
        .unwrap_or_else(|| u16::try_from(DEFAULT_ADMIN_PORT).unwrap_or(u16::MAX))
}

/// Node metadata key with the port of kuma-dp's DNS listener in Envoy (`--dns-envoy-port`, a
/// decimal string; Kuma's `dataplane.dns.port`).
pub const DNS_PORT_METADATA_KEY: &str = "dataplane.dns.port";

/// The port kuma-dp's resolver forwards to (node metadata `dataplane.dns.port`), where Kuma's
/// `kuma:dns` listener is generated for a transparent proxy; `None` when absent, 0 or not a
/// port.
pub fn dns_port(node: Option<&envoy_types::pb::envoy::config::core::v3::Node>) -> Option<u16> {
    port_metadata(node, DNS_PORT_METADATA_KEY)
}

/// A port in node metadata `key`: a decimal string (as kuma-dp sends it) or a whole number,
/// 1..=65535; `None` otherwise.
fn port_metadata(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    key: &str,
) -> Option<u16> {
    use envoy_types::pb::google::protobuf::value::Kind;
    node.and_then(|n| n.metadata.as_ref())
        .and_then(|m| m.fields.get(key))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => s.trim().parse::<u16>().ok(),
            Some(Kind::NumberValue(n)) if n.fract() == 0.0 && (1.0..=65535.0).contains(n) =>
            {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Some(*n as u16)
            }
            _ => None,
        })
        .filter(|p| *p != 0)
}

/// Longest version field kept from a proxy's node (bytes); longer ones are dropped.
pub const MAX_VERSION_FIELD: usize = 256;

/// Kuma's `Version` of a stream's proxy: the node metadata `version` (what kuma-dp sends in
/// its bootstrap request: `{kumaDp: {version, gitTag, gitCommit, buildDate}, envoy: {version,
/// build}}`), with `envoy` filled from the node's Envoy build version when kuma-dp's has none:
/// `version` `<major>.<minor>.<patch>` and `build` `<sha>/<version>/<status>/<type>/<ssl>`, as
/// Envoy prints it. Only those fields are kept, as strings of at most [`MAX_VERSION_FIELD`]
/// bytes. `None` when the node says nothing.
pub fn proxy_version(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Option<serde_json::Value> {
    use envoy_types::pb::envoy::config::core::v3::node::UserAgentVersionType;
    let node = node?;
    let reported = node
        .metadata
        .as_ref()
        .and_then(|m| m.fields.get("version"))
        .map(proto_value_to_json)
        .unwrap_or_default();
    // Only Kuma's fields, as short strings: the proxy writes this, the insight keeps it.
    let mut version = serde_json::json!({});
    for (component, fields) in [
        (
            "kumaDp",
            &["version", "gitTag", "gitCommit", "buildDate"][..],
        ),
        ("envoy", &["version", "build"][..]),
    ] {
        let kept: serde_json::Map<String, serde_json::Value> = fields
            .iter()
            .filter_map(|f| {
                let v = reported.get(component)?.get(*f)?.as_str()?;
                (!v.is_empty() && v.len() <= MAX_VERSION_FIELD)
                    .then(|| ((*f).to_owned(), serde_json::json!(v)))
            })
            .collect();
        if !kept.is_empty() {
            version[component] = serde_json::Value::Object(kept);
        }
    }
    let has_envoy = version
        .get("envoy")
        .and_then(|e| e.get("version"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if !has_envoy {
        if let Some(UserAgentVersionType::UserAgentBuildVersion(build)) =
            &node.user_agent_version_type
        {
            if let Some(v) = &build.version {
                let semver = format!("{}.{}.{}", v.major_number, v.minor_number, v.patch);
                let meta = |k: &str| {
                    build
                        .metadata
                        .as_ref()
                        .and_then(|m| m.fields.get(k))
                        .map(proto_value_to_json)
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .filter(|v| v.len() <= MAX_VERSION_FIELD / 5)
                        .unwrap_or_default()
                };
                let build = format!(
                    "{}/{semver}/{}/{}/{}",
                    meta("revision.sha"),
                    meta("revision.status"),
                    meta("build.type"),
                    meta("ssl.version")
                );
                version["envoy"] = serde_json::json!({"version": semver, "build": build});
            }
        }
    }
    (version.as_object().is_some_and(|o| !o.is_empty())).then_some(version)
}

/// A protobuf `Value` as JSON (numbers as JSON numbers; NaN and infinities as null).
fn proto_value_to_json(v: &envoy_types::pb::google::protobuf::Value) -> serde_json::Value {
    use envoy_types::pb::google::protobuf::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::StructValue(st)) => serde_json::Value::Object(
            st.fields
                .iter()
                .map(|(k, v)| (k.clone(), proto_value_to_json(v)))
                .collect(),
        ),
        Some(Kind::ListValue(l)) => {
            serde_json::Value::Array(l.values.iter().map(proto_value_to_json).collect())
        }
    }
}

/// Which proxy a stream's node names: a ZoneIngress `("", <node id>)` when its metadata says
/// `dataplane.proxyType: ingress`, a ZoneEgress ([`DpKey::zone_egress`]`(<node id>)`) when it
/// says `egress` (Kuma's node id for both: the bare name), else the DPP of node id
/// `<mesh>.<name>`.
///
/// # Errors
/// `INVALID_ARGUMENT` for a node id of neither shape, or an unknown proxy type.
pub fn proxy_key(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<DpKey, Status> {
    let id = node.map(|n| n.id.clone()).unwrap_or_default();
    match string_metadata(node, PROXY_TYPE_METADATA_KEY).as_deref() {
        Some("ingress") if !id.is_empty() => Ok(DpKey::new("", id)),
        Some("ingress") => Err(Status::invalid_argument(
            "a zone ingress's node id must be its name",
        )),
        Some("egress") if !id.is_empty() => Ok(DpKey::zone_egress(id)),
        Some("egress") => Err(Status::invalid_argument(
            "a zone egress's node id must be its name",
        )),
        None | Some("dataplane" | "") => DpKey::from_node_id(&id).ok_or_else(|| {
            Status::invalid_argument(format!("node id {id:?} is not <mesh>.<dataplane name>"))
        }),
        Some(other) => Err(Status::invalid_argument(format!(
            "node metadata {PROXY_TYPE_METADATA_KEY}: {other:?} is not served here (dataplane, ingress, egress)"
        ))),
    }
}

/// Register the ZoneIngress an ingress Envoy carries in its node metadata
/// ([`zone_ingress_from_metadata`]), keeping the `zone` and `availableServices` the zone
/// computed for it (the Envoy's copy has none); nothing when absent or unchanged.
///
/// # Errors
/// What [`zone_ingress_from_metadata`] refuses; `INVALID_ARGUMENT` for another zone's
/// ingress (`zone` neither empty nor `local_zone`); `FAILED_PRECONDITION` when the store
/// refuses the write.
pub fn register_zone_ingress(
    store: &crate::store::Store,
    local_zone: &str,
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<(), Status> {
    if let Some(mut resource) = zone_ingress_from_metadata(key, node)? {
        if resource
            .as_zone_ingress()
            .is_some_and(|zi| zi.is_remote(local_zone))
        {
            return Err(Status::invalid_argument(format!(
                "node metadata {DATAPLANE_METADATA_KEY}: zone ingress {} names another zone than {local_zone:?}",
                key.name
            )));
        }
        let existing = store.get(&resource.key());
        if existing
            .as_ref()
            .and_then(|e| e.resource.as_zone_ingress())
            .is_some_and(|zi| zi.is_remote(local_zone))
        {
            return Err(Status::permission_denied(format!(
                "zone ingress {}: that name is another zone's ingress, synced from the Global",
                key.name
            )));
        }
        if let (Some(e), umbra_core::resource::Spec::ZoneIngress(new)) =
            (&existing, &mut resource.spec)
        {
            if let Some(old) = e.resource.as_zone_ingress() {
                if new.zone.is_empty() {
                    new.zone.clone_from(&old.zone);
                }
                if new.available_services.is_empty() {
                    new.available_services.clone_from(&old.available_services);
                }
            }
        }
        put_registered(store, resource, existing.as_ref())?;
    }
    Ok(())
}

/// Store `resource`, a zone proxy registering itself from its node metadata, over `existing`
/// (compare-and-swap on its version; `0`: must not exist), unless its spec and labels are
/// unchanged.
///
/// # Errors
/// `FAILED_PRECONDITION` when the store refuses the write.
pub fn put_registered(
    store: &crate::store::Store,
    resource: umbra_core::resource::Resource,
    existing: Option<&umbra_store::Stored>,
) -> Result<(), Status> {
    let unchanged = existing.is_some_and(|e| {
        e.resource.spec == resource.spec && e.resource.meta.labels == resource.meta.labels
    });
    if !unchanged {
        store
            .put(resource, Some(existing.map_or(0, |e| e.version)))
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
    }
    Ok(())
}

/// The ZoneIngress an ingress Envoy carries in its node metadata (`dataplane.resource`),
/// checked: a valid ZoneIngress named by the node id. `None` when absent.
///
/// # Errors
/// An `INVALID_ARGUMENT` status listing every problem.
pub fn zone_ingress_from_metadata(
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<Option<umbra_core::resource::Resource>, Status> {
    zone_proxy_from_metadata(key, node, umbra_core::resource::ResourceType::ZoneIngress)
}

/// The zone proxy resource (`ty`: ZoneIngress or ZoneEgress) an Envoy carries in its node
/// metadata (`dataplane.resource`), checked: a valid resource of type `ty` named by the node
/// id (Kuma's `zoneIngressFor`/`zoneEgressFor`). `None` when absent.
///
/// # Errors
/// An `INVALID_ARGUMENT` status listing every problem.
pub fn zone_proxy_from_metadata(
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    ty: umbra_core::resource::ResourceType,
) -> Result<Option<umbra_core::resource::Resource>, Status> {
    let Some(text) = string_metadata(node, DATAPLANE_METADATA_KEY) else {
        return Ok(None);
    };
    let resource = umbra_core::resource::Resource::from_bytes(text.as_bytes()).map_err(|e| {
        Status::invalid_argument(format!("node metadata {DATAPLANE_METADATA_KEY}: {e}"))
    })?;
    if resource.ty() != ty || resource.meta.name != key.name {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY} must be the {} {} named by the node id",
            ty.name(),
            key.name
        )));
    }
    let violations = resource.validate();
    if violations.has_violations() {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY}: {violations}"
        )));
    }
    Ok(Some(resource))
}

/// Register `resource`, the Dataplane an Envoy carries in its node metadata
/// ([`dataplane_from_metadata`]), in the zone `zone`: stamped with the zone's tag
/// ([`umbra_core::dataplane::DataplaneSpec::stamp_zone`], as for a Dataplane written through
/// the API) and stored.
///
/// # Errors
/// `FAILED_PRECONDITION` when the store refuses it.
pub fn register_dataplane(
    store: &crate::store::Store,
    zone: &str,
    mut resource: umbra_core::resource::Resource,
) -> Result<(), Status> {
    if let umbra_core::resource::Spec::Dataplane(dp) = &mut resource.spec {
        dp.stamp_zone(zone);
    }
    store
        .put(resource, None)
        .map(|_| ())
        .map_err(|e| Status::failed_precondition(e.to_string()))
}

/// The Dataplane an Envoy carries in its node metadata (`dataplane.resource`, YAML or JSON in
/// universal format), checked: a valid Dataplane whose mesh and name match the node id.
/// `None` when the metadata is absent.
///
/// # Errors
/// An `INVALID_ARGUMENT` status listing every problem.
pub fn dataplane_from_metadata(
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<Option<umbra_core::resource::Resource>, Status> {
    use envoy_types::pb::google::protobuf::value::Kind;
    let Some(text) = node
        .and_then(|n| n.metadata.as_ref())
        .and_then(|m| m.fields.get(DATAPLANE_METADATA_KEY))
        .and_then(|v| match &v.kind {
            Some(Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
    else {
        return Ok(None);
    };
    let resource = umbra_core::resource::Resource::from_bytes(text.as_bytes()).map_err(|e| {
        Status::invalid_argument(format!("node metadata {DATAPLANE_METADATA_KEY}: {e}"))
    })?;
    if resource.ty() != umbra_core::resource::ResourceType::Dataplane
        || resource.meta.mesh != key.mesh
        || resource.meta.name != key.name
    {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY} must be the Dataplane {}/{} named by the node id",
            key.mesh, key.name
        )));
    }
    let violations = resource.validate();
    if violations.has_violations() {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY}: {violations}"
        )));
    }
    Ok(Some(resource))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
    use umbra_core::resource::{Resource, ResourceKey, ResourceType};

    fn node(id: &str, resource: &str) -> Node {
        let s = |v: &str| Value {
            kind: Some(Kind::StringValue(v.to_owned())),
        };
        Node {
            id: id.to_owned(),
            metadata: Some(Struct {
                fields: [
                    (PROXY_TYPE_METADATA_KEY.to_owned(), s("ingress")),
                    (DATAPLANE_METADATA_KEY.to_owned(), s(resource)),
                ]
                .into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn admin_port_and_version_come_from_the_node() {
        use envoy_types::pb::envoy::config::core::v3::{node::UserAgentVersionType, BuildVersion};
        use envoy_types::pb::envoy::r#type::v3::SemanticVersion;
        let s = |v: &str| Value {
            kind: Some(Kind::StringValue(v.to_owned())),
        };
        let st = |fields: Vec<(&str, Value)>| Value {
            kind: Some(Kind::StructValue(Struct {
                fields: fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            })),
        };
        let long = "x".repeat(MAX_VERSION_FIELD + 1);
        let node = Node {
            metadata: Some(Struct {
                fields: [
                    (ADMIN_PORT_METADATA_KEY.to_owned(), s("19901")),
                    (
                        "version".to_owned(),
                        st(vec![
                            (
                                "kumaDp",
                                st(vec![("version", s("2.7.29")), ("gitTag", s(&long))]),
                            ),
                            ("other", s("dropped")),
                        ]),
                    ),
                ]
                .into(),
            }),
            user_agent_version_type: Some(UserAgentVersionType::UserAgentBuildVersion(
                BuildVersion {
                    version: Some(SemanticVersion {
                        major_number: 1,
                        minor_number: 31,
                        patch: 2,
                    }),
                    metadata: Some(Struct {
                        fields: [
                            ("revision.sha".to_owned(), s("abc")),
                            ("revision.status".to_owned(), s("Clean")),
                            ("build.type".to_owned(), s("RELEASE")),
                            ("ssl.version".to_owned(), s("BoringSSL")),
                        ]
                        .into(),
                    }),
                },
            )),
            ..Default::default()
        };
        assert_eq!(admin_port(Some(&node), None), 19901);
        assert_eq!(admin_port(None, None), 9901);
        assert_eq!(dns_port(Some(&node)), None);
        let mut with_dns = node.clone();
        if let Some(m) = with_dns.metadata.as_mut() {
            m.fields.insert(DNS_PORT_METADATA_KEY.into(), s("15054"));
        }
        assert_eq!(dns_port(Some(&with_dns)), Some(15054));
        assert_eq!(
            proxy_version(Some(&node)),
            Some(serde_json::json!({
                "kumaDp": {"version": "2.7.29"},
                "envoy": {"version": "1.31.2", "build": "abc/1.31.2/Clean/RELEASE/BoringSSL"},
            })),
            "Kuma's fields only, short strings only, Envoy's from its build version"
        );
        assert_eq!(proxy_version(Some(&Node::default())), None);
    }

    #[test]
    fn a_dataplane_registered_from_node_metadata_is_stamped_with_the_zone() {
        let store = crate::store::Store::new();
        store
            .put(
                umbra_core::resource::Resource::from_bytes(b"type: Mesh\nname: default\n").unwrap(),
                None,
            )
            .unwrap();
        let carried = umbra_core::resource::Resource::from_bytes(
            b"type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/zone: zone-9}\n",
        )
        .unwrap();
        register_dataplane(&store, "zone-1", carried).unwrap();
        let stored = store
            .get(&ResourceKey::dataplane("default", "web".to_owned()))
            .unwrap();
        let dp = stored.resource.as_dataplane().unwrap();
        assert_eq!(dp.networking.inbound[0].tags["kuma.io/zone"], "zone-1");
    }

    fn ingress(
        store: &crate::store::Store,
        name: &str,
    ) -> Option<umbra_core::zone_ingress::ZoneIngressSpec> {
        store
            .get(&ResourceKey {
                ty: ResourceType::ZoneIngress,
                mesh: String::new(),
                name: name.into(),
            })
            .and_then(|s| s.resource.as_zone_ingress().cloned())
    }

    #[test]
    fn an_ingress_registers_itself_and_nothing_else() {
        let store = crate::store::Store::new();
        let n = node(
            "zi",
            "type: ZoneIngress\nname: zi\nnetworking: {address: 10.0.0.1, port: 10001}\n",
        );
        let key = proxy_key(Some(&n)).unwrap();
        assert_eq!(key, DpKey::new("", "zi"));
        register_zone_ingress(&store, "zone-1", &key, Some(&n)).unwrap();
        assert!(ingress(&store, "zi").is_some());
        // What the zone computed stays when the Envoy reconnects with its bare copy.
        let mut spec = ingress(&store, "zi").unwrap();
        spec.zone = "zone-1".into();
        spec.available_services = vec![umbra_core::zone_ingress::AvailableService {
            tags: [("kuma.io/service".to_owned(), "b".to_owned())].into(),
            instances: 1,
            mesh: "m".into(),
            external_service: false,
        }];
        let mut r = Resource::from_bytes(
            b"type: ZoneIngress\nname: zi\nnetworking: {address: 10.0.0.1, port: 10001}\n",
        )
        .unwrap();
        r.spec = umbra_core::resource::Spec::ZoneIngress(spec);
        store.put(r, None).unwrap();
        register_zone_ingress(&store, "zone-1", &key, Some(&n)).unwrap();
        assert_eq!(ingress(&store, "zi").unwrap().available_services.len(), 1);
        // Another zone's ingress: neither claimed nor taken over.
        let claim = node("zj", "type: ZoneIngress\nname: zj\nzone: zone-2\nnetworking: {address: 10.0.0.1, port: 10001}\n");
        let e = register_zone_ingress(&store, "zone-1", &DpKey::new("", "zj"), Some(&claim))
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        store
            .put_synced(Resource::from_bytes(b"type: ZoneIngress\nname: far\nzone: zone-2\nnetworking: {address: 10.9.9.9, port: 10001}\n").unwrap())
            .unwrap();
        let takeover = node(
            "far",
            "type: ZoneIngress\nname: far\nnetworking: {address: 10.6.6.6, port: 10001}\n",
        );
        let e = register_zone_ingress(&store, "zone-1", &DpKey::new("", "far"), Some(&takeover))
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            ingress(&store, "far").unwrap().networking.address,
            "10.9.9.9"
        );
    }
}
