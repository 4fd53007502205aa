//! A resource body (YAML or JSON, in Kuma's universal form or its Kubernetes form,
//! [`umbra_core::k8s`]) checked against the path it was sent to.

use umbra_core::codec::{decode_one, Limits};
use umbra_core::k8s;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::validate::{ValidationError, Violation};

use crate::error::ApiError;

/// The mesh-scoped type of a path's `{plural}` segment (`/meshes/{mesh}/{plural}`, and the
/// cross-mesh `/{plural}`). Mesh, GlobalSecret, ZoneIngress and ZoneEgress belong to no mesh
/// and have their own paths (`/meshes`, `/global-secrets`, `/zone-ingresses`,
/// `/zoneegresses`), whose access rules
/// (`crate::authn`) a mesh path must not sidestep.
///
/// # Errors
/// A 404 naming the unknown type, or the path of a type that belongs to no mesh.
pub fn resource_type(plural: &str) -> Result<ResourceType, ApiError> {
    match ResourceType::from_plural(plural) {
        Some(t) if t.is_mesh_scoped() => Ok(t),
        Some(t) => Err(ApiError::not_found(format!(
            "{} belong to no mesh: see /{}",
            t.plural_display_name(),
            if t == ResourceType::Mesh {
                "meshes"
            } else {
                plural
            }
        ))),
        None => Err(ApiError::not_found(format!(
            "unknown resource type {plural:?}"
        ))),
    }
}

