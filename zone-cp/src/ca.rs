//! The zone's certificate authority for meshes with mTLS on a `builtin` backend (Kuma's
//! builtin CA): one self-signed root per mesh and backend, and one identity certificate per
//! DPP, served over SDS as `mesh_ca:secret:<mesh>` (the root) and
//! `identity_cert:secret:<mesh>` (certificate chain and private key).
//!
//! Identity SANs follow Kuma: a URI `spiffe://<mesh>/<service>` per inbound `kuma.io/service`
//! and `kuma://<tag>/<value>` per other inbound tag, which are what the generated TLS contexts
//! verify and what RBAC principals (TrafficPermission, MeshTrafficPermission) match. Keys are
//! ECDSA P-256. Identity certificates live `dpCert.rotation.expiration` (default 24 h, as Kuma)
//! and are reissued once 4/5 of that has passed (kuma-dp's rotation point); the reconciler wakes
//! at [`Authority::next_rotation`]. Certificates are kept until the DPP's SANs change, its
//! mesh's CA changes, or rotation is due, so regenerating a DPP does not churn its secret.
//!
//! Roots are held in memory: a standalone zone that restarts issues a new root (and new
//! identities) to every DPP, which Envoy takes over SDS without dropping connections. Only the
//! `builtin` backend type is supported; `provided` (user-supplied CA) is refused with an error
//! naming the backend.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::mesh::MtlsBackend;
use umbra_core::target_ref::SERVICE_TAG;

/// Identity certificate lifetime when the backend sets none (Kuma's default).
pub const DEFAULT_IDENTITY_VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// Root certificate lifetime (Kuma's builtin default: 10 years).
pub const ROOT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

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
    /// The mesh root (PEM), the SDS validation context.
    pub ca_pem: Arc<str>,
    /// When to reissue.
    pub rotate_at: SystemTime,
}

struct Root {
    backend: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
    pem: Arc<str>,
    serial: u64,
}

use umbra_core::dataplane::DpKey;

/// A DPP's issued identity with what it was issued for: its SANs and the root's serial.
struct Issued {
    sans: BTreeSet<String>,
    root: u64,
    identity: Arc<Identity>,
}

/// The zone's CA state: roots per mesh, identities per DPP. Share with `Arc`.
#[derive(Default)]
pub struct Authority {
    roots: Mutex<HashMap<String, Arc<Root>>>,
    identities: Mutex<HashMap<DpKey, Issued>>,
    serials: AtomicU64,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// The URI SANs of `dp` in `mesh`, sorted.
pub fn identity_sans(mesh: &str, dp: &DataplaneSpec) -> BTreeSet<String> {
    let mut sans = BTreeSet::new();
    for inbound in &dp.networking.inbound {
        for (tag, value) in &inbound.tags {
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

/// `t` as a certificate validity bound (rcgen's type); the epoch for a time before it.
pub(crate) fn offset(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

impl Authority {
    /// An authority with no roots yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn root(
        &self,
        mesh: &str,
        backend: &MtlsBackend,
        now: SystemTime,
    ) -> Result<Arc<Root>, CaError> {
        let mut roots = self
            .roots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = roots.get(mesh).filter(|r| r.backend == backend.name) {
            return Ok(r.clone());
        }
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "Umbra");
        dn.push(DnType::CommonName, format!("{mesh} {} root", backend.name));
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.subject_alt_names = vec![SanType::URI(
            format!("spiffe://{mesh}").try_into().map_err(issue_err)?,
        )];
        params.not_before = offset(now - Duration::from_secs(300));
        params.not_after = offset(now + ROOT_VALIDITY);
        let key = KeyPair::generate().map_err(issue_err)?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(issue_err)?;
        let root = Arc::new(Root {
            backend: backend.name.clone(),
            pem: issuer.pem().into(),
            issuer,
            serial: self.serials.fetch_add(1, Ordering::Relaxed) + 1,
        });
        roots.insert(mesh.to_owned(), root.clone());
        Ok(root)
    }

    /// The identity of DPP `name` of `mesh` whose enabled mTLS backend is `backend`: the cached
    /// one while its SANs and root are current and rotation is not due, a new one otherwise.
    ///
    /// # Errors
    /// [`CaError`] for a non-builtin backend, a bad `dpCert` expiration, a DPP without a
    /// service, or a signing failure.
    pub fn identity(
        &self,
        mesh: &str,
        name: &str,
        backend: &MtlsBackend,
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
        let root = self.root(mesh, backend, now)?;
        let key = DpKey::new(mesh, name);
        {
            let ids = self
                .identities
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(issued) = ids.get(&key) {
                if issued.sans == sans
                    && issued.root == root.serial
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
            ca_pem: root.pem.clone(),
            rotate_at: now + lifetime.mul_f64(0.8),
        });
        self.identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                key,
                Issued {
                    sans,
                    root: root.serial,
                    identity: identity.clone(),
                },
            );
        Ok(identity)
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

    /// Forget identities of DPPs for which `keep` is false (removed DPPs, meshes without mTLS)
    /// and roots of meshes for which `keep_mesh` is false.
    pub fn retain(&self, keep: impl Fn(&DpKey) -> bool, keep_mesh: impl Fn(&str) -> bool) {
        self.identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|k, _| keep(k));
        self.roots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|m, _| keep_mesh(m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;

    fn dp(tags: &str) -> Resource {
        Resource::from_bytes(format!("type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {tags}\n").as_bytes()).unwrap()
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
        let ca = Authority::new();
        let backend = builtin("1h");
        let now = SystemTime::now();
        let r = dp("{kuma.io/service: web}");
        let a = ca
            .identity("m", "web", &backend, r.as_dataplane().unwrap(), now)
            .unwrap();
        assert!(a.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(a.key_pem.contains("PRIVATE KEY"));
        assert_eq!(a.rotate_at, now + Duration::from_secs(48 * 60));
        let again = ca
            .identity("m", "web", &backend, r.as_dataplane().unwrap(), now)
            .unwrap();
        assert_eq!(a, again, "cached");
        let later = now + Duration::from_secs(49 * 60);
        let rotated = ca
            .identity("m", "web", &backend, r.as_dataplane().unwrap(), later)
            .unwrap();
        assert_ne!(rotated.serial, a.serial);
        assert_eq!(rotated.ca_pem, a.ca_pem, "same root");
        let r2 = dp("{kuma.io/service: web, version: v2}");
        let changed = ca
            .identity("m", "web", &backend, r2.as_dataplane().unwrap(), later)
            .unwrap();
        assert_ne!(changed.serial, rotated.serial);
        assert_eq!(
            ca.next_rotation(),
            Some(later + Duration::from_secs(48 * 60))
        );
    }

    #[test]
    fn unsupported_backends_and_bad_expirations_are_errors() {
        let ca = Authority::new();
        let r = dp("{kuma.io/service: web}");
        let provided: MtlsBackend =
            serde_json::from_value(serde_json::json!({"name": "p", "type": "provided"})).unwrap();
        let e = ca
            .identity(
                "m",
                "web",
                &provided,
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
                r.as_dataplane().unwrap(),
                SystemTime::now()
            )
            .is_ok());
    }
}
