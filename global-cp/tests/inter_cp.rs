//! Inter-CP (issue 36): two Global replicas on one real PostgreSQL, in this process, and a real
//! zone CP connected to replica `a`. Through replica `b`, which has no stream of the zone,
//! every inspect call is forwarded to `a` over the mTLS inter-CP service
//! ([`umbra_global_cp::inter_cp`]) and answers what `a` answers: a DPP's `_config`, the
//! fleet-wide shadow diff (and the kept answer's revalidation probe), and, with the zone
//! offline everywhere, the same 503 and the same partial result. The inter-CP server admits
//! only callers with a certificate from the replicas' CA, and only over TLS.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
use umbra_global_cp::inter_cp::tls::InterCpTls;
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::{free_port, TempPostgres};
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inter_cp_service_client::InterCpServiceClient;
use umbra_kds::pb::{ForwardedInspect, InspectRequest, ShadowDiffRequest};
use umbra_pki::inter_cp::InterCpCa;

/// Every log line of this test binary, to count what the zone computed.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || Capture(sink.clone()))
            .try_init();
        buf
    })
    .clone()
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Shadow diffs the zone computed so far (a revalidation probe is not one).
fn computed() -> usize {
    let logs = logs();
    let text = logs.lock().unwrap_or_else(PoisonError::into_inner);
    String::from_utf8_lossy(&text)
        .matches("inspect: shadow diff done")
        .count()
}

/// The last lines logged (for a failure's message).
fn log_tail() -> String {
    let logs = logs();
    let text = logs.lock().unwrap_or_else(PoisonError::into_inner);
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// A server running in this process until `stop`.
struct Running {
    api: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let done = tokio::time::timeout(Duration::from_secs(15), &mut self.task).await;
        assert!(done.is_ok(), "did not stop within 15 s");
    }
}

/// A Global replica.
struct Replica {
    run: Running,
    kds: SocketAddr,
    inter_cp: SocketAddr,
}

async fn replica(url: &str, name: &str) -> Replica {
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(url, 4).await.expect("store"));
    let api = tokio::net::TcpListener::bind(("127.0.0.1", free_port()))
        .await
        .expect("api");
    let kds = tokio::net::TcpListener::bind(("127.0.0.1", free_port()))
        .await
        .expect("kds");
    let inter_cp = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (api_addr, kds_addr) = (api.local_addr().unwrap(), kds.local_addr().unwrap());
    let settings = umbra_global_cp::Settings {
        postgres_url: Some(url.to_owned()),
        replica_name: Some(name.to_owned()),
        inter_cp_addr: Some(inter_cp),
        ..Default::default()
    };
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(umbra_global_cp::serve(
        store,
        api,
        kds,
        None,
        settings,
        async {
            let _ = rx.await;
        },
    ));
    let r = Replica {
        run: Running {
            api: api_addr,
            stop: Some(stop),
            task,
        },
        kds: kds_addr,
        inter_cp,
    };
    until(
        &format!("replica {name} ready"),
        Duration::from_secs(20),
        || async { get(r.run.api, "/ready").await.0 == 200 },
    )
    .await;
    r
}

/// A zone CP `zone` federated to the KDS at `kds` with `token`.
async fn zone(kds: SocketAddr, token: &str, zone: &str) -> Running {
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let ads = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut args = umbra_zone_cp::Args::new(zone, api, ads);
    args.global_kds_address = vec![format!("http://{kds}").parse().expect("a KDS address")];
    args.kds_token = Some(token.to_owned());
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(umbra_zone_cp::run(args, async {
        let _ = rx.await;
    }));
    Running {
        api,
        stop: Some(stop),
        task,
    }
}

fn http() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("an HTTP client")
    })
}

/// `method path` on the API at `api` with `body` (JSON when it starts with `{`, else YAML):
/// the status, the answer as JSON (a string when it is not JSON) and as text; status 0 and the
/// error when nothing answers.
async fn call(
    api: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, Value, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut req = http().request(method, format!("http://{api}{path}"));
    if let Some(b) = body {
        let media = if b.starts_with('{') {
            "application/json"
        } else {
            "application/yaml"
        };
        req = req.header("content-type", media).body(b.to_owned());
    }
    // Status 0: no answer (not listening yet, or gone).
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return (0, Value::Null, e.to_string()),
    };
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("a body");
    let json = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
    (status, json, text)
}

async fn get(api: SocketAddr, path: &str) -> (u16, Value, String) {
    call(api, "GET", path, None).await
}

async fn put(api: SocketAddr, path: &str, yaml: &str) {
    let (status, body, _) = call(api, "PUT", path, Some(yaml)).await;
    assert!(
        status == 200 || status == 201,
        "PUT {path}: {status} {body}"
    );
}

