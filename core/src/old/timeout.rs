//! Old Timeout policy: connect, TCP, HTTP and (deprecated) gRPC timeouts between `sources` and
//! `destinations`, and its validator.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/timeout.proto` (shape, JSON names) and
//! `pkg/core/resources/apis/mesh/timeout_validator.go` (rules). Durations use Go syntax
//! (`5s`, `1h`, `30m`), as Kuma's JSON loader parses them with `time.ParseDuration`.
//!
//! Kuma behaviours reproduced on purpose:
//! - `destinations` may only use `kuma.io/service` (Kuma's `OnlyServiceTagAllowed`);
//! - a missing `conf` is `conf: has to be defined`;
//! - `connectTimeout`, `http.streamIdleTimeout` and `http.maxStreamDuration` are never checked;
//! - an `http` section with neither `requestTimeout` nor `idleTimeout` counts as empty, even
//!   when it sets `streamIdleTimeout` or `maxStreamDuration`;
//! - durations are only rejected when zero: a negative duration passes, as in Kuma.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

/// Kuma's `HasToBeDefinedViolation`.
const HAS_TO_BE_DEFINED: &str = "has to be defined";
/// Kuma's `HasToBeGreaterThan0Violation`.
const GREATER_THAN_0: &str = "has to be greater than 0";
/// Kuma's `WhenDefinedHasToBeGreaterThan0Violation`.
const GREATER_THAN_0_WHEN_DEFINED: &str = "has to be greater than 0 when defined";
/// Message for a section without any of its checked timeouts.
const EMPTY_SECTION: &str = "at least one timeout in section has to be defined";

/// Timeout spec: the timeouts (`conf`) applied to traffic from dataplanes matching `sources`
/// to services matching `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeout {
    /// Selectors of the dataplanes that are sources of traffic.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the destination services (only `kuma.io/service` allowed).
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The timeouts; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<TimeoutConf>,
}

/// `conf` of a Timeout (Kuma's `Timeout.Conf`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutConf {
    /// Time to establish a connection to the upstream.
    #[serde(
        default,
        alias = "connect_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub connect_timeout: Option<Duration>,
    /// Timeouts applied when the protocol is TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// Timeouts applied when the protocol is HTTP (also HTTP/2 and gRPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// Deprecated gRPC timeouts; Kuma prefers the same fields of [`Http`] when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Grpc>,
}

/// `conf.tcp`: TCP timeouts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tcp {
    /// Period without bytes sent or received on the upstream or downstream connection after
    /// which the connection is closed.
    #[serde(
        default,
        alias = "idle_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle_timeout: Option<Duration>,
}

/// `conf.http`: HTTP timeouts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Span between the end of the downstream request and the end of the upstream response.
    #[serde(
        default,
        alias = "request_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub request_timeout: Option<Duration>,
    /// Time after which a connection without active streams is closed.
    #[serde(
        default,
        alias = "idle_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle_timeout: Option<Duration>,
    /// Time a stream may exist without upstream or downstream activity.
    #[serde(
        default,
        alias = "stream_idle_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub stream_idle_timeout: Option<Duration>,
    /// Maximum lifetime of a stream.
    #[serde(
        default,
        alias = "max_stream_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_stream_duration: Option<Duration>,
}

/// `conf.grpc` (deprecated in Kuma in favour of [`Http`]): gRPC stream timeouts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grpc {
    /// Time a stream may exist without activity (deprecated: `http.streamIdleTimeout`).
    #[serde(
        default,
        alias = "stream_idle_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub stream_idle_timeout: Option<Duration>,
    /// Maximum lifetime of a stream (deprecated: `http.maxStreamDuration`).
    #[serde(
        default,
        alias = "max_stream_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_stream_duration: Option<Duration>,
}

impl Timeout {
    /// Kuma's `TimeoutResource.Validate`: sources, then destinations, then `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        );
        let path = PathBuilder::root().field("conf");
        match &self.conf {
            None => err.violation(&path, HAS_TO_BE_DEFINED),
            Some(conf) => conf.validate_into(&path, &mut err),
        }
        err
    }
}

