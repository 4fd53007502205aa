//! Properties of generation over the transition seed's scenarios (000_c0dd8fb0a11dab1f.txt).
//! The seed's per-family examples live in the family's test file (`timeout.rs`,
//! `fault_injection.rs`, `traffic_permission.rs`, `circuit_breaker.rs`, `proxy_patch.rs`).

use umbra_core::view::View;

mod common;
use common::{load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

#[test]
fn generation_is_deterministic() {
    let resources = load("timeouts.yaml");
    let a = snapshot(&resources, "frontend", View::Shadow);
    let b = snapshot(&resources, "frontend", View::Shadow);
    assert_eq!(a, b);
    for t in [LISTENER, CLUSTER] {
        assert_eq!(a.version(t).unwrap(), b.version(t).unwrap());
    }
}
