//! The builtin gateway, first part (Kuma 2.7.29 `pkg/plugins/runtime/gateway` listener and
//! route generators, with the `meshhttproute` plugin's gateway path): a `BUILTIN` gateway DPP
//! selected by a MeshGateway ([`umbra_core::gateway::selected`]) gets one listener per `HTTP`
//! and `HTTPS` port of the MeshGateway, routed by the MeshHTTPRoutes attached to it
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
//! - **HTTPS** (`tls.mode: TERMINATE`, the default): listener `<gateway>:HTTPS:<port>`, one
//!   filter chain per listener hostname (matching its SNI; none for `*`), TLS terminated with
//!   its certificates over SDS (`cert.<rsa|ecdsa>:secret:<secret>`, the Secret's PEM chain and
//!   key, [`umbra_core::gateway::certificate`]), ALPN h2 and http/1.1, TLS 1.2 at least, and its
//!   own route configuration `<gateway>:HTTPS:<port>:<hostname>` whose virtual hosts require
//!   TLS and set Strict-Transport-Security. A listener whose certificate cannot be read is left
//!   out and named under `notGenerated`.
//! - **Clusters and endpoints** of the backends: the mesh's (mTLS towards the service's
//!   identity, EDS), as for a sidecar's route backends.
//!
//! - **TCP**: listener `<gateway>:TCP:<port>` proxying to the backends of the MeshTCPRoute
//!   attached to the MeshGateway (the last by name whose `targetRef.tags` a listener of the
//!   port carries), else of the MeshGatewayRoutes' TCP rules selecting a listener of the port,
//!   pooled; without either, no listener.
//! - **TLS**: listener `<gateway>:TLS:<port>`, one filter chain per listener hostname (its SNI;
//!   any for `*`), TLS terminated with its certificates (no ALPN) in `TERMINATE` mode or passed
//!   through in `PASSTHROUGH` mode, proxying to the backends of that listener's TCP routes.
//! - **MeshGatewayRoute**: a virtual host no MeshHTTPRoute routes is routed by the
//!   MeshGatewayRoutes of its listener (Kuma's `GatewayHostInfo.Entries`: per host, new routes
//!   win), read into the MeshHTTPRoute model ([`umbra_core::gateway_route`]); a host no route
//!   reaches answers Kuma's 404 message. Every route gets Kuma's gateway route defaults (idle
//!   timeout 5s, 500 for an unknown cluster).
//! - **Policies** on the listeners: the old connection policies ([`super::gateway_old`]), then
//!   the new ones ([`super::gateway_policies`]).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    data_source, header_value_option, http_protocol_options::HeadersWithUnderscoresAction,
    DataSource, HeaderValue, HeaderValueOption, HttpProtocolOptions as CoreHttpProtocolOptions,
    TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, route_match, virtual_host, DirectResponseAction, Route,
    RouteConfiguration, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager::{PathWithEscapedSlashesAction, RouteSpecifier},
    HttpConnectionManager,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    secret, tls_parameters, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, Secret,
    TlsCertificate, TlsParameters,
};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use umbra_core::gateway::{
    is_passthrough, old_routes, routes, selected, tls_problem, GatewayCertificate, GatewayListener,
    OldRoute,
};
use umbra_core::gateway_route::host_matches;
use umbra_core::policies::mesh_http_route::{prepare_routes, PolicyDefault, RouteRule};
use umbra_core::policies::mesh_tcp_route::TcpRule;
use umbra_core::target_ref::SERVICE_TAG;

use super::backends::tcp_proxy_filter;
use super::http::envoy_routes;
use super::new_routes::split;
use crate::base::common::{network_filter, router_filter, tls_socket};
use crate::envoy_core::socket;
use crate::error::GenerateError;
use crate::ingress::tls_inspector;
use crate::names::{HCM_FILTER, KUMA_TAGS_HEADER};
use crate::plugins::input::{Origins, PluginInput};
use crate::protobuf::secs;
use crate::snapshot::Snapshot;

