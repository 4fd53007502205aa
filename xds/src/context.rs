//! What generation needs to know about a DPP's mesh, computed once per mesh and shared by
//! every DPP: endpoints per service (from every Dataplane's inbounds), each service's protocol,
//! its EDS ClusterLoadAssignment (built once and shared by every DPP's snapshot, as Kuma's
//! `xds/cache/cla` does), and whether mTLS is on. Builds the EDS resources with
//! [`crate::load_assignment`]; [`Endpoint`] is re-exported from there.
//!
//! In a multi-zone deployment ([`Zones`]), a service's endpoints also include one endpoint per
//! other zone's ZoneIngress that offers it (Kuma 2.7's `topology.BuildEdsEndpointMap` and
//! `fillIngressOutbounds`): the ingress's advertised address, weighted by the service's
//! instances there, in that zone's locality; local endpoints then weigh the number of remote
//! ingresses (every endpoint's `kuma.io/zone` tag is its zone, as Kuma's zone CP sets it), and with the Mesh's `routing.localityAwareLoadBalancing` remote localities get
//! priority 1 so the local zone is preferred. Cross-zone traffic is routed by SNI, so remote
//! endpoints exist only in meshes with mTLS on.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;

use umbra_core::dataplane::{DataplaneSpec, InboundState};
use umbra_core::mesh::{LoggingBackends, MeshSpec, TracingBackends};
use umbra_core::target_ref::{PROTOCOL_TAG, SERVICE_TAG};
use umbra_core::zone_ingress::ZoneIngressSpec;

use crate::interner::Shared;
use crate::load_assignment::load_assignment;
pub use crate::load_assignment::{Endpoint, Locality};

/// Kuma's zone tag (`kuma.io/zone`), which names an endpoint's zone when its tags carry it.
pub use umbra_core::target_ref::ZONE_TAG;

/// The multi-zone view of a zone CP: its zone's name and every ZoneIngress it knows (its own
/// and, synced from the Global, other zones').
#[derive(Debug, Clone, Copy)]
pub struct Zones<'a> {
    /// This zone's name.
    pub local: &'a str,
    /// The ZoneIngresses known here.
    pub ingresses: &'a [&'a ZoneIngressSpec],
}

/// Application protocol of an inbound or a service (`kuma.io/protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// HTTP/1.1.
    Http,
    /// HTTP/2.
    Http2,
    /// gRPC.
    Grpc,
    /// Kafka (TCP with a broker filter in Kuma; TCP here).
    Kafka,
    /// Plain TCP, or unknown.
    Tcp,
}

impl Protocol {
    /// The protocol of `dp`'s inbound whose listener is `key` (its `kuma.io/protocol` tag;
    /// TCP when there is no such inbound).
    pub fn of_inbound(dp: &DataplaneSpec, key: &umbra_core::dataplane::InboundKey) -> Protocol {
        let tag = dp
            .networking
            .inbound
            .iter()
            .find(|i| dp.inbound_key(i) == *key)
            .and_then(|i| i.tags.get(PROTOCOL_TAG));
        Protocol::parse(tag.map(String::as_str))
    }

    /// Parse a `kuma.io/protocol` value; anything unknown is TCP (Kuma's `ParseProtocol`).
    pub fn parse(s: Option<&str>) -> Protocol {
        match s {
            Some("http") => Protocol::Http,
            Some("http2") => Protocol::Http2,
            Some("grpc") => Protocol::Grpc,
            Some("kafka") => Protocol::Kafka,
            _ => Protocol::Tcp,
        }
    }

    /// Kuma's protocol stack: the protocols this one can be treated as, most specific first
    /// (`grpc` → grpc, http2, tcp; `http2` → http2, tcp; `http` → http, tcp).
    pub fn stack(self) -> &'static [Protocol] {
        match self {
            Protocol::Grpc => &[Protocol::Grpc, Protocol::Http2, Protocol::Tcp],
            Protocol::Http2 => &[Protocol::Http2, Protocol::Tcp],
            Protocol::Http => &[Protocol::Http, Protocol::Tcp],
            Protocol::Kafka => &[Protocol::Kafka, Protocol::Tcp],
            Protocol::Tcp => &[Protocol::Tcp],
        }
    }

    /// `true` for protocols served by an HTTP connection manager.
    pub fn is_http(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Http2 | Protocol::Grpc)
    }
}

