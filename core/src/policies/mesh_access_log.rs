//! MeshAccessLog: the typed spec (access log backends per `from` and `to` item) and its
//! validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshaccesslog/api/v1alpha1/`
//! (`meshaccesslog.go` for the shape and JSON names, `validator.go` for the rules and their
//! order). Paths are rooted at `spec` (`spec.from[0].default.backends[0].file.path`).
//!
//! Kuma behaviours reproduced on purpose:
//! - `backends` must be present (an empty list is fine: it logs nothing);
//! - each backend needs the section its `type` names (`file`, `tcp`, `openTelemetry`); the
//!   other sections are not checked;
//! - a `format` needs the member its `type` names; `plain` must not be empty, `json` must not
//!   be an empty list and each entry needs a key and a value that make a JSON object when
//!   written `{"<key>": "<value>"}`;
//! - a file `path` is checked with govalidator's `IsFilePath` (absolute Unix or Windows drive
//!   path).
//!
//! Where Kuma panics on an unknown backend or format `type`, Umbra refuses it when decoding
//! (the enums below). A TCP `address` is checked with govalidator's `IsURL`, ported exactly
//! ([`crate::go_net::is_url`]): `kuma-3_meshaccesslog_tcp-sink:9999`, a compose container
//! name with underscores, is a valid address (issue 41). Umbra does not send TCP backends to
//! Envoy (Kuma streams them through kuma-dp), so Kuma's leniency reaches no proxy config.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::envelope::{Envelope, Items, Lists};
use super::mesh_health_check::is_file_path;
use super::{validate_items, validate_top_target_ref, FROM_OR_TO_REQUIRED};
use crate::go_net::is_url;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_NOT_BE_EMPTY};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];
/// Kinds allowed in `from[].targetRef`.
const FROM_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];
/// Kinds allowed in `to[].targetRef`.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];

/// MeshAccessLog spec.
pub type MeshAccessLog = Envelope<MeshAccessLogLists>;

/// What a MeshAccessLog spec holds: `to` and `from` items of [`Conf`].
#[derive(Debug, Clone, PartialEq)]
pub enum MeshAccessLogLists {}

impl Lists for MeshAccessLogLists {
    const TYPE: ResourceType = ResourceType::MeshAccessLog;
    type To = Items<Conf>;
    type From = Items<Conf>;
}

/// One `from` or `to` item.
pub type Item = super::Item<Conf>;

/// Where and how to log (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// The backends; required (an empty list logs nothing). Merged policies replace the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<Backend>>,
}

/// One backend (Kuma's `Backend`): the section `type` names is the one used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backend {
    /// `File`, `Tcp` or `OpenTelemetry`.
    #[serde(rename = "type")]
    pub backend_type: BackendType,
    /// TCP backend (Kuma streams it through kuma-dp's access log socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpBackend>,
    /// File backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileBackend>,
    /// OpenTelemetry (OTLP/gRPC) backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OtelBackend>,
}

/// Kuma's `BackendType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum BackendType {
    Tcp,
    File,
    OpenTelemetry,
}

/// A TCP backend (Kuma's `TCPBackend`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpBackend {
    /// Line format (Kuma's default network/HTTP format when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// `host:port` of the collector.
    #[serde(default)]
    pub address: String,
}

/// A file backend (Kuma's `FileBackend`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBackend {
    /// Line format (Kuma's default network/HTTP format when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// File the proxy appends to.
    #[serde(default)]
    pub path: String,
}

/// An OpenTelemetry backend (Kuma's `OtelBackend`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtelBackend {
    /// Log record attributes (values interpolated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<JsonValue>,
    /// Log record body: an OTLP `AnyValue` in JSON, or any JSON kept as its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Collector `host[:port]` (port 4317 when absent).
    #[serde(default)]
    pub endpoint: String,
}

/// A line format (Kuma's `Format`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Format {
    /// `Plain` or `Json`.
    #[serde(rename = "type")]
    pub format_type: FormatType,
    /// Envoy format string (`Plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<String>,
    /// JSON fields and their format strings (`Json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Vec<JsonValue>>,
    /// Leave out empty values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit_empty_values: Option<bool>,
}

/// Kuma's `FormatType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum FormatType {
    Plain,
    Json,
}

/// A key and its format string (Kuma's `JsonValue`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonValue {
    /// Key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Value (an Envoy format string).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

impl MeshAccessLog {
    /// Kuma 2.7's MeshAccessLog validation: every violation, paths rooted at `spec`.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        if self.to_items().is_empty() && self.from_items().is_empty() {
            err.violation(&spec, FROM_OR_TO_REQUIRED);
        }
        validate_items(
            &mut err,
            &spec.field("to"),
            self.to_items(),
            TO_KINDS,
            validate_default,
        );
        validate_items(
            &mut err,
            &spec.field("from"),
            self.from_items(),
            FROM_KINDS,
            validate_default,
        );
        err
    }
}

fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let Some(backends) = conf.and_then(|c| c.backends.as_ref()) else {
        err.violation(&path.field("backends"), MUST_BE_DEFINED);
        return;
    };
    for (i, b) in backends.iter().enumerate() {
        let at = path.field("backends").index(i);
        match b.backend_type {
            BackendType::File => {
                let root = at.field("file");
                let Some(file) = &b.file else {
                    err.violation(&root, MUST_BE_DEFINED);
                    continue;
                };
                if let Some(f) = &file.format {
                    validate_format(err, &root.field("format"), f);
                }
                if !is_file_path(&file.path) {
                    err.violation(&root.field("path"), "file backend requires a valid path");
                }
            }
            BackendType::Tcp => {
                let root = at.field("tcp");
                let Some(tcp) = &b.tcp else {
                    err.violation(&root, MUST_BE_DEFINED);
                    continue;
                };
                if let Some(f) = &tcp.format {
                    validate_format(err, &root.field("format"), f);
                }
                if !is_url(&tcp.address) {
                    err.violation(&root.field("address"), "tcp backend requires valid address");
                }
            }
            BackendType::OpenTelemetry => {
                if b.open_telemetry.is_none() {
                    err.violation(&at.field("openTelemetry"), MUST_BE_DEFINED);
                }
            }
        }
    }
}

fn validate_format(err: &mut ValidationError, path: &PathBuilder, format: &Format) {
    match format.format_type {
        FormatType::Plain => match &format.plain {
            None => err.violation(&path.field("plain"), MUST_BE_DEFINED),
            Some(p) if p.is_empty() => err.violation(&path.field("plain"), MUST_NOT_BE_EMPTY),
            Some(_) => {}
        },
        FormatType::Json => {
            let Some(fields) = &format.json else {
                err.violation(&path.field("json"), MUST_BE_DEFINED);
                return;
            };
            if fields.is_empty() {
                err.violation(&path.field("json"), MUST_NOT_BE_EMPTY);
            }
            for (i, f) in fields.iter().enumerate() {
                let at = path.field("json").index(i);
                if f.key.is_empty() {
                    err.violation(&at.field("key"), "key cannot be empty");
                }
                if f.value.is_empty() {
                    err.violation(&at.field("value"), "value cannot be empty");
                }
                let object = format!("{{\"{}\": \"{}\"}}", f.key, f.value);
                if serde_json::from_str::<Value>(&object).is_err() {
                    err.violation(&at, "is not a valid JSON object");
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "mesh_access_log_tests.rs"]
mod tests;
