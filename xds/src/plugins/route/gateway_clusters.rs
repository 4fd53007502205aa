//! The clusters of a builtin gateway (Kuma 2.7.29 `pkg/plugins/runtime/gateway/
//! cluster_generator.go`): per destination and host, named as Kuma names them, with Kuma's
//! gateway shape (a 32 KiB connection buffer, HTTP/1.1 upstream unless the backend's tags say
//! otherwise, edge HTTP/2 window sizes).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::Http2ProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    explicit_http_config::ProtocolConfig, ExplicitHttpConfig, UpstreamProtocolOptions,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::google::protobuf::UInt32Value;
use umbra_core::target_ref::SERVICE_TAG;

use super::backends::Split;
use super::gateway_table::UNRESOLVED_BACKEND;
use crate::plugins::input::Origins;
use crate::snapshot::Snapshot;

/// The clusters a gateway's routes reached, by kind, and the per-host copies made of them.
#[derive(Debug, Default)]
pub(super) struct GatewayClusters {
    /// Mesh clusters HTTP routes reach.
    pub http: BTreeSet<String>,
    /// Mesh clusters TCP routes reach.
    pub tcp: BTreeSet<String>,
    /// ExternalServices' clusters routes reach.
    pub external: BTreeSet<String>,
    /// The mesh clusters copied per host.
    copied: BTreeSet<String>,
    /// The per-host copies.
    per_host_names: BTreeSet<String>,
}

impl GatewayClusters {
    /// Kuma's gateway clusters are per destination and host (`DestinationClusterName`: the
    /// service, then 16 hex digits of a SHA-256 over the destination's tags and the host's
    /// listener tags, each sorted by key), so a host's connection policies are its own: each
    /// of `splits`' clusters is copied (with its EDS) under that name, and the copy is routed
    /// to. The mesh clusters copied are dropped at the end ([`GatewayClusters::drop_copied`]).
    pub(super) fn per_host(
        &mut self,
        snap: &mut Snapshot,
        origins: &mut Origins,
        splits: Vec<Split>,
        host_tags: &BTreeMap<String, String>,
    ) -> Vec<Split> {
        use sha2::Digest as _;
        splits
            .into_iter()
            .map(|mut s| {
                if s.cluster == UNRESOLVED_BACKEND {
                    return s;
                }
                let service = origins
                    .service_clusters
                    .iter()
                    .find(|(_, cs)| cs.contains(&s.cluster))
                    .map_or_else(|| s.cluster.clone(), |(svc, _)| svc.clone());
                let mut destination = origins
                    .subset_tags
                    .get(&s.cluster)
                    .cloned()
                    .unwrap_or_default();
                destination.insert(SERVICE_TAG.to_owned(), service.clone());
                let mut h = sha2::Sha256::new();
                for (k, v) in destination.iter().chain(host_tags) {
                    h.update(k.as_bytes());
                    h.update(v.as_bytes());
                }
                let digest = h.finalize();
                let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                let name = format!("{service}-{hex}");
                if !snap.clusters.contains_key(&name) {
                    if let Some(c) = snap.clusters.get(&s.cluster) {
                        let mut c = (**c).clone();
                        c.name.clone_from(&name);
                        crate::draft::fork_cluster(&mut c);
                        snap.clusters.insert(name.clone(), c.into());
                    }
                    if let Some(e) = snap.endpoints.get(&s.cluster) {
                        let mut e = (**e).clone();
                        e.cluster_name.clone_from(&name);
                        snap.endpoints.insert(name.clone(), e.into());
                    }
                    let subset = origins.subset_tags.get(&s.cluster).cloned();
                    origins
                        .service_clusters
                        .entry(service)
                        .or_default()
                        .insert(name.clone());
                    origins
                        .subset_tags
                        .insert(name.clone(), subset.unwrap_or_default());
                }
                origins.host_tags.insert(name.clone(), host_tags.clone());
                self.copied
                    .insert(std::mem::replace(&mut s.cluster, name.clone()));
                self.per_host_names.insert(name);
                s
            })
            .collect()
    }

