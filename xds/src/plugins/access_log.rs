//! Access logs: the old TrafficLog on outbound listeners, then the MeshAccessLog plugin on
//! inbound and outbound listeners (Kuma 2.7.29).
//!
//! **Old TrafficLog** (Kuma's `OutboundProxyGenerator` with `HttpAccessLog`/`NetworkAccessLog`,
//! `pkg/xds/envoy/listeners/v3/access_log_configurer.go`), in a view where it is in effect (no
//! MeshAccessLog in the mesh, the old-type-off rule of seed 000; Kuma would log to both): one
//! TrafficLog per outbound service (`SelectOutboundConnectionPolicies`), naming a Mesh logging
//! backend (`conf.backend`, else `logging.defaultBackend`; an unknown name logs nothing). A
//! `file` backend appends an `envoy.access_loggers.file` logger to the HTTP connection manager
//! (HTTP, HTTP/2, gRPC) or tcp_proxy (TCP, Kafka) of the outbound listener: the backend's
//! `format`, else Kuma's default HTTP or network format, with `%KUMA_*%` values interpolated
//! and a newline added. When a MeshHTTPRoute or MeshTCPRoute gives the DPP a `to` rule, Kuma's
//! route plugins rebuild its outbound listeners without the TrafficLog, so none is added.
//!
//! **MeshAccessLog** (`pkg/plugins/policies/meshaccesslog/plugin/{v1alpha1/plugin.go,
//! xds/configurer.go}`): inbounds take the `from` rules of their listener (computed for the
//! whole mesh; source `unknown`, destination the DPP's identifying service), outbounds (no
//! `backendRef`) the `to` rules for `{kuma.io/service: <service>}`. Each backend of the
//! computed conf appends a logger to every filter chain's HTTP connection manager and
//! tcp_proxy: `File` writes the plain format (or Kuma's default) plus a newline, or a JSON
//! format of the `json` fields; `OpenTelemetry` sends OTLP log records (body: the `body` read
//! as an OTLP `AnyValue`, else as text, else Kuma's default HTTP/network format; attributes
//! with their values interpolated) to a cluster `meshaccesslog:opentelemetry:<n>` per
//! distinct endpoint (HTTP/2, connect timeout 5s, port 4317 by default). Kuma leaves attribute
//! values as written, and Envoy refuses a `%KUMA_MESH%` there ("Not supported field in
//! StreamInfo"); Umbra interpolates them like every other format. `%KUMA_MESH%`, `%KUMA_SOURCE_SERVICE%`,
//! `%KUMA_DESTINATION_SERVICE%`, `%KUMA_SOURCE_ADDRESS%`,
//! `%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%` and `%KUMA_TRAFFIC_DIRECTION%` are interpolated.
//!
//! Not generated, and named as such in every answer about the DPP
//! ([`umbra_core::view::PolicySet::not_generated`]): TCP backends of both kinds. Kuma writes
//! them to kuma-dp's access log socket, which forwards the lines to the collector; a DPP of
//! Umbra is Envoy alone, with no such socket. On builtin gateways: [`apply_gateway`].
//!
//! **Builtin gateways**: every listener of the gateway logs with the old TrafficLog chosen for
//! `pass_through` (Kuma's gateway filter chains: source the gateway's service, destination
//! `*`, direction INBOUND), and with the MeshAccessLog rules of its listener
//! ([`apply_gateway`]).
//!
//! **Transparent proxy** (origins `transparent` and `direct-access`,
//! [`crate::base::transparent`], [`crate::base::direct_access`]): the outbound passthrough
//! listeners and the direct-access ones log with the old TrafficLog chosen for Kuma's
//! `pass_through` service (network format; destination `external` and direction
//! `UNSPECIFIED` on the passthrough, the listener's name and `OUTBOUND` on direct access;
//! kept when a MeshHTTPRoute applies, as Kuma bakes it into those generators), or with the
//! MeshAccessLog `to` rules for `{kuma.io/service: pass_through}`.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::accesslog::v3::{access_log, AccessLog};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    data_source, grpc_service, substitution_format_string, ApiVersion, DataSource, GrpcService,
    SubstitutionFormatString,
};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    file_access_log, FileAccessLog,
};
use envoy_types::pb::envoy::extensions::access_loggers::grpc::v3::CommonGrpcAccessLogConfig;
use envoy_types::pb::envoy::extensions::access_loggers::open_telemetry::v3::OpenTelemetryAccessLogConfig;
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};
use envoy_types::pb::opentelemetry::proto::common::v1::{
    any_value, AnyValue, KeyValue, KeyValueList,
};
use serde::Deserialize;
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::mesh::LoggingBackendKind;
use umbra_core::old_matching::{
    select_outbound_connection_policies, OldPolicyRef, PASS_THROUGH_SERVICE,
};
use umbra_core::policies::mesh_access_log::{Backend, Conf, JsonValue};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::rules::{Element, Rules};
use umbra_core::target_ref::SERVICE_TAG;

