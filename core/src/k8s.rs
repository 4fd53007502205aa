//! Kuma's Kubernetes resource form, read and written next to the universal one, so that
//! policies written for a Kubernetes zone can be applied (and reviewed in shadow) on Umbra.
//!
//! A Kubernetes document is
//!
//! ```yaml
//! apiVersion: kuma.io/v1alpha1
//! kind: MeshTimeout                 # Kuma's type name
//! mesh: default                     # legacy CRDs only (old policies, Dataplane, ExternalService...)
//! metadata:
//!   name: timeout-global
//!   namespace: kuma-system          # accepted and ignored: the name is kept as is
//!   labels:
//!     kuma.io/mesh: default         # the mesh of a targetRef policy
//!     kuma.io/effect: shadow
//! spec: { ... }                     # the universal body: a policy's `spec`, or the fields a
//!                                   # universal Mesh/Dataplane/old policy has at the top level
//! ```
//!
//! Reading ([`from_value`], [`decode`]): the mesh is the `kuma.io/mesh` label or the legacy
//! top-level `mesh` (they must agree), `default` when neither is set, as Kuma defaults it; the
//! `kuma.io/mesh` label itself is not kept among the resource's labels (the mesh carries it).
//! Kubernetes object metadata a `kubectl get -o yaml` adds (`uid`, `resourceVersion`,
//! `annotations`, ...) is accepted and ignored; anything else unknown is an error. Secrets are
//! native Kubernetes Secrets on Kubernetes, not `kuma.io` objects, so `Secret` and
//! `GlobalSecret` have no Kubernetes form here. Every error names its path in the Kubernetes
//! document (`metadata.name`, `spec.to[0].default.idleTimeout`); [`field_path`] maps the
//! universal paths [`Resource::validate`] reports to the same form.
//!
//! Writing ([`to_value`]) gives back the same shape: targetRef policies in namespace
//! `kuma-system` with the `kuma.io/mesh` label, legacy mesh-scoped kinds with the top-level
//! `mesh` their CRDs have, Mesh and the legacy kinds cluster-scoped (no namespace), ZoneIngress
//! in `kuma-system`, and Dataplanes without a namespace (Umbra does not know their workload's).
//! Times are not written, so `to_value(from_value(d)) == d` for a document in that shape.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::codec::{self, Limits};
use crate::resource::{
    decode_spec, from_value_at, DecodeError, Meta, Resource, ResourceType, TypeKind,
};
use crate::validate::{PathBuilder, ValidationError};

/// The `apiVersion` of Kuma's resources on Kubernetes.
pub const API_VERSION: &str = "kuma.io/v1alpha1";
/// The label naming a Kubernetes resource's mesh.
pub const MESH_LABEL: &str = "kuma.io/mesh";
/// The namespace Kuma's control plane (and its policies) live in.
pub const SYSTEM_NAMESPACE: &str = "kuma-system";
/// The mesh of a resource that names none (Kuma's default).
pub const DEFAULT_MESH: &str = "default";

/// Object metadata fields Kubernetes sets or tools export, accepted and ignored.
const IGNORED_METADATA: &[&str] = &[
    "namespace",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "generateName",
    "selfLink",
];

fn invalid(field: impl Into<String>, message: impl Into<String>) -> DecodeError {
    let mut e = ValidationError::new();
    e.violation_field(field, message);
    DecodeError::Invalid(e)
}

/// `true` when `value` is written in the Kubernetes form (a mapping with `apiVersion` or
/// `kind`); a universal document has `type` instead.
pub fn is_k8s(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|o| o.contains_key("apiVersion") || o.contains_key("kind"))
}

/// `true` when the Kubernetes CRD of `ty` has a top-level `mesh` field (Kuma's legacy kinds:
/// old policies, Dataplane, ExternalService, MeshGateway, MeshGatewayRoute, VirtualOutbound).
fn has_mesh_field(ty: ResourceType) -> bool {
    ty.is_mesh_scoped() && ty.kind() != TypeKind::NewPolicy
}

/// `true` when `ty` has a Kubernetes form (every type but the secrets).
fn has_k8s_form(ty: ResourceType) -> bool {
    !matches!(ty, ResourceType::Secret | ResourceType::GlobalSecret)
}

/// Decode a document in either form: [`from_value`] for the Kubernetes form ([`is_k8s`]),
/// [`Resource::from_value`] for the universal one.
///
/// # Errors
/// [`DecodeError::Invalid`] with the failing field path, in the document's own form.
pub fn decode(value: Value) -> Result<Resource, DecodeError> {
    if is_k8s(&value) {
        from_value(value)
    } else {
        Resource::from_value(value)
    }
}

