//! Who may open an ADS stream for which DPP (issue 15; Kuma 2.7's `pkg/xds/auth` with
//! `dpServer.authn.dpProxy.type: dpToken`).
//!
//! Envoy sends its dataplane token as gRPC initial metadata `authorization` (what kuma-dp's
//! bootstrap configures; a `Bearer ` prefix is accepted too). A stream is served only when the
//! token verifies with the zone's [`Trust`] bundle (the Global's keys in a federated zone) and
//! binds the DPP the node id names: same mesh, same name when the token has one, and when it
//! has tags, the DPP's tags (from its `dataplane.resource` node metadata, else the stored
//! Dataplane) carry only values the token allows. Anything else ends the stream with
//! `Unauthenticated` (no or bad token) or `PermissionDenied` (a token for another DPP) before
//! a single resource, so a DPP's configuration and its SDS secrets go only to a stream
//! authenticated as that DPP.
//!
//! A ZoneIngress (node id `<name>`, node metadata `dataplane.proxyType: ingress`; its key has an
//! empty mesh) authenticates with a zone-ingress token for this zone instead (issue 18; Kuma's
//! `zone-ingress` token), with scope `ingress`; a ZoneEgress (node id `<name>`, `proxyType:
//! egress`; its key is [`DpKey::zone_egress`]) with the same kind of token with scope `egress`
//! (Kuma 2.7's `authZoneEntity` with `zone.EgressScope`).
//!
//! The token is checked again on every request of the stream and whenever the bundle changes
//! (a revocation), and the stream ends when the token expires.
//!
//! `--dp-auth none` turns this off for development; the zone logs a warning at start and on
//! every stream.

use std::sync::Arc;

use tonic::Status;
use umbra_auth::{DataplaneIdentity, ZoneIngressIdentity};
use umbra_core::dataplane::{DataplaneSpec, DpKey};
use umbra_pki::trust::Trust;

/// Metadata key carrying the dataplane token (kuma-dp's).
pub const AUTHORIZATION: &str = "authorization";

/// How DPPs authenticate on ADS (`--dp-auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DpAuth {
    /// A dataplane token on every stream (Kuma's `dpToken`, the default).
    #[default]
    #[value(name = "dpToken")]
    DpToken,
    /// No authentication: any client may ask for any DPP's configuration (development only).
    #[value(name = "none")]
    None,
}

/// The checks of one zone.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The mode.
    pub mode: DpAuth,
    /// Keys and revocations.
    pub trust: Arc<Trust>,
    /// This zone's name (what a zone-ingress token must name).
    pub zone: String,
}

/// Who a valid token says an ADS stream is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyIdentity {
    /// A DPP, by its dataplane token.
    Dataplane(DataplaneIdentity),
    /// A ZoneIngress or a ZoneEgress, by its zone-ingress token (scope `ingress` or `egress`).
    ZoneIngress(ZoneIngressIdentity),
}

impl ProxyIdentity {
    /// The token's `exp` (seconds since the Unix epoch).
    pub fn expires_at(&self) -> u64 {
        match self {
            Self::Dataplane(d) => d.claims.exp,
            Self::ZoneIngress(z) => z.claims.exp,
        }
    }

    /// The dataplane token's identity, for a DPP.
    pub fn dataplane(&self) -> Option<&DataplaneIdentity> {
        match self {
            Self::Dataplane(d) => Some(d),
            Self::ZoneIngress(_) => None,
        }
    }
}

/// The token in a stream's metadata, `Bearer ` prefix removed.
pub fn credential(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    let v = metadata.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let token = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .unwrap_or(v)
        .trim();
    (!token.is_empty()).then(|| token.to_owned())
}

impl Gate {
    /// A gate that lets everything through (tests of other layers).
    pub fn open() -> Self {
        Self {
            mode: DpAuth::None,
            trust: Trust::verifier(Default::default(), Default::default()),
            zone: String::new(),
        }
    }

