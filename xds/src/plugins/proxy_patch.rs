//! MeshProxyPatch and the old ProxyTemplate: user-written modifications of the generated Envoy
//! clusters, listeners, network filters, HTTP filters and virtual hosts.
//!
//! **MeshProxyPatch** (Kuma 2.7 `pkg/plugins/policies/meshproxypatch/plugin/v1alpha1`, MADR
//! seed 001): the conf is the single-item rule computed for the empty element; the
//! `appendModifications` of every matching policy are concatenated, least specific policy first
//! (`umbra_core::merge`), and applied in order. Operations: `Add`, `Remove`, `Patch` for
//! clusters, listeners and virtual hosts; `AddFirst`, `AddLast`, `AddBefore`, `AddAfter`,
//! `Patch`, `Remove` for network and HTTP filters. Matching, as in Kuma:
//! - clusters by `name` and `origin`; listeners by `name`, `origin` and `tags` (a tag selector
//!   on the listener's `io.kuma.tags` metadata);
//! - filters by the listener's `listenerName`, `origin` and `listenerTags`, then the filter's
//!   `name`, in every filter chain; HTTP filters live in every HTTP connection manager of those
//!   chains; `AddBefore`/`AddAfter` insert next to the first filter named `match.name` and do
//!   nothing when there is none;
//! - virtual hosts by the listener's `origin`, the HCM's embedded route configuration name
//!   (`routeConfigurationName`) and `name` (RDS route configurations are not touched);
//! - an absent `match` matches everything.
//!
//! `Add` inserts the `value` under its name, replacing a resource of the same name, with origin
//! `mesh-proxy-patch`. `Patch` merges `value` with Kuma's `util_proto.Merge` (module `merge`:
//! repeated fields appended, messages merged, scalars overwritten, durations and `Any`s
//! replaced), or, when `jsonPatches` is set, applies RFC 6902 to the proto3-JSON form with
//! Kuma's options (module `json_patch`) and parses the result back. Filter patches merge (or
//! JSON-patch) the filter's `typedConfig`, as Kuma does.
//!
//! **ProxyTemplate** (Kuma 2.7 `pkg/xds/generator/modifications/v3`, `proxy_template.go`): the
//! one template selected for the DPP (`select_dataplane_policy`, over the templates in effect
//! and those a MeshProxyPatch supersedes: Kuma 2.7 applies both) contributes its raw
//! `resources` (added under their `name`, origin `proxy-template-raw`) and then its
//! `modifications` (lower-case operations, `""` match fields meaning "any", no `jsonPatches`,
//! origin `proxy-template-modifications`). As in Kuma, they run after every plugin, so after
//! MeshProxyPatch. `imports` are ignored: Umbra always generates the default sidecar
//! configuration (Kuma generates nothing for a template without `default-proxy`).
//!
//! Origins: Umbra's snapshot does not record them, so they are derived from the names
//! `generate` produces (`inbound:*` listeners and `localhost:*` clusters are `inbound`,
//! `outbound:*` listeners and other clusters `outbound`) and remembered for what this module
//! adds.
//!
//! Differences from Kuma, on purpose:
//! - a `value`, or the result of `jsonPatches`, with unknown fields is an error (Kuma's parser
//!   ignores unknown fields); so is an added cluster or listener without a name;
//! - every failure is a [`GenerateError::Policy`] naming the policy (`MeshProxyPatch/<name>`,
//!   `ProxyTemplate/<name>`) and the resource (`<typeUrl>/<name>`, `*` when no single resource
//!   is concerned) instead of a panic or a bare error: filters without a `typedConfig`,
//!   HTTP connection managers that do not decode, and type-URL mismatches included;
//! - JSON patches are bounded (operations, pointer length, depth, copied bytes).

mod edits;
mod engine;
mod json_patch;
mod merge;
mod model;

use umbra_core::matching::MatchedPolicies;
use umbra_core::old::proxy_template::{self as pt, Operation as PtOperation};
use umbra_core::old_matching::{select_dataplane_policy, OldPolicyRef};
use umbra_core::policies::mesh_proxy_patch::{self as mpp, ModOperation, ModificationKind};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::rules::{Element, Rule};

use self::engine::Engine;
use self::model::{Match, Modification, Op, Source};
use super::input::{Origins, PluginInput};
use crate::error::GenerateError;
use crate::snapshot::Snapshot;

/// Origin of resources MeshProxyPatch adds (Kuma's `meshproxypatch` plugin `Origin`).
pub const ORIGIN_MESH_PROXY_PATCH: &str = "mesh-proxy-patch";
/// Origin of resources ProxyTemplate modifications add (Kuma's
/// `OriginProxyTemplateModifications`).
pub const ORIGIN_PROXY_TEMPLATE_MODIFICATIONS: &str = "proxy-template-modifications";
/// Origin of ProxyTemplate raw resources (Kuma's `OriginProxyTemplateRaw`).
pub const ORIGIN_PROXY_TEMPLATE_RAW: &str = model::ORIGIN_RAW;

