//! The `_config` of this zone's zone proxies, also asked by the Global over KDS:
//! `{xds, notGenerated, diff?}` as for a DPP, generated over every mesh of the zone as the
//! reconciler does ([`zone_meshes`]), in the Live view or, with `shadow=true`, the Shadow one:
//! - ZoneIngresses (`GET /zone-ingresses/{name}/_config`, [`ingress_config`]);
//! - ZoneEgresses (`GET /zoneegresses/{name}/_config`, [`egress_config`]): a shadow
//!   MeshTrafficPermission, ExternalService or Secret changes what the egress would serve. The
//!   SDS secrets (the egress's identities) are left out of the answer, as for every proxy.

use serde_json::{json, Value};
use umbra_api::error::ApiError;
use umbra_core::dataplane::ZONE_EGRESS_KEY_MESH;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_core::target_ref::ZONE_TAG;
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;

use crate::ingress::ZoneView;
use crate::inspect::{blocking, render_err, InspectQuery};
use crate::reconciler::vips;

/// Policy types Kuma's egress also applies to ExternalService traffic and Umbra's does not.
const NOT_ON_EGRESS: &[ResourceType] = &[
    ResourceType::MeshFaultInjection,
    ResourceType::MeshRateLimit,
    ResourceType::MeshLoadBalancingStrategy,
    ResourceType::FaultInjection,
    ResourceType::RateLimit,
];

/// What of the meshes routed through the egress its config leaves out in `view`, with why:
/// the destinations of VirtualOutbounds and gateways (as for an ingress), the policies of
/// [`NOT_ON_EGRESS`] and the ExternalServices of other zones.
fn not_generated(meshes: &[ZoneMesh], view: View, zone: &str) -> Value {
    let mut out = Vec::new();
    for (_, live, shadow, resources) in meshes {
        let policies = if view == View::Shadow { shadow } else { live };
        if !policies.zone_egress {
            continue;
        }
        out.extend(destinations_not_generated(
            resources.iter(),
            view,
            "zone egress",
        ));
        for r in resources.iter().filter(|r| view.includes(r)) {
            let reason = if NOT_ON_EGRESS.contains(&r.ty()) {
                "Kuma's zone egress also applies this policy to the ExternalService traffic through it; Umbra's egress does not"
            } else if r.ty() == ResourceType::ExternalService
                && policies.external.all().any(|e| {
                    e.name == r.meta.name && e.tags.get(ZONE_TAG).is_some_and(|z| z != zone)
                })
            {
                "an ExternalService of another zone: Kuma's egress reaches it through that zone's ingress, which Umbra's ingresses do not offer, so this egress has no route to it"
            } else {
                continue;
            };
            out.push(json!({
                "type": r.ty().name(),
                "mesh": r.meta.mesh,
                "name": r.meta.name,
                "reason": reason,
            }));
        }
    }
    out.into()
}

/// The `_config` body of this zone's ZoneEgress `name` (see the module docs).
///
/// # Errors
/// 404 for an egress that is not this zone's, a 500 if rendering fails.
pub fn egress_config(
    store: &crate::store::Store,
    zone: &ZoneView,
    name: &str,
    q: InspectQuery,
) -> Result<Value, ApiError> {
    let key = ResourceKey {
        ty: ResourceType::ZoneEgress,
        mesh: String::new(),
        name: name.to_owned(),
    };
    let missing = || ApiError::not_found(format!("zone egress {name:?} not found"));
    let stored = store.get(&key).ok_or_else(missing)?;
    let ze = stored.resource.as_zone_egress().ok_or_else(missing)?;
    if ze.is_remote(&zone.zone) {
        return Err(ApiError::not_found(format!(
            "zone egress {name:?} belongs to zone {:?}: ask that zone, or the Global",
            ze.zone
        )));
    }
    let meshes = zone_meshes(store, zone);
    let generate_view = |view: View| -> Result<umbra_xds::snapshot::Snapshot, ApiError> {
        let views: Vec<umbra_xds::egress::EgressMesh<'_>> = meshes
            .iter()
            .map(|(ctx, live, shadow, _)| umbra_xds::egress::EgressMesh {
                ctx,
                policies: if view == View::Shadow { shadow } else { live },
            })
            .collect();
        let mut snap = umbra_xds::egress::generate_egress(ze, &zone.zone, &views).map_err(|e| {
            ApiError::status(axum::http::StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        })?;
        if let Some(a) = zone.admin_input(ZONE_EGRESS_KEY_MESH, name, &ze.networking.address) {
            umbra_xds::base::admin::generate(&mut snap, &ze.networking.address, &a);
        }
        Ok(snap)
    };
    config_body(&q, generate_view, |view| {
        not_generated(&meshes, view, &zone.zone)
    })
}

/// The `{xds, notGenerated, diff?}` body of a zone proxy under `q`: `generate_view` gives its
/// snapshot in a view, `not_generated` what that view leaves out.
///
/// # Errors
/// `generate_view`'s, and a 500 if rendering fails.
fn config_body(
    q: &InspectQuery,
    generate_view: impl Fn(View) -> Result<umbra_xds::snapshot::Snapshot, ApiError>,
    not_generated: impl Fn(View) -> Value,
) -> Result<Value, ApiError> {
    let live = generate_view(View::Live)?;
    let view = if q.shadow { View::Shadow } else { View::Live };
    let shown = if q.shadow {
        generate_view(View::Shadow)?
    } else {
        live.clone()
    };
    let mut body = json!({
        "xds": shown.to_document().map_err(render_err)?,
        "notGenerated": not_generated(view),
    });
    if q.diff {
        let patch = umbra_xds::diff::snapshot_diff(&live, &shown).map_err(render_err)?;
        body["diff"] = serde_json::to_value(patch).unwrap_or_else(|_| json!([]));
    }
    Ok(body)
}

/// The resources whose destinations Kuma's zone proxies also pass through and Umbra's do not
/// (VirtualOutbounds, MeshGateways, MeshGatewayRoutes) among `resources`, in `view`.
fn destinations_not_generated<'a>(
    resources: impl Iterator<Item = &'a Resource>,
    view: View,
    proxy: &str,
) -> Vec<Value> {
    resources
        .filter(|r| {
            matches!(
                r.ty(),
                ResourceType::VirtualOutbound
                    | ResourceType::MeshGateway
                    | ResourceType::MeshGatewayRoute
            ) && view.includes(r)
        })
        .map(|r| {
            json!({
                "type": r.ty().name(),
                "mesh": r.meta.mesh,
                "name": r.meta.name,
                "reason": format!("Kuma's {proxy} also passes this resource's destinations through; Umbra's does not generate them"),
            })
        })
        .collect()
}

