//! What the zone does with what the Global sends ([`StoreSink`]): Meshes, policies and other
//! zones' ZoneIngresses into the zone store (checked per resource as each response arrives,
//! NACKed by name; written as one durable batch per generation of the Global's offer, when its
//! commit marker arrives), the trust bundle to the zone's [`umbra_pki::trust::Trust`], the mesh CAs to the
//! reconciler; and the versions it holds, sent on (re)connect ([`held_versions`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_kds::resource::{
    kds_name, split_kds_name, Item, MESH_CA_TYPE, TRUST_BUNDLE_NAME, TRUST_BUNDLE_TYPE,
};
use umbra_kds::sync::{Received, Refusal, Sink, Upsert};
use umbra_pki::mesh_ca::{ca_name, MeshCa, MeshCas};
use umbra_xds_protocol::version::ResourceVersions;

use crate::store::{ReplicaWrite, Store, StoreError};

/// Versions of the Meshes, policies, other zones' ZoneIngresses and trust bundle the store
/// holds, per type URL (what the zone sends as `initial_resource_versions`, so a reconnect
/// receives only changes). The zone's own ZoneIngresses are not the Global's to send.
pub(super) fn held_versions(
    store: &Store,
    types: &[String],
    zone: &str,
) -> BTreeMap<String, ResourceVersions> {
    let mut held: BTreeMap<String, ResourceVersions> = types
        .iter()
        .filter_map(|t| Some((t, ResourceType::from_name(t)?)))
        .map(|(t, ty)| {
            let versions = store
                .list_all(ty)
                .iter()
                .filter(|s| {
                    s.resource
                        .as_zone_ingress()
                        .is_none_or(|zi| zi.is_remote(zone))
                })
                .map(|s| {
                    let r = &s.resource;
                    (
                        kds_name(&r.meta.mesh, &r.meta.name),
                        Item::from_resource(r).version,
                    )
                })
                .collect();
            (t.clone(), versions)
        })
        .collect();
    let cas = store.mesh_cas();
    held.insert(
        MESH_CA_TYPE.to_owned(),
        cas.iter()
            .map(|(name, ca)| {
                let doc = serde_json::to_value(ca).unwrap_or_default();
                (name.clone(), Item::from_doc(&doc).version)
            })
            .collect(),
    );
    if let Some(bundle) = store.trust_bundle() {
        let version = Item::from_doc(&serde_json::to_value(&bundle).unwrap_or_default()).version;
        held.insert(
            TRUST_BUNDLE_TYPE.to_owned(),
            [(TRUST_BUNDLE_NAME.to_owned(), version)]
                .into_iter()
                .collect(),
        );
    }
    held
}

/// `umbra_kds_sync_lag_seconds{type}`: from the resource's `modificationTime` (set by the
/// Global when it stored the change) to now, when it is in the zone store. Only changes made
/// while this session was up count: a resource modified before the zone connected arrives with
/// the initial sync, and its age is not a delivery lag. Skipped when the time is missing or
/// unparsable; a negative lag (clock skew) counts as 0.
fn record_sync_lag(ty: ResourceType, modified: Option<&str>, session_start: time::OffsetDateTime) {
    let Some(t) = modified.and_then(|m| {
        time::OffsetDateTime::parse(m, &time::format_description::well_known::Rfc3339).ok()
    }) else {
        return;
    };
    // A second of tolerance for the millisecond timestamps and small clock skew.
    if t < session_start - time::Duration::seconds(1) {
        return;
    }
    let lag = (time::OffsetDateTime::now_utc() - t)
        .as_seconds_f64()
        .max(0.0);
    metrics::histogram!(umbra_runtime::metrics::KDS_SYNC_LAG, "type" => ty.name()).record(lag);
}

