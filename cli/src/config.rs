//! umbractl's contexts (issue 15; kumactl's `config control-planes`): named control planes,
//! each an API address with an optional user token and CA certificate, and the current one,
//! kept in a YAML file:
//!
//! ```yaml
//! currentContext: prod
//! controlPlanes:
//! - name: prod
//!   address: https://cp.example:5682
//!   authToken: <user token>
//!   caCertFile: /etc/umbra/ca.pem
//! ```
//!
//! The file is `--config-file`, else `$UMBRA_CONFIG`, else `$XDG_CONFIG_HOME/umbra/umbractl.yaml`,
//! else `$HOME/.config/umbra/umbractl.yaml`. It holds tokens: it is written with mode 0600 (a
//! directory umbractl creates for it, 0700; an existing one keeps its mode), through a
//! temporary file renamed over it, so a crash never leaves half a file. `list` never prints a
//! token.
//!
//! What a request uses ([`resolve`]): `--api-url`/`UMBRA_API_URL` and
//! `--auth-token`/`UMBRA_AUTH_TOKEN` when given, else the current context's, else
//! `http://127.0.0.1:5681` without a token.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::CliError;

/// The address used when nothing names one.
pub const DEFAULT_API_URL: &str = "http://127.0.0.1:5681";

/// One control plane of the file. `Debug` never shows the token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ControlPlane {
    /// Context name.
    pub name: String,
    /// API URL.
    pub address: String,
    /// User token (`Authorization: Bearer`).
    pub auth_token: Option<String>,
    /// PEM CA to verify an `https://` address with.
    pub ca_cert_file: Option<PathBuf>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The current context's name.
    pub current: Option<String>,
    /// Every control plane, in the order added.
    pub control_planes: Vec<ControlPlane>,
}

/// What requests go to and with. `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// API URL.
    pub api_url: String,
    /// User token.
    pub auth_token: Option<String>,
    /// PEM CA file.
    pub ca_cert_file: Option<PathBuf>,
}

fn redacted(token: Option<&String>) -> &'static str {
    if token.is_some() {
        "<redacted>"
    } else {
        "-"
    }
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("auth_token", &redacted(self.auth_token.as_ref()))
            .field("ca_cert_file", &self.ca_cert_file)
            .finish()
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("api_url", &self.api_url)
            .field("auth_token", &redacted(self.auth_token.as_ref()))
            .field("ca_cert_file", &self.ca_cert_file)
            .finish()
    }
}

