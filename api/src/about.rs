//! What a CP tells about itself, answered the same way by both CPs ([`routes`]):
//! - `GET /_resources`: Kuma's `ResourceTypeDescriptionList` (`api.yaml`
//!   `ResourceTypeDescriptionList`, `common/resource.yaml` `ResourceTypeDescription` and
//!   `PolicyDescription`), built like Kuma 2.7's api-server (`MapResourceTypeDescription`):
//!   every resource type this CP knows, sorted by name;
//! - `GET /config` (admin-only, [`crate::authn::access`]): the CP's effective configuration,
//!   Kuma-like top-level fields (`environment`, `mode`, `store`, `apiServer`, `multizone`) and
//!   Umbra's own flags under `umbra`, built by the CP from its arguments with secrets left out:
//!   a URL's password is [`REDACTED`] ([`redact_url`]), a token's value is never included, and
//!   TLS keys appear as file paths only;
//! - `GET /versions` (deprecated in Kuma): which Envoy versions this CP's kuma-dp works with
//!   ([`versions`]).

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_core::resource::ResourceType;

use crate::crud::WriteMode;
use crate::service::Route;

/// The routes [`routes`] serves.
pub const ROUTES: &[Route] = &[
    ("/_resources", &["get"]),
    ("/config", &["get"]),
    ("/versions", &["get"]),
];

/// What a redacted secret reads as.
pub const REDACTED: &str = "*****";

/// The Envoy versions `/versions` names for Umbra's data planes, a semver constraint: from
/// Envoy 1.29, the line Kuma 2.7 ships with (the issue 20 spec's choice). Umbra's end-to-end
/// tests run Envoy 1.40 (`scripts/install-envoy`).
pub const ENVOY_CONSTRAINT: &str = ">=1.29.0";

/// What the answers need to know about the CP.
#[derive(Debug, Clone)]
pub struct About {
    /// What this CP's API accepts writes for: a type it refuses is `readOnly`.
    pub mode: WriteMode,
    /// The types zones own and send up over KDS (`umbra_kds::resource::ZONE_OWNED`): every
    /// other type goes from the Global to every zone, Kuma's `includeInFederation`.
    pub zone_owned: &'static [ResourceType],
    /// The effective configuration `GET /config` answers, already redacted.
    pub config: Arc<Value>,
}

/// The [`ROUTES`], for a router whose state provides an [`About`].
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    About: FromRef<S>,
{
    Router::new()
        .route("/_resources", get(resource_types))
        .route("/config", get(config))
        .route("/versions", get(|| async { Json(versions()) }))
}

/// `GET /config`: the configuration the CP was started with ([`About::config`]).
async fn config(State(about): State<About>) -> Json<Value> {
    Json(Value::clone(&about.config))
}

/// Kuma's `GET /versions` answer: `{"kumaDp": {"<version>": {"envoy": "<constraint>"}}}`, this
/// build's version and [`ENVOY_CONSTRAINT`].
pub fn versions() -> Value {
    json!({ "kumaDp": { env!("CARGO_PKG_VERSION"): { "envoy": ENVOY_CONSTRAINT } } })
}

