//! What every CP's HTTP service has, written once: the base routes (`/`, `/openapi.yaml`,
//! `/metrics`, `/healthz`, `/ready`), the layers every request goes through (body limit,
//! JSON-or-YAML output, metrics, tracing), and the binaries' `main` ([`main`]). The resource
//! routes are [`crate::crud`]'s, the other routes both CPs serve [`crate::shared_routes`]'.

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, MethodRouter};
use axum::Router;

/// A route and its methods, as documented in a CP's OpenAPI document.
pub type Route = (&'static str, &'static [&'static str]);

/// The routes [`base`] serves.
pub const BASE_ROUTES: &[Route] = &[
    ("/", &["get"]),
    ("/openapi.yaml", &["get"]),
    ("/metrics", &["get"]),
    ("/healthz", &["get"]),
    ("/ready", &["get"]),
];

/// Largest accepted request body (bytes).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// One route list out of several.
pub fn routes(parts: &[&[Route]]) -> Vec<Route> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// The [`BASE_ROUTES`]: `/` answered by `index`, `/ready` by `ready`, `/openapi.yaml` serving
/// `openapi_yaml`, `/metrics` and `/healthz`.
pub fn base<S: Clone + Send + Sync + 'static>(
    openapi_yaml: &'static str,
    index: MethodRouter<S>,
    ready: MethodRouter<S>,
) -> Router<S> {
    Router::new()
        .route("/", index)
        .route("/ready", ready)
        .route(
            "/openapi.yaml",
            get(move || async move {
                ([(header::CONTENT_TYPE, "application/yaml")], openapi_yaml).into_response()
            }),
        )
        .route("/metrics", get(umbra_runtime::metrics::serve))
        .route("/healthz", get(umbra_runtime::process::healthz))
}

/// `router` with the layers every request goes through: a [`MAX_BODY_BYTES`] body limit, the
/// API's error shape on every 4xx, YAML answers when `Accept` asks for them, HTTP metrics and
/// the request's trace span.
pub fn layered<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(crate::negotiate::error_shape))
        .layer(axum::middleware::from_fn(crate::negotiate::yaml_output))
        .layer(axum::middleware::from_fn(
            umbra_runtime::metrics::track_http,
        ))
        .layer(axum::middleware::from_fn(
            umbra_runtime::process::trace_http,
        ))
}

/// A CP binary's `main`: logging and tracing for `service` (`RUST_LOG`, default `info`;
/// OpenTelemetry when configured), then `run` on a multi-threaded runtime with the shutdown
/// signal (SIGINT or SIGTERM). `run` parses the arguments, so a usage error is logged too.
///
/// # Errors
/// What `run` returns, or a failure to start the runtime.
pub fn main<F>(
    service: &'static str,
    run: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<()>>,
{
    let _telemetry = umbra_runtime::process::init(service);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(Box::pin(umbra_runtime::process::shutdown_signal())))
}
