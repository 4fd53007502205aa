//! Naming the outputs of a list conversion so that the new policies' merge order reproduces the
//! old policies' precedence (issue 19, "The migration workflow"; seed 000's Timeout ->
//! MeshTimeout example, whose more specific replacements are named `aaa-...` so that they win
//! the merge; seed 002 for the new order). Owned by [`super::convert`]: [`super::convert_one`]
//! converts one policy and names nothing.
//!
//! **Old precedence** (Kuma 2.7.29, `pkg/core/policy/{connection_matcher,dataplane_matcher}.go`,
//! as [`crate::old_matching`] implements it): for each family the pass applies to, Kuma picks
//! the *single* most specific policy and applies it whole:
//! - Timeout (`pkg/xds/topology/timeouts.go`), TrafficLog (`pkg/core/logs/matcher.go`):
//!   `SelectOutboundConnectionPolicies`, per proxy and outbound service;
//! - CircuitBreaker, HealthCheck, Retry (`pkg/xds/topology/{circuitbreakers,healthchecks,
//!   retries}.go`): `SelectConnectionPolicies`, per proxy and outbound service;
//! - TrafficTrace (`pkg/xds/topology/traffictrace.go`): `SelectDataplanePolicy`, per proxy.
//!
//! The rank is the matching selectors' tag counts (source + destination), ties go to the newest
//! policy (by creation time; Umbra, like an unset Go time, breaks the remaining ties by name).
//!
//! **New precedence** ([`crate::matching::precedence`], seed 002): every policy selecting the
//! proxy (and destination) merges, ordered by top-level targetRef kind, then `kuma.io/origin`,
//! then name, the lexically smallest name last and winning. Their replacements (MeshTimeout,
//! MeshAccessLog, MeshCircuitBreaker, MeshHealthCheck, MeshRetry, MeshTrace) replace lists
//! whole, so the policy that wins the merge gives every field it sets.
//!
//! **Families left alone**, because no naming reproduces their old semantics:
//! FaultInjection and RateLimit (Kuma applies *every*
//! matching policy on an inbound, `SelectInboundConnectionMatchingPolicies`, while
//! MeshFaultInjection's `http` list and MeshRateLimit's limits replace each other);
//! TrafficPermission (one best policy per inbound, but MeshTrafficPermission `from` items only
//! add `Allow`ed clients: names change nothing); ProxyTemplate (one best template per proxy,
//! but every MeshProxyPatch's `appendModifications` are concatenated: a broader patch applies
//! whatever the order); TrafficRoute (its MeshHTTPRoute/MeshTCPRoute outputs are referenced
//! by name from other policies, so they are never renamed, and its MeshLoadBalancingStrategy
//! outputs are left to the same order as the routes they come with). Their converters' notes
//! explain the difference.
//!
//! **The pass**, per family and mesh: probe points (a proxy's inbound tags, and for outbound
//! families a destination service) are built from every old selector and every output's
//! targetRef (`*` standing for "a value no selector names"), closed under intersection. At each
//! point the old winner W ([`crate::old_matching`]) must win the merge over every other output
//! that applies there. When the top-level kinds (or origins) decide, nothing can be done by
//! naming; otherwise W's output must sort before the other one. Outputs are processed after
//! everything they must beat: an output that already sorts first keeps its name, else it gets
//! the first of the prefixes `aaa-` (seed 000), `aa-`, `a-`, `0-`, `0-0-`, ... that sorts it
//! before all of them and gives a name no resource of the type and mesh has (over 253
//! characters the end is replaced by a hash). Contradictory requirements (W1 beats W2 at one
//! point, W2 beats W1 at another) leave the names as they are.
//!
//! **Notes**: every conversion of these families gets one [`NoteKind::Semantics`] note on
//! `sources` (`selectors` for TrafficTrace) saying what was renamed and whether the order now
//! reproduces the old precedence. Where it cannot, the note says where and why, and its
//! `affects` names the Envoy fields whose values differ: at the Dataplanes given among the
//! resources when there are any (those are the differences a migration diff shows), else at
//! the probe points. Fields a winning policy leaves unset and a broader one sets still merge
//! in: the family converters note that.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::model::{Conversion, ConvertError, Note, NoteKind};
use crate::dataplane::{DataplaneSpec, Inbound, Networking};
use crate::matching::{precedence as merge_order, select, tags_match};
use crate::merge::merge_confs;
use crate::old::Selector;
use crate::old_matching::{
    dataplane_matches, parse_rfc3339, select_connection_policies, select_dataplane_policy,
    OldPolicyRef, Rank,
};
use crate::policy::TargetRefPolicy;
use crate::resource::{Resource, ResourceType, Spec, TypeKind, DISPLAY_NAME_LABEL};
use crate::rules::Subset;
use crate::target_ref::{TargetRef, TargetRefKind, PROTOCOL_TAG, SERVICE_TAG};

/// How Kuma picks the policy of an old family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One policy per proxy and outbound service (`SelectConnectionPolicies`); the new policy's
    /// `to` items carry the conf.
    Outbound,
    /// One policy per proxy (`SelectDataplanePolicy`); the new policy's top-level `default`
    /// carries the conf.
    Dataplane,
}

/// An old family whose precedence the pass reproduces, and the type it converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The old type.
    pub old: ResourceType,
    /// The new type its outputs have.
    pub new: ResourceType,
    /// How Kuma picks the old policy.
    pub scope: Scope,
}

/// The families the pass applies to (see the module doc for the others).
pub const FAMILIES: &[Family] = &[
    Family {
        old: ResourceType::Timeout,
        new: ResourceType::MeshTimeout,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::CircuitBreaker,
        new: ResourceType::MeshCircuitBreaker,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::Retry,
        new: ResourceType::MeshRetry,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::HealthCheck,
        new: ResourceType::MeshHealthCheck,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::TrafficLog,
        new: ResourceType::MeshAccessLog,
        scope: Scope::Outbound,
    },
    Family {
        old: ResourceType::TrafficTrace,
        new: ResourceType::MeshTrace,
        scope: Scope::Dataplane,
    },
];

/// The family of an old type, when the pass applies to it.
pub fn family(old: ResourceType) -> Option<Family> {
    FAMILIES.iter().copied().find(|f| f.old == old)
}

