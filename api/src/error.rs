//! The one API error type. Its body ([`ApiError::body`]) carries Umbra's fields (`title`,
//! `status`, `detail`, `invalidParameters: [{field, reason}]`) and, alongside, Kuma's `Error`
//! (`type`, `instance`, `invalid_parameters: [{field, reason, rule?, choices?}]`, source:
//! Kuma 2.7's `openapi/common/error_schema.yaml`) plus Kuma's legacy `details` and `causes`
//! that old kumactl reads. It is sent as `application/json` (as Kuma does, not the
//! `application/problem+json` its api.yaml names), and never leaks internals.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use serde_json::json;
use umbra_core::validate::Violation;

/// Kuma's error `type` for every API error (`/std-errors`).
pub const ERROR_TYPE: &str = "/std-errors";

/// One offending field of a 400: Kuma's `InvalidParameters` (`common/error_schema.yaml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidParameter {
    /// The field or query parameter (`spec.rules[0]`, `size`).
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
    /// The kind of rule broken (`enum`, `range`, `format`), when it is a query parameter's;
    /// none for resource violations (as Kuma).
    pub rule: Option<&'static str>,
    /// For `rule: enum`: the values allowed.
    pub choices: Vec<String>,
}

impl From<Violation> for InvalidParameter {
    fn from(v: Violation) -> Self {
        Self {
            field: v.field,
            reason: v.message,
            rule: None,
            choices: Vec::new(),
        }
    }
}

/// An API failure with its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Short title (`Bad Request`, `Not Found`...).
    pub title: String,
    /// Human readable detail.
    pub detail: String,
    /// For 400s caused by the resource or a query parameter: every offending field.
    pub invalid_parameters: Vec<InvalidParameter>,
    /// The methods the resource does allow, sent as `Allow` (RFC 9110 requires it on a 405):
    /// see [`ApiError::read_only`].
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// A 400 listing every `{field, message}`.
    pub fn invalid(detail: impl Into<String>, violations: Vec<Violation>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            title: "Bad Request".into(),
            detail: detail.into(),
            invalid_parameters: violations.into_iter().map(Into::into).collect(),
            allow: None,
        }
    }

    /// A 400 about one query parameter.
    pub fn bad_parameter(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::invalid(
            format!("{field}: {message}"),
            vec![Violation {
                field: field.to_owned(),
                message,
            }],
        )
    }

    /// The same error with Kuma's `rule` (`enum`, `range`, `format`) and, for `enum`, the
    /// `choices` allowed, on every invalid parameter.
    #[must_use]
    pub fn with_rule(mut self, rule: &'static str, choices: &[&str]) -> Self {
        for p in &mut self.invalid_parameters {
            p.rule = Some(rule);
            p.choices = choices.iter().map(|c| (*c).to_owned()).collect();
        }
        self
    }

    /// A 404.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            title: "Not Found".into(),
            detail: detail.into(),
            invalid_parameters: Vec::new(),
            allow: None,
        }
    }

    /// A 405 for a write (PUT or DELETE) of a resource that is read-only here, with
    /// `Allow: GET, HEAD`: it can still be read.
    pub fn read_only(detail: impl Into<String>) -> Self {
        Self {
            allow: Some("GET, HEAD"),
            ..Self::status(StatusCode::METHOD_NOT_ALLOWED, detail)
        }
    }

    /// Any other status.
    pub fn status(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            detail: detail.into(),
            invalid_parameters: Vec::new(),
            allow: None,
        }
    }
}

impl ApiError {
    /// The JSON body: Umbra's `{title, status, detail, invalidParameters?: [{field, reason}]}`
    /// and Kuma's `{type, instance, invalid_parameters?: [{field, reason, rule?, choices?}],
    /// details, causes?: [{field, message}]}` (`instance`: [`instance`]).
    pub fn body(&self) -> serde_json::Value {
        let mut body = json!({
            "type": ERROR_TYPE,
            "title": self.title,
            "status": self.status.as_u16(),
            "detail": self.detail,
            "details": self.detail,
            "instance": instance(),
        });
        if !self.invalid_parameters.is_empty() {
            let params = &self.invalid_parameters;
            body["invalidParameters"] = params
                .iter()
                .map(|p| json!({"field": p.field, "reason": p.reason}))
                .collect();
            body["invalid_parameters"] = params
                .iter()
                .map(|p| {
                    let mut v = json!({"field": p.field, "reason": p.reason});
                    if let Some(rule) = p.rule {
                        v["rule"] = json!(rule);
                    }
                    if !p.choices.is_empty() {
                        v["choices"] = json!(p.choices);
                    }
                    v
                })
                .collect();
            body["causes"] = params
                .iter()
                .map(|p| json!({"field": p.field, "message": p.reason}))
                .collect();
        }
        body
    }
}

