//! Test hosts as Linux network namespaces, wired the way Docker wires compose containers.
//!
//! A [`Lab`] owns everything it creates and removes it on drop (also when a test panics):
//! - a **network** is a Linux bridge in the root namespace holding the gateway address
//!   (`<subnet>.1/<prefix>`), so the test process reaches every host address directly, as the
//!   Docker host does; IP forwarding is not enabled, so networks stay isolated from each other;
//! - a **host** is a named network namespace `umbra<pid>-<name>` with `lo` up and one veth
//!   pair per network it joins (root end `umb<pid>v<k>` enslaved to the bridge, host end
//!   `eth<i>` with the host's own address); hosts have no default route;
//! - name resolution as compose gives it: `/etc/netns/<namespace>/hosts` (which
//!   `ip netns exec` bind-mounts over `/etc/hosts`) maps names to addresses;
//! - processes run inside a host through `ip netns exec` ([`Host::command`]), in a process
//!   group of their own so that [`Proc`] kills the whole tree; when a host is removed every
//!   process left in its namespace (`ip netns pids`) is killed first.
//!
//! Names carry the creating process id (bridges `umb<pid>b<n>`, root veth ends `umb<pid>v<k>`,
//! namespaces `umbra<pid>-<name>`); [`Lab::new`] sweeps those left by a test process that no
//! longer runs (killed by SIGKILL, say). Creating namespaces needs root (CAP_NET_ADMIN and
//! CAP_SYS_ADMIN): without it [`Lab::new`] fails with a message saying so.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// An IPv4 subnet, `address/prefix` (the address is the network address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    /// The network address.
    pub net: Ipv4Addr,
    /// The prefix length, 8 to 30.
    pub prefix: u8,
}

impl Subnet {
    /// Parse `a.b.c.d/n` (host bits must be zero; prefix 8 to 30).
    ///
    /// # Errors
    /// On any other text.
    pub fn parse(s: &str) -> anyhow::Result<Subnet> {
        let (a, p) = s
            .split_once('/')
            .with_context(|| format!("subnet {s:?}: not address/prefix"))?;
        let net: Ipv4Addr = a.parse().with_context(|| format!("subnet {s:?}"))?;
        let prefix: u8 = p.parse().with_context(|| format!("subnet {s:?}"))?;
        anyhow::ensure!((8..=30).contains(&prefix), "subnet {s:?}: prefix not 8..30");
        let sub = Subnet { net, prefix };
        anyhow::ensure!(
            u32::from(net) & !sub.mask() == 0,
            "subnet {s:?}: host bits set"
        );
        Ok(sub)
    }

    fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix))
    }

    /// Whether `a` is in this subnet.
    #[must_use]
    pub fn contains(self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.net)
    }

    /// The gateway address the bridge holds: the first host address (`.1` of a /24).
    #[must_use]
    pub fn gateway(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.net) + 1)
    }

    /// The `n`-th host address (1 = the gateway); `None` past the broadcast address.
    #[must_use]
    pub fn host(self, n: u32) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - u32::from(self.prefix));
        (n >= 1 && n < size - 1).then(|| Ipv4Addr::from(u32::from(self.net) + n))
    }

    /// Whether the two subnets share any address.
    #[must_use]
    pub fn overlaps(self, other: Subnet) -> bool {
        let m = self.mask() & other.mask();
        u32::from(self.net) & m == u32::from(other.net) & m
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// Hands out addresses of one subnet: fixed ones reserved first, then the lowest free host
/// address from `.2` up (the gateway `.1` is the bridge's), or from `ip_range` when given
/// (Docker's dynamic range).
#[derive(Debug, Clone)]
pub struct Allocator {
    subnet: Subnet,
    range: Option<Subnet>,
    taken: Vec<Ipv4Addr>,
}

impl Allocator {
    /// An allocator for `subnet`, dynamic addresses from `range` (inside `subnet`) if given.
    #[must_use]
    pub fn new(subnet: Subnet, range: Option<Subnet>) -> Allocator {
        Allocator {
            subnet,
            range,
            taken: vec![subnet.gateway()],
        }
    }

    /// Reserve the fixed address `a`.
    ///
    /// # Errors
    /// When `a` is outside the subnet, is the gateway or the broadcast address, or is taken.
    pub fn reserve(&mut self, a: Ipv4Addr) -> anyhow::Result<()> {
        let size = 1u64 << (32 - u32::from(self.subnet.prefix));
        let offset = u64::from(u32::from(a).wrapping_sub(u32::from(self.subnet.net)));
        let inside = self.subnet.contains(a) && offset >= 2 && offset < size - 1;
        anyhow::ensure!(inside, "{a} is not a host address of {}", self.subnet);
        anyhow::ensure!(!self.taken.contains(&a), "{a} is taken twice");
        self.taken.push(a);
        Ok(())
    }

    /// The next free address.
    ///
    /// # Errors
    /// When the subnet (or its range) is full.
    pub fn allocate(&mut self) -> anyhow::Result<Ipv4Addr> {
        for n in 2.. {
            let Some(a) = self.subnet.host(n) else { break };
            if self.range.is_some_and(|r| !r.contains(a)) || self.taken.contains(&a) {
                continue;
            }
            self.taken.push(a);
            return Ok(a);
        }
        bail!("no free address left in {}", self.subnet)
    }
}

/// Name of the namespace of host `name` made by process `pid`.
#[must_use]
pub fn netns_name(pid: u32, name: &str) -> String {
    format!("umbra{pid}-{name}")
}

/// Name of bridge `n` made by process `pid` (at most 15 characters for any pid and n < 100).
#[must_use]
pub fn bridge_name(pid: u32, n: usize) -> String {
    format!("umb{pid}b{n}")
}

/// Name of the root end of veth `k` made by process `pid` (at most 15 characters, k < 1000).
#[must_use]
pub fn veth_name(pid: u32, k: usize) -> String {
    format!("umb{pid}v{k}")
}

/// The creating pid carried by a namespace, bridge or veth name this module makes, if any.
#[must_use]
pub fn owner_pid(name: &str) -> Option<u32> {
    if let Some(rest) = name.strip_prefix("umbra") {
        let (pid, _) = rest.split_once('-')?;
        return pid.parse().ok();
    }
    let rest = name.strip_prefix("umb")?;
    let i = rest.find(['b', 'v'])?;
    let (pid, tail) = rest.split_at(i);
    tail[1..].parse::<usize>().ok()?;
    pid.parse().ok()
}

/// Run `ip` with `args`; its stderr on failure.
fn ip(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running `ip` (iproute2)")?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    bail!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Kill every process in namespace `ns` (SIGKILL) and wait up to 5 s for them to go.
fn kill_netns_pids(ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids: Vec<String> = ip(&["netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        let _ = Command::new("kill").arg("-KILL").args(&pids).output();
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn remove_netns(ns: &str) {
    kill_netns_pids(ns);
    let _ = ip(&["netns", "del", ns]);
    let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(ns));
}

/// Remove namespaces, bridges and veths (and their `/etc/netns` files) whose creating process
/// no longer runs. Returns what was removed.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let me = std::process::id();
    let stale = |name: &str| owner_pid(name).is_some_and(|p| p != me && !pid_alive(p));
    for line in ip(&["netns", "list"]).unwrap_or_default().lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        if stale(ns) {
            remove_netns(ns);
            removed.push(ns.to_owned());
        }
    }
    if let Ok(dirs) = std::fs::read_dir("/etc/netns") {
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            if stale(&name) {
                let _ = std::fs::remove_dir_all(d.path());
            }
        }
    }
    for line in ip(&["-o", "link", "show"]).unwrap_or_default().lines() {
        // "12: umb123v4@if11: <...>"
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        if stale(name) {
            let _ = ip(&["link", "del", name]);
            removed.push(name.to_owned());
        }
    }
    removed
}

/// Fail with a clear message unless this process may create network namespaces (root, or
/// CAP_NET_ADMIN + CAP_SYS_ADMIN); probes by creating and deleting one.
///
/// # Errors
/// Without the privilege, saying what is needed.
pub fn require_privilege() -> anyhow::Result<()> {
    // Once per process: tests run on several threads, and the probe's name is per process.
    static CHECKED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| check_privilege(std::process::id()).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn check_privilege(pid: u32) -> anyhow::Result<()> {
    let probe = netns_name(pid, "probe");
    match ip(&["netns", "add", &probe]) {
        Ok(_) => {
            let _ = ip(&["netns", "del", &probe]);
            Ok(())
        }
        Err(e) => bail!(
            "the multi-host tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network \
             namespaces, bridges and veth pairs; run them as root (CI does): {e}"
        ),
    }
}

/// Addresses in use on this machine's root namespace, with their interface.
fn root_addresses() -> Vec<(String, Ipv4Addr, u8)> {
    let mut out = Vec::new();
    for line in ip(&["-o", "-4", "addr", "show"])
        .unwrap_or_default()
        .lines()
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = f.iter().position(|w| *w == "inet") else {
            continue;
        };
        let Some((a, p)) = f.get(i + 1).and_then(|c| c.split_once('/')) else {
            continue;
        };
        if let (Ok(a), Ok(p)) = (a.parse(), p.parse()) {
            out.push((f[1].to_owned(), a, p));
        }
    }
    out
}

/// Whether `subnet` collides with an address of the root namespace (another network, or a
/// running test's bridge).
pub fn subnet_in_use(subnet: Subnet) -> Option<String> {
    root_addresses().into_iter().find_map(|(dev, a, p)| {
        let theirs = Subnet {
            net: Ipv4Addr::from(u32::from(a) & (u32::MAX << (32 - u32::from(p.clamp(1, 32))))),
            prefix: p,
        };
        subnet
            .overlaps(theirs)
            .then(|| format!("{dev} has {a}/{p}"))
    })
}

/// One network: a bridge holding the gateway address.
#[derive(Debug, Clone)]
pub struct Network {
    /// The network's name (as the compose file names it).
    pub name: String,
    /// Its subnet.
    pub subnet: Subnet,
    /// The bridge's interface name.
    pub bridge: String,
}

/// One network a host joined: its address and both veth ends.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// The network's name.
    pub network: String,
    /// The host's address there.
    pub addr: Ipv4Addr,
    /// The root end of the veth (a bridge port).
    pub root_veth: String,
    /// The host end (`eth<i>` inside the namespace).
    pub host_veth: String,
}

