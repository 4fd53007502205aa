//! The zone's HTTP API (axum), Kuma's resource paths:
//! - `GET /meshes`, `GET|PUT|DELETE /meshes/{name}`;
//! - `GET /meshes/{mesh}/{plural}` (paged: `size`, `offset`; `{total, items, next}`),
//!   `GET|PUT|DELETE /meshes/{mesh}/{plural}/{name}`;
//! - inspect: `GET /meshes/{mesh}/dataplanes/{name}/_config` and `.../_rules` ([`crate::inspect`]).
//!
//! Bodies are YAML or JSON in Kuma's universal format; invalid resources get a 400 with every
//! `{field, message}` and nothing is stored. In a federated zone (a Global is configured),
//! policies are read-only here: they come from the Global.

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use umbra_core::resource::{ResourceKey, ResourceType, TypeKind};

use crate::inspect;
use crate::store::{Store, StoreError, Stored};
use umbra_api::error::ApiError;
use umbra_api::paging::PageParams;
use umbra_api::resource::{decode_for_path, resource_type};

/// The OpenAPI 3 document of this API, served at `/openapi.yaml` (checked against the router
/// by `tests/openapi.rs`).
pub const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

/// Every route of the router as `(path, methods)`, the list the OpenAPI test compares with.
pub const ROUTES: &[(&str, &[&str])] = &[
    ("/", &["get"]),
    ("/openapi.yaml", &["get"]),
    ("/metrics", &["get"]),
    ("/healthz", &["get"]),
    ("/ready", &["get"]),
    ("/meshes", &["get"]),
    ("/meshes/{name}", &["get", "put", "delete"]),
    ("/meshes/{mesh}/{plural}", &["get"]),
    ("/meshes/{mesh}/{plural}/{name}", &["get", "put", "delete"]),
    ("/meshes/{mesh}/dataplanes+insights/{name}", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/_config", &["get"]),
    ("/meshes/{mesh}/dataplanes/{name}/_rules", &["get"]),
];

/// Largest accepted request body (bytes).
pub const MAX_BODY_BYTES: usize = 4 << 20;
/// Largest page of a list.
pub const MAX_PAGE_SIZE: usize = umbra_api::paging::MAX_PAGE_SIZE;

/// Shared state of the API.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The zone store.
    pub store: Store,
    /// `true` when a Global CP is configured: policies are read-only on the zone.
    pub federated: bool,
    /// xDS connection insights (connected, ACKed versions, NACKs).
    pub insights: std::sync::Arc<crate::ads::Insights>,
}

/// The API router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/openapi.yaml", get(openapi))
        .route("/", get(index))
        .route("/metrics", get(umbra_api::metrics::serve))
        .route("/healthz", get(umbra_api::process::healthz))
        .route("/ready", get(ready))
        .route("/meshes", get(list_meshes))
        .route(
            "/meshes/{name}",
            get(get_mesh).put(put_mesh).delete(delete_mesh),
        )
        .route("/meshes/{mesh}/{plural}", get(list_resources))
        .route(
            "/meshes/{mesh}/{plural}/{name}",
            get(get_resource).put(put_resource).delete(delete_resource),
        )
        .route(
            "/meshes/{mesh}/dataplanes/{name}/_config",
            get(inspect_config),
        )
        .route(
            "/meshes/{mesh}/dataplanes/{name}/_rules",
            get(inspect_rules),
        )
        .route(
            "/meshes/{mesh}/dataplanes+insights/{name}",
            get(dataplane_insight),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(umbra_api::negotiate::yaml_output))
        .layer(axum::middleware::from_fn(umbra_api::metrics::track_http))
        .layer(axum::middleware::from_fn(umbra_api::process::trace_http))
        .with_state(state)
}

/// `GET /`: what answers here (Kuma's index: product, version, mode).
async fn index(State(st): State<AppState>) -> Json<Value> {
    Json(json!({
        "product": "Umbra",
        "version": env!("CARGO_PKG_VERSION"),
        "mode": if st.federated { "zone (federated)" } else { "zone" },
        "tagline": "Umbra: a federated control plane for Kuma-style meshes",
    }))
}

/// `GET /ready`: the zone serves its API and ADS from its store (loaded at start); the body
/// gives the store revision and whether policies come from a Global.
async fn ready(State(st): State<AppState>) -> Json<Value> {
    Json(json!({
        "status": "ready",
        "revision": st.store.revision(),
        "federated": st.federated,
    }))
}

fn store_err(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound(k) => ApiError::not_found(format!("{k} not found")),
        StoreError::Conflict { .. } => ApiError::status(StatusCode::CONFLICT, e.to_string()),
        StoreError::NoMesh(m) => ApiError::status(
            StatusCode::BAD_REQUEST,
            format!("mesh {m:?} does not exist"),
        ),
    }
}

