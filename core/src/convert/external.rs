//! Conversions of old policies that configure traffic to ExternalServices: a
//! TrafficPermission whose `destinations` select an ExternalService of the mesh governs, in
//! Kuma 2.7, who reaches it; its MeshTrafficPermission replacement does so only on a zone
//! egress. [`annotate`] adds that difference to such conversions as a [`NoteKind::Semantics`]
//! note naming the ExternalServices.
//!
//! Kuma 2.7.29: `pkg/core/permissions/matcher.go` `MatchExternalServicesTrafficPermissions`
//! (the TrafficPermission path of sidecars reaching ExternalServices themselves, when the mesh
//! routes by TrafficRoute), `meshroute/clusters.go` (the MeshHTTPRoute/MeshTCPRoute path reads
//! every ExternalService, unfiltered) and the MeshTrafficPermission plugin's egress path (deny
//! until a permission names it).

use std::collections::BTreeSet;

use super::model::{Conversion, ConvertError, Note, NoteKind};
use crate::resource::{Resource, ResourceType, Spec};

/// Add the ExternalService note to every TrafficPermission conversion of `results` whose
/// destinations select an ExternalService among `resources` (same mesh). `results` are in the
/// order of the old policies of `resources`, as [`super::convert`] returns them.
pub fn annotate(resources: &[Resource], results: &mut [Result<Conversion, ConvertError>]) {
    for c in results.iter_mut().flatten() {
        if c.source.ty != ResourceType::TrafficPermission {
            continue;
        }
        let Some(Spec::TrafficPermission(tp)) = resources
            .iter()
            .find(|r| r.key() == c.source)
            .map(|r| &r.spec)
        else {
            continue;
        };
        let reached: BTreeSet<&str> = resources
            .iter()
            .filter(|r| r.meta.mesh == c.source.mesh)
            .filter_map(|r| match &r.spec {
                Spec::ExternalService(es) => Some((r, es)),
                _ => None,
            })
            .filter(|(_, es)| tp.destinations.iter().any(|d| d.matches(&es.tags)))
            .map(|(r, _)| r.meta.name.as_str())
            .collect();
        if reached.is_empty() {
            continue;
        }
        let names: Vec<&str> = reached.into_iter().collect();
        c.notes.push(Note::new(
            NoteKind::Semantics,
            "destinations",
            format!(
                "its destinations select ExternalService(s) {}: Kuma enforces a MeshTrafficPermission on an ExternalService only at the zone egress (Mesh `routing.zoneEgress: true`, where it is denied until a permission names it); sidecars that reach it themselves are let through by this TrafficPermission while the mesh routes by TrafficRoute, and unfiltered once MeshHTTPRoute/MeshTCPRoute route them, so deleting this TrafficPermission without a zone egress changes which DPPs reach it",
                names.join(", ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{convert, Options};

    #[test]
    fn a_permission_to_an_external_service_says_where_its_replacement_applies() {
        let resources = Resource::all_from_bytes(
            b"type: ExternalService\nmesh: default\nname: pay\ntags: {kuma.io/service: pay}\nnetworking: {address: 'pay.example.com:443'}\n---\ntype: TrafficPermission\nmesh: default\nname: web-to-pay\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: pay}}]\n---\ntype: TrafficPermission\nmesh: default\nname: web-to-api\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: api}}]\n",
        )
        .unwrap();
        let results = convert(&resources, &Options::default());
        let notes = |name: &str| -> Vec<String> {
            results
                .iter()
                .flatten()
                .find(|c| c.source.name == name)
                .unwrap()
                .notes
                .iter()
                .map(|n| n.message.clone())
                .collect()
        };
        assert!(notes("web-to-pay")
            .iter()
            .any(|m| m.contains("ExternalService(s) pay:") && m.contains("zone egress")));
        assert!(!notes("web-to-api")
            .iter()
            .any(|m| m.contains("ExternalService")));
    }
}
