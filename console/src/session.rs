//! Signing in and out of the console: the sign-in form ([`login_form`]) checks a user token
//! against the API (`GET /meshes`) before keeping it in the browser's session cookie
//! ([`crate::client::SESSION_COOKIE`]); an API 401 on any page sends the browser here
//! ([`crate::render::to_login`]), and back to the page afterwards (console paths only).

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::client::{cookie_name, Caller};
use crate::error::PageError;
use crate::render::page;
use crate::state::Console;

/// Query of the sign-in page: where to go afterwards.
#[derive(Debug, Deserialize)]
pub struct NextQuery {
    /// A console path (`/gui/...`); anything else is ignored.
    next: Option<String>,
}

/// Where to go after signing in: `next` when it is a console path, else the console's index.
fn safe_next(next: Option<&str>) -> String {
    match next {
        // Only console paths: `//host` or `/gui\..` could leave the CP.
        Some(n)
            if n.starts_with("/gui/")
                && !n.contains("//")
                && n.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') =>
        {
            n.to_owned()
        }
        _ => "/gui/".to_owned(),
    }
}

/// `GET /gui/login`: the sign-in form.
pub async fn login_form(
    State(console): State<Console>,
    caller: Caller,
    Query(q): Query<NextQuery>,
) -> Response {
    let ctx = serde_json::json!({
        "next": safe_next(q.next.as_deref()),
        "signedIn": caller.signed_in(),
    });
    page(&console, &caller, "login.html", "Sign in", ctx)
}

/// The sign-in form's fields.
#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    next: Option<String>,
}

impl std::fmt::Debug for LoginForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("LoginForm")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

/// Refuse a sign-in or sign-out a browser sends from another site (login CSRF): its
/// `Sec-Fetch-Site` must be `same-origin` or `none`, and its `Origin`, when present, must name
/// the `Host` it was sent to. Requests with neither header (curl, scripts) pass.
///
/// # Errors
/// The reason, for a 403.
pub fn same_origin(headers: &HeaderMap) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // A browser that sends `Sec-Fetch-Site` says where the request comes from; its `Origin`
    // may then be `null` for a same-origin form under a strict referrer policy.
    if let Some(site) = text("sec-fetch-site") {
        if site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none") {
            return Ok(());
        }
        return Err(format!(
            "a {site} request may not sign in or out of the console"
        ));
    }
    if let Some(origin) = text("origin") {
        let host = origin
            .split_once("://")
            .map(|(_, h)| h.trim_end_matches('/'));
        if host.is_none() || host != text("host") {
            return Err(format!(
                "a request from {origin} may not sign in or out of the console"
            ));
        }
    }
    Ok(())
}

/// The `Set-Cookie` value of this CP's session cookie holding `token` (`Max-Age=0` and no
/// token to forget it). `SameSite=Lax`: deep links from other sites carry the session (every
/// console GET is read-only); the two POSTs are checked by [`same_origin`].
fn session_cookie(headers: &HeaderMap, token: Option<&str>) -> Option<HeaderValue> {
    let name = cookie_name(headers);
    let value = match token {
        Some(t) => format!("{name}={t}; Path=/gui; HttpOnly; SameSite=Lax"),
        None => format!("{name}=; Path=/gui; HttpOnly; SameSite=Lax; Max-Age=0"),
    };
    HeaderValue::from_str(&value).ok()
}

/// `POST /gui/login`: check the token against the API (`GET /meshes`); keep it in the
/// session cookie and go to `next`, or show the form again with the API's reason (401). A
/// cross-site request is a 403 ([`same_origin`]).
pub async fn login(
    State(console): State<Console>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(reason) = same_origin(&headers) {
        tracing::warn!(%reason, "console sign-in refused");
        return PageError::forbidden(reason).respond(&console, &caller, &uri.to_string());
    }
    let token = form.token.trim();
    let next = safe_next(form.next.as_deref());
    let refusal = if token.is_empty() {
        Some("paste a user token (umbractl generate user-token, or the admin token)".to_owned())
    } else if token.chars().any(|c| !c.is_ascii_graphic()) {
        Some("a user token is one line of printable ASCII".to_owned())
    } else {
        match caller
            .with_token(token)
            .answer(&console, "/meshes?size=1")
            .await
        {
            Ok(a) if a.status.is_success() => None,
            Ok(a) => Some(PageError::from_api(a.status, &a.body).detail),
            Err(e) => Some(e.detail),
        }
    };
    if let Some(reason) = refusal {
        tracing::info!(reason = %reason, "console sign-in refused");
        let ctx = serde_json::json!({"next": next, "error": reason, "signedIn": false});
        let mut resp = page(&console, &caller, "login.html", "Sign in", ctx);
        *resp.status_mut() = StatusCode::UNAUTHORIZED;
        return resp;
    }
    let Some(cookie) = session_cookie(&headers, Some(token)) else {
        return PageError::bad_request("the token cannot be kept in a cookie".into()).respond(
            &console,
            &caller,
            &uri.to_string(),
        );
    };
    let mut resp = Redirect::to(&next).into_response();
    resp.headers_mut().insert(header::SET_COOKIE, cookie);
    resp
}

/// `POST /gui/logout`: forget the session cookie (403 from another site, [`same_origin`]).
pub async fn logout(
    State(console): State<Console>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(reason) = same_origin(&headers) {
        return PageError::forbidden(reason).respond(&console, &caller, &uri.to_string());
    }
    let mut resp = Redirect::to("/gui/login").into_response();
    if let Some(cookie) = session_cookie(&headers, None) {
        resp.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_inside_the_console() {
        assert_eq!(safe_next(Some("/gui/zones")), "/gui/zones");
        assert_eq!(safe_next(Some("https://evil.example/")), "/gui/");
        assert_eq!(safe_next(Some("/gui//evil.example")), "/gui/");
        assert_eq!(safe_next(Some("/meshes")), "/gui/");
        assert_eq!(safe_next(None), "/gui/");
        assert_eq!(safe_next(Some("/gui/\nSet-Cookie: x")), "/gui/");
        assert_eq!(safe_next(Some("/gui/a\u{7f}")), "/gui/");
        assert_eq!(safe_next(Some("/gui/a b")), "/gui/");
    }

    #[test]
    fn only_same_origin_requests_sign_in_or_out() {
        let mut h = HeaderMap::new();
        assert!(same_origin(&h).is_ok());
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:5681"));
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:5681"),
        );
        assert!(same_origin(&h).is_ok());
        // Without Sec-Fetch-Site (an older browser), the Origin decides.
        h.remove("sec-fetch-site");
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(same_origin(&h).is_err());
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(same_origin(&h).is_err());
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(same_origin(&h).is_err());
        h.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        assert!(same_origin(&h).is_err());
    }

    #[test]
    fn a_login_form_never_prints_its_token() {
        let f = LoginForm {
            token: "secret-token".into(),
            next: None,
        };
        assert!(!format!("{f:?}").contains("secret"));
    }
}
