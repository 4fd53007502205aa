//! Token endpoints both issuing CPs serve (issue 15; Kuma's paths and bodies):
//! - `POST /tokens/user` `{"name", "groups": [..], "validFor": "24h"}` → the token,
//!   `text/plain`;
//! - `POST /tokens/dataplane` `{"mesh", "name"?, "tags"?: {"<tag>": ["<value>", ..]},
//!   "type"?: "dataplane"|"ingress"|"egress", "validFor"}` → the token, `text/plain`;
//! - `POST /tokens/zone-ingress` `{"zone", "scope"?: ["ingress"|"egress", ..], "validFor"}` →
//!   a token a ZoneIngress (scope `ingress`, the default) or a ZoneEgress (scope `egress`) of
//!   that zone opens its ADS stream with (Kuma 2.7's zone-token scopes), `text/plain`;
//! - `POST /tokens/{user,dataplane,zone-ingress}/revocations` `{"token": ..}` or
//!   `{"id": "<jti>"}` → `{"revoked": "<jti>"}` (stored before the answer; never echoes the
//!   token);
//! - `GET /global-secrets/admin-user-token` → `{"type": "GlobalSecret", "name":
//!   "admin-user-token", "data": "<base64 token>"}`, to loopback callers only.
//!
//! Who may call them is [`crate::authn`]'s business (admin only; the admin token: loopback
//! only). A federated zone answers 400: tokens are issued on the Global.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_auth::issuer::{DataplaneTokenRequest, UserTokenRequest};
use umbra_auth::token::TokenKind;

use crate::error::ApiError;
use crate::negotiate::{check_body_type, BODY_TYPES};
use crate::service::Route;
use umbra_pki::trust::{Trust, ADMIN_TOKEN_KEY};

/// The routes [`routes`] serves.
pub const ROUTES: &[Route] = &[
    ("/tokens/user", &["post"]),
    ("/tokens/dataplane", &["post"]),
    ("/tokens/zone-ingress", &["post"]),
    ("/tokens/{kind}/revocations", &["post"]),
    ("/global-secrets/admin-user-token", &["get"]),
];

/// The token routes, over the state's [`Trust`].
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Trust>: FromRef<S>,
{
    Router::new()
        .route("/tokens/user", post(user_token))
        .route("/tokens/dataplane", post(dataplane_token))
        .route("/tokens/zone-ingress", post(zone_ingress_token))
        .route("/tokens/{kind}/revocations", post(revoke))
        .route("/global-secrets/admin-user-token", get(admin_token))
}

fn parse<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
    shape: &str,
) -> Result<T, ApiError> {
    check_body_type(headers, BODY_TYPES)?;
    crate::negotiate::check_json_object(body, shape)?;
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        ApiError::bad_parameter(&field, format!("expected {shape}: {}", e.inner()))
    })
}

fn text(token: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], token).into_response()
}

