//! # umbra-xds
//!
//! Pure Envoy xDS generation for Umbra (issue 3, in progress): no IO, no async runtime.
//!
//! - [`render`]: the Envoy descriptor pool (compiled at build time from the protos `envoy-types`
//!   ships) and proto3-JSON rendering/parsing of Envoy messages.
//!
//! The generation pipeline, bottom to top (a module imports only modules below it):
//! - leaves: [`names`] (filter, header and resource names), [`error`] ([`GenerateError`]),
//!   [`protobuf`] (`Any`, durations), [`tags`] (tag metadata, `x-kuma-tags`), [`envoy_core`]
//!   (socket addresses, the ADS config source, the EDS cluster base), [`interner`] (resources
//!   shared between DPPs), [`load_assignment`] (EDS resources), [`render`], [`snapshot`],
//!   [`draft`] (typed configs kept decoded while a snapshot is generated, encoded once sealed);
//! - [`context`]: mesh-wide facts, built once per mesh;
//! - [`base`]: the base sidecar generators (inbound, outbound, EDS, secrets; Kuma 2.7 shapes,
//!   no policy);
//! - [`plugins`]: the policy families (Timeout/MeshTimeout, FaultInjection/MeshFaultInjection,
//!   TrafficPermission/MeshTrafficPermission, CircuitBreaker/MeshCircuitBreaker,
//!   ProxyTemplate/MeshProxyPatch), one module each, and their order ([`plugins::ORDERED`],
//!   Kuma's);
//! - [`generate`]: the pipeline, base generators then plugins;
//! - [`ingress`]: a ZoneIngress proxy's config (SNI passthrough to the zone's endpoints).
//! - [`egress`]: a ZoneEgress proxy's config (SNI passthrough to other zones, TLS origination to
//!   ExternalServices, their permissions).
//!
//! Around it:
//! - [`snapshot`]: a DPP's typed resources by xDS type, its config document, content-hash
//!   versions and a static bootstrap for `envoy --mode validate`.
//! - [`diff`]: config documents (`{ typeUrl: { name: resource } }`) and RFC 6902 diffs between
//!   them (the shadow diff of the transition seed).
//! - [`wire_diff`]: the diff of two encodings of one resource, rendering only what differs.
//!
//! The xDS protocol (state machines, versions, type URLs) is `umbra-xds-protocol`'s; what a
//! DPP's config depends on (to regenerate only what a change reaches) is
//! `umbra_core::dependencies`.

pub mod base;
pub mod context;
pub mod diff;
pub mod draft;
pub mod egress;
pub mod envoy_core;
pub mod error;
pub mod generate;
pub mod ingress;
pub mod interner;
pub mod load_assignment;
pub mod names;
pub mod plugins;
pub mod protobuf;
pub mod render;
pub mod shadow;
pub mod snapshot;
pub mod tags;
pub mod wire_diff;

pub use error::GenerateError;