    /// Drop the mesh clusters [`GatewayClusters::per_host`] copied (and their EDS), unless a copy
    /// has their name.
    pub(super) fn drop_copied(&mut self, snap: &mut Snapshot, origins: &mut Origins) {
        for c in std::mem::take(&mut self.copied) {
            if self.per_host_names.contains(&c) {
                continue;
            }
            snap.clusters.remove(&c);
            snap.endpoints.remove(&c);
            origins.clusters.remove(&c);
            origins.subset_tags.remove(&c);
            for cs in origins.service_clusters.values_mut() {
                cs.remove(&c);
            }
        }
    }

    /// Kuma's gateway clusters (`cluster_generator.go` `generateMeshCluster`), from the mesh
    /// clusters the routes reached: a 32 KiB per-connection buffer (ExternalServices' too),
    /// and upstream HTTP/1.1 for
    /// an HTTP route's backend whose tags name no protocol (Kuma's `InferServiceProtocol` of
    /// the destination's `kuma.io/protocol` tag and the route's protocol), HTTP/2 with edge
    /// window sizes for `http2` and `grpc`, no HTTP options for a TCP route's.
    pub(super) fn edge_clusters(&mut self, snap: &mut Snapshot, origins: &Origins) {
        use crate::context::Protocol;
        let by_route = self
            .tcp
            .iter()
            .map(|c| (c.clone(), false))
            .chain(self.http.iter().map(|c| (c.clone(), true)))
            .collect::<BTreeMap<String, bool>>();
        for name in &self.external {
            let Some(cluster) = snap.clusters.get_mut(name) else {
                continue;
            };
            cluster.per_connection_buffer_limit_bytes = Some(UInt32Value { value: 32_768 });
            // Kuma's `Http2FromEdge` on an HTTP/2 ExternalService: edge window sizes.
            let key = crate::names::HTTP_PROTOCOL_OPTIONS_KEY;
            if let Some(a) = cluster.typed_extension_protocol_options.get_mut(key) {
                crate::draft::edit(a, |options: &mut HttpProtocolOptions| {
                    if let Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                        protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(h2)),
                    })) = &mut options.upstream_protocol_options
                    {
                        h2.initial_stream_window_size = Some(UInt32Value { value: 65_536 });
                        h2.initial_connection_window_size = Some(UInt32Value { value: 1_048_576 });
                    }
                });
            }
        }
        for (name, http) in by_route {
            let tagged = origins
                .subset_tags
                .get(&name)
                .and_then(|t| t.get("kuma.io/protocol"))
                .map(|p| Protocol::parse(Some(p)));
            let protocol = match tagged {
                Some(p) => p,
                None if http => Protocol::Http,
                None => Protocol::Tcp,
            };
            let Some(cluster) = snap.clusters.get_mut(&name) else {
                continue;
            };
            cluster.per_connection_buffer_limit_bytes = Some(UInt32Value { value: 32_768 });
            let key = crate::names::HTTP_PROTOCOL_OPTIONS_KEY;
            let config = match protocol {
                Protocol::Http2 | Protocol::Grpc => {
                    Some(ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions {
                        initial_stream_window_size: Some(UInt32Value { value: 65_536 }),
                        initial_connection_window_size: Some(UInt32Value { value: 1_048_576 }),
                        ..Default::default()
                    }))
                }
                Protocol::Http => Some(ProtocolConfig::HttpProtocolOptions(Default::default())),
                _ => None,
            };
            let Some(config) = config else {
                cluster.typed_extension_protocol_options.remove(key);
                continue;
            };
            crate::plugins::edit::edit_http_protocol_options(cluster, |options| {
                options.upstream_protocol_options = Some(
                    UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                        protocol_config: Some(config),
                    }),
                );
            });
        }
    }
}
