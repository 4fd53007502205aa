//! Kuma's per-service overview, `ServiceInsight` (`GET /meshes/{mesh}/service-insights` and
//! `GET /meshes/{mesh}/service-insights/{name}`), computed on request on both CPs from a
//! mesh's Dataplanes (with the insights their zones reported) and ExternalServices:
//!
//! ```text
//! {type: "ServiceInsight", mesh, name,            // name: the kuma.io/service
//!  creationTime?, modificationTime?,              // earliest / latest of what it is made of
//!  status: online|offline|partially_degraded|not_available,
//!  dataplanes: {online, offline, total},
//!  issuedBackends?: {<CA backend>: <count>},      // from the insights' mTLS.issuedBackend
//!  serviceType: internal|external|gateway_builtin|gateway_delegated,
//!  addressPort?,                                  // an ExternalService's networking.address
//!  zones?: [<kuma.io/zone>, ...]}                 // sorted
//! ```
//!
//! As Kuma 2.7's insight resyncer counts them: every non-ignored inbound adds its DPP to its
//! service (a gateway DPP adds itself to the gateway's service), online when the DPP's status
//! ([`crate::mesh_insights::dp_status`]) is online and offline otherwise (partially degraded
//! included). A service is online when all its counted DPPs are, offline when none is,
//! partially degraded otherwise; an ExternalService's service is `not_available`.
//!
//! The list is sorted by name, paged in memory with Kuma's `size`/`offset` and `next`, and
//! filtered by `name=` (contains) and Kuma's `type=` (comma-separated service types). One
//! deviation: Kuma answers an unknown service with an empty overview; Umbra answers 404.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use umbra_core::dataplane::{GatewayType, InboundState};
use umbra_core::resource::{ResourceType, Spec};
use umbra_core::target_ref::{SERVICE_TAG, ZONE_TAG};
use umbra_store::{Store, Stored};

use crate::crud::mesh_exists;
use crate::error::ApiError;
use crate::mesh_insights::{dp_status, for_each, Status};
use crate::paging::PageParams;

/// Kuma's `ServiceInsight.Service.Type`.
const TYPES: &[&str] = &[
    "internal",
    "external",
    "gateway_builtin",
    "gateway_delegated",
];

/// What one service is made of, while counting.
#[derive(Debug, Default)]
struct Service {
    service_type: &'static str,
    online: u64,
    offline: u64,
    backends: BTreeMap<String, u64>,
    address_port: Option<String>,
    zones: BTreeSet<String>,
    created: Option<String>,
    modified: Option<String>,
}

impl Service {
    fn touch(&mut self, stored: &Stored) {
        let meta = &stored.resource.meta;
        if let Some(c) = &meta.creation_time {
            if self.created.as_ref().is_none_or(|old| c < old) {
                self.created = Some(c.clone());
            }
        }
        if let Some(m) = meta
            .modification_time
            .as_ref()
            .or(meta.creation_time.as_ref())
        {
            if self.modified.as_ref().is_none_or(|old| m > old) {
                self.modified = Some(m.clone());
            }
        }
    }

    fn status(&self) -> &'static str {
        if self.service_type == "external" {
            "not_available"
        } else if self.online == 0 {
            "offline"
        } else if self.offline == 0 {
            "online"
        } else {
            "partially_degraded"
        }
    }

    fn to_value(&self, mesh: &str, name: &str) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), json!("ServiceInsight"));
        out.insert("mesh".into(), json!(mesh));
        out.insert("name".into(), json!(name));
        if let Some(c) = &self.created {
            out.insert("creationTime".into(), json!(c));
        }
        if let Some(m) = &self.modified {
            out.insert("modificationTime".into(), json!(m));
        }
        out.insert("status".into(), json!(self.status()));
        out.insert(
            "dataplanes".into(),
            json!({"online": self.online, "offline": self.offline,
                "total": self.online + self.offline}),
        );
        if !self.backends.is_empty() {
            out.insert("issuedBackends".into(), json!(self.backends));
        }
        out.insert("serviceType".into(), json!(self.service_type));
        if let Some(a) = &self.address_port {
            out.insert("addressPort".into(), json!(a));
        }
        if !self.zones.is_empty() {
            out.insert("zones".into(), json!(self.zones));
        }
        Value::Object(out)
    }
}

