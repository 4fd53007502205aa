//! The inter-CP client of one replica: the hub's [`Forwarder`]. A call for a zone this replica
//! has no stream of goes to the live replica holding the zone's lease (read from the
//! [`Coordinator`], kept for [`HOLDERS_TTL`] and read again on a miss), over one gRPC
//! connection per replica address (cached, at most [`MAX_PEERS`], least recently used dropped
//! first), with mutual TLS ([`super::tls`]). Everything happens within the call's deadline: the
//! lookup, the connection (at most [`CONNECT_TIMEOUT`] too) and every frame. Each forwarded
//! call runs in an `inter_cp.forward` span and is counted in
//! [`super::calls::INTER_CP_CALLS`] when it ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::Streaming;
use tracing::Instrument as _;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inter_cp_service_client::InterCpServiceClient;
use umbra_kds::pb::{ForwardedInspect, InspectRequest, InspectResponse};
use umbra_kds::MAX_MESSAGE_BYTES;

use super::calls::{call_error_of, count};
use super::server::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use crate::inspect::hub::{Call, CallError, Forwarder, Frames};
use crate::replicas::{Coordinator, ZoneHold};
use crate::store::StoreError;

/// How long a read of the zone leases serves lookups.
pub const HOLDERS_TTL: Duration = Duration::from_secs(1);
/// A lookup that finds no other holder reads the leases again when they are older than this
/// (a zone that just moved is found at once).
pub const REFRESH_ON_MISS: Duration = Duration::from_millis(100);
/// Longest wait for a connection to another replica (less when the call's deadline is nearer).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Replica addresses with a cached connection.
pub const MAX_PEERS: usize = 32;

/// The replica holding a zone, as the leases name it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    name: String,
    address: String,
}

/// The zone leases as last read.
#[derive(Debug)]
struct Leases {
    read_at: Instant,
    zones: Arc<BTreeMap<String, ZoneHold>>,
}

/// Forwards calls to the replicas holding their zones.
pub struct InterCpClient {
    coordinator: Arc<dyn Coordinator>,
    tls: ClientTlsConfig,
    /// Read one at a time: concurrent lookups share one read.
    leases: tokio::sync::Mutex<Option<Leases>>,
    /// Per replica address: its connection and when it was last used.
    channels: Mutex<HashMap<String, (Channel, Instant)>>,
}

impl std::fmt::Debug for InterCpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterCpClient")
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

