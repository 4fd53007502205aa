//! MeshLoadBalancingStrategy: the typed spec (load balancer and locality awareness per `to`
//! item) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshloadbalancingstrategy/api/v1alpha1/`
//! (`meshloadbalancingstrategy.go` for the shape and JSON names, `validator.go` for the rules
//! and their order). Paths are rooted at `spec`
//! (`spec.to[0].default.loadBalancer.ringHash.hashPolicies[0].header`).
//!
//! Kuma behaviours reproduced on purpose:
//! - `to` needs at least one item; a `default` may be empty;
//! - hash policies need the section their `type` names; a cookie `path` must be absolute;
//! - `leastRequest.activeRequestBias` must be a number, 0 or more;
//! - locality awareness: affinity tags need a key, all or none of them a weight (greater than
//!   0); cross-zone failover `to.zones` must be empty for `Any`/`None` and set for
//!   `Only`/`AnyExcept`; `failoverThreshold.percentage` is a percentage greater than 0.
//!
//! Unknown `type` values of the load balancer, hash policies and failover targets are decode
//! errors (Kuma's published schema lists them as enums).

use serde::{Deserialize, Serialize};

use super::envelope::{Absent, Envelope, Items, Lists};
use super::mesh_fault_injection::IntOrString;
use super::{validate_items, validate_top_target_ref};
use crate::duration::Duration;
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{
    PathBuilder, ValidationError, GREATER_THAN_ZERO, MUST_BE_DEFINED, MUST_NOT_BE_EMPTY,
    PERCENTAGE_RANGE, STRING_MUST_BE_NUMBER,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshGateway,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];
/// Kinds allowed in `to[].targetRef`.
const TO_KINDS: &[TargetRefKind] = &[TargetRefKind::Mesh, TargetRefKind::MeshService];

/// MeshLoadBalancingStrategy spec.
pub type MeshLoadBalancingStrategy = Envelope<MeshLoadBalancingStrategyLists>;

/// What a MeshLoadBalancingStrategy spec holds: `to` items of [`Conf`], no `from`.
#[derive(Debug, Clone, PartialEq)]
pub enum MeshLoadBalancingStrategyLists {}

impl Lists for MeshLoadBalancingStrategyLists {
    const TYPE: ResourceType = ResourceType::MeshLoadBalancingStrategy;
    type To = Items<Conf>;
    type From = Absent;
}

/// One `to` item.
pub type Item = super::Item<Conf>;

/// Load balancing settings (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Zone-aware endpoint priorities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locality_awareness: Option<LocalityAwareness>,
    /// The load balancing algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
}

/// Locality awareness (Kuma's `LocalityAwareness`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityAwareness {
    /// Turn locality awareness off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Priorities inside the local zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_zone: Option<LocalZone>,
    /// Failover to other zones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_zone: Option<CrossZone>,
}

/// Local zone priorities (Kuma's `LocalZone`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalZone {
    /// Tags whose equal values make endpoints preferred, most important first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_tags: Option<Vec<AffinityTag>>,
}

/// An affinity tag (Kuma's `AffinityTag`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AffinityTag {
    /// Tag key.
    #[serde(default)]
    pub key: String,
    /// Relative weight (all or none of the tags have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

/// Cross-zone failover (Kuma's `CrossZone`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrossZone {
    /// Failover rules, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<Failover>,
    /// Healthy percentage of the local zone below which traffic fails over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_threshold: Option<FailoverThreshold>,
}

/// One failover rule (Kuma's `Failover`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Failover {
    /// The client zones it applies to (every zone when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<FromZone>,
    /// Where traffic fails over to.
    pub to: ToZone,
}

/// Client zones (Kuma's `FromZone`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FromZone {
    /// Zone names.
    #[serde(default)]
    pub zones: Vec<String>,
}

/// Failover target (Kuma's `ToZone`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToZone {
    /// `None`, `Only`, `Any` or `AnyExcept`.
    #[serde(rename = "type")]
    pub zone_type: ToZoneType,
    /// Zones for `Only` and `AnyExcept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
}

impl Default for ToZone {
    fn default() -> Self {
        ToZone {
            zone_type: ToZoneType::None,
            zones: None,
        }
    }
}

