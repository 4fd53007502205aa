//! `apply`, `get` and `delete`: Kuma's resource REST API from the command line.
//!
//! - `apply -f FILE|-` (repeatable): multi-document YAML or JSON, each document in Kuma's
//!   universal form or its Kubernetes form (`apiVersion: kuma.io/v1alpha1`, `kind`, `metadata`,
//!   `spec`, [`umbra_core::k8s`]), mixed freely. Every document is decoded
//!   and validated locally with the control plane's own rules (`umbra_core`) before anything is
//!   sent, so an invalid file changes nothing (exit 2, every `{field, message}` listed per
//!   document). Documents are then `PUT` one at a time, as written, Meshes first, in file order;
//!   the first refusal stops the run and says how many were applied.
//! - `get <type> [name] -m <mesh> -o table|yaml|json [--format universal|k8s]`: one resource
//!   or every page of a list. `-o yaml` prints documents `apply -f` accepts back; with
//!   `--format k8s` they are in the Kubernetes form (a JSON list is a Kubernetes `List`).
//! - `delete <type> <name> -m <mesh>`.
//!
//! Types are named as Kuma names them: `MeshTimeout`, `meshtimeout`, `meshtimeouts`,
//! `circuit-breakers`, …; `zones` on a Global.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;
use umbra_core::codec::{decode_documents, encode_yaml, Limits};
use umbra_core::k8s;
use umbra_core::resource::{Resource, ResourceType, TypeKind};

use crate::error::CliError;
use crate::http::{client, pretty, send_request};

/// What `get` and `delete` address: a resource type, or the Global's zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A resource type of the REST API.
    Resource(ResourceType),
    /// `/zones` (Global only).
    Zone,
}

impl Kind {
    /// Parse a type as a user writes it: Kuma's name (`MeshTimeout`), its plural path segment
    /// (`meshtimeouts`, `circuit-breakers`) or singular, in any case, with or without `-`.
    ///
    /// # Errors
    /// [`CliError::Input`] listing the known types.
    pub fn parse(s: &str) -> Result<Kind, CliError> {
        let norm: String = s
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        if norm == "zone" || norm == "zones" {
            return Ok(Kind::Zone);
        }
        for &ty in ResourceType::ALL {
            let name = ty.name().to_ascii_lowercase();
            let plural: String = ty.plural().chars().filter(|c| *c != '-').collect();
            if norm == name
                || norm == plural
                || format!("{norm}s") == plural
                || format!("{norm}es") == plural
            {
                return Ok(Kind::Resource(ty));
            }
        }
        let known: Vec<&str> = ResourceType::ALL
            .iter()
            .map(|t| t.plural())
            .chain(["zones"])
            .collect();
        Err(CliError::Input(format!(
            "unknown resource type {s:?}; known types: {}",
            known.join(", ")
        )))
    }

    fn path(self, mesh: &str, name: Option<&str>) -> String {
        let base = match self {
            Kind::Zone => "/zones".to_owned(),
            Kind::Resource(ResourceType::Mesh) => "/meshes".to_owned(),
            Kind::Resource(ResourceType::GlobalSecret) => "/global-secrets".to_owned(),
            Kind::Resource(ResourceType::ZoneIngress) => "/zone-ingresses".to_owned(),
            Kind::Resource(ResourceType::ZoneEgress) => "/zoneegresses".to_owned(),
            Kind::Resource(ty) => format!("/meshes/{mesh}/{}", ty.plural()),
        };
        match name {
            Some(n) => format!("{base}/{n}"),
            None => base,
        }
    }

    /// Kuma's type name (`MeshTimeout`), or `Zone`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Zone => "Zone",
            Kind::Resource(ty) => ty.name(),
        }
    }
}

/// Output of `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GetOutput {
    /// Aligned columns.
    Table,
    /// YAML documents, as `apply -f` takes them.
    Yaml,
    /// The API's JSON.
    Json,
}

/// The resource form `get -o yaml|json` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Kuma's universal form, as the API answers (`type`, `mesh`, `name`, ...).
    #[default]
    Universal,
    /// Kuma's Kubernetes form (`apiVersion: kuma.io/v1alpha1`, `kind`, `metadata`, `spec`).
    K8s,
}

