//! Rules: Kuma 2.7's subset algebra and rule building (`pkg/plugins/policies/core/rules`).
//!
//! A [`Rule`] says "for traffic whose peer tags fall in [`Subset`], use this merged conf". `from`
//! rules describe clients of an inbound, `to` rules describe destinations. Building them:
//!
//! 1. every policy item (in precedence order) becomes a subset of its `targetRef`
//!    (`Mesh` → `[]`, `MeshService` → `kuma.io/service=name`, subsets add their tags);
//! 2. fast path (no negations wanted and at most one tag key in play): one rule per distinct
//!    subset, most tags first;
//! 3. otherwise: a graph of intersecting subsets, its maximal cliques (Bron–Kerbosch), and for
//!    each clique every combination of its tags with negations (`version=v1`, `version!=v1`...);
//! 4. each combination gets the merge ([`crate::merge`]) of every item whose subset contains it;
//! 5. rules are stably sorted by number of positive tags, most first.
//!
//! [`Rules::compute`] returns the first rule whose subset contains an element's tags.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::merge::merge_confs;
use crate::resource::Meta;
use crate::target_ref::{TargetRef, TargetRefKind, SERVICE_TAG};

/// Tag added by MeshHTTPRoute-targeted `to` items (Kuma's `RuleMatchesHashTag`).
pub const RULE_MATCHES_HASH_TAG: &str = "__rule-matches-hash__";

/// One tag condition: `key == value`, or `key != value` when `not`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Tag {
    /// Tag name.
    pub key: String,
    /// Tag value.
    pub value: String,
    /// Negation.
    pub not: bool,
}

impl Tag {
    /// `key == value`.
    pub fn eq(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            not: false,
        }
    }

    /// `key != value`.
    pub fn ne(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            not: true,
        }
    }
}

/// A set of proxies described by tag conditions (all must hold). Empty = everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Subset(pub Vec<Tag>);

/// The tags of a concrete peer (client DPP or destination service).
pub type Element = BTreeMap<String, String>;

impl Subset {
    /// The subset of everything.
    pub fn all() -> Self {
        Self(Vec::new())
    }

    /// Number of non-negated tags.
    pub fn num_positive(&self) -> usize {
        self.0.iter().filter(|t| !t.not).count()
    }

    /// Kuma's `ContainsElement`: does the peer with `element` tags belong to this subset?
    ///
    /// Keys of the subset absent from the element only matter for positive tags (which then
    /// fail). A subset of only negations contains elements that lack all its keys.
    pub fn contains_element(&self, element: &Element) -> bool {
        if self.0.is_empty() {
            return true;
        }
        if element.is_empty() {
            return false;
        }
        let mut overlap = false;
        for tag in &self.0 {
            match element.get(&tag.key) {
                Some(v) => {
                    overlap = true;
                    if (v == &tag.value) == tag.not {
                        return false;
                    }
                }
                None if !tag.not => return false,
                None => {}
            }
        }
        overlap || self.num_positive() == 0
    }

    /// Kuma's `IsSubset`: is `other` contained in `self` (every point of `other` is in `self`)?
    pub fn is_subset(&self, other: &Subset) -> bool {
        if self.0.is_empty() {
            return true;
        }
        self.0.iter().all(|t1| {
            let mut same_key = other.0.iter().filter(|t2| t2.key == t1.key).peekable();
            same_key.peek().is_some() && same_key.all(|t2| tag_is_subset(t1, t2))
        })
    }

    /// Kuma's `Intersect`: can one peer belong to both? Only positive tags with the same key and
    /// different values make two subsets disjoint.
    pub fn intersect(&self, other: &Subset) -> bool {
        if self.0.is_empty() || other.0.is_empty() {
            return true;
        }
        self.0.iter().filter(|t| !t.not).all(|t| {
            other
                .0
                .iter()
                .filter(|o| !o.not && o.key == t.key)
                .all(|o| o == t)
        })
    }

    /// Sort by (key, value, positive first), as Kuma's `Sorted`.
    pub fn sorted(mut self) -> Self {
        self.0
            .sort_by(|a, b| (&a.key, &a.value, a.not).cmp(&(&b.key, &b.value, b.not)));
        self
    }

