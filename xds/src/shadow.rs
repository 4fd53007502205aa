//! The Shadow view of a sidecar from its Live snapshot (issue 39, item 3): regenerate only what
//! the policies that differ between the views reach.
//!
//! [`umbra_core::dependencies::shadow::view_difference`] says where the DPP's config can differ:
//! nowhere (the Live snapshot is the Shadow one), in the resources of some outbounds, or
//! anywhere (full regeneration). For some outbounds, [`shadow_from_live`] generates, in both
//! views, the DPP restricted to those outbounds (its inbounds, transparent proxy and everything
//! else kept; no admin or DNS input, which no such policy reads), and splices the restricted
//! Shadow resources into a copy of the Live snapshot where they differ from the restricted Live
//! ones. Unchanged resources keep the Live allocation, so a diff compares them by pointer.
//!
//! The splice checks what it relies on and regenerates the whole Shadow view otherwise: every
//! restricted Live resource is the served Live one (the restricted generation is a part of the
//! full one), no resource disappears (another outbound may still need it), and a resource that
//! only the restricted Shadow generation adds is either new or equal to the Live one. Equality
//! with full regeneration is a property test (`xds/tests/shadow_from_live.rs`).

use std::collections::BTreeMap;

#[cfg(doc)]
use umbra_core::dependencies::shadow::view_difference;
use umbra_core::dependencies::shadow::ViewDifference;
use umbra_core::view::PolicySet;

use crate::context::MeshContext;
use crate::error::GenerateError;
use crate::generate::{generate, Proxy};
use crate::interner::Shared;
use crate::snapshot::Snapshot;

/// The Shadow snapshot [`shadow_from_live`] gives, and how it was produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Shadow {
    /// The views select the same policies: the Shadow snapshot is the Live one.
    Unchanged,
    /// The restricted generations of `outbounds` outbounds (restricted Live and Shadow),
    /// spliced into a copy of the Live snapshot.
    Spliced {
        /// The Shadow snapshot.
        snapshot: Snapshot,
        /// The outbounds generated twice.
        outbounds: usize,
    },
    /// Generated whole: the differing policies may change any part, or a splice check failed.
    Regenerated(Snapshot),
}

impl Shadow {
    /// The Shadow snapshot, given the Live one `shadow_from_live` was given.
    #[must_use]
    pub fn snapshot<'a>(&'a self, live: &'a Snapshot) -> &'a Snapshot {
        match self {
            Shadow::Unchanged => live,
            Shadow::Spliced { snapshot, .. } | Shadow::Regenerated(snapshot) => snapshot,
        }
    }
}

/// The Shadow snapshot of `proxy`: what [`generate`]`(proxy, ctx, shadow)` gives, computed from
/// `live`, which must be `generate(proxy, ctx, live_set)` (its SDS secrets, added by the caller,
/// are kept as they are; a full regeneration has none), and `difference`, which must be
/// [`view_difference`]`(proxy.dataplane, live_set, shadow)` (the caller may have needed it to
/// decide whether to produce `live` at all). See the module docs.
///
/// # Errors
/// [`GenerateError`] from generating the Shadow view whole (a restricted generation that fails
/// falls back to it, so the error names what the full generation names).
pub fn shadow_from_live(
    proxy: Proxy<'_>,
    ctx: &MeshContext,
    live_set: &PolicySet,
    shadow: &PolicySet,
    difference: ViewDifference<'_>,
    live: &Snapshot,
) -> Result<Shadow, GenerateError> {
    let dp = proxy.dataplane;
    let outbounds = match difference {
        ViewDifference::Same => return Ok(Shadow::Unchanged),
        ViewDifference::Whole => return Ok(Shadow::Regenerated(generate(proxy, ctx, shadow)?)),
        ViewDifference::Outbounds { outbounds, .. } => outbounds,
    };
    let mut restricted = dp.clone();
    restricted.networking.outbound = outbounds
        .iter()
        .map(|&i| dp.networking.outbound[i].clone())
        .collect();
    let part = Proxy {
        name: proxy.name,
        dataplane: &restricted,
        admin: None,
        dns: None,
    };
    let spliced = match (generate(part, ctx, live_set), generate(part, ctx, shadow)) {
        (Ok(l), Ok(s)) => splice(live, &l, &s),
        _ => None,
    };
    Ok(match spliced {
        Some(snapshot) => Shadow::Spliced {
            snapshot,
            outbounds: outbounds.len(),
        },
        None => Shadow::Regenerated(generate(proxy, ctx, shadow)?),
    })
}

