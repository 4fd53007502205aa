//! A resource body (YAML or JSON, Kuma's universal format) checked against the path it was
//! sent to.

use umbra_core::resource::{Resource, ResourceType};
use umbra_core::validate::Violation;

use crate::error::ApiError;

/// The policy type of a path's `{plural}` segment (Mesh is not reachable this way).
///
/// # Errors
/// A 404 naming the unknown type.
pub fn resource_type(plural: &str) -> Result<ResourceType, ApiError> {
    ResourceType::from_plural(plural)
        .filter(|t| *t != ResourceType::Mesh)
        .ok_or_else(|| ApiError::not_found(format!("unknown resource type {plural:?}")))
}

/// Decode `body` as a resource of `ty` named `name` (in `mesh` when mesh-scoped) and validate
/// it.
///
/// # Errors
/// A 400 with every `{field, message}`: decoding problems, then type/name/mesh mismatches with
/// the path, then validation violations (each group alone, first one found).
pub fn decode_for_path(
    ty: ResourceType,
    mesh: &str,
    name: &str,
    body: &[u8],
) -> Result<Resource, ApiError> {
    let resource = Resource::from_bytes(body)
        .map_err(|e| ApiError::invalid("the resource cannot be decoded", e.violations()))?;
    let mut path_errors = Vec::new();
    let mismatch = |field: &str, want: &str, got: &str| Violation {
        field: field.to_owned(),
        message: format!("must be {want:?} to match the path, got {got:?}"),
    };
    if resource.ty() != ty {
        path_errors.push(mismatch("type", ty.name(), resource.ty().name()));
    }
    if resource.meta.name != name {
        path_errors.push(mismatch("name", name, &resource.meta.name));
    }
    if ty.is_mesh_scoped() && resource.meta.mesh != mesh {
        path_errors.push(mismatch("mesh", mesh, &resource.meta.mesh));
    }
    if !path_errors.is_empty() {
        return Err(ApiError::invalid(
            "the resource does not match the path",
            path_errors,
        ));
    }
    let violations = resource.validate();
    if violations.has_violations() {
        return Err(ApiError::invalid(
            violations.to_string(),
            violations.violations,
        ));
    }
    Ok(resource)
}
