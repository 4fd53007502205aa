//! EDS building blocks: a service [`Endpoint`] and the [`load_assignment`] (Envoy
//! `ClusterLoadAssignment`) of an outbound cluster, as Kuma 2.7's `xds/cache/cla` builds it.
//! [`MeshContext::build`](crate::context::MeshContext::build) builds one per service and the EDS
//! base generator serves them. A leaf: it imports only [`crate::util`].

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::util::{endpoint_metadata, socket};

/// One endpoint of a service: a healthy inbound of some DPP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// IP the endpoint listens on (advertised, inbound or DPP address).
    pub address: String,
    /// Inbound (dataplane) port.
    pub port: u32,
    /// The inbound's tags.
    pub tags: BTreeMap<String, String>,
}

/// The EDS resource of outbound cluster `service` with endpoints `eps`: one locality, weight 1
/// each, the endpoint's tags (minus `kuma.io/service`) as `envoy.lb` and
/// `envoy.transport_socket_match` metadata; no locality at all when `eps` is empty.
pub fn load_assignment(service: &str, eps: &[Endpoint]) -> ClusterLoadAssignment {
    let lb_endpoints: Vec<LbEndpoint> = eps
        .iter()
        .map(|e| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                address: Some(socket(&e.address, e.port)),
                ..Default::default()
            })),
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            metadata: endpoint_metadata(&e.tags),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: service.to_owned(),
        endpoints: if lb_endpoints.is_empty() {
            Vec::new()
        } else {
            vec![LocalityLbEndpoints {
                lb_endpoints,
                ..Default::default()
            }]
        },
        ..Default::default()
    }
}