    /// Check that `token` may serve the ZoneIngress (`egress` false) or ZoneEgress `name` of
    /// this zone: a zone-ingress token of this zone with scope `ingress` or `egress`.
    fn check_zone_proxy(
        &self,
        token: &str,
        name: &str,
        egress: bool,
    ) -> Result<ProxyIdentity, Status> {
        let (what, scope) = zone_proxy(egress);
        let id = self
            .trust
            .bundle()
            .verify_zone_ingress(token, umbra_auth::unix_now())
            .map_err(|e| Status::unauthenticated(format!("{what} {name}: {e}")))?;
        id.authorizes_scope(&self.zone, scope).map_err(|why| {
            Status::permission_denied(format!("{what} {name}: the token does not allow it: {why}"))
        })?;
        Ok(ProxyIdentity::ZoneIngress(id))
    }

    /// Check that `token` may serve `key`, whose Dataplane is `dp` when known (a key with an
    /// empty mesh is a ZoneIngress of this zone). `Ok(None)` with `--dp-auth none`; otherwise
    /// the identity (for its expiry).
    ///
    /// # Errors
    /// `Unauthenticated` for a missing, malformed, forged, expired or revoked token;
    /// `PermissionDenied` for a token bound to another DPP, mesh, type, tags or zone.
    pub fn check(
        &self,
        token: Option<&str>,
        key: &DpKey,
        dp: Option<&DataplaneSpec>,
    ) -> Result<Option<ProxyIdentity>, Status> {
        if self.mode == DpAuth::None {
            return Ok(None);
        }
        if key.is_zone_ingress() || key.is_zone_egress() {
            let egress = key.is_zone_egress();
            let token = token.ok_or_else(|| {
                Status::unauthenticated(format!(
                    "{} {}: no zone-ingress token (gRPC metadata `authorization`; `POST /tokens/zone-ingress` with scope {:?})",
                    zone_proxy(egress).0,
                    key.name,
                    zone_proxy(egress).1
                ))
            })?;
            return self.check_zone_proxy(token, &key.name, egress).map(Some);
        }
        let token = token.ok_or_else(|| {
            Status::unauthenticated(format!(
                "dataplane {}/{}: no dataplane token (kuma-dp sends it as `dataplaneToken` in its bootstrap request, Envoy as gRPC metadata `authorization`; `umbractl generate dataplane-token`)",
                key.mesh, key.name
            ))
        })?;
        let id = self
            .trust
            .bundle()
            .verify_dataplane(token, umbra_auth::unix_now())
            .map_err(|e| {
                Status::unauthenticated(format!("dataplane {}/{}: {e}", key.mesh, key.name))
            })?;
        let tags = dp.map(DataplaneSpec::tag_set);
        id.authorizes(&key.mesh, &key.name, "dataplane", tags.as_ref())
            .map_err(|why| {
                Status::permission_denied(format!(
                    "dataplane {}/{}: the token does not allow it: {why}",
                    key.mesh, key.name
                ))
            })?;
        Ok(Some(ProxyIdentity::Dataplane(id)))
    }

    /// Check again an open stream's token (expiry, revocation). `Ok` with `--dp-auth none`.
    ///
    /// # Errors
    /// `Unauthenticated` with the reason.
    pub fn recheck(&self, token: Option<&str>, key: &DpKey) -> Result<(), Status> {
        self.recheck_since(token, key, &mut None)
    }

