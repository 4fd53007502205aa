//! The issuing side: the CP that holds the private keys (the Global, or a standalone zone)
//! issues user and dataplane tokens and publishes the [`TrustBundle`] of their public halves
//! (plus its revocation lists) to verifiers.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::{Revoked, TrustBundle};
use crate::keys::SigningKey;
use crate::token::{
    new_jti, sign, DataplaneClaims, TokenError, TokenKind, UserClaims, ZoneIngressClaims,
    EGRESS_SCOPE, INGRESS_SCOPE, MAX_VALIDITY_SECS,
};

/// What a dataplane token is asked for (`POST /tokens/dataplane`, Kuma's shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneTokenRequest {
    /// The mesh (required).
    #[serde(default)]
    pub mesh: String,
    /// The DPP name (empty: any DPP of the mesh with the tags).
    #[serde(default)]
    pub name: String,
    /// Tag → allowed values.
    #[serde(default)]
    pub tags: BTreeMap<String, BTreeSet<String>>,
    /// `dataplane` (default), `ingress` or `egress`.
    #[serde(rename = "type", default)]
    pub proxy_type: String,
    /// Validity, a Kuma duration (`24h`); parsed by the caller.
    #[serde(default)]
    pub valid_for: Option<String>,
}

/// What a user token is asked for (`POST /tokens/user`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserTokenRequest {
    /// The user name (required).
    #[serde(default)]
    pub name: String,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Validity, a Kuma duration (`24h`); parsed by the caller.
    #[serde(default)]
    pub valid_for: Option<String>,
}

/// Private keys and revocation lists of the issuing CP.
#[derive(Debug, Clone)]
pub struct Issuer {
    /// The user-token key.
    pub user: SigningKey,
    /// Per mesh, its dataplane-token key.
    pub dataplane: BTreeMap<String, SigningKey>,
    /// Revoked token IDs.
    pub revoked: Revoked,
}

fn check_label(field: &'static str, value: &str) -> Result<(), TokenError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '/'));
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadRequest {
            field,
            reason: format!(
                "{value:?} must be 1-253 characters of letters, digits and - _ . : @ /"
            ),
        })
    }
}

impl Issuer {
    /// The bundle verifiers need: public keys and revocations.
    pub fn bundle(&self) -> TrustBundle {
        TrustBundle {
            user_keys: vec![self.user.public().clone()],
            dataplane_keys: self
                .dataplane
                .iter()
                .map(|(m, k)| (m.clone(), vec![k.public().clone()]))
                .collect(),
            revoked: self.revoked.clone(),
        }
    }

    /// A user token for `req`, valid `valid_secs` from `now` (capped at 10 years).
    ///
    /// # Errors
    /// [`TokenError::BadRequest`] for an empty or odd name or group.
    pub fn issue_user(
        &self,
        req: &UserTokenRequest,
        valid_secs: u64,
        now: u64,
    ) -> Result<String, TokenError> {
        check_label("name", &req.name)?;
        for g in &req.groups {
            check_label("groups", g)?;
        }
        let claims = UserClaims {
            kind: TokenKind::User,
            name: req.name.clone(),
            groups: req.groups.clone(),
            iat: now,
            exp: now.saturating_add(valid_secs.min(MAX_VALIDITY_SECS)),
            jti: new_jti(),
        };
        Ok(sign(&self.user, &claims))
    }

    /// A zone-ingress token for the ingresses of `zone`, valid `valid_secs` from `now`,
    /// signed with the user-token key (kind `zone-ingress`).
    ///
    /// # Errors
    /// [`TokenError::BadRequest`] for an empty or odd zone name.
    pub fn issue_zone_ingress(
        &self,
        zone: &str,
        valid_secs: u64,
        now: u64,
    ) -> Result<String, TokenError> {
        self.issue_zone_proxy(zone, &crate::token::ingress_only(), valid_secs, now)
    }

