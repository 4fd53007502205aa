//! The refusals of `GET /meshes/{mesh}/{plural}/{name}/_observed` (issue 40), the same on both
//! CPs: a zone answers it from its Envoys, the Global by asking the zones
//! ([`crate::shared_routes::Inspection::Observed`]).

use axum::http::StatusCode;
use umbra_core::meta::{OBSERVABLE_TYPES, OBSERVE_LABEL};
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

use crate::error::ApiError;

/// `Ok` when policies of type `ty` can be observed.
///
/// # Errors
/// A 400 naming `type` when `ty` is not a policy type, or one observe mode does not render
/// ([`OBSERVABLE_TYPES`]).
pub fn check_type(ty: ResourceType) -> Result<(), ApiError> {
    if !ty.kind().is_policy() {
        return Err(ApiError::bad_parameter(
            "type",
            format!(
                "{} is not a policy type; only policies are observed",
                ty.name()
            ),
        ));
    }
    if !OBSERVABLE_TYPES.contains(&ty.name()) {
        return Err(ApiError::bad_parameter(
            "type",
            format!(
                "{} cannot be observed; observe mode renders {}",
                ty.name(),
                OBSERVABLE_TYPES.join(", ")
            ),
        ));
    }
    Ok(())
}

/// `Ok` when `policy` (stored under `key`, `None`: absent) is observed.
///
/// # Errors
/// A 404 when it is absent; a 409 when it is not shadow and labelled [`OBSERVE_LABEL`]` =
/// "true"`.
pub fn check_policy(key: &ResourceKey, policy: Option<&Resource>) -> Result<(), ApiError> {
    let Some(policy) = policy else {
        return Err(ApiError::not_found(format!("{key} not found")));
    };
    if !policy.meta.is_observed() {
        return Err(ApiError::status(
            StatusCode::CONFLICT,
            format!(
                "{key} is not observed: label it kuma.io/effect: shadow and {OBSERVE_LABEL}: \"true\""
            ),
        ));
    }
    Ok(())
}
