//! Kuma's resource REST API, written once over the [`Store`] contract and mounted by both CPs
//! ([`routes`]):
//! - `GET /meshes`, `GET|PUT|DELETE /meshes/{name}`;
//! - `GET /meshes/{mesh}/{plural}`, `GET|PUT|DELETE /meshes/{mesh}/{plural}/{name}`;
//! - `GET /{plural}`: a mesh-scoped type across every mesh (404 for another or unknown type);
//! - `GET /global-secrets`, `GET|PUT|DELETE /global-secrets/{name}`;
//! - `GET /zone-ingresses`, `GET|PUT|DELETE /zone-ingresses/{name}` (Kuma's path; also under
//!   `/zoneingresses`, the name Kuma's `+insights` views use);
//! - `GET /zoneegresses`, `GET|PUT|DELETE /zoneegresses/{name}` (Kuma's ZoneEgress path;
//!   written on a zone only, read-only on the Global, which gets them from zones over KDS).
//!
//! Lists are paged (`size`, `offset`; `{total, items, next?}`, [`crate::paging`]: `next` keeps
//! the filters and is absent on the last page) and filter by label with repeatable
//! `label=<key>:<value>`, by name with `name=<text>` (Kuma's: the names containing the text,
//! case-sensitive) and, on Dataplanes, with Kuma's `tag=<key>:<value>` and
//! `gateway=true|false|builtin|delegated` ([`crate::filters`]); listing in a mesh that does not
//! exist is a 404. Bodies are YAML or JSON in Kuma's universal format; an
//! invalid resource gets a 400 with every `{field, message}` and nothing is stored
//! ([`crate::resource::decode_for_path`]); a body must come as JSON or YAML (or without a
//! `Content-Type`), anything else is a 415. A PUT or DELETE may carry `If-Match: <version>`
//! (`0`: must not exist); a stale version is a 409. Answers carry the stored version in
//! `ETag`. A PUT answers 201 on creation, 200 on update, and only once the store holds the
//! write durably. What a CP may not write here ([`WriteMode`]) is a 405 that says where to
//! write it instead.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use umbra_core::k8s;
use umbra_core::mesh::MeshSpec;
use umbra_core::resource::{ResourceKey, ResourceType, Spec, TypeKind};
use umbra_core::validate::ValidationError;
use umbra_store::{mesh_key, ListQuery, Store, Stored};

use crate::error::ApiError;
use crate::filters::ListFilters;
use crate::negotiate::{check_body_type, BODY_TYPES};
use crate::paging::PageParams;
use crate::resource::{decode_for_path, resource_type};

/// Which resources a CP's API accepts writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// The Global: everything but Dataplanes, ZoneIngresses and ZoneEgresses, which zones own
    /// and sync up over KDS.
    Global,
    /// A standalone zone: everything.
    Zone,
    /// A zone under a Global: only zone-owned (infrastructure) resources such as Dataplanes;
    /// Meshes and policies come from the Global.
    FederatedZone,
}

