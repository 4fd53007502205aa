//! The zone's ZoneIngresses (issue 18): what they offer and who they are.
//!
//! - [`available_services`] is Kuma 2.7's `GetIngressAvailableServices`: one entry per mesh and
//!   distinct tag set of the zone's healthy inbounds, with the number of inbounds carrying it,
//!   sorted by mesh then tags. Umbra sets `kuma.io/zone: <zone>` in each tag set (whatever the
//!   inbound said), as Kuma's zone CP does on the inbounds themselves, so other zones see where
//!   a service runs.
//! - [`track_available_services`] is Kuma's `ZoneAvailableServicesTracker`: it keeps every local
//!   ZoneIngress's `zone` and `availableServices` current as Dataplanes come and go, writing
//!   only when they differ (a compare-and-swap write; a conflict is retried on the next change).
//! - [`is_local`]: a ZoneIngress registered in this zone, as opposed to another zone's copy
//!   synced from the Global.
//! - [`ZoneView`]: the zone's place in a multi-zone deployment, from which inspect builds mesh
//!   contexts exactly as the reconciler does (remote endpoints included).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;
use umbra_core::dataplane::{DataplaneSpec, InboundState};
use umbra_core::resource::{ResourceType, Spec};
use umbra_core::zone_ingress::{AvailableService, ZoneIngressSpec};
use umbra_xds::context::ZONE_TAG;

use crate::store::{Store, StoreError};

/// The zone's place in a multi-zone deployment: its name, whether it is part of one, and the
/// ZoneIngresses it knows (read from the store when the view is taken).
#[derive(Debug, Clone, Default)]
pub struct ZoneView {
    /// This zone's name.
    pub zone: String,
    /// Federated: endpoints carry localities and other zones' ingresses are endpoints.
    pub multi_zone: bool,
    /// Every ZoneIngress in the store.
    pub ingresses: Vec<ZoneIngressSpec>,
    /// Where this zone's ZoneEgresses are (what sidecars of a Mesh with
    /// `routing.zoneEgress: true` reach other zones and ExternalServices through).
    pub egresses: Vec<umbra_xds::context::EgressAddress>,
    /// The proxies' admin inputs ([`crate::admin_tls::AdminLookup`]); `None`: no admin
    /// resources are generated (tests, benches).
    pub admin: Option<crate::admin_tls::AdminLookup>,
    /// Where the proxies' kuma-dp DNS ports are ([`crate::insight::Insights::dns_port`]);
    /// `None`: no DNS listener is generated.
    pub insights: Option<std::sync::Arc<crate::insight::Insights>>,
    /// Each mesh's persisted DNS VIPs ([`crate::reconciler::vips`]).
    pub vips: std::collections::BTreeMap<String, std::sync::Arc<crate::reconciler::vips::MeshVips>>,
}

impl ZoneView {
    /// The view of zone `zone` (`multi_zone` when federated) over `store`'s ZoneIngresses now.
    pub fn of(store: &Store, zone: &str, multi_zone: bool) -> Self {
        Self {
            zone: zone.to_owned(),
            multi_zone,
            ingresses: store
                .list_all(ResourceType::ZoneIngress)
                .into_iter()
                .filter_map(|s| match s.resource.spec {
                    Spec::ZoneIngress(zi) => Some(zi),
                    _ => None,
                })
                .collect(),
            egresses: crate::egress::addresses(&crate::egress::local(store, zone)),
            vips: store
                .list(ResourceType::Mesh, "")
                .into_iter()
                .map(|m| {
                    let mesh = m.resource.meta.name;
                    let vips = crate::reconciler::vips::persisted(store, &mesh);
                    (mesh, vips)
                })
                .collect(),
            admin: None,
            insights: None,
        }
    }

    /// The admin input of proxy `(mesh, name)` at `address` ([`ZoneView::admin`]).
    pub fn admin_input(
        &self,
        mesh: &str,
        name: &str,
        address: &str,
    ) -> Option<std::sync::Arc<umbra_xds::base::admin::EnvoyAdmin>> {
        self.admin.as_ref()?.input(mesh, name, address)
    }

