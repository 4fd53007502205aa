//! The zone's certificate authority for meshes with mTLS on a `builtin` backend (Kuma's
//! builtin CA): it issues one identity certificate per DPP from the mesh's CA, and serves over
//! SDS `mesh_ca:secret:<mesh>` (the roots of every `builtin` backend the mesh lists, so a
//! switch of `enabledBackend` keeps both trusted) and `identity_cert:secret:<mesh>`
//! (certificate chain and private key).
//!
//! The roots are not made here: they are the mesh's one CA ([`crate::mesh_ca`]), created
//! by the Global and received over KDS in a federated zone, created and kept in the durable
//! store by a standalone zone, and handed over with [`Authority::set_cas`]. Until a mesh's CA
//! is there, its DPPs get a clear error instead of an identity.
//!
//! Identity SANs follow Kuma: a URI `spiffe://<mesh>/<service>` per inbound `kuma.io/service`
//! and `kuma://<tag>/<value>` per other inbound tag, which are what the generated TLS contexts
//! verify and what RBAC principals (TrafficPermission, MeshTrafficPermission) match. Keys are
//! ECDSA P-256. Identity certificates live `dpCert.rotation.expiration` (default 24 h, as Kuma)
//! and are reissued once 4/5 of that has passed (kuma-dp's rotation point); the reconciler wakes
//! at [`Authority::next_rotation`]. Certificates are kept until the DPP's SANs change, its
//! mesh's CA changes, or rotation is due, so regenerating a DPP does not churn its secret.
//!
//! Issued identities can be exported and restored ([`Authority::export`],
//! [`Authority::restore`]): the reconciler keeps them in the zone's durable store, so a zone
//! that restarts serves every DPP the certificate it had, and reissues nothing until rotation
//! is due or the DPP or its CA changes.
//!
//! Only the `builtin` backend type is supported; `provided` (user-supplied CA) is refused with
//! an error naming the backend.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::mesh_ca::{offset, MeshCa, MeshCas};
use rcgen::{
    CertificateParams, DistinguishedName, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::mesh::MtlsBackend;
use umbra_core::target_ref::SERVICE_TAG;

/// Identity certificate lifetime when the backend sets none (Kuma's default).
pub const DEFAULT_IDENTITY_VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// Why an identity cannot be issued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaError {
    /// The enabled backend is not of type `builtin`.
    #[error("mTLS backend {name:?} has type {ty:?}; this zone issues certificates for 'builtin' backends only")]
    Unsupported {
        /// Backend name.
        name: String,
        /// Its type.
        ty: String,
    },
    /// `dpCert.rotation.expiration` is not a duration.
    #[error("mTLS backend {name:?}: dpCert.rotation.expiration: {reason}")]
    BadExpiration {
        /// Backend name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The DPP has no inbound service to name it.
    #[error("dataplane has no kuma.io/service to put in an identity certificate")]
    NoIdentity,
    /// Certificate generation failed (rcgen).
    #[error("issuing a certificate failed: {0}")]
    Issue(String),
    /// The mesh's CA for the backend is not here (yet).
    #[error("mesh {mesh:?}: no CA for mTLS backend {backend:?} yet (a federated zone receives the mesh CA from the Global over KDS, which needs TLS or loopback)")]
    NoRoot {
        /// The mesh.
        mesh: String,
        /// The backend.
        backend: String,
    },
}

/// A DPP's identity, PEM encoded, with the root that signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Unique per issued certificate (a fingerprint input: a new one means new secrets).
    pub serial: u64,
    /// The certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
    /// The mesh's trusted roots (PEM, every listed `builtin` backend's), the SDS validation
    /// context.
    pub ca_pem: Arc<str>,
    /// When to reissue.
    pub rotate_at: SystemTime,
}

struct Root {
    issuer: Issuer<'static, KeyPair>,
    pem: Arc<str>,
}

use umbra_core::dataplane::DpKey;

/// A DPP's issued identity with what it was issued for: its SANs and the root (PEM).
struct Issued {
    sans: BTreeSet<String>,
    root: Arc<str>,
    identity: Arc<Identity>,
    status: MtlsStatus,
}

