//! The CP's trust state (issue 15): the [`TrustBundle`] every check reads (user tokens on the
//! API, dataplane tokens on ADS) and, on the CP that issues tokens, the [`Authority`] holding
//! the private keys in the store.
//!
//! - The Global, and a standalone zone, are authorities: the user-token key, one
//!   dataplane-token key per Mesh (created when the Mesh appears, dropped when it goes: the
//!   authority follows the store), the revocation lists and the admin user token all live in
//!   the store (`Store::signing_key`/`set_key`, durable on PostgreSQL and on a `--data-dir`
//!   memory store) and are loaded on start.
//! - A federated zone is a verifier: it receives the bundle from the Global over KDS and keeps
//!   it in its store ([`BUNDLE_KEY`]), so tokens issued on the Global work in every zone, and it
//!   cannot mint any.
//!
//! Every change publishes a new bundle on a watch ([`Trust::subscribe`]): open ADS streams
//! re-check their token on their next request, and the Global's KDS offer carries it to the
//! zones within a moment.
//!
//! Several authorities may share one store (replicas of the Global on one PostgreSQL): every
//! change to a stored key is a compare-and-swap ([`umbra_store::update_key`]), so none is lost
//! (revocation lists are unions; a key or the admin token is created only where there is none,
//! and the replica that loses that race adopts the winner's), and each authority re-reads the
//! revocation lists at least every [`STORE_POLL`] ([`Trust::follow_meshes`]), so a token revoked
//! through one replica is refused by every other within seconds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use umbra_auth::issuer::{DataplaneTokenRequest, UserTokenRequest};
use umbra_auth::keys::{dataplane_token_key, SigningKey, USER_TOKEN_KEY};
use umbra_auth::token::{TokenKind, ADMIN_GROUP, ADMIN_USER};
use umbra_auth::{Issuer, TokenError, TrustBundle};
use umbra_core::resource::ResourceType;
use umbra_store::{list_all, update_key, Store, StoreError};

/// Why the trust state refused or failed a request (the API answers each with its status:
/// [`TrustError::Federated`], [`TrustError::BadRequest`] and a bad token request 400,
/// [`TrustError::UnknownMesh`] 404 naming `mesh`, another token error 401, a store failure as
/// the store's error).
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A federated zone verifies tokens; the Global issues and revokes them.
    #[error("this zone is federated: tokens are issued and revoked on the Global CP")]
    Federated,
    /// A request field is malformed (`validFor`).
    #[error("{field}: {reason}")]
    BadRequest {
        /// The request's field (JSON name).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A dataplane token was asked for a Mesh that does not exist.
    #[error("mesh {0:?} does not exist")]
    UnknownMesh(String),
    /// The issuer refused the request or could not sign.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The store failed; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Store key of the admin user token (Kuma's `admin-user-token` global secret).
pub const ADMIN_TOKEN_KEY: &str = "admin-user-token";

/// Store key of a federated zone's copy of the Global's bundle (JSON).
pub const BUNDLE_KEY: &str = "trust-bundle";

/// Validity of a token when the request names none (1 year).
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Validity of the admin user token created on first start (10 years, as Kuma's).
pub const ADMIN_TOKEN_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Longest pause between two looks at the store's Meshes and revocation lists when no change
/// woke the authority: how soon a revocation made by another replica of the Global sharing the
/// store is refused here too.
pub const STORE_POLL: Duration = Duration::from_secs(2);

/// The token kinds with a revocation list.
const REVOCABLE: [TokenKind; 3] = [
    TokenKind::User,
    TokenKind::Dataplane,
    TokenKind::ZoneIngress,
];

/// Store key of the revoked IDs of `kind` (one per line).
pub fn revocations_key(kind: TokenKind) -> String {
    format!("{}-token-revocations", kind.as_str())
}

/// Who may do what without a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Callers from a loopback address without a token act as the admin (Kuma's
    /// `localhostIsAdmin`, default `true`).
    pub localhost_is_admin: bool,
    /// `/metrics` needs a token too (default `false`: scrapers reach it without one).
    pub metrics_need_token: bool,
    /// `GET /global-secrets/admin-user-token` is served to local callers without a token
    /// (Kuma's bootstrap of the first admin; default `true`). With `false` it needs the admin,
    /// like any secret: for a CP behind a proxy on its own host, where every caller is local.
    pub admin_token_from_loopback: bool,
}

impl Default for AccessPolicy {
    fn default() -> Self {
        Self {
            localhost_is_admin: true,
            metrics_need_token: false,
            admin_token_from_loopback: true,
        }
    }
}

/// The trust state of one CP. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Trust {
    bundle: watch::Sender<Arc<TrustBundle>>,
    authority: Option<Authority>,
    /// Who may do what without a token.
    pub policy: AccessPolicy,
}

