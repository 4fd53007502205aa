//! What a staged rollout (issue 40) asks the zones over KDS (`TrafficRequest`): the staged
//! and comparison DPPs' Envoy counters ([`read_traffic`], [`read_groups`]), and whether the
//! staged DPPs' Envoys have acknowledged a config with the stage's copies in effect
//! ([`read_acks`], answered by `umbra_zone_cp::convergence`), which starts the soak.
//!
//! Each zone is asked for its own DPPs, in requests of at most [`PER_REQUEST`] DPPs one after
//! the other, all zones at once, each request within [`TRAFFIC_TIMEOUT`] and
//! [`MAX_TRAFFIC_BYTES`]. A zone that cannot be asked, or does not answer for a DPP, leaves
//! that DPP unread (counters) or not acknowledged (ACKs), with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use umbra_core::rollout::TrafficSample;
use umbra_kds::pb::inspect_request::Kind;
use umbra_kds::pb::TrafficRequest;

use super::stages::dpp_key;
use crate::inspect::context::{ask_zone_json, InspectContext};

/// How long a zone may take to read its DPPs' counters.
pub const TRAFFIC_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest answer of a zone's counters read (bytes; a sample is about 200).
pub const MAX_TRAFFIC_BYTES: u64 = 8 << 20;
/// Most DPPs one `TrafficRequest` names (a zone reads at most so many per request).
pub const PER_REQUEST: usize = 1000;

/// The counters of DPPs `keys` (`<zone>/<name>`) of `mesh`, and why each DPP that could not
/// be read was not (a zone that cannot be asked: all of its DPPs).
pub async fn read_traffic(
    cx: &InspectContext,
    mesh: &str,
    keys: &BTreeSet<String>,
) -> (BTreeMap<String, TrafficSample>, BTreeMap<String, String>) {
    let (mut samples, mut errors) = (BTreeMap::new(), BTreeMap::new());
    for (zone, names, answer) in ask_all(cx, mesh, keys, &[], false).await {
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                for n in names {
                    errors.insert(dpp_key(zone, &n), format!("zone {zone:?}: {e}"));
                }
                continue;
            }
        };
        for (name, why) in answer["errors"].as_object().into_iter().flatten() {
            errors.insert(
                dpp_key(zone, name),
                why.as_str().unwrap_or("unreadable").to_owned(),
            );
        }
        for (name, sample) in answer["samples"].as_object().into_iter().flatten() {
            match serde_json::from_value::<TrafficSample>(sample.clone()) {
                Ok(s) => {
                    samples.insert(dpp_key(zone, name), s);
                }
                Err(e) => {
                    errors.insert(
                        dpp_key(zone, name),
                        format!("its sample does not read: {e}"),
                    );
                }
            }
        }
        for n in names {
            let k = dpp_key(zone, &n);
            if !samples.contains_key(&k) && !errors.contains_key(&k) {
                errors.insert(k, format!("zone {zone:?} did not answer for it"));
            }
        }
    }
    (samples, errors)
}

/// The counters of the `staged` DPPs, every one of them (else the error: a gate fails
/// closed), and of those of `others` that can be read (a comparison DPP that went away or
/// cannot be read is left out of the comparison).
///
/// # Errors
/// The first staged DPP that cannot be read, and why.
pub async fn read_groups(
    cx: &InspectContext,
    mesh: &str,
    staged: &BTreeSet<String>,
    others: &[String],
) -> Result<BTreeMap<String, TrafficSample>, String> {
    let keys: BTreeSet<String> = staged.iter().chain(others).cloned().collect();
    let (samples, errors) = read_traffic(cx, mesh, &keys).await;
    if let Some((dpp, why)) = errors.iter().find(|(k, _)| staged.contains(*k)) {
        return Err(format!("staged DPP {dpp}: {why}"));
    }
    if !errors.is_empty() {
        tracing::info!(%mesh, left_out = errors.len(), "rollout: comparison DPPs that cannot be read are left out");
    }
    Ok(samples)
}

