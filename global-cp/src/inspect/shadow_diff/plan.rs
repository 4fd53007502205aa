//! Which DPPs a fleet-wide diff asks about ([`Plan`]), worked out by the [`Planner`] from the
//! mesh's policies and the Dataplanes the zones synced: only those whose dependencies differ
//! between the Live view and the Shadow view with the promotion can change. The zones'
//! ZoneIngresses offering a service of the mesh are asked about too (as
//! `zone-ingress/<name>`) when the destinations the mesh's routes name differ between the
//! views: those are the SNIs an ingress passes through. Pure.

use std::collections::BTreeMap;

use umbra_core::resource::Resource;
use umbra_core::view::{NotGenerated, PolicySet, Promotion, View};

use crate::inspect::context::locate_in;
use crate::store::Stored;

/// Which DPPs a fleet-wide diff asks about: those whose config can differ between the views.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// `"<Type>/<name>"` of the shadow policies going live.
    pub policies: Vec<String>,
    /// Zone → names in that zone of its DPPs to diff (sorted).
    pub zones: BTreeMap<String, Vec<String>>,
    /// Shadow policies that select DPPs but whose effect Umbra does not generate yet
    /// ([`PolicySet::not_generated`]), and the Dataplane fields Umbra does not act on
    /// ([`NotGenerated::dataplane_fields`]; type `Dataplane`, no name, the field with its list
    /// indexes as `[*]`, in the Live view as well: whatever the policies, those DPPs' configs
    /// lack it): `(type, name, field)` → (reason, DPPs). The diff cannot show them, so the
    /// answer lists them.
    pub not_generated: BTreeMap<(String, String, Option<String>), (String, usize)>,
}

impl Plan {
    /// DPPs to diff, over all zones.
    pub fn considered(&self) -> usize {
        self.zones.values().map(Vec::len).sum()
    }
}

/// Narrows a fleet-wide diff of a mesh to the DPPs (Global-stored Dataplanes, each with its
/// zone) whose dependencies differ between the Live view and the Shadow view with the
/// promotion ([`umbra_core::dependencies::views_differ`]): the other DPPs' configs are identical in
/// both, so no zone needs to generate them. Pure; fed page by page, so only names are kept.
#[derive(Debug)]
pub struct Planner {
    mesh: String,
    live: PolicySet,
    shadow: PolicySet,
    plan: Plan,
}

impl Planner {
    /// A planner for `mesh` with its `policies`.
    pub fn new(mesh: &str, policies: &[Resource], promotion: &Promotion) -> Self {
        Self {
            mesh: mesh.to_owned(),
            live: PolicySet::build(mesh, policies, View::Live),
            shadow: PolicySet::build_shadow(mesh, policies, promotion),
            plan: Plan {
                policies: promotion.promoted(mesh, policies),
                zones: BTreeMap::new(),
                not_generated: BTreeMap::new(),
            },
        }
    }

    /// Consider these Dataplanes.
    pub fn add(&mut self, dataplanes: &[Stored]) {
        for s in dataplanes {
            let (Some(dp), Some(at)) = (s.resource.as_dataplane(), locate_in(s)) else {
                continue;
            };
            let live = self.live.not_generated(dp);
            for n in self.shadow.not_generated(dp) {
                if live.contains(&n) {
                    continue;
                }
                let entry = self
                    .plan
                    .not_generated
                    .entry((n.type_name, n.name, None))
                    .or_insert((n.reason, 0));
                entry.1 += 1;
            }
            for n in NotGenerated::dataplane_fields("", "", dp) {
                let field = n.field.as_deref().map(any_index);
                let entry = self
                    .plan
                    .not_generated
                    .entry((n.type_name, String::new(), field))
                    .or_insert((n.reason, 0));
                entry.1 += 1;
            }
            // Not narrowed: the synced Dataplane lacks its VIP outbounds; the zone narrows.
            if umbra_core::dependencies::selections_differ(dp, &self.live, &self.shadow) {
                self.plan.zones.entry(at.zone).or_default().push(at.local);
            }
        }
    }

    /// Consider these ZoneIngresses (as the Global stores them, each with its zone).
    pub fn add_ingresses(&mut self, ingresses: &[Stored]) {
        if !umbra_core::dependencies::ingress::views_differ(&self.live, &self.shadow) {
            return;
        }
        for s in ingresses {
            let (Some(zi), Some(at)) = (s.resource.as_zone_ingress(), locate_in(s)) else {
                continue;
            };
            if !zi.available_services.iter().any(|a| a.mesh == self.mesh) {
                continue;
            }
            self.plan.zones.entry(at.zone).or_default().push(format!(
                "{}{}",
                umbra_core::dependencies::ingress::FLEET_NAME_PREFIX,
                at.local
            ));
        }
    }

