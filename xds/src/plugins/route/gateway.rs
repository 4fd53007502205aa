//! The builtin gateway, first part (Kuma 2.7.29 `pkg/plugins/runtime/gateway` listener and
//! route generators, with the `meshhttproute` plugin's gateway path): a `BUILTIN` gateway DPP
//! selected by a MeshGateway ([`umbra_core::gateway::selected`]) gets one listener per `HTTP`
//! and `HTTPS` port of the MeshGateway, routed by the MeshHTTPRoutes attached to it
//! ([`umbra_core::gateway::routes`]).
//!
//! - **Listener** `<gateway>:HTTP:<port>` on the DPP's address (INBOUND, reuse port, a
//!   32 KiB per-connection buffer, a TLS inspector), listeners of one port merged as Kuma merges
//!   them. Its connection manager has Kuma's gateway defaults: stat prefix the gateway's
//!   service, `useRemoteAddress`, internal addresses `127.0.0.1/32` (and `::1/128` for an IPv6
//!   DPP), `normalizePath`, `mergeSlashes`, escaped slashes unescaped and redirected,
//!   `serverName: Kuma Gateway`, headers with underscores refused, idle timeout 300s, stream
//!   idle timeout 5s, request headers timeout 0.5s, HTTP/2 with edge window sizes and CONNECT,
//!   the (empty) local rate limit and the gzip compressor before the router.
//! - **Route configuration** `<gateway>:HTTP:<port>:*`, served over RDS under that name as
//!   Kuma serves it ([`super::gateway_listener::routes_over_rds`]: a route change never touches
//!   the listener), `ignorePortInHostMatching`, `x-kuma-tags` removed from requests. One
//!   virtual host per hostname: each listener's `hostname` (`*` by default) and, under a `*`
//!   listener, each hostname a route names (Kuma's one-way redistribution of wildcard routes);
//!   a virtual host gets the rules of the `to` items without hostnames (they apply to every
//!   host, as in Kuma) and of those naming its hostname, of every route whose `targetRef.tags`
//!   the listener carries. The Envoy routes follow Kuma's gateway route table
//!   ([`super::gateway_table`]): its order (exact, prefix, regex paths, longer first, then
//!   method, header and query matches), a prefix also matching its path exactly unless a rule
//!   matches that path itself, backends always as weighted clusters each adding `x-kuma-tags`
//!   (mesh clusters only), header names in Go's canonical form, a set Host header as a host
//!   rewrite; what no rule matches is a 404.
//! - **HTTPS** (`tls.mode: TERMINATE`, the default): listener `<gateway>:HTTPS:<port>`, one
//!   filter chain per listener hostname (matching its SNI; none for `*`; in Kuma's hostname
//!   order), TLS terminated with its certificates over SDS (`cert.<rsa|ecdsa>:secret:<secret>`,
//!   the Secret's PEM chain and key, [`umbra_core::gateway::certificate`]), ALPN h2 and
//!   http/1.1, TLS 1.2 at least, and its own route configuration
//!   `<gateway>:HTTPS:<port>:<hostname>` whose virtual hosts require TLS and set
//!   Strict-Transport-Security. A listener whose certificate cannot be read is left out and
//!   named under `notGenerated`.
//! - **Clusters and endpoints** of the backends ([`super::gateway_clusters`]): per destination
//!   and host, named as Kuma names them (`<service>-<16 hex>`), copies of the mesh's (mTLS
//!   towards the service's identity, EDS) with Kuma's gateway shape; an ExternalService's
//!   directly when the mesh has no TrafficPermission.
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
//!   timeout 5s, 500 for an unknown cluster, a redirect to the listener's port when it names
//!   none); a backend Kuma could not resolve (`kuma.io/unresolved-backend`) is routed to a
//!   cluster of that name that does not exist (500).
//! - **Policies** on the listeners: the old connection policies ([`super::gateway_old`]), then
//!   the new ones ([`super::gateway_policies`]).
//! - **Connection limits** (RTDS): every builtin gateway DPP gets the Runtime
//!   `gateway.listeners` (Kuma's `GenerateRTDS`), which its bootstrap's runtime layer of that
//!   name waits for: per generated listener whose port's first listener in the MeshGateway sets
//!   `resources.connectionLimit` above 0, the key
//!   `envoy.resource_limits.listener.<listener name>.connection_limit` with that limit (Envoy
//!   then closes connections past it, counting them in `downstream_cx_overflow`); an empty
//!   layer otherwise.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    header_value_option, http_protocol_options::HeadersWithUnderscoresAction, HeaderValue,
    HeaderValueOption, Http2ProtocolOptions, HttpProtocolOptions as CoreHttpProtocolOptions,
    TrafficDirection,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    route_match, virtual_host, RouteConfiguration, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager::{PathWithEscapedSlashesAction, RouteSpecifier},
    HttpConnectionManager,
};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use umbra_core::gateway::{
    is_passthrough, old_routes, routes, selected, tls_problem, GatewayListener, OldRoute,
};
use umbra_core::policies::mesh_http_route::{prepare_routes, PolicyDefault, RouteRule};
use umbra_core::policies::mesh_tcp_route::TcpRule;
use umbra_core::target_ref::SERVICE_TAG;

