//! The EDS base generator: the ClusterLoadAssignment of every outbound cluster, the shared one
//! [`MeshContext`] built (Kuma's `xds/cache/cla`), or an empty one for a service nothing serves.

use umbra_core::dataplane::DataplaneSpec;

use crate::context::MeshContext;
use crate::snapshot::Snapshot;

/// Add the endpoints of every service an outbound of `dp` (but those with a `backendRef`)
/// reaches to `snap`, keyed by service (the outbound cluster's name).
pub fn generate(snap: &mut Snapshot, dp: &DataplaneSpec, ctx: &MeshContext) {
    for outbound in &dp.networking.outbound {
        if outbound.backend_ref.is_some() {
            continue;
        }
        let service = outbound.service();
        if !snap.endpoints.contains_key(service) {
            snap.endpoints
                .insert(service.to_owned(), ctx.load_assignment(service));
        }
    }
}