/// Mesh-wide facts for generation. Build once per mesh with [`MeshContext::build`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeshContext {
    /// Mesh name.
    pub mesh: String,
    /// mTLS enabled (`mtls.enabledBackend` set).
    pub mtls: bool,
    /// Endpoints per `kuma.io/service`, sorted by address then port.
    pub endpoints: BTreeMap<String, Vec<Endpoint>>,
    /// Protocol per service: the common protocol of its endpoints ([`common_protocol`], Kuma's
    /// `GetServiceProtocol`), TCP when there are none.
    pub protocols: BTreeMap<String, Protocol>,
    /// The EDS resource of every service in `endpoints`, keyed by service (the outbound
    /// cluster's name). Shared: every DPP's snapshot holds the same allocation ([`Shared`], with its encoding), so a mesh of N DPPs
    /// with M outbounds each builds these once, not N×M times.
    pub load_assignments: BTreeMap<String, Shared<ClusterLoadAssignment>>,
    /// The Mesh's logging backends (what an old TrafficLog refers to).
    pub logging: LoggingBackends,
    /// The Mesh's tracing backends (what an old TrafficTrace refers to).
    pub tracing: TracingBackends,
    /// This zone's name, in a multi-zone deployment.
    pub zone: Option<String>,
    /// The Mesh's `networking.outbound.passthrough` is `false` (Kuma's `IsPassthrough` is
    /// off): transparent proxies get no outbound passthrough cluster
    /// ([`crate::base::transparent`]).
    pub passthrough_disabled: bool,
    /// The inbound interfaces of the mesh's Dataplanes, `(ip, port)` sorted, by
    /// `kuma.io/service` (empty when the tag is missing): every inbound, whatever its health;
    /// the IP is the inbound's `address`, else `networking.address` (Kuma's
    /// `ToInboundInterface`). What direct access reaches ([`crate::base::direct_access`]).
    pub inbound_interfaces: BTreeMap<String, BTreeSet<(String, u32)>>,
    /// The zone's ZoneEgresses, when the mesh routes through them
    /// ([`MeshContext::route_through_egress`]): where sidecars reach other zones and
    /// ExternalServices ([`crate::base::external::egress_endpoints`]).
    pub egresses: Vec<EgressAddress>,
    /// Other zones' ingress endpoints per service, as built, when the mesh routes through its
    /// ZoneEgress: sidecars then reach those services at the egress, and the egress forwards
    /// to these ([`crate::egress`]). Empty otherwise.
    pub remote_endpoints: BTreeMap<String, Vec<Endpoint>>,
}

/// A ZoneEgress of this zone as sidecars reach it: `networking.address` and `port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EgressAddress {
    /// `networking.address`.
    pub address: String,
    /// `networking.port`.
    pub port: u32,
}

/// Kuma's `GetCommonProtocol`: the most specific protocol in every endpoint's stack (grpc +
/// http2 → http2, http + http2 → tcp); TCP for no endpoints.
pub fn common_protocol(ps: &BTreeSet<Protocol>) -> Protocol {
    let mut iter = ps.iter();
    let Some(first) = iter.next() else {
        return Protocol::Tcp;
    };
    let rest: Vec<&Protocol> = iter.collect();
    first
        .stack()
        .iter()
        .copied()
        .find(|p| rest.iter().all(|o| o.stack().contains(p)))
        .unwrap_or(Protocol::Tcp)
}

