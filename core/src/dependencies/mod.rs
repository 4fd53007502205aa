//! What a DPP's generated config depends on, so a control plane regenerates only the DPPs a
//! change can affect.
//!
//! Generation (`umbra_xds::generate::generate`) is a pure function of the Dataplane, the
//! mesh context (`umbra_xds::context::MeshContext`) and the [`PolicySet`]. Of those, a given DPP only
//! reads:
//! - the Mesh (mTLS, name, logging backends) and its own Dataplane resource;
//! - the new (targetRef) policies whose top-level `targetRef` selects it (Kuma's
//!   `dppSelectedByPolicy`, shadow ones only in the Shadow view), plus every MeshHTTPRoute of the
//!   mesh (references resolve through them);
//! - the old policies with a selector matching one of its inbounds or its gateway (Kuma's
//!   `Dataplane.Matches`) on the side that selects the DPP: `sources` for the outbound
//!   connection policies (Timeout, CircuitBreaker, which match the client), `destinations` for
//!   the inbound ones (TrafficPermission, FaultInjection), `selectors` for ProxyTemplate and TrafficTrace. This
//!   is a superset of Kuma's old-policy selection, which adds destination or source
//!   requirements on top;
//! - for each of those old policies, whether its type is superseded in the view (the
//!   old-vs-new rule of seed 000): plugins read old policies either in effect only or in effect
//!   and superseded, nothing else about the rule;
//! - the endpoints and protocol of the services its outbounds name (a builtin gateway: the
//!   services its attached MeshHTTPRoutes and MeshTCPRoutes send to, those MeshTCPRoutes,
//!   the MeshGatewayRoutes selecting one of its listeners and the services they send to, the
//!   policies Umbra applies to gateways that select one of its listeners,
//!   every MeshGateway of the mesh and the Secrets their listeners' certificates are);
//! - for a DPP with outbounds in a mesh with ExternalServices: every ExternalService of the
//!   view, the Secrets they read and every TrafficPermission (which ones the DPP may reach).
//!
//! Narrowed by what a sidecar can reach ([`reach`], issue 39): a new policy whose only
//! entries are `to` entries naming services the sidecar cannot send to changes nothing in its
//! config, and is not a dependency when the policies it does read already decide everything
//! else the type does on it. The backends of the routes that apply to its outbounds are
//! reached services, and dependencies: their endpoints are in its EDS. [`selection`] gives the
//! dependencies without that narrowing (every policy whose top-level `targetRef` selects the
//! DPP, as Kuma lists a policy's DPPs).
//!
//! [`dependencies`] lists those; the caller turns them into a fingerprint with its own notion
//! of resource identity (the zone store's write revisions). [`ingress`] does the same for a
//! ZoneIngress.

pub mod egress;
pub mod ingress;
mod reach;
pub mod shadow;

use crate::dataplane::DataplaneSpec;
use crate::old_matching::{dataplane_matches, OldPolicyRef};
use crate::resource::{ResourceType, Spec};
use crate::view::PolicySet;

/// One policy a DPP's generation may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyDependency<'a> {
    /// Its type.
    pub ty: ResourceType,
    /// Its name (in the DPP's mesh).
    pub name: &'a str,
    /// An old policy whose type the old-vs-new rule switched off in this view.
    pub superseded: bool,
    /// An observed shadow policy not in effect in this view ([`PolicySet::observed`]): it only
    /// shapes config that enforces nothing, so the same policy in effect is another input.
    pub observed: bool,
}

/// The policies and services one DPP's config depends on (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies<'a> {
    /// Every policy (new, old or MeshHTTPRoute) the DPP's generation may read, in the set's
    /// order.
    pub policies: Vec<PolicyDependency<'a>>,
    /// `kuma.io/service` of each outbound (in the Dataplane's order, duplicates kept).
    pub services: Vec<&'a str>,
}

/// The dependencies of `dp` (a Dataplane of `policies`' mesh) under `policies`' view.
///
/// A new policy whose `targetRef` cannot be resolved (an unknown MeshHTTPRoute) counts as a
/// dependency: matching reports it as a warning, which is part of what the DPP sees.
pub fn dependencies<'a>(dp: &'a DataplaneSpec, policies: &'a PolicySet) -> Dependencies<'a> {
    collect(dp, policies, true)
}