/// What ends the Global-to-zone stream: the zone store cannot keep what the Global sent (it
/// sends it again after the reconnect). [`Sink`]'s methods return it; its text becomes the
/// sync error's.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The trust bundle could not be stored.
    #[error("cannot keep the trust bundle: {0}")]
    TrustBundle(#[source] StoreError),
    /// The mesh CAs could not be stored.
    #[error("cannot keep the mesh CAs: {0}")]
    MeshCas(#[source] StoreError),
    /// The batch of a generation could not be written (nothing of it applied).
    #[error(transparent)]
    Store(StoreError),
}

/// Applies the Global's Meshes and policies to the zone store, and its trust bundle to the
/// zone's [`umbra_pki::trust::Trust`].
pub(super) struct StoreSink {
    /// This zone's name.
    pub(super) zone: String,
    /// Where the mesh CAs go once kept.
    pub(super) cas: Arc<watch::Sender<Arc<MeshCas>>>,
    pub(super) trust: Arc<umbra_pki::trust::Trust>,
    pub(super) store: Store,
    /// When this KDS session connected (for [`record_sync_lag`]).
    pub(super) session_start: time::OffsetDateTime,
    /// Refuse removals: the Global is not the store this zone synced from.
    pub(super) protect: bool,
    /// Keep the store writes of each response aside until the Global's commit marker, then
    /// write them as one batch ([`Sink::commit`]): what the Global changed in one transaction
    /// reaches the reconciler, and so every proxy, as one change.
    pub(super) group_commit: bool,
    /// The writes kept aside since the last commit marker, response by response.
    pub(super) staged: Vec<Staged>,
}

/// The store writes of one response, kept aside until the commit marker.
pub(super) struct Staged {
    ty: ResourceType,
    /// The KDS name of each write.
    names: Vec<String>,
    writes: Vec<ReplicaWrite>,
    /// The modification time of each put (the puts come first), for the sync-lag metric.
    modified: Vec<Option<String>>,
}

impl StoreSink {
    /// Take the Global's trust bundle: checked, kept in the store (durably) before it is
    /// used, so a restart verifies with it too. An unreadable bundle is NACKed and the last
    /// good one stays.
    fn take_trust(&mut self, upserts: Vec<Upsert>) -> Result<Vec<Refusal>, SinkError> {
        let mut refused = Vec::new();
        for u in upserts {
            let bundle = serde_json::from_slice::<umbra_auth::TrustBundle>(&u.body)
                .map_err(|e| e.to_string())
                .and_then(|b| b.check().map(|()| b));
            match bundle {
                Ok(b) if u.name == TRUST_BUNDLE_NAME => {
                    self.store
                        .record_trust_bundle(&b)
                        .map_err(SinkError::TrustBundle)?;
                    if self.trust.replace(b) {
                        tracing::info!("KDS: trust bundle from the Global applied (token keys and revocations)");
                    }
                }
                Ok(_) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("the trust bundle is named {TRUST_BUNDLE_NAME:?}"),
                }),
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("unusable trust bundle: {reason}"),
                }),
            }
        }
        Ok(refused)
    }

    /// Take the Global's mesh CAs: each checked (named `<mesh>/<backend>` as its body says,
    /// a certificate and key that parse), the whole set kept in the store (durably) before it
    /// is used. In protected mode (the Global's store is not the one this zone synced from)
    /// nothing changes: new roots would reissue every identity of the zone.
    fn take_cas(
        &mut self,
        upserts: Vec<Upsert>,
        removed: Vec<String>,
    ) -> Result<Vec<Refusal>, SinkError> {
        let mut refused = Vec::new();
        if self.protect {
            for name in upserts.into_iter().map(|u| u.name).chain(removed) {
                refused.push(Refusal {
                    name,
                    reason: "kept the last mesh CAs: the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                });
            }
            return Ok(refused);
        }
        let mut cas = self.store.mesh_cas();
        for u in upserts {
            let ca = serde_json::from_slice::<MeshCa>(&u.body)
                .map_err(|e| format!("not a mesh CA: {e}"))
                .and_then(|ca| {
                    if ca_name(&ca.mesh, &ca.backend) != u.name {
                        return Err(format!(
                            "the body is the CA of {:?}",
                            ca_name(&ca.mesh, &ca.backend)
                        ));
                    }
                    let check = umbra_pki::identity::Authority::new();
                    match check
                        .set_cas(&MeshCas::from([(u.name.clone(), ca.clone())]))
                        .pop()
                    {
                        Some((_, reason)) => Err(reason),
                        None => Ok(ca),
                    }
                });
            match ca {
                Ok(ca) => {
                    cas.insert(u.name, ca);
                }
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason: format!("unusable mesh CA: {reason}"),
                }),
            }
        }
        // A CA goes with its Mesh only: a removal while the Mesh is still here (an offer that
        // leaves the CAs out, as over plaintext KDS from elsewhere) would take every
        // identity of the mesh down with it.
        for name in removed {
            let mesh = name.split_once('/').map_or(name.as_str(), |(m, _)| m);
            let mesh_key = ResourceKey::mesh(mesh);
            // A Mesh deletion kept aside in this generation counts as done.
            let leaving = self.staged.iter().any(|b| {
                b.writes
                    .iter()
                    .any(|w| matches!(w, ReplicaWrite::Delete(k) if *k == mesh_key))
            });
            if self.store.get(&mesh_key).is_some() && !leaving {
                refused.push(Refusal {
                    name,
                    reason: "kept: its Mesh is still here, and every identity of the mesh is issued from it".to_owned(),
                });
            } else {
                cas.remove(&name);
            }
        }
        self.store
            .record_mesh_cas(&cas)
            .map_err(SinkError::MeshCas)?;
        let names: Vec<&String> = cas.keys().collect();
        tracing::info!(cas = ?names, "KDS: mesh CAs from the Global applied");
        self.cas.send_replace(Arc::new(cas));
        Ok(refused)
    }

    /// Decode and check one resource the Global sent as `name` of `ty` (a ZoneIngress must be
    /// another zone's).
    fn decode(&self, ty: ResourceType, u: &Upsert) -> Result<Resource, String> {
        let resource = Resource::from_bytes(&u.body).map_err(|e| e.to_string())?;
        if resource.ty() != ty || kds_name(&resource.meta.mesh, &resource.meta.name) != u.name {
            return Err(format!(
                "the body is {} {:?} in mesh {:?}, not {ty} {:?}",
                resource.ty(),
                resource.meta.name,
                resource.meta.mesh,
                u.name
            ));
        }
        let violations = resource.validate();
        if violations.has_violations() {
            return Err(violations.to_string());
        }
        if let Some(zi) = resource.as_zone_ingress() {
            if !zi.is_remote(&self.zone) {
                return Err(format!(
                    "ZoneIngress of zone {:?}: this zone ({:?}) owns its own ingresses and takes only other zones' from the Global",
                    zi.zone, self.zone
                ));
            }
            let own = self
                .store
                .get(&resource.key())
                .and_then(|s| {
                    s.resource
                        .as_zone_ingress()
                        .map(|z| !z.is_remote(&self.zone))
                })
                .unwrap_or(false);
            if own {
                return Err(format!(
                    "a ZoneIngress of this zone is called {:?}: kept, another zone's cannot replace it",
                    resource.meta.name
                ));
            }
        }
        Ok(resource)
    }
}

