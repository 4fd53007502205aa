//! The new `targetRef` policies: typed specs and their Kuma 2.7 validators.
//!
//! Each module owns one policy type: its serde model (Kuma's JSON names, unknown fields
//! rejected) and `validate()`, whose violation paths are rooted at `spec`.
//!
//! This module holds what the policies share: the `from`/`to` [`Item`] shape and the
//! `targetRef` checks of Kuma's validators (top-level reference, then each item's reference
//! before its `default`). Each policy's own rules stay in its module.

use serde::{Deserialize, Serialize};

use crate::target_ref::{validate_target_ref, TargetRef, TargetRefKind, TargetRefOpts};
use crate::validate::{PathBuilder, ValidationError};

pub mod backend_ref;
pub(crate) mod go_json;
pub mod kuma_schema;
pub(crate) mod lenient;
pub mod mesh_access_log;
pub mod mesh_circuit_breaker;
pub mod mesh_fault_injection;
pub mod mesh_health_check;
pub mod mesh_http_route;
pub mod mesh_load_balancing_strategy;
pub mod mesh_proxy_patch;
pub mod mesh_rate_limit;
pub mod mesh_retry;
pub mod mesh_tcp_route;
pub mod mesh_timeout;
pub mod mesh_trace;
pub mod mesh_traffic_permission;
pub mod stored;
#[cfg(test)]
pub(crate) mod test_support;

/// Kuma's message when a policy with both lists has neither `from` nor `to` items.
pub(crate) const FROM_OR_TO_REQUIRED: &str = "at least one of 'from', 'to' has to be defined";

/// One `from` or `to` item (Kuma's `From`/`To`): a group of clients or destinations and its
/// configuration `C` (the policy's `Conf`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "C: Deserialize<'de>"))]
pub struct Item<C> {
    /// The group of clients (`from`) or destinations (`to`). A missing one decodes as empty and
    /// validation reports `...targetRef.kind: must be defined`, as Kuma does.
    #[serde(default)]
    pub target_ref: TargetRef,
    /// The configuration; `None` when `default` is absent (Kuma treats that as an empty `Conf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<C>,
}

/// A `from`/`to` item as the shared validation reads it: its reference and its configuration.
pub(crate) trait PolicyItem {
    /// The policy's configuration type.
    type Conf;
    /// The item's `targetRef`.
    fn target_ref(&self) -> &TargetRef;
    /// The item's `default`, if present.
    fn conf(&self) -> Option<&Self::Conf>;
}

impl<C> PolicyItem for Item<C> {
    type Conf = C;

    fn target_ref(&self) -> &TargetRef {
        &self.target_ref
    }

    fn conf(&self) -> Option<&C> {
        self.default.as_ref()
    }
}

/// Kuma's `ValidateTargetRef` for `target_ref` with `kinds` allowed, violations re-rooted at
/// `path` (`spec.targetRef.kind`).
pub(crate) fn validate_target_ref_at(
    err: &mut ValidationError,
    path: &PathBuilder,
    target_ref: &TargetRef,
    kinds: &[TargetRefKind],
    gateway_listener_tags_allowed: bool,
) {
    err.add_at(
        path,
        validate_target_ref(
            target_ref,
            &TargetRefOpts {
                supported_kinds: kinds,
                gateway_listener_tags_allowed,
            },
        ),
    );
}

/// The start of every policy's validation: Kuma's `ValidateTargetRef` on the top-level
/// `targetRef` with `kinds` allowed. Returns the violations so far and the `spec` path the
/// rest of the validation is rooted at.
pub(crate) fn validate_top_target_ref(
    target_ref: &TargetRef,
    kinds: &[TargetRefKind],
    gateway_listener_tags_allowed: bool,
) -> (ValidationError, PathBuilder) {
    let mut err = ValidationError::new();
    let spec = PathBuilder::rooted_at("spec");
    validate_target_ref_at(
        &mut err,
        &spec.field("targetRef"),
        target_ref,
        kinds,
        gateway_listener_tags_allowed,
    );
    (err, spec)
}

/// The top-level `targetRef` check the route types share (MeshHTTPRoute, MeshTCPRoute): Mesh,
/// MeshSubset, MeshGateway (listener tags allowed), MeshService, MeshServiceSubset.
pub(crate) fn validate_route_top_target_ref(
    target_ref: &TargetRef,
) -> (ValidationError, PathBuilder) {
    use TargetRefKind::*;
    validate_top_target_ref(
        target_ref,
        &[
            Mesh,
            MeshSubset,
            MeshGateway,
            MeshService,
            MeshServiceSubset,
        ],
        true,
    )
}

