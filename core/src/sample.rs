//! Rollout samples (issue 40): a matching-only pseudo tag, [`SAMPLE_TAG`], with which a staged
//! copy's top-level `MeshSubset`/`MeshServiceSubset` selects a deterministic share of DPPs
//! (`1`, `10%`, `50%` in `umbractl migrate apply --stages`) without any Dataplane carrying a
//! tag: a real tag on the chosen Dataplanes would also change the *other* DPPs' config (their
//! endpoints' metadata), which a stage must not do.
//!
//! Each DPP has a **sample point**, a 64-bit number hashed (SHA-256) from the rollout's seed
//! and the DPP's identity in its spec: its zone (`kuma.io/zone`, stamped by the zone that
//! registers it), its addresses, and each inbound's address, port and `kuma.io/service` (the
//! gateway's service for a gateway). The tag's value `<seed>.<bound>` (`bound`: 16 lower-case
//! hex digits) selects the DPPs whose point is at most `bound`. The Global and every zone
//! compute the same point from the same synced spec, so the Global can list a stage's DPPs
//! before it starts, and the zones select exactly those ([`crate::matching`]). Points are
//! uniform: a share is spread across zones and services in proportion, on average. Stages of
//! one rollout share the seed, so a wider stage contains every DPP of a narrower one.
//!
//! The tag is accepted only in a top-level `targetRef` (MeshSubset, MeshServiceSubset) with a
//! well-formed value ([`crate::target_ref::validate_sample`]); Kuma would match it against Dataplane tags, which no
//! Dataplane carries. Two DPPs with the same identity fields (a copy of one spec) share a
//! point and are selected together; a DPP registered after a stage was computed is in it when
//! its point is at most the bound.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::dataplane::DataplaneSpec;
use crate::target_ref::{SERVICE_TAG, ZONE_TAG};

pub use crate::target_ref::{Sample, SAMPLE_TAG};

/// `true` when `dp` is in `sample`.
pub fn contains(sample: &Sample, dp: &DataplaneSpec) -> bool {
    point(&sample.seed, dp) <= sample.bound
}

