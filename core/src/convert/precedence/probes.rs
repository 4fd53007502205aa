//! Probe points: the proxies (and destinations) where the pass compares Kuma's pick with the
//! merge. Symbolic ones come from every old selector and output targetRef, closed under
//! intersection ([`points`]); real ones are the Dataplanes given among the resources
//! ([`real_probes`]).

use std::collections::{BTreeMap, BTreeSet};

use super::families::Scope;
use crate::dataplane::{DataplaneSpec, Inbound, Networking};
use crate::target_ref::{TargetRef, TargetRefKind, PROTOCOL_TAG, SERVICE_TAG};

/// Upper bound on probe points (the intersection closure stops growing there).
const MAX_POINTS: usize = 256;

/// A proxy (one synthetic inbound, or a real Dataplane) and the destinations to look at.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    pub(super) dp: DataplaneSpec,
    pub(super) services: Vec<String>,
    /// `a proxy tagged {...}` / `Dataplane frontend`.
    pub(super) label: String,
    /// Protocol per destination service (real Dataplanes only).
    pub(super) protocols: Option<BTreeMap<String, String>>,
}

/// The tags a top-level targetRef selects proxies by, as a selector (`None`: not by tags).
pub(super) fn target_tags(r: &TargetRef) -> Option<BTreeMap<String, String>> {
    let mut tags = r.tags.clone();
    match r.kind() {
        TargetRefKind::Mesh => Some(BTreeMap::new()),
        TargetRefKind::MeshSubset => Some(tags),
        TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset => {
            tags.insert(SERVICE_TAG.to_owned(), r.name.clone());
            Some(tags)
        }
        _ => None,
    }
}

/// Inbound tags for selectors: every seed with `*` ("a value no selector names") for wildcards
/// and a missing service, then the union of every compatible pair, until nothing new (at most
/// [`MAX_POINTS`]).
pub(super) fn points(seeds: Vec<BTreeMap<String, String>>) -> BTreeSet<BTreeMap<String, String>> {
    let mut set: BTreeSet<BTreeMap<String, String>> = seeds
        .into_iter()
        .map(|mut t| {
            t.entry(SERVICE_TAG.to_owned())
                .or_insert_with(|| "*".to_owned());
            t
        })
        .collect();
    loop {
        let current: Vec<BTreeMap<String, String>> = set.iter().cloned().collect();
        let before = set.len();
        'outer: for (i, a) in current.iter().enumerate() {
            for b in &current[i + 1..] {
                if set.len() >= MAX_POINTS {
                    break 'outer;
                }
                if let Some(u) = union(a, b) {
                    set.insert(u);
                }
            }
        }
        if set.len() == before || set.len() >= MAX_POINTS {
            return set;
        }
    }
}

/// The tags of a proxy both `a` and `b` describe (`*`: any value), if there is one.
fn union(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let mut out = a.clone();
    for (k, v) in b {
        match out.get(k) {
            None => {
                out.insert(k.clone(), v.clone());
            }
            Some(x) if x == v || v == "*" => {}
            Some(x) if x == "*" => {
                out.insert(k.clone(), v.clone());
            }
            Some(_) => return None,
        }
    }
    Some(out)
}

pub(super) fn describe_tags(tags: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// A proxy with one inbound tagged `tags`.
pub(super) fn synthetic_dataplane(tags: BTreeMap<String, String>) -> DataplaneSpec {
    DataplaneSpec {
        networking: Networking {
            address: "192.0.2.1".to_owned(),
            inbound: vec![Inbound {
                port: 1,
                tags,
                ..Inbound::default()
            }],
            ..Networking::default()
        },
        synthetic: true,
        ..DataplaneSpec::default()
    }
}

/// The given Dataplanes as probes: their outbound services, and each service's protocol (its
/// inbounds' `kuma.io/protocol` when they agree, else `tcp`).
pub(super) fn real_probes(scope: Scope, dataplanes: &[(&str, &DataplaneSpec)]) -> Vec<Probe> {
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, dp) in dataplanes {
        for i in &dp.networking.inbound {
            seen.entry(i.service().to_owned()).or_default().insert(
                i.tags
                    .get(PROTOCOL_TAG)
                    .cloned()
                    .unwrap_or_else(|| "tcp".to_owned()),
            );
        }
    }
    let protocols: BTreeMap<String, String> = seen
        .into_iter()
        .map(|(s, ps)| {
            let p = if ps.len() == 1 {
                ps.into_iter().next().unwrap_or_default()
            } else {
                "tcp".to_owned()
            };
            (s, p)
        })
        .collect();
    dataplanes
        .iter()
        .map(|(name, dp)| Probe {
            dp: (*dp).clone(),
            services: match scope {
                Scope::Outbound => dp
                    .networking
                    .outbound
                    .iter()
                    .filter(|o| o.backend_ref.is_none())
                    .map(|o| o.service().to_owned())
                    .collect(),
                Scope::Dataplane => Vec::new(),
            },
            label: format!("Dataplane {name}"),
            protocols: Some(protocols.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_close_selectors_under_intersection() {
        let t = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let ps = points(vec![
            t(&[(SERVICE_TAG, "*")]),
            t(&[(SERVICE_TAG, "web")]),
            t(&[("version", "v1")]),
            t(&[(SERVICE_TAG, "api")]),
        ]);
        assert!(ps.contains(&t(&[(SERVICE_TAG, "web"), ("version", "v1")])));
        assert!(ps.contains(&t(&[(SERVICE_TAG, "*"), ("version", "v1")])));
        assert!(!ps.iter().any(|p| p.len() > 2));
        assert_eq!(
            union(&t(&[(SERVICE_TAG, "web")]), &t(&[(SERVICE_TAG, "api")])),
            None
        );
    }
}
