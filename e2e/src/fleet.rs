//! Pieces of the multi-zone end-to-end tests: a per-test temp directory and federated zones
//! started against a running Global with a fresh zone token.

use std::path::{Path, PathBuf};

use crate::{free_port, start_federated_zone, zone_token, CpProcess};

/// A fresh directory `umbra-<tag>-<pid>-<n>` under the system temp dir (logs, data dirs).
///
/// # Panics
/// When the directory cannot be created.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).expect("a temp dir");
    d
}

/// Start a Global (binary `global_bin`) on the PostgreSQL database at `url`, logging to
/// `<dir>/global.log`.
///
/// # Errors
/// When it does not come up.
pub async fn global_on_postgres(
    global_bin: &str,
    url: &str,
    dir: &Path,
) -> anyhow::Result<CpProcess> {
    CpProcess::start(
        global_bin,
        "--kds-addr",
        &["--store".into(), "postgres".into()],
        &[("UMBRA_POSTGRES_URL", url)],
        dir.join("global.log"),
    )
    .await
}

/// Start `zone` (binary `zone_bin`) federated to `global` with a zone token issued for it,
/// logging to `<dir>/<zone>.log`.
///
/// # Errors
/// When the token cannot be issued or the zone does not come up.
pub async fn start_zone(
    zone_bin: &str,
    global: &CpProcess,
    zone: &str,
    dir: &Path,
) -> anyhow::Result<CpProcess> {
    let token = zone_token(global, zone).await?;
    start_federated_zone(
        zone_bin,
        global,
        zone,
        &token,
        &[],
        dir.join(format!("{zone}.log")),
    )
    .await
}