/// One document read for `apply`: where it came from and what it is.
#[derive(Debug, Clone)]
pub struct Document {
    /// `file#index` (1-based), for messages.
    pub origin: String,
    /// The resource's type.
    pub ty: ResourceType,
    /// Its mesh (empty for a Mesh).
    pub mesh: String,
    /// Its name.
    pub name: String,
    /// The document as written (sent as JSON; the server validates it again).
    pub body: Value,
}

impl Document {
    pub(crate) fn path(&self) -> String {
        Kind::Resource(self.ty).path(&self.mesh, Some(&self.name))
    }

    /// `MeshTimeout default/timeout-global`.
    pub fn describe(&self) -> String {
        if !self.ty.is_mesh_scoped() {
            format!("{} {}", self.ty.name(), self.name)
        } else {
            format!("{} {}/{}", self.ty.name(), self.mesh, self.name)
        }
    }
}

/// Decode and validate every document of `sources` (`(origin, bytes)`), Meshes first, then the
/// rest in order.
///
/// # Errors
/// [`CliError::Input`] with every problem of every document; nothing is applied then.
pub fn read_documents(sources: &[(String, Vec<u8>)]) -> Result<Vec<Document>, CliError> {
    let (docs, problems) = check_documents(sources);
    if !problems.is_empty() {
        return Err(CliError::Input(format!(
            "nothing applied:\n{}",
            problems.trim_end()
        )));
    }
    Ok(docs)
}

/// Decode and validate every document of `sources` as [`read_documents`] does: the valid
/// ones (Meshes first), and the problems of the others, one `file#index` paragraph each
/// with every `field: reason` (empty when there are none).
pub fn check_documents(sources: &[(String, Vec<u8>)]) -> (Vec<Document>, String) {
    let mut docs = Vec::new();
    let mut problems = String::new();
    for (origin, bytes) in sources {
        let values = match decode_documents(bytes, Limits::local_file()) {
            Ok(v) => v,
            Err(e) => {
                let _ = writeln!(problems, "{origin}: {e}");
                continue;
            }
        };
        if values.is_empty() {
            let _ = writeln!(problems, "{origin}: no documents");
        }
        for (i, body) in values.into_iter().enumerate() {
            let origin = format!("{origin}#{}", i + 1);
            let kubernetes = k8s::is_k8s(&body);
            let violations = match k8s::decode(body.clone()) {
                Ok(r) => {
                    let mut v = r.validate().violations;
                    if kubernetes {
                        for v in &mut v {
                            v.field = k8s::field_path(r.ty(), &v.field);
                        }
                    }
                    if v.is_empty() {
                        if r.meta.name.is_empty() {
                            let _ = writeln!(problems, "{origin}: name: must be defined");
                        } else if r.ty().is_mesh_scoped() && r.meta.mesh.is_empty() {
                            let _ = writeln!(problems, "{origin}: mesh: must be defined");
                        } else {
                            docs.push(Document {
                                origin,
                                ty: r.ty(),
                                mesh: r.meta.mesh.clone(),
                                name: r.meta.name.clone(),
                                body,
                            });
                        }
                        continue;
                    }
                    v
                }
                Err(e) => e.violations(),
            };
            let (ty, name) = if kubernetes {
                (&body["kind"], &body["metadata"]["name"])
            } else {
                (&body["type"], &body["name"])
            };
            let what = ty
                .as_str()
                .map(|t| format!(" ({t} {})", name.as_str().unwrap_or("?")))
                .unwrap_or_default();
            let _ = writeln!(problems, "{origin}{what} is invalid:");
            for v in violations {
                let field = if v.field.is_empty() {
                    "(document)"
                } else {
                    &v.field
                };
                let _ = writeln!(problems, "  {field}: {}", v.message);
            }
        }
    }
    // Meshes first so that a file listing a Mesh after its policies still applies.
    docs.sort_by_key(|d| d.ty != ResourceType::Mesh);
    (docs, problems)
}

/// What happened to one applied document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It did not exist (201).
    Created,
    /// It replaced an existing one (200).
    Updated,
    /// It was not sent, for the reason given ([`skip_reason`]).
    Skipped(&'static str),
}

/// Why `apply` does not send `doc`, if it does not: Kuma's own admin token (GlobalSecret
/// `admin-user-token`, which a Kuma export carries) would mean nothing to Umbra, which issues
/// its own (`umbractl` reads it from `/global-secrets/admin-user-token`).
pub fn skip_reason(doc: &Document) -> Option<&'static str> {
    (doc.ty == ResourceType::GlobalSecret && doc.name == "admin-user-token").then_some(
        "Kuma's admin user token; Umbra issues its own admin token (GET /global-secrets/admin-user-token), so this one is not stored",
    )
}

