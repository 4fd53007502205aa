//! The zone's `GET /global-insight` (Kuma's `GlobalInsight`; `GET /mesh-insights` is
//! [`umbra_api::mesh_insights`] directly), counted by [`umbra_api::mesh_insights`] from the
//! zone store and its xDS insights.
//!
//! A zone knows no zone control planes (`controlPlanes: {total: 0, online: 0}`); its zone
//! ingresses and egresses are the stored ZoneIngresses and ZoneEgresses, online when their
//! insight says `connected`.

use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_store::{Store, Stored};

use crate::insight::Insights;

/// `GET /global-insight`, each DPP's insight from `insight`.
pub(crate) async fn global_insight(
    store: &dyn Store,
    insights: &Insights,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let online = |s: &Stored| {
        let mesh = umbra_core::dataplane::proxy_key_mesh(s.resource.ty(), "");
        let doc =
            serde_json::to_value(insights.get(mesh, &s.resource.meta.name)).unwrap_or_default();
        doc.get("connected").and_then(Value::as_bool) == Some(true)
    };
    let ingresses = umbra_api::mesh_insights::zone_ingresses(store, &online).await?;
    let egresses = umbra_api::mesh_insights::zone_egresses(store, &online).await?;
    umbra_api::mesh_insights::global_insight(store, (0, 0), ingresses, egresses, insight).await
}
