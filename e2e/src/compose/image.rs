//! What each image of the compose file becomes on a test host, and the one rule that turns
//! container paths into host paths.
//!
//! Images map to local programs (put under their compose names in a per-image `bin`
//! directory, first on the service's `PATH`; the rest of `PATH` is the system's):
//! - `umbra:local`: `global-cp`, `zone-cp`, `umbractl` (the e2e-built binaries); `sh`, `curl`,
//!   `openssl` and the other tools from the system. User, environment, working directory, the
//!   default command and the directories the image owns are read from the `Dockerfile`'s final
//!   stage ([`dockerfile_final_stage`]);
//! - `envoyproxy/envoy:*`: the `envoy` binary ([`crate::envoy_binary`]), as root unless the
//!   service sets `user`;
//! - `python:*`: the system `python3` (also as `python`), as root;
//! - `redis:*`: Debian's `redis-server`, as root (the image drops to its `redis` user; the
//!   compose command saves nothing);
//! - `postgres:*`: the system PostgreSQL (`initdb`, `postgres`, `pg_isready`, `psql`) as the
//!   `postgres` system user, with an entrypoint doing what the image's does on an empty data
//!   directory (initdb with `POSTGRES_USER`/`POSTGRES_PASSWORD`, password authentication from
//!   the network, `POSTGRES_DB` created), then `postgres` listening on every address of its
//!   host. A service that sets its own `entrypoint` (a `psql` one-shot) runs that instead, as
//!   with the image; a `command` alone (the server's flags) is refused.
//!
//! **The path rule.** Each service has a table of container directories and the host path
//! each stands for: its volumes (named volume -> `<run>/volumes/<name>`, bind-mounted file ->
//! a copy under `<run>/binds/<service>/`), and its image's private directories (working
//! directory, `/srv`, the PostgreSQL socket directory: `<run>/services/<service>/root/<path>`).
//! In every argument of the entrypoint, command and healthcheck, every environment value, and
//! the text of every bind-mounted file, an occurrence of a table entry that starts at a word
//! boundary (start, whitespace, a quote, `=<>({[,;|&`) and ends at one (end, `/`, or a
//! character other than `A-Za-z0-9._-`) is replaced by its host path, longest entry first
//! ([`PathMap::rewrite`]). URLs such as `http://cp:5681/tokens/x` are left alone (their path
//! follows a port, not a boundary).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

/// The local programs images map to.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `global-cp` binary.
    pub global_cp: PathBuf,
    /// The `zone-cp` binary.
    pub zone_cp: PathBuf,
    /// The `umbractl` binary.
    pub umbractl: PathBuf,
    /// The `envoy` binary.
    pub envoy: PathBuf,
}

impl Programs {
    /// The CP binaries given (a test's `CARGO_BIN_EXE_*`), Envoy from `UMBRA_ENVOY` or `PATH`.
    ///
    /// # Errors
    /// When a binary is missing.
    pub fn new(global_cp: &str, zone_cp: &str, umbractl: &str) -> anyhow::Result<Programs> {
        let envoy = crate::envoy_binary().context("envoy not found")?;
        let envoy = which(&envoy).with_context(|| format!("{envoy} not on PATH"))?;
        let p = Programs {
            global_cp: global_cp.into(),
            zone_cp: zone_cp.into(),
            umbractl: umbractl.into(),
            envoy,
        };
        for b in [&p.global_cp, &p.zone_cp, &p.umbractl, &p.envoy] {
            anyhow::ensure!(b.is_file(), "{} is missing", b.display());
        }
        Ok(p)
    }
}

/// `name` resolved on this process's `PATH` (an absolute path as is).
#[must_use]
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What a service's image provides.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// The default `uid:gid`.
    pub user: (u32, u32),
    /// Environment the image sets.
    pub env: Vec<(String, String)>,
    /// The working directory (container path).
    pub workdir: String,
    /// The image's entrypoint.
    pub entrypoint: Vec<String>,
    /// The image's default command.
    pub cmd: Vec<String>,
    /// Directories the image holds with their owner: a named volume first mounted on one of
    /// them starts owned by that owner (Docker copies the image's directory into an empty
    /// volume); otherwise a new volume is `root:root`, mode 0755.
    pub owned_dirs: Vec<(String, u32, u32)>,
    /// Private directories of each container (container paths).
    pub scratch: Vec<String>,
    /// Command names and the host programs they are.
    pub bin: Vec<(String, PathBuf)>,
    /// Whether a compose `command` without an `entrypoint` is refused (the image's own
    /// entrypoint is emulated, not the way it passes arguments on); an `entrypoint` replaces it.
    pub fixed_command: bool,
}