impl WriteMode {
    /// `Ok` when a resource of `ty` may be written (PUT or DELETE) here.
    ///
    /// # Errors
    /// A 405 naming where the resource is managed, with `Allow: GET`
    /// ([`ApiError::read_only`]).
    pub fn check(self, ty: ResourceType) -> Result<(), ApiError> {
        match self {
            WriteMode::Global
                if matches!(
                    ty,
                    ResourceType::Dataplane | ResourceType::ZoneIngress | ResourceType::ZoneEgress
                ) =>
            {
                Err(ApiError::read_only(format!(
                    "{} are registered in their zone and synced to the Global over KDS; they are read-only here",
                    ty.plural_display_name()
                )))
            }
            WriteMode::FederatedZone if ty == ResourceType::Mesh || ty.kind() != TypeKind::Infra => Err(ApiError::read_only(
                format!(
                    "{} resources are managed by the Global CP in a federated zone; apply them on the Global",
                    ty.name()
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// Told of every API write, e.g. to link the write's trace to what follows it.
pub trait WriteObserver: Send + Sync + std::fmt::Debug {
    /// A write of `key` is about to be made by the current request.
    fn before_write(&self, key: &ResourceKey);
    /// The write of `key` announced by [`WriteObserver::before_write`] failed.
    fn write_failed(&self, key: &ResourceKey);
}

/// What the resource handlers need: the store, what may be written, and who to tell.
#[derive(Debug, Clone)]
pub struct ResourceApi {
    /// The store the resources live in.
    pub store: Arc<dyn Store>,
    /// Which writes are accepted.
    pub mode: WriteMode,
    /// Told of every write.
    pub observer: Option<Arc<dyn WriteObserver>>,
    /// The zone this API belongs to (a zone CP's): a ZoneIngress or ZoneEgress written here
    /// must be this zone's (`zone` empty or this name). `None` on the Global.
    pub zone: Option<String>,
}

/// The resource routes, for a router whose state provides a [`ResourceApi`].
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ResourceApi: FromRef<S>,
{
    routes_with(true)
}

/// The resource routes of the Global, where ZoneIngresses and ZoneEgresses are read-only:
/// their paths serve GET, and answer any other method with the 405 of [`WriteMode::Global`]
/// (`Allow: GET, HEAD`), so that the router advertises no write it refuses.
pub fn routes_with_read_only_ingresses<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ResourceApi: FromRef<S>,
{
    routes_with(false)
}

async fn ingress_read_only() -> ApiError {
    WriteMode::Global
        .check(ResourceType::ZoneIngress)
        .err()
        .unwrap_or_else(|| ApiError::read_only("ZoneIngresses are read-only here"))
}

async fn egress_read_only() -> ApiError {
    WriteMode::Global
        .check(ResourceType::ZoneEgress)
        .err()
        .unwrap_or_else(|| ApiError::read_only("ZoneEgresses are read-only here"))
}

fn routes_with<S>(ingresses_writable: bool) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ResourceApi: FromRef<S>,
{
    let ingress = || {
        if ingresses_writable {
            get(get_zone_ingress)
                .put(put_zone_ingress)
                .delete(delete_zone_ingress)
        } else {
            get(get_zone_ingress).fallback(ingress_read_only)
        }
    };
    let egress = || {
        if ingresses_writable {
            get(get_zone_egress)
                .put(put_zone_egress)
                .delete(delete_zone_egress)
        } else {
            get(get_zone_egress).fallback(egress_read_only)
        }
    };
    Router::new()
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
        .route("/zone-ingresses", get(list_zone_ingresses))
        .route("/zone-ingresses/{name}", ingress())
        .route("/zoneingresses", get(list_zone_ingresses))
        .route("/zoneingresses/{name}", ingress())
        .route("/zoneegresses", get(list_zone_egresses))
        .route("/zoneegresses/{name}", egress())
        .route("/global-secrets", get(list_global_secrets))
        .route(
            "/global-secrets/{name}",
            get(get_global_secret)
                .put(put_global_secret)
                .delete(delete_global_secret),
        )
        // Matches any one-segment path no static route serves (matchit ranks static first).
        .route("/{plural}", get(list_all_meshes))
}

/// The resource routes as `(path, methods)`, for a CP's OpenAPI route list.
pub const ROUTES: &[(&str, &[&str])] = &[
    ("/meshes", &["get"]),
    ("/meshes/{name}", &["get", "put", "delete"]),
    ("/meshes/{mesh}/{plural}", &["get"]),
    ("/meshes/{mesh}/{plural}/{name}", &["get", "put", "delete"]),
    ("/global-secrets", &["get"]),
    ("/global-secrets/{name}", &["get", "put", "delete"]),
    ("/zone-ingresses", &["get"]),
    ("/zone-ingresses/{name}", &["get", "put", "delete"]),
    ("/zoneingresses", &["get"]),
    ("/zoneingresses/{name}", &["get", "put", "delete"]),
    ("/zoneegresses", &["get"]),
    ("/zoneegresses/{name}", &["get", "put", "delete"]),
    ("/{plural}", &["get"]),
];

/// `status` with the resource as body and its version as `ETag` (`"3"`).
pub fn respond(status: StatusCode, s: &Stored) -> Response {
    let mut response = (status, Json(s.resource.to_value())).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", s.version)) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// The `If-Match` version precondition, if any (`"3"` or `3`).
///
/// # Errors
/// A 400 when it is not a version.
pub fn expected_version(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .map(|s| s.trim().trim_matches('"'))
        .and_then(|s| s.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_parameter(
                "If-Match",
                "must be a resource version (an integer, 0 for must-not-exist)",
            )
        })
}

/// The stored resource at `key`.
///
/// # Errors
/// A 404 when there is none; store failures.
pub async fn get_stored(store: &dyn Store, key: &ResourceKey) -> Result<Stored, ApiError> {
    store
        .get(key)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("{key} not found")))
}

/// `Ok` when mesh `mesh` exists.
///
/// # Errors
/// A 404 naming the mesh; the store's error.
pub async fn mesh_exists(store: &dyn Store, mesh: &str) -> Result<(), ApiError> {
    match store.get(&mesh_key(mesh)).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("mesh {mesh:?} not found"))),
    }
}

/// One page of `ty` (in `mesh`, or every mesh) filtered by the request's `label=`, `name=`
/// and, on Dataplanes, `tag=` and `gateway=` ([`ListFilters`]).
async fn list(
    store: &dyn Store,
    ty: ResourceType,
    mesh: Option<&str>,
    query: &[(String, String)],
    path: &str,
) -> Result<Json<Value>, ApiError> {
    let (page, result) = list_page(store, ty, mesh, query).await?;
    let items = result.items.iter().map(|s| s.resource.to_value()).collect();
    let total = usize::try_from(result.total).unwrap_or(usize::MAX);
    Ok(Json(page.body(items, total, path, query)))
}

/// The page of `ty` (in `mesh`, or every mesh) a list request asks for: its paging
/// ([`PageParams`]) and the store's page under the request's [`ListFilters`].
///
/// # Errors
/// A 400 for bad paging or filters; the store's error.
pub async fn list_page(
    store: &dyn Store,
    ty: ResourceType,
    mesh: Option<&str>,
    query: &[(String, String)],
) -> Result<(PageParams, umbra_store::Page), ApiError> {
    let page = PageParams::parse(query)?;
    let filters = ListFilters::parse(ty, query)?;
    let result = store
        .list(&ListQuery {
            ty,
            mesh: mesh.map(str::to_owned),
            labels: filters.labels,
            name_contains: filters.name,
            dataplane: filters.dataplane,
            offset: page.offset as u64,
            size: page.size as u64,
        })
        .await?;
    Ok((page, result))
}

async fn put(
    api: &ResourceApi,
    ty: ResourceType,
    mesh: &str,
    name: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    api.mode.check(ty)?;
    check_body_type(headers, BODY_TYPES)?;
    let expected = expected_version(headers)?;
    let mut resource = decode_for_path(ty, mesh, name, body)?;
    // A zone stamps the Dataplanes it registers with its name, as Kuma's DataplaneManager does
    // (`DataplaneSpec::stamp_zone`); the same happens to one registered by an Envoy's metadata.
    if let (Some(zone), Spec::Dataplane(dp)) = (&api.zone, &mut resource.spec) {
        dp.stamp_zone(zone);
    }
    if let (Some(zone), Some(zi)) = (&api.zone, resource.as_zone_ingress()) {
        if zi.is_remote(zone) {
            return Err(ApiError::invalid(
                "the ZoneIngress belongs to another zone",
                vec![umbra_core::validate::Violation {
                    field: "zone".into(),
                    message: format!(
                        "must be empty or {zone:?}: this zone registers its own ingresses only (other zones' come from the Global)"
                    ),
                }],
            ));
        }
    }
    if let (Some(zone), Some(ze)) = (&api.zone, resource.as_zone_egress()) {
        if ze.is_remote(zone) {
            return Err(ApiError::invalid(
                "the ZoneEgress belongs to another zone",
                vec![umbra_core::validate::Violation {
                    field: "zone".into(),
                    message: format!(
                        "must be empty or {zone:?}: this zone registers its own egresses only"
                    ),
                }],
            ));
        }
    }
    let key = resource.key();
    check_not_synced_ingress(api, &key).await?;
    if let Spec::Mesh(spec) = &resource.spec {
        check_mesh_ca_backends(&*api.store, &resource.meta.name, spec, body).await?;
    }
    if let Some(o) = &api.observer {
        o.before_write(&key);
    }
    // A new Mesh comes with Kuma's default policies, in the same durable step
    // (`umbra_core::defaults`); they then sync like any policy.
    let companions = match &resource.spec {
        Spec::Mesh(spec) => umbra_core::defaults::mesh_defaults(&resource.meta.name, spec),
        _ => Vec::new(),
    };
    let (stored, created) = api
        .store
        .put_creating(resource, expected, None, companions)
        .await
        .inspect_err(|_| {
            if let Some(o) = &api.observer {
                o.write_failed(&key);
            }
        })?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(respond(status, &stored))
}

/// A successful DELETE: 200 with an empty body, as Kuma answers (its
/// `pkg/api-server/testdata` `delete_*` goldens).
async fn delete(
    api: &ResourceApi,
    key: &ResourceKey,
    headers: &HeaderMap,
) -> Result<StatusCode, ApiError> {
    api.mode.check(key.ty)?;
    let expected = expected_version(headers)?;
    check_not_synced_ingress(api, key).await?;
    if key.ty == ResourceType::Secret {
        check_secret_unused(&*api.store, key).await?;
    }
    api.store.delete(key, expected).await?;
    Ok(StatusCode::OK)
}

/// Kuma's mesh manager checks of a Mesh write that read other resources (issue 41;
/// `pkg/core/managers/apis/mesh/mesh_validator.go` `ValidateMTLSBackends`): a `provided` CA's
/// `cert` and `key` must be defined data sources and the Secrets they name must exist in the
/// mesh; a `builtin` CA's backend name must make a valid Secret name
/// ([`MeshSpec::validate_ca_backends`]). Skipped with `mtls.skipValidation`, as in Kuma. As in
/// Kuma, the check reads the Secrets before the write: a Secret deleted between the two is
/// not noticed (deleting a Secret a Mesh uses is refused, [`check_secret_unused`]).
///
/// # Errors
/// A 400 with Kuma's fields (`mtls.backends[0].conf.cert`) and reasons; the store's error.
async fn check_mesh_ca_backends(
    store: &dyn Store,
    mesh: &str,
    spec: &MeshSpec,
    body: &[u8],
) -> Result<(), ApiError> {
    let mut present = BTreeSet::new();
    for name in spec.provided_ca_secrets() {
        let key = ResourceKey {
            ty: ResourceType::Secret,
            mesh: mesh.to_owned(),
            name: name.clone(),
        };
        if store.get(&key).await?.is_some() {
            present.insert(name);
        }
    }
    let violations = spec.validate_ca_backends(mesh, |s| present.contains(s));
    if !violations.has_violations() {
        return Ok(());
    }
    // The paths of the form the Mesh came in (`spec.mtls...` for a Kubernetes one).
    let kubernetes = umbra_core::codec::decode_one(body, umbra_core::codec::Limits::default())
        .is_ok_and(|v| k8s::is_k8s(&v));
    let mut mapped = ValidationError::new();
    for v in violations.violations {
        let field = if kubernetes {
            k8s::field_path(ResourceType::Mesh, &v.field)
        } else {
            v.field
        };
        mapped.violation_field(field, v.message);
    }
    Err(ApiError::invalid(mapped.to_string(), mapped.violations))
}

/// Kuma's Secret delete check (`pkg/core/secrets/manager/validator.go`): a Secret that a
/// `provided` CA backend of its Mesh names cannot be deleted.
///
/// # Errors
/// A 400 at `name` with Kuma's message, per backend using it; the store's error.
async fn check_secret_unused(store: &dyn Store, key: &ResourceKey) -> Result<(), ApiError> {
    let Some(mesh) = store.get(&mesh_key(&key.mesh)).await? else {
        return Ok(());
    };
    let Spec::Mesh(spec) = &mesh.resource.spec else {
        return Ok(());
    };
    let mut err = ValidationError::new();
    for backend in spec.backends_using_secret(&key.name) {
        err.violation_field(
            "name",
            format!(
                "The secret {:?} that you are trying to remove is currently in use in Mesh {:?} in mTLS backend {backend:?}. Please remove the reference from the {backend:?} backend before removing the secret.",
                key.name, key.mesh
            ),
        );
    }
    if err.has_violations() {
        return Err(ApiError::invalid(err.to_string(), err.violations));
    }
    Ok(())
}

/// On a zone: `key` is not another zone's ZoneIngress synced from the Global (the Global
/// owns those copies here; writing or deleting one would desync them).
async fn check_not_synced_ingress(api: &ResourceApi, key: &ResourceKey) -> Result<(), ApiError> {
    let Some(zone) = api
        .zone
        .as_deref()
        .filter(|_| key.ty == ResourceType::ZoneIngress)
    else {
        return Ok(());
    };
    let existing = api.store.get(key).await?;
    if let Some(zi) = existing.as_ref().and_then(|s| s.resource.as_zone_ingress()) {
        if zi.is_remote(zone) {
            return Err(ApiError::read_only(format!(
                "{key} is zone {:?}'s, synced from the Global: it is read-only here",
                zi.zone
            )));
        }
    }
    Ok(())
}

async fn list_meshes(
    State(api): State<ResourceApi>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&*api.store, ResourceType::Mesh, None, &query, "/meshes").await
}

