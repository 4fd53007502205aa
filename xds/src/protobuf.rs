//! Protobuf well-known types as generation builds them: messages packed into and unpacked from
//! `google.protobuf.Any`, and `google.protobuf.Duration`s. A leaf: it imports nothing from this
//! crate.

use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};
use prost::{Message, Name};

/// Pack a message into `google.protobuf.Any` with its type URL.
pub fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

/// Unpack an `Any` into `M` when the type URL matches.
pub fn unpack<M: Message + Name + Default>(a: &Any) -> Option<M> {
    if a.type_url == M::type_url() {
        M::decode(a.value.as_slice()).ok()
    } else {
        None
    }
}

/// A protobuf duration of whole seconds.
pub fn secs(s: i64) -> PbDuration {
    PbDuration {
        seconds: s,
        nanos: 0,
    }
}

/// A protobuf duration of whole milliseconds (`ms` >= 0).
pub fn millis(ms: u32) -> PbDuration {
    PbDuration {
        seconds: i64::from(ms / 1000),
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

/// A protobuf duration from a Kuma duration.
pub fn duration(d: &umbra_core::duration::Duration) -> PbDuration {
    let (seconds, nanos) = d.to_secs_nanos();
    PbDuration { seconds, nanos }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_round_trip() {
        use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
        let a = any(&Router::default());
        assert!(unpack::<Router>(&a).is_some());
        assert!(unpack::<envoy_types::pb::envoy::config::cluster::v3::Cluster>(&a).is_none());
    }
}