/// Which of DPPs `keys` of `mesh` run a config with every one of `live` (`Type/name`) in
/// effect, their Envoy having acknowledged it.
#[derive(Debug, Default)]
pub struct Acks {
    /// The DPPs that do.
    pub acked: BTreeSet<String>,
    /// The DPPs that do not yet, and why (a zone that cannot be asked, or that does not say,
    /// an earlier release, leaves its DPPs here).
    pub waiting: BTreeMap<String, String>,
    /// The DPPs that will not (their generation failed, or their Envoy NACKed), and why.
    pub rejected: BTreeMap<String, String>,
    /// The zones that do not report ACKs (an earlier release, which answers counters only).
    pub unreported: BTreeSet<String>,
}

/// The samples of `keys` among `samples` (those read).
pub fn pick<'k>(
    samples: &BTreeMap<String, TrafficSample>,
    keys: impl Iterator<Item = &'k String>,
) -> BTreeMap<String, TrafficSample> {
    keys.filter_map(|k| samples.get(k).map(|s| (k.clone(), *s)))
        .collect()
}

/// [`Acks`] of DPPs `keys` of `mesh` for policies `live`. Reads no counter (a zone of an
/// earlier release reads them anyway, once: its DPPs count as acknowledged, its name in
/// [`Acks::unreported`], so that a Global upgraded before its zones goes on as it did).
pub async fn read_acks(
    cx: &InspectContext,
    mesh: &str,
    keys: &BTreeSet<String>,
    live: &[String],
) -> Acks {
    let mut out = Acks::default();
    let Acks {
        acked,
        waiting,
        rejected,
        unreported,
    } = &mut out;
    for (zone, names, answer) in ask_all(cx, mesh, keys, live, true).await {
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                for n in names {
                    waiting.insert(dpp_key(zone, &n), format!("zone {zone:?}: {e}"));
                }
                continue;
            }
        };
        if answer.get("acked").is_none() {
            // A zone of an earlier release: it cannot say; its DPPs are not waited for.
            unreported.insert(zone.to_owned());
            for n in names {
                acked.insert(dpp_key(zone, &n));
            }
            continue;
        }
        for name in answer["acked"].as_array().into_iter().flatten() {
            if let Some(name) = name.as_str() {
                acked.insert(dpp_key(zone, name));
            }
        }
        for (map, key) in [(&mut *waiting, "waiting"), (&mut *rejected, "rejected")] {
            for (name, why) in answer[key].as_object().into_iter().flatten() {
                map.insert(
                    dpp_key(zone, name),
                    why.as_str().unwrap_or("not acknowledged").to_owned(),
                );
            }
        }
        for n in names {
            let k = dpp_key(zone, &n);
            if !acked.contains(&k) && !waiting.contains_key(&k) && !rejected.contains_key(&k) {
                let why = format!("zone {zone:?} did not say whether it runs the stage's copies");
                waiting.insert(k, why);
            }
        }
    }
    out
}

/// Every zone of `keys` asked at once (each zone's DPPs in requests of [`PER_REQUEST`], one
/// after the other): the zone, the DPP names of one request, and its answer.
async fn ask_all<'k>(
    cx: &InspectContext,
    mesh: &str,
    keys: &'k BTreeSet<String>,
    live: &[String],
    acks_only: bool,
) -> Vec<(&'k str, Vec<String>, Result<Value, String>)> {
    let mut by_zone: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for k in keys {
        let (zone, name) = k.split_once('/').unwrap_or(("", k));
        by_zone.entry(zone).or_default().push(name.to_owned());
    }
    let asks = by_zone.into_iter().map(|(zone, names)| async move {
        let mut answers = Vec::new();
        for chunk in names.chunks(PER_REQUEST) {
            let kind = Kind::Traffic(TrafficRequest {
                mesh: mesh.to_owned(),
                dataplanes: chunk.to_vec(),
                live: live.to_vec(),
                acks_only,
            });
            let answer =
                ask_zone_json(&cx.hub, zone, kind, TRAFFIC_TIMEOUT, MAX_TRAFFIC_BYTES).await;
            answers.push((zone, chunk.to_vec(), answer));
        }
        answers
    });
    futures_util::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}
