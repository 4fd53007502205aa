//! The compose file as the runner understands it (pure: parsing and checks, no IO).
//!
//! Only the subset `docker-compose.yml` uses is accepted; any other key, form or value is an
//! error naming it, so nothing in the file is silently ignored. YAML anchors and aliases are
//! expanded by the parser; merge keys (`<<: *anchor`) are applied here (keys of the mapping win
//! over merged ones). Top-level and service-level `x-*` keys are extensions and skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::{Map, Value};

use crate::hosts::Subnet;

/// A parsed compose project.
#[derive(Debug, Clone)]
pub struct ComposeFile {
    /// `name:` (the project name).
    pub name: String,
    /// Services by name.
    pub services: BTreeMap<String, Service>,
    /// Networks by name.
    pub networks: BTreeMap<String, NetworkDef>,
    /// Named volumes.
    pub volumes: BTreeSet<String>,
}

/// A network: its subnet and dynamic range, when the file fixes them.
#[derive(Debug, Clone, Default)]
pub struct NetworkDef {
    /// `ipam.config[0].subnet`.
    pub subnet: Option<Subnet>,
    /// `ipam.config[0].ip_range`: where addresses not fixed by a service come from.
    pub ip_range: Option<Subnet>,
}

/// When a dependency counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// `service_started`.
    Started,
    /// `service_healthy`: its healthcheck passed.
    Healthy,
    /// `service_completed_successfully`: it exited 0.
    CompletedSuccessfully,
}

/// `restart:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// `"no"` (the default).
    No,
    /// `unless-stopped`, `always`: restarted when it exits, unless the runner stopped it.
    UnlessStopped,
    /// `on-failure`: restarted when it exits non-zero.
    OnFailure,
}

/// Where a volume entry comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A named volume of the project.
    Named(String),
    /// A bind mount: a path relative to the compose file's directory (or absolute).
    Bind(String),
}

/// One `volumes:` entry of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// What is mounted.
    pub source: Source,
    /// The container path.
    pub target: String,
    /// `:ro`.
    pub read_only: bool,
}

/// A healthcheck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Healthcheck {
    /// The command as an argv (`CMD` form as is, `CMD-SHELL` as `sh -c <text>`).
    pub test: Vec<String>,
    /// `interval` (default 30 s).
    pub interval: Duration,
    /// `timeout` (default 30 s).
    pub timeout: Duration,
    /// `retries` (default 3).
    pub retries: u32,
    /// `start_period` (default 0).
    pub start_period: Duration,
}

/// A service.
#[derive(Debug, Clone)]
pub struct Service {
    /// Its name.
    pub name: String,
    /// `image:`.
    pub image: String,
    /// `build:` (the context), kept for reference: images map to local programs.
    pub build: Option<String>,
    /// `entrypoint:` (`$$` already turned into `$`).
    pub entrypoint: Option<Vec<String>>,
    /// `command:` (`$$` already turned into `$`).
    pub command: Option<Vec<String>>,
    /// `environment:`.
    pub environment: BTreeMap<String, String>,
    /// `user: "uid:gid"`.
    pub user: Option<(u32, u32)>,
    /// `restart:`.
    pub restart: Restart,
    /// `networks:` in file order, with the fixed `ipv4_address` if any.
    pub networks: Vec<(String, Option<Ipv4Addr>)>,
    /// `network_mode: service:<name>`: runs in that service's host.
    pub network_mode_service: Option<String>,
    /// `depends_on:` with conditions.
    pub depends_on: Vec<(String, Condition)>,
    /// `healthcheck:`.
    pub healthcheck: Option<Healthcheck>,
    /// `ports:` as written (parsed, not needed: the test process reaches hosts directly).
    pub ports: Vec<(u16, u16)>,
    /// `volumes:`.
    pub volumes: Vec<Mount>,
}

fn str_of(v: &Value, what: &str) -> anyhow::Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => bail!("{what}: expected a string, found {v}"),
    }
}

