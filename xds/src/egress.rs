//! Generation for a ZoneEgress proxy (Kuma 2.7.29's `pkg/xds/generator/egress`: the
//! `InternalServicesGenerator` and `ExternalServicesGenerator`, with the MeshTrafficPermission
//! plugin's egress path): the one way out of a zone for the sidecars of every Mesh with
//! `routing.zoneEgress: true` (which needs mTLS). Sidecars reach it as their context's
//! [`MeshContext::route_through_egress`] and [`crate::base::external::egress_endpoints`] say.
//!
//! One listener `inbound:<address>:<port>` (INBOUND, a TLS inspector, no reuse port), only
//! when it has a filter chain. Per mesh, in the given order:
//! - **Other zones' services** (Kuma's internal services): one SNI passthrough chain per
//!   destination, exactly as the ZoneIngress does it ([`crate::ingress::passthrough_chains`]):
//!   the caller's mTLS goes through untouched to cluster `<mesh>:<service>` (EDS, connect
//!   timeout 5s, `altStatName` `<mesh>_<service>`, subsets by the destinations' tags), whose
//!   endpoints are the other zones' ingresses ([`MeshContext::remote_endpoints`], tagged
//!   `mesh: <mesh>`).
//! - **ExternalServices reachable from this zone** (no `kuma.io/zone` tag, or this zone's): one
//!   chain per service named `<service>_<mesh>` (Kuma's `GetEgressFilterChainName`) matching
//!   `transportProtocol: tls` and every SNI its destinations give (`<service>{mesh=<mesh>}`,
//!   plus tagged ones); the egress terminates the mesh's mTLS (Kuma's `ServerSideMTLS`: any
//!   peer of the mesh, client certificate required), checks the permission, and:
//!   - for `http`, `http2` and `grpc` (the service's common `kuma.io/protocol`): an HTTP
//!     connection manager (stat prefix the service) with route configuration
//!     `outbound:<service>`, one catch-all route to `<mesh>:<service>` with `autoHostRewrite`
//!     and timeout 0s;
//!   - otherwise a TCP proxy to `<mesh>:<service>`.
//!
//!   Cluster `<mesh>:<service>`: the ExternalService cluster a sidecar would have
//!   ([`crate::base::external::cluster`]: endpoints inline, `STATIC` or `STRICT_DNS`, TLS
//!   origination per endpoint), endpoints tagged `mesh: <mesh>`, connect timeout 5s,
//!   `altStatName` `<mesh>_<service>`, protocol options without an idle timeout.
//! - **Permissions** (Kuma's `meshtrafficpermission` `configureEgress`): the MeshTrafficPermission
//!   `from` rules whose top-level `targetRef` selects the ExternalService's tags (Mesh,
//!   MeshSubset, MeshService `<service>`) become an HTTP RBAC filter first in the connection
//!   manager (a network RBAC first on TCP chains, stat prefix `<service>.`); without such
//!   rules, the old TrafficPermission that selects the ExternalService as a destination becomes
//!   a network RBAC; with neither, everything is denied (`rules: {}`), as Kuma 2.7 denies
//!   ExternalService traffic through an egress until a permission names it.
//!
//! Secrets (`identity_cert:secret:<mesh>` for `spiffe://<mesh>/zone-egress`, `mesh_ca:secret:<mesh>`)
//! are added by the caller, which holds the mesh CAs.
//!
//! Differences from Kuma, deliberate:
//! - Kuma emits one filter chain per SNI of an ExternalService, all alike and all with the
//!   same name; Umbra emits one chain carrying every SNI (Envoy matches the same connections).
//! - Kuma also applies old FaultInjections and RateLimits, MeshFaultInjection, MeshRateLimit
//!   and MeshLoadBalancingStrategy on egress chains; Umbra does not yet (README: ZoneEgress).
//! - An ExternalService tagged with another zone is reached, in Kuma, through that zone's
//!   ingress, which advertises it; Umbra's ingresses do not advertise ExternalServices, so the
//!   egress has no chain for it (README: ZoneEgress).
//!
//! Pure and deterministic, like [`crate::generate`].

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener,
};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager::RouteSpecifier, http_filter, HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::google::protobuf::BoolValue;
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::dependencies::ingress::{mesh_destinations, MATCH_ALL};
use umbra_core::external_service::ExternalEndpoint;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::target_ref::{SERVICE_TAG, ZONE_TAG};
use umbra_core::view::PolicySet;
use umbra_core::zone_egress::ZoneEgressSpec;

