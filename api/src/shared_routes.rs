//! The routes both CPs serve with the same paths, parameters and answers, written once over the
//! [`ControlPlaneApi`] trait a CP's state implements ([`routes`], [`ROUTES`]), as
//! [`crate::crud::routes`] is over the store (Kuma 2.7's API paths):
//! - `GET /`: the index (`{product, version, mode, tagline}`, [`index`]);
//! - Kuma's `DataplaneOverview` ([`crate::insights`]): `GET
//!   /meshes/{mesh}/dataplanes+insights/{name}` (404 for an unknown Dataplane), and paged and
//!   filtered like the Dataplane list (`name=`, `label=`, `tag=`, `gateway=`),
//!   `GET /meshes/{mesh}/dataplanes+insights` (404 for an unknown mesh) and
//!   `GET /dataplanes+insights`;
//! - Kuma's `ZoneEgressOverview` ([`crate::insights::zone_egress_overview`]): one at `GET
//!   /zoneegressoverviews/{name}` (Kuma's legacy path), `/zoneegresses/{name}/_overview`
//!   (Kuma's) and `/zoneegresses+insights/{name}` (named as the other `+insights` views; 404
//!   for an unknown ZoneEgress), and paged and filtered like the ZoneEgress list (`name=`,
//!   `label=`) at `GET /zoneegressoverviews`, `/zoneegresses/_overview` and
//!   `/zoneegresses+insights`;
//! - Kuma's `GlobalInsight` (`GET /global-insight`, counted by the CP) and `MeshInsight`
//!   (`GET /mesh-insights` paged, `GET /mesh-insights/{mesh}`: [`crate::mesh_insights`]);
//! - Kuma's `ServiceInsight` per `kuma.io/service` ([`crate::service_insights`]):
//!   `GET /meshes/{mesh}/service-insights` (paged, `name=`, `type=`) and `.../{name}`;
//! - per-proxy inspection: `GET /meshes/{mesh}/dataplanes/{name}/_config` and `.../_rules`,
//!   `GET /zone-ingresses/{name}/_config` (also `/zoneingresses/{name}/_config`),
//!   `GET /zoneegresses/{name}/_config`, and the Envoy
//!   admin views `xds`, `stats` and `clusters` of a DPP (`/meshes/{mesh}/dataplanes/{name}/…`),
//!   a ZoneIngress (`/zoneingresses/{name}/…`) or a ZoneEgress (`/zoneegresses/{name}/…`,
//!   Kuma's `inspectZoneEgressAdmin`);
//! - observe mode's evidence (issue 40): `GET /meshes/{mesh}/{plural}/{name}/_observed`, what
//!   an observed shadow policy would have done to its DPPs' traffic ([`umbra_core::observed`]).
//!
//! What differs between the CPs is the trait's: where a DPP's insight comes from (a zone's own
//! xDS insights; on the Global, what the owning zone reported over KDS), how `GlobalInsight`
//! counts zones, and who answers an inspection (a zone computes it; the Global asks the owning
//! zone over KDS). Paths, extractors (and so their 400s), paging and error mapping are here.

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_core::resource::ResourceKey;
use umbra_store::{Store, Stored};

use crate::crud::get_stored;
use crate::error::ApiError;
use crate::service::Route;