    /// [`Gate::recheck`], skipped when the bundle is the one `checked` last verified the token
    /// with (bundles are replaced, never changed, so the same `Arc` means no revocation or key
    /// change since; expiry ends the stream on its own timer). Every ADS request calls this,
    /// so an unchanged bundle costs a pointer comparison instead of a signature check.
    ///
    /// # Errors
    /// `Unauthenticated` with the reason.
    pub fn recheck_since(
        &self,
        token: Option<&str>,
        key: &DpKey,
        checked: &mut Option<Arc<umbra_auth::TrustBundle>>,
    ) -> Result<(), Status> {
        if self.mode == DpAuth::None {
            return Ok(());
        }
        let bundle = self.trust.bundle();
        if checked.as_ref().is_some_and(|c| Arc::ptr_eq(c, &bundle)) {
            return Ok(());
        }
        if key.is_zone_ingress() || key.is_zone_egress() {
            let what = zone_proxy(key.is_zone_egress()).0;
            bundle
                .verify_zone_ingress(token.unwrap_or_default(), umbra_auth::unix_now())
                .map_err(|e| Status::unauthenticated(format!("{what} {}: {e}", key.name)))?;
            *checked = Some(bundle);
            return Ok(());
        }
        bundle
            .verify_dataplane(token.unwrap_or_default(), umbra_auth::unix_now())
            .map_err(|e| {
                Status::unauthenticated(format!("dataplane {}/{}: {e}", key.mesh, key.name))
            })?;
        *checked = Some(bundle);
        Ok(())
    }
}

/// How a zone proxy is named in refusals, and the token scope it needs.
fn zone_proxy(egress: bool) -> (&'static str, &'static str) {
    if egress {
        ("zone egress", umbra_auth::token::EGRESS_SCOPE)
    } else {
        ("zone ingress", umbra_auth::token::INGRESS_SCOPE)
    }
}