/// One host: a network namespace.
#[derive(Debug, Clone)]
pub struct Host {
    /// The host's name (the compose service it is for).
    pub name: String,
    /// The namespace's name (`umbra<pid>-<name>`).
    pub netns: String,
    /// The networks it joined, in the order it joined them.
    pub attachments: Vec<Attachment>,
}

impl Host {
    /// Its address on `network`.
    #[must_use]
    pub fn addr(&self, network: &str) -> Option<Ipv4Addr> {
        self.attachments
            .iter()
            .find(|a| a.network == network)
            .map(|a| a.addr)
    }

    /// Its first address (of the first network it joined).
    ///
    /// # Panics
    /// When the host joined no network.
    #[must_use]
    pub fn primary_addr(&self) -> Ipv4Addr {
        self.attachments
            .first()
            .unwrap_or_else(|| panic!("host {} joined no network", self.name))
            .addr
    }

    /// `program` to run inside this host: `ip netns exec <netns> <program>`. The caller adds
    /// arguments, environment, and the standard streams; [`Proc::spawn`] runs it in a process
    /// group of its own.
    #[must_use]
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns]).arg(program);
        c
    }

    /// Run `argv` inside this host to completion (bounded by `timeout`); exit status and
    /// stdout+stderr.
    ///
    /// # Errors
    /// When it cannot start or does not end within `timeout` (then it is killed).
    pub fn run(&self, argv: &[&str], timeout: Duration) -> anyhow::Result<(i32, String)> {
        let (program, args) = argv.split_first().context("empty argv")?;
        let out = tempfile_path(&format!("run-{}", self.name));
        let mut c = self.command(program);
        c.args(args);
        let mut p = Proc::spawn(c, &out)?;
        let code = p.wait_timeout(timeout);
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        match code {
            Some(code) => Ok((code, text)),
            None => bail!(
                "`{}` in host {} did not end within {timeout:?}: {text}",
                argv.join(" "),
                self.name
            ),
        }
    }

    /// Take every link of this host down (its root veth ends: the cable is pulled; the host
    /// keeps its addresses and its processes run on).
    ///
    /// # Errors
    /// When `ip link set` fails.
    pub fn down(&self) -> anyhow::Result<()> {
        for a in &self.attachments {
            ip(&["link", "set", "dev", &a.root_veth, "down"])?;
        }
        Ok(())
    }

    /// Bring every link of this host back up.
    ///
    /// # Errors
    /// When `ip link set` fails.
    pub fn up(&self) -> anyhow::Result<()> {
        for a in &self.attachments {
            ip(&["link", "set", "dev", &a.root_veth, "up"])?;
        }
        Ok(())
    }

    /// Take only the link to `network` down.
    ///
    /// # Errors
    /// When the host is not on `network` or `ip link set` fails.
    pub fn link_down(&self, network: &str) -> anyhow::Result<()> {
        ip(&[
            "link",
            "set",
            "dev",
            &self.attachment(network)?.root_veth,
            "down",
        ])?;
        Ok(())
    }

    /// Bring the link to `network` back up.
    ///
    /// # Errors
    /// When the host is not on `network` or `ip link set` fails.
    pub fn link_up(&self, network: &str) -> anyhow::Result<()> {
        ip(&[
            "link",
            "set",
            "dev",
            &self.attachment(network)?.root_veth,
            "up",
        ])?;
        Ok(())
    }

    fn attachment(&self, network: &str) -> anyhow::Result<&Attachment> {
        self.attachments
            .iter()
            .find(|a| a.network == network)
            .with_context(|| format!("host {} is not on network {network}", self.name))
    }

    /// Write this host's `/etc/hosts` (`/etc/netns/<netns>/hosts`): localhost, then one line
    /// per `(address, names)`.
    ///
    /// # Errors
    /// On filesystem errors.
    pub fn write_hosts(&self, entries: &[(Ipv4Addr, Vec<String>)]) -> anyhow::Result<()> {
        let dir = Path::new("/etc/netns").join(&self.netns);
        std::fs::create_dir_all(&dir)?;
        let mut text = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n");
        for (a, names) in entries {
            text.push_str(&format!("{a}\t{}\n", names.join(" ")));
        }
        std::fs::write(dir.join("hosts"), text)?;
        Ok(())
    }

    /// TCP sockets listening inside this host: `(address, port)` from `/proc/net/tcp`.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn tcp_listeners(&self) -> anyhow::Result<Vec<(Ipv4Addr, u16)>> {
        let (code, text) = self.run(&["cat", "/proc/net/tcp"], Duration::from_secs(5))?;
        anyhow::ensure!(code == 0, "cat /proc/net/tcp: {text}");
        Ok(parse_proc_net_tcp(&text, "0A"))
    }
}