async fn until<F, Fut>(what: &str, limit: Duration, mut ok: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !ok().await {
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}; the last log lines:\n{}",
            log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A shadow MeshTimeout selecting only the `backend` DPP.
const BACKEND_ONLY: &str = "type: MeshTimeout\nmesh: default\nname: backend-inbound\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 3h}\n";

fn dataplane(name: &str, inbound: u16) -> String {
    format!(
        "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: {name}, kuma.io/protocol: http}}\n",
        inbound + 1000
    )
}

/// The DPPs of a fleet diff's full answer, as `zone/name`.
fn dpps(report: &Value) -> Vec<String> {
    let mut out: Vec<String> = report["dataplanes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    format!(
                        "{}/{}",
                        d["zone"].as_str().unwrap_or(""),
                        d["name"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_for_a_zone_held_by_another_replica_are_forwarded() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    logs();
    let url = pg.create_database("inter_cp").await.expect("database");
    let a = replica(&url, "a").await;
    let b = replica(&url, "b").await;
    let (a_api, b_api) = (a.run.api, b.run.api);

    put(a_api, "/meshes/default", "type: Mesh\nname: default\n").await;
    put(
        a_api,
        "/meshes/default/meshtimeouts/backend-inbound",
        BACKEND_ONLY,
    )
    .await;
    let (status, token, _) = call(
        a_api,
        "POST",
        "/tokens/zone",
        Some(r#"{"zone": "zone-1", "validFor": "1h"}"#),
    )
    .await;
    assert_eq!(status, 200, "{token}");
    let token = token.as_str().expect("a token").to_owned();
    let z = zone(a.kds, &token, "zone-1").await;
    until(
        "the policies reach the zone",
        Duration::from_secs(30),
        || async {
            let (status, _, text) =
                get(z.api, "/meshes/default/meshtimeouts/backend-inbound").await;
            status == 200 && text.contains("shadow")
        },
    )
    .await;
    put(
        z.api,
        "/meshes/default/dataplanes/backend",
        &dataplane("backend", 7001),
    )
    .await;
    put(
        z.api,
        "/meshes/default/dataplanes/frontend",
        &dataplane("frontend", 7002),
    )
    .await;
    until(
        "the Dataplanes reach the Global",
        Duration::from_secs(30),
        || async { get(b_api, "/meshes/default/dataplanes").await.1["total"] == 2 },
    )
    .await;
    // b sees the zone online on a (the lease), with no stream of its own.
    until(
        "b sees zone-1 held by a",
        Duration::from_secs(30),
        || async {
            let (_, zone, _) = get(b_api, "/zones/zone-1").await;
            zone["online"] == true && zone["replica"] == "a"
        },
    )
    .await;

    // A DPP's config, its shadow diff and the zone's 404 for an unknown DPP's view: the same
    // through b as through a.
    for path in [
        "/meshes/default/dataplanes/backend/_config",
        "/meshes/default/dataplanes/backend/_config?shadow=true&include=diff",
        "/meshes/default/dataplanes/frontend/_rules",
    ] {
        let (sa, _, body_a) = get(a_api, path).await;
        let (sb, _, body_b) = get(b_api, path).await;
        assert_eq!(sa, 200, "{path} through a: {body_a}");
        assert_eq!(sb, 200, "{path} through b: {body_b}");
        assert_eq!(body_b, body_a, "{path}: b answers otherwise than a");
    }

    // The fleet-wide diff: the same DPPs (only backend changes), the same document.
    let fleet = "/meshes/default/_shadow-diff?format=full";
    let (sa, via_a, _) = get(a_api, fleet).await;
    assert_eq!(sa, 200, "{via_a}");
    assert_eq!(via_a["partial"], false, "{via_a}");
    assert_eq!(dpps(&via_a), vec!["zone-1/backend".to_owned()], "{via_a}");
    let before = computed();
    assert!(before >= 1, "the zone's log lines are not captured");
    let (sb, via_b, _) = get(b_api, fleet).await;
    assert_eq!(sb, 200, "{via_b}");
    assert_eq!(via_b, via_a, "the fleet diff through b differs");
    assert_eq!(
        computed(),
        before + 1,
        "b's diff was not computed by the zone"
    );
    // Asked again through b: the kept answer, revalidated by a probe forwarded to the zone
    // (a probe that could not reach it would have the diff computed again).
    let (_, again, _) = get(b_api, fleet).await;
    assert_eq!(again, via_b);
    assert_eq!(
        computed(),
        before + 1,
        "the zone computed b's kept answer again"
    );
    // `zone=` names a zone b knows through the replicas.
    let (status, one, _) = get(b_api, "/meshes/default/_shadow-diff?zone=zone-1").await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["partial"], false, "{one}");
    let (_, metrics, _) = get(b_api, "/metrics").await;
    assert!(
        metrics
            .as_str()
            .is_some_and(|m| m.contains("umbra_inter_cp_calls_total{outcome=\"ok\"}")),
        "forwarded calls are not counted"
    );

    // The zone goes away: offline everywhere, b answers what a answers.
    z.stop().await;
    for r in [a_api, b_api] {
        until("zone-1 offline", Duration::from_secs(30), || async {
            get(r, "/zones/zone-1").await.1["online"] == false
        })
        .await;
    }
    let path = "/meshes/default/dataplanes/backend/_config";
    let (sa, err_a, _) = get(a_api, path).await;
    let (sb, err_b, _) = get(b_api, path).await;
    assert_eq!((sa, sb), (503, 503), "{err_a} {err_b}");
    // The same error (`instance` names each request).
    let (mut err_a, mut err_b) = (err_a, err_b);
    for e in [&mut err_a, &mut err_b] {
        e.as_object_mut().map(|o| o.remove("instance"));
    }
    assert_eq!(err_b, err_a);
    assert!(
        err_a["detail"]
            .as_str()
            .is_some_and(|d| d.contains("offline")),
        "{err_a}"
    );
    let fleet = "/meshes/default/_shadow-diff?format=full&zone=zone-1";
    let (sa, partial_a, _) = get(a_api, fleet).await;
    let (sb, partial_b, _) = get(b_api, fleet).await;
    assert_eq!((sa, sb), (200, 200), "{partial_a} {partial_b}");
    assert_eq!(partial_a["partial"], true, "{partial_a}");
    assert!(
        partial_a["zones"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("offline")),
        "{partial_a}"
    );
    assert_eq!(partial_b, partial_a);

    b.run.stop().await;
    a.run.stop().await;
}

/// Ask the inter-CP server at `addr` (scheme `scheme`, TLS `tls`) about a zone it does not
/// hold: `Ok` with the status the handler answered (NOT_FOUND) when the call got through,
/// `Err` with why it did not.
async fn ask(
    scheme: &str,
    addr: SocketAddr,
    tls: Option<ClientTlsConfig>,
) -> Result<tonic::Status, String> {
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).map_err(|e| e.to_string())?;
    }
    let channel = tokio::time::timeout(Duration::from_secs(10), endpoint.connect())
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| format!("connect: {e:?}"))?;
    let request = ForwardedInspect {
        zone: "zone-9".into(),
        request: Some(InspectRequest {
            id: 1,
            timeout_ms: 1000,
            trace_context: Default::default(),
            kind: Some(Kind::ShadowDiff(ShadowDiffRequest::default())),
        }),
    };
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        InterCpServiceClient::new(channel).inspect(request),
    )
    .await
    .map_err(|_| "call timed out".to_owned())?;
    match answer {
        Err(status) if status.code() == tonic::Code::NotFound => Ok(status),
        Err(status) => Err(format!("{status:?}")),
        Ok(_) => Err("a stream for a zone the replica does not hold".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inter_cp_server_admits_only_replicas_of_its_ca() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("inter_cp_tls").await.expect("database");
    let a = replica(&url, "a").await;
    // It registered where it listens.
    let (_, ready, _) = get(a.run.api, "/ready").await;
    assert_eq!(
        ready["replicas"][0]["interCp"],
        a.inter_cp.to_string(),
        "{ready}"
    );

    // The CA the replica keeps in the store (read, not created: the replica stored it).
    let store = PostgresStore::connect(&url, 2).await.expect("store");
    let ca = InterCpCa::load_or_create(&store).await.expect("the CA");
    let host = "127.0.0.1";
    let good = InterCpTls::issue(&ca, host).expect("a certificate");
    let ca_root = Certificate::from_pem(ca.cert_pem());
    let other = InterCpCa::load_or_create(&umbra_store::memory::MemoryStore::new())
        .await
        .expect("another CA");
    let stranger = other.replica_cert(host).expect("a certificate");
    let own = ca.replica_cert(host).expect("a certificate");

    // A peer replica gets through (the handler answers: zone-9 is not held here).
    let through = ask("https", a.inter_cp, Some(good.client().domain_name(host))).await;
    let status = through.expect("a replica's call is refused");
    assert!(status.message().contains("offline"), "{status:?}");

    let refused: Vec<(&str, &str, Option<ClientTlsConfig>)> = vec![
        ("plaintext", "http", None),
        (
            "no client certificate",
            "https",
            Some(
                ClientTlsConfig::new()
                    .ca_certificate(ca_root.clone())
                    .domain_name(host),
            ),
        ),
        (
            "a client certificate from another CA",
            "https",
            Some(
                ClientTlsConfig::new()
                    .ca_certificate(ca_root.clone())
                    .identity(Identity::from_pem(&stranger.cert_pem, &stranger.key_pem))
                    .domain_name(host),
            ),
        ),
        (
            "a server the client's CA did not issue",
            "https",
            Some(
                ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(other.cert_pem()))
                    .identity(Identity::from_pem(&own.cert_pem, &own.key_pem))
                    .domain_name(host),
            ),
        ),
        (
            "a server certificate for another host",
            "https",
            Some(good.client().domain_name("localhost")),
        ),
    ];
    for (what, scheme, tls) in refused {
        let answer = ask(scheme, a.inter_cp, tls).await;
        assert!(answer.is_err(), "{what}: got through: {answer:?}");
    }
    a.run.stop().await;
}
