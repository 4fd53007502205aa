//! The Global CP's REST API (axum + tower), Kuma's resource paths over the [`Store`]:
//! - `GET /meshes`, `GET|PUT|DELETE /meshes/{name}`;
//! - `GET /meshes/{mesh}/{plural}`, `GET|PUT|DELETE /meshes/{mesh}/{plural}/{name}`.
//!
//! Lists are paged (`size`, `offset`; `{total, items, next?}`) and filter by `label=`,
//! `name=`, and on Dataplanes Kuma's `tag=` and `gateway=` ([`umbra_api::filters`]). Bodies are YAML or
//! JSON in Kuma's universal format; an invalid resource gets a 400 with every
//! `{field, message}` and nothing is stored. A PUT or DELETE may carry `If-Match: <version>`
//! (`0`: must not exist); a stale version is a 409. Responses carry the stored version in
//! `ETag`. Dataplanes come from zones over KDS and are read-only here (405).
//!
//! Answers are JSON, or YAML when `Accept` asks for it ([`umbra_api::negotiate`]). A zone's
//! Dataplane is listed under a zone-unique name (`<name>-<hash>`, labels `kuma.io/zone` and
//! `kuma.io/display-name`); `GET /meshes/{mesh}/dataplanes+insights/{name}`, and the paged
//! `GET /meshes/{mesh}/dataplanes+insights` and `GET /dataplanes+insights`, answer Kuma's
//! `DataplaneOverview` with the insight its zone reported ([`umbra_api::insights`]);
//! `GET /meshes/{mesh}/service-insights[/{name}]` Kuma's `ServiceInsight` per service, from
//! the same ([`umbra_api::service_insights`]). Per-DPP `_config` and `_rules`, and the Envoy
//! admin views `xds`, `stats` and `clusters` of a DPP or a ZoneIngress (Kuma's paths), are
//! asked of the owning zone ([`crate::inspect::forward`]). These routes, `/global-insight` and
//! `/mesh-insights` are the ones both CPs serve, written once in [`umbra_api::shared_routes`]
//! over this CP's [`AppState`]. The OpenAPI 3 document is at `/openapi.yaml`.
//!
//! `GET /zones` and `GET /zones/{name}` report each zone's KDS state ([`ZoneRegistry`]), the
//! number of its Dataplanes here and its ZoneIngresses (name, advertised address, services
//! offered); a zone that owns resources here but has not connected since this Global started
//! is listed offline; `GET /zones+insights` (paged, `name=`) and `GET /zones/{name}+insights`
//! answer Kuma's `ZoneOverview` of the same zones ([`crate::zone_overview`]);
//! `POST /tokens/zone` with `{"zone": "z1", "validFor": "24h"}` issues a zone token (Kuma's
//! endpoint); user and dataplane tokens and the admin token are [`umbra_api::tokens`]. Every
//! call is authenticated ([`umbra_api::authn`]: user tokens, loopback is the admin unless
//! `--localhost-is-admin=false`; issuance and revocation are admin-only). A store outage is a
//! 503 with a clear body; the same process serves again once the database is back. Bodies are
//! limited to [`umbra_api::service::MAX_BODY_BYTES`] and requests to [`REQUEST_TIMEOUT`].
//!
//! `POST /meshes/{mesh}/_migration/plan|apply|rollback` are the migration workflow, `GET|POST
//! /meshes/{mesh}/_migration/rollout` and `POST .../stop` its staged rollouts
//! ([`crate::migration`]), under the fleet-wide diff's longer deadline.
//!
//! `GET /_resources` describes every resource type (Kuma's `ResourceTypeDescriptionList`),
//! `GET /config` the Global's configuration (admin-only, redacted) and `GET /versions` the
//! Envoy versions its data planes work with ([`umbra_api::about`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_api::crud::{self, ResourceApi, WriteMode};
use umbra_api::error::ApiError;
use umbra_api::resource::resource_type;
use umbra_api::service::{self, Route, BASE_ROUTES};
use umbra_api::shared_routes::{self, AdminView, ControlPlaneApi, Inspection, Proxy, QueryPairs};