use crate::base::common::{
    catch_all_virtual_hosts, http_protocol_options, network_filter, router_filter, server_mtls,
    tcp_proxy_filter,
};
use crate::base::external;
use crate::context::MeshContext;
use crate::envoy_core::socket;
use crate::error::GenerateError;
use crate::ingress::{
    mesh_cluster_name, passthrough_chains, passthrough_cluster, sni_from_tags, tls_inspector,
};
use crate::load_assignment::{load_assignment, Endpoint};
use crate::names::{inbound_listener_name, sanitize_metric, HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY};
use crate::plugins::traffic_permission::{
    deny_rules, old_network_rbac, rbac_rules, select_traffic_permissions, RbacRules,
    HTTP_RBAC_FILTER, NETWORK_RBAC_FILTER,
};
use crate::protobuf::{any, secs};
use crate::snapshot::Snapshot;

/// One mesh as the egress sees it: its context (built with
/// [`MeshContext::route_through_egress`]) and its policies in one view.
#[derive(Debug, Clone, Copy)]
pub struct EgressMesh<'a> {
    /// The mesh's context in this zone.
    pub ctx: &'a MeshContext,
    /// The mesh's policies in the view being generated.
    pub policies: &'a PolicySet,
}

/// The permission an egress chain gets (see the module docs).
enum Permission {
    /// The old TrafficPermission's network RBAC.
    Old(Box<NetworkRbac>),
    /// MeshTrafficPermission rules (or the deny-all default).
    Mesh(RbacRules),
}

