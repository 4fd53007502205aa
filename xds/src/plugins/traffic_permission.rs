//! Traffic permissions: the old TrafficPermission baked in as a network RBAC filter, then the
//! MeshTrafficPermission plugin taking inbounds over (Kuma 2.7, see
//! `docs/research/kuma-2.7-policy-plugins.md` §5 and `kuma-2.7-xds-generation.md` §5).
//!
//! Nothing happens when the mesh has mTLS off (Kuma adds no RBAC at all then), nor for a builtin
//! gateway. With mTLS on, on every filter chain of an inbound listener protected by Kuma's TLS
//! (`transportSocket.name == envoy.transport_sockets.tls`):
//!
//! 1. **Old TrafficPermission** (Kuma's `InboundProxyGenerator` + `NetworkRBACConfigurer`): the
//!    best TrafficPermission per inbound (`SelectInboundConnectionPolicies`, computed whether or
//!    not MeshTrafficPermission supersedes the type in the view, as Kuma computes old policies
//!    unconditionally) becomes `envoy.filters.network.rbac`, prepended as `filters[0]`:
//!    `rules.policies[<TrafficPermission name>]` with `permissions: [{any: true}]` and one
//!    principal per source selector, `statPrefix` = sanitized listener name plus `.`. An inbound
//!    no TrafficPermission selects gets `rules: {}`, which denies everything.
//! 2. **MeshTrafficPermission** (Kuma's `meshtrafficpermission/plugin/v1alpha1` +
//!    `xds/rbac_configurer.go`): per inbound, the `from` rules of the MeshTrafficPermissions
//!    selecting it. An inbound without rules is left alone when the DPP has any TrafficPermission
//!    match, else it gets a deny-all rule. Otherwise the old network RBAC filter is removed and
//!    the rules become `envoy.filters.http.rbac`, prepended to the HTTP connection manager's
//!    `httpFilters` (no `statPrefix`), or for TCP a network RBAC prepended as `filters[0]`. The
//!    policy key is always `MeshTrafficPermission`; `Allow` and `AllowWithShadowDeny` subsets are
//!    its principals (in rule order, Allow first), `Deny` subsets are left out, and
//!    `AllowWithShadowDeny` subsets also form `shadowRules` with action `DENY`.
//!
//! Principals: `kuma.io/service` → `authenticated.principalName.exact: spiffe://<mesh>/<service>`,
//! any other tag → `kuma://<tag>/<value>`; a negated tag of a rule subset is wrapped in `notId`;
//! no tag → `{any: true}`, one → that principal, several → `andIds`.
//!
//! One deviation: Kuma builds a TrafficPermission selector's non-service principals in Go map
//! order (random); Umbra takes them sorted by tag name, so output is deterministic.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain, Listener};
use envoy_types::pb::envoy::config::rbac::v3::{
    permission, principal, rbac, Permission, Policy, Principal, Rbac,
};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};
use umbra_core::dataplane::{DataplaneSpec, GatewayType, InboundKey};
use umbra_core::old::Selector;
use umbra_core::old_matching::{select_inbound_connection_policies, OldPolicyRef};
use umbra_core::policies::mesh_traffic_permission::{Action, Conf};
use umbra_core::resource::{Resource, ResourceType, Spec};
use umbra_core::rules::{Rule, Rules, Subset, Tag};
use umbra_core::target_ref::SERVICE_TAG;

use super::input::{Origins, PluginInput};
use crate::error::GenerateError;
use crate::names::{sanitize_metric, HCM_FILTER};
use crate::protobuf::any;
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// Name of the network RBAC filter (old TrafficPermission; MeshTrafficPermission on TCP).
pub const NETWORK_RBAC_FILTER: &str = "envoy.filters.network.rbac";
/// Name of the HTTP RBAC filter (MeshTrafficPermission on HTTP inbounds).
pub const HTTP_RBAC_FILTER: &str = "envoy.filters.http.rbac";
/// Name of the TLS transport socket: only chains protected by it get RBAC.
pub const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";
/// The RBAC policy key MeshTrafficPermission always uses.
pub const MESH_TRAFFIC_PERMISSION_POLICY: &str = "MeshTrafficPermission";