/// `(address, port)` of the rows of a `/proc/net/tcp` text in state `state` (hex, `0A` =
/// LISTEN, `01` = ESTABLISHED); local addresses.
#[must_use]
pub fn parse_proc_net_tcp(text: &str, state: &str) -> Vec<(Ipv4Addr, u16)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) != Some(&state) {
                return None;
            }
            let (a, p) = f.get(1)?.split_once(':')?;
            let a = u32::from_str_radix(a, 16).ok()?;
            // The kernel prints the network-order bytes as one native (little-endian) word.
            let a = Ipv4Addr::from(a.to_le_bytes());
            Some((a, u16::from_str_radix(p, 16).ok()?))
        })
        .collect()
}

fn tempfile_path(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "umbra-hosts-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A process started inside a host, in a process group of its own, its stdout and stderr
/// going to one log file; the whole group is killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    /// Its log (stdout and stderr).
    pub log: PathBuf,
    exit: Option<i32>,
}

impl Proc {
    /// Spawn `cmd` in a new process group, stdin closed, stdout and stderr appended to `log`.
    ///
    /// # Errors
    /// When the log cannot be opened or the process cannot start.
    pub fn spawn(mut cmd: Command, log: &Path) -> anyhow::Result<Proc> {
        use std::os::unix::process::CommandExt as _;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone()?;
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawning {cmd:?}"))?;
        Ok(Proc {
            child,
            log: log.to_owned(),
            exit: None,
        })
    }

