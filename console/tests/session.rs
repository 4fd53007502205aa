//! The console over a stand-in API (one layer: the console's own routing, sign-in and
//! credential forwarding; the real API is exercised end to end in `e2e/tests/console.rs`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::BodyExt as _;
use serde_json::json;
use tower::ServiceExt as _;
use umbra_console::{mount, Mode};

const TOKEN: &str = "tok-0123456789-secret";

/// What the stand-in API saw of each call: its `Authorization`, `Host` and peer.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Option<SocketAddr>)>>>;

/// An API that answers `/meshes` and `/zones` to `Bearer TOKEN` only (401 otherwise).
fn api(seen: Seen) -> Router {
    let answer = move |body: serde_json::Value| {
        let seen = seen.clone();
        move |req: Request<Body>| {
            let seen = seen.clone();
            let body = body.clone();
            async move {
                let headers: &HeaderMap = req.headers();
                let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().cloned();
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let host = headers
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                seen.lock()
                    .unwrap()
                    .push((auth.clone(), host, peer.map(|p| p.0)));
                if auth.as_deref() == Some(&format!("Bearer {TOKEN}")) {
                    Json(body).into_response()
                } else {
                    (
                        StatusCode::UNAUTHORIZED,
                        Json(json!({"title": "Unauthorized", "status": 401, "detail": "token rejected: bad signature"})),
                    )
                        .into_response()
                }
            }
        }
    };
    Router::new()
        .route("/meshes", get(answer(json!({"total": 0, "items": []}))))
        .route(
            "/zones",
            get(answer(json!({"total": 1, "items": [{"name": "zone-1", "online": true, "streams": 3, "dataplanes": 2, "zoneIngresses": []}]}))),
        )
        .route(
            "/ready",
            get(answer(json!({
                "status": "ready", "replica": "global-b", "replicaId": 7, "leader": false,
                "replicas": [
                    {"id": 6, "name": "global-a", "interCp": "10.0.0.1:5682", "api": "10.0.0.1:5681", "startedAt": "2026-11-27T10:00:00Z", "heartbeatAt": "2026-11-27T10:05:00Z", "alive": true, "leader": true, "zones": ["zone-1"]},
                    {"id": 7, "name": "global-b", "interCp": "10.0.0.2:5682", "api": "10.0.0.2:5681", "startedAt": "2026-11-27T10:01:00Z", "heartbeatAt": "2026-11-27T10:05:00Z", "alive": true, "leader": false, "zones": []}
                ]
            }))),
        )
}

/// A session cookie for the stand-in API's token.
async fn signed_in(app: &Router) -> String {
    let (resp, _) = send(app, login_req(&format!("token={TOKEN}&next=%2Fgui%2F"))).await;
    let cookie = resp.headers()[header::SET_COOKIE].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn the_replicas_page_shows_each_replica_the_leader_and_what_it_holds() {
    let app = mount(api(Arc::default()), Mode::Global);
    let pair = signed_in(&app).await;
    let (resp, html) = send(&app, get_req("/gui/replicas", Some(&pair))).await;
    assert_eq!(resp.status(), StatusCode::OK, "{html}");
    assert!(html.contains("2 live replicas"), "{html}");
    assert!(
        html.contains("answered by <strong>global-b</strong>"),
        "{html}"
    );
    let a = html.split("data-replica=\"global-a\"").nth(1).unwrap();
    let a = a.split("</tr>").next().unwrap();
    assert!(
        a.contains("● leader") && a.contains("zone-1") && a.contains("10.0.0.1:5682"),
        "{a}"
    );
    let b = html.split("data-replica=\"global-b\"").nth(1).unwrap();
    let b = b.split("</tr>").next().unwrap();
    assert!(b.contains("this one") && b.contains("follower"), "{b}");
    assert!(html.contains("href=\"/gui/replicas\""), "in the navigation");
}

async fn send(app: &Router, req: Request<Body>) -> (Response<()>, String) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        Response::from_parts(parts, ()),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn get_req(uri: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::get(uri).header(header::HOST, "127.0.0.1:5681");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    let mut req = b.body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(
        "127.0.0.1:40000".parse::<SocketAddr>().unwrap(),
    ));
    req
}

fn login_req(form: &str) -> Request<Body> {
    Request::post("/gui/login")
        .header(header::HOST, "127.0.0.1:5681")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap()
}

