//! Retries: the old Retry baked into outbound listeners, then the MeshRetry plugin on top
//! (Kuma 2.7.29).
//!
//! **Old Retry** (Kuma's `OutboundProxyGenerator` with
//! `pkg/xds/envoy/listeners/filter_chain_configurers.go` `Retry`/`MaxConnectAttempts` and
//! `pkg/xds/envoy/routes/v3/retry_configurer.go`): one policy per outbound service, picked by
//! `SelectConnectionPolicies` over the DPP's outbound services. Kuma computes it even when a
//! MeshRetry exists, so a superseded Retry is baked in too and MeshRetry overrides it per route.
//! - HTTP and gRPC listeners: every virtual host's `retryPolicy` = the `http` (resp. `grpc`)
//!   section: `retryOn` defaults to `gateway-error,connect-failure,refused-stream` (gRPC:
//!   `cancelled,connect-failure,gateway-error,refused-stream,reset,resource-exhausted,
//!   unavailable`), `perTryTimeout`, `numRetries`, `retryBackOff`; HTTP `retriableStatusCodes`
//!   also adds `retriable-status-codes` to `retryOn`, and each `retriableMethods` entry but
//!   `NONE` a `:method` exact `retriableRequestHeaders` matcher. An HTTP/2 listener gets no
//!   policy (Kuma's `RetryConfig` knows `http` and `grpc` only), nor does a section that is
//!   absent.
//! - TCP and Kafka listeners: tcp_proxy `maxConnectAttempts` = `tcp.maxConnectAttempts`.
//!
//! **MeshRetry** (`pkg/plugins/policies/meshretry/plugin/{v1alpha1/plugin.go,
//! xds/configurer.go}`): for every outbound (no `backendRef`), the `to` rules for
//! `{kuma.io/service: <service>}` and the service's protocol:
//! - TCP with `tcp.maxConnectAttempt`: the listener's first filter chain's tcp_proxy
//!   `maxConnectAttempts`;
//! - otherwise the first filter chain's HTTP connection manager: each route's `retryPolicy` =
//!   the conf computed for the route (the service element plus the route's name as
//!   `__rule-matches-hash__`, so a MeshRetry targeting a MeshHTTPRoute reaches that route's
//!   Envoy routes), else the service's conf; `http` for HTTP services, `grpc` for gRPC, none
//!   for HTTP/2 and Kafka (as in Kuma). The policy is built as the old one's, plus
//!   `rateLimitedRetryBackOff`, `retriableHeaders`, `retriableRequestHeaders` from header
//!   matches, `retryHostPredicate` (`previous_hosts`, `omit_host_metadata` on `envoy.lb`),
//!   `retryPriority` (`previous_priorities`) and `hostSelectionRetryMaxAttempts`. MeshRetry's
//!   gRPC `Canceled` is Envoy's `canceled`, as Kuma writes it.
//!
//! A route-level `retryPolicy` replaces the virtual host's in Envoy, so where both kinds apply
//! the MeshRetry wins for every route it configures. On builtin gateways: [`apply_gateway`].

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{filter, FilterChain};
use envoy_types::pb::envoy::config::route::v3::retry_policy::{
    self, RateLimitedRetryBackOff, ResetHeader, ResetHeaderFormat, RetryBackOff,
    RetryHostPredicate, RetryPriority,
};
use envoy_types::pb::envoy::config::route::v3::{
    header_matcher, route, HeaderMatcher, RetryPolicy, RouteConfiguration,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::retry::host::omit_host_metadata::v3::OmitHostMetadataConfig;
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::extensions::retry::priority::previous_priorities::v3::PreviousPrioritiesConfig;
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, RegexMatcher, StringMatcher};
use envoy_types::pb::google::protobuf::UInt32Value;
use serde::Deserialize;
use umbra_core::old::retry::{self as old, RetryConf};
use umbra_core::policies::mesh_retry::{
    self as mr, grpc_retry_on, Conf, HeaderMatchType, HttpRetryOn, ResetHeaderFormat as Format,
};
use umbra_core::resource::{ResourceType, Spec};
use umbra_core::rules::{Element, Rules, RULE_MATCHES_HASH_TAG};
use umbra_core::target_ref::SERVICE_TAG;

