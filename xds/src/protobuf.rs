//! Protobuf well-known types as generation builds them: messages packed into and unpacked from
//! `google.protobuf.Any`, and `google.protobuf.Duration`s. A leaf: it imports nothing from this
//! crate.

use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};
use prost::{Message, Name};

/// The first byte of a draft token's value ([`crate::draft`]): a tag of field number 0, which
/// starts no protobuf encoding.
pub const DRAFT_TOKEN_MARK: u8 = 0;

/// Whether `a` holds a draft token ([`crate::draft`]) rather than an encoded message.
pub fn is_draft_token(a: &Any) -> bool {
    a.value.first() == Some(&DRAFT_TOKEN_MARK)
}

#[cfg(test)]
thread_local! {
    /// `(packs, unpacks)` on this thread (tests count the round trips of a generation).
    pub(crate) static PACKS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Pack a message into `google.protobuf.Any` with its type URL.
pub fn any<M: Message + Name>(m: &M) -> Any {
    #[cfg(test)]
    PACKS.with(|c| c.set((c.get().0 + 1, c.get().1)));
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

/// Whether `type_url` is `M`'s (`type.googleapis.com/<package>.<name>`), without building it.
pub fn is_type<M: Name>(type_url: &str) -> bool {
    type_url
        .strip_prefix("type.googleapis.com/")
        .and_then(|n| n.strip_prefix(M::PACKAGE))
        .and_then(|n| n.strip_prefix('.'))
        == Some(M::NAME)
}

/// Unpack an `Any` into `M` when the type URL matches. A draft token is not a packed message
/// (debug builds panic on one): read it with [`crate::draft::read`].
pub fn unpack<M: Message + Name + Default>(a: &Any) -> Option<M> {
    debug_assert!(
        !is_draft_token(a),
        "a draft of {} read as a packed message",
        a.type_url
    );
    #[cfg(test)]
    PACKS.with(|c| c.set((c.get().0, c.get().1 + 1)));
    if is_type::<M>(&a.type_url) {
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
        assert!(is_type::<Router>(&Router::type_url()));
        assert!(!is_type::<Router>(
            "type.googleapis.com/envoy.extensions.filters.http.router.v3.Routerx"
        ));
        assert!(!is_type::<Router>(
            "envoy.extensions.filters.http.router.v3.Router"
        ));
    }
}
