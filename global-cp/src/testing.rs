//! Test support: a throwaway PostgreSQL server on a free loopback port, as `#[sqlx::test]`
//! would use but started by the harness itself (Debian's `postgresql` package: `initdb` and
//! `pg_ctl` on `PATH` or under `/usr/lib/postgresql/<version>/bin`).
//!
//! The cluster lives in a temporary directory, uses trust authentication for the `umbra` user
//! on 127.0.0.1 only, runs with `fsync=off` (tests, not durability), and is stopped (`pg_ctl
//! stop -m immediate`) and removed on drop. When the process runs as root, `initdb` and
//! `pg_ctl` run as the `postgres` system user, since PostgreSQL refuses to run as root.
//!
//! It also owns [`free_port`], the loopback port picker every Umbra test harness uses.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A running throwaway PostgreSQL server.
#[derive(Debug)]
pub struct TempPostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// Why the server cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum TempPostgresError {
    /// `initdb`/`pg_ctl` are not installed.
    #[error("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin; install Debian's `postgresql` package")]
    NotInstalled,
    /// A command failed.
    #[error("{command} failed: {output}")]
    Command {
        /// What ran.
        command: String,
        /// Its output.
        output: String,
    },
    /// Filesystem trouble.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Directory holding `initdb` and `pg_ctl`, if any.
pub fn find_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("UMBRA_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

/// A TCP port on 127.0.0.1 that was free when picked and that no other caller in this process
/// gets, for a server a test starts right after (PostgreSQL, a CP, an Envoy listener).
///
/// Ports come from the 16,384 just below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 on Linux by default, so usually
/// 16384–32767). A port the kernel hands out by itself (`bind(0)`, or the source port of any
/// outgoing connection, such as Envoy's own ADS stream) can be taken again by an unrelated
/// socket between the pick and the test's bind; a port below that range only goes to someone
/// who asks for it by number. Picks walk the range from an offset derived from the process id,
/// so concurrent test processes start far apart, and skip ports that cannot be bound now. When
/// the whole range is taken, the kernel picks (`bind(0)`), and `0` if even that fails.
#[must_use]
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, span) = unreserved_ports();
    let offset = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(low + (offset + n) % span) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

/// `(first port, count)` of the picking range: up to 16,384 ports below the ephemeral range's
/// lower bound, never below 1024.
fn unreserved_ports() -> (u32, u32) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768)
        .clamp(2_048, 65_535);
    let low = ephemeral_low.saturating_sub(16_384).max(1_024);
    (low, ephemeral_low - low)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl TempPostgres {
    /// For tests: a started cluster, or `None` (with a note on stderr) when PostgreSQL is not
    /// installed and `CI` is unset, so a developer without it can still run the rest.
    ///
    /// # Panics
    /// Under CI (`CI` set) when PostgreSQL cannot start: CI must run these tests.
    pub fn start_or_skip() -> Option<TempPostgres> {
        match TempPostgres::start() {
            Ok(pg) => Some(pg),
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("skipping: {e}");
                None
            }
            Err(e) => panic!("PostgreSQL is required under CI: {e}"),
        }
    }

    /// Create and start a cluster.
    ///
    /// # Errors
    /// [`TempPostgresError`] when PostgreSQL is missing or does not start.
    pub fn start() -> Result<TempPostgres, TempPostgresError> {
        let bin = find_bin_dir().ok_or(TempPostgresError::NotInstalled)?;
        let dir =
            std::env::temp_dir().join(format!("umbra-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir)?;
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown").arg("postgres:").arg(&dir).status()?;
            if !status.success() {
                return Err(TempPostgresError::Command {
                    command: "chown postgres".into(),
                    output: status.to_string(),
                });
            }
        }
        let pg = TempPostgres {
            dir,
            bin,
            port: free_port(),
            as_postgres,
        };
        pg.run(
            "initdb",
            &[
                "-D",
                &pg.data().to_string_lossy(),
                "-U",
                "umbra",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        pg.start_server()?;
        Ok(pg)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), TempPostgresError> {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).current_dir(&self.dir).output()?;
        if out.status.success() {
            return Ok(());
        }
        Err(TempPostgresError::Command {
            command: format!("{} {}", exe.display(), args.join(" ")),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }

    fn start_server(&self) -> Result<(), TempPostgresError> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-o",
                &options,
                "-l",
                &self.dir.join("server.log").to_string_lossy(),
                "-w",
                "-t",
                "30",
                "start",
            ],
        )
    }

    /// Stop the server (`-m fast`: sessions end, committed data stays).
    ///
    /// # Errors
    /// When `pg_ctl stop` fails.
    pub fn stop(&self) -> Result<(), TempPostgresError> {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        )
    }

    /// Start the server again after [`TempPostgres::stop`] (same port and data).
    ///
    /// # Errors
    /// When `pg_ctl start` fails.
    pub fn restart(&self) -> Result<(), TempPostgresError> {
        self.start_server()
    }

    /// URL of database `db` (`postgres` always exists).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://umbra@127.0.0.1:{}/{db}", self.port)
    }

    /// Create a fresh database and return its URL.
    ///
    /// # Errors
    /// When the server refuses (the name must be a plain identifier).
    pub async fn create_database(&self, db: &str) -> Result<String, TempPostgresError> {
        use sqlx::Connection as _;
        if !db.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(TempPostgresError::Command {
                command: format!("CREATE DATABASE {db}"),
                output: "database names here are [A-Za-z0-9_]+".into(),
            });
        }
        let failed = |e: sqlx::Error| TempPostgresError::Command {
            command: format!("CREATE DATABASE {db}"),
            output: e.to_string(),
        };
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .map_err(failed)?;
        sqlx::query(&format!("CREATE DATABASE {db}"))
            .execute(&mut conn)
            .await
            .map_err(failed)?;
        Ok(self.url(db))
    }

    /// The server log's tail (for failure messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Where the cluster lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "-w",
                "-t",
                "10",
                "stop",
            ],
        );
        std::thread::sleep(Duration::from_millis(50));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The API state in-process tests serve: `store`, `zones`, a fixed zone-token key, a trust
/// verifier with no keys (loopback is the admin), an empty inspect hub, trace links and
/// configuration.
pub fn app_state(
    store: std::sync::Arc<dyn crate::store::Store>,
    zones: std::sync::Arc<crate::zones::ZoneRegistry>,
) -> crate::api::AppState {
    crate::api::AppState {
        traces: Default::default(),
        store,
        zones,
        tokens: crate::tokens::ZoneTokens::from_key(b"test key"),
        trust: umbra_pki::trust::Trust::verifier(Default::default(), Default::default()),
        inspect: std::sync::Arc::default(),
        config: std::sync::Arc::default(),
        replicas: crate::replicas::Single::shared(),
        replica_name: "global-cp".into(),
        subscriptions: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let (low, span) = unreserved_ports();
        let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
        for p in ports {
            assert!(
                (low..low + span).contains(&u32::from(p)),
                "{p} outside {low}+{span}"
            );
            assert!(TcpListener::bind(("127.0.0.1", p)).is_ok());
        }
    }
}