impl MeshContext {
    /// Index `dataplanes` of `mesh` (a single-zone view: no localities, no remote endpoints).
    /// Inbounds that are not ready (`health.ready: false`, `state: NotReady`) and ignored ones
    /// give no endpoint.
    pub fn build<'a>(
        mesh: &str,
        spec: &MeshSpec,
        dataplanes: impl IntoIterator<Item = &'a DataplaneSpec>,
    ) -> MeshContext {
        Self::build_in_zone(mesh, spec, dataplanes, None)
    }

    /// [`MeshContext::build`] in a multi-zone deployment when `zones` is given: every
    /// endpoint gets its zone as locality, and other zones' ingresses that offer a service of
    /// this mesh become endpoints of that service (see the module docs).
    pub fn build_in_zone<'a>(
        mesh: &str,
        spec: &MeshSpec,
        dataplanes: impl IntoIterator<Item = &'a DataplaneSpec>,
        zones: Option<Zones<'_>>,
    ) -> MeshContext {
        let mut endpoints: BTreeMap<String, Vec<Endpoint>> = BTreeMap::new();
        let locality_aware = spec
            .routing
            .as_ref()
            .and_then(|r| r.get("localityAwareLoadBalancing"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let locality = |zone: &str, local: &str| Locality {
            zone: zone.to_owned(),
            priority: u32::from(locality_aware && zone != local),
        };
        let mut ingress_instances = 0u32;
        if let Some(z) = zones.filter(|_| spec.mtls_enabled()) {
            // Ingresses behind one load balancer share an address: one endpoint for them all.
            let mut coordinates = BTreeSet::new();
            for zi in z.ingresses {
                if !zi.is_remote(z.local) || !zi.has_public_address() {
                    continue;
                }
                let n = &zi.networking;
                let at = (n.advertised_address.as_str(), n.advertised_port);
                if coordinates.contains(&at) {
                    continue;
                }
                if !zi.available_services.is_empty() {
                    coordinates.insert(at);
                }
                for service in zi.available_services.iter().filter(|s| s.mesh == mesh) {
                    // The ingress's zone, whatever the tags claim (the Global took it only
                    // from that zone).
                    let mut tags = service.tags.clone();
                    tags.insert(ZONE_TAG.to_owned(), zi.zone.clone());
                    endpoints
                        .entry(service.service().to_owned())
                        .or_default()
                        .push(Endpoint {
                            address: n.advertised_address.clone(),
                            port: n.advertised_port,
                            tags,
                            weight: service.instances,
                            locality: Some(locality(&zi.zone, z.local)),
                        });
                }
            }
            ingress_instances = u32::try_from(coordinates.len()).unwrap_or(u32::MAX);
        }
        let local_weight = ingress_instances.max(1);
        let mut inbound_interfaces: BTreeMap<String, BTreeSet<(String, u32)>> = BTreeMap::new();
        for dp in dataplanes {
            for inbound in &dp.networking.inbound {
                let key = dp.inbound_key(inbound);
                inbound_interfaces
                    .entry(inbound.service().to_owned())
                    .or_default()
                    .insert((key.address, key.port));
                let ready = inbound.health.as_ref().is_none_or(|h| h.ready)
                    && !matches!(
                        inbound.state,
                        Some(InboundState::NotReady | InboundState::Ignored)
                    );
                let Some(service) = inbound.tags.get(SERVICE_TAG) else {
                    continue;
                };
                if !ready {
                    continue;
                }
                let address = if !dp.networking.advertised_address.is_empty() {
                    dp.networking.advertised_address.clone()
                } else {
                    dp.inbound_key(inbound).address
                };
                endpoints
                    .entry(service.clone())
                    .or_default()
                    .push(Endpoint {
                        address,
                        port: inbound.port,
                        // In a multi-zone deployment a local endpoint is in this zone, whatever
                        // its tags say (Kuma's zone CP sets the tag on every inbound).
                        tags: match zones {
                            Some(z) => {
                                let mut tags = inbound.tags.clone();
                                tags.insert(ZONE_TAG.to_owned(), z.local.to_owned());
                                tags
                            }
                            None => inbound.tags.clone(),
                        },
                        weight: local_weight,
                        locality: zones.map(|z| locality(z.local, z.local)),
                    });
            }
        }
        let mut protocols = BTreeMap::new();
        for (service, eps) in &mut endpoints {
            eps.sort();
            let ps: BTreeSet<Protocol> = eps
                .iter()
                .map(|e| Protocol::parse(e.tags.get(PROTOCOL_TAG).map(String::as_str)))
                .collect();
            let p = common_protocol(&ps);
            protocols.insert(service.clone(), p);
        }
        let load_assignments = endpoints
            .iter()
            .map(|(service, eps)| {
                let cla = load_assignment(service, eps);
                (service.clone(), Shared::from(cla))
            })
            .collect();
        MeshContext {
            mesh: mesh.to_owned(),
            mtls: spec.mtls_enabled(),
            endpoints,
            protocols,
            load_assignments,
            logging: spec.logging_backends(),
            tracing: spec.tracing_backends(),
            zone: zones.map(|z| z.local.to_owned()),
            passthrough_disabled: !spec.is_passthrough(),
            inbound_interfaces,
            egresses: Vec::new(),
            remote_endpoints: BTreeMap::new(),
        }
    }

    /// Route the mesh through its zone's ZoneEgresses `egresses` (sorted by the caller), as
    /// Kuma 2.7 does when the Mesh has `routing.zoneEgress: true` and mTLS
    /// (`pkg/xds/topology/outbound.go` `BuildEdsEndpointMap`; the caller checks the Mesh):
    /// every endpoint in another zone (another zone's ingress) becomes one endpoint per
    /// egress, weight 1, same tags and locality, and the originals are kept in
    /// [`MeshContext::remote_endpoints`] for the egress itself. ExternalServices, which depend
    /// on the view, are routed at generation ([`crate::base::external::egress_endpoints`]).
    ///
    /// With no egress in the zone those services have no endpoint, as in Kuma. The load
    /// assignments of the services touched are rebuilt (their protocols are unchanged: the
    /// tags are the same).
    pub fn route_through_egress(&mut self, egresses: &[EgressAddress]) {
        self.egresses = egresses.to_vec();
        let local = self.zone.clone();
        let mut touched = BTreeSet::new();
        for (service, eps) in &mut self.endpoints {
            let remote =
                |e: &Endpoint| matches!((&e.locality, &local), (Some(l), Some(z)) if l.zone != *z);
            if !eps.iter().any(remote) {
                continue;
            }
            let (far, near): (Vec<Endpoint>, Vec<Endpoint>) = eps.drain(..).partition(remote);
            eps.extend(near);
            for e in &far {
                eps.extend(egresses.iter().map(|g| Endpoint {
                    address: g.address.clone(),
                    port: g.port,
                    tags: e.tags.clone(),
                    weight: 1,
                    locality: e.locality.clone(),
                }));
            }
            self.remote_endpoints.insert(service.clone(), far);
            touched.insert(service.clone());
        }
        for service in touched {
            let Some(eps) = self.endpoints.get_mut(&service) else {
                continue;
            };
            eps.sort();
            let cla = Shared::from(load_assignment(&service, eps));
            self.load_assignments.insert(service, cla);
        }
    }

    /// The endpoints of `service` in this zone (those of other zones' ingresses left out):
    /// what this zone's ingress forwards to.
    pub fn local_endpoints(&self, service: &str) -> impl Iterator<Item = &Endpoint> {
        let zone = self.zone.as_deref();
        self.endpoints
            .get(service)
            .into_iter()
            .flatten()
            .filter(move |e| match (&e.locality, zone) {
                (Some(l), Some(z)) => l.zone == z,
                _ => true,
            })
    }

    /// Adopt the `known` load assignments (service, EDS resource) whose content equals this
    /// context's for the same service, so that snapshots generated from an earlier context, or
    /// held by another holder of the mesh, share one allocation with those generated from this
    /// one: memory is held once, and comparing them
    /// ([`crate::snapshot::HeldResource::same`]) takes the pointer fast path. A candidate
    /// already shared costs a pointer comparison; any other, one content comparison. Never
    /// changes what generation produces.
    pub fn share_load_assignments<'a>(
        &mut self,
        known: impl IntoIterator<Item = (&'a String, &'a Shared<ClusterLoadAssignment>)>,
    ) {
        for (service, candidate) in known {
            if let Some(own) = self.load_assignments.get_mut(service) {
                if !Shared::ptr_eq(own, candidate) && **own == **candidate {
                    *own = Shared::clone(candidate);
                }
            }
        }
    }

    /// The ClusterLoadAssignment of `service`'s outbound cluster: the shared one built with the
    /// context, or an empty one (no endpoints) for a service nothing serves.
    pub fn load_assignment(&self, service: &str) -> Shared<ClusterLoadAssignment> {
        self.load_assignments
            .get(service)
            .cloned()
            .unwrap_or_else(|| Shared::from(load_assignment(service, &[])))
    }

    /// Protocol of a destination service (TCP when unknown).
    pub fn service_protocol(&self, service: &str) -> Protocol {
        self.protocols
            .get(service)
            .copied()
            .unwrap_or(Protocol::Tcp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_protocol_follows_kuma_stacks() {
        let set = |ps: &[Protocol]| ps.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(
            common_protocol(&set(&[Protocol::Grpc, Protocol::Http2])),
            Protocol::Http2
        );
        assert_eq!(
            common_protocol(&set(&[Protocol::Http, Protocol::Http2])),
            Protocol::Tcp
        );
        assert_eq!(common_protocol(&set(&[Protocol::Grpc])), Protocol::Grpc);
        assert_eq!(
            common_protocol(&set(&[Protocol::Http, Protocol::Grpc])),
            Protocol::Tcp
        );
        assert_eq!(common_protocol(&set(&[])), Protocol::Tcp);
    }
}
