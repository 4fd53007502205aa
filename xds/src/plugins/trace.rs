//! Tracing: the old TrafficTrace baked into listeners, then the MeshTrace plugin (Kuma 2.7.29).
//!
//! **Old TrafficTrace** (Kuma's inbound and outbound generators with `TracingConfigurer`,
//! `pkg/xds/envoy/listeners/v3/tracing_configurer.go`, and `TracingProxyGenerator`), in a view
//! where it is in effect (no MeshTrace in the mesh, the old-type-off rule of seed 000): the
//! TrafficTrace whose `selectors` best match the DPP (`SelectDataplanePolicy`) names a Mesh
//! `tracing` backend (`conf.backend`, else `tracing.defaultBackend`; an unknown name traces
//! nothing). HTTP inbound and outbound listeners get `tracing` = {`spawnUpstreamSpan: false`,
//! the backend's `sampling` as overall sampling, the provider}: Zipkin (cluster
//! `tracing:<backend>`, the URL's path and `host[:port]`, `traceId128bit`, `apiVersion`, else
//! HTTP JSON, `sharedSpanContext`) or Datadog (service name the inbound's service, or the
//! DPP's identifying service for outbounds; `<service>_INBOUND` /
//! `<service>_OUTBOUND_<destination>` with `splitService`); plus the cluster
//! `tracing:<backend>` (connect timeout 5s; TLS with the host as SNI for an `https` Zipkin
//! URL). When a MeshHTTPRoute or MeshTCPRoute gives the DPP a `to` rule, Kuma's route plugins
//! rebuild its outbound listeners without the old tracing: only inbounds keep it. A Datadog port outside 1..=65535 is a generation error, as in Kuma.
//!
//! **MeshTrace** (`pkg/plugins/policies/meshtrace/plugin/{v1alpha1/plugin.go,
//! xds/configurer.go}`): the DPP's single-item rule (the conf of the first rule) with a backend sets, on the HTTP
//! connection manager of every inbound listener and every outbound listener (no
//! `backendRef`): `tracing` = {`spawnUpstreamSpan: false`, the `overall`, `client` and
//! `random` sampling percentages, custom tags (a literal, or a request header with its
//! default), and the provider}:
//! - Zipkin: `envoy.tracers.zipkin` to cluster `meshtrace:zipkin`, the URL's path as collector
//!   endpoint and its `host[:port]` as collector hostname, `traceId128bit`, `apiVersion`
//!   (`httpProto`, else HTTP JSON), `sharedSpanContext`;
//! - Datadog: `envoy.tracers.datadog` to `meshtrace:datadog`, service name the DPP's
//!   identifying service, or with `splitService` `<service>_INBOUND` /
//!   `<service>_OUTBOUND_<destination>`;
//! - OpenTelemetry: `envoy.tracers.opentelemetry` over gRPC to `meshtrace:opentelemetry`,
//!   service name the DPP's identifying service.
//!
//! (Kuma's `splitSpansForRequest`, deprecated in Envoy 1.40, is false for sidecars and left
//! unset.) Plus the collector cluster: the backend's host and port (OpenTelemetry:
//! `host[:port]`, 4317 by default), `STATIC` for an IP else `STRICT_DNS`, connect timeout 5s,
//! HTTP/2 for
//! OpenTelemetry, TLS with the host as SNI for an `https` Zipkin URL. No backend (`backends:
//! []`) leaves the config alone.
//!
//! A builtin gateway's listeners get the MeshTrace selecting them (Kuma's `applyToGateway`),
//! with no destination.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{grpc_service, GrpcService};
use envoy_types::pb::envoy::config::trace::v3::{
    tracing, zipkin_config::CollectorEndpointVersion, DatadogConfig, OpenTelemetryConfig,
    ZipkinConfig,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as HcmTracing;
use envoy_types::pb::envoy::r#type::tracing::v3::{custom_tag, CustomTag};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::{Any, BoolValue};
use serde::Deserialize;
use umbra_core::policies::mesh_fault_injection::IntOrString;
use umbra_core::mesh::TracingBackendKind;
use umbra_core::old_matching::{select_dataplane_policy, OldPolicyRef};
use umbra_core::policies::mesh_trace::{parse_request_uri, Backend, Conf, RequestUri};
use umbra_core::resource::{Resource, ResourceType, Spec};

use super::edit::{edit_hcms, provided_endpoint_cluster};
use super::input::{Origins, PluginInput};
use crate::error::GenerateError;
use crate::names::{inbound_listener_name, outbound_listener_name};
use crate::protobuf::any;
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::{CLUSTER_TYPE, LISTENER_TYPE};

/// Origin of the collector clusters (Kuma's `OriginMeshTrace`).
pub const ORIGIN: &str = "meshtrace";

/// Apply the old TrafficTrace in effect, then MeshTrace, to `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when the DPP's MeshTrace conf does not fit the model or a
/// sampling percentage is not a number, or the TrafficTrace's Datadog port is out of range.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    apply_old(snap, input, origins)?;
    apply_new(snap, input, origins)
}

