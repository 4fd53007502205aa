//! Runs Kuma v2.7.29's validation fixtures (`../shared/conformance/kuma-v2.7.29/validation/`)
//! through Umbra's decoder and validators: same verdict, same field paths, same messages.
//!
//! Each fixture holds `policy` (type/mesh/name/spec) and `expected` (`valid: true` or
//! `violations`). Order matters except for MeshFaultInjection (compared as a multiset, like
//! Kuma's `ConsistOf`). Set `UMBRA_CONFORMANCE_DIR` to point elsewhere.

use std::path::PathBuf;

use umbra_core::codec::{decode_one, Limits};
use umbra_core::resource::Resource;
use umbra_core::validate::Violation;

fn conformance_dir() -> PathBuf {
    std::env::var_os("UMBRA_CONFORMANCE_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/kuma-v2.7.29"),
        PathBuf::from,
    )
}

fn run_type(ty: &str) -> Vec<String> {
    let dir = conformance_dir().join("validation").join(ty);
    let mut failures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "cannot read {}: {e} (set UMBRA_CONFORMANCE_DIR)",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "no fixtures in {}", dir.display());
    for path in entries {
        let doc = decode_one(&std::fs::read(&path).unwrap(), Limits::default()).unwrap();
        let policy = doc["policy"].clone();
        let expected: Vec<Violation> = match doc["expected"].get("violations") {
            Some(v) => serde_json::from_value(v.clone()).unwrap(),
            None => Vec::new(),
        };
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let got = match Resource::from_value(policy) {
            Ok(r) => r.validate_spec().violations,
            Err(e) => {
                failures.push(format!("{name}: decode error: {e}"));
                continue;
            }
        };
        let ok = if ty == "MeshFaultInjection" {
            let mut a = got.clone();
            let mut b = expected.clone();
            a.sort_by(|x, y| (&x.field, &x.message).cmp(&(&y.field, &y.message)));
            b.sort_by(|x, y| (&x.field, &x.message).cmp(&(&y.field, &y.message)));
            a == b
        } else {
            got == expected
        };
        if !ok {
            failures.push(format!(
                "{name}:\n  expected {}\n  got      {}",
                serde_json::to_string(&expected).unwrap(),
                serde_json::to_string(&got).unwrap()
            ));
        }
    }
    failures
}

fn check(ty: &str) {
    let failures = run_type(ty);
    assert!(
        failures.is_empty(),
        "{ty} validation conformance failures:\n{}",
        failures.join("\n")
    );
}

#[test]
fn mesh_timeout() {
    check("MeshTimeout");
}

#[test]
fn mesh_circuit_breaker() {
    check("MeshCircuitBreaker");
}

#[test]
fn mesh_fault_injection() {
    check("MeshFaultInjection");
}

#[test]
fn mesh_traffic_permission() {
    check("MeshTrafficPermission");
}

#[test]
fn mesh_proxy_patch() {
    check("MeshProxyPatch");
}
