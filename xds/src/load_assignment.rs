//! EDS building blocks: a service [`Endpoint`] (local, or a remote zone's ingress) and the
//! [`load_assignment`] (Envoy `ClusterLoadAssignment`) of an outbound cluster, as Kuma 2.7's
//! `xds/cache/cla` and `envoy/endpoints/v3` build it: one `LocalityLbEndpoints` per zone.
//! [`MeshContext::build`](crate::context::MeshContext::build) builds one per service and the EDS
//! base generator serves them. A leaf: it imports only [`crate::envoy_core`] and [`crate::tags`].

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::Locality as EnvoyLocality;
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::envoy_core::socket;
use crate::tags::endpoint_metadata;

/// One endpoint of a service: a healthy inbound of some DPP of this zone, or the ingress of
/// another zone that offers the service (Kuma's `core_xds.Endpoint`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// IP the endpoint listens on (advertised, inbound or DPP address; a remote ingress's
    /// advertised address).
    pub address: String,
    /// Inbound (dataplane) port, or the remote ingress's advertised port.
    pub port: u32,
    /// The inbound's tags (a remote service's `availableServices` tags).
    pub tags: BTreeMap<String, String>,
    /// Load-balancing weight: 1 for a DPP of a single-zone mesh; in a multi-zone mesh a remote
    /// ingress weighs its service's instance count and a local DPP the number of remote
    /// ingresses (Kuma's `BuildEdsEndpointMap`).
    pub weight: u32,
    /// The zone the endpoint is in, when the zone CP runs in a multi-zone deployment.
    pub locality: Option<Locality>,
}

/// Where an endpoint is (Kuma's `core_xds.Locality`): its zone, and the priority Envoy gives
/// it (0 local; 1 for another zone's when the mesh's locality-aware load balancing is on).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Locality {
    /// Zone name.
    pub zone: String,
    /// Envoy `LocalityLbEndpoints.priority`.
    pub priority: u32,
}

impl Endpoint {
    /// A local endpoint of weight 1 and no locality.
    pub fn new(address: impl Into<String>, port: u32, tags: BTreeMap<String, String>) -> Self {
        Endpoint {
            address: address.into(),
            port,
            tags,
            weight: 1,
            locality: None,
        }
    }
}

/// The EDS resource of outbound cluster `service` with endpoints `eps`: one
/// `LocalityLbEndpoints` per locality (zone and priority; endpoints without one together,
/// without a `locality`), sorted by zone, endpoints sorted by address then port; each endpoint
/// with its weight and its tags (minus `kuma.io/service`) as `envoy.lb` and
/// `envoy.transport_socket_match` metadata. No locality at all when `eps` is empty.
pub fn load_assignment(service: &str, eps: &[Endpoint]) -> ClusterLoadAssignment {
    let mut groups: BTreeMap<Option<&Locality>, Vec<&Endpoint>> = BTreeMap::new();
    for e in eps {
        groups.entry(e.locality.as_ref()).or_default().push(e);
    }
    let endpoints = groups
        .into_iter()
        .map(|(locality, mut members)| {
            members.sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
            LocalityLbEndpoints {
                locality: locality.map(|l| EnvoyLocality {
                    zone: l.zone.clone(),
                    ..Default::default()
                }),
                priority: locality.map_or(0, |l| l.priority),
                lb_endpoints: members
                    .into_iter()
                    .map(|e| LbEndpoint {
                        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                            EnvoyEndpoint {
                                address: Some(socket(&e.address, e.port)),
                                ..Default::default()
                            },
                        )),
                        load_balancing_weight: Some(UInt32Value { value: e.weight }),
                        metadata: endpoint_metadata(&e.tags),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: service.to_owned(),
        endpoints,
        ..Default::default()
    }
}