/// [`dependencies`] without narrowing new policies by the services their `to` entries name:
/// every policy whose top-level `targetRef` selects `dp` (what a policy's DPP list shows).
pub fn selection<'a>(dp: &'a DataplaneSpec, policies: &'a PolicySet) -> Dependencies<'a> {
    collect(dp, policies, false)
}

/// A sidecar behind a transparent proxy with direct access: its clusters are not outbounds, so
/// what it depends on is not narrowed by what it reaches.
fn behind_direct_access(dp: &DataplaneSpec) -> bool {
    dp.networking
        .transparent_proxying
        .as_ref()
        .is_some_and(|t| !t.direct_access().is_empty())
}

fn collect<'a>(dp: &'a DataplaneSpec, policies: &'a PolicySet, narrow: bool) -> Dependencies<'a> {
    let include_shadow = policies.view == Some(crate::view::View::Shadow);
    let routes: Vec<&crate::policy::TargetRefPolicy> = policies.routes.iter().collect();
    let builtin_gateway = crate::gateway::is_builtin(dp);
    // What a sidecar can send to. Not narrowed: builtin gateways, which reach services through
    // their own routes (below), and direct access, whose clusters are not outbounds.
    let direct_access = behind_direct_access(dp);
    let services: Vec<&str> = if builtin_gateway {
        let outbounds = dp.networking.outbound.iter();
        outbounds.map(crate::dataplane::Outbound::service).collect()
    } else {
        reach::reached_services(dp, policies, &routes, include_shadow)
    };
    let reached = (narrow && !builtin_gateway && !direct_access).then(|| services.clone());
    let mut deps = Dependencies {
        services,
        ..Dependencies::default()
    };
    let mut push = |ty, name, superseded, observed| {
        deps.policies.push(PolicyDependency {
            ty,
            name,
            superseded,
            observed,
        });
    };
    for route in &policies.routes {
        push(
            ResourceType::MeshHTTPRoute,
            route.meta().name.as_str(),
            false,
            false,
        );
    }
    for (ty, list) in &policies.new {
        if *ty == ResourceType::MeshHTTPRoute {
            continue; // pushed above, every one (they resolve references)
        }
        let read = reach::type_dependencies(dp, list, &routes, include_shadow, reached.as_deref());
        for p in read {
            push(*ty, p.meta().name.as_str(), false, false);
        }
    }
    // Observed shadow policies (Live view only): the ones selecting the DPP shape its
    // non-enforcing config; the type's live ones are already listed.
    for (ty, observed) in &policies.observed {
        for p in reach::type_dependencies(dp, &observed.policies, &routes, true, None) {
            if observed.contains(&p.meta().name) {
                push(*ty, p.meta().name.as_str(), false, true);
            }
        }
    }
    // An old type staged copies switch off on this DPP counts as superseded here.
    let old = (policies.old.iter())
        .map(|e| (e, policies.off_for(*e.0, dp)))
        .chain(policies.superseded_old.iter().map(|e| (e, true)));
    for ((ty, list), superseded) in old {
        for (i, r) in list.iter().enumerate() {
            let Some(p) = OldPolicyRef::from_resource(i, r) else {
                continue;
            };
            // An empty side selects everything (ProxyTemplate without selectors applies to every
            // DPP); treat it as selecting, whatever the type.
            let matches = |side: &[crate::old::selectors::Selector]| {
                side.is_empty() || side.iter().any(|s| dataplane_matches(dp, &s.match_tags))
            };
            let selected = match ty {
                ResourceType::Timeout
                | ResourceType::CircuitBreaker
                | ResourceType::ProxyTemplate
                | ResourceType::TrafficTrace => matches(p.sources),
                ResourceType::TrafficPermission | ResourceType::FaultInjection => {
                    matches(p.destinations)
                }
                // A type this list does not know: either side may select.
                _ => matches(p.sources) || matches(p.destinations),
            };
            if selected {
                push(*ty, r.meta.name.as_str(), superseded, false);
            }
        }
    }
    // A builtin gateway: the MeshGateways (which one selects it, its listeners), the
    // MeshGatewayRoutes of its listeners, and the services its routes send to.
    if builtin_gateway {
        for r in &policies.stored {
            if r.ty() == ResourceType::MeshGateway {
                push(
                    ResourceType::MeshGateway,
                    r.meta.name.as_str(),
                    false,
                    false,
                );
            }
        }
        for name in policies.gateway_certificates.keys() {
            push(ResourceType::Secret, name.as_str(), false, false);
        }
        if let Some(g) = crate::gateway::selected(&policies.stored, dp) {
            let http = policies
                .new
                .get(&ResourceType::MeshHTTPRoute)
                .map_or(&[][..], Vec::as_slice);
            for p in crate::gateway::routes(http, &g.name, include_shadow) {
                let backends = p
                    .route
                    .iter()
                    .flat_map(|r| &r.to)
                    .flat_map(|t| &t.rules)
                    .flat_map(|rule| rule.default.backend_refs.iter().flatten())
                    .map(|b| b.name.as_str());
                deps.services.extend(backends);
            }
            // The policies applied to its listeners (which select one of them).
            for ty in crate::gateway_rules::GENERATED_ON_GATEWAYS {
                for p in policies.new.get(ty).into_iter().flatten() {
                    if !include_shadow && p.meta().is_shadow() {
                        continue;
                    }
                    let ports = crate::gateway_rules::selected_ports(
                        &p.meta().mesh,
                        &p.target_ref,
                        dp,
                        &g,
                        &routes,
                    );
                    if ports.map_or(true, |p| !p.is_empty()) {
                        push(*ty, p.meta().name.as_str(), false, false);
                    }
                }
            }
            // The old connection policies whose sources match one of its listeners' tags.
            for ty in crate::gateway_old::GATEWAY_OLD_TYPES {
                let lists = [
                    (policies.old.get(ty), policies.off_for(*ty, dp)),
                    (policies.superseded_old.get(ty), true),
                ];
                for (list, superseded) in lists {
                    for (i, r) in list.into_iter().flatten().enumerate() {
                        let Some(p) = OldPolicyRef::from_resource(i, r) else {
                            continue;
                        };
                        if g.listeners
                            .iter()
                            .any(|l| p.sources.iter().any(|s| s.matches(&l.tags)))
                        {
                            push(*ty, r.meta.name.as_str(), superseded, false);
                        }
                    }
                }
            }
            // The MeshGatewayRoutes selecting one of its listeners (any view: Kuma falls back
            // to them per virtual host) and the services they send to.
            let old_routes = crate::gateway::old_routes(
                policies.old_policies_for(ResourceType::MeshGatewayRoute, dp),
            );
            for r in old_routes
                .iter()
                .filter(|r| g.listeners.iter().any(|l| r.selects(&l.tags)))
            {
                push(
                    ResourceType::MeshGatewayRoute,
                    r.resource.meta.name.as_str(),
                    false,
                    false,
                );
                if let Spec::Selected(_, sel) = &r.resource.spec {
                    deps.services
                        .extend(crate::gateway_route::destination_services(
                            sel.conf.as_ref(),
                        ));
                }
            }
            let tcp = policies
                .new
                .get(&ResourceType::MeshTCPRoute)
                .map_or(&[][..], Vec::as_slice);
            for p in crate::gateway::routes(tcp, &g.name, include_shadow) {
                push(
                    ResourceType::MeshTCPRoute,
                    p.meta().name.as_str(),
                    false,
                    false,
                );
                for item in &p.to {
                    let refs = item
                        .conf
                        .pointer("/default/backendRefs")
                        .and_then(serde_json::Value::as_array);
                    deps.services.extend(
                        refs.into_iter()
                            .flatten()
                            .filter_map(|b| b.get("name").and_then(serde_json::Value::as_str)),
                    );
                }
            }
        }
    }
    // ExternalServices: which exist and what they resolve to (their Secrets), and, on the
    // legacy path, which TrafficPermissions let this DPP reach them. Coarse: every one of the
    // view, for a DPP with an outbound.
    // A transparent proxy counts as having outbounds: its VIP outbounds may not be resolved
    // in `dp` (a Dataplane as stored).
    let outbounds =
        !dp.networking.outbound.is_empty() || dp.networking.transparent_proxying.is_some();
    if !policies.external.is_empty() && outbounds {
        for r in &policies.stored {
            if r.ty() != ResourceType::ExternalService {
                continue;
            }
            push(
                ResourceType::ExternalService,
                r.meta.name.as_str(),
                false,
                false,
            );
            for secret in policies
                .external
                .secrets
                .get(&r.meta.name)
                .into_iter()
                .flatten()
            {
                push(ResourceType::Secret, secret.as_str(), false, false);
            }
        }
        for r in policies.old_policies_with_superseded(ResourceType::TrafficPermission) {
            push(
                ResourceType::TrafficPermission,
                r.meta.name.as_str(),
                false,
                false,
            );
        }
    }
    deps
}

