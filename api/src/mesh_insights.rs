//! Kuma's aggregate answers, counted from the store and the insights the zones reported:
//! `MeshInsight` (`GET /mesh-insights[/{mesh}]`) and `GlobalInsight` (`GET /global-insight`,
//! Kuma's published `api.yaml`).
//!
//! The store is read page by page ([`MAX_PAGE`]); only counts (and the distinct service names
//! they need) are kept. A DPP's status follows Kuma's `DataplaneOverview` rule: offline when
//! its insight does not say `connected` (falling back to "the last subscription has no
//! `disconnectTime`") or when every inbound reports `health.ready: false`; partially degraded
//! when some inbound does; online otherwise. A DPP whose zone reported no insight is offline
//! (after a Global restart, until the zone resends).
//!
//! `MeshInsight` counts DPPs per version (`dpVersions.kumaDp` and `dpVersions.envoy`, from the
//! version the proxy reported on its last stream, `unknown` without one, as Kuma) and per mTLS
//! backend (`mTLS.issuedBackends`: the backend that issued the DPP's certificate;
//! `mTLS.supportedBackends`: each backend the DPP trusts), each with its status counts.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use umbra_core::dataplane::{DataplaneSpec, GatewayType};
use umbra_core::resource::ResourceType;
use umbra_store::{DataplaneFilter, ListQuery, Store, Stored, MAX_PAGE};

use crate::error::ApiError;

/// A DPP's status (Kuma's `DataplaneOverview` status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Connected, every inbound ready.
    Online,
    /// Not connected, or no inbound ready.
    Offline,
    /// Connected with some inbound not ready.
    PartiallyDegraded,
}

/// Whether `insight` says its ADS stream is open.
fn connected(insight: Option<&Value>) -> bool {
    let Some(doc) = insight else { return false };
    if let Some(c) = doc.get("connected").and_then(Value::as_bool) {
        return c;
    }
    doc.get("subscriptions")
        .and_then(Value::as_array)
        .and_then(|s| s.last())
        .is_some_and(|last| last.get("disconnectTime").is_none())
}

/// `dp`'s status given the insight its zone reported.
pub fn dp_status(dp: &DataplaneSpec, insight: Option<&Value>) -> Status {
    if !connected(insight) {
        return Status::Offline;
    }
    let inbound = &dp.networking.inbound;
    let not_ready = inbound
        .iter()
        .filter(|i| i.health.as_ref().is_some_and(|h| !h.ready))
        .count();
    match not_ready {
        0 => Status::Online,
        n if n == inbound.len() => Status::Offline,
        _ => Status::PartiallyDegraded,
    }
}

/// Kuma's `FullStatus`/`DpStat`: `{total, online, offline, partiallyDegraded}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpStat {
    /// All.
    pub total: u64,
    /// Online.
    pub online: u64,
    /// Offline.
    pub offline: u64,
    /// Partially degraded.
    pub partially_degraded: u64,
}

impl DpStat {
    fn add(&mut self, status: Status) {
        self.total += 1;
        match status {
            Status::Online => self.online += 1,
            Status::Offline => self.offline += 1,
            Status::PartiallyDegraded => self.partially_degraded += 1,
        }
    }

    /// The JSON form.
    pub fn to_value(self) -> Value {
        json!({"total": self.total, "online": self.online, "offline": self.offline,
            "partiallyDegraded": self.partially_degraded})
    }
}

/// Which kind of DPP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Standard,
    GatewayBuiltin,
    GatewayDelegated,
}

fn kind(dp: &DataplaneSpec) -> Kind {
    match dp.networking.gateway.as_ref() {
        None => Kind::Standard,
        Some(g) if g.gateway_type == Some(GatewayType::Builtin) => Kind::GatewayBuiltin,
        Some(_) => Kind::GatewayDelegated,
    }
}

const SERVICE_TAG: &str = "kuma.io/service";