use super::edit::{edit_hcms, edit_tcp_proxies, provided_endpoint_cluster};
use super::input::{Origins, PluginInput};
use crate::error::GenerateError;
use crate::names::{inbound_listener_name, outbound_listener_name};
use crate::protobuf::any;
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// Kuma's default HTTP access log format.
pub const DEFAULT_HTTP_FORMAT: &str = r#"[%START_TIME%] %KUMA_MESH% "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-B3-TRACEID?X-DATADOG-TRACEID)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%KUMA_SOURCE_SERVICE%" "%KUMA_DESTINATION_SERVICE%" "%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%" "%UPSTREAM_HOST%""#;
/// Kuma's default network (TCP) access log format.
pub const DEFAULT_NETWORK_FORMAT: &str = "[%START_TIME%] %RESPONSE_FLAGS% %KUMA_MESH% %KUMA_SOURCE_ADDRESS_WITHOUT_PORT%(%KUMA_SOURCE_SERVICE%)->%UPSTREAM_HOST%(%KUMA_DESTINATION_SERVICE%) took %DURATION%ms, sent %BYTES_SENT% bytes, received: %BYTES_RECEIVED% bytes";
/// Origin of the OpenTelemetry collector clusters (Kuma's `OriginMeshAccessLog`).
pub const ORIGIN: &str = "meshaccesslog";
/// Kuma's `mesh_proto.ServiceUnknown`.
const UNKNOWN: &str = "unknown";
const OTEL_DEFAULT_PORT: u32 = 4317;

/// Apply the old TrafficLogs in effect, then MeshAccessLog, to `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged MeshAccessLog conf does not fit the model.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    // Kuma's route plugins rebuild the outbound listeners the old TrafficLog is baked into,
    // without it; the passthrough and direct-access listeners keep theirs.
    apply_old(snap, input, origins, !input.new_routes);
    apply_new(snap, input, origins)
}

/// The values Kuma interpolates into formats (`InterpolateKumaValues`).
struct Interpolation<'a> {
    mesh: &'a str,
    source: &'a str,
    destination: &'a str,
    direction: &'static str,
    ip: &'a str,
}

impl Interpolation<'_> {
    fn apply(&self, format: &str) -> String {
        let with_port = if self.ip.contains(':') {
            format!("[{}]:0", self.ip)
        } else {
            format!("{}:0", self.ip)
        };
        format
            .replace("%KUMA_SOURCE_ADDRESS%", &with_port)
            .replace("%KUMA_SOURCE_ADDRESS_WITHOUT_PORT%", self.ip)
            .replace("%KUMA_SOURCE_SERVICE%", self.source)
            .replace("%KUMA_DESTINATION_SERVICE%", self.destination)
            .replace("%KUMA_MESH%", self.mesh)
            .replace("%KUMA_TRAFFIC_DIRECTION%", self.direction)
    }
}

fn dp_ip(dp: &DataplaneSpec) -> &str {
    if dp.networking.advertised_address.is_empty() {
        &dp.networking.address
    } else {
        &dp.networking.advertised_address
    }
}

/// Append `log` to every HTTP connection manager (when `http`) or tcp_proxy of `listener`.
fn append(listener: &mut Listener, log: &AccessLog, http: bool) {
    if http {
        edit_hcms(listener, |hcm| hcm.access_log.push(log.clone()));
    } else {
        edit_tcp_proxies(listener, |p| p.access_log.push(log.clone()));
    }
}

