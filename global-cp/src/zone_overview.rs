//! Kuma's `ZoneOverview` (`GET /zones+insights`, `GET /zones/{name}+insights`), built from what
//! the [`crate::zones::ZoneRegistry`] knows about a zone's KDS link:
//!
//! ```text
//! {type: "ZoneOverview", name, zone: {enabled: true},
//!  zoneInsight: {subscriptions?: [{id, globalInstanceId, connectTime, disconnectTime?, config: "",
//!                                  status: {lastUpdateTime?, total, stat: {<Type>: stats}},
//!                                  version?: {kumaCp: {version, kumaCpGlobalCompatible}}}],
//!                healthLastSeen?},
//!  umbra: <the zone's `GET /zones/{name}` answer>}
//! ```
//!
//! One subscription: the zone's current (or last) connection, `id` `<zone>-<n>` for its n-th
//! connection since this Global started. `stat` is per type the Global sends the zone
//! (Global → zone: responses sent, acknowledged, rejected; Kuma's counters, uint64 as strings),
//! `total` their sum, `lastUpdateTime` and `healthLastSeen` when the zone was last heard
//! from. A zone not connected since this Global started (the registry is memory-only) has no
//! subscription, which Kuma's readers take for offline. Not known, so left out: the Zone
//! resource's `creationTime`/`modificationTime` (zones are not stored resources in Umbra),
//! and the zone's `config`. The subscription's `version` is `{kumaCp: {version,
//! kumaCpGlobalCompatible}}`: the release the zone reported when it connected
//! ([`umbra_kds::ZONE_VERSION_METADATA`]), compatible when its major and minor are this
//! Global's.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::zones::{TypeSync, ZoneStatus};

/// The `ZoneOverview` of zone `name`, with its KDS `status` (`None`: not connected since this
/// Global started), this Global's instance id, and Umbra's own view of the zone (`umbra`).
pub fn zone_overview(
    name: &str,
    status: Option<&ZoneStatus>,
    global_instance: &str,
    umbra: Value,
) -> Value {
    let mut insight = Map::new();
    if let Some(s) = status {
        if let Some(sub) = subscription(s, global_instance) {
            insight.insert("subscriptions".into(), json!([sub]));
        }
        if let Some(seen) = &s.last_seen {
            insight.insert("healthLastSeen".into(), json!(seen));
        }
    }
    json!({
        "type": "ZoneOverview",
        "name": name,
        "zone": {"enabled": true},
        "zoneInsight": insight,
        "umbra": umbra,
    })
}

/// Kuma's `KDSSubscription` for the zone's current (or last) connection, if it has connected.
fn subscription(s: &ZoneStatus, global_instance: &str) -> Option<Value> {
    let connect = s.connect_time.as_ref()?;
    let stat: BTreeMap<&str, Value> = s
        .global_to_zone
        .iter()
        .map(|(ty, sync)| (ty.as_str(), stats(sync.responses, sync.acks, sync.nacks)))
        .collect();
    let sum = |f: fn(&TypeSync) -> u64| s.global_to_zone.values().map(f).sum::<u64>();
    let mut status = Map::new();
    if let Some(seen) = &s.last_seen {
        status.insert("lastUpdateTime".into(), json!(seen));
    }
    status.insert(
        "total".into(),
        stats(sum(|t| t.responses), sum(|t| t.acks), sum(|t| t.nacks)),
    );
    status.insert("stat".into(), json!(stat));
    let mut sub = Map::new();
    sub.insert("id".into(), json!(format!("{}-{}", s.name, s.connects)));
    sub.insert("globalInstanceId".into(), json!(global_instance));
    sub.insert("connectTime".into(), json!(connect));
    if !s.online {
        let at = s.disconnect_time.as_ref().unwrap_or(connect);
        sub.insert("disconnectTime".into(), json!(at));
    }
    sub.insert("config".into(), json!(""));
    sub.insert("status".into(), Value::Object(status));
    if let Some(v) = &s.version {
        sub.insert(
            "version".into(),
            json!({"kumaCp": {"version": v, "kumaCpGlobalCompatible": compatible(v)}}),
        );
    }
    Some(Value::Object(sub))
}

