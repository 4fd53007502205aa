//! `./scripts/demo --hosts`: the compose deployment (`docker-compose.yml`) on separate test
//! hosts, as the multi-host tests run it (`umbra_e2e::compose` on `umbra_e2e::hosts`), shown to
//! a person: the hosts and their addresses, the zones as the Global lists them, traffic across
//! hosts and zones, the fleet shadow diff, and one sidecar's Envoy config dump read through the
//! Global from another host. Needs root (network namespaces); says so first without it.
//!
//! Without `--check` it then runs until Ctrl-C or SIGTERM; with `--check` it verifies what it
//! printed and exits (non-zero on any failure). Either way dropping the project removes every
//! process, namespace, link and run directory it made.
//!
//! The CP binaries are this package's `e2e-global-cp`, `e2e-zone-cp` and `e2e-umbractl`, found
//! next to this executable (or in `--bin-dir`); Envoy is `UMBRA_ENVOY` or `envoy` on `PATH`.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use umbra_e2e::compose::deployment::{
    acked, fetch, global_cps, wait_for, zone_call, zone_cps, SIDECARS,
};

use anyhow::{bail, ensure, Context as _};
use clap::Parser;
use serde_json::Value;
use tokio::signal::unix::{signal, Signal, SignalKind};
use umbra_e2e::compose::{Programs, Project, UpOptions};
use umbra_e2e::hosts::Proc;

/// The compose deployment on test hosts (network namespaces); needs root.
#[derive(Parser)]
#[command(name = "e2e-hosts-demo")]
struct Args {
    /// Verify what is printed, then stop (exit status 1 on any failure).
    #[arg(long)]
    check: bool,
    /// The compose file.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker-compose.yml"))]
    file: PathBuf,
    /// Where `e2e-global-cp`, `e2e-zone-cp` and `e2e-umbractl` are (default: beside this
    /// executable).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

const MESH: &str = "default";
const ZONES: [&str; 2] = ["zone-1", "zone-2"];

/// Terminal styles (empty when stdout is not a terminal).
struct Style {
    bold: &'static str,
    green: &'static str,
    dim: &'static str,
    reset: &'static str,
}

static STYLE: std::sync::OnceLock<Style> = std::sync::OnceLock::new();

fn style() -> &'static Style {
    STYLE.get_or_init(|| {
        if std::io::stdout().is_terminal() {
            Style {
                bold: "\x1b[1m",
                green: "\x1b[32m",
                dim: "\x1b[2m",
                reset: "\x1b[0m",
            }
        } else {
            Style {
                bold: "",
                green: "",
                dim: "",
                reset: "",
            }
        }
    })
}

/// A step's line, `▸ what … ok (1.2s) detail`, as the plain demo prints it.
struct Step(Instant);

/// Whether a step's line waits for its `ok` (a failure then ends it with `failed`).
static OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn step(what: &str) -> Step {
    OPEN.store(true, std::sync::atomic::Ordering::SeqCst);
    let s = style();
    print!("{}▸{} {what} … ", s.bold, s.reset);
    let _ = std::io::stdout().flush();
    Step(Instant::now())
}

impl Step {
    fn ok(self, detail: &str) {
        OPEN.store(false, std::sync::atomic::Ordering::SeqCst);
        let s = style();
        let t = self.0.elapsed();
        let sep = if detail.is_empty() { "" } else { " " };
        println!(
            "{}ok{} {}({}.{}s){}{sep}{detail}",
            s.green,
            s.reset,
            s.dim,
            t.as_secs(),
            t.subsec_millis() / 100,
            s.reset
        );
    }
}

fn heading(text: &str) {
    let s = style();
    println!("\n{}{text}{}", s.bold, s.reset);
}

/// SIGINT and SIGTERM, whichever comes first.
struct Stop {
    int: Signal,
    term: Signal,
}

