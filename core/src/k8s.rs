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
//!   namespace: kuma-system          # optional; no other namespace is accepted (see below)
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
//!
//! Umbra keeps Kuma's universal names, which have no namespace: `metadata.namespace` may only
//! be absent or `kuma-system` (Kuma's system namespace, where policies live), and the name is
//! then kept as is. An object of another namespace is refused: Kuma names it `<name>.<namespace>`
//! outside Kubernetes, so it must be written with that universal name and no namespace
//! (otherwise `web` in namespaces `a` and `b` would become one resource, and a policy of an
//! application namespace would be taken as a mesh-wide one from `kuma-system`).
//!
//! Only object metadata that means nothing here is accepted and ignored: what Kubernetes
//! records about the stored object (`uid`, `resourceVersion`, `generation`,
//! `creationTimestamp`, `managedFields`, `selfLink`), as `kubectl get -o yaml` exports it, and
//! annotations under `kubectl.kubernetes.io/` (such as `last-applied-configuration`). Metadata
//! that would change what the object means is refused with its path: `deletionTimestamp` /
//! `deletionGracePeriodSeconds` and `finalizers` (an object being deleted is not one to apply),
//! `ownerReferences` (an owned object is its owner's to manage), `generateName` (Umbra
//! generates no names), any other annotation (naming its key: Kuma reads annotations such as
//! `kuma.io/display-name` that Umbra does not act on), and any unknown field. Secrets are
//! native Kubernetes Secrets on Kubernetes, not `kuma.io` objects, so `Secret` and
//! `GlobalSecret` have no Kubernetes form here. Every error names its path in the Kubernetes
//! document (`metadata.name`, `spec.to[0].default.idleTimeout`); [`field_path`] maps the
//! universal paths [`Resource::validate`] reports to the same form.
//!
//! Writing ([`to_value`]) gives back the same shape: targetRef policies in namespace
//! `kuma-system` with the `kuma.io/mesh` label, legacy mesh-scoped kinds with the top-level
//! `mesh` their CRDs have, Mesh and the legacy kinds cluster-scoped (no namespace), ZoneIngress
//! and ZoneEgress in `kuma-system`, and Dataplanes without a namespace (Umbra does not know their workload's).
//! Times are not written, so `to_value(from_value(d)) == d` for a document in that shape.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::codec::Limits;
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

/// Object metadata fields Kubernetes records about a stored object and `kubectl get -o yaml`
/// exports, which mean nothing to the resource: accepted and ignored.
const IGNORED_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
];

/// Object metadata fields that change what the object is, refused with the reason.
const REFUSED_METADATA: &[(&str, &str)] = &[
    (
        "deletionTimestamp",
        "must not be set: the object is being deleted, which is not something to apply",
    ),
    (
        "deletionGracePeriodSeconds",
        "must not be set: the object is being deleted, which is not something to apply",
    ),
    (
        "finalizers",
        "must not be set: finalizers hold an object's deletion, which Umbra does not run; remove them",
    ),
    (
        "ownerReferences",
        "must not be set: an owned object is managed by its owner, not applied on its own; remove the owner references",
    ),
    (
        "generateName",
        "must not be set: Umbra generates no names; set metadata.name",
    ),
];

/// The annotation prefix whose keys are accepted and ignored (`kubectl apply`'s
/// `last-applied-configuration` and the like): kubectl's bookkeeping, not the object's meaning.
const IGNORED_ANNOTATION_PREFIX: &str = "kubectl.kubernetes.io/";

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
    crate::resource::decode_documents_with(bytes, limits, decode)
}

/// Decode a Kubernetes-form document (see the module docs for the shape).
///
/// # Errors
/// [`DecodeError::Invalid`] naming the path: `apiVersion` (not `kuma.io/v1alpha1`), `kind`
/// (missing, unknown, or a secret), `metadata` / `metadata.name` (missing or not a string),
/// `metadata.labels` (not a string map), `metadata.namespace` (other than `kuma-system`),
/// `metadata.annotations[<key>]` (a key not under `kubectl.kubernetes.io/`),
/// `metadata.deletionTimestamp` / `finalizers` / `ownerReferences` (and the other refused
/// metadata of the module docs), `mesh` (mesh and label disagree, or a mesh on a type that
/// belongs to none), an unknown top-level or metadata field, and spec decoding errors under
/// `spec`.
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
    check_namespace(metadata.remove("namespace"), &name)?;
    check_annotations(metadata.remove("annotations"))?;
    for (field, reason) in REFUSED_METADATA {
        if metadata.contains_key(*field) {
            return Err(invalid(format!("metadata.{field}"), *reason));
        }
    }
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

/// Accept `metadata.namespace` only when absent or [`SYSTEM_NAMESPACE`] (see the module docs).
fn check_namespace(namespace: Option<Value>, name: &str) -> Result<(), DecodeError> {
    match namespace {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(ns)) if ns == SYSTEM_NAMESPACE => Ok(()),
        Some(Value::String(ns)) => Err(invalid(
            "metadata.namespace",
            format!(
                "must be {SYSTEM_NAMESPACE:?} or not set, got {ns:?}: Umbra keeps Kuma's universal \
                 names, which have no namespace; write the object with its universal name \
                 (<name>.<namespace> as Kuma names it, here metadata.name: {:?}) and without \
                 metadata.namespace",
                format!("{name}.{ns}")
            ),
        )),
        Some(_) => Err(invalid("metadata.namespace", "must be a string")),
    }
}

