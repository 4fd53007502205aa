//! Matching of the old source/destination policies as Kuma 1.x/2.x does it
//! (`pkg/core/policy/{connection_matcher,dataplane_matcher}.go` at v2.7.29).
//!
//! Selectors match tags when every key is present with an equal value or `*`. A selector's rank
//! is `(exact matches, wildcard matches)`; ranks compare by total first, then by exact matches,
//! so the most specific policy wins. Ties go to the policy created later; policies are first
//! sorted by name so results never depend on input order.
//!
//! - Outbound connection policies (Timeout; CircuitBreaker over the destination services): the
//!   DPP must match a `source`; for each outbound service (plus the implicit `pass_through` for
//!   Timeout) the best `source rank + destination rank` wins.
//! - Inbound connection policies (TrafficPermission): per inbound, the best-ranked `destination`
//!   matching the inbound's tags wins.
//! - Inbound matching policies (FaultInjection): per inbound, *every* policy whose `destination`
//!   matches, most specific first source first.
//! - Dataplane policies (ProxyTemplate): the best-ranked `selector` matching any inbound (or the
//!   gateway); empty selectors match everything with the lowest rank.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::dataplane::{DataplaneSpec, InboundKey};
use crate::matching::tags_match;
use crate::old::Selector;
use crate::resource::{Meta, Resource, Spec};
use crate::target_ref::SERVICE_TAG;

/// Kuma's implicit outbound service for passthrough traffic.
pub const PASS_THROUGH_SERVICE: &str = "pass_through";

/// A selector's specificity: exact and wildcard (`*`) tag counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rank {
    /// Tags with a concrete value.
    pub exact: u32,
    /// Tags with `*`.
    pub wildcard: u32,
}

impl Rank {
    /// Rank of a tag selector.
    pub fn of(selector: &BTreeMap<String, String>) -> Rank {
        let wildcard = selector.values().filter(|v| *v == "*").count() as u32;
        Rank {
            exact: selector.len() as u32 - wildcard,
            wildcard,
        }
    }

    /// Sum of two ranks (source + destination).
    pub fn combined(self, other: Rank) -> Rank {
        Rank {
            exact: self.exact + other.exact,
            wildcard: self.wildcard + other.wildcard,
        }
    }
}

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Rank {
    /// Kuma's `CompareTo`: total tag count first, then exact matches.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.exact + self.wildcard)
            .cmp(&(other.exact + other.wildcard))
            .then(self.exact.cmp(&other.exact))
    }
}

/// An old policy as matching sees it. `idx` identifies it in the caller's list.
#[derive(Debug, Clone, Copy)]
pub struct OldPolicyRef<'a> {
    /// Index in the caller's list (returned in results).
    pub idx: usize,
    /// Metadata (name for ordering, creation time for ties).
    pub meta: &'a Meta,
    /// `sources` (or ProxyTemplate `selectors`).
    pub sources: &'a [Selector],
    /// `destinations` (empty for ProxyTemplate).
    pub destinations: &'a [Selector],
}

impl<'a> OldPolicyRef<'a> {
    /// View an old policy resource for matching; `None` for other types.
    /// ProxyTemplate's and TrafficTrace's `selectors` play the role of `sources`.
    pub fn from_resource(idx: usize, r: &'a Resource) -> Option<OldPolicyRef<'a>> {
        let (sources, destinations): (&[Selector], &[Selector]) = match &r.spec {
            Spec::Timeout(p) => (&p.sources, &p.destinations),
            Spec::CircuitBreaker(p) => (&p.sources, &p.destinations),
            Spec::FaultInjection(p) => (&p.sources, &p.destinations),
            Spec::TrafficPermission(p) => (&p.sources, &p.destinations),
            Spec::ProxyTemplate(p) => (&p.selectors, &[]),
            Spec::TrafficRoute(p) => (&p.sources, &p.destinations),
            Spec::Retry(p) => (&p.sources, &p.destinations),
            Spec::HealthCheck(p) => (&p.sources, &p.destinations),
            Spec::RateLimit(p) => (&p.sources, &p.destinations),
            Spec::TrafficLog(p) => (&p.sources, &p.destinations),
            Spec::TrafficTrace(p) => (&p.selectors, &[]),
            _ => return None,
        };
        Some(OldPolicyRef {
            idx,
            meta: &r.meta,
            sources,
            destinations,
        })
    }
}

fn by_name<'a>(policies: &[OldPolicyRef<'a>]) -> Vec<OldPolicyRef<'a>> {
    let mut v = policies.to_vec();
    v.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    v
}

/// Go's `a.CreationTime.After(b.CreationTime)`, on RFC 3339 times (unknown or unparsable times
/// count as the zero time, as an unset Go `time.Time`).
fn created_later(a: &Meta, b: &Meta) -> bool {
    let t = |m: &Meta| {
        m.creation_time
            .as_deref()
            .and_then(parse_rfc3339)
            .unwrap_or(i128::MIN)
    };
    t(a) > t(b)
}

