//! The builtin gateway, first part (Kuma 2.7.29 `pkg/plugins/runtime/gateway` listener and
//! route generators, with the `meshhttproute` plugin's gateway path): a `BUILTIN` gateway DPP
//! selected by a MeshGateway ([`umbra_core::gateway::selected`]) gets one listener per `HTTP`
//! port of the MeshGateway, routed by the MeshHTTPRoutes attached to it
//! ([`umbra_core::gateway::routes`]).
//!
//! - **Listener** `<gateway>:HTTP:<port>` on the DPP's address (INBOUND, reuse port, a
//!   32 KiB per-connection buffer, a TLS inspector), listeners of one port merged as Kuma merges
//!   them. Its connection manager has Kuma's gateway defaults: stat prefix the gateway's name,
//!   `useRemoteAddress`, `normalizePath`, `mergeSlashes`, escaped slashes unescaped and
//!   redirected, `serverName: Kuma Gateway`, headers with underscores refused, idle timeout
//!   300s, stream idle timeout 5s, request headers timeout 0.5s.
//! - **Route configuration** `<gateway>:HTTP:<port>:*` (inline; Kuma serves it over RDS under
//!   the same name), `ignorePortInHostMatching`, `x-kuma-tags` removed from requests and set
//!   to the gateway's tags towards the backends. One virtual host per hostname: each
//!   listener's `hostname` (`*` by default) and, under a `*` listener, each hostname a route's
//!   `to[].hostnames` names; a virtual host gets the rules of the `to` items without
//!   hostnames (they apply to every host, as in Kuma) and of those naming its hostname, of
//!   every route whose `targetRef.tags` the listener carries. Rules are ordered as for sidecars (Kuma's `prepareRoutes`: most specific
//!   match first); there is no catch-all of the gateway's own: what no rule matches is a 404.
//! - **Clusters and endpoints** of the backends: the mesh's (mTLS towards the service's
//!   identity, EDS), as for a sidecar's route backends.
//!
//! Not generated yet (named under `notGenerated` by [`umbra_core::view::PolicySet`]): `HTTPS`,
//! `TCP` and `TLS` listeners, and every policy other than MeshHTTPRoute that targets the
//! MeshGateway.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    http_protocol_options::HeadersWithUnderscoresAction, HeaderValue, HeaderValueOption,
    HttpProtocolOptions as CoreHttpProtocolOptions, TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager::{PathWithEscapedSlashesAction, RouteSpecifier},
    HttpConnectionManager,
};
use envoy_types::pb::google::protobuf::{BoolValue, Duration as PbDuration, UInt32Value};
use umbra_core::gateway::{routes, selected, GatewayListener};
use umbra_core::policies::mesh_http_route::{prepare_routes, PolicyDefault, RouteRule};
use umbra_core::target_ref::SERVICE_TAG;

use super::http::envoy_routes;
use super::new_routes::split;
use crate::base::common::{network_filter, router_filter};
use crate::envoy_core::socket;
use crate::error::GenerateError;
use crate::ingress::tls_inspector;
use crate::names::{HCM_FILTER, KUMA_TAGS_HEADER};
use crate::plugins::input::{Origins, PluginInput};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;