/// `raw` with the password of its user info (`scheme://user:password@host`) and the value of
/// every query parameter whose (decoded) name contains `pass` (libpq's `?password=`,
/// `sslpassword=`, `passfile=`) replaced by [`REDACTED`]. The URL is read as sqlx reads it (the
/// `url` crate), so what is redacted is what the store would use; text that does not parse as
/// a URL is redacted whole (a libpq key/value string may carry a password anywhere).
pub fn redact_url(raw: &str) -> String {
    let Ok(mut url) = url::Url::parse(raw) else {
        return REDACTED.to_owned();
    };
    if url.password().is_some() && url.set_password(Some(REDACTED)).is_err() {
        return REDACTED.to_owned();
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let secret = k.to_ascii_lowercase().contains("pass");
                let v = if secret {
                    REDACTED.into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// The API authentication flags ([`crate::authn::AccessArgs`]) as `/config` shows them.
pub fn access_config(access: &crate::authn::AccessArgs) -> Value {
    json!({
        "localhostIsAdmin": access.localhost_is_admin,
        "metricsAuth": access.metrics_auth,
        "adminTokenFromLoopback": access.admin_token_from_loopback,
    })
}

/// `GET /_resources`: [`resource_type_list`] for this CP.
async fn resource_types(State(about): State<About>) -> Json<Value> {
    Json(resource_type_list(about.mode, about.zone_owned))
}

/// Kuma's `ResourceTypeDescriptionList`: `{"resources": [ResourceTypeDescription]}`, one per
/// [`ResourceType`], sorted by `name`. Each is `{name, scope: "Mesh"|"Global", readOnly,
/// path, singularDisplayName, pluralDisplayName, includeInFederation}` and, for a policy,
/// `policy: {isTargetRef, hasToTargetRef, hasFromTargetRef}` (all `false` for an old
/// policy). `readOnly` is what `mode` refuses to write ([`WriteMode::check`]);
/// `includeInFederation` is `true` unless the type is in `zone_owned`.
pub fn resource_type_list(mode: WriteMode, zone_owned: &[ResourceType]) -> Value {
    let mut types = ResourceType::ALL.to_vec();
    types.sort_by_key(|t| t.name());
    let resources: Vec<Value> = types
        .into_iter()
        .map(|ty| {
            let mut d = json!({
                "name": ty.name(),
                "scope": if ty.is_mesh_scoped() { "Mesh" } else { "Global" },
                "readOnly": mode.check(ty).is_err(),
                "path": ty.plural(),
                "singularDisplayName": ty.singular_display_name(),
                "pluralDisplayName": ty.plural_display_name(),
                "includeInFederation": !zone_owned.contains(&ty),
            });
            if ty.kind().is_policy() {
                d["policy"] = json!({
                    "isTargetRef": ty.is_target_ref(),
                    "hasToTargetRef": ty.has_to_target_ref(),
                    "hasFromTargetRef": ty.has_from_target_ref(),
                });
            }
            d
        })
        .collect();
    json!({ "resources": resources })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE_OWNED: &[ResourceType] = &[
        ResourceType::Dataplane,
        ResourceType::ZoneIngress,
        ResourceType::ZoneEgress,
    ];

    fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
        list["resources"]
            .as_array()
            .and_then(|l| l.iter().find(|d| d["name"] == name))
            .unwrap_or_else(|| panic!("{name} listed"))
    }

    #[test]
    fn every_type_sorted_with_kumas_fields() {
        let list = resource_type_list(WriteMode::Global, ZONE_OWNED);
        let names: Vec<&str> = list["resources"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|d| d["name"].as_str())
            .collect();
        assert_eq!(names.len(), ResourceType::ALL.len());
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");

        let mt = find(&list, "MeshTimeout");
        assert_eq!(
            *mt,
            json!({"name": "MeshTimeout", "scope": "Mesh", "readOnly": false,
                   "path": "meshtimeouts", "singularDisplayName": "Mesh Timeout",
                   "pluralDisplayName": "Mesh Timeouts", "includeInFederation": true,
                   "policy": {"isTargetRef": true, "hasToTargetRef": true,
                              "hasFromTargetRef": true}})
        );
        let mtp = &find(&list, "MeshTrafficPermission")["policy"];
        assert_eq!(mtp["hasToTargetRef"], false);
        assert_eq!(mtp["hasFromTargetRef"], true);
        assert_eq!(
            find(&list, "Timeout")["policy"],
            json!({"isTargetRef": false, "hasToTargetRef": false, "hasFromTargetRef": false})
        );
        let mesh = find(&list, "Mesh");
        assert_eq!(mesh["scope"], "Global");
        assert!(mesh.get("policy").is_none(), "not a policy: {mesh}");
        assert!(find(&list, "ExternalService").get("policy").is_none());
        assert_eq!(find(&list, "GlobalSecret")["scope"], "Global");
        assert_eq!(find(&list, "ZoneIngress")["path"], "zone-ingresses");
    }

    #[test]
    fn urls_lose_their_passwords() {
        for (url, want) in [
            (
                "postgres://umbra:s3cret@db:5432/umbra",
                "postgres://umbra:*****@db:5432/umbra",
            ),
            (
                "postgres://umbra:s3cret@db/umbra?sslmode=require&password=s3cret",
                "postgres://umbra:*****@db/umbra?sslmode=require&password=*****",
            ),
            (
                "postgresql://umbra@db/umbra?sslpassword=s3cret",
                "postgresql://umbra@db/umbra?sslpassword=*****",
            ),
            // An `@` in the query is not the user info's end.
            (
                "postgres://umbra@db/umbra?password=s3cret@t",
                "postgres://umbra@db/umbra?password=*****",
            ),
            // A percent-encoded key is the same key to the store.
            (
                "postgres://umbra@db/umbra?pass%77ord=s3cret",
                "postgres://umbra@db/umbra?password=*****",
            ),
            // Not a URL the store could read: nothing of it is shown.
            ("postgres://umbra:pa/ss@word@db/umbra", "*****"),
            ("postgres://db/umbra", "postgres://db/umbra"),
            ("host=db password=s3cret", "*****"),
        ] {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("s3cret") && !got.contains("word@"), "{got}");
        }
    }

    #[test]
    fn config_is_the_admins() {
        use crate::authn::{access, Access};
        let policy = umbra_pki::trust::AccessPolicy::default();
        for path in ["/config", "/%63onfig"] {
            assert_eq!(
                access(&axum::http::Method::GET, path, &policy),
                Access::Admin,
                "{path}"
            );
        }
        assert_eq!(
            access(&axum::http::Method::GET, "/versions", &policy),
            Access::Authenticated
        );
    }

    #[test]
    fn versions_name_this_build_and_envoy() {
        let v = versions();
        assert_eq!(
            v["kumaDp"][env!("CARGO_PKG_VERSION")]["envoy"],
            ENVOY_CONSTRAINT
        );
    }

    #[test]
    fn read_only_and_federation_follow_the_cp() {
        let global = resource_type_list(WriteMode::Global, ZONE_OWNED);
        let dp = find(&global, "Dataplane");
        assert_eq!(dp["readOnly"], true);
        assert_eq!(dp["includeInFederation"], false);
        let ze = find(&global, "ZoneEgress");
        assert_eq!(ze["readOnly"], true);
        assert_eq!(ze["includeInFederation"], false);
        assert_eq!(ze["path"], "zoneegresses");
        assert_eq!(find(&global, "Mesh")["readOnly"], false);

        let zone = resource_type_list(WriteMode::Zone, ZONE_OWNED);
        assert!(zone["resources"]
            .as_array()
            .is_some_and(|l| l.iter().all(|d| d["readOnly"] == false)));

        let federated = resource_type_list(WriteMode::FederatedZone, ZONE_OWNED);
        assert_eq!(find(&federated, "Dataplane")["readOnly"], false);
        assert_eq!(find(&federated, "ZoneIngress")["readOnly"], false);
        assert_eq!(find(&federated, "ZoneEgress")["readOnly"], false);
        assert_eq!(find(&federated, "Mesh")["readOnly"], true);
        assert_eq!(find(&federated, "MeshTimeout")["readOnly"], true);
        assert_eq!(find(&federated, "Secret")["readOnly"], true);
    }
}
