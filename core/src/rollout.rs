//! Staged rollouts (issue 40), the pure half: narrowing a policy to the DPPs of one stage the
//! way seed 000's rollout section does it by hand ([`narrow`], [`staged_copy`]), reading a
//! stage list ([`parse_stages`]), and deciding a gate from Envoy's own counters
//! ([`TrafficSample`], [`evaluate_gate`]). No IO: the Global's rollout reads the counters
//! through the zones and keeps every decision durably.
//!
//! **Narrowing** (seed 000, "Rolling out the new policies": "select them with MeshSubset
//! targetRef"): a policy's top-level `targetRef` keeps what it selects and also requires the
//! stage's tags: `Mesh` becomes a `MeshSubset` on them (its `proxyTypes` kept), `MeshSubset`
//! and `MeshServiceSubset` get them added, `MeshService` becomes a `MeshServiceSubset` of the
//! same service. A stage tag that contradicts one the policy already requires is refused (the
//! copy would select nothing), as are `MeshGateway` and `MeshHTTPRoute` targets (no subset of
//! them can be named).
//!
//! **The old-type-off rule, for exactly the staged DPPs** (issue 40; seed 000: "as long as
//! there is at least 1 policy of a new type ... the policies of the corresponding old type are
//! not applied"): while a new type's only policies are staged copies, its old type is switched
//! off on the DPPs a copy selects and stays on for the others
//! ([`crate::view::PolicySet::staged_off`]); any other policy of the new type switches it off
//! mesh-wide, as the seed says. A stage's fleet diff is still checked before the stage is
//! applied: a DPP outside the stage whose config the stage would change refuses the stage,
//! naming it (a mesh already on the new type mesh-wide changes nothing outside, by the same
//! rule).

use std::collections::BTreeMap;

use crate::convert::model::{CONVERTED_FROM_NAME_LABEL, CONVERTED_FROM_TYPE_LABEL};
use crate::meta::{EFFECT_LABEL, EFFECT_SHADOW, OBSERVE_LABEL};
use crate::resource::Resource;
use crate::sample::Share;
use crate::target_ref::{TargetRef, TargetRefKind};

pub use crate::meta::ROLLOUT_LABEL;
/// Label of a staged copy: the stage (1-based) that created it.
pub const STAGE_LABEL: &str = "umbra.io/rollout-stage";
/// Label of a staged copy: the name of the policy it narrows.
pub const STAGED_FROM_LABEL: &str = "umbra.io/staged-from";

/// Why a policy cannot be narrowed to a stage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NarrowError {
    /// The top-level `targetRef` kind has no subset form.
    #[error("a top-level targetRef of kind {0} cannot be narrowed to a stage (no subset of it can be named); roll it out in one step")]
    Kind(String),
    /// A stage tag contradicts one the policy requires.
    #[error("the stage requires {key}={stage:?} but the policy selects {key}={policy:?}: the staged copy would select nothing")]
    Contradiction {
        /// The tag.
        key: String,
        /// The stage's value.
        stage: String,
        /// The policy's value.
        policy: String,
    },
    /// The policy's document has no `spec.targetRef`.
    #[error("the policy has no top-level targetRef")]
    NoTargetRef,
}

