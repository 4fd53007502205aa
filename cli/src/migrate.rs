//! `umbractl convert` and `umbractl migrate` (issue 19, the migration workflow):
//! - `convert -f old.yaml [--mesh M] [-o yaml|json] [--format universal|k8s]` turns old
//!   policies (in Kuma's universal or Kubernetes form) into their `targetRef`
//!   equivalents, labelled `kuma.io/effect: shadow`, locally ([`umbra_core::convert`]); in
//!   YAML each output is preceded by comments naming its source and every difference the
//!   converter knows of, and the output is what `umbractl apply` takes;
//! - `migrate plan --mesh M [--policy T/n]... [--retire T/n]... [-o text|json]` asks the Global
//!   for the plan (`POST /meshes/{mesh}/_migration/plan`): its fingerprint and fleet diff;
//! - `migrate apply --mesh M --plan FP` and `migrate rollback --mesh M --plan FP` promote or
//!   restore exactly that plan (`POST .../_migration/apply|rollback`).

use serde_json::{json, Value};
use umbra_core::codec::encode_yaml;
use umbra_core::convert::{convert, Conversion, Options};
use umbra_core::resource::Resource;

use crate::error::CliError;
use crate::http::post_json;
use crate::output::Output;

/// Output of `convert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvertOutput {
    /// Multi-document YAML with comments (what `umbractl apply` takes).
    Yaml,
    /// `{conversions: [{source, outputs, notes}], errors: [...]}`.
    Json,
}

/// `convert`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// File with old policies (`-` for stdin); repeatable.
    #[arg(short, long = "file", required = true)]
    pub files: Vec<String>,
    /// Put the new policies in this mesh (default: each source's).
    #[arg(short, long)]
    pub mesh: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ConvertOutput::Yaml)]
    pub output: ConvertOutput,
    /// The form of the YAML output: Kuma's universal one, or its Kubernetes one (for a
    /// Kubernetes zone's GitOps). The input may be in either form.
    #[arg(long, value_enum, default_value_t = crate::resources::Format::Universal)]
    pub format: crate::resources::Format,
}

