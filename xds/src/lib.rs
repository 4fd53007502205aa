//! # umbra-xds
//!
//! Pure Envoy xDS generation for Umbra (issue 3, in progress): no IO, no async runtime.
//!
//! - [`render`]: the Envoy descriptor pool (compiled at build time from the protos `envoy-types`
//!   ships) and proto3-JSON rendering/parsing of Envoy messages.
//! - [`diff`]: config documents (`{ typeUrl: { name: resource } }`) and RFC 6902 diffs between
//!   them (the shadow diff of the transition seed).

pub mod diff;
pub mod render;
