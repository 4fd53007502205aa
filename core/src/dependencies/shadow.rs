//! Where a DPP's config can differ between the Live and Shadow views (issue 39, item 3: the
//! Shadow view built from the served Live one, regenerating only what the differing policies
//! reach).
//!
//! The differing policies are those in one view's [`super::dependencies`] and not in the
//! other's. When each is a new policy (not a route, not observed) whose top-level `targetRef`
//! selects proxies directly and whose only entries are `to` entries naming services
//! (`MeshService`), and its type's rules are built on the one-key fast path in both views (as
//! the narrowing of [`super::dependencies`] requires: an entry for one service then changes no
//! rule of another), the two configs can differ only in what is generated for those services
//! and for the inbounds (with a first policy of its type, a type applies to an inbound at all): the
//! resources of the inbounds, and of the outbounds that send to one of the services, directly
//! or through a route's backends. Anything else (an old policy, a superseded type, a route, a
//! `from` or top-level `default`, a builtin gateway, direct access) may change any part of the
//! config.

use crate::dataplane::DataplaneSpec;
use crate::policy::TargetRefPolicy;
use crate::resource::{ResourceType, TypeKind};
use crate::target_ref::TargetRefKind;
use crate::view::{PolicySet, View};

use super::{dependencies, reach, PolicyDependency};

/// Where `dp`'s config can differ between two views ([`view_difference`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewDifference<'a> {
    /// The same dependencies: both views generate the same config.
    Same,
    /// Only the resources generated for these outbounds and for the inbounds can differ.
    Outbounds {
        /// The services the differing policies' `to` entries name, sorted, without duplicates.
        services: Vec<&'a str>,
        /// Indexes into `dp.networking.outbound` of the outbounds reaching one of `services`
        /// (their own service, or a backend of a route entry that may apply to them), in order.
        outbounds: Vec<usize>,
    },
    /// Any part of the config can differ.
    Whole,
}

/// Where `dp`'s config (a sidecar of `live`'s and `shadow`'s mesh, its transparent-proxy VIP
/// outbounds resolved, as for [`super::views_differ`]) can differ between `live` and `shadow`
/// (see the module docs).
pub fn view_difference<'a>(
    dp: &'a DataplaneSpec,
    live: &'a PolicySet,
    shadow: &'a PolicySet,
) -> ViewDifference<'a> {
    let (l, s) = (dependencies(dp, live), dependencies(dp, shadow));
    if l.policies == s.policies {
        return ViewDifference::Same;
    }
    if crate::gateway::is_builtin(dp) || super::behind_direct_access(dp) {
        return ViewDifference::Whole; // not narrowed: anything read can change anything
    }
    let only_in = |a: &[PolicyDependency<'a>], b: &[PolicyDependency<'a>]| {
        a.iter()
            .filter(|d| !b.contains(d))
            .copied()
            .collect::<Vec<_>>()
    };
    let mut differing = only_in(&l.policies, &s.policies);
    differing.extend(only_in(&s.policies, &l.policies));
    let mut services: Vec<&'a str> = Vec::new();
    for d in differing {
        let Some(p) = to_services_only(d, live, shadow) else {
            return ViewDifference::Whole;
        };
        // Rules on the one-key fast path in both views: an entry for one service changes no
        // rule of another.
        let list = |set: &'a PolicySet| set.new.get(&d.ty).map_or(&[][..], Vec::as_slice);
        if !reach::type_allows_narrowing(list(live)) || !reach::type_allows_narrowing(list(shadow))
        {
            return ViewDifference::Whole;
        }
        services.extend(p.to.iter().map(|i| i.target_ref.name.as_str()));
    }
    services.sort_unstable();
    services.dedup();
    let routes: Vec<&TargetRefPolicy> = shadow.routes.iter().collect();
    let include_shadow = shadow.view == Some(View::Shadow);
    let outbounds = (dp.networking.outbound.iter().enumerate())
        .filter(|(_, o)| {
            reach::reached_through(dp, vec![o.service()], shadow, &routes, include_shadow)
                .iter()
                .any(|r| services.contains(r))
        })
        .map(|(i, _)| i)
        .collect();
    ViewDifference::Outbounds {
        services,
        outbounds,
    }
}