use crate::store::Store;
use crate::tokens::{TokenError, ZoneTokens, DEFAULT_VALIDITY};
use crate::zones::ZoneRegistry;
use umbra_kds::pb::dataplane_inspect::Endpoint;

/// Longest a request may take before it is answered with a 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The OpenAPI 3 document of this API, served at `/openapi.yaml` (checked against the router
/// by `tests/openapi.rs`).
pub const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

/// The Global's own routes (besides [`BASE_ROUTES`], the resource routes and
/// [`shared_routes::ROUTES`]).
const GLOBAL_ROUTES: &[Route] = &[
    ("/zones", &["get"]),
    ("/zones/{name}", &["get"]),
    ("/zones+insights", &["get"]),
    // Served by the `/zones/{name}` route (matchit has no suffix parameters).
    ("/zones/{name}+insights", &["get"]),
    ("/tokens/zone", &["post"]),
    ("/tokens/zone/revocations", &["post"]),
    (
        "/meshes/{mesh}/{plural}/{name}/_resources/dataplanes",
        &["get"],
    ),
    ("/meshes/{mesh}/_shadow-diff", &["get"]),
    ("/meshes/{mesh}/_migration/plan", &["post"]),
    ("/meshes/{mesh}/_migration/apply", &["post"]),
    ("/meshes/{mesh}/_migration/rollback", &["post"]),
    ("/meshes/{mesh}/_migration/rollout", &["get", "post"]),
    ("/meshes/{mesh}/_migration/stop", &["post"]),
];

/// Resource routes that are read-only on the Global: ZoneIngresses and ZoneEgresses are
/// registered in their zone and synced here over KDS. Their paths serve GET only
/// ([`crud::routes_with_read_only_ingresses`]: another method is a 405 saying where to write
/// them), so the document lists no PUT or DELETE for them.
const READ_ONLY_HERE: &[&str] = &[
    "/zone-ingresses/{name}",
    "/zoneingresses/{name}",
    "/zoneegresses/{name}",
];

/// Every route and its methods, as documented in [`OPENAPI_YAML`].
pub fn routes() -> Vec<Route> {
    service::routes(&[
        BASE_ROUTES,
        GLOBAL_ROUTES,
        umbra_api::tokens::ROUTES,
        crud::ROUTES,
        shared_routes::ROUTES,
        umbra_api::about::ROUTES,
    ])
    .into_iter()
    .map(|(path, methods)| {
        if READ_ONLY_HERE.contains(&path) {
            (path, &["get"][..])
        } else {
            (path, methods)
        }
    })
    .collect()
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Zones and their insights.
    pub zones: Arc<ZoneRegistry>,
    /// Zone token issuer.
    pub tokens: ZoneTokens,
    /// User and dataplane tokens: keys, revocations, who may call what.
    pub trust: Arc<umbra_pki::trust::Trust>,
    /// Inspect calls to zones.
    pub inspect: Arc<crate::inspect::hub::InspectHub>,
    /// Trace context of writes on their way to the zones.
    pub traces: Arc<crate::offer::TraceLinks>,
    /// The effective configuration, redacted, that `GET /config` answers
    /// ([`crate::Args::config`]).
    pub config: Arc<Value>,
    /// The Global replicas ([`crate::replicas`]; [`crate::replicas::Single`] when alone).
    pub replicas: Arc<dyn crate::replicas::Coordinator>,
    /// This replica's name (`--replica-name`).
    pub replica_name: Arc<str>,
    /// Where the replicas record their zone subscriptions (`None`: alone, on a memory store;
    /// [`crate::replicas::insights`]).
    pub subscriptions: Option<Arc<crate::replicas::insights::InsightMirror>>,
}

impl FromRef<AppState> for Arc<dyn Store> {
    fn from_ref(state: &AppState) -> Self {
        state.store.clone()
    }
}

