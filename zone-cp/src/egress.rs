//! The zone's ZoneEgresses as proxies: how an egress Envoy's ADS stream registers the
//! ZoneEgress it carries in its node metadata ([`register_zone_egress`]) and the admin port it
//! reports ([`admin_port`]).
//!
//! An egress Envoy is recognised by its node (Kuma's kuma-dp): node id `<name>`, node metadata
//! `dataplane.proxyType: egress` ([`crate::node_metadata::proxy_key`] keys it
//! [`DpKey::zone_egress`]), `dataplane.resource` the ZoneEgress in YAML or JSON when kuma-dp
//! was started with one (else the ZoneEgress must be stored already, through `PUT
//! /zoneegresses/{name}`). It authenticates with a zone-ingress token of scope `egress`
//! ([`crate::dp_auth`]). Its insight is kept like a ZoneIngress's, under its key.
//!
//! Generation: the reconciler generates each of this zone's ZoneEgresses ([`local`]) on every
//! pass (`umbra_xds::egress`), keyed `DpKey::zone_egress(name)`; sidecars of a Mesh with
//! `routing.zoneEgress: true` reach them at their [`addresses`].

use tonic::Status;
use umbra_core::dataplane::DpKey;
use umbra_core::resource::{Resource, ResourceType};

use crate::node_metadata::{ADMIN_PORT_METADATA_KEY, DATAPLANE_METADATA_KEY};

/// What an ADS stream of a ZoneEgress needs of the ADS service.
pub(crate) struct StreamContext<'a> {
    /// The zone store (the ZoneEgress registered there).
    pub(crate) store: &'a crate::store::Store,
    /// Who may open the stream (a zone-ingress token of scope `egress`).
    pub(crate) gate: &'a crate::dp_auth::Gate,
    /// Where the stream's insight is kept.
    pub(crate) insights: &'a crate::insight::Insights,
}

/// The first request of a ZoneEgress's ADS stream (`key` from [`DpKey::zone_egress`]):
/// authenticated with a zone-ingress token of scope `egress`, the ZoneEgress registered from
/// the node metadata when it carries one ([`register_zone_egress`]), its insight opened under
/// `key` (its admin reachable when `local`). Returns what `crate::ads::Ads::open` does. No
/// config is generated for it yet (see the module docs).
///
/// # Errors
/// The gate's refusal (`Unauthenticated`, `PermissionDenied`) or the registration's.
pub(crate) fn open_stream(
    ctx: &StreamContext<'_>,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    token: Option<&str>,
    key: DpKey,
    local: bool,
) -> Result<(DpKey, Option<crate::dp_auth::ProxyIdentity>, u64), Status> {
    let identity = ctx.gate.check(token, &key, None).inspect_err(|e| {
        tracing::warn!(zone_egress = %key.name, code = ?e.code(), reason = %e.message(), "ADS stream refused");
    })?;
    if identity.is_none() {
        tracing::warn!(zone_egress = %key.name, "ADS stream NOT authenticated (--dp-auth none)");
    }
    register_zone_egress(ctx.store, &ctx.gate.zone, &key, node)?;
    let stored = ctx.store.get(&umbra_core::resource::ResourceKey {
        ty: ResourceType::ZoneEgress,
        mesh: String::new(),
        name: key.name.clone(),
    });
    let admin = crate::insight::AdminEndpoint {
        port: admin_port(
            node,
            stored.as_ref().and_then(|s| s.resource.as_zone_egress()),
        ),
        local,
        dns_port: None,
    };
    let stream = ctx
        .insights
        .open_stream(&key, admin, crate::node_metadata::proxy_version(node));
    tracing::info!(zone_egress = %key.name, authenticated = identity.is_some(), "Envoy connected (no config is generated for zone egresses yet)");
    Ok((key, identity, stream))
}