    /// A zone-ingress token for the zone proxies of `zone` in `scope` (`ingress`, `egress`:
    /// Kuma's zone-token scopes), valid `valid_secs` from `now`, signed with the user-token key.
    ///
    /// # Errors
    /// [`TokenError::BadRequest`] for an empty or odd zone name (`zone`), or an empty scope or
    /// one naming something else than `ingress` and `egress` (`scope`).
    pub fn issue_zone_proxy(
        &self,
        zone: &str,
        scope: &[String],
        valid_secs: u64,
        now: u64,
    ) -> Result<String, TokenError> {
        check_label("zone", zone)?;
        if scope.is_empty() {
            return Err(TokenError::BadRequest {
                field: "scope",
                reason: "cannot be empty".into(),
            });
        }
        if let Some(other) = scope
            .iter()
            .find(|s| !matches!(s.as_str(), INGRESS_SCOPE | EGRESS_SCOPE))
        {
            return Err(TokenError::BadRequest {
                field: "scope",
                reason: format!("{other:?} is not a zone-token scope (ingress, egress)"),
            });
        }
        let mut scope = scope.to_vec();
        scope.sort();
        scope.dedup();
        let claims = ZoneIngressClaims {
            kind: TokenKind::ZoneIngress,
            zone: zone.to_owned(),
            scope,
            iat: now,
            exp: now.saturating_add(valid_secs.min(MAX_VALIDITY_SECS)),
            jti: new_jti(),
        };
        Ok(sign(&self.user, &claims))
    }

