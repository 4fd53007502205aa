//! Process plumbing both CP binaries share: logs, traces, listening sockets and the shutdown
//! signal.
//!
//! - Logs go to stderr, filtered by `RUST_LOG` (default `info`), as plain text or, with
//!   `UMBRA_LOG_FORMAT=json`, one JSON object per line (with the current span's fields).
//! - Traces: when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are exported with OTLP over
//!   HTTP/protobuf (`<endpoint>/v1/traces`, batched; `OTEL_BSP_*` and `OTEL_SERVICE_NAME` as
//!   the OpenTelemetry SDK reads them). W3C trace context (`traceparent`, `tracestate`) crosses
//!   process boundaries with [`current_context`] and [`set_parent`]: the Global puts it on KDS
//!   resources and inspect requests, so one trace runs from a policy `PUT` on the Global to
//!   the zone's xDS push.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Pending-connection queue of every listening socket ([`listen`]).
pub const LISTEN_BACKLOG: u32 = 4096;

/// A TCP listener on `addr` (`SO_REUSEADDR`) whose kernel accept queue holds
/// [`LISTEN_BACKLOG`] connections (capped by `net.core.somaxconn`).
///
/// `tokio::net::TcpListener::bind` asks for 128 (mio 1.2 follows std), which a zone's ADS
/// port outgrows when its Envoys reconnect together after a restart: with 1,000 at once the
/// queue overflowed, SYN cookies took over, and 37 to 62 connections per run were reset
/// (`cargo bench -p umbra-e2e --bench zone`).
///
/// # Errors
/// The socket, bind or listen error (address in use, permission denied).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// W3C trace context as text headers (`traceparent`, `tracestate`): what KDS carries.
pub type TraceContext = HashMap<String, String>;

/// Keeps the trace exporter alive; flushes it when dropped (at the end of `main`).
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported (an OTLP endpoint is configured).
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("trace exporter shutdown: {e}");
            }
        }
    }
}

/// Install logging (and tracing when configured) for the process `service`
/// (`umbra-global-cp`, `umbra-zone-cp`). Call once, before the runtime starts; keep the
/// returned guard until exit.
pub fn init(service: &'static str) -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("UMBRA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    // Colours only on a terminal: a log file or collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let plain = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
    });
    let json = json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
    });
    let (provider, problem) = match otlp_provider(service) {
        Ok(p) => (p, None),
        Err(e) => (None, Some(e)),
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(plain)
        .with(json)
        .with(otel)
        .try_init();
    if let Some(e) = problem {
        tracing::warn!(error = %e, "OTLP trace export is off");
    }
    if installed.is_ok() && provider.is_some() {
        tracing::info!(
            endpoint = %std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default(),
            "exporting traces over OTLP/HTTP"
        );
    }
    Telemetry { provider }
}

/// Logging only (tests and tools): as [`init`] without an exporter.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .try_init();
}

fn otlp_provider(
    service: &'static str,
) -> Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>, String> {
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()));
    if !configured {
        return Ok(None);
    }
    use opentelemetry_otlp::WithExportConfig as _;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
        .map_err(|e| e.to_string())?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(service);
    }
    Ok(Some(
        opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build(),
    ))
}

/// The current span's trace context, to send to another process (empty when no trace is
/// recorded, e.g. without an exporter).
pub fn current_context() -> TraceContext {
    let mut carrier = TraceContext::new();
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier
}

/// Make `span` a child of the remote span in `carrier` (as [`current_context`] produced it).
/// Nothing happens for an empty or invalid carrier.
pub fn set_parent(span: &tracing::Span, carrier: &TraceContext) {
    if carrier.is_empty() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(carrier);
    let _ = span.set_parent(cx);
}

/// Make `span` a child of the remote span in `carrier`, or, for an empty carrier, the root of
/// a trace of its own: a span made inside a long-lived task span (a KDS session, an accept
/// loop) then does not join the never-ending trace of that task. Its log lines keep the task
/// span's fields.
pub fn set_parent_or_root(span: &tracing::Span, carrier: &TraceContext) {
    if carrier.is_empty() {
        let _ = span.set_parent(opentelemetry::Context::new());
    } else {
        set_parent(span, carrier);
    }
}