/// The private side of an issuing CP.
#[derive(Debug)]
pub struct Authority {
    store: Arc<dyn Store>,
    /// The keys and revocations as last read or written (the store has the truth: every change
    /// to it is a compare-and-swap); Mesh syncs hold it while they read the Meshes.
    issuer: tokio::sync::Mutex<Issuer>,
}

/// The IDs of a stored revocation list (one a line, trimmed; blank lines skipped): the form
/// every revocation list of the store takes (user, dataplane and zone-ingress tokens here,
/// zone tokens on the Global).
pub fn parse_lines(bytes: &[u8]) -> BTreeSet<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One ID a line, sorted: a revocation list as stored ([`parse_lines`] reads it back).
pub fn join_lines(ids: &BTreeSet<String>) -> Vec<u8> {
    ids.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

/// The key stored under `purpose`, created now when there is none or it was dropped (an empty
/// value); when another CP sharing the store creates it first, its key is the one returned.
async fn ensure_key(store: &dyn Store, purpose: &str) -> Result<SigningKey, StoreError> {
    let fresh = SigningKey::generate();
    let kept = update_key(store, purpose, |stored| {
        Ok::<_, StoreError>(match stored {
            Some(bytes) if !bytes.is_empty() => None,
            _ => Some(fresh.pkcs8().to_vec()),
        })
    })
    .await?;
    SigningKey::from_pkcs8(&kept.value.unwrap_or_default())
        .map_err(|e| StoreError::Unavailable(format!("signing key {purpose}: {e}")))
}

impl Trust {
    /// The trust state of an issuing CP over `store`: keys, revocations and the admin token
    /// loaded, or created on first start.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written.
    pub async fn authority(
        store: Arc<dyn Store>,
        policy: AccessPolicy,
    ) -> Result<Arc<Self>, StoreError> {
        let user = ensure_key(&*store, USER_TOKEN_KEY).await?;
        let mut revoked = umbra_auth::bundle::Revoked::default();
        for kind in REVOCABLE {
            let bytes = store
                .signing_key(&revocations_key(kind), Vec::new())
                .await?;
            *revoked.of_mut(kind) = parse_lines(&bytes);
        }
        let issuer = Issuer {
            user,
            dataplane: Default::default(),
            revoked,
        };
        let trust = Arc::new(Self {
            bundle: watch::channel(Arc::new(issuer.bundle())).0,
            authority: Some(Authority {
                store: store.clone(),
                issuer: tokio::sync::Mutex::new(issuer),
            }),
            policy,
        });
        trust.sync_meshes().await?;
        if let Some(auth) = &trust.authority {
            auth.admin_token().await?;
        }
        Ok(trust)
    }

    /// The trust state of a verifying CP (a federated zone), starting from `bundle` (what it
    /// kept from the Global, or empty: then no token verifies until the Global's arrives).
    pub fn verifier(bundle: TrustBundle, policy: AccessPolicy) -> Arc<Self> {
        Arc::new(Self {
            bundle: watch::channel(Arc::new(bundle)).0,
            authority: None,
            policy,
        })
    }

    /// The current bundle.
    pub fn bundle(&self) -> Arc<TrustBundle> {
        self.bundle.borrow().clone()
    }

    /// The bundle now and on every change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<TrustBundle>> {
        self.bundle.subscribe()
    }

    /// `true` on the CP that issues tokens.
    pub fn is_authority(&self) -> bool {
        self.authority.is_some()
    }

    /// Replace the bundle (a federated zone, with the Global's). `false` when unchanged.
    pub fn replace(&self, bundle: TrustBundle) -> bool {
        self.bundle.send_if_modified(|b| {
            if **b == bundle {
                return false;
            }
            *b = Arc::new(bundle);
            true
        })
    }

    fn authority_or_refuse(&self) -> Result<&Authority, TrustError> {
        self.authority.as_ref().ok_or(TrustError::Federated)
    }

    async fn publish(&self, issuer: &Issuer) {
        let bundle = issuer.bundle();
        self.bundle.send_if_modified(|b| {
            if **b == bundle {
                return false;
            }
            *b = Arc::new(bundle);
            true
        });
    }

    /// Bring the dataplane-token keys in line with the store's Meshes: a key for every Mesh
    /// (created when missing), none for a Mesh that is gone (its key is dropped, so its tokens
    /// stop verifying). Nothing on a verifier.
    ///
    /// # Errors
    /// [`StoreError`]; the keys are unchanged then.
    pub async fn sync_meshes(&self) -> Result<(), StoreError> {
        let Some(auth) = &self.authority else {
            return Ok(());
        };
        // The Meshes are read under the lock: a sync that read them earlier must not drop the
        // key another sync (or an issuance) just made for a new Mesh.
        let mut issuer = auth.issuer.lock().await;
        let meshes: BTreeSet<String> =
            list_all(&*auth.store, ResourceType::Mesh, None, &Default::default())
                .await?
                .into_iter()
                .map(|s| s.resource.meta.name)
                .collect();
        let gone: Vec<String> = issuer
            .dataplane
            .keys()
            .filter(|m| !meshes.contains(*m))
            .cloned()
            .collect();
        for mesh in gone {
            let held = issuer
                .dataplane
                .get(&mesh)
                .map(|k| k.pkcs8().to_vec())
                .unwrap_or_default();
            // Only the key this CP holds is dropped: another CP sharing the store may already
            // have made a new one for a Mesh re-created under the same name.
            let dropped = update_key(&*auth.store, &dataplane_token_key(&mesh), |stored| {
                Ok::<_, StoreError>((stored == Some(held.as_slice())).then(Vec::new))
            })
            .await?;
            issuer.dataplane.remove(&mesh);
            if dropped.written {
                tracing::info!(%mesh, "Mesh gone: its dataplane-token signing key is dropped");
            }
        }
        for mesh in meshes {
            if let std::collections::btree_map::Entry::Vacant(slot) = issuer.dataplane.entry(mesh) {
                let key = ensure_key(&*auth.store, &dataplane_token_key(slot.key())).await?;
                slot.insert(key);
            }
        }
        self.publish(&issuer).await;
        Ok(())
    }

    /// Add the revocations the store holds that this CP does not know yet (made through
    /// another CP sharing the store), and publish them. Returns whether there were any.
    /// Nothing on a verifier.
    ///
    /// # Errors
    /// [`StoreError`]; nothing changed then.
    pub async fn refresh_revocations(&self) -> Result<bool, StoreError> {
        let Some(auth) = &self.authority else {
            return Ok(false);
        };
        let mut stored = Vec::new();
        for kind in REVOCABLE {
            if let Some(bytes) = auth.store.get_key(&revocations_key(kind)).await? {
                stored.push((kind, parse_lines(&bytes)));
            }
        }
        let mut issuer = auth.issuer.lock().await;
        let mut added = false;
        for (kind, ids) in stored {
            let known = issuer.revoked.of_mut(kind);
            for id in ids {
                added |= known.insert(id);
            }
        }
        if added {
            self.publish(&issuer).await;
        }
        Ok(added)
    }

    /// Keep the dataplane-token keys in line with the Meshes ([`Trust::sync_meshes`]) and the
    /// revocations with the store's lists ([`Trust::refresh_revocations`]) on every store
    /// change, and at least every [`STORE_POLL`], until `shutdown` turns `true`.
    pub async fn follow_meshes(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let Some(auth) = &self.authority else {
            return;
        };
        let mut wake = auth.store.subscribe();
        while !*shutdown.borrow() {
            if let Err(e) = self.refresh_revocations().await {
                tracing::warn!(error = %e, "cannot read the revocation lists; retrying");
            }
            if let Err(e) = self.sync_meshes().await {
                tracing::warn!(error = %e, "cannot bring dataplane-token keys in line with the Meshes; retrying");
            }
            tokio::select! {
                _ = wake.changed() => {}
                () = tokio::time::sleep(STORE_POLL) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// The admin user token (Kuma's `admin-user-token`), created on first call.
    ///
    /// # Errors
    /// [`TrustError::Federated`] on a verifier; [`TrustError::Store`].
    pub async fn admin_token(&self) -> Result<String, TrustError> {
        Ok(self.authority_or_refuse()?.admin_token().await?)
    }

    /// A user token for `req`.
    ///
    /// # Errors
    /// [`TrustError::BadRequest`] or [`TrustError::Token`] for a bad request;
    /// [`TrustError::Federated`] on a verifier.
    pub async fn issue_user(&self, req: &UserTokenRequest) -> Result<String, TrustError> {
        let auth = self.authority_or_refuse()?;
        let valid = validity(req.valid_for.as_deref())?;
        let issuer = auth.issuer.lock().await;
        issuer
            .issue_user(req, valid, umbra_auth::unix_now())
            .map_err(TrustError::Token)
    }

    /// A dataplane token for `req` (its mesh's key is created now if the Mesh exists and has
    /// none yet).
    ///
    /// # Errors
    /// As [`Trust::issue_user`]; [`TrustError::UnknownMesh`] for a Mesh that does not exist
    /// (Kuma answers 404 when the mesh has no signing key); [`TrustError::Store`].
    pub async fn issue_dataplane(&self, req: &DataplaneTokenRequest) -> Result<String, TrustError> {
        let auth = self.authority_or_refuse()?;
        let valid = validity(req.valid_for.as_deref())?;
        let has_key = auth.issuer.lock().await.dataplane.contains_key(&req.mesh);
        if !has_key && !req.mesh.is_empty() {
            self.sync_meshes().await?;
        }
        let issuer = auth.issuer.lock().await;
        if !req.mesh.is_empty() && !issuer.dataplane.contains_key(&req.mesh) {
            return Err(TrustError::UnknownMesh(req.mesh.clone()));
        }
        issuer
            .issue_dataplane(req, valid, umbra_auth::unix_now())
            .map_err(TrustError::Token)
    }

    /// A zone-ingress token for the zone proxies of `req.zone` in `req.scope` (ingresses when
    /// absent; Kuma's `POST /tokens/zone-ingress`, with the zone token's `scope`).
    ///
    /// # Errors
    /// As [`Trust::issue_user`], for a bad zone or validity.
    pub async fn issue_zone_ingress(
        &self,
        req: &ZoneIngressTokenRequest,
    ) -> Result<String, TrustError> {
        let auth = self.authority_or_refuse()?;
        let valid = validity(req.valid_for.as_deref())?;
        let issuer = auth.issuer.lock().await;
        let scope = req
            .scope
            .clone()
            .unwrap_or_else(umbra_auth::token::ingress_only);
        issuer
            .issue_zone_proxy(&req.zone, &scope, valid, umbra_auth::unix_now())
            .map_err(TrustError::Token)
    }

    /// Revoke the token of `kind` with ID `id`: added to the stored list (a compare-and-swap,
    /// keeping what other CPs sharing the store added) durably before this returns, then
    /// published with every other ID the list holds (every CP and zone refuses it within a
    /// moment).
    ///
    /// # Errors
    /// [`TrustError::Federated`] on a verifier; [`TrustError::Store`] (nothing revoked then).
    pub async fn revoke(&self, kind: TokenKind, id: &str) -> Result<(), TrustError> {
        let auth = self.authority_or_refuse()?;
        if auth.issuer.lock().await.revoked.of(kind).contains(id) {
            return Ok(());
        }
        let list = update_key(&*auth.store, &revocations_key(kind), |stored| {
            let mut all = parse_lines(stored.unwrap_or_default());
            Ok::<_, StoreError>(all.insert(id.to_owned()).then(|| join_lines(&all)))
        })
        .await?;
        let mut issuer = auth.issuer.lock().await;
        let known = issuer.revoked.of_mut(kind);
        known.extend(parse_lines(&list.value.unwrap_or_default()));
        known.insert(id.to_owned());
        self.publish(&issuer).await;
        Ok(())
    }
}

impl Authority {
    /// The admin user token, created (and stored) on first call, and again when the stored one
    /// no longer verifies (revoked, expired). Of CPs sharing the store that replace it at once,
    /// one stores its token and the others return that one.
    async fn admin_token(&self) -> Result<String, StoreError> {
        let now = umbra_auth::unix_now();
        let (fresh, bundle) = {
            let issuer = self.issuer.lock().await;
            let fresh = issuer
                .issue_user(
                    &UserTokenRequest {
                        name: ADMIN_USER.into(),
                        groups: vec![ADMIN_GROUP.into()],
                        valid_for: None,
                    },
                    ADMIN_TOKEN_VALIDITY.as_secs(),
                    now,
                )
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            (fresh, issuer.bundle())
        };
        // No token (or an emptied key), or one that was revoked, expired or signed by another
        // key, is no admin token: make a new one.
        let kept = update_key(&*self.store, ADMIN_TOKEN_KEY, |stored| {
            let valid = stored.is_some_and(|bytes| {
                bundle
                    .verify_user(&String::from_utf8_lossy(bytes), now)
                    .is_ok()
            });
            Ok::<_, StoreError>((!valid).then(|| fresh.clone().into_bytes()))
        })
        .await?;
        Ok(String::from_utf8_lossy(&kept.value.unwrap_or_default()).into_owned())
    }
}

/// What a zone-ingress token is asked for (`POST /tokens/zone-ingress`, Kuma's shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneIngressTokenRequest {
    /// The zone (required).
    #[serde(default)]
    pub zone: String,
    /// Which zone proxies the token admits (Kuma's zone-token `scope`: `ingress`, `egress`);
    /// `["ingress"]` when absent, as the token was before scopes.
    #[serde(default)]
    pub scope: Option<Vec<String>>,
    /// Validity, a Kuma duration (`24h`).
    #[serde(default)]
    pub valid_for: Option<String>,
}

/// A request's `validFor` in seconds ([`DEFAULT_VALIDITY`] when absent).
fn validity(valid_for: Option<&str>) -> Result<u64, TrustError> {
    let Some(text) = valid_for else {
        return Ok(DEFAULT_VALIDITY.as_secs());
    };
    let d = umbra_core::duration::Duration::parse(text).map_err(|e| TrustError::BadRequest {
        field: "validFor",
        reason: e.to_string(),
    })?;
    if d.is_negative() || d.is_zero() {
        return Err(TrustError::BadRequest {
            field: "validFor",
            reason: "must be positive".into(),
        });
    }
    Ok((d.as_nanos().unsigned_abs() / 1_000_000_000).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;
    use umbra_store::memory::MemoryStore;

    fn mesh(name: &str) -> Resource {
        Resource::from_bytes(format!("type: Mesh\nname: {name}\n").as_bytes()).unwrap()
    }

    #[tokio::test]
    async fn the_authority_keeps_its_keys_and_follows_the_meshes() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store.put(mesh("default"), None, None).await.unwrap();
        let trust = Trust::authority(store.clone(), AccessPolicy::default())
            .await
            .unwrap();
        let admin = trust.admin_token().await.unwrap();
        assert_eq!(trust.admin_token().await.unwrap(), admin, "created once");
        let p = trust
            .bundle()
            .verify_user(&admin, umbra_auth::unix_now())
            .unwrap();
        assert!(p.is_admin());
        // A restart over the same store verifies the same tokens.
        let again = Trust::authority(store.clone(), AccessPolicy::default())
            .await
            .unwrap();
        assert!(again
            .bundle()
            .verify_user(&admin, umbra_auth::unix_now())
            .is_ok());
        let req = DataplaneTokenRequest {
            mesh: "default".into(),
            name: "web-1".into(),
            ..Default::default()
        };
        let dp = trust.issue_dataplane(&req).await.unwrap();
        assert!(again
            .bundle()
            .verify_dataplane(&dp, umbra_auth::unix_now())
            .is_ok());
        // A Mesh that does not exist has no key: refused naming it (the API answers 404, as
        // Kuma's "Signing Key not found").
        let err = trust
            .issue_dataplane(&DataplaneTokenRequest {
                mesh: "nope".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&err, TrustError::UnknownMesh(m) if m == "nope"),
            "{err:?}"
        );
        // A new Mesh gets a key on issuance; a deleted one loses it.
        store.put(mesh("second"), None, None).await.unwrap();
        let t2 = trust
            .issue_dataplane(&DataplaneTokenRequest {
                mesh: "second".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(trust
            .bundle()
            .verify_dataplane(&t2, umbra_auth::unix_now())
            .is_ok());
        store
            .delete(&umbra_store::mesh_key("second"), None)
            .await
            .unwrap();
        trust.sync_meshes().await.unwrap();
        assert!(trust
            .bundle()
            .verify_dataplane(&t2, umbra_auth::unix_now())
            .is_err());
        // Recreated, it gets a new key: the old token stays dead.
        store.put(mesh("second"), None, None).await.unwrap();
        trust.sync_meshes().await.unwrap();
        assert!(trust
            .bundle()
            .verify_dataplane(&t2, umbra_auth::unix_now())
            .is_err());
    }

    /// Two authorities on one store (replicas of the Global): one set of keys and one admin
    /// token, no revocation lost, each other's revocations picked up on refresh, and a gone
    /// Mesh's key dropped only if it is still the one held.
    #[tokio::test]
    async fn authorities_sharing_a_store_keep_each_others_changes() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store.put(mesh("default"), None, None).await.unwrap();
        let policy = AccessPolicy::default();
        let (a, b) = tokio::join!(
            Trust::authority(store.clone(), policy),
            Trust::authority(store.clone(), policy)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let admin = a.admin_token().await.unwrap();
        assert_eq!(b.admin_token().await.unwrap(), admin, "one admin token");
        let now = umbra_auth::unix_now();
        let user = |t: &Arc<Trust>, name: &str| {
            let t = t.clone();
            let name = name.to_owned();
            async move {
                t.issue_user(&UserTokenRequest {
                    name,
                    ..Default::default()
                })
                .await
                .unwrap()
            }
        };
        let (alice, bob) = (user(&a, "alice").await, user(&b, "bob").await);
        assert!(b.bundle().verify_user(&alice, now).is_ok(), "one user key");
        let id = |t: &str| {
            umbra_auth::token::token_id(t, TokenKind::User, &a.bundle().user_keys).unwrap()
        };
        let (alice_id, bob_id) = (id(&alice), id(&bob));
        let (ra, rb) = tokio::join!(
            a.revoke(TokenKind::User, &alice_id),
            b.revoke(TokenKind::User, &bob_id)
        );
        ra.unwrap();
        rb.unwrap();
        let stored = store
            .get_key(&revocations_key(TokenKind::User))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            parse_lines(&stored),
            BTreeSet::from([alice_id, bob_id]),
            "both revocations are stored"
        );
        a.refresh_revocations().await.unwrap();
        b.refresh_revocations().await.unwrap();
        for t in [&a, &b] {
            assert!(t.bundle().verify_user(&alice, now).is_err());
            assert!(t.bundle().verify_user(&bob, now).is_err());
        }
        // A revocation through A reaches B on its next refresh, which publishes it.
        let carol = user(&a, "carol").await;
        a.revoke(TokenKind::User, &id(&carol)).await.unwrap();
        assert!(b.bundle().verify_user(&carol, now).is_ok(), "not read yet");
        let mut rx = b.subscribe();
        rx.borrow_and_update();
        assert!(b.refresh_revocations().await.unwrap());
        assert!(rx.has_changed().unwrap(), "published");
        assert!(b.bundle().verify_user(&carol, now).is_err());
        assert!(!b.refresh_revocations().await.unwrap(), "nothing new");

        // The Mesh goes and comes back while A is not looking: B drops its key and makes a new
        // one; when the Mesh is gone again, A (holding the first key) leaves B's key alone.
        let key = dataplane_token_key("default");
        let first = store.get_key(&key).await.unwrap().unwrap();
        store
            .delete(&umbra_store::mesh_key("default"), None)
            .await
            .unwrap();
        b.sync_meshes().await.unwrap();
        assert_eq!(store.get_key(&key).await.unwrap(), Some(Vec::new()));
        store.put(mesh("default"), None, None).await.unwrap();
        b.sync_meshes().await.unwrap();
        let second = store.get_key(&key).await.unwrap().unwrap();
        assert!(!second.is_empty() && second != first);
        store
            .delete(&umbra_store::mesh_key("default"), None)
            .await
            .unwrap();
        a.sync_meshes().await.unwrap();
        assert_eq!(store.get_key(&key).await.unwrap(), Some(second.clone()));
        // Back again: A adopts the stored key, so B's tokens verify on A.
        store.put(mesh("default"), None, None).await.unwrap();
        a.sync_meshes().await.unwrap();
        b.sync_meshes().await.unwrap();
        let dp = b
            .issue_dataplane(&DataplaneTokenRequest {
                mesh: "default".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(a.bundle().verify_dataplane(&dp, now).is_ok());
    }

    #[tokio::test]
    async fn revocations_are_durable_and_published() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let trust = Trust::authority(store.clone(), AccessPolicy::default())
            .await
            .unwrap();
        let t = trust
            .issue_user(&UserTokenRequest {
                name: "alice".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut rx = trust.subscribe();
        rx.borrow_and_update();
        let id =
            umbra_auth::token::token_id(&t, TokenKind::User, &trust.bundle().user_keys).unwrap();
        trust.revoke(TokenKind::User, &id).await.unwrap();
        assert!(
            rx.has_changed().unwrap(),
            "a revocation publishes a new bundle"
        );
        assert!(trust
            .bundle()
            .verify_user(&t, umbra_auth::unix_now())
            .is_err());
        let again = Trust::authority(store, AccessPolicy::default())
            .await
            .unwrap();
        assert!(again
            .bundle()
            .verify_user(&t, umbra_auth::unix_now())
            .is_err());
        // A verifier cannot issue or revoke.
        let v = Trust::verifier(trust.bundle().as_ref().clone(), AccessPolicy::default());
        assert!(v.issue_user(&UserTokenRequest::default()).await.is_err());
        assert!(v.revoke(TokenKind::User, "ab").await.is_err());
        assert!(v.bundle().verify_user(&t, umbra_auth::unix_now()).is_err());
    }
}