/// Apply the old TrafficPermission, then MeshTrafficPermission, to the inbound listeners of
/// `snap` (no-op when mTLS is off or the DPP is a builtin gateway).
///
/// # Errors
/// [`GenerateError::Policy`] when a MeshTrafficPermission rule's conf does not read as a
/// MeshTrafficPermission `default`, or an inbound HTTP connection manager cannot be decoded.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    _origins: &mut Origins,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    if !input.ctx.mtls || is_builtin_gateway(dp) {
        return Ok(());
    }
    let policies = input.policies;
    let traffic_permissions: Vec<&Resource> = policies
        .old_policies_with_superseded(ResourceType::TrafficPermission)
        .collect();
    let old = select_traffic_permissions(dp, &traffic_permissions);

    // 1. Old TrafficPermission, baked in by the inbound generator.
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        let name = inbound_listener_name(&key);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let rbac = old_network_rbac(&name, old.get(&key).copied());
        for chain in tls_chains(listener) {
            chain
                .filters
                .insert(0, network_filter(NETWORK_RBAC_FILTER, &rbac));
        }
    }

    // 2. MeshTrafficPermission plugin.
    let matched = policies.matched(ResourceType::MeshTrafficPermission, dp);
    let deny = deny_rules();
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        let rules = match matched.from_rules.get(&key) {
            Some(rules) => rules,
            None if old.is_empty() => &deny,
            None => continue, // the old TrafficPermission stays
        };
        let name = inbound_listener_name(&key);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let built = rbac_rules(rules, &input.ctx.mesh)?;
        for chain in tls_chains(listener) {
            configure_chain(chain, &name, &built)?;
        }
    }

    // 3. Observed shadow MeshTrafficPermissions (issue 40).
    observe(snap, input, &old, &deny)
}

/// Observe mode (issue 40): on each inbound whose rules an observed shadow MeshTrafficPermission
/// would change (one contributes to them), an RBAC filter that enforces nothing (`rules`
/// absent) and evaluates, as `shadowRules`, the rules the inbound would get if the observed
/// policies (and no other shadow policy) went live, computed as step 2 computes the live ones.
/// It goes first in the connection manager's HTTP filters, or first in the chain for TCP, so it
/// sees every request the live MeshTrafficPermission rules see, including those they deny.
/// Where an old TrafficPermission still enforces (an inbound no live MeshTrafficPermission
/// rule covers, on a DPP with TrafficPermissions), its network RBAC stays first, and the
/// observer sees only the connections it lets through. Envoy counts the observer's decisions
/// as `http.<statPrefix>.rbac.<shadowRulesStatPrefix>shadow_allowed|shadow_denied` (TCP:
/// `<statPrefix>rbac.<...>`), [`observe_stat_prefix`] naming the observed policies. An
/// observed `AllowWithShadowDeny` counts as allowed, as the Shadow view enforces it; its own
/// shadow-deny part is not rendered.
///
/// **Callers.** After the observer, one more non-enforcing filter per calling service the
/// rules name (a `kuma.io/service` tag of a rule subset, negated or not; the first
/// [`MAX_ATTRIBUTED_CALLERS`] by name), [`observe_caller_filter_name`]: its `shadowRules` allow
/// every other caller and this caller as the would-be rules do, so its `shadow_denied`
/// ([`observe_caller_stat_prefix`]) counts exactly that caller's would-be denials. Requests
/// of callers no rule names are in the observer's total only (the report's "other callers").
fn observe(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    old: &BTreeMap<InboundKey, &Resource>,
    deny: &Rules,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let Some((matched, observed_policies)) = input
        .policies
        .observed_matched(ResourceType::MeshTrafficPermission, dp)
    else {
        return Ok(());
    };
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        let rules = match matched.from_rules.get(&key) {
            Some(rules) => rules,
            None if old.is_empty() => deny,
            None => continue,
        };
        let observed: std::collections::BTreeSet<&str> = rules
            .0
            .iter()
            .flat_map(|r| &r.origin)
            .filter(|o| observed_policies.contains(&o.meta.name))
            .map(|o| o.meta.name.as_str())
            .collect();
        if observed.is_empty() {
            continue; // no observed policy changes this inbound's rules
        }
        let name = inbound_listener_name(&key);
        let Some(listener) = snap.listeners.get_mut(&name) else {
            continue;
        };
        let would = rbac_rules(rules, &input.ctx.mesh)?.rules;
        let prefix = observe_stat_prefix(&observed);
        let callers = named_callers(rules);
        for chain in tls_chains(listener) {
            // Prepended last-first: the observer ends up first, then the callers by name.
            for caller in callers.iter().rev() {
                let rbac = caller_rules(&would, &input.ctx.mesh, caller);
                let prefix = observe_caller_stat_prefix(caller, &observed);
                let filter = observe_caller_filter_name(caller);
                observe_chain(chain, &name, (&filter, &filter), &rbac, &prefix)?;
            }
            observe_chain(
                chain,
                &name,
                (OBSERVE_HTTP_RBAC_FILTER, OBSERVE_NETWORK_RBAC_FILTER),
                &would,
                &prefix,
            )?;
        }
    }
    Ok(())
}