/// Parse an RFC 3339 timestamp (`2024-01-02T03:04:05.123Z`, `...+02:00`) to Unix nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = s.get(r)?;
        d.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| d.parse().ok())?
    };
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos: i128 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        for (i, c) in frac.bytes().take(n).enumerate() {
            if i < 9 {
                nanos += i128::from(c - b'0') * 10i128.pow(8 - i as u32);
            }
        }
        rest = &frac[n..];
    }
    let offset_secs: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || !matches!(rb[0], b'+' | b'-') || rb[3] != b':' {
                return None;
            }
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            let sign = if rb[0] == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
    };
    // days from civil (Howard Hinnant's algorithm)
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
    Some(i128::from(secs) * 1_000_000_000 + nanos)
}

/// `true` when some inbound (or the gateway) of `dp` matches `selector` (Kuma's `Dataplane.Matches`).
pub fn dataplane_matches(dp: &DataplaneSpec, selector: &BTreeMap<String, String>) -> bool {
    dp.networking
        .inbound
        .iter()
        .any(|i| tags_match(selector, &i.tags))
        || dp
            .networking
            .gateway
            .as_ref()
            .is_some_and(|g| tags_match(selector, &g.tags))
}

/// Outbound connection policies (Timeout, CircuitBreaker): for each service the DPP consumes
/// (its outbounds' `kuma.io/service`, then `pass_through`), the index of the winning policy.
pub fn select_outbound_connection_policies(
    dp: &DataplaneSpec,
    policies: &[OldPolicyRef<'_>],
) -> BTreeMap<String, usize> {
    let mut services: Vec<String> = dp
        .networking
        .outbound
        .iter()
        .map(|o| o.service().to_owned())
        .collect();
    services.push(PASS_THROUGH_SERVICE.to_owned());
    select_connection_policies(dp, &services, policies)
}

/// Kuma's `SelectConnectionPolicies` for an explicit list of destination services.
pub fn select_connection_policies(
    dp: &DataplaneSpec,
    services: &[String],
    policies: &[OldPolicyRef<'_>],
) -> BTreeMap<String, usize> {
    let sorted = by_name(policies);
    let candidates: Vec<(OldPolicyRef<'_>, Rank)> = sorted
        .iter()
        .filter_map(|p| {
            p.sources
                .iter()
                .filter(|s| dataplane_matches(dp, &s.match_tags))
                .map(|s| Rank::of(&s.match_tags))
                .max()
                .map(|r| (*p, r))
        })
        .collect();
    let mut out: BTreeMap<String, (OldPolicyRef<'_>, Rank)> = BTreeMap::new();
    for service in services {
        if out.contains_key(service) {
            continue;
        }
        let outbound_tags = BTreeMap::from([(SERVICE_TAG.to_owned(), service.clone())]);
        for (p, source_rank) in &candidates {
            for d in p.destinations {
                if !tags_match(&d.match_tags, &outbound_tags) {
                    continue;
                }
                let aggregate = Rank::of(&d.match_tags).combined(*source_rank);
                let better = match out.get(service) {
                    None => true,
                    Some((best, best_rank)) => {
                        aggregate > *best_rank
                            || (aggregate == *best_rank && created_later(p.meta, best.meta))
                    }
                };
                if better {
                    out.insert(service.clone(), (*p, aggregate));
                }
            }
        }
    }
    out.into_iter().map(|(k, (p, _))| (k, p.idx)).collect()
}

/// Inbound connection policies (TrafficPermission): per inbound, the index of the policy whose
/// best `destination` rank is highest (Kuma's `SelectInboundConnectionPolicies`).
pub fn select_inbound_connection_policies(
    dp: &DataplaneSpec,
    policies: &[OldPolicyRef<'_>],
) -> BTreeMap<InboundKey, usize> {
    let sorted = by_name(policies);
    let mut out = BTreeMap::new();
    for inbound in &dp.networking.inbound {
        if let Some(idx) = best_inbound_policy(&sorted, &inbound.tags) {
            out.insert(dp.inbound_key(inbound), idx);
        }
    }
    out
}

/// Kuma's `SelectInboundConnectionPolicy` for one set of destination `tags` (an
/// ExternalService's, `pkg/core/permissions/matcher.go`): the index of the policy whose best
/// `destination` rank is highest, newer first on ties.
pub fn select_inbound_connection_policy(
    tags: &BTreeMap<String, String>,
    policies: &[OldPolicyRef<'_>],
) -> Option<usize> {
    best_inbound_policy(&by_name(policies), tags)
}

fn best_inbound_policy(
    sorted: &[OldPolicyRef<'_>],
    tags: &BTreeMap<String, String>,
) -> Option<usize> {
    let mut best: Option<(OldPolicyRef<'_>, Rank)> = None;
    for p in sorted {
        for d in p.destinations {
            if !tags_match(&d.match_tags, tags) {
                continue;
            }
            let rank = Rank::of(&d.match_tags);
            let better = match &best {
                None => rank > Rank::default(),
                Some((b, br)) => rank > *br || (rank == *br && created_later(p.meta, b.meta)),
            };
            if better {
                best = Some((*p, rank));
            }
        }
    }
    best.map(|(p, _)| p.idx)
}

/// Inbound matching policies (FaultInjection): per inbound, the indexes of every policy with a
/// matching `destination`, most specific first `source` first, newer first on ties
/// (Kuma's `SelectInboundConnectionMatchingPolicies`).
pub fn select_inbound_matching_policies(
    dp: &DataplaneSpec,
    policies: &[OldPolicyRef<'_>],
) -> BTreeMap<InboundKey, Vec<usize>> {
    let sorted = by_name(policies);
    let mut out = BTreeMap::new();
    for inbound in &dp.networking.inbound {
        let mut matching: Vec<OldPolicyRef<'_>> = Vec::new();
        for p in &sorted {
            for d in p.destinations {
                if tags_match(&d.match_tags, &inbound.tags) {
                    matching.push(*p);
                }
            }
        }
        let first_source_rank = |p: &OldPolicyRef<'_>| {
            p.sources
                .first()
                .map(|s| Rank::of(&s.match_tags))
                .unwrap_or_default()
        };
        matching.sort_by(|a, b| {
            first_source_rank(b)
                .cmp(&first_source_rank(a))
                .then_with(|| {
                    if created_later(a.meta, b.meta) {
                        Ordering::Less
                    } else if created_later(b.meta, a.meta) {
                        Ordering::Greater
                    } else {
                        Ordering::Equal
                    }
                })
        });
        out.insert(
            dp.inbound_key(inbound),
            matching.iter().map(|p| p.idx).collect(),
        );
    }
    out
}

/// Dataplane policies (ProxyTemplate): the index of the best policy whose `selectors` (in
/// `sources`) match the DPP; a policy with no selector, or an empty one, matches with the lowest
/// rank (Kuma's `SelectDataplanePolicy`).
pub fn select_dataplane_policy(dp: &DataplaneSpec, policies: &[OldPolicyRef<'_>]) -> Option<usize> {
    let sorted = by_name(policies);
    let mut best: Option<(OldPolicyRef<'_>, Rank)> = None;
    for p in &sorted {
        let zero = Rank::default();
        let take_match_all = |best: &Option<(OldPolicyRef<'_>, Rank)>| match best {
            None => true,
            Some((b, br)) => *br == zero && created_later(p.meta, b.meta),
        };
        if p.sources.is_empty() {
            if take_match_all(&best) {
                best = Some((*p, zero));
            }
            continue;
        }
        for s in p.sources {
            if s.match_tags.is_empty() {
                if take_match_all(&best) {
                    best = Some((*p, zero));
                }
                continue;
            }
            if dataplane_matches(dp, &s.match_tags) {
                let rank = Rank::of(&s.match_tags);
                let better = match &best {
                    None => true,
                    Some((b, br)) => rank > *br || (rank == *br && created_later(p.meta, b.meta)),
                };
                if better {
                    best = Some((*p, rank));
                }
            }
        }
    }
    best.map(|(p, _)| p.idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(pairs: &[(&str, &str)]) -> Selector {
        Selector {
            match_tags: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn meta(name: &str, created: &str) -> Meta {
        Meta {
            mesh: "default".into(),
            name: name.into(),
            creation_time: Some(created.into()),
            ..Meta::default()
        }
    }

    fn frontend() -> DataplaneSpec {
        let v = crate::codec::decode_one(
            b"networking:\n  address: 10.42.0.29\n  inbound:\n  - port: 8080\n    tags: {kuma.io/service: frontend_kuma-demo_svc_8080, kuma.io/protocol: http}\n  outbound:\n  - {port: 3001, address: 10.43.13.71, tags: {kuma.io/service: backend_kuma-demo_svc_3001}}\n  - {port: 8080, address: 10.43.138.50, tags: {kuma.io/service: frontend_kuma-demo_svc_8080}}\n  - {port: 6379, address: 10.43.83.105, tags: {kuma.io/service: redis_kuma-demo_svc_6379}}\n",
            crate::codec::Limits::default(),
        )
        .unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn creation_times_compare_as_times_not_text() {
        let a = meta("a", "2024-01-01T00:00:00.5Z");
        let b = meta("b", "2024-01-01T00:00:00Z");
        assert!(created_later(&a, &b));
        let c = meta("c", "2024-01-01T01:00:00+02:00"); // 23:00 the day before
        assert!(created_later(&b, &c));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01Z"), Some(1_000_000_000));
        assert_eq!(
            parse_rfc3339("0001-01-01T00:00:00Z"),
            Some(-62_135_596_800_000_000_000)
        );
        assert_eq!(parse_rfc3339("not a time"), None);
    }

    #[test]
    fn rank_order_total_then_exact() {
        let r = |e, w| Rank {
            exact: e,
            wildcard: w,
        };
        assert!(r(1, 1) > r(1, 0));
        assert!(r(2, 0) > r(1, 1));
        assert!(r(0, 2) > r(1, 0));
    }

    #[test]
    fn seed_000_timeouts_most_specific_destination_wins() {
        // timeout-global (* -> *), timeout-to-backend (* -> backend), timeout-to-redis (* -> redis)
        let all = [sel(&[(SERVICE_TAG, "*")])];
        let metas = [
            meta("timeout-global", "1"),
            meta("timeout-to-backend", "2"),
            meta("timeout-to-redis", "3"),
        ];
        let backend = [sel(&[(SERVICE_TAG, "backend_kuma-demo_svc_3001")])];
        let redis = [sel(&[(SERVICE_TAG, "redis_kuma-demo_svc_6379")])];
        let policies = [
            OldPolicyRef {
                idx: 0,
                meta: &metas[0],
                sources: &all,
                destinations: &all,
            },
            OldPolicyRef {
                idx: 1,
                meta: &metas[1],
                sources: &all,
                destinations: &backend,
            },
            OldPolicyRef {
                idx: 2,
                meta: &metas[2],
                sources: &all,
                destinations: &redis,
            },
        ];
        let got = select_outbound_connection_policies(&frontend(), &policies);
        assert_eq!(got["backend_kuma-demo_svc_3001"], 1);
        assert_eq!(got["redis_kuma-demo_svc_6379"], 2);
        assert_eq!(got["frontend_kuma-demo_svc_8080"], 0);
        assert_eq!(got[PASS_THROUGH_SERVICE], 0);
    }

    #[test]
    fn ties_go_to_the_newest_and_sources_must_match() {
        let all = [sel(&[(SERVICE_TAG, "*")])];
        let other_src = [sel(&[(SERVICE_TAG, "web")])];
        let metas = [
            meta("a", "2020-01-01T00:00:00Z"),
            meta("b", "2021-01-01T00:00:00Z"),
            meta("c", "2022-01-01T00:00:00Z"),
        ];
        let policies = [
            OldPolicyRef {
                idx: 0,
                meta: &metas[0],
                sources: &all,
                destinations: &all,
            },
            OldPolicyRef {
                idx: 1,
                meta: &metas[1],
                sources: &all,
                destinations: &all,
            },
            OldPolicyRef {
                idx: 2,
                meta: &metas[2],
                sources: &other_src,
                destinations: &all,
            },
        ];
        let got = select_outbound_connection_policies(&frontend(), &policies);
        assert!(got.values().all(|i| *i == 1), "{got:?}");
    }

    #[test]
    fn inbound_policies() {
        let all = [sel(&[(SERVICE_TAG, "*")])];
        let fe = [sel(&[(SERVICE_TAG, "frontend_kuma-demo_svc_8080")])];
        let metas = [meta("allow-all", "1"), meta("on-frontend", "2")];
        let policies = [
            OldPolicyRef {
                idx: 0,
                meta: &metas[0],
                sources: &all,
                destinations: &all,
            },
            OldPolicyRef {
                idx: 1,
                meta: &metas[1],
                sources: &fe,
                destinations: &fe,
            },
        ];
        let dp = frontend();
        let tp = select_inbound_connection_policies(&dp, &policies);
        assert_eq!(tp.values().copied().collect::<Vec<_>>(), [1]);
        let fi = select_inbound_matching_policies(&dp, &policies);
        assert_eq!(fi.values().next().unwrap(), &vec![1, 0]);
    }

    #[test]
    fn proxy_template_selection() {
        let metas = [meta("default", "1"), meta("specific", "2")];
        let fe = [sel(&[(SERVICE_TAG, "frontend_kuma-demo_svc_8080")])];
        let none: [Selector; 0] = [];
        let policies = [
            OldPolicyRef {
                idx: 0,
                meta: &metas[0],
                sources: &none,
                destinations: &none,
            },
            OldPolicyRef {
                idx: 1,
                meta: &metas[1],
                sources: &fe,
                destinations: &none,
            },
        ];
        assert_eq!(select_dataplane_policy(&frontend(), &policies), Some(1));
        assert_eq!(
            select_dataplane_policy(&frontend(), &policies[..1]),
            Some(0)
        );
    }
}
