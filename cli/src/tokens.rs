//! `umbractl generate zone-token` ([`zone_token`], the Global's `POST /tokens/zone`; with
//! `--scope ingress|egress`, a zone-proxy token from `POST /tokens/zone-ingress`),
//! `generate user-token|dataplane-token` (issue 15; Kuma's `POST /tokens/user` and
//! `POST /tokens/dataplane`, admin only) and `umbractl config control-planes
//! add|list|switch|remove` over the contexts file ([`crate::config`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, ControlPlane};
use crate::error::CliError;
use crate::http::{client, send};

/// Things `generate` makes.
#[derive(Debug, clap::Subcommand)]
pub enum Generate {
    /// A zone token, for `zone-cp --kds-token` (issued and signed by the Global); with
    /// `--scope`, a token for the zone's proxies instead (Kuma's zone-token scopes: `ingress`
    /// for ZoneIngresses, `egress` for ZoneEgresses; `POST /tokens/zone-ingress`).
    ZoneToken {
        /// Zone name (an RFC 1123 label).
        #[arg(long)]
        zone: String,
        /// `ingress` and/or `egress` (repeatable or comma-separated): a zone-proxy token.
        #[arg(long, value_delimiter = ',')]
        scope: Vec<String>,
        /// Validity, as a Go duration (`24h`, `8760h`); the Global's default is one year.
        #[arg(long)]
        valid_for: Option<String>,
    },
    /// A user token (admin only): a name and groups; `mesh-system:admin` makes an admin.
    UserToken {
        /// User name.
        #[arg(long)]
        name: String,
        /// Group (repeatable).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Validity (`24h`); the default is one year.
        #[arg(long)]
        valid_for: Option<String>,
    },
    /// A dataplane token (admin only), bound to a mesh and a DPP name and/or tags.
    DataplaneToken {
        /// Mesh.
        #[arg(long, short)]
        mesh: String,
        /// DPP name (without it: any DPP of the mesh carrying the tags).
        #[arg(long)]
        name: Option<String>,
        /// `key=value` (repeatable; a key repeated allows several values).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Proxy type: dataplane (default), ingress, egress.
        #[arg(long = "type")]
        proxy_type: Option<String>,
        /// Validity (`24h`); the default is one year.
        #[arg(long)]
        valid_for: Option<String>,
    },
}

/// `umbractl config ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// The control planes umbractl knows (kumactl's contexts).
    ControlPlanes {
        /// What to do.
        #[command(subcommand)]
        what: ControlPlanesCommand,
    },
}

/// `umbractl config control-planes ...`. `Debug` never shows a token.
#[derive(clap::Subcommand)]
pub enum ControlPlanesCommand {
    /// Add a control plane and make it current.
    Add {
        /// Context name.
        #[arg(long)]
        name: String,
        /// API URL (`http://host:5681`, or `https://` with `--ca-cert-file`).
        #[arg(long)]
        address: String,
        /// User token for it.
        #[arg(long)]
        auth_token: Option<String>,
        /// PEM CA certificate to verify an `https://` address with.
        #[arg(long)]
        ca_cert_file: Option<PathBuf>,
        /// Replace a control plane of the same name.
        #[arg(long)]
        overwrite: bool,
        /// Do not check that the address answers (`GET /`).
        #[arg(long)]
        skip_verify: bool,
    },
    /// List the control planes (`*` marks the current one; tokens are never shown).
    List,
    /// Make another control plane current.
    Switch {
        /// Context name.
        #[arg(long)]
        name: String,
    },
    /// Remove a control plane.
    Remove {
        /// Context name.
        #[arg(long)]
        name: String,
    },
}

impl std::fmt::Debug for ControlPlanesCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Add {
                name,
                address,
                auth_token,
                ca_cert_file,
                overwrite,
                skip_verify,
            } => f
                .debug_struct("Add")
                .field("name", name)
                .field("address", address)
                .field("auth_token", &auth_token.as_ref().map(|_| "<redacted>"))
                .field("ca_cert_file", ca_cert_file)
                .field("overwrite", overwrite)
                .field("skip_verify", skip_verify)
                .finish(),
            Self::List => f.write_str("List"),
            Self::Switch { name } => f.debug_struct("Switch").field("name", name).finish(),
            Self::Remove { name } => f.debug_struct("Remove").field("name", name).finish(),
        }
    }
}