/// Apply MeshProxyPatch to `snap`: the `appendModifications` of the policies matching the DPP,
/// in order. Records the origin (`mesh-proxy-patch`) of what it adds in `origins`.
///
/// # Errors
/// The first [`GenerateError::Policy`] a modification reports; `snap` is then partly modified
/// and must be discarded (the caller keeps serving the last good snapshot).
pub fn apply_mesh_proxy_patch(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let mut engine = Engine::new(snap, origins);
    let matched = input
        .policies
        .matched_with_gateways(ResourceType::MeshProxyPatch, input.dataplane);
    let Some(rule) = matched.single_item_rules.compute(&Element::new()) else {
        return Ok(());
    };
    let conf: mpp::Conf =
        serde_json::from_value(rule.conf.clone()).map_err(|e| GenerateError::Policy {
            policy: rule_policies(rule),
            resource: "*".to_owned(),
            reason: format!("invalid conf: {e}"),
        })?;
    let mods = conf.modifications();
    let owners = owners(&matched, rule, mods.len());
    for (m, (owner, j)) in mods.iter().zip(owners) {
        let src = Source {
            policy: owner,
            label: format!("appendModifications[{j}]"),
            origin: ORIGIN_MESH_PROXY_PATCH,
        };
        let Some(modification) = from_mesh_proxy_patch(m) else {
            return Err(GenerateError::Policy {
                policy: src.policy,
                resource: "*".to_owned(),
                reason: format!("{}: invalid modification (no kind set)", src.label),
            });
        };
        engine.apply(&modification, &src)?;
    }
    Ok(())
}

/// `MeshProxyPatch/<name>` of every policy that made `rule`, comma-separated.
fn rule_policies(rule: &Rule) -> String {
    rule.origin
        .iter()
        .map(|o| format!("{}/{}", o.type_name, o.meta.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// For each merged modification, the policy it came from (`MeshProxyPatch/<name>`) and its index
/// in that policy. Modifications are concatenated in the order of the matched policies (the
/// single-item rule's item order); if the counts disagree, every modification is attributed to
/// all the rule's policies.
fn owners(matched: &MatchedPolicies<'_>, rule: &Rule, total: usize) -> Vec<(String, usize)> {
    let mut out = Vec::with_capacity(total);
    for p in &matched.dataplane_policies {
        let Some(single) = &p.single else { continue };
        let n = single
            .get("appendModifications")
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len);
        let name = format!("{}/{}", p.origin.type_name, p.origin.meta.name);
        out.extend((0..n).map(|j| (name.clone(), j)));
    }
    if out.len() == total {
        out
    } else {
        let all = rule_policies(rule);
        (0..total).map(|j| (all.clone(), j)).collect()
    }
}

fn mpp_op(op: Option<&ModOperation>) -> Option<Op> {
    Some(match op? {
        ModOperation::Add => Op::Add,
        ModOperation::Remove => Op::Remove,
        ModOperation::Patch => Op::Patch,
        ModOperation::AddFirst => Op::AddFirst,
        ModOperation::AddLast => Op::AddLast,
        ModOperation::AddBefore => Op::AddBefore,
        ModOperation::AddAfter => Op::AddAfter,
        ModOperation::Unknown(_) => return None,
    })
}

fn mpp_modification<'a, M>(
    kind: ModificationKind,
    m: &'a mpp::Mod<M>,
    matcher: impl FnOnce(&M) -> Match,
) -> Modification<'a> {
    Modification {
        kind,
        operation: m.operation.as_ref().map_or("", ModOperation::as_str),
        op: mpp_op(m.operation.as_ref()),
        matcher: m.match_.as_ref().map(matcher).unwrap_or_default(),
        value: m.value.as_deref(),
        json_patches: m.json_patches.as_deref().unwrap_or_default(),
    }
}

/// The engine's view of a MeshProxyPatch modification (the first kind set, in Kuma's order).
fn from_mesh_proxy_patch(m: &mpp::Modification) -> Option<Modification<'_>> {
    if let Some(c) = &m.cluster {
        return Some(mpp_modification(ModificationKind::Cluster, c, |x| Match {
            origin: x.origin.clone(),
            name: x.name.clone(),
            ..Match::default()
        }));
    }
    if let Some(l) = &m.listener {
        return Some(mpp_modification(ModificationKind::Listener, l, |x| Match {
            origin: x.origin.clone(),
            name: x.name.clone(),
            listener_tags: x.tags.clone().unwrap_or_default(),
            ..Match::default()
        }));
    }
    let filter = |x: &mpp::FilterMatch| Match {
        origin: x.origin.clone(),
        name: x.name.clone(),
        listener_name: x.listener_name.clone(),
        listener_tags: x.listener_tags.clone().unwrap_or_default(),
        ..Match::default()
    };
    if let Some(f) = &m.network_filter {
        return Some(mpp_modification(ModificationKind::NetworkFilter, f, filter));
    }
    if let Some(f) = &m.http_filter {
        return Some(mpp_modification(ModificationKind::HttpFilter, f, filter));
    }
    m.virtual_host.as_ref().map(|vh| {
        mpp_modification(ModificationKind::VirtualHost, vh, |x| Match {
            origin: x.origin.clone(),
            name: x.name.clone(),
            route_configuration_name: x.route_configuration_name.clone(),
            ..Match::default()
        })
    })
}

