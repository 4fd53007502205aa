//! Which `targetRef` policies select a DPP, in what precedence, and the `from`/`to`/single-item
//! rules they produce: Kuma 2.7's `MatchedPolicies` (`pkg/plugins/policies/core/matchers`).
//!
//! Selection by the top-level targetRef, per inbound:
//! - `Mesh`: every inbound (and a delegated gateway), if `proxyTypes` allows the DPP's type;
//! - `MeshSubset`: inbounds whose tags match `tags` (`*` matches any value), same proxy-type rule;
//!   a rollout sample tag selects the DPP as a whole or nothing of it ([`crate::sample`]);
//! - `MeshService`: inbounds with `kuma.io/service: name`;
//! - `MeshServiceSubset`: inbounds with the service *and* the tags (never a union of inbounds);
//! - `MeshHTTPRoute`: the route (same mesh, display name = `name`) selects with its own targetRef;
//! - `MeshGateway`: builtin gateways only, which Umbra does not run: selects nothing.
//!
//! Precedence (ascending, last wins): kind rank, then `kuma.io/origin` (global < none < zone),
//! then display name *descending* so the lexicographically smallest name wins. Shadow policies
//! are skipped unless [`MatchOptions::include_shadow`].

use std::collections::BTreeMap;

use crate::dataplane::{DataplaneSpec, InboundKey};
use crate::policies::mesh_http_route::hash_matches;
use crate::policy::TargetRefPolicy;
use crate::rules::{build_rules, Item, Rules, RulesError, RULE_MATCHES_HASH_TAG};
use crate::target_ref::{ProxyType, TargetRef, TargetRefKind, SERVICE_TAG};

/// Options for [`matched_policies`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatchOptions {
    /// Include policies labelled `kuma.io/effect: shadow` (the Shadow view).
    pub include_shadow: bool,
}

/// The result of matching one policy type against one DPP.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedPolicies<'a> {
    /// Policies selecting the DPP, in precedence order (ascending).
    pub dataplane_policies: Vec<&'a TargetRefPolicy>,
    /// Per selected inbound: rules from the `from` items of its policies.
    pub from_rules: BTreeMap<InboundKey, Rules>,
    /// Rules from the `to` items of all selecting policies.
    pub to_rules: Rules,
    /// Rules from single-item policies (`default` at the top, e.g. MeshProxyPatch).
    pub single_item_rules: Rules,
    /// Problems that did not stop matching (unresolvable references...), Kuma's wording.
    pub warnings: Vec<String>,
}

/// Kuma's `TagSelector.Matches`: every selector key present with an equal value or `*`.
pub fn tags_match(selector: &BTreeMap<String, String>, tags: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| tags.get(k).is_some_and(|t| v == "*" || v == t))
}

/// What a top-level targetRef selects on a DPP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Selected inbounds.
    pub inbounds: Vec<InboundKey>,
    /// The DPP is a delegated gateway whose gateway tags match.
    pub delegated_gateway: bool,
}

impl Selection {
    /// `true` when anything is selected.
    pub fn any(&self) -> bool {
        !self.inbounds.is_empty() || self.delegated_gateway
    }
}

fn select_by_tags(selector: Option<&BTreeMap<String, String>>, dp: &DataplaneSpec) -> Selection {
    let empty = BTreeMap::new();
    // A rollout sample selects the DPP as a whole, or nothing of it (crate::sample).
    let Some(selector) = crate::sample::strip(selector.unwrap_or(&empty), dp) else {
        return Selection::default();
    };
    let selector = selector.as_ref();
    let inbounds = dp
        .networking
        .inbound
        .iter()
        .filter(|i| tags_match(selector, &i.tags))
        .map(|i| dp.inbound_key(i))
        .collect();
    let delegated_gateway = dp.networking.gateway.as_ref().is_some_and(|g| {
        g.gateway_type != Some(crate::dataplane::GatewayType::Builtin)
            && tags_match(selector, &g.tags)
    });
    Selection {
        inbounds,
        delegated_gateway,
    }
}

/// Kuma's `dppSelectedByPolicy`: what `target_ref` (of a policy in `mesh`) selects on `dp`.
///
/// # Errors
/// A warning text for an unresolvable MeshHTTPRoute or an unsupported kind.
pub fn select(
    mesh: &str,
    target_ref: &TargetRef,
    dp: &DataplaneSpec,
    routes: &[&TargetRefPolicy],
) -> Result<Selection, String> {
    select_depth(mesh, target_ref, dp, routes, 0)
}