/// Decode every document of a multi-document YAML (or JSON) text, each in either form; the
/// first bad document stops decoding and its error names the document index (`[2].spec...`)
/// when there are several.
///
/// # Errors
/// [`DecodeError`].
pub fn decode_all(bytes: &[u8], limits: Limits) -> Result<Vec<Resource>, DecodeError> {
    let docs = codec::decode_documents(bytes, limits)?;
    let many = docs.len() > 1;
    docs.into_iter()
        .enumerate()
        .map(|(i, d)| {
            decode(d).map_err(|e| match e {
                DecodeError::Invalid(v) if many => {
                    let mut out = ValidationError::new();
                    out.add_at(&PathBuilder::root().index(i), v);
                    DecodeError::Invalid(out)
                }
                other => other,
            })
        })
        .collect()
}

/// Decode a Kubernetes-form document (see the module docs for the shape).
///
/// # Errors
/// [`DecodeError::Invalid`] naming the path: `apiVersion` (not `kuma.io/v1alpha1`), `kind`
/// (missing, unknown, or a secret), `metadata` / `metadata.name` (missing or not a string),
/// `metadata.labels` (not a string map), `mesh` (mesh and label disagree, or a mesh on a type
/// that belongs to none), an unknown top-level or metadata field, and spec decoding errors
/// under `spec`.
pub fn from_value(value: Value) -> Result<Resource, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(invalid("", "resource must be a mapping"));
    };
    match obj.remove("apiVersion") {
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(Value::String(v)) => {
            return Err(invalid(
                "apiVersion",
                format!("must be {API_VERSION:?}, got {v:?}"),
            ))
        }
        Some(_) => return Err(invalid("apiVersion", "must be a string")),
        None => return Err(invalid("apiVersion", "must be defined")),
    }
    let kind = match obj.remove("kind") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid("kind", "must be a string")),
        None => return Err(invalid("kind", "must be defined")),
    };
    let ty = ResourceType::from_name(&kind)
        .ok_or_else(|| invalid("kind", format!("unknown resource kind {kind:?}")))?;
    if !has_k8s_form(ty) {
        return Err(invalid(
            "kind",
            format!("{kind} is a native Kubernetes Secret on Kubernetes; write it in the universal form (type: {kind})"),
        ));
    }
    let mut metadata = match obj.remove("metadata") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err(invalid("metadata", "must be a mapping")),
        None => return Err(invalid("metadata", "must be defined")),
    };
    let name = match metadata.remove("name") {
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(invalid("metadata.name", "must be defined"))
        }
        Some(_) => return Err(invalid("metadata.name", "must be a string")),
    };
    let mut labels: BTreeMap<String, String> = match metadata.remove("labels") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => from_value_at(&PathBuilder::rooted_at("metadata.labels"), v)?,
    };
    if let Some(k) = metadata
        .keys()
        .find(|k| !IGNORED_METADATA.contains(&k.as_str()))
    {
        return Err(invalid(format!("metadata.{k}"), "unknown field"));
    }
    let label_path = PathBuilder::rooted_at("metadata.labels").key(MESH_LABEL);
    let label_mesh = labels.remove(MESH_LABEL);
    let field_mesh = match obj.remove("mesh") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(invalid("mesh", "must be a string")),
    };
    let mesh = if ty.is_mesh_scoped() {
        match (label_mesh, field_mesh) {
            (Some(l), Some(f)) if l != f => {
                return Err(invalid(
                    label_path.to_string(),
                    format!("must match mesh {f:?}, got {l:?}"),
                ))
            }
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => DEFAULT_MESH.to_owned(),
        }
    } else {
        if label_mesh.is_some() {
            return Err(invalid(
                label_path.to_string(),
                format!("must not be set: a {kind} belongs to no mesh"),
            ));
        }
        if field_mesh.is_some() {
            return Err(invalid(
                "mesh",
                format!("must not be set: a {kind} belongs to no mesh"),
            ));
        }
        String::new()
    };
    let spec = obj.remove("spec").unwrap_or(Value::Object(Map::new()));
    if let Some(k) = obj.keys().next() {
        return Err(invalid(k.clone(), "unknown field"));
    }
    let spec = decode_spec(ty, &PathBuilder::rooted_at("spec"), spec)?;
    Ok(Resource {
        meta: Meta {
            mesh,
            name,
            labels,
            creation_time: None,
            modification_time: None,
        },
        spec,
    })
}

