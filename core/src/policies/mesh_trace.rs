//! MeshTrace: the typed spec (one tracing backend, sampling and custom tags, as a single
//! `default`) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshtrace/api/v1alpha1/` (`meshtrace.go` for
//! the shape and JSON names, `validator.go` for the rules and their order). Paths are rooted at
//! `spec` (`spec.default.backends[0].zipkin.url`).
//!
//! Kuma behaviours reproduced on purpose:
//! - `backends` must be present and hold zero or one backend (zero turns tracing off);
//! - a Zipkin `url` is checked with govalidator's `IsURL`, a Datadog `url` with Go's
//!   `url.ParseRequestURI` (both ported in [`crate::go_net`]): scheme `http`, a port in
//!   1..=65535, no user, path or query;
//! - each tag needs a name and exactly one of `header`, `literal`;
//! - sampling percentages are integers or decimal strings in [0, 100].
//!
//! Where Kuma panics on an unknown backend `type`, Umbra refuses it when decoding.

use serde::{Deserialize, Serialize};

use super::mesh_fault_injection::IntOrString;
use super::validate_top_target_ref;
use crate::go_net::{self, is_url};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::validate::{
    must_have_only_one, PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_NOT_BE_EMPTY,
};

/// Kinds allowed for the top-level `targetRef` (no MeshGateway listener tags).
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];

/// MeshTrace spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTrace {
    /// The proxies the policy applies to; an absent one is reported by validation.
    #[serde(default)]
    pub target_ref: TargetRef,
    /// The tracing configuration (absent reads as empty, which validation reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Conf>,
}

/// Tracing configuration (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Zero or one backend; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<Backend>>,
    /// Sampling percentages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Custom span tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<Tag>>,
}

/// A tracing backend (Kuma's `Backend`): the section `type` names is the one used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backend {
    /// `Zipkin`, `Datadog` or `OpenTelemetry`.
    #[serde(rename = "type")]
    pub backend_type: BackendType,
    /// Zipkin collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipkin: Option<ZipkinBackend>,
    /// Datadog agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datadog: Option<DatadogBackend>,
    /// OpenTelemetry (OTLP/gRPC) collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OpenTelemetryBackend>,
}

/// Kuma's `BackendType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum BackendType {
    Zipkin,
    Datadog,
    OpenTelemetry,
}

/// A Zipkin collector (Kuma's `ZipkinBackend`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZipkinBackend {
    /// Collector URL (`http://zipkin:9411/api/v2/spans`).
    #[serde(default)]
    pub url: String,
    /// 128-bit trace ids.
    #[serde(
        default,
        rename = "traceId128bit",
        skip_serializing_if = "Option::is_none"
    )]
    pub trace_id_128bit: Option<bool>,
    /// `httpJson` (default) or `httpProto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Share span context between client and server spans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_span_context: Option<bool>,
}

/// A Datadog agent (Kuma's `DatadogBackend`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatadogBackend {
    /// Agent URL (`http://host:port`).
    #[serde(default)]
    pub url: String,
    /// Name services per direction (`<service>_INBOUND`, `<service>_OUTBOUND_<destination>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_service: Option<bool>,
}

/// An OpenTelemetry collector (Kuma's `OpenTelemetryBackend`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenTelemetryBackend {
    /// `host[:port]` (port 4317 when absent).
    #[serde(default)]
    pub endpoint: String,
}

/// Sampling percentages (Kuma's `Sampling`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sampling {
    /// Envoy `overall_sampling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<IntOrString>,
    /// Envoy `client_sampling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<IntOrString>,
    /// Envoy `random_sampling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<IntOrString>,
}

/// A custom span tag (Kuma's `Tag`): a literal or a request header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tag {
    /// Tag name.
    #[serde(default)]
    pub name: String,
    /// A fixed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// A request header's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderTag>,
}

/// A header tag (Kuma's `HeaderTag`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderTag {
    /// Header name.
    #[serde(default)]
    pub name: String,
    /// Value when the header is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

impl MeshTrace {
    /// Kuma 2.7's MeshTrace validation: every violation, paths rooted at `spec`.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, false);
        let empty = Conf::default();
        validate_default(
            &mut err,
            &spec.field("default"),
            self.default.as_ref().unwrap_or(&empty),
        );
        err
    }
}

fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: &Conf) {
    let backends_path = path.field("backends");
    match conf.backends.as_deref() {
        None => err.violation(&backends_path, MUST_BE_DEFINED),
        Some([]) => {}
        Some([backend]) => validate_backend(err, &backends_path.index(0), backend),
        Some(_) => err.violation(&backends_path, "must have zero or one backend defined"),
    }
    for (i, tag) in conf.tags.iter().flatten().enumerate() {
        let at = path.field("tags").index(i);
        if tag.name.is_empty() {
            err.violation(&at.field("name"), MUST_NOT_BE_EMPTY);
        }
        if tag.header.is_some() == tag.literal.is_some() {
            err.violation(&at, must_have_only_one("tag", &["header", "literal"]));
        }
    }
    if let Some(s) = &conf.sampling {
        for (field, v) in [
            ("client", &s.client),
            ("random", &s.random),
            ("overall", &s.overall),
        ] {
            let Some(v) = v else { continue };
            let at = path.field("sampling").field(field);
            match v.to_decimal() {
                None => err.violation(&at, "string is not a number"),
                Some(d) if d.is_negative() || d.cmp_int(100) == std::cmp::Ordering::Greater => {
                    err.violation(&at, "must be between 0 and 100");
                }
                Some(_) => {}
            }
        }
    }
}