async fn get_mesh(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let stored = get_stored(&*api.store, &mesh_key(&name)).await?;
    Ok(respond(StatusCode::OK, &stored))
}

async fn put_mesh(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    put(&api, ResourceType::Mesh, "", &name, &headers, &body).await
}

async fn delete_mesh(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&api, &mesh_key(&name), &headers).await
}

fn global_secret_key(name: String) -> ResourceKey {
    ResourceKey {
        ty: ResourceType::GlobalSecret,
        mesh: String::new(),
        name,
    }
}

async fn list_global_secrets(
    State(api): State<ResourceApi>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(
        &*api.store,
        ResourceType::GlobalSecret,
        None,
        &query,
        "/global-secrets",
    )
    .await
}

async fn get_global_secret(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let stored = get_stored(&*api.store, &global_secret_key(name)).await?;
    Ok(respond(StatusCode::OK, &stored))
}

async fn put_global_secret(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    put(&api, ResourceType::GlobalSecret, "", &name, &headers, &body).await
}

async fn delete_global_secret(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&api, &global_secret_key(name), &headers).await
}

fn zone_ingress_key(name: String) -> ResourceKey {
    ResourceKey {
        ty: ResourceType::ZoneIngress,
        mesh: String::new(),
        name,
    }
}

async fn list_zone_ingresses(
    State(api): State<ResourceApi>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(
        &*api.store,
        ResourceType::ZoneIngress,
        None,
        &query,
        "/zone-ingresses",
    )
    .await
}

