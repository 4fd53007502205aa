//! # umbra-runtime
//!
//! Process wiring both CP binaries share, with no knowledge of resources or policies:
//!
//! - [`flags`]: what the binaries check of their command line before they start;
//! - [`process`]: logging and tracing setup, W3C trace context across processes, listening
//!   sockets, the HTTP server loop, and shutdown (the signal, and draining tasks with a
//!   deadline);
//! - [`metrics`]: the Prometheus recorder, `GET /metrics`, the API request middleware and the
//!   metric names every layer records under.

pub mod flags;
pub mod metrics;
pub mod process;
#[cfg(feature = "testing")]
pub mod testing;