#[async_trait::async_trait]
impl Sink for StoreSink {
    type Error = SinkError;

    /// Decode and validate each resource and check each removal, NACKing what is refused;
    /// keep the rest aside until the Global's commit marker ([`Sink::commit`]; with
    /// `group_commit` off, write it to the store as one durable batch before the ACK goes
    /// back). A store that cannot write ends the stream (the Global resends on reconnect).
    async fn apply(&mut self, received: Received) -> Result<Vec<Refusal>, SinkError> {
        if received.trace_context.is_empty() {
            let span = tracing::debug_span!("kds.apply", type_url = %received.type_url);
            return span.in_scope(|| self.write(received));
        }
        // Continue the Global's trace (the `PUT` that made the change) in a `kds.apply` span,
        // and hand it to the reconciliation the write triggers.
        let span = tracing::info_span!(
            "kds.apply",
            type_url = %received.type_url,
            upserts = received.upserts.len(),
            removed = received.removed.len()
        );
        umbra_runtime::process::set_parent(&span, &received.trace_context);
        let out = span.in_scope(|| self.write(received));
        self.store
            .note_trace(span.in_scope(umbra_runtime::process::current_context));
        out
    }

    /// Write everything kept aside since the last commit marker as one durable batch. What
    /// the store refuses now (the response was acknowledged already) is logged.
    async fn commit(&mut self) -> Result<(), SinkError> {
        let staged = std::mem::take(&mut self.staged);
        if staged.is_empty() {
            return Ok(());
        }
        let refused = self.write_staged(staged)?;
        if !refused.is_empty() {
            tracing::warn!(
                ?refused,
                "KDS: the zone store refused part of the Global's change"
            );
        }
        Ok(())
    }
}

