//! Kuma's own inputs (issue 41): the policy and Mesh examples of Kuma 2.7's documentation and
//! of its end-to-end tests at `v2.7.29`, collected under `tests/data/kuma-examples/` (its
//! README says how; every document names its source, file and line, and Kuma's outcome), are
//! PUT one by one through the Global's API, as an operator would apply them, and each answer is
//! compared with Kuma's.
//!
//! Each corpus file is replayed against a fresh in-process Global (memory store), in file order,
//! so a page's or a test's documents see the ones before them. A Mesh document is PUT to
//! `/meshes/{name}`; any other to `/meshes/{mesh}/{plural}/{name}`, after creating its Mesh
//! (`type: Mesh` with nothing else) when the file has not. The mesh is the document's `mesh`,
//! or its `kuma.io/mesh` label in the Kubernetes form, else `default`, as Kuma defaults it.
//!
//! Kuma's outcome (`# kuma:` in the corpus) is `accepted` (Umbra must answer 200 or 201) or
//! `refused` with the field Kuma names, when known (Umbra must answer 400 naming that field).
//! A document where Umbra differs on purpose is listed in [`DIFFERENCES`] with the reason and
//! Umbra's own outcome, which is asserted instead. Any other mismatch fails the test, and so does
//! an entry of [`DIFFERENCES`] that no longer matches a document.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::testing::call;
use umbra_core::codec::{decode_one, Limits};
use umbra_core::resource::ResourceType;
use umbra_global_cp::api::router;
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::app_state;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/kuma-examples");

/// What a PUT of a document gives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// 200 or 201.
    Accepted,
    /// 400; the field named, when it is known.
    Refused(Option<String>),
}

impl Outcome {
    fn parse(s: &str) -> Outcome {
        let s = s.trim();
        if s == "accepted" {
            return Outcome::Accepted;
        }
        let rest = s
            .strip_prefix("refused")
            .unwrap_or_else(|| panic!("unknown outcome {s:?}"))
            .trim();
        Outcome::Refused((!rest.is_empty()).then(|| rest.to_owned()))
    }
}

/// A document where Umbra answers otherwise than Kuma on purpose: the document's id
/// (`<path>:<line>/<form>`, [`Doc::id`]), Umbra's outcome, and why.
type Difference = (&'static str, Umbra, &'static str);

/// Umbra's outcome for a [`Difference`].
#[derive(Debug, Clone, Copy)]
enum Umbra {
    /// A 400 naming the unknown `field` (with a reason that says Kuma ignores it and, when
    /// `Some`, suggests that known field), where Kuma ignores the field and then accepts the
    /// document or refuses it for what is left.
    RefusesUnknown {
        field: &'static str,
        suggests: Option<&'static str>,
    },
}

/// Why Umbra refuses what Kuma ignores: the project's rule.
const UNKNOWN: &str = "nothing accepted may be silently ignored: Umbra refuses a field it does \
                       not know, where Kuma 2.7 (protojson with unknown fields allowed, OpenAPI \
                       schemas without additionalProperties: false) drops it";

/// Umbra differs from Kuma on these documents, on purpose. All are [`UNKNOWN`]: a field that is
/// no field of the type, which Kuma drops. Kuma then accepts the rest, or refuses it for what is
/// missing (the document's `# kuma:` line); Umbra refuses the unknown field first, by name.
const DIFFERENCES: &[Difference] = &[
    // A provided CA's `config` (the field is `conf`): Kuma drops it, then finds no cert or key.
    (
        "app/_src/policies/mutual-tls.md:312/kubernetes",
        Umbra::RefusesUnknown {
            field: "spec.mtls.backends[0].config",
            suggests: Some("conf"),
        },
        UNKNOWN,
    ),
    (
        "app/_src/policies/mutual-tls.md:336/universal",
        Umbra::RefusesUnknown {
            field: "mtls.backends[0].config",
            suggests: Some("conf"),
        },
        UNKNOWN,
    ),
    (
        "app/_src/production/secure-deployment/secrets.md:192/universal",
        Umbra::RefusesUnknown {
            field: "mtls.backends[0].config",
            suggests: Some("conf"),
        },
        UNKNOWN,
    ),
    (
        "app/_src/production/secure-deployment/secrets.md:209/kubernetes",
        Umbra::RefusesUnknown {
            field: "spec.mtls.backends[0].config",
            suggests: Some("conf"),
        },
        UNKNOWN,
    ),
    // Universal documents written with a Kubernetes-style `spec`: Kuma drops it, which leaves an
    // empty Mesh (accepted) or a policy without selectors (refused).
    (
        "app/_src/policies/traffic-metrics.md:671/universal",
        Umbra::RefusesUnknown {
            field: "spec",
            suggests: None,
        },
        UNKNOWN,
    ),
    (
        "app/_src/policies/traffic-metrics.md:697/universal",
        Umbra::RefusesUnknown {
            field: "spec",
            suggests: None,
        },
        UNKNOWN,
    ),
    (
        "app/_src/policies/traffic-metrics.md:708/universal",
        Umbra::RefusesUnknown {
            field: "spec",
            suggests: None,
        },
        UNKNOWN,
    ),
    (
        "app/_src/policies/virtual-outbound.md:188/universal",
        Umbra::RefusesUnknown {
            field: "spec",
            suggests: None,
        },
        UNKNOWN,
    ),
    // A mis-indented selector: `kuma.io/service` beside `match` instead of under it.
    (
        "app/_src/policies/traffic-permissions.md:141/universal",
        Umbra::RefusesUnknown {
            field: "sources[0].kuma.io/service",
            suggests: None,
        },
        UNKNOWN,
    ),
    // `requestHeader` for `requestHeaders`: Kuma drops it and adds no header.
    (
        "app/_src/policies/traffic-route.md:428/kubernetes",
        Umbra::RefusesUnknown {
            field: "spec.conf.http[0].modify.requestHeader",
            suggests: Some("requestHeaders"),
        },
        UNKNOWN,
    ),
    (
        "app/_src/policies/traffic-route.md:459/universal",
        Umbra::RefusesUnknown {
            field: "conf.http[0].modify.requestHeader",
            suggests: Some("requestHeaders"),
        },
        UNKNOWN,
    ),
    // Kuma's own e2e test misspells `localityAwareness`; Kuma drops the whole section.
    (
        "test/e2e_env/multizone/localityawarelb/meshloadbalancingstrategy.go:74/universal",
        Umbra::RefusesUnknown {
            field: "spec.to[0].default.localityAwarenes",
            suggests: Some("localityAwareness"),
        },
        UNKNOWN,
    ),
    (
        "test/e2e_env/multizone/localityawarelb/meshloadbalancingstrategy.go:98/universal",
        Umbra::RefusesUnknown {
            field: "spec.to[0].default.localityAwarenes",
            suggests: Some("localityAwareness"),
        },
        UNKNOWN,
    ),
];