/// Decode `body` as a resource of `ty` named `name` (in `mesh` when mesh-scoped) and validate
/// it. The body is in the universal form or in the Kubernetes form (`apiVersion:
/// kuma.io/v1alpha1`, `kind`, `metadata.name`, the mesh from the `kuma.io/mesh` label, `spec`);
/// the fields of a Kubernetes body's violations are its own paths (`metadata.name`,
/// `spec.sources[0]`, [`k8s::field_path`]).
///
/// # Errors
/// A 400 with every `{field, message}`: decoding problems, then type/name/mesh mismatches with
/// the path, then validation violations (each group alone, first one found).
pub fn decode_for_path(
    ty: ResourceType,
    mesh: &str,
    name: &str,
    body: &[u8],
) -> Result<Resource, ApiError> {
    // The detail names every field and reason too, as a validation 400's does: a client that
    // shows only the detail still learns what to fix.
    let cannot_decode = |violations: Vec<Violation>| {
        let mut listed = ValidationError::new();
        for v in &violations {
            listed.violation_field(v.field.clone(), v.message.clone());
        }
        ApiError::invalid(listed.to_string(), violations)
    };
    let value = decode_one(body, Limits::default())
        .map_err(|e| cannot_decode(umbra_core::resource::DecodeError::from(e).violations()))?;
    let kubernetes = k8s::is_k8s(&value);
    let resource = k8s::decode(value).map_err(|e| cannot_decode(e.violations()))?;
    let field = |universal: &str| {
        if kubernetes {
            k8s::field_path(ty, universal)
        } else {
            universal.to_owned()
        }
    };
    let mut path_errors = Vec::new();
    let mismatch = |f: &str, want: &str, got: &str| Violation {
        field: field(f),
        message: format!("must be {want:?} to match the path, got {got:?}"),
    };
    if resource.ty() != ty {
        path_errors.push(mismatch("type", ty.name(), resource.ty().name()));
    }
    if resource.meta.name != name {
        path_errors.push(mismatch("name", name, &resource.meta.name));
    }
    if ty.is_mesh_scoped() && resource.meta.mesh != mesh {
        path_errors.push(mismatch("mesh", mesh, &resource.meta.mesh));
    }
    if !path_errors.is_empty() {
        return Err(ApiError::invalid(
            "the resource does not match the path",
            path_errors,
        ));
    }
    let violations = resource.validate();
    if violations.has_violations() {
        let mut mapped = ValidationError::new();
        for v in violations.violations {
            mapped.violation_field(field(&v.field), v.message);
        }
        return Err(ApiError::invalid(mapped.to_string(), mapped.violations));
    }
    Ok(resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_paths_take_mesh_scoped_types_only() {
        assert_eq!(
            resource_type("meshtimeouts").unwrap(),
            ResourceType::MeshTimeout
        );
        assert_eq!(resource_type("secrets").unwrap(), ResourceType::Secret);
        for other in [
            "global-secrets",
            "zone-ingresses",
            "zoneegresses",
            "meshes",
            "nope",
        ] {
            assert_eq!(
                resource_type(other).unwrap_err().status.as_u16(),
                404,
                "{other}"
            );
        }
    }

    const K8S: &str = "apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata:\n  name: t\n  namespace: kuma-system\n  labels: {kuma.io/mesh: demo, kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 20s}\n";

    fn fields(e: ApiError) -> Vec<String> {
        e.invalid_parameters.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn the_kubernetes_form_is_accepted_and_checked_against_the_path() {
        let r = decode_for_path(ResourceType::MeshTimeout, "demo", "t", K8S.as_bytes()).unwrap();
        assert_eq!(r.key().to_string(), "MeshTimeout/demo/t");
        assert!(r.meta.is_shadow());
        let err =
            decode_for_path(ResourceType::MeshTimeout, "other", "u", K8S.as_bytes()).unwrap_err();
        assert_eq!(
            fields(err),
            ["metadata.name", r#"metadata.labels["kuma.io/mesh"]"#]
        );
        let err = decode_for_path(ResourceType::Timeout, "demo", "t", K8S.as_bytes()).unwrap_err();
        assert_eq!(fields(err), ["kind"]);
    }

    #[test]
    fn a_body_that_cannot_be_decoded_names_the_field_and_reason_in_the_detail_too() {
        let typo = "type: MeshTimeout\nmesh: demo\nname: t\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimout: 20s}\n";
        let err =
            decode_for_path(ResourceType::MeshTimeout, "demo", "t", typo.as_bytes()).unwrap_err();
        assert!(
            err.detail.starts_with("spec.to[0].default.idleTimout: unknown field `idleTimout` (did you mean `idleTimeout`?)"),
            "{}",
            err.detail
        );
        assert_eq!(fields(err), ["spec.to[0].default.idleTimout"]);
        let broken = "type: MeshTimeout\nmesh: demo\nname: t\nspec: {targetRef: {kind: Mesh}\n";
        let err =
            decode_for_path(ResourceType::MeshTimeout, "demo", "t", broken.as_bytes()).unwrap_err();
        assert!(
            err.detail.contains("line "),
            "the YAML position: {}",
            err.detail
        );
    }

    #[test]
    fn kubernetes_violations_name_kubernetes_paths() {
        let bad = K8S.replace("20s", "-1s");
        let err =
            decode_for_path(ResourceType::MeshTimeout, "demo", "t", bad.as_bytes()).unwrap_err();
        assert_eq!(fields(err), ["spec.to[0].default.idleTimeout"]);
        let tp = "apiVersion: kuma.io/v1alpha1\nkind: TrafficPermission\nmesh: demo\nmetadata: {name: 'a b'}\nspec:\n  sources: [{match: {kuma.io/service: '*'}}]\n  destinations: []\n";
        let err = decode_for_path(
            ResourceType::TrafficPermission,
            "demo",
            "a b",
            tp.as_bytes(),
        )
        .unwrap_err();
        let f = fields(err);
        assert!(f.contains(&"metadata.name".to_owned()), "{f:?}");
        assert!(
            f.iter().any(|f| f.starts_with("spec.destinations")),
            "{f:?}"
        );
        let err = decode_for_path(
            ResourceType::MeshTimeout,
            "demo",
            "t",
            b"apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {}\n",
        )
        .unwrap_err();
        assert_eq!(fields(err), ["metadata.name"]);
    }
}
