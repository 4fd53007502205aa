//! KDS gRPC definitions: the `umbra.kds.v1` protocol between the Global CP and Zone CPs
//! (`proto/umbra/kds/v1/kds.proto`), and the inter-CP service between Global replicas
//! (`intercp.proto`: inspect calls forwarded to the replica holding the zone), generated with
//! prost + tonic. The messages on the wire
//! are Envoy's delta xDS messages (`envoy_types`); this crate adds the service and the
//! resource body ([`pb::KdsResource`]), the type-URL and naming conventions both sides use
//! ([`resource`]), and the two halves of a KDS stream, free of gRPC ([`sync`]).

pub mod metrics;
pub mod resource;
pub mod sync;

/// Generated `umbra.kds.v1` code: [`pb::KdsResource`], `kds_service_client`, `kds_service_server`,
/// and the inter-CP [`pb::ForwardedInspect`], `inter_cp_service_client`, `inter_cp_service_server`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("umbra.kds.v1");
}

/// Type URL of the [`pb::KdsResource`] body inside `Resource.resource` (an `Any`).
pub const KDS_RESOURCE_TYPE_URL: &str = "type.googleapis.com/umbra.kds.v1.KdsResource";

/// gRPC metadata key a zone may send with its configured name; the Global refuses the stream
/// when it differs from the zone in the token (the token alone is the identity).
pub const ZONE_NAME_METADATA: &str = "x-umbra-zone";

/// `true` for a valid zone name: an RFC 1123 label (1-63 characters of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit). Zone names appear in resource names, labels
/// and [`ZONE_NAME_METADATA`], and never contain a dot. The one rule: the Global issues zone
/// tokens for such names only, and `zone-cp --zone` refuses any other.
pub fn valid_zone_name(zone: &str) -> bool {
    !zone.is_empty()
        && zone.len() <= 63
        && zone
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !zone.starts_with('-')
        && !zone.ends_with('-')
}

/// gRPC request metadata: the zone CP's release (its `CARGO_PKG_VERSION`), shown as the
/// subscription's `version.kumaCp` in the Global's `ZoneOverview`. A value that is not a plain
/// version (at most 64 characters of `[0-9A-Za-z.+-]`) is ignored.
pub const ZONE_VERSION_METADATA: &str = "x-umbra-zone-version";

/// `v` when it is a plain version a zone may report in [`ZONE_VERSION_METADATA`].
pub fn plain_version(v: &str) -> Option<&str> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'));
    ok.then_some(v)
}

/// gRPC response metadata: the Global's store identity (`umbra_store::STORE_IDENTITY`),
/// sent on every KDS stream so a zone can tell a Global that lost its data from the one it
/// synced from.
pub const GLOBAL_STORE_METADATA: &str = "x-umbra-global-store";

/// gRPC request metadata: the Global store identity the zone recorded (empty before its first
/// sync), so the Global can report a zone that holds another store's data.
pub const RECORDED_STORE_METADATA: &str = "x-umbra-recorded-global-store";

/// Largest KDS message either side accepts (bytes); responses are chunked well below it.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// HTTP/2 flow-control window of one KDS stream (bytes), both sides.
pub const STREAM_WINDOW_BYTES: u32 = 1 << 20;

/// HTTP/2 flow-control window of a KDS connection (bytes), both sides: several times a
/// stream's, so the three streams of a zone never starve each other.
pub const CONNECTION_WINDOW_BYTES: u32 = 8 << 20;
