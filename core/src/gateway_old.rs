//! The old connection policies on builtin gateways (Kuma 2.7.29
//! `pkg/plugins/runtime/gateway/connection_policy_generator.go` and `match/policy.go`): Kuma
//! matches Timeout, Retry, CircuitBreaker, HealthCheck and RateLimit per gateway listener and
//! backend, not per outbound.
//!
//! - [`for_destination`]: the policy for one backend of one listener: among those whose
//!   `sources` match the listener's (merged) tags and whose `destinations` match the backend's
//!   tags (`kuma.io/service` and its subset tags), the best combined rank (source + destination,
//!   Kuma's `CompareTo`), the most recently created on a tie (Kuma's `matchConnectionPolicy`).
//!   Clusters take Timeout, CircuitBreaker and HealthCheck from it.
//! - [`best_for_route`]: the policy of a route over its backends' picks (Kuma's
//!   `BestConnectionPolicyForDestination`): a pick whose `destinations` select every service
//!   (`kuma.io/service: '*'`) first, else any pick for its backend's service; the oldest among
//!   them. Routes take Retry, Timeout (`http.requestTimeout`) and RateLimit from it.
//!
//! FaultInjection is matched by Kuma too but applied nowhere on gateways (its route table
//! generator leaves it as a TODO); Umbra names it under `notGenerated`.

use std::collections::BTreeMap;

use crate::old::selectors::Selector;
use crate::old_matching::{parse_rfc3339, OldPolicyRef, Rank};
use crate::resource::ResourceType;
use crate::target_ref::SERVICE_TAG;

/// The old types Kuma applies to builtin gateways (and Umbra with it).
pub const GATEWAY_OLD_TYPES: &[ResourceType] = &[
    ResourceType::Timeout,
    ResourceType::Retry,
    ResourceType::CircuitBreaker,
    ResourceType::HealthCheck,
    ResourceType::RateLimit,
];

/// Kuma's `MatchSelector`: the best rank among `selectors` matching `tags`.
fn best_rank(tags: &BTreeMap<String, String>, selectors: &[Selector]) -> Option<Rank> {
    selectors
        .iter()
        .filter(|s| s.matches(tags))
        .map(|s| Rank::of(&s.match_tags))
        .max()
}

fn created(p: &OldPolicyRef<'_>) -> i128 {
    p.meta
        .creation_time
        .as_deref()
        .and_then(parse_rfc3339)
        .unwrap_or(i128::MIN)
}

/// The policy among `policies` for backend `destination` (its tags, `kuma.io/service`
/// included) of a listener tagged `listener` (see the module docs).
pub fn for_destination<'a>(
    listener: &BTreeMap<String, String>,
    destination: &BTreeMap<String, String>,
    policies: &[OldPolicyRef<'a>],
) -> Option<OldPolicyRef<'a>> {
    let mut best: Option<(Rank, i128, OldPolicyRef<'a>)> = None;
    for p in policies {
        let Some(source) = best_rank(listener, p.sources) else {
            continue;
        };
        let Some(dest) = best_rank(destination, p.destinations) else {
            continue;
        };
        let rank = dest.combined(source);
        let time = created(p);
        let better = best
            .as_ref()
            .is_none_or(|(r, t, _)| rank > *r || (rank == *r && time > *t));
        if better {
            best = Some((rank, time, *p));
        }
    }
    best.map(|(_, _, p)| p)
}

/// The policy of a route whose backends' services and picks are `picks` (see the module docs).
pub fn best_for_route<'a>(picks: &[(&str, Option<OldPolicyRef<'a>>)]) -> Option<OldPolicyRef<'a>> {
    let mut by_service: BTreeMap<&str, Vec<OldPolicyRef<'a>>> = BTreeMap::new();
    let mut seen: Vec<&str> = Vec::new();
    for (service, pick) in picks {
        let Some(p) = pick else { continue };
        if seen.contains(&p.meta.name.as_str()) {
            continue;
        }
        seen.push(p.meta.name.as_str());
        for s in p.destinations {
            match s.match_tags.get(SERVICE_TAG).map(String::as_str) {
                Some("*") => by_service.entry("*").or_default().push(*p),
                Some(svc) if svc == *service => by_service.entry(service).or_default().push(*p),
                _ => {}
            }
        }
    }
    let candidates: Vec<OldPolicyRef<'a>> = match by_service.remove("*") {
        Some(any) => any,
        None => by_service.into_values().flatten().collect(),
    };
    candidates.into_iter().min_by_key(created)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Meta;

    fn selectors(tags: &[&[(&str, &str)]]) -> Vec<Selector> {
        tags.iter()
            .map(|t| Selector {
                match_tags: t
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            })
            .collect()
    }

    fn meta(name: &str, created: &str) -> Meta {
        Meta {
            name: name.to_owned(),
            creation_time: Some(created.to_owned()),
            ..Meta::default()
        }
    }

    #[test]
    fn the_best_ranked_policy_per_backend_then_per_route() {
        let any = selectors(&[&[(SERVICE_TAG, "*")]]);
        let gw = selectors(&[&[(SERVICE_TAG, "gw")]]);
        let web = selectors(&[&[(SERVICE_TAG, "web")]]);
        let web_v2 = selectors(&[&[(SERVICE_TAG, "web"), ("version", "v2")]]);
        let (m1, m2, m3) = (
            meta("all", "2024-01-01T00:00:00Z"),
            meta("gw-web", "2024-01-02T00:00:00Z"),
            meta("web-v2", "2024-01-03T00:00:00Z"),
        );
        let policies = [
            OldPolicyRef {
                idx: 0,
                meta: &m1,
                sources: &any,
                destinations: &any,
            },
            OldPolicyRef {
                idx: 1,
                meta: &m2,
                sources: &gw,
                destinations: &web,
            },
            OldPolicyRef {
                idx: 2,
                meta: &m3,
                sources: &any,
                destinations: &web_v2,
            },
        ];
        let tags = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let listener = tags(&[(SERVICE_TAG, "gw")]);
        let pick =
            |d: &BTreeMap<String, String>| for_destination(&listener, d, &policies).map(|p| p.idx);
        // web v2: web-v2 ranks 3 tags (a wildcard source, two exact destination tags), gw-web
        // and all 2. web v1: gw-web (2 exact) beats all (2 wildcards).
        assert_eq!(
            pick(&tags(&[(SERVICE_TAG, "web"), ("version", "v2")])),
            Some(2)
        );
        assert_eq!(
            pick(&tags(&[(SERVICE_TAG, "web"), ("version", "v1")])),
            Some(1)
        );
        assert_eq!(pick(&tags(&[(SERVICE_TAG, "api")])), Some(0));
        // Another listener: gw-web's source does not match.
        let other = tags(&[(SERVICE_TAG, "other")]);
        assert_eq!(
            for_destination(&other, &tags(&[(SERVICE_TAG, "web")]), &policies).map(|p| p.idx),
            Some(0)
        );
        // A route to web v1 and api: the wildcard policy wins; to web v1 alone, gw-web.
        let v1 = for_destination(&listener, &tags(&[(SERVICE_TAG, "web")]), &policies);
        let api = for_destination(&listener, &tags(&[(SERVICE_TAG, "api")]), &policies);
        assert_eq!(
            best_for_route(&[("web", v1), ("api", api)]).map(|p| p.idx),
            Some(0)
        );
        assert_eq!(best_for_route(&[("web", v1)]).map(|p| p.idx), Some(1));
        assert!(best_for_route(&[("web", None)]).is_none());
    }
}