/// `true` when `dp`'s config can differ between the `live` and `shadow` sets (both of its
/// mesh): its dependencies differ. When they are equal, generation reads the same inputs in
/// both views and the two snapshots are identical, so the fleet-wide shadow diff skips the DPP
/// ([`shadow::view_difference`] is then [`shadow::ViewDifference::Same`]; otherwise it says
/// where the configs can differ).
///
/// `dp` must be the Dataplane generation sees: its transparent-proxy VIP outbounds resolved
/// (the zone's), since narrowing ([`reach`]) decides from its outbounds what it reaches. For
/// a Dataplane as stored, without them (the Global's), use [`selections_differ`].
pub fn views_differ(dp: &DataplaneSpec, live: &PolicySet, shadow: &PolicySet) -> bool {
    dependencies(dp, live).policies != dependencies(dp, shadow).policies
}

/// [`views_differ`] without narrowing ([`selection`]): a superset of the DPPs whose config can
/// differ, safe for a Dataplane whose VIP outbounds are not resolved (the Global plans the
/// fleet diff from the Dataplanes the zones synced; each zone then filters with
/// [`views_differ`] on its resolved Dataplanes).
pub fn selections_differ(dp: &DataplaneSpec, live: &PolicySet, shadow: &PolicySet) -> bool {
    selection(dp, live).policies != selection(dp, shadow).policies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use crate::view::View;

    fn set(yaml: &str, view: View) -> (Vec<Resource>, PolicySet) {
        let rs = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
        let set = PolicySet::build("m", &rs, view);
        (rs, set)
    }

    const RESOURCES: &str = r"
type: Dataplane
mesh: m
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - port: 9000
    tags: {kuma.io/service: backend}
---
type: MeshTimeout
mesh: m
name: all
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
---
type: MeshTimeout
mesh: m
name: other-service
spec:
  targetRef: {kind: MeshService, name: other}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
---
type: MeshTimeout
mesh: m
name: shadowed
labels: {kuma.io/effect: shadow}
spec:
  targetRef: {kind: MeshService, name: web}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
---
type: Timeout
mesh: m
name: web-to-any
sources: [{match: {kuma.io/service: web}}]
destinations: [{match: {kuma.io/service: '*'}}]
conf: {connectTimeout: 1s}
---
type: Timeout
mesh: m
name: other-to-backend
sources: [{match: {kuma.io/service: other}}]
destinations: [{match: {kuma.io/service: backend}}]
conf: {connectTimeout: 1s}
";

    #[test]
    fn selected_policies_only_and_shadow_per_view() {
        let (rs, live) = set(RESOURCES, View::Live);
        let dp = rs[0].as_dataplane().unwrap();
        let deps = dependencies(dp, &live);
        let found: Vec<_> = deps
            .policies
            .iter()
            .map(|d| (d.ty, d.name, d.superseded))
            .collect();
        assert_eq!(
            found,
            vec![
                (ResourceType::MeshTimeout, "all", false),
                (ResourceType::Timeout, "web-to-any", true)
            ]
        );
        assert_eq!(deps.services, vec!["backend"]);
        let (rs, shadow) = set(RESOURCES, View::Shadow);
        let deps = dependencies(rs[0].as_dataplane().unwrap(), &shadow);
        assert!(deps
            .policies
            .iter()
            .any(|d| (d.ty, d.name) == (ResourceType::MeshTimeout, "shadowed")));
    }

    const NARROWING: &str = r"
type: Dataplane
mesh: m
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - port: 9000
    tags: {kuma.io/service: backend}
---
type: MeshTimeout
mesh: m
name: to-backend
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: backend}, default: {idleTimeout: 1s}}]
---
type: MeshTimeout
mesh: m
name: to-db
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: db}, default: {idleTimeout: 1s}}]
---
type: MeshTimeout
mesh: m
name: to-db-and-from
spec:
  targetRef: {kind: Mesh}
  from: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
  to: [{targetRef: {kind: MeshService, name: db}, default: {idleTimeout: 1s}}]