/// `live` with the resources where `restricted_shadow` differs from `restricted_live`, or
/// `None` when a check of the module docs fails.
fn splice(
    live: &Snapshot,
    restricted_live: &Snapshot,
    restricted_shadow: &Snapshot,
) -> Option<Snapshot> {
    let (l, s) = (restricted_live, restricted_shadow);
    let mut out = live.clone();
    splice_map(&mut out.clusters, &l.clusters, &s.clusters)?;
    splice_map(&mut out.endpoints, &l.endpoints, &s.endpoints)?;
    splice_map(&mut out.listeners, &l.listeners, &s.listeners)?;
    splice_map(&mut out.routes, &l.routes, &s.routes)?;
    splice_map(&mut out.runtimes, &l.runtimes, &s.runtimes)?;
    // Generation adds no secret to a sidecar; should it, they must agree.
    (l.secrets == s.secrets).then_some(out)
}

/// One resource type of [`splice`]: `out` holds the Live resources.
fn splice_map<T: PartialEq>(
    out: &mut BTreeMap<String, Shared<T>>,
    restricted_live: &BTreeMap<String, Shared<T>>,
    restricted_shadow: &BTreeMap<String, Shared<T>>,
) -> Option<()> {
    for (name, l) in restricted_live {
        // A part of the full Live generation, and nothing disappears.
        if out.get(name) != Some(l) || !restricted_shadow.contains_key(name) {
            return None;
        }
    }
    for (name, s) in restricted_shadow {
        match (restricted_live.get(name), out.get(name)) {
            (Some(l), _) if l == s => {}
            (Some(_), _) | (None, None) => {
                out.insert(name.clone(), s.clone());
            }
            (None, Some(held)) if held == s => {}
            (None, Some(_)) => return None,
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, u32)]) -> BTreeMap<String, Shared<u32>> {
        (entries.iter())
            .map(|(n, v)| ((*n).to_owned(), Shared::from(*v)))
            .collect()
    }

    fn spliced(
        live: &[(&str, u32)],
        l: &[(&str, u32)],
        s: &[(&str, u32)],
    ) -> Option<Vec<(String, u32)>> {
        let mut out = map(live);
        splice_map(&mut out, &map(l), &map(s))?;
        Some(out.into_iter().map(|(n, v)| (n, *v)).collect())
    }

    #[test]
    fn splice_replaces_what_differs_and_keeps_the_rest() {
        let live = [("a", 1), ("b", 2), ("c", 3)];
        assert_eq!(
            spliced(
                &live,
                &[("b", 2), ("c", 3)],
                &[("b", 20), ("c", 3), ("d", 4)]
            ),
            Some(vec![
                ("a".into(), 1),
                ("b".into(), 20),
                ("c".into(), 3),
                ("d".into(), 4)
            ])
        );
        // Added by the Shadow part only, and already held by another part, equal: kept.
        assert_eq!(spliced(&live, &[], &[("a", 1)]).map(|v| v.len()), Some(3));
    }

    #[test]
    fn splice_refuses_what_it_cannot_know() {
        let live = [("a", 1), ("b", 2)];
        // The restricted Live generation is not a part of the full one.
        assert_eq!(spliced(&live, &[("b", 9)], &[("b", 3)]), None);
        assert_eq!(spliced(&live, &[("x", 1)], &[("x", 1)]), None);
        // A resource disappears: another outbound may still need it.
        assert_eq!(spliced(&live, &[("b", 2)], &[]), None);
        // The Shadow part adds a resource another part holds with other content.
        assert_eq!(spliced(&live, &[], &[("a", 5)]), None);
    }

    #[test]
    fn unchanged_resources_keep_the_live_allocation() {
        let mut out = map(&[("a", 1), ("b", 2)]);
        let held = out["a"].clone();
        splice_map(
            &mut out,
            &map(&[("a", 1), ("b", 2)]),
            &map(&[("a", 1), ("b", 3)]),
        )
        .unwrap();
        assert!(Shared::ptr_eq(&out["a"], &held));
        assert_eq!(*out["b"], 3);
    }
}
