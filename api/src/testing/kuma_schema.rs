//! Kuma 2.7.29's published API schemas as a test oracle (feature `testing`): an answer of
//! Umbra's API validated against the schema Kuma documents for it.
//!
//! The schemas are read from the shared conformance fixtures (`openapi/api.yaml`,
//! `openapi/common/*.yaml` and `openapi/policies/<p>/{rest,schema}.yaml`), found at
//! `UMBRA_CONFORMANCE_DIR`, else at `../shared/conformance/kuma-v2.7.29` next to the workspace
//! root. A named schema is looked up in the `components.schemas` of `api.yaml`, then of the
//! `common/` files, then of every policy's `rest.yaml`; failing that, as a response of those
//! files (`components.responses.<name>`, its `application/json` schema: the policy lists,
//! `MeshTimeoutList`, are only published that way).
//!
//! OpenAPI 3.0 is turned into plain JSON Schema (draft 4) before compiling: every `$ref`
//! (`#/components/schemas/X`, `./common/f.yaml#/components/schemas/X`, `schema.yaml`) is
//! inlined; `nullable: true` adds `null` to the `type` (and to an `enum`); `example` and the
//! `x-*` extensions are dropped. Nothing is made stricter than Kuma publishes it: there is no
//! `additionalProperties: false` unless the file says so. Format validation is off.
//!
//! The same conversion serves any other OpenAPI 3.0 document, such as a CP's own
//! `/openapi.yaml` ([`OpenApiDoc`]: the response schema documented for a path template, its
//! local `#/components/...` refs inlined), and [`compile`] / [`check`] validate a value
//! against such a schema.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};

/// The fixtures directory: `UMBRA_CONFORMANCE_DIR`, else `../shared/conformance/kuma-v2.7.29`
/// relative to the workspace root.
pub fn conformance_dir() -> PathBuf {
    std::env::var_os("UMBRA_CONFORMANCE_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/kuma-v2.7.29"),
        PathBuf::from,
    )
}

/// Every violation of `value` against Kuma's schema `schema_name`, one `"<instance path>:
/// <message>"` line each (the path is a JSON pointer, `""` for the root), sorted. Empty when
/// the value validates.
///
/// # Panics
/// When the fixtures cannot be read, `schema_name` is not published, or the schema does not
/// compile (a test failure: the oracle is missing).
pub fn violations(schema_name: &str, value: &Value) -> Vec<String> {
    check(validator(schema_name), value)
}

