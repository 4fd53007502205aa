//! The transition seed's kuma-demo scenario (seed 000, "Timeout -> MeshTimeout":
//! `xds/tests/data/timeouts.yaml`) as documents for end-to-end tests.

use std::time::Duration;

use serde_json::Value;

use crate::{wait_until, CpProcess};

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

/// Register the seed's Dataplanes split across two zones: `frontend` and `redis` in `z1`,
/// `backend` and a second `frontend` (at 127.42.1.29) in `z2`; then wait until `global` lists
/// all four.
///
/// # Errors
/// A registration refused, or the Global not listing them within 20 s (with its log).
pub async fn register_split_dataplanes(
    docs: &[(String, String, String)],
    z1: &CpProcess,
    z2: &CpProcess,
    global: &CpProcess,
) -> anyhow::Result<()> {
    let dp = |name: &str| {
        docs.iter()
            .find(|d| d.1 == name)
            .map(|d| d.2.clone())
            .unwrap_or_default()
    };
    z1.apply("/meshes/default/dataplanes/frontend", &dp("frontend"))
        .await?;
    z1.apply("/meshes/default/dataplanes/redis", &dp("redis"))
        .await?;
    z2.apply("/meshes/default/dataplanes/backend", &dp("backend"))
        .await?;
    z2.apply(
        "/meshes/default/dataplanes/frontend",
        &dp("frontend").replace("127.42.0.29", "127.42.1.29"),
    )
    .await?;
    wait_until(Duration::from_secs(20), || async {
        matches!(global.call("GET", "/meshes/default/dataplanes", None).await,
            Ok((200, v)) if v["total"] == 4)
    })
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "dataplanes did not reach the Global:\n{}",
            global.log_tail()
        )
    })
}
