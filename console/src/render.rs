//! Rendering: the console's templates (minijinja, HTML auto-escaped, embedded in the binary),
//! the page frame every view shares, the error page, and the headers every answer carries
//! (a strict Content-Security-Policy: scripts and styles only from `/gui/assets/`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;
use serde_json::{json, Value};

use crate::client::Caller;
use crate::error::PageError;
use crate::state::{Console, Mode};

/// Every template, by name (embedded at build time).
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../templates/base.html")),
    ("macros.html", include_str!("../templates/macros.html")),
    ("error.html", include_str!("../templates/error.html")),
    ("login.html", include_str!("../templates/login.html")),
    ("zones.html", include_str!("../templates/zones.html")),
    ("replicas.html", include_str!("../templates/replicas.html")),
    ("meshes.html", include_str!("../templates/meshes.html")),
    (
        "dataplanes.html",
        include_str!("../templates/dataplanes.html"),
    ),
    ("policies.html", include_str!("../templates/policies.html")),
    ("observed.html", include_str!("../templates/observed.html")),
    ("rollout.html", include_str!("../templates/rollout.html")),
    (
        "dataplane.html",
        include_str!("../templates/dataplane.html"),
    ),
    (
        "shadow_diff_head.html",
        include_str!("../templates/shadow_diff_head.html"),
    ),
    (
        "shadow_diff_event.html",
        include_str!("../templates/shadow_diff_event.html"),
    ),
    (
        "shadow_diff_result.html",
        include_str!("../templates/shadow_diff_result.html"),
    ),
    (
        "shadow_diff_tail.html",
        include_str!("../templates/shadow_diff_tail.html"),
    ),
];

/// The template environment.
///
/// # Panics
/// When an embedded template does not parse (a build defect, caught by the unit test
/// `every_template_parses`).
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in TEMPLATES {
        if let Err(e) = env.add_template(name, source) {
            panic!("console template {name} does not parse: {e}");
        }
    }
    env.add_filter("pretty", |v: minijinja::Value| -> String {
        let json: Value = serde_json::to_value(&v).unwrap_or(Value::Null);
        serde_json::to_string_pretty(&json).unwrap_or_default()
    });
    env.add_filter("compact", |v: minijinja::Value| -> String {
        let json: Value = serde_json::to_value(&v).unwrap_or(Value::Null);
        serde_json::to_string(&json).unwrap_or_default()
    });
    env.add_filter("urlencode_part", |v: String| -> String {
        crate::client::enc(&v)
    });
    env
}

impl PageError {
    /// The page for this error: the sign-in redirect for a 401, else the error page.
    pub fn respond(self, console: &Console, caller: &Caller, uri: &str) -> Response {
        if self.status == StatusCode::UNAUTHORIZED {
            return to_login(uri);
        }
        let ctx =
            json!({"status": self.status.as_u16(), "title": self.title, "detail": self.detail});
        let mut resp = page(console, caller, "error.html", &self.title, ctx);
        *resp.status_mut() = self.status;
        resp
    }
}

/// The frame's own variables: `mode` (`global` or `zone`), `title`, `signedIn`, `mesh`
/// (when `ctx` names one).
fn frame(console: &Console, caller: &Caller, title: &str, mut ctx: Value) -> Value {
    if let Value::Object(map) = &mut ctx {
        map.insert(
            "mode".into(),
            json!(match console.mode {
                Mode::Global => "global",
                Mode::Zone => "zone",
            }),
        );
        map.insert("title".into(), json!(title));
        map.insert("signedIn".into(), json!(caller.signed_in()));
        map.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    }
    ctx
}

/// Render template `name` into the page frame with `ctx` (a JSON object).
pub fn render(
    console: &Console,
    caller: &Caller,
    name: &str,
    title: &str,
    ctx: Value,
) -> Result<String, PageError> {
    let ctx = frame(console, caller, title, ctx);
    console
        .templates
        .get_template(name)
        .and_then(|t| t.render(&ctx))
        .map_err(|e| {
            tracing::error!(template = name, error = %e, "console template failed");
            PageError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                title: "Internal Server Error".into(),
                detail: format!("rendering {name}: {e}"),
            }
        })
}

/// A whole page: template `name` rendered with `ctx`, with the console's headers.
pub fn page(console: &Console, caller: &Caller, name: &str, title: &str, ctx: Value) -> Response {
    match render(console, caller, name, title, ctx) {
        Ok(html) => with_headers(Html(html).into_response()),
        Err(e) => with_headers((e.status, format!("{}: {}", e.title, e.detail)).into_response()),
    }
}

/// The headers every console answer carries: CSP (nothing from elsewhere, no inline script),
/// no framing, no sniffing, no referrer to other sites (URLs carry queries), no caching of
/// pages.
pub fn with_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// The redirect to the sign-in page, coming back to `uri` afterwards.
pub fn to_login(uri: &str) -> Response {
    let next: String =
        percent_encoding::utf8_percent_encode(uri, crate::client::COMPONENT).collect();
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/gui/login?next={next}"))],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        let env = environment();
        for (name, _) in TEMPLATES {
            assert!(env.get_template(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn api_errors_keep_their_status_and_detail() {
        let e = PageError::from_api(
            StatusCode::NOT_FOUND,
            &json!({"title": "Not Found", "status": 404, "detail": "mesh \"x\" not found"}),
        );
        assert_eq!(e.status, StatusCode::NOT_FOUND);
        assert_eq!(e.detail, "mesh \"x\" not found");
        let e = PageError::from_api(StatusCode::SERVICE_UNAVAILABLE, &Value::Null);
        assert_eq!(e.title, "Service Unavailable");
    }
}