/// [`egress_config`] off the async runtime, with the query parsed from `pairs`.
///
/// # Errors
/// A 400 for bad parameters, [`egress_config`]'s errors, a 500 if the task fails.
pub async fn answer_egress(
    store: crate::store::Store,
    zone: ZoneView,
    name: String,
    pairs: &[(String, String)],
) -> Result<Value, ApiError> {
    answer_with(store, zone, name, pairs, egress_config).await
}

/// `config` (a zone proxy's `_config`) off the async runtime, the query parsed from `pairs`.
async fn answer_with(
    store: crate::store::Store,
    zone: ZoneView,
    name: String,
    pairs: &[(String, String)],
    config: fn(&crate::store::Store, &ZoneView, &str, InspectQuery) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let q = InspectQuery::parse(pairs)?;
    blocking(move || config(&store, &zone, &name, q)).await
}

/// The `_config` body of this zone's ZoneIngress `name` (`GET /zone-ingresses/{name}/_config`):
/// `{xds, notGenerated, diff?}` as for a DPP, generated over every mesh of the zone as the
/// reconciler does, in the Live view or, with `shadow=true`, the Shadow one (whose routes may
/// add SNIs it passes through). `notGenerated` names the VirtualOutbounds, MeshGateways and
/// MeshGatewayRoutes of the view: Kuma's ingress also passes their destinations through, and
/// Umbra's does not.
///
/// # Errors
/// 404 for an ingress that is not this zone's, a 500 if rendering fails.
pub fn ingress_config(
    store: &crate::store::Store,
    zone: &ZoneView,
    name: &str,
    q: InspectQuery,
) -> Result<Value, ApiError> {
    let key = umbra_core::resource::ResourceKey {
        ty: ResourceType::ZoneIngress,
        mesh: String::new(),
        name: name.to_owned(),
    };
    let stored = store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(format!("zone ingress {name:?} not found")))?;
    let zi = stored
        .resource
        .as_zone_ingress()
        .ok_or_else(|| ApiError::not_found(format!("zone ingress {name:?} not found")))?;
    if zi.is_remote(&zone.zone) {
        return Err(ApiError::not_found(format!(
            "zone ingress {name:?} belongs to zone {:?}: ask that zone, or the Global",
            zi.zone
        )));
    }
    let meshes = zone_meshes(store, zone);
    let generate_view = |view: View| {
        let views: Vec<umbra_xds::ingress::IngressMesh<'_>> = meshes
            .iter()
            .map(|(ctx, live, shadow, _)| umbra_xds::ingress::IngressMesh {
                ctx,
                policies: if view == View::Shadow { shadow } else { live },
            })
            .collect();
        let mut snap = umbra_xds::ingress::generate_ingress(name, zi, &views);
        if let Some(a) = zone.admin_input("", name, &zi.networking.address) {
            umbra_xds::base::admin::generate(&mut snap, &zi.networking.address, &a);
        }
        snap
    };
    config_body(
        &q,
        |view| Ok(generate_view(view)),
        |view| {
            let all = meshes.iter().flat_map(|(_, _, _, resources)| resources);
            destinations_not_generated(all, view, "zone ingress").into()
        },
    )
}

/// One mesh of the zone as its zone proxies are generated from it: its context, its Live and
/// Shadow policies, and its resources (with the persisted VIPs).
pub(crate) type ZoneMesh = (MeshContext, PolicySet, PolicySet, Vec<Resource>);

/// Every mesh of the zone in `store`, in name order, as its zone proxies (ingresses, egresses)
/// are generated from them.
pub(crate) fn zone_meshes(store: &crate::store::Store, zone: &ZoneView) -> Vec<ZoneMesh> {
    let mut meshes = Vec::new();
    for m in store.list(ResourceType::Mesh, "") {
        let umbra_core::resource::Spec::Mesh(spec) = &m.resource.spec else {
            continue;
        };
        let mesh = m.resource.meta.name.clone();
        let resources = vips::with_persisted(store, &mesh, store.mesh_resources(&mesh));
        let ctx = zone.context(
            &mesh,
            spec,
            resources.iter().filter_map(Resource::as_dataplane),
        );
        let live = PolicySet::build(&mesh, &resources, View::Live);
        let shadow = PolicySet::build(&mesh, &resources, View::Shadow);
        meshes.push((ctx, live, shadow, resources));
    }
    meshes
}

/// [`ingress_config`] off the async runtime, with the query parsed from `pairs`.
///
/// # Errors
/// A 400 for bad parameters, [`ingress_config`]'s errors, a 500 if the task fails.
pub async fn answer_ingress(
    store: crate::store::Store,
    zone: ZoneView,
    name: String,
    pairs: &[(String, String)],
) -> Result<Value, ApiError> {
    answer_with(store, zone, name, pairs, ingress_config).await
}
