//! Kuma's `InspectRules` document (`api.yaml`), shared by the zone's per-DPP `_rules` and both
//! CPs' `GET /meshes/{mesh}/meshgateways/{name}/_rules` ([`gateway_rules`]): the matched rules
//! per policy type ([`rules_doc`]) and `httpMatches` ([`http_matches`]), over a mesh's
//! resources, in a view. Builtin gateways are matched as Kuma matches them (the policies
//! selecting their listeners: [`PolicySet::matched_with_gateways`]). Also the `shadow` and
//! `include` query parameters every inspect answer takes ([`InspectQuery`]).

use serde_json::{json, Value};
use umbra_core::dataplane::{DataplaneSpec, InboundKey};
use umbra_core::policies::mesh_http_route::hash_matches;
use umbra_core::resource::{Resource, ResourceType, Spec, TypeKind};
use umbra_core::rules::{Rule, Rules};
use umbra_core::view::{PolicySet, View};

use crate::error::ApiError;

/// Parsed `shadow` and `include` query parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InspectQuery {
    /// `shadow=true`.
    pub shadow: bool,
    /// `include=diff`.
    pub diff: bool,
}

impl InspectQuery {
    /// Parse the query pairs: `shadow` must be `true`/`false`; `include` (repeatable or
    /// comma-separated) may only hold `diff`.
    ///
    /// # Errors
    /// A 400 naming the parameter.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut q = Self::default();
        for (k, v) in pairs {
            match k.as_str() {
                "shadow" => {
                    q.shadow =
                        crate::paging::one_of("shadow", v, &[("true", true), ("false", false)])?
                }
                "include" => {
                    for part in v.split(',').filter(|p| !p.is_empty()) {
                        if part != "diff" {
                            return Err(ApiError::bad_parameter(
                                "include",
                                format!("unsupported value {part:?}; allowed: diff"),
                            ));
                        }
                        q.diff = true;
                    }
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

/// Kuma's `httpMatches` (`HttpMatch` in Kuma's `common/resource.yaml`: `{hash: string,
/// match: object}`): for every rule of the MeshHTTPRoute `to` rules of `dp`, one entry per
/// element of the rule's `matches`, `{hash, match: <that one Match>}`. `hash` is the rule's
/// [`hash_matches`] (the name of its Envoy routes and the `__rule-matches-hash__` value
/// policies on the route use), so it repeats for a rule with several matches. Sorted by hash,
/// then by the match's index in the rule; a rule met twice (same hash) is listed once.
///
/// Kuma itself sends the whole `matches` array as `match`, which its own schema (`type:
/// object`) rejects; Umbra sends what the schema describes.
pub fn http_matches(dp: &DataplaneSpec, set: &PolicySet) -> Value {
    let mut by_hash = std::collections::BTreeMap::new();
    for rule in &set
        .matched_with_gateways(ResourceType::MeshHTTPRoute, dp)
        .to_rules
        .0
    {
        for r in rule
            .conf
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let matches = r.get("matches").cloned().unwrap_or_else(|| json!([]));
            let typed: Vec<umbra_core::policies::mesh_http_route::Match> =
                serde_json::from_value(matches.clone()).unwrap_or_default();
            let hash = hash_matches(&typed);
            if let Value::Array(list) = matches {
                for (i, m) in list.into_iter().enumerate() {
                    by_hash.insert((hash.clone(), i), m);
                }
            }
        }
    }
    Value::Array(
        by_hash
            .into_iter()
            .map(|((hash, _), m)| json!({"hash": hash, "match": m}))
            .collect(),
    )
}

/// A merged conf as the answers send it: Kuma's schema wants an object (`conf: type:
/// object`); a conf is always one, and anything else (a defect) is sent as `{}`.
fn conf_json(conf: &Value) -> Value {
    debug_assert!(conf.is_object(), "a merged conf is an object: {conf}");
    if conf.is_object() {
        conf.clone()
    } else {
        json!({})
    }
}

fn origin_json(r: &Rule) -> Value {
    r.origin
        .iter()
        .map(|o| json!({"type": o.type_name, "mesh": o.meta.mesh, "name": o.meta.name}))
        .collect()
}

/// Kuma's `Rule`: `{matchers: [{key, value, not}], conf, origin: [Meta]}`.
fn rule_json(r: &Rule) -> Value {
    json!({
        "matchers": r.subset.0.iter().map(|t| json!({"key": t.key, "value": t.value, "not": t.not})).collect::<Vec<_>>(),
        "conf": conf_json(&r.conf),
        "origin": origin_json(r),
    })
}

fn rules_json(rules: &Rules) -> Value {
    Value::Array(rules.0.iter().map(rule_json).collect())
}

/// Kuma's `Inbound` of a `fromRules` entry: `{tags, port}`, plus Umbra's `address` (the
/// schema allows extra members). `tags` are those of the inbound with this key, or the
/// gateway's tags for a gateway DPP (as Kuma), `{}` when no inbound has the key.
fn inbound_json(dp: &DataplaneSpec, key: &InboundKey) -> Value {
    let tags = match &dp.networking.gateway {
        Some(gw) => Some(&gw.tags),
        None => dp
            .networking
            .inbound
            .iter()
            .find(|i| dp.inbound_key(i) == *key)
            .map(|i| &i.tags),
    };
    json!({
        "tags": tags.cloned().unwrap_or_default(),
        "port": key.port,
        "address": key.address,
    })
}

/// The `rules` of `_rules`: one Kuma `InspectRule` per targetRef policy type that produces a
/// rule for `dp` — `{type, toRules: [Rule], fromRules: [{inbound, rules}], proxyRule?: {conf,
/// origin}, warnings: [string]}` (Kuma's `common/resource.yaml`). As Kuma: an inbound whose
/// from rules are empty is not listed (Kuma's `meshhttproute` `_rules` golden), a type with
/// no to rule, no inbound in its from rules and no proxy rule is left out (the selecting
/// policies of such a type are in `notGenerated` when they matter), and `proxyRule` is the
/// first single-item rule, absent when there is none.
pub fn rules_doc(resources: &[Resource], mesh: &str, dp: &DataplaneSpec, view: View) -> Value {
    let set = PolicySet::build(mesh, resources, view);
    let mut rules = Vec::new();
    for ty in ResourceType::ALL
        .iter()
        .copied()
        .filter(|t| t.kind() == TypeKind::NewPolicy)
    {
        let m = set.matched_with_gateways(ty, dp);
        let from: Vec<Value> = m
            .from_rules
            .iter()
            .filter(|(_, r)| !r.0.is_empty())
            .map(|(k, r)| json!({"inbound": inbound_json(dp, k), "rules": rules_json(r)}))
            .collect();
        let proxy = m.single_item_rules.0.first();
        if m.to_rules.0.is_empty() && from.is_empty() && proxy.is_none() {
            continue;
        }
        let mut entry = json!({
            "type": ty.name(),
            "toRules": rules_json(&m.to_rules),
            "fromRules": from,
            "warnings": m.warnings,
        });
        if let Some(p) = proxy {
            entry["proxyRule"] = json!({"conf": conf_json(&p.conf), "origin": origin_json(p)});
        }
        rules.push(entry);
    }
    Value::Array(rules)
}

/// `GET /meshes/{mesh}/meshgateways/{name}/_rules` (Kuma 2.7.29 `rulesForResource`): the rules
/// of a builtin gateway DPP this MeshGateway would select: a `BUILTIN` Dataplane whose gateway
/// tags are the MeshGateway's first selector's (as Kuma builds it), over `resources` (the
/// mesh's) in the query's view: `{resource: {type: MeshGateway, mesh, name}, rules,
/// httpMatches}`, with `include=diff` the RFC 6902 diff from the live `rules`.
///
/// # Errors
/// 404 for an unknown mesh or MeshGateway; 400 for a MeshGateway without selectors.
pub fn gateway_rules(
    resources: &[Resource],
    mesh: &str,
    name: &str,
    q: InspectQuery,
) -> Result<Value, ApiError> {
    if !resources
        .iter()
        .any(|r| r.ty() == ResourceType::Mesh && r.meta.name == mesh)
    {
        return Err(ApiError::not_found(format!("mesh {mesh:?} not found")));
    }
    let gateway = resources
        .iter()
        .find_map(|r| match &r.spec {
            Spec::Selected(ResourceType::MeshGateway, g) if r.meta.name == name => Some(g),
            _ => None,
        })
        .ok_or_else(|| {
            ApiError::not_found(format!("MeshGateway {name:?} not found in mesh {mesh:?}"))
        })?;
    let Some(selector) = gateway.selectors.first() else {
        return Err(ApiError::bad_parameter(
            "selectors",
            "no selectors on MeshGateway: its rules cannot be computed",
        ));
    };
    let dp: DataplaneSpec = serde_json::from_value(json!({
        "networking": {
            "address": "",
            "gateway": {"type": "BUILTIN", "tags": selector.match_tags},
        },
    }))
    .map_err(|e| {
        ApiError::status(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("a gateway Dataplane for MeshGateway {name:?}: {e}"),
        )
    })?;
    let live = rules_doc(resources, mesh, &dp, View::Live);
    let view = if q.shadow { View::Shadow } else { View::Live };
    let rules = if q.shadow {
        rules_doc(resources, mesh, &dp, View::Shadow)
    } else {
        live.clone()
    };
    let mut body = json!({
        "resource": {"type": "MeshGateway", "mesh": mesh, "name": name},
        "httpMatches": http_matches(&dp, &PolicySet::build(mesh, resources, view)),
        "rules": rules,
    });
    if q.diff {
        body["diff"] = serde_json::to_value(json_patch::diff(&live, &body["rules"]))
            .unwrap_or_else(|_| json!([]));
    }
    Ok(body)
}
