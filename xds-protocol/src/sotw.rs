//! State-of-the-world xDS (`StreamAggregatedResources`): the per-stream, per-type state machine
//! of the responding side, free of I/O, as [`crate::delta`] is for incremental xDS. The Zone
//! CP's ADS server drives one [`SotwType`] per type URL of each Envoy stream.
//!
//! Protocol rules (xDS protocol doc, "ACK/NACK and resource type instance version"; Envoy's
//! `DiscoveryRequest` docs):
//! - a request whose `response_nonce` is not the nonce of the last response sent is stale:
//!   it is ignored (it answers an older response);
//! - a request with no `response_nonce` opens (or, after a reconnect, reopens) the
//!   subscription: it is answered with the current version even if that was sent before;
//! - an ACK (matching nonce, no `error_detail`) records the version Envoy now runs;
//! - a request whose `resource_names` differ from the last ones is a resubscription as well,
//!   whatever its nonce and version say: it is answered with the resources now named. Envoy
//!   sends one when new CDS clusters warm (an EDS request naming them, carrying the nonce and
//!   version of the EDS response it last ACKed); leaving it unanswered leaves those clusters
//!   without endpoints ("a change of `resource_names` ... must be answered with the newly
//!   named resources", xDS protocol doc, "How the client specifies what resources to return");
//! - a NACK (matching nonce, `error_detail`) records Envoy's error and the rejected version,
//!   which is not sent again; Envoy keeps its last good config, whose version it reports in
//!   `version_info`. When the current version goes back to that one (the offending change
//!   was undone), the NACK is over;
//! - a version is sent at most once while it stays current (versions are content hashes),
//!   except when [`SotwType::resend`] owes it again: Envoy re-warms every EDS cluster a CDS
//!   response changed and waits for its endpoints in an EDS *response*, but its EDS request
//!   names the same resources with the same version, which reads as an ACK; unanswered, the
//!   changed clusters warm only when their `initial_fetch_timeout` (15 s) runs out, and run
//!   their old config until then (xDS protocol doc, "Resource warming"; Kuma answers EDS at
//!   cluster warming for the same reason). The server resends EDS after every CDS response.

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

/// What a request says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SotwReply {
    /// It names a nonce other than the last one sent: ignored.
    Stale,
    /// A new subscription (no nonce): answer it now.
    Subscribe,
    /// The last response was accepted; Envoy runs `version`.
    Ack {
        /// The version Envoy reports.
        version: String,
        /// The request also changed the subscribed `resource_names`: answer it now with the
        /// resources now named, even though their version was sent before.
        resubscribed: bool,
    },
    /// The last response was rejected.
    Nack {
        /// The version that was rejected.
        rejected: String,
        /// Envoy's `error_detail.message`.
        message: String,
    },
}

/// One type URL's state on one SotW stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SotwType {
    /// A request opened the subscription.
    subscribed: bool,
    /// Resource names asked for (empty: every resource of the type).
    names: Vec<String>,
    /// The version last sent, or the one Envoy reports running after a NACK.
    sent_version: Option<String>,
    /// The nonce of the last response sent.
    sent_nonce: String,
    /// The version Envoy rejected, not to be sent again.
    nacked_version: Option<String>,
}

/// What [`SotwType::next`] decided for the current version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    /// Send the current version now (then call [`SotwType::sent`]).
    pub send: bool,
    /// The current version is the one Envoy kept after its NACK: the NACK is over.
    pub nack_over: bool,
}