/// `target` narrowed to the DPPs that also carry every tag of `stage` (see the module docs).
///
/// # Errors
/// [`NarrowError`] for a kind without a subset form or a contradicting tag.
pub fn narrow(
    target: &TargetRef,
    stage: &BTreeMap<String, String>,
) -> Result<TargetRef, NarrowError> {
    let mut out = target.clone();
    let kind = target.kind.clone().unwrap_or(TargetRefKind::Mesh);
    out.kind = Some(match kind {
        TargetRefKind::Mesh | TargetRefKind::MeshSubset => TargetRefKind::MeshSubset,
        TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset => {
            TargetRefKind::MeshServiceSubset
        }
        other => return Err(NarrowError::Kind(other.as_str().to_owned())),
    });
    for (key, value) in stage {
        match out.tags.get(key) {
            Some(v) if v != value => {
                return Err(NarrowError::Contradiction {
                    key: key.clone(),
                    stage: value.clone(),
                    policy: v.clone(),
                })
            }
            _ => {
                out.tags.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(out)
}

/// The staged copy of `policy` for stage `stage` (1-based) of rollout `rollout`: named
/// `<name>-stage-<stage>` (the name truncated to fit 253 characters), narrowed to `tags`,
/// **shadow** (the stage's diff is computed before it is promoted), labelled
/// [`ROLLOUT_LABEL`], [`STAGE_LABEL`] and [`STAGED_FROM_LABEL`], and without the labels that
/// would make it something else (`umbra.io/observe`, the converter's `converted-from`: the
/// copy replaces no old policy of its own).
///
/// # Errors
/// [`NarrowError`] as [`narrow`].
pub fn staged_copy(
    policy: &Resource,
    tags: &BTreeMap<String, String>,
    rollout: &str,
    stage: usize,
) -> Result<Resource, NarrowError> {
    let mut doc = policy.to_value();
    let target: TargetRef = doc
        .pointer("/spec/targetRef")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .ok_or(NarrowError::NoTargetRef)?;
    let narrowed = narrow(&target, tags)?;
    doc["spec"]["targetRef"] = serde_json::to_value(&narrowed).unwrap_or_default();
    let suffix = format!("-stage-{stage}");
    let base: String = policy.meta.name.chars().take(253 - suffix.len()).collect();
    doc["name"] = serde_json::Value::String(format!("{base}{suffix}"));
    let labels = doc["labels"].as_object().cloned().unwrap_or_default();
    let mut labels: serde_json::Map<String, serde_json::Value> = labels
        .into_iter()
        .filter(|(k, _)| {
            ![
                OBSERVE_LABEL,
                CONVERTED_FROM_NAME_LABEL,
                CONVERTED_FROM_TYPE_LABEL,
            ]
            .contains(&k.as_str())
        })
        .collect();
    labels.insert(EFFECT_LABEL.into(), EFFECT_SHADOW.into());
    labels.insert(ROLLOUT_LABEL.into(), rollout.into());
    labels.insert(STAGE_LABEL.into(), stage.to_string().into());
    labels.insert(STAGED_FROM_LABEL.into(), policy.meta.name.clone().into());
    doc["labels"] = serde_json::Value::Object(labels);
    // The document was a valid policy and only its targetRef, name and labels changed.
    Resource::from_value(doc).map_err(|_| NarrowError::NoTargetRef)
}

/// One stage of a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// The DPPs carrying every one of these tags.
    Tags(BTreeMap<String, String>),
    /// A share of the DPPs the plan's policies select, chosen by their sample points
    /// ([`crate::sample`]).
    Share(Share),
    /// Every DPP: the plan's own apply.
    All,
}

/// Read a stage list: items separated by commas, each `100%` (every DPP, only last), a count
/// of DPPs (`1`), a percentage of them from 1 to 99 (`10%`), or tags `<key>=<value>` joined
/// by `&` (`kuma.io/zone=zone-1&version=v2`). At least one stage before the last, which must
/// be `100%`. Counts and percentages grow: each is larger than the earlier ones of its kind.
///
/// # Errors
/// The item (1-based) and why: an empty item, a tag without `=`, a stage after `100%`, a list
/// not ending with `100%`, a count of 0, a percentage outside 1 to 99 or not a whole number,
/// a share not larger than an earlier one.
pub fn parse_stages(list: &str) -> Result<Vec<Stage>, String> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = i + 1;
        if item.is_empty() {
            return Err(format!("stage {at} is empty"));
        }
        if out.last() == Some(&Stage::All) {
            return Err(format!(
                "stage {at} comes after 100%, which is the last stage"
            ));
        }
        if *item == "100%" {
            out.push(Stage::All);
            continue;
        }
        if let Some(share) = parse_share(at, item)? {
            let smaller = out.iter().any(|s| match (s, &share) {
                (Stage::Share(Share::Count(a)), Share::Count(b)) => a >= b,
                (Stage::Share(Share::Percent(a)), Share::Percent(b)) => a >= b,
                _ => false,
            });
            if smaller {
                return Err(format!(
                    "stage {at} ({item}) is not larger than an earlier stage: shares grow"
                ));
            }
            out.push(Stage::Share(share));
            continue;
        }
        let mut tags = BTreeMap::new();
        for pair in item.split('&') {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!("stage {at}: {pair:?} is not <tag>=<value>"));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(format!("stage {at}: {pair:?} is not <tag>=<value>"));
            }
            if k == crate::sample::SAMPLE_TAG {
                return Err(format!(
                    "stage {at}: {k} is the rollout's own sample tag; name a share (10%) instead"
                ));
            }
            if tags.insert(k.to_owned(), v.to_owned()).is_some() {
                return Err(format!("stage {at} names tag {k:?} twice"));
            }
        }
        out.push(Stage::Tags(tags));
    }
    match out.last() {
        Some(Stage::All) if out.len() >= 2 => Ok(out),
        Some(Stage::All) => Err("a rollout needs at least one stage before 100%".into()),
        _ => Err("the last stage must be 100% (the plan's own apply)".into()),
    }
}

