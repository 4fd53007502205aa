//! End to end over KDS: global-cp (on a real PostgreSQL) and zone-cp as separate processes,
//! real Envoy sidecars on the zone.
//!
//! - A policy PUT on the Global reaches the zone and its Envoys (a MeshTimeout turns a slow
//!   backend into 504s); deleting it on the Global removes it. The zone's Dataplanes appear on
//!   the Global under its zone.
//! - SIGKILL the zone, change one policy, restart it: it resumes from its saved store and the
//!   Global sends it only that policy. SIGKILL the Global: the zone keeps serving; when the
//!   Global is back, nothing is lost or duplicated and new policies flow again.
//! - Missing, forged or other-zone tokens are refused and logged; a zone cannot claim or
//!   delete another zone's Dataplanes; KDS works over TLS.
//! - A zone that never reached its Global answers `/ready` with 503 and why; once the Global
//!   is there and the first sync applied it is ready, and it stays ready when the Global goes
//!   away again, also across a restart from its `--data-dir`.

use std::path::PathBuf;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use umbra_e2e::{
    envoy_binary, free_port, wait_for_status, wait_until, AdsApi, CpProcess, Sidecars,
};
use umbra_global_cp::testing::TempPostgres;
use umbra_kds::pb::kds_service_client::KdsServiceClient;
use umbra_kds::resource::Item;

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-kds-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn token(global: &CpProcess, zone: &str) -> anyhow::Result<String> {
    umbra_e2e::zone_token(global, zone).await
}

async fn start_zone(
    global: &CpProcess,
    zone: &str,
    token: &str,
    dir: &std::path::Path,
) -> anyhow::Result<CpProcess> {
    let data = vec!["--data-dir".into(), dir.join("data").display().to_string()];
    umbra_e2e::start_federated_zone(
        ZONE,
        global,
        zone,
        token,
        &data,
        dir.join(format!("{zone}.log")),
    )
    .await
}

/// Wait until the Global's Mesh `default` is in the zone's store (fails with both logs).
async fn wait_for_mesh(global: &CpProcess, zone: &CpProcess) {
    let synced = wait_until(Duration::from_secs(20), || async {
        matches!(
            zone.call("GET", "/meshes/default", None).await,
            Ok((200, _))
        )
    })
    .await;
    assert!(
        synced.is_ok(),
        "the Mesh did not reach the zone.\nzone:\n{}\nglobal:\n{}",
        zone.log_tail(),
        global.log_tail()
    );
}

fn timeout_policy(name: &str, target: &str, default: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {target}\n    default: {default}\n")
}

/// The Global's sync counters for `zone`: per type, resources sent to it.
async fn sent_to(global: &CpProcess, zone: &str) -> anyhow::Result<Value> {
    let (_, v) = global.call("GET", &format!("/zones/{zone}"), None).await?;
    Ok(v)
}

/// Resources the Global sent a zone, over every type but the commit marker (one per
/// generation of its offer, not a resource of the zone's).
fn resources_sent(zone_status: &Value) -> u64 {
    zone_status["globalToZone"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(t, _)| t.as_str() != umbra_kds::resource::COMMIT_TYPE)
                .filter_map(|(_, t)| t["resources"].as_u64())
                .sum()
        })
        .unwrap_or(0)
}

async fn count(cp: &CpProcess, path: &str) -> usize {
    match cp.call("GET", path, None).await {
        Ok((200, v)) => v["items"].as_array().map_or(0, Vec::len),
        _ => usize::MAX,
    }
}

