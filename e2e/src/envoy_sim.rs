//! Simulated Envoys: SotW ADS clients that connect as Envoy does (TLS verified with the zone's
//! data-plane server CA, a dataplane token in `authorization`), subscribe to CDS, EDS, LDS and
//! RDS with no resource names (everything, as Umbra's SotW serves an empty name list), decode
//! every resource into its Envoy type (prost), and ACK each response at once. Every response is
//! recorded as an [`Event`] so a scenario can tell when each client has its config and how long
//! each response took.
//!
//! Source: Envoy's xDS protocol doc ("ACK and NACK semantics", "Aggregated Discovery Service").

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use prost::Message;
use tokio_stream::wrappers::ReceiverStream;

/// The xDS types a simulated Envoy subscribes to, in the order it subscribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XdsType {
    /// CDS.
    Cluster,
    /// EDS.
    Endpoint,
    /// LDS.
    Listener,
    /// RDS.
    Route,
}

impl XdsType {
    /// All of them.
    pub const ALL: [XdsType; 4] = [Self::Cluster, Self::Endpoint, Self::Listener, Self::Route];

    /// The type URL.
    pub fn url(self) -> &'static str {
        match self {
            Self::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            Self::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            Self::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            Self::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    fn of(url: &str) -> Option<XdsType> {
        Self::ALL.into_iter().find(|t| t.url() == url)
    }
}

/// One response received (and ACKed) by a simulated Envoy.
#[derive(Debug, Clone)]
pub struct Event {
    /// The client's index.
    pub client: usize,
    /// Its type.
    pub ty: XdsType,
    /// When its ACK was sent (after decoding every resource).
    pub acked: Instant,
    /// For the first response of a type on a stream: how long after the subscription it
    /// arrived. `None` for later pushes.
    pub waited: Option<Duration>,
    /// Resources in the response.
    pub resources: usize,
}

/// Every client's events, in arrival order.
pub type Events = Arc<Mutex<Vec<Event>>>;

/// A snapshot of the events from index `from` on.
pub fn events_since(events: &Events, from: usize) -> Vec<Event> {
    let e = events.lock().unwrap_or_else(PoisonError::into_inner);
    e.get(from..).map(<[Event]>::to_vec).unwrap_or_default()
}

/// How many events there are so far (a mark for [`events_since`]).
pub fn mark(events: &Events) -> usize {
    events.lock().unwrap_or_else(PoisonError::into_inner).len()
}

/// How simulated Envoys reach a zone's ADS server.
#[derive(Debug, Clone)]
pub struct Access {
    tls: tonic::transport::ClientTlsConfig,
    authorization: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
}

impl Access {
    /// TLS verified with `ca_pem` (the zone's `GET /dp-server/ca.pem`) as `localhost`, and a
    /// dataplane `token` (one for any DPP of the mesh does).
    ///
    /// # Errors
    /// A token that is not a valid header value.
    pub fn new(ca_pem: &str, token: &str) -> anyhow::Result<Access> {
        Ok(Access {
            tls: tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(ca_pem))
                .domain_name("localhost"),
            authorization: format!("Bearer {}", token.trim()).parse()?,
        })
    }
}

fn decode(resp: &DiscoveryResponse) -> anyhow::Result<()> {
    for any in &resp.resources {
        let bytes = any.value.as_slice();
        match XdsType::of(&any.type_url) {
            Some(XdsType::Cluster) => drop(Cluster::decode(bytes)?),
            Some(XdsType::Endpoint) => drop(ClusterLoadAssignment::decode(bytes)?),
            Some(XdsType::Listener) => drop(Listener::decode(bytes)?),
            Some(XdsType::Route) => drop(RouteConfiguration::decode(bytes)?),
            None => anyhow::bail!("unexpected resource type {}", any.type_url),
        }
    }
    Ok(())
}

/// Run simulated Envoy `client` as node `node_id` (`<mesh>.<name>`) against `ads` until the
/// stream ends or fails; every response is decoded, ACKed and recorded in `events`.
///
/// # Errors
/// Connection, TLS or authentication failures, a stream error, an undecodable resource.
pub async fn run(
    ads: SocketAddr,
    node_id: String,
    client: usize,
    access: Arc<Access>,
    events: Events,
) -> anyhow::Result<()> {
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{ads}"))?
        .tls_config(access.tls.clone())?
        .connect_timeout(Duration::from_secs(30))
        .connect()
        .await?;
    let authorization = access.authorization.clone();
    let mut ads_client = AggregatedDiscoveryServiceClient::with_interceptor(
        channel,
        move |mut req: tonic::Request<()>| {
            req.metadata_mut()
                .insert("authorization", authorization.clone());
            Ok(req)
        },
    )
    .max_decoding_message_size(64 << 20);
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let node = Node {
        id: node_id,
        ..Default::default()
    };
    let subscribed = Instant::now();
    for (n, t) in XdsType::ALL.iter().enumerate() {
        tx.send(DiscoveryRequest {
            node: (n == 0).then(|| node.clone()),
            type_url: t.url().to_owned(),
            ..Default::default()
        })
        .await?;
    }
    let mut first = [true; 4];
    let mut responses = ads_client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await?
        .into_inner();
    while let Some(resp) = responses.message().await? {
        let Some(ty) = XdsType::of(&resp.type_url) else {
            anyhow::bail!("response of unexpected type {}", resp.type_url);
        };
        let received = Instant::now();
        decode(&resp)?;
        tx.send(DiscoveryRequest {
            type_url: resp.type_url.clone(),
            version_info: resp.version_info.clone(),
            response_nonce: resp.nonce.clone(),
            ..Default::default()
        })
        .await?;
        let i = XdsType::ALL.iter().position(|t| *t == ty).unwrap_or(0);
        let waited = std::mem::replace(&mut first[i], false).then(|| received - subscribed);
        events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Event {
                client,
                ty,
                acked: Instant::now(),
                waited,
                resources: resp.resources.len(),
            });
    }
    Ok(())
}

/// The clients that have ACKed CDS, EDS and LDS at least once among `events`.
pub fn ready_clients(events: &[Event]) -> std::collections::HashSet<usize> {
    let mut seen: std::collections::HashMap<usize, u8> = std::collections::HashMap::new();
    for e in events {
        *seen.entry(e.client).or_default() |= match e.ty {
            XdsType::Cluster => 1,
            XdsType::Endpoint => 2,
            XdsType::Listener => 4,
            XdsType::Route => 0,
        };
    }
    seen.into_iter()
        .filter(|(_, m)| *m == 7)
        .map(|(c, _)| c)
        .collect()
}