impl InterCpClient {
    /// A client finding holders through `coordinator`, connecting with `tls` (the CA and this
    /// replica's certificate: [`super::tls::InterCpTls::client`]).
    pub fn new(coordinator: Arc<dyn Coordinator>, tls: ClientTlsConfig) -> Self {
        Self {
            coordinator,
            tls,
            leases: tokio::sync::Mutex::new(None),
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// The zone leases, read again when older than `max_age`; with their age.
    async fn leases(
        &self,
        max_age: Duration,
    ) -> Result<(Arc<BTreeMap<String, ZoneHold>>, Duration), StoreError> {
        let mut kept = self.leases.lock().await;
        if let Some(l) = kept.as_ref().filter(|l| l.read_at.elapsed() <= max_age) {
            return Ok((l.zones.clone(), l.read_at.elapsed()));
        }
        let zones = Arc::new(self.coordinator.zones().await?);
        *kept = Some(Leases {
            read_at: Instant::now(),
            zones: zones.clone(),
        });
        Ok((zones, Duration::ZERO))
    }

    /// The live replica other than this one holding `zone`, if any.
    async fn holder(&self, zone: &str) -> Result<Option<Holder>, StoreError> {
        let me = self.coordinator.me().map(|m| m.id);
        let pick = |zones: &BTreeMap<String, ZoneHold>| match zones.get(zone) {
            Some(ZoneHold::Held {
                replica,
                replica_name,
                inter_cp,
                ..
            }) if Some(*replica) != me => Some(Holder {
                name: replica_name.clone(),
                address: inter_cp.clone(),
            }),
            _ => None,
        };
        let (zones, age) = self.leases(HOLDERS_TTL).await?;
        if let Some(h) = pick(&zones) {
            return Ok(Some(h));
        }
        if age > REFRESH_ON_MISS {
            return Ok(pick(&self.leases(Duration::ZERO).await?.0));
        }
        Ok(None)
    }

    /// The connection to the replica at `address` (`host:port`), made (lazily: it connects
    /// with the first call) when there is none.
    fn channel(&self, address: &str) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((channel, used)) = channels.get_mut(address) {
            *used = Instant::now();
            return Ok(channel.clone());
        }
        let host = host_of(address)
            .ok_or_else(|| format!("{address:?} is not an inter-CP address (host:port)"))?;
        let endpoint = Endpoint::from_shared(format!("https://{address}"))
            .and_then(|e| e.tls_config(self.tls.clone().domain_name(host)))
            .map_err(|e| format!("inter-CP address {address:?}: {e}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .initial_stream_window_size(umbra_kds::STREAM_WINDOW_BYTES)
            .initial_connection_window_size(umbra_kds::CONNECTION_WINDOW_BYTES);
        if channels.len() >= MAX_PEERS {
            let oldest = channels
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(a, _)| a.clone());
            if let Some(a) = oldest {
                channels.remove(&a);
            }
        }
        let channel = endpoint.connect_lazy();
        channels.insert(address.to_owned(), (channel.clone(), Instant::now()));
        Ok(channel)
    }

    /// Forget the connection to `address` (it failed; the next call connects again).
    fn forget(&self, address: &str) {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(address);
    }

    /// Open the forwarded call of `request` for `zone` on `holder`.
    async fn open(
        &self,
        zone: &str,
        holder: &Holder,
        mut request: InspectRequest,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Streaming<InspectResponse>, CallError> {
        let unreachable = |reason: String| CallError::Unreachable {
            zone: zone.to_owned(),
            reason: format!(
                "Global replica {:?} ({}): {reason}",
                holder.name, holder.address
            ),
        };
        if holder.address.is_empty() {
            return Err(unreachable(
                "it serves no inter-CP address (a release before inter-CP)".into(),
            ));
        }
        let channel = self.channel(&holder.address).map_err(unreachable)?;
        let left = deadline.saturating_duration_since(Instant::now());
        request.timeout_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        request.trace_context = umbra_runtime::process::current_context();
        let mut client = InterCpServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let forwarded = ForwardedInspect {
            zone: zone.to_owned(),
            request: Some(request),
        };
        match tokio::time::timeout_at(deadline, client.inspect(forwarded)).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => {
                let e = call_error_of(&status, zone, &holder.name, timeout);
                if matches!(e, CallError::Unreachable { .. }) {
                    self.forget(&holder.address);
                }
                Err(e)
            }
            Err(_) => Err(CallError::Timeout {
                zone: zone.to_owned(),
                timeout,
            }),
        }
    }
}

/// The host of `host:port` (`[ipv6]:port` without brackets).
fn host_of(address: &str) -> Option<&str> {
    let (host, port) = address.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (!host.is_empty()).then_some(host)
}

#[async_trait::async_trait]
impl Forwarder for InterCpClient {
    async fn forward(
        &self,
        zone: &str,
        id: u64,
        kind: Kind,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Option<Call>, CallError> {
        let holder = match tokio::time::timeout_at(deadline, self.holder(zone)).await {
            Ok(Ok(Some(h))) => h,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => {
                count("unreachable");
                return Err(CallError::Unreachable {
                    zone: zone.to_owned(),
                    reason: format!("the replicas' zone leases cannot be read: {e}"),
                });
            }
            Err(_) => {
                count("timeout");
                return Err(CallError::Timeout {
                    zone: zone.to_owned(),
                    timeout,
                });
            }
        };
        let span = tracing::info_span!(
            "inter_cp.forward",
            %zone,
            id,
            replica = %holder.name,
            address = %holder.address
        );
        let request = InspectRequest {
            id,
            timeout_ms: 0,
            trace_context: Default::default(),
            kind: Some(kind),
        };
        match self
            .open(zone, &holder, request, deadline, timeout)
            .instrument(span.clone())
            .await
        {
            Ok(stream) => Ok(Some(Call::forwarded(
                zone,
                id,
                Box::new(RemoteFrames {
                    stream,
                    zone: zone.to_owned(),
                    replica: holder.name,
                    timeout,
                    span,
                }),
                deadline,
                timeout,
            ))),
            Err(e) => {
                tracing::warn!(parent: &span, error = %e, "inter-CP: the call could not be forwarded");
                count(e.outcome());
                Err(e)
            }
        }
    }

    async fn known(&self, zone: &str) -> bool {
        let known = match self.leases(HOLDERS_TTL).await {
            Ok((zones, _)) if zones.contains_key(zone) => Ok(true),
            Ok((_, age)) if age > REFRESH_ON_MISS => self
                .leases(Duration::ZERO)
                .await
                .map(|(zones, _)| zones.contains_key(zone)),
            Ok(_) => Ok(false),
            Err(e) => Err(e),
        };
        known.unwrap_or_else(|e| {
            tracing::warn!(%zone, error = %e, "inter-CP: the zone leases cannot be read");
            false
        })
    }
}

/// The frames of a forwarded call, from the holder's stream.
struct RemoteFrames {
    stream: Streaming<InspectResponse>,
    zone: String,
    replica: String,
    timeout: Duration,
    span: tracing::Span,
}

impl std::fmt::Debug for RemoteFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFrames")
            .field("zone", &self.zone)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Frames for RemoteFrames {
    async fn next(&mut self) -> Result<Option<InspectResponse>, CallError> {
        self.stream
            .message()
            .instrument(self.span.clone())
            .await
            .map_err(|s| call_error_of(&s, &self.zone, &self.replica, self.timeout))
    }

    fn ended(&mut self, outcome: &'static str) {
        count(outcome);
        if outcome != "ok" {
            tracing::debug!(parent: &self.span, outcome, "inter-CP: forwarded call ended without its last frame");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_inter_cp_addresses() {
        assert_eq!(host_of("10.0.0.7:5682"), Some("10.0.0.7"));
        assert_eq!(host_of("global-2:5682"), Some("global-2"));
        assert_eq!(host_of("[fd00::7]:5682"), Some("fd00::7"));
        assert_eq!(host_of("global-2"), None);
        assert_eq!(host_of(":5682"), None);
        assert_eq!(host_of("global-2:x"), None);
    }
}