fn postgres() -> Option<TempPostgres> {
    TempPostgres::start_or_skip()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_flow_to_zone_envoys_and_survive_zone_and_global_crashes() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    let Some(pg) = postgres() else { return Ok(()) };
    let url = pg.create_database("kds_e2e").await?;
    let dir = temp_dir("flow");
    let mut global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &["--store".into(), "postgres".into()],
        &[("UMBRA_POSTGRES_URL", &url)],
        dir.join("global.log"),
    )
    .await?;
    let zone_token = token(&global, "zone-1").await?;
    global.apply("/meshes/default", MESH).await?;
    let mut zone = start_zone(&global, "zone-1", &zone_token, &dir).await?;
    wait_for_mesh(&global, &zone).await;
    // Policies are the Global's in a federated zone.
    let (s, _) = zone
        .call(
            "PUT",
            "/meshes/default/meshtimeouts/local",
            Some(&timeout_policy(
                "local",
                "{kind: Mesh}",
                "{idleTimeout: 1s}",
            )),
        )
        .await?;
    assert_eq!(s, 405, "policy writes are refused in a federated zone");

    // Sidecars: frontend -> backend (the backend app answering after 3 s), on both ADS flavours.
    // Dataplane tokens come from the Global (its keys reach the zone over KDS).
    let dp = umbra_e2e::DpServer::of(zone.api, zone.grpc, global.api).await?;
    let sidecars = Sidecars::start(
        &envoy,
        zone.api,
        &dp,
        Duration::from_secs(3),
        (AdsApi::Delta, AdsApi::Sotw),
    )
    .await?;
    let out = sidecars.out;

    // The zone's Dataplanes appear on the Global, as the zone's.
    let listed = wait_until(Duration::from_secs(10), || async {
        count(
            &global,
            "/meshes/default/dataplanes?label=kuma.io/zone:zone-1",
        )
        .await
            == 2
    })
    .await;
    assert!(
        listed.is_ok(),
        "Dataplanes not on the Global:\n{}",
        global.log_tail()
    );
    let (_, dps) = global
        .call("GET", "/meshes/default/dataplanes", None)
        .await?;
    let names: Vec<&str> = dps["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["labels"]["kuma.io/display-name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["backend", "frontend"], "{dps}");

    // A policy PUT on the Global reaches the Envoys; a delete removes it.
    global
        .apply(
            "/meshes/default/meshtimeouts/one-second",
            &timeout_policy(
                "one-second",
                "{kind: MeshService, name: backend}",
                "{http: {requestTimeout: 1s}}",
            ),
        )
        .await?;
    let timed_out = wait_for_status(out, 504, Duration::from_secs(15)).await;
    assert!(timed_out.is_ok(), "no 504:\n{}", zone.log_tail());
    let (s, _) = global
        .call("DELETE", "/meshes/default/meshtimeouts/one-second", None)
        .await?;
    assert_eq!(s, 200);
    wait_for_status(out, 200, Duration::from_secs(15)).await?;
    let (_, status) = global.call("GET", "/zones/zone-1", None).await?;
    assert_eq!(status["online"], true, "{status}");
    assert_eq!(status["streams"], 3, "{status}");
    assert!(
        status["globalToZone"]["MeshTimeout"]["acks"].as_u64() >= Some(2),
        "{status}"
    );

    // SIGKILL the zone; change one thing on the Global; restart: only that is sent.
    let before = resources_sent(&sent_to(&global, "zone-1").await?);
    zone.kill();
    global
        .apply(
            "/meshes/default/meshtimeouts/idle",
            &timeout_policy("idle", "{kind: Mesh}", "{idleTimeout: 1h}"),
        )
        .await?;
    zone.restart().await?;
    let resumed = wait_until(Duration::from_secs(20), || async {
        matches!(
            zone.call("GET", "/meshes/default/meshtimeouts/idle", None)
                .await,
            Ok((200, _))
        )
    })
    .await;
    assert!(resumed.is_ok(), "zone did not resume:\n{}", zone.log_tail());
    let after = resources_sent(&sent_to(&global, "zone-1").await?);
    assert_eq!(
        after - before,
        1,
        "after the restart the Global sent only the changed policy"
    );
    // The Envoys reconnect to the restarted zone and keep working.
    wait_for_status(out, 200, Duration::from_secs(20)).await?;

    // SIGKILL the Global: the zone keeps serving its last state.
    global.kill();
    let noticed = wait_until(Duration::from_secs(20), || async {
        matches!(zone.call("GET", "/ready", None).await, Ok((200, r)) if r["global"]["connected"] == false)
    })
    .await;
    assert!(
        noticed.is_ok(),
        "the zone did not notice the Global's loss:\n{}",
        zone.log_tail()
    );
    assert_eq!(count(&zone, "/meshes/default/meshtimeouts").await, 1);
    wait_for_status(out, 200, Duration::from_secs(10)).await?;
    global.restart().await?;
    let back = wait_until(Duration::from_secs(40), || async {
        matches!(global.call("GET", "/zones/zone-1", None).await, Ok((200, v)) if v["streams"] == 3)
    })
    .await;
    assert!(
        back.is_ok(),
        "zone did not reconnect:\n{}\n{}",
        zone.log_tail(),
        global.log_tail()
    );
    // Nothing lost or duplicated, and new policies flow again.
    assert_eq!(count(&global, "/meshes/default/dataplanes").await, 2);
    assert_eq!(count(&global, "/meshes/default/meshtimeouts").await, 1);
    global
        .apply(
            "/meshes/default/meshtimeouts/one-second",
            &timeout_policy(
                "one-second",
                "{kind: MeshService, name: backend}",
                "{http: {requestTimeout: 1s}}",
            ),
        )
        .await?;
    let timed_out = wait_for_status(out, 504, Duration::from_secs(15)).await;
    assert!(timed_out.is_ok(), "no 504 after the Global came back");
    assert_eq!(count(&zone, "/meshes/default/meshtimeouts").await, 2);
    assert_eq!(count(&zone, "/meshes/default/dataplanes").await, 2);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