fn obj<'a>(v: &'a Value, what: &str) -> anyhow::Result<&'a Map<String, Value>> {
    v.as_object()
        .with_context(|| format!("{what}: expected a mapping, found {v}"))
}

/// Refuse keys of `m` outside `known` (and not `x-*`).
fn only(m: &Map<String, Value>, known: &[&str], what: &str) -> anyhow::Result<()> {
    for k in m.keys() {
        if !known.contains(&k.as_str()) && !k.starts_with("x-") {
            bail!("{what}: `{k}` is not supported by the compose runner");
        }
    }
    Ok(())
}

/// Apply YAML merge keys (`<<`) everywhere in `v`.
///
/// # Errors
/// When `<<` holds something other than a mapping or a list of mappings.
pub fn apply_merge_keys(v: &mut Value) -> anyhow::Result<()> {
    match v {
        Value::Object(m) => {
            if let Some(merged) = m.remove("<<") {
                let sources = match merged {
                    Value::Array(a) => a,
                    o @ Value::Object(_) => vec![o],
                    other => bail!("merge key `<<`: expected a mapping, found {other}"),
                };
                for s in sources {
                    let Value::Object(s) = s else {
                        bail!("merge key `<<`: expected mappings");
                    };
                    for (k, val) in s {
                        m.entry(k).or_insert(val);
                    }
                }
            }
            for val in m.values_mut() {
                apply_merge_keys(val)?;
            }
        }
        Value::Array(a) => {
            for val in a {
                apply_merge_keys(val)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Compose's `$` handling in a string: `$$` is a literal `$`; any other `$` (variable
/// interpolation) is refused.
///
/// # Errors
/// On a `$` that is not `$$`.
pub fn unescape_dollars(s: &str, what: &str) -> anyhow::Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' {
            if chars.peek() == Some(&'$') {
                chars.next();
                out.push('$');
                continue;
            }
            bail!("{what}: variable interpolation (`$` not doubled) is not supported: {s:?}");
        }
        out.push(c);
    }
    Ok(out)
}

/// A Go-style duration as compose writes them: `5s`, `300ms`, `1m30s`.
///
/// # Errors
/// On anything else.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    anyhow::ensure!(!rest.is_empty(), "empty duration");
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .with_context(|| format!("duration {s:?}: no unit"))?;
        let n: f64 = rest[..digits]
            .parse()
            .with_context(|| format!("duration {s:?}"))?;
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let unit = &rest[digits..digits + unit_len];
        let secs = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" => 0.000_001,
            _ => bail!("duration {s:?}: unknown unit {unit:?}"),
        };
        total += Duration::from_secs_f64(n * secs);
        rest = &rest[digits + unit_len..];
    }
    Ok(total)
}

fn argv(v: &Value, what: &str) -> anyhow::Result<Vec<String>> {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|x| unescape_dollars(&str_of(x, what)?, what))
            .collect(),
        Value::String(s) => {
            // The string form is split like a shell would; only plain words are accepted.
            anyhow::ensure!(
                !s.contains(['"', '\'', '\\']),
                "{what}: the string form with quotes is not supported; use a list"
            );
            s.split_whitespace()
                .map(|w| unescape_dollars(w, what))
                .collect()
        }
        _ => bail!("{what}: expected a list or a string"),
    }
}

fn healthcheck(v: &Value, what: &str) -> anyhow::Result<Healthcheck> {
    let m = obj(v, what)?;
    only(
        m,
        &["test", "interval", "timeout", "retries", "start_period"],
        what,
    )?;
    let test = argv(m.get("test").context("healthcheck without test")?, what)?;
    let test = match test.split_first() {
        Some((k, rest)) if k == "CMD" && !rest.is_empty() => rest.to_vec(),
        Some((k, rest)) if k == "CMD-SHELL" && rest.len() == 1 => {
            vec!["sh".into(), "-c".into(), rest[0].clone()]
        }
        _ => bail!("{what}: test must be [CMD, ...] or [CMD-SHELL, text]"),
    };
    let dur = |k: &str, d: u64| -> anyhow::Result<Duration> {
        m.get(k).map_or(Ok(Duration::from_secs(d)), |v| {
            parse_duration(&str_of(v, k)?)
        })
    };
    Ok(Healthcheck {
        test,
        interval: dur("interval", 30)?,
        timeout: dur("timeout", 30)?,
        retries: m.get("retries").map_or(Ok(3), |v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .context("retries")
        })?,
        start_period: dur("start_period", 0)?,
    })
}

