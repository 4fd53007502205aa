//! The in-process API calls a page makes on a browser's behalf ([`Caller`]): the console
//! holds no privileges of its own, every page is rendered from the answers of the API router
//! it is mounted beside, asked with the caller's own credentials, so the API's authentication
//! and authorization (`umbra_api::authn`) decide what a console user sees, as for `umbractl`:
//!
//! - a signed-in browser carries its user token in the [`SESSION_COOKIE`] (`HttpOnly`,
//!   `SameSite=Strict`, path `/gui`; never in a URL, a page or a log line), sent on as
//!   `Authorization: Bearer`;
//! - the connection's peer address, `Host`, `Origin` and `Sec-Fetch-Site` go along, so a
//!   loopback caller is the admin only where the API would say so (`--localhost-is-admin`),
//!   and a cross-site page on the CP's host is not.
//!
//! Also [`enc`], the URL encoding of path segments and query values the pages use.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::Response;
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

use crate::error::PageError;
use crate::state::Console;

/// What [`enc`] escapes: everything but RFC 3986's unreserved characters.
pub const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` encoded for a URL path segment or a query value (RFC 3986 unreserved characters kept).
pub fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, COMPONENT).to_string()
}

/// The cookie holding a signed-in browser's user token: this name, then `_<port>` of the
/// CP's address as the browser names it ([`cookie_name`]). Cookies ignore ports, so one
/// name per port keeps a Global's session and a zone's on the same host apart.
pub const SESSION_COOKIE: &str = "umbra_console_token";

/// The session cookie's name for a request with these headers: [`SESSION_COOKIE`] and the
/// port of its `Host` (digits only), or [`SESSION_COOKIE`] alone without a port.
pub fn cookie_name(headers: &HeaderMap) -> String {
    let port = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.rsplit_once(':'))
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    match port {
        Some(p) => format!("{SESSION_COOKIE}_{p}"),
        None => SESSION_COOKIE.to_owned(),
    }
}

/// Largest API answer a page reads (bytes); a larger one is a 502 on the page, not an
/// unbounded buffer.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The headers that decide the API's loopback rule, copied from the browser's request.
const FORWARDED: [header::HeaderName; 2] = [header::HOST, header::ORIGIN];

/// The browser's credentials and connection, as the API must see them.
#[derive(Clone)]
pub struct Caller {
    token: Option<String>,
    peer: Option<ConnectInfo<SocketAddr>>,
    headers: HeaderMap,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Caller")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("peer", &self.peer.map(|ConnectInfo(a)| a))
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut headers = HeaderMap::new();
        for name in FORWARDED {
            if let Some(v) = parts.headers.get(&name) {
                headers.insert(name, v.clone());
            }
        }
        if let Some(v) = parts.headers.get("sec-fetch-site") {
            headers.insert("sec-fetch-site", v.clone());
        }
        Ok(Caller {
            token: session_token(&parts.headers),
            peer: parts.extensions.get::<ConnectInfo<SocketAddr>>().cloned(),
            headers,
        })
    }
}

/// An API answer: its status and its JSON body (`Value::Null` when it had none).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// The body, parsed.
    pub body: Value,
}

impl Caller {
    /// The same caller with another token (signing in).
    pub fn with_token(&self, token: &str) -> Caller {
        Caller {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    /// The API request `GET path_and_query` on this caller's behalf, `accept` as its `Accept`.
    fn request(&self, path_and_query: &str, accept: &'static str) -> Request<Body> {
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(path_and_query)
            .body(Body::empty())
            .unwrap_or_default();
        *req.headers_mut() = self.headers.clone();
        req.headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static(accept));
        if let Some(token) = &self.token {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                req.headers_mut().insert(header::AUTHORIZATION, v);
            }
        }
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        req
    }

    /// The API's raw answer to `GET path_and_query` (`accept` as its `Accept`), for streaming.
    ///
    /// # Errors
    /// Never in practice (the API router is infallible); kept as a [`PageError`] 502.
    pub async fn stream(
        &self,
        console: &Console,
        path_and_query: &str,
        accept: &'static str,
    ) -> Result<Response, PageError> {
        let req = self.request(path_and_query, accept);
        match console.api.clone().oneshot(req).await {
            Ok(resp) => Ok(resp),
            Err(never) => match never {},
        }
    }

    /// `GET path_and_query` from the API, as JSON.
    ///
    /// # Errors
    /// The API's own error (its status, title and detail) as a [`PageError`]; a 401 becomes
    /// the sign-in redirect when rendered. An answer over [`MAX_ANSWER_BYTES`] or that is not
    /// JSON is a 502.
    pub async fn get(&self, console: &Console, path_and_query: &str) -> Result<Value, PageError> {
        let answer = self.answer(console, path_and_query).await?;
        if answer.status.is_success() {
            Ok(answer.body)
        } else {
            Err(PageError::from_api(answer.status, &answer.body))
        }
    }

    /// `GET path_and_query` from the API: any status, its JSON body.
    ///
    /// # Errors
    /// 502 when the body is over [`MAX_ANSWER_BYTES`] or not JSON.
    pub async fn answer(
        &self,
        console: &Console,
        path_and_query: &str,
    ) -> Result<Answer, PageError> {
        let resp = self
            .stream(console, path_and_query, "application/json")
            .await?;
        let status = resp.status();
        let limited = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| PageError::bad_gateway(format!("reading the API's answer: {e}")))?
            .to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| {
                PageError::bad_gateway(format!(
                    "the API's answer to {path_and_query} is not JSON: {e}"
                ))
            })?
        };
        Ok(Answer { status, body })
    }

    /// Whether this browser holds a session cookie.
    pub fn signed_in(&self) -> bool {
        self.token.is_some()
    }
}

/// The user token in this CP's session cookie ([`cookie_name`]), if any.
fn session_token(headers: &HeaderMap) -> Option<String> {
    let name = cookie_name(headers);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_the_session_cookie_only() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; umbra_console_token=abc.def; b=2"),
        );
        assert_eq!(session_token(&h).as_deref(), Some("abc.def"));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("umbra_console_token="),
        );
        assert_eq!(session_token(&h), None);
        assert_eq!(session_token(&HeaderMap::new()), None);
    }

    #[test]
    fn each_port_has_its_own_cookie_and_a_caller_never_prints_its_token() {
        let mut h = HeaderMap::new();
        assert_eq!(cookie_name(&h), "umbra_console_token");
        h.insert(header::HOST, HeaderValue::from_static("[::1]:25681"));
        assert_eq!(cookie_name(&h), "umbra_console_token_25681");
        h.insert(header::HOST, HeaderValue::from_static("cp.example.com"));
        assert_eq!(cookie_name(&h), "umbra_console_token");
        h.insert(
            header::HOST,
            HeaderValue::from_static("cp.example.com:80;x=1"),
        );
        assert_eq!(cookie_name(&h), "umbra_console_token");
        let c = Caller {
            token: Some("secret-token".into()),
            peer: None,
            headers: HeaderMap::new(),
        };
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn path_segments_keep_unreserved_characters_only() {
        assert_eq!(enc("zone-1/a b~c.d_e"), "zone-1%2Fa%20b~c.d_e");
    }
}