use super::edit::edit_hcms;
use super::edit::edit_tcp_proxies;
use super::input::{Origins, PluginInput};
use crate::context::Protocol;
use crate::error::GenerateError;
use crate::names::{outbound_listener_name, HCM_FILTER, TCP_PROXY_FILTER};
use crate::protobuf::{any, duration};
use crate::snapshot::Snapshot;
use crate::tags::string_metadata;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// Kuma's `HttpRetryOnDefault`.
pub const HTTP_RETRY_ON_DEFAULT: &str = "gateway-error,connect-failure,refused-stream";
/// Kuma's `GrpcRetryOnDefault`.
pub const GRPC_RETRY_ON_DEFAULT: &str =
    "cancelled,connect-failure,gateway-error,refused-stream,reset,resource-exhausted,unavailable";
const RETRIABLE_STATUS_CODES: &str = "retriable-status-codes";

/// Apply the old Retry (baked into the outbound listeners, superseded or not), then MeshRetry,
/// to `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged MeshRetry conf does not fit the model (Kuma fails
/// the snapshot the same way).
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    _origins: &mut Origins,
) -> Result<(), GenerateError> {
    if !input.new_routes {
        // Kuma's route plugins rebuild the legacy listeners the old Retry is baked into.
        apply_old(snap, input);
    }
    apply_new(snap, input)
}

/// The old Retry: one policy per outbound service, on its listeners.
fn apply_old(snap: &mut Snapshot, input: &PluginInput<'_>) {
    let (policies, chosen) = input.old_connection_policies(ResourceType::Retry, true);
    if policies.is_empty() {
        return;
    }
    let outbounds = &input.dataplane.networking.outbound;
    for outbound in outbounds.iter().filter(|o| o.backend_ref.is_none()) {
        let service = outbound.service();
        let Some(Spec::Retry(retry)) = chosen
            .get(service)
            .and_then(|i| policies.get(*i))
            .map(|r| &r.spec)
        else {
            continue;
        };
        let Some(conf) = &retry.conf else { continue };
        let name = outbound_listener_name(outbound.effective_address(), outbound.port);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        match input.service_protocol(service) {
            Protocol::Http | Protocol::Grpc | Protocol::Http2 => {
                let policy = old_retry_policy(conf, input.service_protocol(service));
                edit_hcms(listener, |hcm| {
                    if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                        for vh in &mut rc.virtual_hosts {
                            vh.retry_policy.clone_from(&policy);
                        }
                    }
                });
            }
            Protocol::Tcp | Protocol::Kafka => {
                if let Some(tcp) = &conf.tcp {
                    edit_tcp_proxies(listener, |p| {
                        p.max_connect_attempts = Some(UInt32Value {
                            value: tcp.max_connect_attempts,
                        });
                    });
                }
            }
        }
    }
}

/// Kuma's `RetryConfig` for an old Retry `conf` on a `protocol` listener.
pub(crate) fn old_retry_policy(conf: &RetryConf, protocol: Protocol) -> Option<RetryPolicy> {
    match protocol {
        Protocol::Http => conf.http.as_ref().map(|h| {
            let mut p = RetryPolicy {
                retry_on: HTTP_RETRY_ON_DEFAULT.to_owned(),
                per_try_timeout: h.per_try_timeout.as_ref().map(duration),
                num_retries: h.num_retries.map(|value| UInt32Value { value }),
                retry_back_off: h.back_off.as_ref().map(old_back_off),
                ..Default::default()
            };
            if let Some(on) = h.retry_on.as_ref() {
                let joined = on.iter().map(|c| c.envoy_name()).collect::<Vec<_>>();
                if !joined.is_empty() {
                    p.retry_on = joined.join(",");
                }
            }
            if let Some(codes) = &h.retriable_status_codes {
                p.retriable_status_codes.clone_from(codes);
                p.retry_on = ensure_retriable_status_codes(&p.retry_on);
            }
            for m in h.retriable_methods.iter().flatten() {
                if *m != old::HttpMethod::NONE {
                    p.retriable_request_headers.push(method_matcher(m.name()));
                }
            }
            p
        }),
        Protocol::Grpc => conf.grpc.as_ref().map(|g| {
            let on: Vec<&str> = g
                .retry_on
                .iter()
                .flatten()
                .map(|c| c.envoy_name())
                .collect();
            RetryPolicy {
                retry_on: if on.is_empty() {
                    GRPC_RETRY_ON_DEFAULT.to_owned()
                } else {
                    on.join(",")
                },
                per_try_timeout: g.per_try_timeout.as_ref().map(duration),
                num_retries: g.num_retries.map(|value| UInt32Value { value }),
                retry_back_off: g.back_off.as_ref().map(old_back_off),
                ..Default::default()
            }
        }),
        _ => None,
    }
}

