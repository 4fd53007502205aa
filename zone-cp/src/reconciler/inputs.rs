//! A DPP's generation inputs as the reconciler fingerprints them ([`Fp`], [`service_digests`],
//! [`dependencies_digest`]), and what one pass keeps of each mesh for the next ([`MeshMemo`]),
//! so that a change of new policies only lists again the dependencies of the DPPs it can reach
//! (issue 39; [`umbra_core::dependencies::change`]).

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::dependencies::{change, dependencies};
use umbra_core::resource::ResourceType;
use umbra_core::view::PolicySet;
use umbra_pki::identity::Identity;
use umbra_xds::context::{EgressAddress, MeshContext};

use super::snapshot::Fingerprint;

/// A SHA-256 digest.
pub(super) type Digest = [u8; 32];

/// The inputs of a DPP's fingerprint besides its [`dependencies_digest`].
pub(super) struct Outer<'a> {
    /// The store revisions of the Mesh and of the Dataplane.
    pub(super) revisions: (u64, u64),
    /// Its Envoy's admin port, when reported.
    pub(super) admin_port: Option<u16>,
    /// Where the zone's egresses are, when the mesh routes through them: the endpoints of
    /// ExternalServices reached through them (other zones' services are in the service
    /// digests).
    pub(super) egresses: Option<&'a [EgressAddress]>,
    /// Behind a transparent proxy: the mesh's VIPs digest (its VIP outbounds and `kuma:dns`
    /// table) and kuma-dp's DNS port, when reported.
    pub(super) transparent: Option<(&'a Digest, Option<u16>)>,
    /// Its identity (mTLS mesh): issued (by serial) or why not.
    pub(super) identity: Option<&'a Result<Arc<Identity>, String>>,
}

impl Outer<'_> {
    /// The fingerprint of these inputs and the DPP's `dependencies` digest.
    pub(super) fn fingerprint(&self, dependencies: &Digest) -> Fingerprint {
        let port = |p: Option<u16>| p.map_or(0, |p| u64::from(p) + 1);
        let mut fp = Fp(Sha256::new());
        fp.u64(self.revisions.0);
        fp.u64(self.revisions.1);
        fp.u64(port(self.admin_port));
        for g in self.egresses.into_iter().flatten() {
            fp.str(&g.address);
            fp.u64(u64::from(g.port));
        }
        if let Some((vips, dns_port)) = self.transparent {
            fp.0.update(vips);
            fp.u64(port(dns_port));
        }
        match self.identity {
            None => fp.u64(0),
            Some(Ok(id)) => fp.u64(id.serial),
            Some(Err(e)) => fp.str(e),
        }
        fp.0.update(dependencies);
        fp.0.finalize().into()
    }
}

/// Store revisions of a mesh's resources, by type and name.
pub(super) type Revisions<'a> = HashMap<(ResourceType, &'a str), u64>;

/// Feeds values into a fingerprint without ambiguity (lengths prefix strings).
pub(super) struct Fp(pub(super) Sha256);

impl Fp {
    pub(super) fn u64(&mut self, v: u64) {
        self.0.update(v.to_le_bytes());
    }
    pub(super) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.update(s.as_bytes());
    }
}

/// Per `kuma.io/service`: a digest of its endpoints as `ctx` built them (address, port,
/// weight, locality, tags): everything of the service that other DPPs' configs read (its EDS
/// resources, its protocol). Taken from what was built rather than from its inputs, so no
/// input is missed: Dataplanes, remote ingresses and how they are de-duplicated, local
/// weights.
pub(super) fn service_digests(ctx: &MeshContext) -> HashMap<String, Digest> {
    ctx.endpoints
        .iter()
        .map(|(service, eps)| {
            let mut fp = Fp(Sha256::new());
            for e in eps {
                fp.str(&e.address);
                fp.u64(u64::from(e.port));
                fp.u64(u64::from(e.weight));
                match &e.locality {
                    Some(l) => {
                        fp.str(&l.zone);
                        fp.u64(u64::from(l.priority));
                    }
                    None => fp.u64(u64::MAX),
                }
                fp.u64(e.tags.len() as u64);
                for (k, v) in &e.tags {
                    fp.str(k);
                    fp.str(v);
                }
            }
            (service.clone(), fp.0.finalize().into())
        })
        .collect()
}

