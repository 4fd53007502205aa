//! The inter-CP server of one replica (`InterCpService`, `proto/umbra/kds/v1/intercp.proto`):
//! answers another replica's forwarded inspect call from this replica's own stream of the
//! zone ([`InspectHub::call_local`]: never forwarded again, so calls cannot loop), streaming
//! the zone's frames back as they come. A call's deadline is the caller's (`timeout_ms`, at
//! most [`MAX_TIMEOUT`]); its trace continues the caller's. Errors end the stream with the
//! status [`super::calls::status_of`] gives; frames sent before stand. Served over mutual TLS only
//! ([`super::tls`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use umbra_kds::pb::dataplane_inspect::Endpoint;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::inspect_response::Body;
use umbra_kds::pb::inter_cp_service_server::{InterCpService, InterCpServiceServer};
use umbra_kds::pb::{ForwardedInspect, InspectError, InspectRequest, InspectResponse};
use umbra_kds::MAX_MESSAGE_BYTES;

use super::calls::status_of;
use crate::inspect::forward::older_zone;
use crate::inspect::hub::{InspectHub, CALL_QUEUE};
use crate::zones::ZoneRegistry;

/// Longest deadline a forwarded call may ask for (the longest any caller gives a zone: a
/// fleet-wide diff's `timeout=`).
pub const MAX_TIMEOUT: Duration = crate::inspect::shadow_diff::query::MAX_FLEET_TIMEOUT;

/// HTTP/2 PING interval and timeout on inter-CP connections: a replica that went away is
/// noticed, and its calls end, within their sum.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

type FrameStream = Pin<Box<dyn Stream<Item = Result<InspectResponse, Status>> + Send>>;

/// The inter-CP gRPC service of one replica.
#[derive(Debug, Clone)]
pub struct InterCpServer {
    hub: Arc<InspectHub>,
    zones: Arc<ZoneRegistry>,
}

impl InterCpServer {
    /// A server answering from `hub`'s own zone streams; `zones` is what this replica knows
    /// of the zones connected to it.
    pub fn new(hub: Arc<InspectHub>, zones: Arc<ZoneRegistry>) -> Self {
        Self { hub, zones }
    }

    /// The tonic service, with KDS's message size limits.
    pub fn into_server(self) -> InterCpServiceServer<Self> {
        InterCpServiceServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

/// Serve `server` on `listener` over `tls` (mutual: [`super::tls::InterCpTls::server`]) until
/// `stop` turns `true`.
///
/// # Errors
/// A TLS configuration tonic refuses; a failure of the accept loop.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: InterCpServer,
    tls: tonic::transport::ServerTlsConfig,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tonic::transport::Server::builder()
        .tls_config(tls)?
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .initial_stream_window_size(Some(umbra_kds::STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(umbra_kds::CONNECTION_WINDOW_BYTES))
        .add_service(server.into_server())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            umbra_runtime::process::stopped(stop),
        )
        .await?;
    Ok(())
}

/// One error frame, the call's last.
fn error_frame(id: u64, status: u32, message: String) -> InspectResponse {
    InspectResponse {
        id,
        last: true,
        body: Some(Body::Error(InspectError { status, message })),
    }
}

#[tonic::async_trait]
impl InterCpService for InterCpServer {
    type InspectStream = FrameStream;

    async fn inspect(
        &self,
        req: Request<ForwardedInspect>,
    ) -> Result<Response<Self::InspectStream>, Status> {
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
        let ForwardedInspect { zone, request } = req.into_inner();
        if !umbra_kds::valid_zone_name(&zone) {
            return Err(Status::invalid_argument(format!(
                "{zone:?} is not a zone name"
            )));
        }
        let Some(InspectRequest {
            id,
            timeout_ms,
            trace_context,
            kind: Some(kind),
        }) = request
        else {
            return Err(Status::invalid_argument(
                "the forwarded call has no request",
            ));
        };
        if timeout_ms == 0 {
            return Err(Status::invalid_argument(
                "the forwarded call has no deadline",
            ));
        }
        let timeout = Duration::from_millis(timeout_ms).min(MAX_TIMEOUT);
        let span = tracing::info_span!("inter_cp.serve", %zone, caller_id = id, %peer);
        umbra_runtime::process::set_parent_or_root(&span, &trace_context);
        if let Kind::Dataplane(d) = &kind {
            let endpoint = Endpoint::try_from(d.endpoint).unwrap_or_default();
            if let Some(why) = older_zone(&self.zones, &zone, endpoint) {
                let frame = error_frame(id, 501, why);
                return Ok(Response::new(Box::pin(tokio_stream::once(Ok(frame)))));
            }
        }
        let mut call = self
            .hub
            .call_local(&zone, kind, timeout)
            .instrument(span.clone())
            .await
            .map_err(|e| status_of(&e))?;
        tracing::debug!(parent: &span, id = call.id(), "inter-CP: call forwarded to the zone");
        let (tx, rx) = mpsc::channel(CALL_QUEUE);
        let relay = async move {
            loop {
                let (item, end) = match call.next().await {
                    Ok(Some(frame)) => {
                        let last = frame.last;
                        (Ok(frame), last)
                    }
                    Ok(None) => return,
                    Err(e) => (Err(status_of(&e)), true),
                };
                // The caller gone: dropping the call unregisters it from the zone's link.
                if tx.send(item).await.is_err() || end {
                    return;
                }
            }
        };
        tokio::spawn(relay.instrument(span));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