/// `GET` one resource, or every page of a list.
///
/// # Errors
/// The API's error ([`CliError`]).
pub async fn get(
    api_url: &str,
    kind: Kind,
    mesh: &str,
    name: Option<&str>,
) -> Result<Value, CliError> {
    let http = client(Duration::from_secs(30))?;
    let base = api_url.trim_end_matches('/');
    let mut path = kind.path(mesh, name);
    if name.is_some() {
        return get_value(&http, &format!("{base}{path}")).await;
    }
    let mut items = Vec::new();
    // Bounded: a list is at most this many pages (of the server's default size, 100 or more).
    for _ in 0..100_000 {
        let page = get_value(&http, &format!("{base}{path}")).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) if !next.is_empty() => {
                path = next.strip_prefix(base).unwrap_or(next).to_owned();
            }
            _ => break,
        }
    }
    Ok(serde_json::json!({ "total": items.len(), "items": items }))
}

async fn get_value(http: &reqwest::Client, url: &str) -> Result<Value, CliError> {
    let request = http.get(url).header("accept", "application/json");
    let (_, text) = send_request(url, request).await?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}")))
}

/// `DELETE` one resource.
///
/// # Errors
/// The API's error ([`CliError`]); a missing resource is [`CliError::NotFound`].
pub async fn delete(api_url: &str, kind: Kind, mesh: &str, name: &str) -> Result<(), CliError> {
    if kind == Kind::Zone {
        return Err(CliError::Input(
            "zones are not deleted through the API; stop the zone CP".into(),
        ));
    }
    let url = format!(
        "{}{}",
        api_url.trim_end_matches('/'),
        kind.path(mesh, Some(name))
    );
    let request = client(Duration::from_secs(30))?.delete(&url);
    send_request(&url, request).await.map(|_| ())
}

/// Render what `get` returned. `single` is true for `get <type> <name>`. `format` applies to
/// `-o yaml|json`; a table is the same in both.
///
/// # Errors
/// [`CliError::Input`] for `--format k8s` of zones or secrets (no Kubernetes form) or of an
/// answer that is not a resource Umbra decodes.
pub fn render(
    kind: Kind,
    value: &Value,
    single: bool,
    output: GetOutput,
    format: Format,
    now: i64,
) -> Result<String, CliError> {
    let items: Vec<&Value> = if single {
        vec![value]
    } else {
        value["items"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    if format == Format::K8s && output != GetOutput::Table {
        let converted = items
            .iter()
            .map(|v| to_k8s(kind, v))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(match output {
            GetOutput::Json if single => pretty(&converted[0]),
            GetOutput::Json => pretty(&serde_json::json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": converted,
            })),
            _ => converted
                .iter()
                .map(encode_yaml)
                .collect::<Vec<_>>()
                .join("---\n"),
        });
    }
    Ok(match output {
        GetOutput::Json => pretty(value),
        GetOutput::Yaml => items
            .iter()
            .map(|v| encode_yaml(v))
            .collect::<Vec<_>>()
            .join("---\n"),
        GetOutput::Table => table(kind, &items, now),
    })
}

/// One API answer item in the Kubernetes form ([`k8s::to_value`]).
fn to_k8s(kind: Kind, item: &Value) -> Result<Value, CliError> {
    let Kind::Resource(ty) = kind else {
        return Err(CliError::Input(
            "zones have no Kubernetes form; use --format universal".into(),
        ));
    };
    let resource = Resource::from_value(item.clone()).map_err(|e| {
        CliError::Input(format!(
            "the answer is not a {} Umbra can convert: {e}",
            ty.name()
        ))
    })?;
    k8s::to_value(&resource).ok_or_else(|| {
        CliError::Input(format!(
            "a {} is a native Kubernetes Secret on Kubernetes and has no kuma.io form; use --format universal",
            ty.name()
        ))
    })
}

fn labels<'a>(v: &'a Value, key: &str) -> &'a str {
    v["labels"][key].as_str().unwrap_or("")
}

fn target_ref(v: &Value) -> String {
    let t = &v["spec"]["targetRef"];
    match (t["kind"].as_str(), t["name"].as_str()) {
        (Some(k), Some(n)) => format!("{k}/{n}"),
        (Some(k), None) => k.to_owned(),
        _ => String::new(),
    }
}