    /// Its process id (also its process group id).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit code if it has ended (-1 when killed by a signal), without waiting.
    pub fn exited(&mut self) -> Option<i32> {
        if self.exit.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.exit = Some(s.code().unwrap_or(-1));
            }
        }
        self.exit
    }

    /// Wait up to `timeout` for it to end; its exit code, or `None` (then the group is
    /// killed).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(c) = self.exited() {
                return Some(c);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        None
    }

    /// Send `signal` (a `kill` name such as `TERM`) to the whole process group.
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .stderr(Stdio::null())
            .output();
    }

    /// Kill the whole process group (SIGKILL) and reap the process.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            self.signal("KILL");
            let _ = self.child.wait();
            self.exit = Some(-1);
        }
        // Children outside the group die with their host's namespace.
        self.signal("KILL");
    }

    /// The last `n` lines of its log.
    #[must_use]
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of the file at `path` (empty when unreadable).
#[must_use]
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The hosts and networks of one test run; removes all of them on drop.
#[derive(Debug)]
pub struct Lab {
    pid: u32,
    networks: Vec<Network>,
    hosts: Vec<Host>,
    veths: usize,
}

impl Lab {
    /// Check the privilege, sweep what dead test processes left, start empty.
    ///
    /// # Errors
    /// Without root (CAP_NET_ADMIN + CAP_SYS_ADMIN), with a message saying so.
    pub fn new() -> anyhow::Result<Lab> {
        let pid = std::process::id();
        check_privilege(pid)?;
        let removed = sweep_stale();
        if !removed.is_empty() {
            eprintln!("hosts: swept leftovers of dead test runs: {removed:?}");
        }
        Ok(Lab {
            pid,
            networks: Vec::new(),
            hosts: Vec::new(),
            veths: 0,
        })
    }

    /// Create network `name` on `subnet`: a bridge holding the gateway address.
    ///
    /// # Errors
    /// When the subnet collides with an address of this machine (or of another test run), or
    /// `ip` fails.
    pub fn add_network(&mut self, name: &str, subnet: Subnet) -> anyhow::Result<&Network> {
        if let Some(who) = subnet_in_use(subnet) {
            bail!("network {name}: subnet {subnet} is in use on this machine ({who}); is another multi-host test running?");
        }
        let bridge = bridge_name(self.pid, self.networks.len());
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        self.networks.push(Network {
            name: name.to_owned(),
            subnet,
            bridge: bridge.clone(),
        });
        let gw = format!("{}/{}", subnet.gateway(), subnet.prefix);
        ip(&["addr", "add", &gw, "dev", &bridge])?;
        ip(&["link", "set", "dev", &bridge, "up"])?;
        Ok(self.networks.last().expect("just pushed"))
    }

