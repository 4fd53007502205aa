//! The transition seed's kuma-demo scenario (seed 000, "Timeout -> MeshTimeout":
//! `xds/tests/data/timeouts.yaml`) as documents for end-to-end tests.

use serde_json::Value;

/// The seed's example: Mesh, kuma-demo Dataplanes, three Timeouts, four shadow MeshTimeouts.
pub const SEED: &str = include_str!("../../xds/tests/data/timeouts.yaml");

/// The seed's documents: (kind, name, YAML), its 10.42/10.43 addresses moved to loopback
/// (127.42/127.43) so a real Envoy can bind them.
pub fn seed_docs() -> Vec<(String, String, String)> {
    SEED.replace(" 10.4", " 127.4")
        .split("\n---")
        .map(|doc| {
            let doc = doc.to_owned();
            let v: Value = serde_json::to_value(
                umbra_core::codec::decode_one(doc.as_bytes(), umbra_core::codec::Limits::default())
                    .expect("the seed decodes"),
            )
            .expect("the seed is JSON");
            (
                v["type"].as_str().unwrap_or_default().to_owned(),
                v["name"].as_str().unwrap_or_default().to_owned(),
                doc,
            )
        })
        .collect()
}

/// The REST path segment of the seed's policy kinds.
///
/// # Panics
/// For a kind the seed does not have.
pub fn plural(kind: &str) -> &'static str {
    match kind {
        "Timeout" => "timeouts",
        "MeshTimeout" => "meshtimeouts",
        other => panic!("unexpected kind {other}"),
    }
}