/// The listeners of the MeshGateway selecting the DPP, if it is a builtin gateway (see the
/// module docs). Returns `false` (nothing done) for any other DPP.
///
/// # Errors
/// [`GenerateError::Policy`] when a policy on the gateway cannot be written
/// ([`super::gateway_policies`]).
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
    let old = old_routes(
        input
            .policies
            .old_policies(umbra_core::resource::ResourceType::MeshGatewayRoute),
    );
    let tags: BTreeMap<String, BTreeSet<String>> = dp
        .networking
        .gateway
        .iter()
        .flat_map(|g| &g.tags)
        .filter(|(k, _)| k.as_str() == SERVICE_TAG)
        .map(|(k, v)| (k.clone(), BTreeSet::from([v.clone()])))
        .collect();
    let certificates = &input.policies.gateway_certificates;
    let mut by_port: BTreeMap<(&str, u32), Vec<&GatewayListener>> = BTreeMap::new();
    for l in &gateway.listeners {
        if l.cross_mesh {
            continue; // not generated (named under notGenerated)
        }
        let tls = tls_problem(l, certificates).is_some_and(|r| r.is_ok());
        if l.protocol == "HTTP" || l.protocol == "TCP" || tls {
            by_port
                .entry((l.protocol.as_str(), l.port))
                .or_default()
                .push(l);
        }
    }
    let mut ctx = Routing {
        snap,
        input,
        origins,
        attached: &attached,
        old: &old,
        tags: &tags,
        gateway: &gateway.name,
        include_shadow,
    };
    for ((protocol, port), listeners) in by_port {
        let name = format!("{}:{protocol}:{port}", gateway.name);
        let chains = if protocol == "TCP" {
            // TCP: the backends of the routes of this port; no route, no listener.
            let Some(splits) = ctx.tcp_splits(&listeners) else {
                continue;
            };
            vec![FilterChain {
                filters: vec![tcp_proxy_filter(
                    &crate::names::sanitize_metric(&gateway.name),
                    &splits,
                )],
                ..Default::default()
            }]
        } else if protocol == "TLS" {
            // TLS: one filter chain per hostname (its SNI), terminated with its certificates or
            // passed through, proxying to the backends of the routes of its listener.
            let mut chains = Vec::new();
            let mut sorted = listeners.clone();
            sorted.sort_by_key(|l| (l.hostname == "*", l.hostname.starts_with('*')));
            for l in sorted {
                let Some(splits) = ctx.tcp_splits(&[l]) else {
                    continue;
                };
                let transport_socket = (!is_passthrough(l)).then(|| {
                    let sds = ctx.certificate_secrets(l);
                    tls_socket(&downstream_tls(&sds, &[]))
                });
                chains.push(FilterChain {
                    filter_chain_match: Some(tls_match(&l.hostname)),
                    filters: vec![tcp_proxy_filter(
                        &crate::names::sanitize_metric(&gateway.name),
                        &splits,
                    )],
                    transport_socket,
                    ..Default::default()
                });
            }
            if chains.is_empty() {
                continue;
            }
            chains
        } else if protocol == "HTTP" {
            let vhosts = ctx.virtual_hosts(&listeners, false);
            let rc = ctx.route_config(format!("{name}:*"), vhosts);
            vec![FilterChain {
                filters: vec![network_filter(HCM_FILTER, &ctx.hcm(rc))],
                ..Default::default()
            }]
        } else {
            // HTTPS: one filter chain per hostname, TLS terminated with its certificates.
            let mut chains = Vec::new();
            let mut sorted = listeners.clone();
            sorted.sort_by_key(|l| (l.hostname == "*", l.hostname.starts_with('*')));
            for l in sorted {
                let vhosts = ctx.virtual_hosts(&[l], true);
                let rc = ctx.route_config(format!("{name}:{}", l.hostname), vhosts);
                let sds = ctx.certificate_secrets(l);
                chains.push(FilterChain {
                    filter_chain_match: Some(tls_match(&l.hostname)),
                    filters: vec![network_filter(HCM_FILTER, &ctx.hcm(rc))],
                    transport_socket: Some(tls_socket(&downstream_tls(&sds, &["h2", "http/1.1"]))),
                    ..Default::default()
                });
            }
            chains
        };
        ctx.snap.listeners.insert(
            name.clone(),
            crate::interner::Shared::from(Listener {
                name: name.clone(),
                address: Some(socket(&dp.networking.address, port)),
                traffic_direction: TrafficDirection::Inbound as i32,
                enable_reuse_port: Some(BoolValue { value: true }),
                per_connection_buffer_limit_bytes: Some(UInt32Value { value: 32_768 }),
                listener_filters: vec![tls_inspector()],
                filter_chains: chains,
                ..Default::default()
            }),
        );
    }
    // The old connection policies first: the new ones override them, as on sidecars.
    let ports = super::gateway_policies::ports(&gateway);
    super::gateway_old::apply(ctx.snap, input, ctx.origins, &gateway, &ports)?;
    super::gateway_policies::apply(ctx.snap, input, ctx.origins, &gateway)?;
    Ok(true)
}