impl TimeoutConf {
    fn validate_into(&self, path: &PathBuilder, err: &mut ValidationError) {
        if let Some(tcp) = &self.tcp {
            let path = path.field("tcp");
            match &tcp.idle_timeout {
                None => err.violation(&path, EMPTY_SECTION),
                Some(d) if d.is_zero() => err.violation(&path.field("idleTimeout"), GREATER_THAN_0),
                Some(_) => {}
            }
        }
        if let Some(http) = &self.http {
            let path = path.field("http");
            if http.request_timeout.is_none() && http.idle_timeout.is_none() {
                err.violation(&path, EMPTY_SECTION);
            } else {
                positive_when_defined(err, &path.field("requestTimeout"), &http.request_timeout);
                positive_when_defined(err, &path.field("idleTimeout"), &http.idle_timeout);
            }
        }
        if let Some(grpc) = &self.grpc {
            let path = path.field("grpc");
            if grpc.stream_idle_timeout.is_none() && grpc.max_stream_duration.is_none() {
                err.violation(&path, EMPTY_SECTION);
            } else {
                positive_when_defined(
                    err,
                    &path.field("streamIdleTimeout"),
                    &grpc.stream_idle_timeout,
                );
                positive_when_defined(
                    err,
                    &path.field("maxStreamDuration"),
                    &grpc.max_stream_duration,
                );
            }
        }
    }
}