---
type: MeshRetry
mesh: m
name: to-canary
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: canary}, default: {http: {numRetries: 1}}}]
---
type: MeshRetry
mesh: m
name: to-mirror
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: mirror}, default: {http: {numRetries: 1}}}]
---
type: MeshCircuitBreaker
mesh: m
name: alone-to-db
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: db}, default: {connectionLimits: {maxConnections: 1}}}]
---
type: MeshHTTPRoute
mesh: m
name: split
spec:
  targetRef: {kind: MeshService, name: web}
  to:
  - targetRef: {kind: MeshService, name: backend}
    rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      default:
        backendRefs: [{kind: MeshService, name: canary}]
        filters: [{type: RequestMirror, requestMirror: {backendRef: {kind: MeshService, name: mirror}}}]
---
type: MeshHTTPRoute
mesh: m
name: for-others
spec:
  targetRef: {kind: MeshService, name: other}
  to:
  - targetRef: {kind: MeshService, name: backend}
    rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      default:
        backendRefs: [{kind: MeshService, name: db}]
";

    /// Issue 39: a policy whose `to` names only services the sidecar cannot send to is not a
    /// dependency; route backends (of routes that may apply to it) count as reached and their
    /// endpoints as inputs.
    #[test]
    fn policies_are_narrowed_to_the_services_a_sidecar_reaches() {
        let (rs, live) = set(NARROWING, View::Live);
        let dp = rs[0].as_dataplane().unwrap();
        let names = |d: &Dependencies<'_>, ty: ResourceType| -> Vec<String> {
            d.policies
                .iter()
                .filter(|p| p.ty == ty)
                .map(|p| p.name.to_owned())
                .collect()
        };
        let deps = dependencies(dp, &live);
        assert_eq!(
            names(&deps, ResourceType::MeshTimeout),
            ["to-backend", "to-db-and-from"],
            "to-db names a service web cannot reach; the other one also has `from`"
        );
        assert_eq!(
            names(&deps, ResourceType::MeshRetry),
            ["to-canary", "to-mirror"],
            "reached through the route selecting web"
        );
        let mut services = deps.services.clone();
        services.sort_unstable();
        assert_eq!(services, ["backend", "canary", "mirror"]);
        // Selection: every policy whose top-level targetRef selects web.
        let all = selection(dp, &live);
        assert_eq!(
            names(&all, ResourceType::MeshTimeout),
            ["to-backend", "to-db", "to-db-and-from"]
        );
        // Not narrowed when it alone would decide that the type applies to web.
        assert_eq!(
            names(&deps, ResourceType::MeshCircuitBreaker),
            ["alone-to-db"]
        );
        // A TrafficRoute destination `*` is the outbound's own service: nothing new reached.
        let same = format!(
            "{NARROWING}---\ntype: TrafficRoute\nmesh: m\nname: any\nsources: [{{match: {{kuma.io/service: web}}}}]\ndestinations: [{{match: {{kuma.io/service: '*'}}}}]\nconf: {{destination: {{kuma.io/service: '*'}}}}\n"
        );
        let (rs, live) = set(&same, View::Live);
        let deps = dependencies(rs[0].as_dataplane().unwrap(), &live);
        assert_eq!(
            names(&deps, ResourceType::MeshTimeout),
            ["to-backend", "to-db-and-from"]
        );
        // A MeshServiceSubset entry in the type: its rules leave the one-key fast path, so
        // nothing of the type is narrowed.
        let subset = NARROWING.replacen(
            "{kind: MeshService, name: backend}, default: {idleTimeout",
            "{kind: MeshServiceSubset, name: backend, tags: {v: '2'}}, default: {idleTimeout",
            1,
        );
        let (rs, live) = set(&subset, View::Live);
        let deps = dependencies(rs[0].as_dataplane().unwrap(), &live);
        assert_eq!(
            names(&deps, ResourceType::MeshTimeout),
            ["to-backend", "to-db", "to-db-and-from"]
        );
    }

    /// The Global plans the fleet diff from Dataplanes as stored, whose transparent-proxy VIP
    /// outbounds are not resolved: it must not narrow (the zone does, on the resolved ones).
    #[test]
    fn the_globals_view_of_a_transparent_proxy_is_not_narrowed() {
        let yaml = r"
type: Dataplane
mesh: m
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001}
---
type: MeshTimeout
mesh: m
name: all
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 1s}}]
---
type: MeshTimeout
mesh: m
name: to-backend
labels: {kuma.io/effect: shadow}
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: backend}, default: {idleTimeout: 5s}}]
";
        let (rs, live) = set(yaml, View::Live);
        let (_, shadow) = set(yaml, View::Shadow);
        let dp = rs[0].as_dataplane().unwrap();
        assert!(
            !views_differ(dp, &live, &shadow),
            "as stored, web has no outbound to backend: narrowed"
        );
        assert!(selections_differ(dp, &live, &shadow));
    }
}
