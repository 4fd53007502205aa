//! Build script: compiles the Envoy `.proto` files that the `envoy-types` crate ships into one
//! `FileDescriptorSet` (`$OUT_DIR/envoy_descriptors.bin`) with protox (no system `protoc`), for
//! prost-reflect to render snapshots as proto3 JSON and to parse JSON back.
//!
//! The proto directory is found with `cargo metadata` (the `envoy-types` package's manifest
//! dir + `/proto`), or taken from `UMBRA_ENVOY_PROTO_DIR`. Each file under `envoy/` is compiled
//! on its own (with its imports), because protox resolves relative names against every file a
//! compiler has loaded; results are merged by file name.

use std::path::{Path, PathBuf};

use prost::Message as _;

const INCLUDES: &[&str] = &[
    "data-plane-api",
    "googleapis",
    "protoc-gen-validate",
    "xds",
    "cel-spec/proto",
    "opentelemetry-proto",
    "client_model",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=UMBRA_ENVOY_PROTO_DIR");
    let root = proto_root();
    println!("cargo::metadata=proto_root={}", root.display());
    let includes: Vec<PathBuf> = INCLUDES
        .iter()
        .map(|d| root.join(d))
        .filter(|p| p.is_dir())
        .collect();
    let api = root.join("data-plane-api");
    let mut files = Vec::new();
    collect_protos(&api.join("envoy"), &api, &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "no Envoy .proto files under {}",
        api.display()
    );

    let mut merged = std::collections::BTreeMap::new();
    let mut skipped = Vec::new();
    for file in &files {
        let mut compiler = protox::Compiler::new(&includes).expect("protox compiler");
        compiler.include_imports(true);
        match compiler.open_file(file) {
            Ok(_) => {
                for fd in compiler.file_descriptor_set().file {
                    let name = fd.name.clone().unwrap_or_default();
                    merged.entry(name).or_insert(fd);
                }
            }
            Err(e) => skipped.push(format!("{}: {e}", file.display())),
        }
    }
    let set = prost_types::FileDescriptorSet {
        file: merged.into_values().collect(),
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("envoy_descriptors.bin"), set.encode_to_vec())
        .expect("write descriptors");
    std::fs::write(
        out.join("envoy_descriptors_skipped.txt"),
        skipped.join("\n"),
    )
    .expect("write skipped list");
}

fn collect_protos(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_protos(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_path_buf());
            }
        }
    }
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
