//! Runs a compose project (the repository's `docker-compose.yml`) on test hosts
//! ([`crate::hosts`]) with local programs standing in for the images ([`image`]), so the
//! compose deployment itself is the topology the multi-host tests exercise.
//!
//! - **Networks**: one bridge each, on the file's subnet, or (without `ipam`) a free /24 from
//!   10.78.0.0/16; services without `networks` or `network_mode` join `default`, as compose's.
//! - **Hosts**: one per service that has networks, joined in the file's order, at its fixed
//!   `ipv4_address` or the next free address of the network's `ip_range`; a service with
//!   `network_mode: service:X` runs in X's host. Each host's `/etc/hosts` names every service
//!   it shares a network with (its address on the first shared network), as compose's DNS.
//! - **Processes**: argv = entrypoint + command (compose's rules against the image's); run
//!   with `ip netns exec`, a private `/dev/shm` (as every container has: Envoy's hot-restart
//!   memory and PostgreSQL's shared memory stay apart), the service's user (`setpriv`), a clean
//!   environment (image `ENV`, then `environment`, `PATH` = the image's programs then the
//!   system's, `HOME`), logs in `<run>/logs/<service>.log`. `restart` policies are applied by a
//!   monitor thread (0.5 s after an exit; restarts are counted, [`Project::restarts`]).
//! - **Order**: each service starts once its `depends_on` conditions hold: `service_started`,
//!   `service_healthy` (its healthcheck command, run as `docker exec` would, polled every
//!   0.25 s rather than every `interval`, until `start_period + retries * interval` has passed),
//!   `service_completed_successfully` (exit 0; a non-zero exit fails the run with its log).
//! - **Volumes and paths**: the rule in [`image`]'s docs. Named volumes live under
//!   `<run>/volumes/`, take the owner of the image directory they are first mounted on, and are
//!   not enforced read-only (`:ro` is parsed; the rewritten path is the volume itself).
//! - `ports` are parsed and not published: the test process reaches every host address.
//! - **Stopping one service**: [`Project::stop`] (`docker stop`: SIGTERM, SIGKILL after 5 s),
//!   [`Project::kill`] (`docker kill`: SIGKILL at once), [`Project::start`] (`docker start`);
//!   a stopped or killed service is not restarted by its policy. [`Project::exec`] and
//!   [`Project::exec_detached`] run a command in a service's host (`docker compose exec [-d]`).
//!
//! The run directory `/tmp/umbra-compose-<pid>-<n>` is removed on drop unless the thread is
//! panicking or `UMBRA_KEEP_COMPOSE_RUN` is set (then its path is printed, logs kept); those of
//! dead test processes are swept at the next [`Project::up`]. Projects in one process run one at a time
//! ([`Project::up`] holds a lock), since the compose file fixes the subnets.

pub mod deployment;
pub mod image;
pub mod model;
mod process;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::hosts::{self, Allocator, Host, Lab, Proc, Subnet};
use image::{Image, PathMap};
use model::{ComposeFile, Condition, Source};
use process::{Shared, Spec};

pub use image::Programs;

/// How to bring a project up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The compose file.
    pub file: PathBuf,
    /// The programs images map to.
    pub programs: Programs,
    /// The bound on the whole start (every dependency condition).
    pub timeout: Duration,
}

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A running compose project; everything it started and made is removed on drop.
pub struct Project {
    file: ComposeFile,
    run: PathBuf,
    volumes: BTreeMap<String, PathBuf>,
    shared: Arc<Shared>,
    monitor: Option<std::thread::JoinHandle<()>>,
    // Dropped after the processes (field order): namespaces, links, /etc/netns files.
    lab: Option<Lab>,
    _lock: tokio::sync::MutexGuard<'static, ()>,
}

fn chown(path: &Path, (u, g): (u32, u32)) -> anyhow::Result<()> {
    std::os::unix::fs::chown(path, Some(u), Some(g))
        .with_context(|| format!("chown {}", path.display()))
}

