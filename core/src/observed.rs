//! Observe mode's evidence (issue 40): the Envoy counters an observed shadow policy
//! (MeshTrafficPermission, MeshRateLimit) writes, read back from `/stats`, and the `_observed`
//! report built from them, per DPP, per zone and fleet-wide. IO-free: a zone reads each Envoy's stats text and
//! hands it to [`parse_stats`] and [`DataplaneReport::from_stats`]; [`Report::zone`] sums a
//! zone's DPPs; the Global merges the zones' reports with [`Report::merge`].
//!
//! **The counters** (written by `umbra_xds::plugins::traffic_permission`'s observer):
//! - per observed inbound, `[http.]<inbound>.rbac.umbra_observe.<policies>.shadow_allowed` and
//!   `.shadow_denied`: every request (HTTP) or connection (TCP) the inbound sees, split by the
//!   would-be rules' verdict;
//! - per calling service the rules name, `[http.]<inbound>.rbac.umbra_observe_caller.<service>.
//!   <policies>.shadow_denied`: that caller's would-be denials;
//! - per observed HTTP inbound of a MeshRateLimit (`umbra_xds::plugins::rate_limit`'s observer,
//!   a local rate limit enabled but never enforced),
//!   `<inbound>.umbra_observe_limit.<policies>.http_local_rate_limit.ok` and `.rate_limited`:
//!   requests under the would-be limit, and over it.
//!
//! A report counts `requests` and `wouldRefuse`: what the policy would refuse, a denial (403)
//! for a MeshTrafficPermission (`effect: deny`), a rate-limited answer for a MeshRateLimit
//! (`effect: limit`, no caller attribution: its bucket is the inbound's).
//!
//! `<policies>` are the observed policies whose rules the counters evaluate, each name
//! [`sanitize_metric`]-ed (so without dots) and joined by dots, in name order. Several observed
//! policies on one inbound share one set of counters: the report says which others a count
//! was observed with (`observedWith`), since it is their combined effect.

use serde::{Deserialize, Serialize};

/// First segment of an observer's `shadowRulesStatPrefix`.
pub const OBSERVE_STAT: &str = "umbra_observe";
/// First segment of a caller filter's `shadowRulesStatPrefix`.
pub const OBSERVE_CALLER_STAT: &str = "umbra_observe_caller";
/// Segment after the inbound in a rate-limit observer's `statPrefix`.
pub const OBSERVE_LIMIT_STAT: &str = "umbra_observe_limit";
/// The Envoy `/stats` `filter` (a regex) selecting every observer counter.
pub const STATS_FILTER: &str = "umbra_observe";

/// What an observed policy would do to a request it refuses.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum Effect {
    /// Deny it (MeshTrafficPermission, RBAC).
    #[default]
    Deny,
    /// Rate-limit it (MeshRateLimit, local rate limit).
    Limit,
}

impl Effect {
    /// The effect of policies of type `ty`, `None` for a type observe mode does not render.
    pub fn of(ty: crate::resource::ResourceType) -> Option<Effect> {
        match ty {
            crate::resource::ResourceType::MeshTrafficPermission => Some(Effect::Deny),
            crate::resource::ResourceType::MeshRateLimit => Some(Effect::Limit),
            _ => None,
        }
    }
}

/// Kuma's `SanitizeMetric`: every char outside `[a-zA-Z0-9_-]` becomes `_`.
pub fn sanitize_metric(name: &str) -> String {
    let keep = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.chars().all(keep) {
        return name.to_owned();
    }
    name.chars()
        .map(|c| if keep(c) { c } else { '_' })
        .collect()
}

/// The observed policies' names as a stat segment: each [`sanitize_metric`]-ed, joined by dots,
/// in the order given (callers give them sorted).
pub fn joined_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(sanitize_metric)
        .collect::<Vec<_>>()
        .join(".")
}

/// The counters of one observer filter of one inbound, as one Envoy reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObserverStat {
    /// What the counted policies would do.
    pub effect: Effect,
    /// The inbound's stat prefix (`inbound_10_0_0_2_80`, without the `http.` of HTTP stats).
    pub inbound: String,
    /// The observed policies' sanitized names (see the module docs), in name order.
    pub policies: Vec<String>,
    /// The calling service (sanitized) of a caller filter; `None` for the observer itself.
    pub caller: Option<String>,
    /// `shadow_allowed` (`ok` for a rate limit).
    pub allowed: u64,
    /// `shadow_denied` (`rate_limited`).
    pub denied: u64,
}

