//! The processes of a running compose project: how each service runs ([`Spec`]), its state
//! (started, healthy, exit, restarts), the wrapper every process goes through (private
//! `/dev/shm`, working directory, user), the restart monitor and the healthcheck probe.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::image::PathMap;
use super::model::{self, Restart};
use crate::hosts::{Host, Proc};

/// How one service runs (everything already rewritten to host paths).
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub(super) host: String,
    pub(super) argv: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) user: (u32, u32),
    pub(super) cwd: PathBuf,
    pub(super) health: Option<model::Healthcheck>,
    pub(super) restart: Restart,
    pub(super) log: PathBuf,
    pub(super) paths: PathMap,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) proc: Option<Proc>,
    pub(super) started: bool,
    pub(super) healthy: bool,
    pub(super) exit: Option<i32>,
    pub(super) restarts: u32,
    pub(super) stopped: bool,
    pub(super) restart_at: Option<Instant>,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) specs: BTreeMap<String, Spec>,
    pub(super) hosts: BTreeMap<String, Host>,
    pub(super) state: Mutex<BTreeMap<String, State>>,
    pub(super) closing: std::sync::atomic::AtomicBool,
}

/// The environment-and-user wrapper every service process and exec goes through: a private
/// `/dev/shm`, the working directory, then the program as `uid:gid` (`$1`..`$3`).
const PRELUDE: &str = "mount -t tmpfs -o mode=1777,size=67108864 shm /dev/shm && cd \"$1\" && u=$2 && g=$3 && shift 3 && if [ \"$u\" = 0 ]; then exec \"$@\"; else exec setpriv --reuid=\"$u\" --regid=\"$g\" --clear-groups -- \"$@\"; fi";

impl Shared {
    pub(super) fn command(&self, spec: &Spec, argv: &[String]) -> std::process::Command {
        let mut c = self.hosts[&spec.host].command("sh");
        c.args(["-c", PRELUDE, "sh"])
            .arg(&spec.cwd)
            .arg(spec.user.0.to_string())
            .arg(spec.user.1.to_string())
            .args(argv)
            .env_clear()
            .envs(spec.env.iter().cloned());
        c
    }

    pub(super) fn spawn(&self, name: &str) -> anyhow::Result<Proc> {
        let spec = &self.specs[name];
        Proc::spawn(self.command(spec, &spec.argv), &spec.log)
    }

    pub(super) fn with<T>(&self, name: &str, f: impl FnOnce(&mut State) -> T) -> T {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(st.entry(name.to_owned()).or_default())
    }

    /// One pass of the monitor: record exits, apply restart policies.
    pub(super) fn monitor_tick(&self) {
        let names: Vec<String> = self.specs.keys().cloned().collect();
        for name in names {
            let restart = self.specs[&name].restart;
            let due = self.with(&name, |s| {
                if let Some(p) = s.proc.as_mut() {
                    if let Some(code) = p.exited() {
                        s.exit = Some(code);
                        s.proc = None;
                        s.healthy = false;
                        let again = match restart {
                            Restart::No => false,
                            Restart::UnlessStopped => true,
                            Restart::OnFailure => code != 0,
                        };
                        if again && !s.stopped {
                            s.restart_at = Some(Instant::now() + Duration::from_millis(500));
                        }
                    }
                }
                s.restart_at.is_some_and(|t| t <= Instant::now()) && !s.stopped
            });
            if due && !self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                let note = format!("--- compose runner: restarting {name} ---\n");
                let _ = append(&self.specs[&name].log, &note);
                let p = self.spawn(&name);
                self.with(&name, |s| {
                    s.restart_at = None;
                    s.restarts += 1;
                    s.exit = None;
                    s.proc = p.ok();
                });
            }
        }
    }

    /// Run the healthcheck of `name` once.
    pub(super) fn probe(&self, name: &str) -> bool {
        let spec = &self.specs[name];
        let Some(h) = &spec.health else { return true };
        let out = spec.log.with_extension("health.log");
        let Ok(mut p) = Proc::spawn(self.command(spec, &h.test), &out) else {
            return false;
        };
        p.wait_timeout(h.timeout) == Some(0)
    }
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}
