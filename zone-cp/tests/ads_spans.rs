//! The ADS stream's log lines name what they serve: a push and its ACK, logged from the
//! stream's spawned task, carry the stream span's `dpp`, `api` and `stream` and their own
//! `type_url`, `version` and `nonce` ([`umbra_zone_cp::ads_trace`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use umbra_core::resource::Resource;
use umbra_zone_cp::{ads, reconciler, store};

const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// Log lines written by the test subscriber, shared with the test.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }

    /// The first line with every one of `parts`, waiting up to 10 s for it.
    async fn wait_for(&self, parts: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(line) = self
                .text()
                .lines()
                .find(|l| parts.iter().all(|p| l.contains(p)))
            {
                return line.to_owned();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line with {parts:?} in:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Current-thread runtime: the server's tasks run on this thread, under the subscriber set
/// for it.
#[tokio::test]
async fn push_and_ack_lines_carry_the_stream_dpp_and_type() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let store = store::Store::new();
    for y in [
        "type: Mesh\nname: m\n",
        "type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/protocol: http}\n",
    ] {
        store
            .put(Resource::from_bytes(y.as_bytes()).unwrap(), None)
            .unwrap();
    }
    let rec = Arc::new(reconciler::Reconciler::new(store.clone()));
    rec.reconcile_once();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        ads::Ads::new(store, rec, Arc::default(), stop.clone()).listen(
            listener,
            None,
            axum::Router::new(),
            stop,
        ),
    );

    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(DiscoveryRequest {
        node: Some(Node {
            id: "m.web".into(),
            ..Default::default()
        }),
        type_url: CLUSTER_TYPE.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().unwrap();
    assert_eq!(response.type_url, CLUSTER_TYPE);

    let stream = ["ads.stream{", "api=\"sotw\"", "dpp=\"m/web\""];
    let type_url = format!("type_url=\"{CLUSTER_TYPE}\"");
    let version = format!("version={}", response.version_info);
    let push = lines
        .wait_for(&[&stream[..], &["xDS push", &type_url, &version, "nonce=1"]].concat())
        .await;
    assert!(push.contains("stream="), "{push}");

    tx.send(DiscoveryRequest {
        type_url: CLUSTER_TYPE.into(),
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    lines
        .wait_for(&[&stream[..], &["xDS ACK", &type_url]].concat())
        .await;

    drop(tx);
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
}