/// One observer counter named in a stat: `(effect, inbound, caller, policies, allowed)`.
type Counter<'a> = (Effect, &'a str, Option<&'a str>, Vec<&'a str>, bool);

/// One counter of an observer, from its stat name, or `None` for another stat.
fn observer_counter(name: &str) -> Option<Counter<'_>> {
    let (effect, inbound, rest, allowed) = if let Some(at) = name.find(".rbac.umbra_observe") {
        let (rest, counter) = name[at + ".rbac.".len()..].rsplit_once('.')?;
        let allowed = match counter {
            "shadow_allowed" => true,
            "shadow_denied" => false,
            _ => return None,
        };
        (Effect::Deny, &name[..at], rest, allowed)
    } else {
        let at = name.find(&format!(".{OBSERVE_LIMIT_STAT}."))?;
        let (rest, counter) = name[at + 1..].rsplit_once(".http_local_rate_limit.")?;
        let allowed = match counter {
            "ok" => true,
            "rate_limited" => false,
            _ => return None,
        };
        (Effect::Limit, &name[..at], rest, allowed)
    };
    let inbound = inbound.strip_prefix("http.").unwrap_or(inbound);
    let mut segments = rest.split('.');
    let caller = match (effect, segments.next()?) {
        (Effect::Deny, OBSERVE_STAT) | (Effect::Limit, OBSERVE_LIMIT_STAT) => None,
        (Effect::Deny, OBSERVE_CALLER_STAT) => Some(segments.next().filter(|c| !c.is_empty())?),
        _ => return None,
    };
    let policies: Vec<&str> = segments.filter(|s| !s.is_empty()).collect();
    (!policies.is_empty()).then_some((effect, inbound, caller, policies, allowed))
}

/// The observer counters in an Envoy `/stats` text answer (`<name>: <value>` lines), one
/// [`ObserverStat`] per filter, sorted by effect, inbound, caller and policies. Other lines are
/// ignored.
pub fn parse_stats(text: &str) -> Vec<ObserverStat> {
    type Key = (Effect, String, Option<String>, Vec<String>);
    let mut out: std::collections::BTreeMap<Key, (u64, u64)> = Default::default();
    for line in text.lines() {
        let Some((name, value)) = line.trim().rsplit_once(": ") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue; // a histogram or a gauge of another shape
        };
        let Some((effect, inbound, caller, policies, allowed)) = observer_counter(name) else {
            continue;
        };
        let key = (
            effect,
            inbound.to_owned(),
            caller.map(str::to_owned),
            policies.into_iter().map(str::to_owned).collect(),
        );
        let entry = out.entry(key).or_default();
        if allowed {
            entry.0 = entry.0.saturating_add(value);
        } else {
            entry.1 = entry.1.saturating_add(value);
        }
    }
    out.into_iter()
        .map(
            |((effect, inbound, caller, policies), (allowed, denied))| ObserverStat {
                effect,
                inbound,
                policies,
                caller,
                allowed,
                denied,
            },
        )
        .collect()
}

/// `part / whole`, 0 when `whole` is 0, rounded to 4 decimals.
pub fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0
}

/// Would-be denials attributed to one calling service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallerCount {
    /// The caller's `kuma.io/service` (as sanitized in the stat name).
    pub service: String,
    /// Its requests (connections, for TCP) the observed rules would deny.
    pub would_refuse: u64,
}

