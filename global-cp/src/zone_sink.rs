//! What the Global keeps of what a zone sends over KDS (ZoneToGlobalSync): its Dataplanes,
//! ZoneIngresses and ZoneEgresses into the store under zone-unique names, its insights into the registry
//! ([`ZoneSink`]), and the versions it already holds of them, so that a zone reconnecting to
//! any replica resumes with only the difference ([`zone_owned_versions`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_kds::resource::{
    global_name, kds_name, split_kds_name, zone_form, Item, DATAPLANE_INSIGHT_TYPE,
    DISPLAY_NAME_LABEL, ZONE_LABEL, ZONE_OWNED,
};
use umbra_kds::sync::{Received, Refusal, Sink};
use umbra_xds_protocol::version::ResourceVersions;

use crate::replicas::insights::InsightMirror;
use crate::store::{list_all, Store, StoreError};
use crate::zones::ZoneRegistry;

/// KDS name → version of the resources of `ty` (Dataplane, ZoneIngress, ZoneEgress) `zone` owns on the
/// Global (their zone form).
pub(crate) async fn zone_owned_versions(
    store: &dyn Store,
    ty: ResourceType,
    zone: &str,
) -> Result<ResourceVersions, StoreError> {
    let labels = BTreeMap::from([(ZONE_LABEL.to_owned(), zone.to_owned())]);
    let mut out = ResourceVersions::new();
    for s in list_all(store, ty, None, &labels)
        .await?
        .iter()
        .filter(|s| s.zone.as_deref() == Some(zone))
    {
        if let Some(form) = zone_form(&s.resource) {
            let item = Item::from_resource(&form);
            out.insert(kds_name(&form.meta.mesh, &form.meta.name), item.version);
        }
    }
    Ok(out)
}

/// Applies what a zone sends: its Dataplanes into the store, its insights into the registry.
pub(crate) struct ZoneSink {
    /// The store the zone's resources go to.
    pub(crate) store: Arc<dyn Store>,
    /// Where its insights go.
    pub(crate) zones: Arc<ZoneRegistry>,
    /// The zone.
    pub(crate) zone: String,
    /// With several replicas: the insights table every replica mirrors.
    pub(crate) mirror: Option<Arc<InsightMirror>>,
}

/// A per-resource refusal, or a store failure that ends the stream.
enum ApplyError {
    Resource(String),
    Store(StoreError),
}

impl From<StoreError> for ApplyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) => ApplyError::Store(e),
            other => ApplyError::Resource(other.to_string()),
        }
    }
}

impl ZoneSink {
    /// The Global key of the zone's resource of `ty` with KDS name `name`.
    fn key(&self, ty: ResourceType, name: &str) -> ResourceKey {
        let (mesh, local) = split_kds_name(name);
        ResourceKey {
            ty,
            name: global_name(&mesh, &local, &self.zone),
            mesh,
        }
    }

    async fn put_owned(&self, ty: ResourceType, name: &str, body: &[u8]) -> Result<(), ApplyError> {
        let mut resource =
            Resource::from_bytes(body).map_err(|e| ApplyError::Resource(e.to_string()))?;
        if resource.ty() != ty || kds_name(&resource.meta.mesh, &resource.meta.name) != name {
            return Err(ApplyError::Resource(format!(
                "the body is {} {:?} in mesh {:?}, not the {ty} {name:?}",
                resource.ty(),
                resource.meta.name,
                resource.meta.mesh
            )));
        }
        let claimed_zone = resource
            .as_zone_ingress()
            .map(|zi| zi.zone.as_str())
            .or_else(|| resource.as_zone_egress().map(|ze| ze.zone.as_str()));
        if let Some(claimed) = claimed_zone {
            if claimed != self.zone {
                return Err(ApplyError::Resource(format!(
                    "zone {:?} cannot report a {ty} of zone {claimed:?}",
                    self.zone
                )));
            }
        }
        if let Some(claimed) = resource.meta.labels.get(ZONE_LABEL) {
            if claimed != &self.zone {
                return Err(ApplyError::Resource(format!(
                    "zone {:?} cannot report a {ty} of zone {claimed:?}",
                    self.zone
                )));
            }
        }
        let violations = resource.validate();
        if violations.has_violations() {
            return Err(ApplyError::Resource(violations.to_string()));
        }
        let key = self.key(ty, name);
        resource
            .meta
            .labels
            .insert(ZONE_LABEL.into(), self.zone.clone());
        resource
            .meta
            .labels
            .insert(DISPLAY_NAME_LABEL.into(), resource.meta.name.clone());
        resource.meta.name.clone_from(&key.name);
        let existing = self.store.get(&key).await?;
        if let Some(e) = &existing {
            if e.zone.as_deref() != Some(self.zone.as_str()) {
                return Err(ApplyError::Resource(format!(
                    "{key} belongs to {}",
                    e.zone
                        .as_deref()
                        .map_or("the Global".to_owned(), |z| format!("zone {z:?}"))
                )));
            }
        }
        let expected = existing.map_or(0, |e| e.version);
        self.store
            .put(resource, Some(expected), Some(&self.zone))
            .await?;
        Ok(())
    }