fn old_back_off(b: &old::BackOff) -> RetryBackOff {
    RetryBackOff {
        base_interval: b.base_interval.as_ref().map(duration),
        max_interval: b.max_interval.as_ref().map(duration),
    }
}

/// Kuma's `ensureRetriableStatusCodes`: append `retriable-status-codes` unless present.
fn ensure_retriable_status_codes(retry_on: &str) -> String {
    if retry_on.split(',').any(|c| c == RETRIABLE_STATUS_CODES) {
        retry_on.to_owned()
    } else {
        format!("{retry_on},{RETRIABLE_STATUS_CODES}")
    }
}

/// A `:method` exact matcher (Kuma's retriable methods).
fn method_matcher(method: &str) -> HeaderMatcher {
    HeaderMatcher {
        name: ":method".to_owned(),
        header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(
            StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(method.to_owned())),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// MeshRetry on every outbound listener.
fn apply_new(snap: &mut Snapshot, input: &PluginInput<'_>) -> Result<(), GenerateError> {
    let matched = input
        .policies
        .matched(ResourceType::MeshRetry, input.dataplane);
    if matched.to_rules.is_empty() {
        return Ok(());
    }
    for outbound in &input.dataplane.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        let name = outbound_listener_name(outbound.effective_address(), outbound.port);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let configurer = Configurer {
            element: Element::from([(SERVICE_TAG.to_owned(), service.to_owned())]),
            rules: &matched.to_rules,
            protocol: input.service_protocol(service),
            listener: &name,
        };
        if let Some(chain) = listener.filter_chains.first_mut() {
            configurer.configure_chain(chain)?;
        }
    }
    Ok(())
}

/// MeshRetry on builtin gateway listener `listener` (Kuma's `applyToGateway`): the listener's
/// `to` rules for the Mesh element, with the listener's protocol (`Http` for HTTP/HTTPS
/// listeners: each route's retry policy, its own rule by name first; `Tcp` for TCP ones: the
/// proxy's `maxConnectAttempts`), on every filter chain.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged conf does not fit MeshRetry.
pub(crate) fn apply_gateway(
    listener: &mut envoy_types::pb::envoy::config::listener::v3::Listener,
    rules: &Rules,
    protocol: Protocol,
) -> Result<(), GenerateError> {
    let name = listener.name.clone();
    let configurer = Configurer {
        element: Element::new(),
        rules,
        protocol,
        listener: &name,
    };
    for chain in &mut listener.filter_chains {
        configurer.configure_chain(chain)?;
    }
    Ok(())
}

/// Kuma's MeshRetry `Configurer` for one outbound listener.
struct Configurer<'a> {
    element: Element,
    rules: &'a Rules,
    protocol: Protocol,
    listener: &'a str,
}

impl Configurer<'_> {
    /// The conf of the first rule containing `element`, typed.
    fn conf(&self, element: &Element) -> Result<Option<Conf>, GenerateError> {
        let Some(rule) = self.rules.compute(element) else {
            return Ok(None);
        };
        Conf::deserialize(&rule.conf)
            .map(Some)
            .map_err(|e| GenerateError::Policy {
                policy: rule
                    .origin
                    .iter()
                    .map(|o| format!("MeshRetry/{}", o.meta.name))
                    .collect::<Vec<_>>()
                    .join(", "),
                resource: format!("{LISTENER_TYPE}/{}", self.listener),
                reason: format!("merged conf does not fit MeshRetry: {e}"),
            })
    }

    /// Kuma's `ConfigureListener` on the listener's first filter chain.
    fn configure_chain(&self, chain: &mut FilterChain) -> Result<(), GenerateError> {
        let conf = self.conf(&self.element)?;
        let attempts = conf
            .as_ref()
            .and_then(|c| c.tcp.as_ref())
            .and_then(|t| t.max_connect_attempt);
        if let (Protocol::Tcp, Some(value)) = (self.protocol, attempts) {
            edit_chain::<TcpProxy>(chain, TCP_PROXY_FILTER, |p| {
                p.max_connect_attempts = Some(UInt32Value { value });
                Ok(())
            })
        } else {
            edit_chain::<HttpConnectionManager>(chain, HCM_FILTER, |hcm| {
                match &mut hcm.route_specifier {
                    Some(RouteSpecifier::RouteConfig(rc)) => self.configure_route(rc, &conf),
                    _ => Ok(()),
                }
            })
        }
    }

    /// Kuma's `ConfigureRoute`: each route's own conf, else the listener's.
    fn configure_route(
        &self,
        rc: &mut RouteConfiguration,
        conf: &Option<Conf>,
    ) -> Result<(), GenerateError> {
        let default = self.retry_policy(conf.as_ref());
        for vh in &mut rc.virtual_hosts {
            for r in &mut vh.routes {
                let mut element = self.element.clone();
                element.insert(RULE_MATCHES_HASH_TAG.to_owned(), r.name.clone());
                let own = self.retry_policy(self.conf(&element)?.as_ref());
                let Some(policy) = own.or_else(|| default.clone()) else {
                    continue;
                };
                if let Some(route::Action::Route(action)) = &mut r.action {
                    action.retry_policy = Some(policy);
                }
            }
        }
        Ok(())
    }

    /// Kuma's `getRouteRetryConfig`: the section of the listener's protocol.
    fn retry_policy(&self, conf: Option<&Conf>) -> Option<RetryPolicy> {
        let conf = conf?;
        match self.protocol {
            Protocol::Http => conf.http.as_ref().map(http_retry_policy),
            Protocol::Grpc => conf.grpc.as_ref().map(grpc_retry_policy),
            _ => None,
        }
    }
}