fn mount(v: &Value, what: &str) -> anyhow::Result<Mount> {
    let s = str_of(v, what)?;
    let parts: Vec<&str> = s.split(':').collect();
    let (source, target, read_only) = match parts.as_slice() {
        [src, dst] => (*src, *dst, false),
        [src, dst, "ro"] => (*src, *dst, true),
        [src, dst, "rw"] => (*src, *dst, false),
        _ => bail!("{what}: volume {s:?} is not source:target[:ro|rw]"),
    };
    anyhow::ensure!(
        target.starts_with('/'),
        "{what}: volume target {target:?} is not absolute"
    );
    let source = if source.starts_with('.') || source.starts_with('/') {
        Source::Bind(source.to_owned())
    } else {
        Source::Named(source.to_owned())
    };
    Ok(Mount {
        source,
        target: target.trim_end_matches('/').to_owned(),
        read_only,
    })
}

fn service(name: &str, v: &Value) -> anyhow::Result<Service> {
    let what = format!("service {name}");
    let m = obj(v, &what)?;
    only(
        m,
        &[
            "image",
            "build",
            "restart",
            "user",
            "entrypoint",
            "command",
            "environment",
            "volumes",
            "networks",
            "network_mode",
            "depends_on",
            "healthcheck",
            "ports",
        ],
        &what,
    )?;
    let get = |k: &str| m.get(k);
    let image = str_of(get("image").context(format!("{what}: no image"))?, &what)?;
    let restart = match get("restart").map(|v| str_of(v, "restart")).transpose()? {
        None => Restart::No,
        Some(r) => match r.as_str() {
            "no" => Restart::No,
            "unless-stopped" | "always" => Restart::UnlessStopped,
            "on-failure" => Restart::OnFailure,
            other => bail!("{what}: restart {other:?} is not supported"),
        },
    };
    let user = match get("user") {
        None => None,
        Some(u) => {
            let u = str_of(u, "user")?;
            let (a, b) = u
                .split_once(':')
                .with_context(|| format!("{what}: user {u:?} is not uid:gid"))?;
            Some((
                a.parse().context("user uid")?,
                b.parse().context("user gid")?,
            ))
        }
    };
    let mut environment = BTreeMap::new();
    match get("environment") {
        None => {}
        Some(Value::Object(e)) => {
            for (k, v) in e {
                environment.insert(k.clone(), unescape_dollars(&str_of(v, k)?, &what)?);
            }
        }
        Some(Value::Array(a)) => {
            for item in a {
                let s = str_of(item, "environment")?;
                let (k, v) = s
                    .split_once('=')
                    .with_context(|| format!("{what}: environment {s:?} without ="))?;
                environment.insert(k.to_owned(), unescape_dollars(v, &what)?);
            }
        }
        Some(other) => bail!("{what}: environment {other}"),
    }
    let mut networks = Vec::new();
    match get("networks") {
        None => {}
        Some(Value::Array(a)) => {
            for n in a {
                networks.push((str_of(n, "networks")?, None));
            }
        }
        Some(Value::Object(o)) => {
            for (n, conf) in o {
                let addr = match conf {
                    Value::Null => None,
                    Value::Object(c) => {
                        only(c, &["ipv4_address"], &format!("{what}: network {n}"))?;
                        c.get("ipv4_address")
                            .map(|a| str_of(a, "ipv4_address")?.parse().context("ipv4_address"))
                            .transpose()?
                    }
                    other => bail!("{what}: network {n}: {other}"),
                };
                networks.push((n.clone(), addr));
            }
        }
        Some(other) => bail!("{what}: networks {other}"),
    }
    let network_mode_service = match get("network_mode") {
        None => None,
        Some(v) => {
            let mode = str_of(v, "network_mode")?;
            Some(
                mode.strip_prefix("service:")
                    .with_context(|| {
                        format!("{what}: network_mode {mode:?} (only service:<name> is supported)")
                    })?
                    .to_owned(),
            )
        }
    };
    anyhow::ensure!(
        network_mode_service.is_none() || networks.is_empty(),
        "{what}: network_mode and networks together"
    );
    let mut depends_on = Vec::new();
    match get("depends_on") {
        None => {}
        Some(Value::Array(a)) => {
            for d in a {
                depends_on.push((str_of(d, "depends_on")?, Condition::Started));
            }
        }
        Some(Value::Object(o)) => {
            for (d, c) in o {
                let c = obj(c, &format!("{what}: depends_on {d}"))?;
                only(c, &["condition"], &format!("{what}: depends_on {d}"))?;
                let cond = match c
                    .get("condition")
                    .map(|v| str_of(v, "condition"))
                    .transpose()?
                {
                    None => Condition::Started,
                    Some(s) => match s.as_str() {
                        "service_started" => Condition::Started,
                        "service_healthy" => Condition::Healthy,
                        "service_completed_successfully" => Condition::CompletedSuccessfully,
                        other => bail!("{what}: depends_on condition {other:?}"),
                    },
                };
                depends_on.push((d.clone(), cond));
            }
        }
        Some(other) => bail!("{what}: depends_on {other}"),
    }
    let mut ports = Vec::new();
    for p in get("ports").and_then(Value::as_array).into_iter().flatten() {
        let s = str_of(p, "ports")?;
        let (h, c) = s
            .split_once(':')
            .with_context(|| format!("{what}: port {s:?} is not host:container"))?;
        ports.push((
            h.parse().context("host port")?,
            c.parse().context("container port")?,
        ));
    }
    let volumes = get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| mount(v, &what))
        .collect::<anyhow::Result<_>>()?;
    Ok(Service {
        name: name.to_owned(),
        image,
        build: get("build").map(|b| str_of(b, "build")).transpose()?,
        entrypoint: get("entrypoint").map(|e| argv(e, &what)).transpose()?,
        command: get("command").map(|c| argv(c, &what)).transpose()?,
        environment,
        user,
        restart,
        networks,
        network_mode_service,
        depends_on,
        healthcheck: get("healthcheck")
            .map(|h| healthcheck(h, &format!("{what}: healthcheck")))
            .transpose()?,
        ports,
        volumes,
    })
}

