//! The builtin mesh CAs (issue 18; Kuma 2.7's `pkg/plugins/ca/builtin` and the mesh manager's
//! `EnsureCAs`): one self-signed root per mesh and `builtin` mTLS backend, created once by the
//! CP that owns the mesh (the Global; a standalone zone for itself) and kept in its store
//! (`Store::signing_key` under `mesh-ca/<mesh>/<backend>`: PostgreSQL on the Global, the
//! `--data-dir` store in a zone), never in a resource, so no API lists or returns it.
//!
//! A federated zone receives the CAs from the Global over KDS (an encrypted channel, or
//! loopback) and issues its DPPs' identities with them, so every zone of a mesh trusts every
//! other. Roots are created for every `builtin` backend listed in `mtls.backends` (not only the
//! enabled one), so switching `enabledBackend` finds the new root already everywhere; a mesh's
//! roots are dropped with the mesh (a recreated Mesh gets new ones).
//!
//! Keys are ECDSA P-256, roots live 10 years (Kuma's builtin default).
//!
//! Replicas of the Global sharing one store each run a [`CaKeeper`]: a CA is created only where
//! the store has none (a compare-and-swap, [`umbra_store::update_key`]; the replica that loses
//! the race adopts the winner's), and a gone mesh's CA is dropped only if it is still the one
//! this keeper holds (never a CA another replica just made for a re-created Mesh).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
use rcgen::{KeyUsagePurpose, SanType};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use umbra_core::mesh::MeshSpec;
use umbra_core::resource::{ResourceType, Spec};
use umbra_store::{list_all, update_key, Store, StoreError};

/// Root certificate lifetime (Kuma's builtin default: 10 years).
pub const ROOT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How long store changes are gathered before the CAs are checked again.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Pause after a store error.
const RETRY: Duration = Duration::from_secs(1);

/// One mesh CA: the root certificate and its private key (PEM). JSON `{"mesh", "backend",
/// "certPem", "keyPem"}` (what the store keeps and KDS carries); `Debug` leaves the key out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshCa {
    /// The mesh.
    pub mesh: String,
    /// The `builtin` mTLS backend it belongs to.
    pub backend: String,
    /// The root certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
}

impl std::fmt::Debug for MeshCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshCa")
            .field("mesh", &self.mesh)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Every mesh CA, by [`ca_name`].
pub type MeshCas = BTreeMap<String, MeshCa>;

/// `<mesh>/<backend>`: a CA's name (its KDS name too).
pub fn ca_name(mesh: &str, backend: &str) -> String {
    format!("{mesh}/{backend}")
}

/// The store key of a CA.
pub fn store_key(mesh: &str, backend: &str) -> String {
    format!("mesh-ca/{mesh}/{backend}")
}

/// The `builtin` backends of `spec`'s `mtls.backends` (any, enabled or not).
pub fn builtin_backends(spec: &MeshSpec) -> Vec<String> {
    spec.mtls
        .iter()
        .flat_map(|m| &m.backends)
        .filter(|b| b.backend_type == "builtin")
        .map(|b| b.name.clone())
        .collect()
}

