//! What the ADS server ([`crate::ads`]) records in logs and traces:
//!
//! - one `ads.stream` span per stream: `stream` (a process-wide counter), `api` (`sotw` or
//!   `delta`), `peer` (the Envoy's address) and, once the first request named it, `dpp`
//!   (`<mesh>/<name>`; a ZoneIngress: its name). Every event of the stream's task carries them.
//! - `xDS push` and `xDS ACK` events (debug level) with `type_url`, `version` and `nonce`;
//! - when the reconciliation that produced a push continued a traced change (a policy `PUT` on
//!   the Global, through KDS: [`crate::reconciler::Reconciler::push_trace`]), an `xds.push`
//!   span in that trace and, when Envoy ACKs the push, an `xds.ack` span in it too ([`Traces`]):
//!   one trace runs from the Global's write to the Envoy's ACK.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use umbra_core::dataplane::DpKey;
use umbra_runtime::process::{set_parent, TraceContext};

/// Streams opened so far in this process: the next stream's `stream` field.
static STREAMS: AtomicU64 = AtomicU64::new(0);

/// The span of one ADS stream of flavour `api` (`sotw`, `delta`) from `peer`; `dpp` is
/// recorded by [`opened`].
pub fn stream_span(api: &'static str, peer: Option<std::net::SocketAddr>) -> tracing::Span {
    let stream = STREAMS.fetch_add(1, Ordering::Relaxed);
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    tracing::info_span!("ads.stream", stream, api, peer, dpp = tracing::field::Empty)
}

/// Record on the current stream span the DPP its first request named.
pub fn opened(key: &DpKey) {
    let dpp = if key.mesh.is_empty() {
        key.name.clone()
    } else {
        format!("{}/{}", key.mesh, key.name)
    };
    tracing::Span::current().record("dpp", dpp);
}

/// The trace context of the latest push of each type URL on one stream, while Envoy has not
/// ACKed it (only pushes made under a traced reconciliation).
#[derive(Debug, Default)]
pub struct Traces(HashMap<String, TraceContext>);

impl Traces {
    /// `type_url` was pushed to `key` (`nonce`, `version`) by the reconciliation whose trace is
    /// `parent`: log it, and record an `xds.push` span in that trace when there is one.
    pub fn pushed(
        &mut self,
        parent: Option<TraceContext>,
        key: &DpKey,
        type_url: &str,
        api: &'static str,
    ) {
        let Some(parent) = parent else {
            self.0.remove(type_url);
            return;
        };
        let span =
            tracing::info_span!("xds.push", mesh = %key.mesh, dataplane = %key.name, type_url, api);
        set_parent(&span, &parent);
        span.in_scope(|| tracing::debug!("pushed"));
        self.0.insert(type_url.to_owned(), parent);
    }

    /// Envoy ACKed `type_url` at `version`: log it, and record an `xds.ack` span in the trace
    /// of the push it acknowledges, if that push was traced.
    pub fn acked(&mut self, key: &DpKey, type_url: &str, version: &str, api: &'static str) {
        tracing::debug!(type_url, version, "xDS ACK");
        if let Some(parent) = self.0.remove(type_url) {
            let span = tracing::info_span!("xds.ack", mesh = %key.mesh, dataplane = %key.name, type_url, version, api);
            set_parent(&span, &parent);
            span.in_scope(|| tracing::debug!("acknowledged"));
        }
    }
}