/// Kuma's error `instance` (required by its schema), 32 hex digits: with OpenTelemetry
/// tracing on, the id of the trace the request is part of (from the current span's W3C
/// `traceparent`), so an operator finds the request in the trace backend; without it, a fresh
/// random id that only tells one answer from another.
pub fn instance() -> String {
    umbra_runtime::process::current_context()
        .get("traceparent")
        .and_then(|tp| trace_id(tp))
        .unwrap_or_else(|| RandomIdGenerator::default().new_trace_id().to_string())
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<flags>`), unless it is
/// malformed or all zeros.
fn trace_id(traceparent: &str) -> Option<String> {
    let id = traceparent.split('-').nth(1)?;
    let valid = id.len() == 32
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && id.bytes().any(|b| b != b'0');
    valid.then(|| id.to_ascii_lowercase())
}

/// 404 for an unknown promoted or retired policy, 409 (naming the parameter `policy`) for a
/// promoted one that is not shadow or a retired one that is: the request is well formed, the
/// policy's current state is what refuses it (Kuma's `Conflict`).
impl From<umbra_core::view::PromotionError> for ApiError {
    fn from(e: umbra_core::view::PromotionError) -> Self {
        match e {
            umbra_core::view::PromotionError::NotFound(..) => Self::not_found(e.to_string()),
            umbra_core::view::PromotionError::NotShadow(_)
            | umbra_core::view::PromotionError::RetireShadow(_) => Self {
                status: StatusCode::CONFLICT,
                title: "Conflict".into(),
                ..Self::bad_parameter("policy", e.to_string())
            },
        }
    }
}

/// The trust state's refusals as Kuma answers them: 400 on a federated zone or a bad request
/// field, 404 naming `mesh` for a Mesh that does not exist, 401 for a token the issuer refused
/// otherwise, a store failure as the store's error.
impl From<umbra_pki::trust::TrustError> for ApiError {
    fn from(e: umbra_pki::trust::TrustError) -> Self {
        use umbra_auth::TokenError;
        use umbra_pki::trust::TrustError;
        match e {
            TrustError::Federated => ApiError::status(StatusCode::BAD_REQUEST, e.to_string()),
            TrustError::BadRequest { field, reason } => ApiError::bad_parameter(field, reason),
            TrustError::UnknownMesh(mesh) => ApiError {
                status: StatusCode::NOT_FOUND,
                title: "Not Found".into(),
                ..ApiError::bad_parameter("mesh", format!("mesh {mesh:?} does not exist"))
            },
            TrustError::Token(TokenError::BadRequest { field, reason }) => {
                ApiError::bad_parameter(field, reason)
            }
            TrustError::Token(other) => {
                ApiError::status(StatusCode::UNAUTHORIZED, other.to_string())
            }
            TrustError::Store(e) => e.into(),
        }
    }
}

/// How a store failure reads to an API caller: 404, 409, 400 (no such mesh), 503 (outage, or
/// a key other replicas kept changing: retry later) or 500 (undecodable content, logged; never the database's own text beyond
/// the store's message).
impl From<umbra_store::StoreError> for ApiError {
    fn from(e: umbra_store::StoreError) -> Self {
        use umbra_store::StoreError;
        match e {
            StoreError::NotFound(k) => ApiError::not_found(format!("{k} not found")),
            StoreError::Conflict { .. } | StoreError::InUse { .. } | StoreError::Changed { .. } => {
                ApiError::status(StatusCode::CONFLICT, e.to_string())
            }
            StoreError::NoMesh(m) => ApiError::status(
                StatusCode::BAD_REQUEST,
                format!("mesh {m:?} does not exist"),
            ),
            StoreError::Unavailable(reason) => ApiError::status(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the store is unavailable ({reason}); retry later"),
            ),
            StoreError::Contended { .. } => {
                ApiError::status(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            StoreError::Corrupt { .. } => {
                tracing::error!(error = %e, "stored resource cannot be decoded");
                ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        let mut response = (self.status, Json(body)).into_response();
        if let Some(allow) = self.allow {
            response.headers_mut().insert(
                axum::http::header::ALLOW,
                axum::http::HeaderValue::from_static(allow),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_errors_answer_as_kuma() {
        use umbra_pki::trust::TrustError;
        let e = ApiError::from(TrustError::UnknownMesh("nope".into()));
        assert_eq!(e.status, StatusCode::NOT_FOUND);
        assert_eq!(e.invalid_parameters[0].field, "mesh");
        let e = ApiError::from(TrustError::Federated);
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        let e = ApiError::from(TrustError::BadRequest {
            field: "validFor",
            reason: "must be positive".into(),
        });
        assert_eq!(e.invalid_parameters[0].field, "validFor");
        let e = ApiError::from(TrustError::Token(umbra_auth::TokenError::BadRequest {
            field: "name",
            reason: "required".into(),
        }));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.invalid_parameters[0].field, "name");
    }

    fn is_hex32(s: &str) -> bool {
        s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
    }

    #[test]
    fn body_has_umbra_and_kuma_fields() {
        let e = ApiError::invalid(
            "Resource is not valid",
            vec![Violation {
                field: "spec.to".into(),
                message: "must not be empty".into(),
            }],
        );
        let b = e.body();
        assert_eq!(b["type"], "/std-errors");
        assert_eq!(b["status"], 400);
        assert_eq!(b["title"], "Bad Request");
        assert_eq!(b["detail"], "Resource is not valid");
        assert_eq!(b["details"], "Resource is not valid");
        assert!(is_hex32(b["instance"].as_str().unwrap()), "{b}");
        assert_eq!(
            b["invalidParameters"],
            json!([{"field": "spec.to", "reason": "must not be empty"}])
        );
        assert_eq!(
            b["invalid_parameters"],
            json!([{"field": "spec.to", "reason": "must not be empty"}])
        );
        assert_eq!(
            b["causes"],
            json!([{"field": "spec.to", "message": "must not be empty"}])
        );
    }

    #[test]
    fn a_read_only_405_allows_reads() {
        let r = ApiError::read_only("read-only here").into_response();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[axum::http::header::ALLOW], "GET, HEAD");
        let other = ApiError::status(StatusCode::CONFLICT, "x").into_response();
        assert!(other.headers().get(axum::http::header::ALLOW).is_none());
    }

    #[test]
    fn a_promotion_refused_by_the_policys_state_is_a_conflict() {
        let e = ApiError::from(umbra_core::view::PromotionError::NotShadow(
            "Timeout/t".into(),
        ));
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.invalid_parameters[0].field, "policy");
        let e = ApiError::from(umbra_core::view::PromotionError::NotFound(
            "MeshTimeout/t".into(),
            "default".into(),
        ));
        assert_eq!(e.status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn body_without_parameters_has_no_parameter_lists() {
        let b = ApiError::not_found("mesh \"x\" not found").body();
        assert_eq!(b["status"], 404);
        assert_eq!(b["title"], "Not Found");
        for k in ["invalidParameters", "invalid_parameters", "causes"] {
            assert!(b.get(k).is_none(), "{k} in {b}");
        }
        assert_ne!(b["instance"], ApiError::not_found("x").body()["instance"]);
    }

    #[test]
    fn rule_and_choices_go_to_kumas_list_only() {
        let b = ApiError::bad_parameter("format", "must be summary or full")
            .with_rule("enum", &["summary", "full"])
            .body();
        assert_eq!(
            b["invalid_parameters"],
            json!([{"field": "format", "reason": "must be summary or full",
                    "rule": "enum", "choices": ["summary", "full"]}])
        );
        assert_eq!(
            b["invalidParameters"],
            json!([{"field": "format", "reason": "must be summary or full"}])
        );
    }

    #[test]
    fn instance_is_the_trace_id_of_a_traceparent() {
        assert_eq!(
            trace_id("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            trace_id("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(trace_id("00-xyz-00f067aa0ba902b7-01"), None);
        assert_eq!(trace_id("garbage"), None);
    }
}
