//! The `Mesh` resource (universal format: `type: Mesh`, `name`, then `mtls`, `networking`,
//! `routing`, ... at the top level) and its validation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::{PathBuilder, ValidationError};

#[path = "mesh_backends.rs"]
mod backends;

/// A Mesh's spec. Fields Umbra does not interpret yet (`tracing`, `logging`, `metrics`,
/// `constraints`) are kept verbatim so Kuma YAML round-trips.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshSpec {
    /// Mutual TLS settings; mTLS is on when `enabledBackend` names one of `backends`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<Mtls>,
    /// Mesh networking settings (outbound passthrough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Value>,
    /// Routing settings (locality-aware load balancing, zone egress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Value>,
    /// Tracing backends, kept verbatim; TrafficTrace reads them through
    /// [`MeshSpec::tracing_backends`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Value>,
    /// Logging backends, kept verbatim; TrafficLog reads them through
    /// [`MeshSpec::logging_backends`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<Value>,
    /// Metrics backends (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
    /// Dataplane proxy constraints (opaque to Umbra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Value>,
    /// Kuma's flag to skip default policies on creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_creating_initial_policies: Option<Vec<String>>,
}

/// `mtls` block of a Mesh.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mtls {
    /// Name of the backend in use; empty means mTLS off.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub enabled_backend: String,
    /// Certificate authority backends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<MtlsBackend>,
    /// Kuma's switch to skip validating the CA on Mesh updates (stored, not acted on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_validation: Option<bool>,
}

/// One CA backend (`builtin` or `provided`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtlsBackend {
    /// Backend name referenced by `enabledBackend`.
    pub name: String,
    /// `builtin` or `provided`.
    #[serde(rename = "type")]
    pub backend_type: String,
    /// Data plane certificate settings (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_cert: Option<Value>,
    /// Backend configuration (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<Value>,
    /// `PERMISSIVE` or `STRICT` (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Root chain settings (`requestTimeout`; stored, not acted on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_chain: Option<Value>,
}

/// A Mesh logging backend (Kuma's `LoggingBackend`), as TrafficLog uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggingBackend {
    /// Name TrafficLogs refer to.
    pub name: String,
    /// Envoy format string; empty means Kuma's default format.
    pub format: String,
    /// Where the lines go.
    pub kind: LoggingBackendKind,
}

/// The kind of a [`LoggingBackend`] (Kuma's `type` and `conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggingBackendKind {
    /// `type: file`, `conf.path`.
    File {
        /// File the proxy appends to.
        path: String,
    },
    /// `type: tcp`, `conf.address` (Kuma streams it through kuma-dp's access log socket).
    Tcp {
        /// `host:port` of the collector.
        address: String,
    },
    /// Any other `type`, kept by name.
    Other(String),
}

/// A Mesh tracing backend (Kuma's `TracingBackend`), as TrafficTrace uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingBackend {
    /// Name TrafficTraces refer to.
    pub name: String,
    /// Overall sampling percentage, when set.
    pub sampling: Option<f64>,
    /// The collector.
    pub kind: TracingBackendKind,
}

/// The kind of a [`TracingBackend`] (Kuma's `type` and `conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TracingBackendKind {
    /// `type: zipkin`.
    Zipkin {
        /// Collector URL.
        url: String,
        /// 128-bit trace ids.
        trace_id_128bit: bool,
        /// `httpJson`, `httpProto`, or empty (inferred from the URL).
        api_version: String,
        /// Share span context between client and server spans.
        shared_span_context: Option<bool>,
    },
    /// `type: datadog`.
    Datadog {
        /// Agent address.
        address: String,
        /// Agent port.
        port: u64,
        /// Name services per direction.
        split_service: bool,
    },
    /// Any other `type`, kept by name.
    Other(String),
}

/// A backend of a Mesh's `logging` or `tracing` section, found by its name.
pub trait NamedBackend {
    /// The name policies refer to it by.
    fn name(&self) -> &str;
}

impl NamedBackend for LoggingBackend {
    fn name(&self) -> &str {
        &self.name
    }
}

