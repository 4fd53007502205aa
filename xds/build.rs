//! Build script: compiles the Envoy `.proto` files that the `envoy-types` crate ships into one
//! `FileDescriptorSet` (`$OUT_DIR/envoy_descriptors.bin`) with protox (no system `protoc`), for
//! prost-reflect to render snapshots as proto3 JSON and to parse JSON back.
//!
//! The proto directory comes from umbra-xds-protocol's build script (`links` metadata
//! `DEP_UMBRA_ENVOY_PROTOS_PROTO_ROOT`: the `envoy-types` package's `proto` folder, or
//! `UMBRA_ENVOY_PROTO_DIR`), so every crate compiles against the same files. Each file under `envoy/` is compiled
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
    let root = PathBuf::from(
        std::env::var_os("DEP_UMBRA_ENVOY_PROTOS_PROTO_ROOT")
            .expect("umbra-xds-protocol exports the Envoy proto directory"),
    );
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