/// One DPP's share of a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataplaneReport {
    /// The DPP's name (in its zone).
    pub name: String,
    /// Its zone (set by the Global when it merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its Envoy reported the policy's observer counters (its config with the observer is
    /// running). `false` with `error` when it could not be read, or without when the observer
    /// is not (yet) in its config.
    pub observing: bool,
    /// Requests (HTTP) or connections (TCP) its observed inbounds saw.
    pub requests: u64,
    /// How many of those the observed rules would deny.
    pub would_refuse: u64,
    /// `wouldRefuse / requests` (0 without requests).
    pub would_refuse_rate: f64,
    /// Would-be denials per calling service the rules name, by service.
    pub callers: Vec<CallerCount>,
    /// Would-be denials of callers no rule names (not attributed to a service).
    pub other_callers_would_refuse: u64,
    /// Other observed policies sharing its counters (their combined effect is counted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_with: Vec<String>,
    /// Why it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl DataplaneReport {
    /// DPP `name`'s share of the report of policy `policy`, whose effect is `effect`, from its
    /// Envoy's counters `stats`: the counters of that effect whose policies include `policy`
    /// (sanitized), summed over its inbounds.
    pub fn from_stats(name: &str, effect: Effect, policy: &str, stats: &[ObserverStat]) -> Self {
        let wanted = sanitize_metric(policy);
        let mut report = DataplaneReport {
            name: name.to_owned(),
            ..Default::default()
        };
        let mut callers: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut with: std::collections::BTreeSet<&str> = Default::default();
        for s in stats
            .iter()
            .filter(|s| s.effect == effect && s.policies.contains(&wanted))
        {
            with.extend(
                s.policies
                    .iter()
                    .map(String::as_str)
                    .filter(|p| *p != wanted),
            );
            match &s.caller {
                None => {
                    report.observing = true;
                    report.requests = report
                        .requests
                        .saturating_add(s.allowed.saturating_add(s.denied));
                    report.would_refuse = report.would_refuse.saturating_add(s.denied);
                }
                Some(c) => {
                    let n = callers.entry(c.as_str()).or_default();
                    *n = n.saturating_add(s.denied);
                }
            }
        }
        let attributed: u64 = callers.values().sum();
        report.other_callers_would_refuse = report.would_refuse.saturating_sub(attributed);
        report.callers = callers
            .into_iter()
            .map(|(service, would_refuse)| CallerCount {
                service: service.to_owned(),
                would_refuse,
            })
            .collect();
        report.observed_with = with.into_iter().map(str::to_owned).collect();
        report.would_refuse_rate = rate(report.would_refuse, report.requests);
        report
    }

    /// DPP `name`, unread because of `error`.
    pub fn unread(name: &str, error: String) -> Self {
        DataplaneReport {
            name: name.to_owned(),
            error: Some(error),
            ..Default::default()
        }
    }
}

/// Sums over DPPs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// DPPs the observed policy selects.
    pub dataplanes: u64,
    /// Of those, whose Envoy reported its observer.
    pub observing: u64,
    /// Of those, that could not be read (an error, or over the zone's bound).
    pub unread: u64,
    /// Requests (connections) the observing DPPs saw.
    pub requests: u64,
    /// Would-be denials among them.
    pub would_refuse: u64,
    /// `wouldRefuse / requests`.
    pub would_refuse_rate: f64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.dataplanes += other.dataplanes;
        self.observing += other.observing;
        self.unread += other.unread;
        self.requests = self.requests.saturating_add(other.requests);
        self.would_refuse = self.would_refuse.saturating_add(other.would_refuse);
        self.would_refuse_rate = rate(self.would_refuse, self.requests);
    }
}

/// One zone's summary in a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneSummary {
    /// The zone.
    pub zone: String,
    /// Its sums.
    pub totals: Totals,
    /// Why the zone could not answer (its DPPs are then not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /meshes/{mesh}/{plural}/{name}/_observed`: what an observed policy would have done to
/// the traffic its DPPs saw (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The mesh.
    pub mesh: String,
    /// `<Type>/<name>`.
    pub policy: String,
    /// What `wouldRefuse` counts: denials (`deny`, MeshTrafficPermission) or rate-limited
    /// answers (`limit`, MeshRateLimit).
    pub effect: Effect,
    /// Some zone could not answer, or some DPP could not be read.
    pub partial: bool,
    /// Over every zone and DPP.
    pub totals: Totals,
    /// Would-be denials per calling service the rules name, over every DPP.
    pub callers: Vec<CallerCount>,
    /// Would-be denials of callers no rule names.
    pub other_callers_would_refuse: u64,
    /// Per zone.
    pub zones: Vec<ZoneSummary>,
    /// Per DPP, by zone and name.
    pub dataplanes: Vec<DataplaneReport>,
}

impl Report {
    /// Zone `zone`'s report on `policy` (`<Type>/<name>`, of effect `effect`) in `mesh`: its
    /// DPPs' shares, plus
    /// `skipped` selected DPPs it did not read (over its bound).
    pub fn zone(
        mesh: &str,
        (policy, effect): (&str, Effect),
        zone: &str,
        mut dataplanes: Vec<DataplaneReport>,
        skipped: u64,
    ) -> Self {
        dataplanes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut totals = Totals {
            dataplanes: dataplanes.len() as u64 + skipped,
            unread: skipped,
            ..Default::default()
        };
        for d in &dataplanes {
            totals.observing += u64::from(d.observing);
            totals.unread += u64::from(d.error.is_some());
            totals.requests = totals.requests.saturating_add(d.requests);
            totals.would_refuse = totals.would_refuse.saturating_add(d.would_refuse);
        }
        totals.would_refuse_rate = rate(totals.would_refuse, totals.requests);
        let mut report = Report {
            mesh: mesh.to_owned(),
            policy: policy.to_owned(),
            effect,
            partial: totals.unread > 0,
            totals: totals.clone(),
            zones: vec![ZoneSummary {
                zone: zone.to_owned(),
                totals,
                error: None,
            }],
            dataplanes,
            ..Default::default()
        };
        report.sum_callers();
        report
    }

