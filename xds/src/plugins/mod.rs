//! Policy plugins: each edits a generated [`Snapshot`](crate::snapshot::Snapshot) the way the
//! Kuma 2.7 plugin of the same policy does. Applied after the base generators, in Kuma's order
//! (MeshFaultInjection, MeshTimeout, MeshTrafficPermission, MeshCircuitBreaker, ...,
//! MeshProxyPatch last).
//!
//! Also the helpers they share for editing typed configs packed in `Any`.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;

use crate::generate::{HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY, TCP_PROXY_FILTER};
use crate::util::{any, unpack};

pub mod circuit_breaker;
pub mod fault_injection;
pub mod mesh_timeout;
pub mod proxy_patch;
pub mod traffic_permission;

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::view::PolicySet;

use crate::context::MeshContext;
use crate::generate::GenerateError;
use crate::snapshot::Snapshot;

/// Everything a plugin may read while editing a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct PluginInput<'a> {
    /// The DPP.
    pub dataplane: &'a DataplaneSpec,
    /// Mesh-wide facts.
    pub ctx: &'a MeshContext,
    /// The policies of the view being generated.
    pub policies: &'a PolicySet,
}

/// Apply the policy families after MeshTimeout (which `generate` applies itself), in Kuma's
/// plugin order: MeshFaultInjection/FaultInjection, MeshTrafficPermission/TrafficPermission,
/// MeshCircuitBreaker/CircuitBreaker, MeshProxyPatch, then ProxyTemplate modifications last.
/// Each module bakes in the old policy of its family first, as Kuma's generators do, then
/// applies the new one.
///
/// # Errors
/// The first [`GenerateError`] a plugin reports.
pub fn apply_all(snap: &mut Snapshot, input: &PluginInput<'_>) -> Result<(), GenerateError> {
    fault_injection::apply(snap, input)?;
    traffic_permission::apply(snap, input)?;
    circuit_breaker::apply(snap, input)?;
    proxy_patch::apply(snap, input)?;
    Ok(())
}

/// Edit every HTTP connection manager of `listener` in place (all filter chains).
pub fn edit_hcms(listener: &mut Listener, mut f: impl FnMut(&mut HttpConnectionManager)) {
    edit_filters(listener, HCM_FILTER, &mut f);
}

/// Edit every TCP proxy of `listener` in place (all filter chains).
pub fn edit_tcp_proxies(listener: &mut Listener, mut f: impl FnMut(&mut TcpProxy)) {
    edit_filters(listener, TCP_PROXY_FILTER, &mut f);
}

fn edit_filters<M: prost::Message + prost::Name + Default>(
    listener: &mut Listener,
    name: &str,
    f: &mut impl FnMut(&mut M),
) {
    for chain in &mut listener.filter_chains {
        for flt in chain.filters.iter_mut().filter(|x| x.name == name) {
            if let Some(filter::ConfigType::TypedConfig(a)) = &mut flt.config_type {
                if let Some(mut m) = unpack::<M>(a) {
                    f(&mut m);
                    *a = any(&m);
                }
            }
        }
    }
}

/// Edit the upstream `HttpProtocolOptions` of `cluster` (created empty when absent).
pub fn edit_http_protocol_options(cluster: &mut Cluster, f: impl FnOnce(&mut HttpProtocolOptions)) {
    let mut options = cluster
        .typed_extension_protocol_options
        .get(HTTP_PROTOCOL_OPTIONS_KEY)
        .and_then(unpack::<HttpProtocolOptions>)
        .unwrap_or_default();
    f(&mut options);
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_PROTOCOL_OPTIONS_KEY.to_owned(), any(&options));
}
