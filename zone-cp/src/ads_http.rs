//! The ADS gRPC service as the HTTP/2 service the server routes to ([`AdsService`]): requests
//! are decoded by tonic as before; each response is encoded into a buffer of exactly its size,
//! sent as one data frame and freed once written.
//!
//! Tonic's generated server encodes every response of a stream into one buffer that lives as
//! long as the stream and keeps the capacity of the largest response it ever encoded (its
//! frozen frames share that allocation). For a DPP with 50 outbounds of 20 endpoints that is
//! the EDS response, 150 to 200 KB held per connected Envoy while nothing is sent (issue 39,
//! BENCHMARKS.md: about 225 KB of a zone's 356 KB per connected DPP was per stream). Here an
//! idle stream holds no encode buffer.
//!
//! The gRPC framing is the protocol's (gRPC over HTTP/2: `content-type: application/grpc`,
//! each message a 5-byte prefix (uncompressed flag, big-endian length) and the message, the
//! status in trailers); messages are never compressed (a compressed request is refused with
//! `UNIMPLEMENTED`), and requests are decoded up to [`MAX_REQUEST`] bytes, as tonic's server
//! does by default.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut as _, Bytes, BytesMut};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use http_body::Frame;
use prost::Message;
use tokio_stream::Stream;
use tonic::body::Body;
use tonic::codec::{Codec as _, Streaming};
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::Status;

/// The gRPC service name ADS is served under.
pub const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
/// The state-of-the-world method's path.
pub const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// The incremental method's path.
pub const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
/// The largest request message decoded, in bytes (tonic's server default); a larger one ends
/// the stream with `OUT_OF_RANGE`.
pub const MAX_REQUEST: usize = 4 * 1024 * 1024;
/// Length of a gRPC message prefix: compressed flag (1 byte) and length (4 bytes, big-endian).
const PREFIX: usize = 5;

/// An ADS implementation (the zone's [`crate::ads::Ads`]) as a service of HTTP requests
/// ([`tonic::service::Routes::add_service`]).
#[derive(Debug, Clone)]
pub struct AdsService<T>(pub T);

impl<T> NamedService for AdsService<T> {
    const NAME: &'static str = SERVICE;
}

impl<T> tower::Service<http::Request<Body>> for AdsService<T>
where
    T: AggregatedDiscoveryService + Clone,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let ads = self.0.clone();
        Box::pin(async move {
            if let Some(refused) = unsupported_encoding(req.headers()) {
                return Ok(refused);
            }
            let response = match req.uri().path() {
                SOTW_PATH => {
                    let request = decoded::<DiscoveryResponse, DiscoveryRequest>(req);
                    match ads.stream_aggregated_resources(request).await {
                        Ok(r) => respond(r),
                        Err(status) => status.into_http(),
                    }
                }
                DELTA_PATH => {
                    let request = decoded::<DeltaDiscoveryResponse, DeltaDiscoveryRequest>(req);
                    match ads.delta_aggregated_resources(request).await {
                        Ok(r) => respond(r),
                        Err(status) => status.into_http(),
                    }
                }
                other => Status::unimplemented(format!("no method {other}")).into_http(),
            };
            Ok(response)
        })
    }
}

/// `req` as the streaming request tonic's generated server would hand over: its metadata, its
/// extensions (the connection's peer address) and its body decoded as `Req` messages.
fn decoded<Resp, Req>(req: http::Request<Body>) -> tonic::Request<Streaming<Req>>
where
    Resp: Message + Send + 'static,
    Req: Message + Default + Send + 'static,
{
    let (parts, body) = req.into_parts();
    let mut codec = tonic_prost::ProstCodec::<Resp, Req>::default();
    let messages = Streaming::new_request(codec.decoder(), body, None, Some(MAX_REQUEST));
    tonic::Request::from_parts(
        MetadataMap::from_headers(parts.headers),
        parts.extensions,
        messages,
    )
}

/// The trailers-only `UNIMPLEMENTED` answer to a request whose messages are compressed
/// (`grpc-encoding` other than `identity`), as tonic's server gives when no compression is
/// enabled: the client learns from `grpc-accept-encoding` to send them uncompressed.
fn unsupported_encoding(headers: &http::HeaderMap) -> Option<http::Response<Body>> {
    let encoding = headers.get("grpc-encoding")?;
    if encoding.as_bytes() == b"identity" {
        return None;
    }
    let name = String::from_utf8_lossy(encoding.as_bytes()).into_owned();
    let mut response = Status::unimplemented(format!(
        "Content is compressed with `{name}` which isn't supported"
    ))
    .into_http();
    response.headers_mut().insert(
        "grpc-accept-encoding",
        http::HeaderValue::from_static("identity"),
    );
    Some(response)
}