/// Apply the ProxyTemplate selected for the DPP to `snap`: its raw `resources`, then its
/// `modifications` (after every other plugin, MeshProxyPatch included, as in Kuma). Reads the
/// origins earlier plugins recorded in `origins` and records those of what it adds.
///
/// # Errors
/// The first [`GenerateError::Policy`] a resource or modification reports; `snap` is then partly
/// modified and must be discarded.
pub fn apply_proxy_template(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    origins: &mut Origins,
) -> Result<(), GenerateError> {
    let mut engine = Engine::new(snap, origins);
    let templates: Vec<&Resource> = input
        .policies
        .old_policies_with_superseded(ResourceType::ProxyTemplate)
        .collect();
    let refs: Vec<OldPolicyRef<'_>> = templates
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let Some(chosen) = select_dataplane_policy(input.dataplane, &refs) else {
        return Ok(());
    };
    let Some(resource) = templates.get(chosen) else {
        return Ok(());
    };
    let Spec::ProxyTemplate(template) = &resource.spec else {
        return Ok(());
    };
    let Some(conf) = &template.conf else {
        return Ok(());
    };
    let policy = format!("ProxyTemplate/{}", resource.meta.name);
    for (i, raw) in conf.resources.iter().enumerate() {
        let src = Source {
            policy: policy.clone(),
            label: format!("conf.resources[{i}]"),
            origin: ORIGIN_PROXY_TEMPLATE_RAW,
        };
        engine.add_raw(&raw.name, &raw.resource, &src)?;
    }
    for (i, m) in conf.modifications.iter().enumerate() {
        let src = Source {
            policy: policy.clone(),
            label: format!("conf.modifications[{i}]"),
            origin: ORIGIN_PROXY_TEMPLATE_MODIFICATIONS,
        };
        let Some(modification) = from_proxy_template(m) else {
            // Kuma's `modifications.Apply`: "invalid modification type".
            return Err(GenerateError::Policy {
                policy: src.policy,
                resource: "*".to_owned(),
                reason: format!("{}: invalid modification (no kind set)", src.label),
            });
        };
        engine.apply(&modification, &src)?;
    }
    Ok(())
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn pt_modification<'a, M>(
    kind: ModificationKind,
    m: &'a pt::ModificationOf<M>,
    matcher: impl FnOnce(&M) -> Match,
) -> Modification<'a> {
    let op = m.op().map(|o| match o {
        PtOperation::Add => Op::Add,
        PtOperation::AddFirst => Op::AddFirst,
        PtOperation::AddLast => Op::AddLast,
        PtOperation::AddBefore => Op::AddBefore,
        PtOperation::AddAfter => Op::AddAfter,
        PtOperation::Patch => Op::Patch,
        PtOperation::Remove => Op::Remove,
    });
    Modification {
        kind,
        operation: &m.operation,
        op,
        matcher: m.matcher.as_ref().map(matcher).unwrap_or_default(),
        // Kuma parses the (possibly empty) value whatever the operation.
        value: Some(&m.value),
        json_patches: &[],
    }
}

/// The engine's view of a ProxyTemplate modification (`None` for an empty one).
fn from_proxy_template(m: &pt::Modification) -> Option<Modification<'_>> {
    let filter = |x: &pt::FilterMatch| Match {
        origin: non_empty(&x.origin),
        name: non_empty(&x.name),
        listener_name: non_empty(&x.listener_name),
        listener_tags: x.listener_tags.clone(),
        ..Match::default()
    };
    Some(match m {
        pt::Modification::Cluster(c) => pt_modification(ModificationKind::Cluster, c, |x| Match {
            origin: non_empty(&x.origin),
            name: non_empty(&x.name),
            ..Match::default()
        }),
        pt::Modification::Listener(l) => {
            pt_modification(ModificationKind::Listener, l, |x| Match {
                origin: non_empty(&x.origin),
                name: non_empty(&x.name),
                listener_tags: x.tags.clone(),
                ..Match::default()
            })
        }
        pt::Modification::NetworkFilter(f) => {
            pt_modification(ModificationKind::NetworkFilter, f, filter)
        }
        pt::Modification::HttpFilter(f) => pt_modification(ModificationKind::HttpFilter, f, filter),
        pt::Modification::VirtualHost(vh) => {
            pt_modification(ModificationKind::VirtualHost, vh, |x| Match {
                origin: non_empty(&x.origin),
                name: non_empty(&x.name),
                route_configuration_name: non_empty(&x.route_configuration_name),
                ..Match::default()
            })
        }
        pt::Modification::Empty => return None,
    })
}
