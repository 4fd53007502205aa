//! What every plugin gets besides the snapshot: [`PluginInput`] (the DPP, mesh facts, policies;
//! read-only) and [`Origins`] (Kuma's `Resource.Origin` of what plugins added, carried from one
//! plugin to the next). A leaf of the plugin layer: imports only [`crate::context`] and, for
//! services' protocols, [`crate::base::external`].

use std::collections::{BTreeMap, BTreeSet};

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::old_matching::{select_connection_policies, OldPolicyRef};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::PolicySet;

use crate::context::MeshContext;

/// Everything a plugin may read while editing a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct PluginInput<'a> {
    /// The DPP.
    pub dataplane: &'a DataplaneSpec,
    /// Mesh-wide facts.
    pub ctx: &'a MeshContext,
    /// The policies of the view being generated.
    pub policies: &'a PolicySet,
    /// A MeshHTTPRoute or MeshTCPRoute gives this DPP a `to` rule
    /// ([`PolicySet::new_routes_apply`]): the route plugins rebuild every outbound listener
    /// and cluster, so the old policies Kuma bakes into the legacy outbound generator
    /// (TrafficRoute, Timeout, CircuitBreaker) do not reach them.
    pub new_routes: bool,
    /// The DPP's MeshHTTPRoute and MeshTCPRoute matches, when the generation already matched
    /// them to decide `new_routes` (the route plugin then reads them instead of matching
    /// again); `None` makes the plugin match.
    pub route_matches: Option<&'a RouteMatches<'a>>,
}

/// One DPP's MeshHTTPRoute and MeshTCPRoute matches ([`PolicySet::matched`]), computed once per
/// generation.
#[derive(Debug)]
pub struct RouteMatches<'a> {
    /// MeshHTTPRoutes.
    pub http: umbra_core::matching::MatchedPolicies<'a>,
    /// MeshTCPRoutes.
    pub tcp: umbra_core::matching::MatchedPolicies<'a>,
}

impl<'a> RouteMatches<'a> {
    /// Match both route types of `policies` against `dp`.
    pub fn of(policies: &'a PolicySet, dp: &DataplaneSpec) -> Self {
        RouteMatches {
            http: policies.matched(ResourceType::MeshHTTPRoute, dp),
            tcp: policies.matched(ResourceType::MeshTCPRoute, dp),
        }
    }

    /// A route gives the DPP a `to` rule: [`PolicySet::new_routes_apply`] from these matches.
    pub fn apply(&self) -> bool {
        !self.http.to_rules.is_empty() || !self.tcp.to_rules.is_empty()
    }
}

impl<'a> PluginInput<'a> {
    /// The old policies of `ty` in effect on this DPP
    /// ([`umbra_core::view::PolicySet::old_policies_for`]: none where a staged rollout's copy
    /// of the new type selects it).
    pub fn old_policies(&self, ty: ResourceType) -> &'a [Resource] {
        self.policies.old_policies_for(ty, self.dataplane)
    }

    /// The protocol of `service`: its ExternalServices' when it is one
    /// ([`crate::base::external::service_protocol`]), else the mesh's.
    pub fn service_protocol(&self, service: &str) -> crate::context::Protocol {
        crate::base::external::service_protocol(self.policies, self.ctx, service)
    }

    /// The old connection policies of `ty` (Retry, HealthCheck, CircuitBreaker) in effect,
    /// plus the superseded ones when `with_superseded` (what Kuma bakes in regardless), and for
    /// each outbound service of the DPP the index, in that list, of the one Kuma's
    /// `SelectConnectionPolicies` picks.
    pub fn old_connection_policies(
        &self,
        ty: ResourceType,
        with_superseded: bool,
    ) -> (Vec<&'a Resource>, BTreeMap<String, usize>) {
        let policies: Vec<&'a Resource> = if with_superseded {
            self.policies.old_policies_with_superseded(ty).collect()
        } else {
            self.old_policies(ty).iter().collect()
        };
        if policies.is_empty() {
            return (policies, BTreeMap::new());
        }
        let refs: Vec<OldPolicyRef<'_>> = policies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
            .collect();
        let services: Vec<String> = self
            .dataplane
            .networking
            .outbound
            .iter()
            .map(|o| o.service().to_owned())
            .collect();
        let chosen = select_connection_policies(self.dataplane, &services, &refs);
        (policies, chosen)
    }
}

/// Origins (Kuma's `Resource.Origin`, e.g. `mesh-proxy-patch`, `proxy-template-raw`,
/// `transparent`, `direct-access`, `dns`) of the clusters and listeners plugins and the base
/// generators of transparent proxying, direct access and DNS added, by resource name. Umbra's snapshot does not record
/// origins; resources not in here have the origin their name implies (`inbound:*` listeners and
/// `localhost:*` clusters `inbound`, `outbound:*` listeners and other clusters `outbound`), see
/// [`Origins::cluster`] and [`Origins::listener`]. One value lives for one generation, so
/// ProxyTemplate modifications see what MeshProxyPatch added with its origin, as in Kuma.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    /// Origin of added clusters, by name.
    pub clusters: BTreeMap<String, &'static str>,
    /// Origin of added listeners, by name.
    pub listeners: BTreeMap<String, &'static str>,
    /// The clusters the route plugins added for a service besides the service's own (subset
    /// clusters `<service>-<hash>`), by service. See [`Origins::clusters_of`].
    pub service_clusters: BTreeMap<String, BTreeSet<String>>,
    /// The subset tags (without `kuma.io/service`) of those subset clusters, by cluster name:
    /// the backends' tags old policies on builtin gateways match.
    pub subset_tags: BTreeMap<String, BTreeMap<String, String>>,
    /// A builtin gateway's per-host clusters: the tags of the host (its listener's merged
    /// tags) each was made for, by cluster name, which old connection policies match as
    /// their source.
    pub host_tags: BTreeMap<String, BTreeMap<String, String>>,
}

impl Origins {
    /// Every cluster of `service`: its own (named after it) then the route plugins' subset
    /// clusters, sorted. Kuma configures all of them from the service's rules.
    pub fn clusters_of<'s>(&'s self, service: &'s str) -> impl Iterator<Item = &'s str> + 's {
        std::iter::once(service).chain(
            self.service_clusters
                .get(service)
                .into_iter()
                .flatten()
                .map(String::as_str),
        )
    }

    /// The origin of cluster `name`: recorded, else `inbound` for `localhost:*`, else
    /// `outbound`.
    pub fn cluster(&self, name: &str) -> &str {
        match self.clusters.get(name) {
            Some(o) => o,
            None if name.starts_with("localhost:") => "inbound",
            None => "outbound",
        }
    }

    /// The origin of listener `name`: recorded, else `inbound` for `inbound:*`, `outbound` for
    /// `outbound:*`, else empty.
    pub fn listener(&self, name: &str) -> &str {
        match self.listeners.get(name) {
            Some(o) => o,
            None if name.starts_with("inbound:") => "inbound",
            None if name.starts_with("outbound:") => "outbound",
            None => "",
        }
    }
}
