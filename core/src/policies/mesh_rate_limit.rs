//! MeshRateLimit: the typed spec (local HTTP request and TCP connection rate limits per
//! `from` item for sidecars, per `to` item for gateways) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshratelimit/api/v1alpha1/`
//! (`meshratelimit.go` for the shape and JSON names, `validator.go` for the rules and their
//! order). Paths are rooted at `spec` (`spec.from[0].default.local.http.requestRate.num`).
//!
//! Kuma behaviours reproduced on purpose:
//! - `from` is refused when the top-level `targetRef` includes gateways (Kuma's
//!   `IncludesGateways`: MeshGateway, MeshHTTPRoute, and Mesh or MeshSubset whose `proxyTypes`
//!   is empty or lists `Gateway`), so a sidecar policy on the whole mesh is written
//!   `{kind: Mesh, proxyTypes: [Sidecar]}`; `to` is refused when it does not include gateways;
//! - a rate needs `num` greater than 0 and `interval` greater than 50ms;
//! - `onRateLimit.status`, when given, must be greater than 0.

use serde::{Deserialize, Serialize};

use super::envelope::{Envelope, Items, Lists};
pub use super::mesh_health_check::{HeaderKeyValue, HeaderModifier};
use super::{validate_target_ref_at, validate_top_target_ref};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    must_have_at_least_one, PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_NOT_BE_DEFINED,
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
/// Kinds allowed in `from[].targetRef` and `to[].targetRef`.
const ITEM_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh];

/// MeshRateLimit spec.
pub type MeshRateLimit = Envelope<MeshRateLimitLists>;

/// What a MeshRateLimit spec holds: `to` and `from` items of [`Conf`].
#[derive(Debug, Clone, PartialEq)]
pub enum MeshRateLimitLists {}

impl Lists for MeshRateLimitLists {
    const TYPE: ResourceType = ResourceType::MeshRateLimit;
    const FROM_FIRST: bool = true;
    type To = Items<Conf>;
    type From = Items<Conf>;
}

/// One `from` or `to` item.
pub type Item = super::Item<Conf>;

/// Rate limit settings (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Local (per-proxy) limits; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Local>,
}

/// Local limits (Kuma's `Local`): at least one of `http`, `tcp`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Local {
    /// HTTP request rate (HTTP, HTTP/2 and gRPC inbounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<LocalHttp>,
    /// TCP connection rate (every inbound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<LocalTcp>,
}

/// Local HTTP rate limit (Kuma's `LocalHTTP`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalHttp {
    /// Switch the limit off (for an override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Requests allowed per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<Rate>,
    /// The answer to a limited request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_rate_limit: Option<OnRateLimit>,
}

/// The answer to a limited request (Kuma's `OnRateLimit`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OnRateLimit {
    /// Status code (Envoy's default 429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u32>,
    /// Response headers added (`add`, appending) or set (`set`, one per comma-separated value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderModifier>,
}

/// Local TCP rate limit (Kuma's `LocalTCP`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalTcp {
    /// Switch the limit off (for an override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Connections allowed per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_rate: Option<Rate>,
}

/// A token bucket rate (Kuma's `Rate`): `num` tokens refilled every `interval`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rate {
    /// Requests or connections per interval; greater than 0.
    #[serde(default)]
    pub num: u32,
    /// The interval; greater than 50ms (absent reads as 0, which validation refuses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
}

impl MeshRateLimit {
    /// Kuma 2.7's MeshRateLimit validation: every violation, paths rooted at `spec`.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        let gateways = self.target_ref.includes_gateways();
        let route = self.target_ref.kind == Some(TargetRefKind::MeshHTTPRoute);
        if (gateways || route) && !self.from_items().is_empty() {
            err.violation(&spec.field("from"), MUST_NOT_BE_DEFINED);
        } else {
            validate_list(&mut err, &spec.field("from"), self.from_items());
        }
        if !gateways && !self.to_items().is_empty() {
            err.violation(&spec.field("to"), MUST_NOT_BE_DEFINED);
        } else {
            validate_list(&mut err, &spec.field("to"), self.to_items());
        }
        err
    }
}

fn validate_list(err: &mut ValidationError, path: &PathBuilder, items: &[Item]) {
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        validate_target_ref_at(
            err,
            &at.field("targetRef"),
            &item.target_ref,
            ITEM_KINDS,
            false,
        );
        validate_default(err, &at.field("default"), item.default.as_ref());
    }
}

/// Kuma's `validateDefault` at `path.local`.
fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let path = path.field("local");
    let Some(local) = conf.and_then(|c| c.local.as_ref()) else {
        err.violation(&path, MUST_BE_DEFINED);
        return;
    };
    if local.tcp.is_none() && local.http.is_none() {
        err.violation(&path, must_have_at_least_one(&["tcp", "http"]));
    }
    if let Some(http) = &local.http {
        let path = path.field("http");
        if http.disabled.is_none() && http.request_rate.is_none() && http.on_rate_limit.is_none() {
            err.violation(
                &path,
                must_have_at_least_one(&["disabled", "requestRate", "onRateLimit"]),
            );
        } else {
            if let Some(rate) = &http.request_rate {
                validate_rate(err, &path.field("requestRate"), rate);
            }
            if http
                .on_rate_limit
                .as_ref()
                .and_then(|o| o.status)
                .is_some_and(|s| s == 0)
            {
                err.violation(
                    &path.field("onRateLimit").field("status"),
                    "must be greater than 0",
                );
            }
        }
    }
    if let Some(tcp) = &local.tcp {
        let path = path.field("tcp");
        if tcp.disabled.is_none() && tcp.connection_rate.is_none() {
            err.violation(
                &path,
                must_have_at_least_one(&["disabled", "connectionRate"]),
            );
        } else if let Some(rate) = &tcp.connection_rate {
            validate_rate(err, &path.field("connectionRate"), rate);
        }
    }
}

/// Kuma's `validateRate`.
fn validate_rate(err: &mut ValidationError, path: &PathBuilder, rate: &Rate) {
    if rate.num == 0 {
        err.violation(&path.field("num"), "must be greater than 0");
    }
    if rate.interval.as_ref().map_or(0, Duration::as_nanos) <= 50_000_000 {
        err.violation(&path.field("interval"), "must be greater than: 50ms");
    }
}

#[cfg(test)]
#[path = "mesh_rate_limit_tests.rs"]
mod tests;