impl AppState {
    /// Every zone's status, merged over the replicas ([`crate::replicas::zone_statuses`]).
    ///
    /// # Errors
    /// 503 when the store cannot be read.
    pub async fn zone_statuses(
        &self,
    ) -> Result<std::collections::BTreeMap<String, crate::zones::ZoneStatus>, ApiError> {
        Ok(
            crate::replicas::zone_statuses(&self.zones, &*self.replicas, &self.replica_name)
                .await?,
        )
    }

    /// Per zone (`only`, or every zone `known` or recorded), its `ZoneOverview` subscriptions
    /// over every replica ([`crate::zone_overview::merge_subscriptions`]); `known` is
    /// [`Self::zone_statuses`].
    ///
    /// # Errors
    /// 503 when the store cannot be read.
    pub async fn zone_subscriptions(
        &self,
        known: &std::collections::BTreeMap<String, crate::zones::ZoneStatus>,
        only: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, Vec<Value>>, ApiError> {
        let stored = match &self.subscriptions {
            Some(m) => m.subscriptions(only).await?,
            None => std::collections::BTreeMap::new(),
        };
        let names: std::collections::BTreeSet<&str> = known
            .keys()
            .chain(stored.keys())
            .map(String::as_str)
            .filter(|z| only.is_none_or(|o| o == *z))
            .collect();
        Ok(names
            .into_iter()
            .map(|zone| {
                let local = self
                    .zones
                    .get(zone)
                    .and_then(|s| crate::zone_overview::subscription(&s, &self.replica_name));
                let holder = known
                    .get(zone)
                    .filter(|s| s.online)
                    .and_then(|s| s.replica.as_deref());
                let subs = crate::zone_overview::merge_subscriptions(
                    local,
                    stored.get(zone).map_or(&[], Vec::as_slice),
                    &self.replica_name,
                    holder,
                );
                (zone.to_owned(), subs)
            })
            .collect())
    }

    /// What the inspect answers read.
    pub fn inspect_context(&self) -> crate::inspect::context::InspectContext {
        crate::inspect::context::InspectContext {
            store: self.store.clone(),
            hub: self.inspect.clone(),
            zones: self.zones.clone(),
        }
    }
}

impl FromRef<AppState> for Arc<umbra_pki::trust::Trust> {
    fn from_ref(state: &AppState) -> Self {
        state.trust.clone()
    }
}

impl FromRef<AppState> for ResourceApi {
    fn from_ref(state: &AppState) -> Self {
        ResourceApi {
            store: state.store.clone(),
            mode: WriteMode::Global,
            observer: Some(state.traces.clone()),
            zone: None,
        }
    }
}

impl FromRef<AppState> for umbra_api::about::About {
    fn from_ref(state: &AppState) -> Self {
        umbra_api::about::About {
            mode: WriteMode::Global,
            zone_owned: &umbra_kds::resource::ZONE_OWNED,
            config: state.config.clone(),
        }
    }
}

/// The routes both CPs serve ([`shared_routes`]), on the Global: a DPP's insight is the one
/// its zone reported over KDS ([`ZoneRegistry`]), and inspections are asked of the owning zone
/// ([`crate::inspect::forward`]).
impl ControlPlaneApi for AppState {
    fn mode(&self) -> &'static str {
        "global"
    }

    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The insight `stored`'s zone reported for it (found by the zone's own name for it, the
    /// `kuma.io/display-name` label; none until the zone reconnects after a restart: the
    /// registry is memory-only), and that zone's name.
    fn insight(&self, stored: &crate::store::Stored) -> (Option<Value>, String) {
        let zone = stored.zone.clone().unwrap_or_default();
        let insight = stored
            .resource
            .meta
            .labels
            .get(umbra_kds::resource::DISPLAY_NAME_LABEL)
            .and_then(|local| {
                let mesh = umbra_core::dataplane::proxy_key_mesh(
                    stored.resource.ty(),
                    &stored.resource.meta.mesh,
                );
                self.zones.insight(&zone, mesh, local)
            });
        (insight, zone)
    }