fn effect(v: &Value) -> &'static str {
    if labels(v, "kuma.io/effect") == "shadow" {
        "shadow"
    } else {
        "live"
    }
}

/// Age since an RFC 3339 time, as kubectl prints it (`45s`, `12m`, `3h`, `2d`).
pub fn age(rfc3339: Option<&str>, now: i64) -> String {
    let Some(t) = rfc3339.and_then(|s| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    }) else {
        return "-".into();
    };
    let secs = (now - t.unix_timestamp()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7_200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

fn table(kind: Kind, items: &[&Value], now: i64) -> String {
    let (header, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        Kind::Zone => (
            vec!["NAME", "ONLINE", "STREAMS", "CONNECTED", "LAST SEEN"],
            items
                .iter()
                .map(|z| {
                    vec![
                        z["name"].as_str().unwrap_or("").to_owned(),
                        z["online"].as_bool().unwrap_or(false).to_string(),
                        z["streams"].as_u64().unwrap_or(0).to_string(),
                        age(z["connectTime"].as_str(), now),
                        age(z["lastSeen"].as_str(), now),
                    ]
                })
                .collect(),
        ),
        Kind::Resource(ResourceType::Mesh) => (
            vec!["NAME", "MTLS", "AGE"],
            items
                .iter()
                .map(|m| {
                    vec![
                        m["name"].as_str().unwrap_or("").to_owned(),
                        m["mtls"]["enabledBackend"]
                            .as_str()
                            .unwrap_or("off")
                            .to_owned(),
                        age(m["creationTime"].as_str(), now),
                    ]
                })
                .collect(),
        ),
        Kind::Resource(ResourceType::Dataplane) => (
            vec!["MESH", "NAME", "ZONE", "ADDRESS", "SERVICES", "AGE"],
            items
                .iter()
                .map(|d| {
                    let services: Vec<&str> = d["networking"]["inbound"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|i| i["tags"]["kuma.io/service"].as_str())
                        .collect();
                    vec![
                        d["mesh"].as_str().unwrap_or("").to_owned(),
                        d["name"].as_str().unwrap_or("").to_owned(),
                        labels(d, "kuma.io/zone").to_owned(),
                        d["networking"]["address"].as_str().unwrap_or("").to_owned(),
                        services.join(","),
                        age(d["creationTime"].as_str(), now),
                    ]
                })
                .collect(),
        ),
        Kind::Resource(ResourceType::ZoneEgress) => (
            vec!["NAME", "ZONE", "ADDRESS", "PORT", "AGE"],
            items
                .iter()
                .map(|z| {
                    let net = &z["networking"];
                    vec![
                        z["name"].as_str().unwrap_or("").to_owned(),
                        z["zone"].as_str().unwrap_or("").to_owned(),
                        net["address"].as_str().unwrap_or("").to_owned(),
                        net["port"]
                            .as_u64()
                            .map(|p| p.to_string())
                            .unwrap_or_default(),
                        age(z["creationTime"].as_str(), now),
                    ]
                })
                .collect(),
        ),
        // Policies: new ones show their top-level targetRef.
        Kind::Resource(ty) => {
            let with_target = ty.kind() == TypeKind::NewPolicy;
            let mut header = vec!["MESH", "NAME"];
            if with_target {
                header.push("TARGETREF");
            }
            header.extend(["EFFECT", "AGE"]);
            let rows = items
                .iter()
                .map(|p| {
                    let mut row = vec![
                        p["mesh"].as_str().unwrap_or("").to_owned(),
                        p["name"].as_str().unwrap_or("").to_owned(),
                    ];
                    if with_target {
                        row.push(target_ref(p));
                    }
                    row.push(effect(p).to_owned());
                    row.push(age(p["creationTime"].as_str(), now));
                    row
                })
                .collect();
            (header, rows)
        }
    };
    if rows.is_empty() {
        return format!("No {} found.", kind.label());
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}   ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.clone());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

/// The bytes of `file` (`-`: standard input), with its name for error messages; at most one
/// byte over the local-file limit is read, enough to report it as too large.
///
/// # Errors
/// [`CliError::Input`] when it cannot be read.
pub fn read_source(file: &str) -> Result<(String, Vec<u8>), CliError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let read = if file == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(file).and_then(|f| {
            // One byte over the codec's limit is enough to report it as too large.
            f.take(umbra_core::codec::Limits::local_file().max_bytes as u64 + 1)
                .read_to_end(&mut bytes)
                .map(|_| ())
        })
    };
    read.map_err(|e| CliError::Input(format!("{file}: {e}")))?;
    Ok((file.to_owned(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_type_names_as_kuma_spells_them() {
        for s in [
            "MeshTimeout",
            "meshtimeout",
            "meshtimeouts",
            "mesh-timeouts",
        ] {
            assert_eq!(
                Kind::parse(s).unwrap(),
                Kind::Resource(ResourceType::MeshTimeout)
            );
        }
        for s in ["circuit-breakers", "circuitbreaker", "CircuitBreaker"] {
            assert_eq!(
                Kind::parse(s).unwrap(),
                Kind::Resource(ResourceType::CircuitBreaker)
            );
        }
        assert_eq!(
            Kind::parse("meshes").unwrap(),
            Kind::Resource(ResourceType::Mesh)
        );
        assert_eq!(
            Kind::parse("mesh").unwrap(),
            Kind::Resource(ResourceType::Mesh)
        );
        assert_eq!(
            Kind::parse("meshproxypatch").unwrap(),
            Kind::Resource(ResourceType::MeshProxyPatch)
        );
        assert_eq!(Kind::parse("zones").unwrap(), Kind::Zone);
        let err = Kind::parse("widgets").unwrap_err().to_string();
        assert!(
            err.contains("widgets") && err.contains("meshtimeouts"),
            "{err}"
        );
    }

    #[test]
    fn every_invalid_document_is_reported_and_nothing_is_returned() {
        let good = b"type: Mesh\nname: default\n".to_vec();
        let bad = b"type: MeshTimeout\nmesh: default\nname: t\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: soon}\n---\ntype: Widget\nname: w\n---\ntype: Timeout\nname: no-mesh\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 1s}\n".to_vec();
        let err = read_documents(&[("good.yaml".into(), good), ("bad.yaml".into(), bad)])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("nothing applied"), "{err}");
        assert!(
            err.contains("bad.yaml#1 (MeshTimeout t) is invalid")
                && err.contains("spec.to[0].default.idleTimeout"),
            "{err}"
        );
        assert!(
            err.contains("bad.yaml#2") && err.contains("Widget"),
            "{err}"
        );
        assert!(
            err.contains("bad.yaml#3") && err.contains("mesh: must not be empty"),
            "{err}"
        );
        assert!(!err.contains("good.yaml"), "{err}");
    }

    #[test]
    fn meshes_go_first_and_documents_keep_their_order() {
        let src = b"type: MeshTimeout\nmesh: m\nname: b\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 1s}\n---\ntype: MeshTimeout\nmesh: m\nname: a\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 1s}\n---\ntype: Mesh\nname: m\n".to_vec();
        let docs = read_documents(&[("-".into(), src)]).unwrap();
        let order: Vec<String> = docs.iter().map(Document::describe).collect();
        assert_eq!(order, ["Mesh m", "MeshTimeout m/b", "MeshTimeout m/a"]);
        assert_eq!(docs[1].path(), "/meshes/m/meshtimeouts/b");
        assert_eq!(docs[0].path(), "/meshes/m");
        assert_eq!(docs[1].origin, "-#1");
    }

    #[test]
    fn tables_show_the_columns_an_operator_reads() {
        let now = 1_000_000;
        let created = time::OffsetDateTime::from_unix_timestamp(now - 90)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let list = json!({"items": [
            {"type": "MeshTimeout", "mesh": "default", "name": "timeout-global",
             "labels": {"kuma.io/effect": "shadow"}, "creationTime": created,
             "spec": {"targetRef": {"kind": "Mesh"}}},
            {"type": "MeshTimeout", "mesh": "default", "name": "backend",
             "spec": {"targetRef": {"kind": "MeshService", "name": "backend"}}}
        ]});
        let out = render(
            Kind::Resource(ResourceType::MeshTimeout),
            &list,
            false,
            GetOutput::Table,
            Format::Universal,
            now,
        )
        .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["MESH", "NAME", "TARGETREF", "EFFECT", "AGE"]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["default", "timeout-global", "Mesh", "shadow", "90s"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["default", "backend", "MeshService/backend", "live", "-"]
        );
        // Columns line up.
        assert_eq!(lines[1].find("Mesh"), lines[2].find("MeshService"));
        let empty = render(
            Kind::Zone,
            &json!({"items": []}),
            false,
            GetOutput::Table,
            Format::Universal,
            now,
        )
        .unwrap();
        assert_eq!(empty, "No Zone found.");
        let egresses = json!({"items": [{"type": "ZoneEgress", "name": "ze-1abc", "zone": "zone-1",
            "networking": {"address": "10.0.0.1", "port": 10002}}]});
        let out = render(
            Kind::parse("zoneegresses").unwrap(),
            &egresses,
            false,
            GetOutput::Table,
            Format::Universal,
            now,
        )
        .unwrap();
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["NAME", "ZONE", "ADDRESS", "PORT", "AGE"]);
        assert_eq!(lines[1], ["ze-1abc", "zone-1", "10.0.0.1", "10002", "-"]);
        assert_eq!(
            Kind::parse("zoneegress").unwrap().path("", Some("ze")),
            "/zoneegresses/ze"
        );
        let yaml = render(
            Kind::Resource(ResourceType::MeshTimeout),
            &list,
            false,
            GetOutput::Yaml,
            Format::Universal,
            now,
        )
        .unwrap();
        let back = decode_documents(yaml.as_bytes(), Limits::default()).unwrap();
        assert_eq!(back, list["items"].as_array().unwrap().clone());
    }

    #[test]
    fn the_kubernetes_form_is_printed_for_resources_only() {
        let spec = json!({"targetRef": {"kind": "Mesh"},
                          "to": [{"targetRef": {"kind": "Mesh"}, "default": {"idleTimeout": "1s"}}]});
        let list = json!({"items": [
            {"type": "MeshTimeout", "mesh": "demo", "name": "t", "creationTime": "2024-01-01T00:00:00Z",
             "labels": {"kuma.io/effect": "shadow"}, "spec": spec.clone()}
        ]});
        let kind = Kind::Resource(ResourceType::MeshTimeout);
        let yaml = render(kind, &list, false, GetOutput::Yaml, Format::K8s, 0).unwrap();
        let back = decode_documents(yaml.as_bytes(), Limits::default()).unwrap();
        assert_eq!(
            back,
            [
                json!({"apiVersion": "kuma.io/v1alpha1", "kind": "MeshTimeout",
                    "metadata": {"name": "t", "namespace": "kuma-system",
                                 "labels": {"kuma.io/effect": "shadow", "kuma.io/mesh": "demo"}},
                    "spec": spec})
            ]
        );
        let one = render(
            kind,
            &list["items"][0],
            true,
            GetOutput::Json,
            Format::K8s,
            0,
        )
        .unwrap();
        let one: Value = serde_json::from_str(&one).unwrap();
        assert_eq!(one, back[0]);
        let all = render(kind, &list, false, GetOutput::Json, Format::K8s, 0).unwrap();
        let all: Value = serde_json::from_str(&all).unwrap();
        assert_eq!(
            (all["kind"].as_str(), &all["items"][0]),
            (Some("List"), &back[0])
        );
        // A k8s document reads back as the same resource.
        let docs = read_documents(&[("-".into(), yaml.into_bytes())]).unwrap();
        assert_eq!(
            (docs[0].mesh.as_str(), docs[0].name.as_str()),
            ("demo", "t")
        );
        // Zones and secrets have no Kubernetes form.
        assert!(render(
            Kind::Zone,
            &json!({"items": [{"name": "z"}]}),
            false,
            GetOutput::Yaml,
            Format::K8s,
            0
        )
        .is_err());
        let secret = json!({"type": "Secret", "mesh": "m", "name": "s", "data": "YQ=="});
        assert!(render(
            Kind::Resource(ResourceType::Secret),
            &secret,
            true,
            GetOutput::Yaml,
            Format::K8s,
            0
        )
        .is_err());
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = 10_000_000;
        let at = |s: i64| {
            time::OffsetDateTime::from_unix_timestamp(now - s)
                .unwrap()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap()
        };
        assert_eq!(age(Some(&at(5)), now), "5s");
        assert_eq!(age(Some(&at(600)), now), "10m");
        assert_eq!(age(Some(&at(3 * 3600)), now), "3h");
        assert_eq!(age(Some(&at(5 * 86_400)), now), "5d");
        assert_eq!(age(Some("yesterday"), now), "-");
        assert_eq!(age(None, now), "-");
    }
}
