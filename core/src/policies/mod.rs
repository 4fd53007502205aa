//! The new `targetRef` policies: typed specs and their Kuma 2.7 validators.
//!
//! Each module owns one policy type: its serde model (Kuma's JSON names, unknown fields
//! rejected) and `validate()`, whose violation paths are rooted at `spec`.
//!
//! This module holds the type list (`for_each_type`: every resource type, described once) and
//! what the policies share: the `from`/`to` [`Item`] shape (their `{targetRef, to, from}`
//! envelope is [`envelope::Envelope`]) and the `targetRef` checks of Kuma's validators
//! (top-level reference, then each item's reference before its `default`). Each policy's own
//! rules stay in its module.

use serde::{Deserialize, Serialize};

use crate::target_ref::{validate_target_ref, TargetRef, TargetRefKind, TargetRefOpts};
use crate::validate::{PathBuilder, ValidationError};

pub mod backend_ref;
pub mod envelope;
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
pub mod schema_only;
#[cfg(test)]
pub(crate) mod test_support;

/// The type list: every resource type Umbra knows, described once, in [`ResourceType`]'s
/// declaration order. Each entry gives the type's variant and:
///
/// - `name`, `path`: Kuma's type name and REST path segment;
/// - `display`: Kuma's singular / plural display names (`GET /_resources`);
/// - `kind`: its family ([`TypeKind`]); `scope`: `Global` or `Mesh` ([`Scope`]);
/// - `levels`: the item lists of a `targetRef` policy's spec (`To`, `From`, `Single` for a
///   top-level `default`; Kuma's `hasToTargetRef`/`hasFromTargetRef`), empty for other types;
/// - `replaces`: the old type a new policy replaces in the migration (its counterpart);
/// - `generated`: whether Umbra generates Envoy config from it;
/// - `spec`: its typed spec, `own(path)` for a [`crate::resource::Spec`] variant of the type's
///   name holding that type (paths from the crate root), or `shared(Variant)` for one of the
///   variants several types share with their type (`StoredPolicy`, `Selected`, `Secret`).
///
/// `for_each_type!(callback)` hands the whole list to the macro `callback`, which generates
/// from it: [`crate::type_info`] makes [`ResourceType`] and its descriptors (names, display
/// names, levels, pairing, scope), [`crate::resource`] makes `Spec` and its decode, encode,
/// validate and type matches. Adding a family is its module above (`pub mod`), one entry here
/// and its plugin in `umbra-xds`.
///
/// [`ResourceType`]: crate::type_info::ResourceType
/// [`TypeKind`]: crate::type_info::TypeKind
/// [`Scope`]: crate::type_info::Scope
macro_rules! for_each_type {
    ($callback:ident) => {
        $callback! {
            Mesh {
                name: "Mesh", path: "meshes",
                display: "Mesh" / "Meshes",
                kind: Infra, scope: Global, levels: [], replaces: [], generated: true,
                spec: own(mesh::MeshSpec),
            }
            Dataplane {
                name: "Dataplane", path: "dataplanes",
                display: "Dataplane" / "Dataplanes",
                kind: Infra, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(dataplane::DataplaneSpec),
            }
            MeshTimeout {
                name: "MeshTimeout", path: "meshtimeouts",
                display: "Mesh Timeout" / "Mesh Timeouts",
                kind: NewPolicy, scope: Mesh, levels: [To, From], replaces: [Timeout],
                generated: true,
                spec: own(policies::mesh_timeout::MeshTimeout),
            }
            MeshCircuitBreaker {
                name: "MeshCircuitBreaker", path: "meshcircuitbreakers",
                display: "Mesh Circuit Breaker" / "Mesh Circuit Breakers",
                kind: NewPolicy, scope: Mesh, levels: [To, From], replaces: [CircuitBreaker],
                generated: true,
                spec: own(policies::mesh_circuit_breaker::MeshCircuitBreaker),
            }
            MeshFaultInjection {
                name: "MeshFaultInjection", path: "meshfaultinjections",
                display: "Mesh Fault Injection" / "Mesh Fault Injections",
                kind: NewPolicy, scope: Mesh, levels: [To, From], replaces: [FaultInjection],
                generated: true,
                spec: own(policies::mesh_fault_injection::MeshFaultInjection),
            }
            MeshTrafficPermission {
                name: "MeshTrafficPermission", path: "meshtrafficpermissions",
                display: "Mesh Traffic Permission" / "Mesh Traffic Permissions",
                kind: NewPolicy, scope: Mesh, levels: [From], replaces: [TrafficPermission],
                generated: true,
                spec: own(policies::mesh_traffic_permission::MeshTrafficPermission),
            }
            MeshProxyPatch {
                name: "MeshProxyPatch", path: "meshproxypatches",
                display: "Mesh Proxy Patch" / "Mesh Proxy Patches",
                kind: NewPolicy, scope: Mesh, levels: [Single], replaces: [ProxyTemplate],
                generated: true,
                spec: own(policies::mesh_proxy_patch::MeshProxyPatch),
            }
            MeshHTTPRoute {
                name: "MeshHTTPRoute", path: "meshhttproutes",
                display: "Mesh HTTP Route" / "Mesh HTTP Routes",
                kind: NewPolicy, scope: Mesh, levels: [To], replaces: [], generated: true,
                spec: own(policies::mesh_http_route::MeshHttpRoute),
            }
            MeshTCPRoute {
                name: "MeshTCPRoute", path: "meshtcproutes",
                display: "Mesh TCP Route" / "Mesh TCP Routes",
                kind: NewPolicy, scope: Mesh, levels: [To], replaces: [], generated: true,
                spec: own(policies::mesh_tcp_route::MeshTcpRoute),
            }
            Timeout {
                name: "Timeout", path: "timeouts",
                display: "Timeout" / "Timeouts",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::timeout::Timeout),
            }
            CircuitBreaker {
                name: "CircuitBreaker", path: "circuit-breakers",
                display: "Circuit Breaker" / "Circuit Breakers",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::circuit_breaker::CircuitBreaker),
            }
            FaultInjection {
                name: "FaultInjection", path: "fault-injections",
                display: "Fault Injection" / "Fault Injections",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::fault_injection::FaultInjection),
            }
            TrafficPermission {
                name: "TrafficPermission", path: "traffic-permissions",
                display: "Traffic Permission" / "Traffic Permissions",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::traffic_permission::TrafficPermission),
            }
            ProxyTemplate {
                name: "ProxyTemplate", path: "proxytemplates",
                display: "Proxy Template" / "Proxy Templates",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::proxy_template::ProxyTemplate),
            }
            TrafficRoute {
                name: "TrafficRoute", path: "traffic-routes",
                display: "Traffic Route" / "Traffic Routes",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::traffic_route::TrafficRoute),
            }
            MeshRetry {
                name: "MeshRetry", path: "meshretries",
                display: "Mesh Retry" / "Mesh Retries",
                kind: NewPolicy, scope: Mesh, levels: [To], replaces: [Retry], generated: true,
                spec: own(policies::mesh_retry::MeshRetry),
            }
            MeshHealthCheck {
                name: "MeshHealthCheck", path: "meshhealthchecks",
                display: "Mesh Health Check" / "Mesh Health Checks",
                kind: NewPolicy, scope: Mesh, levels: [To], replaces: [HealthCheck],
                generated: true,
                spec: own(policies::mesh_health_check::MeshHealthCheck),
            }
            MeshLoadBalancingStrategy {
                name: "MeshLoadBalancingStrategy", path: "meshloadbalancingstrategies",
                display: "Mesh Load Balancing Strategy" / "Mesh Load Balancing Strategies",
                kind: NewPolicy, scope: Mesh, levels: [To], replaces: [], generated: true,
                spec: own(policies::mesh_load_balancing_strategy::MeshLoadBalancingStrategy),
            }
            MeshAccessLog {
                name: "MeshAccessLog", path: "meshaccesslogs",
                display: "Mesh Access Log" / "Mesh Access Logs",
                kind: NewPolicy, scope: Mesh, levels: [To, From], replaces: [TrafficLog],
                generated: true,
                spec: own(policies::mesh_access_log::MeshAccessLog),
            }
            MeshRateLimit {
                name: "MeshRateLimit", path: "meshratelimits",
                display: "Mesh Rate Limit" / "Mesh Rate Limits",
                kind: NewPolicy, scope: Mesh, levels: [To, From], replaces: [RateLimit],
                generated: true,
                spec: own(policies::mesh_rate_limit::MeshRateLimit),
            }
            MeshTrace {
                name: "MeshTrace", path: "meshtraces",
                display: "Mesh Trace" / "Mesh Traces",
                kind: NewPolicy, scope: Mesh, levels: [Single], replaces: [TrafficTrace],
                generated: true,
                spec: own(policies::mesh_trace::MeshTrace),
            }
            MeshMetric {
                name: "MeshMetric", path: "meshmetrics",
                display: "Mesh Metric" / "Mesh Metrics",
                kind: NewPolicy, scope: Mesh, levels: [Single], replaces: [], generated: false,
                spec: shared(StoredPolicy),
            }
            Retry {
                name: "Retry", path: "retries",
                display: "Retry" / "Retries",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::retry::Retry),
            }
            HealthCheck {
                name: "HealthCheck", path: "health-checks",
                display: "Health Check" / "Health Checks",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::health_check::HealthCheck),
            }
            TrafficLog {
                name: "TrafficLog", path: "traffic-logs",
                display: "Traffic Log" / "Traffic Logs",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::traffic_log::TrafficLog),
            }
            RateLimit {
                name: "RateLimit", path: "rate-limits",
                display: "Rate Limit" / "Rate Limits",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::rate_limit::RateLimit),
            }
            TrafficTrace {
                name: "TrafficTrace", path: "traffic-traces",
                display: "Traffic Trace" / "Traffic Traces",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(old::traffic_log::TrafficTrace),
            }
            VirtualOutbound {
                name: "VirtualOutbound", path: "virtual-outbounds",
                display: "Virtual Outbound" / "Virtual Outbounds",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: shared(Selected),
            }
            MeshGatewayRoute {
                name: "MeshGatewayRoute", path: "meshgatewayroutes",
                display: "Mesh Gateway Route" / "Mesh Gateway Routes",
                kind: OldPolicy, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: shared(Selected),
            }
            MeshGateway {
                name: "MeshGateway", path: "meshgateways",
                display: "Mesh Gateway" / "Mesh Gateways",
                kind: StoredOnly, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: shared(Selected),
            }
            ExternalService {
                name: "ExternalService", path: "external-services",
                display: "External Service" / "External Services",
                kind: StoredOnly, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: own(ungenerated::ExternalService),
            }
            Secret {
                name: "Secret", path: "secrets",
                display: "Secret" / "Secrets",
                kind: StoredOnly, scope: Mesh, levels: [], replaces: [], generated: true,
                spec: shared(Secret),
            }
            GlobalSecret {
                name: "GlobalSecret", path: "global-secrets",
                display: "Global Secret" / "Global Secrets",
                kind: StoredOnly, scope: Global, levels: [], replaces: [], generated: false,
                spec: shared(Secret),
            }
            ZoneIngress {
                name: "ZoneIngress", path: "zone-ingresses",
                display: "Zone Ingress" / "Zone Ingresses",
                kind: Infra, scope: Global, levels: [], replaces: [], generated: true,
                spec: own(zone_ingress::ZoneIngressSpec),
            }
            ZoneEgress {
                name: "ZoneEgress", path: "zoneegresses",
                display: "Zone Egress" / "Zone Egresses",
                kind: Infra, scope: Global, levels: [], replaces: [], generated: true,
                spec: own(zone_egress::ZoneEgressSpec),
            }
        }
    };
}
pub(crate) use for_each_type;

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
                sample_tag_allowed: false,
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
    err.add_at(
        &spec.field("targetRef"),
        validate_target_ref(
            target_ref,
            &TargetRefOpts {
                supported_kinds: kinds,
                gateway_listener_tags_allowed,
                // Only the top-level targetRef selects DPPs: a rollout sample may narrow it.
                sample_tag_allowed: true,
            },
        ),
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

    /// The lists of each envelope are the levels the type list gives its type.
    #[test]
    fn envelopes_have_the_type_lists_levels() {
        use super::envelope::{List, Lists};
        fn check<L: Lists>() {
            assert!(L::TYPE.is_target_ref(), "{}", L::TYPE);
            assert_eq!(L::TYPE.has_to_target_ref(), L::To::EXISTS, "{} to", L::TYPE);
            assert_eq!(
                L::TYPE.has_from_target_ref(),
                L::From::EXISTS,
                "{} from",
                L::TYPE
            );
            assert!(!L::TYPE.levels().single, "{}", L::TYPE);
        }
        check::<super::mesh_access_log::MeshAccessLogLists>();
        check::<super::mesh_circuit_breaker::MeshCircuitBreakerLists>();
        check::<super::mesh_fault_injection::MeshFaultInjectionLists>();
        check::<super::mesh_health_check::MeshHealthCheckLists>();
        check::<super::mesh_load_balancing_strategy::MeshLoadBalancingStrategyLists>();
        check::<super::mesh_rate_limit::MeshRateLimitLists>();
        check::<super::mesh_retry::MeshRetryLists>();
        check::<super::mesh_timeout::MeshTimeoutLists>();
        check::<super::mesh_traffic_permission::MeshTrafficPermissionLists>();
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
