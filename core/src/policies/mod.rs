//! The new `targetRef` policies: typed specs and their Kuma 2.7 validators.
//!
//! Each module owns one policy type: its serde model (Kuma's JSON names, unknown fields
//! rejected) and `validate()`, whose violation paths are rooted at `spec`.

pub mod mesh_circuit_breaker;
pub mod mesh_fault_injection;
pub mod mesh_http_route;
pub mod mesh_proxy_patch;
pub mod mesh_timeout;
pub mod mesh_traffic_permission;