/// One document of the corpus.
#[derive(Debug)]
struct Doc {
    /// The corpus file, relative to [`DATA`].
    file: String,
    /// `path:line` in the source repository.
    at: String,
    /// The YAML sent, comments included.
    body: String,
    /// Kuma's outcome.
    kuma: Outcome,
}

impl Doc {
    /// `<path>:<line>/<form>`: the form is `kubernetes` or `universal`, as documentation pages
    /// show both forms of an example from the same line.
    fn id(&self, value: &Value) -> String {
        let form = if value.get("apiVersion").is_some() || value.get("kind").is_some() {
            "kubernetes"
        } else {
            "universal"
        };
        format!("{}/{form}", self.at)
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

/// The documents of a corpus file: pieces between `---` lines, each opening with `# key: value`
/// comments (`source`, `substituted`, `kuma`, `note`).
fn docs(path: &Path) -> Vec<Doc> {
    let text = std::fs::read_to_string(path).unwrap();
    let file = path
        .strip_prefix(DATA)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut pieces: Vec<Vec<&str>> = vec![Vec::new()];
    for line in text.lines() {
        if line == "---" {
            pieces.push(Vec::new());
        } else {
            pieces.last_mut().unwrap().push(line);
        }
    }
    pieces
        .into_iter()
        .skip(1)
        .map(|lines| {
            let comment = |key: &str| {
                lines
                    .iter()
                    .take_while(|l| l.starts_with('#'))
                    .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
            };
            let source = comment("source").unwrap_or_else(|| panic!("{file}: no source"));
            // `repo@commit path:line (...)`
            let at = source.split_whitespace().nth(1).unwrap().to_owned();
            let kuma = Outcome::parse(
                comment("kuma").unwrap_or_else(|| panic!("{file} {at}: no outcome")),
            );
            Doc {
                file: file.clone(),
                at,
                body: lines.join("\n") + "\n",
                kuma,
            }
        })
        .collect()
}

/// The type, name and mesh a document is PUT as.
fn target(v: &Value) -> Option<(ResourceType, String, String)> {
    let str_at = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let ty = ResourceType::from_name(&str_at("/type").or_else(|| str_at("/kind"))?)?;
    let name = str_at("/name").or_else(|| str_at("/metadata/name"))?;
    let mesh = str_at("/mesh")
        .or_else(|| str_at("/metadata/labels/kuma.io~1mesh"))
        .unwrap_or_else(|| "default".into());
    Some((ty, name, mesh))
}

/// Umbra's outcome for one answer, with the `(field, reason)` pairs of a refusal. A field
/// `p` whose reason is "missing field `x`" (a required field that is absent, which Kuma names by
/// its own path) also counts as naming `p.x`.
fn outcome(status: StatusCode, body: &Value) -> Result<(Outcome, Vec<(String, String)>), String> {
    match status.as_u16() {
        200 | 201 => Ok((Outcome::Accepted, Vec::new())),
        400 => {
            let mut fields = Vec::new();
            for p in body["invalid_parameters"].as_array().into_iter().flatten() {
                let field = p["field"].as_str().unwrap_or_default().to_owned();
                let reason = p["reason"].as_str().unwrap_or_default().to_owned();
                if let Some(missing) = reason
                    .strip_prefix("missing field `")
                    .and_then(|r| r.split('`').next())
                {
                    fields.push((format!("{field}.{missing}"), reason.clone()));
                }
                fields.push((field, reason));
            }
            Ok((Outcome::Refused(None), fields))
        }
        _ => Err(format!("{status}: {body}")),
    }
}

/// The `field: reason` pairs of an error answer, else the whole body.
fn answer(body: &Value) -> String {
    match body["invalid_parameters"].as_array() {
        Some(ps) if !ps.is_empty() => ps
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p["field"].as_str().unwrap_or(""),
                    p["reason"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => body.to_string(),
    }
}

/// `true` when Umbra's answer (`got`, the fields it names) is `want`.
fn matches(want: &Outcome, got: &Outcome, fields: &[(String, String)]) -> bool {
    match (want, got) {
        (Outcome::Accepted, Outcome::Accepted) | (Outcome::Refused(None), Outcome::Refused(_)) => {
            true
        }
        (Outcome::Refused(Some(f)), Outcome::Refused(_)) => fields.iter().any(|(g, _)| g == f),
        _ => false,
    }
}

/// `true` when Umbra's refusal is the one `umbra` names: the unknown field, a reason saying it
/// is unknown and that Kuma would ignore it, and the suggested known field.
fn matches_difference(umbra: Umbra, got: &Outcome, fields: &[(String, String)]) -> bool {
    let Umbra::RefusesUnknown { field, suggests } = umbra;
    *got == Outcome::Refused(None)
        && fields.iter().any(|(f, reason)| {
            f == field
                && reason.contains("unknown field")
                && reason.contains("Kuma 2.7 would ignore it")
                && suggests.is_none_or(|s| reason.contains(&format!("did you mean `{s}`")))
        })
}

#[tokio::test]
async fn kumas_examples_behave_as_in_kuma() {
    let mut paths = Vec::new();
    files(Path::new(DATA), &mut paths);
    let differences: BTreeMap<&str, (Umbra, &str)> = DIFFERENCES
        .iter()
        .map(|(id, u, why)| (*id, (*u, *why)))
        .collect();
    let (mut seen, mut used) = (BTreeSet::new(), BTreeSet::new());
    let (mut total, mut same) = (0, 0);
    let mut failures = Vec::new();
    for path in &paths {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let app = router(app_state(store, Arc::default()));
        for doc in docs(path) {
            total += 1;
            let value = decode_one(doc.body.as_bytes(), Limits::default())
                .unwrap_or_else(|e| panic!("{} {}: not YAML: {e}", doc.file, doc.at));
            let id = doc.id(&value);
            assert!(
                seen.insert(id.clone()),
                "{}: two documents are {id}",
                doc.file
            );
            let (ty, name, mesh) = target(&value)
                .unwrap_or_else(|| panic!("{} {id}: no type, name or mesh", doc.file));
            let uri = if ty == ResourceType::Mesh {
                format!("/meshes/{name}")
            } else {
                let (s, _, _) = call(&app, "GET", &format!("/meshes/{mesh}"), &[], None).await;
                if s == StatusCode::NOT_FOUND {
                    let body = format!("type: Mesh\nname: {mesh}\n");
                    let (s, b, _) = call(
                        &app,
                        "PUT",
                        &format!("/meshes/{mesh}"),
                        &[("content-type", "application/yaml")],
                        Some(&body),
                    )
                    .await;
                    assert!(
                        s.is_success(),
                        "{} {id}: creating mesh {mesh}: {s} {b}",
                        doc.file
                    );
                }
                format!("/meshes/{mesh}/{}/{name}", ty.plural())
            };
            let (status, body, _) = call(
                &app,
                "PUT",
                &uri,
                &[("content-type", "application/yaml")],
                Some(&doc.body),
            )
            .await;
            let (got, fields) = match outcome(status, &body) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{id}: unexpected answer {e}"));
                    continue;
                }
            };
            let (ok, want, why) = match differences.get(id.as_str()) {
                Some((umbra, why)) => {
                    used.insert(id.clone());
                    (
                        matches_difference(*umbra, &got, &fields),
                        format!("{umbra:?}"),
                        Some(*why),
                    )
                }
                None => (
                    matches(&doc.kuma, &got, &fields),
                    format!("{:?}", doc.kuma),
                    None,
                ),
            };
            if ok {
                if why.is_none() {
                    same += 1;
                }
            } else {
                failures.push(format!(
                    "{} {id}: want {want}{}, Umbra answered {status} {}",
                    doc.file,
                    why.map_or(String::new(), |w| format!(" (deliberate difference: {w})")),
                    answer(&body)
                ));
            }
        }
    }
    for id in differences.keys() {
        assert!(
            used.contains(*id),
            "DIFFERENCES names {id}, which is no document of the corpus"
        );
    }
    eprintln!(
        "{same} of {total} documents behave as in Kuma 2.7.29; {} deliberate differences",
        used.len()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