/// The old TrafficTrace selecting the DPP, with its Mesh backend.
fn apply_old(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let policies: &[Resource] = input.old_policies(ResourceType::TrafficTrace);
    let refs: Vec<OldPolicyRef<'_>> = policies
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let dp = input.dataplane;
    let Some(chosen) = select_dataplane_policy(dp, &refs).map(|i| &policies[i]) else {
        return Ok(());
    };
    let Spec::TrafficTrace(trace) = &chosen.spec else {
        return Ok(());
    };
    let name = trace.conf.as_ref().map_or("", |c| c.backend.as_str());
    let Some(backend) = input.ctx.tracing.get(name) else {
        return Ok(());
    };
    let cluster_name = format!("tracing:{}", backend.name);
    let error = |reason: String| GenerateError::Policy {
        policy: format!("TrafficTrace/{}", chosen.meta.name),
        resource: format!("{CLUSTER_TYPE}/{cluster_name}"),
        reason,
    };
    let (host, port, tls) = match &backend.kind {
        TracingBackendKind::Zipkin { url, .. } => {
            let u = parse_request_uri(url)
                .ok_or_else(|| error(format!("invalid URL of Zipkin {url:?}")))?;
            (u.host.to_owned(), port(u.port), u.scheme == "https")
        }
        TracingBackendKind::Datadog { address, port, .. } => {
            if !(1..=65535).contains(port) {
                return Err(error(format!(
                    "invalid Datadog port number {port}. Must be in range 1-65535"
                )));
            }
            (address.clone(), *port as u32, false)
        }
        TracingBackendKind::Other(_) => return Ok(()),
    };
    let identifying = dp.identifying_service();
    let mut listeners: Vec<(String, String, Option<&str>)> = dp
        .networking
        .inbound
        .iter()
        .map(|i| {
            let key = dp.inbound_key(i);
            (
                inbound_listener_name(&key.address, key.port),
                i.service().to_owned(),
                None,
            )
        })
        .collect();
    // Kuma's route plugins rebuild the outbound listeners without the old tracing.
    let outbounds = dp
        .networking
        .outbound
        .iter()
        .filter(|o| o.backend_ref.is_none() && !input.new_routes);
    listeners.extend(outbounds.map(|o| {
        (
            outbound_listener_name(o.effective_address(), o.port),
            identifying.clone(),
            Some(o.service()),
        )
    }));
    // A builtin gateway's listeners (Kuma's gateway filter chains: no destination, and they
    // spawn upstream spans).
    let gateway_listeners: Vec<String> = umbra_core::gateway::selected(&input.policies.stored, dp)
        .map(|g| g.envoy_listener_names())
        .unwrap_or_default();
    listeners.extend(
        gateway_listeners
            .iter()
            .map(|n| (n.clone(), identifying.clone(), None)),
    );
    for (name, service, destination) in listeners {
        let spawn_upstream_span = gateway_listeners.contains(&name);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let mut tracing = HcmTracing {
            spawn_upstream_span: Some(BoolValue {
                value: spawn_upstream_span,
            }),
            overall_sampling: backend.sampling.map(|value| Percent { value }),
            ..Default::default()
        };
        tracing.provider = Some(match &backend.kind {
            TracingBackendKind::Zipkin {
                url,
                trace_id_128bit,
                api_version,
                shared_span_context,
            } => {
                // Kuma: `httpProto` gives HTTP_PROTO; anything else (empty included) HTTP_JSON.
                let u = parse_request_uri(url).unwrap_or_default();
                zipkin_provider(
                    &cluster_name,
                    &u,
                    *trace_id_128bit,
                    api_version == "httpProto",
                    *shared_span_context,
                )
            }
            TracingBackendKind::Datadog { split_service, .. } => datadog_provider(
                &cluster_name,
                datadog_service(*split_service, &service, destination),
            ),
            TracingBackendKind::Other(_) => continue,
        });
        edit_hcms(listener, |hcm| hcm.tracing = Some(tracing.clone()));
    }
    snap.clusters.insert(
        cluster_name.clone(),
        provided_endpoint_cluster(&cluster_name, &host, port, tls, false).into(),
    );
    origins.clusters.insert(cluster_name, "tracing");
    Ok(())
}

