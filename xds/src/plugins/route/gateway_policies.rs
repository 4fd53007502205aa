//! The `targetRef` policies Umbra applies to a builtin gateway's listeners, after
//! [`super::gateway`] built them (Kuma 2.7.29: each policy plugin's `applyToGateway(s)` path,
//! over the rules of [`umbra_core::gateway_rules`]):
//! - **MeshRateLimit**: its `to` rules per listener port, as Kuma's `configureGateway`
//!   ([`crate::plugins::rate_limit::apply_gateway`]).
//!
//! These are [`umbra_core::gateway_rules::GENERATED_ON_GATEWAYS`]; every other policy type
//! selecting a builtin gateway is named under `notGenerated`
//! ([`umbra_core::view::PolicySet::not_generated`]).

use umbra_core::gateway::SelectedGateway;
use umbra_core::gateway_rules::gateway_rules;
use umbra_core::matching::MatchOptions;
use umbra_core::policy::TargetRefPolicy;
use umbra_core::resource::ResourceType;
use umbra_core::view::View;

use crate::error::GenerateError;
use crate::plugins::input::PluginInput;
use crate::snapshot::Snapshot;

/// Apply the policies of the view to the listeners of `gateway` in `snap` (see the module
/// docs).
///
/// # Errors
/// [`GenerateError::Policy`] when a policy's merged conf cannot be written.
pub(super) fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    gateway: &SelectedGateway,
) -> Result<(), GenerateError> {
    let routes: Vec<&TargetRefPolicy> = input.policies.routes.iter().collect();
    let opts = MatchOptions {
        include_shadow: input.policies.view == Some(View::Shadow),
    };
    let list = |ty: ResourceType| input.policies.new.get(&ty).map_or(&[][..], Vec::as_slice);
    let rate_limits = gateway_rules(
        input.dataplane,
        gateway,
        list(ResourceType::MeshRateLimit),
        &routes,
        opts,
    );
    for (port, rules) in &rate_limits.to {
        for name in listeners_of(snap, &gateway.name, *port) {
            if let Some(listener) = snap.listeners.get_mut(&name) {
                crate::plugins::rate_limit::apply_gateway(listener, rules)?;
            }
        }
    }
    Ok(())
}

/// The names of the gateway's listeners on `port` (`<gateway>:<protocol>:<port>`).
fn listeners_of(snap: &Snapshot, gateway: &str, port: u32) -> Vec<String> {
    let suffix = format!(":{port}");
    snap.listeners
        .keys()
        .filter(|n| {
            n.strip_prefix(gateway)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|rest| rest.ends_with(&suffix) && rest.matches(':').count() == 1)
        })
        .cloned()
        .collect()
}
