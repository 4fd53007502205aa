//! MeshTimeout plugin (Kuma 2.7 `meshtimeout/plugin`), see `docs/research/kuma-2.7-policy-plugins.md` §1.
//!
//! - HTTP listeners: HCM `commonHttpProtocolOptions.idleTimeout` = 0s (idle moves to the
//!   cluster), `requestHeadersTimeout` = conf or 0s, and every route `timeout` = requestTimeout
//!   or 15s and `idleTimeout` = streamIdleTimeout, else the route's own, else 1800s. The HCM
//!   `streamIdleTimeout` is left alone (so an old Timeout's value stays, as in seed 000).
//! - TCP listeners: tcp_proxy `idleTimeout` = idleTimeout or 3600s.
//! - Clusters: `connectTimeout` = connectionTimeout or 5s; HTTP/HTTP2 clusters also get
//!   `commonHttpProtocolOptions` {idle 3600s, maxStreamDuration 0s, maxConnectionDuration 0s}
//!   defaults.
//!
//! Inbounds use the `from` rules of their listener (an inbound no policy selected gets all
//! defaults, as Kuma does), outbounds the `to` rules for `kuma.io/service`. An outbound that no
//! timeout policy of either kind covers gets the defaults in every view (Kuma's built-in
//! behaviour, i.e. its default `mesh-timeout-all` policy), so it never shows up in a shadow diff.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::HttpProtocolOptions as CoreHttpProtocolOptions;
use envoy_types::pb::envoy::config::route::v3::route;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use umbra_core::dataplane::DataplaneSpec;
use serde::Deserialize;
use umbra_core::policies::mesh_timeout::Conf;
use umbra_core::resource::ResourceType;
use umbra_core::rules::Element;
use umbra_core::target_ref::{PROTOCOL_TAG, SERVICE_TAG};
use umbra_core::view::PolicySet;

use super::{edit_hcms, edit_http_protocol_options, edit_tcp_proxies};
use crate::context::{MeshContext, Protocol};
use crate::generate::GenerateError;
use crate::snapshot::Snapshot;
use crate::util::{duration, secs};

fn d(
    v: Option<&umbra_core::duration::Duration>,
    default_secs: i64,
) -> envoy_types::pb::google::protobuf::Duration {
    v.map_or_else(|| secs(default_secs), duration)
}

/// Apply MeshTimeout to `snap`. `old_timeout_services` are the outbound services an old
/// Timeout already configured.
pub fn apply(
    snap: &mut Snapshot,
    dp: &DataplaneSpec,
    ctx: &MeshContext,
    policies: &PolicySet,
    old_timeout_services: &BTreeSet<String>,
) -> Result<(), GenerateError> {
    let matched = policies.matched(ResourceType::MeshTimeout, dp);
    let any_policy = !matched.to_rules.is_empty() || !matched.from_rules.is_empty();
    for inbound in &dp.networking.inbound {
        if !any_policy {
            break;
        }
        let key = dp.inbound_key(inbound);
        let listener = crate::generate::inbound_listener_name(&key.address, key.port);
        let conf = match matched.from_rules.get(&key) {
            None => Some(Conf::default()),
            Some(rules) => Confs::new(rules).compute(&Element::new(), &listener)?,
        };
        let protocol = Protocol::parse(inbound.tags.get(PROTOCOL_TAG).map(String::as_str));
        let cluster = format!("localhost:{}", inbound.effective_service_port());
        configure(snap, &listener, &cluster, protocol, conf.as_ref());
    }
    let mut to_confs = Confs::new(&matched.to_rules);
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let listener =
            crate::generate::outbound_listener_name(outbound.effective_address(), outbound.port);
        let computed = if any_policy {
            to_confs.compute(
                &Element::from([(SERVICE_TAG.to_owned(), service.to_owned())]),
                &listener,
            )?
        } else {
            None
        };
        let conf = match computed {
            Some(c) => Some(c),
            // No timeout policy of either kind covers this outbound: Kuma's built-in defaults
            // (the values of its default MeshTimeout), the same in every view, so a shadow
            // MeshTimeout that does not cover it shows no change.
            None if !old_timeout_services.contains(service) => Some(Conf::default()),
            // An old Timeout covers it and no MeshTimeout is in this view: Kuma's plugin does
            // not run and the old values stand.
            None if !any_policy => continue,
            // Kuma: rules exist but none matches: only the unconditional HCM idle reset.
            None => None,
        };
        configure(
            snap,
            &listener,
            service,
            ctx.service_protocol(service),
            conf.as_ref(),
        );
    }
    Ok(())
}

