//! `GET /meshes/{mesh}/{plural}/{name}/_resources/dataplanes` on the Global: the DPPs (with
//! their zone) whose config the policy can change: those whose generation depends on it
//! ([`umbra_core::dependencies`]: the top-level `targetRef` for new policies, the selecting side for old
//! ones), computed from the Dataplanes the zones synced. A shadow policy is looked at in the
//! view where it is live.
//!
//! The answer is Kuma's `InspectDataplanesForPolicy` (Kuma 2.7 `api.yaml`): `{total, items:
//! [Meta], next?}`, each item `{type, mesh, name}` plus Umbra's `zone`, `displayName` and
//! `labels`; paged by `size`/`offset`, `next` left out on the last page; `name=` keeps the DPPs
//! whose (Global) name contains it, as Kuma's. Kuma lists old connection policies by sources
//! **or** destinations; Umbra lists the DPPs whose config depends on the policy.

use axum::Json;
use serde_json::{json, Value};
use umbra_api::error::ApiError;
use umbra_api::paging::PageParams;
use umbra_core::resource::{ResourceKey, ResourceType};
use umbra_core::view::{PolicySet, Promotion, View};
use umbra_kds::resource::DISPLAY_NAME_LABEL;

use super::context::{for_each_dataplane_page, mesh_exists, mesh_policies, InspectContext};
use crate::store::Stored;

/// The Dataplanes whose generation depends on one policy, as list items.
struct Selecting {
    set: PolicySet,
    ty: ResourceType,
    name: String,
    /// `name=`: only DPPs whose name contains it.
    name_contains: Option<String>,
    selected: Vec<Value>,
}

impl Selecting {
    fn add(&mut self, page: &[Stored]) {
        for s in page {
            let Some(dp) = s.resource.as_dataplane() else {
                continue;
            };
            if let Some(n) = &self.name_contains {
                if !s.resource.meta.name.contains(n.as_str()) {
                    continue;
                }
            }
            let depends = umbra_core::dependencies::selection(dp, &self.set)
                .policies
                .iter()
                .any(|d| d.ty == self.ty && d.name == self.name);
            if depends {
                let r = &s.resource;
                self.selected.push(json!({
                    "type": "Dataplane",
                    "mesh": r.meta.mesh,
                    "name": r.meta.name,
                    "zone": s.zone,
                    "displayName": r.meta.labels.get(DISPLAY_NAME_LABEL),
                    "labels": r.meta.labels,
                }));
            }
        }
    }
}

/// `GET /meshes/{mesh}/{plural}/{name}/_resources/dataplanes`: the DPPs the policy selects, as
/// Kuma's `InspectDataplanesForPolicy` (see the module docs), filtered by `name=` and paged.
///
/// # Errors
/// 400 for a type that is not a policy or a bad `size`/`offset`, 404 for an unknown mesh or
/// policy.
pub async fn affected(
    cx: &InspectContext,
    mesh: &str,
    ty: ResourceType,
    name: &str,
    query: &[(String, String)],
    path: &str,
) -> Result<Json<Value>, ApiError> {
    let page = PageParams::parse(query)?;
    if !ty.kind().is_policy() {
        return Err(ApiError::bad_parameter(
            "type",
            format!(
                "{} is not a policy type; only policies select dataplanes",
                ty.name()
            ),
        ));
    }
    mesh_exists(&*cx.store, mesh).await?;
    let key = ResourceKey {
        ty,
        mesh: mesh.to_owned(),
        name: name.to_owned(),
    };
    let policy = cx
        .store
        .get(&key)
        .await
        .map_err(ApiError::from)?
        .ok_or_else(|| ApiError::not_found(format!("{key} not found")))?;
    let resources = mesh_policies(&*cx.store, mesh).await?;
    // A shadow policy is looked at in the view where it is live.
    let set = if policy.resource.meta.is_shadow() {
        PolicySet::build_shadow(
            mesh,
            &resources,
            &Promotion::Only {
                ty,
                name: name.to_owned(),
            },
        )
    } else {
        PolicySet::build(mesh, &resources, View::Live)
    };
    let selecting = Selecting {
        set,
        ty,
        name: name.to_owned(),
        name_contains: query
            .iter()
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.clone()),
        selected: Vec::new(),
    };
    let selected = for_each_dataplane_page(&*cx.store, mesh, selecting, Selecting::add)
        .await?
        .selected;
    let total = selected.len();
    let items = selected
        .into_iter()
        .skip(page.offset)
        .take(page.size)
        .collect();
    Ok(Json(page.body(items, total, path, query)))
}