/// What a pass kept of one mesh: enough to tell, at the next pass, whether only new policies
/// changed, and each DPP's [`dependencies_digest`].
#[derive(Debug)]
pub(super) struct MeshMemo {
    /// The Mesh resource's store revision.
    pub(super) mesh_revision: u64,
    /// The store revision of every resource of the mesh, by type and name.
    pub(super) revisions: HashMap<ResourceType, HashMap<String, u64>>,
    /// The Live view the pass built.
    pub(super) policies: Arc<PolicySet>,
    /// [`service_digests`] of the pass.
    pub(super) services: HashMap<String, Digest>,
    /// The digest of the mesh's VIPs ([`super::vips`]).
    pub(super) vips: Digest,
    /// Per DPP name: its [`dependencies_digest`].
    pub(super) dependencies: HashMap<String, Digest>,
}

/// Since a [`MeshMemo`]'s pass, only these new policies changed (see [`MeshMemo::change`]).
#[derive(Debug)]
pub(super) struct PolicyChange<'a> {
    memo: &'a MeshMemo,
    changed: Vec<(ResourceType, String)>,
}

impl MeshMemo {
    /// Owned [`Revisions`].
    pub(super) fn owned(revisions: &Revisions<'_>) -> HashMap<ResourceType, HashMap<String, u64>> {
        let mut out: HashMap<ResourceType, HashMap<String, u64>> = HashMap::new();
        for ((ty, name), r) in revisions {
            out.entry(*ty).or_default().insert((*name).to_owned(), *r);
        }
        out
    }

    /// The new policies that changed since this memo's pass (none at all, for a pass woken
    /// by something the rest of the fingerprint covers), when nothing else in the mesh did:
    /// the same Mesh revision, service digests and VIPs, every changed (added, updated or
    /// deleted) resource a new policy, and the views agreeing on everything else
    /// ([`change::only_policies_differ`]). `None` otherwise.
    pub(super) fn change(
        &self,
        mesh_revision: u64,
        revisions: &Revisions<'_>,
        services: &HashMap<String, Digest>,
        vips: &Digest,
        policies: &PolicySet,
    ) -> Option<PolicyChange<'_>> {
        if mesh_revision != self.mesh_revision || vips != &self.vips || services != &self.services {
            return None;
        }
        let mut changed: Vec<(ResourceType, String)> = Vec::new();
        for ((ty, name), r) in revisions {
            let before = self.revisions.get(ty).and_then(|m| m.get(*name));
            if before != Some(r) {
                changed.push((*ty, (*name).to_owned()));
            }
        }
        for (ty, names) in &self.revisions {
            for name in names.keys() {
                if !revisions.contains_key(&(*ty, name.as_str())) {
                    changed.push((*ty, name.clone()));
                }
            }
        }
        let refs: Vec<(ResourceType, &str)> =
            changed.iter().map(|(t, n)| (*t, n.as_str())).collect();
        (change::only_policies_differ(&self.policies, policies, &refs)).then_some(PolicyChange {
            memo: self,
            changed,
        })
    }
}

/// The dependencies part of DPP `name`'s fingerprint: the type, name, flags and store
/// revision of each of its dependencies ([`umbra_core::dependencies`]), then each service it
/// reaches with its [`service_digests`] entry. Under a [`PolicyChange`] that provably leaves
/// its dependencies as they were ([`change::unchanged_by`]), the previous pass's digest,
/// without listing them again. The flag: they were listed.
pub(super) fn dependencies_digest(
    name: &str,
    dp: &DataplaneSpec,
    policies: &PolicySet,
    revisions: &Revisions<'_>,
    services: &HashMap<String, Digest>,
    change: Option<&PolicyChange<'_>>,
) -> (Digest, bool) {
    if let Some(c) = change {
        if let Some(kept) = c.memo.dependencies.get(name) {
            let refs: Vec<(ResourceType, &str)> =
                c.changed.iter().map(|(t, n)| (*t, n.as_str())).collect();
            if change::unchanged_by(dp, &c.memo.policies, policies, &refs) {
                return (*kept, false);
            }
        }
    }
    let deps = dependencies(dp, policies);
    let mut fp = Fp(Sha256::new());
    for d in &deps.policies {
        fp.str(d.ty.name());
        fp.str(d.name);
        fp.u64(u64::from(d.superseded));
        fp.u64(u64::from(d.observed));
        fp.u64(revisions.get(&(d.ty, d.name)).copied().unwrap_or(0));
    }
    fp.u64(u64::MAX);
    for service in &deps.services {
        fp.str(service);
        fp.0.update(services.get(*service).copied().unwrap_or_default());
    }
    (fp.0.finalize().into(), true)
}