async fn get_zone_ingress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let stored = get_stored(&*api.store, &zone_ingress_key(name)).await?;
    Ok(respond(StatusCode::OK, &stored))
}

async fn put_zone_ingress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    put(&api, ResourceType::ZoneIngress, "", &name, &headers, &body).await
}

async fn delete_zone_ingress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&api, &zone_ingress_key(name), &headers).await
}

fn zone_egress_key(name: String) -> ResourceKey {
    ResourceKey {
        ty: ResourceType::ZoneEgress,
        mesh: String::new(),
        name,
    }
}

/// `GET /zoneegresses`: a page of ZoneEgresses (Kuma's list shape, filters and paging).
async fn list_zone_egresses(
    State(api): State<ResourceApi>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(
        &*api.store,
        ResourceType::ZoneEgress,
        None,
        &query,
        "/zoneegresses",
    )
    .await
}

/// `GET /zoneegresses/{name}`: the ZoneEgress, or 404.
async fn get_zone_egress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let stored = get_stored(&*api.store, &zone_egress_key(name)).await?;
    Ok(respond(StatusCode::OK, &stored))
}

/// `PUT /zoneegresses/{name}` (a zone only): 201 or 200; 400 with every violation's field.
async fn put_zone_egress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    put(&api, ResourceType::ZoneEgress, "", &name, &headers, &body).await
}