/// Most calling services an observed inbound attributes would-be denials to (one RBAC filter
/// each); the others are counted together.
pub const MAX_ATTRIBUTED_CALLERS: usize = 16;

/// The `kuma.io/service` values the subsets of `rules` name, sorted, at most
/// [`MAX_ATTRIBUTED_CALLERS`].
fn named_callers(rules: &Rules) -> Vec<String> {
    let named: std::collections::BTreeSet<&str> = rules
        .0
        .iter()
        .flat_map(|r| &r.subset.0)
        .filter(|t| t.key == SERVICE_TAG && !t.value.is_empty())
        .map(|t| t.value.as_str())
        .collect();
    named
        .into_iter()
        .take(MAX_ATTRIBUTED_CALLERS)
        .map(str::to_owned)
        .collect()
}

/// Policy key of a caller filter's `shadowRules` that lets every other caller through.
const OTHER_CALLERS_POLICY: &str = "umbra-other-callers";

/// The `shadowRules` counting `caller`'s would-be denials: `would`'s policies, plus one
/// allowing every principal but `spiffe://<mesh>/<caller>`.
fn caller_rules(would: &Rbac, mesh: &str, caller: &str) -> Rbac {
    let mut rbac = would.clone();
    rbac.policies.insert(
        OTHER_CALLERS_POLICY.to_owned(),
        mtp_policy(vec![Principal {
            identifier: Some(principal::Identifier::NotId(Box::new(authenticated(
                service_spiffe_id(mesh, caller),
            )))),
        }]),
    );
    rbac
}

/// Name of the filter attributing would-be denials to `caller` (HTTP and network alike):
/// `umbra.observe.rbac.caller.<service>`.
pub fn observe_caller_filter_name(caller: &str) -> String {
    format!("umbra.observe.rbac.caller.{caller}")
}

/// Name of the HTTP filter observe mode adds (an `envoy.extensions.filters.http.rbac.v3.RBAC`).
pub const OBSERVE_HTTP_RBAC_FILTER: &str = "umbra.observe.http.rbac";
/// Name of the network filter observe mode adds on TCP inbounds.
pub const OBSERVE_NETWORK_RBAC_FILTER: &str = "umbra.observe.network.rbac";

use umbra_core::observed::{joined_names, OBSERVE_CALLER_STAT, OBSERVE_STAT};

/// The `shadowRulesStatPrefix` of an observe filter: `umbra_observe.<names>.`, the observed
/// policies' names sanitized for stats (`[a-zA-Z0-9_-]`, so no dot) joined by `.`, in name
/// order: a reader splits them back at the dots.
pub fn observe_stat_prefix(observed: &std::collections::BTreeSet<&str>) -> String {
    format!("{OBSERVE_STAT}.{}.", joined_names(observed.iter().copied()))
}

/// The `shadowRulesStatPrefix` of a caller filter: `umbra_observe_caller.<service>.<names>.`
/// (each segment sanitized as in [`observe_stat_prefix`]).
pub fn observe_caller_stat_prefix(
    caller: &str,
    observed: &std::collections::BTreeSet<&str>,
) -> String {
    format!(
        "{OBSERVE_CALLER_STAT}.{}.{}.",
        sanitize_metric(caller),
        joined_names(observed.iter().copied())
    )
}