fn mkdir(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(path).with_context(|| format!("mkdir {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn free_subnet(taken: &[Subnet]) -> anyhow::Result<Subnet> {
    for third in 0..=255u8 {
        let s = Subnet {
            net: Ipv4Addr::new(10, 78, third, 0),
            prefix: 24,
        };
        if !taken.iter().any(|t| t.overlaps(s)) && hosts::subnet_in_use(s).is_none() {
            return Ok(s);
        }
    }
    bail!("no free /24 in 10.78.0.0/16")
}

impl Project {
    /// Bring the project up: networks, hosts, then every service in dependency order, each
    /// started once its conditions hold; returns when every service has started and every
    /// healthcheck some service waits on has passed, or fails (with the waiting services and
    /// their log tails) after `options.timeout`.
    ///
    /// # Errors
    /// Without root, on anything in the file the runner does not support, and when a service
    /// fails or a wait times out.
    pub async fn up(options: &UpOptions) -> anyhow::Result<Project> {
        let lock = LOCK.lock().await;
        let text = std::fs::read_to_string(&options.file)
            .with_context(|| format!("reading {}", options.file.display()))?;
        let mut file = ComposeFile::parse(&text)?;
        let repo = options
            .file
            .parent()
            .context("compose file has no directory")?
            .to_owned();
        let lab = Lab::new()?;
        let run = {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            std::env::temp_dir().join(format!(
                "umbra-compose-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ))
        };
        let _ = std::fs::remove_dir_all(&run);
        sweep_stale_runs();
        mkdir(&run, 0o755)?;
        let mut project = Project {
            file: file.clone(),
            run: run.clone(),
            volumes: BTreeMap::new(),
            shared: Arc::new(Shared {
                specs: BTreeMap::new(),
                hosts: BTreeMap::new(),
                state: Mutex::new(BTreeMap::new()),
                closing: false.into(),
            }),
            monitor: None,
            lab: Some(lab),
            _lock: lock,
        };
        // The `default` network for services with neither networks nor network_mode.
        let homeless: Vec<String> = file
            .services
            .values()
            .filter(|s| s.networks.is_empty() && s.network_mode_service.is_none())
            .map(|s| s.name.clone())
            .collect();
        if !homeless.is_empty() {
            file.networks.entry("default".into()).or_default();
            for s in &homeless {
                let svc = file.services.get_mut(s).expect("listed");
                svc.networks.push(("default".into(), None));
            }
        }
        project.file = file.clone();
        let (hosts, specs) = project.build(&repo, &options.programs)?;
        project.shared = Arc::new(Shared {
            specs,
            hosts,
            state: Mutex::new(BTreeMap::new()),
            closing: false.into(),
        });
        let shared = project.shared.clone();
        project.monitor = Some(std::thread::spawn(move || {
            while !shared.closing.load(std::sync::atomic::Ordering::SeqCst) {
                shared.monitor_tick();
                std::thread::sleep(Duration::from_millis(100));
            }
        }));
        project.start_all(options.timeout).await?;
        Ok(project)
    }

    /// Networks, hosts, volumes, bind copies and the rewritten specs.
    #[allow(clippy::type_complexity)]
    fn build(
        &mut self,
        repo: &Path,
        programs: &Programs,
    ) -> anyhow::Result<(BTreeMap<String, Host>, BTreeMap<String, Spec>)> {
        let file = self.file.clone();
        let lab = self.lab.as_mut().expect("up");
        let fixed: Vec<Subnet> = file.networks.values().filter_map(|n| n.subnet).collect();
        let mut allocators = BTreeMap::new();
        let mut taken = fixed.clone();
        for (name, def) in &file.networks {
            let subnet = match def.subnet {
                Some(s) => s,
                None => free_subnet(&taken)?,
            };
            taken.push(subnet);
            lab.add_network(name, subnet)?;
            allocators.insert(name.clone(), Allocator::new(subnet, def.ip_range));
        }
        for s in file.services.values() {
            for (n, a) in &s.networks {
                if let Some(a) = a {
                    allocators.get_mut(n).expect("checked").reserve(*a)?;
                }
            }
        }
        let order = file.start_order()?;
        let mut addrs: BTreeMap<String, Vec<(String, Ipv4Addr)>> = BTreeMap::new();
        for name in &order {
            let s = &file.services[name];
            if s.network_mode_service.is_some() {
                continue;
            }
            let mut joins = Vec::new();
            for (n, a) in &s.networks {
                let a = match a {
                    Some(a) => *a,
                    None => allocators.get_mut(n).expect("checked").allocate()?,
                };
                joins.push((n.clone(), a));
            }
            let refs: Vec<(&str, Ipv4Addr)> = joins.iter().map(|(n, a)| (n.as_str(), *a)).collect();
            lab.add_host(name, &refs)?;
            addrs.insert(name.clone(), joins);
        }
        // /etc/hosts: every service sharing a network, at its address there.
        for (name, mine) in &addrs {
            let mut entries = Vec::new();
            for (other, theirs) in &addrs {
                let shared = mine
                    .iter()
                    .find_map(|(n, _)| theirs.iter().find(|(m, _)| m == n).map(|(_, a)| *a));
                if let Some(a) = shared {
                    entries.push((a, vec![other.clone()]));
                }
            }
            lab.host(name).expect("made").write_hosts(&entries)?;
        }
        let hosts: BTreeMap<String, Host> = lab
            .hosts()
            .iter()
            .map(|h| (h.name.clone(), h.clone()))
            .collect();
        for d in ["volumes", "binds", "services", "logs", "bin"] {
            mkdir(&self.run.join(d), 0o755)?;
        }
        let mut specs = BTreeMap::new();
        for name in &order {
            let spec = self.spec(&file, name, repo, programs)?;
            specs.insert(name.clone(), spec);
        }
        Ok((hosts, specs))
    }

    fn spec(
        &mut self,
        file: &ComposeFile,
        name: &str,
        repo: &Path,
        programs: &Programs,
    ) -> anyhow::Result<Spec> {
        let s = &file.services[name];
        let img: Image =
            image::image(&s.image, repo, programs).with_context(|| format!("service {name}"))?;
        let user = s.user.unwrap_or(img.user);
        let root = self.run.join("services").join(name).join("root");
        mkdir(&root, 0o755)?;
        let mut paths = PathMap::default();
        for dir in &img.scratch {
            let host = root.join(dir.trim_start_matches('/'));
            mkdir(&host, 0o755)?;
            chown(&host, user)?;
            paths.add(dir, &host);
        }
        for m in &s.volumes {
            let host = match &m.source {
                Source::Named(v) => {
                    let host = self.run.join("volumes").join(v);
                    if !self.volumes.contains_key(v) {
                        mkdir(&host, 0o755)?;
                        let owner = img
                            .owned_dirs
                            .iter()
                            .find(|(d, _, _)| *d == m.target)
                            .map_or((0, 0), |(_, u, g)| (*u, *g));
                        chown(&host, owner)?;
                        self.volumes.insert(v.clone(), host.clone());
                    }
                    host
                }
                Source::Bind(src) => {
                    let src = repo.join(src);
                    anyhow::ensure!(
                        src.is_file(),
                        "service {name}: bind mount {} is not a file (only files are supported)",
                        src.display()
                    );
                    let flat = m.target.trim_start_matches('/').replace('/', "_");
                    let dir = self.run.join("binds").join(name);
                    mkdir(&dir, 0o755)?;
                    dir.join(flat)
                }
            };
            paths.add(&m.target, &host);
        }
        // Bind-mounted files: copies with the rule applied (after the table is complete).
        for m in &s.volumes {
            if let Source::Bind(src) = &m.source {
                let text = std::fs::read_to_string(repo.join(src))
                    .with_context(|| format!("service {name}: reading {src}"))?;
                let host = paths.resolve(&m.target).expect("added");
                std::fs::write(&host, paths.rewrite(&text))?;
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o644))?;
            }
        }
        if img.fixed_command {
            anyhow::ensure!(
                s.command.is_none() || s.entrypoint.is_some(),
                "service {name}: image {} runs its own entrypoint here; a command without an entrypoint is not supported",
                s.image
            );
        }
        let argv: Vec<String> = match (&s.entrypoint, &s.command) {
            (Some(e), c) => e.iter().chain(c.iter().flatten()).cloned().collect(),
            (None, Some(c)) => img.entrypoint.iter().chain(c).cloned().collect(),
            (None, None) => img.entrypoint.iter().chain(&img.cmd).cloned().collect(),
        };
        anyhow::ensure!(!argv.is_empty(), "service {name}: nothing to run");
        let argv = argv.iter().map(|a| paths.rewrite(a)).collect();
        let bin = self.run.join("bin").join(image_slug(&s.image));
        if !bin.exists() {
            mkdir(&bin, 0o755)?;
            for (cmd, target) in &img.bin {
                std::os::unix::fs::symlink(target, bin.join(cmd))?;
            }
        }
        let mut env: BTreeMap<String, String> = img.env.iter().cloned().collect();
        env.extend(s.environment.clone());
        let mut env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k, paths.rewrite(&v)))
            .collect();
        env.push((
            "PATH".into(),
            format!(
                "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                bin.display()
            ),
        ));
        env.push(("HOME".into(), root.to_string_lossy().into_owned()));
        let cwd = paths.resolve(&img.workdir).unwrap_or_else(|| root.clone());
        let health = s.healthcheck.clone().map(|mut h| {
            h.test = h.test.iter().map(|a| paths.rewrite(a)).collect();
            h
        });
        Ok(Spec {
            host: file.host_of(name).to_owned(),
            argv,
            env,
            user,
            cwd,
            health,
            restart: s.restart,
            log: self.run.join("logs").join(format!("{name}.log")),
            paths,
        })
    }

    async fn start_all(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut pending: Vec<String> = self.file.start_order()?;
        let mut probing: Vec<(String, Instant)> = Vec::new();
        let waited_health: Vec<String> = self
            .file
            .services
            .values()
            .flat_map(|s| s.depends_on.iter())
            .filter(|(_, c)| *c == Condition::Healthy)
            .map(|(d, _)| d.clone())
            .collect();
        loop {
            // Start every service whose conditions hold.
            let mut i = 0;
            while i < pending.len() {
                let name = pending[i].clone();
                if self.ready_to_start(&name)? {
                    let p = self.shared.spawn(&name)?;
                    self.shared.with(&name, |s| {
                        s.proc = Some(p);
                        s.started = true;
                    });
                    if let Some(h) = &self.shared.specs[&name].health {
                        let budget = h.start_period + h.interval * h.retries + h.timeout;
                        probing.push((name.clone(), Instant::now() + budget));
                    }
                    pending.remove(i);
                } else {
                    i += 1;
                }
            }
            // Probe healthchecks (in parallel, each bounded by its timeout).
            let mut checks = Vec::new();
            for (name, _) in &probing {
                let shared = self.shared.clone();
                let name = name.clone();
                checks.push(tokio::task::spawn_blocking(move || {
                    let ok = shared.probe(&name);
                    (name, ok)
                }));
            }
            for c in checks {
                let (name, ok) = c.await?;
                if ok {
                    self.shared.with(&name, |s| s.healthy = true);
                    probing.retain(|(n, _)| *n != name);
                }
            }
            if let Some((name, _)) = probing.iter().find(|(_, d)| Instant::now() > *d) {
                bail!(
                    "service {name} never became healthy ({:?}); {}",
                    self.shared.specs[name].health.as_ref().map(|h| &h.test),
                    self.report()
                );
            }
            let unhealthy_waited = probing.iter().any(|(n, _)| waited_health.contains(n));
            if pending.is_empty() && !unhealthy_waited {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "compose up did not finish within {timeout:?}: still waiting to start {pending:?}, for health of {:?}; {}",
                    probing.iter().map(|(n, _)| n).collect::<Vec<_>>(),
                    self.report()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether every `depends_on` condition of `name` holds; an error when one never will.
    fn ready_to_start(&self, name: &str) -> anyhow::Result<bool> {
        let s = &self.file.services[name];
        let mut deps = s.depends_on.clone();
        if let Some(h) = &s.network_mode_service {
            deps.push((h.clone(), Condition::Started));
        }
        for (d, cond) in deps {
            let (started, healthy, exit) =
                self.shared.with(&d, |st| (st.started, st.healthy, st.exit));
            let ok = match cond {
                Condition::Started => started,
                Condition::Healthy => healthy,
                Condition::CompletedSuccessfully => match exit {
                    Some(0) => true,
                    Some(code) => bail!(
                        "service {d} exited {code} ({name} needs it to complete successfully):\n{}",
                        self.log_tail(&d, 30)
                    ),
                    None => false,
                },
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every service's state and log tail (for failure messages).
    #[must_use]
    pub fn report(&self) -> String {
        let mut out = String::from("services:\n");
        for name in self.shared.specs.keys() {
            let (started, healthy, exit, restarts) = self
                .shared
                .with(name, |s| (s.started, s.healthy, s.exit, s.restarts));
            out.push_str(&format!(
                "--- {name}: started={started} healthy={healthy} exit={exit:?} restarts={restarts}\n{}\n",
                self.log_tail(name, 12)
            ));
        }
        out.push_str(&format!("(run directory: {})", self.run.display()));
        out
    }

    /// The host service `service` runs in (its own, or its `network_mode` service's).
    ///
    /// # Panics
    /// On an unknown service.
    #[must_use]
    pub fn host(&self, service: &str) -> &Host {
        &self.shared.hosts[self.file.host_of(service)]
    }

    /// The address of `service`'s host on `network`.
    #[must_use]
    pub fn addr_on(&self, service: &str, network: &str) -> Option<Ipv4Addr> {
        self.host(service).addr(network)
    }

    /// The first address of `service`'s host.
    #[must_use]
    pub fn addr(&self, service: &str) -> Ipv4Addr {
        self.host(service).primary_addr()
    }

    /// `service`'s `port` as the test process reaches it (its first address).
    #[must_use]
    pub fn socket(&self, service: &str, port: u16) -> SocketAddr {
        SocketAddr::from((self.addr(service), port))
    }

    /// Run `argv` as `docker compose exec <service>` would: in its host, as its user, with its
    /// environment and working directory, container paths rewritten; bounded by `timeout`.
    /// Exit code and output.
    ///
    /// # Errors
    /// When it cannot start or does not end in time.
    pub fn exec(
        &self,
        service: &str,
        argv: &[&str],
        timeout: Duration,
    ) -> anyhow::Result<(i32, String)> {
        let spec = self
            .shared
            .specs
            .get(service)
            .with_context(|| format!("no service {service}"))?;
        let argv: Vec<String> = argv.iter().map(|a| spec.paths.rewrite(a)).collect();
        let out = self.run.join("logs").join(format!(
            "{service}.exec-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut p = Proc::spawn(self.shared.command(spec, &argv), &out)?;
        let code = p.wait_timeout(timeout);
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        match code {
            Some(c) => Ok((c, text)),
            None => bail!("exec {argv:?} in {service} did not end within {timeout:?}: {text}"),
        }
    }

    /// Start `argv` as `docker compose exec -d <service>` would (as [`Project::exec`], without
    /// waiting): the process, killed when dropped; its output goes to `Proc::log`.
    ///
    /// # Errors
    /// When it cannot start.
    pub fn exec_detached(&self, service: &str, argv: &[&str]) -> anyhow::Result<Proc> {
        let spec = self
            .shared
            .specs
            .get(service)
            .with_context(|| format!("no service {service}"))?;
        let argv: Vec<String> = argv.iter().map(|a| spec.paths.rewrite(a)).collect();
        let out = self.run.join("logs").join(format!(
            "{service}.exec-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        Proc::spawn(self.shared.command(spec, &argv), &out)
    }

    /// The host path container path `path` of `service` stands for (a volume file, say).
    #[must_use]
    pub fn path(&self, service: &str, path: &str) -> Option<PathBuf> {
        self.shared.specs.get(service)?.paths.resolve(path)
    }

    /// The run directory (`/tmp/umbra-compose-<pid>-<n>`): logs in `logs/`, named volumes in
    /// `volumes/`.
    #[must_use]
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    /// The host directory of named volume `name`.
    #[must_use]
    pub fn volume(&self, name: &str) -> Option<&Path> {
        self.volumes.get(name).map(PathBuf::as_path)
    }

    /// The admin user token the `credentials` one-shot wrote (`tokens` volume, `admin`).
    ///
    /// # Errors
    /// When it is not there.
    pub fn admin_token(&self) -> anyhow::Result<String> {
        let p = self
            .volume("tokens")
            .context("no tokens volume")?
            .join("admin");
        Ok(std::fs::read_to_string(&p)
            .with_context(|| format!("reading {}", p.display()))?
            .trim()
            .to_owned())
    }

    /// `method path` on `service`'s API at `port` as the admin (Bearer token); status and
    /// JSON body (a string when not JSON). Bounded to 10 s.
    ///
    /// # Errors
    /// When the token is missing or the call fails.
    pub async fn call(
        &self,
        service: &str,
        port: u16,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        let auth = format!("Bearer {}", self.admin_token()?);
        let (status, text) = crate::http_with(
            self.socket(service, port),
            method,
            path,
            body,
            &[("authorization", &auth)],
        )
        .await?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        ))
    }

    /// The log of `service` (stdout and stderr).
    #[must_use]
    pub fn log(&self, service: &str) -> String {
        self.shared
            .specs
            .get(service)
            .and_then(|s| std::fs::read_to_string(&s.log).ok())
            .unwrap_or_default()
    }

    /// The last `n` lines of `service`'s log.
    #[must_use]
    pub fn log_tail(&self, service: &str, n: usize) -> String {
        self.shared
            .specs
            .get(service)
            .map(|s| hosts::tail(&s.log, n))
            .unwrap_or_default()
    }

    /// How often the runner restarted `service` (its `restart` policy after an exit).
    #[must_use]
    pub fn restarts(&self, service: &str) -> u32 {
        self.shared.with(service, |s| s.restarts)
    }

    /// `service`'s last exit code, if it exited (and was not restarted since).
    #[must_use]
    pub fn exit_code(&self, service: &str) -> Option<i32> {
        self.shared.with(service, |s| s.exit)
    }

    /// Services in start order.
    #[must_use]
    pub fn services(&self) -> Vec<String> {
        self.file.start_order().unwrap_or_default()
    }

    /// The parsed compose file.
    #[must_use]
    pub fn file(&self) -> &ComposeFile {
        &self.file
    }

    /// Stop `service` (SIGTERM, SIGKILL after 5 s); its restart policy no longer applies.
    pub fn stop(&self, service: &str) {
        let p = self.shared.with(service, |s| {
            s.stopped = true;
            s.restart_at = None;
            s.proc.take()
        });
        if let Some(mut p) = p {
            p.signal("TERM");
            if p.wait_timeout(Duration::from_secs(5)).is_none() {
                p.kill();
            }
            self.shared.with(service, |s| s.exit = p.exited());
        }
    }

    /// Kill `service` at once, as `docker kill` does: SIGKILL to its whole process group (no
    /// chance to clean up: its connections are reset by its host's kernel, a PostgreSQL
    /// session it held ends); its restart policy no longer applies ([`Project::start`] brings
    /// it back). Its exit code.
    pub fn kill(&self, service: &str) -> Option<i32> {
        let p = self.shared.with(service, |s| {
            s.stopped = true;
            s.restart_at = None;
            s.healthy = false;
            s.proc.take()
        });
        let mut p = p?;
        p.kill();
        let code = p.exited();
        self.shared.with(service, |s| s.exit = code);
        code
    }

    /// Whether `service` has a process running (started and neither exited nor stopped).
    #[must_use]
    pub fn running(&self, service: &str) -> bool {
        self.shared.with(service, |s| {
            s.proc.as_mut().is_some_and(|p| p.exited().is_none())
        })
    }

    /// Start a stopped `service` again.
    ///
    /// # Errors
    /// When it cannot be spawned.
    pub fn start(&self, service: &str) -> anyhow::Result<()> {
        self.stop(service);
        let p = self.shared.spawn(service)?;
        self.shared.with(service, |s| {
            s.stopped = false;
            s.exit = None;
            s.proc = Some(p);
        });
        Ok(())
    }
}

/// Remove run directories (`umbra-compose-<pid>-<n>`) and `Host::run` output files
/// (`umbra-hosts-<pid>-...`) of test processes that no longer run.
fn sweep_stale_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix("umbra-compose-")
            .or_else(|| name.strip_prefix("umbra-hosts-"))
        else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn image_slug(image: &str) -> String {
    image
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

impl Drop for Project {
    fn drop(&mut self) {
        self.shared
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        let procs: Vec<Proc> = {
            let mut st = self
                .shared
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.values_mut().filter_map(|s| s.proc.take()).collect()
        };
        drop(procs);
        drop(self.lab.take());
        if std::thread::panicking() || std::env::var_os("UMBRA_KEEP_COMPOSE_RUN").is_some() {
            eprintln!("compose: logs and volumes kept in {}", self.run.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.run);
        }
    }
}
