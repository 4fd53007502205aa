//! What the reconciler publishes per proxy ([`DpSnapshot`]: the last good snapshot, its
//! versions, the last generation error) and how a generation result becomes one
//! ([`publish`]: shares the old snapshot when nothing changed, keeps the last good one on
//! error).

use std::collections::BTreeMap;
use std::sync::Arc;

use umbra_core::dataplane::DpKey;
use umbra_xds::snapshot::Snapshot;
use umbra_xds_protocol::version::{type_version, TypeVersions};

use umbra_xds_protocol::type_url::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, RUNTIME_TYPE, SECRET_TYPE,
};

/// The xDS types served, in the order changes are pushed (the runtime a gateway's Envoy waits
/// for before it initializes its clusters first; clusters and endpoints warm before listeners
/// and routes).
pub const TYPE_ORDER: [&str; 6] = [
    RUNTIME_TYPE,
    CLUSTER_TYPE,
    ENDPOINT_TYPE,
    LISTENER_TYPE,
    ROUTE_TYPE,
    SECRET_TYPE,
];

/// A SHA-256 fingerprint of a DPP's generation inputs.
pub type Fingerprint = [u8; 32];

/// The admin input a snapshot is generated with, and the admin port it came from.
pub(super) type AdminInput = (Option<Arc<umbra_xds::base::admin::EnvoyAdmin>>, Option<u16>);

/// A DPP's current Live snapshot with its versions and last generation error.
#[derive(Debug, Clone, Default)]
pub struct DpSnapshot {
    /// The last good snapshot.
    pub snapshot: Arc<Snapshot>,
    /// Per type URL: the type version ([`type_version`] of `resources`), the SotW
    /// `version_info`.
    pub versions: BTreeMap<&'static str, String>,
    /// Per type URL, per resource name: the resource version (delta xDS).
    pub resources: TypeVersions,
    /// The last generation error, if the latest attempt failed (the snapshot is then the last
    /// good one).
    pub error: Option<String>,
    /// Fingerprint of the inputs of the latest attempt (successful or not).
    pub inputs: Fingerprint,
    /// The admin input the snapshot was generated with ([`crate::admin_tls::AdminTls::input`]):
    /// inspect generates the Shadow view with the same one.
    pub admin: Option<Arc<umbra_xds::base::admin::EnvoyAdmin>>,
    /// The admin port its Envoy had reported when the snapshot was generated
    /// ([`crate::insight::Insights::admin_port`]): a stream whose Envoy just reported one waits
    /// for the snapshot generated with it ([`crate::ads`]).
    pub admin_port: Option<u16>,
}

/// A DPP's (or ingress's) entry for a generation result: the new snapshot (sharing the old
/// one when the content is the same), or the last good one with the error. Returns whether
/// what it serves (content or error) changed.
pub(super) fn publish(
    interned: &umbra_xds::snapshot::SnapshotInterner,
    key: &DpKey,
    generated: Result<Snapshot, String>,
    old: Option<&Arc<DpSnapshot>>,
    inputs: Fingerprint,
    (admin, admin_port): AdminInput,
) -> (Arc<DpSnapshot>, bool) {
    match generated {
        Ok(snapshot) => {
            let previous = old.map(|o| (&*o.snapshot, &o.resources));
            let resources = snapshot.resource_versions(previous);
            let versions = TYPE_ORDER
                .iter()
                .map(|t| {
                    (
                        *t,
                        type_version(resources.get(t).unwrap_or(&BTreeMap::new())),
                    )
                })
                .collect::<BTreeMap<_, _>>();
            let changed = !old.is_some_and(|o| o.error.is_none() && o.versions == versions);
            let snapshot = match old {
                // Same content: keep sharing the old snapshot.
                Some(o) if !changed => o.snapshot.clone(),
                _ => {
                    let mut snapshot = snapshot;
                    interned.intern(&mut snapshot, &resources);
                    Arc::new(snapshot)
                }
            };
            let entry = DpSnapshot {
                snapshot,
                versions,
                resources,
                error: None,
                inputs,
                admin,
                admin_port,
            };
            (Arc::new(entry), changed)
        }
        Err(e) => {
            tracing::warn!(mesh = %key.mesh, dataplane = %key.name, error = %e, "generation failed; keeping the last good snapshot");
            let mut kept = old.map(|o| (**o).clone()).unwrap_or_default();
            let message = e;
            let changed = kept.error.as_deref() != Some(message.as_str());
            kept.error = Some(message);
            kept.inputs = inputs;
            (Arc::new(kept), changed)
        }
    }
}