fn stored_json(s: &Stored) -> Value {
    s.resource.to_value()
}

async fn list_meshes(
    State(st): State<AppState>,
    Query(page): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    paged(st.store.list(ResourceType::Mesh, ""), &page, "/meshes")
}

async fn get_mesh(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let key = ResourceKey {
        ty: ResourceType::Mesh,
        mesh: String::new(),
        name: name.clone(),
    };
    st.store
        .get(&key)
        .map(|s| Json(stored_json(&s)))
        .ok_or_else(|| ApiError::not_found(format!("mesh {name:?} not found")))
}

async fn put_mesh(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if st.federated {
        return Err(read_only("Mesh"));
    }
    put(&st, ResourceType::Mesh, "", &name, &body)
}

async fn delete_mesh(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if st.federated {
        return Err(read_only("Mesh"));
    }
    let key = ResourceKey {
        ty: ResourceType::Mesh,
        mesh: String::new(),
        name,
    };
    st.store.delete(&key).map_err(store_err)?;
    Ok(Json(json!({})))
}

async fn list_resources(
    State(st): State<AppState>,
    Path((mesh, plural)): Path<(String, String)>,
    Query(page): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    mesh_exists(&st.store, &mesh)?;
    paged(
        st.store.list(ty, &mesh),
        &page,
        &format!("/meshes/{mesh}/{plural}"),
    )
}

async fn get_resource(
    State(st): State<AppState>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    let key = ResourceKey { ty, mesh, name };
    st.store
        .get(&key)
        .map(|s| Json(stored_json(&s)))
        .ok_or_else(|| ApiError::not_found(format!("{key} not found")))
}

async fn put_resource(
    State(st): State<AppState>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ty = resource_type(&plural)?;
    if st.federated && ty.kind() != TypeKind::Infra {
        return Err(read_only(ty.name()));
    }
    put(&st, ty, &mesh, &name, &body)
}

async fn delete_resource(
    State(st): State<AppState>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    if st.federated && ty.kind() != TypeKind::Infra {
        return Err(read_only(ty.name()));
    }
    st.store
        .delete(&ResourceKey { ty, mesh, name })
        .map_err(store_err)?;
    Ok(Json(json!({})))
}

fn read_only(ty: &str) -> ApiError {
    ApiError::status(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{ty} resources are managed by the Global CP in a federated zone; apply them on the Global"),
    )
}

fn mesh_exists(store: &Store, mesh: &str) -> Result<(), ApiError> {
    let key = ResourceKey {
        ty: ResourceType::Mesh,
        mesh: String::new(),
        name: mesh.to_owned(),
    };
    store
        .get(&key)
        .map(|_| ())
        .ok_or_else(|| ApiError::not_found(format!("mesh {mesh:?} not found")))
}

/// Decode, check against the path, validate, store. 201 on create, 200 on update.
fn put(
    st: &AppState,
    ty: ResourceType,
    mesh: &str,
    name: &str,
    body: &[u8],
) -> Result<Response, ApiError> {
    let resource = decode_for_path(ty, mesh, name, body)?;
    let (stored, created) = st.store.put(resource, None).map_err(store_err)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(stored_json(&stored))).into_response())
}

fn paged(
    items: Vec<Stored>,
    query: &[(String, String)],
    path: &str,
) -> Result<Json<Value>, ApiError> {
    let page = PageParams::parse(query)?;
    let total = items.len();
    let items: Vec<Value> = items
        .iter()
        .skip(page.offset)
        .take(page.size)
        .map(stored_json)
        .collect();
    Ok(Json(page.body(items, total, path)))
}

async fn inspect_config(
    State(st): State<AppState>,
    Path((mesh, name)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    inspect::answer(st.store, mesh, name, &q, inspect::config)
        .await
        .map(Json)
}

async fn inspect_rules(
    State(st): State<AppState>,
    Path((mesh, name)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    inspect::answer(st.store, mesh, name, &q, inspect::rules)
        .await
        .map(Json)
}

/// Kuma's `dataplanes+insights`: the Dataplane and its xDS connection state (connected, last
/// ACKed version per type, last NACK with Envoy's error text).
async fn dataplane_insight(
    State(st): State<AppState>,
    Path((mesh, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let key = ResourceKey {
        ty: ResourceType::Dataplane,
        mesh: mesh.clone(),
        name: name.clone(),
    };
    let dp = st
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(format!("{key} not found")))?;
    let insight = st.insights.get(&mesh, &name).unwrap_or_default();
    Ok(Json(
        json!({"dataplane": stored_json(&dp), "dataplaneInsight": insight}),
    ))
}

async fn openapi() -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/yaml")],
        OPENAPI_YAML,
    )
}
