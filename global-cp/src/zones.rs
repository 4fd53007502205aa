//! What the Global knows about each zone (served by `GET /zones`, `GET /zones/{name}`, and as
//! Kuma's `ZoneOverview` by `GET /zones+insights`, `GET /zones/{name}+insights`): whether
//! it is online, connect/disconnect times, when it was last heard from, and per KDS direction
//! and type what it has acknowledged; plus the Dataplane insights zones report.
//!
//! Kept in memory: after a Global restart a zone is listed again from its first reconnect, and
//! its insights are re-sent in full on that reconnect (the Global holds none to resume from).

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde::Serialize;
use serde_json::Value;
use umbra_kds::resource::Item;
use umbra_kds::sync::Event;
use umbra_xds_protocol::version::ResourceVersions;

/// The most insights one zone may have reported at once.
pub const MAX_INSIGHTS_PER_ZONE: usize = 100_000;

/// A KDS direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Policies to the zone (GlobalToZoneSync).
    GlobalToZone,
    /// Dataplanes and insights from the zone (ZoneToGlobalSync).
    ZoneToGlobal,
}

/// Sync state of one type in one direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeSync {
    /// Responses sent (Global → zone) or received (zone → Global).
    pub responses: u64,
    /// Resources carried by those responses (removals not counted).
    pub resources: u64,
    /// Removals carried by those responses.
    pub removals: u64,
    /// Responses acknowledged (ACKs from the zone, or sent by the Global).
    pub acks: u64,
    /// Responses rejected.
    pub nacks: u64,
    /// Resources of the type the zone has acknowledged (Global → zone).
    pub acknowledged_resources: usize,
    /// When the last ACK happened (RFC 3339).
    pub last_ack_time: Option<String>,
    /// The last rejection's reason.
    pub last_nack: Option<String>,
}

/// Everything known about one zone.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneStatus {
    /// Zone name (from its token).
    pub name: String,
    /// At least one KDS stream of the zone is open.
    pub online: bool,
    /// KDS streams open now (3 for a healthy zone: one per direction, one for inspect calls).
    pub streams: u32,
    /// Connections since this Global started (a connection: from the first stream opened to
    /// the last one closed); numbers its KDS subscription in `GET /zones/{name}+insights`.
    #[serde(skip)]
    pub connects: u64,
    /// When its current (or last) connection started (RFC 3339).
    pub connect_time: Option<String>,
    /// When its last stream ended.
    pub disconnect_time: Option<String>,
    /// Why its last stream ended, if it was an error.
    pub last_error: Option<String>,
    /// When a message from it last arrived.
    pub last_seen: Option<String>,
    /// The connection (peer address) whose streams hold the zone's lease: only it may sync as
    /// this zone until all its streams have ended.
    pub connection: Option<String>,
    /// The Global replica holding its connection (`--replica-name`; with several replicas on
    /// PostgreSQL, read from the zone's lease there), while it is online.
    pub replica: Option<String>,
    /// The Global store identity the zone recorded when it first synced (empty: none yet).
    /// When it differs from `globalStore`, this Global does not hold the data the zone synced
    /// from (a memory store that restarted without `--data-dir`, a database restored from
    /// another deployment): the zone keeps serving its last state and applies no deletions
    /// from here until an operator confirms on the zone. A rollback of the same store to an
    /// older backup keeps its identity and is not detected this way.
    pub recorded_store: Option<String>,
    /// This Global's store identity.
    pub global_store: Option<String>,
    /// The zone CP's release, as its current (or last) connection reported it.
    pub version: Option<String>,
    /// `recorded_store` is set and differs from `global_store`.
    pub store_changed: bool,
    /// Streams refused because another connection held the zone's lease.
    pub refused_connections: u64,
    /// The last refused connection: its peer address and when (RFC 3339).
    pub last_refused: Option<String>,
    /// Per type: Meshes and policies sent to it.
    pub global_to_zone: BTreeMap<String, TypeSync>,
    /// Per type: Dataplanes and insights received from it.
    pub zone_to_global: BTreeMap<String, TypeSync>,
    /// When its last stream ended (monotonic; for zone cleanup).
    #[serde(skip)]
    pub disconnected_at: Option<std::time::Instant>,
    /// Its resources are being removed ([`crate::cleanup`]): its streams are refused meanwhile.
    #[serde(skip)]
    pub cleaning: bool,
}