/// The config file path: `explicit`, else `$UMBRA_CONFIG`, else under `$XDG_CONFIG_HOME` or
/// `$HOME/.config`.
///
/// # Errors
/// None of them is set.
pub fn path(explicit: Option<&Path>) -> Result<PathBuf, CliError> {
    if let Some(p) = explicit {
        return Ok(p.to_owned());
    }
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("UMBRA_CONFIG") {
        return Ok(p);
    }
    let base = var("XDG_CONFIG_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".config")))
        .ok_or_else(|| {
            CliError::Input("no config file: set --config-file, UMBRA_CONFIG or HOME".into())
        })?;
    Ok(base.join("umbra").join("umbractl.yaml"))
}

impl Config {
    /// The file at `path` (empty when it does not exist).
    ///
    /// # Errors
    /// An unreadable or malformed file.
    pub fn load(path: &Path) -> Result<Config, CliError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => return Err(CliError::Input(format!("{}: {e}", path.display()))),
        };
        let v = umbra_core::codec::decode_one(&bytes, Default::default())
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let mut cfg = Config {
            current: text(&v, "currentContext"),
            control_planes: Vec::new(),
        };
        for cp in v["controlPlanes"].as_array().into_iter().flatten() {
            let (Some(name), Some(address)) = (text(cp, "name"), text(cp, "address")) else {
                return Err(CliError::Input(format!(
                    "{}: every control plane needs a name and an address",
                    path.display()
                )));
            };
            cfg.control_planes.push(ControlPlane {
                name,
                address,
                auth_token: text(cp, "authToken"),
                ca_cert_file: text(cp, "caCertFile").map(PathBuf::from),
            });
        }
        Ok(cfg)
    }

    /// Write the file at `path` (0600, its directory 0700), atomically.
    ///
    /// # Errors
    /// The file or directory cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let io = |e: std::io::Error| CliError::Input(format!("{}: {e}", path.display()));
        let planes: Vec<Value> = self
            .control_planes
            .iter()
            .map(|cp| {
                let mut v = json!({"name": cp.name, "address": cp.address});
                if let Some(t) = &cp.auth_token {
                    v["authToken"] = json!(t);
                }
                if let Some(c) = &cp.ca_cert_file {
                    v["caCertFile"] = json!(c.display().to_string());
                }
                v
            })
            .collect();
        let doc = json!({"currentContext": self.current, "controlPlanes": planes});
        let text = umbra_core::codec::encode_yaml(&doc);
        if let Some(dir) = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && !d.exists())
        {
            // Only a directory made here is made private: an existing one (`/tmp`, a home
            // directory) keeps its mode.
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt as _;
                builder.mode(0o700);
            }
            builder.create(dir).map_err(io)?;
        }
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        {
            use std::io::Write as _;
            // A fresh file (never one planted at that name, nor a symlink's target).
            let _ = std::fs::remove_file(&tmp);
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            let mut f = options.open(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Add `cp` and make it current; an existing name is replaced only with `overwrite`.
    ///
    /// # Errors
    /// The name exists and `overwrite` is false.
    pub fn add(&mut self, cp: ControlPlane, overwrite: bool) -> Result<(), CliError> {
        match self.control_planes.iter_mut().find(|c| c.name == cp.name) {
            Some(_) if !overwrite => {
                return Err(CliError::Input(format!(
                    "a control plane named {:?} exists (use --overwrite to replace it)",
                    cp.name
                )))
            }
            Some(existing) => *existing = cp.clone(),
            None => self.control_planes.push(cp.clone()),
        }
        self.current = Some(cp.name);
        Ok(())
    }

    /// Make `name` current.
    ///
    /// # Errors
    /// No such control plane.
    pub fn switch(&mut self, name: &str) -> Result<(), CliError> {
        if !self.control_planes.iter().any(|c| c.name == name) {
            return Err(CliError::Input(format!("no control plane named {name:?}")));
        }
        self.current = Some(name.to_owned());
        Ok(())
    }

    /// Remove `name` (the current context is then unset if it was that one).
    ///
    /// # Errors
    /// No such control plane.
    pub fn remove(&mut self, name: &str) -> Result<(), CliError> {
        let before = self.control_planes.len();
        self.control_planes.retain(|c| c.name != name);
        if self.control_planes.len() == before {
            return Err(CliError::Input(format!("no control plane named {name:?}")));
        }
        if self.current.as_deref() == Some(name) {
            self.current = None;
        }
        Ok(())
    }

    /// `list`'s table: name, address, whether a token is set (never the token), current mark.
    pub fn render(&self) -> String {
        let mut out = format!("{:<2}{:<20} {:<40} {}\n", "", "NAME", "ADDRESS", "TOKEN");
        for cp in &self.control_planes {
            let mark = if self.current.as_deref() == Some(cp.name.as_str()) {
                "*"
            } else {
                ""
            };
            let token = if cp.auth_token.is_some() { "set" } else { "-" };
            out.push_str(&format!(
                "{mark:<2}{:<20} {:<40} {token}\n",
                cp.name, cp.address
            ));
        }
        out
    }
}

/// Where requests go and with which token: explicit values win, then the current context.
pub fn resolve(api_url: Option<&str>, auth_token: Option<&str>, config: &Config) -> Target {
    let current = config
        .current
        .as_deref()
        .and_then(|n| config.control_planes.iter().find(|c| c.name == n));
    match (api_url, current) {
        (Some(url), _) => Target {
            api_url: url.to_owned(),
            auth_token: auth_token.map(str::to_owned),
            ca_cert_file: None,
        },
        (None, Some(cp)) => Target {
            api_url: cp.address.clone(),
            auth_token: auth_token
                .map(str::to_owned)
                .or_else(|| cp.auth_token.clone()),
            ca_cert_file: cp.ca_cert_file.clone(),
        },
        (None, None) => Target {
            api_url: DEFAULT_API_URL.to_owned(),
            auth_token: auth_token.map(str::to_owned),
            ca_cert_file: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(name: &str, token: Option<&str>) -> ControlPlane {
        ControlPlane {
            name: name.into(),
            address: format!("http://{name}:5681"),
            auth_token: token.map(str::to_owned),
            ca_cert_file: None,
        }
    }

    #[test]
    fn contexts_add_switch_remove_and_persist_privately() {
        let dir = std::env::temp_dir().join(format!("umbractl-cfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("nested").join("umbractl.yaml");
        let mut cfg = Config::load(&file).unwrap();
        assert_eq!(cfg, Config::default());
        cfg.add(cp("a", Some("tok-a")), false).unwrap();
        cfg.add(cp("b", None), false).unwrap();
        assert_eq!(cfg.current.as_deref(), Some("b"), "add makes it current");
        assert!(cfg.add(cp("a", None), false).is_err());
        cfg.add(cp("a", Some("tok-a2")), true).unwrap();
        cfg.switch("b").unwrap();
        assert!(cfg.switch("nope").is_err());
        cfg.save(&file).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let mode = std::fs::metadata(file.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o700);
        }
        // A file in an existing directory leaves that directory's mode alone.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let open_dir = dir.join("open");
            std::fs::create_dir_all(&open_dir).unwrap();
            std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            cfg.save(&open_dir.join("umbractl.yaml")).unwrap();
            let mode = std::fs::metadata(&open_dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o755, "an existing directory keeps its mode");
        }
        let back = Config::load(&file).unwrap();
        assert_eq!(back, cfg);
        assert!(
            !format!("{back:?}").contains("tok-a2"),
            "Debug never shows a token"
        );
        let table = back.render();
        assert!(
            table.contains("set") && !table.contains("tok-a2"),
            "{table}"
        );
        assert!(table.lines().any(|l| l.starts_with("* b")), "{table}");
        let mut back = back;
        back.remove("b").unwrap();
        assert_eq!(back.current, None);
        assert!(back.remove("b").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn explicit_flags_win_over_the_current_context() {
        let mut cfg = Config::default();
        assert_eq!(resolve(None, None, &cfg).api_url, DEFAULT_API_URL);
        cfg.add(cp("prod", Some("ctx-token")), false).unwrap();
        let t = resolve(None, None, &cfg);
        assert_eq!(t.api_url, "http://prod:5681");
        assert_eq!(t.auth_token.as_deref(), Some("ctx-token"));
        let t = resolve(None, Some("flag"), &cfg);
        assert_eq!(t.auth_token.as_deref(), Some("flag"));
        let t = resolve(Some("http://other"), None, &cfg);
        assert_eq!(t.api_url, "http://other");
        assert_eq!(
            t.auth_token, None,
            "another address does not get the context's token"
        );
    }
}