/// MeshTrace on every inbound and outbound listener, and its collector cluster.
fn apply_new(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input
        .policies
        .matched_with_gateways(ResourceType::MeshTrace, dp);
    let Some(rule) = matched.single_item_rules.0.first() else {
        return Ok(());
    };
    let policies = rule
        .origin
        .iter()
        .map(|o| format!("MeshTrace/{}", o.meta.name))
        .collect::<Vec<_>>()
        .join(", ");
    let error = |resource: String, reason: String| GenerateError::Policy {
        policy: policies.clone(),
        resource,
        reason,
    };
    let conf = Conf::deserialize(&rule.conf).map_err(|e| {
        error(
            "MeshTrace".to_owned(),
            format!("merged conf does not fit MeshTrace: {e}"),
        )
    })?;
    let Some(backend) = conf.backends.as_ref().and_then(|b| b.first()) else {
        return Ok(());
    };
    let service = dp.identifying_service();
    let mut listeners: Vec<(String, Option<&str>)> = dp
        .networking
        .inbound
        .iter()
        .map(|i| {
            let key = dp.inbound_key(i);
            (inbound_listener_name(&key.address, key.port), None)
        })
        .collect();
    listeners.extend(
        dp.networking
            .outbound
            .iter()
            .filter(|o| o.backend_ref.is_none())
            .map(|o| {
                (
                    outbound_listener_name(o.effective_address(), o.port),
                    Some(o.service()),
                )
            }),
    );
    // A builtin gateway: every listener of its MeshGateway (Kuma's `applyToGateway`).
    if let Some(g) = umbra_core::gateway::selected(&input.policies.stored, dp) {
        listeners.extend(g.envoy_listener_names().into_iter().map(|n| (n, None)));
    }
    for (name, destination) in listeners {
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let tracing = hcm_tracing(&conf, backend, &service, destination)
            .map_err(|e| error(format!("{LISTENER_TYPE}/{name}"), e.to_string()))?;
        edit_hcms(listener, |hcm| hcm.tracing = Some(tracing.clone()));
    }
    if let Some((name, cluster)) = collector_cluster(backend) {
        snap.clusters.insert(name.clone(), cluster.into());
        origins.clusters.insert(name, ORIGIN);
    }
    Ok(())
}

/// Why a MeshTrace conf cannot become a listener's tracing (reported as the reason of a
/// [`GenerateError::Policy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A `sampling` percentage is not a number.
    #[error("sampling {value} is not a number")]
    Sampling {
        /// The percentage as written.
        value: IntOrString,
    },
    /// The Zipkin backend's `url` is not a request URI.
    #[error("invalid URL of Zipkin")]
    ZipkinUrl,
}

fn percent(v: &IntOrString) -> Result<Percent, TraceError> {
    v.to_f64()
        .map(|value| Percent { value })
        .ok_or_else(|| TraceError::Sampling { value: v.clone() })
}