/// `Some` share for a count (`1`) or a percentage (`10%`), `None` for anything else.
fn parse_share(at: usize, item: &str) -> Result<Option<Share>, String> {
    if let Some(p) = item.strip_suffix('%') {
        return match p.trim().parse::<u8>() {
            Ok(p @ 1..=99) => Ok(Some(Share::Percent(p))),
            _ => Err(format!(
                "stage {at} ({item}): a percentage is a whole number from 1% to 99% (100% is the last stage)"
            )),
        };
    }
    if !item.is_empty() && item.chars().all(|c| c.is_ascii_digit()) {
        return match item.parse::<usize>() {
            Ok(0) => Err(format!(
                "stage {at} ({item}): a count of DPPs is at least 1"
            )),
            Ok(c) => Ok(Some(Share::Count(c))),
            Err(_) => Err(format!("stage {at} ({item}): too large a count of DPPs")),
        };
    }
    Ok(None)
}

/// What one DPP's Envoy counted, summed over its outbound clusters and inbound listeners
/// (cumulative since the Envoy started), as a gate reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficSample {
    /// `cluster.<outbound>.upstream_rq_total`: requests the DPP sent.
    pub requests: u64,
    /// `http.localhost_<port>.downstream_rq_total` and `tcp.localhost_<port>.
    /// downstream_cx_total`: requests (connections, on TCP) its inbounds received, what the
    /// RBAC and rate-limit counters are rates of.
    #[serde(default)]
    pub inbound: u64,
    /// `upstream_rq_5xx`.
    pub errors_5xx: u64,
    /// `upstream_rq_timeout`.
    pub timeouts: u64,
    /// `upstream_rq_rx_reset` (the upstream reset the request).
    pub resets: u64,
    /// `upstream_rq_retry`.
    pub retries: u64,
    /// `http.<inbound>.rbac.denied` and `<inbound>.rbac.denied` (live RBAC only).
    pub rbac_denied: u64,
    /// `<prefix>.http_local_rate_limit.rate_limited` (live limits only).
    pub rate_limited: u64,
    /// The highest P99 of `upstream_rq_time` over the outbound clusters, in milliseconds, as
    /// of Envoy's last stats flush (`None` without a recorded value).
    pub p99_ms: Option<f64>,
}