/// A route `to[i].targetRef` at `path.targetRef`: `Mesh` under a MeshGateway, else
/// `MeshService` (Kuma's `validateToRef` of both route types).
pub(crate) fn validate_route_to_target_ref(
    err: &mut ValidationError,
    path: &PathBuilder,
    target_ref: &TargetRef,
    top_is_gateway: bool,
) {
    let kinds: &[TargetRefKind] = if top_is_gateway {
        &[TargetRefKind::Mesh]
    } else {
        &[TargetRefKind::MeshService]
    };
    validate_target_ref_at(err, &path.field("targetRef"), target_ref, kinds, false);
}

/// Validate a `from` or `to` list at `path`: for each item, its `targetRef` against `kinds`
/// (at `path[i].targetRef`, no gateway listener tags), then `validate_conf` on its `default`
/// (at `path[i].default`, `None` when absent).
pub(crate) fn validate_items<I: PolicyItem>(
    err: &mut ValidationError,
    path: &PathBuilder,
    items: &[I],
    kinds: &[TargetRefKind],
    mut validate_conf: impl FnMut(&mut ValidationError, &PathBuilder, Option<&I::Conf>),
) {
    for (i, item) in items.iter().enumerate() {
        let path = path.index(i);
        validate_target_ref_at(
            err,
            &path.field("targetRef"),
            item.target_ref(),
            kinds,
            false,
        );
        validate_conf(err, &path.field("default"), item.conf());
    }
}

#[cfg(test)]
mod tests {
    use super::mesh_circuit_breaker::MeshCircuitBreaker;
    use super::mesh_fault_injection::MeshFaultInjection;
    use super::mesh_proxy_patch::MeshProxyPatch;
    use super::mesh_timeout::MeshTimeout;
    use super::mesh_traffic_permission::MeshTrafficPermission;
    use super::test_support::{assert_round_trip, document, v, violations, TestSpec};
    use crate::validate::MUST_BE_DEFINED;

    /// `spec` without a top-level `targetRef` decodes (as an empty reference) and validation
    /// reports `spec.targetRef.kind: must be defined` first, as Kuma does.
    fn assert_missing_target_ref_is_a_violation<T: TestSpec>(spec: &str) {
        let got = violations::<T>(spec);
        assert_eq!(
            got.first(),
            Some(&v("spec.targetRef.kind", MUST_BE_DEFINED)),
            "{}: {got:?}",
            T::TYPE
        );
    }

    #[test]
    fn missing_top_level_target_ref_is_a_violation() {
        let to = "to:\n  - targetRef:\n      kind: Mesh\n";
        let from = "from:\n  - targetRef:\n      kind: Mesh\n";
        assert_eq!(
            violations::<MeshTimeout>(to),
            [
                v("spec.targetRef.kind", MUST_BE_DEFINED),
                v(
                    "spec.to[0].default",
                    "at least one timeout should be configured"
                ),
            ]
        );
        assert_eq!(
            violations::<MeshTrafficPermission>(from),
            [
                v("spec.targetRef.kind", MUST_BE_DEFINED),
                v("spec.from[0].default.action", MUST_BE_DEFINED),
            ]
        );
        assert_missing_target_ref_is_a_violation::<MeshCircuitBreaker>(to);
        assert_missing_target_ref_is_a_violation::<MeshFaultInjection>(from);
        assert_missing_target_ref_is_a_violation::<MeshProxyPatch>("default: {}\n");
        // An empty spec: only the top-level reference and the missing items are reported.
        assert_eq!(
            violations::<MeshCircuitBreaker>("{}"),
            [
                v("spec.targetRef.kind", MUST_BE_DEFINED),
                v("spec", super::FROM_OR_TO_REQUIRED),
            ]
        );
    }

    #[test]
    fn present_target_ref_serializes_unchanged() {
        assert_round_trip(&document::<MeshTimeout>(
            "targetRef:\n  kind: MeshService\n  name: web\nto:\n  - targetRef:\n      kind: Mesh\n    default:\n      idleTimeout: 1s\n",
        ));
        assert_round_trip(&document::<MeshCircuitBreaker>(
            "targetRef:\n  kind: Mesh\n  proxyTypes: [Sidecar]\nfrom: []\n",
        ));
        assert_round_trip(&document::<MeshTrafficPermission>(
            "targetRef:\n  kind: MeshSubset\n  tags:\n    env: prod\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      action: Allow\n",
        ));
    }
}