/// The seed of the rollout of the plan with fingerprint `plan`: 16 hex digits of its SHA-256.
pub fn seed_of(plan: &str) -> String {
    let digest = Sha256::digest(format!("umbra-rollout:{plan}").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// `dp`'s sample point under `seed` (see the module docs for what it hashes).
pub fn point(seed: &str, dp: &DataplaneSpec) -> u64 {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update(s.as_bytes());
        h.update([0]);
    };
    field(seed);
    let n = &dp.networking;
    field(&n.address);
    field(&n.advertised_address);
    let tag =
        |tags: &BTreeMap<String, String>, key: &str| tags.get(key).cloned().unwrap_or_default();
    for i in &n.inbound {
        field(&tag(&i.tags, ZONE_TAG));
        field(&i.address);
        field(&i.port.to_string());
        field(&tag(&i.tags, SERVICE_TAG));
    }
    if let Some(g) = &n.gateway {
        field(&tag(&g.tags, ZONE_TAG));
        field(&tag(&g.tags, SERVICE_TAG));
    }
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The bound selecting `k` of the DPPs whose points are `points` (any order): the `k`-th
/// smallest point (`k` clamped to 1..=len). `None` for no DPP.
pub fn bound_for(points: &[u64], k: usize) -> Option<u64> {
    let mut sorted = points.to_vec();
    sorted.sort_unstable();
    let k = k.clamp(1, sorted.len().max(1));
    sorted.get(k - 1).copied()
}

/// How many of `n` DPPs a share selects: a count as is, a percentage rounded up; at least 1,
/// at most `n`.
pub fn share_of(n: usize, share: &Share) -> usize {
    let k = match share {
        Share::Count(c) => *c,
        Share::Percent(p) => (n * usize::from(*p)).div_ceil(100),
    };
    k.clamp(1, n.max(1))
}

/// A stage's share of the DPPs a rollout's policies select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// That many DPPs (at least 1).
    Count(usize),
    /// That percentage, 1 to 99, rounded up.
    Percent(u8),
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Count(c) => write!(f, "{c}"),
            Self::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The selector `tags` without [`SAMPLE_TAG`] when `dp` is in its sample (or it has none);
/// `None` when `dp` is outside it, is a stand-in for something else
/// ([`DataplaneSpec::synthetic`]: a sample stages DPPs only), or the value does not read
/// (validation refuses that).
pub fn strip<'a>(
    tags: &'a BTreeMap<String, String>,
    dp: &DataplaneSpec,
) -> Option<std::borrow::Cow<'a, BTreeMap<String, String>>> {
    let Some(value) = tags.get(SAMPLE_TAG) else {
        return Some(std::borrow::Cow::Borrowed(tags));
    };
    let sample = Sample::parse(value).ok()?;
    if dp.synthetic || !contains(&sample, dp) {
        return None;
    }
    let mut rest = tags.clone();
    rest.remove(SAMPLE_TAG);
    Some(std::borrow::Cow::Owned(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(zone: &str, address: &str, port: u32, service: &str) -> DataplaneSpec {
        serde_json::from_value(serde_json::json!({
            "networking": {"address": address, "inbound": [{
                "port": port,
                "tags": {"kuma.io/service": service, "kuma.io/zone": zone}
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn values_read_back_and_malformed_ones_are_refused() {
        let s = Sample {
            seed: "ab12".into(),
            bound: 0x00ff,
        };
        assert_eq!(s.value(), "ab12.00000000000000ff");
        assert_eq!(Sample::parse(&s.value()).unwrap(), s);
        for bad in [
            "",
            "ab12",
            "ab12.ff",
            "AB.00000000000000ff",
            ".00000000000000ff",
            "a.00000000000000fg",
            "a.00000000000000FF",
        ] {
            assert!(Sample::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(seed_of("fp").len(), 16);
        assert_ne!(seed_of("fp"), seed_of("fq"));
    }

    #[test]
    fn points_depend_on_the_seed_and_the_identity_only() {
        let a = dp("zone-1", "10.0.0.1", 80, "web");
        let mut relabelled = a.clone();
        relabelled.networking.inbound[0]
            .tags
            .insert("version".into(), "v2".into());
        assert_eq!(point("s", &a), point("s", &relabelled));
        assert_ne!(point("s", &a), point("t", &a));
        for other in [
            dp("zone-2", "10.0.0.1", 80, "web"),
            dp("zone-1", "10.0.0.2", 80, "web"),
            dp("zone-1", "10.0.0.1", 81, "web"),
            dp("zone-1", "10.0.0.1", 80, "api"),
        ] {
            assert_ne!(point("s", &a), point("s", &other));
        }
    }

    #[test]
    fn shares_select_nested_uniform_sets() {
        // 1,000 DPPs over 2 zones and 5 services, as a Global would see them.
        let dps: Vec<DataplaneSpec> = (0..1000)
            .map(|i| {
                dp(
                    &format!("zone-{}", i % 2),
                    &format!("10.0.{}.{}", i / 250, i % 250),
                    8080,
                    &format!("svc-{}", i % 5),
                )
            })
            .collect();
        let seed = seed_of("plan");
        let points: Vec<u64> = dps.iter().map(|d| point(&seed, d)).collect();
        let mut previous = 0;
        for (share, expected) in [
            (Share::Count(1), 1),
            (Share::Percent(10), 100),
            (Share::Percent(50), 500),
            (Share::Percent(99), 990),
        ] {
            let k = share_of(dps.len(), &share);
            assert_eq!(k, expected, "{share}");
            let sample = Sample {
                seed: seed.clone(),
                bound: bound_for(&points, k).unwrap(),
            };
            let chosen: Vec<&DataplaneSpec> = dps.iter().filter(|d| contains(&sample, d)).collect();
            assert_eq!(chosen.len(), expected, "{share}");
            assert!(chosen.len() >= previous);
            previous = chosen.len();
            if expected >= 100 {
                // Spread: every zone and service has a share near its own.
                for z in 0..2 {
                    let n = chosen
                        .iter()
                        .filter(|d| d.networking.inbound[0].tags[ZONE_TAG] == format!("zone-{z}"))
                        .count();
                    assert!(
                        n * 4 >= expected && n * 4 <= expected * 3,
                        "{share} zone-{z}: {n}"
                    );
                }
                for s in 0..5 {
                    let n = chosen
                        .iter()
                        .filter(|d| d.networking.inbound[0].tags[SERVICE_TAG] == format!("svc-{s}"))
                        .count();
                    assert!(
                        n * 10 >= expected && n * 10 <= expected * 3,
                        "{share} svc-{s}: {n}"
                    );
                }
            }
        }
        // A different seed (another rollout) picks another first DPP.
        let other: Vec<u64> = dps.iter().map(|d| point("other", d)).collect();
        let first = |p: &[u64]| p.iter().position(|x| *x == bound_for(p, 1).unwrap());
        assert_ne!(first(&points), first(&other));
        assert_eq!(share_of(3, &Share::Percent(10)), 1);
        assert_eq!(share_of(3, &Share::Count(7)), 3);
        assert_eq!(bound_for(&[], 1), None);
    }

    #[test]
    fn stripping_selects_in_sample_dpps_and_keeps_the_other_tags() {
        let a = dp("zone-1", "10.0.0.1", 80, "web");
        let p = point("s", &a);
        let tags = |bound: u64| {
            BTreeMap::from([
                (
                    SAMPLE_TAG.to_owned(),
                    Sample {
                        seed: "s".into(),
                        bound,
                    }
                    .value(),
                ),
                ("kuma.io/zone".to_owned(), "zone-1".to_owned()),
            ])
        };
        let inside = tags(p);
        let rest = strip(&inside, &a).unwrap();
        assert_eq!(rest.len(), 1);
        assert!(!rest.contains_key(SAMPLE_TAG));
        if p > 0 {
            assert!(strip(&tags(p - 1), &a).is_none());
        }
        let malformed = BTreeMap::from([(SAMPLE_TAG.to_owned(), "x".to_owned())]);
        assert!(strip(&malformed, &a).is_none());
        let mut stand_in = a.clone();
        stand_in.synthetic = true;
        assert!(
            strip(&inside, &stand_in).is_none(),
            "a stand-in is never sampled"
        );
        let plain = BTreeMap::from([("a".to_owned(), "b".to_owned())]);
        assert_eq!(strip(&plain, &a).unwrap().len(), 1);
        let path = crate::validate::PathBuilder::rooted_at("tags");
        assert!(!crate::target_ref::validate_sample(&path, &inside, true).has_violations());
        assert!(crate::target_ref::validate_sample(&path, &inside, false)
            .to_string()
            .contains("only in a top-level"));
        assert!(crate::target_ref::validate_sample(&path, &malformed, true)
            .to_string()
            .contains("<seed>.<bound>"));
    }
    #[test]
    fn a_sampled_target_ref_selects_in_sample_dpps_and_is_refused_elsewhere() {
        let a = dp("zone-1", "10.0.0.1", 80, "web");
        let b = dp("zone-1", "10.0.0.2", 80, "web");
        let (pa, pb) = (point("s", &a), point("s", &b));
        let bound = pa.min(pb);
        let (inside, outside) = if pa <= pb { (&a, &b) } else { (&b, &a) };
        let value = Sample {
            seed: "s".into(),
            bound,
        }
        .value();
        let tags = BTreeMap::from([(SAMPLE_TAG.to_owned(), value.clone())]);
        for target in [
            crate::target_ref::TargetRef::mesh_subset(tags.clone()),
            crate::target_ref::TargetRef::mesh_service_subset("web", tags.clone()),
        ] {
            let on = |d| {
                crate::matching::select("default", &target, d, &[])
                    .unwrap()
                    .any()
            };
            assert!(on(inside), "{target:?}");
            assert!(!on(outside), "{target:?}");
        }
        let policy = |top: serde_json::Value, from: serde_json::Value| {
            crate::resource::Resource::from_value(serde_json::json!({
                "type": "MeshTrafficPermission", "mesh": "default", "name": "p",
                "spec": {"targetRef": top, "from": [{"targetRef": from, "default": {"action": "Allow"}}]}
            }))
            .unwrap()
            .validate()
            .to_string()
        };
        let mesh = serde_json::json!({"kind": "Mesh"});
        let sampled = serde_json::json!({"kind": "MeshSubset", "tags": {SAMPLE_TAG: value}});
        assert_eq!(policy(sampled.clone(), mesh.clone()), "");
        let e = policy(mesh.clone(), sampled);
        assert!(
            e.contains("spec.from[0].targetRef.tags[\"umbra.io/rollout-sample\"]: a rollout sample selects DPPs"),
            "{e}"
        );
        let e = policy(
            serde_json::json!({"kind": "MeshSubset", "tags": {SAMPLE_TAG: "10%"}}),
            mesh,
        );
        assert!(
            e.contains(
                "spec.targetRef.tags[\"umbra.io/rollout-sample\"]: a rollout sample must be"
            ),
            "{e}"
        );
    }
}