    /// The `kuma:dns` input of DPP `mesh`/`name` (`dp`, a transparent proxy whose Envoy
    /// reported kuma-dp's DNS port), as the reconciler gives it; `None` otherwise.
    pub fn dns_input(
        &self,
        mesh: &str,
        name: &str,
        dp: &DataplaneSpec,
    ) -> Option<umbra_xds::generate::DnsInput> {
        dp.networking.transparent_proxying.as_ref()?;
        let port = self.insights.as_ref()?.dns_port(mesh, name)?;
        Some(self.vips.get(mesh)?.dns_input(port))
    }

    /// The context of `mesh` over `dataplanes`, as the reconciler builds it in this zone.
    pub fn context<'a>(
        &self,
        mesh: &str,
        spec: &umbra_core::mesh::MeshSpec,
        dataplanes: impl IntoIterator<Item = &'a DataplaneSpec>,
    ) -> umbra_xds::context::MeshContext {
        let refs: Vec<&ZoneIngressSpec> = self.ingresses.iter().collect();
        let zones = self.multi_zone.then_some(umbra_xds::context::Zones {
            local: &self.zone,
            ingresses: &refs,
        });
        let mut ctx = umbra_xds::context::MeshContext::build_in_zone(mesh, spec, dataplanes, zones);
        if spec.zone_egress_enabled() && spec.mtls_enabled() {
            ctx.route_through_egress(&self.egresses);
        }
        ctx
    }
}

/// How long changes are gathered before the available services are computed again.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// `true` for a ZoneIngress of this zone (`zone` empty or `local_zone`; Kuma's
/// `!IsRemoteIngress`).
pub fn is_local(zi: &ZoneIngressSpec, local_zone: &str) -> bool {
    !zi.is_remote(local_zone)
}

/// Kuma's `GetIngressAvailableServices` over `dataplanes` (mesh, spec) of zone `zone`.
pub fn available_services<'a>(
    zone: &str,
    dataplanes: impl IntoIterator<Item = (&'a str, &'a DataplaneSpec)>,
) -> Vec<AvailableService> {
    let mut sets: BTreeMap<(String, String), (BTreeMap<String, String>, u32)> = BTreeMap::new();
    for (mesh, dp) in dataplanes {
        for inbound in &dp.networking.inbound {
            let healthy = inbound.health.as_ref().is_none_or(|h| h.ready)
                && !matches!(
                    inbound.state,
                    Some(InboundState::NotReady | InboundState::Ignored)
                );
            if !healthy {
                continue;
            }
            // The zone is this zone, whatever the inbound says (Kuma's zone CP overwrites it).
            let mut tags = inbound.tags.clone();
            tags.insert(ZONE_TAG.to_owned(), zone.to_owned());
            // Kuma's `Tags.String()`: `k=v` pairs, sorted, joined by `&`.
            let text = tags
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&");
            sets.entry((mesh.to_owned(), text))
                .or_insert_with(|| (tags, 0))
                .1 += 1;
        }
    }
    sets.into_iter()
        .map(|((mesh, _), (tags, instances))| AvailableService {
            tags,
            instances,
            mesh,
            external_service: false,
        })
        .collect()
}