/// Every route [`routes`] serves and its methods, as each CP's OpenAPI document lists them.
pub const ROUTES: &[Route] = &[
    ("/meshes/{mesh}/dataplanes+insights/{name}", &["get"]),
    ("/meshes/{mesh}/dataplanes+insights", &["get"]),
    ("/dataplanes+insights", &["get"]),
    ("/zoneegressoverviews", &["get"]),
    ("/zoneegressoverviews/{name}", &["get"]),
    ("/zoneegresses/_overview", &["get"]),
    ("/zoneegresses/{name}/_overview", &["get"]),
    ("/zoneegresses+insights", &["get"]),
    ("/zoneegresses+insights/{name}", &["get"]),
    ("/meshes/{mesh}/{plural}/{name}/_observed", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/_config", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/_rules", &["get"]),
    ("/meshes/{mesh}/meshgateways/{name}/_rules", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/xds", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/stats", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/clusters", &["get"]),
    ("/zoneingresses/{name}/xds", &["get"]),
    ("/zoneingresses/{name}/stats", &["get"]),
    ("/zoneingresses/{name}/clusters", &["get"]),
    ("/zoneegresses/{name}/xds", &["get"]),
    ("/zoneegresses/{name}/stats", &["get"]),
    ("/zoneegresses/{name}/clusters", &["get"]),
    ("/zone-ingresses/{name}/_config", &["get"]),
    ("/zoneingresses/{name}/_config", &["get"]),
    ("/zoneegresses/{name}/_config", &["get"]),
    ("/global-insight", &["get"]),
    ("/mesh-insights", &["get"]),
    ("/mesh-insights/{mesh}", &["get"]),
    ("/meshes/{mesh}/service-insights", &["get"]),
    ("/meshes/{mesh}/service-insights/{name}", &["get"]),
];

/// A request's query, as `(key, value)` pairs in order (repeatable keys).
pub type QueryPairs = Vec<(String, String)>;

/// The proxy an inspection names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// Dataplane `name` of mesh `mesh` (`/meshes/{mesh}/dataplanes/{name}/…`).
    Dataplane {
        /// Its mesh.
        mesh: String,
        /// Its name.
        name: String,
    },
    /// ZoneIngress `name` (`/zone-ingresses/{name}/…`, `/zoneingresses/{name}/…`).
    ZoneIngress {
        /// Its name.
        name: String,
    },
    /// ZoneEgress `name` (`/zoneegresses/{name}/…`).
    ZoneEgress {
        /// Its name.
        name: String,
    },
}

impl Proxy {
    /// The `(mesh, name)` the CPs key a proxy by: a ZoneIngress has the empty mesh, a
    /// ZoneEgress [`umbra_core::dataplane::ZONE_EGRESS_KEY_MESH`].
    pub fn mesh_and_name(&self) -> (&str, &str) {
        match self {
            Proxy::Dataplane { mesh, name } => (mesh, name),
            Proxy::ZoneIngress { name } => ("", name),
            Proxy::ZoneEgress { name } => (umbra_core::dataplane::ZONE_EGRESS_KEY_MESH, name),
        }
    }
}

/// An Envoy admin view of a proxy (the last path segment, Kuma's `{type}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminView {
    /// `xds`: Envoy's `/config_dump`.
    Xds,
    /// `stats`: `/stats`.
    Stats,
    /// `clusters`: `/clusters`.
    Clusters,
}

impl AdminView {
    /// Every view, by its path segment.
    pub const ALL: [(&'static str, AdminView); 3] = [
        ("xds", AdminView::Xds),
        ("stats", AdminView::Stats),
        ("clusters", AdminView::Clusters),
    ];

    /// The path segment naming this view (`xds`, `stats`, `clusters`).
    pub fn segment(self) -> &'static str {
        match self {
            AdminView::Xds => "xds",
            AdminView::Stats => "stats",
            AdminView::Clusters => "clusters",
        }
    }
}

/// What a route inspects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspection {
    /// `_config` of a Dataplane or a ZoneIngress (Kuma's inspect config dump; no route asks it
    /// of a ZoneEgress).
    Config(Proxy),
    /// `_rules` of Dataplane `name` in `mesh` (Kuma's inspect rules).
    Rules {
        /// Its mesh.
        mesh: String,
        /// Its name.
        name: String,
    },
    /// `_rules` of MeshGateway `name` in `mesh`: the rules a builtin gateway it selects gets
    /// (Kuma's `rulesForResource`, [`crate::inspect_rules::gateway_rules`]).
    GatewayRules {
        /// Its mesh.
        mesh: String,
        /// Its name.
        name: String,
    },
    /// An Envoy admin view of a Dataplane, a ZoneIngress or a ZoneEgress.
    Admin(Proxy, AdminView),
    /// `_observed` of policy `name` of type `ty` in `mesh`: what it would have done to the
    /// traffic its DPPs saw, from their Envoys' counters ([`umbra_core::observed::Report`]).
    Observed {
        /// Its mesh.
        mesh: String,
        /// Its type.
        ty: umbra_core::resource::ResourceType,
        /// Its name.
        name: String,
    },
}