    /// The subset a `targetRef` stands for, `None` for kinds that have no tag form
    /// (MeshGateway, MeshHTTPRoute, unknown).
    pub fn from_target_ref(r: &TargetRef) -> Option<Subset> {
        fn tags(tags: &BTreeMap<String, String>) -> impl Iterator<Item = Tag> + '_ {
            tags.iter().map(|(k, v)| Tag::eq(k, v))
        }
        Some(match r.kind() {
            TargetRefKind::Mesh => Subset::all(),
            TargetRefKind::MeshSubset => Subset(tags(&r.tags).collect()),
            TargetRefKind::MeshService => Subset(vec![Tag::eq(SERVICE_TAG, &r.name)]),
            TargetRefKind::MeshServiceSubset => {
                let mut v = vec![Tag::eq(SERVICE_TAG, &r.name)];
                v.extend(tags(&r.tags));
                Subset(v)
            }
            _ => return None,
        })
    }
}

fn tag_is_subset(t1: &Tag, t2: &Tag) -> bool {
    if t1.key != t2.key {
        return false;
    }
    match (t1.not, t2.not) {
        (a, b) if a == b => t1.value == t2.value,
        (true, false) => t1.value != t2.value,
        _ => false,
    }
}

/// A policy item ready for rule building: its `targetRef`, its `default` (JSON) and the
/// metadata of the policy it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Item<'a> {
    /// The item's targetRef (`from[i].targetRef`, `to[i].targetRef`, or `Mesh` for single items).
    pub target_ref: TargetRef,
    /// The item's `default`.
    pub conf: &'a Value,
    /// Origin policy: its type name and metadata.
    pub origin: &'a OriginMeta,
}

/// Identity of a policy that contributed to a rule: type name and metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginMeta {
    /// Policy type (`MeshTimeout`).
    pub type_name: String,
    /// Policy metadata.
    pub meta: Meta,
}

/// One rule: subset, merged conf and the distinct policies that gave it (sorted by name).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Peers this rule applies to.
    pub subset: Subset,
    /// Merged `default`.
    pub conf: Value,
    /// Contributing policies, by name ascending.
    pub origin: Vec<OriginMeta>,
}

/// Ordered rules; the first containing a peer wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Kuma's `Rules.Compute`: the first rule whose subset contains `element`.
    pub fn compute(&self, element: &Element) -> Option<&Rule> {
        self.0.iter().find(|r| r.subset.contains_element(element))
    }

    /// The conf for `element` deserialized as `T`.
    ///
    /// # Errors
    /// The serde error when the merged conf does not fit `T`.
    pub fn compute_conf<T: serde::de::DeserializeOwned>(
        &self,
        element: &Element,
    ) -> Result<Option<T>, serde_json::Error> {
        self.compute(element)
            .map(|r| serde_json::from_value(r.conf.clone()))
            .transpose()
    }

    /// `true` when there is no rule.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why rules could not be built (Kuma reports these as warnings and keeps no rules).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// An item's targetRef kind has no subset form.
    #[error("can't represent {0} as tags")]
    Unrepresentable(String),
    /// A policy targets a MeshHTTPRoute that does not exist.
    #[error("can't resolve MeshHTTPRoute policy")]
    UnresolvedRoute,
    /// More than [`MAX_ITEMS`] items, or more tag combinations (or cliques) than
    /// [`MAX_COMBINATIONS`], or more merge work than [`MAX_WORK`]: rule building is exponential in
    /// the number of distinct tags, so it is bounded.
    #[error("policies combine into too many items or tag subsets (limits: {MAX_ITEMS} items, {MAX_COMBINATIONS} subsets); split or simplify the from/to lists")]
    TooComplex,
}

/// Upper bound on cliques and on tag combinations evaluated by one [`build_rules`] call.
///
/// Kuma has no bound; a handful of `MeshSubset` items with many distinct tags would make it
/// enumerate millions of subsets. Real policies stay far below this (the Kuma fixtures need < 100).
pub const MAX_COMBINATIONS: usize = 65_536;

/// Upper bound on items (`from`/`to` entries of all matched policies) in one [`build_rules`]
/// call, and on `combinations × items`, the merge work. Kuma has neither bound.
pub const MAX_ITEMS: usize = 1_000;

/// Upper bound on `combinations × items` evaluated by one [`build_rules`] call.
pub const MAX_WORK: usize = 1 << 22;