/// What a DPP's certificate is, as Kuma's `DataplaneInsight.mTLS` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MtlsStatus {
    /// When the certificate expires (RFC 3339).
    pub certificate_expiration_time: String,
    /// When it was issued (RFC 3339).
    pub last_certificate_regeneration: String,
    /// How many certificates this zone issued the DPP (kept across restarts).
    pub certificate_regenerations: u64,
    /// The mTLS backend that issued it.
    pub issued_backend: String,
    /// The mesh's `builtin` backends the DPP trusts.
    pub supported_backends: Vec<String>,
}

/// `t` as RFC 3339 (UTC, seconds).
fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(0))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// An issued identity as the zone keeps it across restarts (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    mesh: String,
    name: String,
    sans: BTreeSet<String>,
    root_pem: String,
    cert_pem: String,
    key_pem: String,
    ca_pem: String,
    /// Seconds since the Unix epoch.
    rotate_at: u64,
    /// Absent in what a zone of an earlier release kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<MtlsStatus>,
}

/// Merge identities several replicas of one zone [`Authority::export`]ed (issue 36), so that
/// every replica serves a DPP the same certificate: per DPP, the identity already `stored`
/// wins while it is still good for what `ours` was issued for (same SANs, root and trusted
/// roots, rotation not due at `now`); otherwise ours does. Identities only `stored` holds are
/// kept while `known(mesh, name)` says their DPP exists. Unreadable `stored` counts as
/// nothing stored; unreadable `ours` leaves `stored` as it is. The result is ordered by mesh
/// and name (JSON, as [`Authority::export`]).
pub fn merge_exported(
    stored: &[u8],
    ours: &[u8],
    now: SystemTime,
    known: &(dyn Fn(&str, &str) -> bool + Sync),
) -> Vec<u8> {
    let Ok(ours) = serde_json::from_slice::<Vec<Kept>>(ours) else {
        return stored.to_vec();
    };
    let stored: Vec<Kept> = serde_json::from_slice(stored).unwrap_or_default();
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut merged: BTreeMap<(String, String), Kept> = stored
        .into_iter()
        .filter(|k| known(&k.mesh, &k.name))
        .map(|k| ((k.mesh.clone(), k.name.clone()), k))
        .collect();
    for k in ours {
        let key = (k.mesh.clone(), k.name.clone());
        let keep_stored = merged.get(&key).is_some_and(|s| {
            s.sans == k.sans
                && s.root_pem == k.root_pem
                && s.ca_pem == k.ca_pem
                && s.rotate_at > now
        });
        if !keep_stored {
            merged.insert(key, k);
        }
    }
    serde_json::to_vec(&merged.into_values().collect::<Vec<_>>()).unwrap_or_default()
}

/// Whether two [`Authority::export`]s hold the same certificates for the same DPPs (in any
/// order).
pub fn same_exported(a: &[u8], b: &[u8]) -> bool {
    let certs = |bytes: &[u8]| -> Option<BTreeMap<(String, String), String>> {
        serde_json::from_slice::<Vec<Kept>>(bytes).ok().map(|v| {
            v.into_iter()
                .map(|k| ((k.mesh, k.name), k.cert_pem))
                .collect()
        })
    };
    certs(a) == certs(b)
}

