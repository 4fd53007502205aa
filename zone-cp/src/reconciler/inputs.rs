//! A DPP's generation inputs as the reconciler fingerprints them: [`Outer::fingerprint`] over
//! its [`dependencies_digest`] and the inputs that are not policies ([`Fp`],
//! [`service_digests`]).

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::dependencies::dependencies;
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

/// The dependencies part of a DPP's fingerprint: the type, name, flags and store revision of
/// each of its dependencies ([`umbra_core::dependencies`]), then each service it reaches with
/// its [`service_digests`] entry.
pub(super) fn dependencies_digest(
    dp: &DataplaneSpec,
    policies: &PolicySet,
    revisions: &Revisions<'_>,
    services: &HashMap<String, Digest>,
) -> Digest {
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
    fp.0.finalize().into()
}