/// `t` as a certificate validity bound (rcgen's type); the epoch for a time before it.
pub fn offset(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// A new root for `backend` of `mesh`: self-signed, CA, URI SAN `spiffe://<mesh>`, valid from
/// five minutes before `now` for [`ROOT_VALIDITY`].
///
/// # Errors
/// [`rcgen::Error`] when the key cannot be generated or the certificate signed.
pub fn generate_root(mesh: &str, backend: &str, now: SystemTime) -> Result<MeshCa, rcgen::Error> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Umbra");
    dn.push(DnType::CommonName, format!("{mesh} {backend} root"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.subject_alt_names = vec![SanType::URI(format!("spiffe://{mesh}").try_into()?)];
    params.not_before = offset(now - Duration::from_secs(300));
    params.not_after = offset(now + ROOT_VALIDITY);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(MeshCa {
        mesh: mesh.to_owned(),
        backend: backend.to_owned(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Keeps the CAs of an owning CP's store in line with its Meshes and publishes them.
#[derive(Debug)]
pub struct CaKeeper {
    store: Arc<dyn Store>,
    cas: Arc<watch::Sender<Arc<MeshCas>>>,
}

impl CaKeeper {
    /// A keeper over `store` publishing on `cas`.
    pub fn new(store: Arc<dyn Store>, cas: Arc<watch::Sender<Arc<MeshCas>>>) -> Self {
        Self { store, cas }
    }

    /// Bring the CAs in line with the Meshes once: one for every `builtin` backend (read from
    /// the store, created there when missing), none for a Mesh that is gone.
    ///
    /// # Errors
    /// [`StoreError`]; what was published stays.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let mut wanted = BTreeSet::new();
        for s in list_all(&*self.store, ResourceType::Mesh, None, &BTreeMap::new()).await? {
            if let Spec::Mesh(spec) = &s.resource.spec {
                for backend in builtin_backends(spec) {
                    wanted.insert((s.resource.meta.name.clone(), backend));
                }
            }
        }
        let current = self.cas.borrow().clone();
        let meshes: BTreeSet<&str> = wanted.iter().map(|(m, _)| m.as_str()).collect();
        let mut next = MeshCas::new();
        for (name, ca) in current.iter() {
            if meshes.contains(ca.mesh.as_str()) {
                next.insert(name.clone(), ca.clone());
            } else {
                // The mesh is gone: so is its CA (a recreated Mesh gets a new one), unless the
                // stored CA is no longer this one (another keeper made it for a new Mesh).
                let dropped = update_key(&*self.store, &store_key(&ca.mesh, &ca.backend), |b| {
                    let ours = b.is_some_and(|b| {
                        serde_json::from_slice::<MeshCa>(b).is_ok_and(|stored| stored == *ca)
                    });
                    Ok::<_, StoreError>(ours.then(Vec::new))
                })
                .await?;
                if dropped.written {
                    tracing::info!(mesh = %ca.mesh, backend = %ca.backend, "Mesh gone: its CA is dropped");
                }
            }
        }
        for (mesh, backend) in &wanted {
            let name = ca_name(mesh, backend);
            if next.contains_key(&name) {
                continue;
            }
            let fresh = generate_root(mesh, backend, SystemTime::now())
                .map_err(|e| StoreError::Unavailable(format!("mesh CA {name}: {e}")))?;
            let fresh_bytes = serde_json::to_vec(&fresh)
                .map_err(|e| StoreError::Unavailable(format!("mesh CA {name}: {e}")))?;
            // None stored, or dropped (empty): this one; else (another keeper's) the stored one.
            let kept = update_key(&*self.store, &store_key(mesh, backend), |stored| {
                Ok::<_, StoreError>(match stored {
                    Some(bytes) if !bytes.is_empty() => None,
                    _ => Some(fresh_bytes.clone()),
                })
            })
            .await?;
            let ca: MeshCa = serde_json::from_slice(&kept.value.unwrap_or_default())
                .map_err(|e| StoreError::Unavailable(format!("mesh CA {name}: {e}")))?;
            if kept.written {
                tracing::info!(%mesh, %backend, "mesh CA created");
            }
            next.insert(name, ca);
        }
        self.cas.send_if_modified(|c| {
            if **c == next {
                return false;
            }
            *c = Arc::new(next);
            true
        });
        Ok(())
    }

    /// [`CaKeeper::sync`] on every store change (and every second after an error) until
    /// `shutdown` turns `true`.
    pub async fn follow(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut changes = self.store.subscribe();
        loop {
            let wait = match self.sync().await {
                Ok(()) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot bring the mesh CAs in line with the Meshes; retrying");
                    Some(RETRY)
                }
            };
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                () = async {
                    match wait {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            tokio::time::sleep(DEBOUNCE).await;
            changes.borrow_and_update();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;

    fn mesh(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    #[tokio::test]
    async fn cas_follow_meshes_and_survive_a_new_keeper() {
        let store: Arc<dyn Store> = Arc::new(umbra_store::memory::MemoryStore::new());
        store
            .put(mesh("type: Mesh\nname: m\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - name: ca-1\n    type: builtin\n  - name: p\n    type: provided\n"), None, None)
            .await
            .unwrap();
        store
            .put(mesh("type: Mesh\nname: plain\n"), None, None)
            .await
            .unwrap();
        let (tx, rx) = watch::channel(Arc::default());
        let keeper = CaKeeper::new(store.clone(), Arc::new(tx));
        keeper.sync().await.unwrap();
        let first = rx.borrow().clone();
        assert_eq!(first.keys().collect::<Vec<_>>(), ["m/ca-1"]);
        assert!(first["m/ca-1"].cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(!format!("{:?}", first["m/ca-1"]).contains("PRIVATE"));
        // Another keeper over the same store (a restart) finds the same CA.
        let (tx2, rx2) = watch::channel(Arc::default());
        CaKeeper::new(store.clone(), Arc::new(tx2))
            .sync()
            .await
            .unwrap();
        assert_eq!(*rx2.borrow(), first);
        // The mesh goes: its CA goes; recreated, it gets a new one.
        store
            .delete(&umbra_core::resource::ResourceKey::mesh("m"), None)
            .await
            .unwrap();
        keeper.sync().await.unwrap();
        assert!(rx.borrow().is_empty());
        store
            .put(
                mesh(
                    "type: Mesh\nname: m\nmtls:\n  backends:\n  - name: ca-1\n    type: builtin\n",
                ),
                None,
                None,
            )
            .await
            .unwrap();
        keeper.sync().await.unwrap();
        assert_ne!(rx.borrow()["m/ca-1"].cert_pem, first["m/ca-1"].cert_pem);
    }

    /// Two keepers on one store (replicas of the Global): the CA both create at once is one,
    /// and a keeper holding an old CA of a gone Mesh leaves alone the CA another keeper made
    /// for the Mesh re-created under the same name.
    #[tokio::test]
    async fn keepers_sharing_a_store_agree_and_never_drop_each_others_cas() {
        const M: &str =
            "type: Mesh\nname: m\nmtls:\n  backends:\n  - name: ca-1\n    type: builtin\n";
        let store: Arc<dyn Store> = Arc::new(umbra_store::memory::MemoryStore::new());
        store.put(mesh(M), None, None).await.unwrap();
        let (ta, ra) = watch::channel(Arc::default());
        let (tb, rb) = watch::channel(Arc::default());
        let a = CaKeeper::new(store.clone(), Arc::new(ta));
        let b = CaKeeper::new(store.clone(), Arc::new(tb));
        let (x, y) = tokio::join!(a.sync(), b.sync());
        x.unwrap();
        y.unwrap();
        let first = ra.borrow().clone();
        assert_eq!(*rb.borrow(), first, "one CA");
        let m = umbra_core::resource::ResourceKey::mesh("m");
        let gone = || store.delete(&m, None);
        gone().await.unwrap();
        b.sync().await.unwrap();
        store.put(mesh(M), None, None).await.unwrap();
        b.sync().await.unwrap();
        let second = rb.borrow().clone();
        assert_ne!(second["m/ca-1"], first["m/ca-1"]);
        gone().await.unwrap();
        a.sync().await.unwrap();
        assert!(ra.borrow().is_empty());
        let stored = store
            .get_key(&store_key("m", "ca-1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<MeshCa>(&stored).unwrap(),
            second["m/ca-1"],
            "B's CA is kept"
        );
        store.put(mesh(M), None, None).await.unwrap();
        a.sync().await.unwrap();
        assert_eq!(*ra.borrow(), second, "A adopts it");
    }
}
