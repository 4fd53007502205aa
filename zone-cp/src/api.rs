//! The zone's HTTP API (axum), Kuma's resource paths:
//! - `GET /meshes`, `GET|PUT|DELETE /meshes/{name}`;
//! - `GET /meshes/{mesh}/{plural}` (paged: `size`, `offset`; `{total, items, next}`),
//!   `GET|PUT|DELETE /meshes/{mesh}/{plural}/{name}`;
//! - inspect: `GET /meshes/{mesh}/dataplanes/{name}/_config` and `.../_rules` ([`crate::inspect`]).
//! - the proxy's own view from its Envoy admin ([`crate::envoy_admin`]): `GET
//!   /meshes/{mesh}/dataplanes/{name}/{xds|stats|clusters}` and `GET
//!   /zoneingresses/{name}/{xds|stats|clusters}` (Kuma's paths).
//! - Kuma's `DataplaneOverview` (the Dataplane and its xDS insight, [`umbra_api::insights`]):
//!   `GET /meshes/{mesh}/dataplanes+insights/{name}`, and paged and filtered like the
//!   Dataplane list, `GET /meshes/{mesh}/dataplanes+insights` and `GET /dataplanes+insights`.
//! - Kuma's `ServiceInsight` per `kuma.io/service` ([`umbra_api::service_insights`]):
//!   `GET /meshes/{mesh}/service-insights` (paged, `name=`, `type=`) and `.../{name}`.
//!
//! Those routes, `/global-insight` and `/mesh-insights` are the ones both CPs serve, written
//! once in [`umbra_api::shared_routes`] over this CP's [`AppState`].
//!
//! Tokens ([`umbra_api::tokens`]: issued by a standalone zone, by the Global for a federated
//! one) and every call's authentication ([`umbra_api::authn`]) are shared with the Global;
//! `GET /dp-server/ca.pem` gives the data-plane server's CA certificate.
//!
//! The resource routes are Kuma's, shared with the Global ([`umbra_api::crud`]): validation
//! 400s, `If-Match` 409s, `ETag` versions, paging and the list filters (`label=`, `name=`,
//! `tag=`, `gateway=`: [`umbra_api::filters`]); a PUT is answered once
//! the store holds it durably. In a federated zone (a Global is configured), Meshes and
//! policies are read-only here (405): they come from the Global.
//!
//! `GET /_resources` describes every resource type (Kuma's `ResourceTypeDescriptionList`),
//! `GET /config` the zone's configuration (admin-only, redacted) and `GET /versions` the Envoy
//! versions its data planes work with ([`umbra_api::about`], shared with the Global).

use axum::extract::{FromRef, State};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_api::crud::{self, ResourceApi, WriteMode};
use umbra_api::error::ApiError;
use umbra_api::service::{self, Route, BASE_ROUTES};
use umbra_api::shared_routes::{self, AdminView, ControlPlaneApi, Inspection, Proxy, QueryPairs};
use umbra_core::dataplane::DpKey;

use crate::inspect;
use crate::store::Store;

/// The OpenAPI 3 document of this API, served at `/openapi.yaml` (checked against the router
/// by `tests/openapi.rs`).
pub const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

/// Every route of the router as `(path, methods)`, the list the OpenAPI test compares with.
pub fn routes() -> Vec<Route> {
    service::routes(&[
        BASE_ROUTES,
        crud::ROUTES,
        shared_routes::ROUTES,
        ZONE_ROUTES,
        umbra_api::tokens::ROUTES,
        umbra_api::about::ROUTES,
    ])
}

/// The zone's own routes.
const ZONE_ROUTES: &[Route] = &[
    ("/global/accept-store", &["post"]),
    ("/dp-server/ca.pem", &["get"]),
];

