//! Which DPPs a change of new policies can reach (issue 39: touch only the DPPs a change
//! reaches), so a control plane that kept each DPP's dependencies from the view before the
//! change need not list them again for the DPPs it cannot reach.
//!
//! Two views of one mesh, `before` and `after`, that differ only in some new policies
//! ([`only_policies_differ`] checks what it can of that; the caller vouches that nothing else
//! in the mesh changed), give a DPP the same [`super::dependencies`] when, for each changed
//! type, the type's part of its dependencies is the same in both views and holds none of the
//! changed policies ([`unchanged_by`]): every other part is computed from inputs that did not
//! change. Reading one type's policies costs a fraction of reading all of them, and a Mesh-wide
//! policy whose `to` names one service leaves the dependencies of every DPP not calling it
//! unchanged.

use crate::dataplane::DataplaneSpec;
use crate::policy::TargetRefPolicy;
use crate::resource::{ResourceType, TypeKind};
use crate::view::{PolicySet, View};

use super::reach;

/// `true` when `before` and `after` (views of one mesh, the caller vouching that only the new
/// policies `changed` differ between the store states they were built from) agree on
/// everything [`unchanged_by`] does not compare: each changed policy is a new policy whose
/// type is not a route (MeshHTTPRoute and MeshTCPRoute: every DPP reads them), nor observed in
/// either view; which old types are superseded and which are switched off by staged copies is
/// the same; and the views are of the same kind.
pub fn only_policies_differ(
    before: &PolicySet,
    after: &PolicySet,
    changed: &[(ResourceType, &str)],
) -> bool {
    let observed = |set: &PolicySet, ty: &ResourceType, name: &str| {
        set.observed.contains_key(ty)
            || (set.new.get(ty).into_iter().flatten())
                .any(|p| p.meta().name == name && p.meta().is_observed())
    };
    before.view == after.view
        && before.superseded == after.superseded
        && before.staged_off == after.staged_off
        && changed.iter().all(|(ty, name)| {
            ty.kind() == TypeKind::NewPolicy
                && !matches!(ty, ResourceType::MeshHTTPRoute | ResourceType::MeshTCPRoute)
                && !observed(before, ty, name)
                && !observed(after, ty, name)
        })
}

