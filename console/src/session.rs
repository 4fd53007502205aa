//! Signing in and out of the console: the sign-in form ([`login_form`]) checks a user token
//! against the API (`GET /meshes`) before keeping it in the browser's session cookie
//! ([`crate::client::SESSION_COOKIE`]); an API 401 on any page sends the browser here
//! ([`crate::render::to_login`]), and back to the page afterwards (console paths only).

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::client::{Caller, SESSION_COOKIE};
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
        Some(n) if n.starts_with("/gui/") && !n.contains("//") && !n.contains('\\') => n.to_owned(),
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

/// `POST /gui/login`: check the token against the API (`GET /meshes`); keep it in the
/// session cookie and go to `next`, or show the form again with the API's reason (401).
pub async fn login(
    State(console): State<Console>,
    caller: Caller,
    Form(form): Form<LoginForm>,
) -> Response {
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
    let cookie = format!("{SESSION_COOKIE}={token}; Path=/gui; HttpOnly; SameSite=Strict");
    let mut resp = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `POST /gui/logout`: forget the session cookie.
pub async fn logout() -> Response {
    let mut resp = Redirect::to("/gui/login").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "umbra_console_token=; Path=/gui; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
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