type Interceptor =
    Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send>;
type Client = KdsServiceClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Interceptor>,
>;

async fn client(
    global: &CpProcess,
    token: Option<String>,
    claimed_zone: Option<&str>,
) -> anyhow::Result<Client> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", global.grpc))?
        .connect()
        .await?;
    let claimed = claimed_zone.map(str::to_owned);
    let interceptor: Interceptor = Box::new(move |mut req: tonic::Request<()>| {
        if let Some(t) = &token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        if let Some(z) = &claimed {
            req.metadata_mut()
                .insert(umbra_kds::ZONE_NAME_METADATA, z.parse().unwrap());
        }
        Ok(req)
    });
    Ok(KdsServiceClient::with_interceptor(channel, interceptor))
}

/// A hand-driven zone on ZoneToGlobalSync: the Global's requests and a way to answer.
struct FakeZone {
    requests: tonic::Streaming<DeltaDiscoveryRequest>,
    responses: mpsc::Sender<DeltaDiscoveryResponse>,
    nonce: u64,
}

impl FakeZone {
    async fn open(mut client: Client) -> Result<FakeZone, tonic::Status> {
        let (tx, rx) = mpsc::channel(4);
        let requests = client
            .zone_to_global_sync(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let mut z = FakeZone {
            requests,
            responses: tx,
            nonce: 0,
        };
        // The Global subscribes to every zone-owned type first (Dataplanes, ZoneIngresses,
        // insights).
        for _ in 0..umbra_kds::resource::zone_to_global_types().len() {
            z.next_request().await;
        }
        Ok(z)
    }

    async fn next_request(&mut self) -> DeltaDiscoveryRequest {
        tokio::time::timeout(Duration::from_secs(10), self.requests.message())
            .await
            .expect("a request in time")
            .expect("stream up")
            .expect("a message")
    }

    /// Send Dataplanes (name, YAML) and removals; the Global's answer (ACK: no error).
    async fn send(&mut self, upserts: &[(&str, &str)], removed: &[&str]) -> DeltaDiscoveryRequest {
        self.nonce += 1;
        let resources = upserts
            .iter()
            .map(|(name, yaml)| {
                let r = umbra_core::resource::Resource::from_bytes(yaml.as_bytes()).unwrap();
                Item::from_resource(&r).to_xds(name)
            })
            .collect();
        self.responses
            .send(DeltaDiscoveryResponse {
                type_url: "Dataplane".into(),
                resources,
                removed_resources: removed.iter().map(|s| (*s).to_owned()).collect(),
                nonce: self.nonce.to_string(),
                ..Default::default()
            })
            .await
            .unwrap();
        let answer = self.next_request().await;
        assert_eq!(answer.response_nonce, self.nonce.to_string());
        answer
    }
}

fn web(labels: &str) -> String {
    format!("type: Dataplane\nmesh: default\nname: web\n{labels}networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: web}}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_and_zones_cannot_touch_each_others_dataplanes() -> anyhow::Result<()> {
    let dir = temp_dir("auth");
    let global = CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log")).await?;
    global.apply("/meshes/default", MESH).await?;
    let (t1, t2) = (
        token(&global, "zone-1").await?,
        token(&global, "zone-2").await?,
    );

    // Missing, forged and other-zone tokens are refused, with the reason, and logged.
    let refused = [
        (None, None, "missing zone token"),
        (Some("not-a-token".to_owned()), None, "invalid zone token"),
        (Some(format!("{t1}x")), None, "invalid zone token"),
        (
            Some(t1.clone()),
            Some("zone-2"),
            "the token is for zone \"zone-1\"",
        ),
    ];
    for (tok, claimed, reason) in refused {
        let err = FakeZone::open(client(&global, tok, claimed).await?)
            .await
            .err()
            .expect("refused");
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
        assert!(err.message().contains(reason), "{}", err.message());
    }
    assert!(global.log_text().contains("KDS: connection refused"));
    let (_, zones) = global.call("GET", "/zones", None).await?;
    assert_eq!(
        zones["total"], 0,
        "refused zones are not registered: {zones}"
    );

    // zone-1 reports web; zone-2 cannot claim it, but has its own web.
    let mut z1 = FakeZone::open(client(&global, Some(t1), Some("zone-1")).await?).await?;
    let mut z2 = FakeZone::open(client(&global, Some(t2), None).await?).await?;
    let ack = z1.send(&[("default/web", &web(""))], &[]).await;
    assert!(ack.error_detail.is_none(), "{ack:?}");
    let spoof = z2
        .send(
            &[("default/web", &web("labels: {kuma.io/zone: zone-1}\n"))],
            &[],
        )
        .await;
    let nack = spoof.error_detail.expect("NACK");
    assert!(
        nack.message
            .contains("zone \"zone-2\" cannot report a Dataplane of zone \"zone-1\""),
        "{}",
        nack.message
    );
    let (_, before) = global
        .call("GET", "/meshes/default/dataplanes", None)
        .await?;
    assert_eq!(before["items"].as_array().unwrap().len(), 1, "{before}");
    assert_eq!(before["items"][0]["labels"]["kuma.io/zone"], "zone-1");
    let ack = z2.send(&[("default/web", &web(""))], &[]).await;
    assert!(ack.error_detail.is_none(), "{ack:?}");
    assert_eq!(count(&global, "/meshes/default/dataplanes").await, 2);
    // zone-2 removing "web" removes its own only.
    let ack = z2.send(&[], &["default/web"]).await;
    assert!(ack.error_detail.is_none(), "{ack:?}");
    let (_, after) = global
        .call("GET", "/meshes/default/dataplanes", None)
        .await?;
    assert_eq!(after["items"], before["items"], "zone-1's web is untouched");
    // A Dataplane whose body names another resource is refused on its own.
    let bad = z1
        .send(
            &[("default/other", &web("")), ("default/web", &web(""))],
            &[],
        )
        .await;
    assert!(bad
        .error_detail
        .is_some_and(|e| e.message.contains("default/other")));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kds_over_tls() -> anyhow::Result<()> {
    let dir = temp_dir("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    std::fs::write(dir.join("kds.crt"), cert.cert.pem())?;
    std::fs::write(dir.join("kds.key"), cert.signing_key.serialize_pem())?;
    let global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &[
            "--kds-tls-cert-file".into(),
            dir.join("kds.crt").display().to_string(),
            "--kds-tls-key-file".into(),
            dir.join("kds.key").display().to_string(),
        ],
        &[],
        dir.join("global.log"),
    )
    .await?;
    global.apply("/meshes/default", MESH).await?;
    let t = token(&global, "zone-tls").await?;
    let zone = CpProcess::start(
        ZONE,
        "--ads-addr",
        &[
            "--zone".into(),
            "zone-tls".into(),
            "--global-kds-address".into(),
            format!("https://{}", global.grpc),
            "--kds-ca-file".into(),
            dir.join("kds.crt").display().to_string(),
        ],
        &[("UMBRA_KDS_TOKEN", &t)],
        dir.join("zone.log"),
    )
    .await?;
    wait_for_mesh(&global, &zone).await;
    // Plain text to the TLS port fails.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{}", global.grpc))?
        .connect()
        .await;
    if let Ok(channel) = plain {
        let mut c = KdsServiceClient::new(channel);
        let (_tx, rx) = mpsc::channel::<DeltaDiscoveryResponse>(1);
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            c.zone_to_global_sync(ReceiverStream::new(rx)),
        )
        .await;
        assert!(
            !matches!(r, Ok(Ok(_))),
            "plain text must not reach KDS over TLS"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `GET /ready` on `zone`: status and body (status 0 when it does not answer).
async fn ready(zone: &CpProcess) -> (u16, Value) {
    zone.call("GET", "/ready", None)
        .await
        .unwrap_or((0, Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_is_ready_once_it_has_synced_with_its_global() -> anyhow::Result<()> {
    let dir = temp_dir("ready");
    // A memory-store Global keeping its signing key under --data-dir across restarts.
    let mut global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &[
            "--data-dir".into(),
            dir.join("global").display().to_string(),
        ],
        &[],
        dir.join("global.log"),
    )
    .await?;
    global.apply("/meshes/default", MESH).await?;
    let t = token(&global, "zone-ready").await?;
    global.kill();

    // Never reached its Global: 503, saying why.
    let mut zone = start_zone(&global, "zone-ready", &t, &dir).await?;
    let unready = wait_until(Duration::from_secs(20), || async {
        let (status, r) = ready(&zone).await;
        status == 503
            && r["status"] == "notReady"
            && r["global"]["synced"] == false
            && r["global"]["attempts"].as_u64() >= Some(2)
            && r["reason"]
                .as_str()
                .is_some_and(|e| e.contains("cannot connect"))
    })
    .await;
    assert!(
        unready.is_ok(),
        "{:?}\n{}",
        ready(&zone).await,
        zone.log_tail()
    );

    // The Global comes: ready once the first sync is applied, with the Global's Mesh.
    global.restart().await?;
    let synced = wait_until(Duration::from_secs(40), || async {
        let (status, r) = ready(&zone).await;
        status == 200
            && r["status"] == "ready"
            && r["global"]["connected"] == true
            && r["global"]["synced"] == true
    })
    .await;
    assert!(
        synced.is_ok(),
        "{:?}\n{}",
        ready(&zone).await,
        zone.log_tail()
    );
    assert_eq!(count(&zone, "/meshes").await, 1);

    // Losing the Global later: still ready (it serves its last state), the link reported down.
    global.kill();
    let down = wait_until(Duration::from_secs(20), || async {
        let (status, r) = ready(&zone).await;
        status == 200 && r["global"]["connected"] == false && r["global"]["synced"] == true
    })
    .await;
    assert!(down.is_ok(), "{:?}", ready(&zone).await);
    // So is the zone restarted from its --data-dir store while the Global is away.
    zone.restart().await?;
    let (status, r) = ready(&zone).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["global"]["connected"], false, "{r}");
    assert_eq!(count(&zone, "/meshes").await, 1);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