/// The zone's CA state: the mesh CAs by (mesh, backend), identities per DPP. Share with `Arc`.
#[derive(Default)]
pub struct Authority {
    roots: Mutex<HashMap<(String, String), Arc<Root>>>,
    identities: Mutex<HashMap<DpKey, Issued>>,
    serials: AtomicU64,
    /// An identity was issued or dropped since the last [`Authority::export`].
    dirty: std::sync::atomic::AtomicBool,
    /// Bumped whenever an identity is issued, restored or dropped ([`Authority::changes`]).
    changes: AtomicU64,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// The URI SANs of `dp` in `mesh`, sorted: from every inbound's tags and a gateway's tags.
pub fn identity_sans(mesh: &str, dp: &DataplaneSpec) -> BTreeSet<String> {
    let mut sans = BTreeSet::new();
    // A gateway's identity is its gateway tags (Kuma's `Dataplane.Identities`).
    let gateway = dp.networking.gateway.iter().map(|g| &g.tags);
    for tags in dp.networking.inbound.iter().map(|i| &i.tags).chain(gateway) {
        for (tag, value) in tags {
            if tag == SERVICE_TAG {
                sans.insert(format!("spiffe://{mesh}/{value}"));
            } else {
                sans.insert(format!("kuma://{tag}/{value}"));
            }
        }
    }
    sans
}

fn validity(backend: &MtlsBackend) -> Result<Duration, CaError> {
    let text = backend
        .dp_cert
        .as_ref()
        .and_then(|d| d.pointer("/rotation/expiration"))
        .and_then(serde_json::Value::as_str);
    let Some(text) = text else {
        return Ok(DEFAULT_IDENTITY_VALIDITY);
    };
    let bad = |reason: String| CaError::BadExpiration {
        name: backend.name.clone(),
        reason,
    };
    // Kuma accepts Go durations and a day suffix ("1d").
    let d = if let Some(days) = text.strip_suffix('d') {
        let n: u64 = days
            .parse()
            .map_err(|_| bad(format!("{text:?} is not a duration")))?;
        Duration::from_secs(n.saturating_mul(86_400))
    } else {
        let d = umbra_core::duration::Duration::parse(text).map_err(|e| bad(e.to_string()))?;
        Duration::from_nanos(u64::try_from(d.as_nanos()).map_err(|_| bad("negative".into()))?)
    };
    if d < Duration::from_secs(60) {
        return Err(bad(format!("{text:?} is shorter than a minute")));
    }
    Ok(d)
}

fn issue_err(e: rcgen::Error) -> CaError {
    CaError::Issue(e.to_string())
}

impl Authority {
    /// An authority with no roots yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `cas` as the mesh CAs: a CA whose certificate is unchanged keeps its root (and the
    /// identities it issued); the others replace theirs, and CAs no longer in `cas` are
    /// forgotten. Returns the CAs that could not be read (name and reason; never the key),
    /// which issue nothing.
    pub fn set_cas(&self, cas: &MeshCas) -> Vec<(String, String)> {
        let mut roots = self
            .roots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = HashMap::new();
        let mut bad = Vec::new();
        for (name, ca) in cas {
            let key = (ca.mesh.clone(), ca.backend.clone());
            if let Some(r) = roots.get(&key).filter(|r| *r.pem == *ca.cert_pem) {
                next.insert(key, r.clone());
                continue;
            }
            match Self::parse(ca) {
                Ok(root) => {
                    next.insert(key, Arc::new(root));
                }
                Err(e) => bad.push((name.clone(), e.to_string())),
            }
        }
        *roots = next;
        bad
    }

    fn parse(ca: &MeshCa) -> Result<Root, CaError> {
        let key = KeyPair::from_pem(&ca.key_pem).map_err(issue_err)?;
        let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, key).map_err(issue_err)?;
        Ok(Root {
            issuer,
            pem: ca.cert_pem.as_str().into(),
        })
    }