/// Kuma's `ToZoneType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ToZoneType {
    None,
    Only,
    Any,
    AnyExcept,
}

impl ToZoneType {
    fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Only => "Only",
            Self::Any => "Any",
            Self::AnyExcept => "AnyExcept",
        }
    }
}

/// Failover threshold (Kuma's `FailoverThreshold`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailoverThreshold {
    /// Percentage (integer or decimal string).
    pub percentage: IntOrString,
}

/// The load balancer (Kuma's `LoadBalancer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    /// The algorithm.
    #[serde(rename = "type")]
    pub lb_type: LoadBalancerType,
    /// Round robin settings (none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_robin: Option<Empty>,
    /// Least request settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub least_request: Option<LeastRequest>,
    /// Ring hash settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// Random settings (none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Empty>,
    /// Maglev settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maglev: Option<Maglev>,
}

/// An empty settings object (`roundRobin: {}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Kuma's `LoadBalancerType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum LoadBalancerType {
    RoundRobin,
    LeastRequest,
    RingHash,
    Random,
    Maglev,
}

/// Least request settings (Kuma's `LeastRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeastRequest {
    /// Hosts sampled per pick (Envoy's default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_count: Option<u32>,
    /// Weight bias by active requests (0 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_request_bias: Option<IntOrString>,
}

/// Ring hash settings (Kuma's `RingHash`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RingHash {
    /// `XXHash` or `MurmurHash2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_function: Option<HashFunction>,
    /// Minimum ring size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ring_size: Option<u32>,
    /// Maximum ring size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ring_size: Option<u32>,
    /// What requests are hashed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_policies: Option<Vec<HashPolicy>>,
}

/// Kuma's `HashFunctionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum HashFunction {
    XXHash,
    MurmurHash2,
}

/// Maglev settings (Kuma's `Maglev`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Maglev {
    /// Lookup table size (a prime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_size: Option<u32>,
    /// What requests are hashed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_policies: Option<Vec<HashPolicy>>,
}

/// A hash policy (Kuma's `HashPolicy`): the section `type` names is the one used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HashPolicy {
    /// `Header`, `Cookie`, `Connection`, `QueryParameter` or `FilterState`.
    #[serde(rename = "type")]
    pub policy_type: HashPolicyType,
    /// Stop at this policy when it gives a hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    /// A request header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Named>,
    /// A cookie (generated when absent, with `ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<Cookie>,
    /// The connection's source IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<Connection>,
    /// A query parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_parameter: Option<Named>,
    /// A filter state object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_state: Option<FilterState>,
}

/// Kuma's `HashPolicyType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum HashPolicyType {
    Header,
    Cookie,
    Connection,
    QueryParameter,
    FilterState,
}

/// A header or query parameter name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Named {
    /// The name.
    #[serde(default)]
    pub name: String,
}

/// A hash cookie (Kuma's `Cookie`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cookie {
    /// Cookie name.
    #[serde(default)]
    pub name: String,
    /// Lifetime of a generated cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// Path of a generated cookie; absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Connection hashing (Kuma's `Connection`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Connection {
    /// Hash on the source IP.
    #[serde(default, rename = "sourceIP", skip_serializing_if = "Option::is_none")]
    pub source_ip: Option<bool>,
}

/// Filter state hashing (Kuma's `FilterState`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterState {
    /// Filter state key.
    #[serde(default)]
    pub key: String,
}

impl MeshLoadBalancingStrategy {
    /// Kuma 2.7's MeshLoadBalancingStrategy validation: every violation, paths rooted at
    /// `spec`.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, true);
        if self.to_items().is_empty() {
            err.violation(&spec.field("to"), "needs at least one item");
        }
        validate_items(
            &mut err,
            &spec.field("to"),
            self.to_items(),
            TO_KINDS,
            validate_default,
        );
        err
    }
}