/// Edit the first filter named `name` of `chain` whose typed config decodes as `M`, and every
/// other one after it (Kuma's `UpdateFilterConfig`).
fn edit_chain<M: prost::Message + prost::Name + Default + Clone + 'static>(
    chain: &mut FilterChain,
    name: &str,
    mut f: impl FnMut(&mut M) -> Result<(), GenerateError>,
) -> Result<(), GenerateError> {
    for flt in chain.filters.iter_mut().filter(|x| x.name == name) {
        if let Some(filter::ConfigType::TypedConfig(a)) = &mut flt.config_type {
            crate::draft::edit(a, &mut f).transpose()?;
        }
    }
    Ok(())
}

/// Kuma's `genHttpRetryPolicy`.
fn http_retry_policy(h: &mr::Http) -> RetryPolicy {
    let mut p = RetryPolicy {
        retry_on: HTTP_RETRY_ON_DEFAULT.to_owned(),
        per_try_timeout: h.per_try_timeout.as_ref().map(duration),
        num_retries: h.num_retries.map(|value| UInt32Value { value }),
        retry_back_off: h.back_off.as_ref().map(back_off),
        rate_limited_retry_back_off: h.rate_limited_back_off.as_ref().map(rate_limited),
        ..Default::default()
    };
    let mut conditions = Vec::new();
    let mut methods = Vec::new();
    for item in h.retry_on.iter().flatten() {
        match HttpRetryOn::parse(item) {
            Some(HttpRetryOn::StatusCode(c)) => p.retriable_status_codes.push(c),
            Some(HttpRetryOn::Method(m)) => methods.push(m),
            Some(HttpRetryOn::Condition(c)) => conditions.push(c),
            None => {} // refused by validation
        }
    }
    if !conditions.is_empty() {
        p.retry_on = conditions.join(",");
    }
    if !p.retriable_status_codes.is_empty() {
        p.retry_on = ensure_retriable_status_codes(&p.retry_on);
    }
    p.retriable_request_headers
        .extend(methods.into_iter().map(method_matcher));
    p.retriable_request_headers.extend(
        h.retriable_request_headers
            .iter()
            .flatten()
            .map(header_match),
    );
    p.retriable_headers.extend(
        h.retriable_response_headers
            .iter()
            .flatten()
            .map(header_match),
    );
    for predicate in h.host_selection.iter().flatten() {
        match predicate.predicate.as_str() {
            mr::OMIT_PREVIOUS_HOSTS => p.retry_host_predicate.push(RetryHostPredicate {
                name: "envoy.retry_host_predicates.previous_hosts".to_owned(),
                config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                    any(&PreviousHostsPredicate::default()),
                )),
            }),
            mr::OMIT_HOSTS_WITH_TAGS => p.retry_host_predicate.push(RetryHostPredicate {
                name: "envoy.retry_host_predicates.omit_host_metadata".to_owned(),
                config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                    any(&OmitHostMetadataConfig {
                        metadata_match: Some(string_metadata(
                            "envoy.lb",
                            predicate.tags.as_ref().unwrap_or(&BTreeMap::new()),
                        )),
                    }),
                )),
            }),
            mr::OMIT_PREVIOUS_PRIORITIES => {
                p.retry_priority = Some(RetryPriority {
                    name: "envoy.retry_priorities.previous_priorities".to_owned(),
                    config_type: Some(retry_policy::retry_priority::ConfigType::TypedConfig(any(
                        &PreviousPrioritiesConfig {
                            update_frequency: predicate.update_frequency.unwrap_or(0),
                        },
                    ))),
                });
            }
            _ => {} // refused by validation
        }
    }
    if let Some(n) = h.host_selection_max_attempts {
        p.host_selection_retry_max_attempts = n;
    }
    p
}