fn observe_chain(
    chain: &mut FilterChain,
    listener_name: &str,
    (http_name, network_name): (&str, &str),
    would: &Rbac,
    prefix: &str,
) -> Result<(), GenerateError> {
    let http = HttpRbac {
        rules: None,
        shadow_rules: Some(would.clone()),
        shadow_rules_stat_prefix: prefix.to_owned(),
        ..Default::default()
    };
    let network = NetworkRbac {
        rules: None,
        shadow_rules: Some(would.clone()),
        shadow_rules_stat_prefix: prefix.to_owned(),
        stat_prefix: stat_prefix(listener_name),
        ..Default::default()
    };
    prepend_rbac(
        chain,
        listener_name,
        (http_name, &http),
        (network_name, &network),
    )
}

/// Prepend an RBAC filter to `chain`: `http` first among its HTTP connection manager's filters
/// when it has one, else `network` first in the chain (each under its filter name).
///
/// # Errors
/// [`GenerateError::Policy`] (MeshTrafficPermission) when the connection manager's config is
/// not typed or does not decode.
fn prepend_rbac(
    chain: &mut FilterChain,
    listener_name: &str,
    (http_name, http): (&str, &HttpRbac),
    (network_name, network): (&str, &NetworkRbac),
) -> Result<(), GenerateError> {
    let error = |reason: &str| GenerateError::Policy {
        policy: "MeshTrafficPermission".to_owned(),
        resource: format!("{LISTENER_TYPE}/{listener_name}"),
        reason: reason.to_owned(),
    };
    let Some(hcm_filter) = chain.filters.iter_mut().find(|f| f.name == HCM_FILTER) else {
        chain
            .filters
            .insert(0, network_filter(network_name, network));
        return Ok(());
    };
    let Some(filter::ConfigType::TypedConfig(config)) = &mut hcm_filter.config_type else {
        return Err(error("http_connection_manager has no typed config"));
    };
    crate::draft::edit(config, |hcm: &mut HttpConnectionManager| {
        hcm.http_filters.insert(
            0,
            HttpFilter {
                name: http_name.to_owned(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(http))),
                ..Default::default()
            },
        );
    })
    .ok_or_else(|| error("http_connection_manager config does not decode"))
}

fn is_builtin_gateway(dp: &DataplaneSpec) -> bool {
    dp.networking
        .gateway
        .as_ref()
        .is_some_and(|g| g.gateway_type == Some(GatewayType::Builtin))
}

fn inbound_listener_name(key: &InboundKey) -> String {
    crate::names::inbound_listener_name(&key.address, key.port)
}

/// The filter chains of `listener` protected by Kuma's TLS.
fn tls_chains(listener: &mut Listener) -> impl Iterator<Item = &mut FilterChain> {
    listener.filter_chains.iter_mut().filter(|c| {
        c.transport_socket
            .as_ref()
            .is_some_and(|t| t.name == TLS_TRANSPORT_SOCKET)
    })
}

/// The TrafficPermission selected per inbound of `dp` (Kuma's `BuildTrafficPermissionMap`).
/// Resources that are not TrafficPermissions are ignored.
pub fn select_traffic_permissions<'a>(
    dp: &DataplaneSpec,
    traffic_permissions: &[&'a Resource],
) -> BTreeMap<InboundKey, &'a Resource> {
    let refs: Vec<OldPolicyRef<'_>> = traffic_permissions
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.spec, Spec::TrafficPermission(_)))
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    select_inbound_connection_policies(dp, &refs)
        .into_iter()
        .filter_map(|(key, i)| traffic_permissions.get(i).map(|r| (key, *r)))
        .collect()
}

fn network_filter<M: prost::Message + prost::Name>(name: &str, config: &M) -> Filter {
    Filter {
        name: name.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(any(config))),
    }
}

fn stat_prefix(listener_name: &str) -> String {
    // The dot turns "inbound_..._6379rbac.allowed" into "inbound_..._6379.rbac.allowed".
    format!("{}.", sanitize_metric(listener_name))
}