/// Prefixes tried, in order, to make an output sort before those it must win over: seed 000's
/// `aaa-`, then ones that sort before it (`-` sorts before digits and letters, `0` is the
/// smallest character a name may start with), then `0-` repeated up to
/// [`MAX_ZERO_PREFIXES`] times (to sort before names that start with `0-` themselves).
pub const PREFIXES: &[&str] = &["aaa-", "aa-", "a-", "0-"];

/// How many times `0-` may be repeated as a last resort.
const MAX_ZERO_PREFIXES: usize = 8;

/// Kuma's maximum name length (Umbra's validator).
const MAX_NAME: usize = 253;

/// Upper bound on probe points (the intersection closure stops growing there).
const MAX_POINTS: usize = 256;

/// Findings quoted in one note's message (the rest are counted).
const MAX_QUOTED: usize = 3;

/// Name the outputs of `results` (one per old policy of `resources`, in order, as
/// [`super::convert`] produces them) so that the merge order reproduces the old precedence,
/// and add each conversion's precedence note.
pub fn apply(resources: &[Resource], results: &mut [Result<Conversion, ConvertError>]) {
    let olds: Vec<&Resource> = resources
        .iter()
        .filter(|r| r.ty().kind() == TypeKind::OldPolicy)
        .collect();
    if olds.len() != results.len() {
        return;
    }
    let mut taken: BTreeSet<(ResourceType, String, String)> = resources
        .iter()
        .filter(|r| r.ty().kind() != TypeKind::OldPolicy)
        .map(|r| (r.ty(), r.meta.mesh.clone(), r.meta.name.clone()))
        .collect();
    for c in results.iter().flatten() {
        for o in &c.outputs {
            taken.insert((o.ty(), o.meta.mesh.clone(), o.meta.name.clone()));
        }
    }
    for fam in FAMILIES {
        let meshes: BTreeSet<&str> = olds
            .iter()
            .filter(|r| r.ty() == fam.old)
            .map(|r| r.meta.mesh.as_str())
            .collect();
        for mesh in meshes {
            let members: Vec<usize> = (0..olds.len())
                .filter(|&i| olds[i].ty() == fam.old && olds[i].meta.mesh == mesh)
                .collect();
            let dataplanes: Vec<(&str, &DataplaneSpec)> = resources
                .iter()
                .filter(|r| r.meta.mesh == mesh)
                .filter_map(|r| match &r.spec {
                    Spec::Dataplane(d) => Some((r.meta.name.as_str(), d)),
                    _ => None,
                })
                .collect();
            let mut group = Group::new(*fam, &olds, &members, results);
            group.run(&dataplanes, results, &mut taken);
        }
    }
}

/// One output of the group.
#[derive(Debug, Clone)]
struct Out {
    /// Index of its old policy in the group.
    policy: usize,
    /// Index of its conversion in `results`.
    result: usize,
    /// Index among the conversion's outputs.
    pos: usize,
    /// The output as matching sees it (renames are applied to it too).
    trp: TargetRefPolicy,
}

/// A proxy (one synthetic inbound, or a real Dataplane) and the destinations to look at.
#[derive(Debug, Clone)]
struct Probe {
    dp: DataplaneSpec,
    services: Vec<String>,
    /// `a proxy tagged {...}` / `Dataplane frontend`.
    label: String,
    /// Protocol per destination service (real Dataplanes only).
    protocols: Option<BTreeMap<String, String>>,
}

/// Why W's output does not win where Kuma applies W.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    /// The winning output's top-level kind (or origin) ranks higher.
    Kind,
    /// The two policies must win over each other at different points.
    Conflict,
    /// No valid name sorts W's output first.
    NoName,
}

/// A point where the merge does not give W's conf.
#[derive(Debug, Clone)]
struct Finding {
    /// The old winner (group policy index).
    winner: usize,
    /// The output that wins the merge instead.
    top: usize,
    why: Why,
    /// Where (`a proxy tagged {...} calling backend`).
    label: String,
    /// Kuma's ranking ties the two policies there.
    tie: bool,
    /// Envoy fields whose values differ.
    affects: BTreeSet<&'static str>,
}

struct Group<'a> {
    fam: Family,
    policies: Vec<&'a Resource>,
    /// `results` index of each policy.
    result_of: Vec<usize>,
    outs: Vec<Out>,
}

impl<'a> Group<'a> {
    fn new(
        fam: Family,
        olds: &[&'a Resource],
        members: &[usize],
        results: &[Result<Conversion, ConvertError>],
    ) -> Self {
        let mut outs = Vec::new();
        for (policy, &result) in members.iter().enumerate() {
            let Ok(c) = &results[result] else { continue };
            for (pos, o) in c.outputs.iter().enumerate() {
                if o.ty() != fam.new {
                    continue;
                }
                if let Some(trp) = TargetRefPolicy::from_resource(o) {
                    outs.push(Out {
                        policy,
                        result,
                        pos,
                        trp,
                    });
                }
            }
        }
        Group {
            fam,
            policies: members.iter().map(|&i| olds[i]).collect(),
            result_of: members.to_vec(),
            outs,
        }
    }

    fn refs(&self) -> Vec<OldPolicyRef<'a>> {
        self.policies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
            .collect()
    }