impl SotwType {
    /// Apply a request of this type.
    pub fn on_request(&mut self, req: &DiscoveryRequest) -> SotwReply {
        if !req.response_nonce.is_empty() && req.response_nonce != self.sent_nonce {
            return SotwReply::Stale;
        }
        self.subscribed = true;
        let resubscribed = self.names != req.resource_names;
        if resubscribed {
            self.names.clone_from(&req.resource_names);
        }
        if let Some(err) = &req.error_detail {
            let rejected = self.sent_version.clone().unwrap_or_default();
            self.nacked_version = Some(rejected.clone());
            // Envoy keeps its last good config; what it runs is the version it reports.
            self.sent_version = Some(req.version_info.clone());
            return SotwReply::Nack {
                rejected,
                message: err.message.clone(),
            };
        }
        if !req.response_nonce.is_empty() {
            if resubscribed {
                // What was sent went out for other names: the current version is owed again.
                self.sent_version = None;
            }
            return SotwReply::Ack {
                version: req.version_info.clone(),
                resubscribed,
            };
        }
        // A new subscription (or a re-request after reconnect): answer it.
        self.sent_version = None;
        SotwReply::Subscribe
    }

    /// The resource names Envoy asked for (empty: all).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the `current` version must be sent now: subscribed, not sent already, and not
    /// the version Envoy rejected.
    pub fn next(&mut self, current: &str) -> Step {
        let mut step = Step::default();
        if !self.subscribed {
            return step;
        }
        if self.nacked_version.is_some() && self.sent_version.as_deref() == Some(current) {
            self.nacked_version = None;
            step.nack_over = true;
        }
        step.send = self.sent_version.as_deref() != Some(current)
            && self.nacked_version.as_deref() != Some(current);
        step
    }

    /// Owe the current version again: the next [`SotwType::next`] sends it even if it went
    /// out before (see the module docs: EDS after a CDS response). Nothing before the
    /// subscription opens.
    pub fn resend(&mut self) {
        if self.subscribed {
            self.sent_version = None;
        }
    }

    /// Record that `version` went out with `nonce`.
    pub fn sent(&mut self, version: String, nonce: String) {
        self.sent_version = Some(version);
        self.sent_nonce = nonce;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::rpc::Status;

    fn req(nonce: &str, version: &str, error: Option<&str>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version.into(),
            response_nonce: nonce.into(),
            error_detail: error.map(|m| Status {
                code: 3,
                message: m.into(),
                details: vec![],
            }),
            ..DiscoveryRequest::default()
        }
    }

    #[test]
    fn nothing_is_sent_before_a_subscription() {
        let mut t = SotwType::default();
        assert_eq!(t.next("v1"), Step::default());
        t.resend();
        assert_eq!(t.next("v1"), Step::default(), "resend opens nothing");
    }

    #[test]
    fn a_resend_owes_the_sent_version_once_more() {
        let mut t = SotwType::default();
        t.on_request(&named("", "", &["a"]));
        t.sent("v1".into(), "1".into());
        t.on_request(&named("1", "v1", &["a"]));
        assert!(!t.next("v1").send);
        // A CDS response went out: EDS is owed again, once.
        t.resend();
        assert!(t.next("v1").send);
        t.sent("v1".into(), "2".into());
        assert!(!t.next("v1").send);
        // Envoy's EDS request of the warming cluster, answering the first response, is stale.
        assert_eq!(t.on_request(&named("1", "v1", &["a"])), SotwReply::Stale);
    }