    /// Kuma's `GlobalInsight` ([`crate::global_insight`]).
    async fn global_insight(&self) -> Result<Value, ApiError> {
        let insight = |s: &crate::store::Stored| self.insight(s).0;
        crate::global_insight::global_insight(&*self.store, &self.zones, &insight).await
    }

    /// Asked of the zone that owns the proxy ([`crate::inspect::forward`]).
    async fn inspect(&self, what: Inspection, query: QueryPairs) -> Result<Response, ApiError> {
        let (proxy, endpoint) = match what {
            // Computed here from the Global's store (no zone owns a MeshGateway).
            Inspection::GatewayRules { mesh, name } => {
                let q = umbra_api::inspect_rules::InspectQuery::parse(&query)?;
                let resources = crate::inspect::context::mesh_policies(&*self.store, &mesh).await?;
                let doc = umbra_api::inspect_rules::gateway_rules(&resources, &mesh, &name, q)?;
                return Ok(axum::Json(doc).into_response());
            }
            // Asked of every zone that owns a DPP the policy shapes.
            Inspection::Observed { mesh, ty, name } => {
                let report =
                    crate::inspect::observed::observed(&self.inspect_context(), &mesh, ty, &name)
                        .await?;
                return Ok(axum::Json(report).into_response());
            }
            Inspection::Config(proxy) => (proxy, Endpoint::Config),
            Inspection::Rules { mesh, name } => (Proxy::Dataplane { mesh, name }, Endpoint::Rules),
            Inspection::Admin(proxy, AdminView::Xds) => (proxy, Endpoint::Xds),
            Inspection::Admin(proxy, AdminView::Stats) => (proxy, Endpoint::Stats),
            Inspection::Admin(proxy, AdminView::Clusters) => (proxy, Endpoint::Clusters),
        };
        let (mesh, name) = proxy.mesh_and_name();
        crate::inspect::forward::forward(&self.inspect_context(), mesh, name, endpoint, query).await
    }
}

/// The API router over `state`.
pub fn router(state: AppState) -> Router {
    let regular = service::base(
        OPENAPI_YAML,
        get(shared_routes::index::<AppState>),
        get(ready),
    )
    .route("/zones", get(list_zones))
    .route("/zones/{name}", get(get_zone))
    .route("/zones+insights", get(list_zone_overviews))
    .route("/tokens/zone", post(zone_token))
    .route("/tokens/zone/revocations", post(revoke_zone_token))
    .merge(umbra_api::tokens::routes())
    .merge(crud::routes_with_read_only_ingresses())
    .merge(umbra_api::about::routes())
    .merge(shared_routes::routes())
    .route(
        "/meshes/{mesh}/{plural}/{name}/_resources/dataplanes",
        get(affected_dataplanes),
    );
    // Zones get their own deadline in a fleet-wide diff (`timeout=`, at most 120 s); the HTTP
    // one is longer.
    let fleet = Router::new()
        .route("/meshes/{mesh}/_shadow-diff", get(shadow_diff))
        .route("/meshes/{mesh}/_migration/{step}", post(migration_step))
        .route(
            "/meshes/{mesh}/_migration/rollout",
            get(rollout_status).post(rollout_start),
        );
    let trust = state.trust.clone();
    service::layered(umbra_api::authn::protect(
        with_timeout(regular, REQUEST_TIMEOUT).merge(with_timeout(
            fleet,
            crate::inspect::shadow_diff::query::FLEET_HTTP_TIMEOUT,
        )),
        trust,
    ))
    .with_state(state)
}

