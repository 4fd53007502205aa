//! The `targetRef` policies that apply to a builtin gateway, per listener port (Kuma 2.7.29
//! `pkg/plugins/policies/core/matchers/dataplane.go` `dppSelectedByPolicy` /
//! `inboundsSelectedByTags` for gateways, and `rules.BuildGatewayRules`).
//!
//! A policy's top-level `targetRef` selects a gateway *listener* when the listener's merged
//! tags (the DPP's gateway tags, the MeshGateway's `tags`, the listener's own:
//! [`crate::gateway::SelectedGateway::listeners`]) match:
//! - `Mesh` / `MeshSubset` (`tags`): every listener / those whose tags match, when
//!   `proxyTypes` allows `Gateway`;
//! - `MeshService` / `MeshServiceSubset`: `kuma.io/service: name` (and `tags`) on the listener;
//! - `MeshGateway`: the MeshGateway selecting the DPP by name, narrowed by `tags`;
//! - `MeshHTTPRoute`: what the route's own `targetRef` selects.
//!
//! Per listener port, the selecting policies in precedence order give `to` rules (from their
//! `to` items; a policy targeting a MeshHTTPRoute gives items under `__rule-matches-hash__`, as
//! for sidecars) and `from` rules.

use std::collections::BTreeMap;

use crate::dataplane::{DataplaneSpec, InboundKey};
use crate::gateway::SelectedGateway;
use crate::matching::{
    precedence, resolve_route, tags_match, to_items, MatchOptions, MatchedPolicies,
};
use crate::policy::TargetRefPolicy;
use crate::rules::{build_rules, Item, Rules};
use crate::target_ref::{ProxyType, TargetRef, TargetRefKind, SERVICE_TAG};

/// The policy types Umbra generates on builtin gateways (besides the routes: MeshHTTPRoute and
/// MeshTCPRoute attached to the MeshGateway); other types selecting one are named under
/// `notGenerated`.
pub const GENERATED_ON_GATEWAYS: &[crate::resource::ResourceType] = &[
    crate::resource::ResourceType::MeshRateLimit,
    crate::resource::ResourceType::MeshTimeout,
    crate::resource::ResourceType::MeshRetry,
    crate::resource::ResourceType::MeshCircuitBreaker,
    crate::resource::ResourceType::MeshHealthCheck,
    crate::resource::ResourceType::MeshFaultInjection,
    crate::resource::ResourceType::MeshAccessLog,
];

/// The policies of one type applying to a builtin gateway.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayRules<'a> {
    /// Policies selecting at least one listener, in precedence order (ascending).
    pub policies: Vec<&'a TargetRefPolicy>,
    /// `to` rules per listener port.
    pub to: BTreeMap<u32, Rules>,
    /// `from` rules per listener port (types with `from` only).
    pub from: BTreeMap<u32, Rules>,
    /// Problems that did not stop matching, Kuma's wording.
    pub warnings: Vec<String>,
}

/// The listener ports of `gateway` (selecting `dp`) that `target_ref` (of a policy in `mesh`)
/// selects (see the module docs).
///
/// # Errors
/// A warning text for an unresolvable MeshHTTPRoute or an unsupported kind.
pub fn selected_ports(
    mesh: &str,
    target_ref: &TargetRef,
    dp: &DataplaneSpec,
    gateway: &SelectedGateway,
    routes: &[&TargetRefPolicy],
) -> Result<Vec<u32>, String> {
    let by_tags = |selector: &BTreeMap<String, String>| -> Vec<u32> {
        let mut ports: Vec<u32> = gateway
            .listeners
            .iter()
            .filter(|l| tags_match(selector, &l.tags))
            .map(|l| l.port)
            .collect();
        ports.dedup();
        ports
    };
    let proxy_ok = |types: &[ProxyType]| types.is_empty() || types.contains(&dp.proxy_type());
    match target_ref.kind() {
        TargetRefKind::Mesh | TargetRefKind::MeshSubset => {
            Ok(if proxy_ok(&target_ref.proxy_types) {
                by_tags(&target_ref.tags)
            } else {
                Vec::new()
            })
        }
        TargetRefKind::MeshService | TargetRefKind::MeshServiceSubset => {
            let mut tags = target_ref.tags.clone();
            tags.insert(SERVICE_TAG.to_owned(), target_ref.name.clone());
            Ok(by_tags(&tags))
        }
        TargetRefKind::MeshGateway => Ok(if target_ref.name == gateway.name {
            by_tags(&target_ref.tags)
        } else {
            Vec::new()
        }),
        TargetRefKind::MeshHTTPRoute => {
            let route = resolve_route(mesh, &target_ref.name, routes).ok_or_else(|| {
                format!(
                    "couldn't resolve MeshHTTPRoute targetRef with name '{}'",
                    target_ref.name
                )
            })?;
            if route.target_ref.kind() == TargetRefKind::MeshHTTPRoute {
                return Err(
                    "MeshHTTPRoute targetRef may not point to another MeshHTTPRoute".to_owned(),
                );
            }
            selected_ports(&route.meta().mesh, &route.target_ref, dp, gateway, routes)
        }
        TargetRefKind::Unknown(k) => Err(format!("unsupported targetRef kind '{k}'")),
    }
}

