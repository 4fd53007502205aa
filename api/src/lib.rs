//! HTTP API pieces shared by the Global CP and the Zone CP, so both speak Kuma's resource API
//! the same way: the one [`error::ApiError`] (Kuma's error body `{type, title, status,
//! detail, instance, invalid_parameters}` with Umbra's `invalidParameters`), decoding a
//! resource body against its path ([`resource`]) and paging ([`paging`]), JSON-or-YAML output
//! ([`negotiate`]) and OpenAPI-vs-router checks ([`openapi`]), Prometheus metrics
//! ([`metrics`]), the binaries' startup checks of their flags ([`flags`]), and their logging,
//! tracing and shutdown signal ([`process`]), the
//! builtin mesh CAs the owning CP keeps in its store
//! ([`mesh_ca`]), what a CP tells about itself (`/_resources`: [`about`]), and Kuma's overviews
//! ([`insights`], [`mesh_insights`], [`service_insights`]).

pub mod about;
pub mod authn;
pub mod crud;
pub mod error;
pub mod filters;
pub mod flags;
pub mod insights;
pub mod mesh_ca;
pub mod mesh_insights;
pub mod metrics;
pub mod negotiate;
pub mod openapi;
pub mod paging;
pub mod process;
pub mod resource;
pub mod service;
pub mod service_insights;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
pub mod trust;
