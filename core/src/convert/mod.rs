//! Old-to-new policy conversion (issue 19, "The migration workflow"): turns each old
//! source/destination policy (Timeout, CircuitBreaker, ...) into the `targetRef` policies that
//! Kuma 2.7 semantics make equivalent, labelled `kuma.io/effect: shadow`, with a [`Note`] for
//! every field or selector that has no exact equivalent. Pure: no IO.
//!
//! - [`convert`]: the entry point over a list of resources;
//! - [`selectors`]: old selectors (`sources`/`destinations`/`selectors`) to `targetRef`s;
//! - [`precedence`]: names a list's outputs so that merging reproduces the old precedence;
//! - one module per family ([`timeout`], ...), each a `convert(&Ctx)` ([`gateway_route`] also
//!   reads the MeshGateways among the inputs).
//!
//! Every output is a complete resource that [`Resource::validate`] accepts (a converter that
//! cannot build a valid one returns [`ConvertError`]), carries the shadow label and the
//! [`CONVERTED_FROM_TYPE_LABEL`]/[`CONVERTED_FROM_NAME_LABEL`] labels naming its source, so a
//! migration plan knows which old policy each new one replaces.

use crate::mesh::MeshSpec;
use crate::resource::{Resource, ResourceType, Spec};

pub mod circuit_breaker;
pub mod external;
pub mod fault_injection;
pub mod gateway_route;
pub mod health_check;
pub mod model;
pub mod precedence;
pub mod proxy_template;
pub mod rate_limit;
pub mod retry;
pub mod selectors;
pub mod timeout;
pub mod traffic_log;
pub mod traffic_permission;
pub mod traffic_route;
pub mod traffic_trace;

pub use model::{
    Conversion, ConvertError, Ctx, Note, NoteKind, Options, Output, CONVERTED_FROM_NAME_LABEL,
    CONVERTED_FROM_TYPE_LABEL,
};

/// Convert one old policy.
///
/// # Errors
/// [`ConvertError`]: an unsupported type, an output that does not validate, nothing to convert.
pub fn convert_one(source: &Resource, options: &Options) -> Result<Conversion, ConvertError> {
    convert_one_in(source, options, None)
}

/// Convert one old policy of the Mesh `mesh_spec` (needed by TrafficLog and TrafficTrace,
/// whose backends are the Mesh's).
///
/// # Errors
/// As [`convert_one`].
pub fn convert_one_in(
    source: &Resource,
    options: &Options,
    mesh_spec: Option<&MeshSpec>,
) -> Result<Conversion, ConvertError> {
    convert_one_among(source, options, mesh_spec, &[])
}

/// Convert one old policy among `others` (a MeshGatewayRoute needs the MeshGateways it
/// routes).
fn convert_one_among(
    source: &Resource,
    options: &Options,
    mesh_spec: Option<&MeshSpec>,
    others: &[Resource],
) -> Result<Conversion, ConvertError> {
    let ctx = Ctx {
        options,
        source,
        mesh_spec,
    };
    let (outputs, notes) = match source.ty() {
        ResourceType::Timeout => timeout::convert(&ctx)?,
        ResourceType::CircuitBreaker => circuit_breaker::convert(&ctx)?,
        ResourceType::FaultInjection => fault_injection::convert(&ctx)?,
        ResourceType::TrafficPermission => traffic_permission::convert(&ctx)?,
        ResourceType::ProxyTemplate => proxy_template::convert(&ctx)?,
        ResourceType::TrafficRoute => traffic_route::convert(&ctx)?,
        ResourceType::Retry => retry::convert(&ctx)?,
        ResourceType::HealthCheck => health_check::convert(&ctx)?,
        ResourceType::TrafficLog => traffic_log::convert(&ctx)?,
        ResourceType::RateLimit => rate_limit::convert(&ctx)?,
        ResourceType::TrafficTrace => traffic_trace::convert(&ctx)?,
        ResourceType::MeshGatewayRoute => gateway_route::convert(&ctx, others)?,
        ResourceType::VirtualOutbound => {
            return Err(ctx.unsupported("Kuma 2.7 has no targetRef policy equivalent to this type"))
        }
        _ => return Err(ctx.unsupported("not an old policy type")),
    };
    Ok(Conversion {
        source: source.key(),
        outputs,
        notes,
    })
}

/// Convert every old policy among `resources` (other resources are skipped), in input order:
/// one result per old policy, so one that cannot be converted does not stop the others.
///
/// Unlike [`convert_one`], the outputs of the families whose old precedence is "the single most
/// specific policy wins" are then named so that the new merge order reproduces it, and each of
/// their conversions gets a precedence note ([`precedence`]).
pub fn convert(resources: &[Resource], options: &Options) -> Vec<Result<Conversion, ConvertError>> {
    let mut results: Vec<Result<Conversion, ConvertError>> = resources
        .iter()
        .filter(|r| r.ty().kind() == crate::resource::TypeKind::OldPolicy)
        .map(|r| {
            let mesh = resources.iter().find_map(|m| match &m.spec {
                Spec::Mesh(spec) if m.meta.name == r.meta.mesh => Some(spec),
                _ => None,
            });
            convert_one_among(r, options, mesh, resources)
        })
        .collect();
    precedence::apply(resources, &mut results);
    external::annotate(resources, &mut results);
    results
}