/// `GET /ready`: 200 when the store answers (readiness), else 503 with the store's error.
/// Names this replica, whether it leads, and (with several replicas) every replica and the
/// zones each holds.
async fn ready(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let revision = state.store.revision().await?;
    let zones = state.zone_statuses().await?;
    let online = zones.values().filter(|z| z.online).count();
    let mut body = json!({
        "status": "ready",
        "revision": revision,
        "zonesOnline": online,
        "replica": &*state.replica_name,
        "leader": *state.replicas.leader().borrow(),
    });
    if state.replicas.distributed() {
        let held = |name: &str| -> Vec<&str> {
            zones
                .values()
                .filter(|z| z.online && z.replica.as_deref() == Some(name))
                .map(|z| z.name.as_str())
                .collect()
        };
        let replicas: Vec<Value> = state
            .replicas
            .replicas()
            .await?
            .into_iter()
            .filter(|r| r.alive)
            .map(|r| {
                let zones = held(&r.name);
                let mut v = serde_json::to_value(&r).unwrap_or_default();
                v["zones"] = json!(zones);
                v
            })
            .collect();
        body["replicaId"] = json!(state.replicas.me().map(|m| m.id));
        body["replicas"] = json!(replicas);
    }
    Ok(Json(body))
}

/// `router` answering requests that take longer than `limit` with a 503.
fn with_timeout(router: Router<AppState>, limit: Duration) -> Router<AppState> {
    router.layer(
        tower::ServiceBuilder::new()
            .layer(axum::error_handling::HandleErrorLayer::new(
                move |_: tower::BoxError| async move {
                    ApiError::status(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("the request took longer than {} s", limit.as_secs()),
                    )
                },
            ))
            .timeout(limit),
    )
}

/// What the store holds of each zone: its ZoneIngresses (as `/zones` shows them) and the
/// number of its Dataplanes, for `zones` plus every zone owning a ZoneIngress.
async fn zone_resources(
    store: &dyn crate::store::Store,
    zones: impl IntoIterator<Item = String>,
) -> Result<std::collections::BTreeMap<String, (usize, Vec<Value>)>, ApiError> {
    use umbra_core::resource::ResourceType;
    let mut out: std::collections::BTreeMap<String, (usize, Vec<Value>)> =
        zones.into_iter().map(|z| (z, (0, Vec::new()))).collect();
    for s in crate::store::list_all(
        store,
        ResourceType::ZoneIngress,
        None,
        &std::collections::BTreeMap::new(),
    )
    .await?
    {
        let (Some(zone), Some(zi)) = (s.zone.clone(), s.resource.as_zone_ingress()) else {
            continue;
        };
        let n = &zi.networking;
        out.entry(zone).or_default().1.push(json!({
            "name": s.resource.meta.display_name(),
            "advertisedAddress": n.advertised_address,
            "advertisedPort": n.advertised_port,
            "availableServices": zi.available_services.len(),
            "instances": zi.available_services.iter().map(|a| u64::from(a.instances)).sum::<u64>(),
        }));
    }
    for (zone, entry) in &mut out {
        let page = store
            .list(&umbra_store::ListQuery {
                ty: ResourceType::Dataplane,
                mesh: None,
                labels: [(umbra_kds::resource::ZONE_LABEL.to_owned(), zone.clone())].into(),
                name_contains: None,
                dataplane: Default::default(),
                offset: 0,
                size: 1,
            })
            .await?;
        entry.0 = usize::try_from(page.total).unwrap_or(usize::MAX);
    }
    Ok(out)
}

fn zone_json(
    status: Option<crate::zones::ZoneStatus>,
    name: &str,
    held: &(usize, Vec<Value>),
) -> Value {
    let mut v = match status {
        Some(s) => serde_json::to_value(s).unwrap_or_default(),
        None => json!({"name": name, "online": false, "streams": 0}),
    };
    v["dataplanes"] = json!(held.0);
    v["zoneIngresses"] = json!(held.1);
    v
}

async fn list_zones(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let known = state.zone_statuses().await?;
    let subs = state.zone_subscriptions(&known, None).await?;
    let held = zone_resources(&*state.store, subs.into_keys()).await?;
    let items: Vec<Value> = held
        .iter()
        .map(|(name, h)| zone_json(known.get(name).cloned(), name, h))
        .collect();
    Ok(Json(json!({ "total": items.len(), "items": items })))
}