fn any_permission() -> Vec<Permission> {
    vec![Permission {
        rule: Some(permission::Rule::Any(true)),
    }]
}

fn any_principal() -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Any(true)),
    }
}

fn authenticated(exact: String) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(exact)),
                    ..Default::default()
                }),
            },
        )),
    }
}

/// `spiffe://<mesh>/<service>`, the identity of a service's DPPs.
fn service_spiffe_id(mesh: &str, service: &str) -> String {
    format!("spiffe://{mesh}/{service}")
}

/// `kuma://<tag>/<value>`, the identity of a tag value.
fn kuma_id(tag: &str, value: &str) -> String {
    format!("kuma://{tag}/{value}")
}

fn combine(mut principals: Vec<Principal>) -> Principal {
    match principals.len() {
        0 => any_principal(),
        1 => principals.remove(0),
        _ => Principal {
            identifier: Some(principal::Identifier::AndIds(principal::Set {
                ids: principals,
            })),
        },
    }
}

/// Kuma's `principalFromSelector` for one TrafficPermission source: every tag other than
/// `kuma.io/service` whose value is not `*` becomes `kuma://<tag>/<value>` (sorted by tag name),
/// then a concrete `kuma.io/service` becomes `spiffe://<mesh>/<service>`; no principal gives
/// `{any: true}`, one gives itself, several an `andIds`.
pub fn principal_from_selector(selector: &Selector, mesh: &str) -> Principal {
    let mut principals: Vec<Principal> = selector
        .match_tags
        .iter()
        .filter(|(k, v)| k.as_str() != SERVICE_TAG && v.as_str() != "*")
        .map(|(k, v)| authenticated(kuma_id(k, v)))
        .collect();
    if let Some(service) = selector.match_tags.get(SERVICE_TAG) {
        if !service.is_empty() && service != "*" {
            principals.push(authenticated(service_spiffe_id(mesh, service)));
        }
    }
    combine(principals)
}

/// Kuma's `NetworkRBACConfigurer` rules for one inbound: `policies[<name>]` of the selected
/// TrafficPermission (one principal per source, in order), or no policy (deny all) when none
/// is selected. `listener_name` gives the `statPrefix`.
pub fn old_network_rbac(listener_name: &str, traffic_permission: Option<&Resource>) -> NetworkRbac {
    let mut rules = Rbac {
        action: rbac::Action::Allow as i32,
        ..Default::default()
    };
    if let Some(r) = traffic_permission {
        if let Spec::TrafficPermission(tp) = &r.spec {
            let principals = tp
                .sources
                .iter()
                .map(|s| principal_from_selector(s, &r.meta.mesh))
                .collect();
            rules.policies.insert(
                r.meta.name.clone(),
                Policy {
                    permissions: any_permission(),
                    principals,
                    ..Default::default()
                },
            );
        }
    }
    NetworkRbac {
        rules: Some(rules),
        stat_prefix: stat_prefix(listener_name),
        ..Default::default()
    }
}

/// Kuma's `RBACConfigurer.principalFromSubset`: each tag of the subset, in order, becomes
/// `spiffe://<mesh>/<service>` (for `kuma.io/service`) or `kuma://<tag>/<value>`, wrapped in
/// `notId` when negated; no tag gives `{any: true}`, one gives itself, several an `andIds`.
pub fn principal_from_subset(subset: &Subset, mesh: &str) -> Principal {
    let principals = subset
        .0
        .iter()
        .map(|t: &Tag| {
            let p = if t.key == SERVICE_TAG {
                authenticated(service_spiffe_id(mesh, &t.value))
            } else {
                authenticated(kuma_id(&t.key, &t.value))
            };
            if t.not {
                Principal {
                    identifier: Some(principal::Identifier::NotId(Box::new(p))),
                }
            } else {
                p
            }
        })
        .collect();
    combine(principals)
}

/// The RBAC configuration MeshTrafficPermission rules give.
#[derive(Debug, Clone, PartialEq)]
pub struct RbacRules {
    /// `rules`: action ALLOW, policy `MeshTrafficPermission` with the Allow and
    /// AllowWithShadowDeny principals; no policy (deny all) when there are none.
    pub rules: Rbac,
    /// `shadowRules`: action DENY over the AllowWithShadowDeny principals, when there are any.
    pub shadow_rules: Option<Rbac>,
}