/// The `HTTP` listeners of the MeshGateway selecting the DPP, if it is a builtin gateway (see
/// the module docs). Returns `false` (nothing done) for any other DPP.
///
/// # Errors
/// None yet; kept for the policy plugins this grows into.
pub(super) fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<bool, GenerateError> {
    let dp = input.dataplane;
    if !umbra_core::gateway::is_builtin(dp) {
        return Ok(false);
    }
    let Some(gateway) = selected(&input.policies.stored, dp) else {
        return Ok(true);
    };
    let http_routes = input
        .policies
        .new
        .get(&umbra_core::resource::ResourceType::MeshHTTPRoute)
        .map_or(&[][..], Vec::as_slice);
    let include_shadow = input.policies.view == Some(umbra_core::view::View::Shadow);
    let attached = routes(http_routes, &gateway.name, include_shadow);
    let gateway_tags = dp
        .networking
        .gateway
        .as_ref()
        .map(|g| g.tags.clone())
        .unwrap_or_default();
    let mut by_port: BTreeMap<u32, Vec<&GatewayListener>> = BTreeMap::new();
    for l in gateway.listeners.iter().filter(|l| l.protocol == "HTTP") {
        by_port.entry(l.port).or_default().push(l);
    }
    for (port, listeners) in by_port {
        let name = format!("{}:HTTP:{port}", gateway.name);
        let mut virtual_hosts = Vec::new();
        for (host, listener) in hostnames(&listeners, &attached) {
            let mut rules: Vec<RouteRule> = Vec::new();
            for p in &attached {
                let Some(route) = &p.route else { continue };
                let wanted = &route.target_ref.tags;
                if !wanted.iter().all(|(k, v)| listener.tags.get(k) == Some(v)) {
                    continue;
                }
                for to in &route.to {
                    // Rules for every host also apply to the more specific ones.
                    if to.hostnames.is_empty() || to.hostnames.contains(&host) {
                        rules.extend(to.rules.iter().cloned());
                    }
                }
            }
            let conf = PolicyDefault {
                rules,
                hostnames: Vec::new(),
            };
            let mut envoy = Vec::new();
            for route in prepare_routes(Some(&conf), "", &BTreeMap::new()) {
                // The catch-all Kuma adds for sidecars has no backend here: not a route.
                if route.backend_refs.iter().any(|b| b.name.is_empty()) {
                    continue;
                }
                let Some(splits) = split(snap, input, origins, &route.backend_refs, true) else {
                    continue;
                };
                envoy.extend(envoy_routes(&route, &splits, &BTreeMap::new()));
            }
            virtual_hosts.push(VirtualHost {
                name: host.clone(),
                domains: vec![host.clone()],
                routes: envoy,
                ..Default::default()
            });
        }
        let tags: BTreeMap<String, BTreeSet<String>> = gateway_tags
            .iter()
            .filter(|(k, _)| k.as_str() == SERVICE_TAG)
            .map(|(k, v)| (k.clone(), BTreeSet::from([v.clone()])))
            .collect();
        let route_config = RouteConfiguration {
            name: format!("{name}:*"),
            ignore_port_in_host_matching: true,
            validate_clusters: Some(BoolValue { value: false }),
            request_headers_to_remove: vec![KUMA_TAGS_HEADER.to_owned()],
            request_headers_to_add: vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: KUMA_TAGS_HEADER.to_owned(),
                    value: crate::tags::serialize_tags(&tags),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            virtual_hosts,
            ..Default::default()
        };
        let hcm = HttpConnectionManager {
            stat_prefix: crate::names::sanitize_metric(&gateway.name),
            http_filters: vec![router_filter()],
            use_remote_address: Some(BoolValue { value: true }),
            normalize_path: Some(BoolValue { value: true }),
            merge_slashes: true,
            path_with_escaped_slashes_action: PathWithEscapedSlashesAction::UnescapeAndRedirect
                as i32,
            server_name: "Kuma Gateway".to_owned(),
            common_http_protocol_options: Some(CoreHttpProtocolOptions {
                idle_timeout: Some(secs(300)),
                headers_with_underscores_action: HeadersWithUnderscoresAction::RejectRequest as i32,
                ..Default::default()
            }),
            stream_idle_timeout: Some(secs(5)),
            request_headers_timeout: Some(PbDuration {
                seconds: 0,
                nanos: 500_000_000,
            }),
            route_specifier: Some(RouteSpecifier::RouteConfig(route_config)),
            ..Default::default()
        };
        snap.listeners.insert(
            name.clone(),
            crate::interner::Shared::from(Listener {
                name: name.clone(),
                address: Some(socket(&dp.networking.address, port)),
                traffic_direction: TrafficDirection::Inbound as i32,
                enable_reuse_port: Some(BoolValue { value: true }),
                per_connection_buffer_limit_bytes: Some(UInt32Value { value: 32_768 }),
                listener_filters: vec![tls_inspector()],
                filter_chains: vec![FilterChain {
                    filters: vec![network_filter(HCM_FILTER, &hcm)],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        );
    }
    Ok(true)
}

/// The virtual hosts of one port: each listener's hostname with its listener, then under a `*`
/// listener each hostname a route names that no listener has; specific names first, `*` last.
fn hostnames<'a>(
    listeners: &[&'a GatewayListener],
    attached: &[&umbra_core::policy::TargetRefPolicy],
) -> Vec<(String, &'a GatewayListener)> {
    let mut out: Vec<(String, &GatewayListener)> =
        listeners.iter().map(|l| (l.hostname.clone(), *l)).collect();
    if let Some(any) = listeners.iter().find(|l| l.hostname == "*") {
        let named: BTreeSet<&str> = attached
            .iter()
            .filter_map(|p| p.route.as_ref())
            .flat_map(|r| &r.to)
            .flat_map(|t| &t.hostnames)
            .map(String::as_str)
            .collect();
        for h in named {
            if !out.iter().any(|(o, _)| o == h) {
                out.push((h.to_owned(), *any));
            }
        }
    }
    out.sort_by_key(|(h, _)| (h == "*", h.starts_with('*'), h.clone()));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}