/// Build rules from items in precedence order (Kuma's `BuildRules`).
///
/// `with_negations` is `true` for `from` rules; `to` and single-item rules use the fast path when
/// at most one tag key is involved.
///
/// # Errors
/// [`RulesError::Unrepresentable`] when an item's targetRef kind has no subset form.
pub fn build_rules(items: &[Item<'_>], with_negations: bool) -> Result<Rules, RulesError> {
    if items.len() > MAX_ITEMS {
        return Err(RulesError::TooComplex);
    }
    let subsets: Vec<Subset> = items
        .iter()
        .map(|i| {
            Subset::from_target_ref(&i.target_ref)
                .ok_or_else(|| RulesError::Unrepresentable(i.target_ref.kind().to_string()))
        })
        .collect::<Result<_, _>>()?;
    let keys: BTreeSet<&str> = subsets
        .iter()
        .flat_map(|s| s.0.iter().map(|t| t.key.as_str()))
        .collect();

    let mut rules = Vec::new();
    if !with_negations && keys.len() <= 1 {
        let mut seen = HashSet::new();
        for ss in &subsets {
            let ss = ss.clone().sorted();
            if seen.insert(ss.clone()) {
                rules.extend(create_rules(ss, items, &subsets));
            }
        }
        rules.sort_by_key(|r: &Rule| std::cmp::Reverse(r.subset.0.len()));
        return Ok(Rules(rules));
    }

    let n = subsets.len();
    let adjacency: Vec<BTreeSet<usize>> = (0..n)
        .map(|i| {
            (0..n)
                .filter(|&j| j != i && subsets[i].intersect(&subsets[j]))
                .collect()
        })
        .collect();
    let mut cliques = maximal_cliques(&adjacency).ok_or(RulesError::TooComplex)?;
    for c in &mut cliques {
        c.sort_unstable();
    }
    let key_of = |c: &Vec<usize>| c.iter().map(usize::to_string).collect::<Vec<_>>().join(":");
    cliques.sort_by_key(|c| std::cmp::Reverse(key_of(c)));

    // Size the whole enumeration before doing any of it.
    let iters: Vec<SubsetIter> = cliques
        .iter()
        .map(|clique| {
            SubsetIter::new(
                clique
                    .iter()
                    .flat_map(|&i| {
                        subsets[i]
                            .0
                            .iter()
                            .map(|t| (t.key.as_str(), t.value.as_str()))
                    })
                    .collect::<BTreeSet<_>>()
                    .into_iter(),
            )
        })
        .collect();
    let total = iters
        .iter()
        .try_fold(0usize, |acc, it| it.len().and_then(|n| acc.checked_add(n)));
    if total.is_none_or(|t| t > MAX_COMBINATIONS || t.saturating_mul(items.len()) > MAX_WORK) {
        return Err(RulesError::TooComplex);
    }
    for iter in iters {
        for combination in iter {
            rules.extend(create_rules(combination, items, &subsets));
        }
    }
    rules.sort_by_key(|r| std::cmp::Reverse(r.subset.num_positive()));
    Ok(Rules(rules))
}

/// The rules of subset `ss`: one, or for MeshHTTPRoute one per hostname its confs name (Kuma's
/// `MergeConfs` groups confs by their `mergeValues` field, `hostnames`: each conf joins the
/// group of each of its hostnames, with `hostnames` set to that one, or the group without
/// hostnames; groups in order of first appearance). Sidecar routes have no hostnames: one rule.
fn create_rules(ss: Subset, items: &[Item<'_>], subsets: &[Subset]) -> Vec<Rule> {
    let mut confs = Vec::new();
    let mut origins: BTreeMap<(String, String), &OriginMeta> = BTreeMap::new();
    for (item, item_subset) in items.iter().zip(subsets) {
        if item_subset.is_subset(&ss) {
            confs.push(item.conf);
            origins
                .entry((item.origin.meta.mesh.clone(), item.origin.meta.name.clone()))
                .or_insert(item.origin);
        }
    }
    // The merge depends on the conf type, as Kuma's reflection on `policyMerge` tags does:
    // MeshHTTPRoute merges its rules by `matches`.
    let route = items
        .first()
        .is_some_and(|i| i.origin.type_name == crate::resource::ResourceType::MeshHTTPRoute.name());
    let mut origin: Vec<OriginMeta> = origins.into_values().cloned().collect();
    origin.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    if !route {
        let Some(conf) = merge_confs(&confs) else {
            return Vec::new();
        };
        return vec![Rule {
            subset: ss,
            conf,
            origin,
        }];
    }
    let mut groups: Vec<(Option<String>, Vec<Value>)> = Vec::new();
    for conf in confs {
        let hostnames: Vec<String> = conf
            .get("hostnames")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let keys: Vec<Option<String>> = if hostnames.is_empty() {
            vec![None]
        } else {
            hostnames.into_iter().map(Some).collect()
        };
        for key in keys {
            let mut copy = conf.clone();
            if let (Some(h), Some(o)) = (&key, copy.as_object_mut()) {
                o.insert("hostnames".to_owned(), Value::from(vec![h.clone()]));
            }
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(copy),
                None => groups.push((key, vec![copy])),
            }
        }
    }
    groups
        .into_iter()
        .filter_map(|(_, confs)| {
            let refs: Vec<&Value> = confs.iter().collect();
            let conf = crate::policies::mesh_http_route::merge_confs(&refs)?;
            Some(Rule {
                subset: ss.clone(),
                conf,
                origin: origin.clone(),
            })
        })
        .collect()
}

/// All maximal cliques (Bron–Kerbosch with pivoting), each found once; `None` when there are
/// more than [`MAX_COMBINATIONS`] (the search stops there).
fn maximal_cliques(adj: &[BTreeSet<usize>]) -> Option<Vec<Vec<usize>>> {
    let mut out = Vec::new();
    let p: BTreeSet<usize> = (0..adj.len()).collect();
    bron_kerbosch(adj, &mut Vec::new(), p, BTreeSet::new(), &mut out);
    (out.len() <= MAX_COMBINATIONS).then_some(out)
}

fn bron_kerbosch(
    adj: &[BTreeSet<usize>],
    r: &mut Vec<usize>,
    mut p: BTreeSet<usize>,
    mut x: BTreeSet<usize>,
    out: &mut Vec<Vec<usize>>,
) {
    if out.len() > MAX_COMBINATIONS {
        return;
    }
    if p.is_empty() && x.is_empty() {
        if !r.is_empty() {
            out.push(r.clone());
        }
        return;
    }
    // Tomita pivot: the vertex of P ∪ X with most neighbours in P.
    let pivot = p
        .iter()
        .chain(x.iter())
        .copied()
        .max_by_key(|u| adj[*u].intersection(&p).count());
    let candidates: Vec<usize> = match pivot {
        Some(u) => p.difference(&adj[u]).copied().collect(),
        None => p.iter().copied().collect(),
    };
    for v in candidates {
        r.push(v);
        let np = p.intersection(&adj[v]).copied().collect();
        let nx = x.intersection(&adj[v]).copied().collect();
        bron_kerbosch(adj, r, np, nx, out);
        r.pop();
        p.remove(&v);
        x.insert(v);
    }
}

/// Kuma's `SubsetIter`: all combinations of a clique's tags with negations.
///
/// Keys in sorted order are digits, the first changing fastest; a key with `n` values has
/// states `0..=n`: state `s < n` is the positive tag `vals[n-1-s]`, state `n` negates every value.
/// The sequence starts after incrementing from all zeros and ends with the all-zero combination.
pub struct SubsetIter {
    dims: Vec<(String, Vec<String>)>,
    idx: Vec<usize>,
    finished: bool,
}

impl SubsetIter {
    /// Iterate over `(key, value)` pairs sorted by key then value.
    pub fn new<'a>(tags: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut dims: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in tags {
            match dims.iter_mut().find(|(dk, _)| dk == k) {
                Some((_, vals)) => {
                    if !vals.iter().any(|x| x == v) {
                        vals.push(v.to_owned());
                    }
                }
                None => dims.push((k.to_owned(), vec![v.to_owned()])),
            }
        }
        let idx = vec![0; dims.len()];
        Self {
            dims,
            idx,
            finished: false,
        }
    }

    /// Number of combinations this iterator yields (product of `values + 1` per key), `None` on
    /// overflow.
    pub fn len(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |acc, (_, vals)| acc.checked_mul(vals.len() + 1))
    }

    /// `true` when the iterator yields nothing (never: even no keys yield the empty subset).
    pub fn is_empty(&self) -> bool {
        false
    }

    fn current(&self) -> Subset {
        let mut out = Vec::new();
        for ((key, vals), &ch) in self.dims.iter().zip(&self.idx) {
            if ch == vals.len() {
                out.extend(vals.iter().map(|v| Tag::ne(key, v)));
            } else {
                out.push(Tag::eq(key, &vals[vals.len() - ch - 1]));
            }
        }
        Subset(out)
    }
}

