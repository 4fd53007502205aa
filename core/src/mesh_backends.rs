//! The Mesh checks of Kuma 2.7.29 beyond the envelope (issue 41):
//! - its `logging` and `tracing` backends (`pkg/core/resources/apis/mesh/mesh_validator.go`,
//!   `validateLogging` and `validateTracing`): names, types, a TCP log collector's
//!   `host:port` (Go's `net.SplitHostPort`), a Zipkin URL (Go's `url.ParseRequestURI`, with a
//!   port), a Datadog agent's address and port. Kuma reports them under `config`, not `conf`
//!   (`logging.backends[0].config.address`);
//! - `routing.zoneEgress` needs mTLS (`validateZoneEgress`);
//! - the CA backend checks of Kuma's mesh manager (`pkg/core/managers/apis/mesh/
//!   mesh_validator.go` `ValidateMTLSBackends`, skipped with `mtls.skipValidation`), which need
//!   the mesh's name and its Secrets and so run where a write is checked against the store
//!   ([`MeshSpec::validate_ca_backends`]): a `provided` CA's `cert` and `key` data sources
//!   (`pkg/plugins/ca/provided/manager.go`, `pkg/core/datasource/validator.go`) and the
//!   Secrets they name; a `builtin` CA's backend name (`pkg/plugins/ca/builtin/manager.go`).

use base64::Engine as _;
use serde_json::Value;

use super::MeshSpec;
use crate::go_net;
use crate::validate::{PathBuilder, ValidationError};

/// The members of a backend list entry Kuma's proto gives (`name`, `type`, `conf`), read
/// leniently: a field of the wrong type reads as absent.
struct Entry<'a> {
    name: &'a str,
    ty: &'a str,
    conf: Option<&'a Value>,
    value: &'a Value,
}

fn entries(section: Option<&Value>) -> Vec<Entry<'_>> {
    section
        .and_then(|s| s.get("backends"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|b| Entry {
            name: b.get("name").and_then(Value::as_str).unwrap_or(""),
            ty: b.get("type").and_then(Value::as_str).unwrap_or(""),
            conf: b.get("conf").filter(|c| !c.is_null()),
            value: b,
        })
        .collect()
}

