//! Helpers the policy plugins share for editing typed configs packed in `Any`: every HTTP
//! connection manager or TCP proxy of a listener, a cluster's upstream HTTP protocol options,
//! HTTP filters inserted before the router, and Kuma's `x-kuma-tags` regexes (old policies
//! match their `sources` with them).
//! A leaf of the plugin layer: imports only [`crate::names`] and [`crate::util`].

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use std::collections::BTreeMap;

use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;

use crate::names::{HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY, ROUTER_FILTER, TCP_PROXY_FILTER};
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

/// Insert `filters` before the router of every HTTP connection manager of `listener`. Without a
/// router they are appended when `require_router` is `false` (the old configurer runs before
/// Kuma adds the router), else it is an error (`InsertHTTPFiltersBeforeRouter`).
pub fn insert_before_router(
    listener: &mut Listener,
    filters: &[HttpFilter],
    require_router: bool,
) -> Result<(), String> {
    let mut missing_router = false;
    edit_hcms(listener, |hcm| {
        match hcm
            .http_filters
            .iter()
            .position(|f| f.name == ROUTER_FILTER)
        {
            Some(i) => {
                hcm.http_filters.splice(i..i, filters.iter().cloned());
            }
            None if require_router => missing_router = true,
            None => hcm.http_filters.extend(filters.iter().cloned()),
        }
    });
    if missing_router {
        Err(format!(
            "could not insert filter, {ROUTER_FILTER} is not found in HTTPConnectionManager"
        ))
    } else {
        Ok(())
    }
}

/// Kuma's `tags.MatchingRegex`: a regex matching an `x-kuma-tags` value that carries every tag of
/// `tags`. Keys in order, each `&<key>=[^&]*<value>[,&].*` (`&<key>=.*` for `*`), the whole
/// prefixed with `.*`. Only `.` in values is escaped; keys are not.
pub fn matching_regex(tags: &BTreeMap<String, String>) -> String {
    let mut re = String::from(".*");
    for (key, value) in tags {
        re.push('&');
        re.push_str(key);
        re.push('=');
        if value != "*" {
            re.push_str(&format!("[^&]*{value}[,&]").replace('.', "\\."));
        }
        re.push_str(".*");
    }
    re
}

/// Kuma's `tags.RegexOR`: `""` for none, the regex itself for one, `(a|b|…)` otherwise.
pub fn regex_or(regexes: &[String]) -> String {
    match regexes {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("({})", many.join("|")),
    }
}