    /// The identity of DPP `name` of `mesh` whose enabled mTLS backend is `backend` and whose
    /// mesh lists the `builtin` backends `trusted`: the cached one while its SANs, root and
    /// trusted roots are current and rotation is not due, a new one otherwise.
    ///
    /// # Errors
    /// [`CaError`] for a non-builtin backend, a bad `dpCert` expiration, a DPP without a
    /// service, a mesh CA not here yet, or a signing failure.
    pub fn identity(
        &self,
        mesh: &str,
        name: &str,
        backend: &MtlsBackend,
        trusted: &[String],
        dp: &DataplaneSpec,
        now: SystemTime,
    ) -> Result<Arc<Identity>, CaError> {
        if backend.backend_type != "builtin" {
            return Err(CaError::Unsupported {
                name: backend.name.clone(),
                ty: backend.backend_type.clone(),
            });
        }
        let lifetime = validity(backend)?;
        let sans = identity_sans(mesh, dp);
        if !sans.iter().any(|s| s.starts_with("spiffe://")) {
            return Err(CaError::NoIdentity);
        }
        let (root, ca_pem) = {
            let roots = self
                .roots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let root = roots
                .get(&(mesh.to_owned(), backend.name.clone()))
                .cloned()
                .ok_or_else(|| CaError::NoRoot {
                    mesh: mesh.to_owned(),
                    backend: backend.name.clone(),
                })?;
            // The enabled backend's root first, then every other listed one (a rotation).
            let mut pem = root.pem.to_string();
            for other in trusted.iter().filter(|b| **b != backend.name) {
                if let Some(r) = roots.get(&(mesh.to_owned(), other.clone())) {
                    if !pem.ends_with('\n') {
                        pem.push('\n');
                    }
                    pem.push_str(&r.pem);
                }
            }
            (root, Arc::<str>::from(pem))
        };
        let key = DpKey::new(mesh, name);
        {
            let ids = self
                .identities
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(issued) = ids.get(&key) {
                if issued.sans == sans
                    && *issued.root == *root.pem
                    && issued.identity.ca_pem == ca_pem
                    && now < issued.identity.rotate_at
                {
                    return Ok(issued.identity.clone());
                }
            }
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = sans
            .iter()
            .map(|s| Ok(SanType::URI(s.clone().try_into().map_err(issue_err)?)))
            .collect::<Result<_, CaError>>()?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyAgreement,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now - Duration::from_secs(300));
        params.not_after = offset(now + lifetime);
        let leaf_key = KeyPair::generate().map_err(issue_err)?;
        let cert = params
            .signed_by(&leaf_key, &root.issuer)
            .map_err(issue_err)?;
        let identity = Arc::new(Identity {
            serial: self.serials.fetch_add(1, Ordering::Relaxed) + 1,
            cert_pem: cert.pem(),
            key_pem: leaf_key.serialize_pem(),
            ca_pem,
            rotate_at: now + lifetime.mul_f64(0.8),
        });
        self.dirty.store(true, Ordering::Release);
        let mut ids = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let regenerations = ids
            .get(&key)
            .map_or(0, |i| i.status.certificate_regenerations)
            + 1;
        let status = MtlsStatus {
            certificate_expiration_time: rfc3339(now + lifetime),
            last_certificate_regeneration: rfc3339(now),
            certificate_regenerations: regenerations,
            issued_backend: backend.name.clone(),
            supported_backends: trusted.to_vec(),
        };
        ids.insert(
            key,
            Issued {
                sans,
                root: root.pem.clone(),
                identity: identity.clone(),
                status,
            },
        );
        // Under the lock, after the insert: whoever sees the new count sees the identity.
        self.changes.fetch_add(1, Ordering::AcqRel);
        Ok(identity)
    }