/// For a token bound to tags: the DPP (`spec`, as stored now; `None` when gone) still carries
/// only values the token allows; its tags can change through the API while a stream is open.
/// `Ok` for tokens without tags and without authentication.
///
/// # Errors
/// `PermissionDenied` with the reason.
pub fn still_allowed(
    identity: Option<&DataplaneIdentity>,
    key: &DpKey,
    spec: Option<&DataplaneSpec>,
) -> Result<(), Status> {
    let Some(id) = identity.filter(|i| !i.claims.tags.is_empty()) else {
        return Ok(());
    };
    let tags = spec.map(DataplaneSpec::tag_set);
    id.authorizes(&key.mesh, &key.name, "dataplane", tags.as_ref())
        .map_err(|why| {
            Status::permission_denied(format!(
                "dataplane {}/{}: the token no longer allows it: {why}",
                key.mesh, key.name
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_auth::issuer::DataplaneTokenRequest;
    use umbra_core::resource::Resource;

    fn dp(tags: &str) -> DataplaneSpec {
        let r = Resource::from_bytes(
            format!("type: Dataplane\nmesh: default\nname: web-1\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {tags}\n").as_bytes(),
        )
        .unwrap();
        r.as_dataplane().unwrap().clone()
    }

    #[tokio::test]
    async fn tokens_bind_streams_to_their_dpp() {
        let store: Arc<dyn umbra_store::Store> = Arc::new(umbra_store::memory::MemoryStore::new());
        store
            .put(
                Resource::from_bytes(b"type: Mesh\nname: default\n").unwrap(),
                None,
                None,
            )
            .await
            .unwrap();
        let trust = Trust::authority(store, Default::default()).await.unwrap();
        let gate = Gate {
            mode: DpAuth::DpToken,
            trust: trust.clone(),
            zone: "zone-1".into(),
        };
        let key = DpKey::new("default", "web-1");
        let issue = |name: &str, tags: &[(&str, &str)]| {
            let trust = trust.clone();
            let req = DataplaneTokenRequest {
                mesh: "default".into(),
                name: name.into(),
                tags: tags
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), [(*v).to_owned()].into()))
                    .collect(),
                ..Default::default()
            };
            async move { trust.issue_dataplane(&req).await.unwrap() }
        };
        let own = issue("web-1", &[]).await;
        let other = issue("web-2", &[]).await;
        assert!(gate.check(Some(&own), &key, None).is_ok());
        assert_eq!(
            gate.check(None, &key, None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            gate.check(Some("forged.token.here"), &key, None)
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        let denied = gate.check(Some(&other), &key, None).unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(!denied.message().contains(&other), "never echo a token");
        // Tag-bound tokens check the DPP's tags.
        let web = issue("", &[("kuma.io/service", "web")]).await;
        let spec = dp("{kuma.io/service: web}");
        assert!(gate.check(Some(&web), &key, Some(&spec)).is_ok());
        let spec = dp("{kuma.io/service: db}");
        assert_eq!(
            gate.check(Some(&web), &key, Some(&spec))
                .unwrap_err()
                .code(),
            tonic::Code::PermissionDenied
        );
        // A stream's check is cached per bundle: the same bundle is not verified again.
        let mut checked = None;
        gate.recheck_since(Some(&own), &key, &mut checked).unwrap();
        let first = checked.clone().unwrap();
        gate.recheck_since(Some(&own), &key, &mut checked).unwrap();
        assert!(Arc::ptr_eq(&first, checked.as_ref().unwrap()));
        // Revoked: refused on the next check.
        let id = umbra_auth::token::token_id(
            &own,
            umbra_auth::TokenKind::Dataplane,
            trust
                .bundle()
                .keys(umbra_auth::TokenKind::Dataplane, "default"),
        )
        .unwrap();
        trust
            .revoke(umbra_auth::TokenKind::Dataplane, &id)
            .await
            .unwrap();
        assert_eq!(
            gate.recheck(Some(&own), &key).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        // The revocation replaced the bundle, so the cached stream check runs again and fails.
        assert_eq!(
            gate.recheck_since(Some(&own), &key, &mut checked)
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        // `none` lets anything through.
        assert!(Gate::open().check(None, &key, None).unwrap().is_none());
        // A ZoneIngress needs a zone-ingress token for this zone.
        let ingress = DpKey::new("", "zi-1");
        let zi_token = |zone: &str| {
            let trust = trust.clone();
            let req = umbra_pki::trust::ZoneIngressTokenRequest {
                zone: zone.into(),
                scope: None,
                valid_for: None,
            };
            async move { trust.issue_zone_ingress(&req).await.unwrap() }
        };
        let ours = zi_token("zone-1").await;
        assert!(matches!(
            gate.check(Some(&ours), &ingress, None),
            Ok(Some(ProxyIdentity::ZoneIngress(_)))
        ));
        assert_eq!(
            gate.check(Some(&zi_token("zone-2").await), &ingress, None)
                .unwrap_err()
                .code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            gate.check(Some(&web), &ingress, None).unwrap_err().code(),
            tonic::Code::Unauthenticated,
            "a dataplane token is no zone-ingress token"
        );
        assert_eq!(
            gate.check(Some(&ours), &key, None).unwrap_err().code(),
            tonic::Code::Unauthenticated,
            "nor the other way round"
        );
        let mut checked = None;
        gate.recheck_since(Some(&ours), &ingress, &mut checked)
            .unwrap();
        // A ZoneEgress needs one with scope `egress` (Kuma's zone-token scope).
        let egress = DpKey::zone_egress("ze-1");
        let denied = gate.check(Some(&ours), &egress, None).unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(
            denied.message().contains("egress is out of token's scope"),
            "{denied:?}"
        );
        let scoped = trust
            .issue_zone_ingress(&umbra_pki::trust::ZoneIngressTokenRequest {
                zone: "zone-1".into(),
                scope: Some(vec!["egress".into()]),
                valid_for: None,
            })
            .await
            .unwrap();
        assert!(matches!(
            gate.check(Some(&scoped), &egress, None),
            Ok(Some(ProxyIdentity::ZoneIngress(_)))
        ));
        assert_eq!(
            gate.check(Some(&scoped), &ingress, None)
                .unwrap_err()
                .code(),
            tonic::Code::PermissionDenied,
            "an egress-only token admits no ingress"
        );
        assert_eq!(
            gate.check(None, &egress, None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        gate.recheck(Some(&scoped), &egress).unwrap();
    }
}
