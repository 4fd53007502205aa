//! How an inspect call crosses from one replica to another: the [`CallError`] a holder ends a
//! call with travels as a gRPC status ([`status_of`]) and is read back as the same error
//! ([`call_error_of`]); forwarded calls are counted ([`INTER_CP_CALLS`]).

use std::time::Duration;

use tonic::{Code, Status};

use crate::inspect::hub::CallError;

/// `umbra_inter_cp_calls_total{outcome}`: inspect calls this replica forwarded to the replica
/// holding the zone (`ok`, or the [`CallError::outcome`] they ended with).
pub const INTER_CP_CALLS: &str = "umbra_inter_cp_calls_total";

/// Count a forwarded call's end.
pub fn count(outcome: &'static str) {
    metrics::counter!(INTER_CP_CALLS, "outcome" => outcome).increment(1);
}

/// The gRPC status an inter-CP server ends a call with for `e` (read back by
/// [`call_error_of`]).
pub fn status_of(e: &CallError) -> Status {
    let message = e.to_string();
    match e {
        CallError::Offline(_) => Status::not_found(message),
        CallError::Busy(_) => Status::resource_exhausted(message),
        CallError::Timeout { .. } => Status::deadline_exceeded(message),
        CallError::Disconnected(_) => Status::aborted(message),
        CallError::Unreachable { .. } => Status::unavailable(message),
    }
}

/// The [`CallError`] a call to `zone` (deadline `timeout`) forwarded to `replica` ends with
/// when the replica answers `status` ([`status_of`]); any other status (the transport's, TLS,
/// a replica without the service) is [`CallError::Unreachable`].
pub fn call_error_of(status: &Status, zone: &str, replica: &str, timeout: Duration) -> CallError {
    let zone = zone.to_owned();
    match status.code() {
        Code::NotFound => CallError::Offline(zone),
        Code::ResourceExhausted => CallError::Busy(zone),
        Code::DeadlineExceeded => CallError::Timeout { zone, timeout },
        Code::Aborted => CallError::Disconnected(zone),
        code => CallError::Unreachable {
            zone,
            reason: format!(
                "Global replica {replica:?} answered {code:?}: {}",
                status.message()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_errors_survive_the_trip_between_replicas() {
        let timeout = Duration::from_secs(3);
        for e in [
            CallError::Offline("z".into()),
            CallError::Busy("z".into()),
            CallError::Timeout {
                zone: "z".into(),
                timeout,
            },
            CallError::Disconnected("z".into()),
        ] {
            assert_eq!(call_error_of(&status_of(&e), "z", "b", timeout), e);
        }
        let other = call_error_of(
            &Status::unavailable("connection refused"),
            "z",
            "b",
            timeout,
        );
        assert_eq!(other.outcome(), "unreachable");
        assert!(other.to_string().contains("\"b\""), "{other}");
    }
}
