//! The routing family: MeshHTTPRoute, MeshTCPRoute and the old TrafficRoute, run first (Kuma
//! 2.7's order puts MeshHTTPRoute and MeshTCPRoute before every other plugin; the old
//! TrafficRoute is baked into the outbound generator, which runs before the plugins).
//!
//! Which one shapes a DPP's outbounds is decided per DPP, as Kuma's route plugins do
//! (`meshhttproute/plugin/v1alpha1/plugin.go`: "only fallback if we have TrafficRoutes & no
//! MeshHTTPRoutes"):
//! - a MeshHTTPRoute or MeshTCPRoute gives the DPP a `to` rule: [`new_routes`] rebuilds every
//!   outbound the way Kuma's route plugins do (the old TrafficRoute is not applied: seed 000's
//!   old-type-off rule, and since Kuma overwrites the legacy listeners and clusters, the old
//!   Timeout and CircuitBreaker baked into them do not apply either:
//!   [`PluginInput::new_routes`]);
//! - else, TrafficRoutes in the view: [`traffic_route`] applies the one selected per outbound
//!   (Kuma's `BuildRouteMap`: connection-policy matching, `*` resolved to the outbound's tags);
//! - else the base generator's route-all shape stands (Umbra's base is Kuma's default
//!   `route-all` TrafficRoute).
//!
//! A builtin gateway DPP is routed by the MeshHTTPRoutes attached to its MeshGateway instead
//! ([`gateway`]), then gets the policies Umbra applies to gateways ([`gateway_policies`]).
//!
//! Both record the extra clusters they create per service ([`Origins::service_clusters`]), so
//! later plugins configure every cluster of a service, as Kuma's do.

mod backends;
mod gateway;
mod gateway_clusters;
mod gateway_listener;
pub(crate) use gateway_listener::routes_over_rds;
mod gateway_old;
mod gateway_policies;
mod gateway_table;
mod http;
mod new_routes;
mod traffic_route;

use umbra_core::resource::ResourceType;

use super::input::{Origins, PluginInput};
use crate::error::GenerateError;
use crate::snapshot::Snapshot;

/// Apply the routing family to `snap` (see the module docs for which applies).
///
/// # Errors
/// [`GenerateError::Policy`] when a merged route conf does not fit the model.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    if gateway::apply(snap, input, origins)? {
        return Ok(());
    }
    if input.new_routes {
        return new_routes::apply(snap, input, origins);
    }
    if !input.old_policies(ResourceType::TrafficRoute).is_empty() {
        traffic_route::apply(snap, input, origins);
    }
    Ok(())
}