fn validate_default(err: &mut ValidationError, path: &PathBuilder, conf: Option<&Conf>) {
    let Some(conf) = conf else { return };
    if let Some(lb) = &conf.load_balancer {
        let at = path.field("loadBalancer");
        match lb.lb_type {
            LoadBalancerType::RingHash => {
                if let Some(rh) = &lb.ring_hash {
                    validate_hash_policies(
                        err,
                        &at.field("ringHash").field("hashPolicies"),
                        rh.hash_policies.as_deref(),
                    );
                }
            }
            LoadBalancerType::Maglev => {
                if let Some(m) = &lb.maglev {
                    validate_hash_policies(
                        err,
                        &at.field("maglev").field("hashPolicies"),
                        m.hash_policies.as_deref(),
                    );
                }
            }
            LoadBalancerType::LeastRequest => {
                if let Some(bias) = lb
                    .least_request
                    .as_ref()
                    .and_then(|l| l.active_request_bias.as_ref())
                {
                    let p = at.field("leastRequest").field("activeRequestBias");
                    match bias.to_decimal() {
                        None => err.violation(&p, STRING_MUST_BE_NUMBER),
                        Some(d) if d.is_negative() => {
                            err.violation(&p, "must be greater or equal then: 0")
                        }
                        Some(_) => {}
                    }
                }
            }
            LoadBalancerType::RoundRobin | LoadBalancerType::Random => {}
        }
    }
    let Some(la) = &conf.locality_awareness else {
        return;
    };
    let at = path.field("localityAwareness");
    if let Some(lz) = &la.local_zone {
        let tags = lz.affinity_tags.as_deref().unwrap_or_default();
        let p = at.field("localZone").field("affinityTags");
        let mut weighted = 0;
        for (i, t) in tags.iter().enumerate() {
            if t.key.is_empty() {
                err.violation(&p.index(i).field("key"), MUST_NOT_BE_EMPTY);
            }
            if let Some(w) = t.weight {
                if w == 0 {
                    err.violation(&p.index(i).field("weight"), "must be greater than 0");
                }
                weighted += 1;
            }
        }
        if weighted > 0 && weighted != tags.len() {
            err.violation(&p, "all or none affinity tags should have weight");
        }
    }
    if let Some(cz) = &la.cross_zone {
        let p = at.field("crossZone");
        for (i, f) in cz.failover.iter().enumerate() {
            let fp = p.field("failover").index(i);
            if let Some(from) = &f.from {
                let zp = fp.field("from").field("zones");
                if from.zones.is_empty() {
                    err.violation(&zp, MUST_NOT_BE_EMPTY);
                }
                for (j, z) in from.zones.iter().enumerate() {
                    if z.is_empty() {
                        err.violation(&zp.index(j), MUST_NOT_BE_EMPTY);
                    }
                }
            }
            let zones = f.to.zones.as_deref().unwrap_or_default();
            let tp = fp.field("to").field("zones");
            match f.to.zone_type {
                ToZoneType::Any | ToZoneType::None if !zones.is_empty() => err.violation(
                    &tp,
                    format!("must be empty when type is {}", f.to.zone_type.name()),
                ),
                ToZoneType::Only | ToZoneType::AnyExcept if zones.is_empty() => err.violation(
                    &tp,
                    format!("must not be empty when type is {}", f.to.zone_type.name()),
                ),
                _ => {}
            }
        }
        if let Some(t) = &cz.failover_threshold {
            let pp = p.field("failoverThreshold").field("percentage");
            match t.percentage.to_decimal() {
                None => err.violation(&pp, STRING_MUST_BE_NUMBER),
                Some(d) if d.is_negative() || d.cmp_int(100) == std::cmp::Ordering::Greater => {
                    err.violation(&pp, PERCENTAGE_RANGE)
                }
                Some(d) if d.is_zero() => err.violation(&pp, GREATER_THAN_ZERO),
                Some(_) => {}
            }
        }
    }
}