    /// The fleet-wide report from each zone's report (or why a zone could not answer; a
    /// failed zone makes the report partial). DPPs get their zone's name.
    pub fn merge(
        mesh: &str,
        (policy, effect): (&str, Effect),
        zones: Vec<(String, Result<Report, String>)>,
    ) -> Self {
        let mut report = Report {
            mesh: mesh.to_owned(),
            policy: policy.to_owned(),
            effect,
            ..Default::default()
        };
        for (zone, answer) in zones {
            match answer {
                Ok(r) => {
                    report.partial |= r.partial;
                    report.totals.add(&r.totals);
                    report.zones.push(ZoneSummary {
                        zone: zone.clone(),
                        totals: r.totals,
                        error: None,
                    });
                    report
                        .dataplanes
                        .extend(r.dataplanes.into_iter().map(|mut d| {
                            d.zone = Some(zone.clone());
                            d
                        }));
                }
                Err(e) => {
                    report.partial = true;
                    report.zones.push(ZoneSummary {
                        zone,
                        totals: Totals::default(),
                        error: Some(e),
                    });
                }
            }
        }
        report.zones.sort_by(|a, b| a.zone.cmp(&b.zone));
        report
            .dataplanes
            .sort_by(|a, b| (&a.zone, &a.name).cmp(&(&b.zone, &b.name)));
        report.sum_callers();
        report
    }

