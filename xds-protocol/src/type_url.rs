//! The type URLs of the xDS resources Umbra serves (Envoy's v3 API: CDS, EDS, LDS, RDS,
//! SDS, RTDS).

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
/// RTDS type URL (a builtin gateway's `gateway.listeners` runtime layer, Kuma 2.7's
/// `pkg/plugins/runtime/gateway` `GenerateRTDS`).
pub const RUNTIME_TYPE: &str = "type.googleapis.com/envoy.service.runtime.v3.Runtime";
