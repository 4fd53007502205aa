//! The xDS generation pipeline for a sidecar DPP, the top of the crate's module graph:
//! [`generate`] runs the base generators ([`crate::base`]: inbound, outbound, EDS), then every
//! policy plugin of [`crate::plugins::ORDERED`] (Kuma 2.7's order, MeshProxyPatch and the old
//! ProxyTemplate last). Pure and deterministic. The admin generator ([`crate::base::admin`]) runs
//! first, as in Kuma's `default-proxy` profile, when the caller gives the proxy's admin input.
//!
//! Names and shapes follow `docs/research/kuma-2.7-xds-generation.md` and the transition seed:
//! listeners `inbound:<ip>:<port>` / `outbound:<ip>:<port>`, inbound clusters
//! `localhost:<servicePort>`, outbound clusters named by `kuma.io/service` (EDS over ADS), route
//! configurations inlined in the HTTP connection manager (`inbound:<service>`,
//! `outbound:<service>`). Outbounds use Kuma's TrafficRoute ("route all") shape, which is what
//! meshes on the old policies run today. The SDS secrets ([`mesh_secrets`]) are added by the
//! caller, which holds the certificates.

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::view::PolicySet;

use crate::base;
pub use crate::base::secrets::mesh_secrets;
use crate::context::MeshContext;
pub use crate::error::GenerateError;
use crate::plugins::{apply_all, PluginInput};
use crate::snapshot::Snapshot;

/// The DPP being generated for.
#[derive(Debug, Clone, Copy)]
pub struct Proxy<'a> {
    /// Dataplane name.
    pub name: &'a str,
    /// Its spec.
    pub dataplane: &'a DataplaneSpec,
    /// Its admin port and the mTLS material of its admin listener, when the zone knows them
    /// (an Envoy of the DPP is connected): then the admin generator runs
    /// ([`crate::base::admin`]). `None`: no admin resources, as Kuma for a proxy without an
    /// admin port.
    pub admin: Option<&'a crate::base::admin::EnvoyAdmin>,
}

/// Generate the snapshot of `proxy` in `ctx` under the policies of one view: the base
/// generators, then [`crate::plugins::ORDERED`].
///
/// # Errors
/// [`GenerateError`] when a policy cannot be applied.
pub fn generate(
    proxy: Proxy<'_>,
    ctx: &MeshContext,
    policies: &PolicySet,
) -> Result<Snapshot, GenerateError> {
    let mut snap = Snapshot::default();
    let dp = proxy.dataplane;
    if let Some(admin) = proxy.admin {
        base::admin::generate(&mut snap, &dp.networking.address, admin);
    }
    let new_routes = policies.new_routes_apply(dp);
    base::inbound::generate(&mut snap, dp, ctx);
    base::outbound::generate(&mut snap, dp, ctx, policies, new_routes);
    base::eds::generate(&mut snap, dp, ctx, policies, new_routes);
    let input = PluginInput {
        dataplane: dp,
        ctx,
        policies,
        new_routes,
    };
    apply_all(&mut snap, &input)?;
    Ok(snap)
}