/// Shared state of the API.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The zone store.
    pub store: Store,
    /// `true` when a Global CP is configured: Meshes and policies are read-only on the zone.
    pub federated: bool,
    /// xDS connection insights (connected, ACKed versions, NACKs).
    pub insights: std::sync::Arc<crate::ads::Insights>,
    /// The reconciler (for the revision it has reached).
    pub reconciler: std::sync::Arc<crate::reconciler::Reconciler>,
    /// The link to the Global (federated zones).
    pub kds: crate::kds::SharedStatus,
    /// Wakes the KDS client to reconnect (after an operator accepts the Global's store).
    pub kds_resync: std::sync::Arc<tokio::sync::Notify>,
    /// User and dataplane tokens: keys (the zone's own when standalone, the Global's when
    /// federated), revocations, who may call what.
    pub trust: std::sync::Arc<umbra_pki::trust::Trust>,
    /// PEM CA certificate of the data-plane server (`GET /dp-server/ca.pem`).
    pub dp_server_ca: Option<String>,
    /// The effective configuration, redacted, that `GET /config` answers
    /// ([`crate::Args::config`]).
    pub config: std::sync::Arc<Value>,
    /// With `--store postgres`: the zone's replicas (`/ready` shows them and the leader).
    pub replicas: Option<std::sync::Arc<dyn umbra_postgres::replicas::Coordinator>>,
}

impl FromRef<AppState> for std::sync::Arc<umbra_pki::trust::Trust> {
    fn from_ref(state: &AppState) -> Self {
        state.trust.clone()
    }
}

impl AppState {
    /// The state of a zone's API over `store`, with fresh insights, reconciler and KDS status.
    pub fn new(store: Store, federated: bool) -> Self {
        AppState {
            reconciler: std::sync::Arc::new(crate::reconciler::Reconciler::new(store.clone())),
            store,
            federated,
            insights: std::sync::Arc::default(),
            kds: crate::kds::SharedStatus::default(),
            kds_resync: std::sync::Arc::default(),
            trust: umbra_pki::trust::Trust::verifier(Default::default(), Default::default()),
            dp_server_ca: None,
            config: std::sync::Arc::new(json!({
                "environment": "universal",
                "mode": if federated { "zone (federated)" } else { "zone" },
            })),
            replicas: None,
        }
    }
}

impl FromRef<AppState> for ResourceApi {
    fn from_ref(state: &AppState) -> Self {
        ResourceApi {
            store: state.store.contract(),
            mode: if state.federated {
                WriteMode::FederatedZone
            } else {
                WriteMode::Zone
            },
            observer: None,
            zone: Some(state.reconciler.zone().to_owned()),
        }
    }
}

impl FromRef<AppState> for umbra_api::about::About {
    fn from_ref(state: &AppState) -> Self {
        umbra_api::about::About {
            mode: ResourceApi::from_ref(state).mode,
            zone_owned: &umbra_kds::resource::ZONE_OWNED,
            config: state.config.clone(),
        }
    }
}