fn mtp_policy(principals: Vec<Principal>) -> Policy {
    Policy {
        permissions: any_permission(),
        principals,
        ..Default::default()
    }
}

/// Kuma's `createRules`/`createShadowRules` for MeshTrafficPermission `rules` (in order).
/// Rules whose action is `Deny` or unknown contribute no principal.
///
/// # Errors
/// [`GenerateError::Policy`] when a rule's conf is not a MeshTrafficPermission `default`.
pub fn rbac_rules(rules: &Rules, mesh: &str) -> Result<RbacRules, GenerateError> {
    let mut allow = Vec::new();
    let mut shadow_deny = Vec::new();
    for rule in &rules.0 {
        match rule_action(rule)? {
            Some(Action::Allow) => allow.push(principal_from_subset(&rule.subset, mesh)),
            Some(Action::AllowWithShadowDeny) => {
                shadow_deny.push(principal_from_subset(&rule.subset, mesh));
            }
            _ => {}
        }
    }
    let mut out = RbacRules {
        rules: Rbac {
            action: rbac::Action::Allow as i32,
            ..Default::default()
        },
        shadow_rules: None,
    };
    let mut principals = allow;
    principals.extend(shadow_deny.iter().cloned());
    if !principals.is_empty() {
        out.rules.policies.insert(
            MESH_TRAFFIC_PERMISSION_POLICY.to_owned(),
            mtp_policy(principals),
        );
    }
    if !shadow_deny.is_empty() {
        let mut shadow = Rbac {
            action: rbac::Action::Deny as i32,
            ..Default::default()
        };
        shadow.policies.insert(
            MESH_TRAFFIC_PERMISSION_POLICY.to_owned(),
            mtp_policy(shadow_deny),
        );
        out.shadow_rules = Some(shadow);
    }
    Ok(out)
}

fn rule_action(rule: &Rule) -> Result<Option<Action>, GenerateError> {
    <Conf as serde::Deserialize>::deserialize(&rule.conf)
        .map(|c| c.action)
        .map_err(|e| GenerateError::Policy {
            policy: origin_names(rule),
            resource: "MeshTrafficPermission rule".to_owned(),
            reason: format!("invalid conf {}: {e}", rule.conf),
        })
}

fn origin_names(rule: &Rule) -> String {
    let names: Vec<String> = rule
        .origin
        .iter()
        .map(|o| format!("{}/{}", o.type_name, o.meta.name))
        .collect();
    if names.is_empty() {
        "MeshTrafficPermission".to_owned()
    } else {
        names.join(", ")
    }
}

/// The plugin's default for an inbound no MeshTrafficPermission selects on a DPP without any
/// TrafficPermission: one `Deny` rule for everyone.
pub(crate) fn deny_rules() -> Rules {
    Rules(vec![Rule {
        subset: Subset::all(),
        conf: serde_json::json!({ "action": "Deny" }),
        origin: Vec::new(),
    }])
}

/// Kuma's `RBACConfigurer.Configure` on one filter chain: drop the old network RBAC, then
/// prepend an HTTP RBAC filter to the connection manager or, without one, a network RBAC.
fn configure_chain(
    chain: &mut FilterChain,
    listener_name: &str,
    built: &RbacRules,
) -> Result<(), GenerateError> {
    if let Some(i) = chain
        .filters
        .iter()
        .position(|f| f.name == NETWORK_RBAC_FILTER)
    {
        chain.filters.remove(i);
    }
    let http = HttpRbac {
        rules: Some(built.rules.clone()),
        shadow_rules: built.shadow_rules.clone(),
        ..Default::default()
    };
    let network = NetworkRbac {
        rules: Some(built.rules.clone()),
        shadow_rules: built.shadow_rules.clone(),
        stat_prefix: stat_prefix(listener_name),
        ..Default::default()
    };
    prepend_rbac(
        chain,
        listener_name,
        (HTTP_RBAC_FILTER, &http),
        (NETWORK_RBAC_FILTER, &network),
    )
}