/// Kuma's `genGrpcRetryPolicy`.
fn grpc_retry_policy(g: &mr::Grpc) -> RetryPolicy {
    let on: Vec<&str> = g
        .retry_on
        .iter()
        .flatten()
        .filter_map(|i| grpc_retry_on(i))
        .collect();
    RetryPolicy {
        retry_on: if on.is_empty() {
            GRPC_RETRY_ON_DEFAULT.to_owned()
        } else {
            on.join(",")
        },
        per_try_timeout: g.per_try_timeout.as_ref().map(duration),
        num_retries: g.num_retries.map(|value| UInt32Value { value }),
        retry_back_off: g.back_off.as_ref().map(back_off),
        rate_limited_retry_back_off: g.rate_limited_back_off.as_ref().map(rate_limited),
        ..Default::default()
    }
}

fn back_off(b: &mr::BackOff) -> RetryBackOff {
    RetryBackOff {
        base_interval: b.base_interval.as_ref().map(duration),
        max_interval: b.max_interval.as_ref().map(duration),
    }
}

/// Kuma's `configureRateLimitedRetryBackOff`.
fn rate_limited(r: &mr::RateLimitedBackOff) -> RateLimitedRetryBackOff {
    RateLimitedRetryBackOff {
        reset_headers: r
            .reset_headers
            .iter()
            .flatten()
            .map(|h| ResetHeader {
                name: h.name.clone(),
                format: match h.format {
                    Format::Seconds => ResetHeaderFormat::Seconds,
                    Format::UnixTimestamp => ResetHeaderFormat::UnixTimestamp,
                } as i32,
            })
            .collect(),
        max_interval: r.max_interval.as_ref().map(duration),
    }
}

/// Kuma's `headerMatcher` for a MeshRetry header match (`Exact` when no type is given).
fn header_match(h: &mr::HeaderMatch) -> HeaderMatcher {
    use header_matcher::HeaderMatchSpecifier as S;
    let string = |p: string_matcher::MatchPattern| {
        Some(S::StringMatch(StringMatcher {
            match_pattern: Some(p),
            ..Default::default()
        }))
    };
    let spec = match h.match_type.unwrap_or(HeaderMatchType::Exact) {
        HeaderMatchType::Exact => string(string_matcher::MatchPattern::Exact(h.value.clone())),
        HeaderMatchType::Prefix => string(string_matcher::MatchPattern::Prefix(h.value.clone())),
        HeaderMatchType::RegularExpression => {
            string(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                regex: h.value.clone(),
                ..Default::default()
            }))
        }
        HeaderMatchType::Present => Some(S::PresentMatch(true)),
        HeaderMatchType::Absent => Some(S::PresentMatch(false)),
    };
    HeaderMatcher {
        name: h.name.clone(),
        header_match_specifier: spec,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_status_codes_are_added_once() {
        assert_eq!(
            ensure_retriable_status_codes("5xx"),
            "5xx,retriable-status-codes"
        );
        assert_eq!(
            ensure_retriable_status_codes("retriable-status-codes,reset"),
            "retriable-status-codes,reset"
        );
    }

    #[test]
    fn mesh_retry_http_policy_splits_retry_on() {
        let h: mr::Http = serde_json::from_value(serde_json::json!({
            "numRetries": 3,
            "retryOn": ["GatewayError", "503", "HttpMethodGet", "Reset"],
        }))
        .unwrap();
        let p = http_retry_policy(&h);
        assert_eq!(p.retry_on, "gateway-error,reset,retriable-status-codes");
        assert_eq!(p.retriable_status_codes, [503]);
        assert_eq!(p.retriable_request_headers, [method_matcher("GET")]);
        assert_eq!(p.num_retries, Some(UInt32Value { value: 3 }));
        // Only status codes: the default conditions plus retriable-status-codes.
        let h: mr::Http = serde_json::from_value(serde_json::json!({"retryOn": [500]})).unwrap();
        assert_eq!(
            http_retry_policy(&h).retry_on,
            "gateway-error,connect-failure,refused-stream,retriable-status-codes"
        );
    }
}