/// `schema` (plain JSON Schema, as [`schema`] or [`OpenApiDoc::response_schema`] give it)
/// compiled as draft 4 without format validation.
///
/// # Errors
/// The compiler's message when the schema is not valid JSON Schema.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(false)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Every violation of `value` against `validator`, one `"<instance path>: <message>"` line
/// each, sorted (as [`violations`]).
pub fn check(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    let mut found: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{:?}: {e}", e.instance_path().as_str()))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// An OpenAPI 3.0 document of its own (a CP's `/openapi.yaml`), read with the same
/// conversion as Kuma's files; its `$ref`s are local (`#/components/...`).
pub struct OpenApiDoc {
    files: Files,
}

/// The key the one document of an [`OpenApiDoc`] is kept under.
const OWN_DOC: &str = "openapi.yaml";

impl OpenApiDoc {
    /// The document `doc` (parsed YAML or JSON).
    pub fn new(doc: Value) -> Self {
        OpenApiDoc {
            files: Files {
                docs: [(OWN_DOC.to_owned(), doc)].into(),
                lookup: vec![OWN_DOC.to_owned()],
            },
        }
    }

    /// The path templates the document describes (`/meshes/{mesh}`, ...), in its order.
    pub fn paths(&self) -> Vec<String> {
        self.files.docs[OWN_DOC]
            .get("paths")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The `application/json` schema of the `status` answer to `method` on path `template`,
    /// as plain JSON Schema; `None` when the document gives none (no such path, method or
    /// response, or a response without a JSON body).
    ///
    /// # Panics
    /// When a `$ref` of the document does not resolve, or a schema refers to itself.
    pub fn response_schema(&self, template: &str, method: &str, status: &str) -> Option<Value> {
        let doc = &self.files.docs[OWN_DOC];
        let escaped = template.replace('~', "~0").replace('/', "~1");
        let response = doc.pointer(&format!("/paths/{escaped}/{method}/responses/{status}"))?;
        let response = self.files.deref(response, OWN_DOC);
        let schema = response.pointer("/content/application~1json/schema")?;
        let mut stack = Vec::new();
        Some(self.files.inline(schema, OWN_DOC, &mut stack))
    }
}

/// Assert that `value` validates against Kuma's schema `schema_name` (`InspectRules`,
/// `InspectDataplanesForPolicy`, `Error`, `MeshTimeoutList`, …).
///
/// # Panics
/// When it does not: the message lists every violation with its path, then the value. Also as
/// [`violations`].
pub fn assert_valid(schema_name: &str, value: &Value) {
    let found = violations(schema_name, value);
    assert!(
        found.is_empty(),
        "answer does not validate against Kuma's {schema_name}:\n  {}\nanswer: {}",
        found.join("\n  "),
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// The inlined (plain JSON Schema) form of `schema_name`, as compiled by [`violations`].
///
/// # Panics
/// As [`violations`].
pub fn schema(schema_name: &str) -> Value {
    files().resolve_named(schema_name)
}

fn validator(schema_name: &str) -> &'static jsonschema::Validator {
    static CACHE: OnceLock<Mutex<BTreeMap<String, &'static jsonschema::Validator>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(v) = cache.get(schema_name) {
        return v;
    }
    let inlined = schema(schema_name);
    let compiled = compile(&inlined)
        .unwrap_or_else(|e| panic!("Kuma schema {schema_name} does not compile: {e}"));
    let leaked: &'static jsonschema::Validator = Box::leak(Box::new(compiled));
    cache.insert(schema_name.to_owned(), leaked);
    leaked
}

/// The parsed fixture files, keyed by their path relative to `openapi/`, and the order in
/// which named schemas are looked up.
struct Files {
    docs: BTreeMap<String, Value>,
    lookup: Vec<String>,
}

fn files() -> &'static Files {
    static CELL: OnceLock<Files> = OnceLock::new();
    CELL.get_or_init(load)
}

fn load() -> Files {
    let root = conformance_dir().join("openapi");
    assert!(
        root.is_dir(),
        "Kuma's API schemas not found at {} (set UMBRA_CONFORMANCE_DIR)",
        root.display()
    );
    let mut docs = BTreeMap::new();
    let mut lookup = vec!["api.yaml".to_owned()];
    let mut common = list_dir(&root.join("common"), "common/", ".yaml");
    common.sort();
    lookup.extend(common.iter().cloned());
    let mut policies = Vec::new();
    for dir in list_dir(&root.join("policies"), "policies/", "") {
        policies.push(format!("{dir}/rest.yaml"));
        docs.insert(format!("{dir}/schema.yaml"), Value::Null);
    }
    policies.sort();
    lookup.extend(policies.iter().cloned());
    for rel in &lookup {
        docs.insert(rel.clone(), Value::Null);
    }
    for (rel, doc) in &mut docs {
        let path = root.join(rel);
        let Ok(bytes) = std::fs::read(&path) else {
            continue; // a policy without schema.yaml: its refs would fail loudly
        };
        let limits = umbra_core::codec::Limits {
            max_bytes: 16 << 20,
            ..umbra_core::codec::Limits::default()
        };
        *doc = umbra_core::codec::decode_one(&bytes, limits)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    }
    Files { docs, lookup }
}

/// The entries of `dir` whose name ends with `suffix`, as `prefix + name`.
fn list_dir(dir: &Path, prefix: &str, suffix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(suffix))
        .map(|n| format!("{prefix}{n}"))
        .collect()
}

impl Files {
    /// `value`, or what its `$ref` (in file `rel`, local or not) points at, followed until it
    /// is not a `$ref`.
    fn deref<'a>(&'a self, mut value: &'a Value, rel: &str) -> &'a Value {
        let mut rel = rel.to_owned();
        for _ in 0..16 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
            if !file.is_empty() {
                rel = join(&rel, file);
            }
            value = self
                .docs
                .get(&rel)
                .and_then(|d| d.pointer(pointer))
                .unwrap_or_else(|| panic!("{rel}: unresolved $ref {reference}"));
        }
        panic!("{rel}: $ref chain too long")
    }

    fn resolve_named(&self, name: &str) -> Value {
        for rel in &self.lookup {
            let pointers = [
                format!("/components/schemas/{name}"),
                format!("/components/responses/{name}/content/application~1json/schema"),
            ];
            for pointer in pointers {
                if let Some(found) = self.docs[rel].pointer(&pointer) {
                    let mut stack = vec![format!("{rel}#{pointer}")];
                    return self.inline(found, rel, &mut stack);
                }
            }
        }
        panic!("Kuma publishes no schema named {name}")
    }

    /// `schema` (read from file `rel`) as plain JSON Schema with every `$ref` inlined.
    /// `stack` holds the refs being expanded, to report a recursive schema instead of looping.
    fn inline(&self, schema: &Value, rel: &str, stack: &mut Vec<String>) -> Value {
        let Value::Object(map) = schema else {
            return schema.clone();
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
            let target_rel = if file.is_empty() {
                rel.to_owned()
            } else {
                join(rel, file)
            };
            let key = format!("{target_rel}#{pointer}");
            assert!(
                !stack.contains(&key),
                "recursive Kuma schema: {}",
                stack.join(" -> ")
            );
            let doc = self
                .docs
                .get(&target_rel)
                .unwrap_or_else(|| panic!("{rel}: $ref to unknown file {target_rel}"));
            let target = doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{rel}: unresolved $ref {reference}"));
            stack.push(key);
            let out = self.inline(target, &target_rel, stack);
            stack.pop();
            return out;
        }
        let mut out = Map::new();
        for (k, v) in map {
            if k.starts_with("x-") || k == "example" || k == "nullable" {
                continue;
            }
            let v = match k.as_str() {
                "properties" | "patternProperties" | "definitions" => match v {
                    Value::Object(children) => Value::Object(
                        children
                            .iter()
                            .map(|(name, s)| (name.clone(), self.inline(s, rel, stack)))
                            .collect(),
                    ),
                    other => other.clone(),
                },
                "items" | "additionalProperties" | "not" => match v {
                    Value::Array(list) => {
                        Value::Array(list.iter().map(|s| self.inline(s, rel, stack)).collect())
                    }
                    other => self.inline(other, rel, stack),
                },
                "allOf" | "anyOf" | "oneOf" => match v {
                    Value::Array(list) => {
                        Value::Array(list.iter().map(|s| self.inline(s, rel, stack)).collect())
                    }
                    other => other.clone(),
                },
                _ => v.clone(),
            };
            out.insert(k.clone(), v);
        }
        if map.get("nullable") == Some(&Value::Bool(true)) {
            if let Some(Value::String(ty)) = out.get("type") {
                let ty = Value::Array(vec![Value::String(ty.clone()), "null".into()]);
                out.insert("type".into(), ty);
            }
            if let Some(Value::Array(choices)) = out.get_mut("enum") {
                choices.push(Value::Null);
            }
        }
        Value::Object(out)
    }
}

