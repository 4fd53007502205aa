//! Who may call the API (issue 15; Kuma 2.7's `pkg/api-server/authn` and its default access
//! rules): every request is classified ([`access`]) and checked by [`require`] before its
//! handler runs.
//!
//! - A request carrying `Authorization: Bearer <user token>` is that user, or a 401 when the
//!   token is malformed, forged, expired or revoked (even from loopback: a bad token is never
//!   ignored).
//! - A request without a token from a loopback address is the admin when
//!   [`AccessPolicy::localhost_is_admin`] (the default, as Kuma's `localhostIsAdmin`); from
//!   anywhere else it gets a 401 saying how to authenticate.
//! - [`Access::Open`]: `/healthz`, `/ready`, the index `/` (product and version only) and
//!   `/openapi.yaml` (the static API document), and `/metrics` unless
//!   [`AccessPolicy::metrics_need_token`].
//! - [`Access::Admin`]: token issuance and revocation (`/tokens/...`), secrets
//!   (`/global-secrets/...`), the CP's configuration (`GET /config`) and a zone's
//!   `POST /global/accept-store`: a user outside
//!   `mesh-system:admin` gets a 403.
//! - [`Access::Loopback`]: the admin user token (`/global-secrets/admin-user-token`), only to
//!   a local caller, whatever its token (Kuma's rule: whoever runs on the CP's host); with
//!   [`AccessPolicy::admin_token_from_loopback`] off, only to the admin.
//!
//! A local caller ([`from_loopback`]) is a loopback TCP peer whose `Host` names this host and
//! that is not a browser's cross-site request, so DNS rebinding and cross-site forms in a
//! browser on the CP's host get nothing.
//! - [`Access::Authenticated`]: everything else (resources, inspect, zones).
//!
//! The principal is put in the request's extensions for handlers. Refusals are logged with
//! the reason and the path, never the token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use umbra_auth::Principal;

use crate::error::ApiError;
use umbra_pki::trust::{AccessPolicy, Trust};

/// The API authentication flags both CPs take (`#[command(flatten)]`); every flag also reads
/// its `UMBRA_*` environment variable.
#[derive(Debug, Clone, clap::Args)]
pub struct AccessArgs {
    /// API callers on a loopback address without a token act as the admin (Kuma's
    /// `localhostIsAdmin`). With `false`, every call but `/`, `/openapi.yaml`, `/healthz`,
    /// `/ready` (and `/metrics`, see `--metrics-auth`) needs `Authorization: Bearer <user token>`.
    #[arg(long, env = "UMBRA_LOCALHOST_IS_ADMIN", default_value_t = true, action = clap::ArgAction::Set)]
    pub localhost_is_admin: bool,
    /// `/metrics` needs a user token too (default: open to scrapers).
    #[arg(long, env = "UMBRA_METRICS_AUTH", default_value_t = false, action = clap::ArgAction::Set)]
    pub metrics_auth: bool,
    /// `GET /global-secrets/admin-user-token` is served to local callers without a token
    /// (default). Set `false` when a proxy on this host makes every caller local; then read the
    /// admin token from the store (key `admin-user-token`) or ask with an admin token.
    #[arg(long, env = "UMBRA_ADMIN_TOKEN_FROM_LOOPBACK", default_value_t = true, action = clap::ArgAction::Set)]
    pub admin_token_from_loopback: bool,
}

impl AccessArgs {
    /// Who may call the API without a token.
    pub fn policy(&self) -> AccessPolicy {
        AccessPolicy {
            localhost_is_admin: self.localhost_is_admin,
            metrics_need_token: self.metrics_auth,
            admin_token_from_loopback: self.admin_token_from_loopback,
        }
    }
}

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nothing.
    Open,
    /// Any valid user token (or loopback when loopback is admin).
    Authenticated,
    /// The admin group.
    Admin,
    /// A loopback caller.
    Loopback,
}