fn conf_str<'a>(conf: Option<&'a Value>, key: &str) -> &'a str {
    conf.and_then(|c| c.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Names, duplicates and `defaultBackend` of a `logging` or `tracing` section, around the
/// per-backend checks of `backend`.
fn validate_section(
    err: &mut ValidationError,
    root: &str,
    section: Option<&Value>,
    kind: &str,
    backend: impl Fn(&mut ValidationError, &PathBuilder, &Entry<'_>),
) {
    let Some(section) = section.filter(|s| s.is_object()) else {
        return;
    };
    let path = PathBuilder::rooted_at(root);
    let backends = entries(Some(section));
    for (i, b) in backends.iter().enumerate() {
        let at = path.field("backends").index(i);
        if b.name.is_empty() {
            err.violation(&at.field("name"), "cannot be empty");
        }
        backend(err, &at, b);
        if backends[..i].iter().any(|o| o.name == b.name) {
            err.violation(
                &at.field("name"),
                format!("{:?} name is already used for another backend", b.name),
            );
        }
    }
    let default = section
        .get("defaultBackend")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !default.is_empty() && !backends.iter().any(|b| b.name == default) {
        err.violation(
            &path.field("defaultBackend"),
            format!("has to be set to one of the {kind} backend in mesh"),
        );
    }
}

/// Kuma's `validateLogging`.
impl MeshSpec {
    /// The logging, tracing and `routing.zoneEgress` checks of Kuma's `mesh_validator.go`
    /// (see the module docs), added to `err`.
    pub(super) fn validate_backends(&self, err: &mut ValidationError) {
        validate_logging(err, self.logging.as_ref());
        validate_tracing(err, self.tracing.as_ref());
        validate_zone_egress(err, self);
    }
}

fn validate_logging(err: &mut ValidationError, logging: Option<&Value>) {
    validate_section(err, "logging", logging, "logging", |err, at, b| {
        let config = at.field("config");
        match b.ty {
            "file" => {
                if conf_str(b.conf, "path").is_empty() {
                    err.violation(&config.field("path"), "cannot be empty");
                }
            }
            "tcp" => {
                let address = conf_str(b.conf, "address");
                if address.is_empty() {
                    err.violation(&config.field("address"), "cannot be empty");
                } else if !matches!(go_net::split_host_port(address), Ok((h, p)) if !h.is_empty() && !p.is_empty())
                {
                    err.violation(&config.field("address"), "has to be in format of HOST:PORT");
                }
            }
            _ => err.violation(
                &at.field("type"),
                "unknown backend type. Available backends: \"tcp\", \"file\"",
            ),
        }
    });
}

/// Kuma's `validateTracing`.
fn validate_tracing(err: &mut ValidationError, tracing: Option<&Value>) {
    validate_section(err, "tracing", tracing, "tracing", |err, at, b| {
        if let Some(s) = b.value.get("sampling").and_then(Value::as_f64) {
            if !(0.0..=100.0).contains(&s) {
                err.violation(&at.field("sampling"), "has to be in [0.0 - 100.0] range");
            }
        }
        let config = at.field("config");
        match b.ty {
            "zipkin" => {
                let api = conf_str(b.conf, "apiVersion");
                if !matches!(api, "" | "httpJsonV1" | "httpJson" | "httpProto") {
                    err.violation(
                        &config.field("apiVersion"),
                        "has invalid value. Allowed values: httpJsonV1, httpJson, httpProto",
                    );
                }
                let url = conf_str(b.conf, "url");
                if url.is_empty() {
                    err.violation(&config.field("url"), "cannot be empty");
                    return;
                }
                match go_net::parse_request_uri(url) {
                    Err(_) => err.violation(&config.field("url"), "invalid URL"),
                    Ok(u) if u.port().is_empty() => {
                        err.violation(&config.field("url"), "port has to be explicitly specified");
                    }
                    Ok(_) => {}
                }
            }
            "datadog" => {
                if conf_str(b.conf, "address").is_empty() {
                    err.violation(&config.field("address"), "cannot be empty");
                }
                let port = b.conf.and_then(|c| c.get("port")).and_then(Value::as_u64);
                if port.is_none_or(|p| p == 0 || p > 65535) {
                    err.violation(
                        &config.field("port"),
                        "port must be in the range [1, 65535]",
                    );
                }
            }
            _ => err.violation(
                &at.field("type"),
                "unknown backend type. Available backends: \"zipkin\", \"datadog\"",
            ),
        }
    });
}

/// Kuma's `validateZoneEgress`: zone egress routes through mTLS.
fn validate_zone_egress(err: &mut ValidationError, spec: &MeshSpec) {
    if spec.zone_egress_enabled() && !spec.mtls_enabled() {
        err.violation(
            &PathBuilder::rooted_at("mtls"),
            "has to be set when zoneEgress enabled",
        );
    }
}

/// One `cert` or `key` data source of a `provided` CA, as Kuma's proto reads it (`null` is
/// unset; `inline` is base64).
enum DataSource<'a> {
    /// A mapping with no source in it.
    Unset,
    Secret(&'a str),
    File(&'a str),
    Inline(Vec<u8>),
    InlineString,
}

/// protojson's `bytes`: standard or URL-safe base64, padded or not.
fn decode_bytes(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(s).ok())
}

/// Why Kuma's proto decoding of a `provided` CA's data source fails (the text follows
/// `could not convert backend config: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataSourceError {
    /// The source is not a mapping.
    #[error("{field}: must be a mapping")]
    NotAMapping {
        /// `cert` or `key`.
        field: String,
    },
    /// A source's value is not a string.
    #[error("{field}.{key}: must be a string")]
    NotAString {
        /// `cert` or `key`.
        field: String,
        /// The source (`secret`, `file`, ...).
        key: String,
    },
    /// `inline` is not base64.
    #[error("{field}.inline: must be base64")]
    NotBase64 {
        /// `cert` or `key`.
        field: String,
    },
    /// More than one source is set.
    #[error("{field}: oneof field 'type' is already set")]
    TwoSources {
        /// `cert` or `key`.
        field: String,
    },
}

/// The data source at `conf.<field>`: `Ok(None)` when absent, `Err` when Kuma's proto decoding
/// fails (a source that is not a mapping, a value of the wrong type, two sources at once).
fn data_source<'a>(
    conf: Option<&'a Value>,
    field: &str,
) -> Result<Option<DataSource<'a>>, DataSourceError> {
    let Some(ds) = conf.and_then(|c| c.get(field)).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(ds) = ds.as_object() else {
        return Err(DataSourceError::NotAMapping {
            field: field.to_owned(),
        });
    };
    let mut found = Vec::new();
    for (key, v) in ds {
        if v.is_null() {
            continue;
        }
        let text = || {
            v.as_str().ok_or_else(|| DataSourceError::NotAString {
                field: field.to_owned(),
                key: key.clone(),
            })
        };
        let source = match key.as_str() {
            "secret" => DataSource::Secret(text()?),
            "file" => DataSource::File(text()?),
            "inline" => DataSource::Inline(decode_bytes(text()?).ok_or_else(|| {
                DataSourceError::NotBase64 {
                    field: field.to_owned(),
                }
            })?),
            "inlineString" | "inline_string" => {
                text()?;
                DataSource::InlineString
            }
            _ => continue, // Kuma's proto decoding allows unknown fields
        };
        found.push(source);
    }
    if found.len() > 1 {
        return Err(DataSourceError::TwoSources {
            field: field.to_owned(),
        });
    }
    Ok(Some(found.pop().unwrap_or(DataSource::Unset)))
}

