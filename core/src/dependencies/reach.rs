//! What a sidecar can send to, and which new policies that makes irrelevant to it (issue 39:
//! a change regenerates only the DPPs whose config it can alter).
//!
//! A sidecar reaches the services of its outbounds and the backends of the route entries that
//! apply to one of them (MeshHTTPRoute and MeshTCPRoute `backendRefs` and mirrors, old
//! TrafficRoute split destinations), plus `pass_through` behind a transparent proxy (the
//! element MeshAccessLog's `to` rules are computed for on passthrough listeners).
//!
//! A new policy is *narrowed away* for a sidecar (not one of its dependencies) when all of:
//! - its top-level `targetRef` selects proxies directly (`Mesh`, `MeshSubset`, `MeshService`,
//!   `MeshServiceSubset`) and it has only `to` entries (no `from`, no top-level `default`),
//!   each a `MeshService` the sidecar does not reach: its `to` rules are for elements no plugin
//!   computes on this sidecar;
//! - every `to` entry of every policy of its type in the view is `Mesh` or `MeshService` and
//!   there are fewer than [`MAX_ITEMS`] of them: rules are then built on the one-key fast path,
//!   where an entry for another service changes no rule of this sidecar's services and cannot
//!   make the type too complex to build (a fact of the whole view, so crossing it changes every
//!   sidecar's dependencies);
//! - no policy of its type targets a MeshHTTPRoute (route rules add a tag key);
//! - the policies of its type the sidecar does read (resolved, with `to` entries) already
//!   select every inbound it selects, and the delegated gateway if it selects that: whether a
//!   type applies to an inbound at all changes the config (with any MeshTimeout an inbound gets
//!   Kuma's defaults), so a narrowed policy must not be the one deciding it.

use std::collections::BTreeSet;

use crate::dataplane::{DataplaneSpec, InboundKey};
use crate::matching::{select, Selection};
use crate::old_matching::{dataplane_matches, OldPolicyRef, PASS_THROUGH_SERVICE};
use crate::policy::TargetRefPolicy;
use crate::resource::{ResourceType, Spec};
use crate::rules::MAX_ITEMS;
use crate::target_ref::{TargetRefKind, SERVICE_TAG};
use crate::view::PolicySet;

/// A TrafficRoute destination standing for the outbound's own service.
const SAME_SERVICE: &str = "*";

/// The services a sidecar can send to (see the module docs): its outbounds', `pass_through`
/// behind a transparent proxy, then the backends of every route entry that may apply to one of
/// its outbounds, duplicates kept.
pub(super) fn reached_services<'a>(
    dp: &'a DataplaneSpec,
    policies: &'a PolicySet,
    routes: &[&TargetRefPolicy],
    include_shadow: bool,
) -> Vec<&'a str> {
    let mut outbounds: Vec<&'a str> = dp
        .networking
        .outbound
        .iter()
        .map(crate::dataplane::Outbound::service)
        .collect();
    if dp.networking.transparent_proxying.is_some() {
        outbounds.push(PASS_THROUGH_SERVICE);
    }
    reached_through(dp, outbounds, policies, routes, include_shadow)
}

/// The services `dp` reaches through the outbounds to `outbounds` (service names; a subset of
/// its own, or all of them as [`reached_services`] gives): those, then the backends of every
/// route entry that may apply to one of them, duplicates kept.
pub(super) fn reached_through<'a>(
    dp: &DataplaneSpec,
    outbounds: Vec<&'a str>,
    policies: &'a PolicySet,
    routes: &[&TargetRefPolicy],
    include_shadow: bool,
) -> Vec<&'a str> {
    let mut out = outbounds.clone();
    for ty in [ResourceType::MeshHTTPRoute, ResourceType::MeshTCPRoute] {
        for p in policies.new.get(&ty).into_iter().flatten() {
            if !include_shadow && p.meta().is_shadow() {
                continue;
            }
            let selected =
                select(&p.meta().mesh, &p.target_ref, dp, routes).map_or(true, |s| s.any());
            if !selected {
                continue;
            }
            for item in &p.to {
                // An entry for a service the sidecar has no outbound to generates nothing.
                let to_service = matches!(
                    item.target_ref.kind,
                    Some(TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset)
                );
                if to_service && !outbounds.contains(&item.target_ref.name.as_str()) {
                    continue;
                }
                backend_names(&item.conf, &mut out);
            }
        }
    }
    for r in policies.old_policies_with_superseded(ResourceType::TrafficRoute) {
        let Some(p) = OldPolicyRef::from_resource(0, r) else {
            continue;
        };
        let selects = p.sources.is_empty()
            || p.sources
                .iter()
                .any(|s| dataplane_matches(dp, &s.match_tags));
        // Its destinations: services the sidecar has an outbound to (or any).
        let to_outbound = p.destinations.is_empty()
            || p.destinations.iter().any(|d| {
                d.match_tags
                    .get(SERVICE_TAG)
                    .is_none_or(|s| s == SAME_SERVICE || outbounds.contains(&s.as_str()))
            });
        let (true, true, Spec::TrafficRoute(tr)) = (selects, to_outbound, &r.spec) else {
            continue;
        };
        let Some(conf) = &tr.conf else { continue };
        let destinations = conf
            .split
            .iter()
            .map(|s| &s.destination)
            .chain([&conf.destination])
            .chain(conf.http.iter().flat_map(|h| {
                h.split
                    .iter()
                    .map(|s| &s.destination)
                    .chain([&h.destination])
            }));
        for d in destinations {
            // `*` is the outbound's own service, already in.
            match d.get(SERVICE_TAG) {
                Some(s) if s != SAME_SERVICE => out.push(s.as_str()),
                _ => {}
            }
        }
    }
    out
}

