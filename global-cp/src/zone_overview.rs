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
//! One subscription per Global replica that held the zone: each replica's current (or last)
//! connection of it, oldest first, so the last one is the zone's current connection (Kuma's
//! readers take it so); at most [`SUBSCRIPTION_LIMIT`]. The replica answering builds its own
//! from memory; the others come from PostgreSQL (`zone_subscriptions`, written by
//! [`crate::replicas::insights::InsightMirror`]), and one a replica left open but no longer
//! holds (it was killed) is shown ended when that replica last wrote it
//! ([`merge_subscriptions`]). `id` is `<zone>-<replica>-<n>` for the n-th connection since that
//! replica started, `globalInstanceId` the replica's name (`--replica-name`, by default the host
//! name). `stat` is per type the Global sends the zone (Global → zone: responses sent,
//! acknowledged, rejected; Kuma's counters, uint64 as strings), `total` their sum,
//! `lastUpdateTime` when the zone was last heard from, and `healthLastSeen` the latest of
//! those. A zone no replica has seen connect has no subscription, which Kuma's readers take
//! for offline. Not known, so left out: the Zone resource's `creationTime`/`modificationTime`
//! (zones are not stored resources in Umbra), and the zone's `config`. The subscription's
//! `version` is `{kumaCp: {version, kumaCpGlobalCompatible}}`: the release the zone reported
//! when it connected ([`umbra_kds::ZONE_VERSION_METADATA`]), compatible when its major and
//! minor are this Global's.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::zones::{TypeSync, ZoneStatus};

/// Subscriptions kept per zone in a `ZoneOverview` (Kuma's `metrics.zone.subscriptionLimit`
/// default).
pub const SUBSCRIPTION_LIMIT: usize = 10;

/// The `ZoneOverview` of zone `name`: its `subscriptions` (Kuma's `KDSSubscription`s, oldest
/// first, from [`merge_subscriptions`]) and Umbra's own view of the zone (`umbra`).
pub fn zone_overview(name: &str, subscriptions: Vec<Value>, umbra: Value) -> Value {
    let mut insight = Map::new();
    let seen = subscriptions
        .iter()
        .filter_map(|s| s["status"]["lastUpdateTime"].as_str())
        .max()
        .map(str::to_owned);
    if !subscriptions.is_empty() {
        insight.insert("subscriptions".into(), Value::Array(subscriptions));
    }
    if let Some(seen) = seen {
        insight.insert("healthLastSeen".into(), json!(seen));
    }
    json!({
        "type": "ZoneOverview",
        "name": name,
        "zone": {"enabled": true},
        "zoneInsight": insight,
        "umbra": umbra,
    })
}

/// A subscription another replica recorded ([`crate::replicas::insights`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSubscription {
    /// The replica it was on.
    pub replica: String,
    /// Kuma's `KDSSubscription` JSON, as that replica last wrote it.
    pub subscription: Value,
    /// When it was written (RFC 3339).
    pub at: String,
}

/// A zone's subscriptions, oldest first (by `connectTime`), at most [`SUBSCRIPTION_LIMIT`]:
/// `local` (this replica's, from memory) and those the replicas stored (`stored`; this
/// replica's own row, `me`, only when memory has none: it was written before a restart). One
/// stored without a
/// `disconnectTime` by a replica that is not `holder` (the replica whose lease holds the zone
/// now; `None`: offline) ended when it was last written: its replica stopped without saying so.
pub fn merge_subscriptions(
    local: Option<Value>,
    stored: &[StoredSubscription],
    me: &str,
    holder: Option<&str>,
) -> Vec<Value> {
    let skip_mine = local.is_some();
    let mut out: Vec<Value> = stored
        .iter()
        .filter(|s| (!skip_mine || s.replica != me) && s.subscription.is_object())
        .map(|s| {
            let mut sub = s.subscription.clone();
            if sub.get("disconnectTime").is_none() && holder != Some(s.replica.as_str()) {
                sub["disconnectTime"] = json!(s.at);
            }
            sub
        })
        .chain(local)
        .collect();
    out.sort_by(|a, b| {
        let key = |v: &Value| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (s("connectTime"), s("id"))
        };
        key(a).cmp(&key(b))
    });
    let extra = out.len().saturating_sub(SUBSCRIPTION_LIMIT);
    out.drain(..extra);
    out
}

