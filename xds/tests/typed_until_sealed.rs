//! Issue 39, item 1 ("typed until sealed"): while a sidecar's snapshot is generated, no plugin
//! decodes a packed config, and each config the plugins edit (HTTP connection managers, TCP
//! proxies, upstream HTTP protocol options) is encoded exactly once, when the snapshot is sealed.
//! Every scenario of the plugin tests, every DPP, both views. A builtin gateway's connection
//! managers are edited once more after sealing, when their route configurations move to RDS
//! (one decode and one encode each).

mod common;

use envoy_types::pb::envoy::config::listener::v3::filter;
use umbra_core::resource::ResourceType;
use umbra_core::view::View;
use umbra_xds::draft::round_trips_on_this_thread;
use umbra_xds::names::{HCM_FILTER, HTTP_PROTOCOL_OPTIONS_KEY, TCP_PROXY_FILTER};
use umbra_xds::snapshot::Snapshot;

/// The configs a generation drafts: connection managers and TCP proxies of every listener, and
/// every cluster's upstream HTTP protocol options.
fn drafted(snap: &Snapshot) -> u64 {
    let filters = snap
        .listeners
        .values()
        .flat_map(|l| l.filter_chains.iter().chain(&l.default_filter_chain))
        .flat_map(|c| &c.filters)
        .filter(|f| f.name == HCM_FILTER || f.name == TCP_PROXY_FILTER)
        .filter(|f| matches!(f.config_type, Some(filter::ConfigType::TypedConfig(_))))
        .count();
    let options = snap
        .clusters
        .values()
        .filter(|c| {
            c.typed_extension_protocol_options
                .contains_key(HTTP_PROTOCOL_OPTIONS_KEY)
        })
        .count();
    (filters + options) as u64
}

/// The HTTP connection managers of every listener.
fn hcms(snap: &Snapshot) -> u64 {
    snap.listeners
        .values()
        .flat_map(|l| l.filter_chains.iter().chain(&l.default_filter_chain))
        .flat_map(|c| &c.filters)
        .filter(|f| f.name == HCM_FILTER)
        .count() as u64
}

#[test]
fn a_generation_decodes_no_config_and_encodes_each_once() {
    let (mut checked, mut gateways) = (0, 0);
    for file in [
        "timeouts.yaml",
        "timeouts-protocols.yaml",
        "retries.yaml",
        "retries-route.yaml",
        "rate-limits.yaml",
        "access-logs.yaml",
        "traces.yaml",
        "circuit-breakers.yaml",
        "fault-injection.yaml",
        "fault-injection-protocols.yaml",
        "load-balancing.yaml",
        "health-checks.yaml",
        "routes.yaml",
        "traffic-permissions.yaml",
        "external-services.yaml",
        "multi-zone-1.yaml",
        "gateways.yaml",
        "gateway-routes.yaml",
    ] {
        let resources = common::load(file);
        let dataplanes = resources
            .iter()
            .filter(|r| r.ty() == ResourceType::Dataplane);
        for dp in dataplanes {
            let gateway = dp
                .as_dataplane()
                .is_some_and(umbra_core::gateway::is_builtin);
            for view in [View::Live, View::Shadow] {
                let before = round_trips_on_this_thread();
                let Ok(snap) = common::try_snapshot(&resources, &dp.meta.name, view) else {
                    continue;
                };
                let after = round_trips_on_this_thread();
                let what = format!("{file}: {} ({view:?})", dp.meta.name);
                let moved_to_rds = if gateway { hcms(&snap) } else { 0 };
                assert_eq!(
                    after.decodes - before.decodes,
                    moved_to_rds,
                    "{what}: decoded a packed config"
                );
                assert_eq!(
                    after.encodes - before.encodes,
                    drafted(&snap) + moved_to_rds,
                    "{what}: each drafted config encoded once"
                );
                assert!(drafted(&snap) > 0, "{what}");
                checked += 1;
                gateways += usize::from(gateway);
            }
        }
    }
    assert!(checked >= 40, "only {checked} generations checked");
    assert!(gateways >= 4, "only {gateways} gateway generations checked");
}