/// The routes both CPs serve ([`shared_routes`]), in a zone: a DPP's insight is its xDS
/// connection state ([`crate::ads::Insights`]: connected, last ACKed version per type, last
/// NACK with Envoy's error text; a DPP that never connected reads disconnected), and
/// inspections are computed here ([`crate::inspect`], [`crate::envoy_admin`]).
impl ControlPlaneApi for AppState {
    fn mode(&self) -> &'static str {
        if self.federated {
            "zone (federated)"
        } else {
            "zone"
        }
    }

    fn store(&self) -> std::sync::Arc<dyn umbra_store::Store> {
        self.store.contract()
    }

    fn insight(&self, stored: &umbra_store::Stored) -> (Option<Value>, String) {
        let meta = &stored.resource.meta;
        let insight = self
            .insights
            .get(
                umbra_core::dataplane::proxy_key_mesh(stored.resource.ty(), &meta.mesh),
                &meta.name,
            )
            .unwrap_or_default();
        // With replicas, the one the Envoy is connected to; else the zone.
        let instance = insight
            .replica
            .clone()
            .unwrap_or_else(|| self.reconciler.zone().to_owned());
        (
            Some(serde_json::to_value(insight).unwrap_or_default()),
            instance,
        )
    }

    /// Kuma's `GlobalInsight` ([`crate::global_insight`]).
    async fn global_insight(&self) -> Result<Value, ApiError> {
        let insight = |s: &umbra_store::Stored| self.insight(s).0;
        crate::global_insight::global_insight(&*self.store.contract(), &self.insights, &insight)
            .await
    }

    /// Computed here: `_config` and `_rules` by [`crate::inspect`], the admin views by
    /// [`crate::envoy_admin`], `_observed` by [`crate::observed`].
    async fn inspect(&self, what: Inspection, query: QueryPairs) -> Result<Response, ApiError> {
        let store = self.store.clone();
        let doc = match what {
            Inspection::Admin(proxy, view) => return self.envoy_admin(&proxy, view, &query).await,
            Inspection::Config(Proxy::Dataplane { mesh, name }) => {
                let zone = self.reconciler.zone_view();
                inspect::answer(store, zone, mesh, name, &query, inspect::config).await?
            }
            Inspection::Config(Proxy::ZoneIngress { name }) => {
                let zone = self.reconciler.zone_view();
                crate::inspect_zone_proxies::answer_ingress(store, zone, name, &query).await?
            }
            Inspection::Config(Proxy::ZoneEgress { name }) => {
                let zone = self.reconciler.zone_view();
                crate::inspect_zone_proxies::answer_egress(store, zone, name, &query).await?
            }
            Inspection::Rules { mesh, name } => {
                let zone = self.reconciler.zone_view();
                inspect::answer(store, zone, mesh, name, &query, inspect::rules).await?
            }
            Inspection::Observed { mesh, ty, name } => {
                let report = crate::observed::report(
                    &self.store,
                    &self.insights,
                    Some(&self.reconciler),
                    self.reconciler.zone(),
                    &umbra_core::resource::ResourceKey { ty, mesh, name },
                    tokio::time::Instant::now() + crate::observed::API_DEADLINE,
                )
                .await?;
                serde_json::to_value(report).map_err(|e| {
                    ApiError::status(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
                })?
            }
            Inspection::GatewayRules { mesh, name } => {
                let q = inspect::InspectQuery::parse(&query)?;
                inspect::blocking(move || {
                    let resources = store.mesh_resources(&mesh);
                    umbra_api::inspect_rules::gateway_rules(&resources, &mesh, &name, q)
                })
                .await?
            }
        };
        Ok(Json(doc).into_response())
    }
}

impl AppState {
    /// `proxy`'s Envoy admin `view` ([`crate::envoy_admin`]), answered with Envoy's content type.
    async fn envoy_admin(
        &self,
        proxy: &Proxy,
        view: AdminView,
        query: &[(String, String)],
    ) -> Result<Response, ApiError> {
        let (mesh, name) = proxy.mesh_and_name();
        let key = DpKey::new(mesh, name);
        let answer = crate::envoy_admin::inspect(
            &self.store,
            &self.insights,
            Some(&self.reconciler),
            &key,
            view,
            query,
        )
        .await?;
        Ok((
            [(axum::http::header::CONTENT_TYPE, answer.content_type)],
            answer.body,
        )
            .into_response())
    }
}

/// The API router.
pub fn router(state: AppState) -> Router {
    let router = service::base(
        OPENAPI_YAML,
        get(shared_routes::index::<AppState>),
        get(ready),
    )
    .route(
        "/global/accept-store",
        axum::routing::post(accept_global_store),
    )
    .route("/dp-server/ca.pem", get(dp_server_ca))
    .merge(umbra_api::tokens::routes())
    .merge(crud::routes())
    .merge(umbra_api::about::routes())
    .merge(shared_routes::routes());
    let trust = state.trust.clone();
    service::layered(umbra_api::authn::protect(router, trust)).with_state(state)
}

/// `GET /dp-server/ca.pem`: the CA certificate DPPs verify the data-plane server (ADS and
/// `/bootstrap`) with (kuma-dp's `--ca-cert-file`).
async fn dp_server_ca(State(st): State<AppState>) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse as _;
    let pem = st
        .dp_server_ca
        .clone()
        .ok_or_else(|| ApiError::not_found("the data-plane server has no CA (plaintext, or an operator certificate without --dp-server-tls-ca-file)"))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-pem-file")],
        pem,
    )
        .into_response())
}