impl NamedBackend for TracingBackend {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A Mesh's `logging` or `tracing` section as the old policies read it (Kuma's
/// `GetLoggingBackend` and `GetTracingBackend`).
#[derive(Debug, Clone, PartialEq)]
pub struct Backends<T> {
    /// `defaultBackend`: used by a policy without `conf.backend`.
    pub default_backend: String,
    /// `backends`, in order.
    pub backends: Vec<T>,
}

impl<T> Default for Backends<T> {
    fn default() -> Self {
        Backends {
            default_backend: String::new(),
            backends: Vec::new(),
        }
    }
}

impl<T: NamedBackend> Backends<T> {
    /// The backend called `name`, or the default one when `name` is empty; `None` when there
    /// is no such backend (Kuma then logs or traces nothing). Kuma indexes the backends by
    /// name: the last one of a name wins.
    pub fn get(&self, name: &str) -> Option<&T> {
        let name = if name.is_empty() {
            self.default_backend.as_str()
        } else {
            name
        };
        self.backends.iter().rev().find(|b| b.name() == name)
    }

    /// Read a section (`{defaultBackend, backends: [{name, type, conf, ...}]}`) leniently:
    /// fields of the wrong type read as absent; `backend` builds each entry from the entry,
    /// its `type` and its `conf`.
    fn parse(section: Option<&Value>, backend: impl Fn(&Value, &str, &Value) -> T) -> Self {
        let Some(section) = section else {
            return Backends::default();
        };
        let backends = section
            .get("backends")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|b| {
                let conf = b.get("conf").cloned().unwrap_or(Value::Null);
                backend(b, &text(b, "type"), &conf)
            })
            .collect();
        Backends {
            default_backend: text(section, "defaultBackend"),
            backends,
        }
    }
}

/// A violation at `path` when `v` is there and not a mapping.
pub(crate) fn must_be_mapping(err: &mut ValidationError, path: &PathBuilder, v: Option<&Value>) {
    if v.is_some_and(|v| !v.is_object()) {
        err.violation(path, "must be a mapping");
    }
}

/// The string at `key` of `v`, empty when absent or not a string.
fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// The Mesh's logging backends.
pub type LoggingBackends = Backends<LoggingBackend>;
/// The Mesh's tracing backends.
pub type TracingBackends = Backends<TracingBackend>;