    async fn delete_owned(&self, ty: ResourceType, name: &str) -> Result<(), ApplyError> {
        let key = self.key(ty, name);
        let Some(existing) = self.store.get(&key).await? else {
            return Ok(());
        };
        if existing.zone.as_deref() != Some(self.zone.as_str()) {
            return Err(ApplyError::Resource(format!(
                "{key} belongs to another zone"
            )));
        }
        match self.store.delete(&key, Some(existing.version)).await {
            Ok(()) | Err(StoreError::NotFound(_)) => {
                if let Some(mirror) = &self.mirror {
                    mirror.write(&self.zone, &[], &[name.to_owned()]).await?;
                }
                self.zones.remove_insight(&self.zone, name);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait::async_trait]
impl Sink for ZoneSink {
    /// The store cannot write now: the stream ends and the zone resends after reconnecting.
    type Error = StoreError;

    async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, StoreError> {
        let (type_url, upserts, removed) = (received.type_url, received.upserts, received.removed);
        let type_url = type_url.as_str();
        let mut refused = Vec::new();
        if type_url == DATAPLANE_INSIGHT_TYPE {
            let mut puts = Vec::with_capacity(upserts.len());
            for u in upserts {
                match serde_json::from_slice::<serde_json::Value>(&u.body) {
                    Ok(doc) if doc.is_object() => puts.push((u.name, Item::from_doc(&doc))),
                    _ => refused.push(Refusal {
                        name: u.name,
                        reason: "an insight must be a JSON object".to_owned(),
                    }),
                }
            }
            // Shared with the other replicas first: a failure ends the stream, and the zone
            // sends the batch again.
            if let Some(mirror) = &self.mirror {
                mirror.write(&self.zone, &puts, &removed).await?;
            }
            for (name, item) in puts {
                self.zones.put_insight(&self.zone, &name, item);
            }
            for name in removed {
                self.zones.remove_insight(&self.zone, &name);
            }
            return Ok(refused);
        }
        let Some(ty) = ResourceType::from_name(type_url).filter(|t| ZONE_OWNED.contains(t)) else {
            return Ok(upserts
                .into_iter()
                .map(|u| Refusal {
                    name: u.name,
                    reason: format!("the Global does not take {type_url} from zones"),
                })
                .collect());
        };
        for u in upserts {
            match self.put_owned(ty, &u.name, &u.body).await {
                Ok(()) => {}
                Err(ApplyError::Resource(reason)) => refused.push(Refusal {
                    name: u.name,
                    reason,
                }),
                Err(ApplyError::Store(e)) => return Err(e),
            }
        }
        for name in removed {
            match self.delete_owned(ty, &name).await {
                Ok(()) => {}
                Err(ApplyError::Resource(reason)) => refused.push(Refusal { name, reason }),
                Err(ApplyError::Store(e)) => return Err(e),
            }
        }
        if !refused.is_empty() {
            tracing::warn!(zone = %self.zone, type_url, ?refused, "KDS: NACK");
        }
        Ok(refused)
    }
}