fn validate_hash_policies(
    err: &mut ValidationError,
    path: &PathBuilder,
    policies: Option<&[HashPolicy]>,
) {
    for (i, p) in policies.unwrap_or_default().iter().enumerate() {
        let at = path.index(i);
        let (field, missing) = match p.policy_type {
            HashPolicyType::Header => ("header", p.header.is_none()),
            HashPolicyType::Cookie => ("cookie", p.cookie.is_none()),
            HashPolicyType::QueryParameter => ("queryParameter", p.query_parameter.is_none()),
            HashPolicyType::FilterState => ("filterState", p.filter_state.is_none()),
            HashPolicyType::Connection => ("connection", p.connection.is_none()),
        };
        if missing {
            err.violation(&at.field(field), MUST_BE_DEFINED);
        } else if let Some(path) = p.cookie.as_ref().and_then(|c| c.path.as_deref()) {
            if p.policy_type == HashPolicyType::Cookie && !path.starts_with('/') {
                err.violation(
                    &at.field("cookie").field("path"),
                    "must be an absolute path",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{assert_round_trip, decodes, document, v, violations};

    fn errors(default: &str) -> Vec<(String, String)> {
        violations::<MeshLoadBalancingStrategy>(&format!(
            "targetRef: {{kind: Mesh}}\nto:\n- targetRef: {{kind: MeshService, name: backend}}\n  default: {default}\n"
        ))
    }

    #[test]
    fn kuma_rules() {
        assert_eq!(errors("{}"), []);
        assert_eq!(
            errors("{loadBalancer: {type: RingHash, ringHash: {hashFunction: MurmurHash2, minRingSize: 64, hashPolicies: [{type: Header, header: {name: x}}, {type: Cookie, cookie: {name: c, ttl: 1h, path: /}}, {type: Connection, connection: {sourceIP: true}}, {type: QueryParameter, queryParameter: {name: q}}, {type: FilterState, filterState: {key: k}}]}}}"),
            []
        );
        let d = "spec.to[0].default";
        assert_eq!(
            errors("{loadBalancer: {type: Maglev, maglev: {hashPolicies: [{type: Header}, {type: Cookie, cookie: {name: c, path: rel}}]}}}"),
            [
                v(&format!("{d}.loadBalancer.maglev.hashPolicies[0].header"), "must be defined"),
                v(&format!("{d}.loadBalancer.maglev.hashPolicies[1].cookie.path"), "must be an absolute path"),
            ]
        );
        assert_eq!(
            errors("{loadBalancer: {type: LeastRequest, leastRequest: {activeRequestBias: '-1'}}}"),
            [v(
                &format!("{d}.loadBalancer.leastRequest.activeRequestBias"),
                "must be greater or equal then: 0"
            )]
        );
        assert_eq!(
            errors("{localityAwareness: {localZone: {affinityTags: [{key: '', weight: 10}, {key: b}]}, crossZone: {failover: [{from: {zones: []}, to: {type: Any, zones: [z]}}, {to: {type: Only}}], failoverThreshold: {percentage: 0}}}}"),
            [
                v(&format!("{d}.localityAwareness.localZone.affinityTags[0].key"), "must not be empty"),
                v(&format!("{d}.localityAwareness.localZone.affinityTags"), "all or none affinity tags should have weight"),
                v(&format!("{d}.localityAwareness.crossZone.failover[0].from.zones"), "must not be empty"),
                v(&format!("{d}.localityAwareness.crossZone.failover[0].to.zones"), "must be empty when type is Any"),
                v(&format!("{d}.localityAwareness.crossZone.failover[1].to.zones"), "must not be empty when type is Only"),
                v(&format!("{d}.localityAwareness.crossZone.failoverThreshold.percentage"), "must be greater than 0"),
            ]
        );
        assert_eq!(
            violations::<MeshLoadBalancingStrategy>("targetRef: {kind: Mesh}\nto: []\n"),
            [v("spec.to", "needs at least one item")]
        );
    }

    #[test]
    fn decoding_and_round_trip() {
        let doc = |default: &str| {
            format!("targetRef: {{kind: Mesh}}\nto:\n- targetRef: {{kind: Mesh}}\n  default: {default}\n")
        };
        assert!(!decodes::<MeshLoadBalancingStrategy>(&doc(
            "{loadBalancer: {type: Random2}}"
        )));
        assert!(!decodes::<MeshLoadBalancingStrategy>(&doc(
            "{loadBalancer: {type: RoundRobin, roundRobin: {x: 1}}}"
        )));
        assert_round_trip(&document::<MeshLoadBalancingStrategy>(
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: MeshService\n      name: backend\n    default:\n      loadBalancer:\n        type: LeastRequest\n        leastRequest:\n          choiceCount: 3\n",
        ));
    }
}