/// Run a `config` command against the file at `path`.
///
/// # Errors
/// A bad file, an unknown or duplicate name, an address that does not answer.
pub async fn configure(path: &Path, what: ConfigCommand) -> anyhow::Result<()> {
    let ConfigCommand::ControlPlanes { what } = what;
    let mut cfg = Config::load(path)?;
    match what {
        ControlPlanesCommand::Add {
            name,
            address,
            auth_token,
            ca_cert_file,
            overwrite,
            skip_verify,
        } => {
            let cp = ControlPlane {
                name: name.clone(),
                address: address.trim_end_matches('/').to_owned(),
                auth_token,
                ca_cert_file,
            };
            if !skip_verify {
                verify(&cp).await?;
            }
            cfg.add(cp, overwrite)?;
            cfg.save(path)?;
            println!("added control plane {name:?} and switched to it");
        }
        ControlPlanesCommand::List => print!("{}", cfg.render()),
        ControlPlanesCommand::Switch { name } => {
            cfg.switch(&name)?;
            cfg.save(path)?;
            println!("switched to control plane {name:?}");
        }
        ControlPlanesCommand::Remove { name } => {
            cfg.remove(&name)?;
            cfg.save(path)?;
            println!("removed control plane {name:?}");
        }
    }
    Ok(())
}

/// `GET /` answers at the control plane's address (with its CA).
async fn verify(cp: &ControlPlane) -> Result<(), CliError> {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some(ca) = &cp.ca_cert_file {
        builder = builder.add_root_certificate(crate::http::ca_certificate(ca)?);
    }
    let http = builder
        .build()
        .map_err(|e| CliError::Unavailable(format!("cannot build an HTTP client: {e}")))?;
    let url = format!("{}/", cp.address);
    send(&url, http.get(&url))
        .await
        .map(|_| ())
        .map_err(|e| e.context("the control plane does not answer (--skip-verify adds it anyway)"))
}

/// `key=value` tags into the API's `{key: [values]}`.
fn parse_tags(tags: &[String]) -> Result<BTreeMap<String, Vec<String>>, CliError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in tags {
        let (k, v) = t
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| CliError::Input(format!("--tag {t:?}: expected key=value")))?;
        out.entry(k.to_owned()).or_default().push(v.to_owned());
    }
    Ok(out)
}

/// Ask the API at `api_url` for the token `what` describes (not a zone token: see
/// [`zone_token`]).
///
/// # Errors
/// Bad tags, the API's refusal (403 for a non-admin), an unreachable API.
pub async fn generate(api_url: &str, what: Generate) -> anyhow::Result<String> {
    let (path, body) = match what {
        Generate::UserToken {
            name,
            groups,
            valid_for,
        } => (
            "/tokens/user",
            serde_json::json!({"name": name, "groups": groups, "validFor": valid_for}),
        ),
        Generate::DataplaneToken {
            mesh,
            name,
            tags,
            proxy_type,
            valid_for,
        } => (
            "/tokens/dataplane",
            serde_json::json!({
                "mesh": mesh,
                "name": name.unwrap_or_default(),
                "tags": parse_tags(&tags)?,
                "type": proxy_type.unwrap_or_default(),
                "validFor": valid_for,
            }),
        ),
        Generate::ZoneToken {
            zone,
            scope,
            valid_for,
        } if !scope.is_empty() => (
            "/tokens/zone-ingress",
            serde_json::json!({"zone": zone, "scope": scope, "validFor": valid_for}),
        ),
        Generate::ZoneToken {
            zone, valid_for, ..
        } => return zone_token(api_url, &zone, valid_for.as_deref()).await,
    };
    let mut body = body;
    if let Some(o) = body.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(30))?
        .post(&url)
        .header("content-type", "application/json")
        .body(body.to_string());
    Ok(send(&url, request).await?.trim().to_owned())
}

/// Ask the Global at `api_url` for a token for `zone`.
///
/// # Errors
/// The API's error detail (e.g. an invalid zone name), or why it could not be reached.
pub async fn zone_token(
    api_url: &str,
    zone: &str,
    valid_for: Option<&str>,
) -> anyhow::Result<String> {
    let mut body = serde_json::json!({ "zone": zone });
    if let Some(v) = valid_for {
        body["validFor"] = v.into();
    }
    let url = format!("{}/tokens/zone", api_url.trim_end_matches('/'));
    let request = client(Duration::from_secs(30))?
        .post(&url)
        .header("content-type", "application/json")
        .body(body.to_string());
    let text = send(&url, request).await?;
    Ok(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_group_values_by_key() {
        let t = parse_tags(&[
            "kuma.io/service=web".into(),
            "kuma.io/service=api".into(),
            "v=1".into(),
        ])
        .unwrap();
        assert_eq!(t["kuma.io/service"], ["web", "api"]);
        assert!(parse_tags(&["novalue".into()]).is_err());
        assert!(parse_tags(&["=x".into()]).is_err());
    }
}
