//! A minimal HTTP/1.1 client for the CPs' APIs (plain TCP, bounded waits).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A minimal HTTP/1.1 request to `addr`; returns status and body. Bounded to 10 s.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    http_with(addr, method, path, body, &[]).await
}

/// [`http`] with extra request headers (`("accept", "application/x-ndjson")`).
pub async fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    http_request(addr, method, path, body, headers, Duration::from_secs(10)).await
}

/// [`http_with`] bounded to `timeout` instead of 10 s.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> anyhow::Result<(u16, String)> {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let fut = async {
        let mut sock = TcpStream::connect(addr).await?;
        let body = body.unwrap_or("");
        let req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/yaml\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        sock.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        sock.read_to_end(&mut out).await?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let status: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        // Chunked bodies (axum): strip chunk sizes.
        let body = if text
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(&body)
        } else {
            body
        };
        anyhow::Ok((status, body))
    };
    tokio::time::timeout(timeout, fut).await?
}

pub(crate) fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// `method path` with an optional body against the API at `api`; status and JSON body (a
/// string when the body is not JSON).
pub async fn call_json(
    api: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, serde_json::Value)> {
    let (status, text) = http(api, method, path, body).await?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    ))
}
