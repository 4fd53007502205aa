//! Incremental (delta) xDS: the per-stream, per-type state machine of the responding side,
//! free of I/O. Used by the Zone CP's ADS server (Envoy subscribes) and by both ends of KDS
//! (the Global serves policies to zones; zones serve Dataplanes to the Global).
//!
//! Protocol rules (xDS protocol doc, "Incremental xDS"; Envoy's `DeltaDiscoveryRequest` docs):
//! - the first request of a type opens the subscription. CDS and LDS are wildcard when it
//!   names nothing (the legacy wildcard) or names `*`; other types subscribe by name.
//!   `initial_resource_versions` says what Envoy already holds (after a reconnect);
//! - later requests add and remove names (`*` toggles wildcard); an unsubscribed resource is
//!   dropped by Envoy, so it is forgotten here too;
//! - a response carries the resources whose version differs from what Envoy holds, and
//!   `removed_resources` for names Envoy holds that no longer exist, or names it subscribed to
//!   that do not exist (said once);
//! - a request whose `response_nonce` is the nonce of the response in flight answers it: an
//!   ACK (no `error_detail`) makes its changes what Envoy holds, a NACK keeps what Envoy held
//!   and marks the rejected resource versions, never sent again (a later, different version
//!   is). When the rejected response carried several resources, Envoy's error does not say
//!   which one was bad: the type switches to one resource per response until what was pending
//!   has been retried, so only the bad resource ends up rejected. A KDS peer does say: its
//!   NACK lists the refused names in `error_detail.details` ([`REJECTED_RESOURCE_TYPE_URL`]),
//!   it applied the rest, so only those are rejected and the others count as held. A NACKed removal is not
//!   retried. Requests naming older nonces are stale: their subscription changes apply,
//!   nothing else. At most one response per type is in flight, so what Envoy holds is always
//!   known;
//! - a response may be bounded ([`Limit`]): the rest follows, after the ACK, in the next
//!   response (KDS chunking of large types).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

use crate::type_url::{CLUSTER_TYPE, LISTENER_TYPE};
use crate::version::ResourceVersions;

/// What a request answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A subscription request (no `response_nonce`).
    Subscription,
    /// It names a nonce other than the one in flight.
    Stale,
    /// The response in flight was accepted.
    Ack,
    /// The response in flight was rejected with Envoy's message.
    Nack(String),
}

/// The response in flight: its nonce and, per resource name, the version sent (`None`: removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Nonce of the response.
    pub nonce: String,
    /// Name → version sent, or `None` for a removal.
    pub updates: BTreeMap<String, Option<String>>,
}

/// What to send next: resources to (re)send and names to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Update {
    /// Names of resources to send (their current versions are in the snapshot).
    pub send: Vec<String>,
    /// Names for `removed_resources`.
    pub removed: Vec<String>,
    /// More differences remain after this one (the limit cut it, or a rejected response's
    /// resources are being retried one at a time): the next update comes after its answer.
    pub truncated: bool,
}

/// Delta state of one type URL on one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeltaType {
    started: bool,
    /// Subscribed to every resource of the type.
    pub wildcard: bool,
    /// Names subscribed explicitly.
    pub names: BTreeSet<String>,
    /// Name → version Envoy holds.
    pub held: BTreeMap<String, String>,
    /// Name → version Envoy rejected (not sent again).
    pub rejected: BTreeMap<String, String>,
    /// Subscribed names already reported as not existing.
    told_absent: BTreeSet<String>,
    /// Resources of a rejected multi-resource response, retried one per response.
    isolating: BTreeSet<String>,
    /// Resources owed again at the version Envoy holds ([`DeltaType::resend`]), until a
    /// response carries them (a response in flight meanwhile does not pay the debt).
    owed: BTreeSet<String>,
    /// The response in flight.
    pub pending: Option<Pending>,
}

/// Type URL of an `error_detail.details` entry naming one refused resource (its `value` is the
/// UTF-8 name). Sent by KDS peers, which apply what they can and refuse the rest by name.
pub const REJECTED_RESOURCE_TYPE_URL: &str = "type.googleapis.com/umbra.kds.v1.RejectedResource";

/// Envoy types with a legacy wildcard subscription (xDS protocol doc: LDS and CDS).
pub fn supports_wildcard(type_url: &str) -> bool {
    type_url == CLUSTER_TYPE || type_url == LISTENER_TYPE
}