/// Clusters that carry no outbound traffic of the DPP (Kuma's names, sanitized for stats).
fn is_outbound_cluster(name: &str) -> bool {
    ![
        "localhost_",
        "inbound_",
        "ads_cluster",
        "kuma_",
        "access_log_sink",
        "meshtrace_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

impl TrafficSample {
    /// The sample in an Envoy `/stats` text answer (`<name>: <value>` lines; histograms as
    /// `<name>: P0(<interval>,<cumulative>) ... P99(...)`).
    pub fn parse(text: &str) -> Self {
        let mut s = TrafficSample::default();
        for line in text.lines() {
            let Some((name, value)) = line.trim().split_once(": ") else {
                continue;
            };
            if let Some(rest) = name.strip_prefix("cluster.") {
                let Some((cluster, stat)) = rest.rsplit_once('.') else {
                    continue;
                };
                // Envoy also counts each request under `<cluster>.internal.`/`.external.`,
                // `.canary.` and `.zone.<from>.<to>.`: the cluster's own counter is enough.
                let scoped = cluster
                    .rsplit_once('.')
                    .is_some_and(|(_, last)| ["internal", "external", "canary"].contains(&last))
                    || cluster.contains(".zone.");
                if scoped || !is_outbound_cluster(cluster) {
                    continue;
                }
                if stat == "upstream_rq_time" {
                    if let Some(p99) = p99(value) {
                        s.p99_ms = Some(s.p99_ms.map_or(p99, |m: f64| m.max(p99)));
                    }
                    continue;
                }
                let Ok(n) = value.trim().parse::<u64>() else {
                    continue;
                };
                let slot = match stat {
                    "upstream_rq_total" => &mut s.requests,
                    "upstream_rq_5xx" => &mut s.errors_5xx,
                    "upstream_rq_timeout" => &mut s.timeouts,
                    "upstream_rq_rx_reset" => &mut s.resets,
                    "upstream_rq_retry" => &mut s.retries,
                    _ => continue,
                };
                *slot = slot.saturating_add(n);
                continue;
            }
            let Ok(n) = value.trim().parse::<u64>() else {
                continue;
            };
            if name.contains("umbra_observe") {
                continue; // observers count what would happen, not what happened
            }
            // Kuma's inbound connection managers and TCP proxies are named for the inbound
            // cluster, `localhost:<port>`.
            let inbound = ["http.localhost_", "tcp.localhost_"]
                .iter()
                .any(|p| name.starts_with(p));
            if inbound
                && (name.ends_with(".downstream_rq_total") && name.starts_with("http.")
                    || name.ends_with(".downstream_cx_total") && name.starts_with("tcp."))
            {
                s.inbound = s.inbound.saturating_add(n);
                continue;
            }
            if name.ends_with(".rbac.denied") {
                s.rbac_denied = s.rbac_denied.saturating_add(n);
            } else if name.ends_with(".http_local_rate_limit.rate_limited") {
                s.rate_limited = s.rate_limited.saturating_add(n);
            }
        }
        s
    }

    /// Counters added since `before`, the latency kept as now. An Envoy that restarted
    /// meanwhile (any counter lower than before) counts from 0: the whole sample is new.
    pub fn since(&self, before: &TrafficSample) -> TrafficSample {
        let pairs = [
            (self.requests, before.requests),
            (self.inbound, before.inbound),
            (self.errors_5xx, before.errors_5xx),
            (self.timeouts, before.timeouts),
            (self.resets, before.resets),
            (self.retries, before.retries),
            (self.rbac_denied, before.rbac_denied),
            (self.rate_limited, before.rate_limited),
        ];
        if pairs.iter().any(|(now, then)| now < then) {
            return *self;
        }
        let d = |now: u64, then: u64| now - then;
        TrafficSample {
            requests: d(self.requests, before.requests),
            inbound: d(self.inbound, before.inbound),
            errors_5xx: d(self.errors_5xx, before.errors_5xx),
            timeouts: d(self.timeouts, before.timeouts),
            resets: d(self.resets, before.resets),
            retries: d(self.retries, before.retries),
            rbac_denied: d(self.rbac_denied, before.rbac_denied),
            rate_limited: d(self.rate_limited, before.rate_limited),
            p99_ms: self.p99_ms,
        }
    }

    /// The sum of `samples` (the highest P99).
    pub fn sum<'a>(samples: impl IntoIterator<Item = &'a TrafficSample>) -> TrafficSample {
        samples
            .into_iter()
            .fold(TrafficSample::default(), |a, b| TrafficSample {
                requests: a.requests.saturating_add(b.requests),
                inbound: a.inbound.saturating_add(b.inbound),
                errors_5xx: a.errors_5xx.saturating_add(b.errors_5xx),
                timeouts: a.timeouts.saturating_add(b.timeouts),
                resets: a.resets.saturating_add(b.resets),
                retries: a.retries.saturating_add(b.retries),
                rbac_denied: a.rbac_denied.saturating_add(b.rbac_denied),
                rate_limited: a.rate_limited.saturating_add(b.rate_limited),
                p99_ms: match (a.p99_ms, b.p99_ms) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                },
            })
    }
}

/// The P99 of a text histogram value (`P0(a,b) ... P99(i,c) ...`): the interval value, else
/// the cumulative one; `None` when both are `nan`.
fn p99(value: &str) -> Option<f64> {
    let start = value.find("P99(")? + 4;
    let end = value[start..].find(')')? + start;
    let (interval, cumulative) = value[start..end].split_once(',')?;
    [interval, cumulative]
        .iter()
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .find(|v| v.is_finite())
}

