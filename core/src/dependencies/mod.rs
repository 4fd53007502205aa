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
//! Narrowed by what a policy can reach (issue 39): a new policy whose only entries are `to`
//! entries naming services (`MeshService`, `MeshServiceSubset`) changes only the outbound
//! clusters and listeners of those services, so it is a dependency of a sidecar only when one
//! of them is a service the sidecar can send to: an outbound's, or a backend of a route that
//! may apply to it (MeshHTTPRoute and MeshTCPRoute `backendRefs` and mirrors, old TrafficRoute
//! destinations). Those route backends are dependencies too: their endpoints are in the
//! sidecar's EDS. [`selection`] gives the dependencies without that narrowing (every policy
//! whose top-level `targetRef` selects the DPP, as Kuma lists a policy's DPPs). A narrowed
//! policy still counts for its type's presence ([`PRESENT`]): a MeshTimeout selecting a DPP
//! gives its inbounds Kuma's default timeouts, whatever its `to` entries name.
//!
//! [`dependencies`] lists those; the caller turns them into a fingerprint with its own notion
//! of resource identity (the zone store's write revisions). [`ingress`] does the same for a
//! ZoneIngress.

pub mod egress;
pub mod ingress;

use crate::dataplane::DataplaneSpec;
use crate::matching::select;
use crate::old_matching::{dataplane_matches, OldPolicyRef};
use crate::resource::{ResourceType, Spec};
use crate::target_ref::TargetRefKind;
use crate::view::PolicySet;

/// The [`PolicyDependency::name`] standing for "some policy of this type selects the DPP",
/// listed when every policy of the type that selects it was narrowed away (see the module
/// docs): their content cannot change its config, but whether the type applies at all can.
pub const PRESENT: &str = "";

/// One policy a DPP's generation may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyDependency<'a> {
    /// Its type.
    pub ty: ResourceType,
    /// Its name (in the DPP's mesh).
    pub name: &'a str,
    /// An old policy whose type the old-vs-new rule switched off in this view.
    pub superseded: bool,
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

/// The services a sidecar's outbound clusters can send to (see the module docs): its
/// outbounds' and the backends of every route entry that may apply to one of them, in that
/// order, duplicates
/// kept, without wildcards, and whether one was a wildcard (an old TrafficRoute destination
/// `*`: the sidecar may then send anywhere).
fn reached_services<'a>(
    dp: &'a DataplaneSpec,
    policies: &'a PolicySet,
    routes: &[&crate::policy::TargetRefPolicy],
    include_shadow: bool,
) -> (Vec<&'a str>, bool) {
    let mut out: Vec<&'a str> = dp
        .networking
        .outbound
        .iter()
        .map(crate::dataplane::Outbound::service)
        .collect();
    let outbounds = out.clone();
    for ty in [ResourceType::MeshHTTPRoute, ResourceType::MeshTCPRoute] {
        for p in policies.new.get(&ty).into_iter().flatten() {
            if !include_shadow && p.meta().is_shadow() {
                continue;
            }
            let selected =
                select(&p.meta().mesh, &p.target_ref, dp, routes).map_or(true, |s| s.any());
            if !selected {
                continue;
            }
            for item in &p.to {
                // An entry for a service the sidecar has no outbound to generates nothing.
                let to_service = matches!(
                    item.target_ref.kind,
                    Some(TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset)
                );
                if to_service && !outbounds.contains(&item.target_ref.name.as_str()) {
                    continue;
                }
                backend_names(&item.conf, &mut out);
            }
        }
    }
    for r in policies.old_policies_with_superseded(ResourceType::TrafficRoute) {
        let Some(p) = OldPolicyRef::from_resource(0, r) else {
            continue;
        };
        let selects = p.sources.is_empty()
            || p.sources
                .iter()
                .any(|s| dataplane_matches(dp, &s.match_tags));
        // Its destinations: services the sidecar has an outbound to (or any).
        let to_outbound = p.destinations.is_empty()
            || p.destinations.iter().any(|d| {
                d.match_tags
                    .get(crate::target_ref::SERVICE_TAG)
                    .is_none_or(|s| s == ingress::MATCH_ALL || outbounds.contains(&s.as_str()))
            });
        let (true, true, Spec::TrafficRoute(tr)) = (selects, to_outbound, &r.spec) else {
            continue;
        };
        let Some(conf) = &tr.conf else { continue };
        let destinations = conf
            .split
            .iter()
            .map(|s| &s.destination)
            .chain([&conf.destination])
            .chain(conf.http.iter().flat_map(|h| {
                h.split
                    .iter()
                    .map(|s| &s.destination)
                    .chain([&h.destination])
            }));
        for d in destinations {
            if let Some(service) = d.get(crate::target_ref::SERVICE_TAG) {
                out.push(service.as_str());
            }
        }
    }
    let wildcard = out.contains(&ingress::MATCH_ALL);
    out.retain(|s| *s != ingress::MATCH_ALL);
    (out, wildcard)
}

