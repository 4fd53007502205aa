//! MeshLoadBalancingStrategy `localityAwareness` (Kuma 2.7.29,
//! `meshloadbalancingstrategy/plugin/v1alpha1/{locality_aware.go,priority.go,plugin.go}`):
//! how a DPP's endpoints of a service are grouped by zone, used by
//! [`crate::plugins::load_balancing`].
//!
//! - With `localZone` or `crossZone` set, the service's ClusterLoadAssignment is rebuilt
//!   ([`locality_aware`]): an endpoint in this zone gets locality `{zone}` (weight 1,
//!   priority 0), or `{zone, subZone: "<key>=<value>"}` with the affinity tag's weight when it
//!   carries the DPP's own value of the first matching `affinityTags` key (weights default to
//!   `9·10^(n-i-1)`, so the first tag takes 90%); an endpoint of another zone is kept only when
//!   a `crossZone.failover` rule applying from this zone admits it (`Any`, `Only` those zones,
//!   `AnyExcept` those), with priority = the rule's position + 1; the others are dropped. The
//!   overprovisioning factor is 200, or `100 / failoverThreshold.percentage` × 100 (integer
//!   division, Kuma's). Endpoints keep their weight and metadata. An endpoint's zone is the
//!   zone of its locality (set by the zone CP), else its `kuma.io/zone` tag.
//! - Otherwise, unless `disabled: true`, every locality of another zone gets priority 1, so the
//!   local zone is preferred ([`prefer_local`]).
//!
//! In a single-zone deployment endpoints have no zone, so nothing changes but the grouping.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::{
    cluster_load_assignment::Policy, lb_endpoint, ClusterLoadAssignment, LbEndpoint,
    LocalityLbEndpoints,
};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::UInt32Value;
use umbra_core::policies::mesh_load_balancing_strategy::{LocalityAwareness, ToZoneType};

use crate::context::ZONE_TAG;

/// Kuma's `defaultOverprovisingFactor`.
const DEFAULT_OVERPROVISIONING: u32 = 200;

/// `true` when `la` asks for the endpoints to be rebuilt (local zone affinity or cross-zone
/// failover).
pub fn rebuilds(la: Option<&LocalityAwareness>) -> bool {
    la.is_some_and(|l| l.local_zone.is_some() || l.cross_zone.is_some())
}

/// `true` when the cluster should weigh localities (`localZone.affinityTags` given): Kuma's
/// `shouldUseLocalityWeightedLb`.
pub fn weighs_localities(la: Option<&LocalityAwareness>) -> bool {
    la.and_then(|l| l.local_zone.as_ref())
        .and_then(|z| z.affinity_tags.as_ref())
        .is_some_and(|t| !t.is_empty())
}

/// Kuma's `Disabled` check: prefer the local zone unless `localityAwareness.disabled: true`.
pub fn prefers_local(la: Option<&LocalityAwareness>) -> bool {
    !la.and_then(|l| l.disabled).unwrap_or(false)
}

/// Every locality of `cla` in another zone than `local` gets priority 1.
pub fn prefer_local(cla: &ClusterLoadAssignment, local: &str) -> ClusterLoadAssignment {
    let mut out = cla.clone();
    for l in &mut out.endpoints {
        if l.locality.as_ref().is_some_and(|z| z.zone != local) {
            l.priority = 1;
        }
    }
    out
}

fn lb_tag<'a>(e: &'a LbEndpoint, key: &str) -> Option<&'a str> {
    let md = e.metadata.as_ref()?.filter_metadata.get("envoy.lb")?;
    match md.fields.get(key)?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s.as_str()),
        _ => None,
    }
}

fn address(e: &LbEndpoint) -> (String, u32) {
    use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
    let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
        return (String::new(), 0);
    };
    match ep.address.as_ref().and_then(|a| a.address.as_ref()) {
        Some(address::Address::SocketAddress(s)) => (
            s.address.clone(),
            match s.port_specifier {
                Some(socket_address::PortSpecifier::PortValue(p)) => p,
                _ => 0,
            },
        ),
        _ => (String::new(), 0),
    }
}

