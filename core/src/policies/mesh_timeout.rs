//! MeshTimeout: the typed spec (connection, idle and HTTP timeouts per `from`/`to` item) and
//! its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshtimeout/api/v1alpha1/` (`meshtimeout.go` for
//! the shape and JSON names, `validator.go` for the rules). Validation returns every violation,
//! in Kuma's order, with paths rooted at `spec`.
//!
//! Kuma behaviours reproduced on purpose:
//! - a top-level `MeshHTTPRoute` or `MeshGateway` forbids `from` (`spec.from: must not be
//!   defined`, the items are then not looked at) and narrows `to[].targetRef.kind` to `Mesh`;
//! - under a top-level `MeshHTTPRoute`, `connectionTimeout`, `idleTimeout`,
//!   `http.maxStreamDuration` and `http.maxConnectionDuration` are rejected;
//! - an `http` section holding only `requestHeadersTimeout` still counts as empty
//!   (`at least one timeout in this section should be configured`);
//! - `connectionTimeout` must be positive, every other timeout only non-negative.

use serde::{Deserialize, Serialize};

use super::envelope::{Envelope, Items, Lists};
use super::{validate_items, validate_top_target_ref, FROM_OR_TO_REQUIRED};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    PathBuilder, ValidationError, GREATER_THAN_ZERO_WHEN_DEFINED, MUST_NOT_BE_DEFINED,
    NON_NEGATIVE_WHEN_DEFINED,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
    TargetRefKind::MeshHTTPRoute,
];
/// Kinds allowed in `from[].targetRef`.
const FROM_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];
/// Kinds allowed in `to[].targetRef` for ordinary top-level kinds.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];
/// Kinds allowed in `to[].targetRef` when the top level is a MeshHTTPRoute or MeshGateway.
const TO_KINDS_ROUTE_OR_GATEWAY: &[TargetRefKind] = &[TargetRefKind::Mesh];

/// Message for fields a MeshHTTPRoute-targeted policy cannot set.
const NOT_WITH_HTTP_ROUTE: &str =
    "can't be specified when top-level TargetRef is referencing MeshHTTPRoute";

/// MeshTimeout spec: which proxies (`targetRef`) and the timeouts for their inbound (`from`)
/// and outbound (`to`) traffic.
pub type MeshTimeout = Envelope<MeshTimeoutLists>;

/// What a MeshTimeout spec holds: `to` and `from` items of [`Conf`].
#[derive(Debug, Clone, PartialEq)]
pub enum MeshTimeoutLists {}

impl Lists for MeshTimeoutLists {
    const TYPE: ResourceType = ResourceType::MeshTimeout;
    type To = Items<Conf>;
    type From = Items<Conf>;
}

/// One `from` or `to` item: a client/destination group and its timeouts.
pub type Item = super::Item<Conf>;

/// Timeouts for one group (Kuma's `Conf`). Every field is optional; unset means "inherit".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Time allowed to establish a TCP connection; must be greater than zero when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_timeout: Option<Duration>,
    /// Time without bytes sent or received before a connection is closed (`0s` disables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Duration>,
    /// HTTP-specific timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
}

/// HTTP-specific timeouts (Kuma's `Http`). `0s` disables a timeout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// Time allowed to receive the whole request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<Duration>,
    /// Time a stream may exist without activity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_idle_timeout: Option<Duration>,
    /// Maximum lifetime of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stream_duration: Option<Duration>,
    /// Time after which a connection is drained and closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_duration: Option<Duration>,
    /// Time allowed to receive the request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers_timeout: Option<Duration>,
}

impl MeshTimeout {
    /// Kuma 2.7's MeshTimeout validation: every violation, paths rooted at `spec`
    /// (`spec.to[0].default.idleTimeout`). Empty means valid.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        if self.to_items().is_empty() && self.from_items().is_empty() {
            err.violation(&spec, FROM_OR_TO_REQUIRED);
        }
        let top = self.target_ref.kind.as_ref();
        let route_or_gateway = matches!(
            top,
            Some(TargetRefKind::MeshHTTPRoute | TargetRefKind::MeshGateway)
        );
        let top_is_route = matches!(top, Some(TargetRefKind::MeshHTTPRoute));
        let validate_conf = |err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>| {
            validate_default(err, path, conf, top_is_route);
        };

        if route_or_gateway {
            if !self.from_items().is_empty() {
                err.violation(&spec.field("from"), MUST_NOT_BE_DEFINED);
            }
        } else {
            validate_items(
                &mut err,
                &spec.field("from"),
                self.from_items(),
                FROM_KINDS,
                validate_conf,
            );
        }

        let to_kinds = if route_or_gateway {
            TO_KINDS_ROUTE_OR_GATEWAY
        } else {
            TO_KINDS
        };
        validate_items(
            &mut err,
            &spec.field("to"),
            self.to_items(),
            to_kinds,
            validate_conf,
        );
        err
    }
}

