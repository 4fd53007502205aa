//! End to end, observability (issue 7): global-cp and a federated zone-cp as processes, a real
//! Envoy, and a small OTLP/HTTP collector in the test.
//!
//! - `/metrics` on both CPs lists every metric family, and the counters move: a policy `PUT`
//!   on the Global shows as a store write there, a KDS response, ACK and sync lag in the zone,
//!   a reconciliation, an xDS generation and a push Envoy ACKs; a config Envoy rejects shows
//!   as a NACK; a fleet diff and a forwarded `_config` as fan-out latency and inspect calls.
//! - One trace runs from the Global's `PUT` (continuing the caller's `traceparent`) through
//!   the zone's `kds.apply` and `reconcile` to its `xds.push`; a fleet diff's trace reaches the
//!   zone's `inspect` span.
//! - `UMBRA_LOG_FORMAT=json` makes every log line a JSON object.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message as _;
use umbra_e2e::{
    dataplane_yaml, envoy_binary, free_port, http, http_with, wait_until, CpProcess, Envoy,
};
use umbra_runtime::metrics::sample_sum;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

/// A span as the collector received it: (service, name, trace id hex).
type Received = Arc<Mutex<Vec<(String, String, String)>>>;

/// An OTLP/HTTP (protobuf) trace receiver on loopback.
async fn collector() -> (SocketAddr, Received) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let received: Received = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                let Ok(req) = ExportTraceServiceRequest::decode(body) else {
                    return axum::http::StatusCode::BAD_REQUEST;
                };
                let mut out = sink.lock().unwrap();
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|a| a.key == "service.name")
                        .and_then(|a| a.value.as_ref())
                        .and_then(|v| match &v.value {
                            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => Some(s.clone()),
                            _ => None,
                        })
                        .unwrap_or_default();
                    for ss in rs.scope_spans {
                        for span in ss.spans {
                            let trace: String =
                                span.trace_id.iter().map(|b| format!("{b:02x}")).collect();
                            out.push((service.clone(), span.name, trace));
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, received)
}

fn spans_of(received: &Received, trace: &str) -> BTreeSet<(String, String)> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, t)| t == trace)
        .map(|(s, n, _)| (s.clone(), n.clone()))
        .collect()
}