    /// Every issued identity, as JSON for the zone's store, when one was issued or dropped since
    /// the last export (`None` otherwise).
    pub fn export(&self) -> Option<Vec<u8>> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return None;
        }
        let ids = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept: Vec<Kept> = ids
            .iter()
            .map(|(k, i)| Kept {
                mesh: k.mesh.clone(),
                name: k.name.clone(),
                sans: i.sans.clone(),
                root_pem: i.root.to_string(),
                cert_pem: i.identity.cert_pem.clone(),
                key_pem: i.identity.key_pem.clone(),
                ca_pem: i.identity.ca_pem.to_string(),
                rotate_at: i
                    .identity
                    .rotate_at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs(),
                status: Some(i.status.clone()),
            })
            .collect();
        serde_json::to_vec(&kept).ok()
    }

    /// Take back identities [`Authority::export`]ed earlier (a restarted zone): each is served
    /// again while its DPP, root and trusted roots are unchanged and rotation is not due.
    /// Unreadable input restores nothing.
    pub fn restore(&self, bytes: &[u8]) {
        let Ok(kept) = serde_json::from_slice::<Vec<Kept>>(bytes) else {
            return;
        };
        let mut ids = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.changes.fetch_add(1, Ordering::AcqRel);
        for k in kept {
            // The same certificate stays as it is (its serial too: nothing to regenerate).
            if ids
                .get(&DpKey::new(k.mesh.as_str(), k.name.as_str()))
                .is_some_and(|i| i.identity.cert_pem == k.cert_pem)
            {
                continue;
            }
            let identity = Identity {
                serial: self.serials.fetch_add(1, Ordering::Relaxed) + 1,
                cert_pem: k.cert_pem,
                key_pem: k.key_pem,
                ca_pem: k.ca_pem.into(),
                rotate_at: SystemTime::UNIX_EPOCH + Duration::from_secs(k.rotate_at),
            };
            // What an earlier release kept has no status: none is reported (Authority::statuses)
            // until the identity is reissued.
            let status = k.status.unwrap_or(MtlsStatus {
                certificate_expiration_time: String::new(),
                last_certificate_regeneration: String::new(),
                certificate_regenerations: 0,
                issued_backend: String::new(),
                supported_backends: Vec::new(),
            });
            ids.insert(
                DpKey::new(k.mesh, k.name),
                Issued {
                    sans: k.sans,
                    root: k.root_pem.into(),
                    identity: Arc::new(identity),
                    status,
                },
            );
        }
    }

    /// A counter that moves whenever the issued identities (and so [`Authority::statuses`])
    /// may have changed.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// The mTLS status of every DPP holding an identity (Kuma's `DataplaneInsight.mTLS`).
    pub fn statuses(&self) -> HashMap<DpKey, MtlsStatus> {
        self.identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(_, i)| !i.status.issued_backend.is_empty())
            .map(|(k, i)| (k.clone(), i.status.clone()))
            .collect()
    }

    /// The earliest time an identity is due for rotation.
    pub fn next_rotation(&self) -> Option<SystemTime> {
        self.identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|issued| issued.identity.rotate_at)
            .min()
    }

    /// Forget identities of DPPs for which `keep` is false (removed DPPs, meshes without
    /// mTLS). The roots stay: they follow [`Authority::set_cas`].
    pub fn retain(&self, keep: impl Fn(&DpKey) -> bool) {
        let mut ids = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = ids.len();
        ids.retain(|k, _| keep(k));
        if ids.len() != before {
            self.dirty.store(true, Ordering::Release);
            self.changes.fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;

    fn dp(tags: &str) -> Resource {
        Resource::from_bytes(format!("type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {tags}\n").as_bytes()).unwrap()
    }

    #[test]
    fn a_gateway_is_identified_by_its_gateway_tags() {
        for ty in ["DELEGATED", "BUILTIN"] {
            let r = Resource::from_bytes(format!("type: Dataplane\nmesh: m\nname: edge\nnetworking:\n  address: 10.0.0.1\n  gateway:\n    type: {ty}\n    tags: {{kuma.io/service: edge, zone: z1}}\n").as_bytes()).unwrap();
            let sans = identity_sans("m", r.as_dataplane().unwrap());
            assert_eq!(
                sans.into_iter().collect::<Vec<_>>(),
                ["kuma://zone/z1", "spiffe://m/edge"]
            );
        }
    }

    /// An authority holding a CA for backends `ca-1` and `ca-2` of mesh `m`.
    fn authority() -> Authority {
        let ca = Authority::new();
        let cas: MeshCas = ["ca-1", "ca-2"]
            .iter()
            .map(|b| {
                (
                    crate::mesh_ca::ca_name("m", b),
                    crate::mesh_ca::generate_root("m", b, SystemTime::now()).unwrap(),
                )
            })
            .collect();
        assert!(ca.set_cas(&cas).is_empty());
        ca
    }

    fn builtin(extra: &str) -> MtlsBackend {
        serde_json::from_value(serde_json::json!({"name": "ca-1", "type": "builtin", "dpCert": {"rotation": {"expiration": extra}}})).unwrap()
    }

    #[test]
    fn sans_follow_kuma() {
        let r = dp("{kuma.io/service: web, version: v1}");
        let sans: Vec<String> = identity_sans("m", r.as_dataplane().unwrap())
            .into_iter()
            .collect();
        assert_eq!(sans, ["kuma://version/v1", "spiffe://m/web"]);
    }

    #[test]
    fn identities_are_cached_until_sans_change_or_rotation() {
        let ca = authority();
        let backend = builtin("1h");
        let now = SystemTime::now();
        let r = dp("{kuma.io/service: web}");
        let a = ca
            .identity("m", "web", &backend, &[], r.as_dataplane().unwrap(), now)
            .unwrap();
        assert!(a.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(a.key_pem.contains("PRIVATE KEY"));
        assert_eq!(a.rotate_at, now + Duration::from_secs(48 * 60));
        let again = ca
            .identity("m", "web", &backend, &[], r.as_dataplane().unwrap(), now)
            .unwrap();
        assert_eq!(a, again, "cached");
        let later = now + Duration::from_secs(49 * 60);
        let rotated = ca
            .identity("m", "web", &backend, &[], r.as_dataplane().unwrap(), later)
            .unwrap();
        assert_ne!(rotated.serial, a.serial);
        assert_eq!(rotated.ca_pem, a.ca_pem, "same root");
        // Kuma's DataplaneInsight.mTLS: the second certificate, issued at `later`.
        let status = &ca.statuses()[&DpKey::new("m", "web")];
        assert_eq!(status.certificate_regenerations, 2);
        assert_eq!(status.issued_backend, "ca-1");
        assert_eq!(status.last_certificate_regeneration, rfc3339(later));
        assert_eq!(
            status.certificate_expiration_time,
            rfc3339(later + Duration::from_secs(3600))
        );
        let r2 = dp("{kuma.io/service: web, version: v2}");
        let changed = ca
            .identity("m", "web", &backend, &[], r2.as_dataplane().unwrap(), later)
            .unwrap();
        assert_ne!(changed.serial, rotated.serial);
        assert_eq!(
            ca.next_rotation(),
            Some(later + Duration::from_secs(48 * 60))
        );
    }

    #[test]
    fn replicas_merging_their_identities_serve_the_first_one_issued() {
        let cas: MeshCas = [(
            crate::mesh_ca::ca_name("m", "ca-1"),
            crate::mesh_ca::generate_root("m", "ca-1", SystemTime::now()).unwrap(),
        )]
        .into_iter()
        .collect();
        let (a, b) = (Authority::new(), Authority::new());
        assert!(a.set_cas(&cas).is_empty() && b.set_cas(&cas).is_empty());
        let backend = builtin("1h");
        let now = SystemTime::now();
        let web = dp("{kuma.io/service: web}");
        let issue = |ca: &Authority, name: &str, r: &Resource, at| {
            ca.identity("m", name, &backend, &[], r.as_dataplane().unwrap(), at)
                .unwrap()
        };
        let (first, second) = (issue(&a, "web", &web, now), issue(&b, "web", &web, now));
        assert_ne!(
            first.cert_pem, second.cert_pem,
            "two replicas, two certificates"
        );
        let other = issue(&a, "other", &web, now);
        let (stored, ours) = (a.export().unwrap(), b.export().unwrap());
        let everyone = |_: &str, _: &str| true;
        let merged = merge_exported(&stored, &ours, now, &everyone);
        assert!(
            same_exported(&merged, &stored),
            "the first one stays, and `other` too"
        );
        assert!(!same_exported(&merged, &ours));
        b.restore(&merged);
        assert_eq!(issue(&b, "web", &web, now).cert_pem, first.cert_pem);
        assert_eq!(issue(&b, "other", &web, now).cert_pem, other.cert_pem);
        // A DPP nobody knows any more loses its identity; ours wins once the stored one is
        // due for rotation or was issued for other SANs.
        let only_web = |_: &str, name: &str| name == "web";
        let merged: Vec<Kept> =
            serde_json::from_slice(&merge_exported(&stored, &ours, now, &only_web)).unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].cert_pem, first.cert_pem);
        let later = now + Duration::from_secs(49 * 60);
        let rotated = issue(&b, "web", &web, later);
        let merged = merge_exported(&stored, &b.export().unwrap(), later, &only_web);
        let kept: Vec<Kept> = serde_json::from_slice(&merged).unwrap();
        let web_now = kept.iter().find(|k| k.name == "web").unwrap();
        assert_eq!(web_now.cert_pem, rotated.cert_pem);
        assert_eq!(
            merge_exported(b"not json", &ours, now, &everyone),
            merge_exported(b"[]", &ours, now, &everyone)
        );
    }

    #[test]
    fn unsupported_backends_and_bad_expirations_are_errors() {
        let ca = authority();
        let r = dp("{kuma.io/service: web}");
        let provided: MtlsBackend =
            serde_json::from_value(serde_json::json!({"name": "p", "type": "provided"})).unwrap();
        let e = ca
            .identity(
                "m",
                "web",
                &provided,
                &[],
                r.as_dataplane().unwrap(),
                SystemTime::now(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("'builtin' backends only"), "{e}");
        let e = ca
            .identity(
                "m",
                "web",
                &builtin("soon"),
                &[],
                r.as_dataplane().unwrap(),
                SystemTime::now(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("dpCert.rotation.expiration"), "{e}");
        assert!(ca
            .identity(
                "m",
                "web",
                &builtin("1d"),
                &[],
                r.as_dataplane().unwrap(),
                SystemTime::now()
            )
            .is_ok());
        // No CA for the backend: a clear error.
        let e = Authority::new()
            .identity(
                "m",
                "web",
                &builtin("1d"),
                &[],
                r.as_dataplane().unwrap(),
                SystemTime::now(),
            )
            .unwrap_err();
        assert!(matches!(e, CaError::NoRoot { .. }), "{e}");
    }

    #[test]
    fn every_listed_root_is_trusted_and_a_new_ca_reissues() {
        let ca = authority();
        let r = dp("{kuma.io/service: web}");
        let now = SystemTime::now();
        let both = ["ca-1".to_owned(), "ca-2".to_owned()];
        let a = ca
            .identity(
                "m",
                "web",
                &builtin("1h"),
                &both,
                r.as_dataplane().unwrap(),
                now,
            )
            .unwrap();
        assert_eq!(
            a.ca_pem.matches("BEGIN CERTIFICATE").count(),
            2,
            "both roots trusted"
        );
        // The same CAs again: nothing changes.
        let cas: MeshCas = ca
            .roots
            .lock()
            .unwrap()
            .keys()
            .map(|(m, b)| {
                (
                    crate::mesh_ca::ca_name(m, b),
                    crate::mesh_ca::generate_root(m, b, now).unwrap(),
                )
            })
            .collect();
        // A new CA for ca-1 (another Global, a recreated mesh): a new identity from it.
        ca.set_cas(&cas);
        let b = ca
            .identity(
                "m",
                "web",
                &builtin("1h"),
                &both,
                r.as_dataplane().unwrap(),
                now,
            )
            .unwrap();
        assert_ne!(a.serial, b.serial);
        assert_ne!(a.ca_pem, b.ca_pem);
    }

    #[test]
    fn exported_identities_are_served_again_after_a_restart() {
        let ca = authority();
        let r = dp("{kuma.io/service: web}");
        let now = SystemTime::now();
        let a = ca
            .identity(
                "m",
                "web",
                &builtin("1h"),
                &[],
                r.as_dataplane().unwrap(),
                now,
            )
            .unwrap();
        let kept = ca.export().expect("an identity was issued");
        assert!(ca.export().is_none(), "nothing new since");
        // A restarted zone: the same CAs (matched by certificate), identities restored.
        let restarted = Authority::new();
        *restarted.roots.lock().unwrap() = ca.roots.lock().unwrap().clone();
        restarted.restore(&kept);
        let b = restarted
            .identity(
                "m",
                "web",
                &builtin("1h"),
                &[],
                r.as_dataplane().unwrap(),
                now,
            )
            .unwrap();
        assert_eq!(
            a.cert_pem, b.cert_pem,
            "the same certificate, not a reissue"
        );
        assert_eq!(a.key_pem, b.key_pem);
        assert_eq!(
            restarted.statuses(),
            ca.statuses(),
            "the mTLS status is kept too"
        );
        restarted.restore(b"not json");
        // Rotation still happens when due.
        let later = now + Duration::from_secs(49 * 60);
        let c = restarted
            .identity(
                "m",
                "web",
                &builtin("1h"),
                &[],
                r.as_dataplane().unwrap(),
                later,
            )
            .unwrap();
        assert_ne!(c.cert_pem, a.cert_pem);
    }
}
