//! # umbra-xds
//!
//! Pure Envoy xDS generation for Umbra (issue 3, in progress): no IO, no async runtime.
//!
//! - [`render`]: the Envoy descriptor pool (compiled at build time from the protos `envoy-types`
//!   ships) and proto3-JSON rendering/parsing of Envoy messages.
//! - [`context`], [`generate`]: mesh-wide facts and the base sidecar generators (Kuma 2.7 shapes);
//! - [`plugins`]: the policy families (MeshTimeout/Timeout, MeshFaultInjection/FaultInjection,
//!   MeshTrafficPermission/TrafficPermission, MeshCircuitBreaker/CircuitBreaker,
//!   MeshProxyPatch/ProxyTemplate) editing a snapshot in Kuma's order;
//! - [`snapshot`]: a DPP's typed resources by xDS type, its config document, content-hash
//!   versions and a static bootstrap for `envoy --mode validate`.
//! - [`diff`]: config documents (`{ typeUrl: { name: resource } }`) and RFC 6902 diffs between
//!   them (the shadow diff of the transition seed).
//! - [`wire_diff`]: the diff of two encodings of one resource, rendering only what differs.

pub mod context;
pub mod delta;
pub mod deps;
pub mod diff;
pub mod generate;
pub mod plugins;
pub mod render;
pub mod snapshot;
pub mod sotw;
pub mod util;
pub mod wire_diff;
