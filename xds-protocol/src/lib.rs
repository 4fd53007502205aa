//! # umbra-xds-protocol
//!
//! The xDS protocol, free of I/O and of Envoy generation, shared by the zone's ADS server and
//! both ends of KDS:
//!
//! - [`delta`]: the incremental xDS state machine of the responding side (ADS and KDS);
//! - [`sotw`]: the state-of-the-world state machine (ADS);
//! - [`version`]: resource versions (content hashes), type versions, and the canonical JSON
//!   encoding KDS versions are computed over;
//! - [`type_url`]: the type URLs of the Envoy resources served.
//!
//! The generator (`umbra-xds`) builds snapshots; this crate only tracks what a peer holds and
//! what to send it next, so the protocol and the generation change apart.

pub mod delta;
pub mod sotw;
pub mod type_url;
pub mod version;