    /// The network called `name`.
    #[must_use]
    pub fn network(&self, name: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.name == name)
    }

    /// Create host `name` joined to `(network, address)` pairs, in order.
    ///
    /// # Errors
    /// When a network is unknown, an address is outside its subnet, or `ip` fails.
    pub fn add_host(&mut self, name: &str, joins: &[(&str, Ipv4Addr)]) -> anyhow::Result<&Host> {
        let netns = netns_name(self.pid, name);
        ip(&["netns", "add", &netns])?;
        self.hosts.push(Host {
            name: name.to_owned(),
            netns: netns.clone(),
            attachments: Vec::new(),
        });
        ip(&["-n", &netns, "link", "set", "dev", "lo", "up"])?;
        for (i, (network, addr)) in joins.iter().enumerate() {
            let net = self
                .network(network)
                .with_context(|| format!("host {name}: no network {network}"))?
                .clone();
            anyhow::ensure!(
                net.subnet.contains(*addr),
                "host {name}: {addr} is not in {network} ({})",
                net.subnet
            );
            let root = veth_name(self.pid, self.veths);
            self.veths += 1;
            let inner = format!("eth{i}");
            ip(&[
                "link", "add", &root, "type", "veth", "peer", "name", &inner, "netns", &netns,
            ])?;
            self.hosts
                .last_mut()
                .expect("just pushed")
                .attachments
                .push(Attachment {
                    network: (*network).to_owned(),
                    addr: *addr,
                    root_veth: root.clone(),
                    host_veth: inner.clone(),
                });
            ip(&["link", "set", "dev", &root, "master", &net.bridge])?;
            ip(&["link", "set", "dev", &root, "up"])?;
            let cidr = format!("{addr}/{}", net.subnet.prefix);
            ip(&["-n", &netns, "addr", "add", &cidr, "dev", &inner])?;
            ip(&["-n", &netns, "link", "set", "dev", &inner, "up"])?;
        }
        Ok(self.hosts.last().expect("just pushed"))
    }

    /// The host called `name`.
    #[must_use]
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// Every host, in creation order.
    #[must_use]
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for h in &self.hosts {
            remove_netns(&h.netns);
            for a in &h.attachments {
                let _ = ip(&["link", "del", &a.root_veth]);
            }
        }
        for n in &self.networks {
            let _ = ip(&["link", "del", &n.bridge]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_interfaces_and_carry_the_pid() {
        let pid = 4_194_304; // the largest pid_max
        assert!(bridge_name(pid, 99).len() <= 15);
        assert!(veth_name(pid, 999).len() <= 15);
        assert_eq!(owner_pid(&bridge_name(pid, 3)), Some(pid));
        assert_eq!(owner_pid(&veth_name(pid, 12)), Some(pid));
        assert_eq!(owner_pid(&netns_name(pid, "zone-1-cp")), Some(pid));
        assert_eq!(owner_pid("umbrella"), None);
        assert_eq!(owner_pid("eth0"), None);
        assert_eq!(owner_pid("umb12x3"), None);
    }

    #[test]
    fn subnets_and_addresses() {
        let s = Subnet::parse("10.77.1.0/24").unwrap();
        assert_eq!(s.gateway(), Ipv4Addr::new(10, 77, 1, 1));
        assert!(s.contains(Ipv4Addr::new(10, 77, 1, 200)));
        assert!(!s.contains(Ipv4Addr::new(10, 77, 2, 1)));
        assert!(Subnet::parse("10.77.1.1/24").is_err());
        assert!(Subnet::parse("10.77.1.0").is_err());
        assert!(s.overlaps(Subnet::parse("10.0.0.0/8").unwrap()));
        assert!(!s.overlaps(Subnet::parse("10.77.2.0/24").unwrap()));
        let mut a = Allocator::new(s, Subnet::parse("10.77.1.128/25").ok());
        a.reserve(Ipv4Addr::new(10, 77, 1, 11)).unwrap();
        assert!(a.reserve(Ipv4Addr::new(10, 77, 1, 11)).is_err(), "twice");
        assert!(a.reserve(Ipv4Addr::new(10, 77, 1, 1)).is_err(), "gateway");
        assert!(
            a.reserve(Ipv4Addr::new(10, 77, 1, 255)).is_err(),
            "broadcast"
        );
        assert!(a.reserve(Ipv4Addr::new(10, 77, 2, 5)).is_err(), "outside");
        assert_eq!(a.allocate().unwrap(), Ipv4Addr::new(10, 77, 1, 128));
        assert_eq!(a.allocate().unwrap(), Ipv4Addr::new(10, 77, 1, 129));
        let mut b = Allocator::new(Subnet::parse("10.0.0.0/30").unwrap(), None);
        assert_eq!(b.allocate().unwrap(), Ipv4Addr::new(10, 0, 0, 2));
        assert!(b.allocate().is_err(), "a /30 has two host addresses");
    }

    #[test]
    fn proc_net_tcp_rows() {
        let text = "  sl  local_address rem_address   st\n   0: 00000000:1631 00000000:0000 0A 0\n   1: 0B014D0A:1F90 00000000:0000 0A 0\n   2: 0100007F:9C40 0100007F:1631 01 0\n";
        assert_eq!(
            parse_proc_net_tcp(text, "0A"),
            vec![
                (Ipv4Addr::UNSPECIFIED, 5681),
                (Ipv4Addr::new(10, 77, 1, 11), 8080)
            ]
        );
        assert_eq!(
            parse_proc_net_tcp(text, "01"),
            vec![(Ipv4Addr::LOCALHOST, 40000)]
        );
    }
}
