//! Whether a DPP's Envoy runs a config with given policies in effect (issue 40): a staged
//! rollout's soak starts only when every staged DPP's Envoy has acknowledged the stage's
//! copies, so its gate judges the new config, not the propagation. Asked by the Global with a
//! `TrafficRequest` naming the copies ([`crate::observed::traffic`]).
//!
//! A DPP `name` of `mesh` runs `policies` (`(type, name)`) when, in this zone:
//! 1. every one of them is in the zone's store and live (not `kuma.io/effect: shadow`): the
//!    Global's write reached the zone over KDS ([`Stage::read`]), and one of them selects the
//!    DPP as the zone has it (a DPP the Global staged but the zone's copies do not select, its
//!    Dataplane changed meanwhile, is reported as not running them, not as ACKed);
//! 2. the reconciler has completed a pass from at least the store revision that wrote the
//!    last of them ([`Reconciler::reconciled_revision`]), so the DPP's snapshot reflects them,
//!    and that snapshot's generation succeeded (a failed one serves the last good config,
//!    without them);
//! 3. its Envoy's ADS stream is open and has ACKed the snapshot's version of every type a
//!    policy shapes that the snapshot has resources of: listeners, clusters and route
//!    configurations (versions are content hashes, so an equal later snapshot counts). A NACK
//!    of that version is reported as such. Endpoints are not awaited: they follow their
//!    clusters, and a locality-aware MeshLoadBalancingStrategy's endpoint weights are then the
//!    one part of a stage the soak may start without.
//!
//! Answers are words for the Global's decisions: `Ok(())`, or why not yet.

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_core::view::{PolicySet, View};
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

/// What the zone knows of a stage's copies: the store revision from which every one is live
/// here, and the zone's Live policies, to tell which DPPs they select.
pub struct Stage {
    /// The copies.
    pub policies: Vec<(ResourceType, String)>,
    /// The store revision that wrote the last of them.
    pub since: u64,
    /// The mesh's Live policies as this zone has them.
    pub set: PolicySet,
}

impl Stage {
    /// The copies of `refs` (`Type/name`) in `mesh`, as this zone has them.
    ///
    /// # Errors
    /// A reference that does not read, or the first copy not in the zone yet or still shadow
    /// there.
    pub fn read(store: &Store, mesh: &str, refs: &[String]) -> Result<Self, String> {
        let policies = parse_refs(refs)?;
        let mut since = 0;
        for (ty, name) in &policies {
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
                Some(s) => since = since.max(s.revision),
            }
        }
        let resources = store.mesh_resources(mesh);
        let set = PolicySet::build(mesh, &resources, View::Live);
        Ok(Self {
            policies,
            since,
            set,
        })
    }

    /// `true` when one of the copies selects `dp` here (by its top-level targetRef; a
    /// MeshHTTPRoute by its own).
    pub fn selects(&self, dp: &DataplaneSpec) -> bool {
        let deps = umbra_core::dependencies::selection(dp, &self.set);
        self.policies.iter().any(|(ty, name)| {
            if *ty == ResourceType::MeshHTTPRoute {
                self.set
                    .matched(*ty, dp)
                    .dataplane_policies
                    .iter()
                    .any(|p| &p.meta().name == name)
            } else {
                deps.policies.iter().any(|d| d.ty == *ty && d.name == name)
            }
        })
    }
}

/// Why a DPP does not run the policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRunning {
    /// Not yet: the config is on its way (or the DPP is not connected).
    Waiting(String),
    /// It will not: its config generation failed, or its Envoy rejected (NACKed) the config.
    Rejected(String),
}

/// Whether DPP `mesh`/`name`'s Envoy runs a config with the copies of `stage` in effect (see
/// the module docs).
///
/// # Errors
/// [`NotRunning`], with why in words.
pub fn acknowledged(
    store: &Store,
    insights: &Insights,
    reconciler: Option<&Reconciler>,
    mesh: &str,
    name: &str,
    stage: &Stage,
) -> Result<(), NotRunning> {
    let waiting = |why: &str| NotRunning::Waiting(why.to_owned());
    let key = ResourceKey {
        ty: ResourceType::Dataplane,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    let dataplane = store
        .get(&key)
        .ok_or_else(|| waiting("no such Dataplane in the zone"))?;
    let dp = dataplane
        .resource
        .as_dataplane()
        .ok_or_else(|| waiting("no such Dataplane in the zone"))?;
    if !stage.selects(dp) {
        return Err(NotRunning::Rejected(
            "the stage's copies do not select it in this zone (its Dataplane changed since the stage was computed?)".into(),
        ));
    }
    let since = stage.since;
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
        // SotW records the rejected type version, delta the rejected resources' versions.
        let current = snapshot.resources.get(ty);
        let rejects_current = |n: &&crate::insight::Nack| {
            &n.version == version
                || n.version
                    .split(',')
                    .any(|v| !v.is_empty() && current.is_some_and(|c| c.values().any(|cv| cv == v)))
        };
        if let Some(n) = insight.nacked.get(ty).filter(rejects_current) {
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