    fn run(
        &mut self,
        dataplanes: &[(&str, &DataplaneSpec)],
        results: &mut [Result<Conversion, ConvertError>],
        taken: &mut BTreeSet<(ResourceType, String, String)>,
    ) {
        if self.outs.is_empty() {
            return;
        }
        let symbolic = self.symbolic_probes();
        // What must win over what, at the probe points.
        let mut edges = BTreeSet::new();
        for (w, o) in self.requirements(&symbolic) {
            if fixed_key(&self.outs[w].trp) == fixed_key(&self.outs[o].trp) {
                edges.insert((w, o));
            }
        }
        let mesh = self.outs[0].trp.meta().mesh.clone();
        let mut names: BTreeSet<String> = taken
            .iter()
            .filter(|(ty, m, _)| *ty == self.fam.new && *m == mesh)
            .map(|(_, _, n)| n.clone())
            .collect();
        let nodes: Vec<(String, String)> = self
            .outs
            .iter()
            .map(|o| {
                (
                    o.trp.meta().name.clone(),
                    o.trp.meta().display_name().to_owned(),
                )
            })
            .collect();
        let solved = solve(&nodes, &edges, &mut names);
        let final_names: Vec<String> = (0..nodes.len())
            .map(|i| match &solved.renamed[i] {
                Some((name, _)) => name.clone(),
                None => nodes[i].0.clone(),
            })
            .collect();
        let mut renamed: BTreeMap<usize, Vec<(String, String, Vec<String>)>> = BTreeMap::new();
        for (i, new) in solved.renamed.iter().enumerate() {
            let Some((name, display)) = new else { continue };
            let out = &mut self.outs[i];
            let old_name = out.trp.origin.meta.name.clone();
            taken.insert((self.fam.new, mesh.clone(), name.clone()));
            rename(&mut out.trp.origin.meta, name, display);
            if let Ok(c) = &mut results[out.result] {
                rename(&mut c.outputs[out.pos].meta, name, display);
            }
            let beats: Vec<String> = edges
                .iter()
                .filter(|e| e.0 == i && !solved.conflicts.contains(e))
                .map(|(_, o)| final_names[*o].clone())
                .collect();
            renamed
                .entry(out.policy)
                .or_default()
                .push((old_name, name.clone(), beats));
        }
        // What remains different: at the probe points (for the message), and where a diff
        // would show it (for `affects`).
        let found = self.findings(&symbolic, &solved);
        let real: Vec<Probe> = real_probes(self.fam.scope, dataplanes);
        let effects = if real.is_empty() {
            found.clone()
        } else {
            self.findings(&real, &solved)
        };

        for (p, &result) in self.result_of.iter().enumerate() {
            let Ok(c) = &mut results[result] else {
                continue;
            };
            if !c.outputs.iter().any(|o| o.ty() == self.fam.new) {
                continue;
            }
            let mine: Vec<&Finding> = found.iter().filter(|f| f.winner == p).collect();
            let visible: Vec<&Finding> = effects.iter().filter(|f| f.winner == p).collect();
            let mut affects: BTreeSet<&str> = BTreeSet::new();
            for f in &visible {
                affects.extend(f.affects.iter().copied());
            }
            let message = self.message(p, renamed.get(&p), &mine, &visible, !real.is_empty());
            let mut note = Note::new(
                NoteKind::Semantics,
                match self.fam.scope {
                    Scope::Outbound => "sources",
                    Scope::Dataplane => "selectors",
                },
                message,
            );
            note.affects = affects.into_iter().map(str::to_owned).collect();
            c.notes.push(note);
        }
    }

    /// For every probe point with an old winner W whose output applies: (W's best output,
    /// another policy's output applying there), deduplicated.
    fn requirements(&self, probes: &[Probe]) -> BTreeSet<(usize, usize)> {
        let mut out = BTreeSet::new();
        for case in self.cases(probes) {
            let Some(best) = case.best_of_winner(self) else {
                continue;
            };
            for &o in &case.applying {
                if self.outs[o].policy != case.winner {
                    out.insert((best, o));
                }
            }
        }
        out
    }

    /// Every (probe, destination) with an old winner, and the outputs applying there.
    fn cases(&self, probes: &[Probe]) -> Vec<Case> {
        let refs = self.refs();
        let mut cases = Vec::new();
        for (pi, probe) in probes.iter().enumerate() {
            let selecting: Vec<usize> = (0..self.outs.len())
                .filter(|&o| {
                    select(
                        &self.outs[o].trp.meta().mesh,
                        &self.outs[o].trp.target_ref,
                        &probe.dp,
                        &[],
                    )
                    .is_ok_and(|s| s.any())
                })
                .collect();
            match self.fam.scope {
                Scope::Dataplane => {
                    if let Some(winner) = select_dataplane_policy(&probe.dp, &refs) {
                        cases.push(Case {
                            probe: pi,
                            service: None,
                            winner,
                            applying: selecting.clone(),
                        });
                    }
                }
                Scope::Outbound => {
                    let chosen = select_connection_policies(&probe.dp, &probe.services, &refs);
                    for (service, winner) in chosen {
                        let applying = selecting
                            .iter()
                            .copied()
                            .filter(|&o| !covering(&self.outs[o].trp, &service).is_empty())
                            .collect();
                        cases.push(Case {
                            probe: pi,
                            service: Some(service),
                            winner,
                            applying,
                        });
                    }
                }
            }
        }
        cases
    }

    /// The points where W's output applies but does not win the merge.
    fn findings(&self, probes: &[Probe], solved: &Solved) -> Vec<Finding> {
        let mut found = Vec::new();
        for case in self.cases(probes) {
            let Some(best) = case.best_of_winner(self) else {
                continue;
            };
            let mut applying = case.applying.clone();
            applying.sort_by(|a, b| merge_order(&self.outs[*a].trp, &self.outs[*b].trp));
            let Some(&top) = applying.last() else {
                continue;
            };
            if self.outs[top].policy == case.winner {
                continue;
            }
            let why = if fixed_key(&self.outs[top].trp) != fixed_key(&self.outs[best].trp) {
                Why::Kind
            } else if solved.conflicts.contains(&(best, top)) {
                Why::Conflict
            } else {
                Why::NoName
            };
            let probe = &probes[case.probe];
            let service = case.service.as_deref();
            let confs = |only: Option<usize>| -> Option<Value> {
                let list: Vec<&Value> = applying
                    .iter()
                    .filter(|&&o| only.is_none_or(|p| self.outs[o].policy == p))
                    .flat_map(|&o| self.confs(o, service))
                    .collect();
                merge_confs(&list)
            };
            let mut affects = BTreeSet::new();
            if let (Some(merged), Some(alone)) = (confs(None), confs(Some(case.winner))) {
                let protocol = probe
                    .protocols
                    .as_ref()
                    .map(|m| service.and_then(|s| m.get(s)).map_or("tcp", String::as_str));
                for path in diff_paths(&alone, &merged) {
                    affects.extend(envoy_fields(self.fam.new, &path, protocol));
                }
            }
            let rank = |p: usize| self.rank_at(p, &probe.dp, service);
            let tie =
                rank(case.winner).is_some() && rank(case.winner) == rank(self.outs[top].policy);
            found.push(Finding {
                winner: case.winner,
                top,
                why,
                label: match service {
                    Some("*") => format!("{} calling another service", probe.label),
                    Some(s) => format!("{} calling {s}", probe.label),
                    None => probe.label.clone(),
                },
                tie,
                affects,
            });
        }
        found
    }