/// `DELETE /zoneegresses/{name}` (a zone only).
async fn delete_zone_egress(
    State(api): State<ResourceApi>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&api, &zone_egress_key(name), &headers).await
}

async fn list_resources(
    State(api): State<ResourceApi>,
    Path((mesh, plural)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    mesh_exists(&*api.store, &mesh).await?;
    let path = format!("/meshes/{mesh}/{plural}");
    list(&*api.store, ty, Some(&mesh), &query, &path).await
}

/// `GET /{plural}`: a mesh-scoped type listed across every mesh (Kuma's cross-mesh list).
async fn list_all_meshes(
    State(api): State<ResourceApi>,
    Path(plural): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let ty = resource_type(&plural)?;
    list(&*api.store, ty, None, &query, &format!("/{plural}")).await
}

async fn get_resource(
    State(api): State<ResourceApi>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let ty = resource_type(&plural)?;
    let stored = get_stored(&*api.store, &ResourceKey { ty, mesh, name }).await?;
    Ok(respond(StatusCode::OK, &stored))
}

async fn put_resource(
    State(api): State<ResourceApi>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ty = resource_type(&plural)?;
    put(&api, ty, &mesh, &name, &headers, &body).await
}

async fn delete_resource(
    State(api): State<ResourceApi>,
    Path((mesh, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let ty = resource_type(&plural)?;
    delete(&api, &ResourceKey { ty, mesh, name }, &headers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_modes_refuse_what_the_cp_does_not_own() {
        let status = |r: Result<(), ApiError>| r.err().map(|e| e.status);
        assert_eq!(
            status(WriteMode::Global.check(ResourceType::MeshTimeout)),
            None
        );
        assert_eq!(status(WriteMode::Global.check(ResourceType::Mesh)), None);
        assert_eq!(
            status(WriteMode::Global.check(ResourceType::Dataplane)),
            Some(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            status(WriteMode::Zone.check(ResourceType::MeshTimeout)),
            None
        );
        assert_eq!(
            status(WriteMode::FederatedZone.check(ResourceType::Mesh)),
            Some(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            status(WriteMode::FederatedZone.check(ResourceType::MeshTimeout)),
            Some(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            status(WriteMode::FederatedZone.check(ResourceType::Dataplane)),
            None
        );
    }

    #[test]
    fn if_match_takes_quoted_and_bare_versions() {
        let mut h = HeaderMap::new();
        assert_eq!(expected_version(&h).unwrap(), None);
        h.insert(header::IF_MATCH, HeaderValue::from_static("\"3\""));
        assert_eq!(expected_version(&h).unwrap(), Some(3));
        h.insert(header::IF_MATCH, HeaderValue::from_static("0"));
        assert_eq!(expected_version(&h).unwrap(), Some(0));
        h.insert(header::IF_MATCH, HeaderValue::from_static("*"));
        assert!(expected_version(&h).is_err());
    }
}