/// Generate the snapshot of the ZoneEgress `ze` of zone `local_zone`, serving `meshes` (those
/// that do not route through their egress, or lack mTLS, are skipped).
///
/// # Errors
/// [`GenerateError::Policy`] when a MeshTrafficPermission rule's conf does not read as one.
pub fn generate_egress(
    ze: &ZoneEgressSpec,
    local_zone: &str,
    meshes: &[EgressMesh<'_>],
) -> Result<Snapshot, GenerateError> {
    let mut snap = Snapshot::default();
    let mut chains = Vec::new();
    let mut sni_used = BTreeSet::new();
    let ipv6 = ze.networking.address.contains(':');
    for m in meshes
        .iter()
        .filter(|m| m.policies.zone_egress && m.ctx.mtls)
    {
        let mesh = m.ctx.mesh.as_str();
        let destinations = mesh_destinations(m.policies);
        let match_all = destinations.get(MATCH_ALL).cloned().unwrap_or_default();
        // Other zones' services, passed through by SNI.
        for (service, far) in &m.ctx.remote_endpoints {
            let eps: Vec<Endpoint> = far
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    e.tags.insert("mesh".to_owned(), mesh.to_owned());
                    e
                })
                .collect();
            let refs: Vec<&Endpoint> = eps.iter().collect();
            let own = destinations.get(service).into_iter().flatten();
            let relevant = passthrough_chains(
                mesh,
                service,
                &refs,
                own.chain(match_all.iter()),
                &mut sni_used,
                &mut chains,
            );
            let name = mesh_cluster_name(mesh, service);
            let mut cluster = passthrough_cluster(&name, &relevant, &match_all);
            cluster.alt_stat_name = sanitize_metric(&name);
            snap.clusters.insert(name.clone(), cluster.into());
            snap.endpoints
                .insert(name.clone(), load_assignment(&name, &eps).into());
        }
        // ExternalServices this zone reaches, originated here.
        let mut by_service: BTreeMap<&str, Vec<&ExternalEndpoint>> = BTreeMap::new();
        for es in m.policies.external.all() {
            let zone = es.tags.get(ZONE_TAG).map(String::as_str);
            if zone.is_none_or(|z| z == local_zone) {
                by_service.entry(es.service()).or_default().push(es);
            }
        }
        for (service, eps) in by_service {
            let mut snis = Vec::new();
            let own = destinations.get(service).into_iter().flatten();
            for destination in own.chain(match_all.iter()) {
                let mut tags = destination.clone();
                tags.insert(SERVICE_TAG.to_owned(), service.to_owned());
                tags.insert("mesh".to_owned(), mesh.to_owned());
                let sni = sni_from_tags(&tags);
                if sni_used.insert(sni.clone()) {
                    snis.push(sni);
                }
            }
            if snis.is_empty() {
                continue;
            }
            let permission = permission(m.policies, mesh, service, eps[0])?;
            chains.push(external_chain(
                mesh,
                service,
                (m.ctx, m.policies),
                snis,
                &permission,
            ));
            let name = mesh_cluster_name(mesh, service);
            snap.clusters.insert(
                name.clone(),
                external_cluster(&name, mesh, &eps, (m.ctx, m.policies), ipv6).into(),
            );
        }
    }
    if !chains.is_empty() {
        let (address, port) = (ze.networking.address.as_str(), ze.networking.port);
        let name = inbound_listener_name(address, port);
        snap.listeners.insert(
            name.clone(),
            crate::interner::Shared::from(Listener {
                name,
                address: Some(socket(address, port)),
                traffic_direction: TrafficDirection::Inbound as i32,
                enable_reuse_port: Some(BoolValue { value: false }),
                listener_filters: vec![tls_inspector()],
                filter_chains: chains,
                ..Default::default()
            }),
        );
    }
    Ok(snap)
}

/// The permission of ExternalService `service` (its first resource `es`) in `policies`.
fn permission(
    policies: &PolicySet,
    mesh: &str,
    service: &str,
    es: &ExternalEndpoint,
) -> Result<Permission, GenerateError> {
    // The ExternalService as a Dataplane with one inbound carrying its tags: what the
    // top-level targetRefs and the old TrafficPermissions' destinations are matched against.
    let mut synthetic: DataplaneSpec = serde_json::from_value(serde_json::json!({
        "networking": {
            "address": "127.0.0.1",
            "inbound": [{"port": 1, "tags": es.declared_tags}],
        }
    }))
    .map_err(|e| GenerateError::Policy {
        policy: "MeshTrafficPermission".to_owned(),
        resource: format!("ExternalService/{}", es.name),
        reason: format!("its tags do not read as a selector: {e}"),
    })?;
    // A staged rollout's sample selects DPPs only, never the egress's view of a service.
    synthetic.synthetic = true;
    let Some(inbound) = synthetic.networking.inbound.first() else {
        return Ok(Permission::Mesh(rbac_rules(&deny_rules(), mesh)?));
    };
    let key = synthetic.inbound_key(inbound);
    let matched = policies.matched(ResourceType::MeshTrafficPermission, &synthetic);
    if let Some(rules) = matched.from_rules.get(&key) {
        return Ok(Permission::Mesh(rbac_rules(rules, mesh)?));
    }
    let traffic_permissions: Vec<&Resource> = policies
        .old_policies_with_superseded(ResourceType::TrafficPermission)
        .collect();
    let old = select_traffic_permissions(&synthetic, &traffic_permissions);
    Ok(match old.get(&key) {
        Some(tp) => Permission::Old(Box::new(old_network_rbac(service, Some(tp)))),
        None => Permission::Mesh(rbac_rules(&deny_rules(), mesh)?),
    })
}