/// A gate's thresholds: how much worse, in rate points (0.01 = one request in a hundred), the
/// staged DPPs may be than both the not-yet-staged DPPs of the same services and their own
/// rates before the stage; the traffic a verdict needs; the latency margin.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Thresholds {
    /// Max extra 5xx rate (default 0.01).
    pub errors_5xx: f64,
    /// Max extra timeout rate (default 0.01).
    pub timeouts: f64,
    /// Max extra reset rate (default 0.01).
    pub resets: f64,
    /// Max extra retry rate (default 0.05).
    pub retries: f64,
    /// Max extra RBAC denial rate (default 0.01).
    pub rbac_denied: f64,
    /// Max extra rate-limited rate (default 0.01).
    pub rate_limited: f64,
    /// Max ratio of the staged P99 over the comparison's (default 1.5), checked when both
    /// have one and the staged P99 is over 10 ms.
    pub p99_ratio: f64,
    /// Requests the staged DPPs must have sent or received during the soak for a verdict
    /// (default 20, at least 1); fewer fails the gate (no evidence is not good evidence).
    pub min_requests: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            errors_5xx: 0.01,
            timeouts: 0.01,
            resets: 0.01,
            retries: 0.05,
            rbac_denied: 0.01,
            rate_limited: 0.01,
            p99_ratio: 1.5,
            min_requests: 20,
        }
    }
}

/// One counter's comparison in a gate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// The counter (`upstream_rq_5xx`, ...).
    pub counter: String,
    /// The staged DPPs' rate during the soak.
    pub staged: f64,
    /// The not-yet-staged DPPs' rate during the soak (`None` without requests).
    pub others: Option<f64>,
    /// The staged DPPs' own rate before the stage (`None` without requests).
    pub before: Option<f64>,
    /// The allowed margin.
    pub threshold: f64,
    /// Within the margin.
    pub passed: bool,
}

/// A gate's verdict, with every comparison it made.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Every check passed.
    pub passed: bool,
    /// Why it failed, naming the counters (empty when passed).
    pub reason: String,
    /// The comparisons.
    pub checks: Vec<Check>,
}

/// Reads one counter of a sample.
type Counter = fn(&TrafficSample) -> u64;