/// Kuma's `Configurer.Configure`: the HCM `tracing` for a listener (`destination`: the
/// outbound's service, `None` for an inbound).
fn hcm_tracing(
    conf: &Conf,
    backend: &Backend,
    service: &str,
    destination: Option<&str>,
) -> Result<HcmTracing, TraceError> {
    let mut t = HcmTracing {
        spawn_upstream_span: Some(BoolValue { value: false }),
        ..Default::default()
    };
    if let Some(s) = &conf.sampling {
        t.overall_sampling = s.overall.as_ref().map(percent).transpose()?;
        t.client_sampling = s.client.as_ref().map(percent).transpose()?;
        t.random_sampling = s.random.as_ref().map(percent).transpose()?;
    }
    for tag in conf.tags.iter().flatten() {
        let ty = match &tag.header {
            Some(h) => custom_tag::Type::RequestHeader(custom_tag::Header {
                name: h.name.clone(),
                default_value: h.default.clone().unwrap_or_default(),
            }),
            None => custom_tag::Type::Literal(custom_tag::Literal {
                value: tag.literal.clone().unwrap_or_default(),
            }),
        };
        t.custom_tags.push(CustomTag {
            tag: tag.name.clone(),
            r#type: Some(ty),
        });
    }
    if let Some(z) = &backend.zipkin {
        let url = parse_request_uri(&z.url).ok_or(TraceError::ZipkinUrl)?;
        t.provider = Some(zipkin_provider(
            "meshtrace:zipkin",
            &url,
            z.trace_id_128bit.unwrap_or(false),
            z.api_version.as_deref() == Some("httpProto"),
            z.shared_span_context,
        ));
    }
    if let Some(d) = &backend.datadog {
        t.provider = Some(datadog_provider(
            "meshtrace:datadog",
            datadog_service(d.split_service == Some(true), service, destination),
        ));
    }
    if backend.open_telemetry.is_some() {
        let config = OpenTelemetryConfig {
            service_name: service.to_owned(),
            grpc_service: Some(GrpcService {
                target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                    grpc_service::EnvoyGrpc {
                        cluster_name: "meshtrace:opentelemetry".to_owned(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        };
        t.provider = Some(http_tracer("envoy.tracers.opentelemetry", any(&config)));
    }
    Ok(t)
}

fn http_tracer(name: &str, config: Any) -> tracing::Http {
    tracing::Http {
        name: name.to_owned(),
        config_type: Some(tracing::http::ConfigType::TypedConfig(config)),
    }
}

/// `envoy.tracers.zipkin` to `cluster` (Kuma's `zipkinConfig`).
fn zipkin_provider(
    cluster: &str,
    url: &RequestUri<'_>,
    trace_id_128bit: bool,
    proto: bool,
    shared_span_context: Option<bool>,
) -> tracing::Http {
    let hostname = if url.port.is_empty() {
        url.host.to_owned()
    } else {
        format!("{}:{}", url.host, url.port)
    };
    let config = ZipkinConfig {
        collector_cluster: cluster.to_owned(),
        collector_endpoint: url.path.to_owned(),
        trace_id_128bit,
        collector_endpoint_version: if proto {
            CollectorEndpointVersion::HttpProto
        } else {
            CollectorEndpointVersion::HttpJson
        } as i32,
        shared_span_context: shared_span_context.map(|value| BoolValue { value }),
        collector_hostname: hostname,
        ..Default::default()
    };
    http_tracer("envoy.tracers.zipkin", any(&config))
}

/// `envoy.tracers.datadog` to `cluster` as `service`.
fn datadog_provider(cluster: &str, service: String) -> tracing::Http {
    let config = DatadogConfig {
        collector_cluster: cluster.to_owned(),
        service_name: service,
        ..Default::default()
    };
    http_tracer("envoy.tracers.datadog", any(&config))
}

/// Kuma's `createDatadogServiceName`.
fn datadog_service(split: bool, service: &str, destination: Option<&str>) -> String {
    match (split, destination) {
        (false, _) => service.to_owned(),
        (true, None) => format!("{service}_INBOUND"),
        (true, Some(dest)) => format!("{service}_OUTBOUND_{dest}"),
    }
}

/// Go's `strconv.ParseInt(s, 10, 32)` as Kuma reads a port: 0 when it is not a number.
fn port(s: &str) -> u32 {
    s.parse::<i32>().map_or(0, |p| p as u32)
}

/// Kuma's `applyToClusters`: the collector cluster of `backend`, with its name.
fn collector_cluster(backend: &Backend) -> Option<(String, Cluster)> {
    let (provider, host, port, tls, http2) = if let Some(z) = &backend.zipkin {
        let url = parse_request_uri(&z.url)?;
        (
            "zipkin",
            url.host.to_owned(),
            port(url.port),
            url.scheme == "https",
            false,
        )
    } else if let Some(d) = &backend.datadog {
        let url = parse_request_uri(&d.url)?;
        ("datadog", url.host.to_owned(), port(url.port), false, false)
    } else {
        let o = backend.open_telemetry.as_ref()?;
        let mut parts = o.endpoint.split(':');
        let host = parts.next().unwrap_or_default().to_owned();
        let p = parts.next().map_or(4317, port);
        ("opentelemetry", host, p, false, true)
    };
    let name = format!("meshtrace:{provider}");
    let c = provided_endpoint_cluster(&name, &host, port, tls, http2);
    Some((name, c))
}