impl MeshSpec {
    /// The Secrets the `provided` CA backends name (`conf.cert.secret`, `conf.key.secret`),
    /// the ones [`MeshSpec::validate_ca_backends`] asks about; none when `mtls.skipValidation`.
    pub fn provided_ca_secrets(&self) -> Vec<String> {
        let Some(mtls) = self
            .mtls
            .as_ref()
            .filter(|m| m.skip_validation != Some(true))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for b in mtls
            .backends
            .iter()
            .filter(|b| b.backend_type == "provided")
        {
            for field in ["cert", "key"] {
                if let Ok(Some(DataSource::Secret(s))) = data_source(b.conf.as_ref(), field) {
                    if !s.is_empty() && !out.iter().any(|o| o == s) {
                        out.push(s.to_owned());
                    }
                }
            }
        }
        out
    }

    /// The `provided` CA backends that name Secret `secret` (as `conf.cert.secret` or
    /// `conf.key.secret`, Kuma's `UsedSecrets`), in order: Kuma refuses to delete a Secret a
    /// backend uses (`pkg/core/secrets/manager/validator.go`), with or without
    /// `skipValidation`.
    pub fn backends_using_secret(&self, secret: &str) -> Vec<&str> {
        let Some(mtls) = &self.mtls else {
            return Vec::new();
        };
        mtls.backends
            .iter()
            .filter(|b| b.backend_type == "provided")
            .filter(|b| {
                ["cert", "key"].into_iter().any(|field| {
                    matches!(data_source(b.conf.as_ref(), field), Ok(Some(DataSource::Secret(s))) if s == secret)
                })
            })
            .map(|b| b.name.as_str())
            .collect()
    }