fn file_logger(format: SubstitutionFormatString, path: &str) -> AccessLog {
    AccessLog {
        name: "envoy.access_loggers.file".to_owned(),
        config_type: Some(access_log::ConfigType::TypedConfig(any(&FileAccessLog {
            path: path.to_owned(),
            access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(format)),
        }))),
        ..Default::default()
    }
}

fn text_format(text: String, omit_empty: bool) -> SubstitutionFormatString {
    SubstitutionFormatString {
        format: Some(substitution_format_string::Format::TextFormatSource(
            DataSource {
                specifier: Some(data_source::Specifier::InlineString(text)),
                ..Default::default()
            },
        )),
        omit_empty_values: omit_empty,
        ..Default::default()
    }
}

fn string_value(s: String) -> PbValue {
    PbValue {
        kind: Some(Kind::StringValue(s)),
    }
}

/// The listeners of `origin` (recorded by the base generators), sorted by name.
fn listeners_of(origins: &Origins, origin: &str) -> Vec<String> {
    origins
        .listeners
        .iter()
        .filter(|(_, o)| **o == origin)
        .map(|(n, _)| n.clone())
        .collect()
}

/// The passthrough listeners (origin `transparent`, `outbound:passthrough:*`) and the
/// direct-access ones, each with the destination Kuma logs: `external`, or the listener's
/// name.
fn pass_through_listeners(origins: &Origins) -> Vec<(String, String)> {
    let passthrough = listeners_of(origins, crate::base::transparent::ORIGIN)
        .into_iter()
        .filter(|n| n.starts_with("outbound:"))
        .map(|n| (n, "external".to_owned()));
    let direct = listeners_of(origins, crate::base::direct_access::ORIGIN)
        .into_iter()
        .map(|n| (n.clone(), n));
    passthrough.chain(direct).collect()
}

/// The old TrafficLogs in effect: on outbound listeners when `outbounds`, and the one chosen
/// for Kuma's `pass_through` service on the passthrough and direct-access listeners (Kuma's
/// `TransparentProxyGenerator` and `DirectAccessProxyGenerator`: a network log, direction
/// `UNSPECIFIED` and destination `external` on the passthrough, `OUTBOUND` and the listener's
/// name on direct access).
fn apply_old(snap: &mut Snapshot, input: &PluginInput<'_>, origins: &Origins, outbounds: bool) {
    let policies: &[Resource] = input.old_policies(ResourceType::TrafficLog);
    if policies.is_empty() {
        return;
    }
    let refs: Vec<OldPolicyRef<'_>> = policies
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let dp = input.dataplane;
    let chosen = select_outbound_connection_policies(dp, &refs);
    let source = dp.identifying_service();
    // The file logger of the TrafficLog chosen for `service`, if any.
    let logger = |service: &str, destination: &str, direction: &'static str, http: bool| {
        let Some(Spec::TrafficLog(log)) = chosen.get(service).map(|i| &policies[*i].spec) else {
            return None;
        };
        let name = log.conf.as_ref().map_or("", |c| c.backend.as_str());
        let backend = input.ctx.logging.get(name)?;
        let LoggingBackendKind::File { path } = &backend.kind else {
            return None; // tcp: kuma-dp's socket (see the module docs)
        };
        let default = if http {
            DEFAULT_HTTP_FORMAT
        } else {
            DEFAULT_NETWORK_FORMAT
        };
        let format = if backend.format.is_empty() {
            default
        } else {
            &backend.format
        };
        let vars = Interpolation {
            mesh: &input.ctx.mesh,
            source: &source,
            destination,
            direction,
            ip: dp_ip(dp),
        };
        Some(file_logger(
            text_format(vars.apply(format) + "\n", false),
            path,
        ))
    };
    let interfaces = dp
        .networking
        .outbound
        .iter()
        .filter(|o| outbounds && o.backend_ref.is_none());
    for outbound in interfaces {
        let service = outbound.service();
        let http = input.service_protocol(service).is_http();
        let Some(log) = logger(service, service, "OUTBOUND", http) else {
            continue;
        };
        let listener = outbound_listener_name(outbound.effective_address(), outbound.port);
        if let Some(l) = snap.listeners.get_mut(&listener) {
            append(l, &log, http);
        }
    }
    for (name, destination) in pass_through_listeners(origins) {
        let direction = if destination == "external" {
            "UNSPECIFIED"
        } else {
            "OUTBOUND"
        };
        let log = logger(PASS_THROUGH_SERVICE, &destination, direction, false);
        if let (Some(log), Some(l)) = (log, snap.listeners.get_mut(&name)) {
            append(l, &log, false);
        }
    }
    // A builtin gateway's listeners (Kuma's gateway filter chains): the TrafficLog of
    // `pass_through`, from the gateway's service to `*`, INBOUND.
    if let Some(g) = umbra_core::gateway::selected(&input.policies.stored, dp) {
        let names: Vec<String> = g
            .envoy_listener_names()
            .into_iter()
            .filter(|n| snap.listeners.contains_key(n))
            .collect();
        for name in names {
            let http = name.contains(":HTTP:") || name.contains(":HTTPS:");
            let log = logger(PASS_THROUGH_SERVICE, "*", "INBOUND", http);
            if let (Some(log), Some(l)) = (log, snap.listeners.get_mut(&name)) {
                append(l, &log, http);
            }
        }
    }
}

