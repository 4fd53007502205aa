//! What a ZoneIngress's config depends on: the destinations the routes of a mesh name (Kuma's
//! `BuildMeshDestinations`), so the fleet diff knows when a shadow policy can change an
//! ingress, and the generator which subsets to serve.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::resource::ResourceType;
use crate::target_ref::{TargetRef, TargetRefKind, SERVICE_TAG};
use crate::view::PolicySet;

/// How the fleet-wide shadow diff names a ZoneIngress among a mesh's DPPs:
/// `zone-ingress/<name>` (a Dataplane name never contains `/`).
pub const FLEET_NAME_PREFIX: &str = "zone-ingress/";

/// `true` when the ingresses' config can differ between the `live` and `shadow` policies of a
/// mesh: the destinations its routes name differ.
pub fn views_differ(live: &PolicySet, shadow: &PolicySet) -> bool {
    mesh_destinations(live) != mesh_destinations(shadow)
}

/// Kuma's match-all tag value.
pub const MATCH_ALL: &str = "*";

/// Kuma's `tags.FromTargetRef`: `MeshService` → its service, `MeshServiceSubset` → service and
/// tags; other kinds name no destination.
fn tags_of(
    kind: Option<&TargetRefKind>,
    name: &str,
    tags: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    match kind? {
        TargetRefKind::MeshService => {
            Some(BTreeMap::from([(SERVICE_TAG.to_owned(), name.to_owned())]))
        }
        TargetRefKind::MeshServiceSubset => {
            let mut out = tags.clone();
            out.insert(SERVICE_TAG.to_owned(), name.to_owned());
            Some(out)
        }
        _ => None,
    }
}

fn ref_tags(r: &TargetRef) -> Option<BTreeMap<String, String>> {
    tags_of(r.kind.as_ref(), &r.name, &r.tags)
}

/// The backends a route rule's `default` sends to (`backendRefs`), as destination tags;
/// `None` when the rule names no backends.
fn backend_tags(default: &Value) -> Option<Vec<BTreeMap<String, String>>> {
    let refs = default.get("backendRefs")?.as_array()?;
    Some(
        refs.iter()
            .filter_map(|b| {
                let kind: Option<TargetRefKind> =
                    serde_json::from_value(b.get("kind")?.clone()).ok();
                let name = b.get("name").and_then(Value::as_str).unwrap_or_default();
                let tags: BTreeMap<String, String> = b
                    .get("tags")
                    .and_then(|t| serde_json::from_value(t.clone()).ok())
                    .unwrap_or_default();
                tags_of(kind.as_ref(), name, &tags)
            })
            .collect(),
    )
}

/// Kuma's `BuildMeshDestinations` (without gateways and VirtualOutbounds, which Umbra does not
/// generate): service (or `*`) → destination tag sets.
pub fn mesh_destinations(policies: &PolicySet) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
    let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    let mut add = |tags: BTreeMap<String, String>| {
        let service = tags.get(SERVICE_TAG).cloned().unwrap_or_default();
        out.entry(service).or_default().push(tags);
    };
    let traffic_routes = policies.old_policies(ResourceType::TrafficRoute);
    for r in traffic_routes {
        if let crate::resource::Spec::TrafficRoute(tr) = &r.spec {
            let Some(conf) = &tr.conf else { continue };
            for split in &conf.split {
                add(split.destination.clone());
            }
            if !conf.destination.is_empty() {
                add(conf.destination.clone());
            }
            for http in &conf.http {
                for split in &http.split {
                    add(split.destination.clone());
                }
                if !http.destination.is_empty() {
                    add(http.destination.clone());
                }
            }
        }
    }
    if traffic_routes.is_empty() {
        add(BTreeMap::from([(
            SERVICE_TAG.to_owned(),
            MATCH_ALL.to_owned(),
        )]));
    }
    for ty in [ResourceType::MeshHTTPRoute, ResourceType::MeshTCPRoute] {
        for p in policies.new.get(&ty).into_iter().flatten() {
            for to in &p.to {
                let Some(to_tags) = ref_tags(&to.target_ref) else {
                    continue;
                };
                let rules: Vec<&Value> = if ty == ResourceType::MeshHTTPRoute {
                    to.conf
                        .get("rules")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.get("default"))
                        .collect()
                } else {
                    to.conf.get("default").into_iter().collect()
                };
                for default in rules {
                    match backend_tags(default) {
                        None => add(to_tags.clone()),
                        Some(backends) => backends.into_iter().for_each(&mut add),
                    }
                }
            }
        }
    }
    out
}