/// `GET /zones/{name}`: the zone's KDS state ([`zone_json`]); and, as matchit cannot route
/// a parameter with a suffix, `GET /zones/{name}+insights`: its `ZoneOverview`
/// ([`crate::zone_overview`]). 404 for a zone no replica has seen connect (since its
/// subscriptions were forgotten) that holds no resources here.
async fn get_zone(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (name, overview) = match name.strip_suffix("+insights") {
        Some(zone) => (zone.to_owned(), true),
        None => (name, false),
    };
    let held = zone_resources(&*state.store, [name.clone()]).await?;
    let mut known = state.zone_statuses().await?;
    let subs = state
        .zone_subscriptions(&known, Some(&name))
        .await?
        .remove(&name)
        .unwrap_or_default();
    let status = known.remove(&name);
    let h = held.get(&name).cloned().unwrap_or_default();
    if status.is_none() && subs.is_empty() && h.0 == 0 && h.1.is_empty() {
        return Err(ApiError::not_found(format!(
            "zone {name:?} has never connected"
        )));
    }
    if overview {
        return Ok(Json(crate::zone_overview::zone_overview(
            &name,
            subs,
            zone_json(status, &name, &h),
        )));
    }
    Ok(Json(zone_json(status, &name, &h)))
}

/// `GET /zones+insights`: a page (`size`, `offset`, `name=`) of the `ZoneOverview`s of the
/// zones `GET /zones` lists.
async fn list_zone_overviews(
    State(state): State<AppState>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let page = umbra_api::paging::PageParams::parse(&query)?;
    if let Some((k, _)) = query
        .iter()
        .find(|(k, _)| matches!(k.as_str(), "label" | "tag" | "gateway"))
    {
        return Err(ApiError::bad_parameter(
            k,
            "zones are filtered by name= only (they carry no labels or tags)",
        ));
    }
    let contains = query
        .iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    let known = state.zone_statuses().await?;
    let mut subs = state.zone_subscriptions(&known, None).await?;
    let held = zone_resources(&*state.store, subs.keys().cloned()).await?;
    let matching: Vec<_> = held
        .iter()
        .filter(|(name, _)| name.contains(contains))
        .collect();
    let items = matching
        .iter()
        .skip(page.offset)
        .take(page.size)
        .map(|(name, h)| {
            let umbra = zone_json(known.get(*name).cloned(), name, h);
            let subs = subs.remove(*name).unwrap_or_default();
            crate::zone_overview::zone_overview(name, subs, umbra)
        })
        .collect();
    Ok(Json(page.body(
        items,
        matching.len(),
        "/zones+insights",
        &query,
    )))
}

/// Body of `POST /tokens/zone`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ZoneTokenRequest {
    zone: String,
    #[serde(default)]
    valid_for: Option<String>,
    /// Kuma's scopes; every Umbra zone token has the one scope KDS needs.
    #[serde(default)]
    #[allow(dead_code)]
    scope: Vec<String>,
}

/// `POST /tokens/zone/revocations`: revoke a zone token (by the token, or its `jti`). Stored
/// before the answer; the zone's open KDS streams end at once and it cannot connect with it
/// again. The answer names the revoked ID, never the token.
async fn revoke_zone_token(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = umbra_api::tokens::revocation_id(&headers, &body, |token| {
        state.tokens.token_id(token).map_err(|e| e.to_string())
    })?;
    state.tokens.revoke(&*state.store, &id).await?;
    tracing::warn!(token_id = %id, "zone token revoked");
    Ok(Json(json!({ "revoked": id })))
}