/// The service names of every backend reference in a route entry (`backendRefs` items and a
/// mirror's `backendRef`, at any depth), appended to `out`.
fn backend_names<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    use serde_json::Value;
    let name = |b: &'a Value| b.get("name").and_then(Value::as_str);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("backendRefs", Value::Array(refs)) => out.extend(refs.iter().filter_map(name)),
                    ("backendRef", b) => out.extend(name(b)),
                    _ => {}
                }
                backend_names(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| backend_names(x, out)),
        _ => {}
    }
}

/// `true` when `p` changes nothing on a sidecar that sends to none of `reached`: its only
/// entries are `to` entries, each naming a service not in `reached`, and its top-level
/// `targetRef` selects proxies directly (not through a route).
fn reaches_none_of(p: &crate::policy::TargetRefPolicy, reached: &[&str]) -> bool {
    use crate::target_ref::TargetRefKind as K;
    let direct = matches!(
        p.target_ref.kind,
        Some(K::Mesh | K::MeshSubset | K::MeshService | K::MeshServiceSubset)
    );
    direct
        && p.from.is_empty()
        && p.single.is_none()
        && !p.to.is_empty()
        && p.to.iter().all(|item| {
            matches!(
                item.target_ref.kind,
                Some(K::MeshService | K::MeshServiceSubset)
            ) && !reached.contains(&item.target_ref.name.as_str())
        })
}