fn select_depth(
    mesh: &str,
    r: &TargetRef,
    dp: &DataplaneSpec,
    routes: &[&TargetRefPolicy],
    depth: u8,
) -> Result<Selection, String> {
    let proxy_ok = |types: &[ProxyType]| types.is_empty() || types.contains(&dp.proxy_type());
    match r.kind() {
        TargetRefKind::Mesh => Ok(if proxy_ok(&r.proxy_types) {
            select_by_tags(None, dp)
        } else {
            Selection::default()
        }),
        TargetRefKind::MeshSubset => Ok(if proxy_ok(&r.proxy_types) {
            select_by_tags(Some(&r.tags), dp)
        } else {
            Selection::default()
        }),
        TargetRefKind::MeshService => Ok(select_by_tags(
            Some(&BTreeMap::from([(SERVICE_TAG.to_owned(), r.name.clone())])),
            dp,
        )),
        TargetRefKind::MeshServiceSubset => {
            let mut tags = r.tags.clone();
            tags.insert(SERVICE_TAG.to_owned(), r.name.clone());
            Ok(select_by_tags(Some(&tags), dp))
        }
        TargetRefKind::MeshGateway => Ok(Selection::default()),
        TargetRefKind::MeshHTTPRoute => {
            let route = resolve_route(mesh, &r.name, routes).ok_or_else(|| {
                format!(
                    "couldn't resolve MeshHTTPRoute targetRef with name '{}'",
                    r.name
                )
            })?;
            if depth > 0 {
                return Err(
                    "MeshHTTPRoute targetRef may not point to another MeshHTTPRoute".to_owned(),
                );
            }
            select_depth(&route.meta().mesh, &route.target_ref, dp, routes, depth + 1)
        }
        TargetRefKind::Unknown(k) => Err(format!("unsupported targetRef kind '{k}'")),
    }
}

/// Kuma's `IsReferenced`: the first route in the same mesh whose display name is `name` (as
/// `dppSelectedByPolicy` resolves it).
pub fn resolve_route<'a>(
    mesh: &str,
    name: &str,
    routes: &[&'a TargetRefPolicy],
) -> Option<&'a TargetRefPolicy> {
    routes
        .iter()
        .copied()
        .find(|r| r.meta().mesh == mesh && r.meta().display_name() == name)
}

