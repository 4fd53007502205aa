//! Policies of a mesh by type (`/gui/meshes/{mesh}/policies[?type=&shadow=true]`): every
//! `targetRef` and old policy (`GET /meshes/{mesh}/{plural}`), shadow ones (label
//! `kuma.io/effect: shadow`) marked, with where they were converted from
//! (`umbra.io/converted-from`), observed ones (`umbra.io/observe: "true"`) linked to their
//! evidence ([`super::observed`]) and, on the Global, how many DPPs each selects
//! (`GET .../{name}/_resources/dataplanes`, the first [`MAX_COUNTED`] policies).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use umbra_core::convert::model::{CONVERTED_FROM_NAME_LABEL, CONVERTED_FROM_TYPE_LABEL};
use umbra_core::resource::{ResourceType, EFFECT_LABEL, EFFECT_SHADOW};

use super::fleet::items;
use super::{enc, get_all, text};
use crate::client::Caller;
use crate::query::PageQuery;
use crate::render::page;
use crate::state::{Console, Mode};

/// Policies whose selected DPPs are counted on one page (each count is a scan of the mesh's
/// Dataplanes on the Global); the rest show a dash (filter by type to count them).
pub const MAX_COUNTED: usize = 50;

/// Most policies of one type listed.
pub const MAX_PER_TYPE: usize = 1000;

/// Query of the policies page.
#[derive(Debug, Default, Deserialize)]
pub struct PoliciesQuery {
    /// Only this type (Kuma's name, `MeshTimeout`).
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// Only shadow policies.
    pub shadow: Option<bool>,
}

/// Every policy type, `targetRef` ones first, in the order of Umbra's type table.
pub fn policy_types() -> Vec<ResourceType> {
    let mut types: Vec<ResourceType> = ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.kind().is_policy())
        .collect();
    types.sort_by_key(|t| t.kind() != umbra_core::resource::TypeKind::NewPolicy);
    types
}

/// `GET /gui/meshes/{mesh}/policies`.
pub async fn list(
    State(console): State<Console>,
    caller: Caller,
    uri: Uri,
    Path(mesh): Path<String>,
    PageQuery(q): PageQuery<PoliciesQuery>,
) -> Response {
    let only = q.type_name.filter(|t| !t.is_empty());
    let shadow_only = q.shadow.unwrap_or(false);
    // The mesh first: an unknown mesh is the API's 404, not an empty page.
    if let Err(e) = caller
        .get(&console, &format!("/meshes/{}", enc(&mesh)))
        .await
    {
        return e.respond(&console, &caller, &uri.to_string());
    }
    let types: Vec<ResourceType> = policy_types()
        .into_iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == t.name()))
        .collect();
    let filter = if shadow_only {
        format!("&label={}", enc(&format!("{EFFECT_LABEL}:{EFFECT_SHADOW}")))
    } else {
        String::new()
    };
    let paths = types
        .iter()
        .map(|t| {
            format!(
                "/meshes/{}/{}?size={MAX_PER_TYPE}{filter}",
                enc(&mesh),
                t.plural()
            )
        })
        .collect();
    let lists = get_all(&console, &caller, paths).await;
    let mut groups = Vec::new();
    let mut counted = Vec::new();
    let mut errors = Vec::new();
    for (t, list) in types.iter().zip(lists) {
        let list = match list {
            Ok(l) => l,
            Err(e) => {
                errors.push(json!({"type": t.name(), "error": e.detail}));
                continue;
            }
        };
        let policies: Vec<Value> = items(&list)
            .iter()
            .map(|p| {
                let labels = &p["labels"];
                let name = text(p, "name");
                if console.mode == Mode::Global && counted.len() < MAX_COUNTED {
                    counted.push((t.name(), name.to_owned(), format!(
                        "/meshes/{}/{}/{}/_resources/dataplanes?size=1",
                        enc(&mesh),
                        t.plural(),
                        enc(name)
                    )));
                }
                json!({
                    "name": name,
                    "shadow": labels[EFFECT_LABEL] == EFFECT_SHADOW,
                    "observed": labels[EFFECT_LABEL] == EFFECT_SHADOW
                        && labels[umbra_core::meta::OBSERVE_LABEL] == "true",
                    "convertedFrom": labels[CONVERTED_FROM_NAME_LABEL].as_str().map(|from| {
                        format!("{}/{from}", labels[CONVERTED_FROM_TYPE_LABEL].as_str().unwrap_or("?"))
                    }),
                    "modificationTime": text(p, "modificationTime"),
                    "targetRef": p.pointer("/spec/targetRef"),
                })
            })
            .collect();
        if !policies.is_empty() {
            groups.push(json!({
                "type": t.name(),
                "plural": t.plural(),
                "new": t.kind() == umbra_core::resource::TypeKind::NewPolicy,
                "total": list["total"],
                "policies": policies,
            }));
        }
    }
    let counts = get_all(
        &console,
        &caller,
        counted.iter().map(|(_, _, p)| p.clone()).collect(),
    )
    .await;
    for ((ty, name, _), count) in counted.iter().zip(counts) {
        let n = count.map(|c| c["total"].clone()).unwrap_or(json!("?"));
        if let Some(p) = groups
            .iter_mut()
            .filter(|g| g["type"] == *ty)
            .filter_map(|g| g["policies"].as_array_mut())
            .flatten()
            .find(|p| p["name"] == name.as_str())
        {
            p["selected"] = n;
        }
    }
    let shadow = groups
        .iter()
        .filter_map(|g| g["policies"].as_array())
        .flatten()
        .filter(|p| p["shadow"] == true)
        .count();
    let ctx = json!({
        "mesh": mesh,
        "groups": groups,
        "shadow": shadow,
        "only": only,
        "shadowOnly": shadow_only,
        "types": policy_types().iter().map(|t| t.name()).collect::<Vec<_>>(),
        "errors": errors,
        "maxCounted": MAX_COUNTED,
    });
    page(&console, &caller, "policies.html", "Policies", ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_type_is_listed_new_ones_first() {
        let types = policy_types();
        assert!(types.contains(&ResourceType::MeshTimeout));
        assert!(types.contains(&ResourceType::Timeout));
        assert!(!types.contains(&ResourceType::Dataplane));
        let first_old = types
            .iter()
            .position(|t| t.kind() == umbra_core::resource::TypeKind::OldPolicy)
            .unwrap();
        assert!(types[first_old..]
            .iter()
            .all(|t| t.kind() == umbra_core::resource::TypeKind::OldPolicy));
    }
}
