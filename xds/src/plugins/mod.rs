//! The policy plugins and their order. Each family module edits a generated
//! [`Snapshot`] the way the Kuma 2.7 plugin of the same policy does, baking in the old policy of
//! its family first where Kuma's generators bake it in. [`ORDERED`] is the one list of plugins,
//! in Kuma 2.7.29's order (`pkg/plugins/policies/core/ordered/ordered.go`, reproduced in
//! [`KUMA_ORDER`]), then the old ProxyTemplate last; [`apply_all`] runs it.
//!
//! Adding a family: one module here and one line in [`ORDERED`], at its place in
//! [`KUMA_ORDER`] (a unit test checks it).
//!
//! Layering: family modules import the leaf modules [`edit`] and [`input`] (and crate leaves),
//! never this module, which only declares them and lists their apply functions.

pub mod access_log;
pub mod circuit_breaker;
pub mod edit;
pub mod fault_injection;
pub mod health_check;
pub mod input;
pub mod load_balancing;
pub mod locality;
pub mod proxy_patch;
pub mod rate_limit;
pub mod retry;
pub mod route;
pub mod timeout;
pub mod trace;
pub mod traffic_permission;

use umbra_core::resource::ResourceType;

pub use self::input::{Origins, PluginInput};
use crate::draft::Session;
use crate::error::GenerateError;
use crate::snapshot::Snapshot;

/// A plugin's apply function: edits the snapshot for the DPP and policies of `PluginInput`,
/// reading and recording the origins of added resources in `Origins`.
///
/// # Errors
/// [`GenerateError::Policy`] when a policy cannot be applied; the snapshot is then partly
/// edited and must be discarded.
pub type ApplyFn = fn(&mut Snapshot, &PluginInput<'_>, &mut Origins) -> Result<(), GenerateError>;

/// One entry of the plugin list.
#[derive(Debug, Clone, Copy)]
pub struct Plugin {
    /// The Kuma policy types it applies. The first names its place in [`KUMA_ORDER`] (a new
    /// policy), or is [`ResourceType::ProxyTemplate`] for the old ProxyTemplate, which runs after
    /// every new plugin; the others are the old policies of the family it bakes in first.
    pub policies: &'static [ResourceType],
    /// What it does.
    pub apply: ApplyFn,
}

/// Kuma 2.7.29's plugin order (`ordered.Policies`), all of it, including the policies Umbra does
/// not implement yet, so their plugins slot in at the right place.
pub const KUMA_ORDER: [&str; 14] = [
    "MeshHTTPRoute",
    "MeshTCPRoute",
    "MeshLoadBalancingStrategy",
    "MeshAccessLog",
    "MeshTrace",
    "MeshFaultInjection",
    "MeshRateLimit",
    "MeshTimeout",
    "MeshTrafficPermission",
    "MeshCircuitBreaker",
    "MeshHealthCheck",
    "MeshRetry",
    "MeshMetric",
    "MeshProxyPatch",
];

/// The plugins Umbra implements, in the order [`apply_all`] runs them: Kuma's relative order
/// ([`KUMA_ORDER`]), then the old ProxyTemplate (its raw `resources` and `modifications`), which
/// Kuma applies after every plugin (`docs/research/kuma-2.7-policy-plugins.md` §0, §7).
pub const ORDERED: &[Plugin] = &[
    Plugin {
        policies: &[
            ResourceType::MeshHTTPRoute,
            ResourceType::MeshTCPRoute,
            ResourceType::TrafficRoute,
        ],
        apply: route::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshLoadBalancingStrategy],
        apply: load_balancing::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshAccessLog, ResourceType::TrafficLog],
        apply: access_log::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshTrace],
        apply: trace::apply,
    },
    Plugin {
        policies: &[
            ResourceType::MeshFaultInjection,
            ResourceType::FaultInjection,
        ],
        apply: fault_injection::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshRateLimit, ResourceType::RateLimit],
        apply: rate_limit::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshTimeout, ResourceType::Timeout],
        apply: timeout::apply,
    },
    Plugin {
        policies: &[
            ResourceType::MeshTrafficPermission,
            ResourceType::TrafficPermission,
        ],
        apply: traffic_permission::apply,
    },
    Plugin {
        policies: &[
            ResourceType::MeshCircuitBreaker,
            ResourceType::CircuitBreaker,
        ],
        apply: circuit_breaker::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshHealthCheck, ResourceType::HealthCheck],
        apply: health_check::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshRetry, ResourceType::Retry],
        apply: retry::apply,
    },
    Plugin {
        policies: &[ResourceType::MeshProxyPatch],
        apply: proxy_patch::apply_mesh_proxy_patch,
    },
    Plugin {
        policies: &[ResourceType::ProxyTemplate],
        apply: proxy_patch::apply_proxy_template,
    },
];

/// Run every plugin of [`ORDERED`] on `snap`, in order, sharing `origins`: those the base
/// generators recorded (`transparent`, `direct-access`, `dns`), then what each plugin adds.
/// `drafts` is the generation's draft session ([`crate::draft`]): it is sealed before
/// MeshProxyPatch, whose JSON patches and merges read configs as packed `Any`s, so that plugin,
/// the old ProxyTemplate and the gateway's RDS split edit encoded configs.
///
/// # Errors
/// The first [`GenerateError`] a plugin reports (the rest do not run).
pub fn apply_all(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    mut origins: Origins,
    drafts: Session,
) -> Result<(), GenerateError> {
    let mut drafts = Some(drafts);
    for plugin in ORDERED {
        if plugin.policies[0] == ResourceType::MeshProxyPatch {
            if let Some(session) = drafts.take() {
                session.seal(snap)?;
            }
        }
        (plugin.apply)(snap, input, &mut origins)?;
    }
    if let Some(session) = drafts.take() {
        session.seal(snap)?;
    }
    // Last: a builtin gateway's route configurations go to RDS, as Kuma serves them.
    route::routes_over_rds(snap, input.dataplane);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The implemented plugins follow Kuma 2.7.29's `ordered.go`, with the old ProxyTemplate
    /// last.
    #[test]
    fn order_is_kumas() {
        let (last, new) = ORDERED.split_last().unwrap();
        assert_eq!(last.policies, &[ResourceType::ProxyTemplate]);
        let positions: Vec<usize> = new
            .iter()
            .map(|p| {
                let name = p.policies[0].name();
                KUMA_ORDER
                    .iter()
                    .position(|k| *k == name)
                    .unwrap_or_else(|| panic!("{name} is not in Kuma's order"))
            })
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "not in Kuma's order: {positions:?}"
        );
        assert_eq!(
            new.iter().map(|p| p.policies[0].name()).collect::<Vec<_>>(),
            [
                "MeshHTTPRoute",
                "MeshLoadBalancingStrategy",
                "MeshAccessLog",
                "MeshTrace",
                "MeshFaultInjection",
                "MeshRateLimit",
                "MeshTimeout",
                "MeshTrafficPermission",
                "MeshCircuitBreaker",
                "MeshHealthCheck",
                "MeshRetry",
                "MeshProxyPatch",
            ]
        );
        assert_eq!(KUMA_ORDER.last(), Some(&"MeshProxyPatch"));
    }

    /// Each policy type is handled by one plugin only; the old ones follow their new one.
    #[test]
    fn every_policy_has_one_plugin() {
        let mut seen = std::collections::BTreeSet::new();
        for p in ORDERED {
            for t in p.policies {
                assert!(seen.insert(t.name()), "{} listed twice", t.name());
            }
        }
    }
}
