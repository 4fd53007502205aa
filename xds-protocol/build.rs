//! Build script: finds the Envoy `.proto` files the `envoy-types` crate ships and exports their
//! directory to dependents' build scripts (`links = "umbra_envoy_protos"`: the metadata
//! `DEP_UMBRA_ENVOY_PROTOS_PROTO_ROOT`), so umbra-xds (the descriptor pool for proto3 JSON) and
//! umbra-kds (the KDS service) compile against the same files.
//!
//! The directory is found with `cargo metadata` (the `envoy-types` package's manifest dir +
//! `/proto`), or taken from `UMBRA_ENVOY_PROTO_DIR`.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=UMBRA_ENVOY_PROTO_DIR");
    let root = proto_root();
    println!("cargo::metadata=proto_root={}", root.display());
}

fn proto_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("UMBRA_ENVOY_PROTO_DIR") {
        return PathBuf::from(dir);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    // Only this target's dependencies: they are all downloaded already, so --offline holds.
    let target = std::env::var("TARGET").expect("TARGET");
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &target,
        ])
        .current_dir(&manifest_dir)
        .output()
        .expect("run cargo metadata");
    if output.status.success() {
        let meta: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
        let manifest = meta["packages"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "envoy-types"))
            .and_then(|p| p["manifest_path"].as_str())
            .expect("envoy-types in cargo metadata");
        return Path::new(manifest)
            .parent()
            .expect("manifest dir")
            .join("proto");
    }
    // Fallback: the unpacked crate in Cargo's registry cache.
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(cargo_home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("envoy-types-0.7."))
        })
        .collect();
    candidates.sort();
    candidates.pop().map(|p| p.join("proto")).unwrap_or_else(|| {
        panic!(
            "cannot find envoy-types' proto files: cargo metadata failed ({}) and no envoy-types-0.7.* in the registry; set UMBRA_ENVOY_PROTO_DIR",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