/// Bring every local ZoneIngress of `store` up to date once: `zone` set to `zone`,
/// `availableServices` to what the zone's Dataplanes offer. Returns the names written.
///
/// # Errors
/// [`StoreError::Unavailable`] (a conflict is not an error: the next pass retries).
pub fn update_once(store: &Store, zone: &str) -> Result<Vec<String>, StoreError> {
    let dataplanes = store.list_all(ResourceType::Dataplane);
    let services = available_services(
        zone,
        dataplanes
            .iter()
            .filter_map(|s| Some((s.resource.meta.mesh.as_str(), s.resource.as_dataplane()?))),
    );
    let mut written = Vec::new();
    for s in store.list_all(ResourceType::ZoneIngress) {
        let Some(zi) = s.resource.as_zone_ingress() else {
            continue;
        };
        if !is_local(zi, zone) || (zi.zone == zone && zi.available_services == services) {
            continue;
        }
        let mut updated = s.resource.clone();
        if let Spec::ZoneIngress(spec) = &mut updated.spec {
            spec.zone = zone.to_owned();
            spec.available_services.clone_from(&services);
        }
        match store.put(updated, Some(s.version)) {
            Ok(_) => written.push(s.resource.meta.name.clone()),
            Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Keep the local ZoneIngresses' `zone` and `availableServices` current
/// ([`update_once`] after every burst of store changes) until `shutdown` turns `true`.
pub async fn track_available_services(
    store: Store,
    zone: String,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut changes = store.subscribe();
    loop {
        match update_once(&store, &zone) {
            Ok(names) if !names.is_empty() => {
                tracing::info!(zone_ingresses = ?names, "updated ZoneIngress available services");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot update ZoneIngress available services; retrying on the next change")
            }
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
        tokio::time::sleep(DEBOUNCE).await;
        changes.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    fn dp(name: &str, tags: &str, ready: bool) -> Resource {
        res(&format!("type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {tags}\n    health: {{ready: {ready}}}\n"))
    }

    #[test]
    fn services_are_counted_per_tag_set_with_the_zone() {
        let dps = [
            dp("a", "{kuma.io/service: backend, version: v1}", true),
            dp("b", "{kuma.io/service: backend, version: v1}", true),
            dp("c", "{kuma.io/service: backend, version: v2}", true),
            dp("d", "{kuma.io/service: backend, version: v3}", false),
        ];
        let got = available_services(
            "zone-2",
            dps.iter().map(|r| ("default", r.as_dataplane().unwrap())),
        );
        let summary: Vec<(String, u32, Option<&String>)> = got
            .iter()
            .map(|s| (s.tags["version"].clone(), s.instances, s.tags.get(ZONE_TAG)))
            .collect();
        let zone = "zone-2".to_owned();
        assert_eq!(
            summary,
            [
                ("v1".to_owned(), 2, Some(&zone)),
                ("v2".to_owned(), 1, Some(&zone))
            ]
        );
        assert!(got.iter().all(|s| s.mesh == "default"));
    }

    #[test]
    fn local_ingresses_are_kept_current_and_remote_ones_left_alone() {
        let store = Store::new();
        store.put(res("type: Mesh\nname: default\n"), None).unwrap();
        store
            .put(
                res("type: ZoneIngress\nname: zi\nnetworking: {address: 127.0.0.1, port: 10001}\n"),
                None,
            )
            .unwrap();
        store
            .put(res("type: ZoneIngress\nname: other\nzone: zone-1\nnetworking: {address: 127.0.0.2, port: 10001}\n"), None)
            .unwrap();
        store
            .put(dp("a", "{kuma.io/service: backend}", true), None)
            .unwrap();
        assert_eq!(update_once(&store, "zone-2").unwrap(), ["zi"]);
        let zi = store
            .get(&umbra_core::resource::ResourceKey {
                ty: ResourceType::ZoneIngress,
                mesh: String::new(),
                name: "zi".into(),
            })
            .unwrap();
        let spec = zi.resource.as_zone_ingress().unwrap();
        assert_eq!(spec.zone, "zone-2");
        assert_eq!(spec.available_services.len(), 1);
        assert_eq!(spec.available_services[0].service(), "backend");
        assert!(
            update_once(&store, "zone-2").unwrap().is_empty(),
            "unchanged"
        );
        store.delete(&res("type: Dataplane\nmesh: default\nname: a\nnetworking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: backend}}]}").key()).unwrap();
        assert_eq!(update_once(&store, "zone-2").unwrap(), ["zi"]);
    }
}
