//! What a ZoneEgress's config depends on in one mesh, so the fleet diff knows when a shadow
//! policy can change an egress: the egress serves a mesh only when its Mesh routes through
//! it (`routing.zoneEgress: true`), and then reads the mesh's route destinations (the SNIs it
//! accepts, as an ingress does), its ExternalServices (resolved with their Secrets: what it
//! originates) and the permissions to them (MeshTrafficPermission, TrafficPermission).

use crate::resource::ResourceType;
use crate::view::PolicySet;

/// How the fleet-wide shadow diff names a ZoneEgress among a mesh's DPPs:
/// `zone-egress/<name>` (a Dataplane name never contains `/`).
pub const FLEET_NAME_PREFIX: &str = "zone-egress/";

/// `true` when the egresses' config can differ between the `live` and `shadow` policies of a
/// mesh (see the module docs). Conservative: any difference in what an egress reads counts.
pub fn views_differ(live: &PolicySet, shadow: &PolicySet) -> bool {
    if !live.zone_egress && !shadow.zone_egress {
        return false;
    }
    let permissions = |p: &PolicySet| {
        (
            p.new.get(&ResourceType::MeshTrafficPermission).cloned(),
            p.old_policies_with_superseded(ResourceType::TrafficPermission)
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    live.zone_egress != shadow.zone_egress
        || live.external != shadow.external
        || super::ingress::views_differ(live, shadow)
        || permissions(live) != permissions(shadow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use crate::view::View;

    fn set(yaml: &str, view: View) -> PolicySet {
        let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
        PolicySet::build("default", &resources, view)
    }

    const MESH: &str = "type: Mesh\nname: default\nrouting: {zoneEgress: true}\nmtls: {enabledBackend: ca-1, backends: [{name: ca-1, type: builtin}]}\n---\ntype: ExternalService\nmesh: default\nname: pay\ntags: {kuma.io/service: pay}\nnetworking: {address: 'pay.example.com:443'}\n";

    #[test]
    fn a_shadow_permission_or_external_service_reaches_the_egress_only_when_routed_through_it() {
        let mtp = "---\ntype: MeshTrafficPermission\nmesh: default\nname: to-pay\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: pay}\n  from: [{targetRef: {kind: Mesh}, default: {action: Allow}}]\n";
        let es = "---\ntype: ExternalService\nmesh: default\nname: pay-eu\nlabels: {kuma.io/effect: shadow}\ntags: {kuma.io/service: pay}\nnetworking: {address: 'pay.example.eu:443'}\n";
        for extra in [mtp, es] {
            let all = format!("{MESH}{extra}");
            assert!(views_differ(
                &set(&all, View::Live),
                &set(&all, View::Shadow)
            ));
            let off = all.replace("zoneEgress: true", "zoneEgress: false");
            assert!(!views_differ(
                &set(&off, View::Live),
                &set(&off, View::Shadow)
            ));
        }
        assert!(!views_differ(
            &set(MESH, View::Live),
            &set(MESH, View::Shadow)
        ));
    }
}
