//! What the zone knows about each DPP's xDS connection (its insight), written by the ADS
//! server ([`crate::ads`]) and read by the API (`dataplanes+insights`) and by KDS, which
//! reports every insight to the Global as an opaque `DataplaneInsight` document.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use umbra_core::dataplane::DpKey;

/// What the zone knows about one DPP's xDS connection (its insight).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Insight {
    /// An ADS stream is open.
    pub connected: bool,
    /// Per type URL: last ACKed version.
    pub acked: BTreeMap<String, String>,
    /// Per type URL: last NACK (version and Envoy's error text).
    pub nacked: BTreeMap<String, Nack>,
    /// Responses sent on the current or last stream.
    pub responses_sent: u64,
    /// Per type URL, on the current or last stream: responses sent, ACKed and NACKed (Kuma's
    /// `DiscoveryServiceStats`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, TypeStats>,
    /// What the proxy runs, as Kuma's `Version`: `{kumaDp?: {version, gitTag, gitCommit,
    /// buildDate}, envoy: {version, build}}`, from the node metadata `version` (kuma-dp's) and
    /// the node's Envoy build version ([`crate::node_metadata::proxy_version`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<serde_json::Value>,
    /// Kuma's `mTLS`: the DPP's certificate as this zone's CA issued it (set by the reconciler,
    /// [`Insights::set_mtls`]); `None` outside mTLS meshes.
    #[serde(rename = "mTLS", skip_serializing_if = "Option::is_none")]
    pub mtls: Option<umbra_pki::identity::MtlsStatus>,
    /// When the current or last stream opened (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_time: Option<String>,
    /// When the last stream closed (RFC 3339); `None` while one is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnect_time: Option<String>,
    /// Where this zone reaches the Envoy's admin, from the current or last stream; kept in the
    /// zone (not reported to the Global, not in any answer).
    #[serde(skip)]
    pub admin: Option<AdminEndpoint>,
    /// With zone CP replicas: the replica the Envoy's stream is (or was last) open to (its
    /// `--replica-name`; the `controlPlaneInstanceId` of the answers); `None` for a zone
    /// running alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Which ADS stream of the proxy the insight follows (counted from 1 by
    /// [`Insights::open_stream`]): events of an older stream that outlived it are ignored.
    #[serde(skip)]
    pub stream: u64,
}

/// How the zone reaches one Envoy's admin (read by the `envoy_admin` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminEndpoint {
    /// The admin port: node metadata `dataplane.admin.port` (kuma-dp's), else the Dataplane's
    /// `networking.admin.port`, else 9901 (Kuma's default;
    /// [`crate::node_metadata::admin_port`]).
    pub port: u16,
    /// The ADS stream came from a loopback address: the Envoy runs on this zone CP's host, so
    /// its admin (bound to 127.0.0.1 by the bootstrap) is reachable. `false` when the peer
    /// address is unknown.
    pub local: bool,
    /// The port kuma-dp's resolver forwards DNS queries to in this Envoy (node metadata
    /// `dataplane.dns.port`, [`crate::node_metadata::dns_port`]): where a transparent proxy's
    /// `kuma:dns` listener is generated. Kept here, with the admin port, because generation
    /// reads both and zone replicas share them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_port: Option<u16>,
}

/// One xDS type's counters on a stream (Kuma's `DiscoveryServiceStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeStats {
    /// Responses sent.
    pub responses_sent: u64,
    /// Responses Envoy ACKed.
    pub responses_acknowledged: u64,
    /// Responses Envoy NACKed.
    pub responses_rejected: u64,
}

impl Insight {
    /// A response of `type_url` went out.
    pub fn sent(&mut self, type_url: &str) {
        self.responses_sent += 1;
        self.count(type_url, |s| s.responses_sent += 1);
    }

    /// Envoy ACKed a response of `type_url`.
    pub fn acknowledged(&mut self, type_url: &str) {
        self.count(type_url, |s| s.responses_acknowledged += 1);
    }

    /// Envoy NACKed a response of `type_url`.
    pub fn rejected(&mut self, type_url: &str) {
        self.count(type_url, |s| s.responses_rejected += 1);
    }

    /// Apply `f` to `type_url`'s counters (allocating the key only the first time: this runs
    /// on every response and ACK).
    fn count(&mut self, type_url: &str, f: impl FnOnce(&mut TypeStats)) {
        if let Some(stats) = self.stats.get_mut(type_url) {
            f(stats);
            return;
        }
        let mut stats = TypeStats::default();
        f(&mut stats);
        self.stats.insert(type_url.to_owned(), stats);
    }
}

/// A rejected version and Envoy's reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nack {
    /// The rejected version.
    pub version: String,
    /// Envoy's `error_detail.message`.
    pub error: String,
}