impl Iterator for SubsetIter {
    type Item = Subset;
    fn next(&mut self) -> Option<Subset> {
        if self.finished {
            return None;
        }
        for i in 0..self.idx.len() {
            let radix = self.dims[i].1.len() + 1;
            self.idx[i] += 1;
            if self.idx[i] < radix {
                return Some(self.current());
            }
            self.idx[i] = 0;
        }
        self.finished = true;
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn el(pairs: &[(&str, &str)]) -> Element {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn contains_element_matches_kuma_doc_example() {
        let ss = Subset(vec![
            Tag::ne("zone", "east"),
            Tag::eq("service", "frontend"),
        ]);
        assert!(ss.contains_element(&el(&[("service", "frontend"), ("version", "zone1")])));
        assert!(!ss.contains_element(&el(&[("service", "frontend"), ("zone", "east")])));
        assert!(!ss.contains_element(&el(&[("version", "v1")])));
        assert!(Subset(vec![Tag::ne("zone", "east")]).contains_element(&el(&[("a", "b")])));
        assert!(Subset::all().contains_element(&el(&[])));
        assert!(!Subset(vec![Tag::ne("zone", "east")]).contains_element(&el(&[])));
    }

    #[test]
    fn intersect_examples_from_kuma_docs() {
        let a = Subset(vec![Tag::eq("team", "team-a")]);
        let b = Subset(vec![Tag::eq("zone", "east")]);
        let c = Subset(vec![Tag::eq("team", "team-b"), Tag::eq("zone", "east")]);
        assert!(a.intersect(&b));
        assert!(!a.intersect(&c));
        assert!(Subset::all().intersect(&c));
    }

    #[test]
    fn hostile_item_lists_are_refused_not_enumerated() {
        // 20 MeshSubset items with distinct keys all intersect: 2^20 combinations.
        let o = origin("p");
        let conf = json!({});
        let refs: Vec<TargetRef> = (0..20)
            .map(|i| TargetRef::mesh_subset(BTreeMap::from([(format!("k{i}"), "v".to_owned())])))
            .collect();
        let items: Vec<Item<'_>> = refs
            .iter()
            .map(|r| Item {
                target_ref: r.clone(),
                conf: &conf,
                origin: &o,
            })
            .collect();
        assert_eq!(build_rules(&items, true), Err(RulesError::TooComplex));
        // Too many items at all, even simple ones.
        let many: Vec<Item<'_>> = (0..=MAX_ITEMS)
            .map(|_| Item {
                target_ref: TargetRef::mesh(),
                conf: &conf,
                origin: &o,
            })
            .collect();
        assert_eq!(build_rules(&many, false), Err(RulesError::TooComplex));
        // ...while 10 of them (1,024 combinations) are fine.
        assert_eq!(
            build_rules(&items[..10], true).unwrap().0.len(),
            1023,
            "every combination but the all-negated one"
        );
    }

    #[test]
    fn subset_iter_order() {
        let tags = [("a", "1"), ("a", "2"), ("b", "x")];
        let got: Vec<String> = SubsetIter::new(tags.into_iter())
            .map(|s| {
                s.0.iter()
                    .map(|t| format!("{}{}{}", t.key, if t.not { "!=" } else { "=" }, t.value))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        assert_eq!(
            got,
            [
                "a=1,b=x",
                "a!=1,a!=2,b=x",
                "a=2,b!=x",
                "a=1,b!=x",
                "a!=1,a!=2,b!=x",
                "a=2,b=x"
            ]
        );
    }

    fn origin(name: &str) -> OriginMeta {
        OriginMeta {
            type_name: "MeshTrafficPermission".into(),
            meta: Meta {
                mesh: "m".into(),
                name: name.into(),
                ..Meta::default()
            },
        }
    }

    #[test]
    fn seed_002_merging_example() {
        // Mesh-level policy then MeshSubset-level policy, `from` items concatenated.
        let o1 = origin("p1");
        let o2 = origin("p2");
        let c = [
            json!({"http": {"requestTimeout": "5s"}}),
            json!({"http": {"requestTimeout": "10s", "idleTimeout": "5s"}}),
            json!({"http": {"requestTimeout": "3s"}}),
            json!({"http": {"requestTimeout": "2s"}}),
        ];
        let items = vec![
            Item {
                target_ref: TargetRef::mesh_service("incomingServiceB"),
                conf: &c[0],
                origin: &o1,
            },
            Item {
                target_ref: TargetRef::mesh_service("incomingServiceC"),
                conf: &c[1],
                origin: &o1,
            },
            Item {
                target_ref: TargetRef::mesh_service("incomingServiceA"),
                conf: &c[2],
                origin: &o2,
            },
            Item {
                target_ref: TargetRef::mesh_service("incomingServiceC"),
                conf: &c[3],
                origin: &o2,
            },
        ];
        let rules = build_rules(&items, true).unwrap();
        let conf = |svc: &str| {
            rules
                .compute(&el(&[(SERVICE_TAG, svc)]))
                .map(|r| r.conf.clone())
        };
        assert_eq!(
            conf("incomingServiceC"),
            Some(json!({"http": {"requestTimeout": "2s", "idleTimeout": "5s"}}))
        );
        assert_eq!(
            conf("incomingServiceB"),
            Some(json!({"http": {"requestTimeout": "5s"}}))
        );
        assert_eq!(
            conf("incomingServiceA"),
            Some(json!({"http": {"requestTimeout": "3s"}}))
        );
        assert_eq!(conf("other"), None);
    }

    fn arb_target_ref() -> impl Strategy<Value = TargetRef> {
        let tags = proptest::collection::btree_map("[kv]", "[12]", 0..3);
        prop_oneof![
            Just(TargetRef::mesh()),
            "[ab]".prop_map(TargetRef::mesh_service),
            tags.clone()
                .prop_filter("non-empty", |t| !t.is_empty())
                .prop_map(TargetRef::mesh_subset),
            ("[ab]", tags).prop_map(|(n, t)| TargetRef::mesh_service_subset(n, t)),
        ]
    }

    fn arb_element() -> impl Strategy<Value = Element> {
        (
            proptest::option::of("[ab]"),
            proptest::option::of("[12]"),
            proptest::option::of("[12]"),
        )
            .prop_map(|(s, k, v)| {
                let mut e = Element::new();
                if let Some(s) = s {
                    e.insert(SERVICE_TAG.into(), s);
                }
                if let Some(k) = k {
                    e.insert("k".into(), k);
                }
                if let Some(v) = v {
                    e.insert("v".into(), v);
                }
                e
            })
    }

    /// Brute force: the merge of every item whose targetRef selects the peer, in order.
    fn brute_force(items: &[Item<'_>], el: &Element) -> Option<Value> {
        let selected: Vec<&Value> = items
            .iter()
            .filter(|i| {
                Subset::from_target_ref(&i.target_ref)
                    .unwrap()
                    .0
                    .iter()
                    .all(|t| el.get(&t.key) == Some(&t.value))
            })
            .map(|i| i.conf)
            .collect();
        merge_confs(&selected)
    }

    fn confs(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"order": [i], format!("f{i}"): i}))
            .collect()
    }

    /// Kuma's clique algorithm answers per clique; when items from different cliques overlap on
    /// a peer, the first rule by positive-tag count wins even if it misses some items. This is
    /// Kuma 2.7's behaviour (Umbra reproduces it; the conformance fixtures depend on the order).
    #[test]
    fn multi_clique_answers_follow_kuma_not_brute_force() {
        let o = origin("p");
        let c = confs(3);
        let refs = [
            TargetRef::mesh_service_subset("b", BTreeMap::new()),
            TargetRef::mesh_service_subset("a", BTreeMap::from([("v".to_owned(), "1".to_owned())])),
            TargetRef::mesh(),
        ];
        let items: Vec<Item<'_>> = refs
            .iter()
            .zip(&c)
            .map(|(r, c)| Item {
                target_ref: r.clone(),
                conf: c,
                origin: &o,
            })
            .collect();
        let rules = build_rules(&items, true).unwrap();
        let peer = el(&[(SERVICE_TAG, "b"), ("v", "1")]);
        assert_eq!(
            rules.compute(&peer).unwrap().subset,
            Subset(vec![Tag::ne(SERVICE_TAG, "a"), Tag::eq("v", "1")])
        );
        assert_ne!(
            rules.compute(&peer).map(|r| r.conf.clone()),
            brute_force(&items, &peer)
        );
    }

    proptest! {
        /// With one tag key (Mesh and MeshService items, the usual `from` case) `compute` agrees
        /// with brute force for every peer, with or without negations.
        #[test]
        fn compute_agrees_with_brute_force_single_key(
            names in proptest::collection::vec(proptest::option::of("[abc]"), 1..7),
            peer in "[abcd]",
            negations in any::<bool>(),
        ) {
            let o = origin("p");
            let c = confs(names.len());
            let refs: Vec<TargetRef> = names.iter().map(|n| n.as_ref().map_or_else(TargetRef::mesh, |n| TargetRef::mesh_service(n.as_str()))).collect();
            let items: Vec<Item<'_>> = refs.iter().zip(&c).map(|(r, c)| Item { target_ref: r.clone(), conf: c, origin: &o }).collect();
            let rules = build_rules(&items, negations).unwrap();
            // Every DPP has a `kuma.io/service` tag; Kuma never matches a tagless peer against a
            // negated subset, so peers always carry it.
            let el = Element::from([(SERVICE_TAG.to_owned(), peer)]);
            prop_assert_eq!(rules.compute(&el).map(|r| r.conf.clone()), brute_force(&items, &el));
        }

        /// When all items can apply to one peer together (one clique), `compute` agrees with
        /// brute force for every peer that carries all the keys in play.
        #[test]
        fn compute_agrees_with_brute_force_one_clique(refs in proptest::collection::vec(arb_target_ref(), 1..5), s in "[ab]", k in "[12]", v in "[12]") {
            let el = Element::from([(SERVICE_TAG.to_owned(), s), ("k".to_owned(), k), ("v".to_owned(), v)]);
            let subsets: Vec<Subset> = refs.iter().map(|r| Subset::from_target_ref(r).unwrap()).collect();
            prop_assume!(subsets.iter().all(|a| subsets.iter().all(|b| a.intersect(b))));
            let o = origin("p");
            let c = confs(refs.len());
            let items: Vec<Item<'_>> = refs.iter().zip(&c).map(|(r, c)| Item { target_ref: r.clone(), conf: c, origin: &o }).collect();
            let rules = build_rules(&items, true).unwrap();
            prop_assert_eq!(rules.compute(&el).map(|r| r.conf.clone()), brute_force(&items, &el));
        }

        /// Whatever the items, a rule never carries the conf of an item that does not select the
        /// peer it is computed for.
        #[test]
        fn compute_never_uses_unselected_items(refs in proptest::collection::vec(arb_target_ref(), 1..6), el in arb_element()) {
            let o = origin("p");
            let c = confs(refs.len());
            let items: Vec<Item<'_>> = refs.iter().zip(&c).map(|(r, c)| Item { target_ref: r.clone(), conf: c, origin: &o }).collect();
            let rules = build_rules(&items, true).unwrap();
            if let Some(rule) = rules.compute(&el) {
                for (i, item) in items.iter().enumerate() {
                    let selects = Subset::from_target_ref(&item.target_ref).unwrap().0.iter().all(|t| el.get(&t.key) == Some(&t.value));
                    if rule.conf.get(format!("f{i}")).is_some() {
                        prop_assert!(selects, "item {} does not select {:?}", i, el);
                    }
                }
            }
        }

        #[test]
        fn is_subset_is_reflexive_and_transitive(a in arb_target_ref(), b in arb_target_ref(), c in arb_target_ref()) {
            let (a, b, c) = (
                Subset::from_target_ref(&a).unwrap(),
                Subset::from_target_ref(&b).unwrap(),
                Subset::from_target_ref(&c).unwrap(),
            );
            prop_assert!(a.is_subset(&a));
            prop_assert!(Subset::all().is_subset(&a));
            prop_assert!(a.intersect(&a));
            if a.is_subset(&b) && b.is_subset(&c) {
                prop_assert!(a.is_subset(&c));
            }
            // a superset of b intersects everything b intersects
            if a.is_subset(&b) && b.intersect(&c) {
                prop_assert!(a.intersect(&c));
            }
        }
    }
}