    fn named(nonce: &str, version: &str, names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
            ..req(nonce, version, None)
        }
    }

    #[test]
    fn a_subscription_is_answered_and_an_ack_recorded_once() {
        let mut t = SotwType::default();
        assert_eq!(t.on_request(&named("", "", &["a"])), SotwReply::Subscribe);
        assert_eq!(t.names(), ["a".to_owned()]);
        assert!(t.next("v1").send);
        t.sent("v1".into(), "1".into());
        assert!(!t.next("v1").send, "a version is sent once");
        assert_eq!(
            t.on_request(&named("1", "v1", &["a"])),
            SotwReply::Ack {
                version: "v1".into(),
                resubscribed: false
            }
        );
        assert!(!t.next("v1").send);
        assert!(t.next("v2").send, "a new version goes out");
    }

    #[test]
    fn an_ack_that_names_other_resources_is_answered_with_them() {
        // CDS brought new EDS clusters: Envoy ACKs the EDS version it has and names them.
        let mut t = SotwType::default();
        t.on_request(&named("", "", &["backend"]));
        t.sent("v1".into(), "1".into());
        assert_eq!(
            t.on_request(&named("1", "v1", &["backend", "backend-v2"])),
            SotwReply::Ack {
                version: "v1".into(),
                resubscribed: true
            }
        );
        assert_eq!(t.names(), ["backend".to_owned(), "backend-v2".to_owned()]);
        assert!(
            t.next("v1").send,
            "the same version, for the names now asked"
        );
        t.sent("v1".into(), "2".into());
        assert!(!t.next("v1").send);
        // Its ACK names the same resources: nothing more to send.
        assert_eq!(
            t.on_request(&named("2", "v1", &["backend", "backend-v2"])),
            SotwReply::Ack {
                version: "v1".into(),
                resubscribed: false
            }
        );
        assert!(!t.next("v1").send);
        // Fewer names (the route went away): answered too, so Envoy's view is exact.
        assert_eq!(
            t.on_request(&named("2", "v1", &["backend"])),
            SotwReply::Ack {
                version: "v1".into(),
                resubscribed: true
            }
        );
        assert!(t.next("v1").send);
    }

    #[test]
    fn a_stale_request_naming_other_resources_changes_nothing() {
        let mut t = SotwType::default();
        t.on_request(&named("", "", &["a"]));
        t.sent("v1".into(), "1".into());
        t.sent("v2".into(), "2".into());
        assert_eq!(
            t.on_request(&named("1", "v1", &["a", "b"])),
            SotwReply::Stale
        );
        assert_eq!(t.names(), ["a".to_owned()]);
        // The ACK of the newest response carries the new names: that one is answered.
        assert_eq!(
            t.on_request(&named("2", "v2", &["a", "b"])),
            SotwReply::Ack {
                version: "v2".into(),
                resubscribed: true
            }
        );
        assert!(t.next("v2").send);
    }

    #[test]
    fn stale_requests_are_ignored() {
        let mut t = SotwType::default();
        t.on_request(&req("", "", None));
        t.sent("v1".into(), "1".into());
        t.sent("v2".into(), "2".into());
        assert_eq!(
            t.on_request(&req("1", "v1", Some("late"))),
            SotwReply::Stale
        );
        assert!(!t.next("v2").send, "the stale NACK changed nothing");
    }

    #[test]
    fn a_nacked_version_is_not_resent_until_the_config_moves_on_or_back() {
        let mut t = SotwType::default();
        t.on_request(&req("", "", None));
        t.sent("v1".into(), "1".into());
        t.on_request(&req("1", "v1", None));
        t.sent("bad".into(), "2".into());
        assert_eq!(
            t.on_request(&req("2", "v1", Some("invalid cluster"))),
            SotwReply::Nack {
                rejected: "bad".into(),
                message: "invalid cluster".into()
            }
        );
        assert_eq!(t.next("bad"), Step::default(), "never resent");
        // The offending change is undone: Envoy already runs v1, the NACK is over.
        assert_eq!(
            t.next("v1"),
            Step {
                send: false,
                nack_over: true
            }
        );
        // A later, different version goes out.
        t.sent("bad".into(), "3".into());
        t.on_request(&req("3", "v1", Some("invalid cluster")));
        assert!(t.next("v3").send);
    }

    #[test]
    fn a_reconnect_resubscription_resends_the_current_version() {
        let mut t = SotwType::default();
        t.on_request(&req("", "", None));
        t.sent("v1".into(), "1".into());
        t.on_request(&req("1", "v1", None));
        assert_eq!(t.on_request(&req("", "v1", None)), SotwReply::Subscribe);
        assert!(t.next("v1").send);
    }
}