impl ComposeFile {
    /// Parse and check compose YAML.
    ///
    /// # Errors
    /// On YAML errors, anything outside the supported subset, and references to unknown
    /// services, networks or volumes.
    pub fn parse(text: &str) -> anyhow::Result<ComposeFile> {
        let mut v =
            umbra_core::codec::decode_one(text.as_bytes(), umbra_core::codec::Limits::local_file())
                .context("compose YAML")?;
        apply_merge_keys(&mut v)?;
        let top = obj(&v, "compose file")?;
        only(
            top,
            &["name", "services", "networks", "volumes"],
            "compose file",
        )?;
        let name = top
            .get("name")
            .map(|n| str_of(n, "name"))
            .transpose()?
            .unwrap_or_else(|| "compose".into());
        let mut services = BTreeMap::new();
        for (n, s) in obj(top.get("services").context("no services")?, "services")? {
            services.insert(n.clone(), service(n, s)?);
        }
        let mut networks = BTreeMap::new();
        if let Some(ns) = top.get("networks") {
            for (n, def) in obj(ns, "networks")? {
                let what = format!("network {n}");
                let mut d = NetworkDef::default();
                if let Value::Object(m) = def {
                    only(m, &["ipam"], &what)?;
                    if let Some(ipam) = m.get("ipam") {
                        let ipam = obj(ipam, &what)?;
                        only(ipam, &["config"], &what)?;
                        let configs = ipam
                            .get("config")
                            .and_then(Value::as_array)
                            .with_context(|| format!("{what}: ipam.config is not a list"))?;
                        anyhow::ensure!(configs.len() == 1, "{what}: one ipam.config entry");
                        let c = obj(&configs[0], &what)?;
                        only(c, &["subnet", "ip_range"], &what)?;
                        d.subnet = c
                            .get("subnet")
                            .map(|s| Subnet::parse(&str_of(s, "subnet")?))
                            .transpose()?;
                        d.ip_range = c
                            .get("ip_range")
                            .map(|s| Subnet::parse(&str_of(s, "ip_range")?))
                            .transpose()?;
                    }
                } else {
                    anyhow::ensure!(def.is_null(), "{what}: {def}");
                }
                networks.insert(n.clone(), d);
            }
        }
        let mut volumes = BTreeSet::new();
        if let Some(vs) = top.get("volumes") {
            for (n, def) in obj(vs, "volumes")? {
                anyhow::ensure!(
                    def.is_null() || def.as_object().is_some_and(Map::is_empty),
                    "volume {n}: options are not supported: {def}"
                );
                volumes.insert(n.clone());
            }
        }
        let file = ComposeFile {
            name,
            services,
            networks,
            volumes,
        };
        file.check()?;
        Ok(file)
    }

