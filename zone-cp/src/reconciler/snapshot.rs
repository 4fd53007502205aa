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
        Ok(mut snapshot) => {
            let previous = old.map(|o| (&*o.snapshot, &o.resources));
            let resources = snapshot.resource_versions_sharing(previous);
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

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
    use umbra_xds::interner::{encodings_on_this_thread, Shared};
    use umbra_xds::snapshot::SnapshotInterner;

    /// A freshly generated snapshot (new allocations every time), with `timeout_s` on its
    /// `backend` cluster.
    fn generated(timeout_s: i64) -> Snapshot {
        let mut s = Snapshot::default();
        for name in ["backend", "db"] {
            let connect_timeout =
                (name == "backend").then_some(envoy_types::pb::google::protobuf::Duration {
                    seconds: timeout_s,
                    nanos: 0,
                });
            s.clusters.insert(
                name.into(),
                Cluster {
                    name: name.into(),
                    connect_timeout,
                    ..Default::default()
                }
                .into(),
            );
            s.endpoints.insert(
                name.into(),
                ClusterLoadAssignment {
                    cluster_name: name.into(),
                    ..Default::default()
                }
                .into(),
            );
        }
        s.listeners.insert(
            "inbound".into(),
            Listener {
                name: "inbound".into(),
                ..Default::default()
            }
            .into(),
        );
        s.secrets.insert(
            "ca".into(),
            Secret {
                name: "ca".into(),
                ..Default::default()
            }
            .into(),
        );
        s
    }

    fn every_wire(s: &Snapshot) -> Vec<*const u8> {
        let mut out = Vec::new();
        out.extend(s.clusters.values().map(|r| r.wire().as_ptr()));
        out.extend(s.endpoints.values().map(|r| r.wire().as_ptr()));
        out.extend(s.listeners.values().map(|r| r.wire().as_ptr()));
        out.extend(s.secrets.values().map(|r| r.wire().as_ptr()));
        out
    }

    fn all_encoded(s: &Snapshot) -> bool {
        s.clusters.values().all(Shared::is_encoded)
            && s.endpoints.values().all(Shared::is_encoded)
            && s.listeners.values().all(Shared::is_encoded)
            && s.secrets.values().all(Shared::is_encoded)
    }

    /// Issue 39: a generation encodes each resource it changed once (for its version), and
    /// that encoding is what every later reader (ADS streams, other DPPs) gets.
    #[test]
    fn each_resource_is_encoded_once_per_generation_and_then_shared() {
        let interner = SnapshotInterner::default();
        let key = |n: &str| DpKey::new("m", n);
        let count = encodings_on_this_thread;
        let start = count();
        let (web, changed) = publish(
            &interner,
            &key("web"),
            Ok(generated(1)),
            None,
            [0; 32],
            (None, None),
        );
        assert!(changed);
        assert_eq!(
            count() - start,
            6,
            "each of the 6 resources once, for its version"
        );
        assert!(
            all_encoded(&web.snapshot),
            "every resource keeps its encoding"
        );
        let served = every_wire(&web.snapshot);
        assert_eq!(count() - start, 6, "reading the encodings encodes nothing");

        // Regenerated with equal content: versions are kept, nothing is encoded.
        let start = count();
        let (again, changed) = publish(
            &interner,
            &key("web"),
            Ok(generated(1)),
            Some(&web),
            [1; 32],
            (None, None),
        );
        assert!(!changed);
        assert_eq!(count() - start, 0);
        assert_eq!(every_wire(&again.snapshot), served);

        // One cluster changed: it alone is encoded; the others keep the earlier allocations,
        // encodings included.
        let start = count();
        let (next, changed) = publish(
            &interner,
            &key("web"),
            Ok(generated(2)),
            Some(&again),
            [2; 32],
            (None, None),
        );
        assert!(changed);
        assert_eq!(count() - start, 1);
        assert!(all_encoded(&next.snapshot));
        let now = every_wire(&next.snapshot);
        assert_ne!(now[0], served[0], "backend changed");
        assert_eq!(now[1..], served[1..], "the rest is the earlier encodings");
        assert_eq!(count() - start, 1);

        // Another DPP with the same resources: its generation hashes them, then holds the
        // first DPP's allocations, so both serve one encoding.
        let (db, _) = publish(
            &interner,
            &key("db"),
            Ok(generated(2)),
            None,
            [3; 32],
            (None, None),
        );
        assert_eq!(every_wire(&db.snapshot), now);
    }
}