    /// A dataplane token for `req`, valid `valid_secs` from `now`, signed with its mesh's key.
    ///
    /// # Errors
    /// [`TokenError::BadRequest`]: no mesh, a mesh with no key (it does not exist), an odd
    /// name, a tag without values, an unknown type.
    pub fn issue_dataplane(
        &self,
        req: &DataplaneTokenRequest,
        valid_secs: u64,
        now: u64,
    ) -> Result<String, TokenError> {
        if req.mesh.is_empty() {
            return Err(TokenError::BadRequest {
                field: "mesh",
                reason: "required".into(),
            });
        }
        let key = self
            .dataplane
            .get(&req.mesh)
            .ok_or_else(|| TokenError::BadRequest {
                field: "mesh",
                reason: format!("mesh {:?} does not exist", req.mesh),
            })?;
        if !req.name.is_empty() {
            check_label("name", &req.name)?;
        }
        // Tag names are Kuma's business (its token server takes any): a name no Dataplane
        // carries only makes a token that authorizes nothing.
        for (tag, values) in &req.tags {
            if values.is_empty() {
                return Err(TokenError::BadRequest {
                    field: "tags",
                    reason: format!("tag {tag:?} needs at least one value"),
                });
            }
        }
        let proxy_type = match req.proxy_type.as_str() {
            "" | "dataplane" => "dataplane",
            "ingress" | "egress" => req.proxy_type.as_str(),
            other => {
                return Err(TokenError::BadRequest {
                    field: "type",
                    reason: format!("{other:?} is not one of dataplane, ingress, egress"),
                })
            }
        };
        let claims = DataplaneClaims {
            kind: TokenKind::Dataplane,
            mesh: req.mesh.clone(),
            name: req.name.clone(),
            tags: req.tags.clone(),
            proxy_type: proxy_type.into(),
            iat: now,
            exp: now.saturating_add(valid_secs.min(MAX_VALIDITY_SECS)),
            jti: new_jti(),
        };
        Ok(sign(key, &claims))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::{token_id, LEEWAY_SECS};

    const NOW: u64 = 1_800_000_000;

    fn issuer() -> Issuer {
        Issuer {
            user: SigningKey::generate(),
            dataplane: [("default".to_owned(), SigningKey::generate())].into(),
            revoked: Revoked::default(),
        }
    }

    fn user(name: &str, groups: &[&str]) -> UserTokenRequest {
        UserTokenRequest {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            valid_for: None,
        }
    }

    #[test]
    fn user_tokens_verify_expire_and_carry_groups() {
        let iss = issuer();
        let b = iss.bundle();
        let t = iss
            .issue_user(&user("alice", &["team-a"]), 60, NOW)
            .unwrap();
        let p = b.verify_user(&t, NOW).unwrap();
        assert_eq!(p.name, "alice");
        assert_eq!(p.groups, ["team-a", "mesh-system:authenticated"]);
        assert!(!p.is_admin());
        let admin = iss
            .issue_user(&user("root", &["mesh-system:admin"]), 60, NOW)
            .unwrap();
        assert!(b.verify_user(&admin, NOW).unwrap().is_admin());
        assert!(b.verify_user(&t, NOW + 60 + LEEWAY_SECS).is_ok());
        assert_eq!(
            b.verify_user(&t, NOW + 61 + LEEWAY_SECS),
            Err(TokenError::Expired {
                kind: "user",
                ago: 1 + LEEWAY_SECS
            })
        );
        assert!(matches!(
            iss.issue_user(&user("", &[]), 60, NOW),
            Err(TokenError::BadRequest { field: "name", .. })
        ));
        assert!(matches!(
            iss.issue_user(&user("a b", &[]), 60, NOW),
            Err(TokenError::BadRequest { field: "name", .. })
        ));
    }

    #[test]
    fn zone_ingress_tokens_bind_a_zone_and_are_no_user_tokens() {
        let iss = issuer();
        let b = iss.bundle();
        let t = iss.issue_zone_ingress("zone-2", 60, NOW).unwrap();
        let id = b.verify_zone_ingress(&t, NOW).unwrap();
        assert!(id.authorizes("zone-2").is_ok());
        assert!(id.authorizes("zone-1").unwrap_err().contains("zone-1"));
        assert!(b.verify_user(&t, NOW).is_err(), "not a user token");
        let user = iss.issue_user(&user("alice", &[]), 60, NOW).unwrap();
        assert!(
            b.verify_zone_ingress(&user, NOW).is_err(),
            "not an ingress token"
        );
        let mut revoked = iss.clone();
        revoked.revoked.zone_ingress.insert(id.claims.jti.clone());
        assert!(matches!(
            revoked.bundle().verify_zone_ingress(&t, NOW),
            Err(TokenError::Revoked { .. })
        ));
        assert!(iss.issue_zone_ingress("", 60, NOW).is_err());
    }

    #[test]
    fn zone_tokens_admit_the_proxies_of_their_scope() {
        let iss = issuer();
        let b = iss.bundle();
        let ingress = b
            .verify_zone_ingress(&iss.issue_zone_ingress("zone-1", 60, NOW).unwrap(), NOW)
            .unwrap();
        assert_eq!(ingress.claims.scope, ["ingress"]);
        assert!(ingress.authorizes_scope("zone-1", "ingress").is_ok());
        let e = ingress.authorizes_scope("zone-1", "egress").unwrap_err();
        assert!(e.contains("egress is out of token's scope"), "{e}");
        let both = b
            .verify_zone_ingress(
                &iss.issue_zone_proxy("zone-1", &["egress".into(), "ingress".into()], 60, NOW)
                    .unwrap(),
                NOW,
            )
            .unwrap();
        assert!(both.authorizes_scope("zone-1", "egress").is_ok());
        assert!(both.authorizes_scope("zone-2", "egress").is_err());
        for bad in [vec![], vec!["cp".to_owned()]] {
            assert!(matches!(
                iss.issue_zone_proxy("zone-1", &bad, 60, NOW),
                Err(TokenError::BadRequest { field: "scope", .. })
            ));
        }
    }

    #[test]
    fn forged_foreign_and_cross_kind_tokens_are_refused() {
        let iss = issuer();
        let b = iss.bundle();
        let t = iss.issue_user(&user("alice", &[]), 60, NOW).unwrap();
        // Another CP's key.
        let other = issuer();
        let foreign = other.issue_user(&user("alice", &[]), 60, NOW).unwrap();
        assert!(matches!(
            b.verify_user(&foreign, NOW),
            Err(TokenError::Invalid { .. })
        ));
        // A payload edited to claim admin keeps a signature that no longer matches.
        let parts: Vec<&str> = t.split('.').collect();
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut claims: serde_json::Value =
            serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
        claims["groups"] = serde_json::json!(["mesh-system:admin"]);
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            engine.encode(serde_json::to_vec(&claims).unwrap()),
            parts[2]
        );
        assert!(matches!(
            b.verify_user(&forged, NOW),
            Err(TokenError::Invalid { .. })
        ));
        // `alg: none` and HS256 headers are refused before any key is tried.
        let none = format!(
            "{}.{}.",
            engine.encode(br#"{"alg":"none","typ":"JWT"}"#),
            parts[1]
        );
        assert!(b.verify_user(&none, NOW).is_err());
        assert!(b.verify_user("garbage", NOW).is_err());
        // A dataplane token is not a user token, even if someone put its key among user keys.
        let dp = iss
            .issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "default".into(),
                    name: "web-1".into(),
                    ..Default::default()
                },
                60,
                NOW,
            )
            .unwrap();
        let mut mixed = b.clone();
        mixed
            .user_keys
            .push(iss.dataplane["default"].public().clone());
        assert!(matches!(
            mixed.verify_user(&dp, NOW),
            Err(TokenError::Invalid { reason, .. }) if reason.contains("dataplane token")
        ));
        // Nor is a user token a dataplane token.
        assert!(b.verify_dataplane(&t, NOW).is_err());
    }

    #[test]
    fn revocation_names_the_token_id() {
        let mut iss = issuer();
        let t = iss.issue_user(&user("alice", &[]), 60, NOW).unwrap();
        let id = token_id(&t, TokenKind::User, &iss.bundle().user_keys).unwrap();
        assert_eq!(id.len(), 24);
        iss.revoked.user.insert(id.clone());
        assert_eq!(
            iss.bundle().verify_user(&t, NOW),
            Err(TokenError::Revoked { kind: "user", id })
        );
        let other = iss.issue_user(&user("alice", &[]), 60, NOW).unwrap();
        assert!(iss.bundle().verify_user(&other, NOW).is_ok());
    }

    #[test]
    fn dataplane_tokens_bind_mesh_name_tags_and_type() {
        let iss = issuer();
        let b = iss.bundle();
        let named = iss
            .issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "default".into(),
                    name: "web-1".into(),
                    ..Default::default()
                },
                60,
                NOW,
            )
            .unwrap();
        let id = b.verify_dataplane(&named, NOW).unwrap();
        assert!(id.authorizes("default", "web-1", "dataplane", None).is_ok());
        assert!(id
            .authorizes("default", "web-2", "dataplane", None)
            .unwrap_err()
            .contains("\"web-1\""));
        assert!(id.authorizes("other", "web-1", "dataplane", None).is_err());
        assert!(id.authorizes("default", "web-1", "ingress", None).is_err());

        let tagged = iss
            .issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "default".into(),
                    tags: [("kuma.io/service".to_owned(), ["web".to_owned()].into())].into(),
                    ..Default::default()
                },
                60,
                NOW,
            )
            .unwrap();
        let id = b.verify_dataplane(&tagged, NOW).unwrap();
        let tags = |v: &[&str]| -> BTreeMap<String, BTreeSet<String>> {
            [(
                "kuma.io/service".to_owned(),
                v.iter().map(|s| (*s).to_owned()).collect(),
            )]
            .into()
        };
        assert!(id
            .authorizes("default", "any", "dataplane", Some(&tags(&["web"])))
            .is_ok());
        assert!(id
            .authorizes("default", "any", "dataplane", Some(&tags(&["web", "db"])))
            .unwrap_err()
            .contains("\"db\""));
        assert!(id
            .authorizes("default", "any", "dataplane", Some(&BTreeMap::new()))
            .is_err());
        assert!(id.authorizes("default", "any", "dataplane", None).is_err());

        // A mesh without a key: nothing can be issued, nothing verifies.
        assert!(matches!(
            iss.issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "nope".into(),
                    ..Default::default()
                },
                60,
                NOW
            ),
            Err(TokenError::BadRequest { field: "mesh", .. })
        ));
        // A token whose mesh claim names another mesh is checked with that mesh's keys.
        let mut two = iss.clone();
        two.dataplane.insert("other".into(), SigningKey::generate());
        let t = two
            .issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "other".into(),
                    ..Default::default()
                },
                60,
                NOW,
            )
            .unwrap();
        assert!(
            b.verify_dataplane(&t, NOW).is_err(),
            "b has no key for other"
        );
        assert!(two.bundle().verify_dataplane(&t, NOW).is_ok());
        assert!(matches!(
            iss.issue_dataplane(
                &DataplaneTokenRequest {
                    mesh: "default".into(),
                    proxy_type: "gateway".into(),
                    ..Default::default()
                },
                60,
                NOW
            ),
            Err(TokenError::BadRequest { field: "type", .. })
        ));
    }

    #[test]
    fn a_bundle_round_trips_and_rejects_mismatched_keys() {
        let iss = issuer();
        let b = iss.bundle();
        let json = serde_json::to_string(&b).unwrap();
        assert!(!json.contains(&crate::keys::to_base64(iss.user.pkcs8())));
        let back: TrustBundle = serde_json::from_str(&json).unwrap();
        assert_eq!(back, b);
        assert!(back.check().is_ok());
        let mut bad = back;
        bad.user_keys[0].kid = "0000000000000000".into();
        assert!(bad.check().is_err());
    }
}