/// Kuma's `validateDefault`: an absent `default` is the same as an empty one.
fn validate_default(
    err: &mut ValidationError,
    path: &PathBuilder,
    conf: Option<&Conf>,
    top_is_route: bool,
) {
    let conf = match conf {
        Some(c)
            if c.connection_timeout.is_some() || c.idle_timeout.is_some() || c.http.is_some() =>
        {
            c
        }
        _ => {
            err.violation(path, "at least one timeout should be configured");
            return;
        }
    };

    if top_is_route {
        reject_if_set(
            err,
            &path.field("connectionTimeout"),
            &conf.connection_timeout,
        );
        reject_if_set(err, &path.field("idleTimeout"), &conf.idle_timeout);
        if let Some(http) = &conf.http {
            let http_path = path.field("http");
            reject_if_set(
                err,
                &http_path.field("maxStreamDuration"),
                &http.max_stream_duration,
            );
            reject_if_set(
                err,
                &http_path.field("maxConnectionDuration"),
                &http.max_connection_duration,
            );
        }
    }

    if let Some(d) = &conf.connection_timeout {
        if d.is_negative() || d.is_zero() {
            err.violation(
                &path.field("connectionTimeout"),
                GREATER_THAN_ZERO_WHEN_DEFINED,
            );
        }
    }
    not_negative(err, &path.field("idleTimeout"), &conf.idle_timeout);

    if let Some(http) = &conf.http {
        let path = path.field("http");
        // `requestHeadersTimeout` does not count here (as in Kuma).
        if http.request_timeout.is_none()
            && http.stream_idle_timeout.is_none()
            && http.max_stream_duration.is_none()
            && http.max_connection_duration.is_none()
        {
            err.violation(
                &path,
                "at least one timeout in this section should be configured",
            );
        }
        not_negative(err, &path.field("requestTimeout"), &http.request_timeout);
        not_negative(
            err,
            &path.field("streamIdleTimeout"),
            &http.stream_idle_timeout,
        );
        not_negative(
            err,
            &path.field("maxStreamDuration"),
            &http.max_stream_duration,
        );
        not_negative(
            err,
            &path.field("maxConnectionDuration"),
            &http.max_connection_duration,
        );
        not_negative(
            err,
            &path.field("requestHeadersTimeout"),
            &http.request_headers_timeout,
        );
    }
}

/// Kuma's `ValidateNil` with the MeshHTTPRoute message.
fn reject_if_set(err: &mut ValidationError, path: &PathBuilder, value: &Option<Duration>) {
    if value.is_some() {
        err.violation(path, NOT_WITH_HTTP_ROUTE);
    }
}

