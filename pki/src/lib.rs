//! # umbra-pki
//!
//! Trust state and certificates, on the store contract ([`umbra_store::Store`]), with no HTTP:
//!
//! - [`trust`]: the token trust bundle every check reads and, on the CP that issues tokens, the
//!   authority holding the signing keys, revocation lists and admin token in the store.
//! - [`mesh_ca`]: the builtin mesh CAs (one self-signed root per mesh and `builtin` backend),
//!   created by the CP that owns the mesh and kept in its store.
//! - [`envoy_admin`]: the zone's Envoy-admin CA and the server and client certificates of the
//!   mTLS admin listener `kuma:envoy:admin`.
//! - [`inter_cp`]: the Global replicas' inter-CP CA, kept in the store they share, and each
//!   replica's own certificate (server and client of the mTLS inter-CP service).
//! - [`self_signed`]: self-signed CAs issuing leaf certificates only (the zone's data-plane
//!   server CA, Envoy-admin CA, and the inter-CP CA), kept in a store ([`self_signed::StoredCa`]).
//! - [`identity`]: the DPP identity certificates a zone issues from those roots, and the SDS
//!   secrets that carry them.
//!
//! The API crate maps [`trust::TrustError`] to HTTP answers; the zone's reconciler, ADS server
//! and KDS sink use this crate directly.

pub mod envoy_admin;
pub mod identity;
pub mod inter_cp;
pub mod mesh_ca;
pub mod self_signed;
pub mod trust;