/// `GET /ready`: whether the zone serves its API and ADS from a store it can stand behind.
///
/// - A standalone zone is ready once it serves (its store is loaded at start).
/// - A federated zone is ready once it holds a whole sync from its Global: the KDS link came
///   up and the first generation (every type, ended by the commit marker) was applied
///   (`global.synced`), in this process or in an earlier run whose `--data-dir` store it
///   loaded. Until then it answers 503 with `status: notReady` and the `reason`, since the
///   Envoys it would serve would get a configuration without the Global's Meshes and
///   policies (an unreachable Global, a refused token, a bad CA all stay visible here as
///   `global.lastError`).
/// - A zone that has synced and later loses its Global stays ready (200) with
///   `global.connected: false` and the `lastError`: like Kuma's zone CP it keeps serving its
///   last state to its Envoys, which is still right for them, and picks up changes again when
///   the link is back. Likewise when the Global's store is not the one it synced from
///   (`global.globalStoreChanged`).
///
/// The body, 200 or 503, gives the `status`, the store revision, the revision the reconciler
/// has brought every DPP's snapshot up to (`reconciledRevision`; equal once nothing is
/// pending), whether policies come from a Global and, when they do, the state of the KDS link
/// (`global`: connected, the Global address connected to or being tried (`globalAddress`: one
/// of the replicas' when the zone has several), synced, attempts, last error, responses
/// applied).
async fn ready(State(st): State<AppState>) -> (axum::http::StatusCode, Json<Value>) {
    let mut body = json!({
        "status": "ready",
        "revision": st.store.revision(),
        "reconciledRevision": st.reconciler.reconciled_revision(),
        "federated": st.federated,
    });
    let mut code = axum::http::StatusCode::OK;
    if st.federated {
        let status = st
            .kds
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if !status.synced {
            code = axum::http::StatusCode::SERVICE_UNAVAILABLE;
            body["status"] = "notReady".into();
            body["reason"] = if status.connected {
                "connected to the Global; its first sync is not applied yet".into()
            } else {
                match &status.last_error {
                    Some(e) => format!("has not synced with its Global yet: {e}").into(),
                    None => "has not synced with its Global yet (connecting)".into(),
                }
            };
        }
        body["global"] = serde_json::to_value(status).unwrap_or_default();
    }
    if let Some(replicas) = &st.replicas {
        // As the Global's: this replica, whether it leads (the leader holds the zone's KDS
        // stream), and every live replica (`leader` marks the one that does).
        let me = replicas.me();
        body["replica"] = st.insights.replica().unwrap_or_default().into();
        body["replicaId"] = json!(me.as_ref().map(|m| m.id));
        body["leader"] = (*replicas.leader().borrow()).into();
        match replicas.replicas().await {
            Ok(all) => {
                let alive: Vec<_> = all.into_iter().filter(|r| r.alive).collect();
                body["replicas"] = serde_json::to_value(alive).unwrap_or_default();
            }
            Err(e) => {
                // This replica lost the database: it cannot tell which replicas live.
                code = axum::http::StatusCode::SERVICE_UNAVAILABLE;
                body["status"] = "notReady".into();
                body["reason"] = format!("cannot list the zone's replicas: {e}").into();
            }
        }
    }
    (code, Json(body))
}

/// `POST /global/accept-store`: an operator confirms that the Global this zone now talks to
/// (whose store is not the one the zone synced from: `/ready` says `globalStoreChanged`) is
/// the one to follow. The zone records its store identity and reconnects; from then on the
/// Global's deletions apply again. 409 when there is nothing to accept.
async fn accept_global_store(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let status = st
        .kds
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let (Some(offered), true) = (status.global_store.clone(), status.global_store_changed) else {
        return Err(ApiError::status(
            axum::http::StatusCode::CONFLICT,
            "nothing to accept: this zone follows the Global store it synced from",
        ));
    };
    st.store.record_global_store(&offered)?;
    tracing::warn!(previous = ?status.recorded_global_store, accepted = %offered, "the operator accepted the Global's store; resyncing");
    st.kds_resync.notify_one();
    Ok(Json(json!({
        "accepted": offered,
        "previous": status.recorded_global_store,
    })))
}
