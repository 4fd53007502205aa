//! Talking to a control plane: the HTTP client every command uses (the context's token and
//! CA, set once per process), sending a request and turning an API error body into a
//! [`CliError`] with its exit status.

use std::time::Duration;

use serde_json::Value;

use crate::error::CliError;

/// The failure of a request, from the API's error body: status, detail and every
/// `{field, reason}`.
pub(crate) fn api_error(url: &str, status: reqwest::StatusCode, body: &str) -> CliError {
    let mut msg = match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let mut msg = format!(
                "{url}: {status}: {}",
                v["detail"].as_str().unwrap_or(body.trim())
            );
            for p in v["invalidParameters"].as_array().into_iter().flatten() {
                msg.push_str(&format!(
                    "\n  {}: {}",
                    p["field"].as_str().unwrap_or_default(),
                    p["reason"].as_str().unwrap_or_default()
                ));
            }
            msg
        }
        Err(_) => format!("{url}: {status}: {}", body.trim()),
    };
    if msg.len() > 64 << 10 {
        let mut end = 64 << 10;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push_str(" ...");
    }
    if status == reqwest::StatusCode::UNAUTHORIZED {
        msg.push_str("\n  (authenticate with --auth-token / UMBRA_AUTH_TOKEN, or a context: umbractl config control-planes add --name <n> --address <url> --auth-token <token>)");
    }
    if status == reqwest::StatusCode::NOT_FOUND {
        CliError::NotFound(msg)
    } else if status.is_server_error() {
        CliError::Unavailable(msg)
    } else {
        CliError::Refused(msg)
    }
}

/// The token and CA every request of this process uses (set once by [`run`]).
static TARGET: std::sync::OnceLock<crate::config::Target> = std::sync::OnceLock::new();

/// The PEM CA certificate at `path`, for an `https://` control plane.
pub(crate) fn ca_certificate(path: &std::path::Path) -> Result<reqwest::Certificate, CliError> {
    let pem =
        std::fs::read(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    reqwest::Certificate::from_pem(&pem)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, CliError> {
    let mut builder = reqwest::Client::builder().timeout(timeout);
    if let Some(target) = TARGET.get() {
        if let Some(token) = &target.auth_token {
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                    .map_err(|_| {
                        CliError::Input("the auth token is not a valid header value".into())
                    })?;
            value.set_sensitive(true);
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(reqwest::header::AUTHORIZATION, value);
            builder = builder.default_headers(headers);
        }
        if let Some(ca) = &target.ca_cert_file {
            let pem =
                std::fs::read(ca).map_err(|e| CliError::Input(format!("{}: {e}", ca.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| CliError::Input(format!("{}: {e}", ca.display())))?;
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| CliError::Unavailable(format!("cannot build an HTTP client: {e}")))
}

/// `e` and its causes (reqwest's own message says only "error sending request"; the cause
/// says which: refused, an untrusted certificate, a timeout).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Send `request` (to `url`); the status and body of a 2xx answer, else [`api_error`].
pub(crate) async fn send_request(
    url: &str,
    request: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, String), CliError> {
    send_request_tagged(url, request)
        .await
        .map(|(status, text, _)| (status, text))
}

/// [`send_request`], with the answer's `ETag` (the stored version, quotes removed) when it
/// has one.
pub(crate) async fn send_request_tagged(
    url: &str,
    request: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, String, Option<String>), CliError> {
    let response = request
        .send()
        .await
        .map_err(|e| CliError::Unavailable(format!("cannot reach {url}: {}", with_causes(&e))))?;
    let status = response.status();
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_owned());
    let text = response
        .text()
        .await
        .map_err(|e| CliError::Unavailable(format!("{url}: reading the answer: {e}")))?;
    if status.is_success() {
        Ok((status, text, etag))
    } else {
        Err(api_error(url, status, &text))
    }
}

/// Send `request` (to `url`); the body of a 2xx answer, else [`api_error`].
pub(crate) async fn send(url: &str, request: reqwest::RequestBuilder) -> Result<String, CliError> {
    send_request(url, request).await.map(|(_, text)| text)
}

/// `GET` `path` (with `query`) on the API at `api_url`; the JSON body.
///
/// # Errors
/// The API's error ([`api_error`]), or why it could not be reached.
pub async fn get_json(api_url: &str, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(150))?
        .get(&url)
        .query(query)
        .header("accept", "application/json");
    let text = send(&url, request).await?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}")).into())
}

/// `GET` `path` (with `query`) on the API at `api_url`; the body as text (any media type).
///
/// # Errors
/// The API's error ([`api_error`]), or why it could not be reached.
pub async fn get_text(api_url: &str, path: &str, query: &[(&str, &str)]) -> anyhow::Result<String> {
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(150))?.get(&url).query(query);
    Ok(send(&url, request).await?)
}

pub(crate) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Use `target` (its token and CA) for every request of this process; the first call wins.
pub(crate) fn set_target(target: crate::config::Target) {
    let _ = TARGET.set(target);
}

/// POST `body` as JSON to `path` and read the JSON answer.
///
/// # Errors
/// As [`send`]; an answer that is not JSON is [`CliError::Unavailable`].
pub(crate) async fn post_json(api_url: &str, path: &str, body: &Value) -> Result<Value, CliError> {
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(150))?
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string());
    let text = send(&url, request).await?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}")))
}
