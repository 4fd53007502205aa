//! The one API error type: renders `{title, status, detail, invalidParameters?}` (Kuma's error
//! shape, with every `{field, message}` on a 400) and never leaks internals.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use umbra_core::validate::Violation;

/// An API failure with its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Short title (`Bad Request`, `Not Found`...).
    pub title: String,
    /// Human readable detail.
    pub detail: String,
    /// For 400s caused by the resource: every violation.
    pub invalid_parameters: Vec<Violation>,
}

impl ApiError {
    /// A 400 listing every `{field, message}`.
    pub fn invalid(detail: impl Into<String>, violations: Vec<Violation>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            title: "Bad Request".into(),
            detail: detail.into(),
            invalid_parameters: violations,
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

    /// A 404.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            title: "Not Found".into(),
            detail: detail.into(),
            invalid_parameters: Vec::new(),
        }
    }

    /// Any other status.
    pub fn status(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            detail: detail.into(),
            invalid_parameters: Vec::new(),
        }
    }
}

impl ApiError {
    /// The JSON body: `{title, status, detail, invalidParameters?: [{field, reason}]}`.
    pub fn body(&self) -> serde_json::Value {
        let mut body =
            json!({"title": self.title, "status": self.status.as_u16(), "detail": self.detail});
        if !self.invalid_parameters.is_empty() {
            body["invalidParameters"] = json!(self
                .invalid_parameters
                .iter()
                .map(|v| json!({"field": v.field, "reason": v.message}))
                .collect::<Vec<_>>());
        }
        body
    }
}

/// 404 for an unknown promoted or retired policy, 400 (parameter `policy`) for a promoted one
/// that is not shadow or a retired one that is.
impl From<umbra_core::view::PromotionError> for ApiError {
    fn from(e: umbra_core::view::PromotionError) -> Self {
        match e {
            umbra_core::view::PromotionError::NotFound(..) => Self::not_found(e.to_string()),
            umbra_core::view::PromotionError::NotShadow(_)
            | umbra_core::view::PromotionError::RetireShadow(_) => {
                Self::bad_parameter("policy", e.to_string())
            }
        }
    }
}

/// How a store failure reads to an API caller: 404, 409, 400 (no such mesh), 503 (outage,
/// retry later) or 500 (undecodable content, logged; never the database's own text beyond
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
        (self.status, Json(body)).into_response()
    }
}