fn collect<'a>(dp: &'a DataplaneSpec, policies: &'a PolicySet, narrow: bool) -> Dependencies<'a> {
    let include_shadow = policies.view == Some(crate::view::View::Shadow);
    let routes: Vec<&crate::policy::TargetRefPolicy> = policies.routes.iter().collect();
    let builtin_gateway = crate::gateway::is_builtin(dp);
    // What a sidecar can send to. Not narrowed: gateways, which reach services through their
    // own routes (below), direct access, whose clusters are not outbounds, and wildcards.
    let direct_access = dp
        .networking
        .transparent_proxying
        .as_ref()
        .is_some_and(|t| !t.direct_access().is_empty());
    let (services, wildcard) = if builtin_gateway {
        let outbounds = dp.networking.outbound.iter();
        (
            outbounds.map(crate::dataplane::Outbound::service).collect(),
            true,
        )
    } else {
        reached_services(dp, policies, &routes, include_shadow)
    };
    let reached = (narrow && !wildcard && !direct_access).then(|| services.clone());
    let mut deps = Dependencies {
        services,
        ..Dependencies::default()
    };
    let mut push = |ty, name, superseded| {
        deps.policies.push(PolicyDependency {
            ty,
            name,
            superseded,
        });
    };
    for route in &policies.routes {
        push(
            ResourceType::MeshHTTPRoute,
            route.meta().name.as_str(),
            false,
        );
    }
    // Types of which a policy selecting the DPP was narrowed away.
    let mut narrowed: Vec<ResourceType> = Vec::new();
    // Types of which a dependency gives the DPP rules.
    let mut read: Vec<ResourceType> = Vec::new();
    for (ty, list) in &policies.new {
        if *ty == ResourceType::MeshHTTPRoute {
            continue; // pushed above, every one (they resolve references)
        }
        for p in list {
            if !include_shadow && p.meta().is_shadow() {
                continue;
            }
            let selection = select(&p.meta().mesh, &p.target_ref, dp, &routes);
            let selected = selection.as_ref().map_or(true, |s| s.any());
            let unreached = reached.as_deref().is_some_and(|r| reaches_none_of(p, r));
            if selected && !unreached {
                push(*ty, p.meta().name.as_str(), false);
                // It gives the DPP rules of its type (an unresolved targetRef gives none).
                let has_rules = !p.to.is_empty() || !p.from.is_empty() || p.single.is_some();
                if selection.is_ok() && has_rules && !read.contains(ty) {
                    read.push(*ty);
                }
            } else if selected && !narrowed.contains(ty) {
                narrowed.push(*ty);
            }
        }
    }
    // A narrowed policy's content changes nothing here, but whether the DPP has rules of its
    // type at all does (with any MeshTimeout rule its inbounds get Kuma's defaults; with any
    // MeshTCPRoute rule its TrafficRoutes are off): a type of which no dependency gives rules
    // gets one marker, so that the narrowed policies' coming and going is seen.
    for ty in narrowed {
        if !read.contains(&ty) {
            push(ty, PRESENT, false);
        }
    }
    let old = (policies.old.iter().map(|e| (e, false)))
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
                push(*ty, r.meta.name.as_str(), superseded);
            }
        }
    }
    // A builtin gateway: the MeshGateways (which one selects it, its listeners), the
    // MeshGatewayRoutes of its listeners, and the services its routes send to.
    if builtin_gateway {
        for r in &policies.stored {
            if r.ty() == ResourceType::MeshGateway {
                push(ResourceType::MeshGateway, r.meta.name.as_str(), false);
            }
        }
        for name in policies.gateway_certificates.keys() {
            push(ResourceType::Secret, name.as_str(), false);
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
                        push(*ty, p.meta().name.as_str(), false);
                    }
                }
            }
            // The old connection policies whose sources match one of its listeners' tags.
            for ty in crate::gateway_old::GATEWAY_OLD_TYPES {
                let lists = [
                    (policies.old.get(ty), false),
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
                            push(*ty, r.meta.name.as_str(), superseded);
                        }
                    }
                }
            }
            // The MeshGatewayRoutes selecting one of its listeners (any view: Kuma falls back
            // to them per virtual host) and the services they send to.
            let old_routes =
                crate::gateway::old_routes(policies.old_policies(ResourceType::MeshGatewayRoute));
            for r in old_routes
                .iter()
                .filter(|r| g.listeners.iter().any(|l| r.selects(&l.tags)))
            {
                push(
                    ResourceType::MeshGatewayRoute,
                    r.resource.meta.name.as_str(),
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
                push(ResourceType::MeshTCPRoute, p.meta().name.as_str(), false);
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
    if !policies.external.is_empty() && !dp.networking.outbound.is_empty() {
        for r in &policies.stored {
            if r.ty() != ResourceType::ExternalService {
                continue;
            }
            push(ResourceType::ExternalService, r.meta.name.as_str(), false);
            for secret in policies
                .external
                .secrets
                .get(&r.meta.name)
                .into_iter()
                .flatten()
            {
                push(ResourceType::Secret, secret.as_str(), false);
            }
        }
        for r in policies.old_policies_with_superseded(ResourceType::TrafficPermission) {
            push(ResourceType::TrafficPermission, r.meta.name.as_str(), false);
        }
    }
    deps
}

/// `true` when `dp`'s config can differ between the `live` and `shadow` sets (both of its
/// mesh): its dependencies differ. When they are equal, generation reads the same inputs in
/// both views and the two snapshots are identical, so the fleet-wide shadow diff skips the DPP.
pub fn views_differ(dp: &DataplaneSpec, live: &PolicySet, shadow: &PolicySet) -> bool {
    dependencies(dp, live).policies != dependencies(dp, shadow).policies
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
  to: [{targetRef: {kind: MeshServiceSubset, name: backend, tags: {v: '2'}}, default: {idleTimeout: 1s}}]
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
        // A wildcard TrafficRoute destination reaches everything: no narrowing.
        let wildcard = format!(
            "{NARROWING}---\ntype: TrafficRoute\nmesh: m\nname: any\nsources: [{{match: {{kuma.io/service: web}}}}]\ndestinations: [{{match: {{kuma.io/service: '*'}}}}]\nconf: {{destination: {{kuma.io/service: '*'}}}}\n"
        );
        let (rs, live) = set(&wildcard, View::Live);
        let deps = dependencies(rs[0].as_dataplane().unwrap(), &live);
        assert!(names(&deps, ResourceType::MeshTimeout).contains(&"to-db".to_owned()));
        let mut services = deps.services.clone();
        services.sort_unstable();
        assert_eq!(services, ["backend", "canary", "mirror"]);
    }
}