/// What a CP's state provides for the [`routes`] both CPs serve: the parts whose source differs
/// between the Global and a zone.
pub trait ControlPlaneApi: Clone + Send + Sync + 'static {
    /// `mode` in the index (`GET /`): `global`, `zone` or `zone (federated)`.
    fn mode(&self) -> &'static str;

    /// The store the overviews and insights are read from.
    fn store(&self) -> Arc<dyn Store>;

    /// The xDS insight reported for stored Dataplane (or ZoneIngress, or ZoneEgress: keyed by
    /// [`umbra_core::dataplane::proxy_key_mesh`]) `stored` (`None`: none reported) and the control-plane instance keeping it (the zone's name), as
    /// [`crate::insights::dataplane_overview`] takes them.
    fn insight(&self, stored: &Stored) -> (Option<Value>, String);

    /// `GET /global-insight`: Kuma's `GlobalInsight` (built with
    /// [`crate::mesh_insights::global_insight`]).
    ///
    /// # Errors
    /// The store's error.
    fn global_insight(&self) -> impl Future<Output = Result<Value, ApiError>> + Send;

    /// An inspection of a proxy (`_config`, `_rules`, an Envoy admin view), under the request's
    /// `query`: the JSON answer (`_config`, `_rules`) or the proxy's admin answer as Envoy gives
    /// it (its content type and body).
    ///
    /// # Errors
    /// 404 for an unknown proxy, 400 for a bad query, 503 when a proxy's admin cannot be
    /// reached; on the Global, the errors of asking the owning zone (503 offline or late, 502
    /// too large, the zone's own error).
    fn inspect(
        &self,
        what: Inspection,
        query: QueryPairs,
    ) -> impl Future<Output = Result<Response, ApiError>> + Send;
}

/// The [`ROUTES`], answered from the router's state `S`.
pub fn routes<S: ControlPlaneApi>() -> Router<S> {
    let mut router = Router::new()
        .route(
            "/meshes/{mesh}/dataplanes+insights/{name}",
            get(dataplane_insight::<S>),
        )
        .route(
            "/meshes/{mesh}/dataplanes+insights",
            get(dataplane_insights::<S>),
        )
        .route("/dataplanes+insights", get(all_dataplane_insights::<S>))
        .route("/zoneegressoverviews", get(zone_egress_insights::<S>))
        .route("/zoneegressoverviews/{name}", get(zone_egress_insight::<S>))
        .route("/zoneegresses/_overview", get(zone_egress_insights::<S>))
        .route(
            "/zoneegresses/{name}/_overview",
            get(zone_egress_insight::<S>),
        )
        .route("/zoneegresses+insights", get(zone_egress_insights::<S>))
        .route(
            "/zoneegresses+insights/{name}",
            get(zone_egress_insight::<S>),
        )
        .route(
            "/meshes/{mesh}/dataplanes/{name}/_config",
            get(dataplane_config::<S>),
        )
        .route(
            "/meshes/{mesh}/dataplanes/{name}/_rules",
            get(dataplane_rules::<S>),
        )
        .route(
            "/meshes/{mesh}/meshgateways/{name}/_rules",
            get(gateway_rules::<S>),
        )
        .route("/zone-ingresses/{name}/_config", get(ingress_config::<S>))
        .route("/zoneingresses/{name}/_config", get(ingress_config::<S>))
        .route("/zoneegresses/{name}/_config", get(egress_config::<S>))
        .route("/global-insight", get(global_insight::<S>))
        .route("/mesh-insights", get(mesh_insights::<S>))
        .route("/mesh-insights/{mesh}", get(mesh_insight::<S>))
        .route(
            "/meshes/{mesh}/service-insights",
            get(service_insights::<S>),
        )
        .route(
            "/meshes/{mesh}/service-insights/{name}",
            get(service_insight::<S>),
        );
    router = router.route(
        "/meshes/{mesh}/{plural}/{name}/_observed",
        get(
            |State(cp): State<S>,
             Path((mesh, plural, name)): Path<(String, String, String)>,
             Query(query): Query<QueryPairs>| async move {
                let ty = crate::resource::resource_type(&plural)?;
                cp.inspect(Inspection::Observed { mesh, ty, name }, query)
                    .await
            },
        ),
    );
    for (segment, view) in AdminView::ALL {
        router = router
            .route(
                &format!("/meshes/{{mesh}}/dataplanes/{{name}}/{segment}"),
                get(
                    move |State(cp): State<S>,
                          Path((mesh, name)): Path<(String, String)>,
                          Query(query): Query<QueryPairs>| async move {
                        let proxy = Proxy::Dataplane { mesh, name };
                        cp.inspect(Inspection::Admin(proxy, view), query).await
                    },
                ),
            )
            .route(
                &format!("/zoneingresses/{{name}}/{segment}"),
                get(
                    move |State(cp): State<S>,
                          Path(name): Path<String>,
                          Query(query): Query<QueryPairs>| async move {
                        let proxy = Proxy::ZoneIngress { name };
                        cp.inspect(Inspection::Admin(proxy, view), query).await
                    },
                ),
            )
            .route(
                &format!("/zoneegresses/{{name}}/{segment}"),
                get(
                    move |State(cp): State<S>,
                          Path(name): Path<String>,
                          Query(query): Query<QueryPairs>| async move {
                        let proxy = Proxy::ZoneEgress { name };
                        cp.inspect(Inspection::Admin(proxy, view), query).await
                    },
                ),
            );
    }
    router
}