    /// Kuma's mesh manager checks of the CA backends of mesh `mesh` (`ValidateMTLSBackends`),
    /// in its order and with its paths and messages, unless `mtls.skipValidation`:
    /// - `provided`: `conf.cert` and `conf.key` are defined data sources (`secret`, `file`,
    ///   `inline` not empty); then, as Kuma loads the key first and then the cert, a Secret
    ///   either names must exist in the mesh (`secret_exists`), else both fields get Kuma's
    ///   `could not load data: Resource not found: ...`. Only Secret references are looked
    ///   up: `inline`, `inlineString` and `file` sources are not loaded here (Umbra does not
    ///   read files of the CP's host, and does not parse the CA: see the report of issue 41);
    /// - `builtin`: the name of the Secret Kuma would store the CA in,
    ///   `<mesh>.ca-builtin-cert-<backend>`, must be a lowercase DNS name of at most 255
    ///   characters (Kuma reports it at `mtls.backends[i].conf.mtls.backends.name`).
    pub fn validate_ca_backends(
        &self,
        mesh: &str,
        secret_exists: impl Fn(&str) -> bool,
    ) -> ValidationError {
        let mut err = ValidationError::new();
        let Some(mtls) = self
            .mtls
            .as_ref()
            .filter(|m| m.skip_validation != Some(true))
        else {
            return err;
        };
        let backends = PathBuilder::rooted_at("mtls").field("backends");
        for (i, b) in mtls.backends.iter().enumerate() {
            let conf = backends.index(i).field("conf");
            match b.backend_type.as_str() {
                "provided" => {
                    validate_provided(&mut err, &conf, mesh, b.conf.as_ref(), &secret_exists)
                }
                "builtin" => {
                    let secret = format!("{mesh}.ca-builtin-cert-{}", b.name);
                    let at = conf.field("mtls").field("backends").field("name");
                    if secret.len() > 255 {
                        err.violation(&at, "Backend name is too long. Max length: 255");
                    }
                    if !go_net::is_dns_name(&secret) || secret.to_lowercase() != secret {
                        err.violation(&at, format!("{:?} name must be valid dns name", b.name));
                    }
                }
                _ => {}
            }
        }
        err
    }
}

/// Kuma's `providedCaManager.ValidateBackend` (but the CA's own checks, see
/// [`MeshSpec::validate_ca_backends`]).
fn validate_provided(
    err: &mut ValidationError,
    conf_path: &PathBuilder,
    mesh: &str,
    conf: Option<&Value>,
    secret_exists: &impl Fn(&str) -> bool,
) {
    let sources = [data_source(conf, "cert"), data_source(conf, "key")];
    if let Some(Err(e)) = sources.iter().find(|s| s.is_err()) {
        err.violation(conf_path, format!("could not convert backend config: {e}"));
        return;
    }
    let before = err.violations.len();
    let mut refs = Vec::new();
    for (field, source) in ["cert", "key"].into_iter().zip(&sources) {
        let at = conf_path.field(field);
        match source {
            Ok(None) => err.violation(&at, "has to be defined"),
            Ok(Some(DataSource::Unset)) => err.violation(
                &at,
                "data source has to be chosen. Available sources: secret, file, inline",
            ),
            Ok(Some(DataSource::Secret(""))) => {
                err.violation(&at.field("secret"), "cannot be empty");
            }
            Ok(Some(DataSource::File(""))) => {
                err.violation(&at.field("file"), "cannot be empty");
            }
            Ok(Some(DataSource::Inline(b))) if b.is_empty() => {
                err.violation(&at.field("inline"), "cannot be empty");
            }
            Ok(Some(DataSource::Secret(s))) => refs.push((field, *s)),
            _ => {}
        }
    }
    if err.violations.len() > before {
        return;
    }
    // Kuma loads the key, then the cert; the first failure is reported at both.
    refs.reverse();
    if let Some((_, missing)) = refs.iter().find(|(_, s)| !secret_exists(s)) {
        let message = format!(
            "could not load data: Resource not found: type=\"Secret\" name={missing:?} mesh={mesh:?}"
        );
        err.violation(&conf_path.field("cert"), message.clone());
        err.violation(&conf_path.field("key"), message);
    }
}

#[cfg(test)]
#[path = "mesh_backends_tests.rs"]
mod tests;