    /// The confs of output `o` for `service` (its covering `to` items), or its `default`.
    fn confs(&self, o: usize, service: Option<&str>) -> Vec<&Value> {
        let trp = &self.outs[o].trp;
        match service {
            Some(s) => covering(trp, s),
            None => trp.single.iter().collect(),
        }
    }

    /// Kuma's rank of policy `p` at `dp` (and `service`): `None` when it does not match.
    fn rank_at(&self, p: usize, dp: &DataplaneSpec, service: Option<&str>) -> Option<Rank> {
        let r = OldPolicyRef::from_resource(p, self.policies[p])?;
        let best = |sels: &[Selector], matches: &dyn Fn(&Selector) -> bool| {
            sels.iter()
                .filter(|s| matches(s))
                .map(|s| Rank::of(&s.match_tags))
                .max()
        };
        match service {
            None => {
                if r.sources.is_empty() || r.sources.iter().any(|s| s.match_tags.is_empty()) {
                    let matched = best(r.sources, &|s| {
                        !s.match_tags.is_empty() && dataplane_matches(dp, &s.match_tags)
                    });
                    return Some(matched.unwrap_or_default());
                }
                best(r.sources, &|s| dataplane_matches(dp, &s.match_tags))
            }
            Some(service) => {
                let tags = BTreeMap::from([(SERVICE_TAG.to_owned(), service.to_owned())]);
                let src = best(r.sources, &|s| dataplane_matches(dp, &s.match_tags))?;
                let dst = best(r.destinations, &|s| tags_match(&s.match_tags, &tags))?;
                Some(src.combined(dst))
            }
        }
    }

    /// Probe points from every old selector and output targetRef, closed under intersection.
    fn symbolic_probes(&self) -> Vec<Probe> {
        let mut seeds: Vec<BTreeMap<String, String>> = Vec::new();
        let mut services: BTreeSet<String> = BTreeSet::from(["*".to_owned()]);
        for r in self.refs() {
            seeds.extend(r.sources.iter().map(|s| s.match_tags.clone()));
            for d in r.destinations {
                if let Some(s) = d.match_tags.get(SERVICE_TAG).filter(|s| *s != "*") {
                    services.insert(s.clone());
                }
            }
        }
        for o in &self.outs {
            seeds.extend(target_tags(&o.trp.target_ref));
            for item in &o.trp.to {
                if matches!(
                    item.target_ref.kind(),
                    TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset
                ) {
                    services.insert(item.target_ref.name.clone());
                }
            }
        }
        let services: Vec<String> = match self.fam.scope {
            Scope::Outbound => services.into_iter().collect(),
            Scope::Dataplane => Vec::new(),
        };
        points(seeds)
            .into_iter()
            .map(|tags| Probe {
                label: format!("a proxy tagged {}", describe_tags(&tags)),
                dp: synthetic_dataplane(tags),
                services: services.clone(),
                protocols: None,
            })
            .collect()
    }

    /// The precedence note's message for policy `p`.
    fn message(
        &self,
        p: usize,
        renamed: Option<&Vec<(String, String, Vec<String>)>>,
        found: &[&Finding],
        visible: &[&Finding],
        real: bool,
    ) -> String {
        let (old, new) = (self.fam.old.name(), self.fam.new.name());
        let mut m = format!("precedence among the converted {new}s:");
        for (from, to, beats) in renamed.into_iter().flatten() {
            m.push_str(&format!(
                " {from} is renamed {to} so that it sorts first and wins the merge over {}, as Kuma prefers this {old} where both apply;",
                beats.join(", ")
            ));
        }
        if found.is_empty() && visible.is_empty() {
            m.push_str(&format!(
                " the merge order (top-level targetRef kind, then name) reproduces Kuma's (the most specific {old} wins) wherever this {old} applied"
            ));
            return m;
        }
        m.push_str(&format!(
            " the merge order (top-level targetRef kind, then name) cannot reproduce Kuma's (the most specific {old} wins) everywhere:"
        ));
        let mut quoted: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        for f in found.iter().chain(visible.iter()) {
            if !seen.insert(f.label.clone()) {
                continue;
            }
            let top = &self.outs[f.top];
            let top_name = top.trp.meta().name.as_str();
            let top_from = self.policies[top.policy].meta.name.as_str();
            let why = match f.why {
                Why::Kind => format!(
                    "its top-level targetRef ({}) or kuma.io/origin ranks higher",
                    top.trp.target_ref.kind()
                ),
                Why::Conflict => format!(
                    "Kuma ranks this {old} and {top_from} differently at other proxies or destinations, so no name order reproduces both"
                ),
                Why::NoName => "no valid name sorts this policy first".to_owned(),
            };
            let tie = if f.tie {
                let unknown = self.policies[p]
                    .meta
                    .creation_time
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .is_none()
                    || self.policies[top.policy]
                        .meta
                        .creation_time
                        .as_deref()
                        .and_then(parse_rfc3339)
                        .is_none();
                if unknown {
                    " (the two rank equally: Kuma picks the one created last; without creation times in the input, the one first by name)"
                } else {
                    " (the two rank equally: Kuma picks the one created last)"
                }
            } else {
                ""
            };
            let from = if top_name == top_from {
                String::new()
            } else {
                format!(" (from {top_from})")
            };
            quoted.push(format!(
                " for {}, Kuma applies this {old}{tie} but {new} {top_name}{from} wins the merge: {why}",
                f.label
            ));
        }
        let total = quoted.len();
        m.push_str(
            &quoted
                .into_iter()
                .take(MAX_QUOTED)
                .collect::<Vec<_>>()
                .join(";"),
        );
        if total > MAX_QUOTED {
            m.push_str(&format!("; and {} more", total - MAX_QUOTED));
        }
        if visible.iter().all(|f| f.affects.is_empty()) {
            m.push_str(if real {
                "; at the given Dataplanes the merged values are the same"
            } else {
                "; the merged values are the same there"
            });
        }
        m
    }
}