/// The service names of every backend reference in a route entry (`backendRefs` items and a
/// mirror's `backendRef`, at any depth), appended to `out`.
fn backend_names<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    use serde_json::Value;
    let name = |b: &'a Value| b.get("name").and_then(Value::as_str);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("backendRefs", Value::Array(refs)) => out.extend(refs.iter().filter_map(name)),
                    ("backendRef", b) => out.extend(name(b)),
                    _ => {}
                }
                backend_names(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| backend_names(x, out)),
        _ => {}
    }
}

/// Whether `list` (every policy of one type in the view) allows narrowing at all: its `to`
/// entries are all `Mesh` or `MeshService`, fewer than [`MAX_ITEMS`], and none of its
/// policies targets a MeshHTTPRoute.
pub(super) fn type_allows_narrowing(list: &[TargetRefPolicy]) -> bool {
    use TargetRefKind as K;
    let items = list.iter().map(|p| p.to.len()).sum::<usize>();
    items < MAX_ITEMS
        && list.iter().all(|p| {
            !matches!(p.target_ref.kind, Some(K::MeshHTTPRoute))
                && p.to
                    .iter()
                    .all(|i| matches!(i.target_ref.kind, Some(K::Mesh | K::MeshService)))
        })
}

/// `p`'s own shape allows narrowing on a sidecar that reaches `reached`: a direct top-level
/// `targetRef`, only `to` entries, each a `MeshService` not in `reached`.
fn reaches_none_of(p: &TargetRefPolicy, reached: &[&str]) -> bool {
    use TargetRefKind as K;
    matches!(
        p.target_ref.kind,
        Some(K::Mesh | K::MeshSubset | K::MeshService | K::MeshServiceSubset)
    ) && p.from.is_empty()
        && p.single.is_none()
        && !p.to.is_empty()
        && p.to.iter().all(|item| {
            matches!(item.target_ref.kind, Some(K::MeshService))
                && !reached.contains(&item.target_ref.name.as_str())
        })
}

/// The policies of `list` (one type, in the view's order) that are dependencies of `dp`:
/// those whose top-level `targetRef` selects it (or cannot be resolved), less those narrowed
/// away for a sidecar reaching `reached` (see the module docs; `None`: no narrowing).
pub(super) fn type_dependencies<'a>(
    dp: &DataplaneSpec,
    list: &'a [TargetRefPolicy],
    routes: &[&TargetRefPolicy],
    include_shadow: bool,
    reached: Option<&[&str]>,
) -> Vec<&'a TargetRefPolicy> {
    let selected: Vec<(&TargetRefPolicy, Result<Selection, String>)> = list
        .iter()
        .filter(|p| include_shadow || !p.meta().is_shadow())
        .map(|p| (p, select(&p.meta().mesh, &p.target_ref, dp, routes)))
        .filter(|(_, s)| s.as_ref().map_or(true, Selection::any))
        .collect();
    let reached = reached.filter(|_| type_allows_narrowing(list));
    let candidate = |p: &TargetRefPolicy| reached.is_some_and(|r| reaches_none_of(p, r));
    // What the policies read anyway select (resolved, with `to` entries).
    let mut inbounds: BTreeSet<&InboundKey> = BTreeSet::new();
    let mut gateway = false;
    for (p, s) in &selected {
        if let (false, false, Ok(s)) = (candidate(p), p.to.is_empty(), s) {
            inbounds.extend(&s.inbounds);
            gateway |= s.delegated_gateway;
        }
    }
    selected
        .iter()
        .filter(|(p, s)| {
            let covered = s.as_ref().is_ok_and(|s| {
                s.inbounds.iter().all(|i| inbounds.contains(i)) && (gateway || !s.delegated_gateway)
            });
            !(candidate(p) && covered)
        })
        .map(|(p, _)| *p)
        .collect()
}