/// Kuma's `validateDuration_GreaterThan0OrNil`: only a zero duration is rejected.
fn positive_when_defined(err: &mut ValidationError, path: &PathBuilder, d: &Option<Duration>) {
    if d.as_ref().is_some_and(Duration::is_zero) {
        err.violation(path, GREATER_THAN_0_WHEN_DEFINED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{self, assert_round_trip, decodes, document, resource, v};
    use crate::resource::Spec;

    fn decode(spec: &str) -> Timeout {
        test_support::decode(spec)
    }

    fn violations(spec: &str) -> Vec<(String, String)> {
        test_support::violations::<Timeout>(spec)
    }

    /// The three Timeouts of the transition seed (000).
    const SEED: &str = "
type: Timeout
mesh: default
name: timeout-global
sources:
  - match:
      kuma.io/service: '*'
destinations:
  - match:
      kuma.io/service: '*'
conf:
  connectTimeout: 21s
  tcp: 
    idleTimeout: 22s
  http:
    requestTimeout: 23s
    idleTimeout: 24s
    streamIdleTimeout: 25s
    maxStreamDuration: 26s
---
type: Timeout
mesh: default
name: timeout-to-backend
sources:
  - match:
      kuma.io/service: '*'
destinations:
  - match:
      kuma.io/service: 'backend_kuma-demo_svc_3001'
conf:
  connectTimeout: 31s
  tcp: 
    idleTimeout: 32s
  http:
    requestTimeout: 33s # leaking when MeshTimeout is applied
    idleTimeout: 34s
    streamIdleTimeout: 35s # leaking when MeshTimeout is applied
    maxStreamDuration: 36s
---
type: Timeout
mesh: default
name: timeout-to-redis
sources:
  - match:
      kuma.io/service: '*'
destinations:
  - match:
      kuma.io/service: 'redis_kuma-demo_svc_6379'
conf:
  connectTimeout: 41s
  tcp: 
    idleTimeout: 42s
  http:
    requestTimeout: 43s
    idleTimeout: 44s
    streamIdleTimeout: 45s
    maxStreamDuration: 46s
";

    #[test]
    fn seed_examples_are_valid_and_round_trip() {
        for doc in SEED.split("---") {
            let resource = resource(doc);
            assert!(resource.validate().violations.is_empty(), "{doc}");
            assert_round_trip(doc);
        }
        let Spec::Timeout(t) = resource(SEED.split("---").nth(1).unwrap()).spec else {
            panic!("not a Timeout");
        };
        let conf = t.conf.unwrap();
        assert_eq!(conf.connect_timeout, Some(Duration::from_secs(31)));
        assert_eq!(
            conf.tcp.unwrap().idle_timeout,
            Some(Duration::from_secs(32))
        );
        let http = conf.http.unwrap();
        assert_eq!(http.request_timeout, Some(Duration::from_secs(33)));
        assert_eq!(http.idle_timeout, Some(Duration::from_secs(34)));
        assert_eq!(http.stream_idle_timeout, Some(Duration::from_secs(35)));
        assert_eq!(http.max_stream_duration, Some(Duration::from_secs(36)));
        assert!(conf.grpc.is_none());
    }

    #[test]
    fn kuma_full_policy_is_valid() {
        let spec = "
sources:
- match:
    kuma.io/service: frontend
    kuma.io/protocol: http
destinations:
- match:
    kuma.io/service: backend
conf:
  connectTimeout: 5s
  tcp:
    idleTimeout: 50s
  http:
    requestTimeout: 15s
    idleTimeout: 1h
  grpc:
    streamIdleTimeout: 40s
    maxStreamDuration: 30m
";
        assert!(violations(spec).is_empty());
        assert_round_trip(&document::<Timeout>(spec));
        let t = decode(spec);
        assert_eq!(
            t.conf
                .unwrap()
                .grpc
                .unwrap()
                .max_stream_duration
                .unwrap()
                .as_str(),
            "30m"
        );
    }

    #[test]
    fn kuma_empty_spec() {
        assert_eq!(
            violations(""),
            [
                v("sources", "must have at least one element"),
                v("destinations", "must have at least one element"),
                v("conf", "has to be defined"),
            ]
        );
    }

    #[test]
    fn kuma_empty_sections() {
        let spec = "
sources:
- match:
   kuma.io/service: frontend
   kuma.io/protocol: http
destinations:
- match:
   kuma.io/service: backend
conf:
  connectTimeout: 5s
  tcp: {}
  http: {}
  grpc: {}
";
        assert_eq!(
            violations(spec),
            [
                v("conf.tcp", EMPTY_SECTION),
                v("conf.http", EMPTY_SECTION),
                v("conf.grpc", EMPTY_SECTION),
            ]
        );
    }

    #[test]
    fn http_with_only_stream_timeouts_counts_as_empty() {
        let spec = "
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
conf:
  http:
    streamIdleTimeout: 5s
    maxStreamDuration: 0s
";
        assert_eq!(violations(spec), [v("conf.http", EMPTY_SECTION)]);
    }

    #[test]
    fn zero_durations() {
        let spec = "
sources:
- match:
    kuma.io/service: '*'
destinations:
- match:
    kuma.io/service: '*'
conf:
  connectTimeout: 0s
  tcp:
    idleTimeout: 0s
  http:
    requestTimeout: 0s
    idleTimeout: '0'
    streamIdleTimeout: 0s
  grpc:
    streamIdleTimeout: 0ms
    maxStreamDuration: -1s
";
        assert_eq!(
            violations(spec),
            [
                v("conf.tcp.idleTimeout", "has to be greater than 0"),
                v(
                    "conf.http.requestTimeout",
                    "has to be greater than 0 when defined"
                ),
                v(
                    "conf.http.idleTimeout",
                    "has to be greater than 0 when defined"
                ),
                v(
                    "conf.grpc.streamIdleTimeout",
                    "has to be greater than 0 when defined"
                ),
            ]
        );
    }

    #[test]
    fn selector_rules() {
        let spec = "
sources:
- match: {}
- match:
    version: v1
destinations:
- match:
    kuma.io/service: backend
    region: eu
- match: {}
conf:
  connectTimeout: 5s
";
        assert_eq!(
            violations(spec),
            [
                v("sources[0].match", "must have at least one tag"),
                v(
                    "sources[0].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
                v(
                    "sources[1].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
                v(
                    "destinations[0].match",
                    "must consist of exactly one tag \"kuma.io/service\""
                ),
                v(
                    "destinations[0].match[\"region\"]",
                    "tag \"region\" is not allowed"
                ),
                v(
                    "destinations[1].match",
                    "must consist of exactly one tag \"kuma.io/service\""
                ),
                v(
                    "destinations[1].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
            ]
        );
    }

    #[test]
    fn decode_errors_and_aliases() {
        // Unknown field, number instead of duration, unknown unit.
        assert!(!decodes::<Timeout>("conf:\n  connectTimeot: 5s\n"));
        assert!(!decodes::<Timeout>("conf:\n  connectTimeout: 5\n"));
        assert!(!decodes::<Timeout>("conf:\n  connectTimeout: 5d\n"));
        assert!(!decodes::<Timeout>("spec: {}\n"));
        // Kuma's loader also accepts the proto field names.
        let t = decode("conf:\n  connect_timeout: 5s\n  tcp:\n    idle_timeout: 1m\n");
        let conf = t.conf.unwrap();
        assert_eq!(conf.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(
            conf.tcp.unwrap().idle_timeout,
            Some(Duration::from_secs(60))
        );
        // `null` means unset.
        assert_eq!(
            violations("sources:\ndestinations:\nconf:\n"),
            [
                v("sources", "must have at least one element"),
                v("destinations", "must have at least one element"),
                v("conf", "has to be defined"),
            ]
        );
        assert_eq!(decode("conf:\n  tcp:\n").conf, Some(TimeoutConf::default()));
    }
}