/// Why a zone's stream is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Another connection (this peer address) holds the zone's lease.
    Leased(String),
    /// The zone's resources are being cleaned up; it may reconnect once that is done.
    CleaningUp,
}

/// The registry of zones and their insights.
#[derive(Debug, Default)]
pub struct ZoneRegistry {
    zones: RwLock<BTreeMap<String, ZoneStatus>>,
    /// (zone, KDS name) → insight.
    insights: RwLock<BTreeMap<(String, String), Item>>,
}

fn now() -> String {
    crate::store::now_rfc3339()
}

impl ZoneRegistry {
    fn update(&self, zone: &str, f: impl FnOnce(&mut ZoneStatus)) {
        let mut zones = self
            .zones
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let status = zones.entry(zone.to_owned()).or_insert_with(|| ZoneStatus {
            name: zone.to_owned(),
            ..ZoneStatus::default()
        });
        let was_online = status.online;
        f(status);
        if status.online != was_online {
            let online = zones.values().filter(|z| z.online).count();
            metrics::gauge!(umbra_runtime::metrics::ZONES_ONLINE).set(online as f64);
        }
    }

    /// Every zone, by name.
    pub fn list(&self) -> Vec<ZoneStatus> {
        self.zones
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// One zone.
    pub fn get(&self, zone: &str) -> Option<ZoneStatus> {
        self.zones
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(zone)
            .cloned()
    }

    /// A stream of `zone` opens on `connection` (its peer address). One connection holds a
    /// zone's lease at a time (Kuma's leader lease, per zone): a stream of another connection
    /// is refused while the holder has any stream open, so a second process presenting the
    /// same zone's token can never sync, or write that zone's Dataplanes, next to the first.
    ///
    /// # Errors
    /// [`Refused`]: the connection holding the lease, or a cleanup in progress.
    pub fn stream_opened(&self, zone: &str, connection: &str) -> Result<(), Refused> {
        let mut refused = None;
        self.update(zone, |z| {
            if z.cleaning {
                refused = Some(Refused::CleaningUp);
                return;
            }
            match &z.connection {
                Some(holder) if z.streams > 0 && holder != connection => {
                    z.refused_connections += 1;
                    z.last_refused = Some(format!("{connection} at {}", now()));
                    refused = Some(Refused::Leased(holder.clone()));
                    return;
                }
                _ => {}
            }
            if z.streams == 0 {
                z.connect_time = Some(now());
                z.connects += 1;
            }
            z.connection = Some(connection.to_owned());
            z.streams += 1;
            z.online = true;
            z.last_seen = Some(now());
        });
        match refused {
            Some(holder) => Err(holder),
            None => Ok(()),
        }
    }

    /// A stream of `zone` ended, with `error` if it failed.
    pub fn stream_closed(&self, zone: &str, error: Option<String>) {
        self.update(zone, |z| {
            z.streams = z.streams.saturating_sub(1);
            z.online = z.streams > 0;
            if !z.online {
                z.connection = None;
                z.disconnected_at = Some(std::time::Instant::now());
            }
            z.disconnect_time = Some(now());
            if error.is_some() {
                z.last_error = error;
            }
        });
    }

    /// How long `zone` has been offline: `None` when unknown (not connected since this
    /// Global started: offline since then), `Some(None)` while it is online.
    pub fn offline_for(&self, zone: &str) -> Option<Option<std::time::Duration>> {
        let zones = self
            .zones
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let z = zones.get(zone)?;
        if z.online {
            return Some(None);
        }
        Some(Some(z.disconnected_at?.elapsed()))
    }

    /// Start cleaning up `zone`'s resources: `false` (nothing starts) when it is online;
    /// otherwise its streams are refused until [`ZoneRegistry::end_cleanup`].
    pub fn begin_cleanup(&self, zone: &str) -> bool {
        let mut started = false;
        self.update(zone, |z| {
            if !z.online {
                z.cleaning = true;
                started = true;
            }
        });
        started
    }

    /// The cleanup of `zone` is over: it may connect again.
    pub fn end_cleanup(&self, zone: &str) {
        self.update(zone, |z| z.cleaning = false);
    }

    /// `zone` connected saying it recorded `recorded` as its Global's store identity (empty:
    /// none yet); this Global's is `ours`.
    pub fn store_view(&self, zone: &str, ours: &str, recorded: &str) {
        self.update(zone, |z| {
            z.global_store = Some(ours.to_owned()).filter(|s| !s.is_empty());
            z.recorded_store = Some(recorded.to_owned()).filter(|s| !s.is_empty());
            z.store_changed = !recorded.is_empty() && recorded != ours;
        });
    }

    /// `zone`'s connection reported its release `version` (`None`: it did not say).
    pub fn set_version(&self, zone: &str, version: Option<String>) {
        self.update(zone, |z| z.version = version);
    }

    /// A message from `zone` arrived.
    pub fn seen(&self, zone: &str) {
        self.update(zone, |z| z.last_seen = Some(now()));
    }

    /// Record a sync event of `zone` in `direction`.
    pub fn record(&self, zone: &str, direction: Direction, event: &Event) {
        umbra_kds::metrics::record(
            match direction {
                Direction::GlobalToZone => "global_to_zone",
                Direction::ZoneToGlobal => "zone_to_global",
            },
            event,
        );
        self.update(zone, |z| {
            let per_type = match direction {
                Direction::GlobalToZone => &mut z.global_to_zone,
                Direction::ZoneToGlobal => &mut z.zone_to_global,
            };
            match event {
                Event::Sent {
                    type_url,
                    resources,
                    removed,
                } => {
                    let t = per_type.entry(type_url.clone()).or_default();
                    t.responses += 1;
                    t.resources += *resources as u64;
                    t.removals += *removed as u64;
                }
                Event::Ack { type_url, held } => {
                    let t = per_type.entry(type_url.clone()).or_default();
                    t.acks += 1;
                    t.acknowledged_resources = *held;
                    t.last_ack_time = Some(now());
                }
                Event::Nack { type_url, error } => {
                    let t = per_type.entry(type_url.clone()).or_default();
                    t.nacks += 1;
                    t.last_nack = Some(error.clone());
                }
                Event::Applied {
                    type_url,
                    resources,
                    removed,
                    rejected,
                } => {
                    let t = per_type.entry(type_url.clone()).or_default();
                    t.responses += 1;
                    t.resources += *resources as u64;
                    t.removals += *removed as u64;
                    if rejected.is_empty() {
                        t.acks += 1;
                        t.last_ack_time = Some(now());
                    } else {
                        t.nacks += 1;
                        t.last_nack = Some(
                            rejected
                                .iter()
                                .map(|r| format!("{}: {}", r.name, r.reason))
                                .collect::<Vec<_>>()
                                .join("; "),
                        );
                    }
                }
            }
        });
    }

    /// Store an insight `zone` reported under KDS name `name`; `false` (nothing stored) when
    /// the zone already has [`MAX_INSIGHTS_PER_ZONE`] others.
    pub fn put_insight(&self, zone: &str, name: &str, item: Item) -> bool {
        let mut insights = self
            .insights
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (zone.to_owned(), name.to_owned());
        if !insights.contains_key(&key) {
            let held = insights
                .range((zone.to_owned(), String::new())..)
                .take_while(|((z, _), _)| z == zone)
                .count();
            if held >= MAX_INSIGHTS_PER_ZONE {
                return false;
            }
        }
        insights.insert(key, item);
        true
    }

    /// Forget an insight.
    pub fn remove_insight(&self, zone: &str, name: &str) {
        self.insights
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(zone.to_owned(), name.to_owned()));
    }

    /// The insight of `zone`'s Dataplane `name` in `mesh`, as reported.
    pub fn insight(&self, zone: &str, mesh: &str, name: &str) -> Option<Value> {
        let key = (zone.to_owned(), umbra_kds::resource::kds_name(mesh, name));
        let insights = self
            .insights
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        serde_json::from_slice(&insights.get(&key)?.body).ok()
    }

    /// Versions of the insights `zone` has reported (to resume its stream).
    pub fn insight_versions(&self, zone: &str) -> ResourceVersions {
        self.insights
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .range((zone.to_owned(), String::new())..)
            .take_while(|((z, _), _)| z == zone)
            .map(|((_, n), item)| (n.clone(), item.version.clone()))
            .collect()
    }
}