async fn user_token(
    State(trust): State<Arc<Trust>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: UserTokenRequest = parse(&headers, &body, r#"{"name", "groups", "validFor"}"#)?;
    let token = trust.issue_user(&req).await?;
    let id = umbra_auth::token::token_id(&token, TokenKind::User, &trust.bundle().user_keys)
        .unwrap_or_default();
    tracing::info!(user = %req.name, groups = ?req.groups, token_id = %id, "user token issued");
    Ok(text(token))
}

async fn dataplane_token(
    State(trust): State<Arc<Trust>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: DataplaneTokenRequest = parse(
        &headers,
        &body,
        r#"{"mesh", "name", "tags", "type", "validFor"}"#,
    )?;
    let token = trust.issue_dataplane(&req).await?;
    let bundle = trust.bundle();
    let id = umbra_auth::token::token_id(
        &token,
        TokenKind::Dataplane,
        bundle.keys(TokenKind::Dataplane, &req.mesh),
    )
    .unwrap_or_default();
    tracing::info!(mesh = %req.mesh, dataplane = %req.name, token_id = %id, "dataplane token issued");
    Ok(text(token))
}

async fn zone_ingress_token(
    State(trust): State<Arc<Trust>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: umbra_pki::trust::ZoneIngressTokenRequest =
        parse(&headers, &body, r#"{"zone", "scope", "validFor"}"#)?;
    let token = trust.issue_zone_ingress(&req).await?;
    let id = umbra_auth::token::token_id(&token, TokenKind::ZoneIngress, &trust.bundle().user_keys)
        .unwrap_or_default();
    tracing::info!(zone = %req.zone, scope = ?req.scope, token_id = %id, "zone-ingress token issued");
    Ok(text(token))
}

/// Body of a revocation: the token itself, or its ID.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    id: Option<String>,
}

/// The token ID a revocation body names: `{"token": ..}` (its `jti`, read by `id_of`, which
/// checks the signature) or `{"id": "<up to 64 hex digits>"}`. Shared by every revocation
/// endpoint, the Global's zone tokens included.
///
/// # Errors
/// 415 for another media type; 404 (naming the field `token`) for a token `id_of` does not
/// read as one of this CP's tokens of the kind (undecodable, signed by another key, forged or
/// of another kind: no token of ours is there to revoke); 400 naming the field for a body
/// that is not one of the two shapes.
pub fn revocation_id(
    headers: &HeaderMap,
    body: &[u8],
    id_of: impl FnOnce(&str) -> Result<String, String>,
) -> Result<String, ApiError> {
    let req: RevokeRequest = parse(headers, body, r#"{"token": ..} or {"id": ..}"#)?;
    match (req.token, req.id) {
        (Some(token), None) => id_of(&token).map_err(|e| ApiError {
            status: axum::http::StatusCode::NOT_FOUND,
            title: "Not Found".into(),
            ..ApiError::bad_parameter("token", e)
        }),
        (None, Some(id))
            if (1..=64).contains(&id.trim().len())
                && id.trim().bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(id.trim().to_ascii_lowercase())
        }
        _ => Err(ApiError::bad_parameter(
            "body",
            "give exactly one of token (the token) or id (its jti: up to 64 hex digits)",
        )),
    }
}

async fn revoke(
    State(trust): State<Arc<Trust>>,
    Path(kind): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let kind = match kind.as_str() {
        "user" => TokenKind::User,
        "dataplane" => TokenKind::Dataplane,
        "zone-ingress" => TokenKind::ZoneIngress,
        other => {
            return Err(ApiError::not_found(format!(
                "no {other:?} tokens here (user, dataplane, zone-ingress; zone tokens on the Global's /tokens/zone/revocations)"
            )))
        }
    };
    let id = revocation_id(&headers, &body, |token| {
        let bundle = trust.bundle();
        let mesh = umbra_auth::bundle::unverified_mesh(token).unwrap_or_default();
        umbra_auth::token::token_id(token, kind, bundle.keys(kind, &mesh))
            .map_err(|e| e.to_string())
    })?;
    trust.revoke(kind, &id).await?;
    tracing::warn!(kind = kind.as_str(), token_id = %id, "token revoked");
    Ok(Json(json!({ "revoked": id })))
}

async fn admin_token(State(trust): State<Arc<Trust>>) -> Result<Json<Value>, ApiError> {
    let token = trust.admin_token().await?;
    Ok(Json(json!({
        "type": "GlobalSecret",
        "name": ADMIN_TOKEN_KEY,
        "data": umbra_auth::keys::to_base64(token.as_bytes()),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        h
    }

    #[test]
    fn a_token_this_cp_did_not_sign_is_not_found_and_a_bad_body_is_a_400() {
        let refuse = |_: &str| Err::<String, _>("invalid user token: bad signature".to_owned());
        let e = revocation_id(&json_headers(), br#"{"token": "a.b.c"}"#, refuse).unwrap_err();
        assert_eq!(e.status.as_u16(), 404);
        assert_eq!(e.invalid_parameters[0].field, "token");
        let id = revocation_id(&json_headers(), br#"{"id": "0A1b"}"#, refuse).unwrap();
        assert_eq!(id, "0a1b");
        for bad in [
            &br#"{}"#[..],
            br#"{"id": "xyz"}"#,
            br#"{"token": "a.b.c", "id": "1"}"#,
            br#"[null, "0a1b"]"#,
        ] {
            let e = revocation_id(&json_headers(), bad, refuse).unwrap_err();
            assert_eq!(e.status.as_u16(), 400);
        }
    }
}
