//! Whether a DPP's Envoy runs a config with given policies in effect (issue 40): a staged
//! rollout's soak starts only when every staged DPP's Envoy has acknowledged the stage's
//! copies, so its gate judges the new config, not the propagation. Asked by the Global with a
//! `TrafficRequest` naming the copies ([`crate::observed::traffic`]).
//!
//! A DPP `name` of `mesh` runs `policies` (`(type, name)`) when, in this zone:
//! 1. every one of them is in the zone's store and live (not `kuma.io/effect: shadow`): the
//!    Global's write reached the zone over KDS;
//! 2. the reconciler has completed a pass from at least the store revision that wrote the
//!    last of them ([`Reconciler::reconciled_revision`]), so the DPP's snapshot reflects them,
//!    and that snapshot's generation succeeded (a failed one serves the last good config,
//!    without them);
//! 3. its Envoy's ADS stream is open and has ACKed the snapshot's version of every type a
//!    policy shapes that the snapshot has resources of: listeners, clusters and route
//!    configurations (versions are content hashes, so an equal later snapshot counts). A NACK
//!    of that version is reported as such.
//!
//! Answers are words for the Global's decisions: `Ok(())`, or why not yet.

use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_xds_protocol::type_url::{CLUSTER_TYPE, LISTENER_TYPE, ROUTE_TYPE};

use crate::insight::Insights;
use crate::reconciler::Reconciler;
use crate::store::Store;

/// The xDS types whose ACK shows a policy in effect (endpoints and secrets follow them).
pub const POLICY_TYPES: [&str; 3] = [LISTENER_TYPE, CLUSTER_TYPE, ROUTE_TYPE];

/// Read `Type/name` references (as the Global sends them).
///
/// # Errors
/// The reference that does not read.
pub fn parse_refs(refs: &[String]) -> Result<Vec<(ResourceType, String)>, String> {
    refs.iter()
        .map(|r| {
            r.split_once('/')
                .and_then(|(ty, name)| Some((ResourceType::from_name(ty)?, name.to_owned())))
                .filter(|(_, name)| !name.is_empty())
                .ok_or_else(|| format!("{r:?} is not <Type>/<name>"))
        })
        .collect()
}

/// The store revision from which every one of `policies` is live in this zone.
///
/// # Errors
/// The first policy not in the zone yet, or still shadow there.
pub fn live_since(
    store: &Store,
    mesh: &str,
    policies: &[(ResourceType, String)],
) -> Result<u64, String> {
    let mut revision = 0;
    for (ty, name) in policies {
        let key = ResourceKey {
            ty: *ty,
            mesh: mesh.to_owned(),
            name: name.clone(),
        };
        match store.get(&key) {
            None => return Err(format!("{}/{name} has not reached the zone yet", ty.name())),
            Some(s) if s.resource.meta.is_shadow() => {
                return Err(format!("{}/{name} is still shadow in the zone", ty.name()))
            }
            Some(s) => revision = revision.max(s.revision),
        }
    }
    Ok(revision)
}

/// Why a DPP does not run the policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRunning {
    /// Not yet: the config is on its way (or the DPP is not connected).
    Waiting(String),
    /// It will not: its config generation failed, or its Envoy rejected (NACKed) the config.
    Rejected(String),
}

/// Whether DPP `mesh`/`name`'s Envoy runs a config from store revision `since` or later (see
/// the module docs, points 2 and 3).
///
/// # Errors
/// [`NotRunning`], with why in words.
pub fn acknowledged(
    insights: &Insights,
    reconciler: Option<&Reconciler>,
    mesh: &str,
    name: &str,
    since: u64,
) -> Result<(), NotRunning> {
    let waiting = |why: &str| NotRunning::Waiting(why.to_owned());
    let reconciler = reconciler.ok_or_else(|| waiting("this zone CP generates no config"))?;
    if reconciler.reconciled_revision() < since {
        return Err(waiting(
            "the zone has not generated config from the stage's copies yet",
        ));
    }
    let snapshot = reconciler
        .get(mesh, name)
        .ok_or_else(|| waiting("the zone has generated no config for it"))?;
    if let Some(e) = &snapshot.error {
        return Err(NotRunning::Rejected(format!(
            "its config generation failed, the last good config is served: {e}"
        )));
    }
    let insight = insights.get(mesh, name).filter(|i| i.connected);
    let insight = insight.ok_or_else(|| waiting("its Envoy is not connected"))?;
    for ty in POLICY_TYPES {
        // A type the snapshot has nothing of (route configurations of a sidecar, which inlines
        // its routes) is never subscribed to, so never ACKed.
        if snapshot.resources.get(ty).is_none_or(|r| r.is_empty()) {
            continue;
        }
        let Some(version) = snapshot.versions.get(ty) else {
            continue;
        };
        if let Some(n) = insight.nacked.get(ty).filter(|n| &n.version == version) {
            return Err(NotRunning::Rejected(format!(
                "its Envoy rejected (NACK) the {} config: {}",
                short(ty),
                n.error
            )));
        }
        if insight.acked.get(ty) != Some(version) {
            return Err(NotRunning::Waiting(format!(
                "its Envoy has not acknowledged the {} config yet",
                short(ty)
            )));
        }
    }
    Ok(())
}

/// `Listener` of a type URL.
fn short(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_as_the_global_sends_them() {
        assert_eq!(
            parse_refs(&["MeshTimeout/t-stage-1".into()]).unwrap(),
            vec![(ResourceType::MeshTimeout, "t-stage-1".to_owned())]
        );
        for bad in ["MeshTimeout", "Nope/x", "MeshTimeout/"] {
            assert!(parse_refs(&[bad.into()]).is_err(), "{bad}");
        }
        assert_eq!(short(LISTENER_TYPE), "Listener");
    }
}