/// Kuma's `ByTargetRef` order: kind rank, origin rank, then display name descending.
pub fn precedence(a: &TargetRefPolicy, b: &TargetRefPolicy) -> std::cmp::Ordering {
    a.target_ref
        .kind()
        .rank()
        .cmp(&b.target_ref.kind().rank())
        .then(a.meta().origin_rank().cmp(&b.meta().origin_rank()))
        .then_with(|| {
            if a.target_ref.kind() == TargetRefKind::MeshGateway {
                a.target_ref.tags.len().cmp(&b.target_ref.tags.len())
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .then_with(|| b.meta().display_name().cmp(a.meta().display_name()))
}

/// Match the policies of one type against `dp` and build its rules (Kuma's `MatchedPolicies`).
///
/// `policies` are all policies of the type in the mesh; `routes` the mesh's MeshHTTPRoutes (used
/// only to resolve references). Pure and deterministic; problems become `warnings`.
pub fn matched_policies<'a>(
    dp: &DataplaneSpec,
    policies: &'a [TargetRefPolicy],
    routes: &[&TargetRefPolicy],
    opts: MatchOptions,
) -> MatchedPolicies<'a> {
    let mut warnings = Vec::new();
    let mut dp_policies: Vec<&TargetRefPolicy> = Vec::new();
    let mut by_inbound: BTreeMap<InboundKey, Vec<&TargetRefPolicy>> = BTreeMap::new();
    for p in policies {
        if !opts.include_shadow && p.meta().is_shadow() {
            continue;
        }
        let sel = match select(&p.meta().mesh, &p.target_ref, dp, routes) {
            Ok(s) => s,
            Err(e) => {
                warnings.push(format!(
                    "unable to resolve TargetRef on policy: mesh:{} name:{} error:{e:?}",
                    p.meta().mesh,
                    p.meta().name
                ));
                continue;
            }
        };
        if !sel.any() {
            continue;
        }
        dp_policies.push(p);
        for inbound in sel.inbounds {
            by_inbound.entry(inbound).or_default().push(p);
        }
    }
    dp_policies.sort_by(|a, b| precedence(a, b));
    for ps in by_inbound.values_mut() {
        ps.sort_by(|a, b| precedence(a, b));
    }

    let mut from_rules = BTreeMap::new();
    for (inbound, ps) in &by_inbound {
        if ps.iter().any(|p| !p.caps.from) {
            // Kuma returns no from rules at all for types without `from`.
            from_rules.clear();
            break;
        }
        let items: Vec<Item<'_>> = ps
            .iter()
            .flat_map(|p| {
                p.from.iter().map(move |i| Item {
                    target_ref: i.target_ref.clone(),
                    conf: &i.conf,
                    origin: &p.origin,
                })
            })
            .collect();
        match build_rules(&items, true) {
            Ok(r) => {
                from_rules.insert(inbound.clone(), r);
            }
            Err(e) => {
                warnings.push(format!("couldn't create From rules: {e}"));
                from_rules.clear();
                break;
            }
        }
    }

    let to_rules = match to_items(&dp_policies, routes).and_then(|items| build_rules(&items, false))
    {
        Ok(r) => r,
        Err(e) => {
            warnings.push(format!("couldn't create To rules: {e}"));
            Rules::default()
        }
    };

    let single_item_rules = if dp_policies.iter().all(|p| p.caps.single) {
        let items: Vec<Item<'_>> = dp_policies
            .iter()
            .filter_map(|p| {
                p.single.as_ref().map(|c| Item {
                    target_ref: TargetRef::mesh(),
                    conf: c,
                    origin: &p.origin,
                })
            })
            .collect();
        match build_rules(&items, false) {
            Ok(r) => r,
            Err(e) => {
                warnings.push(format!("couldn't create top level rules: {e}"));
                Rules::default()
            }
        }
    } else {
        Rules::default()
    };

    MatchedPolicies {
        dataplane_policies: dp_policies,
        from_rules,
        to_rules,
        single_item_rules,
        warnings,
    }
}

/// `to` items of the policies in order; a policy whose top-level targetRef is a MeshHTTPRoute
/// contributes one item per (route `to`, route rule, policy `to` item), targeting
/// `__rule-matches-hash__` (Kuma's `buildToList`).
///
/// # Errors
/// [`RulesError::UnresolvedRoute`] when the referenced route does not exist.
pub fn to_items<'a>(
    policies: &[&'a TargetRefPolicy],
    routes: &[&TargetRefPolicy],
) -> Result<Vec<Item<'a>>, RulesError> {
    let mut out = Vec::new();
    for p in policies {
        if !p.caps.to {
            continue;
        }
        if out.len().saturating_add(p.to.len()) > crate::rules::MAX_ITEMS {
            return Err(RulesError::TooComplex);
        }
        if p.target_ref.kind() != TargetRefKind::MeshHTTPRoute {
            out.extend(p.to.iter().map(|i| Item {
                target_ref: i.target_ref.clone(),
                conf: &i.conf,
                origin: &p.origin,
            }));
            continue;
        }
        // Kuma's buildToList keeps the *last* route with that display name.
        let route = routes
            .iter()
            .rev()
            .find(|r| {
                r.meta().mesh == p.meta().mesh && r.meta().display_name() == p.target_ref.name
            })
            .and_then(|r| r.route.clone())
            .ok_or(RulesError::UnresolvedRoute)?;
        let expanded: usize = route
            .to
            .iter()
            .map(|t| t.rules.len())
            .sum::<usize>()
            .saturating_mul(p.to.len());
        if out.len().saturating_add(expanded) > crate::rules::MAX_ITEMS {
            return Err(RulesError::TooComplex);
        }
        for route_to in &route.to {
            for rule in &route_to.rules {
                let hash = hash_matches(&rule.matches);
                for item in &p.to {
                    let tags = BTreeMap::from([(RULE_MATCHES_HASH_TAG.to_owned(), hash.clone())]);
                    let target_ref = match route_to.target_ref.kind() {
                        TargetRefKind::Mesh | TargetRefKind::MeshSubset => {
                            TargetRef::mesh_subset(tags)
                        }
                        _ => TargetRef::mesh_service_subset(route_to.target_ref.name.clone(), tags),
                    };
                    out.push(Item {
                        target_ref,
                        conf: &item.conf,
                        origin: &p.origin,
                    });
                }
            }
        }
    }
    Ok(out)
}