/// `migrate` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Migrate {
    /// The fleet-wide diff of promoting shadow policies and deleting the old ones they
    /// replace, with a fingerprint to apply it by.
    Plan {
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// A shadow policy to promote (`<Type>/<name>`); repeatable. Default: every shadow
        /// policy of the mesh.
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// A live policy to delete too (besides each promoted policy's converted-from
        /// source); repeatable.
        #[arg(long)]
        retire: Vec<String>,
        /// Each zone's deadline (`30s`; at most `120s`).
        #[arg(long)]
        timeout: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Apply a plan: only if nothing changed since it was made (else exit 1 with what did).
    /// With `--stages`, roll it out stage by stage instead, each stage gated on the staged
    /// DPPs' Envoy counters, and follow it to its end (exit 1 when it is rolled back).
    Apply {
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// The plan's fingerprint.
        #[arg(long)]
        plan: String,
        /// Stages separated by commas: each a count of DPPs (`1`), a percentage of them
        /// (`10%`; a deterministic sample spread over zones and services), or tags
        /// `<tag>=<value>` joined by `&` (`kuma.io/zone=zone-1`); the last `100%` (the plan's
        /// apply): `1,10%,50%,100%`.
        #[arg(long)]
        stages: Option<String>,
        /// The gates (with `--stages`).
        #[command(flatten)]
        gate: crate::rollout::GateFlags,
        /// Each zone's deadline while the diff is computed again (`30s`; at most `120s`; not
        /// with `--stages`).
        #[arg(long, conflicts_with = "stages")]
        timeout: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// A staged rollout: its stages, phase and every decision (the mesh's latest, or
    /// `--plan`'s).
    Status {
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// The plan's fingerprint.
        #[arg(long)]
        plan: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Roll an applied plan back: only if nothing it changed was touched since.
    Rollback {
        /// Mesh.
        #[arg(short, long, default_value = "default")]
        mesh: String,
        /// The plan's fingerprint.
        #[arg(long)]
        plan: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

/// The YAML comment lines (`# ...`) of one conversion.
fn comments(c: &Conversion) -> String {
    let mut out = format!(
        "# converted from {} {:?} (mesh {:?}) by umbractl convert\n",
        c.source.ty.name(),
        c.source.name,
        c.source.mesh
    );
    if c.notes.is_empty() {
        out.push_str("# no known difference\n");
    }
    for n in &c.notes {
        let kind = serde_json::to_value(n.kind).unwrap_or_default();
        out.push_str(&format!(
            "# {} {}: {}\n",
            kind.as_str().unwrap_or_default(),
            n.field,
            n.message.replace('\n', " ")
        ));
    }
    out
}

/// Convert the old policies of `docs`: the text to print and whether every one converted.
pub fn convert_documents(
    docs: &[Resource],
    mesh: Option<&str>,
    output: ConvertOutput,
    format: crate::resources::Format,
) -> (String, bool) {
    let options = Options {
        mesh: mesh.map(str::to_owned),
    };
    let results = convert(docs, &options);
    let ok = results.iter().all(Result::is_ok);
    let text = match output {
        ConvertOutput::Json => {
            let (mut conversions, mut errors) = (Vec::new(), Vec::new());
            for r in &results {
                match r {
                    Ok(c) => conversions.push(json!({
                        "source": {"type": c.source.ty.name(), "mesh": c.source.mesh, "name": c.source.name},
                        "outputs": c.outputs.iter().map(Resource::to_value).collect::<Vec<_>>(),
                        "notes": c.notes,
                    })),
                    Err(e) => errors.push(json!(e.to_string())),
                }
            }
            serde_json::to_string_pretty(&json!({"conversions": conversions, "errors": errors}))
                .unwrap_or_default()
        }
        ConvertOutput::Yaml => {
            let mut docs = Vec::new();
            for r in &results {
                match r {
                    Ok(c) => {
                        for o in &c.outputs {
                            let doc = match format {
                                crate::resources::Format::K8s => {
                                    umbra_core::k8s::to_value(o).unwrap_or_else(|| o.to_value())
                                }
                                crate::resources::Format::Universal => o.to_value(),
                            };
                            docs.push(format!("{}{}", comments(c), encode_yaml(&doc)));
                        }
                    }
                    Err(e) => docs.push(format!(
                        "# not converted: {}\n",
                        e.to_string().replace('\n', " ")
                    )),
                }
            }
            docs.join("---\n")
        }
    };
    (text, ok)
}

/// `convert -f FILE...`: read, convert, render.
///
/// # Errors
/// [`CliError::Input`] for an unreadable or invalid file, or when a policy cannot be converted
/// (the text is still printed first, with the reason as a comment).
pub fn convert_files(args: &ConvertArgs) -> Result<String, CliError> {
    if args.format == crate::resources::Format::K8s && args.output == ConvertOutput::Json {
        return Err(CliError::Input(
            "--format k8s is the form of the YAML output; -o json prints the universal form".into(),
        ));
    }
    let sources = args
        .files
        .iter()
        .map(|f| crate::resources::read_source(f))
        .collect::<Result<Vec<_>, _>>()?;
    let docs = crate::resources::read_documents(&sources)?
        .into_iter()
        .map(|d| {
            // Either form: universal, or Kuma's Kubernetes one (`umbra_core::k8s`).
            umbra_core::k8s::decode(d.body)
                .map_err(|e| CliError::Input(format!("{}: {e}", d.origin)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (text, ok) = convert_documents(&docs, args.mesh.as_deref(), args.output, args.format);
    if !ok {
        println!("{}", text.trim_end());
        return Err(CliError::Input(
            "some policies could not be converted (see the comments above)".into(),
        ));
    }
    Ok(text.trim_end().to_owned())
}

/// A plan for a person: what it promotes and retires, each change with its count and causes,
/// and the fingerprint to apply.
pub fn render_plan(plan: &Value) -> String {
    let list = |k: &str| {
        plan[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let diff = &plan["diff"];
    let mut out = format!(
        "mesh {}: promote {}; delete {}\n",
        plan["mesh"].as_str().unwrap_or_default(),
        list("promote"),
        if list("retire").is_empty() {
            "nothing".to_owned()
        } else {
            list("retire")
        }
    );
    out.push_str(&format!(
        "DPPs considered {}, changed {}, failed {}{}\n",
        diff["totals"]["considered"],
        diff["totals"]["changed"],
        diff["totals"]["failed"],
        if diff["partial"] == json!(true) {
            " (partial: not every zone answered)"
        } else {
            ""
        }
    ));
    for c in diff["changes"].as_array().into_iter().flatten() {
        let op = &c["operation"];
        out.push_str(&format!(
            "  {} {} ({} DPPs)\n",
            op["op"].as_str().unwrap_or_default(),
            op["path"].as_str().unwrap_or_default(),
            c["count"]
        ));
        let causes = c["causes"].as_array().map_or(&[][..], Vec::as_slice);
        if causes.is_empty() {
            out.push_str("    cause: not explained by a converter note\n");
        }
        for cause in causes {
            out.push_str(&format!(
                "    cause: {} {}: {}\n",
                cause["policy"].as_str().unwrap_or_default(),
                cause["field"].as_str().unwrap_or_default(),
                cause["message"].as_str().unwrap_or_default()
            ));
        }
    }
    for n in diff["notGenerated"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  not generated: {}: {}\n",
            crate::diff::not_generated_subject(n),
            n["reason"].as_str().unwrap_or_default()
        ));
    }
    out.push_str(&format!(
        "plan {}\n",
        plan["fingerprint"].as_str().unwrap_or_default()
    ));
    out
}

/// Run a `migrate` subcommand; the text to print.
///
/// # Errors
/// The API's error.
pub async fn run(api_url: &str, what: Migrate) -> Result<String, CliError> {
    let path = |mesh: &str, step: &str| format!("/meshes/{mesh}/_migration/{step}");
    match what {
        Migrate::Plan {
            mesh,
            policies,
            retire,
            timeout,
            output,
        } => {
            let mut body = json!({"policies": policies, "retire": retire});
            if let Some(t) = timeout {
                body["timeout"] = json!(t);
            }
            let plan = post_json(api_url, &path(&mesh, "plan"), &body)
                .await
                .map_err(|e| e.context(format!("planning the migration of mesh {mesh:?}")))?;
            Ok(match output {
                Output::Json => serde_json::to_string_pretty(&plan).unwrap_or_default(),
                Output::Text => render_plan(&plan),
            })
        }
        Migrate::Apply {
            mesh,
            plan,
            stages: Some(stages),
            gate,
            output,
            ..
        } => {
            crate::rollout::start_and_follow(
                api_url,
                &mesh,
                &plan,
                &stages,
                &gate,
                output,
                |line| eprintln!("{line}"),
            )
            .await
        }
        Migrate::Status { mesh, plan, output } => {
            crate::rollout::status(api_url, &mesh, plan.as_deref(), output).await
        }
        Migrate::Apply {
            mesh,
            plan,
            timeout,
            output,
            ..
        } => {
            let mut body = json!({"plan": plan});
            if let Some(t) = timeout {
                body["timeout"] = json!(t);
            }
            let answer = post_json(api_url, &path(&mesh, "apply"), &body)
                .await
                .map_err(|e| e.context(format!("applying plan {plan} to mesh {mesh:?}")))?;
            Ok(match output {
                Output::Json => serde_json::to_string_pretty(&answer).unwrap_or_default(),
                Output::Text => format!(
                    "plan {plan} applied at revision {}: promoted {}; deleted {}",
                    answer["revision"],
                    names(&answer["promoted"]),
                    names(&answer["retired"])
                ),
            })
        }
        Migrate::Rollback { mesh, plan, output } => {
            let answer = post_json(api_url, &path(&mesh, "rollback"), &json!({"plan": plan}))
                .await
                .map_err(|e| e.context(format!("rolling back plan {plan} in mesh {mesh:?}")))?;
            Ok(match output {
                Output::Json => serde_json::to_string_pretty(&answer).unwrap_or_default(),
                Output::Text => format!(
                    "plan {plan} rolled back at revision {}: restored {}",
                    answer["revision"],
                    names(&answer["restored"])
                ),
            })
        }
    }
}

/// A JSON list of strings as `a, b` (`nothing` when empty).
fn names(v: &Value) -> String {
    let list: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if list.is_empty() {
        "nothing".to_owned()
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_input_converts_and_prints_back_in_either_form() {
        let dir = std::env::temp_dir().join(format!("umbra-convert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("old.yaml");
        std::fs::write(
            &file,
            "apiVersion: kuma.io/v1alpha1\nkind: Timeout\nmesh: default\nmetadata:\n  name: t\nspec:\n  sources: [{match: {kuma.io/service: '*'}}]\n  destinations: [{match: {kuma.io/service: backend}}]\n  conf: {connectTimeout: 5s}\n",
        )
        .unwrap();
        let args = |format| ConvertArgs {
            files: vec![file.display().to_string()],
            mesh: None,
            output: ConvertOutput::Yaml,
            format,
        };
        let universal = convert_files(&args(crate::resources::Format::Universal)).unwrap();
        let k8s = convert_files(&args(crate::resources::Format::K8s)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(universal.contains("type: MeshTimeout"), "{universal}");
        assert!(k8s.contains("apiVersion: kuma.io/v1alpha1"), "{k8s}");
        // Both read back as the same resource.
        let read = |text: &str| {
            let mut all =
                umbra_core::k8s::decode_all(text.as_bytes(), umbra_core::codec::Limits::default())
                    .unwrap();
            assert_eq!(all.len(), 1, "{text}");
            all.remove(0)
        };
        let (u, k) = (read(&universal), read(&k8s));
        assert_eq!(u.to_value(), k.to_value());
        assert_eq!(u.meta.mesh, "default");
    }

    #[test]
    fn a_plan_reads_with_its_causes_and_fingerprint() {
        let plan = json!({
            "mesh": "default", "fingerprint": "ab12", "promote": ["MeshTimeout/t"], "retire": ["Timeout/t"],
            "diff": {"totals": {"considered": 3, "changed": 2, "failed": 0}, "partial": false, "changes": [
                {"operation": {"op": "remove", "path": "/c/backend/connectTimeout"}, "count": 2,
                 "causes": [{"policy": "Timeout/t", "field": "conf.connectTimeout", "message": "left to Envoy's default"}]},
                {"operation": {"op": "add", "path": "/x"}, "count": 1, "causes": []}
            ]}
        });
        let text = render_plan(&plan);
        assert!(
            text.contains("promote MeshTimeout/t; delete Timeout/t"),
            "{text}"
        );
        assert!(
            text.contains("remove /c/backend/connectTimeout (2 DPPs)"),
            "{text}"
        );
        assert!(
            text.contains("cause: Timeout/t conf.connectTimeout: left to Envoy's default"),
            "{text}"
        );
        assert!(
            text.contains("cause: not explained by a converter note"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("plan ab12"), "{text}");
    }
}