/// The OpenTelemetry collector endpoints in order of first use (Kuma's `EndpointAccumulator`).
#[derive(Default)]
struct Collectors(Vec<(String, u32)>);

impl Collectors {
    /// The cluster name of `endpoint` (`host[:port]`), registering it on first use.
    fn cluster(&mut self, endpoint: &str) -> String {
        let mut parts = endpoint.split(':');
        let host = parts.next().unwrap_or_default().to_owned();
        // Kuma: `strconv.ParseInt` of the second part, 0 when it is not a number.
        let port = parts.next().map_or(OTEL_DEFAULT_PORT, |p| {
            p.parse::<i32>().map_or(0, |v| v as u32)
        });
        let key = (host, port);
        let i = match self.0.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.0.push(key);
                self.0.len() - 1
            }
        };
        format!("meshaccesslog:opentelemetry:{i}")
    }
}

/// MeshAccessLog on inbound and outbound listeners, then its collector clusters.
fn apply_new(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input.policies.matched(ResourceType::MeshAccessLog, dp);
    if matched.from_rules.is_empty() && matched.to_rules.is_empty() {
        return Ok(());
    }
    let mut collectors = Collectors::default();
    let service = dp.identifying_service();
    let mut done = BTreeSet::new();
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        if !done.insert(key.clone()) {
            continue;
        }
        let name = inbound_listener_name(&key.address, key.port);
        let Some(rules) = matched.from_rules.get(&key) else {
            continue;
        };
        let vars = Interpolation {
            mesh: &input.ctx.mesh,
            source: UNKNOWN,
            destination: &service,
            direction: "INBOUND",
            ip: dp_ip(dp),
        };
        configure(snap, &name, rules, &Element::new(), &vars, &mut collectors)?;
    }
    for outbound in dp
        .networking
        .outbound
        .iter()
        .filter(|o| o.backend_ref.is_none())
    {
        let destination = outbound.service();
        let name = outbound_listener_name(outbound.effective_address(), outbound.port);
        let vars = Interpolation {
            mesh: &input.ctx.mesh,
            source: &service,
            destination,
            direction: "OUTBOUND",
            ip: dp_ip(dp),
        };
        let element = Element::from([(SERVICE_TAG.to_owned(), destination.to_owned())]);
        configure(
            snap,
            &name,
            &matched.to_rules,
            &element,
            &vars,
            &mut collectors,
        )?;
    }
    // Kuma's `applyToTransparentProxyListeners` and `applyToDirectAccess`: the `to` rules for
    // `pass_through`. (Kuma's `applyToDirectAccess` returns after the first listener of a Go
    // map, a random one; Umbra configures them all.)
    let element = Element::from([(SERVICE_TAG.to_owned(), PASS_THROUGH_SERVICE.to_owned())]);
    for (name, destination) in pass_through_listeners(origins) {
        let vars = Interpolation {
            mesh: &input.ctx.mesh,
            source: &service,
            destination: &destination,
            direction: "OUTBOUND",
            ip: dp_ip(dp),
        };
        configure(
            snap,
            &name,
            &matched.to_rules,
            &element,
            &vars,
            &mut collectors,
        )?;
    }
    for (i, (host, port)) in collectors.0.iter().enumerate() {
        let name = format!("meshaccesslog:opentelemetry:{i}");
        snap.clusters
            .insert(name.clone(), collector_cluster(&name, host, *port).into());
        origins.clusters.insert(name, ORIGIN);
    }
    Ok(())
}