fn rate(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The requests sent (upstream counters) or received (inbound ones).
fn sent(s: &TrafficSample) -> u64 {
    s.requests
}

fn received(s: &TrafficSample) -> u64 {
    s.inbound
}

/// The gate after a stage's soak: `staged` is what the staged DPPs counted during the soak,
/// `others` what the not-yet-staged DPPs of the same services counted in the same time, and
/// `before` the staged DPPs' own counters up to the stage (cumulative). A counter fails when
/// the staged rate exceeds the higher of the two comparisons by more than its threshold (with
/// no comparison, its threshold alone); the P99 fails when over `p99_ratio` times the
/// comparison's and over 10 ms.
pub fn evaluate_gate(
    staged: &TrafficSample,
    others: &TrafficSample,
    before: &TrafficSample,
    t: &Thresholds,
) -> Verdict {
    let seen = staged.requests.saturating_add(staged.inbound);
    if seen < t.min_requests.max(1) {
        return Verdict {
            passed: false,
            reason: format!(
                "the staged DPPs sent and received {seen} requests during the soak, fewer than the {} a verdict needs",
                t.min_requests.max(1)
            ),
            checks: Vec::new(),
        };
    }
    // Upstream counters are rates of the requests sent, the RBAC and rate-limit ones of those
    // received.
    let counters: [(&str, Counter, Counter, f64); 6] = [
        ("upstream_rq_5xx", |s| s.errors_5xx, sent, t.errors_5xx),
        ("upstream_rq_timeout", |s| s.timeouts, sent, t.timeouts),
        ("upstream_rq_rx_reset", |s| s.resets, sent, t.resets),
        ("upstream_rq_retry", |s| s.retries, sent, t.retries),
        ("rbac.denied", |s| s.rbac_denied, received, t.rbac_denied),
        (
            "http_local_rate_limit.rate_limited",
            |s| s.rate_limited,
            received,
            t.rate_limited,
        ),
    ];
    let mut checks = Vec::new();
    for (counter, get, of, threshold) in counters {
        let staged_rate = rate(get(staged), of(staged)).unwrap_or(0.0);
        let others_rate = rate(get(others), of(others));
        let before_rate = rate(get(before), of(before));
        let base = others_rate
            .into_iter()
            .chain(before_rate)
            .fold(0.0, f64::max);
        checks.push(Check {
            counter: counter.to_owned(),
            staged: staged_rate,
            others: others_rate,
            before: before_rate,
            threshold,
            passed: staged_rate <= base + threshold,
        });
    }
    if let (Some(s), Some(o)) = (staged.p99_ms, others.p99_ms) {
        checks.push(Check {
            counter: "upstream_rq_time P99 (ms)".to_owned(),
            staged: s,
            others: Some(o),
            before: None,
            threshold: t.p99_ratio,
            passed: s <= 10.0 || s <= o * t.p99_ratio,
        });
    }
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| {
            // The comparison the check used: the higher of the others and before (the P99
            // compares with the others only).
            let base = c.others.into_iter().chain(c.before).reduce(f64::max);
            match base {
                Some(o) => format!(
                    "{}: {:.4} on the staged DPPs against {:.4} (margin {})",
                    c.counter, c.staged, o, c.threshold
                ),
                None => format!(
                    "{}: {:.4} on the staged DPPs (margin {})",
                    c.counter, c.staged, c.threshold
                ),
            }
        })
        .collect();
    Verdict {
        passed: failed.is_empty(),
        reason: failed.join("; "),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn target(json: serde_json::Value) -> TargetRef {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn every_subsettable_kind_narrows_and_keeps_what_it_selected() {
        let stage = tags(&[("kuma.io/zone", "zone-1")]);
        let cases = [
            (
                serde_json::json!({"kind": "Mesh", "proxyTypes": ["Sidecar"]}),
                serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}, "proxyTypes": ["Sidecar"]}),
            ),
            (
                serde_json::json!({"kind": "MeshSubset", "tags": {"team": "a"}}),
                serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1", "team": "a"}}),
            ),
            (
                serde_json::json!({"kind": "MeshService", "name": "backend"}),
                serde_json::json!({"kind": "MeshServiceSubset", "name": "backend", "tags": {"kuma.io/zone": "zone-1"}}),
            ),
            (
                serde_json::json!({"kind": "MeshServiceSubset", "name": "backend", "tags": {"version": "v2"}}),
                serde_json::json!({"kind": "MeshServiceSubset", "name": "backend", "tags": {"kuma.io/zone": "zone-1", "version": "v2"}}),
            ),
            (
                serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}}),
                serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}}),
            ),
        ];
        for (from, to) in cases {
            assert_eq!(
                narrow(&target(from.clone()), &stage).unwrap(),
                target(to),
                "{from}"
            );
        }
        for kind in [
            serde_json::json!({"kind": "MeshGateway", "name": "edge"}),
            serde_json::json!({"kind": "MeshHTTPRoute", "name": "r"}),
        ] {
            assert!(matches!(
                narrow(&target(kind), &stage),
                Err(NarrowError::Kind(_))
            ));
        }
        let other_zone =
            target(serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-2"}}));
        assert!(matches!(
            narrow(&other_zone, &stage),
            Err(NarrowError::Contradiction { .. })
        ));
    }

    #[test]
    fn a_staged_copy_is_a_shadow_narrowed_policy_that_replaces_nothing() {
        let policy = Resource::from_value(serde_json::json!({
            "type": "MeshTimeout", "mesh": "default", "name": "timeout-global",
            "labels": {"kuma.io/effect": "shadow", "umbra.io/converted-from": "timeout-global",
                       "umbra.io/converted-from-type": "Timeout", "team": "a"},
            "spec": {"targetRef": {"kind": "Mesh"},
                     "to": [{"targetRef": {"kind": "Mesh"}, "default": {"connectionTimeout": "21s"}}]},
        }))
        .unwrap();
        let copy = staged_copy(&policy, &tags(&[("kuma.io/zone", "zone-1")]), "ab12", 1).unwrap();
        assert!(!copy.validate().has_violations(), "{}", copy.validate());
        assert_eq!(copy.meta.name, "timeout-global-stage-1");
        assert!(copy.meta.is_shadow());
        let labels = &copy.meta.labels;
        assert_eq!(labels.get(ROLLOUT_LABEL).map(String::as_str), Some("ab12"));
        assert_eq!(labels.get(STAGE_LABEL).map(String::as_str), Some("1"));
        assert_eq!(
            labels.get(STAGED_FROM_LABEL).map(String::as_str),
            Some("timeout-global")
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert!(!labels.contains_key(CONVERTED_FROM_NAME_LABEL));
        assert!(!labels.contains_key(CONVERTED_FROM_TYPE_LABEL));
        let doc = copy.to_value();
        assert_eq!(
            doc["spec"]["targetRef"],
            serde_json::json!({"kind": "MeshSubset", "tags": {"kuma.io/zone": "zone-1"}})
        );
        assert_eq!(doc["spec"]["to"], policy.to_value()["spec"]["to"]);
        // A long name is cut so the copy's stays valid.
        let mut long = policy.clone();
        long.meta.name = "n".repeat(253);
        let copy = staged_copy(&long, &tags(&[("a", "b")]), "ab12", 12).unwrap();
        assert_eq!(copy.meta.name.len(), 253);
        assert!(copy.meta.name.ends_with("-stage-12"));
    }

    #[test]
    fn stage_lists_name_tag_stages_and_end_with_the_plan() {
        assert_eq!(
            parse_stages("kuma.io/zone=zone-1, kuma.io/zone=zone-2&version=v2 ,100%").unwrap(),
            vec![
                Stage::Tags(tags(&[("kuma.io/zone", "zone-1")])),
                Stage::Tags(tags(&[("kuma.io/zone", "zone-2"), ("version", "v2")])),
                Stage::All,
            ]
        );
        assert_eq!(
            parse_stages("1, 10%,5,50%,100%").unwrap(),
            vec![
                Stage::Share(Share::Count(1)),
                Stage::Share(Share::Percent(10)),
                Stage::Share(Share::Count(5)),
                Stage::Share(Share::Percent(50)),
                Stage::All,
            ]
        );
        for (bad, why) in [
            ("100%", "at least one stage"),
            ("a=b", "must be 100%"),
            ("a=b,,100%", "stage 2 is empty"),
            ("a=b,100%,c=d", "after 100%"),
            ("0,100%", "at least 1"),
            ("99999999999999999999999,100%", "too large"),
            ("0%,100%", "from 1% to 99%"),
            ("150%,100%", "from 1% to 99%"),
            ("2.5%,100%", "whole number"),
            ("10%,5%,100%", "shares grow"),
            ("3,3,100%", "shares grow"),
            ("umbra.io/rollout-sample=x,100%", "own sample tag"),
            ("a,100%", "not <tag>=<value>"),
            ("a=b&a=c,100%", "twice"),
        ] {
            let e = parse_stages(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    const STATS: &str = "\
cluster.backend.upstream_rq_total: 100
cluster.backend.upstream_rq_5xx: 3
cluster.backend.external.upstream_rq_5xx: 3
cluster.backend.internal.upstream_rq_5xx: 3
cluster.backend.canary.upstream_rq_5xx: 3
cluster.backend.zone.zone-1.zone-2.upstream_rq_total: 100
cluster.backend.upstream_rq_timeout: 2
cluster.backend.upstream_rq_retry: 4
cluster.backend.upstream_rq_rx_reset: 1
cluster.backend.upstream_rq_time: P0(1,1) P25(2,2) P50(3,3) P75(4,4) P90(5,5) P95(6,6) P99(nan,42) P99.5(7,7) P99.9(8,8) P100(9,9)
cluster.redis.upstream_rq_total: 50
cluster.redis.upstream_rq_time: P0(nan,nan) P99(12,30)
cluster.localhost_8080.upstream_rq_total: 900
cluster.ads_cluster.upstream_rq_total: 9
http.localhost_8080.downstream_rq_total: 70
tcp.localhost_5432.downstream_cx_total: 30
http.backend.downstream_rq_total: 999
http.inbound_10_0_0_1_80.rbac.denied: 7
http.inbound_10_0_0_1_80.rbac.umbra_observe.p.shadow_denied: 70
inbound_10_0_0_1_80.rbac.denied: 1
rate_limit.http_local_rate_limit.rate_limited: 5
inbound_10_0_0_1_80.umbra_observe_limit.p.http_local_rate_limit.rate_limited: 50
";

    #[test]
    fn a_sample_sums_outbound_clusters_and_live_filters_only() {
        let s = TrafficSample::parse(STATS);
        assert_eq!(
            s,
            TrafficSample {
                requests: 150,
                inbound: 100,
                errors_5xx: 3,
                timeouts: 2,
                resets: 1,
                retries: 4,
                rbac_denied: 8,
                rate_limited: 5,
                p99_ms: Some(42.0),
            }
        );
        let later = TrafficSample {
            requests: 160,
            errors_5xx: 13,
            ..s
        };
        let d = later.since(&s);
        assert_eq!((d.requests, d.errors_5xx, d.timeouts), (10, 10, 0));
        // An Envoy that restarted counts from 0: one counter lower is enough to tell, and
        // then every counter is new, not a difference.
        let restarted = TrafficSample {
            requests: 5,
            ..Default::default()
        };
        assert_eq!(restarted.since(&s).requests, 5);
        let restarted = TrafficSample {
            requests: 200,
            errors_5xx: 1,
            ..s
        };
        let d = restarted.since(&s);
        assert_eq!((d.requests, d.errors_5xx, d.timeouts), (200, 1, 2));
        let sum = TrafficSample::sum([&s, &later]);
        assert_eq!(sum.requests, 310);
        assert_eq!(sum.p99_ms, Some(42.0));
    }

    #[test]
    fn a_gate_fails_on_the_counter_that_got_worse_and_without_evidence() {
        let t = Thresholds::default();
        let calm = TrafficSample {
            requests: 100,
            errors_5xx: 1,
            p99_ms: Some(20.0),
            ..Default::default()
        };
        // Same as the others and as before: passes.
        let v = evaluate_gate(&calm, &calm, &calm, &t);
        assert!(v.passed, "{v:?}");
        assert_eq!(v.checks.len(), 7);
        // Timeouts on the staged DPPs only: fails naming the counter.
        let timing_out = TrafficSample {
            timeouts: 40,
            ..calm
        };
        let v = evaluate_gate(&timing_out, &calm, &calm, &t);
        assert!(!v.passed);
        assert!(
            v.reason.starts_with("upstream_rq_timeout: 0.4000"),
            "{}",
            v.reason
        );
        assert_eq!(v.checks.iter().filter(|c| !c.passed).count(), 1);
        // Worse than before the stage though the others are as bad: still within, as the
        // comparison is the higher of the two.
        let v = evaluate_gate(&timing_out, &timing_out, &calm, &t);
        assert!(v.passed, "{v:?}");
        // Slower: fails on the P99.
        let slow = TrafficSample {
            p99_ms: Some(200.0),
            ..calm
        };
        let v = evaluate_gate(&slow, &calm, &calm, &t);
        assert!(!v.passed);
        assert!(v.reason.contains("P99"), "{}", v.reason);
        // No traffic: no verdict but a failure, even with a minimum of 0.
        let idle = TrafficSample::default();
        let v = evaluate_gate(&idle, &calm, &calm, &t);
        assert!(!v.passed);
        assert!(v.reason.contains("fewer than the 20"), "{}", v.reason);
        let none = Thresholds {
            min_requests: 0,
            ..t
        };
        assert!(!evaluate_gate(&idle, &calm, &calm, &none).passed);
        // Denials are a rate of the requests received: a server that sends nothing is judged
        // on what it received.
        let server = TrafficSample {
            inbound: 100,
            rbac_denied: 50,
            ..Default::default()
        };
        let v = evaluate_gate(
            &server,
            &TrafficSample::default(),
            &TrafficSample::default(),
            &t,
        );
        assert!(!v.passed);
        assert!(v.reason.starts_with("rbac.denied: 0.5000"), "{}", v.reason);
        // The message names the comparison the check used: the higher one.
        let before_worse = TrafficSample {
            timeouts: 20,
            ..calm
        };
        let v = evaluate_gate(&timing_out, &calm, &before_worse, &t);
        assert!(v.reason.contains("against 0.2000"), "{}", v.reason);
    }
}