/// Every service of `mesh`, by name.
async fn services(
    store: &dyn Store,
    mesh: &str,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<BTreeMap<String, Service>, ApiError> {
    let mut out: BTreeMap<String, Service> = BTreeMap::new();
    for_each(store, ResourceType::Dataplane, Some(mesh), |s| {
        let Some(dp) = s.resource.as_dataplane() else {
            return;
        };
        let doc = insight(s);
        let online = dp_status(dp, doc.as_ref()) == Status::Online;
        let backend = doc
            .as_ref()
            .and_then(|d| d.pointer("/mTLS/issuedBackend"))
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .map(str::to_owned);
        let mut add = |ty: &'static str, tags: &BTreeMap<String, String>| {
            let Some(name) = tags.get(SERVICE_TAG) else {
                return;
            };
            let svc = out.entry(name.clone()).or_insert_with(|| Service {
                service_type: ty,
                ..Service::default()
            });
            svc.online += u64::from(online);
            svc.offline += u64::from(!online);
            if let Some(b) = &backend {
                *svc.backends.entry(b.clone()).or_default() += 1;
            }
            svc.zones.extend(tags.get(ZONE_TAG).cloned());
            svc.touch(s);
        };
        if let Some(gw) = &dp.networking.gateway {
            let ty = if gw.gateway_type == Some(GatewayType::Builtin) {
                "gateway_builtin"
            } else {
                "gateway_delegated"
            };
            add(ty, &gw.tags);
        }
        for inbound in &dp.networking.inbound {
            if inbound.state != Some(InboundState::Ignored) {
                add("internal", &inbound.tags);
            }
        }
    })
    .await?;
    for_each(store, ResourceType::ExternalService, Some(mesh), |s| {
        let Spec::ExternalService(es) = &s.resource.spec else {
            return;
        };
        let Some(name) = es.tags.get(SERVICE_TAG) else {
            return;
        };
        let svc = out.entry(name.clone()).or_insert_with(|| Service {
            service_type: "external",
            ..Service::default()
        });
        if svc.address_port.is_none() {
            svc.address_port = es
                .networking
                .as_ref()
                .and_then(|n| n.get("address"))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        svc.zones.extend(es.tags.get(ZONE_TAG).cloned());
        svc.touch(s);
    })
    .await?;
    Ok(out)
}

/// `GET /meshes/{mesh}/service-insights`: one page (Kuma's `size`/`offset`, `next` keeping
/// the filters) of the mesh's `ServiceInsight`s sorted by name, filtered by `name=` (the
/// name contains the text) and `type=` (comma-separated service types), listed at `path`.
///
/// # Errors
/// A 404 for an unknown mesh, a 400 for bad paging or an unknown `type`, the store's error.
pub async fn service_insights(
    store: &dyn Store,
    mesh: &str,
    query: &[(String, String)],
    path: &str,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let page = PageParams::parse(query)?;
    crate::filters::refuse_nul(query, &["name"])?;
    let name = query
        .iter()
        .find(|(k, _)| k == "name")
        .map_or("", |(_, v)| v.as_str());
    let mut types = BTreeSet::new();
    // Exactly as documented: empty (no filter) or a comma-separated list of the types.
    for (_, v) in query.iter().filter(|(k, v)| k == "type" && !v.is_empty()) {
        for t in v.split(',').map(str::to_owned) {
            if !TYPES.contains(&t.as_str()) {
                return Err(ApiError::bad_parameter(
                    "type",
                    format!("unsupported service type {t:?}"),
                )
                .with_rule("enum", TYPES));
            }
            types.insert(t);
        }
    }
    mesh_exists(store, mesh).await?;
    let all = services(store, mesh, insight).await?;
    let items: Vec<Value> = all
        .iter()
        .filter(|(n, s)| n.contains(name) && (types.is_empty() || types.contains(s.service_type)))
        .map(|(n, s)| s.to_value(mesh, n))
        .collect();
    let total = items.len();
    let page_items = items
        .into_iter()
        .skip(page.offset)
        .take(page.size)
        .collect();
    Ok(page.body(page_items, total, path, query))
}

/// `GET /meshes/{mesh}/service-insights/{name}`: the `ServiceInsight` of service `name`.
///
/// # Errors
/// A 404 for an unknown mesh or a service no Dataplane or ExternalService of the mesh has,
/// the store's error.
pub async fn service_insight(
    store: &dyn Store,
    mesh: &str,
    name: &str,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    mesh_exists(store, mesh).await?;
    let all = services(store, mesh, insight).await?;
    all.get(name)
        .map(|s| s.to_value(mesh, name))
        .ok_or_else(|| ApiError::not_found(format!("service {name:?} not found in mesh {mesh:?}")))
}