/// `GET /`: what answers here (Kuma's index: product, version, mode).
pub async fn index<S: ControlPlaneApi>(State(cp): State<S>) -> Json<Value> {
    Json(json!({
        "product": "Umbra",
        "version": env!("CARGO_PKG_VERSION"),
        "mode": cp.mode(),
        "tagline": "Umbra: a federated control plane for Kuma-style meshes",
    }))
}

/// `GET /meshes/{mesh}/dataplanes+insights/{name}`: the Dataplane's `DataplaneOverview` with
/// its insight ([`ControlPlaneApi::insight`]); 404 when the Dataplane is unknown.
async fn dataplane_insight<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path((mesh, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let key = ResourceKey::dataplane(mesh.as_str(), name.as_str());
    let stored = get_stored(&*cp.store(), &key).await?;
    let (insight, instance) = cp.insight(&stored);
    Ok(Json(crate::insights::dataplane_overview(
        &stored, insight, &instance,
    )))
}

/// `GET /meshes/{mesh}/dataplanes+insights`: a page of `DataplaneOverview`s, with the list
/// filters (`name=`, `label=`, `tag=`, `gateway=`); 404 for an unknown mesh.
async fn dataplane_insights<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(mesh): Path<String>,
    Query(query): Query<QueryPairs>,
) -> Result<Json<Value>, ApiError> {
    let path = format!("/meshes/{mesh}/dataplanes+insights");
    crate::insights::dataplane_overviews(&*cp.store(), Some(&mesh), &query, &path, |dp| {
        cp.insight(dp)
    })
    .await
}

/// `GET /dataplanes+insights`: [`dataplane_insights`] across every mesh.
async fn all_dataplane_insights<S: ControlPlaneApi>(
    State(cp): State<S>,
    Query(query): Query<QueryPairs>,
) -> Result<Json<Value>, ApiError> {
    crate::insights::dataplane_overviews(&*cp.store(), None, &query, "/dataplanes+insights", |dp| {
        cp.insight(dp)
    })
    .await
}

/// `GET /zoneegressoverviews/{name}` (and its aliases): the ZoneEgress's `ZoneEgressOverview`
/// with its insight ([`ControlPlaneApi::insight`]); 404 when the ZoneEgress is unknown.
async fn zone_egress_insight<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let key = ResourceKey {
        ty: umbra_core::resource::ResourceType::ZoneEgress,
        mesh: String::new(),
        name,
    };
    let stored = get_stored(&*cp.store(), &key).await?;
    let (insight, instance) = cp.insight(&stored);
    Ok(Json(crate::insights::zone_egress_overview(
        &stored, insight, &instance,
    )))
}

/// `GET /zoneegressoverviews` (and its aliases): a page of `ZoneEgressOverview`s, with the
/// list filters (`name=`, `label=`); `next` keeps the path asked.
async fn zone_egress_insights<S: ControlPlaneApi>(
    State(cp): State<S>,
    uri: axum::http::Uri,
    Query(query): Query<QueryPairs>,
) -> Result<Json<Value>, ApiError> {
    crate::insights::zone_egress_overviews(&*cp.store(), &query, uri.path(), |ze| cp.insight(ze))
        .await
}