    fn check(&self) -> anyhow::Result<()> {
        for s in self.services.values() {
            for (n, addr) in &s.networks {
                let net = self
                    .networks
                    .get(n)
                    .with_context(|| format!("service {}: unknown network {n}", s.name))?;
                if let (Some(a), Some(sub)) = (addr, net.subnet) {
                    anyhow::ensure!(sub.contains(*a), "service {}: {a} not in {sub}", s.name);
                }
                anyhow::ensure!(
                    addr.is_none() || net.subnet.is_some(),
                    "service {}: a fixed address on {n}, which has no subnet",
                    s.name
                );
            }
            if let Some(host) = &s.network_mode_service {
                anyhow::ensure!(
                    self.services.contains_key(host),
                    "service {}: network_mode of unknown service {host}",
                    s.name
                );
            }
            for (d, _) in &s.depends_on {
                anyhow::ensure!(
                    self.services.contains_key(d),
                    "service {}: depends on unknown {d}",
                    s.name
                );
            }
            for m in &s.volumes {
                if let Source::Named(v) = &m.source {
                    anyhow::ensure!(
                        self.volumes.contains(v),
                        "service {}: unknown volume {v}",
                        s.name
                    );
                }
            }
        }
        self.start_order().map(|_| ())
    }

    /// Services in start order: dependencies (and the service whose network a service uses)
    /// first, ties by name.
    ///
    /// # Errors
    /// On a dependency cycle.
    pub fn start_order(&self) -> anyhow::Result<Vec<String>> {
        let deps = |s: &Service| -> Vec<String> {
            let mut d: Vec<String> = s.depends_on.iter().map(|(n, _)| n.clone()).collect();
            d.extend(s.network_mode_service.clone());
            d
        };
        let mut done: Vec<String> = Vec::new();
        while done.len() < self.services.len() {
            let next = self
                .services
                .values()
                .find(|s| !done.contains(&s.name) && deps(s).iter().all(|d| done.contains(d)))
                .with_context(|| {
                    let left: Vec<&String> =
                        self.services.keys().filter(|n| !done.contains(n)).collect();
                    format!("dependency cycle among {left:?}")
                })?;
            done.push(next.name.clone());
        }
        Ok(done)
    }