/// A bound on one response: at most `resources` resources and, past the first resource,
/// at most `bytes` of resource bodies (as measured by the caller's size function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Most resources per response (at least 1 is always sent).
    pub resources: usize,
    /// Most body bytes per response (a single larger resource still goes alone).
    pub bytes: usize,
}

impl Limit {
    /// No bound (Envoy's ADS: one response per type carries every change).
    pub const NONE: Limit = Limit {
        resources: usize::MAX,
        bytes: usize::MAX,
    };
}

impl DeltaType {
    /// Owe `names` again: the next [`DeltaType::next`] sends those it has, even at the version
    /// Envoy holds. After a CDS response, Envoy re-warms each changed EDS cluster and waits for
    /// its endpoints in a response; unanswered, it warms only when its `initial_fetch_timeout`
    /// runs out (xDS protocol doc, "Resource warming"; as [`crate::sotw`] does for SotW).
    pub fn resend<'a>(&mut self, names: impl IntoIterator<Item = &'a String>) {
        self.owed.extend(names.into_iter().cloned());
    }

    /// Apply `req`: subscription changes first, then its answer, if any. `legacy_wildcard`:
    /// a first request naming nothing subscribes to everything ([`supports_wildcard`] for
    /// Envoy types; every KDS type).
    pub fn on_request(&mut self, legacy_wildcard: bool, req: &DeltaDiscoveryRequest) -> Reply {
        if !self.started {
            self.started = true;
            self.held = req
                .initial_resource_versions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            self.wildcard = legacy_wildcard && req.resource_names_subscribe.is_empty();
        }
        for name in &req.resource_names_subscribe {
            if name == "*" {
                self.wildcard = true;
            } else {
                self.names.insert(name.clone());
            }
        }
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                self.wildcard = false;
            } else {
                self.names.remove(name);
                self.held.remove(name);
                self.told_absent.remove(name);
                // Envoy drops it whatever the response in flight says.
                if let Some(p) = self.pending.as_mut() {
                    p.updates.remove(name);
                }
            }
        }
        if req.response_nonce.is_empty() {
            return Reply::Subscription;
        }
        if self
            .pending
            .as_ref()
            .is_none_or(|p| p.nonce != req.response_nonce)
        {
            return Reply::Stale;
        }
        let Some(pending) = self.pending.take() else {
            return Reply::Stale;
        };
        if let Some(error) = &req.error_detail {
            let named: BTreeSet<String> = error
                .details
                .iter()
                .filter(|d| d.type_url == REJECTED_RESOURCE_TYPE_URL)
                .filter_map(|d| String::from_utf8(d.value.clone()).ok())
                .collect();
            if !named.is_empty() {
                // The peer applied everything but the named resources.
                for (name, version) in pending.updates {
                    match version {
                        Some(v) if named.contains(&name) => {
                            self.rejected.insert(name, v);
                        }
                        Some(v) if self.wildcard || self.names.contains(&name) => {
                            self.rejected.remove(&name);
                            self.held.insert(name, v);
                        }
                        Some(_) => {}
                        None => {
                            self.held.remove(&name);
                        }
                    }
                }
                return Reply::Nack(error.message.clone());
            }
            let sent: Vec<(String, String)> = pending
                .updates
                .iter()
                .filter_map(|(n, v)| Some((n.clone(), v.clone()?)))
                .collect();
            if sent.len() == 1 {
                self.rejected.extend(sent);
            } else {
                self.isolating.extend(sent.into_iter().map(|(n, _)| n));
            }
            // A rejected removal is not retried (Envoy keeps the resource; nothing else to do).
            for (name, version) in &pending.updates {
                if version.is_none() {
                    self.held.remove(name);
                }
            }
            return Reply::Nack(error.message.clone());
        }
        for (name, version) in pending.updates {
            match version {
                Some(version) if self.wildcard || self.names.contains(&name) => {
                    self.rejected.remove(&name);
                    self.held.insert(name, version);
                }
                Some(_) => {}
                None => {
                    self.held.remove(&name);
                }
            }
        }
        Reply::Ack
    }

    /// What to send given the `current` versions of the type, if anything, and records it as
    /// in flight under `nonce`. Nothing before the first request or while a response is in
    /// flight. With a [`Limit`], resources past it wait for the next response (`size` gives a
    /// resource's body size in bytes); removals are names only and always go.
    pub fn next(
        &mut self,
        current: &ResourceVersions,
        nonce: &str,
        limit: Limit,
        size: &dyn Fn(&str) -> usize,
    ) -> Option<Update> {
        if !self.started || self.pending.is_some() {
            return None;
        }
        // A rejection ends when the resource moves to another version or goes away.
        self.rejected.retain(|n, v| current.get(n) == Some(v));
        self.told_absent.retain(|n| !current.contains_key(n));
        let mut update = Update::default();
        let wanted = |n: &String| self.wildcard || self.names.contains(n);
        self.isolating
            .retain(|n| current.contains_key(n) && wanted(n));
        self.owed.retain(|n| current.contains_key(n) && wanted(n));
        // Retry the resources of a rejected response one at a time (skipping those that
        // meanwhile went back to what Envoy holds), nothing else until that is done.
        while let Some(name) = self.isolating.pop_first() {
            if self.held.get(&name) != current.get(&name) {
                update.send.push(name);
                update.truncated = true;
                break;
            }
        }
        if update.send.is_empty() {
            let mut bytes = 0usize;
            for (name, version) in current {
                if wanted(name)
                    && (self.held.get(name) != Some(version) || self.owed.contains(name))
                    && self.rejected.get(name) != Some(version)
                {
                    let len = size(name);
                    if !update.send.is_empty()
                        && (update.send.len() >= limit.resources
                            || bytes.saturating_add(len) > limit.bytes)
                    {
                        update.truncated = true;
                        break;
                    }
                    bytes = bytes.saturating_add(len);
                    update.send.push(name.clone());
                }
            }
            for name in self.held.keys() {
                if !current.contains_key(name) {
                    update.removed.push(name.clone());
                }
            }
            for name in &self.names {
                if !current.contains_key(name)
                    && !self.held.contains_key(name)
                    && self.told_absent.insert(name.clone())
                {
                    update.removed.push(name.clone());
                }
            }
        }
        if update.send.is_empty() && update.removed.is_empty() {
            return None;
        }
        for name in &update.send {
            self.owed.remove(name);
        }
        let updates = update
            .send
            .iter()
            .map(|n| (n.clone(), current.get(n).cloned()))
            .chain(update.removed.iter().map(|n| (n.clone(), None)))
            .collect();
        self.pending = Some(Pending {
            nonce: nonce.to_owned(),
            updates,
        });
        Some(update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_url::ENDPOINT_TYPE;
    use envoy_types::pb::google::rpc::Status as RpcStatus;

    impl DeltaType {
        fn next_all(&mut self, current: &ResourceVersions, nonce: &str) -> Option<Update> {
            self.next(current, nonce, Limit::NONE, &|_| 0)
        }
    }

    fn versions(pairs: &[(&str, &str)]) -> ResourceVersions {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn req(subscribe: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            resource_names_subscribe: subscribe.iter().map(|s| (*s).to_owned()).collect(),
            response_nonce: nonce.to_owned(),
            ..Default::default()
        }
    }

    fn nack(nonce: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            response_nonce: nonce.to_owned(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: "bad".into(),
                details: vec![],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn wildcard_sends_changes_only_and_removals() {
        let mut t = DeltaType::default();
        assert_eq!(
            t.next_all(&versions(&[("a", "1")]), "0"),
            None,
            "not subscribed"
        );
        assert_eq!(
            t.on_request(supports_wildcard(CLUSTER_TYPE), &req(&[], "")),
            Reply::Subscription
        );
        let v1 = versions(&[("a", "1"), ("b", "1")]);
        let u = t.next_all(&v1, "1").unwrap();
        assert_eq!(u.send, ["a", "b"]);
        assert_eq!(t.next_all(&v1, "2"), None, "one response in flight");
        assert_eq!(
            t.on_request(supports_wildcard(CLUSTER_TYPE), &req(&[], "1")),
            Reply::Ack
        );
        assert_eq!(t.next_all(&v1, "2"), None, "Envoy holds everything");
        let v2 = versions(&[("a", "2")]);
        let u = t.next_all(&v2, "2").unwrap();
        assert_eq!((u.send, u.removed), (vec!["a".into()], vec!["b".into()]));
        assert_eq!(
            t.on_request(supports_wildcard(CLUSTER_TYPE), &req(&[], "2")),
            Reply::Ack
        );
        assert_eq!(t.held, versions(&[("a", "2")]));
    }

    #[test]
    fn a_resend_sends_held_resources_once_more() {
        let mut t = DeltaType::default();
        t.on_request(false, &req(&["a", "b"], ""));
        let v1 = versions(&[("a", "1"), ("b", "1")]);
        t.next_all(&v1, "1").unwrap();
        t.on_request(false, &req(&[], "1"));
        assert_eq!(t.next_all(&v1, "2"), None);
        // A CDS response changed cluster a (and named one EDS has not): a is owed again, once.
        t.resend(&["a".to_owned(), "zzz".to_owned()]);
        let u = t.next_all(&v1, "2").unwrap();
        assert_eq!((u.send, u.removed), (vec!["a".into()], vec![]));
        t.on_request(false, &req(&[], "2"));
        assert_eq!(t.next_all(&v1, "3"), None);
        assert_eq!(t.held, v1);
    }

    #[test]
    fn a_resend_owed_while_a_response_is_in_flight_goes_after_it() {
        let mut t = DeltaType::default();
        t.on_request(false, &req(&["a"], ""));
        let v1 = versions(&[("a", "1")]);
        t.next_all(&v1, "1").unwrap();
        // CDS went out while the EDS response "1" is in flight: nothing now...
        t.resend(&["a".to_owned()]);
        assert_eq!(t.next_all(&v1, "2"), None);
        // ...and its ACK, carrying the current version, does not pay the debt.
        t.on_request(false, &req(&[], "1"));
        let u = t.next_all(&v1, "2").unwrap();
        assert_eq!(u.send, ["a"]);
        t.on_request(false, &req(&[], "2"));
        assert_eq!(t.next_all(&v1, "3"), None);
    }

    #[test]
    fn a_nacked_response_is_retried_one_resource_at_a_time() {
        let mut t = DeltaType::default();
        t.on_request(supports_wildcard(LISTENER_TYPE), &req(&[], ""));
        t.next_all(&versions(&[("a", "1"), ("b", "1")]), "1");
        t.on_request(supports_wildcard(LISTENER_TYPE), &req(&[], "1"));
        let bad = versions(&[("a", "2"), ("b", "2")]);
        assert_eq!(t.next_all(&bad, "2").unwrap().send, ["a", "b"]);
        assert_eq!(
            t.on_request(supports_wildcard(LISTENER_TYPE), &nack("2")),
            Reply::Nack("bad".into())
        );
        assert_eq!(
            t.held,
            versions(&[("a", "1"), ("b", "1")]),
            "Envoy kept its config"
        );
        // Which one was bad? Each is retried alone: a is rejected again, b is accepted.
        assert_eq!(t.next_all(&bad, "3").unwrap().send, ["a"]);
        t.on_request(supports_wildcard(LISTENER_TYPE), &nack("3"));
        assert_eq!(t.next_all(&bad, "4").unwrap().send, ["b"]);
        assert_eq!(
            t.on_request(supports_wildcard(LISTENER_TYPE), &req(&[], "4")),
            Reply::Ack
        );
        assert_eq!(
            t.next_all(&bad, "5"),
            None,
            "the rejected version is not re-sent"
        );
        assert_eq!(t.rejected, versions(&[("a", "2")]));
        // a moves on: sent again.
        let next = versions(&[("a", "3"), ("b", "2")]);
        assert_eq!(t.next_all(&next, "5").unwrap().send, ["a"]);
        t.on_request(supports_wildcard(LISTENER_TYPE), &req(&[], "5"));
        assert!(t.rejected.is_empty());
        // A rejected version that goes back to what Envoy holds ends the rejection.
        t.next_all(&versions(&[("a", "4"), ("b", "2")]), "6");
        t.on_request(supports_wildcard(LISTENER_TYPE), &nack("6"));
        assert_eq!(t.next_all(&versions(&[("a", "3"), ("b", "2")]), "7"), None);
        assert!(t.rejected.is_empty());
    }

    #[test]
    fn unsubscribed_while_in_flight_then_resubscribed_is_sent_again() {
        let mut t = DeltaType::default();
        t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&["c1"], ""));
        let current = versions(&[("c1", "1")]);
        assert_eq!(t.next_all(&current, "1").unwrap().send, ["c1"]);
        let mut unsub = req(&[], "");
        unsub.resource_names_unsubscribe = vec!["c1".into()];
        t.on_request(supports_wildcard(ENDPOINT_TYPE), &unsub);
        assert_eq!(
            t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&[], "1")),
            Reply::Ack
        );
        assert!(t.held.is_empty(), "Envoy dropped c1");
        t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&["c1"], ""));
        assert_eq!(t.next_all(&current, "2").unwrap().send, ["c1"]);
    }

    #[test]
    fn explicit_subscriptions_reconnect_and_stale_nonces() {
        let mut t = DeltaType::default();
        let mut first = req(&["c1", "missing"], "");
        first.initial_resource_versions = [("c1".to_owned(), "1".to_owned())].into();
        assert_eq!(
            t.on_request(supports_wildcard(ENDPOINT_TYPE), &first),
            Reply::Subscription
        );
        assert!(!t.wildcard);
        let current = versions(&[("c1", "1"), ("c2", "1")]);
        let u = t.next_all(&current, "1").unwrap();
        assert!(
            u.send.is_empty(),
            "Envoy already holds c1 at 1; c2 not subscribed"
        );
        assert_eq!(u.removed, ["missing"]);
        assert_eq!(
            t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&["c2"], "0")),
            Reply::Stale
        );
        assert!(
            t.names.contains("c2"),
            "stale requests still change subscriptions"
        );
        assert_eq!(
            t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&[], "1")),
            Reply::Ack
        );
        assert_eq!(t.next_all(&current, "2").unwrap().send, ["c2"]);
        assert_eq!(t.next_all(&current, "3"), None);
        assert_eq!(
            t.on_request(supports_wildcard(ENDPOINT_TYPE), &req(&[], "2")),
            Reply::Ack
        );
        assert_eq!(t.next_all(&current, "3"), None, "missing is said once");
    }

    #[test]
    fn bounded_responses_send_the_rest_after_the_ack() {
        let mut t = DeltaType::default();
        t.on_request(true, &req(&[], ""));
        let current = versions(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "1"), ("e", "1")]);
        let by_count = Limit {
            resources: 2,
            bytes: usize::MAX,
        };
        assert_eq!(
            t.next(&current, "1", by_count, &|_| 10).unwrap().send,
            ["a", "b"]
        );
        assert_eq!(t.on_request(true, &req(&[], "1")), Reply::Ack);
        // 25 bytes fit two 10-byte bodies.
        let by_bytes = Limit {
            resources: usize::MAX,
            bytes: 25,
        };
        assert_eq!(
            t.next(&current, "2", by_bytes, &|_| 10).unwrap().send,
            ["c", "d"]
        );
        assert_eq!(t.on_request(true, &req(&[], "2")), Reply::Ack);
        // A body over the byte bound still goes, alone.
        assert_eq!(
            t.next(&current, "3", by_bytes, &|_| 100).unwrap().send,
            ["e"]
        );
        assert_eq!(t.on_request(true, &req(&[], "3")), Reply::Ack);
        assert_eq!(t.next(&current, "4", by_count, &|_| 10), None);
        assert_eq!(t.held.len(), 5);
    }

    #[test]
    fn a_nack_naming_resources_rejects_only_those() {
        use envoy_types::pb::google::protobuf::Any;
        let mut t = DeltaType::default();
        t.on_request(true, &req(&[], ""));
        let current = versions(&[("a", "1"), ("b", "1"), ("c", "1")]);
        assert_eq!(t.next_all(&current, "1").unwrap().send, ["a", "b", "c"]);
        let mut n = nack("1");
        n.error_detail.as_mut().unwrap().details = vec![Any {
            type_url: REJECTED_RESOURCE_TYPE_URL.into(),
            value: b"b".to_vec(),
        }];
        assert!(matches!(t.on_request(true, &n), Reply::Nack(_)));
        assert_eq!(t.held, versions(&[("a", "1"), ("c", "1")]));
        assert_eq!(t.rejected, versions(&[("b", "1")]));
        assert_eq!(
            t.next_all(&current, "2"),
            None,
            "nothing is resent one by one"
        );
        let fixed = versions(&[("a", "1"), ("b", "2"), ("c", "1")]);
        assert_eq!(t.next_all(&fixed, "2").unwrap().send, ["b"]);
    }
}