/// Middleware: one `http` span per API request (named `<METHOD> <route template>` for the
/// trace backend), continuing the caller's trace when the request carries W3C `traceparent`
/// headers.
pub async fn trace_http(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument as _;
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!(
        "http",
        otel.name = %format!("{method} {route}"),
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    let carrier: TraceContext = ["traceparent", "tracestate"]
        .iter()
        .filter_map(|k| {
            let v = req.headers().get(*k)?.to_str().ok()?;
            Some(((*k).to_owned(), v.to_owned()))
        })
        .collect();
    set_parent(&span, &carrier);
    let response = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}

/// Serve `router` on `listener` until `stop` turns `true`, then drain (graceful shutdown).
///
/// # Errors
/// What serving returns (an accept loop failure).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    // Connect info: the API's authentication tells loopback callers apart (`crate::authn`).
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(stopped(stop))
    .await
}

/// Resolves once `stop` turns `true` (or its sender is gone): a server's graceful-shutdown
/// signal, from the one shutdown watch every task of a CP follows.
pub async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// `GET /healthz` on both CPs: the process serves HTTP (liveness; readiness is each CP's own
/// `/ready`).
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM (what container runtimes send).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        } else {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutting down");
}

/// How long a CP's work may take to finish once shutdown begins ([`Shutdown::new`] in both
/// CPs): in-flight API requests, KDS and ADS streams, then the background tasks. What is still
/// running at the deadline is aborted (and named in a warning).
pub const DRAIN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// A CP's shutdown: one trigger, the `watch<bool>` every task follows (turns `true` once), and
/// a drain deadline counted from the trigger. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    since: std::sync::Arc<std::sync::OnceLock<tokio::time::Instant>>,
    deadline: std::time::Duration,
}

impl Shutdown {
    /// A shutdown not yet triggered, whose work gets `deadline` to finish once it is.
    pub fn new(deadline: std::time::Duration) -> Self {
        Self {
            tx: std::sync::Arc::new(tokio::sync::watch::channel(false).0),
            since: std::sync::Arc::default(),
            deadline,
        }
    }

    /// Trigger when `signal` resolves (e.g. [`shutdown_signal`]), from a task of its own.
    pub fn trigger_on(&self, signal: impl std::future::Future<Output = ()> + Send + 'static) {
        use tracing::Instrument as _;
        let this = self.clone();
        tokio::spawn(
            async move {
                signal.await;
                this.trigger();
            }
            .instrument(tracing::info_span!("shutdown")),
        );
    }

    /// Begin shutting down: every receiver sees `true`, and the drain deadline starts (once;
    /// later calls change nothing).
    pub fn trigger(&self) {
        let _ = self.since.get_or_init(tokio::time::Instant::now);
        self.tx.send_replace(true);
    }

    /// What tasks follow: turns `true` when shutdown begins.
    pub fn receiver(&self) -> tokio::sync::watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// When the drain deadline passes: `deadline` after the trigger (`None` before it).
    pub fn cutoff(&self) -> Option<tokio::time::Instant> {
        self.since.get().map(|t| *t + self.deadline)
    }

    /// Run `work` (a server that drains itself on the signal) to the end, or, once shutdown
    /// has begun, until the drain deadline at most: `None` when the deadline cut it off.
    pub async fn bounded<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        let mut stop = self.receiver();
        let deadline = async {
            let _ = stop.wait_for(|s| *s).await;
            match self.cutoff() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            out = work => Some(out),
            () = deadline => {
                tracing::warn!(deadline = ?self.deadline, "servers did not drain by the deadline");
                None
            }
        }
    }

    /// Await `tasks` until the drain deadline (from now when shutdown has not begun), then
    /// abort those still running, with a warning naming them. Returns their names (empty when
    /// every task finished in time).
    pub async fn drain(&self, tasks: Tasks) -> Vec<&'static str> {
        let at = self
            .cutoff()
            .unwrap_or_else(|| tokio::time::Instant::now() + self.deadline);
        let Tasks { mut set, mut names } = tasks;
        let expired = tokio::time::sleep_until(at);
        tokio::pin!(expired);
        loop {
            tokio::select! {
                next = set.join_next_with_id() => match next {
                    None => return Vec::new(),
                    Some(Ok((id, ()))) => { names.remove(&id); }
                    Some(Err(e)) => {
                        let name = names.remove(&e.id()).unwrap_or("task");
                        tracing::warn!(task = name, error = %e, "task failed");
                    }
                },
                () = &mut expired => break,
            }
        }
        let mut left: Vec<&'static str> = names.into_values().collect();
        left.sort_unstable();
        tracing::warn!(tasks = ?left, deadline = ?self.deadline, "tasks did not finish by the drain deadline; aborting them");
        set.shutdown().await;
        left
    }
}

/// A CP's background tasks, each with a name [`Shutdown::drain`] reports when it does not
/// finish in time.
#[derive(Debug, Default)]
pub struct Tasks {
    set: tokio::task::JoinSet<()>,
    names: HashMap<tokio::task::Id, &'static str>,
}