/// What `method path` needs under `policy`. Secrets are classified on the path's segments
/// percent-decoded one by one, as the router extracts them (`/%73ecrets` is `/secrets`).
pub fn access(method: &Method, path: &str, policy: &AccessPolicy) -> Access {
    let _ = method;
    let segments: Vec<String> = path.split('/').map(percent_decode).collect();
    let segment = |i: usize| segments.get(i).map(String::as_str);
    match path {
        "/healthz" | "/ready" | "/" | "/openapi.yaml" => Access::Open,
        "/metrics" if !policy.metrics_need_token => Access::Open,
        "/global-secrets/admin-user-token" => Access::Loopback,
        p if p == "/tokens" || p.starts_with("/tokens/") => Access::Admin,
        p if p == "/global-secrets" || p.starts_with("/global-secrets/") => Access::Admin,
        // A Mesh's Secrets, as Kuma: only the admin reads or writes them, also listed across
        // meshes (`GET /secrets`).
        // (`global-secrets` under a mesh is no resource path, but never less than the admin's.)
        _ if segment(1) == Some("meshes")
            && matches!(segment(3), Some("secrets" | "global-secrets")) =>
        {
            Access::Admin
        }
        _ if segments.len() == 2 && segment(1) == Some("secrets") => Access::Admin,
        // A zone following a Global whose store changed (its removals apply again).
        "/global/accept-store" => Access::Admin,
        // The CP's configuration (redacted, still the admin's business, as Kuma's default).
        _ if segments.len() == 2 && segment(1) == Some("config") => Access::Admin,
        _ => Access::Authenticated,
    }
}

/// `segment` with every `%XX` escape decoded (invalid UTF-8 replaced; a malformed escape kept),
/// as the router's path extraction decodes it.
fn percent_decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// `Bearer <token>` from the `Authorization` header: `Ok(None)` when absent.
///
/// # Errors
/// A 401 for another scheme or an unreadable header.
pub fn bearer(headers: &axum::http::HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(v) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let text = v
        .to_str()
        .map_err(|_| unauthorized("the Authorization header is not readable text"))?;
    let (scheme, token) = text.split_once(' ').unwrap_or((text, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(unauthorized(
            "the Authorization header must be `Bearer <user token>`",
        ));
    }
    Ok(Some(token.trim()))
}

fn unauthorized(detail: impl Into<String>) -> ApiError {
    let mut e = ApiError::status(StatusCode::UNAUTHORIZED, detail);
    e.title = "Unauthorized".into();
    e
}

/// `true` for `localhost`, `127.0.0.0/8` and `::1` (with or without a port, IPv6 in brackets).
fn local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, p)| {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// `true` when the request is a local caller's: the TCP peer is a loopback address (IPv4-mapped
/// too), its `Host` names this host, and it is not a browser's cross-site request (`Origin`
/// naming another host, `Sec-Fetch-Site: cross-site`). A page in a browser on the CP's host
/// (DNS rebinding, a cross-site form) is therefore not the admin.
pub fn from_loopback(req: &Request) -> bool {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|ConnectInfo(a)| a.ip().to_canonical().is_loopback());
    let headers = req.headers();
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host_ok = text("host")
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .is_none_or(local_host);
    let origin_ok = text("origin").is_none_or(|o| {
        let host = o.split_once("://").map_or(o, |(_, rest)| rest);
        local_host(host.trim_end_matches('/'))
    });
    let fetch_ok = !text("sec-fetch-site").is_some_and(|v| v.eq_ignore_ascii_case("cross-site"));
    peer && host_ok && origin_ok && fetch_ok
}

/// The middleware: authenticate, authorize, then run the handler with the [`Principal`] in the
/// request's extensions. The router must be served with connect info
/// ([`umbra_runtime::process::serve_http`] does).
pub async fn require(State(trust): State<Arc<Trust>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let need = access(req.method(), &path, &trust.policy);
    if need == Access::Open {
        return next.run(req).await;
    }
    let loopback = from_loopback(&req);
    if need == Access::Loopback && trust.policy.admin_token_from_loopback {
        if !loopback {
            tracing::warn!(%path, "refused: only a loopback caller may read this");
            return ApiError::status(
                StatusCode::FORBIDDEN,
                format!(
                    "{path} is served only to callers on the control plane's own host (loopback)"
                ),
            )
            .into_response();
        }
        return next.run(req).await;
    }
    // `--admin-token-from-loopback=false`: the admin token is a secret like any other.
    let need = if need == Access::Loopback {
        Access::Admin
    } else {
        need
    };
    let principal = match bearer(req.headers()) {
        Err(e) => return challenge(e, &path),
        Ok(Some(token)) => match trust.bundle().verify_user(token, umbra_auth::unix_now()) {
            Ok(p) => p,
            Err(e) => return challenge(unauthorized(e.to_string()), &path),
        },
        Ok(None) if loopback && trust.policy.localhost_is_admin => Principal::loopback_admin(),
        Ok(None) => {
            return challenge(
                unauthorized(
                    "authentication required: send `Authorization: Bearer <user token>` (umbractl --auth-token, or a context from `umbractl config control-planes add`); an admin can issue one with `umbractl generate user-token`",
                ),
                &path,
            )
        }
    };
    if need == Access::Admin && !principal.is_admin() {
        tracing::warn!(user = %principal.name, %path, "refused: not in mesh-system:admin");
        let mut e = ApiError::status(
            StatusCode::FORBIDDEN,
            format!(
                "user {:?} may not call {path}: it needs the group mesh-system:admin",
                principal.name
            ),
        );
        e.title = "Forbidden".into();
        return e.into_response();
    }
    req.extensions_mut().insert(principal);
    next.run(req).await
}