/// Insights of every DPP, shared by the ADS server and the API.
#[derive(Debug)]
pub struct Insights {
    map: RwLock<HashMap<DpKey, Insight>>,
    /// This replica's name, with zone CP replicas ([`Insights::for_replica`]).
    replica: Option<String>,
    changes: tokio::sync::watch::Sender<u64>,
    /// Bumped when a proxy's admin port is first known or changes (the reconciler generates
    /// the admin listener from it).
    admin_changes: tokio::sync::watch::Sender<u64>,
}

impl Default for Insights {
    fn default() -> Self {
        Self {
            map: RwLock::default(),
            replica: None,
            changes: tokio::sync::watch::channel(0).0,
            admin_changes: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Insights {
    /// The insights of zone CP replica `name` (`--store postgres`): the streams opened here
    /// carry its name ([`Insight::replica`]), and the others' insights are taken in by
    /// [`Insights::adopt`].
    pub fn for_replica(name: &str) -> Self {
        Self {
            replica: Some(name.to_owned()),
            ..Self::default()
        }
    }

    /// This replica's name (`None`: the zone runs alone).
    pub fn replica(&self) -> Option<&str> {
        self.replica.as_deref()
    }

    /// The insights of the streams opened to this replica (the ones it shares with the other
    /// replicas), by (mesh, name).
    pub fn local(&self) -> Vec<(DpKey, Insight)> {
        let mut out = self.all();
        out.retain(|(_, i)| i.replica.is_some() && i.replica == self.replica);
        out
    }

    /// Take `insight`, which another replica wrote for `key` (its Envoy connected there), unless
    /// that Envoy's stream is open to this replica. The mTLS status stays this replica's own
    /// (the replicas issue the same identities). Older streams of `key` that this replica
    /// still closes no longer change the insight. Returns whether anything changed.
    pub fn adopt(&self, key: &DpKey, insight: Insight) -> bool {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = map.entry(key.clone()).or_default();
        if entry.connected && entry.replica == self.replica {
            return false;
        }
        let next = Insight {
            mtls: entry.mtls.clone(),
            stream: entry.stream + 1,
            ..insight
        };
        let same = Insight {
            stream: entry.stream,
            ..next.clone()
        } == *entry;
        if same {
            return false;
        }
        let admin_changed = entry.admin.map(|a| a.port) != next.admin.map(|a| a.port);
        *entry = next;
        drop(map);
        self.changes.send_modify(|c| *c += 1);
        if admin_changed {
            self.admin_changes.send_modify(|c| *c += 1);
        }
        true
    }

    /// The insight of a DPP, if it ever connected.
    pub fn get(&self, mesh: &str, name: &str) -> Option<Insight> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&DpKey::new(mesh, name))
            .cloned()
    }

    /// The admin port of a DPP's Envoy (`mesh` empty: a ZoneIngress), known once one of its
    /// Envoys connected (node metadata `dataplane.admin.port`); kept after it disconnects.
    pub fn admin_port(&self, mesh: &str, name: &str) -> Option<u16> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&DpKey::new(mesh, name))
            .and_then(|i| i.admin)
            .map(|a| a.port)
    }

    /// The kuma-dp DNS port of DPP `mesh`/`name`'s Envoy, from its current or last stream
    /// ([`AdminEndpoint::dns_port`]).
    pub fn dns_port(&self, mesh: &str, name: &str) -> Option<u16> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&DpKey::new(mesh, name))
            .and_then(|i| i.admin)
            .and_then(|a| a.dns_port)
    }

    /// Wake-ups when an admin port is first known or changes ([`Insights::admin_port`]).
    pub fn subscribe_admin(&self) -> tokio::sync::watch::Receiver<u64> {
        self.admin_changes.subscribe()
    }

    /// Every insight, by (mesh, name).
    pub fn all(&self) -> Vec<(DpKey, Insight)> {
        let mut out: Vec<_> = self
            .map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Wake-ups on every insight change (KDS reports insights to the Global).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Take `statuses` as every DPP's mTLS status (a DPP not in it has none), waking the
    /// subscribers once if anything changed.
    pub fn set_mtls(&self, statuses: &HashMap<DpKey, umbra_pki::identity::MtlsStatus>) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut changed = false;
        for (key, insight) in map.iter_mut() {
            let next = statuses.get(key);
            if insight.mtls.as_ref() != next {
                insight.mtls = next.cloned();
                changed = true;
            }
        }
        for (key, status) in statuses {
            if !map.contains_key(key) {
                map.insert(
                    key.clone(),
                    Insight {
                        mtls: Some(status.clone()),
                        ..Insight::default()
                    },
                );
                changed = true;
            }
        }
        drop(map);
        if changed {
            self.changes.send_modify(|c| *c += 1);
        }
    }

    /// A new ADS stream of `key` opened, its Envoy's admin at `admin` and running `version`:
    /// the insight follows it from now on (counters reset, connected). Returns the stream's
    /// generation, which [`Insights::update_stream`] and [`Insights::close_stream`] take.
    pub fn open_stream(
        &self,
        key: &DpKey,
        admin: AdminEndpoint,
        version: Option<serde_json::Value>,
    ) -> u64 {
        let mut generation = 0;
        let mut admin_changed = false;
        self.update(key, |i| {
            admin_changed =
                i.admin.map(|a| (a.port, a.dns_port)) != Some((admin.port, admin.dns_port));
            i.stream += 1;
            generation = i.stream;
            i.admin = Some(admin);
            i.replica.clone_from(&self.replica);
            i.version = version;
            i.stats.clear();
            i.connected = true;
            i.responses_sent = 0;
            i.connect_time = Some(umbra_store::now_rfc3339());
            i.disconnect_time = None;
        });
        if admin_changed {
            self.admin_changes.send_modify(|c| *c += 1);
        }
        generation
    }

    /// Stream `generation` of `key` ended: the proxy is disconnected unless a newer stream of
    /// it opened meanwhile.
    pub fn close_stream(&self, key: &DpKey, generation: u64) {
        self.update_stream(key, generation, |i| {
            i.connected = false;
            i.disconnect_time = Some(umbra_store::now_rfc3339());
        });
    }

    /// Change `key`'s insight with `f` when it still follows stream `generation` (and wake
    /// the subscribers); nothing otherwise.
    pub(crate) fn update_stream(&self, key: &DpKey, generation: u64, f: impl FnOnce(&mut Insight)) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(insight) = map.get_mut(key).filter(|i| i.stream == generation) else {
            return;
        };
        f(insight);
        drop(map);
        self.changes.send_modify(|c| *c += 1);
    }

    /// Drop the insights of `keys` (proxies that no longer exist) whose Envoy is not connected;
    /// a connected one stays until its stream ends.
    pub fn forget_disconnected(&self, keys: &[&DpKey]) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = map.len();
        for key in keys {
            if map.get(*key).is_some_and(|i| !i.connected) {
                map.remove(*key);
            }
        }
        let changed = map.len() != before;
        drop(map);
        if changed {
            self.changes.send_modify(|c| *c += 1);
        }
    }

    /// Change `key`'s insight (created when new) and wake the subscribers.
    pub(crate) fn update(&self, key: &DpKey, f: impl FnOnce(&mut Insight)) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(map.entry(key.clone()).or_default());
        drop(map);
        self.changes.send_modify(|c| *c += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(port: u16) -> AdminEndpoint {
        AdminEndpoint {
            port,
            local: true,
            dns_port: None,
        }
    }

    #[test]
    fn replicas_adopt_each_others_insights_but_never_over_their_own_streams() {
        let (a, b) = (Insights::for_replica("a"), Insights::for_replica("b"));
        let key = DpKey::new("m", "web");
        let stream = a.open_stream(&key, admin(9901), None);
        let admin_wake = b.subscribe_admin();
        let (shared_key, shared) = a.local().pop().unwrap();
        assert_eq!(shared_key, key);
        assert_eq!(shared.replica.as_deref(), Some("a"));
        assert!(b.local().is_empty(), "b serves no stream");
        assert!(b.adopt(&key, shared.clone()));
        assert!(!b.adopt(&key, shared.clone()), "nothing new");
        assert_eq!(
            b.admin_port("m", "web"),
            Some(9901),
            "b generates its admin listener too"
        );
        assert!(admin_wake.has_changed().unwrap());
        assert!(
            b.local().is_empty(),
            "an adopted insight is not b's to share"
        );
        // The Envoy moves to b: b's stream wins, and a's view of it cannot replace it.
        b.open_stream(&key, admin(9902), None);
        assert_eq!(b.get("m", "web").unwrap().replica.as_deref(), Some("b"));
        assert!(!b.adopt(&key, shared));
        let moved = b.local().pop().unwrap().1;
        // While a still sees its own stream open, that stream is what a reports; once it
        // closed, a takes b's (its full read of the shared table brings it again).
        assert!(!a.adopt(&key, moved.clone()));
        a.close_stream(&key, stream);
        assert!(a.adopt(&key, moved));
        // A late event of a's old stream changes nothing now: the insight follows b's stream.
        a.close_stream(&key, stream);
        let seen = a.get("m", "web").unwrap();
        assert!(seen.connected && seen.replica.as_deref() == Some("b"));
        assert_eq!(a.admin_port("m", "web"), Some(9902));
        assert!(a.local().is_empty());
    }
}