/// A (probe, destination) with its old winner.
#[derive(Debug, Clone)]
struct Case {
    probe: usize,
    service: Option<String>,
    winner: usize,
    applying: Vec<usize>,
}

impl Case {
    /// W's output that ranks highest among the applying ones.
    fn best_of_winner(&self, g: &Group<'_>) -> Option<usize> {
        self.applying
            .iter()
            .copied()
            .filter(|&o| g.outs[o].policy == self.winner)
            .max_by(|a, b| merge_order(&g.outs[*a].trp, &g.outs[*b].trp))
    }
}

/// The `to` items of `trp` covering `service`: their confs.
fn covering<'p>(trp: &'p TargetRefPolicy, service: &str) -> Vec<&'p Value> {
    let element = BTreeMap::from([(SERVICE_TAG.to_owned(), service.to_owned())]);
    trp.to
        .iter()
        .filter(|i| {
            Subset::from_target_ref(&i.target_ref).is_some_and(|s| s.contains_element(&element))
        })
        .map(|i| &i.conf)
        .collect()
}

/// What names cannot change in the merge order: kind, origin (and gateway tags).
fn fixed_key(p: &TargetRefPolicy) -> (u8, i8, usize) {
    let gateway_tags = if p.target_ref.kind() == TargetRefKind::MeshGateway {
        p.target_ref.tags.len()
    } else {
        0
    };
    (
        p.target_ref.kind().rank(),
        p.meta().origin_rank(),
        gateway_tags,
    )
}

fn rename(meta: &mut crate::resource::Meta, name: &str, display: &str) {
    meta.name = name.to_owned();
    if let Some(d) = meta.labels.get_mut(DISPLAY_NAME_LABEL) {
        if !d.is_empty() {
            *d = display.to_owned();
        }
    }
}

/// The tags a top-level targetRef selects proxies by, as a selector (`None`: not by tags).
fn target_tags(r: &TargetRef) -> Option<BTreeMap<String, String>> {
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
fn points(seeds: Vec<BTreeMap<String, String>>) -> BTreeSet<BTreeMap<String, String>> {
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

fn describe_tags(tags: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// A proxy with one inbound tagged `tags`.
fn synthetic_dataplane(tags: BTreeMap<String, String>) -> DataplaneSpec {
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
        ..DataplaneSpec::default()
    }
}

/// The given Dataplanes as probes: their outbound services, and each service's protocol (its
/// inbounds' `kuma.io/protocol` when they agree, else `tcp`).
fn real_probes(scope: Scope, dataplanes: &[(&str, &DataplaneSpec)]) -> Vec<Probe> {
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

/// The result of [`solve`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Solved {
    /// New `(name, display name)` per node, `None` when it keeps its own.
    renamed: Vec<Option<(String, String)>>,
    /// Requirements on a cycle (each node must win over the other, directly or not).
    conflicts: BTreeSet<(usize, usize)>,
}

/// Names for `nodes` (`(name, display name)`) such that for every edge `(w, o)` the display
/// name of `w` sorts before that of `o`: a node is handled once every node it must beat (off
/// its cycle) is; it keeps its name when that already sorts first, else takes the first
/// [`PREFIXES`] entry (or repeated `0-`) that does and whose name is not in `taken` (then
/// added to it).
fn solve(
    nodes: &[(String, String)],
    edges: &BTreeSet<(usize, usize)>,
    taken: &mut BTreeSet<String>,
) -> Solved {
    let n = nodes.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(w, o) in edges {
        if w < n && o < n && w != o {
            succ[w].push(o);
        }
    }
    // reach[i]: nodes reachable from i.
    let reach: Vec<BTreeSet<usize>> = (0..n)
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut stack = succ[start].clone();
            while let Some(x) = stack.pop() {
                if seen.insert(x) {
                    stack.extend(succ[x].iter().copied());
                }
            }
            seen
        })
        .collect();
    let conflicts: BTreeSet<(usize, usize)> = edges
        .iter()
        .copied()
        .filter(|&(w, o)| w < n && o < n && reach[o].contains(&w))
        .collect();
    let mut display: Vec<String> = nodes.iter().map(|(_, d)| d.clone()).collect();
    let mut renamed = vec![None; n];
    let mut done = vec![false; n];
    loop {
        let mut progress = false;
        for u in 0..n {
            if done[u] {
                continue;
            }
            let targets: Vec<usize> = succ[u]
                .iter()
                .copied()
                .filter(|o| !conflicts.contains(&(u, *o)))
                .collect();
            if targets.iter().any(|&o| !done[o]) {
                continue;
            }
            done[u] = true;
            progress = true;
            let Some(first) = targets.iter().map(|&o| display[o].as_str()).min() else {
                continue;
            };
            if display[u].as_str() < first {
                continue;
            }
            let first = first.to_owned();
            let candidates = PREFIXES
                .iter()
                .map(|p| (*p).to_owned())
                .chain((2..=MAX_ZERO_PREFIXES).map(|k| "0-".repeat(k)));
            for prefix in candidates {
                let prefix = prefix.as_str();
                let name = prefixed(prefix, &nodes[u].0);
                let disp = prefixed(prefix, &display[u]);
                if disp < first && !taken.contains(&name) {
                    taken.insert(name.clone());
                    display[u] = disp.clone();
                    renamed[u] = Some((name, disp));
                    break;
                }
            }
        }
        if !progress {
            break;
        }
    }
    Solved { renamed, conflicts }
}

/// `prefix` + `name`, the end replaced by `-<hash>` when longer than Kuma allows.
fn prefixed(prefix: &str, name: &str) -> String {
    let full = format!("{prefix}{name}");
    if full.len() <= MAX_NAME {
        return full;
    }
    // FNV-1a, so the shortened name is deterministic and tells long names apart.
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let keep = MAX_NAME - prefix.len() - 9;
    let mut cut = keep;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{prefix}{}-{hash:08x}", &name[..cut])
}

/// Paths (object keys) where `a` and `b` differ; arrays and scalars compare whole.
fn diff_paths(a: &Value, b: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    fn walk(
        a: Option<&Value>,
        b: Option<&Value>,
        path: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    path.push(k.clone());
                    walk(x.get(k), y.get(k), path, out);
                    path.pop();
                }
            }
            (x, y) if x == y => {}
            _ => out.push(path.clone()),
        }
    }
    walk(Some(a), Some(b), &mut Vec::new(), &mut out);
    out
}