    /// Consider these ZoneEgresses (as the Global stores them, each with its zone): asked about
    /// when the mesh routes through its egresses and a shadow policy can change what they serve
    /// ([`umbra_core::dependencies::egress::views_differ`]).
    pub fn add_egresses(&mut self, egresses: &[Stored]) {
        if !umbra_core::dependencies::egress::views_differ(&self.live, &self.shadow) {
            return;
        }
        for s in egresses {
            let Some(at) = locate_in(s).filter(|_| s.resource.as_zone_egress().is_some()) else {
                continue;
            };
            self.plan.zones.entry(at.zone).or_default().push(format!(
                "{}{}",
                umbra_core::dependencies::egress::FLEET_NAME_PREFIX,
                at.local
            ));
        }
    }

    /// The plan (names sorted per zone).
    pub fn finish(mut self) -> Plan {
        for names in self.plan.zones.values_mut() {
            names.sort();
        }
        self.plan
    }
}

/// `field` with each list index written `[*]` (`networking.inbound[2].serviceProbe` ->
/// `networking.inbound[*].serviceProbe`), so the fleet counts one entry per kind of field.
fn any_index(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*]");
            }
            ']' if in_index => in_index = false,
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(y: &str) -> Resource {
        Resource::from_bytes(y.as_bytes()).unwrap()
    }

    /// A Dataplane as the Global stores it: a zone, and its zone's name as display name.
    fn stored(zone: Option<&str>, local: &str, service: &str) -> Stored {
        let r = res(&format!(
            "type: Dataplane\nmesh: m\nname: {local}-abc\nlabels: {{kuma.io/display-name: {local}}}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n  outbound:\n  - port: 9000\n    tags: {{kuma.io/service: backend}}\n"
        ));
        Stored {
            resource: r,
            version: 1,
            zone: zone.map(str::to_owned),
            revision: 1,
        }
    }

    fn timeout(name: &str, target: &str, shadow: bool) -> Resource {
        let labels = if shadow {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        res(&format!(
            "type: MeshTimeout\nmesh: m\nname: {name}\n{labels}spec:\n  targetRef: {target}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: 5s}}\n"
        ))
    }

    fn policies() -> Vec<Resource> {
        vec![
            res("type: Mesh\nname: m\n"),
            timeout("live-all", "{kind: Mesh}", false),
            timeout("shadow-backend", "{kind: MeshService, name: backend}", true),
            timeout("shadow-web", "{kind: MeshService, name: web}", true),
        ]
    }

    #[test]
    fn only_dataplanes_whose_views_differ_are_asked_about_by_zone_sorted() {
        let mut planner = Planner::new("m", &policies(), &Promotion::All);
        planner.add(&[
            stored(Some("zone-2"), "web-2", "web"),
            stored(Some("zone-1"), "backend-1", "backend"),
            stored(Some("zone-1"), "redis-1", "redis"),
        ]);
        planner.add(&[
            stored(Some("zone-2"), "web-1", "web"),
            // No zone: nobody to ask.
            stored(None, "backend-9", "backend"),
        ]);
        let plan = planner.finish();
        assert_eq!(
            plan.zones,
            BTreeMap::from([
                ("zone-1".to_owned(), vec!["backend-1".to_owned()]),
                (
                    "zone-2".to_owned(),
                    vec!["web-1".to_owned(), "web-2".to_owned()]
                ),
            ])
        );
        assert_eq!(plan.considered(), 3);
        assert_eq!(
            plan.policies,
            ["MeshTimeout/shadow-backend", "MeshTimeout/shadow-web"]
        );
    }

    #[test]
    fn dataplane_fields_not_acted_on_are_counted_over_the_fleet() {
        let mut planner = Planner::new("m", &policies(), &Promotion::All);
        let with = |zone: &str, local: &str, extra: &str| {
            let mut s = stored(Some(zone), local, "web");
            let yaml = format!(
                "type: Dataplane\nmesh: m\nname: {local}-abc\nlabels: {{kuma.io/display-name: {local}}}\nnetworking:\n  address: 10.0.0.1\n{extra}  inbound:\n  - port: 80\n    tags: {{kuma.io/service: web}}\n  - port: 81\n    tags: {{kuma.io/service: web}}\n    serviceProbe: {{interval: 1s}}\n"
            );
            s.resource = res(&yaml);
            s
        };
        planner.add(&[
            with(
                "zone-1",
                "a",
                "  outbound:\n  - port: 3002\n    backendRef: {kind: MeshService, name: c}\n",
            ),
            with(
                "zone-2",
                "b",
                "  outbound:\n  - port: 3002\n    backendRef: {kind: MeshService, name: c}\n",
            ),
            with("zone-2", "c", ""),
            stored(Some("zone-1"), "plain", "web"),
        ]);
        let plan = planner.finish();
        let found: Vec<(&str, &str, Option<&str>, usize)> = plan
            .not_generated
            .iter()
            .map(|((t, n, f), (_, count))| (t.as_str(), n.as_str(), f.as_deref(), *count))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "Dataplane",
                    "",
                    Some("networking.inbound[*].serviceProbe"),
                    3
                ),
                (
                    "Dataplane",
                    "",
                    Some("networking.outbound[*].backendRef"),
                    2
                ),
            ]
        );
        assert_eq!(any_index("a[12].b[3].c"), "a[*].b[*].c");
    }

    #[test]
    fn shadow_routes_and_route_targeted_timeouts_are_generated_so_not_reported() {
        let route = res("type: MeshHTTPRoute\nmesh: m\nname: canary\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default: {}\n");
        let on_route = res("type: MeshTimeout\nmesh: m\nname: on-canary\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshHTTPRoute, name: canary}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {http: {requestTimeout: 2s}}\n");
        let mut policies = policies();
        policies.extend([route, on_route]);
        let mut planner = Planner::new("m", &policies, &Promotion::All);
        planner.add(&[
            stored(Some("zone-1"), "web-1", "web"),
            stored(Some("zone-2"), "web-2", "web"),
            stored(Some("zone-1"), "backend-1", "backend"),
        ]);
        let plan = planner.finish();
        let found: Vec<(&str, &str, usize)> = plan
            .not_generated
            .iter()
            .map(|((t, n, _), (_, count))| (t.as_str(), n.as_str(), *count))
            .collect();
        // Routes are generated, and so is a MeshTimeout on a route (issue 16).
        assert_eq!(found, []);
        // Live: nothing to report (the route is shadow).
        let mut live_only = Planner::new(
            "m",
            &policies,
            &Promotion::parse("MeshTimeout/shadow-web").unwrap(),
        );
        live_only.add(&[stored(Some("zone-1"), "web-1", "web")]);
        assert!(live_only.finish().not_generated.is_empty());
    }

    #[test]
    fn promoting_one_policy_narrows_the_plan_to_what_it_selects() {
        let promotion = Promotion::parse("MeshTimeout/shadow-web").unwrap();
        let mut planner = Planner::new("m", &policies(), &promotion);
        planner.add(&[
            stored(Some("zone-1"), "backend-1", "backend"),
            stored(Some("zone-2"), "web-1", "web"),
        ]);
        let plan = planner.finish();
        assert_eq!(
            plan.zones,
            BTreeMap::from([("zone-2".to_owned(), vec!["web-1".to_owned()])])
        );
        assert_eq!(plan.policies, ["MeshTimeout/shadow-web"]);
    }

    #[test]
    fn egresses_are_asked_about_when_the_mesh_routes_through_them() {
        let egress = Stored {
            resource: res("type: ZoneEgress\nname: ze-abc\nlabels: {kuma.io/display-name: ze}\nzone: zone-2\nnetworking: {address: 10.0.0.2, port: 10002}\n"),
            version: 1,
            zone: Some("zone-2".to_owned()),
            revision: 1,
        };
        let with = |routed: bool| {
            let mut policies = policies();
            policies.push(res(&format!("type: Mesh\nname: m\nrouting: {{zoneEgress: {routed}}}\nmtls: {{enabledBackend: ca-1, backends: [{{name: ca-1, type: builtin}}]}}\n")));
            policies.push(res("type: MeshTrafficPermission\nmesh: m\nname: to-pay\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: pay}\n  from: [{targetRef: {kind: Mesh}, default: {action: Allow}}]\n"));
            let mut planner = Planner::new("m", &policies, &Promotion::All);
            planner.add_egresses(std::slice::from_ref(&egress));
            planner.finish().zones
        };
        assert_eq!(
            with(true),
            BTreeMap::from([("zone-2".to_owned(), vec!["zone-egress/ze".to_owned()])])
        );
        assert!(with(false).is_empty(), "not routed through the egress");
    }

    #[test]
    fn ingresses_are_asked_about_when_route_destinations_differ() {
        let ingress = |zone: &str, mesh: &str| {
            Stored {
            resource: res(&format!("type: ZoneIngress\nname: zi-abc\nlabels: {{kuma.io/display-name: zi}}\nzone: {zone}\nnetworking: {{address: 10.0.0.1, port: 10001}}\navailableServices:\n- {{mesh: {mesh}, instances: 1, tags: {{kuma.io/service: backend}}}}\n")),
            version: 1,
            zone: Some(zone.to_owned()),
            revision: 1,
        }
        };
        let ingresses = [ingress("zone-2", "m"), ingress("zone-3", "other")];
        // Timeouts only: no destination changes, no ingress to ask.
        let mut planner = Planner::new("m", &policies(), &Promotion::All);
        planner.add_ingresses(&ingresses);
        assert!(planner.finish().zones.is_empty());
        // A shadow route to a subset: zone-2's ingress (serving mesh m) is asked.
        let mut policies = policies();
        policies.push(res("type: MeshHTTPRoute\nmesh: m\nname: v2\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /}}]\n      default: {backendRefs: [{kind: MeshServiceSubset, name: backend, tags: {version: v2}}]}\n"));
        let mut planner = Planner::new("m", &policies, &Promotion::All);
        planner.add_ingresses(&ingresses);
        assert_eq!(
            planner.finish().zones,
            BTreeMap::from([("zone-2".to_owned(), vec!["zone-ingress/zi".to_owned()])])
        );
    }
}
