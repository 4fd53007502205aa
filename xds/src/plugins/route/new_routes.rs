//! The MeshHTTPRoute / MeshTCPRoute path (Kuma 2.7 `meshhttproute/plugin/v1alpha1/listeners.go`,
//! `meshtcproute/plugin/v1alpha1/listeners*.go`): every outbound of the DPP is rebuilt.
//!
//! - HTTP outbounds (http, http2, grpc) get the routes of the MeshHTTPRoute rules for their
//!   service ([`prepare_routes`]: sorted by specificity, catch-all last), unless a MeshTCPRoute
//!   covers the service and no MeshHTTPRoute does: then they are TCP-proxied like TCP ones.
//!   The HCM gets `normalizePath: true` and loses the legacy generator's timeouts (MeshTimeout
//!   sets its own).
//! - Other outbounds get a TCP proxy to the MeshTCPRoute's backends, or to the service.
//! - A route whose backends include a non-HTTP service is dropped (Kuma's `MakeHTTPSplit`);
//!   weight-0 backends are skipped; a route left without backend is dropped.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::route::v3::VirtualHost;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use umbra_core::policies::backend_ref::BackendRef;
use umbra_core::policies::mesh_http_route::{prepare_routes, PolicyDefault};
use umbra_core::policies::mesh_tcp_route::TcpRule;
use umbra_core::rules::{Element, Rules};
use umbra_core::target_ref::SERVICE_TAG;

use super::backends::{ensure_cluster, tcp_proxy_filter, Split};
use super::http::envoy_routes;
use crate::error::GenerateError;
use crate::names::{outbound_listener_name, sanitize_metric};
use crate::plugins::edit::edit_hcms;
use crate::plugins::input::{Origins, PluginInput};
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// Rebuild every outbound of the DPP from its MeshHTTPRoute and MeshTCPRoute rules.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged rule conf does not fit the route model.
pub(super) fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched;
    let (http, tcp) = match input.route_matches {
        Some(m) => (&m.http, &m.tcp),
        None => {
            matched = crate::plugins::input::RouteMatches::of(input.policies, dp);
            (&matched.http, &matched.tcp)
        }
    };
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        let element = Element::from([(SERVICE_TAG.to_owned(), service.to_owned())]);
        let http_conf: Option<PolicyDefault> =
            conf(&http.to_rules, &element, "MeshHTTPRoute", &listener)?;
        let tcp_conf: Option<TcpRule> = conf(&tcp.to_rules, &element, "MeshTCPRoute", &listener)?;
        let protocol = input.service_protocol(service);
        if protocol.is_http() && !(tcp_conf.is_some() && http_conf.is_none()) {
            let mut routes = Vec::new();
            for route in prepare_routes(http_conf.as_ref(), service, &outbound.tags) {
                let Some(splits) = split(snap, input, origins, &route.backend_refs, true) else {
                    continue;
                };
                let mut mirrors = BTreeMap::new();
                for (i, f) in route.filters.iter().enumerate() {
                    if let Some(m) = &f.request_mirror {
                        let s = split(
                            snap,
                            input,
                            origins,
                            std::slice::from_ref(&m.backend_ref),
                            true,
                        );
                        if let Some(first) = s.and_then(|s| s.into_iter().next()) {
                            mirrors.insert(i, first.cluster);
                        }
                    }
                }
                routes.extend(envoy_routes(&route, &splits, &mirrors));
            }
            let Some(l) = snap.listeners.get_mut(&listener) else {
                continue;
            };
            edit_hcms(l, |hcm| {
                hcm.normalize_path =
                    Some(envoy_types::pb::google::protobuf::BoolValue { value: true });
                hcm.stream_idle_timeout = None;
                hcm.common_http_protocol_options = None;
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    rc.virtual_hosts = vec![VirtualHost {
                        name: service.to_owned(),
                        domains: vec!["*".to_owned()],
                        routes: routes.clone(),
                        ..Default::default()
                    }];
                }
            });
        } else {
            let refs = tcp_conf.map_or_else(
                || vec![BackendRef::service(service, outbound.tags.clone(), 100)],
                |r| r.default.backend_refs,
            );
            let Some(splits) = split(snap, input, origins, &refs, false) else {
                continue;
            };
            if let Some(l) = snap.listeners.get_mut(&listener) {
                for chain in &mut l.filter_chains {
                    chain.filters = vec![tcp_proxy_filter(&sanitize_metric(service), &splits)];
                }
            }
        }
    }
    Ok(())
}

/// The conf of the first rule for `element`, typed; a conf that does not fit is an error naming
/// the policies and the listener.
fn conf<T: serde::de::DeserializeOwned>(
    rules: &Rules,
    element: &Element,
    type_name: &str,
    listener: &str,
) -> Result<Option<T>, GenerateError> {
    let Some(rule) = rules.compute(element) else {
        return Ok(None);
    };
    serde_json::from_value(rule.conf.clone())
        .map(Some)
        .map_err(|e| GenerateError::Policy {
            policy: rule
                .origin
                .iter()
                .map(|o| format!("{type_name}/{}", o.meta.name))
                .collect::<Vec<_>>()
                .join(", "),
            resource: format!("{LISTENER_TYPE}/{listener}"),
            reason: format!("merged conf does not fit {type_name}: {e}"),
        })
}

/// Kuma's `makeSplit`: a cluster per backend (weight-0 ones skipped). For an HTTP split, a
/// backend whose service is not HTTP makes the whole split `None` (the route is dropped);
/// `None` too when no backend is left.
pub(super) fn split(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
    refs: &[BackendRef],
    http: bool,
) -> Option<Vec<Split>> {
    let mut out = Vec::new();
    for r in refs {
        if r.weight() == 0 {
            continue;
        }
        if http && !input.service_protocol(&r.name).is_http() {
            return None;
        }
        let (cluster, external) = ensure_cluster(snap, input, origins, &r.name, &r.tags);
        out.push(Split {
            cluster,
            weight: r.weight(),
            external,
        });
    }
    (!out.is_empty()).then_some(out)
}