/// The DPP counts of a mesh (or of every mesh).
#[derive(Debug, Default)]
struct Tally {
    all: DpStat,
    by_kind: BTreeMap<Kind, DpStat>,
    /// Per `(mesh, kind, service)`: `(DPPs, online, offline)`.
    services: BTreeMap<(String, Kind, String), (u64, u64, u64)>,
    /// Per `(component, version)`: `kumaDp` or `envoy`.
    versions: BTreeMap<(&'static str, String), DpStat>,
    /// Per mTLS backend: DPPs it issued a certificate.
    issued: BTreeMap<String, DpStat>,
    /// Per mTLS backend: DPPs trusting it.
    supported: BTreeMap<String, DpStat>,
}

/// The `version` a DPP's insight reports (Umbra's insight keeps it at the root, Kuma's on the
/// last subscription).
fn reported_version(insight: Option<&Value>) -> Option<&Value> {
    let doc = insight?;
    doc.get("version").or_else(|| {
        doc.get("subscriptions")
            .and_then(Value::as_array)
            .and_then(|s| s.last())
            .and_then(|s| s.get("version"))
    })
}

impl Tally {
    fn add(&mut self, stored: &Stored, insight: Option<&Value>) {
        let Some(dp) = stored.resource.as_dataplane() else {
            return;
        };
        let status = dp_status(dp, insight);
        let kind = kind(dp);
        self.all.add(status);
        let version = reported_version(insight);
        for component in ["kumaDp", "envoy"] {
            let v = version
                .and_then(|v| v.get(component))
                .and_then(|c| c.get("version"))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .unwrap_or("unknown");
            self.versions
                .entry((component, v.to_owned()))
                .or_default()
                .add(status);
        }
        let mtls = insight.and_then(|i| i.get("mTLS"));
        if let Some(b) = mtls
            .and_then(|m| m.get("issuedBackend"))
            .and_then(Value::as_str)
        {
            self.issued.entry(b.to_owned()).or_default().add(status);
        }
        for b in mtls
            .and_then(|m| m.get("supportedBackends"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            self.supported.entry(b.to_owned()).or_default().add(status);
        }
        self.by_kind.entry(kind).or_default().add(status);
        let names: BTreeSet<&String> = match dp.networking.gateway.as_ref() {
            Some(g) => g.tags.get(SERVICE_TAG).into_iter().collect(),
            None => dp
                .networking
                .inbound
                .iter()
                .filter_map(|i| i.tags.get(SERVICE_TAG))
                .collect(),
        };
        for name in names {
            let key = (stored.resource.meta.mesh.clone(), kind, name.clone());
            let e = self.services.entry(key).or_default();
            e.0 += 1;
            e.1 += u64::from(status == Status::Online);
            e.2 += u64::from(status == Status::Offline);
        }
    }

    fn kind(&self, kind: Kind) -> DpStat {
        self.by_kind.get(&kind).copied().unwrap_or_default()
    }

    /// Per kind, the services' status: online when all their DPPs are, offline when all are
    /// offline, partially degraded otherwise.
    fn services(&self, kind: Kind) -> DpStat {
        let mut out = DpStat::default();
        for ((_, k, _), (total, online, offline)) in &self.services {
            if *k != kind {
                continue;
            }
            out.add(if online == total {
                Status::Online
            } else if offline == total {
                Status::Offline
            } else {
                Status::PartiallyDegraded
            });
        }
        out
    }
}

/// Calls `f` on every `ty` of `mesh` (every mesh: `None`), read page by page ([`MAX_PAGE`]).
pub(crate) async fn for_each(
    store: &dyn Store,
    ty: ResourceType,
    mesh: Option<&str>,
    mut f: impl FnMut(&Stored),
) -> Result<(), ApiError> {
    let mut offset = 0;
    loop {
        let page = store.list(&query(ty, mesh, offset, MAX_PAGE)).await?;
        page.items.iter().for_each(&mut f);
        match page.next_offset {
            Some(next) => offset = next,
            None => return Ok(()),
        }
    }
}

/// Counts the Dataplanes of `mesh` (every mesh: `None`), page by page.
async fn tally(
    store: &dyn Store,
    mesh: Option<&str>,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Tally, ApiError> {
    let mut out = Tally::default();
    for_each(store, ResourceType::Dataplane, mesh, |s| {
        out.add(s, insight(s).as_ref());
    })
    .await?;
    Ok(out)
}

/// `(total, online)` of the stored ZoneIngresses, `online` telling which are (each CP knows
/// its ingresses' insights its own way), read page by page.
///
/// # Errors
/// 503 when the store is unavailable.
pub async fn zone_ingresses(
    store: &dyn Store,
    online: &(dyn Fn(&Stored) -> bool + Sync),
) -> Result<(u64, u64), ApiError> {
    zone_proxies(store, ResourceType::ZoneIngress, online).await
}

/// `(total, online)` of the stored ZoneEgresses, as [`zone_ingresses`] counts ZoneIngresses.
///
/// # Errors
/// 503 when the store is unavailable.
pub async fn zone_egresses(
    store: &dyn Store,
    online: &(dyn Fn(&Stored) -> bool + Sync),
) -> Result<(u64, u64), ApiError> {
    zone_proxies(store, ResourceType::ZoneEgress, online).await
}

/// `(total, online)` of the stored zone proxies of `ty`.
async fn zone_proxies(
    store: &dyn Store,
    ty: ResourceType,
    online: &(dyn Fn(&Stored) -> bool + Sync),
) -> Result<(u64, u64), ApiError> {
    let (mut total, mut up) = (0, 0);
    for_each(store, ty, None, |s| {
        total += 1;
        up += u64::from(online(s));
    })
    .await?;
    Ok((total, up))
}

fn query(ty: ResourceType, mesh: Option<&str>, offset: u64, size: u64) -> ListQuery {
    ListQuery {
        ty,
        mesh: mesh.map(str::to_owned),
        labels: BTreeMap::new(),
        name_contains: None,
        dataplane: DataplaneFilter::default(),
        offset,
        size,
    }
}

/// How many `ty` the store holds (in `mesh`, or every mesh).
async fn count(store: &dyn Store, ty: ResourceType, mesh: Option<&str>) -> Result<u64, ApiError> {
    Ok(store.list(&query(ty, mesh, 0, 1)).await?.total)
}

/// Kuma's `MeshInsight` of mesh `stored` (a Mesh), with each DPP's insight from `insight`.
///
/// # Errors
/// The store's error.
pub async fn mesh_insight(
    store: &dyn Store,
    stored: &Stored,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let mesh = stored.resource.meta.name.as_str();
    let t = tally(store, Some(mesh), insight).await?;
    let mut policies = Map::new();
    let mut resources = Map::new();
    for ty in ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.is_mesh_scoped())
    {
        let n = count(store, ty, Some(mesh)).await?;
        if n == 0 {
            continue;
        }
        let map = if ty.kind().is_policy() {
            &mut policies
        } else {
            &mut resources
        };
        map.insert(ty.name().into(), json!({"total": n}));
    }
    let internal = t
        .services
        .keys()
        .filter(|(_, k, _)| *k == Kind::Standard)
        .count() as u64;
    let external = count(store, ResourceType::ExternalService, Some(mesh)).await?;
    let gateway = {
        let (b, d) = (t.kind(Kind::GatewayBuiltin), t.kind(Kind::GatewayDelegated));
        DpStat {
            total: b.total + d.total,
            online: b.online + d.online,
            offline: b.offline + d.offline,
            partially_degraded: b.partially_degraded + d.partially_degraded,
        }
    };
    let meta = stored.resource.to_value();
    let mut out = Map::new();
    out.insert("type".into(), json!("MeshInsight"));
    out.insert("name".into(), json!(mesh));
    for key in ["creationTime", "modificationTime"] {
        if let Some(v) = meta.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert("dataplanes".into(), t.all.to_value());
    out.insert(
        "dataplanesByType".into(),
        json!({
            "standard": t.kind(Kind::Standard).to_value(),
            "gateway": gateway.to_value(),
            "gatewayBuiltin": t.kind(Kind::GatewayBuiltin).to_value(),
            "gatewayDelegated": t.kind(Kind::GatewayDelegated).to_value(),
        }),
    );
    out.insert("policies".into(), Value::Object(policies));
    let per = |m: &BTreeMap<String, DpStat>| -> Map<String, Value> {
        m.iter().map(|(k, v)| (k.clone(), v.to_value())).collect()
    };
    let mut versions = json!({"kumaDp": {}, "envoy": {}});
    for ((component, v), stat) in &t.versions {
        versions[*component][v.as_str()] = stat.to_value();
    }
    out.insert("dpVersions".into(), versions);
    out.insert(
        "mTLS".into(),
        json!({"issuedBackends": per(&t.issued), "supportedBackends": per(&t.supported)}),
    );
    out.insert("resources".into(), Value::Object(resources));
    out.insert(
        "services".into(),
        json!({"total": internal + external, "internal": internal, "external": external}),
    );
    Ok(Value::Object(out))
}

/// Kuma's `BaseStatus`: `(total, online)`.
pub type BaseStatus = (u64, u64);

fn base(s: BaseStatus) -> Value {
    json!({"total": s.0, "online": s.1})
}

/// Kuma's `GlobalInsight` (`api.yaml`): every mesh counted from the store, each DPP's insight
/// from `insight`, and the zone control planes and ingresses as the caller sees them.
///
/// # Errors
/// The store's error.
pub async fn global_insight(
    store: &dyn Store,
    control_planes: BaseStatus,
    ingresses: BaseStatus,
    egresses: BaseStatus,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let t = tally(store, None, insight).await?;
    let mut policies = 0;
    for ty in ResourceType::ALL.iter().copied() {
        if ty.kind().is_policy() {
            policies += count(store, ty, None).await?;
        }
    }
    let meshes = count(store, ResourceType::Mesh, None).await?;
    let external = count(store, ResourceType::ExternalService, None).await?;
    let (internal, builtin, delegated) = (
        t.services(Kind::Standard),
        t.services(Kind::GatewayBuiltin),
        t.services(Kind::GatewayDelegated),
    );
    Ok(json!({
        "createdAt": umbra_store::now_rfc3339(),
        "meshes": {"total": meshes},
        "policies": {"total": policies},
        "zones": {
            "controlPlanes": base(control_planes),
            "zoneIngresses": base(ingresses),
            "zoneEgresses": base(egresses),
        },
        "dataplanes": {
            "standard": t.kind(Kind::Standard).to_value(),
            "gatewayBuiltin": t.kind(Kind::GatewayBuiltin).to_value(),
            "gatewayDelegated": t.kind(Kind::GatewayDelegated).to_value(),
        },
        "services": {
            "total": internal.total + external + builtin.total + delegated.total,
            "internal": internal.to_value(),
            "external": {"total": external},
            "gatewayBuiltin": builtin.to_value(),
            "gatewayDelegated": delegated.to_value(),
        },
    }))
}

/// `GET /mesh-insights`: one page of `MeshInsight`s (paging and `name=` as on every list).
///
/// # Errors
/// A 400 for bad paging; the store's error.
pub async fn mesh_insights(
    store: &dyn Store,
    query: &[(String, String)],
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let (page, result) = crate::crud::list_page(store, ResourceType::Mesh, None, query).await?;
    let mut items = Vec::with_capacity(result.items.len());
    for s in &result.items {
        items.push(mesh_insight(store, s, insight).await?);
    }
    let total = usize::try_from(result.total).unwrap_or(usize::MAX);
    Ok(page.body(items, total, "/mesh-insights", query))
}

/// `GET /mesh-insights/{mesh}`.
///
/// # Errors
/// A 404 for an unknown mesh; the store's error.
pub async fn one_mesh_insight(
    store: &dyn Store,
    mesh: &str,
    insight: &(dyn Fn(&Stored) -> Option<Value> + Sync),
) -> Result<Value, ApiError> {
    let stored = store
        .get(&umbra_store::mesh_key(mesh))
        .await?
        .ok_or_else(|| ApiError::not_found(format!("mesh {mesh:?} not found")))?;
    mesh_insight(store, &stored, insight).await
}