impl Stop {
    fn new() -> anyhow::Result<Stop> {
        Ok(Stop {
            int: signal(SignalKind::interrupt()).context("SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("SIGTERM handler")?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

/// The demo's context: the project and what it learnt along the way.
struct Demo {
    p: Project,
    umbractl: PathBuf,
}

impl Demo {
    /// `GET path` on `service`'s API as the admin; fails unless 200.
    async fn get(&self, service: &str, path: &str) -> anyhow::Result<Value> {
        let (s, body) = self.p.call(service, 5681, "GET", path, None).await?;
        ensure!(s == 200, "GET {path} on {service}: {s} {body}");
        Ok(body)
    }

    fn global_url(&self) -> String {
        format!("http://{}", self.p.socket("global-cp", 5681))
    }

    /// `umbractl <args>` against the Global from this (the root) namespace, as an operator on
    /// the Docker host would; its output, bounded to 30 s.
    fn umbractl(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Command::new(&self.umbractl);
        cmd.arg("--api-url")
            .arg(self.global_url())
            .args(args)
            .env("UMBRA_AUTH_TOKEN", self.p.admin_token()?);
        let log = self.p.run_dir().join("logs").join(format!(
            "umbractl-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut proc = Proc::spawn(cmd, &log)?;
        let code = proc.wait_timeout(Duration::from_secs(30));
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        match code {
            Some(0) => Ok(out),
            Some(c) => bail!("umbractl {} exited {c}: {out}", args.join(" ")),
            None => bail!("umbractl {} did not end within 30 s", args.join(" ")),
        }
    }
}

/// How the run ended.
enum End {
    Done,
    Signalled(&'static str),
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(End::Done) => ExitCode::SUCCESS,
        Ok(End::Signalled(sig)) => {
            if OPEN.swap(false, std::sync::atomic::Ordering::SeqCst) {
                println!("interrupted");
            }
            println!("{sig}: everything the demo started is removed");
            ExitCode::from(if sig == "SIGINT" { 130 } else { 143 })
        }
        Err(e) => {
            if OPEN.swap(false, std::sync::atomic::Ordering::SeqCst) {
                println!("failed");
            }
            eprintln!("demo --hosts failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> anyhow::Result<End> {
    if let Err(e) = umbra_e2e::hosts::require_privilege() {
        // Its message speaks of the tests; the demo says the same in its own words and keeps
        // what the probe met.
        let e = e.to_string();
        let probe = e.split_once("(CI does): ").map_or(e.as_str(), |(_, r)| r);
        bail!(
            "the --hosts demo needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): it makes a network \
             namespace per host, bridges and veth pairs. Run `sudo ./scripts/demo --hosts`, or \
             the plain `./scripts/demo` (loopback, no privilege).\n({probe})"
        );
    }
    let mut stop = Stop::new()?;
    let bin_dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this executable's directory")?
            .to_owned(),
    };
    let bin = |name: &str| bin_dir.join(name).to_string_lossy().into_owned();
    let programs = Programs::new(
        &bin("e2e-global-cp"),
        &bin("e2e-zone-cp"),
        &bin("e2e-umbractl"),
    )
    .context("the CP binaries (cargo build -p umbra-e2e --bins) and envoy")?;
    let umbractl = programs.umbractl.clone();
    let file = args
        .file
        .canonicalize()
        .with_context(|| format!("the compose file {}", args.file.display()))?;
    let s = style();
    println!(
        "{}Umbra demo on separate hosts{}: {} run as the multi-host tests run it: a network \
         namespace per service, real PostgreSQL, CPs and Envoys (no Docker engine)",
        s.bold,
        s.reset,
        file.display()
    );
    let options = UpOptions {
        file,
        programs,
        timeout: Duration::from_secs(120),
    };
    let st = step("Starting the compose services on their hosts (dependency order, healthchecks)");
    let p = tokio::select! {
        p = Project::up(&options) => p?,
        sig = stop.recv() => return Ok(End::Signalled(sig)),
    };
    st.ok(&format!("{} services", p.services().len()));
    let demo = Demo { p, umbractl };
    let shown = tokio::select! {
        r = show(&demo, args.check) => r,
        sig = stop.recv() => return Ok(End::Signalled(sig)),
    };
    let end = match shown {
        Err(e) => Err(e),
        Ok(()) if args.check => Ok(End::Done),
        Ok(()) => {
            println!(
                "\n{}Running.{} Press Ctrl-C (or send SIGTERM) to stop and remove everything.",
                s.bold, s.reset
            );
            let sig = stop.recv().await;
            println!("\n{sig}");
            Ok(End::Done)
        }
    };
    let st =
        step("Stopping every service and removing its hosts (namespaces, links, run directory)");
    drop(demo);
    st.ok("");
    end
}

async fn show(d: &Demo, check: bool) -> anyhow::Result<()> {
    print_hosts(&d.p);
    wait_acked(d).await?;
    zones(d).await?;
    traffic(&d.p).await?;
    shadow_diff(d).await?;
    config_dump(d).await?;
    how_to_reach(d);
    if check {
        let st = step("Checking: no service restarted or failed");
        for service in d.p.services() {
            ensure!(
                d.p.restarts(&service) == 0,
                "{service} restarted:\n{}",
                d.p.log_tail(&service, 30)
            );
            if let Some(code) = d.p.exit_code(&service) {
                ensure!(
                    code == 0,
                    "{service} exited {code}:\n{}",
                    d.p.log_tail(&service, 30)
                );
            }
        }
        st.ok("everything above was verified");
    }
    Ok(())
}

/// One line per host: its service, namespace, addresses, and what else runs in it.
fn print_hosts(p: &Project) {
    heading("Hosts (one network namespace each; this namespace reaches every network's bridge)");
    let services = p.services();
    let rows: Vec<(String, String, String, String)> = services
        .iter()
        .filter(|s| p.file().host_of(s) == s.as_str())
        .map(|s| {
            let h = p.host(s);
            let addrs: Vec<String> = h
                .attachments
                .iter()
                .map(|a| format!("{} {}", a.network, a.addr))
                .collect();
            let mut also: Vec<String> = services
                .iter()
                .filter(|o| *o != s && p.file().host_of(o) == s.as_str())
                .cloned()
                .collect();
            if p.exit_code(s) == Some(0) {
                also.insert(0, "(one-shot, done)".into());
            }
            (
                s.clone(),
                addrs.join(", "),
                h.netns.clone(),
                also.join(", "),
            )
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(7);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(8);
    let w2 = rows.iter().map(|r| r.2.len()).max().unwrap_or(0).max(9);
    println!(
        "  {:w0$}  {:w1$}  {:w2$}  ALSO RUNS",
        "SERVICE", "NETWORKS", "NAMESPACE"
    );
    for (svc, addrs, ns, also) in rows {
        let line = format!("  {svc:w0$}  {addrs:w1$}  {ns:w2$}  {also}");
        println!("{}", line.trim_end());
    }
}

/// Every sidecar ACKed on its zone and on the Global; each ingress is known to the other zone.
async fn wait_acked(d: &Demo) -> anyhow::Result<()> {
    println!();
    let st = step("Waiting for the six sidecars to connect and ACK (each zone, then the Global)");
    for (zone, dp) in SIDECARS {
        for cp in zone_cps(&d.p, zone) {
            let path = format!("/meshes/{MESH}/dataplanes+insights/{dp}");
            wait_for(
                Duration::from_secs(60),
                &format!("{dp} ACKed on {cp}"),
                || async {
                    let (s, body) = d.p.call(&cp, 5681, "GET", &path, None).await.ok()?;
                    (s == 200 && acked(&body["dataplaneInsight"])).then_some(())
                },
            )
            .await
            .map_err(|e| anyhow::anyhow!("{e}\n{}", d.p.report()))?;
        }
    }
    let path = format!("/meshes/{MESH}/dataplanes+insights");
    wait_for(
        Duration::from_secs(30),
        "the six sidecars ACKed on the Global",
        || async {
            let (s, list) = d.p.call("global-cp", 5681, "GET", &path, None).await.ok()?;
            let items = list["items"].as_array()?;
            (s == 200
                && SIDECARS.iter().all(|(zone, dp)| {
                    items.iter().any(|i| {
                        i["labels"]["kuma.io/display-name"] == *dp
                            && i["labels"]["kuma.io/zone"] == *zone
                            && acked(&i["dataplaneInsight"])
                    })
                }))
            .then_some(())
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", d.p.report()))?;
    let mut ingresses = Vec::new();
    for (zone, other) in [("zone-1", "zone-2"), ("zone-2", "zone-1")] {
        let addr = wait_for(
            Duration::from_secs(30),
            &format!("{zone}'s ingress offering services to {other}"),
            || async {
                let (_, list) = zone_call(&d.p, other, "GET", "/zone-ingresses", None)
                    .await
                    .ok()?;
                list["items"].as_array()?.iter().find_map(|i| {
                    let offers = i["availableServices"]
                        .as_array()
                        .is_some_and(|a| !a.is_empty());
                    (i["zone"] == zone && offers)
                        .then(|| {
                            i["networking"]["advertisedAddress"]
                                .as_str()
                                .map(str::to_owned)
                        })
                        .flatten()
                })
            },
        )
        .await?;
        ingresses.push(format!("{zone}-ingress at {addr}"));
    }
    let cps: Vec<String> = ZONES.iter().flat_map(|z| zone_cps(&d.p, z)).collect();
    st.ok(&format!(
        "ACKed on {} and the Global; {}",
        cps.join(", "),
        ingresses.join(", ")
    ));
    Ok(())
}

/// The zones as the Global lists them (`umbractl inspect zones`), which Global replica holds
/// each zone's KDS stream (through the load balancer, whose address the replica sees), and,
/// for a zone with CP replicas, which one leads (and so speaks KDS).
async fn zones(d: &Demo) -> anyhow::Result<()> {
    heading(&format!(
        "Zones, as the Global lists them ($ umbractl --api-url {} inspect zones)",
        d.global_url()
    ));
    print!("{}", indent(&d.umbractl(&["inspect", "zones"])?));
    let lb =
        d.p.addr_on("global-cp", "control")
            .context("global-cp on control")?;
    for zone in ZONES {
        let z = d
            .get("global-cp", &format!("/zones/{zone}+insights"))
            .await?;
        let from = z["umbra"]["connection"].as_str().unwrap_or_default();
        let replica = z["umbra"]["replica"].as_str().unwrap_or("?");
        ensure!(z["umbra"]["online"] == true, "{zone} is not online: {z}");
        ensure!(
            from.starts_with(&format!("{lb}:")),
            "{zone}'s KDS peer is {from:?}, not the load balancer global-cp ({lb}): {z}"
        );
        let cps = zone_cps(&d.p, zone);
        let mut speaker = cps.first().cloned().unwrap_or_default();
        if cps.len() > 1 {
            for cp in &cps {
                let (_, ready) = d.p.call(cp, 5681, "GET", "/ready", None).await?;
                if ready["leader"] == true {
                    speaker = format!("{cp} (the leader of {})", cps.join(", "));
                }
            }
        }
        println!(
            "  {zone}: online, KDS stream (TLS) from {speaker} through global-cp ({from}), held by Global replica {replica}"
        );
    }
    Ok(())
}

/// Requests from inside zone-1-frontend's host, through its sidecar: backend (another host of
/// zone-1) and payments (zone-2 only, through zone-2's ingress on a third host).
async fn traffic(p: &Project) -> anyhow::Result<()> {
    heading(&format!(
        "Traffic from zone-1-frontend's host ({}), through its sidecar",
        p.addr_on("zone-1-frontend", "zone-1")
            .context("frontend on zone-1")?
    ));
    for (url, want, route) in [
        (
            "http://127.0.0.1:3001",
            "backend (zone-1)",
            "backend, another host of zone-1 (mTLS)",
        ),
        (
            "http://127.0.0.1:5001",
            "payments (zone-2)",
            "payments, zone-2 only: zone-2-ingress passes it by SNI",
        ),
    ] {
        let got = wait_for(
            Duration::from_secs(30),
            &format!("{want:?} answering zone-1-frontend at {url}"),
            || async {
                fetch(p, "zone-1-frontend", url)
                    .ok()
                    .filter(|(c, out)| *c == 0 && out.contains(want))
                    .map(|(_, out)| out.trim().to_owned())
            },
        )
        .await;
        let got = match got {
            Ok(g) => g,
            Err(e) => bail!(
                "{e}: last answer {:?}\n{}\n{}",
                fetch(p, "zone-1-frontend", url),
                p.log_tail("zone-1-frontend-sidecar", 20),
                p.log_tail("zone-2-ingress", 20)
            ),
        };
        println!("  GET {url:24} -> {got:?}   ({route})");
    }
    Ok(())
}

/// The fleet shadow diff through the Global (`umbractl inspect shadow-diff`), both zones
/// answering.
async fn shadow_diff(d: &Demo) -> anyhow::Result<()> {
    let diff = d
        .get("global-cp", &format!("/meshes/{MESH}/_shadow-diff"))
        .await?;
    ensure!(
        diff["partial"] == false,
        "the fleet diff is partial: {diff}"
    );
    let changed = diff["totals"]["changed"].as_u64().unwrap_or(0);
    ensure!(changed > 0, "the shadow diff changes no DPP: {diff}");
    let mut answered = Vec::new();
    for z in ZONES {
        let entry = diff["zones"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["zone"] == z);
        ensure!(
            entry.is_some_and(|e| e["status"] == "ok"),
            "{z} did not answer the fleet diff: {diff}"
        );
        answered.push(format!("{z} ok"));
    }
    heading(&format!(
        "Fleet shadow diff through the Global: {changed} DPPs would change ({}, not partial)",
        answered.join(", ")
    ));
    println!("  $ umbractl inspect shadow-diff --mesh {MESH} --top 6");
    let text = d.umbractl(&["inspect", "shadow-diff", "--mesh", MESH, "--top", "6"])?;
    print!("{}", indent(&text));
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// The objects of `v` (at any depth) whose `@type` ends with `suffix`.
fn dumps<'a>(v: &'a Value, suffix: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if m.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with(suffix))
            {
                out.push(v);
            }
            m.values().for_each(|x| dumps(x, suffix, out));
        }
        Value::Array(a) => a.iter().for_each(|x| dumps(x, suffix, out)),
        _ => {}
    }
}

/// Paths (`a.b[0].c`) of the string values of `v` equal to `want`.
fn paths_of(v: &Value, want: &str, at: &str, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s == want => out.push(at.to_owned()),
        Value::Object(m) => {
            for (k, x) in m {
                let sep = if at.is_empty() { "" } else { "." };
                paths_of(x, want, &format!("{at}{sep}{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                paths_of(x, want, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Listener names with their addresses, and cluster names, from an Envoy config dump.
fn listeners_and_clusters(dump: &Value) -> (Vec<(String, String)>, Vec<String>) {
    let mut found = Vec::new();
    dumps(dump, "ListenersConfigDump", &mut found);
    let mut listeners = Vec::new();
    for l in &found {
        let statics = l["static_listeners"].as_array().into_iter().flatten();
        let dynamics = l["dynamic_listeners"].as_array().into_iter().flatten();
        for x in statics
            .map(|s| &s["listener"])
            .chain(dynamics.map(|d| &d["active_state"]["listener"]))
        {
            let a = &x["address"]["socket_address"];
            let addr = match (a["address"].as_str(), a["port_value"].as_u64()) {
                (Some(h), Some(port)) => format!("{h}:{port}"),
                _ => String::new(),
            };
            if let Some(name) = x["name"].as_str() {
                listeners.push((name.to_owned(), addr));
            }
        }
    }
    found.clear();
    dumps(dump, "ClustersConfigDump", &mut found);
    let mut clusters = Vec::new();
    for c in &found {
        for key in ["static_clusters", "dynamic_active_clusters"] {
            for x in c[key].as_array().into_iter().flatten() {
                if let Some(name) = x["cluster"]["name"].as_str() {
                    clusters.push(name.to_owned());
                }
            }
        }
    }
    (listeners, clusters)
}

/// frontend-1's Envoy config dump (and its `clusters` view) read through the Global: the
/// Global asks zone-1's leader replica over KDS, which reads the admin listener
/// `kuma:envoy:admin` on the sidecar's host over mTLS.
async fn config_dump(d: &Demo) -> anyhow::Result<()> {
    let list = d
        .get(
            "global-cp",
            &format!("/meshes/{MESH}/dataplanes?name=frontend-1"),
        )
        .await?;
    let name = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["labels"]["kuma.io/display-name"] == "frontend-1")
        .and_then(|i| i["name"].as_str())
        .with_context(|| format!("frontend-1 on the Global: {list}"))?
        .to_owned();
    let xds = format!("/meshes/{MESH}/dataplanes/{name}/xds");
    heading(&format!(
        "frontend-1's Envoy config dump, read through the Global: GET {}{xds}",
        d.global_url()
    ));
    let host =
        d.p.addr_on("zone-1-frontend", "zone-1")
            .context("frontend on zone-1")?;
    println!(
        "  path: Global (load balancer {}, replicas {}) -> KDS -> zone-1's leader replica (of {}) -> mTLS to kuma:envoy:admin on frontend-1's host ({host}); the admin itself listens on 127.0.0.1 there",
        d.p.addr("global-cp"),
        global_cps(&d.p).join(", "),
        zone_cps(&d.p, "zone-1").join(", "),
    );
    let st = step("Reading the config dump (GET .../xds on the Global)");
    let dump = d.get("global-cp", &xds).await?;
    let text = dump.to_string();
    let (listeners, clusters) = listeners_and_clusters(&dump);
    let mut redacted = Vec::new();
    paths_of(&dump, "[redacted]", "", &mut redacted);
    ensure!(
        listeners.iter().any(|(n, _)| n == "kuma:envoy:admin"),
        "no kuma:envoy:admin listener in the dump: {text:.400}"
    );
    ensure!(!clusters.is_empty(), "no cluster in the dump: {text:.400}");
    ensure!(
        !redacted.is_empty(),
        "the dataplane token is not redacted in the dump"
    );
    st.ok(&format!("{} bytes of JSON", text.len()));
    println!("  Global name: {name} (display name frontend-1, zone zone-1)");
    println!("  listeners ({}):", listeners.len());
    for (n, a) in &listeners {
        println!("    {n:48} {a}");
    }
    println!("  clusters ({}): {}", clusters.len(), clusters.join(", "));
    println!(
        "  the dataplane token (the ADS call credentials) reads \"[redacted]\" at: {}",
        redacted.join(", ")
    );
    let path = format!("/meshes/{MESH}/dataplanes/{name}/clusters");
    let body = d.get("global-cp", &path).await?;
    let text = body
        .as_str()
        .map_or_else(|| body.to_string(), str::to_owned);
    ensure!(!text.trim().is_empty(), "empty clusters view");
    println!(
        "  GET .../clusters: {} lines, the first 8:",
        text.lines().count()
    );
    for l in text.lines().take(8) {
        println!("    {l}");
    }
    let stats = d
        .get(
            "global-cp",
            &format!("/meshes/{MESH}/dataplanes/{name}/stats"),
        )
        .await?;
    let lines = stats.as_str().map_or(0, |s| s.lines().count());
    ensure!(lines > 0, "empty stats view: {stats}");
    println!("  GET .../stats: {lines} lines");
    Ok(())
}

/// Where things are, for a person to explore while the demo runs.
fn how_to_reach(d: &Demo) {
    let s = style();
    let token =
        d.p.volume("tokens")
            .map_or_else(|| Path::new("?").to_owned(), |v| v.join("admin"));
    let g = d.global_url();
    heading("Explore (from this machine's root namespace: every host address is reachable)");
    println!("  Global API      {g}   (console {g}/gui/)");
    for zone in ZONES {
        let apis: Vec<String> = zone_cps(&d.p, zone)
            .iter()
            .map(|cp| format!("http://{} ({cp})", d.p.socket(cp, 5681)))
            .collect();
        println!("  {zone} API      {}", apis.join(", "));
    }
    println!("  admin token     {}", token.display());
    println!("  logs            {}", d.p.run_dir().join("logs").display());
    println!("{}Try{}", s.bold, s.reset);
    println!("  export UMBRA_AUTH_TOKEN=\"$(cat {})\"", token.display());
    println!("  curl -H \"Authorization: Bearer $UMBRA_AUTH_TOKEN\" {g}/zones+insights");
    println!(
        "  {} --api-url {g} inspect dataplanes",
        d.umbractl.display()
    );
    println!(
        "  ip netns exec {} curl -s http://127.0.0.1:5001   # payments, from frontend-1's host",
        d.p.host("zone-1-frontend").netns
    );
    println!("  (logs and volumes are removed at exit; UMBRA_KEEP_COMPOSE_RUN=1 keeps them)");
}
