//! `export [-m M] --format universal [-o yaml] [--include-dataplanes] [--include-secrets]`:
//! a whole mesh as multi-document universal YAML that `apply -f` takes back, like
//! `kumactl export` (issue 20).
//!
//! The Mesh comes first, then every mesh-scoped type `GET /_resources` names, in its order
//! (by name), each list read to its last page (`next` followed; more than
//! [`crate::overview::MAX_PAGES`] pages is an error, not a partial export). Dataplanes are left
//! out unless `--include-dataplanes` (they register themselves, and a Global refuses to write
//! them), and Secrets unless `--include-secrets` (which lists them: admin only). What the
//! control plane stamps, `creationTime` and `modificationTime`, is left out, so exporting,
//! applying elsewhere and exporting again gives the same text.

use std::time::Duration;

use serde_json::Value;
use umbra_core::codec::encode_yaml;

use crate::error::CliError;
use crate::http::client;
use crate::overview::{get_value, list_all, MAX_PAGES, PAGE_SIZE};

/// The resource form of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ExportFormat {
    /// Kuma's universal form (`type`, `mesh`, `name`, ...), as the API answers.
    #[default]
    Universal,
}

/// The output of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ExportOutput {
    /// YAML documents separated by `---`.
    #[default]
    Yaml,
}

/// `umbractl export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Mesh.
    #[arg(short, long, default_value = "default")]
    pub mesh: String,
    /// Resource form.
    #[arg(long, value_enum, default_value_t = ExportFormat::Universal)]
    pub format: ExportFormat,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ExportOutput::Yaml)]
    pub output: ExportOutput,
    /// Include the mesh's Dataplanes (a Global refuses to apply them back: they are zones').
    #[arg(long)]
    pub include_dataplanes: bool,
    /// Include the mesh's Secrets (admin only).
    #[arg(long)]
    pub include_secrets: bool,
}

/// Whether `export` includes type `ty`: Dataplanes and Secrets only when asked for.
fn wanted(ty: &str, args: &ExportArgs) -> bool {
    match ty {
        "Dataplane" => args.include_dataplanes,
        "Secret" => args.include_secrets,
        _ => true,
    }
}

/// The documents of the export `args` describes, in order.
///
/// # Errors
/// The API's error with the type being read, or a list longer than [`MAX_PAGES`] pages.
pub async fn documents(api_url: &str, args: &ExportArgs) -> Result<Vec<Value>, CliError> {
    let http = client(Duration::from_secs(150))?;
    let base = api_url.trim_end_matches('/');
    let types = get_value(&http, &format!("{base}/_resources"), &[]).await?;
    let mesh_path = format!("/meshes/{}", args.mesh);
    let mesh = get_value(&http, &format!("{base}{mesh_path}"), &[])
        .await
        .map_err(|e| e.context(format!("reading Mesh {}", args.mesh)))?;
    let mut docs = vec![strip(mesh)];
    for d in types["resources"].as_array().into_iter().flatten() {
        let (Some(ty), Some(path)) = (d["name"].as_str(), d["path"].as_str()) else {
            continue;
        };
        if d["scope"] != "Mesh" || !wanted(ty, args) {
            continue;
        }
        let listed = list_all(&http, api_url, &format!("{mesh_path}/{path}"), &[])
            .await
            .map_err(|e| e.context(format!("listing {ty} of mesh {}", args.mesh)))?;
        if listed.truncated {
            return Err(CliError::Refused(format!(
                "{ty} of mesh {}: more than {MAX_PAGES} pages of {PAGE_SIZE}; not exported",
                args.mesh
            )));
        }
        docs.extend(listed.items.into_iter().map(strip));
    }
    Ok(docs)
}

/// [`documents`] as the text to print.
///
/// # Errors
/// As [`documents`].
pub async fn export(api_url: &str, args: &ExportArgs) -> Result<String, CliError> {
    Ok(documents(api_url, args)
        .await?
        .iter()
        .map(encode_yaml)
        .collect::<Vec<_>>()
        .join("---\n"))
}

/// `doc` without what the control plane stamps on it.
fn strip(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        o.remove("creationTime");
        o.remove("modificationTime");
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExportArgs,
    }

    #[test]
    fn dataplanes_and_secrets_only_when_asked() {
        let args = Cli::parse_from(["x"]).args;
        assert_eq!(args.mesh, "default");
        assert!(wanted("MeshTimeout", &args));
        assert!(!wanted("Dataplane", &args) && !wanted("Secret", &args));
        let args =
            Cli::parse_from(["x", "--include-dataplanes", "--include-secrets", "-m", "m"]).args;
        assert!(wanted("Dataplane", &args) && wanted("Secret", &args));
        let doc = serde_json::json!({"type": "Mesh", "name": "m",
            "creationTime": "2026-01-01T00:00:00Z", "modificationTime": "2026-01-01T00:00:00Z"});
        assert_eq!(strip(doc), serde_json::json!({"type": "Mesh", "name": "m"}));
    }
}
