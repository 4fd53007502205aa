//! Helpers the policy plugins share for editing typed configs packed in `Any`: every HTTP
//! connection manager or TCP proxy of a listener, a cluster's upstream HTTP protocol options,
//! HTTP filters inserted before the router, and Kuma's `x-kuma-tags` regexes (old policies
//! match their `sources` with them). During a generation the edited configs stay typed between
//! plugins and are encoded once, when the snapshot is sealed ([`crate::draft`]).
//! A leaf of the plugin layer: imports only crate leaves ([`crate::names`], [`crate::protobuf`],
//! [`crate::draft`], [`crate::load_assignment`]).

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, DnsLookupFamily,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{transport_socket, TransportSocket};
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use std::collections::BTreeMap;

use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    http_protocol_options, HttpProtocolOptions,
};

use crate::draft;
use crate::load_assignment::{load_assignment, Endpoint};
use crate::names::{HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY, ROUTER_FILTER, TCP_PROXY_FILTER};
use crate::protobuf::{any, secs};

/// Edit every HTTP connection manager of `listener` in place (all filter chains); filters whose
/// typed config does not decode are left alone. During a generation the managers stay typed
/// between edits ([`crate::draft`]).
pub fn edit_hcms(listener: &mut Listener, mut f: impl FnMut(&mut HttpConnectionManager)) {
    edit_filters(listener, HCM_FILTER, &mut f);
}

/// Edit every TCP proxy of `listener` in place (all filter chains); filters whose typed config
/// does not decode are left alone.
pub fn edit_tcp_proxies(listener: &mut Listener, mut f: impl FnMut(&mut TcpProxy)) {
    edit_filters(listener, TCP_PROXY_FILTER, &mut f);
}

/// Read every HTTP connection manager of `listener` (all filter chains), without copying or
/// editing it.
pub fn read_hcms(listener: &Listener, mut f: impl FnMut(&HttpConnectionManager)) {
    read_filters(listener, HCM_FILTER, &mut f);
}

/// Read every TCP proxy of `listener` (all filter chains).
pub fn read_tcp_proxies(listener: &Listener, mut f: impl FnMut(&TcpProxy)) {
    read_filters(listener, TCP_PROXY_FILTER, &mut f);
}

fn edit_filters<M: prost::Message + prost::Name + Default + Clone + 'static>(
    listener: &mut Listener,
    name: &str,
    f: &mut impl FnMut(&mut M),
) {
    for chain in &mut listener.filter_chains {
        for flt in chain.filters.iter_mut().filter(|x| x.name == name) {
            if let Some(filter::ConfigType::TypedConfig(a)) = &mut flt.config_type {
                draft::edit(a, &mut *f);
            }
        }
    }
}

fn read_filters<M: prost::Message + prost::Name + Default + 'static>(
    listener: &Listener,
    name: &str,
    f: &mut impl FnMut(&M),
) {
    for chain in &listener.filter_chains {
        for flt in chain.filters.iter().filter(|x| x.name == name) {
            if let Some(filter::ConfigType::TypedConfig(a)) = &flt.config_type {
                draft::read(a, &mut *f);
            }
        }
    }
}

/// Edit the upstream `HttpProtocolOptions` of `cluster` (created empty when absent or not
/// decodable).
pub fn edit_http_protocol_options(cluster: &mut Cluster, f: impl FnOnce(&mut HttpProtocolOptions)) {
    let options = &mut cluster.typed_extension_protocol_options;
    let decodes = options
        .get(HTTP_PROTOCOL_OPTIONS_KEY)
        .is_some_and(|a| draft::read(a, |_: &HttpProtocolOptions| ()).is_some());
    match options.get_mut(HTTP_PROTOCOL_OPTIONS_KEY) {
        Some(a) if decodes => {
            draft::edit(a, f);
        }
        _ => {
            let mut fresh = HttpProtocolOptions::default();
            f(&mut fresh);
            options.insert(HTTP_PROTOCOL_OPTIONS_KEY.to_owned(), draft::pack(fresh));
        }
    }
}

/// No HTTP connection manager of a listener has a router to insert filters before (Kuma's
/// `InsertHTTPFiltersBeforeRouter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("could not insert filter, {ROUTER_FILTER} is not found in HTTPConnectionManager")]
pub struct MissingRouter;

/// Insert `filters` before the router of every HTTP connection manager of `listener`. Without a
/// router they are appended when `require_router` is `false` (the old configurer runs before
/// Kuma adds the router), else it is an error (`InsertHTTPFiltersBeforeRouter`).
///
/// # Errors
/// [`MissingRouter`] when `require_router` and an HTTP connection manager has no router.
pub fn insert_before_router(
    listener: &mut Listener,
    filters: &[HttpFilter],
    require_router: bool,
) -> Result<(), MissingRouter> {
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
        Err(MissingRouter)
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

/// A cluster to one collector outside the mesh (Kuma's `ProvidedEndpointCluster` with
/// `ClientSideTLS` and `DefaultTimeout`, as its tracing and access log plugins build them): one endpoint, `STATIC` for an IP else `STRICT_DNS` (IPv4 only), connect
/// timeout 5s, HTTP/2 when `http2`, TLS with the host as SNI when `tls`. As Kuma's: the
/// endpoint has no load-balancing weight (Kuma's collector endpoints have weight 0, which it
/// leaves out), and a name with characters a stat name cannot hold gets `altStatName`
/// (`AltStatNameConfigurer`: `tracing:zipkin` → `tracing_zipkin`).
pub fn provided_endpoint_cluster(
    name: &str,
    host: &str,
    port: u32,
    tls: bool,
    http2: bool,
) -> Cluster {
    let ip = host.parse::<std::net::IpAddr>().is_ok();
    let mut cluster = Cluster {
        name: name.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(if ip {
            DiscoveryType::Static as i32
        } else {
            DiscoveryType::StrictDns as i32
        })),
        dns_lookup_family: if ip {
            DnsLookupFamily::Auto as i32
        } else {
            DnsLookupFamily::V4Only as i32
        },
        connect_timeout: Some(secs(5)),
        load_assignment: Some(load_assignment(
            name,
            &[Endpoint::new(host, port, BTreeMap::new())],
        )),
        ..Default::default()
    };
    for lb in cluster
        .load_assignment
        .iter_mut()
        .flat_map(|a| &mut a.endpoints)
        .flat_map(|l| &mut l.lb_endpoints)
    {
        lb.load_balancing_weight = None;
    }
    let stat_name = crate::names::sanitize_metric(name);
    if stat_name != name {
        cluster.alt_stat_name = stat_name;
    }
    if http2 {
        let options = HttpProtocolOptions {
            upstream_protocol_options: Some(
                http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                    http_protocol_options::ExplicitHttpConfig {
                        protocol_config: Some(
                            http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                                Default::default(),
                            ),
                        ),
                    },
                ),
            ),
            ..Default::default()
        };
        cluster
            .typed_extension_protocol_options
            .insert(HTTP_PROTOCOL_OPTIONS_KEY.to_owned(), draft::pack(options));
    }
    if tls {
        cluster.transport_socket = Some(TransportSocket {
            name: "envoy.transport_sockets.tls".to_owned(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                &UpstreamTlsContext {
                    sni: host.to_owned(),
                    allow_renegotiation: true,
                    ..Default::default()
                },
            ))),
        });
    }
    cluster
}
