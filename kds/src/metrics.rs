//! The KDS metric families (`metrics` facade; the process installs the recorder) and the one
//! function that turns a sync [`Event`] into them, shared by the Global and both zone halves.

use crate::sync::Event;

/// `umbra_kds_responses_total{direction, type}`: KDS responses (`global_to_zone`,
/// `zone_to_global`), counted by each side.
pub const KDS_RESPONSES: &str = "umbra_kds_responses_total";
/// `umbra_kds_acks_total{direction, type}`: KDS responses the peer accepted.
pub const KDS_ACKS: &str = "umbra_kds_acks_total";
/// `umbra_kds_nacks_total{direction, type}`: KDS responses the peer rejected (wholly or per
/// resource).
pub const KDS_NACKS: &str = "umbra_kds_nacks_total";

/// Count a KDS sync event in `direction` (`global_to_zone`, `zone_to_global`) under
/// `umbra_kds_{responses,acks,nacks}_total{direction, type}`. Each side counts what it sees
/// (the responding side `Sent`/`Ack`/`Nack`, the requesting side `Applied`), so a Global and
/// its zone agree.
pub fn record(direction: &'static str, event: &Event) {
    let count = |name: &'static str, type_url: &str| {
        metrics::counter!(name, "direction" => direction, "type" => type_url.to_owned())
            .increment(1);
    };
    match event {
        Event::Sent { type_url, .. } => count(KDS_RESPONSES, type_url),
        Event::Ack { type_url, .. } => count(KDS_ACKS, type_url),
        Event::Nack { type_url, .. } => count(KDS_NACKS, type_url),
        Event::Applied {
            type_url, rejected, ..
        } => {
            count(KDS_RESPONSES, type_url);
            count(
                if rejected.is_empty() {
                    KDS_ACKS
                } else {
                    KDS_NACKS
                },
                type_url,
            );
        }
    }
}

/// Describe the KDS families to the installed recorder (after `umbra_runtime::metrics::install`).
pub fn describe() {
    metrics::describe_counter!(KDS_RESPONSES, "KDS responses sent");
    metrics::describe_counter!(KDS_ACKS, "KDS responses ACKed by the peer");
    metrics::describe_counter!(KDS_NACKS, "KDS responses NACKed by the peer");
}