/// Typed confs of a rule list, deserialized once per rule (many outbounds share a rule).
struct Confs<'a> {
    rules: &'a umbra_core::rules::Rules,
    typed: Vec<Option<Conf>>,
}

impl<'a> Confs<'a> {
    fn new(rules: &'a umbra_core::rules::Rules) -> Self {
        Self {
            rules,
            typed: vec![None; rules.0.len()],
        }
    }

    /// The conf of the first rule containing `element`; a conf that does not fit the
    /// MeshTimeout model is an error naming the policies that gave it and the listener.
    fn compute(
        &mut self,
        element: &Element,
        listener: &str,
    ) -> Result<Option<Conf>, GenerateError> {
        let Some(i) = self
            .rules
            .0
            .iter()
            .position(|r| r.subset.contains_element(element))
        else {
            return Ok(None);
        };
        if self.typed[i].is_none() {
            let rule = &self.rules.0[i];
            let conf = Conf::deserialize(&rule.conf).map_err(|e| GenerateError::Policy {
                policy: rule
                    .origin
                    .iter()
                    .map(|o| format!("MeshTimeout/{}", o.meta.name))
                    .collect::<Vec<_>>()
                    .join(", "),
                resource: format!("{}/{listener}", crate::snapshot::LISTENER_TYPE),
                reason: format!("merged conf does not fit MeshTimeout: {e}"),
            })?;
            self.typed[i] = Some(conf);
        }
        Ok(self.typed[i].clone())
    }
}

fn configure(
    snap: &mut Snapshot,
    listener: &str,
    cluster: &str,
    protocol: Protocol,
    conf: Option<&Conf>,
) {
    let http = conf.and_then(|c| c.http.as_ref());
    if let Some(l) = snap.listeners.get_mut(listener) {
        if protocol.is_http() {
            edit_hcms(l, |hcm| {
                let common = hcm
                    .common_http_protocol_options
                    .get_or_insert_with(CoreHttpProtocolOptions::default);
                common.idle_timeout = Some(secs(0));
                let Some(conf) = conf else { return };
                hcm.request_headers_timeout =
                    Some(d(http.and_then(|h| h.request_headers_timeout.as_ref()), 0));
                if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                    for vh in &mut rc.virtual_hosts {
                        for r in &mut vh.routes {
                            if let Some(route::Action::Route(action)) = &mut r.action {
                                action.timeout =
                                    Some(d(http.and_then(|h| h.request_timeout.as_ref()), 15));
                                action.idle_timeout =
                                    match http.and_then(|h| h.stream_idle_timeout.as_ref()) {
                                        Some(v) => Some(duration(v)),
                                        None => action.idle_timeout.or(Some(secs(1800))),
                                    };
                            }
                        }
                    }
                }
                let _ = conf;
            });
        } else if let Some(conf) = conf {
            edit_tcp_proxies(l, |tcp| {
                tcp.idle_timeout = Some(d(conf.idle_timeout.as_ref(), 3600))
            });
        }
    }
    let Some(conf) = conf else { return };
    if let Some(c) = snap.clusters.get_mut(cluster) {
        c.connect_timeout = Some(d(conf.connection_timeout.as_ref(), 5));
        if matches!(protocol, Protocol::Http | Protocol::Http2) {
            edit_http_protocol_options(c, |o| {
                let common = o
                    .common_http_protocol_options
                    .get_or_insert_with(CoreHttpProtocolOptions::default);
                common.idle_timeout = Some(d(conf.idle_timeout.as_ref(), 3600));
                common.max_stream_duration =
                    Some(d(http.and_then(|h| h.max_stream_duration.as_ref()), 0));
                common.max_connection_duration =
                    Some(d(http.and_then(|h| h.max_connection_duration.as_ref()), 0));
            });
        }
    }
}