/// Match `policies` (one type, the view's) against builtin gateway `dp` selected by `gateway`
/// and build its rules per listener port. `routes` are the view's MeshHTTPRoutes.
pub fn gateway_rules<'a>(
    dp: &DataplaneSpec,
    gateway: &SelectedGateway,
    policies: &'a [TargetRefPolicy],
    routes: &[&TargetRefPolicy],
    opts: MatchOptions,
) -> GatewayRules<'a> {
    let mut out = GatewayRules::default();
    let mut by_port: BTreeMap<u32, Vec<&TargetRefPolicy>> = BTreeMap::new();
    for p in policies {
        if !opts.include_shadow && p.meta().is_shadow() {
            continue;
        }
        match selected_ports(&p.meta().mesh, &p.target_ref, dp, gateway, routes) {
            Ok(ports) if !ports.is_empty() => {
                out.policies.push(p);
                for port in ports {
                    by_port.entry(port).or_default().push(p);
                }
            }
            Ok(_) => {}
            Err(e) => out.warnings.push(format!(
                "unable to resolve TargetRef on policy: mesh:{} name:{} error:{e:?}",
                p.meta().mesh,
                p.meta().name
            )),
        }
    }
    out.policies.sort_by(|a, b| precedence(a, b));
    for (port, mut ps) in by_port {
        ps.sort_by(|a, b| precedence(a, b));
        match to_items(&ps, routes).and_then(|items| build_rules(&items, false)) {
            Ok(r) => {
                out.to.insert(port, r);
            }
            Err(e) => out.warnings.push(format!("couldn't create To rules: {e}")),
        }
        if ps.iter().all(|p| p.caps.from) {
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
                    out.from.insert(port, r);
                }
                Err(e) => out
                    .warnings
                    .push(format!("couldn't create From rules: {e}")),
            }
        }
    }
    out
}

/// Kuma's `MatchedPolicies` of builtin gateway `dp` selected by `gateway` for one type, in the
/// shape sidecars get ([`MatchedPolicies`]), as `_rules` shows it: the policies selecting one
/// of its listeners, `to` rules over all of them (Kuma's `BuildToRules(dpPolicies)`), `from`
/// rules per listener port (keyed by the DPP's address and the port), single-item rules.
pub fn matched_policies<'a>(
    dp: &DataplaneSpec,
    gateway: &SelectedGateway,
    policies: &'a [TargetRefPolicy],
    routes: &[&TargetRefPolicy],
    opts: MatchOptions,
) -> MatchedPolicies<'a> {
    let by_port = gateway_rules(dp, gateway, policies, routes, opts);
    let mut warnings = by_port.warnings;
    let to_rules = match to_items(&by_port.policies, routes).and_then(|i| build_rules(&i, false)) {
        Ok(r) => r,
        Err(e) => {
            warnings.push(format!("couldn't create To rules: {e}"));
            Rules::default()
        }
    };
    let single_item_rules = if by_port.policies.iter().all(|p| p.caps.single) {
        let items: Vec<Item<'_>> = by_port
            .policies
            .iter()
            .filter_map(|p| {
                p.single.as_ref().map(|c| Item {
                    target_ref: TargetRef::mesh(),
                    conf: c,
                    origin: &p.origin,
                })
            })
            .collect();
        build_rules(&items, false).unwrap_or_else(|e| {
            warnings.push(format!("couldn't create top level rules: {e}"));
            Rules::default()
        })
    } else {
        Rules::default()
    };
    let from_rules = by_port
        .from
        .into_iter()
        .map(|(port, rules)| {
            let key = InboundKey {
                address: dp.networking.address.clone(),
                port,
            };
            (key, rules)
        })
        .collect();
    MatchedPolicies {
        dataplane_policies: by_port.policies,
        from_rules,
        to_rules,
        single_item_rules,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{Resource, ResourceType};
    use crate::view::{PolicySet, View};

    #[test]
    fn policies_select_gateway_listeners_by_their_merged_tags() {
        let resources = Resource::all_from_bytes(b"type: Mesh\nname: default\n---\ntype: MeshGateway\nmesh: default\nname: edge\nselectors: [{match: {kuma.io/service: edge}}]\nconf: {listeners: [{port: 8080, protocol: HTTP, tags: {port: http}}, {port: 9000, protocol: TCP}]}\n---\ntype: MeshRateLimit\nmesh: default\nname: on-gateway\nspec:\n  targetRef: {kind: MeshGateway, name: edge, tags: {port: http}}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {local: {http: {requestRate: {num: 1, interval: 10s}}}}\n---\ntype: MeshRateLimit\nmesh: default\nname: by-service\nspec:\n  targetRef: {kind: MeshService, name: edge}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {local: {tcp: {connectionRate: {num: 5, interval: 1s}}}}\n---\ntype: MeshRateLimit\nmesh: default\nname: sidecars-only\nspec:\n  targetRef: {kind: Mesh, proxyTypes: [Sidecar]}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {local: {tcp: {connectionRate: {num: 7, interval: 1s}}}}\n---\ntype: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 10.0.0.1\n  gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}\n").unwrap();
        let dp = resources.iter().find_map(Resource::as_dataplane).unwrap();
        let set = PolicySet::build("default", &resources, View::Live);
        let gateway = crate::gateway::selected(&set.stored, dp).unwrap();
        let policies = &set.new[&ResourceType::MeshRateLimit];
        let routes: Vec<&TargetRefPolicy> = set.routes.iter().collect();
        let rules = gateway_rules(dp, &gateway, policies, &routes, MatchOptions::default());
        let names: Vec<&str> = rules
            .policies
            .iter()
            .map(|p| p.meta().name.as_str())
            .collect();
        // MeshGateway ranks below MeshService; the Sidecar-only one selects nothing.
        assert_eq!(names, ["on-gateway", "by-service"]);
        let conf = |port: u32| {
            rules.to[&port]
                .compute(&crate::rules::Element::new())
                .map(|r| r.conf.clone())
                .unwrap()
        };
        assert!(conf(8080)["local"]["http"].is_object());
        assert!(
            conf(8080)["local"]["tcp"].is_object(),
            "merged: {}",
            conf(8080)
        );
        assert!(conf(9000)["local"]["http"].is_null());
        assert!(rules.warnings.is_empty());
    }
}