/// Kuma's `ValidateDurationNotNegativeOrNil`.
fn not_negative(err: &mut ValidationError, path: &PathBuilder, value: &Option<Duration>) {
    if value.as_ref().is_some_and(Duration::is_negative) {
        err.violation(path, NON_NEGATIVE_WHEN_DEFINED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{assert_round_trip, decode, decodes, document, v};

    fn violations(spec: &str) -> Vec<(String, String)> {
        crate::policies::test_support::violations::<MeshTimeout>(spec)
    }

    const FULL: &str = "
targetRef:
  kind: MeshService
  name: web-frontend
from:
  - targetRef:
      kind: Mesh
    default:
      connectionTimeout: 10s
      idleTimeout: 1h
      http:
        requestTimeout: 0s
        streamIdleTimeout: 1h
        maxStreamDuration: 1h
        maxConnectionDuration: 1h
to:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      connectionTimeout: 10s
      idleTimeout: 1h
      http:
        requestTimeout: 1s
        streamIdleTimeout: 1h
        maxStreamDuration: 1h
        maxConnectionDuration: 1h
        requestHeadersTimeout: 500ms
";

    #[test]
    fn valid_examples() {
        assert!(violations(FULL).is_empty());
        assert!(violations(
            "
targetRef:
  kind: MeshHTTPRoute
  name: route-1
to:
  - targetRef:
      kind: Mesh
    default:
      http:
        requestTimeout: 1s
        streamIdleTimeout: 2s
"
        )
        .is_empty());
        assert!(violations(
            "
targetRef:
  kind: MeshGateway
  name: edge
  tags:
    port: http-8080
to:
  - targetRef:
      kind: Mesh
    default:
      idleTimeout: 0s
"
        )
        .is_empty());
    }

    #[test]
    fn round_trip_is_lossless() {
        for spec in [
            FULL,
            "targetRef:\n  kind: Mesh\nto: []\n",
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      http: {}\n",
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n",
        ] {
            assert_round_trip(&document::<MeshTimeout>(spec));
        }
        // Durations keep their text.
        let mt: MeshTimeout = decode(FULL);
        let http = mt.to_items()[0].default.as_ref().unwrap().http.as_ref();
        assert_eq!(
            http.unwrap()
                .request_headers_timeout
                .as_ref()
                .unwrap()
                .as_str(),
            "500ms"
        );
    }

    #[test]
    fn unknown_fields_and_bad_durations_are_decode_errors() {
        for spec in [
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      idleTimeot: 1s\n",
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      idleTimeout: 5\n",
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      idleTimeout: 5d\n",
            "targetRef:\n  kind: Mesh\ndefault: {}\n",
        ] {
            assert!(!decodes::<MeshTimeout>(spec), "{spec}");
        }
    }

    #[test]
    fn empty_from_and_to() {
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\n"),
            [v("spec", "at least one of 'from', 'to' has to be defined")]
        );
    }

    #[test]
    fn unsupported_kinds() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshService
  name: web-frontend
from:
  - targetRef:
      kind: MeshGatewayRoute
    default:
      http:
        requestTimeout: 1s
to:
  - targetRef:
      kind: MeshServiceSubset
    default:
      http:
        requestTimeout: 1s
"
            ),
            [
                v("spec.from[0].targetRef.kind", "value is not supported"),
                v("spec.to[0].targetRef.kind", "value is not supported"),
            ]
        );
    }

    #[test]
    fn missing_and_negative_timeouts() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshService
  name: web-frontend
to:
  - targetRef:
      kind: MeshService
      name: web-backend
  - targetRef:
      kind: Mesh
    default:
      connectionTimeout: 0s
      idleTimeout: -1s
      http:
        requestHeadersTimeout: -1s
"
            ),
            [
                v(
                    "spec.to[0].default",
                    "at least one timeout should be configured"
                ),
                v(
                    "spec.to[1].default.connectionTimeout",
                    "must be greater than zero when defined"
                ),
                v(
                    "spec.to[1].default.idleTimeout",
                    "must not be negative when defined"
                ),
                v(
                    "spec.to[1].default.http",
                    "at least one timeout in this section should be configured"
                ),
                v(
                    "spec.to[1].default.http.requestHeadersTimeout",
                    "must not be negative when defined"
                ),
            ]
        );
    }

    #[test]
    fn http_route_top_level() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshHTTPRoute
  name: route-1
to:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      connectionTimeout: 10s
      idleTimeout: 1h
      http:
        requestTimeout: 1s
        streamIdleTimeout: 1h
        maxStreamDuration: 1h
        maxConnectionDuration: 1h
from:
  - targetRef:
      kind: Mesh
    default:
      connectionTimeout: 11s
"
            ),
            [
                v("spec.from", "must not be defined"),
                v("spec.to[0].targetRef.kind", "value is not supported"),
                v("spec.to[0].default.connectionTimeout", NOT_WITH_HTTP_ROUTE),
                v("spec.to[0].default.idleTimeout", NOT_WITH_HTTP_ROUTE),
                v(
                    "spec.to[0].default.http.maxStreamDuration",
                    NOT_WITH_HTTP_ROUTE
                ),
                v(
                    "spec.to[0].default.http.maxConnectionDuration",
                    NOT_WITH_HTTP_ROUTE
                ),
            ]
        );
    }

    #[test]
    fn gateway_top_level() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshGateway
  name: gateway-1
to:
  - targetRef:
      kind: MeshService
      name: web-backend
    default:
      connectionTimeout: 10s
from:
  - targetRef:
      kind: Mesh
    default:
      connectionTimeout: 11s
"
            ),
            [
                v("spec.from", "must not be defined"),
                v("spec.to[0].targetRef.kind", "value is not supported"),
            ]
        );
    }

    #[test]
    fn top_level_target_ref_problems() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshService
to:
  - targetRef:
      kind: Mesh
    default:
      idleTimeout: 1s
"
            ),
            [v(
                "spec.targetRef.name",
                "must be set with kind MeshService"
            )]
        );
    }
}