/// The policy of dependency `d` (found in `shadow`, else `live`) when it is a new policy, not a
/// route and not observed, whose top-level `targetRef` selects proxies directly and whose only
/// entries are `to` entries naming a `MeshService`.
fn to_services_only<'a>(
    d: PolicyDependency<'_>,
    live: &'a PolicySet,
    shadow: &'a PolicySet,
) -> Option<&'a TargetRefPolicy> {
    use TargetRefKind as K;
    if d.observed
        || d.superseded
        || d.ty.kind() != TypeKind::NewPolicy
        || matches!(
            d.ty,
            ResourceType::MeshHTTPRoute | ResourceType::MeshTCPRoute
        )
    {
        return None;
    }
    let find = |set: &'a PolicySet| {
        (set.new.get(&d.ty).into_iter().flatten()).find(|p| p.meta().name == d.name)
    };
    let p = find(shadow).or_else(|| find(live))?;
    let direct = matches!(
        p.target_ref.kind,
        Some(K::Mesh | K::MeshSubset | K::MeshService | K::MeshServiceSubset)
    );
    let to_services = !p.to.is_empty()
        && p.to
            .iter()
            .all(|i| matches!(i.target_ref.kind, Some(K::MeshService)));
    (direct && p.from.is_empty() && p.single.is_none() && to_services).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use crate::view::Promotion;

    const MESH: &str = r"
type: Dataplane
mesh: m
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - {port: 9001, tags: {kuma.io/service: backend}}
  - {port: 9002, tags: {kuma.io/service: db}}
  - {port: 9003, tags: {kuma.io/service: cache}}
---
type: MeshTimeout
mesh: m
name: all
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
---
type: MeshHTTPRoute
mesh: m
name: split
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, name: cache}
    rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      default:
        backendRefs: [{kind: MeshService, name: cache, weight: 1}, {kind: MeshService, name: db, weight: 1}]
";

    fn difference(extra: &str) -> String {
        let rs = Resource::all_from_bytes(format!("{MESH}---\n{extra}").as_bytes()).unwrap();
        let live = PolicySet::build("m", &rs, View::Live);
        let shadow = PolicySet::build_shadow("m", &rs, &Promotion::All);
        let dp = rs[0].as_dataplane().unwrap();
        format!("{:?}", view_difference(dp, &live, &shadow))
    }

    #[test]
    fn a_shadow_policy_to_one_service_reaches_its_outbounds_and_the_routes_to_it() {
        let to_db = "type: MeshTimeout\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {idleTimeout: 2s}}]\n";
        // db's own outbound (1), and cache's (2), whose route sends to db.
        assert_eq!(
            difference(to_db),
            r#"Outbounds { services: ["db"], outbounds: [1, 2] }"#
        );
        let to_backend = to_db.replace("name: db", "name: backend");
        assert_eq!(
            difference(&to_backend),
            r#"Outbounds { services: ["backend"], outbounds: [0] }"#
        );
        // A service the DPP does not reach: narrowed away in both views.
        assert_eq!(
            difference(&to_db.replace("name: db", "name: other")),
            "Same"
        );
    }

    #[test]
    fn anything_else_may_change_the_whole_config() {
        for extra in [
            // Mesh-wide `to`.
            "type: MeshTimeout\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 2s}}]\n",
            // A `from` entry.
            "type: MeshTimeout\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  from: [{targetRef: {kind: Mesh}, default: {idleTimeout: 2s}}]\n",
            // A route.
            "type: MeshHTTPRoute\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: db}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default: {}\n",
            // An old policy.
            "type: Timeout\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: db}}]\nconf: {connectTimeout: 1s}\n",
        ] {
            assert_eq!(difference(extra), "Whole", "{extra}");
        }
    }

    #[test]
    fn rules_off_the_fast_path_may_change_every_outbound() {
        // A live `to` entry for a subset of db: rules of the type are not built on the one-key
        // fast path, where an entry for one service could change another's.
        let subset = "type: MeshCircuitBreaker\nmesh: m\nname: live\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshServiceSubset, name: db, tags: {version: v1}}, default: {connectionLimits: {maxConnections: 1}}}]\n";
        let shadow = "type: MeshCircuitBreaker\nmesh: m\nname: s\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {connectionLimits: {maxConnections: 2}}}]\n";
        assert_eq!(
            difference(shadow),
            r#"Outbounds { services: ["backend"], outbounds: [0] }"#
        );
        assert_eq!(difference(&format!("{subset}---\n{shadow}")), "Whole");
    }
}