/// What building a gateway's route configurations reads and writes.
struct Routing<'a, 'b> {
    snap: &'b mut Snapshot,
    input: &'b PluginInput<'a>,
    origins: &'b mut Origins,
    attached: &'b [&'a umbra_core::policy::TargetRefPolicy],
    /// The view's MeshGatewayRoutes (used for a host no MeshHTTPRoute routes).
    old: &'b [OldRoute<'a>],
    tags: &'b BTreeMap<String, BTreeSet<String>>,
    gateway: &'b str,
    /// The view is the Shadow one (shadow routes attach).
    include_shadow: bool,
}

impl Routing<'_, '_> {
    /// The virtual hosts of `listeners` (one port): see the module docs. With `tls`, each
    /// requires TLS and sets Strict-Transport-Security, as Kuma's HTTPS virtual hosts.
    fn virtual_hosts(&mut self, listeners: &[&GatewayListener], tls: bool) -> Vec<VirtualHost> {
        let mut out = Vec::new();
        let wildcard = listeners.iter().copied().find(|l| l.hostname == "*");
        for (host, listener, implicit) in hostnames(listeners, self.attached, self.old, wildcard) {
            let mut rules: Vec<RouteRule> = Vec::new();
            for p in self.attached {
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
            if rules.is_empty() {
                // No MeshHTTPRoute for this host: its MeshGatewayRoutes (Kuma's
                // `GatewayHostInfo.Entries`).
                for r in old_http_routes(self.old, &host, listener, implicit, wildcard) {
                    rules.extend(r.conf.http_rules());
                }
            }
            let mut envoy = Vec::new();
            if rules.is_empty() {
                envoy.push(no_route());
            }
            let conf = PolicyDefault {
                rules,
                hostnames: Vec::new(),
            };
            for route in prepare_routes(Some(&conf), "", &BTreeMap::new()) {
                // A redirect answers itself: no backend needed.
                let redirect = route.filters.iter().any(|f| f.request_redirect.is_some());
                // The catch-all Kuma adds for sidecars has no backend here: not a route.
                if !redirect && route.backend_refs.iter().any(|b| b.name.is_empty()) {
                    continue;
                }
                let splits = if redirect {
                    Vec::new()
                } else {
                    let Some(splits) = split(
                        self.snap,
                        self.input,
                        self.origins,
                        &route.backend_refs,
                        true,
                    ) else {
                        continue;
                    };
                    splits
                };
                let mut mirrors = BTreeMap::new();
                for (i, f) in route.filters.iter().enumerate() {
                    if let Some(m) = &f.request_mirror {
                        let s = split(
                            self.snap,
                            self.input,
                            self.origins,
                            std::slice::from_ref(&m.backend_ref),
                            true,
                        );
                        if let Some(first) = s.and_then(|s| s.into_iter().next()) {
                            mirrors.insert(i, first.cluster);
                        }
                    }
                }
                envoy.extend(
                    envoy_routes(&route, &splits, &mirrors)
                        .into_iter()
                        .map(gateway_route),
                );
            }
            let mut vhost = VirtualHost {
                name: host.clone(),
                domains: vec![host.clone()],
                routes: envoy,
                ..Default::default()
            };
            if tls {
                vhost.require_tls = virtual_host::TlsRequirementType::All as i32;
                vhost.response_headers_to_add = vec![HeaderValueOption {
                    header: Some(HeaderValue {
                        key: "Strict-Transport-Security".to_owned(),
                        value: "max-age=31536000; includeSubDomains".to_owned(),
                        ..Default::default()
                    }),
                    append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd
                        as i32,
                    ..Default::default()
                }];
            }
            out.push(vhost);
        }
        out
    }

    /// The backends of the TCP routes of `listeners` (one port, or one TLS hostname): the last
    /// MeshTCPRoute (by name) attached to one of them, else the MeshGatewayRoutes' TCP rules
    /// selecting one of them, their backends pooled; `None` without a route or a backend.
    fn tcp_splits(
        &mut self,
        listeners: &[&GatewayListener],
    ) -> Option<Vec<super::backends::Split>> {
        let tcp_routes = self
            .input
            .policies
            .new
            .get(&umbra_core::resource::ResourceType::MeshTCPRoute)
            .map_or(&[][..], Vec::as_slice);
        let refs = routes(tcp_routes, self.gateway, self.include_shadow)
            .into_iter()
            .filter(|p| {
                listeners.iter().any(|l| {
                    p.target_ref
                        .tags
                        .iter()
                        .all(|(k, v)| l.tags.get(k) == Some(v))
                })
            })
            .flat_map(|p| &p.to)
            .filter_map(|item| serde_json::from_value::<TcpRule>(item.conf.clone()).ok())
            .map(|rule| rule.default.backend_refs)
            .next_back()
            .or_else(|| {
                // No MeshTCPRoute: the MeshGatewayRoutes' TCP rules, their backends pooled.
                let pooled: Vec<_> = self
                    .old
                    .iter()
                    .filter(|r| listeners.iter().any(|l| r.selects(&l.tags)))
                    .flat_map(|r| r.conf.tcp_backends())
                    .collect();
                (!pooled.is_empty()).then_some(pooled)
            })?;
        split(self.snap, self.input, self.origins, &refs, false)
    }

    /// The SDS secrets of listener `l`'s certificates (those that read), added to the snapshot.
    fn certificate_secrets(&mut self, l: &GatewayListener) -> Vec<String> {
        let mut sds = Vec::new();
        for c in l.tls.iter().flat_map(|t| &t.certificates) {
            if let Ok(cert) = c.read(&self.input.policies.gateway_certificates) {
                let secret = certificate_secret(c.sds_name(cert.key_type, &l.hostname), &cert);
                sds.push(secret.name.clone());
                self.snap.secrets.insert(secret.name.clone(), secret);
            }
        }
        sds
    }

    /// The route configuration `name` over `virtual_hosts`.
    fn route_config(&self, name: String, virtual_hosts: Vec<VirtualHost>) -> RouteConfiguration {
        RouteConfiguration {
            name,
            ignore_port_in_host_matching: true,
            validate_clusters: Some(BoolValue { value: false }),
            request_headers_to_remove: vec![KUMA_TAGS_HEADER.to_owned()],
            request_headers_to_add: vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: KUMA_TAGS_HEADER.to_owned(),
                    value: crate::tags::serialize_tags(self.tags),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            virtual_hosts,
            ..Default::default()
        }
    }

    /// Kuma's gateway connection manager over `route_config` (see the module docs).
    fn hcm(&self, route_config: RouteConfiguration) -> HttpConnectionManager {
        HttpConnectionManager {
            stat_prefix: crate::names::sanitize_metric(self.gateway),
            // Kuma's gateway HTTP filter chains always carry the (empty) local rate limit.
            http_filters: vec![crate::plugins::rate_limit::http_filter(), router_filter()],
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
            request_headers_timeout: Some(crate::protobuf::millis(500)),
            route_specifier: Some(RouteSpecifier::RouteConfig(route_config)),
            ..Default::default()
        }
    }
}

/// The SDS secret `name` (Kuma's: `cert.<rsa|ecdsa>:secret:<Secret>` or
/// `cert.<rsa|ecdsa>:inline:<hostname>`) of gateway certificate `cert`, chain and key inline.
fn certificate_secret(name: String, cert: &GatewayCertificate) -> Secret {
    let inline = |s: &str| DataSource {
        specifier: Some(data_source::Specifier::InlineString(s.to_owned())),
        ..Default::default()
    };
    Secret {
        name,
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&cert.chain_pem)),
            private_key: Some(inline(&cert.key_pem)),
            ..Default::default()
        })),
    }
}