async fn zone_token(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    umbra_api::negotiate::check_body_type(&headers, umbra_api::negotiate::BODY_TYPES)?;
    umbra_api::negotiate::check_json_object(&body, r#"{"zone": ..., "validFor": ...}"#)?;
    let req: ZoneTokenRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_parameter(
            "body",
            format!("expected {{\"zone\": ..., \"validFor\": ...}}: {e}"),
        )
    })?;
    let valid_for = match &req.valid_for {
        None => DEFAULT_VALIDITY,
        Some(d) => {
            let d = umbra_core::duration::Duration::parse(d)
                .map_err(|e| ApiError::bad_parameter("validFor", e.to_string()))?;
            if d.is_negative() || d.is_zero() {
                return Err(ApiError::bad_parameter("validFor", "must be positive"));
            }
            std::time::Duration::from_nanos(d.as_nanos().unsigned_abs())
        }
    };
    let token = state
        .tokens
        .issue(&req.zone, valid_for)
        .map_err(|e| match e {
            TokenError::BadZone(_) => ApiError::bad_parameter("zone", e.to_string()),
            TokenError::Invalid(_) => {
                ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        })?;
    Ok(([(header::CONTENT_TYPE, "text/plain")], token).into_response())
}

async fn affected_dataplanes(
    State(state): State<AppState>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    let path = format!("/meshes/{mesh}/{plural}/{name}/_resources/dataplanes");
    crate::inspect::affected::affected(&state.inspect_context(), &mesh, ty, &name, &query, &path)
        .await
}

async fn shadow_diff(
    State(state): State<AppState>,
    Path(mesh): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let ndjson = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    crate::inspect::shadow_diff::respond::shadow_diff(
        &state.inspect_context(),
        &mesh,
        &query,
        ndjson,
    )
    .await
}

/// A body of type `T` (a JSON or YAML mapping: `Content-Type` as for resources; an empty body
/// reads as `{}`, but whitespace alone is a document with no value and is refused), or a 400
/// naming what is wrong.
fn json_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    umbra_api::negotiate::check_body_type(headers, umbra_api::negotiate::BODY_TYPES)?;
    let value = if body.is_empty() {
        json!({})
    } else {
        umbra_core::codec::decode_one(body, umbra_core::codec::Limits::default())
            .map_err(|e| ApiError::bad_parameter("body", e.to_string()))?
    };
    // serde reads a struct from a sequence too (`["<plan>"]`), which no body is meant to be.
    if !value.is_object() {
        return Err(ApiError::bad_parameter("body", "must be a mapping"));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_parameter("body", e.to_string()))
}

/// `POST /meshes/{mesh}/_migration/rollout`: start a staged rollout
/// ([`crate::migration::rollout::start`]).
async fn rollout_start(
    State(state): State<AppState>,
    Path(mesh): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let cx = state.inspect_context();
    crate::migration::rollout::start(&cx, &mesh, json_body(&headers, &body)?)
        .await
        .map(Json)
}

/// `GET /meshes/{mesh}/_migration/rollout[?plan=]` ([`crate::migration::rollout::status`]).
async fn rollout_status(
    State(state): State<AppState>,
    Path(mesh): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let plan = query
        .iter()
        .find(|(k, _)| k == "plan")
        .map(|(_, v)| v.as_str());
    crate::migration::rollout::status(&state.inspect_context(), &mesh, plan)
        .await
        .map(Json)
}

/// `POST /meshes/{mesh}/_migration/{plan|apply|rollback|stop}` ([`crate::migration`]).
async fn migration_step(
    State(state): State<AppState>,
    Path((mesh, step)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let cx = state.inspect_context();
    match step.as_str() {
        "plan" => crate::migration::plan(&cx, &mesh, json_body(&headers, &body)?).await,
        "apply" => crate::migration::apply(&cx, &mesh, json_body(&headers, &body)?).await,
        "rollback" => crate::migration::rollback(&cx, &mesh, json_body(&headers, &body)?).await,
        "stop" => crate::migration::rollout::stop(&cx, &mesh, json_body(&headers, &body)?).await,
        other => Err(ApiError::not_found(format!(
            "{} POST /meshes/{mesh}/_migration/{other}",
            umbra_api::negotiate::NO_ROUTE
        ))),
    }
    .map(Json)
}
