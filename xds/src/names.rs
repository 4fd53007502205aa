//! Names of things generation puts into Envoy resources, shared by the base generators and the
//! plugins: well-known filter and extension names, Kuma's headers, and the resource names Kuma
//! 2.7 gives to listeners, inbound clusters and SDS secrets
//! (`docs/research/kuma-2.7-xds-generation.md`), and its stat-name sanitising. A leaf: it imports nothing from this crate.

use umbra_core::target_ref::SERVICE_TAG;

/// Name of the HTTP connection manager network filter.
pub const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";
/// Name of the TCP proxy network filter.
pub const TCP_PROXY_FILTER: &str = "envoy.filters.network.tcp_proxy";
/// Name of the router HTTP filter.
pub const ROUTER_FILTER: &str = "envoy.filters.http.router";
/// Key of the upstream HTTP protocol options in a cluster's `typedExtensionProtocolOptions`.
pub const HTTP_PROTOCOL_OPTIONS_KEY: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
/// Header carrying the source DPP's tags to the destination (Kuma's `x-kuma-tags`).
pub const KUMA_TAGS_HEADER: &str = "x-kuma-tags";
/// The `kuma.io/service` tag name (re-exported from `umbra_core::target_ref`).
pub const SERVICE: &str = SERVICE_TAG;

/// Kuma's inbound listener name `inbound:<ip>:<port>` (IPv6 bracketed).
pub fn inbound_listener_name(address: &str, port: u32) -> String {
    prefixed_host_port("inbound:", address, port)
}

/// Kuma's outbound listener name `outbound:<ip>:<port>` (IPv6 bracketed).
pub fn outbound_listener_name(address: &str, port: u32) -> String {
    prefixed_host_port("outbound:", address, port)
}

/// Kuma's inbound cluster name `localhost:<servicePort>` (the port the workload listens on).
pub fn inbound_cluster_name(service_port: u32) -> String {
    format!("localhost:{service_port}")
}

/// SDS name of the DPP identity certificate of `mesh` (`identity_cert:secret:<mesh>`).
pub fn identity_secret_name(mesh: &str) -> String {
    format!("identity_cert:secret:{mesh}")
}

/// SDS name of the CA bundle of `mesh` (`mesh_ca:secret:<mesh>`).
pub fn ca_secret_name(mesh: &str) -> String {
    format!("mesh_ca:secret:{mesh}")
}

/// Kuma's `SanitizeMetric` (shared with the readers of observe mode's stats).
pub use umbra_core::observed::sanitize_metric;

/// `<prefix><host>:<port>` (IPv6 hosts in brackets), in one allocation.
fn prefixed_host_port(prefix: &str, host: &str, port: u32) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(prefix.len() + host.len() + 8);
    out.push_str(prefix);
    if host.contains(':') {
        let _ = write!(out, "[{host}]:{port}");
    } else {
        let _ = write!(out, "{host}:{port}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_like_kuma() {
        assert_eq!(sanitize_metric("localhost:8080"), "localhost_8080");
        assert_eq!(
            sanitize_metric("backend_kuma-demo_svc_3001"),
            "backend_kuma-demo_svc_3001"
        );
        assert_eq!(
            sanitize_metric("inbound:10.42.0.29:6379"),
            "inbound_10_42_0_29_6379"
        );
    }

    #[test]
    fn listener_names_bracket_ipv6() {
        assert_eq!(inbound_listener_name("10.0.0.1", 80), "inbound:10.0.0.1:80");
        assert_eq!(outbound_listener_name("::1", 80), "outbound:[::1]:80");
        assert_eq!(inbound_cluster_name(8080), "localhost:8080");
    }
}