/// Whether a zone CP of release `zone` works with this Global: the same major and minor
/// version (KDS changes only with those).
fn compatible(zone: &str) -> bool {
    let major_minor = |v: &str| {
        let mut parts = v.split(['.', '-', '+']);
        (
            parts.next().map(str::to_owned),
            parts.next().map(str::to_owned),
        )
    };
    major_minor(zone) == major_minor(env!("CARGO_PKG_VERSION"))
}

/// Kuma's `KDSServiceStats` (uint64 as strings, as Kuma's JSON sends them).
fn stats(sent: u64, acked: u64, rejected: u64) -> Value {
    json!({
        "responsesSent": sent.to_string(),
        "responsesAcknowledged": acked.to_string(),
        "responsesRejected": rejected.to_string(),
    })
}

/// This Global's instance id: the host name, else `global`.
pub fn instance_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "global".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(online: bool) -> ZoneStatus {
        let mut s = ZoneStatus {
            name: "z1".into(),
            online,
            connects: 2,
            connect_time: Some("2026-01-01T00:00:00Z".into()),
            disconnect_time: Some("2026-01-01T00:00:05Z".into()),
            last_seen: Some("2026-01-01T00:00:04Z".into()),
            ..ZoneStatus::default()
        };
        for (ty, (responses, acks, nacks)) in [("Mesh", (2, 2, 0)), ("MeshTimeout", (3, 1, 1))] {
            s.global_to_zone.insert(
                ty.into(),
                TypeSync {
                    responses,
                    acks,
                    nacks,
                    ..TypeSync::default()
                },
            );
        }
        s
    }

    #[test]
    fn an_online_zone_has_one_open_subscription_with_kumas_counters() {
        let o = zone_overview("z1", Some(&status(true)), "g", json!({"online": true}));
        assert_eq!(o["type"], "ZoneOverview");
        assert_eq!(o["zone"], json!({"enabled": true}));
        assert_eq!(o["umbra"]["online"], true);
        assert_eq!(o["zoneInsight"]["healthLastSeen"], "2026-01-01T00:00:04Z");
        let sub = &o["zoneInsight"]["subscriptions"][0];
        assert_eq!(
            (sub["id"].as_str(), sub["globalInstanceId"].as_str()),
            (Some("z1-2"), Some("g"))
        );
        assert!(sub.get("disconnectTime").is_none(), "{sub}");
        assert_eq!(sub["status"]["lastUpdateTime"], "2026-01-01T00:00:04Z");
        assert_eq!(
            sub["status"]["total"],
            json!({"responsesSent": "5", "responsesAcknowledged": "3", "responsesRejected": "1"})
        );
        assert_eq!(
            sub["status"]["stat"]["MeshTimeout"]["responsesRejected"],
            "1"
        );
        assert!(sub.get("version").is_none(), "not reported: {sub}");
        let mut reported = status(true);
        reported.version = Some(env!("CARGO_PKG_VERSION").into());
        let o = zone_overview("z1", Some(&reported), "g", json!({}));
        assert_eq!(
            o["zoneInsight"]["subscriptions"][0]["version"],
            json!({"kumaCp": {"version": env!("CARGO_PKG_VERSION"), "kumaCpGlobalCompatible": true}})
        );
        assert!(!compatible("99.0.0"));
    }

    #[test]
    fn offline_and_unknown_zones() {
        let o = zone_overview("z1", Some(&status(false)), "g", json!({}));
        assert_eq!(
            o["zoneInsight"]["subscriptions"][0]["disconnectTime"],
            "2026-01-01T00:00:05Z"
        );
        let o = zone_overview("z9", None, "g", json!({}));
        assert_eq!(o["zoneInsight"], json!({}));
        assert_eq!(o["name"], "z9");
    }
}
