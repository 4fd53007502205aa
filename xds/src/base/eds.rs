//! The EDS base generator: the ClusterLoadAssignment of every outbound cluster, the shared one
//! [`MeshContext`] built (Kuma's `xds/cache/cla`), or an empty one for a service nothing serves;
//! an ExternalService reached through the zone's egress gets the egresses
//! ([`super::external::egress_endpoints`]).

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::view::PolicySet;

use crate::context::MeshContext;
use crate::snapshot::Snapshot;

/// Add the endpoints of every service an outbound of `dp` (but those with a `backendRef`)
/// reaches to `snap`, keyed by service (the outbound cluster's name); none for an
/// ExternalService whose cluster carries its endpoints ([`crate::base::external`]).
pub fn generate(
    snap: &mut Snapshot,
    dp: &DataplaneSpec,
    ctx: &MeshContext,
    policies: &PolicySet,
    new_routes: bool,
) {
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        if !super::external::reachable(policies, dp, service, new_routes).is_empty() {
            continue;
        }
        if snap.endpoints.contains_key(service) {
            continue;
        }
        let cla = if super::external::through_egress(policies, service) {
            let eps = super::external::egress_endpoints(ctx, policies, service);
            crate::interner::Shared::from(crate::load_assignment::load_assignment(service, &eps))
        } else {
            ctx.load_assignment(service)
        };
        snap.endpoints.insert(service.to_owned(), cla);
    }
}
