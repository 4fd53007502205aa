//! Helpers the policy plugins share for editing typed configs packed in `Any`: every HTTP
//! connection manager or TCP proxy of a listener, and a cluster's upstream HTTP protocol options.
//! A leaf of the plugin layer: imports only [`crate::names`] and [`crate::util`].

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;

use crate::names::{HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY, TCP_PROXY_FILTER};
use crate::util::{any, unpack};

/// Edit every HTTP connection manager of `listener` in place (all filter chains); filters whose
/// typed config does not decode are left alone.
pub fn edit_hcms(listener: &mut Listener, mut f: impl FnMut(&mut HttpConnectionManager)) {
    edit_filters(listener, HCM_FILTER, &mut f);
}

/// Edit every TCP proxy of `listener` in place (all filter chains); filters whose typed config
/// does not decode are left alone.
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