/// Accept `metadata.annotations` only with keys under [`IGNORED_ANNOTATION_PREFIX`].
fn check_annotations(annotations: Option<Value>) -> Result<(), DecodeError> {
    let path = PathBuilder::rooted_at("metadata.annotations");
    let annotations: BTreeMap<String, String> = match annotations {
        None | Some(Value::Null) => return Ok(()),
        Some(v) => from_value_at(&path, v)?,
    };
    match annotations
        .keys()
        .find(|k| !k.starts_with(IGNORED_ANNOTATION_PREFIX))
    {
        None => Ok(()),
        Some(k) => Err(invalid(
            path.key(k).to_string(),
            format!(
                "annotation {k:?} is not supported: Umbra does not act on annotations, only \
                 {IGNORED_ANNOTATION_PREFIX}* ones (kubectl's own) are accepted; remove it"
            ),
        )),
    }
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
    if ty.kind() == TypeKind::NewPolicy
        || matches!(ty, ResourceType::ZoneIngress | ResourceType::ZoneEgress)
    {
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
        crate::codec::decode_one(s.as_bytes(), Limits::default()).unwrap()
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
        // Kubernetes' record of the stored object, as `kubectl get -o yaml` exports it, is
        // ignored, and so are kubectl's own annotations.
        let r = decode(yaml("apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata:\n  name: t\n  namespace: kuma-system\n  uid: x\n  resourceVersion: '1'\n  generation: 2\n  creationTimestamp: '2024-01-01T00:00:00Z'\n  managedFields: [{manager: kubectl}]\n  selfLink: /x\n  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}\nspec: {targetRef: {kind: Mesh}}\n")).unwrap();
        assert_eq!(r.meta.name, "t");
    }

    /// The violation (field, message) of a Kubernetes document whose metadata is `metadata`.
    fn metadata_error(kind_and_mesh: &str, metadata: &str) -> (String, String) {
        let doc = format!("apiVersion: kuma.io/v1alpha1\n{kind_and_mesh}metadata: {metadata}\n");
        let err = decode(yaml(&doc)).unwrap_err();
        let v = &err.violations()[0];
        (v.field.clone(), v.message.clone())
    }

    #[test]
    fn a_namespace_other_than_kuma_system_is_refused() {
        // Absent or kuma-system: the name is kept as is.
        for ns in ["", ", namespace: kuma-system", ", namespace: null"] {
            let doc = format!("apiVersion: kuma.io/v1alpha1\nkind: Dataplane\nmesh: m\nmetadata: {{name: web{ns}}}\nspec:\n  networking:\n    address: 10.0.0.1\n    inbound: [{{port: 80, tags: {{kuma.io/service: web}}}}]\n");
            assert_eq!(decode(yaml(&doc)).unwrap().meta.name, "web");
        }
        // Two `web` Dataplanes of namespaces a and b would become one resource.
        let (field, message) =
            metadata_error("kind: Dataplane\nmesh: m\n", "{name: web, namespace: a}");
        assert_eq!(field, "metadata.namespace");
        assert!(message.contains("universal name"), "{message}");
        assert!(message.contains(r#""web.a""#), "{message}");
        // A policy of an application namespace is not a mesh-wide one from kuma-system.
        let (field, message) = metadata_error("kind: MeshTimeout\n", "{name: t, namespace: shop}");
        assert_eq!(field, "metadata.namespace");
        assert!(message.contains(r#""t.shop""#), "{message}");
        assert_eq!(
            metadata_error("kind: MeshTimeout\n", "{name: t, namespace: ''}").0,
            "metadata.namespace"
        );
        assert_eq!(
            metadata_error("kind: MeshTimeout\n", "{name: t, namespace: [a]}"),
            ("metadata.namespace".into(), "must be a string".into())
        );
    }

    #[test]
    fn metadata_that_changes_meaning_is_refused() {
        let field = |m: &str| metadata_error("kind: MeshTimeout\n", m).0;
        assert_eq!(
            field("{name: t, deletionTimestamp: '2024-01-01T00:00:00Z'}"),
            "metadata.deletionTimestamp"
        );
        assert_eq!(
            field("{name: t, deletionGracePeriodSeconds: 30}"),
            "metadata.deletionGracePeriodSeconds"
        );
        assert_eq!(
            field("{name: t, finalizers: [kuma.io/finalizer]}"),
            "metadata.finalizers"
        );
        assert_eq!(
            field("{name: t, ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: u}]}"),
            "metadata.ownerReferences"
        );
        assert_eq!(
            field("{name: t, generateName: t-}"),
            "metadata.generateName"
        );
        // Annotations: kubectl's own are accepted, any other is refused by its key.
        let (field, message) = metadata_error(
            "kind: MeshTimeout\n",
            "{name: t, annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}', kuma.io/display-name: x}}",
        );
        assert_eq!(field, r#"metadata.annotations["kuma.io/display-name"]"#);
        assert!(message.contains("kuma.io/display-name"), "{message}");
        assert_eq!(
            metadata_error("kind: MeshTimeout\n", "{name: t, annotations: {a: b}}").0,
            r#"metadata.annotations["a"]"#
        );
        assert_eq!(
            metadata_error("kind: MeshTimeout\n", "{name: t, annotations: [a]}").0,
            "metadata.annotations"
        );
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