impl Tasks {
    /// Spawn `task` as `name` (its output is dropped); the caller instruments it with the span
    /// naming what it serves.
    pub fn spawn<F>(&mut self, name: &'static str, task: F)
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send,
    {
        let handle = self.set.spawn(async move {
            let _ = task.await;
        });
        self.names.insert(handle.id(), name);
    }

    /// How many tasks have not been awaited yet.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no task is left.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A span made inside a long-lived task span with no remote parent starts a trace of its
    /// own; with a remote parent it continues that trace.
    #[test]
    fn set_parent_or_root_keeps_spans_out_of_a_task_trace() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let trace_id = |c: &TraceContext| c["traceparent"].split('-').nth(1).unwrap().to_owned();
        tracing::subscriber::with_default(subscriber, || {
            let task = tracing::info_span!("task");
            let task_trace = trace_id(&task.in_scope(current_context));
            let (own, remote) = task.in_scope(|| {
                let own = tracing::info_span!("own");
                set_parent_or_root(&own, &TraceContext::new());
                let remote_parent = tracing::info_span!(parent: None, "remote");
                let carrier = remote_parent.in_scope(current_context);
                let continued = tracing::info_span!("continued");
                set_parent_or_root(&continued, &carrier);
                (
                    trace_id(&own.in_scope(current_context)),
                    (
                        trace_id(&continued.in_scope(current_context)),
                        trace_id(&carrier),
                    ),
                )
            });
            assert_ne!(
                own, task_trace,
                "a span with no remote parent joined the task's trace"
            );
            assert_eq!(remote.0, remote.1, "a remote parent is continued");
        });
    }

    /// More simultaneous connections than tokio's default backlog (128) all complete while
    /// nothing accepts them: the kernel queues them all. With a 128 backlog the rest would wait
    /// for SYN retransmissions (at 1 s, 3 s, ...) into a queue that stays full, and time out here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn accept_queue_holds_a_reconnecting_fleet() {
        const CONNECTIONS: usize = 400;
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        if somaxconn < CONNECTIONS {
            eprintln!("net.core.somaxconn is {somaxconn}: the kernel caps the queue below {CONNECTIONS}; skipped");
            return;
        }
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut connects = tokio::task::JoinSet::new();
        for _ in 0..CONNECTIONS {
            connects.spawn(tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect(addr),
            ));
        }
        let mut streams = Vec::new();
        while let Some(done) = connects.join_next().await {
            let stream = done
                .unwrap()
                .expect("a connection waited for the accept queue")
                .unwrap();
            streams.push(stream);
        }
        assert_eq!(streams.len(), CONNECTIONS);
        drop(listener);
    }

    #[tokio::test]
    async fn a_taken_address_is_an_error() {
        let first = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let err = listen(first.local_addr().unwrap()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    }

    /// A task that ignores shutdown is aborted at the deadline and `drain` returns; one that
    /// follows the signal finishes on its own.
    #[tokio::test(start_paused = true)]
    async fn drain_aborts_what_ignores_shutdown_at_the_deadline() {
        let shutdown = Shutdown::new(Duration::from_secs(10));
        let mut tasks = Tasks::default();
        let mut stop = shutdown.receiver();
        tasks.spawn("polite", async move {
            let _ = stop.wait_for(|s| *s).await;
        });
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn("stubborn", async move {
            let _guard = dropped_tx;
            std::future::pending::<()>().await;
        });
        let start = tokio::time::Instant::now();
        shutdown.trigger();
        assert_eq!(shutdown.drain(tasks).await, vec!["stubborn"]);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert!(
            dropped_rx.await.is_err(),
            "the stubborn task was aborted (dropped)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn drain_returns_as_soon_as_every_task_finished() {
        let shutdown = Shutdown::new(Duration::from_secs(10));
        let mut tasks = Tasks::default();
        tasks.spawn("quick", tokio::time::sleep(Duration::from_secs(1)));
        let start = tokio::time::Instant::now();
        shutdown.trigger();
        assert!(shutdown.drain(tasks).await.is_empty());
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    /// A server still busy at the deadline is cut off; before shutdown nothing bounds it.
    #[tokio::test(start_paused = true)]
    async fn bounded_work_stops_at_the_deadline() {
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let done = shutdown.bounded(async { 7 }).await;
        assert_eq!(done, Some(7));
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(100)).await;
            trigger.trigger();
        });
        let start = tokio::time::Instant::now();
        let cut = shutdown.bounded(std::future::pending::<()>()).await;
        assert_eq!(cut, None);
        assert_eq!(start.elapsed(), Duration::from_secs(105));
    }
}