/// `file` (a relative `$ref` target) resolved against the directory of `rel`, normalised
/// (`./` and `..` removed).
fn join(rel: &str, file: &str) -> String {
    let base = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut parts: Vec<String> = Vec::new();
    for c in base.join(file).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inspect_rules_compiles_and_reports_every_violation_with_its_path() {
        let ok = json!({
            "resource": {"type": "Dataplane", "mesh": "default", "name": "web-1"},
            "rules": [{"type": "MeshTimeout", "warnings": [],
                "proxyRule": {"conf": {}, "origin": []},
                "fromRules": [{"inbound": {"tags": {"a": "b"}, "port": 80, "address": "1.1.1.1"},
                    "rules": []}]}],
            "httpMatches": [{"hash": "abc", "match": {"path": {"type": "Exact"}}}],
            "diff": [],
        });
        assert_valid("InspectRules", &ok);
        let bad = json!({
            "resource": {"type": "Dataplane", "mesh": "default"},
            "rules": [{"type": "MeshTimeout", "proxyRules": [],
                "fromRules": [{"inbound": {"address": "1.1.1.1", "port": 80}, "rules": []}]}],
            "httpMatches": [{"hash": "abc", "match": [{}]}],
        });
        let found = violations("InspectRules", &bad);
        assert!(
            found.iter().any(|v| v.starts_with("\"/resource\"")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| v.starts_with("\"/rules/0/fromRules/0/inbound\"")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| v.starts_with("\"/httpMatches/0/match\"")),
            "{found:?}"
        );
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn cross_file_refs_and_policy_lists_resolve() {
        // api.yaml -> ./common/resource.yaml#/components/schemas/Meta
        let s = schema("InspectDataplanesForPolicy");
        assert_eq!(
            s["properties"]["items"]["items"]["required"],
            json!(["type", "mesh", "name"])
        );
        // rest.yaml response -> #/components/schemas/MeshTimeoutItem -> schema.yaml (whole file)
        let list = json!({"total": 1, "items": [{"type": "MeshTimeout", "mesh": "default",
            "name": "t", "spec": {"targetRef": {"kind": "Mesh"}}}]});
        assert_valid("MeshTimeoutList", &list);
        assert!(!violations("MeshTimeoutList", &json!({"items": [{"type": "Nope"}]})).is_empty());
        assert!(!violations("Error", &json!({"title": 1})).is_empty());
        assert_eq!(
            join("policies/meshtimeout/rest.yaml", "schema.yaml"),
            "policies/meshtimeout/schema.yaml"
        );
        assert_eq!(
            join("api.yaml", "./common/resource.yaml"),
            "common/resource.yaml"
        );
    }

    #[test]
    fn an_own_document_resolves_local_refs_of_responses_and_schemas() {
        let doc = json!({"openapi": "3.0.3", "paths": {
            "/things/{name}": {"get": {"responses": {
                "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
                "404": {"$ref": "#/components/responses/Error"}}}},
            "/empty": {"get": {"responses": {"200": {"description": "no body"}}}}},
            "components": {
                "schemas": {"Thing": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "note": {"type": "string", "nullable": true}}}},
                "responses": {"Error": {"content": {"application/json": {"schema": {
                    "type": "object", "required": ["title"]}}}}}}});
        let own = OpenApiDoc::new(doc);
        assert_eq!(own.paths(), ["/things/{name}", "/empty"]);
        let thing = compile(&own.response_schema("/things/{name}", "get", "200").unwrap()).unwrap();
        assert!(check(&thing, &json!({"name": "a", "note": null})).is_empty());
        assert_eq!(check(&thing, &json!({"note": 1})).len(), 2);
        let error = own.response_schema("/things/{name}", "get", "404").unwrap();
        assert_eq!(error["required"], json!(["title"]));
        assert!(own.response_schema("/empty", "get", "200").is_none());
        assert!(own.response_schema("/nope", "get", "200").is_none());
    }
}