/// The `to` and `from` rules of one builtin gateway listener, by listener name.
pub(crate) type GatewayListenerRules<'r> = (String, Option<&'r Rules>, Option<&'r Rules>);

/// MeshAccessLog on builtin gateway listeners (Kuma's `applyToGateway`): per listener, its `to`
/// rules for the Mesh element (source the gateway's service, destination `*`, direction
/// OUTBOUND), then its `from` rules (source `unknown`, destination the gateway's service,
/// INBOUND); then the OpenTelemetry collector clusters they name.
///
/// # Errors
/// [`GenerateError::Policy`] when a merged conf does not fit MeshAccessLog.
pub(crate) fn apply_gateway(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
    listeners: &[GatewayListenerRules<'_>],
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let service = dp.identifying_service();
    let mut collectors = Collectors::default();
    for (name, to, from) in listeners {
        if let Some(rules) = to {
            let vars = Interpolation {
                mesh: &input.ctx.mesh,
                source: &service,
                destination: "*",
                direction: "OUTBOUND",
                ip: dp_ip(dp),
            };
            configure(snap, name, rules, &Element::new(), &vars, &mut collectors)?;
        }
        if let Some(rules) = from {
            let vars = Interpolation {
                mesh: &input.ctx.mesh,
                source: UNKNOWN,
                destination: &service,
                direction: "INBOUND",
                ip: dp_ip(dp),
            };
            configure(snap, name, rules, &Element::new(), &vars, &mut collectors)?;
        }
    }
    for (i, (host, port)) in collectors.0.iter().enumerate() {
        let cluster = format!("meshaccesslog:opentelemetry:{i}");
        snap.clusters.insert(
            cluster.clone(),
            collector_cluster(&cluster, host, *port).into(),
        );
        origins.clusters.insert(cluster, ORIGIN);
    }
    Ok(())
}

/// Kuma's `configureInbound`/`configureOutbound` for listener `name`.
fn configure(
    snap: &mut Snapshot,
    name: &str,
    rules: &Rules,
    element: &Element,
    vars: &Interpolation<'_>,
    collectors: &mut Collectors,
) -> Result<(), GenerateError> {
    let Some(rule) = rules.compute(element) else {
        return Ok(());
    };
    let Some(listener) = snap.listeners.get_mut(name) else {
        return Ok(());
    };
    let conf = Conf::deserialize(&rule.conf).map_err(|e| GenerateError::Policy {
        policy: rule
            .origin
            .iter()
            .map(|o| format!("MeshAccessLog/{}", o.meta.name))
            .collect::<Vec<_>>()
            .join(", "),
        resource: format!("{LISTENER_TYPE}/{name}"),
        reason: format!("merged conf does not fit MeshAccessLog: {e}"),
    })?;
    for backend in conf.backends.iter().flatten() {
        for http in [true, false] {
            let default = if http {
                DEFAULT_HTTP_FORMAT
            } else {
                DEFAULT_NETWORK_FORMAT
            };
            if let Some(log) = backend_logger(backend, default, vars, collectors) {
                append(listener, &log, http);
            }
        }
    }
    Ok(())
}

/// Kuma's `envoyAccessLog` for one backend; `None` for a TCP backend (module docs). The
/// OpenTelemetry logger uses `common_config` as Kuma writes it (deprecated in Envoy 1.40, still
/// accepted).
#[allow(deprecated)]
fn backend_logger(
    backend: &Backend,
    default_format: &str,
    vars: &Interpolation<'_>,
    collectors: &mut Collectors,
) -> Option<AccessLog> {
    if backend.tcp.is_some() {
        return None;
    }
    if let Some(file) = &backend.file {
        let omit = file
            .format
            .as_ref()
            .and_then(|f| f.omit_empty_values)
            .unwrap_or(false);
        // Kuma looks at `plain` first, then `json` (validation ties them to `type`).
        let format = match &file.format {
            None => text_format(vars.apply(default_format) + "\n", false),
            Some(f) => match &f.plain {
                Some(plain) => text_format(vars.apply(plain) + "\n", omit),
                None => json_format(f.json.as_deref().unwrap_or_default(), vars, omit),
            },
        };
        return Some(file_logger(format, &file.path));
    }
    let otel = backend.open_telemetry.as_ref()?;
    let body = otel_body(otel.body.as_ref(), default_format, vars);
    let attributes = KeyValueList {
        values: otel
            .attributes
            .iter()
            .map(|kv| KeyValue {
                key: kv.key.clone(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(vars.apply(&kv.value))),
                }),
                ..Default::default()
            })
            .collect(),
    };
    let config = OpenTelemetryAccessLogConfig {
        common_config: Some(CommonGrpcAccessLogConfig {
            log_name: "MeshAccessLog".to_owned(),
            transport_api_version: ApiVersion::V3 as i32,
            grpc_service: Some(GrpcService {
                target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                    grpc_service::EnvoyGrpc {
                        cluster_name: collectors.cluster(&otel.endpoint),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        }),
        body: Some(body),
        attributes: Some(attributes),
        ..Default::default()
    };
    Some(AccessLog {
        name: "envoy.access_loggers.open_telemetry".to_owned(),
        config_type: Some(access_log::ConfigType::TypedConfig(any(&config))),
        ..Default::default()
    })
}

/// A JSON format of `fields` (values interpolated; a repeated key keeps its last value).
fn json_format(
    fields: &[JsonValue],
    vars: &Interpolation<'_>,
    omit_empty: bool,
) -> SubstitutionFormatString {
    let fields = fields
        .iter()
        .map(|kv| (kv.key.clone(), string_value(vars.apply(&kv.value))))
        .collect();
    SubstitutionFormatString {
        format: Some(substitution_format_string::Format::JsonFormat(Struct {
            fields,
        })),
        omit_empty_values: omit_empty,
        ..Default::default()
    }
}

/// The OTLP log body: `body` read as an OTLP `AnyValue` in proto3 JSON (string values and
/// keys interpolated), else its JSON text interpolated, else the default format.
fn otel_body(
    body: Option<&serde_json::Value>,
    default_format: &str,
    vars: &Interpolation<'_>,
) -> AnyValue {
    let text = |s: String| AnyValue {
        value: Some(any_value::Value::StringValue(s)),
    };
    let Some(body) = body else {
        return text(vars.apply(default_format));
    };
    match crate::render::from_json_allowing_unknown::<AnyValue>(body) {
        Ok(mut v) => {
            interpolate_any(&mut v, vars);
            v
        }
        Err(_) => text(vars.apply(&body.to_string())),
    }
}

fn interpolate_any(v: &mut AnyValue, vars: &Interpolation<'_>) {
    match &mut v.value {
        Some(any_value::Value::StringValue(s)) => *s = vars.apply(s),
        Some(any_value::Value::ArrayValue(a)) => {
            a.values.iter_mut().for_each(|v| interpolate_any(v, vars));
        }
        Some(any_value::Value::KvlistValue(kv)) => {
            for entry in &mut kv.values {
                if let Some(v) = &mut entry.value {
                    interpolate_any(v, vars);
                }
                entry.key = vars.apply(&entry.key);
            }
        }
        _ => {}
    }
}

/// The collector cluster (Kuma's `HandleClusters`): HTTP/2, no TLS.
fn collector_cluster(name: &str, host: &str, port: u32) -> Cluster {
    provided_endpoint_cluster(name, host, port, false, true)
}