/// Kuma's `ConfigureEndpointLocalityAwareLb`: `cla` regrouped for a DPP of zone `local` whose
/// tags are `dp_tags` (see the module docs).
pub fn locality_aware(
    cla: &ClusterLoadAssignment,
    la: &LocalityAwareness,
    dp_tags: &BTreeMap<String, BTreeSet<String>>,
    local: &str,
) -> ClusterLoadAssignment {
    // Local groups: (key, the DPP's first value, weight).
    let affinity: Vec<(String, String, u32)> = la
        .local_zone
        .as_ref()
        .and_then(|z| z.affinity_tags.as_ref())
        .map(|tags| {
            let n = tags.len();
            tags.iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let value = dp_tags.get(&t.key)?.iter().next()?.clone();
                    let exp = u32::try_from(n - i - 1).unwrap_or(u32::MAX);
                    let weight = t
                        .weight
                        .unwrap_or_else(|| 9u32.saturating_mul(10u32.saturating_pow(exp)));
                    Some((t.key.clone(), value, weight))
                })
                .collect()
        })
        .unwrap_or_default();
    // Cross-zone groups: (type, zones, priority) of the rules that apply from this zone.
    let cross: Vec<(ToZoneType, BTreeSet<&str>, u32)> = la
        .cross_zone
        .iter()
        .flat_map(|c| c.failover.iter().enumerate())
        .filter(|(_, rule)| {
            rule.from
                .as_ref()
                .is_none_or(|f| f.zones.iter().any(|z| z == local))
        })
        .map(|(i, rule)| {
            let zones = rule.to.zones.iter().flatten().map(String::as_str).collect();
            (
                rule.to.zone_type,
                zones,
                u32::try_from(i + 1).unwrap_or(u32::MAX),
            )
        })
        .collect();
    // (zone, subZone) → (priority, weight, endpoints).
    type Group = (u32, u32, Vec<LbEndpoint>);
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for l in &cla.endpoints {
        let locality_zone = l.locality.as_ref().map_or("", |z| z.zone.as_str());
        for e in &l.lb_endpoints {
            let zone = if locality_zone.is_empty() {
                lb_tag(e, ZONE_TAG).unwrap_or_default()
            } else {
                locality_zone
            };
            let placed = if zone == local || zone.is_empty() {
                Some(
                    affinity
                        .iter()
                        .find(|(k, v, _)| lb_tag(e, k) == Some(v.as_str()))
                        .map_or(((local.to_owned(), String::new()), 0, 1), |(k, v, w)| {
                            ((local.to_owned(), format!("{k}={v}")), 0, *w)
                        }),
                )
            } else {
                cross.iter().find_map(|(ty, zones, priority)| {
                    let admitted = match ty {
                        ToZoneType::Any => true,
                        ToZoneType::AnyExcept => !zones.contains(zone),
                        ToZoneType::Only => zones.contains(zone),
                        ToZoneType::None => false,
                    };
                    admitted.then(|| ((zone.to_owned(), String::new()), *priority, 0))
                })
            };
            if let Some((key, priority, weight)) = placed {
                let g = groups.entry(key).or_insert((priority, weight, Vec::new()));
                g.2.push(e.clone());
            }
        }
    }
    let endpoints = groups
        .into_iter()
        .map(|((zone, sub_zone), (priority, weight, mut eps))| {
            eps.sort_by_key(address);
            LocalityLbEndpoints {
                locality: Some(Locality {
                    zone,
                    sub_zone,
                    ..Default::default()
                }),
                lb_endpoints: eps,
                priority,
                load_balancing_weight: (weight > 0).then_some(UInt32Value { value: weight }),
                ..Default::default()
            }
        })
        .collect();
    let threshold = la
        .cross_zone
        .as_ref()
        .and_then(|c| c.failover_threshold.as_ref())
        .and_then(|t| t.percentage.to_f64())
        .filter(|p| *p > 0.0);
    let factor = match threshold {
        // Kuma: uint32(100/val) * 100, the division truncated.
        Some(p) => ((100.0 / p) as u32).saturating_mul(100),
        None => DEFAULT_OVERPROVISIONING,
    };
    ClusterLoadAssignment {
        cluster_name: cla.cluster_name.clone(),
        endpoints,
        policy: Some(Policy {
            overprovisioning_factor: Some(UInt32Value { value: factor }),
            ..cla.policy.clone().unwrap_or_default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_assignment::{load_assignment, Endpoint, Locality as Loc};

    fn ep(addr: &str, zone: &str, tags: &[(&str, &str)]) -> Endpoint {
        let mut t: BTreeMap<String, String> = tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        t.insert("kuma.io/service".into(), "backend".into());
        Endpoint {
            address: addr.into(),
            port: 80,
            tags: t,
            weight: 1,
            locality: Some(Loc {
                zone: zone.into(),
                priority: 0,
            }),
        }
    }

    fn conf(json: serde_json::Value) -> LocalityAwareness {
        serde_json::from_value(json).unwrap()
    }

    fn summary(cla: &ClusterLoadAssignment) -> Vec<(String, String, u32, u32, Vec<String>)> {
        cla.endpoints
            .iter()
            .map(|l| {
                let loc = l.locality.clone().unwrap_or_default();
                (
                    loc.zone,
                    loc.sub_zone,
                    l.priority,
                    l.load_balancing_weight.map_or(0, |w| w.value),
                    l.lb_endpoints.iter().map(|e| address(e).0).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn affinity_and_failover_regroup_the_endpoints_as_kuma_does() {
        let cla = load_assignment(
            "backend",
            &[
                ep("10.0.0.1", "zone-1", &[("k8s.io/node", "n1")]),
                ep("10.0.0.2", "zone-1", &[("k8s.io/node", "n2")]),
                ep("10.2.0.1", "zone-2", &[("kuma.io/zone", "zone-2")]),
                ep("10.3.0.1", "zone-3", &[("kuma.io/zone", "zone-3")]),
            ],
        );
        let la = conf(serde_json::json!({
            "localZone": {"affinityTags": [{"key": "k8s.io/node"}]},
            "crossZone": {
                "failover": [
                    {"from": {"zones": ["zone-9"]}, "to": {"type": "Any"}},
                    {"to": {"type": "Only", "zones": ["zone-3"]}}
                ],
                "failoverThreshold": {"percentage": 70}
            }
        }));
        let dp_tags =
            BTreeMap::from([("k8s.io/node".to_owned(), BTreeSet::from(["n1".to_owned()]))]);
        let out = locality_aware(&cla, &la, &dp_tags, "zone-1");
        assert_eq!(
            summary(&out),
            [
                (
                    "zone-1".into(),
                    String::new(),
                    0,
                    1,
                    vec!["10.0.0.2".into()]
                ),
                (
                    "zone-1".into(),
                    "k8s.io/node=n1".into(),
                    0,
                    9,
                    vec!["10.0.0.1".into()]
                ),
                // zone-2 is admitted by no rule that applies from zone-1; zone-3 by the second
                // rule (priority = its position + 1).
                (
                    "zone-3".into(),
                    String::new(),
                    2,
                    0,
                    vec!["10.3.0.1".into()]
                ),
            ]
        );
        assert_eq!(
            out.policy.unwrap().overprovisioning_factor.unwrap().value,
            100,
            "100/70 truncated, times 100"
        );
        assert!(weighs_localities(Some(&la)));
        assert!(rebuilds(Some(&la)));
    }

    #[test]
    fn without_rules_other_zones_come_second_unless_disabled() {
        let cla = load_assignment(
            "backend",
            &[ep("10.0.0.1", "zone-1", &[]), ep("10.2.0.1", "zone-2", &[])],
        );
        let out = prefer_local(&cla, "zone-1");
        let priorities: Vec<u32> = out.endpoints.iter().map(|l| l.priority).collect();
        assert_eq!(priorities, [0, 1]);
        assert!(prefers_local(None));
        assert!(!prefers_local(Some(&conf(
            serde_json::json!({"disabled": true})
        ))));
        assert!(!rebuilds(Some(&conf(
            serde_json::json!({"disabled": false})
        ))));
    }
}