    /// The service whose host `service` runs in (itself, or its `network_mode: service:X`,
    /// followed through chains).
    ///
    /// # Panics
    /// On an unknown service (the file was checked at parse time).
    #[must_use]
    pub fn host_of<'a>(&'a self, service: &'a str) -> &'a str {
        let mut s = service;
        while let Some(next) = self.services[s].network_mode_service.as_deref() {
            s = next;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
name: demo
x-base: &base
  image: umbra:local
  restart: unless-stopped
services:
  db:
    image: postgres:16
    environment: {POSTGRES_USER: u}
    healthcheck:
      test: ["CMD-SHELL", "pg_isready"]
      interval: 5s
    networks: [control]
    volumes: [data:/var/lib/postgresql/data]
  cp:
    <<: *base
    restart: "no"
    command: ["sh", "-c", "echo $$HOME"]
    depends_on:
      db: {condition: service_healthy}
    networks:
      control: {}
      zone:
        ipv4_address: 10.9.1.5
    ports: ["5681:5681"]
    volumes:
      - ./deploy/x.yaml:/etc/x.yaml:ro
  side:
    <<: *base
    network_mode: "service:cp"
    depends_on: [cp]
networks:
  control: {}
  zone:
    ipam:
      config:
        - subnet: 10.9.1.0/24
          ip_range: 10.9.1.128/25
volumes:
  data: {}
"#;

    #[test]
    fn parses_the_subset() {
        let f = ComposeFile::parse(SAMPLE).unwrap();
        assert_eq!(f.name, "demo");
        let cp = &f.services["cp"];
        assert_eq!(cp.image, "umbra:local", "merged from the anchor");
        assert_eq!(cp.restart, Restart::No, "the service's own key wins");
        assert_eq!(cp.command.as_ref().unwrap()[2], "echo $HOME");
        assert_eq!(cp.depends_on, vec![("db".into(), Condition::Healthy)]);
        assert_eq!(
            cp.networks,
            vec![
                ("control".into(), None),
                ("zone".into(), Some(Ipv4Addr::new(10, 9, 1, 5)))
            ]
        );
        assert_eq!(cp.ports, vec![(5681, 5681)]);
        assert_eq!(
            cp.volumes[0],
            Mount {
                source: Source::Bind("./deploy/x.yaml".into()),
                target: "/etc/x.yaml".into(),
                read_only: true
            }
        );
        let db = &f.services["db"];
        assert_eq!(
            db.healthcheck.as_ref().unwrap().test,
            ["sh", "-c", "pg_isready"]
        );
        assert_eq!(
            db.healthcheck.as_ref().unwrap().interval,
            Duration::from_secs(5)
        );
        assert_eq!(f.services["side"].restart, Restart::UnlessStopped);
        assert_eq!(f.host_of("side"), "cp");
        assert_eq!(f.start_order().unwrap(), ["db", "cp", "side"]);
        assert_eq!(
            f.networks["zone"].ip_range,
            Some(Subnet::parse("10.9.1.128/25").unwrap())
        );
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        for (bad, why) in [
            ("cap_add: [NET_ADMIN]", "cap_add"),
            ("command: [\"echo\", \"$HOME\"]", "interpolation"),
            ("network_mode: host", "network_mode"),
            ("restart: sometimes", "restart"),
            (
                "depends_on: {nobody: {condition: service_started}}",
                "unknown",
            ),
        ] {
            let text = format!("services:\n  x:\n    image: a\n    {bad}\n");
            let e = ComposeFile::parse(&text).unwrap_err();
            assert!(format!("{e:#}").contains(why), "{why}: {e:#}");
        }
        assert!(ComposeFile::parse("services: {}\nconfigs: {}\n").is_err());
        assert!(ComposeFile::parse(
            "services:\n a: {image: i, depends_on: [b]}\n b: {image: i, depends_on: [a]}\n"
        )
        .is_err());
    }

    #[test]
    fn durations_and_dollars() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("300ms").unwrap(), Duration::from_millis(300));
        assert!(parse_duration("5").is_err());
        assert_eq!(unescape_dollars("a$$b", "t").unwrap(), "a$b");
        assert!(unescape_dollars("a$b", "t").is_err());
    }

    #[test]
    fn the_repository_compose_file_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker-compose.yml");
        let f = ComposeFile::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(f.host_of("credentials"), "global-cp-a");
        assert_eq!(f.host_of("zone-1-frontend-sidecar"), "zone-1-frontend");
        assert_eq!(f.start_order().unwrap()[0], "kds-tls");
    }
}