fn validate_backend(err: &mut ValidationError, path: &PathBuilder, backend: &Backend) {
    match backend.backend_type {
        BackendType::Datadog => {
            let at = path.field("datadog");
            let Some(dd) = &backend.datadog else {
                err.violation(&at, MUST_BE_DEFINED);
                return;
            };
            for message in datadog_url_violations(&dd.url) {
                err.violation(&at.field("url"), message);
            }
        }
        BackendType::Zipkin => {
            let at = path.field("zipkin");
            let Some(z) = &backend.zipkin else {
                err.violation(&at, MUST_BE_DEFINED);
                return;
            };
            if z.url.is_empty() {
                err.violation(&at.field("url"), MUST_NOT_BE_EMPTY);
            } else if !is_url(&z.url) {
                err.violation(&at.field("url"), "must be a valid url");
            }
        }
        BackendType::OpenTelemetry => {
            if backend.open_telemetry.is_none() {
                err.violation(&path.field("openTelemetry"), MUST_BE_DEFINED);
            }
        }
    }
}

/// The parts of a URL as Go's `url.ParseRequestURI` splits it; `None` where it fails.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RequestUri<'a> {
    /// Scheme (lower-cased by Go; compared as written here).
    pub scheme: &'a str,
    /// Text after `scheme:` without `//` (Go's `Opaque`).
    pub opaque: &'a str,
    /// Userinfo before `@`.
    pub user: Option<&'a str>,
    /// Host without the port.
    pub host: &'a str,
    /// Port digits (empty when absent).
    pub port: &'a str,
    /// Path.
    pub path: &'a str,
    /// Query (without `?`).
    pub query: &'a str,
}

/// Go's `url.ParseRequestURI`, for the fields MeshTrace and its plugin read.
pub fn parse_request_uri(s: &str) -> Option<RequestUri<'_>> {
    // Go refuses what this split would take (a bad escape, a bracketed IPv4, a second colon
    // in an http host, ...): refuse it too.
    go_net::parse_request_uri(s).ok()?;
    if s.is_empty() || s.bytes().any(|b| b < 0x21 || b == 0x7f) {
        return None;
    }
    let (rest, query) = s.split_once('?').unwrap_or((s, ""));
    if rest.starts_with('/') {
        return Some(RequestUri {
            path: rest,
            query,
            ..Default::default()
        });
    }
    let colon = rest.find(':')?;
    let scheme = &rest[..colon];
    let valid_scheme = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !valid_scheme {
        return None;
    }
    let after = &rest[colon + 1..];
    let Some(hier) = after.strip_prefix("//") else {
        if after.starts_with('/') {
            return Some(RequestUri {
                scheme,
                path: after,
                query,
                ..Default::default()
            });
        }
        return Some(RequestUri {
            scheme,
            opaque: after,
            query,
            ..Default::default()
        });
    };
    let (authority, path) = match hier.find('/') {
        Some(i) => (&hier[..i], &hier[i..]),
        None => (hier, ""),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (addr, after) = v6.split_once(']')?;
        let port = match after {
            "" => "",
            p => p.strip_prefix(':')?,
        };
        (addr, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => (hostport, ""),
        }
    };
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return None; // Go: invalid port
    }
    Some(RequestUri {
        scheme,
        opaque: "",
        user,
        host,
        port,
        path,
        query,
    })
}

/// Kuma's Datadog URL checks, in its order (the "must not be defined" parts in a fixed order
/// where Go's map iteration is random), on Go's `url.ParseRequestURI` ([`go_net`]): the scheme
/// is compared lower-cased, as Go stores it.
fn datadog_url_violations(url: &str) -> Vec<String> {
    let Ok(u) = go_net::parse_request_uri(url) else {
        return vec!["must be a valid url".to_owned()];
    };
    let mut out = Vec::new();
    if u.scheme != "http" {
        out.push("scheme must be http".to_owned());
    }
    let port = u.port();
    if port.is_empty() {
        out.push(format!("port {MUST_BE_DEFINED}"));
    } else if port.parse::<u32>().map_or(true, |p| p == 0 || p > 65535) {
        out.push("port must be a valid (1-65535)".to_owned());
    }
    for (name, set) in [
        ("fragment", !u.fragment.is_empty()),
        ("opaque", !u.opaque.is_empty()),
        ("path", !u.path.is_empty()),
        ("query", !u.raw_query.is_empty()),
        ("user", u.user.is_some()),
    ] {
        if set {
            out.push(format!("{name} must not be defined"));
        }
    }
    out
}

#[cfg(test)]
#[path = "mesh_trace_tests.rs"]
mod tests;
