//! The zone's DNS VIPs (Kuma's universal VIP allocator, `pkg/dns/vips_allocator.go`, run by
//! the zone CP): at each reconciliation pass, per mesh, the view the mesh's Dataplanes, remote
//! zones' ingresses, ExternalServices and VirtualOutbounds call for is allocated against the
//! persisted one ([`umbra_core::vips`]) and persisted when it changed, under
//! [`crate::store::dns_vips_key`] (durable with `--data-dir`; a compare-and-swap shared by
//! replicas on PostgreSQL, so every replica serves the same VIPs). Transparent-proxied DPPs get
//! the VIP outbounds ([`MeshVips::resolved`]) and, with kuma-dp's DNS port, the names
//! ([`MeshVips::domains`]).
//!
//! Kuma allocates on the leader every 500 ms; Umbra allocates when the inputs change (every
//! pass reads them), deterministically, so no leader is needed.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use umbra_core::dataplane::{DataplaneSpec, Outbound};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::vips::{
    allocate, desired_view, vip_outbounds, with_vip_outbounds, ViewInputs, VipDomain, VipView,
    DEFAULT_CIDR, DEFAULT_DOMAIN, DEFAULT_SERVICE_VIP_PORT,
};
use umbra_core::zone_ingress::ZoneIngressSpec;

use crate::store::Store;

/// One mesh's VIPs, as generation reads them.
#[derive(Debug, Default)]
pub struct MeshVips {
    /// The DNS names and their VIPs (kuma-dp's resolver table).
    pub domains: Vec<VipDomain>,
    /// The outbounds every transparent proxy of the mesh gets.
    pub outbounds: Vec<Outbound>,
    /// SHA-256 of the persisted view (part of a transparent proxy's fingerprint).
    pub digest: [u8; 32],
    /// Transparent proxies with their VIP outbounds, by Dataplane name: the store revision
    /// they were merged at, and the result ([`MeshVips::resolved`]). Lives as long as these
    /// VIPs, so a pass merges a proxy again only when its Dataplane or the VIPs changed.
    merged: std::sync::Mutex<std::collections::HashMap<String, (u64, Arc<DataplaneSpec>)>>,
}

impl MeshVips {
    fn of(view: &VipView, bytes: &[u8]) -> MeshVips {
        let (domains, outbounds) = vip_outbounds(view, DEFAULT_DOMAIN, DEFAULT_SERVICE_VIP_PORT);
        MeshVips {
            domains,
            outbounds,
            digest: Sha256::digest(bytes).into(),
            merged: std::sync::Mutex::default(),
        }
    }

    /// Dataplane `name` (`dp`, at store revision `revision`) with its VIP outbounds when it is
    /// a transparent proxy ([`with_vip_outbounds`]), merged once per revision and shared;
    /// `None` when it is not one.
    pub fn resolved(
        &self,
        name: &str,
        revision: u64,
        dp: &DataplaneSpec,
    ) -> Option<Arc<DataplaneSpec>> {
        dp.networking.transparent_proxying.as_ref()?;
        let mut merged = self
            .merged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, spec)) = merged.get(name) {
            if *at == revision {
                return Some(spec.clone());
            }
        }
        let spec = Arc::new(with_vip_outbounds(dp, &self.outbounds)?);
        merged.insert(name.to_owned(), (revision, spec.clone()));
        Some(spec)
    }

    /// The `kuma:dns` input for an Envoy whose kuma-dp resolver forwards to `port`: every name
    /// of the mesh (generation keeps those on the proxy's outbound addresses).
    pub fn dns_input(&self, port: u16) -> umbra_xds::generate::DnsInput {
        umbra_xds::generate::DnsInput {
            port,
            domains: self
                .domains
                .iter()
                .map(|d| (d.name.clone(), d.address.clone()))
                .collect(),
        }
    }
}