/// The final stage of a Dockerfile as the runner reads it: `(env, user, workdir, cmd, dirs)`
/// where `dirs` are the paths a `RUN ... chown` of that stage hands to its user.
///
/// # Errors
/// When `USER` is not numeric `uid:gid` or `CMD` is not a JSON list.
#[allow(clippy::type_complexity)]
pub fn dockerfile_final_stage(
    text: &str,
) -> anyhow::Result<(
    Vec<(String, String)>,
    (u32, u32),
    String,
    Vec<String>,
    Vec<String>,
)> {
    let joined = text.replace("\\\n", " ");
    let stage = joined
        .lines()
        .rev()
        .take_while(|l| !l.trim_start().starts_with("FROM "))
        .collect::<Vec<_>>();
    let (mut env, mut user, mut workdir, mut cmd, mut dirs) =
        (Vec::new(), None, "/".to_owned(), Vec::new(), Vec::new());
    for line in stage.into_iter().rev() {
        let line = line.trim();
        let (op, rest) = line.split_once(' ').unwrap_or((line, ""));
        match op {
            "ENV" => {
                for kv in rest.split_whitespace() {
                    let (k, v) = kv.split_once('=').context("ENV without =")?;
                    env.push((k.to_owned(), v.to_owned()));
                }
            }
            "USER" => {
                let (u, g) = rest.trim().split_once(':').context("USER uid:gid")?;
                user = Some((u.parse()?, g.parse()?));
            }
            "WORKDIR" => rest.trim().clone_into(&mut workdir),
            "CMD" => cmd = serde_json::from_str(rest).context("CMD must be a JSON list")?,
            "RUN" => {
                for part in rest.split("&&") {
                    let words: Vec<&str> = part.split_whitespace().collect();
                    if words.first() == Some(&"chown") {
                        dirs.extend(
                            words[2..]
                                .iter()
                                .filter(|w| w.starts_with('/'))
                                .map(|w| (*w).to_owned()),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    Ok((
        env,
        user.context("no USER in the final stage")?,
        workdir,
        cmd,
        dirs,
    ))
}

fn system_user(name: &str) -> anyhow::Result<(u32, u32)> {
    let id = |flag: &str| -> anyhow::Result<u32> {
        let out = std::process::Command::new("id")
            .args([flag, name])
            .output()?;
        anyhow::ensure!(out.status.success(), "no system user {name}");
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok((id("-u")?, id("-g")?))
}

/// The emulated `postgres` image entrypoint (see the module docs).
const POSTGRES_ENTRYPOINT: &str = r#": "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /var/run/postgresql/pwfile
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/var/run/postgresql/pwfile --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-sync
  rm -f /var/run/postgresql/pwfile
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\"" | postgres --single -D "$PGDATA" postgres > /dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /var/run/postgresql"#;

/// The profile of image `name` (see the module docs); `repo` is the compose file's directory
/// (for `umbra:local`'s `Dockerfile`).
///
/// # Errors
/// For an image with no local stand-in, or a missing program.
pub fn image(name: &str, repo: &Path, programs: &Programs) -> anyhow::Result<Image> {
    let (repo_name, _tag) = name.split_once(':').unwrap_or((name, "latest"));
    let need =
        |prog: &str| which(prog).with_context(|| format!("image {name}: {prog} not installed"));
    Ok(match repo_name {
        "umbra" if name == "umbra:local" => {
            let text = std::fs::read_to_string(repo.join("Dockerfile")).context("Dockerfile")?;
            let (env, user, workdir, cmd, dirs) = dockerfile_final_stage(&text)?;
            Image {
                user,
                env,
                scratch: vec![workdir.clone()],
                workdir,
                entrypoint: Vec::new(),
                cmd,
                owned_dirs: dirs.into_iter().map(|d| (d, user.0, user.1)).collect(),
                bin: vec![
                    ("global-cp".into(), programs.global_cp.clone()),
                    ("zone-cp".into(), programs.zone_cp.clone()),
                    ("umbractl".into(), programs.umbractl.clone()),
                ],
                fixed_command: false,
            }
        }
        "envoyproxy/envoy" => Image {
            workdir: "/".into(),
            bin: vec![("envoy".into(), programs.envoy.clone())],
            ..Image::default()
        },
        "python" => Image {
            workdir: "/".into(),
            scratch: vec!["/srv".into()],
            bin: vec![
                ("python".into(), need("/usr/bin/python3")?),
                ("python3".into(), need("/usr/bin/python3")?),
            ],
            ..Image::default()
        },
        "redis" => Image {
            workdir: "/data".into(),
            scratch: vec!["/data".into()],
            bin: vec![("redis-server".into(), need("redis-server").context(
                "install Debian's redis-server (scripts/test does)",
            )?)],
            ..Image::default()
        },
        "postgres" => {
            let pg = umbra_global_cp::testing::find_bin_dir()
                .context("image postgres: PostgreSQL server binaries not installed")?;
            let user = system_user("postgres")?;
            let mut bin: Vec<(String, PathBuf)> = ["initdb", "postgres", "psql"]
                .iter()
                .map(|p| ((*p).to_owned(), pg.join(p)))
                .collect();
            let isready = [pg.join("pg_isready"), PathBuf::from("/usr/bin/pg_isready")]
                .into_iter()
                .find(|p| p.is_file())
                .context("pg_isready not installed")?;
            bin.push(("pg_isready".into(), isready));
            Image {
                user,
                env: vec![
                    ("PGDATA".into(), "/var/lib/postgresql/data".into()),
                    // The socket directory PostgreSQL's clients default to, made explicit
                    // because here it is a host path.
                    ("PGHOST".into(), "/var/run/postgresql".into()),
                ],
                workdir: "/".into(),
                entrypoint: vec!["sh".into(), "-ec".into(), POSTGRES_ENTRYPOINT.into()],
                cmd: Vec::new(),
                owned_dirs: vec![("/var/lib/postgresql/data".into(), user.0, user.1)],
                scratch: vec!["/var/run/postgresql".into()],
                bin,
                fixed_command: true,
            }
        }
        _ => bail!("image {name}: no local stand-in (known: umbra:local, envoyproxy/envoy, python, redis, postgres)"),
    })
}

/// Container paths and the host paths they stand for (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct PathMap {
    entries: Vec<(String, String)>,
}

fn starts_word(c: Option<char>) -> bool {
    c.is_none_or(|c| c.is_whitespace() || "\"'=<>({[,;|&".contains(c))
}

fn ends_word(c: Option<char>) -> bool {
    c.is_none_or(|c| c == '/' || !(c.is_ascii_alphanumeric() || "._-".contains(c)))
}

impl PathMap {
    /// Add `container` -> `host` (trailing slashes ignored).
    pub fn add(&mut self, container: &str, host: &Path) {
        let c = container.trim_end_matches('/').to_owned();
        self.entries.retain(|(k, _)| *k != c);
        self.entries.push((c, host.to_string_lossy().into_owned()));
        self.entries.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
    }

    /// The host path `container` (a path) stands for, if it is under an entry.
    #[must_use]
    pub fn resolve(&self, container: &str) -> Option<PathBuf> {
        let r = self.rewrite(container);
        (r != container).then(|| PathBuf::from(r))
    }

    /// Apply the rule to `text`.
    #[must_use]
    pub fn rewrite(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        'scan: while i < text.len() {
            let prev = text[..i].chars().next_back();
            if text[i..].starts_with('/') && starts_word(prev) {
                for (c, h) in &self.entries {
                    if text[i..].starts_with(c.as_str())
                        && ends_word(text[i + c.len()..].chars().next())
                    {
                        out.push_str(h);
                        i += c.len();
                        continue 'scan;
                    }
                }
            }
            let ch = text[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_rule() {
        let mut m = PathMap::default();
        m.add("/dp", Path::new("/run/v/zone-1-dp"));
        m.add("/tokens", Path::new("/run/v/tokens"));
        m.add("/etc/envoy/bootstrap.yaml", Path::new("/run/b/boot.yaml"));
        m.add("/srv", Path::new("/run/s/root/srv"));
        let cases = [
            ("/dp/ca.pem", "/run/v/zone-1-dp/ca.pem"),
            ("/dp", "/run/v/zone-1-dp"),
            (
                "{filename: /dp/frontend-1.token}",
                "{filename: /run/v/zone-1-dp/frontend-1.token}",
            ),
            (
                "> \"/dp/$dp.token.tmp\"",
                "> \"/run/v/zone-1-dp/$dp.token.tmp\"",
            ),
            (
                "http://zone-1-cp:5681/dp-server/ca.pem",
                "http://zone-1-cp:5681/dp-server/ca.pem",
            ),
            (
                "http://global-cp:5681/tokens/zone-ingress",
                "http://global-cp:5681/tokens/zone-ingress",
            ),
            (
                "UMBRA_AUTH_TOKEN=\"$(cat /tokens/admin)\"",
                "UMBRA_AUTH_TOKEN=\"$(cat /run/v/tokens/admin)\"",
            ),
            (
                "/dpx /dp.d /srv/index.html",
                "/dpx /dp.d /run/s/root/srv/index.html",
            ),
            ("-c /etc/envoy/bootstrap.yaml", "-c /run/b/boot.yaml"),
            ("a/dp", "a/dp"),
        ];
        for (input, want) in cases {
            assert_eq!(m.rewrite(input), want, "{input}");
        }
        assert_eq!(
            m.resolve("/tokens/admin"),
            Some(PathBuf::from("/run/v/tokens/admin"))
        );
        assert_eq!(m.resolve("/etc/hosts"), None);
    }

    #[test]
    fn the_dockerfile_final_stage() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile")).unwrap();
        let (env, user, workdir, cmd, dirs) = dockerfile_final_stage(&text).unwrap();
        assert_eq!(user, (10001, 10001));
        assert_eq!(workdir, "/var/lib/umbra");
        assert_eq!(cmd, ["global-cp"]);
        assert!(
            env.contains(&("UMBRA_ADS_ADDR".into(), "0.0.0.0:5678".into())),
            "{env:?}"
        );
        for d in ["/var/lib/umbra", "/tokens", "/kds-tls"] {
            assert!(dirs.contains(&d.to_owned()), "{d} in {dirs:?}");
        }
    }
}
