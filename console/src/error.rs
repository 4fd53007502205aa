//! A page's error: its status and the API's (or the console's) reason ([`PageError`]);
//! rendered by [`crate::render`].

use axum::http::StatusCode;
use serde_json::Value;

/// An error shown as a page: the status and the API's (or the console's) reason.
#[derive(Debug, Clone)]
pub struct PageError {
    /// HTTP status of the page.
    pub status: StatusCode,
    /// Short title.
    pub title: String,
    /// What went wrong.
    pub detail: String,
}

impl PageError {
    /// The API's error answer (`{title, status, detail}`) as a page error.
    pub fn from_api(status: StatusCode, body: &Value) -> Self {
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
        PageError {
            status,
            title: text("title")
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("Error").to_owned()),
            detail: text("detail").unwrap_or_else(|| format!("the API answered {status}")),
        }
    }

    /// A 502: the API's answer could not be read.
    pub fn bad_gateway(detail: String) -> Self {
        PageError {
            status: StatusCode::BAD_GATEWAY,
            title: "Bad Gateway".into(),
            detail,
        }
    }

    /// A 400: the page's query or form is not what the page takes.
    pub fn bad_request(detail: String) -> Self {
        PageError {
            status: StatusCode::BAD_REQUEST,
            title: "Bad Request".into(),
            detail,
        }
    }

    /// A 403: the console refuses the request itself (a cross-site sign-in or sign-out).
    pub fn forbidden(detail: String) -> Self {
        PageError {
            status: StatusCode::FORBIDDEN,
            title: "Forbidden".into(),
            detail,
        }
    }

    /// A 404 of the console's own (no such page or view).
    pub fn not_found(detail: String) -> Self {
        PageError {
            status: StatusCode::NOT_FOUND,
            title: "Not Found".into(),
            detail,
        }
    }
}