    fn sum_callers(&mut self) {
        let mut callers: std::collections::BTreeMap<String, u64> = Default::default();
        let mut other = 0u64;
        for d in &self.dataplanes {
            for c in &d.callers {
                let n = callers.entry(c.service.clone()).or_default();
                *n = n.saturating_add(c.would_refuse);
            }
            other = other.saturating_add(d.other_callers_would_refuse);
        }
        self.callers = callers
            .into_iter()
            .map(|(service, would_refuse)| CallerCount {
                service,
                would_refuse,
            })
            .collect();
        self.other_callers_would_refuse = other;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "\
cluster.x.upstream_rq_total: 7
http.inbound_10_0_0_2_80.rbac.umbra_observe.deny-frontend.shadow_allowed: 4
http.inbound_10_0_0_2_80.rbac.umbra_observe.deny-frontend.shadow_denied: 6
http.inbound_10_0_0_2_80.rbac.umbra_observe_caller.frontend.deny-frontend.shadow_allowed: 4
http.inbound_10_0_0_2_80.rbac.umbra_observe_caller.frontend.deny-frontend.shadow_denied: 5
inbound_10_0_0_2_5432.rbac.umbra_observe.db-only.deny-frontend.shadow_allowed: 1
inbound_10_0_0_2_5432.rbac.umbra_observe.db-only.deny-frontend.shadow_denied: 2
inbound_10_0_0_2_5432.rbac.umbra_observe.db-only.deny-frontend.other_counter: 9
http.inbound_10_0_0_2_80.rbac.umbra_observe.: 3
inbound_10_0_0_2_80.umbra_observe_limit.deny-frontend.http_local_rate_limit.ok: 40
inbound_10_0_0_2_80.umbra_observe_limit.deny-frontend.http_local_rate_limit.rate_limited: 2
inbound_10_0_0_2_80.umbra_observe_limit.deny-frontend.http_local_rate_limit.enabled: 42
";

    #[test]
    fn parses_observer_and_caller_counters_of_http_and_tcp_inbounds() {
        let stats = parse_stats(STATS);
        assert_eq!(
            stats,
            vec![
                ObserverStat {
                    effect: Effect::Deny,
                    inbound: "inbound_10_0_0_2_5432".into(),
                    policies: vec!["db-only".into(), "deny-frontend".into()],
                    caller: None,
                    allowed: 1,
                    denied: 2,
                },
                ObserverStat {
                    effect: Effect::Deny,
                    inbound: "inbound_10_0_0_2_80".into(),
                    policies: vec!["deny-frontend".into()],
                    caller: None,
                    allowed: 4,
                    denied: 6,
                },
                ObserverStat {
                    effect: Effect::Deny,
                    inbound: "inbound_10_0_0_2_80".into(),
                    policies: vec!["deny-frontend".into()],
                    caller: Some("frontend".into()),
                    allowed: 4,
                    denied: 5,
                },
                ObserverStat {
                    effect: Effect::Limit,
                    inbound: "inbound_10_0_0_2_80".into(),
                    policies: vec!["deny-frontend".into()],
                    caller: None,
                    allowed: 40,
                    denied: 2,
                },
            ]
        );
    }

    #[test]
    fn a_dataplane_share_sums_inbounds_attributes_callers_and_names_its_companions() {
        let stats = parse_stats(STATS);
        let d = DataplaneReport::from_stats("backend-1", Effect::Deny, "deny-frontend", &stats);
        assert!(d.observing);
        assert_eq!((d.requests, d.would_refuse), (13, 8));
        assert_eq!(d.would_refuse_rate, 0.6154);
        assert_eq!(
            d.callers,
            vec![CallerCount {
                service: "frontend".into(),
                would_refuse: 5
            }]
        );
        assert_eq!(d.other_callers_would_refuse, 3);
        assert_eq!(d.observed_with, vec!["db-only".to_owned()]);
        // A policy no counter names: not observing there.
        let none = DataplaneReport::from_stats("backend-1", Effect::Deny, "absent", &stats);
        assert!(!none.observing);
        assert_eq!((none.requests, none.would_refuse), (0, 0));
        // A MeshRateLimit of the same name counts its own counters, without callers.
        let limit =
            DataplaneReport::from_stats("backend-1", Effect::Limit, "deny-frontend", &stats);
        assert!(limit.observing);
        assert_eq!((limit.requests, limit.would_refuse), (42, 2));
        assert!(limit.callers.is_empty());
        assert_eq!(limit.other_callers_would_refuse, 2);
        assert!(limit.observed_with.is_empty());
        // A name with a dot is matched as the stat names it.
        let dotted = parse_stats("http.i.rbac.umbra_observe.a_b.shadow_denied: 2\n");
        assert_eq!(
            DataplaneReport::from_stats("x", Effect::Deny, "a.b", &dotted).would_refuse,
            2
        );
    }

    #[test]
    fn zones_merge_into_fleet_totals_and_a_failed_zone_makes_it_partial() {
        let stats = parse_stats(STATS);
        let share =
            |name: &str| DataplaneReport::from_stats(name, Effect::Deny, "deny-frontend", &stats);
        let z1 = Report::zone(
            "default",
            ("MeshTrafficPermission/deny-frontend", Effect::Deny),
            "z1",
            vec![share("b"), share("a")],
            0,
        );
        assert_eq!(z1.dataplanes[0].name, "a");
        assert_eq!(z1.totals.requests, 26);
        assert!(!z1.partial);
        let z2 = Report::zone(
            "default",
            ("MeshTrafficPermission/deny-frontend", Effect::Deny),
            "z2",
            vec![share("c"), DataplaneReport::unread("d", "timeout".into())],
            1,
        );
        assert_eq!((z2.totals.dataplanes, z2.totals.unread), (3, 2));
        assert!(z2.partial);
        let fleet = Report::merge(
            "default",
            ("MeshTrafficPermission/deny-frontend", Effect::Deny),
            vec![
                ("z2".into(), Ok(z2)),
                ("z3".into(), Err("offline".into())),
                ("z1".into(), Ok(z1)),
            ],
        );
        assert!(fleet.partial);
        assert_eq!(fleet.totals.dataplanes, 5);
        assert_eq!(fleet.totals.observing, 3);
        assert_eq!((fleet.totals.requests, fleet.totals.would_refuse), (39, 24));
        assert_eq!(fleet.callers[0].would_refuse, 15);
        assert_eq!(fleet.other_callers_would_refuse, 9);
        let zones: Vec<&str> = fleet.zones.iter().map(|z| z.zone.as_str()).collect();
        assert_eq!(zones, ["z1", "z2", "z3"]);
        assert_eq!(fleet.dataplanes[0].zone.as_deref(), Some("z1"));
        // The JSON round-trips (the Global reads zone reports back).
        let json = serde_json::to_value(&fleet).unwrap();
        assert_eq!(json["totals"]["wouldRefuseRate"], 0.6154);
        assert_eq!(json["effect"], "deny");
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back, fleet);
    }
}
