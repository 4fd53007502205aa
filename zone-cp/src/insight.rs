//! What the zone knows about each DPP's xDS connection (its insight), written by the ADS
//! server ([`crate::ads`]) and read by the API (`dataplanes+insights`) and by KDS, which
//! reports every insight to the Global as an opaque `DataplaneInsight` document.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use serde::Serialize;
use umbra_core::dataplane::DpKey;

/// What the zone knows about one DPP's xDS connection (its insight).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Insight {
    /// An ADS stream is open.
    pub connected: bool,
    /// Per type URL: last ACKed version.
    pub acked: BTreeMap<String, String>,
    /// Per type URL: last NACK (version and Envoy's error text).
    pub nacked: BTreeMap<String, Nack>,
    /// Responses sent on the current or last stream.
    pub responses_sent: u64,
    /// When the current or last stream opened (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_time: Option<String>,
    /// When the last stream closed (RFC 3339); `None` while one is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnect_time: Option<String>,
}

/// A rejected version and Envoy's reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for Insights {
    fn default() -> Self {
        Self {
            map: RwLock::default(),
            changes: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Insights {
    /// The insight of a DPP, if it ever connected.
    pub fn get(&self, mesh: &str, name: &str) -> Option<Insight> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&DpKey::new(mesh, name))
            .cloned()
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