/// Protocols an entry of [`FIELDS`] renders for (`None`: every protocol).
type Protocols = Option<&'static [&'static str]>;

const HTTPISH: Protocols = Some(&["http", "http2", "grpc"]);
const HTTP_CLUSTER: Protocols = Some(&["http", "http2"]);
const CHECKED: Protocols = Some(&["tcp", "http", "http2", "grpc"]);

/// Per new type: conf path, the protocols of the destination it shows for, and the Envoy
/// fields it sets (as Umbra renders them, `xds/src/plugins/<family>.rs`).
#[allow(clippy::type_complexity)]
const FIELDS: &[(ResourceType, &[&str], Protocols, &[&str])] = &[
    (
        ResourceType::MeshTimeout,
        &["connectionTimeout"],
        None,
        &["connectTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["idleTimeout"],
        Some(&["tcp", "kafka", "http", "http2"]),
        &["idleTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "requestTimeout"],
        HTTPISH,
        &["timeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "streamIdleTimeout"],
        HTTPISH,
        &["idleTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "requestHeadersTimeout"],
        HTTPISH,
        &["requestHeadersTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "maxStreamDuration"],
        HTTP_CLUSTER,
        &["maxStreamDuration"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "maxConnectionDuration"],
        HTTP_CLUSTER,
        &["maxConnectionDuration"],
    ),
    (
        ResourceType::MeshCircuitBreaker,
        &["connectionLimits"],
        None,
        &["circuitBreakers"],
    ),
    (
        ResourceType::MeshCircuitBreaker,
        &["outlierDetection"],
        None,
        &["outlierDetection"],
    ),
    (
        ResourceType::MeshRetry,
        &["http"],
        Some(&["http"]),
        &["retryPolicy"],
    ),
    (
        ResourceType::MeshRetry,
        &["grpc"],
        Some(&["grpc"]),
        &["retryPolicy"],
    ),
    (
        ResourceType::MeshRetry,
        &["tcp"],
        Some(&["tcp"]),
        &["maxConnectAttempts"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["healthyPanicThreshold"],
        None,
        &["healthyPanicThreshold"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["failTrafficOnPanic"],
        None,
        &["zoneAwareLbConfig"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["http"],
        HTTP_CLUSTER,
        &["healthChecks"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["grpc"],
        Some(&["grpc"]),
        &["healthChecks"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["tcp"],
        CHECKED,
        &["healthChecks"],
    ),
    (
        ResourceType::MeshAccessLog,
        &["backends"],
        None,
        &["accessLog"],
    ),
    (ResourceType::MeshTrace, &["backends"], None, &["tracing"]),
    (ResourceType::MeshTrace, &["sampling"], None, &["tracing"]),
    (ResourceType::MeshTrace, &["tags"], None, &["tracing"]),
];

/// Envoy fields a difference at conf `path` of a `ty` shows in, for a destination of
/// `protocol` (`None`: unknown, any). A path [`FIELDS`] does not list (a MeshHealthCheck
/// interval, ...) gives every field of the type.
fn envoy_fields(
    ty: ResourceType,
    path: &[String],
    protocol: Option<&str>,
) -> BTreeSet<&'static str> {
    let related = |entry: &[&str]| entry.iter().zip(path.iter()).all(|(e, p)| *e == p.as_str());
    let mut out = BTreeSet::new();
    let mut listed = false;
    for (t, entry, protocols, fields) in FIELDS {
        if *t != ty || !related(entry) {
            continue;
        }
        listed = true;
        let shows = match (protocol, protocols) {
            (Some(p), Some(ps)) => ps.contains(&p),
            _ => true,
        };
        if shows {
            out.extend(fields.iter().copied());
        }
    }
    if !listed {
        for (t, _, protocols, fields) in FIELDS {
            let shows = match (protocol, protocols) {
                (Some(p), Some(ps)) => ps.contains(&p),
                _ => true,
            };
            if *t == ty && shows {
                out.extend(fields.iter().copied());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{convert, convert_one, Options};

    fn resources(yaml: &str) -> Vec<Resource> {
        Resource::all_from_bytes(yaml.as_bytes()).unwrap()
    }

    fn run(yaml: &str) -> Vec<Conversion> {
        convert(&resources(yaml), &Options::default())
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    fn names(cs: &[Conversion]) -> Vec<&str> {
        cs.iter()
            .flat_map(|c| c.outputs.iter().map(|o| o.meta.name.as_str()))
            .collect()
    }

    /// The precedence note (the last one the pass adds).
    fn note(c: &Conversion) -> &Note {
        c.notes
            .iter()
            .rev()
            .find(|n| n.message.starts_with("precedence among"))
            .unwrap()
    }

    fn timeout(name: &str, source: &str, destinations: &[&str], connect: &str) -> String {
        let dests: String = destinations
            .iter()
            .map(|d| format!("- match:\n    kuma.io/service: '{d}'\n"))
            .collect();
        format!(
            "---\ntype: Timeout\nmesh: default\nname: {name}\nsources:\n- match:\n    kuma.io/service: '{source}'\ndestinations:\n{dests}conf:\n  connectTimeout: {connect}\n"
        )
    }

    fn circuit_breaker(name: &str, source: &str, destination: &str, extra: &str) -> String {
        format!(
            "---\ntype: CircuitBreaker\nmesh: default\nname: {name}\n{extra}sources:\n- match:\n    kuma.io/service: '{source}'\ndestinations:\n- match:\n    kuma.io/service: '{destination}'\nconf:\n  interval: 5s\n  detectors:\n    totalErrors: {{consecutive: {}}}\n",
            name.len()
        )
    }

    #[test]
    fn seed_000_timeouts_get_the_aaa_prefix_and_a_note_that_the_order_holds() {
        let cs = run(&format!(
            "{}{}{}",
            timeout("timeout-global", "*", &["*"], "21s"),
            timeout(
                "timeout-to-backend",
                "*",
                &["backend_kuma-demo_svc_3001"],
                "31s"
            ),
            timeout(
                "timeout-to-redis",
                "*",
                &["redis_kuma-demo_svc_6379"],
                "41s"
            ),
        ));
        assert_eq!(
            names(&cs),
            [
                "timeout-global",
                "aaa-timeout-to-backend",
                "aaa-timeout-to-redis"
            ]
        );
        for c in &cs {
            let n = note(c);
            assert_eq!((n.kind, n.field.as_str()), (NoteKind::Semantics, "sources"));
            assert!(n.affects.is_empty(), "{n:?}");
            assert!(n.message.contains("reproduces Kuma's"), "{}", n.message);
            // The source stays named in the labels.
            assert_eq!(
                c.outputs[0].meta.labels[super::super::model::CONVERTED_FROM_NAME_LABEL],
                c.source.name
            );
        }
        assert!(note(&cs[1])
            .message
            .contains("timeout-to-backend is renamed aaa-timeout-to-backend"));
        assert!(!note(&cs[0]).message.contains("renamed"));
    }

    #[test]
    fn names_already_in_order_and_disjoint_policies_are_kept() {
        // timeout-backend already sorts before timeout-global; z-api and a-db never overlap.
        let cs = run(&format!(
            "{}{}{}{}",
            timeout("timeout-global", "*", &["*"], "21s"),
            timeout("timeout-backend", "*", &["backend"], "31s"),
            timeout("z-api", "web", &["api"], "2s"),
            timeout("a-db", "api", &["db"], "3s"),
        ));
        assert_eq!(
            names(&cs),
            ["timeout-global", "timeout-backend", "z-api", "a-db"]
        );
        assert!(cs.iter().all(|c| note(c).affects.is_empty()));
    }

    #[test]
    fn convert_one_names_nothing() {
        let r = resources(&timeout("timeout-to-backend", "*", &["backend"], "31s"));
        let c = convert_one(&r[0], &Options::default()).unwrap();
        assert_eq!(c.outputs[0].meta.name, "timeout-to-backend");
        assert!(!c
            .notes
            .iter()
            .any(|n| n.message.starts_with("precedence among")));
    }

    #[test]
    fn other_families_are_left_alone() {
        let cs = run(
            "type: TrafficPermission\nmesh: default\nname: z-web\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: web}\n---\ntype: TrafficPermission\nmesh: default\nname: a-all\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\n",
        );
        assert_eq!(names(&cs), ["z-web", "a-all"]);
        assert!(cs.iter().all(|c| !c
            .notes
            .iter()
            .any(|n| n.message.starts_with("precedence among"))));
        assert!(family(ResourceType::FaultInjection).is_none());
        assert!(family(ResourceType::ProxyTemplate).is_none());
        assert_eq!(
            family(ResourceType::TrafficTrace).map(|f| f.scope),
            Some(Scope::Dataplane)
        );
    }

    #[test]
    fn a_top_level_kind_that_contradicts_kuma_is_noted_with_the_fields() {
        // frontend -> backend: cb-to-backend (* -> backend) and zz-frontend (frontend -> *) rank
        // equally; without creation times the first by name wins in Kuma's order as Umbra
        // applies it (cb-to-backend), but zz-frontend's MeshService top level wins the merge.
        let yaml = format!(
            "{}{}",
            circuit_breaker("cb-to-backend", "*", "backend", ""),
            circuit_breaker("zz-frontend", "frontend", "*", ""),
        );
        let cs = run(&yaml);
        assert_eq!(names(&cs), ["cb-to-backend", "zz-frontend"]);
        let n = note(&cs[0]);
        assert!(n.message.contains("cannot reproduce"), "{}", n.message);
        assert!(n.message.contains("MeshService"), "{}", n.message);
        assert!(n.message.contains("rank equally"), "{}", n.message);
        assert!(
            n.message.contains("without creation times"),
            "{}",
            n.message
        );
        // No Dataplane given: the probe points decide; the detector count differs.
        assert_eq!(n.affects, ["outlierDetection"]);
        assert!(note(&cs[1]).affects.is_empty());

        // A Dataplane that never calls backend: nothing shows.
        let with_dp = format!(
            "type: Dataplane\nmesh: default\nname: fe\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: frontend}}\n  outbound:\n  - {{port: 81, tags: {{kuma.io/service: redis}}}}\n{yaml}"
        );
        let cs = run(&with_dp);
        let n = note(&cs[0]);
        assert!(n.message.contains("cannot reproduce"), "{}", n.message);
        assert!(n.affects.is_empty(), "{n:?}");
        assert!(
            n.message.contains("at the given Dataplanes"),
            "{}",
            n.message
        );

        // With creation times Kuma picks the newer one: zz-frontend, as the merge does.
        let timed = format!(
            "{}{}",
            circuit_breaker(
                "cb-to-backend",
                "*",
                "backend",
                "creationTime: '2024-01-01T00:00:00Z'\n"
            ),
            circuit_breaker(
                "zz-frontend",
                "frontend",
                "*",
                "creationTime: '2024-06-01T00:00:00Z'\n"
            ),
        );
        let cs = run(&timed);
        assert!(cs.iter().all(|c| note(c).message.contains("reproduces")));
        assert!(cs.iter().all(|c| note(c).affects.is_empty()));
    }

    #[test]
    fn contradictory_rankings_keep_the_names_and_are_noted() {
        // p1 is the most specific for x, p2 for y; both target Mesh with a Mesh `to` item, so
        // one of them must lose somewhere.
        let cs = run(&format!(
            "{}{}",
            timeout("p1", "*", &["x", "*"], "1s"),
            timeout("p2", "*", &["y", "*"], "2s"),
        ));
        assert_eq!(names(&cs), ["p1", "p2"]);
        assert!(note(&cs[0]).message.contains("reproduces"));
        let n = note(&cs[1]);
        assert!(n.message.contains("calling y"), "{}", n.message);
        assert!(n.message.contains("no name order"), "{}", n.message);
        assert_eq!(n.affects, ["connectTimeout"]);
    }

    #[test]
    fn the_display_name_label_is_renamed_too() {
        let yaml = format!(
            "{}{}",
            timeout("t-all", "*", &["*"], "1s"),
            timeout("t-web", "*", &["web"], "2s").replace(
                "name: t-web\n",
                "name: t-web-1a2b\nlabels:\n  kuma.io/display-name: t-web\n"
            ),
        );
        let cs = run(&yaml);
        let out = &cs[1].outputs[0];
        assert_eq!(out.meta.name, "aaa-t-web-1a2b");
        assert_eq!(out.meta.labels[DISPLAY_NAME_LABEL], "aaa-t-web");
    }

    #[test]
    fn renames_avoid_names_in_use() {
        let yaml = format!(
            "type: MeshTimeout\nmesh: default\nname: aaa-t-web\nspec:\n  targetRef: {{kind: MeshService, name: other}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 1s}}\n{}{}",
            timeout("t-all", "*", &["*"], "1s"),
            timeout("t-web", "*", &["web"], "2s"),
        );
        let cs = run(&yaml);
        assert_eq!(names(&cs), ["t-all", "aa-t-web"]);
    }

    #[test]
    fn a_trace_per_proxy_keeps_names_its_kinds_order() {
        let mesh = "type: Mesh\nname: default\ntracing:\n  defaultBackend: zipkin\n  backends:\n  - name: zipkin\n    type: zipkin\n    conf: {url: 'http://zipkin:9411/api/v2/spans'}\n";
        let trace = |name: &str, selector: &str| {
            format!("---\ntype: TrafficTrace\nmesh: default\nname: {name}\nselectors:\n- match: {{{selector}}}\n")
        };
        let cs = run(&format!(
            "{mesh}{}{}",
            trace("all", "kuma.io/service: '*'"),
            trace("web", "kuma.io/service: web")
        ));
        assert_eq!(names(&cs), ["all", "web"]);
        for c in &cs {
            let n = note(c);
            assert_eq!(n.field, "selectors");
            assert!(n.message.contains("reproduces"), "{}", n.message);
        }
    }

    fn nodes(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), (*n).to_owned()))
            .collect()
    }

    #[test]
    fn solve_orders_a_chain_of_three() {
        // c must beat b and a, b must beat a.
        let ns = nodes(&["a-all", "b-all", "c-backend"]);
        let edges = BTreeSet::from([(1, 0), (2, 1), (2, 0)]);
        let mut taken: BTreeSet<String> = ns.iter().map(|n| n.0.clone()).collect();
        let s = solve(&ns, &edges, &mut taken);
        let finals: Vec<String> = (0..3)
            .map(|i| s.renamed[i].clone().map_or(ns[i].0.clone(), |r| r.0))
            .collect();
        // "a-all" sorts before anything starting with "a" and a longer run of "a"s.
        assert_eq!(finals, ["a-all", "0-b-all", "0-0-c-backend"]);
        for (w, o) in &edges {
            assert!(finals[*w] < finals[*o]);
        }
        assert!(s.conflicts.is_empty());
        assert!(taken.contains("0-0-c-backend"));
        // The seed's prefix where it sorts first.
        let ns = nodes(&["timeout-global", "timeout-to-backend"]);
        let s = solve(&ns, &BTreeSet::from([(1, 0)]), &mut BTreeSet::new());
        assert_eq!(
            s.renamed[1],
            Some((
                "aaa-timeout-to-backend".to_owned(),
                "aaa-timeout-to-backend".to_owned()
            ))
        );
    }

    #[test]
    fn solve_reports_cycles_and_keeps_their_names() {
        let ns = nodes(&["p1", "p2", "p0"]);
        // p1 and p2 must beat each other; p2 must beat p0 (already true? no: "p0" < "p2").
        let edges = BTreeSet::from([(0, 1), (1, 0), (1, 2)]);
        let mut taken = BTreeSet::new();
        let s = solve(&ns, &edges, &mut taken);
        assert_eq!(s.conflicts, BTreeSet::from([(0, 1), (1, 0)]));
        assert_eq!(s.renamed[0], None);
        assert_eq!(
            s.renamed[1],
            Some(("aaa-p2".to_owned(), "aaa-p2".to_owned()))
        );
    }

    #[test]
    fn long_names_stay_within_kumas_limit_and_apart() {
        let a = "x".repeat(252) + "a";
        let b = "x".repeat(252) + "b";
        let (pa, pb) = (prefixed("aaa-", &a), prefixed("aaa-", &b));
        assert_eq!(pa.len(), MAX_NAME);
        assert_ne!(pa, pb);
        assert!(pa.starts_with("aaa-xxx"));
        assert!(pa.chars().last().unwrap().is_ascii_alphanumeric());
        assert_eq!(prefixed("aaa-", "web"), "aaa-web");
    }

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

    #[test]
    fn conf_differences_map_to_the_envoy_fields_for_the_protocol() {
        let a = serde_json::json!({"connectionTimeout": "1s", "http": {"requestTimeout": "2s"}});
        let b = serde_json::json!({"connectionTimeout": "1s", "http": {"requestTimeout": "3s"}, "idleTimeout": "4s"});
        let paths = diff_paths(&a, &b);
        assert_eq!(
            paths,
            [
                vec!["http".to_owned(), "requestTimeout".to_owned()],
                vec!["idleTimeout".to_owned()]
            ]
        );
        let fields = |p: Option<&str>| -> BTreeSet<&str> {
            paths
                .iter()
                .flat_map(|path| envoy_fields(ResourceType::MeshTimeout, path, p))
                .collect()
        };
        assert_eq!(
            fields(Some("http")),
            BTreeSet::from(["timeout", "idleTimeout"])
        );
        assert_eq!(fields(Some("tcp")), BTreeSet::from(["idleTimeout"]));
        assert_eq!(fields(Some("grpc")), BTreeSet::from(["timeout"]));
        assert_eq!(fields(None), BTreeSet::from(["timeout", "idleTimeout"]));
        // A whole section: every field under it.
        assert_eq!(
            envoy_fields(ResourceType::MeshRetry, &["tcp".to_owned()], Some("tcp")),
            BTreeSet::from(["maxConnectAttempts"])
        );
        assert!(
            envoy_fields(ResourceType::MeshRetry, &["http".to_owned()], Some("tcp")).is_empty()
        );
        // Unlisted: every field of the type.
        assert_eq!(
            envoy_fields(
                ResourceType::MeshHealthCheck,
                &["interval".to_owned()],
                Some("kafka")
            ),
            BTreeSet::from(["healthyPanicThreshold", "zoneAwareLbConfig"])
        );
    }
}
