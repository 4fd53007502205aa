//! Build script: compiles the repository's `proto/umbra/kds/v1/kds.proto` and `intercp.proto`
//! (both package `umbra.kds.v1`; the top-level `proto/` folder, where the project keeps its
//! service definitions) with protox (no system `protoc`) and generates prost messages and
//! tonic client/server code. Envoy's discovery messages are not
//! regenerated: they map to `envoy_types::pb`. The Envoy proto directory comes from umbra-xds-protocol'
//! build script (`links` metadata), so both crates compile against the same files.

use std::path::PathBuf;

const INCLUDES: &[&str] = &[
    "data-plane-api",
    "googleapis",
    "protoc-gen-validate",
    "xds",
    "cel-spec/proto",
];

/// The files compiled, under `proto/`: KDS, and the inter-CP service between Global replicas.
const PROTOS: &[&str] = &["umbra/kds/v1/kds.proto", "umbra/kds/v1/intercp.proto"];

fn main() {
    let protos = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    println!("cargo:rerun-if-changed={}", protos.display());
    let root = PathBuf::from(
        std::env::var_os("DEP_UMBRA_ENVOY_PROTOS_PROTO_ROOT")
            .expect("umbra-xds-protocol exports the Envoy proto directory"),
    );
    let mut includes = vec![protos];
    includes.extend(INCLUDES.iter().map(|d| root.join(d)).filter(|p| p.is_dir()));
    let mut compiler = protox::Compiler::new(&includes).expect("protox compiler");
    compiler.include_imports(true);
    for file in PROTOS {
        compiler
            .open_file(file)
            .unwrap_or_else(|e| panic!("compile {file}: {e}"));
    }
    tonic_prost_build::configure()
        .extern_path(".envoy", "::envoy_types::pb::envoy")
        .extern_path(".google", "::envoy_types::pb::google")
        .extern_path(".xds", "::envoy_types::pb::xds")
        .extern_path(".udpa", "::envoy_types::pb::udpa")
        .extern_path(".validate", "::envoy_types::pb::validate")
        .compile_fds(compiler.file_descriptor_set())
        .expect("generate KDS code");
}
