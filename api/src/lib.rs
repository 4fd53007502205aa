//! HTTP API pieces shared by the Global CP and the Zone CP, so both speak Kuma's resource API
//! the same way: the one [`error::ApiError`] (Kuma's error body `{type, title, status,
//! detail, instance, invalid_parameters}` with Umbra's `invalidParameters`), decoding a
//! resource body against its path ([`resource`]) and paging ([`paging`]), JSON-or-YAML output
//! ([`negotiate`]) and OpenAPI-vs-router checks ([`openapi`]), what a CP tells about itself
//! (`/_resources`: [`about`]), Kuma's overviews ([`insights`], [`mesh_insights`],
//! [`service_insights`]), Kuma's `InspectRules` document ([`inspect_rules`]), and the routes
//! both CPs serve ([`crud`], [`shared_routes`]).
//!
//! HTTP only: process wiring (flags, logs, traces, metrics, shutdown) is `umbra-runtime`'s,
//! trust state and certificates `umbra-pki`'s.

pub mod about;
pub mod authn;
pub mod crud;
pub mod error;
pub mod filters;
pub mod insights;
pub mod inspect_rules;
pub mod mesh_insights;
pub mod negotiate;
pub mod observed;
pub mod openapi;
pub mod paging;
pub mod resource;
pub mod service;
pub mod service_insights;
pub mod shared_routes;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