/// `r` in the Kubernetes form (see the module docs), or `None` for a Secret or GlobalSecret,
/// which Kubernetes stores as native Secrets.
pub fn to_value(r: &Resource) -> Option<Value> {
    let ty = r.ty();
    if !has_k8s_form(ty) {
        return None;
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    out.insert("kind".into(), Value::String(ty.name().into()));
    if has_mesh_field(ty) {
        out.insert("mesh".into(), Value::String(r.meta.mesh.clone()));
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(r.meta.name.clone()));
    if ty.kind() == TypeKind::NewPolicy || ty == ResourceType::ZoneIngress {
        metadata.insert("namespace".into(), Value::String(SYSTEM_NAMESPACE.into()));
    }
    let mut labels: Map<String, Value> = r
        .meta
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if ty.kind() == TypeKind::NewPolicy {
        labels.insert(MESH_LABEL.into(), Value::String(r.meta.mesh.clone()));
    }
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    out.insert("metadata".into(), Value::Object(metadata));
    out.insert("spec".into(), r.spec_value());
    Some(Value::Object(out))
}

/// The Kubernetes-form path of a violation [`Resource::validate`] reports for a `ty` in the
/// universal form: `name` → `metadata.name`, `labels[..]` → `metadata.labels[..]`, `mesh` →
/// the `kuma.io/mesh` label (or the legacy `mesh` field), `type` → `kind`, and a spec field of a
/// Mesh, Dataplane or old policy (at the universal top level) → under `spec`.
pub fn field_path(ty: ResourceType, field: &str) -> String {
    match field {
        "name" => return "metadata.name".into(),
        "type" => return "kind".into(),
        "mesh" if !has_mesh_field(ty) => {
            return PathBuilder::rooted_at("metadata.labels")
                .key(MESH_LABEL)
                .to_string()
        }
        "mesh" => return "mesh".into(),
        _ => {}
    }
    if field == "labels" || field.starts_with("labels[") || field.starts_with("labels.") {
        return format!("metadata.{field}");
    }
    if ty.kind() == TypeKind::NewPolicy {
        return field.to_owned();
    }
    if field.is_empty() {
        "spec".into()
    } else if field.starts_with('[') {
        format!("spec{field}")
    } else {
        format!("spec.{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(s: &str) -> Value {
        codec::decode_one(s.as_bytes(), Limits::default()).unwrap()
    }

    const TIMEOUT: &str = r#"
apiVersion: kuma.io/v1alpha1
kind: MeshTimeout
metadata:
  name: timeout-global
  namespace: kuma-system
  labels:
    kuma.io/mesh: demo
    kuma.io/effect: shadow
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: Mesh}
    default: {idleTimeout: 20s}
"#;

    #[test]
    fn a_target_ref_policy_reads_its_mesh_from_the_label_and_round_trips() {
        let doc = yaml(TIMEOUT);
        let r = decode(doc.clone()).unwrap();
        assert_eq!(r.ty(), ResourceType::MeshTimeout);
        assert_eq!(r.meta.mesh, "demo");
        assert_eq!(r.meta.name, "timeout-global");
        assert!(r.meta.is_shadow());
        assert!(!r.meta.labels.contains_key(MESH_LABEL));
        assert!(!r.validate().has_violations());
        // Same resource as the universal form.
        let universal = Resource::from_value(json!({
            "type": "MeshTimeout", "mesh": "demo", "name": "timeout-global",
            "labels": {"kuma.io/effect": "shadow"},
            "spec": doc["spec"].clone(),
        }))
        .unwrap();
        assert_eq!(r, universal);
        assert_eq!(to_value(&r).unwrap(), doc);
    }

    #[test]
    fn mesh_defaults_to_default_and_legacy_kinds_use_the_mesh_field() {
        let r = decode(yaml(
            "apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t}\nspec:\n  targetRef: {kind: Mesh}\n",
        ))
        .unwrap();
        assert_eq!(r.meta.mesh, DEFAULT_MESH);

        let tp = yaml(
            "apiVersion: kuma.io/v1alpha1\nkind: TrafficPermission\nmesh: demo\nmetadata: {name: allow}\nspec:\n  sources: [{match: {kuma.io/service: '*'}}]\n  destinations: [{match: {kuma.io/service: '*'}}]\n",
        );
        let r = decode(tp.clone()).unwrap();
        assert_eq!(
            (r.ty(), r.meta.mesh.as_str()),
            (ResourceType::TrafficPermission, "demo")
        );
        assert!(!r.validate().has_violations(), "{}", r.validate());
        assert_eq!(to_value(&r).unwrap(), tp);

        let dp = yaml(
            "apiVersion: kuma.io/v1alpha1\nkind: Dataplane\nmesh: demo\nmetadata: {name: web-1}\nspec:\n  networking:\n    address: 10.0.0.1\n    inbound: [{port: 80, tags: {kuma.io/service: web}}]\n",
        );
        let r = decode(dp.clone()).unwrap();
        assert_eq!(r.as_dataplane().unwrap().networking.address, "10.0.0.1");
        assert_eq!(to_value(&r).unwrap(), dp);
    }

    #[test]
    fn a_mesh_has_its_universal_fields_under_spec_and_no_mesh() {
        let doc = yaml(
            "apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: demo}\nspec:\n  mtls:\n    enabledBackend: ca-1\n    backends: [{name: ca-1, type: builtin}]\n",
        );
        let r = decode(doc.clone()).unwrap();
        assert_eq!(
            (r.ty(), r.meta.mesh.as_str(), r.meta.name.as_str()),
            (ResourceType::Mesh, "", "demo")
        );
        assert_eq!(
            r,
            Resource::from_value(
                json!({"type": "Mesh", "name": "demo", "mtls": doc["spec"]["mtls"].clone()})
            )
            .unwrap()
        );
        assert_eq!(to_value(&r).unwrap(), doc);
        let err = decode(yaml(
            "apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: demo, labels: {kuma.io/mesh: x}}\n",
        ))
        .unwrap_err();
        assert_eq!(
            err.violations()[0].field,
            r#"metadata.labels["kuma.io/mesh"]"#
        );
    }

    #[test]
    fn errors_name_the_kubernetes_path() {
        let field = |s: &str| decode(yaml(s)).unwrap_err().violations()[0].field.clone();
        assert_eq!(
            field("apiVersion: v1\nkind: MeshTimeout\nmetadata: {name: t}\n"),
            "apiVersion"
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: Nope\nmetadata: {name: t}\n"),
            "kind"
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: Secret\nmetadata: {name: t}\n"),
            "kind"
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {}\n"),
            "metadata.name"
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\n"),
            "metadata"
        );
        assert_eq!(field("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t, labels: {a: [1]}}\n"), r#"metadata.labels.a"#);
        assert_eq!(
            field(
                "apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t, bogus: 1}\n"
            ),
            "metadata.bogus"
        );
        assert_eq!(field("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t}\nstatus: {}\n"), "status");
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: TrafficPermission\nmesh: a\nmetadata: {name: t, labels: {kuma.io/mesh: b}}\n"),
            r#"metadata.labels["kuma.io/mesh"]"#
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 20s, bogus: 1}\n"),
            "spec.to[0].default.bogus"
        );
        assert_eq!(
            field("apiVersion: kuma.io/v1alpha1\nkind: Dataplane\nmetadata: {name: d}\nspec: {networking: {address: 1}}\n"),
            "spec.networking.address"
        );
        // Kubernetes' own metadata, as `kubectl get -o yaml` exports it, is ignored.
        assert!(decode(yaml("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: t, uid: x, resourceVersion: '1', annotations: {a: b}}\nspec: {targetRef: {kind: Mesh}}\n")).is_ok());
    }

    #[test]
    fn validation_paths_map_to_the_kubernetes_form() {
        use ResourceType::*;
        assert_eq!(field_path(MeshTimeout, "name"), "metadata.name");
        assert_eq!(
            field_path(MeshTimeout, "mesh"),
            r#"metadata.labels["kuma.io/mesh"]"#
        );
        assert_eq!(field_path(Timeout, "mesh"), "mesh");
        assert_eq!(
            field_path(MeshTimeout, r#"labels["kuma.io/effect"]"#),
            r#"metadata.labels["kuma.io/effect"]"#
        );
        assert_eq!(field_path(MeshTimeout, "spec.to[0]"), "spec.to[0]");
        assert_eq!(
            field_path(Timeout, "sources[0].match"),
            "spec.sources[0].match"
        );
        assert_eq!(field_path(Mesh, ""), "spec");
        assert_eq!(field_path(Dataplane, "type"), "kind");
    }

    #[test]
    fn multi_document_files_mix_both_forms() {
        let text = format!("type: Mesh\nname: demo\n---\n{TIMEOUT}");
        let rs = decode_all(text.as_bytes(), Limits::default()).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[1].key().to_string(), "MeshTimeout/demo/timeout-global");
        let bad = format!(
            "{TIMEOUT}---\napiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {{}}\n"
        );
        let err = decode_all(bad.as_bytes(), Limits::default()).unwrap_err();
        assert_eq!(err.violations()[0].field, "[1].metadata.name");
    }

    #[test]
    fn secrets_have_no_kubernetes_form() {
        let s = Resource::from_value(
            json!({"type": "Secret", "mesh": "m", "name": "s", "data": "YQ=="}),
        )
        .unwrap();
        assert_eq!(to_value(&s), None);
    }
}