/// `true` when `dp` (a Dataplane of both views, the same in both, not a builtin gateway) has
/// the same [`super::dependencies`] in `before` and `after`, none of them one of `changed`,
/// given [`only_policies_differ`]`(before, after, changed)`: for each changed type, the type's
/// part of its dependencies is the same in both views and names no changed policy. `false`
/// for a builtin gateway (its dependencies are read another way).
pub fn unchanged_by(
    dp: &DataplaneSpec,
    before: &PolicySet,
    after: &PolicySet,
    changed: &[(ResourceType, &str)],
) -> bool {
    if crate::gateway::is_builtin(dp) {
        return false;
    }
    let include_shadow = after.view == Some(View::Shadow);
    let routes: Vec<&TargetRefPolicy> = after.routes.iter().collect();
    // As `super::collect` narrows: not behind direct access.
    let direct_access = dp
        .networking
        .transparent_proxying
        .as_ref()
        .is_some_and(|t| !t.direct_access().is_empty());
    let reached =
        (!direct_access).then(|| reach::reached_services(dp, after, &routes, include_shadow));
    let mut types: Vec<ResourceType> = changed.iter().map(|(ty, _)| *ty).collect();
    types.sort_unstable();
    types.dedup();
    types.into_iter().all(|ty| {
        fn read<'s>(
            dp: &DataplaneSpec,
            set: &'s PolicySet,
            ty: ResourceType,
            routes: &[&TargetRefPolicy],
            include_shadow: bool,
            reached: Option<&[&str]>,
        ) -> Vec<&'s str> {
            let list = set.new.get(&ty).map_or(&[][..], Vec::as_slice);
            reach::type_dependencies(dp, list, routes, include_shadow, reached)
                .into_iter()
                .map(|p| p.meta().name.as_str())
                .collect()
        }
        let read = |set| read(dp, set, ty, &routes, include_shadow, reached.as_deref());
        let (b, a) = (read(before), read(after));
        b == a && !changed.iter().any(|(t, name)| *t == ty && a.contains(name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;

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
---
type: Dataplane
mesh: m
name: db
networking:
  address: 10.0.0.2
  inbound:
  - port: 5432
    tags: {kuma.io/service: db, kuma.io/protocol: tcp}
---
type: MeshTimeout
mesh: m
name: all
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
";

    fn views(before: &str, after: &str) -> (Vec<Resource>, PolicySet, PolicySet) {
        let b = Resource::all_from_bytes(format!("{MESH}---\n{before}").as_bytes()).unwrap();
        let a = Resource::all_from_bytes(format!("{MESH}---\n{after}").as_bytes()).unwrap();
        let (vb, va) = (
            PolicySet::build("m", &b, View::Live),
            PolicySet::build("m", &a, View::Live),
        );
        (a, vb, va)
    }

    const TO_BACKEND: &str = "type: MeshTimeout\nmesh: m\nname: one\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {idleTimeout: 2s}}]\n";

    #[test]
    fn a_policy_to_one_service_reaches_its_callers_only() {
        let after = TO_BACKEND.replace("2s", "3s");
        let (rs, before, after) = views(TO_BACKEND, &after);
        let changed = [(ResourceType::MeshTimeout, "one")];
        assert!(only_policies_differ(&before, &after, &changed));
        let web = rs[0].as_dataplane().unwrap();
        let db = rs[1].as_dataplane().unwrap();
        assert!(!unchanged_by(web, &before, &after, &changed));
        assert!(unchanged_by(db, &before, &after, &changed));
        // And as the full lists say.
        assert_eq!(
            super::super::dependencies(db, &before),
            super::super::dependencies(db, &after)
        );
    }

    #[test]
    fn a_policy_that_decides_a_type_applies_reaches_every_dpp_it_selects() {
        // Deleting the only Mesh-wide MeshTimeout: the one to backend no longer has its
        // inbounds covered, so it becomes db's dependency.
        let b = Resource::all_from_bytes(format!("{MESH}---\n{TO_BACKEND}").as_bytes()).unwrap();
        let a: Vec<Resource> = (b.iter())
            .filter(|r| !(r.ty() == ResourceType::MeshTimeout && r.meta.name == "all"))
            .cloned()
            .collect();
        let (before, after) = (
            PolicySet::build("m", &b, View::Live),
            PolicySet::build("m", &a, View::Live),
        );
        let changed = [(ResourceType::MeshTimeout, "all")];
        assert!(only_policies_differ(&before, &after, &changed));
        let db = a[1].as_dataplane().unwrap();
        assert!(!unchanged_by(db, &before, &after, &changed));
        assert_ne!(
            super::super::dependencies(db, &before),
            super::super::dependencies(db, &after)
        );
    }

    #[test]
    fn routes_old_policies_and_a_superseding_first_policy_are_not_only_policies() {
        let (_, before, after) = views("", "");
        for ty in [ResourceType::MeshHTTPRoute, ResourceType::Timeout] {
            assert!(!only_policies_differ(&before, &after, &[(ty, "x")]));
        }
        let old = "type: Timeout\nmesh: m\nname: old\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 1s}\n";
        let without = Resource::all_from_bytes(old.as_bytes()).unwrap();
        let with = Resource::all_from_bytes(format!("{MESH}---\n{old}").as_bytes()).unwrap();
        let (before, after) = (
            PolicySet::build("m", &without, View::Live),
            PolicySet::build("m", &with, View::Live),
        );
        assert!(!only_policies_differ(
            &before,
            &after,
            &[(ResourceType::MeshTimeout, "all")]
        ));
    }
}
