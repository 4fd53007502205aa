//! Kuma's `DataplaneOverview` (`GET /meshes/{mesh}/dataplanes+insights[/{name}]` and the
//! cross-mesh `GET /dataplanes+insights`) and `ZoneEgressOverview` (`GET /zoneegressoverviews`
//! and its aliases, [`zone_egress_overview`]), built the same way on both CPs from a stored
//! Dataplane and the insight its zone keeps (`umbra_zone_cp::ads::Insight`, opaque JSON here
//! because on the Global it arrives over KDS):
//!
//! ```text
//! {type: "DataplaneOverview", mesh, name, creationTime?, modificationTime?, labels?,
//!  dataplane: <the whole Dataplane resource>,            // Kuma: {networking}; a superset
//!  dataplaneInsight: {
//!    subscriptions?: [{id, controlPlaneInstanceId, connectTime, disconnectTime?, version?,
//!                      status: {total: {responsesSent, responsesAcknowledged?,
//!                                       responsesRejected?}, cds|eds|lds|rds|sds?: {...}}}],
//!    mTLS?,                                               // when the zone reports it
//!    connected, acked, nacked, responsesSent, connectTime?, disconnectTime?}}  // Umbra's
//! ```
//!
//! `dataplaneInsight` is the zone's insight as reported, so Umbra's readers keep `connected`,
//! `acked` (last ACKed version per type URL) and `nacked` (per type URL: the rejected version
//! and Envoy's error), with Kuma's `subscriptions` added when the insight has none of its
//! own: one subscription for the current (or last) ADS stream, made from its `connectTime`
//! (`disconnectTime` once it closed). Its per-type status (`cds`, `eds`, `lds`, `rds`, `sds`)
//! carries Kuma's counters (`responsesSent`, `responsesAcknowledged`, `responsesRejected`, from
//! the insight's `stats` per type URL, summed in `total`) and Umbra's `ackedVersion` and `nack:
//! {version, error}`; its `version` is the insight's (Kuma's `Version`: kuma-dp's and Envoy's,
//! as the proxy reported them). `stats` and `version` move into the subscription. An insight
//! without `connectTime` (a zone of an older release)
//! gets no subscription, which Kuma's readers take for offline. A DPP whose zone reported no
//! insight has `dataplaneInsight: {}` (Kuma leaves out empty lists).

use axum::Json;
use serde_json::{json, Map, Value};
use umbra_core::resource::ResourceType;
use umbra_store::{Store, Stored};

use crate::crud::{list_page, mesh_exists};
use crate::error::ApiError;

/// Kuma's short xDS names by the type URL's message name.
const XDS_TYPES: &[(&str, &str)] = &[
    ("envoy.config.cluster.v3.Cluster", "cds"),
    ("envoy.config.endpoint.v3.ClusterLoadAssignment", "eds"),
    ("envoy.config.listener.v3.Listener", "lds"),
    ("envoy.config.route.v3.RouteConfiguration", "rds"),
    ("envoy.extensions.transport_sockets.tls.v3.Secret", "sds"),
];