/// The filter chain of ExternalService `service` of `mesh` (see the module docs).
fn external_chain(
    mesh: &str,
    service: &str,
    (ctx, policies): (&MeshContext, &PolicySet),
    snis: Vec<String>,
    permission: &Permission,
) -> FilterChain {
    let cluster = mesh_cluster_name(mesh, service);
    let stat = sanitize_metric(service);
    let mut filters: Vec<Filter> = Vec::new();
    let network_rbac = |rules: &RbacRules| NetworkRbac {
        rules: Some(rules.rules.clone()),
        shadow_rules: rules.shadow_rules.clone(),
        stat_prefix: format!("{stat}."),
        ..Default::default()
    };
    let protocol = external::service_protocol(policies, ctx, service);
    if protocol.is_http() {
        let mut http_filters = Vec::new();
        match permission {
            Permission::Old(rbac) => {
                filters.push(network_filter(NETWORK_RBAC_FILTER, (**rbac).clone()))
            }
            Permission::Mesh(rules) => http_filters.push(HttpFilter {
                name: HTTP_RBAC_FILTER.to_owned(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(&HttpRbac {
                    rules: Some(rules.rules.clone()),
                    shadow_rules: rules.shadow_rules.clone(),
                    ..Default::default()
                }))),
                ..Default::default()
            }),
        }
        http_filters.push(router_filter());
        let mut virtual_hosts = catch_all_virtual_hosts(service, &cluster);
        external::auto_host_rewrite(&mut virtual_hosts);
        let hcm = HttpConnectionManager {
            stat_prefix: stat.clone(),
            http_filters,
            route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                name: format!("outbound:{service}"),
                validate_clusters: Some(BoolValue { value: false }),
                virtual_hosts,
                ..Default::default()
            })),
            ..Default::default()
        };
        filters.push(network_filter(HCM_FILTER, hcm));
    } else {
        match permission {
            Permission::Old(rbac) => {
                filters.push(network_filter(NETWORK_RBAC_FILTER, (**rbac).clone()))
            }
            Permission::Mesh(rules) => {
                filters.push(network_filter(NETWORK_RBAC_FILTER, network_rbac(rules)));
            }
        }
        filters.push(tcp_proxy_filter(&stat, &cluster, secs(0)));
    }
    FilterChain {
        name: format!("{service}_{mesh}"),
        filter_chain_match: Some(FilterChainMatch {
            server_names: snis,
            transport_protocol: "tls".to_owned(),
            ..Default::default()
        }),
        filters,
        transport_socket: Some(server_mtls(mesh)),
        ..Default::default()
    }
}

/// The cluster `name` (`<mesh>:<service>`) of ExternalService endpoints `eps` on the egress.
fn external_cluster(
    name: &str,
    mesh: &str,
    eps: &[&ExternalEndpoint],
    (ctx, policies): (&MeshContext, &PolicySet),
    ipv6: bool,
) -> Cluster {
    let tagged: Vec<ExternalEndpoint> = eps
        .iter()
        .map(|e| {
            let mut e = (*e).clone();
            e.tags.insert("mesh".to_owned(), mesh.to_owned());
            e
        })
        .collect();
    let refs: Vec<&ExternalEndpoint> = tagged.iter().collect();
    let service = eps.first().map_or("", |e| e.service());
    let protocol = external::service_protocol(policies, ctx, service);
    let mut cluster = external::cluster(name, &refs, protocol, ipv6);
    cluster.alt_stat_name = sanitize_metric(name);
    if protocol.is_http() {
        cluster.typed_extension_protocol_options.insert(
            HTTP_PROTOCOL_OPTIONS_KEY.to_owned(),
            crate::draft::pack(http_protocol_options(protocol, None)),
        );
    }
    cluster
}
