//! One family in one mesh ([`Group`]): what must win over what at the probe points, the
//! renames the solver gives, the points where the merge still differs from Kuma's pick
//! ([`Finding`]s), and the precedence note each conversion gets.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::families::{Family, Scope};
use super::fields::{diff_paths, envoy_fields};
use super::probes::{describe_tags, points, real_probes, synthetic_dataplane, target_tags, Probe};
use super::solve::{solve, Solved};
use crate::convert::model::{Conversion, ConvertError, Note, NoteKind};
use crate::dataplane::DataplaneSpec;
use crate::matching::{precedence as merge_order, select, tags_match};
use crate::merge::merge_confs;
use crate::old::Selector;
use crate::old_matching::{
    dataplane_matches, parse_rfc3339, select_connection_policies, select_dataplane_policy,
    OldPolicyRef, Rank,
};
use crate::policy::TargetRefPolicy;
use crate::resource::{Resource, ResourceType, DISPLAY_NAME_LABEL};
use crate::rules::Subset;
use crate::target_ref::{TargetRefKind, SERVICE_TAG};

/// Findings quoted in one note's message (the rest are counted).
const MAX_QUOTED: usize = 3;

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

/// The outputs of one family's policies in one mesh, and the policies they come from.
pub(super) struct Group<'a> {
    fam: Family,
    policies: Vec<&'a Resource>,
    /// `results` index of each policy.
    result_of: Vec<usize>,
    outs: Vec<Out>,
}

impl<'a> Group<'a> {
    pub(super) fn new(
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

    pub(super) fn run(
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