impl MeshSpec {
    /// The `tracing` section as TrafficTrace reads it (see [`Backends`]).
    pub fn tracing_backends(&self) -> TracingBackends {
        let flag = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool);
        Backends::parse(self.tracing.as_ref(), |b, ty, conf| TracingBackend {
            name: text(b, "name"),
            sampling: b.get("sampling").and_then(Value::as_f64),
            kind: match ty {
                "zipkin" => TracingBackendKind::Zipkin {
                    url: text(conf, "url"),
                    trace_id_128bit: flag(conf, "traceId128bit").unwrap_or(false),
                    api_version: text(conf, "apiVersion"),
                    shared_span_context: flag(conf, "sharedSpanContext"),
                },
                "datadog" => TracingBackendKind::Datadog {
                    address: text(conf, "address"),
                    port: conf.get("port").and_then(Value::as_u64).unwrap_or(0),
                    split_service: flag(conf, "splitService").unwrap_or(false),
                },
                other => TracingBackendKind::Other(other.to_owned()),
            },
        })
    }

    /// The `logging` section as TrafficLog reads it (see [`Backends`]).
    pub fn logging_backends(&self) -> LoggingBackends {
        Backends::parse(self.logging.as_ref(), |b, ty, conf| LoggingBackend {
            name: text(b, "name"),
            format: text(b, "format"),
            kind: match ty {
                "file" => LoggingBackendKind::File {
                    path: text(conf, "path"),
                },
                "tcp" => LoggingBackendKind::Tcp {
                    address: text(conf, "address"),
                },
                other => LoggingBackendKind::Other(other.to_owned()),
            },
        })
    }

    /// `true` when `routing.zoneEgress` is `true`: sidecars reach ExternalServices (and other
    /// zones) through their zone's ZoneEgress (Kuma's `ZoneEgressEnabled`).
    pub fn zone_egress_enabled(&self) -> bool {
        self.routing
            .as_ref()
            .and_then(|r| r.get("zoneEgress"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }

    /// `true` when mutual TLS is enabled (an `enabledBackend` is set).
    pub fn mtls_enabled(&self) -> bool {
        self.mtls
            .as_ref()
            .is_some_and(|m| !m.enabled_backend.is_empty())
    }

    /// Kuma's `IsPassthrough` (`api/mesh/v1alpha1/mesh_helpers.go:3-9`):
    /// `networking.outbound.passthrough`, `true` when unset. When `false`, a transparent
    /// proxy gets no outbound passthrough cluster, so traffic to destinations outside the mesh
    /// is dropped.
    pub fn is_passthrough(&self) -> bool {
        self.networking
            .as_ref()
            .and_then(|n| n.get("outbound"))
            .and_then(|o| o.get("passthrough"))
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// Validate: the enabled backend must exist; backend names unique and types known; the
    /// sections kept verbatim are mappings (as Kuma's messages are), when given.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        for (field, section) in [
            ("networking", &self.networking),
            ("routing", &self.routing),
            ("tracing", &self.tracing),
            ("logging", &self.logging),
            ("metrics", &self.metrics),
            ("constraints", &self.constraints),
        ] {
            must_be_mapping(&mut err, &PathBuilder::rooted_at(field), section.as_ref());
        }
        if let Some(mtls) = &self.mtls {
            let path = PathBuilder::rooted_at("mtls");
            for (i, b) in mtls.backends.iter().enumerate() {
                let bp = path.field("backends").index(i);
                for (field, section) in [
                    ("dpCert", &b.dp_cert),
                    ("conf", &b.conf),
                    ("rootChain", &b.root_chain),
                ] {
                    must_be_mapping(&mut err, &bp.field(field), section.as_ref());
                }
                if b.name.is_empty() {
                    err.violation(&bp.field("name"), "cannot be empty");
                }
                if mtls.backends[..i].iter().any(|o| o.name == b.name) {
                    err.violation(
                        &bp.field("name"),
                        format!("{:?} name is already used for another backend", b.name),
                    );
                }
                if !matches!(b.backend_type.as_str(), "builtin" | "provided") {
                    err.violation(&bp.field("type"), "must be one of: builtin, provided");
                }
                if b.mode
                    .as_deref()
                    .is_some_and(|m| !matches!(m, "PERMISSIVE" | "STRICT"))
                {
                    err.violation(&bp.field("mode"), "must be one of: PERMISSIVE, STRICT");
                }
            }
            if !mtls.enabled_backend.is_empty()
                && !mtls.backends.iter().any(|b| b.name == mtls.enabled_backend)
            {
                err.violation(
                    &path.field("enabledBackend"),
                    "has to be set to one of the backends in the mesh",
                );
            }
        }
        self.validate_backends(&mut err);
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: serde_json::Value) -> Vec<String> {
        let spec: MeshSpec = serde_json::from_value(spec).unwrap();
        spec.validate()
            .violations
            .into_iter()
            .map(|v| v.field)
            .collect()
    }

    #[test]
    fn passthrough_is_on_unless_set_false() {
        let mesh = |v: serde_json::Value| serde_json::from_value::<MeshSpec>(v).unwrap();
        assert!(mesh(serde_json::json!({})).is_passthrough());
        assert!(mesh(serde_json::json!({"networking": {"outbound": {}}})).is_passthrough());
        assert!(
            mesh(serde_json::json!({"networking": {"outbound": {"passthrough": true}}}))
                .is_passthrough()
        );
        assert!(
            !mesh(serde_json::json!({"networking": {"outbound": {"passthrough": false}}}))
                .is_passthrough()
        );
    }

    #[test]
    fn sections_kept_verbatim_are_mappings_and_modes_kumas() {
        let ok = serde_json::json!({
            "networking": {"outbound": {"passthrough": true}},
            "tracing": null,
            "mtls": {"enabledBackend": "ca", "backends": [
                {"name": "ca", "type": "builtin", "mode": "STRICT", "conf": {}, "dpCert": null}]},
        });
        assert_eq!(fields(ok), Vec::<String>::new());
        let bad = serde_json::json!({
            "routing": 5,
            "constraints": [],
            "mtls": {"backends": [{"name": "ca", "type": "builtin", "mode": "LAX", "conf": "x"}]},
        });
        assert_eq!(
            fields(bad),
            [
                "routing",
                "constraints",
                "mtls.backends[0].conf",
                "mtls.backends[0].mode"
            ]
        );
    }
}