/// A `200` gRPC response with `response`'s metadata as headers, streaming its messages, each
/// in its own exactly sized frame, ended by trailers with the stream's status (`OK`, or the
/// first error the messages yield).
fn respond<M, S>(response: tonic::Response<S>) -> http::Response<Body>
where
    M: Message + 'static,
    S: Stream<Item = Result<M, Status>> + Send + 'static,
{
    let (metadata, messages, _) = response.into_parts();
    let frames = Frames {
        messages: Box::pin(messages),
        done: false,
    };
    let mut http = http::Response::new(Body::new(http_body_util::StreamBody::new(frames)));
    *http.headers_mut() = metadata.into_headers();
    http.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    http
}

/// One gRPC message: its prefix and encoding, in one allocation of exactly that size.
///
/// # Errors
/// `OUT_OF_RANGE` when the message is longer than a gRPC length prefix can say (4 GiB).
pub fn frame<M: Message>(m: &M) -> Result<Bytes, Status> {
    let len = m.encoded_len();
    let prefix_len = u32::try_from(len).map_err(|_| {
        Status::out_of_range(format!("response of {len} bytes exceeds a gRPC frame"))
    })?;
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(prefix_len);
    m.encode_raw(&mut buf);
    Ok(buf.freeze())
}

/// The response body: one data frame per message, then the status trailers.
struct Frames<M> {
    messages: Pin<Box<dyn Stream<Item = Result<M, Status>> + Send>>,
    done: bool,
}

fn trailers(status: &Status) -> Frame<Bytes> {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // A message that cannot be a header value: the code alone.
        headers.insert("grpc-status", http::HeaderValue::from(status.code() as i32));
    }
    Frame::trailers(headers)
}

impl<M: Message> Stream for Frames<M> {
    type Item = Result<Frame<Bytes>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let next = match self.messages.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(next) => next,
        };
        let frame = match next.map(|r| r.and_then(|m| frame(&m))) {
            Some(Ok(bytes)) => Frame::data(bytes),
            Some(Err(status)) => {
                self.done = true;
                trailers(&status)
            }
            None => {
                self.done = true;
                trailers(&Status::ok(""))
            }
        };
        Poll::Ready(Some(Ok(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt as _;

    #[test]
    fn a_frame_is_the_grpc_prefix_and_the_encoding_in_one_exact_allocation() {
        let m = DiscoveryResponse {
            version_info: "v1".into(),
            nonce: "7".into(),
            ..Default::default()
        };
        let f = frame(&m).unwrap();
        let body = m.encode_to_vec();
        assert_eq!(f[0], 0, "not compressed");
        assert_eq!(
            u32::from_be_bytes([f[1], f[2], f[3], f[4]]) as usize,
            body.len()
        );
        assert_eq!(&f[5..], body.as_slice());
        assert_eq!(f.len(), 5 + body.len());
    }

    #[test]
    fn compressed_requests_are_refused_as_tonic_refuses_them() {
        let mut h = http::HeaderMap::new();
        assert!(unsupported_encoding(&h).is_none());
        h.insert("grpc-encoding", http::HeaderValue::from_static("identity"));
        assert!(unsupported_encoding(&h).is_none());
        h.insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
        let r = unsupported_encoding(&h).unwrap();
        assert_eq!(r.headers()["grpc-status"], "12");
        assert_eq!(r.headers()["grpc-accept-encoding"], "identity");
    }

    #[tokio::test]
    async fn frames_end_with_the_status_trailers() {
        let ok = |n: &str| {
            Ok(DiscoveryResponse {
                nonce: n.into(),
                ..Default::default()
            })
        };
        let messages = tokio_stream::iter(vec![
            ok("1"),
            ok("2"),
            Err(Status::unauthenticated("token expired")),
            ok("never sent"),
        ]);
        let frames: Vec<Frame<Bytes>> = Frames {
            messages: Box::pin(messages),
            done: false,
        }
        .map(|f| f.unwrap())
        .collect()
        .await;
        assert_eq!(frames.len(), 3);
        assert!(frames[0].is_data() && frames[1].is_data());
        let t = frames[2].trailers_ref().unwrap();
        assert_eq!(t["grpc-status"], "16");
        assert_eq!(t["grpc-message"], "token%20expired");
        let done: Vec<Frame<Bytes>> = Frames::<DiscoveryResponse> {
            messages: Box::pin(tokio_stream::empty()),
            done: false,
        }
        .map(|f| f.unwrap())
        .collect()
        .await;
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].trailers_ref().unwrap()["grpc-status"], "0");
    }
}
