//! The zone's `GET /global-insight` (Kuma's `GlobalInsight`; `GET /mesh-insights` is
//! [`umbra_api::mesh_insights`] directly), counted by [`umbra_api::mesh_insights`] from the
//! zone store and its xDS insights.
//!
//! A zone knows no zone control planes (`controlPlanes: {total: 0, online: 0}`); its zone
//! ingresses are the stored ZoneIngresses, online when their insight says `connected`.

use std::collections::BTreeMap;

use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_core::resource::ResourceType;
use umbra_store::{DataplaneFilter, ListQuery, Store, Stored, MAX_PAGE};

use crate::insight::Insights;

/// `(total, online)` of the stored ZoneIngresses, read page by page.
async fn ingresses(store: &dyn Store, insights: &Insights) -> Result<(u64, u64), ApiError> {
    let (mut total, mut online, mut offset) = (0, 0, 0);
    loop {
        let page = store
            .list(&ListQuery {
                ty: ResourceType::ZoneIngress,
                mesh: None,
                labels: BTreeMap::new(),
                name_contains: None,
                dataplane: DataplaneFilter::default(),
                offset,
                size: MAX_PAGE,
            })
            .await?;
        for s in &page.items {
            total += 1;
            let doc =
                serde_json::to_value(insights.get("", &s.resource.meta.name)).unwrap_or_default();
            online += u64::from(doc.get("connected").and_then(Value::as_bool) == Some(true));
        }
        match page.next_offset {
            Some(next) => offset = next,
            None => return Ok((total, online)),
        }
    }
}

/// `GET /global-insight`, each DPP's insight from `insight`.
pub(crate) async fn global_insight(
    store: &dyn Store,
    insights: &Insights,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let ingresses = ingresses(store, insights).await?;
    umbra_api::mesh_insights::global_insight(store, (0, 0), ingresses, insight).await
}