/// The ZoneEgress an egress Envoy carries in its node metadata (`dataplane.resource`),
/// checked: a valid ZoneEgress named by the node id (Kuma's `zoneEgressFor` in
/// `pkg/xds/bootstrap/generator.go`). `None` when absent.
///
/// # Errors
/// An `INVALID_ARGUMENT` status listing every problem.
pub fn zone_egress_from_metadata(
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<Option<Resource>, Status> {
    crate::node_metadata::zone_proxy_from_metadata(key, node, ResourceType::ZoneEgress)
}

/// Register the ZoneEgress an egress Envoy carries in its node metadata
/// ([`zone_egress_from_metadata`]) in zone `local_zone`, keeping the `zone` already stored when
/// the Envoy's copy has none; nothing when absent or unchanged.
///
/// # Errors
/// What [`zone_egress_from_metadata`] refuses; `INVALID_ARGUMENT` for another zone's egress
/// (`zone` neither empty nor `local_zone`); `FAILED_PRECONDITION` when the store refuses the
/// write.
pub fn register_zone_egress(
    store: &crate::store::Store,
    local_zone: &str,
    key: &DpKey,
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Result<(), Status> {
    let Some(mut resource) = zone_egress_from_metadata(key, node)? else {
        return Ok(());
    };
    if resource
        .as_zone_egress()
        .is_some_and(|ze| ze.is_remote(local_zone))
    {
        return Err(Status::invalid_argument(format!(
            "node metadata {DATAPLANE_METADATA_KEY}: zone egress {} names another zone than {local_zone:?}",
            key.name
        )));
    }
    let existing = store.get(&resource.key());
    if let (Some(e), umbra_core::resource::Spec::ZoneEgress(new)) = (&existing, &mut resource.spec)
    {
        if let Some(old) = e.resource.as_zone_egress() {
            if new.zone.is_empty() {
                new.zone.clone_from(&old.zone);
            }
        }
    }
    crate::node_metadata::put_registered(store, resource, existing.as_ref())
}

/// The Envoy admin port of an egress stream's proxy: node metadata `dataplane.admin.port`,
/// else `networking.admin.port` of its ZoneEgress (`spec`), else Kuma's default (9901).
pub fn admin_port(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
    spec: Option<&umbra_core::zone_egress::ZoneEgressSpec>,
) -> u16 {
    let reported = node
        .and_then(|n| n.metadata.as_ref())
        .is_some_and(|m| m.fields.contains_key(ADMIN_PORT_METADATA_KEY));
    // The node's port when it reports one (else the default).
    let from_node = crate::node_metadata::admin_port(node, None);
    if reported {
        return from_node;
    }
    spec.and_then(umbra_core::zone_egress::ZoneEgressSpec::admin_port)
        .unwrap_or(from_node)
}

/// This zone's ZoneEgresses (zone empty or `zone`), by name.
pub(crate) fn local(
    store: &crate::store::Store,
    zone: &str,
) -> Vec<(String, umbra_core::zone_egress::ZoneEgressSpec)> {
    let mut out: Vec<(String, umbra_core::zone_egress::ZoneEgressSpec)> = store
        .list_all(ResourceType::ZoneEgress)
        .iter()
        .filter_map(|s| {
            let ze = s.resource.as_zone_egress()?;
            (!ze.is_remote(zone)).then(|| (s.resource.meta.name.clone(), ze.clone()))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Where sidecars reach `egresses`: their addresses and ports, sorted and de-duplicated
/// (egresses behind one address are one endpoint).
pub(crate) fn addresses(
    egresses: &[(String, umbra_core::zone_egress::ZoneEgressSpec)],
) -> Vec<umbra_xds::context::EgressAddress> {
    let mut out: Vec<umbra_xds::context::EgressAddress> = egresses
        .iter()
        .filter(|(_, ze)| !ze.networking.address.is_empty() && ze.networking.port != 0)
        .map(|(_, ze)| umbra_xds::context::EgressAddress {
            address: ze.networking.address.clone(),
            port: ze.networking.port,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};

    fn node(id: &str, fields: &[(&str, &str)]) -> Node {
        Node {
            id: id.into(),
            metadata: Some(Struct {
                fields: fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            (*k).to_owned(),
                            Value {
                                kind: Some(Kind::StringValue((*v).to_owned())),
                            },
                        )
                    })
                    .collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_egress_node_is_keyed_apart_and_registers_its_egress() {
        let n = node(
            "ze-1",
            &[
                ("dataplane.proxyType", "egress"),
                (
                    DATAPLANE_METADATA_KEY,
                    "type: ZoneEgress\nname: ze-1\nnetworking: {address: 10.0.0.1, port: 10002, admin: {port: 9902}}\n",
                ),
            ],
        );
        let key = crate::node_metadata::proxy_key(Some(&n)).unwrap();
        assert_eq!(key, DpKey::zone_egress("ze-1"));
        assert!(key.is_zone_egress() && !key.is_zone_ingress());
        let store = crate::store::Store::new();
        register_zone_egress(&store, "zone-1", &key, Some(&n)).unwrap();
        let stored = store
            .get(&umbra_core::resource::ResourceKey {
                ty: ResourceType::ZoneEgress,
                mesh: String::new(),
                name: "ze-1".into(),
            })
            .unwrap();
        let spec = stored.resource.as_zone_egress().unwrap();
        assert_eq!(spec.networking.port, 10002);
        assert_eq!(admin_port(Some(&n), Some(spec)), 9902);
        assert_eq!(admin_port(Some(&n), None), 9901);
        // Registering the same again changes nothing.
        register_zone_egress(&store, "zone-1", &key, Some(&n)).unwrap();
        assert_eq!(
            store.get(&stored.resource.key()).map(|s| s.version),
            Some(stored.version)
        );
        // Another zone's, a mismatched name, an invalid one: refused.
        let other = node(
            "ze-2",
            &[(
                DATAPLANE_METADATA_KEY,
                "type: ZoneEgress\nname: ze-2\nzone: zone-2\nnetworking: {port: 1}\n",
            )],
        );
        let e = register_zone_egress(&store, "zone-1", &DpKey::zone_egress("ze-2"), Some(&other))
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let wrong = node(
            "ze-3",
            &[(
                DATAPLANE_METADATA_KEY,
                "type: ZoneIngress\nname: ze-3\nnetworking: {port: 1}\n",
            )],
        );
        assert!(zone_egress_from_metadata(&DpKey::zone_egress("ze-3"), Some(&wrong)).is_err());
        let invalid = node(
            "ze-4",
            &[(
                DATAPLANE_METADATA_KEY,
                "type: ZoneEgress\nname: ze-4\nnetworking: {address: 10.0.0.1}\n",
            )],
        );
        let e = zone_egress_from_metadata(&DpKey::zone_egress("ze-4"), Some(&invalid)).unwrap_err();
        assert!(e.message().contains("networking.port"), "{e:?}");
        assert!(zone_egress_from_metadata(&key, Some(&node("ze-1", &[])))
            .unwrap()
            .is_none());
        let nameless = node("", &[("dataplane.proxyType", "egress")]);
        assert!(crate::node_metadata::proxy_key(Some(&nameless)).is_err());
    }
}