impl StoreSink {
    /// Write one response to the store (see [`Sink::apply`] above).
    fn write(&mut self, received: Received) -> Result<Vec<Refusal>, SinkError> {
        let type_url = received.type_url.as_str();
        let (upserts, removed) = (received.upserts, received.removed);
        if type_url == MESH_CA_TYPE {
            return self.take_cas(upserts, removed);
        }
        if type_url == TRUST_BUNDLE_TYPE {
            // A removal keeps the last bundle: tokens keep verifying while the Global is away.
            // A Global whose store is not the one this zone synced from has other keys: its
            // bundle waits, like its removals, for the operator (every DPP token would die).
            // Its revocations still apply (a union: nothing is un-revoked), so a token revoked
            // meanwhile does not keep working here.
            if self.protect {
                let mut refused = Vec::new();
                for u in upserts {
                    if let Ok(received) = serde_json::from_slice::<umbra_auth::TrustBundle>(&u.body)
                    {
                        let mut merged = self.trust.bundle().as_ref().clone();
                        merged.revoked.user.extend(received.revoked.user);
                        merged.revoked.dataplane.extend(received.revoked.dataplane);
                        merged
                            .revoked
                            .zone_ingress
                            .extend(received.revoked.zone_ingress);
                        self.store
                            .record_trust_bundle(&merged)
                            .map_err(SinkError::TrustBundle)?;
                        self.trust.replace(merged);
                    }
                    refused.push(Refusal {
                        name: u.name,
                        reason: "kept the last trust bundle's keys (its revocations apply): the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                    });
                }
                return Ok(refused);
            }
            return self.take_trust(upserts);
        }
        let Some(ty) = ResourceType::from_name(type_url).filter(|t| *t != ResourceType::Dataplane)
        else {
            return Ok(upserts
                .into_iter()
                .map(|u| Refusal {
                    name: u.name,
                    reason: format!("this zone does not take {type_url} from the Global"),
                })
                .collect());
        };
        let mut refused = Vec::new();
        let mut names = Vec::new();
        let mut writes = Vec::new();
        let mut modified = Vec::new();
        for u in upserts {
            match self.decode(ty, &u) {
                Ok(resource) => {
                    modified.push(resource.meta.modification_time.clone());
                    writes.push(ReplicaWrite::Put(Box::new(resource)));
                    names.push(u.name);
                }
                Err(reason) => refused.push(Refusal {
                    name: u.name,
                    reason,
                }),
            }
        }
        for name in removed {
            if self.protect {
                refused.push(Refusal {
                    name,
                    reason: "kept: the Global's store is not the one this zone synced from; an operator confirms with POST /global/accept-store on the zone".to_owned(),
                });
                continue;
            }
            let (mesh, local) = split_kds_name(&name);
            let key = ResourceKey {
                ty,
                mesh,
                name: local,
            };
            let own = self.store.get(&key).is_some_and(|s| {
                s.resource
                    .as_zone_ingress()
                    .is_some_and(|zi| !zi.is_remote(&self.zone))
            });
            if own {
                refused.push(Refusal {
                    name,
                    reason: "kept: a ZoneIngress of this zone is not the Global's to remove"
                        .to_owned(),
                });
                continue;
            }
            // Checked now, so it is NACKed: a write the store refuses at the commit marker
            // can only be logged.
            if ty == ResourceType::Mesh {
                if let Err(e) = self.store.mesh_removable(&key.name) {
                    refused.push(Refusal {
                        name,
                        reason: e.to_string(),
                    });
                    continue;
                }
            }
            writes.push(ReplicaWrite::Delete(key));
            names.push(name);
        }
        let staged = Staged {
            ty,
            names,
            writes,
            modified,
        };
        if self.group_commit {
            self.staged.push(staged);
        } else {
            refused.extend(self.write_staged(vec![staged])?);
        }
        if !refused.is_empty() {
            tracing::warn!(type_url, ?refused, "KDS: NACK to the Global");
        }
        Ok(refused)
    }

    /// Write `batches` to the store as one durable batch; what the store refused, by name.
    ///
    /// # Errors
    /// When the store cannot write (nothing of the batch is applied).
    fn write_staged(&mut self, batches: Vec<Staged>) -> Result<Vec<Refusal>, SinkError> {
        let mut names = Vec::new();
        let mut writes = Vec::new();
        let mut lags = Vec::new();
        for b in batches {
            let count = b.writes.len();
            names.extend(b.names);
            writes.extend(b.writes);
            lags.extend(
                b.modified
                    .into_iter()
                    .map(Some)
                    .chain(std::iter::repeat(None))
                    .take(count)
                    .map(|m| (b.ty, m)),
            );
        }
        let outcomes = self.store.apply_synced(writes);
        let mut refused = Vec::new();
        for ((name, outcome), (ty, at)) in names.into_iter().zip(outcomes).zip(lags) {
            match outcome {
                Ok(_) => {
                    if let Some(at) = at {
                        record_sync_lag(ty, at.as_deref(), self.session_start);
                    }
                }
                Err(e @ StoreError::Unavailable(_)) => return Err(SinkError::Store(e)),
                Err(e) => refused.push(Refusal {
                    name,
                    reason: e.to_string(),
                }),
            }
        }
        Ok(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_kds::resource::global_to_zone_types;

    /// A zone store and a sink writing to it (not protected).
    fn sink() -> (Store, StoreSink) {
        let store = Store::new();
        let sink = StoreSink {
            zone: "zone-2".into(),
            cas: Arc::new(watch::channel(Arc::default()).0),
            trust: umbra_pki::trust::Trust::verifier(Default::default(), Default::default()),
            store: store.clone(),
            session_start: time::OffsetDateTime::now_utc(),
            protect: false,
            group_commit: false,
            staged: Vec::new(),
        };
        (store, sink)
    }

    fn received(type_url: &str, upserts: Vec<Upsert>, removed: Vec<String>) -> Received {
        Received {
            type_url: type_url.into(),
            upserts,
            removed,
            trace_context: Default::default(),
        }
    }

    fn up(name: &str, body: Vec<u8>) -> Upsert {
        Upsert {
            name: name.into(),
            version: "v".into(),
            body,
        }
    }

    #[tokio::test]
    async fn the_trust_bundle_is_kept_and_in_protected_mode_only_its_revocations_apply() {
        use umbra_auth::keys::PublicKey;
        let key = |b: u8| PublicKey::new(vec![b; 32]);
        let bundle = |k: u8, revoked: &[&str]| {
            let mut b = umbra_auth::TrustBundle {
                user_keys: vec![key(k)],
                ..Default::default()
            };
            b.revoked.user = revoked.iter().map(|s| (*s).to_owned()).collect();
            serde_json::to_vec(&b).unwrap()
        };
        let (store, mut sink) = sink();
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, bundle(1, &["a"]))],
                vec![],
            ))
            .await
            .unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(sink.trust.bundle().user_keys, [key(1)]);
        assert_eq!(
            store.trust_bundle().unwrap().user_keys,
            [key(1)],
            "kept in the store"
        );
        // A bundle whose key does not match its ID is refused; the last good one stays.
        let mut forged: serde_json::Value = serde_json::from_slice(&bundle(2, &[])).unwrap();
        forged["userKeys"][0]["kid"] = "0000000000000000".into();
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, serde_json::to_vec(&forged).unwrap())],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert_eq!(sink.trust.bundle().user_keys, [key(1)]);
        // Protected: another Global's keys are not taken, its revocations are.
        sink.protect = true;
        let refused = sink
            .apply(received(
                TRUST_BUNDLE_TYPE,
                vec![up(TRUST_BUNDLE_NAME, bundle(3, &["b"]))],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "reported, keys kept");
        let now = sink.trust.bundle();
        assert_eq!(now.user_keys, [key(1)]);
        assert!(now.revoked.user.contains("a") && now.revoked.user.contains("b"));
        assert!(store.trust_bundle().unwrap().revoked.user.contains("b"));
    }

    #[tokio::test]
    async fn the_sink_applies_valid_resources_and_refuses_the_rest() {
        let (store, mut sink) = sink();
        let mesh = br#"{"type":"Mesh","name":"m"}"#.to_vec();
        assert!(sink
            .apply(received("Mesh", vec![up("m", mesh)], vec![]))
            .await
            .unwrap()
            .is_empty());
        let good = br#"{"type":"MeshTimeout","mesh":"m","name":"t","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"1s"}}]}}"#.to_vec();
        let invalid = br#"{"type":"MeshTimeout","mesh":"m","name":"bad","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"-1s"}}]}}"#.to_vec();
        let misnamed = good.clone();
        let no_mesh =
            br#"{"type":"MeshTimeout","mesh":"x","name":"t","spec":{"targetRef":{"kind":"Mesh"}}}"#
                .to_vec();
        let refused = sink
            .apply(received(
                "MeshTimeout",
                vec![
                    up("m/t", good),
                    up("m/bad", invalid),
                    up("m/other", misnamed),
                    up("x/t", no_mesh),
                ],
                vec!["m/absent".into()],
            ))
            .await
            .unwrap();
        let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["m/bad", "m/other", "x/t"], "{refused:?}");
        assert_eq!(store.list(ResourceType::MeshTimeout, "m").len(), 1);
        let refused = sink
            .apply(received("Dataplane", vec![up("m/dp", vec![])], vec![]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert!(sink
            .apply(received("MeshTimeout", vec![], vec!["m/t".into()]))
            .await
            .unwrap()
            .is_empty());
        assert!(store.list(ResourceType::MeshTimeout, "m").is_empty());
    }

    #[tokio::test]
    async fn with_group_commit_a_generation_reaches_the_store_at_the_marker_only() {
        let (store, mut sink) = sink();
        sink.group_commit = true;
        let mesh = br#"{"type":"Mesh","name":"m"}"#.to_vec();
        let timeout = br#"{"type":"MeshTimeout","mesh":"m","name":"t","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"1s"}}]}}"#.to_vec();
        let bad = br#"{"type":"MeshTimeout","mesh":"m","name":"bad","spec":{"targetRef":{"kind":"Mesh"},"to":[{"targetRef":{"kind":"Mesh"},"default":{"idleTimeout":"-1s"}}]}}"#.to_vec();
        assert!(sink
            .apply(received("Mesh", vec![up("m", mesh)], vec![]))
            .await
            .unwrap()
            .is_empty());
        let refused = sink
            .apply(received(
                "MeshTimeout",
                vec![up("m/t", timeout), up("m/bad", bad)],
                vec![],
            ))
            .await
            .unwrap();
        // Refused at once (NACKed), the rest kept aside: nothing in the store yet.
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].name, "m/bad");
        assert!(store.get(&ResourceKey::mesh("m")).is_none());
        let before = store.revision();
        sink.commit().await.unwrap();
        // One batch: the Mesh and the policy together.
        assert_eq!(store.revision(), before + 2);
        assert!(store.get(&ResourceKey::mesh("m")).is_some());
        assert_eq!(store.list_all(ResourceType::MeshTimeout).len(), 1);
        sink.commit().await.unwrap();
        assert_eq!(store.revision(), before + 2, "nothing left aside");
    }

    #[tokio::test]
    async fn the_global_cannot_delete_a_mesh_while_this_zone_has_dataplanes_in_it() {
        let (store, mut sink) = sink();
        let mesh = br#"{"type":"Mesh","name":"m"}"#.to_vec();
        sink.apply(received("Mesh", vec![up("m", mesh)], vec![]))
            .await
            .unwrap();
        store
            .put(
                Resource::from_bytes(b"type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n").unwrap(),
                None,
            )
            .unwrap();
        let refused = sink
            .apply(received("Mesh", vec![], vec!["m".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].reason.contains("dataplanes attached"),
            "{refused:?}"
        );
        assert_eq!(
            store.list(ResourceType::Dataplane, "m").len(),
            1,
            "the zone's Dataplane stays"
        );
        assert_eq!(store.list(ResourceType::Mesh, "").len(), 1);
    }

    #[tokio::test]
    async fn other_zones_ingresses_come_down_and_ours_stay_ours() {
        let (store, mut sink) = sink();
        let zi = |name: &str, zone: &str| {
            up(name, format!("{{\"type\": \"ZoneIngress\", \"name\": \"{name}\", \"zone\": \"{zone}\", \"networking\": {{\"address\": \"10.0.0.1\", \"port\": 10001, \"advertisedAddress\": \"10.0.0.1\", \"advertisedPort\": 10001}}}}").into_bytes())
        };
        let refused = sink
            .apply(received(
                "ZoneIngress",
                vec![zi("zi-1-abc", "zone-1"), zi("zi-2-abc", "zone-2")],
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].name, "zi-2-abc");
        assert!(
            refused[0].reason.contains("owns its own ingresses"),
            "{refused:?}"
        );
        assert_eq!(store.list_all(ResourceType::ZoneIngress).len(), 1);
        // A local ingress is never the Global's to remove.
        store
            .put(Resource::from_bytes(b"type: ZoneIngress\nname: mine\nnetworking: {address: 10.0.0.2, port: 10001}\n").unwrap(), None)
            .unwrap();
        let refused = sink
            .apply(received(
                "ZoneIngress",
                vec![],
                vec!["mine".into(), "zi-1-abc".into()],
            ))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        let left: Vec<String> = store
            .list_all(ResourceType::ZoneIngress)
            .into_iter()
            .map(|s| s.resource.meta.name)
            .collect();
        assert_eq!(left, ["mine"]);
        // Another zone's cannot replace one of ours.
        let refused = sink
            .apply(received("ZoneIngress", vec![zi("mine", "zone-1")], vec![]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(store
            .get(&ResourceKey {
                ty: ResourceType::ZoneIngress,
                mesh: String::new(),
                name: "mine".into()
            })
            .and_then(|s| s.resource.as_zone_ingress().map(|z| z.zone.is_empty()))
            .unwrap());
        // Held versions name other zones' ingresses only.
        let held = held_versions(&store, &global_to_zone_types(), "zone-2");
        assert!(held["ZoneIngress"].is_empty());
    }

    #[tokio::test]
    async fn mesh_cas_are_checked_kept_and_published() {
        let (store, mut sink) = sink();
        let mut rx = sink.cas.subscribe();
        let ca =
            umbra_pki::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap();
        let good = up("m/ca-1", serde_json::to_vec(&ca).unwrap());
        let misnamed = up("m/ca-2", serde_json::to_vec(&ca).unwrap());
        let mut broken = ca.clone();
        broken.backend = "ca-3".into();
        broken.key_pem = "not a key".into();
        let broken = up("m/ca-3", serde_json::to_vec(&broken).unwrap());
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![good, misnamed, broken], vec![]))
            .await
            .unwrap();
        let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["m/ca-2", "m/ca-3"]);
        assert!(
            refused.iter().all(|r| !r.reason.contains("PRIVATE")),
            "{refused:?}"
        );
        assert!(rx.has_changed().unwrap());
        assert_eq!(
            rx.borrow_and_update().keys().collect::<Vec<_>>(),
            ["m/ca-1"]
        );
        assert_eq!(store.mesh_cas()["m/ca-1"], ca, "kept in the store");
        // A CA stays while its Mesh is here; once the Mesh is gone, it goes.
        store
            .put(
                Resource::from_bytes(b"type: Mesh\nname: m\n").unwrap(),
                None,
            )
            .unwrap();
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(store.mesh_cas().len(), 1);
        store.delete(&ResourceKey::mesh("m")).unwrap();
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        assert!(store.mesh_cas().is_empty());
        // Protected mode changes nothing.
        let ca =
            umbra_pki::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap();
        sink.apply(received(
            MESH_CA_TYPE,
            vec![up("m/ca-1", serde_json::to_vec(&ca).unwrap())],
            vec![],
        ))
        .await
        .unwrap();
        sink.protect = true;
        let refused = sink
            .apply(received(MESH_CA_TYPE, vec![], vec!["m/ca-1".into()]))
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert_eq!(store.mesh_cas().len(), 1);
    }
}
