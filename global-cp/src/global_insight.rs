//! The Global's `GET /global-insight` (Kuma's `GlobalInsight`; `GET /mesh-insights` is
//! [`umbra_api::mesh_insights`] directly), counted by [`umbra_api::mesh_insights`] from the
//! store and the DPP insights the zones reported (memory-only: after a restart, DPPs count as
//! offline until their zone resends).
//!
//! Zone control planes are the zones the [`ZoneRegistry`] knows (online: a KDS stream open);
//! zone ingresses are the stored ZoneIngresses, online when their zone's insight for them says
//! `connected`; zone egresses likewise, from the stored ZoneEgresses and their insights.

use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_store::Stored;

use crate::store::Store;
use crate::zones::ZoneRegistry;

/// Each DPP's insight, as its zone reported it.
pub(crate) type InsightOf<'a> = &'a (dyn Fn(&Stored) -> Option<Value> + Sync);

/// `GET /global-insight`.
pub(crate) async fn global_insight(
    store: &dyn Store,
    zones: &ZoneRegistry,
    insight: InsightOf<'_>,
) -> Result<Value, ApiError> {
    let all = zones.list();
    let control_planes = (
        all.len() as u64,
        all.iter().filter(|z| z.online).count() as u64,
    );
    let online = |s: &Stored| {
        let zone = s.zone.clone().unwrap_or_default();
        let mesh = umbra_core::dataplane::proxy_key_mesh(s.resource.ty(), "");
        zones
            .insight(&zone, mesh, s.resource.meta.display_name())
            .and_then(|d| d.get("connected").and_then(Value::as_bool))
            == Some(true)
    };
    let ingresses = umbra_api::mesh_insights::zone_ingresses(store, &online).await?;
    let egresses = umbra_api::mesh_insights::zone_egresses(store, &online).await?;
    umbra_api::mesh_insights::global_insight(store, control_planes, ingresses, egresses, insight)
        .await
}