#[tokio::test]
async fn a_page_needs_what_the_api_needs_and_signing_in_keeps_the_token_in_a_cookie_only() {
    let seen: Seen = Arc::default();
    let app = mount(api(seen.clone()), Mode::Global);

    // Without a session the API says 401: the browser goes to sign in, and comes back.
    let (resp, _) = send(&app, get_req("/gui/zones", None)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        resp.headers()[header::LOCATION],
        "/gui/login?next=%2Fgui%2Fzones"
    );

    // A token the API refuses: the form again with the API's reason, and no cookie.
    let (resp, html) = send(&app, login_req("token=forged&next=%2Fgui%2Fzones")).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(html.contains("id=\"login-error\""), "{html}");
    assert!(html.contains("token rejected: bad signature"), "{html}");
    assert!(resp.headers().get(header::SET_COOKIE).is_none());

    // A good one: kept in an HttpOnly, SameSite=Lax cookie for /gui named after the CP's
    // port, never in the URL.
    let (resp, html) = send(
        &app,
        login_req(&format!("token={TOKEN}&next=%2Fgui%2Fzones")),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{html}");
    assert_eq!(resp.headers()[header::LOCATION], "/gui/zones");
    let cookie = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("umbra_console_token_5681="), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/gui"] {
        assert!(cookie.contains(attr), "{attr} missing from the cookie");
    }
    let pair = cookie.split(';').next().unwrap().to_owned();

    // With the cookie the page renders, the API saw the bearer token, the page does not.
    let (resp, html) = send(&app, get_req("/gui/zones", Some(&pair))).await;
    assert_eq!(resp.status(), StatusCode::OK, "{html}");
    assert!(html.contains("data-zone=\"zone-1\""), "{html}");
    assert!(!html.contains(TOKEN));
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.0.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    // The browser's Host and peer go along, for the API's loopback rule.
    assert_eq!(last.1.as_deref(), Some("127.0.0.1:5681"));
    assert_eq!(last.2, Some("127.0.0.1:40000".parse().unwrap()));

    // Signing out clears the cookie.
    let (resp, _) = send(
        &app,
        Request::post("/gui/logout")
            .header(header::HOST, "127.0.0.1:5681")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let cleared = resp.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(cleared.starts_with("umbra_console_token_5681=;") && cleared.contains("Max-Age=0"));
}

#[tokio::test]
async fn another_site_cannot_sign_a_browser_in_or_out() {
    let app = mount(api(Arc::default()), Mode::Global);
    for (name, value) in [
        ("sec-fetch-site", "cross-site"),
        ("origin", "https://evil.example"),
    ] {
        let mut req = login_req(&format!("token={TOKEN}&next=%2Fgui%2Fzones"));
        req.headers_mut().insert(name, value.parse().unwrap());
        let (resp, html) = send(&app, req).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{name}: {html}");
        assert!(resp.headers().get(header::SET_COOKIE).is_none());
        let mut req = Request::post("/gui/logout").body(Body::empty()).unwrap();
        req.headers_mut().insert(name, value.parse().unwrap());
        let (resp, _) = send(&app, req).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{name}");
    }
    // The same origin signs in.
    let mut req = login_req(&format!("token={TOKEN}&next=%2Fgui%2Fzones"));
    req.headers_mut()
        .insert("origin", "http://127.0.0.1:5681".parse().unwrap());
    req.headers_mut()
        .insert("sec-fetch-site", "same-origin".parse().unwrap());
    let (resp, _) = send(&app, req).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn after_signing_in_the_browser_stays_inside_the_console() {
    let app = mount(api(Arc::default()), Mode::Global);
    for next in [
        "https%3A%2F%2Fevil.example%2F",
        "%2F%2Fevil.example",
        "%2Fmeshes",
    ] {
        let (resp, _) = send(&app, login_req(&format!("token={TOKEN}&next={next}"))).await;
        assert_eq!(resp.headers()[header::LOCATION], "/gui/", "{next}");
    }
}

#[tokio::test]
async fn every_answer_carries_the_security_headers_and_unknown_pages_are_the_consoles_404() {
    let app = mount(api(Arc::default()), Mode::Zone);
    let (resp, html) = send(&app, get_req("/gui/no/such/page", None)).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(html.contains("id=\"error\""), "{html}");
    let csp = resp.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(resp.headers()[header::X_FRAME_OPTIONS], "DENY");

    let (resp, css) = send(&app, get_req("/gui/assets/console.css", None)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
    assert!(css.contains("prefers-color-scheme: dark"));
    let (resp, _) = send(&app, get_req("/gui/assets/../../etc/passwd", None)).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // A zone CP has no zones page; its index is the meshes.
    let (resp, _) = send(&app, get_req("/gui/", None)).await;
    assert_eq!(resp.headers()[header::LOCATION], "/gui/meshes");
    let (resp, _) = send(&app, get_req("/gui/zones", None)).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}