/// Kuma's gateway TLS termination: the certificates over SDS (`sds`), ALPN `alpn` (h2 and
/// http/1.1 on HTTPS listeners, none on TLS ones), TLS 1.2 at least, no client certificate.
fn downstream_tls(sds: &[String], alpn: &[&str]) -> DownstreamTlsContext {
    DownstreamTlsContext {
        require_client_certificate: Some(BoolValue { value: false }),
        common_tls_context: Some(CommonTlsContext {
            alpn_protocols: alpn.iter().map(|a| (*a).to_owned()).collect(),
            tls_certificate_sds_secret_configs: sds
                .iter()
                .map(|n| SdsSecretConfig {
                    name: n.clone(),
                    sds_config: Some(crate::envoy_core::ads()),
                })
                .collect(),
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: tls_parameters::TlsProtocol::TlSv12 as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The virtual hosts of one port, each with its listener and whether it is implicit: each
/// listener's hostname, then under the `*` listener (`wildcard`) each hostname a route names
/// (a MeshHTTPRoute's `to[].hostnames`, a MeshGatewayRoute's `conf.http.hostnames`) that no
/// listener has (Kuma's `RedistributeWildcardRoutes`). Sorted as Kuma sorts them: by name,
/// descending, so exact names come before `*.` wildcards and `*` is last.
fn hostnames<'a>(
    listeners: &[&'a GatewayListener],
    attached: &[&umbra_core::policy::TargetRefPolicy],
    old: &[OldRoute<'_>],
    wildcard: Option<&'a GatewayListener>,
) -> Vec<(String, &'a GatewayListener, bool)> {
    let mut out: Vec<(String, &GatewayListener, bool)> = listeners
        .iter()
        .map(|l| (l.hostname.clone(), *l, false))
        .collect();
    if let Some(any) = wildcard {
        let mut named: BTreeSet<&str> = attached
            .iter()
            .filter_map(|p| p.route.as_ref())
            .flat_map(|r| &r.to)
            .flat_map(|t| &t.hostnames)
            .map(String::as_str)
            .collect();
        named.extend(
            old.iter()
                .filter(|r| r.selects(&any.tags) && r.conf.http.is_some())
                .flat_map(|r| r.conf.hostnames())
                .map(String::as_str),
        );
        for h in named {
            if !out.iter().any(|(o, _, _)| o == h) {
                out.push((h.to_owned(), any, true));
            }
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The MeshGatewayRoutes (with an HTTP conf) of virtual host `host` of `listener` (Kuma's
/// `RedistributeWildcardRoutes` then `GenerateEnvoyRouteEntries`): the listener's routes
/// without hostnames or naming `host`, unless the host is `implicit` (made for a route's
/// hostname under the `*` listener); and, for a named host, the `*` listener's routes naming
/// it. `*` itself gets the routes without hostnames.
fn old_http_routes<'r, 'a>(
    old: &'r [OldRoute<'a>],
    host: &str,
    listener: &GatewayListener,
    implicit: bool,
    wildcard: Option<&GatewayListener>,
) -> Vec<&'r OldRoute<'a>> {
    let http = old.iter().filter(|r| r.conf.http.is_some());
    let mut out: Vec<&OldRoute<'a>> = Vec::new();
    if !implicit {
        out.extend(http.clone().filter(|r| {
            r.selects(&listener.tags)
                && (r.conf.hostnames().is_empty()
                    || (host != "*" && host_matches(host, r.conf.hostnames())))
        }));
    }
    if let Some(w) = wildcard.filter(|_| host != "*") {
        out.extend(http.filter(|r| {
            r.selects(&w.tags)
                && !r.conf.hostnames().is_empty()
                && host_matches(host, r.conf.hostnames())
        }));
    }
    out.sort_by(|a, b| a.resource.meta.name.cmp(&b.resource.meta.name));
    out.dedup_by(|a, b| a.resource.meta.name == b.resource.meta.name);
    out
}

/// A filter chain match on TLS with SNI `hostname` (any SNI for `*`, as Kuma's
/// `MatchServerNames`).
fn tls_match(hostname: &str) -> FilterChainMatch {
    FilterChainMatch {
        server_names: if hostname == "*" {
            Vec::new()
        } else {
            vec![hostname.to_owned()]
        },
        transport_protocol: "tls".to_owned(),
        ..Default::default()
    }
}

/// Kuma's answer on a virtual host no route reaches: 404 with its message.
fn no_route() -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 404,
            body: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(
                    "This is a Kuma MeshGateway. No routes match this MeshGateway!\n".to_owned(),
                )),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A route as Kuma's gateway route builder sets it: the stream idle timeout of gateways (5s)
/// and 500 for an unknown cluster, no route timeout of its own (Envoy's 15s default stands,
/// as in Kuma's gateway goldens); a redirect drops the query string.
fn gateway_route(mut r: Route) -> Route {
    match &mut r.action {
        Some(route::Action::Route(a)) => {
            a.idle_timeout = Some(secs(5));
            a.cluster_not_found_response_code =
                route_action::ClusterNotFoundResponseCode::InternalServerError as i32;
            a.timeout = None;
        }
        // Kuma's gateway redirects drop the query (`StripQuery: true`).
        Some(route::Action::Redirect(redirect)) => redirect.strip_query = true,
        _ => {}
    }
    r
}