use super::backends::tcp_proxy_filter;
use super::gateway_clusters::GatewayClusters;
use super::gateway_listener::{
    certificate_secret, downstream_tls, gateway_runtime, gzip_compressor, internal_addresses,
    tls_match, GATEWAY_RUNTIME,
};
use super::gateway_table::{
    gateway_route, hostnames, kuma_route_order, more_exact_first, no_route, old_http_routes,
    root_exact, UNRESOLVED_BACKEND,
};
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
        snap.runtimes.insert(
            GATEWAY_RUNTIME.to_owned(),
            gateway_runtime(Vec::new()).into(),
        );
        return Ok(true);
    };
    let http_routes = input
        .policies
        .new
        .get(&umbra_core::resource::ResourceType::MeshHTTPRoute)
        .map_or(&[][..], Vec::as_slice);
    let include_shadow = input.policies.view == Some(umbra_core::view::View::Shadow);
    let attached = routes(http_routes, &gateway.name, include_shadow);
    let old = old_routes(input.old_policies(umbra_core::resource::ResourceType::MeshGatewayRoute));
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
    let service = dp
        .networking
        .gateway
        .as_ref()
        .and_then(|g| g.tags.get(SERVICE_TAG))
        .cloned()
        .unwrap_or_default();
    // Kuma's gateway reaches an ExternalService directly whatever the permissions when the
    // mesh has no TrafficPermission (`cluster_generator.go`), else as permitted (the sidecar
    // rule); the unfiltered reading is the one MeshHTTPRoutes use.
    let no_permissions = input
        .policies
        .old_policies_with_superseded(umbra_core::resource::ResourceType::TrafficPermission)
        .next()
        .is_none();
    let routing_input = PluginInput {
        new_routes: input.new_routes || no_permissions,
        ..*input
    };
    let mut ctx = Routing {
        snap,
        input: &routing_input,
        origins,
        attached: &attached,
        old: &old,
        tags: &tags,
        gateway: &gateway.name,
        service: &service,
        ipv6: dp.networking.address.contains(':'),
        clusters: GatewayClusters::default(),
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
                    &crate::names::sanitize_metric(&service),
                    &splits,
                )],
                ..Default::default()
            }]
        } else if protocol == "TLS" {
            // TLS: one filter chain per hostname (its SNI), terminated with its certificates or
            // passed through, proxying to the backends of the routes of its listener.
            let mut chains = Vec::new();
            let mut sorted = listeners.clone();
            sorted.sort_by(|a, b| more_exact_first(&a.hostname, &b.hostname));
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
                        &crate::names::sanitize_metric(&service),
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
                filters: vec![network_filter(HCM_FILTER, ctx.hcm(rc))],
                ..Default::default()
            }]
        } else {
            // HTTPS: one filter chain per hostname, TLS terminated with its certificates.
            let mut chains = Vec::new();
            let mut sorted = listeners.clone();
            sorted.sort_by(|a, b| more_exact_first(&a.hostname, &b.hostname));
            for l in sorted {
                let vhosts = ctx.virtual_hosts(&[l], true);
                let rc = ctx.route_config(format!("{name}:{}", l.hostname), vhosts);
                let sds = ctx.certificate_secrets(l);
                chains.push(FilterChain {
                    filter_chain_match: Some(tls_match(&l.hostname)),
                    filters: vec![network_filter(HCM_FILTER, ctx.hcm(rc))],
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
    ctx.clusters.drop_copied(ctx.snap, ctx.origins);
    ctx.clusters.edge_clusters(ctx.snap, ctx.origins);
    // Kuma's limit of a port is its first listener's, whatever that listener's fate.
    let limits = gateway
        .envoy_listener_names()
        .into_iter()
        .filter(|name| ctx.snap.listeners.contains_key(name))
        .filter_map(|name| {
            let port: u32 = name.rsplit(':').next()?.parse().ok()?;
            let first = gateway.listeners.iter().find(|l| l.port == port)?;
            Some((name, first.connection_limit()?))
        })
        .collect();
    ctx.snap
        .runtimes
        .insert(GATEWAY_RUNTIME.to_owned(), gateway_runtime(limits).into());
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
    /// The gateway's service (its DPP's `kuma.io/service`), the connection managers' stat prefix.
    service: &'b str,
    /// The DPP's address is IPv6.
    ipv6: bool,
    /// The view is the Shadow one (shadow routes attach).
    include_shadow: bool,
    /// The clusters the routes reach, copied per host.
    clusters: GatewayClusters,
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
            // Kuma names the Envoy routes of MeshHTTPRoutes (by their matches), not those of
            // MeshGatewayRoutes.
            let from_old = rules.is_empty();
            if from_old {
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
            // Kuma's `HandlePrefixMatchesAndPopulatePolicies`: a prefix match also matches its
            // path exactly, unless a rule of the host matches that path exactly itself.
            let exact_paths: BTreeSet<String> = rules
                .iter()
                .flat_map(|r| &r.matches)
                .filter_map(|m| m.path.as_ref())
                .filter(|p| p.match_type == "Exact")
                .map(|p| p.value.clone())
                .collect();
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
                    // Any backend protocol: Kuma's gateway speaks HTTP to it (the cluster is
                    // HTTP/1.1 unless the backend's tags say otherwise). Kuma's unresolved
                    // backend has no cluster: its requests get the gateway's 500.
                    let (unresolved, resolved): (Vec<_>, Vec<_>) = route
                        .backend_refs
                        .iter()
                        .cloned()
                        .partition(|b| b.name == UNRESOLVED_BACKEND);
                    let mut splits = if resolved.is_empty() {
                        Vec::new()
                    } else {
                        split(self.snap, self.input, self.origins, &resolved, false)
                            .unwrap_or_default()
                    };
                    splits.extend(unresolved.iter().filter(|b| b.weight() > 0).map(|b| {
                        super::backends::Split {
                            cluster: UNRESOLVED_BACKEND.to_owned(),
                            weight: b.weight(),
                            external: false,
                        }
                    }));
                    if splits.is_empty() {
                        continue;
                    }
                    splits
                };
                let splits =
                    self.clusters
                        .per_host(self.snap, self.origins, splits, &listener.tags);
                self.clusters.http.extend(
                    splits
                        .iter()
                        .filter(|s| !s.external)
                        .map(|s| s.cluster.clone()),
                );
                self.clusters.external.extend(
                    splits
                        .iter()
                        .filter(|s| s.external)
                        .map(|s| s.cluster.clone()),
                );
                let mut mirrors = BTreeMap::new();
                for (i, f) in route.filters.iter().enumerate() {
                    if let Some(m) = &f.request_mirror {
                        let s = split(
                            self.snap,
                            self.input,
                            self.origins,
                            std::slice::from_ref(&m.backend_ref),
                            false,
                        );
                        let s = s.map(|s| {
                            self.clusters
                                .per_host(self.snap, self.origins, s, &listener.tags)
                        });
                        if let Some(first) = s.and_then(|s| s.into_iter().next()) {
                            if !first.external {
                                self.clusters.http.insert(first.cluster.clone());
                            }
                            mirrors.insert(i, first.cluster);
                        }
                    }
                }
                // Kuma tags requests to mesh clusters only (through a zone egress, an
                // ExternalService's cluster is one: `external` is false there).
                let external: BTreeSet<&str> = splits
                    .iter()
                    .filter(|s| s.external)
                    .map(|s| s.cluster.as_str())
                    .collect();
                let shadowed = route
                    .matched
                    .path
                    .as_ref()
                    .filter(|p| p.match_type == "PathPrefix")
                    .map(|p| p.value.trim_end_matches('/').to_owned())
                    .filter(|p| exact_paths.contains(p));
                // Kuma's gateway rewrites no Host towards an ExternalService by itself (only a
                // rewrite filter's `hostToBackendHostname` does).
                let plain: Vec<_> = splits
                    .iter()
                    .map(|s| super::backends::Split {
                        external: false,
                        ..s.clone()
                    })
                    .collect();
                envoy.extend(
                    envoy_routes(&route, &plain, &mirrors)
                        .into_iter()
                        .filter(|r| {
                            let path = r.r#match.as_ref().and_then(|m| match &m.path_specifier {
                                Some(route_match::PathSpecifier::Path(p)) => Some(p),
                                _ => None,
                            });
                            shadowed.is_none() || path != shadowed.as_ref()
                        })
                        // Kuma adds the root's rewriting twin even beside an exact `/` rule.
                        .flat_map(|r| {
                            let exact = root_exact(&r);
                            std::iter::once(r).chain(exact)
                        })
                        .map(|r| gateway_route(self.tags, r, &external, from_old, listener.port)),
                );
            }
            // Kuma's gateway route table order (`route.Sorter`), most specific first.
            envoy.sort_by(kuma_route_order);
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
        let splits = split(self.snap, self.input, self.origins, &refs, false)?;
        let host_tags = listeners
            .first()
            .map(|l| l.tags.clone())
            .unwrap_or_default();
        let splits = self
            .clusters
            .per_host(self.snap, self.origins, splits, &host_tags);
        self.clusters.external.extend(
            splits
                .iter()
                .filter(|s| s.external)
                .map(|s| s.cluster.clone()),
        );
        self.clusters.tcp.extend(
            splits
                .iter()
                .filter(|s| !s.external)
                .map(|s| s.cluster.clone()),
        );
        Some(splits)
    }

    /// The SDS secrets of listener `l`'s certificates (those that read), added to the snapshot.
    fn certificate_secrets(&mut self, l: &GatewayListener) -> Vec<String> {
        let mut sds = Vec::new();
        for c in l.tls.iter().flat_map(|t| &t.certificates) {
            if let Ok(cert) = c.read(&self.input.policies.gateway_certificates) {
                let secret = certificate_secret(c.sds_name(cert.key_type, &l.hostname), &cert);
                sds.push(secret.name.clone());
                self.snap.secrets.insert(secret.name.clone(), secret.into());
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
            virtual_hosts,
            ..Default::default()
        }
    }

    /// Kuma's gateway connection manager over `route_config` (see the module docs).
    fn hcm(&self, route_config: RouteConfiguration) -> HttpConnectionManager {
        HttpConnectionManager {
            // Kuma's: the gateway's service (a gateway is one service across its listeners).
            stat_prefix: crate::names::sanitize_metric(self.service),
            // Kuma's gateway HTTP filter chains always carry the (empty) local rate limit and
            // its default gzip compressor.
            http_filters: vec![
                crate::plugins::rate_limit::http_filter(),
                gzip_compressor(),
                router_filter(),
            ],
            http2_protocol_options: Some(Http2ProtocolOptions {
                max_concurrent_streams: Some(UInt32Value { value: 100 }),
                initial_stream_window_size: Some(UInt32Value { value: 65_536 }),
                initial_connection_window_size: Some(UInt32Value { value: 1_048_576 }),
                allow_connect: true,
                ..Default::default()
            }),
            internal_address_config: Some(internal_addresses(self.ipv6)),
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
