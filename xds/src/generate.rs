//! The xDS generation pipeline for a sidecar DPP, the top of the crate's module graph:
//! [`generate`] runs the base generators ([`crate::base`]) in Kuma's `default-proxy` profile
//! order (`pkg/xds/generator/proxy_template.go:79-93`): admin (when the caller gives the
//! proxy's admin input), transparent proxy (passthrough listeners and clusters), inbound,
//! outbound, EDS, direct access, DNS (when the caller gives a DNS port), then every policy
//! plugin of [`crate::plugins::ORDERED`] (Kuma 2.7's order, MeshProxyPatch and the old
//! ProxyTemplate last), which see the transparent-proxy, direct-access and DNS resources with
//! Kuma's origins (`transparent`, `direct-access`, `dns`). Pure and deterministic. The typed
//! configs the plugins edit stay decoded in a [`crate::draft`] session and are encoded once,
//! when the snapshot is sealed.
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
pub use crate::base::dns::DnsInput;
pub use crate::base::secrets::mesh_secrets;
use crate::context::MeshContext;
use crate::draft::Session;
pub use crate::error::GenerateError;
use crate::plugins::{apply_all, Origins, PluginInput};
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
    /// kuma-dp's DNS port and the mesh's VIP domains, when the DPP's Envoy announced a DNS
    /// port (node metadata `dataplane.dns.port`): then a DPP with `transparentProxying` gets
    /// the `kuma:dns` listener ([`crate::base::dns`]). `None`: no DNS listener, as Kuma for a
    /// proxy without a DNS port.
    pub dns: Option<&'a DnsInput>,
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
    // Typed until sealed: the configs the plugins edit stay decoded until `apply_all` seals them.
    let drafts = Session::begin();
    let dp = proxy.dataplane;
    if let Some(admin) = proxy.admin {
        base::admin::generate(&mut snap, &dp.networking.address, admin);
    }
    let mut origins = Origins::default();
    let added = base::transparent::generate(&mut snap, dp, ctx);
    record(&mut origins, added, base::transparent::ORIGIN);
    // Matched once: whether routes apply, and the route plugin's rules.
    let route_matches = crate::plugins::input::RouteMatches::of(policies, dp);
    let new_routes = route_matches.apply();
    base::inbound::generate(&mut snap, dp, ctx);
    base::outbound::generate(&mut snap, dp, ctx, policies, new_routes);
    base::eds::generate(&mut snap, dp, ctx, policies, new_routes);
    let added = base::direct_access::generate(&mut snap, dp, ctx);
    record(&mut origins, added, base::direct_access::ORIGIN);
    if let Some(dns) = proxy.dns {
        if base::dns::generate(&mut snap, dp, dns) {
            origins
                .listeners
                .insert(base::dns::LISTENER_NAME.to_owned(), base::dns::ORIGIN);
        }
    }
    let input = PluginInput {
        dataplane: dp,
        ctx,
        policies,
        new_routes,
        route_matches: Some(&route_matches),
    };
    apply_all(&mut snap, &input, origins, drafts)?;
    Ok(snap)
}

/// Record `origin` for the `(clusters, listeners)` a base generator added.
fn record(
    origins: &mut Origins,
    (clusters, listeners): (Vec<String>, Vec<String>),
    origin: &'static str,
) {
    for name in clusters {
        origins.clusters.insert(name, origin);
    }
    for name in listeners {
        origins.listeners.insert(name, origin);
    }
}