/// The `DataplaneOverview` of `stored` with its `insight` (`None`: none reported) kept by
/// control-plane instance `cp_instance` (the zone's name).
pub fn dataplane_overview(stored: &Stored, insight: Option<Value>, cp_instance: &str) -> Value {
    let dataplane = stored.resource.to_value();
    let mut out = Map::new();
    out.insert("type".into(), json!("DataplaneOverview"));
    for key in ["mesh", "name", "creationTime", "modificationTime", "labels"] {
        if let Some(v) = dataplane.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert(
        "dataplaneInsight".into(),
        dataplane_insight(insight, cp_instance),
    );
    out.insert("dataplane".into(), dataplane);
    Value::Object(out)
}

/// Kuma's `ZoneEgressOverview` (`api/mesh/v1alpha1/zoneegressoverview.proto`) of stored
/// ZoneEgress `stored` with its `insight` (`None`: none reported) kept by control-plane
/// instance `cp_instance`:
///
/// ```text
/// {type: "ZoneEgressOverview", name, creationTime?, modificationTime?, labels?,
///  zoneEgress: {zone?, networking: {address?, port, admin?}},
///  zoneEgressInsight: {subscriptions?: [..], connected, ...}}   // as dataplaneInsight
/// ```
///
/// `zoneEgressInsight` is built as a DPP's `dataplaneInsight` is (see the module docs): Kuma's
/// `subscriptions` (its `ZoneEgressInsight`), Umbra's fields kept.
pub fn zone_egress_overview(stored: &Stored, insight: Option<Value>, cp_instance: &str) -> Value {
    let resource = stored.resource.to_value();
    let mut out = Map::new();
    out.insert("type".into(), json!("ZoneEgressOverview"));
    for key in ["name", "creationTime", "modificationTime", "labels"] {
        if let Some(v) = resource.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let spec = stored
        .resource
        .as_zone_egress()
        .and_then(|ze| serde_json::to_value(ze).ok())
        .unwrap_or_else(|| json!({}));
    out.insert("zoneEgress".into(), spec);
    out.insert(
        "zoneEgressInsight".into(),
        dataplane_insight(insight, cp_instance),
    );
    Value::Object(out)
}

/// One page of `ZoneEgressOverview`s listed at `path`, under the request's paging and filters
/// (`name=`, `label=`), each with the insight `insight` finds for it (`(insight,
/// control-plane instance)`).
///
/// # Errors
/// A 400 for bad paging or filters, the store's error.
pub async fn zone_egress_overviews(
    store: &dyn Store,
    query: &[(String, String)],
    path: &str,
    insight: impl Fn(&Stored) -> (Option<Value>, String),
) -> Result<Json<Value>, ApiError> {
    let (page, result) = list_page(store, ResourceType::ZoneEgress, None, query).await?;
    let items = result
        .items
        .iter()
        .map(|s| {
            let (doc, instance) = insight(s);
            zone_egress_overview(s, doc, &instance)
        })
        .collect();
    let total = usize::try_from(result.total).unwrap_or(usize::MAX);
    Ok(Json(page.body(items, total, path, query)))
}

/// Kuma's `dataplaneInsight` (and `zoneEgressInsight`) from the zone's insight (see the module
/// docs).
fn dataplane_insight(insight: Option<Value>, cp_instance: &str) -> Value {
    let Some(Value::Object(mut doc)) = insight else {
        return json!({});
    };
    // The zone names the DPP inside the insight it sends the Global; the overview does it.
    doc.remove("mesh");
    doc.remove("name");
    if !doc.contains_key("subscriptions") {
        if let Some(sub) = subscription(&doc, cp_instance) {
            doc.insert("subscriptions".into(), json!([sub]));
        }
        // In the subscription now, where Kuma has them.
        doc.remove("stats");
        doc.remove("version");
    }
    Value::Object(doc)
}

/// Kuma's `DiscoverySubscription` for the stream an Umbra insight describes, if it says when
/// the stream opened.
fn subscription(doc: &Map<String, Value>, cp_instance: &str) -> Option<Value> {
    let connect = doc.get("connectTime")?.as_str()?;
    let mut status = Map::new();
    let sent = doc
        .get("responsesSent")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let stats = doc.get("stats").and_then(Value::as_object);
    let sum = |field: &str| -> u64 {
        stats
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(|s| s.get(field).and_then(Value::as_u64))
            .sum()
    };
    let mut total = json!({"responsesSent": sent.to_string()});
    if stats.is_some() {
        total["responsesAcknowledged"] = json!(sum("responsesAcknowledged").to_string());
        total["responsesRejected"] = json!(sum("responsesRejected").to_string());
    }
    status.insert("total".into(), total);
    for (type_url, short) in XDS_TYPES {
        let url = format!("type.googleapis.com/{type_url}");
        let mut stat = Map::new();
        // Kuma's DiscoveryServiceStats (uint64, so strings in proto3 JSON).
        for (field, n) in stats
            .and_then(|m| m.get(&url))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(n) = n.as_u64() {
                stat.insert(field.clone(), json!(n.to_string()));
            }
        }
        if let Some(v) = doc.get("acked").and_then(|a| a.get(&url)) {
            stat.insert("ackedVersion".into(), v.clone());
        }
        if let Some(n) = doc.get("nacked").and_then(|n| n.get(&url)) {
            stat.insert("nack".into(), n.clone());
        }
        if !stat.is_empty() {
            status.insert((*short).into(), Value::Object(stat));
        }
    }
    let mut sub = Map::new();
    sub.insert("id".into(), json!(format!("{cp_instance}/{connect}")));
    sub.insert("controlPlaneInstanceId".into(), json!(cp_instance));
    sub.insert("connectTime".into(), json!(connect));
    let connected = doc.get("connected").and_then(Value::as_bool) == Some(true);
    if !connected {
        // A closed stream: when it closed, else (not recorded) when it opened.
        let at = doc
            .get("disconnectTime")
            .and_then(Value::as_str)
            .unwrap_or(connect);
        sub.insert("disconnectTime".into(), json!(at));
    }
    sub.insert("status".into(), Value::Object(status));
    if let Some(v) = doc.get("version") {
        sub.insert("version".into(), v.clone());
    }
    Some(Value::Object(sub))
}

/// One page of `DataplaneOverview`s (in `mesh`, or every mesh) listed at `path`, under the
/// request's paging and filters (`name=`, `label=`, `tag=`, `gateway=`:
/// [`crate::filters`]), each with the insight `insight` finds for it (`(insight,
/// control-plane instance)`).
///
/// # Errors
/// A 404 for an unknown mesh, a 400 for bad paging or filters, the store's error.
pub async fn dataplane_overviews(
    store: &dyn Store,
    mesh: Option<&str>,
    query: &[(String, String)],
    path: &str,
    insight: impl Fn(&Stored) -> (Option<Value>, String),
) -> Result<Json<Value>, ApiError> {
    if let Some(mesh) = mesh {
        mesh_exists(store, mesh).await?;
    }
    let (page, result) = list_page(store, ResourceType::Dataplane, mesh, query).await?;
    let items = result
        .items
        .iter()
        .map(|s| {
            let (doc, instance) = insight(s);
            dataplane_overview(s, doc, &instance)
        })
        .collect();
    let total = usize::try_from(result.total).unwrap_or(usize::MAX);
    Ok(Json(page.body(items, total, path, query)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::resource::Resource;

    fn stored() -> Stored {
        let mut resource = Resource::from_bytes(
            b"type: Dataplane\nmesh: m\nname: web-1\nlabels: {env: prod}\nnetworking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web}}]}\n",
        )
        .unwrap();
        resource.meta.creation_time = Some("2026-01-01T00:00:00Z".into());
        Stored {
            resource,
            version: 1,
            zone: None,
            revision: 1,
        }
    }

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

    #[test]
    fn a_connected_dpp_gets_one_open_subscription_and_keeps_umbras_fields() {
        let insight = json!({"mesh": "m", "name": "web-1", "connected": true,
            "acked": {CDS: "v1"}, "nacked": {LDS: {"version": "v2", "error": "bad filter"}},
            "responsesSent": 3, "connectTime": "2026-01-01T00:00:01Z",
            "stats": {CDS: {"responsesSent": 2, "responsesAcknowledged": 2, "responsesRejected": 0},
                      LDS: {"responsesSent": 1, "responsesAcknowledged": 0, "responsesRejected": 1}},
            "version": {"envoy": {"version": "1.31.0", "build": "abc/1.31.0/Clean/RELEASE/BoringSSL"}}});
        let o = dataplane_overview(&stored(), Some(insight), "zone-1");
        assert_eq!(o["type"], "DataplaneOverview");
        assert_eq!(
            (o["mesh"].as_str(), o["name"].as_str()),
            (Some("m"), Some("web-1"))
        );
        assert_eq!(o["labels"], json!({"env": "prod"}));
        assert_eq!(o["creationTime"], "2026-01-01T00:00:00Z");
        assert_eq!(o["dataplane"]["networking"]["address"], "10.0.0.1");
        let di = &o["dataplaneInsight"];
        assert!(di.get("mesh").is_none() && di.get("name").is_none(), "{di}");
        assert_eq!(di["nacked"][LDS]["error"], "bad filter");
        assert_eq!(di["connected"], true);
        let subs = di["subscriptions"].as_array().unwrap();
        assert_eq!(subs.len(), 1);
        let s = &subs[0];
        assert_eq!(s["controlPlaneInstanceId"], "zone-1");
        assert_eq!(s["connectTime"], "2026-01-01T00:00:01Z");
        assert!(s.get("disconnectTime").is_none(), "online: {s}");
        assert_eq!(s["status"]["total"]["responsesSent"], "3");
        assert_eq!(s["status"]["total"]["responsesAcknowledged"], "2");
        assert_eq!(s["status"]["total"]["responsesRejected"], "1");
        assert_eq!(s["status"]["cds"]["ackedVersion"], "v1");
        assert_eq!(s["status"]["cds"]["responsesAcknowledged"], "2");
        assert_eq!(s["status"]["lds"]["responsesRejected"], "1");
        assert_eq!(s["version"]["envoy"]["version"], "1.31.0");
        assert!(
            di.get("stats").is_none() && di.get("version").is_none(),
            "moved into the subscription: {di}"
        );
        assert_eq!(
            s["status"]["lds"]["nack"],
            json!({"version": "v2", "error": "bad filter"})
        );
        assert!(s["status"].get("eds").is_none());
    }

    #[test]
    fn a_zone_egress_overview_has_kumas_shape() {
        let mut resource = Resource::from_bytes(
            b"type: ZoneEgress\nname: ze-1\nzone: zone-1\nnetworking: {address: 10.0.0.9, port: 10002, admin: {port: 9902}}\n",
        )
        .unwrap();
        resource.meta.creation_time = Some("2026-01-01T00:00:00Z".into());
        let stored = Stored {
            resource,
            version: 1,
            zone: None,
            revision: 1,
        };
        let insight =
            json!({"connected": true, "responsesSent": 2, "connectTime": "2026-01-01T00:00:01Z"});
        let o = zone_egress_overview(&stored, Some(insight), "zone-1");
        assert_eq!(o["type"], "ZoneEgressOverview");
        assert_eq!(o["name"], "ze-1");
        assert!(o.get("mesh").is_none());
        assert_eq!(
            o["zoneEgress"],
            json!({"zone": "zone-1", "networking": {"address": "10.0.0.9", "port": 10002, "admin": {"port": 9902}}})
        );
        let subs = o["zoneEgressInsight"]["subscriptions"].as_array().unwrap();
        assert_eq!(subs[0]["controlPlaneInstanceId"], "zone-1");
        assert_eq!(subs[0]["status"]["total"]["responsesSent"], "2");
        let none = zone_egress_overview(&stored, None, "zone-1");
        assert_eq!(none["zoneEgressInsight"], json!({}));
    }

    #[test]
    fn closed_unknown_and_old_insights() {
        let closed = json!({"connected": false, "responsesSent": 0,
            "connectTime": "2026-01-01T00:00:01Z", "disconnectTime": "2026-01-01T00:00:09Z"});
        let o = dataplane_overview(&stored(), Some(closed), "z");
        assert_eq!(
            o["dataplaneInsight"]["subscriptions"][0]["disconnectTime"],
            "2026-01-01T00:00:09Z"
        );
        let o = dataplane_overview(&stored(), None, "z");
        assert_eq!(o["dataplaneInsight"], json!({}));
        // An older zone's insight: no connectTime, no subscription; the fields stay.
        let old = json!({"connected": true, "acked": {}, "nacked": {}, "responsesSent": 1});
        let o = dataplane_overview(&stored(), Some(old.clone()), "z");
        assert_eq!(o["dataplaneInsight"], old);
        // An insight that has Kuma's subscriptions already keeps them.
        let own = json!({"subscriptions": [{"id": "x"}]});
        let o = dataplane_overview(&stored(), Some(own.clone()), "z");
        assert_eq!(o["dataplaneInsight"], own);
    }
}