/// `resources` (mesh `mesh`'s) with every transparent-proxied Dataplane given its VIP
/// outbounds from the persisted VIPs, as the reconciler generates it: what the inspect answers
/// and the fleet diff generate from.
pub fn with_persisted(store: &Store, mesh: &str, mut resources: Vec<Resource>) -> Vec<Resource> {
    if !resources.iter().any(|r| {
        r.as_dataplane()
            .is_some_and(|d| d.networking.transparent_proxying.is_some())
    }) {
        return resources;
    }
    let vips = persisted(store, mesh);
    for r in &mut resources {
        if let Spec::Dataplane(dp) = &mut r.spec {
            if let Some(resolved) = with_vip_outbounds(dp, &vips.outbounds) {
                *dp = resolved;
            }
        }
    }
    resources
}

/// Read mesh `mesh`'s persisted VIPs (what the reconciler last allocated), or none.
pub fn persisted(store: &Store, mesh: &str) -> Arc<MeshVips> {
    let Some(bytes) = store.dns_vips(mesh) else {
        return Arc::default();
    };
    match VipView::from_json(&bytes) {
        Ok(view) => Arc::new(MeshVips::of(&view, &bytes)),
        Err(e) => {
            tracing::warn!(%mesh, error = %e, "the persisted DNS VIPs do not read; none served");
            Arc::default()
        }
    }
}

/// The last view each mesh called for, and the VIPs allocated for it: a pass whose inputs give
/// the same view reuses them without reading the store.
#[derive(Debug, Default)]
pub struct VipsCache {
    meshes: std::sync::Mutex<std::collections::HashMap<String, (VipView, Arc<MeshVips>)>>,
}

/// Allocate mesh `mesh`'s VIPs for `resources` (the mesh's) and this zone's view of remote
/// `ingresses`, persist them when they changed, and return them. A store failure is logged and
/// the persisted VIPs are served.
pub fn refresh<'a>(
    cache: &VipsCache,
    store: &Store,
    zone: &str,
    mesh: &str,
    resources: impl IntoIterator<Item = &'a Resource>,
    ingresses: &[&ZoneIngressSpec],
) -> Arc<MeshVips> {
    let mut dataplanes = Vec::new();
    let mut external = Vec::new();
    let mut virtual_outbounds = Vec::new();
    for r in resources {
        match &r.spec {
            Spec::Dataplane(dp) => dataplanes.push(dp),
            Spec::ExternalService(es) => external.push((r.meta.name.as_str(), es)),
            Spec::Selected(ResourceType::VirtualOutbound, _) => virtual_outbounds.push(r),
            _ => {}
        }
    }
    let remote: Vec<&BTreeMap<String, String>> = ingresses
        .iter()
        .filter(|zi| zi.is_remote(zone))
        .flat_map(|zi| &zi.available_services)
        .filter(|s| s.mesh == mesh)
        .map(|s| &s.tags)
        .collect();
    let (desired, conflicts) = desired_view(ViewInputs {
        dataplanes: &dataplanes,
        remote_services: &remote,
        external_services: &external,
        virtual_outbounds: &virtual_outbounds,
    });
    let mut meshes = cache
        .meshes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((view, vips)) = meshes.get(mesh) {
        if *view == desired {
            return vips.clone();
        }
    }
    for c in &conflicts {
        tracing::debug!(%mesh, conflict = %c, "DNS VIP conflict");
    }
    let result = store.update_dns_vips(mesh, |current| {
        let old = current
            .and_then(|b| VipView::from_json(b).ok())
            .unwrap_or_default();
        let (next, problems) = match allocate(&old, desired.clone(), DEFAULT_CIDR) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%mesh, error = %e, "DNS VIPs not allocated");
                return None;
            }
        };
        for p in &problems {
            tracing::warn!(%mesh, problem = %p, "DNS VIP allocation");
        }
        (next != old || current.is_none()).then(|| next.to_json())
    });
    let vips = match result {
        Ok(Some(bytes)) => match VipView::from_json(&bytes) {
            Ok(view) => Arc::new(MeshVips::of(&view, &bytes)),
            Err(_) => Arc::default(),
        },
        Ok(None) => Arc::default(),
        Err(e) => {
            tracing::warn!(%mesh, error = %e, "cannot persist the DNS VIPs; serving the last persisted ones");
            return persisted(store, mesh);
        }
    };
    meshes.insert(mesh.to_owned(), (desired, vips.clone()));
    vips
}