fn challenge(e: ApiError, path: &str) -> Response {
    tracing::info!(%path, reason = %e.detail, "unauthenticated API call refused");
    let mut resp = e.into_response();
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

/// `router` with [`require`] in front of every route it has now.
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: axum::Router<S>,
    trust: Arc<Trust>,
) -> axum::Router<S> {
    router.layer(axum::middleware::from_fn_with_state(trust, require))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(peer: &str, headers: &[(&str, &str)]) -> Request {
        let mut b = axum::http::Request::builder().uri("/meshes");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut r = b.body(axum::body::Body::empty()).unwrap();
        r.extensions_mut()
            .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        r
    }

    #[test]
    fn local_callers_are_loopback_peers_naming_this_host_and_not_cross_site() {
        assert!(from_loopback(&request(
            "127.0.0.1:1",
            &[("host", "127.0.0.1:5681")]
        )));
        assert!(from_loopback(&request(
            "[::1]:1",
            &[("host", "[::1]:5681")]
        )));
        assert!(from_loopback(&request(
            "[::ffff:127.0.0.1]:1",
            &[("host", "localhost:5681")]
        )));
        assert!(from_loopback(&request("127.0.0.1:1", &[])));
        assert!(!from_loopback(&request(
            "10.0.0.1:1",
            &[("host", "localhost")]
        )));
        // DNS rebinding: the page's own name in Host.
        assert!(!from_loopback(&request(
            "127.0.0.1:1",
            &[("host", "evil.example:5681")]
        )));
        // A cross-site request from a browser on this host.
        assert!(!from_loopback(&request(
            "127.0.0.1:1",
            &[
                ("host", "localhost:5681"),
                ("origin", "https://evil.example")
            ]
        )));
        assert!(!from_loopback(&request(
            "127.0.0.1:1",
            &[("host", "localhost:5681"), ("sec-fetch-site", "cross-site")]
        )));
        assert!(from_loopback(&request(
            "127.0.0.1:1",
            &[
                ("host", "localhost:5681"),
                ("origin", "http://localhost:5681")
            ]
        )));
    }

    #[test]
    fn classification() {
        let p = AccessPolicy::default();
        let get = Method::GET;
        assert_eq!(access(&get, "/healthz", &p), Access::Open);
        assert_eq!(access(&get, "/metrics", &p), Access::Open);
        let strict = AccessPolicy {
            metrics_need_token: true,
            ..p
        };
        assert_eq!(access(&get, "/metrics", &strict), Access::Authenticated);
        assert_eq!(access(&Method::POST, "/tokens/zone", &p), Access::Admin);
        assert_eq!(
            access(&Method::POST, "/tokens/user/revocations", &p),
            Access::Admin
        );
        assert_eq!(
            access(&get, "/global-secrets/admin-user-token", &p),
            Access::Loopback
        );
        assert_eq!(access(&get, "/meshes/default/secrets", &p), Access::Admin);
        assert_eq!(
            access(&get, "/meshes/default/secrets/tls-key", &p),
            Access::Admin
        );
        assert_eq!(
            access(&get, "/meshes/default/meshtimeouts", &p),
            Access::Authenticated
        );
        assert_eq!(access(&get, "/meshes", &p), Access::Authenticated);
        // Secrets across meshes, and secrets behind percent-escapes.
        assert_eq!(access(&get, "/secrets", &p), Access::Admin);
        assert_eq!(access(&get, "/%73ecrets", &p), Access::Admin);
        assert_eq!(access(&get, "/meshes/default/%73ecrets", &p), Access::Admin);
        assert_eq!(access(&get, "/meshes/a%2Fb/secrets", &p), Access::Admin);
        assert_eq!(
            access(&get, "/meshes/default/global-secrets/x", &p),
            Access::Admin
        );
        assert_eq!(access(&get, "/dataplanes", &p), Access::Authenticated);
        assert_eq!(access(&get, "/meshtimeouts", &p), Access::Authenticated);
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(percent_decode("%+1"), "%+1");
        assert_eq!(
            access(&Method::POST, "/global/accept-store", &p),
            Access::Admin
        );
        assert_eq!(access(&get, "/tokensx", &p), Access::Authenticated);
    }
}