/// Kuma's `KDSSubscription` for the zone's current (or last) connection to the replica named
/// `global_instance`, if it has connected to it.
pub fn subscription(s: &ZoneStatus, global_instance: &str) -> Option<Value> {
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
    sub.insert(
        "id".into(),
        json!(format!("{}-{global_instance}-{}", s.name, s.connects)),
    );
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

    fn overview(s: &ZoneStatus, umbra: Value) -> Value {
        zone_overview("z1", subscription(s, "g").into_iter().collect(), umbra)
    }

    #[test]
    fn an_online_zone_has_one_open_subscription_with_kumas_counters() {
        let o = overview(&status(true), json!({"online": true}));
        assert_eq!(o["type"], "ZoneOverview");
        assert_eq!(o["zone"], json!({"enabled": true}));
        assert_eq!(o["umbra"]["online"], true);
        assert_eq!(o["zoneInsight"]["healthLastSeen"], "2026-01-01T00:00:04Z");
        let sub = &o["zoneInsight"]["subscriptions"][0];
        assert_eq!(
            (sub["id"].as_str(), sub["globalInstanceId"].as_str()),
            (Some("z1-g-2"), Some("g"))
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
        let o = overview(&reported, json!({}));
        assert_eq!(
            o["zoneInsight"]["subscriptions"][0]["version"],
            json!({"kumaCp": {"version": env!("CARGO_PKG_VERSION"), "kumaCpGlobalCompatible": true}})
        );
        assert!(!compatible("99.0.0"));
    }

    #[test]
    fn offline_and_unknown_zones() {
        let o = overview(&status(false), json!({}));
        assert_eq!(
            o["zoneInsight"]["subscriptions"][0]["disconnectTime"],
            "2026-01-01T00:00:05Z"
        );
        let o = zone_overview("z9", Vec::new(), json!({}));
        assert_eq!(o["zoneInsight"], json!({}));
        assert_eq!(o["name"], "z9");
    }

    fn stored(
        replica: &str,
        connect: &str,
        disconnect: Option<&str>,
        at: &str,
    ) -> StoredSubscription {
        let mut sub = json!({"id": format!("z1-{replica}-1"), "globalInstanceId": replica,
                             "connectTime": connect,
                             "status": {"lastUpdateTime": at}});
        if let Some(d) = disconnect {
            sub["disconnectTime"] = json!(d);
        }
        StoredSubscription {
            replica: replica.into(),
            subscription: sub,
            at: at.into(),
        }
    }

    #[test]
    fn every_replicas_subscription_oldest_first_the_holders_last() {
        // b held the zone, then a replica that was killed (c), now a (this replica, in memory).
        let rows = [
            stored("c", "2026-01-01T00:00:10Z", None, "2026-01-01T00:00:12Z"),
            stored(
                "b",
                "2026-01-01T00:00:00Z",
                Some("2026-01-01T00:00:09Z"),
                "2026-01-01T00:00:09Z",
            ),
            stored("a", "2025-12-31T23:59:00Z", None, "2026-01-01T00:00:00Z"),
        ];
        let mut mine = status(true);
        mine.connect_time = Some("2026-01-01T00:00:13Z".into());
        mine.last_seen = Some("2026-01-01T00:00:20Z".into());
        let subs = merge_subscriptions(subscription(&mine, "a"), &rows, "a", Some("a"));
        let ids: Vec<&str> = subs.iter().filter_map(|s| s["id"].as_str()).collect();
        assert_eq!(
            ids,
            ["z1-b-1", "z1-c-1", "z1-a-2"],
            "a's own stored row is skipped"
        );
        assert_eq!(
            subs[1]["disconnectTime"], "2026-01-01T00:00:12Z",
            "c left it open"
        );
        assert!(subs[2].get("disconnectTime").is_none());
        let o = zone_overview("z1", subs, json!({}));
        assert_eq!(o["zoneInsight"]["healthLastSeen"], "2026-01-01T00:00:20Z");

        // Asked of b while c holds the zone: c's subscription is open, and last.
        let subs = merge_subscriptions(None, &rows, "b", Some("c"));
        assert_eq!(subs.last().unwrap()["id"], "z1-c-1");
        assert!(subs.last().unwrap().get("disconnectTime").is_none());
        // Offline: none is open.
        let subs = merge_subscriptions(None, &rows, "b", None);
        assert!(
            subs.iter().all(|s| s["disconnectTime"].is_string()),
            "{subs:?}"
        );
        // a restarted, holding nothing yet: its row from before the restart is kept, ended.
        let subs = merge_subscriptions(None, &rows, "a", Some("c"));
        let ids: Vec<&str> = subs.iter().filter_map(|s| s["id"].as_str()).collect();
        assert_eq!(ids, ["z1-a-1", "z1-b-1", "z1-c-1"]);
        assert_eq!(subs[0]["disconnectTime"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn at_most_the_limit_the_newest_kept() {
        let rows: Vec<StoredSubscription> = (0..15)
            .map(|i| {
                let t = format!("2026-01-01T00:00:{i:02}Z");
                stored(&format!("r{i:02}"), &t, Some(&t), &t)
            })
            .collect();
        let subs = merge_subscriptions(None, &rows, "x", None);
        assert_eq!(subs.len(), SUBSCRIPTION_LIMIT);
        assert_eq!(subs[0]["globalInstanceId"], "r05");
        assert_eq!(subs[9]["globalInstanceId"], "r14");
    }
}