/// `GET /global-insight` ([`ControlPlaneApi::global_insight`]).
async fn global_insight<S: ControlPlaneApi>(State(cp): State<S>) -> Result<Json<Value>, ApiError> {
    cp.global_insight().await.map(Json)
}

/// `GET /mesh-insights`: a page of Kuma `MeshInsight`s.
async fn mesh_insights<S: ControlPlaneApi>(
    State(cp): State<S>,
    Query(query): Query<QueryPairs>,
) -> Result<Json<Value>, ApiError> {
    let insight = |s: &Stored| cp.insight(s).0;
    crate::mesh_insights::mesh_insights(&*cp.store(), &query, &insight)
        .await
        .map(Json)
}

/// `GET /mesh-insights/{mesh}`: one mesh's `MeshInsight`; 404 for an unknown mesh.
async fn mesh_insight<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(mesh): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let insight = |s: &Stored| cp.insight(s).0;
    crate::mesh_insights::one_mesh_insight(&*cp.store(), &mesh, &insight)
        .await
        .map(Json)
}

/// `GET /meshes/{mesh}/service-insights`: a page of the mesh's `ServiceInsight`s; 404 for an
/// unknown mesh.
async fn service_insights<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(mesh): Path<String>,
    Query(query): Query<QueryPairs>,
) -> Result<Json<Value>, ApiError> {
    let insight = |s: &Stored| cp.insight(s).0;
    let path = format!("/meshes/{mesh}/service-insights");
    crate::service_insights::service_insights(&*cp.store(), &mesh, &query, &path, &insight)
        .await
        .map(Json)
}

/// `GET /meshes/{mesh}/service-insights/{name}`: one service's `ServiceInsight`; 404 for an
/// unknown mesh or service.
async fn service_insight<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path((mesh, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let insight = |s: &Stored| cp.insight(s).0;
    crate::service_insights::service_insight(&*cp.store(), &mesh, &name, &insight)
        .await
        .map(Json)
}

/// `GET /meshes/{mesh}/dataplanes/{name}/_config` ([`ControlPlaneApi::inspect`]).
async fn dataplane_config<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path((mesh, name)): Path<(String, String)>,
    Query(query): Query<QueryPairs>,
) -> Result<Response, ApiError> {
    let proxy = Proxy::Dataplane { mesh, name };
    cp.inspect(Inspection::Config(proxy), query).await
}

/// `GET /zone-ingresses/{name}/_config` and `/zoneingresses/{name}/_config`
/// ([`ControlPlaneApi::inspect`]).
async fn ingress_config<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(name): Path<String>,
    Query(query): Query<QueryPairs>,
) -> Result<Response, ApiError> {
    let proxy = Proxy::ZoneIngress { name };
    cp.inspect(Inspection::Config(proxy), query).await
}

/// `GET /zoneegresses/{name}/_config` ([`ControlPlaneApi::inspect`]).
async fn egress_config<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path(name): Path<String>,
    Query(query): Query<QueryPairs>,
) -> Result<Response, ApiError> {
    let proxy = Proxy::ZoneEgress { name };
    cp.inspect(Inspection::Config(proxy), query).await
}

/// `GET /meshes/{mesh}/dataplanes/{name}/_rules` ([`ControlPlaneApi::inspect`]).
async fn dataplane_rules<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path((mesh, name)): Path<(String, String)>,
    Query(query): Query<QueryPairs>,
) -> Result<Response, ApiError> {
    cp.inspect(Inspection::Rules { mesh, name }, query).await
}

/// `GET /meshes/{mesh}/meshgateways/{name}/_rules` ([`ControlPlaneApi::inspect`]).
async fn gateway_rules<S: ControlPlaneApi>(
    State(cp): State<S>,
    Path((mesh, name)): Path<(String, String)>,
    Query(query): Query<QueryPairs>,
) -> Result<Response, ApiError> {
    cp.inspect(Inspection::GatewayRules { mesh, name }, query)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_views_are_kumas_path_segments() {
        for (segment, view) in AdminView::ALL {
            assert_eq!(view.segment(), segment);
        }
    }
}