async fn metrics(cp: &CpProcess) -> String {
    let (status, body) = http(cp.api, "GET", "/metrics", None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// `name{...}` samples of `text` whose label set contains `label`, summed.
fn sum_with(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn temp_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-observability-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const TRACE_PUT: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACE_DIFF: &str = "5c0a3f3577b34da6a3ce929d0e0e4737";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_and_one_trace_spans_global_put_to_zone_push() -> anyhow::Result<()> {
    let Some(envoy_bin) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let (otlp, received) = collector().await;
    let endpoint = format!("http://{otlp}");
    let telemetry = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("UMBRA_LOG_FORMAT", "json"),
    ];
    let dir = temp_dir();
    let global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &[],
        &telemetry,
        dir.join("global.log"),
    )
    .await?;
    global
        .apply(
            "/meshes/default",
            "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
        )
        .await?;
    let token = umbra_e2e::zone_token(&global, "zone-1").await?;
    let mut zone_env = telemetry.to_vec();
    zone_env.push(("UMBRA_KDS_TOKEN", &token));
    let zone = CpProcess::start(
        ZONE,
        "--ads-addr",
        &[
            "--zone".into(),
            "zone-1".into(),
            "--global-kds-address".into(),
            format!("http://{}", global.grpc),
        ],
        &zone_env,
        dir.join("zone.log"),
    )
    .await?;
    wait_until(Duration::from_secs(20), || async {
        matches!(
            http(zone.api, "GET", "/meshes/default", None).await,
            Ok((200, _))
        )
    })
    .await
    .map_err(|_| anyhow::anyhow!("the Mesh did not reach the zone:\n{}", zone.log_tail()))?;
    let (app, out) = (free_port(), free_port());
    zone.apply(
        "/meshes/default/dataplanes/frontend",
        &dataplane_yaml(
            "frontend",
            "frontend",
            free_port(),
            app,
            Some((out, "backend")),
        ),
    )
    .await?;
    zone.apply(
        "/meshes/default/dataplanes/backend",
        &dataplane_yaml("backend", "backend", free_port(), free_port(), None),
    )
    .await?;
    let dp = umbra_e2e::DpServer::of(zone.api, zone.grpc, global.api).await?;
    let envoy = Envoy::start(&envoy_bin, "default", "frontend", &dp).await?;
    wait_until(Duration::from_secs(30), || async {
        umbra_e2e::dataplane_acked(zone.api, "frontend").await
    })
    .await
    .map_err(|_| anyhow::anyhow!("envoy did not ACK:\n{}", envoy.log_tail()))?;

    // Every family is listed on the side that records it.
    let (g0, z0) = (metrics(&global).await, metrics(&zone).await);
    for name in [
        "umbra_http_requests_total",
        "umbra_store_operation_seconds",
        "umbra_kds_responses_total",
        "umbra_kds_acks_total",
        "umbra_kds_zones_online",
    ] {
        assert!(
            g0.contains(&format!("# TYPE {name}")) || g0.contains(&format!("{name}{{")),
            "Global lacks {name}:\n{g0}"
        );
    }
    for name in [
        "umbra_xds_generation_seconds",
        "umbra_reconcile_seconds",
        "umbra_xds_pushes_total",
        "umbra_xds_acks_total",
        "umbra_ads_streams",
        "umbra_kds_sync_lag_seconds",
        "umbra_kds_responses_total",
    ] {
        assert!(
            z0.contains(&format!("# TYPE {name}")),
            "zone lacks {name}:\n{z0}"
        );
    }
    assert_eq!(sample_sum(&z0, "umbra_ads_streams"), 1.0, "{z0}");

    // A policy PUT on the Global, continuing the caller's trace.
    let timeout = "type: MeshTimeout\nmesh: default\nname: mt\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 7s}\n";
    let traceparent = format!("00-{TRACE_PUT}-00f067aa0ba902b7-01");
    let (status, body) = http_with(
        global.api,
        "PUT",
        "/meshes/default/meshtimeouts/mt",
        Some(timeout),
        &[
            ("traceparent", traceparent.as_str()),
            ("content-type", "application/yaml"),
        ],
    )
    .await?;
    assert_eq!(status, 201, "{body}");
    let acks0 = sample_sum(&z0, "umbra_xds_acks_total");
    wait_until(Duration::from_secs(20), || {
        let zone = &zone;
        async move { sample_sum(&metrics(zone).await, "umbra_xds_acks_total") > acks0 + 1.0 }
    })
    .await
    .map_err(|_| anyhow::anyhow!("no new ACK after the PUT:\n{}", zone.log_tail()))?;
    let (g1, z1) = (metrics(&global).await, metrics(&zone).await);
    let moved = |before: &str, after: &str, name: &str| {
        let (b, a) = (sample_sum(before, name), sample_sum(after, name));
        assert!(a > b, "{name} did not move ({b} -> {a})");
    };
    assert!(
        sum_with(&g1, "umbra_store_operation_seconds_count", "op=\"put\"")
            > sum_with(&g0, "umbra_store_operation_seconds_count", "op=\"put\""),
        "store put latency did not move"
    );
    assert!(
        sum_with(&g1, "umbra_http_requests_total", "status=\"201\"")
            > sum_with(&g0, "umbra_http_requests_total", "status=\"201\""),
    );
    moved(&g0, &g1, "umbra_kds_responses_total");
    moved(&g0, &g1, "umbra_kds_acks_total");
    moved(&z0, &z1, "umbra_kds_sync_lag_seconds_count");
    moved(&z0, &z1, "umbra_reconcile_seconds_count");
    moved(&z0, &z1, "umbra_xds_generation_seconds_count");
    moved(&z0, &z1, "umbra_xds_pushes_total");
    let lag = sample_sum(&z1, "umbra_kds_sync_lag_seconds_sum")
        - sample_sum(&z0, "umbra_kds_sync_lag_seconds_sum");
    assert!((0.0..10.0).contains(&lag), "sync lag {lag} s");

    // One trace: the Global's PUT, the zone's apply, reconciliation and push.
    let want: BTreeSet<(String, String)> = [
        ("umbra-global-cp", "PUT /meshes/{mesh}/{plural}/{name}"),
        ("umbra-zone-cp", "kds.apply"),
        ("umbra-zone-cp", "reconcile"),
        ("umbra-zone-cp", "xds.push"),
    ]
    .iter()
    .map(|(s, n)| ((*s).to_owned(), (*n).to_owned()))
    .collect();
    let traced = wait_until(Duration::from_secs(20), || async {
        spans_of(&received, TRACE_PUT).is_superset(&want)
    })
    .await;
    assert!(
        traced.is_ok(),
        "trace {TRACE_PUT} has {:?}, wants {want:?}",
        spans_of(&received, TRACE_PUT)
    );

    // Fan-out: a fleet diff (traced to the zone's inspect span) and a forwarded _config. A
    // shadow policy gives the fleet diff a DPP to ask its zone about.
    global
        .apply(
            "/meshes/default/meshtimeouts/mt-shadow",
            &timeout
                .replace(
                    "name: mt\n",
                    "name: mt-shadow\nlabels: {kuma.io/effect: shadow}\n",
                )
                .replace("7s", "9s"),
        )
        .await?;
    wait_until(Duration::from_secs(20), || async {
        matches!(
            http(
                zone.api,
                "GET",
                "/meshes/default/meshtimeouts/mt-shadow",
                None
            )
            .await,
            Ok((200, _))
        )
    })
    .await?;
    let traceparent = format!("00-{TRACE_DIFF}-00f067aa0ba902b7-01");
    let (status, body) = http_with(
        global.api,
        "GET",
        "/meshes/default/_shadow-diff",
        None,
        &[("traceparent", traceparent.as_str())],
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(
        global.api,
        "GET",
        "/meshes/default/dataplanes/frontend/_config",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let g2 = metrics(&global).await;
    assert!(
        sum_with(&g2, "umbra_fanout_seconds_count", "kind=\"shadow_diff\"") >= 1.0,
        "{g2}"
    );
    assert!(
        sum_with(&g2, "umbra_fanout_seconds_count", "kind=\"forward\"") >= 1.0,
        "{g2}"
    );
    assert!(
        sum_with(&g2, "umbra_inspect_calls_total", "outcome=\"ok\"") >= 1.0,
        "{g2}"
    );
    let inspect = wait_until(Duration::from_secs(20), || async {
        spans_of(&received, TRACE_DIFF)
            .contains(&("umbra-zone-cp".to_owned(), "inspect".to_owned()))
    })
    .await;
    assert!(
        inspect.is_ok(),
        "trace {TRACE_DIFF}: {:?}",
        spans_of(&received, TRACE_DIFF)
    );

    // A config Envoy rejects: the NACK counter moves.
    let bad = "type: MeshProxyPatch\nmesh: default\nname: bad-timeout\nspec:\n  targetRef: {kind: MeshService, name: frontend}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: backend}\n        value: 'connectTimeout: -1s'\n";
    global
        .apply("/meshes/default/meshproxypatches/bad-timeout", bad)
        .await?;
    let nacks0 = sample_sum(&z1, "umbra_xds_nacks_total");
    wait_until(Duration::from_secs(20), || {
        let zone = &zone;
        async move { sample_sum(&metrics(zone).await, "umbra_xds_nacks_total") > nacks0 }
    })
    .await
    .map_err(|_| anyhow::anyhow!("no NACK counted:\n{}", zone.log_tail()))?;

    // JSON logs: every line an object with a level and fields.
    let log = std::fs::read_to_string(dir.join("global.log"))?;
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| anyhow::anyhow!("not JSON ({e}): {l}"))?;
        assert!(v["level"].is_string() && v["fields"].is_object(), "{l}");
    }
    drop(envoy);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
