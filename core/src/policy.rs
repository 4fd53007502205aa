//! The type-independent view of a `targetRef` policy that matching and rule building work on:
//! top-level `targetRef`, `from`/`to` items (`{targetRef, default}`) and a single-item `default`.
//!
//! Typed policies ([`crate::policies`]) convert to it through their JSON form; the conformance
//! runner also builds it from raw documents of types Umbra does not model (MeshAccessLog,
//! MeshRetry, MeshTrace), because Kuma's matcher is type-agnostic.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::policies::mesh_http_route::{self, MeshHttpRoute};
use crate::policies::mesh_tcp_route::{self, MeshTcpRoute};
use crate::resource::{from_value_at, Meta, Resource, ResourceType, TypeKind};
use crate::rules::OriginMeta;
use crate::target_ref::TargetRef;
use crate::validate::PathBuilder;

pub use crate::type_info::Capabilities;

/// Item lists of a policy type, by Kuma type name: the type list's `levels` for a `targetRef`
/// policy type; for other names (types Umbra does not model) inferred from the spec.
pub fn capabilities(type_name: &str, spec: &Value) -> Capabilities {
    match ResourceType::from_name(type_name).filter(|ty| ty.is_target_ref()) {
        Some(ty) => ty.levels(),
        None => Capabilities {
            from: spec.get("from").is_some(),
            to: spec.get("to").is_some(),
            single: spec.get("default").is_some(),
        },
    }
}

/// One `from`/`to` item: where it applies and its (unmerged) `default`.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyItem {
    /// The item's targetRef.
    pub target_ref: TargetRef,
    /// The item's `default` (`{}` when absent).
    pub conf: Value,
}

/// A `targetRef` policy reduced to what matching needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetRefPolicy {
    /// Type name and metadata (also the rule origin).
    pub origin: OriginMeta,
    /// Top-level targetRef.
    pub target_ref: TargetRef,
    /// Item lists this type has.
    pub caps: Capabilities,
    /// `from` items, in order.
    pub from: Vec<PolicyItem>,
    /// `to` items, in order.
    pub to: Vec<PolicyItem>,
    /// Single-item `default`.
    pub single: Option<Value>,
    /// For MeshHTTPRoute resources: the typed route, to resolve references.
    pub route: Option<Arc<MeshHttpRoute>>,
}

/// Why a document cannot be seen as a targetRef policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyShapeError {
    /// Field path.
    pub field: String,
    /// Reason.
    pub message: String,
}

fn shape_err(field: impl Into<String>, message: impl Into<String>) -> PolicyShapeError {
    PolicyShapeError {
        field: field.into(),
        message: message.into(),
    }
}

impl TargetRefPolicy {
    /// View a typed resource as a targetRef policy; `None` for Mesh, Dataplane and old policies.
    pub fn from_resource(r: &Resource) -> Option<TargetRefPolicy> {
        if r.ty().kind() != TypeKind::NewPolicy {
            return None;
        }
        let route = match &r.spec {
            crate::resource::Spec::MeshHTTPRoute(route) => Some(Arc::new(route.clone())),
            _ => None,
        };
        let mut p = Self::from_spec_value(r.ty().name(), r.meta.clone(), &r.spec_value()).ok()?;
        p.route = route;
        Some(p)
    }

    /// View a raw `spec` of any policy type (`type_name`) as a targetRef policy.
    ///
    /// # Errors
    /// [`PolicyShapeError`] when `targetRef` or an item is missing or malformed.
    pub fn from_spec_value(
        type_name: &str,
        meta: Meta,
        spec: &Value,
    ) -> Result<TargetRefPolicy, PolicyShapeError> {
        let caps = capabilities(type_name, spec);
        let target_ref = parse_ref(spec.get("targetRef"), "spec.targetRef")?;
        let items = |key: &str| -> Result<Vec<PolicyItem>, PolicyShapeError> {
            let Some(list) = spec.get(key) else {
                return Ok(Vec::new());
            };
            let Value::Array(list) = list else {
                return Err(shape_err(format!("spec.{key}"), "must be a list"));
            };
            list.iter()
                .enumerate()
                .map(|(i, item)| {
                    let path = format!("spec.{key}[{i}]");
                    Ok(PolicyItem {
                        target_ref: parse_ref(item.get("targetRef"), &format!("{path}.targetRef"))?,
                        conf: normalize_conf(item.get("default")),
                    })
                })
                .collect()
        };
        let route: Option<Arc<MeshHttpRoute>> = if type_name == ResourceType::MeshHTTPRoute.name() {
            Some(Arc::new(
                from_value_at(&PathBuilder::rooted_at("spec"), spec.clone())
                    .map_err(|e| shape_err("spec", e.to_string()))?,
            ))
        } else {
            None
        };
        // Routes' `to` items carry Kuma's `GetDefault` of each entry as their conf.
        let typed_to: Option<Vec<PolicyItem>> = if let Some(route) = &route {
            Some(
                route
                    .to
                    .iter()
                    .map(|t| PolicyItem {
                        target_ref: t.target_ref.clone(),
                        conf: mesh_http_route::to_conf(t),
                    })
                    .collect(),
            )
        } else if type_name == ResourceType::MeshTCPRoute.name() {
            let tcp: MeshTcpRoute = from_value_at(&PathBuilder::rooted_at("spec"), spec.clone())
                .map_err(|e| shape_err("spec", e.to_string()))?;
            Some(
                tcp.to
                    .iter()
                    .map(|t| PolicyItem {
                        target_ref: t.target_ref.clone(),
                        conf: mesh_tcp_route::to_conf(t),
                    })
                    .collect(),
            )
        } else {
            None
        };
        Ok(TargetRefPolicy {
            origin: OriginMeta {
                type_name: type_name.to_owned(),
                meta,
            },
            target_ref,
            caps,
            from: if caps.from {
                items("from")?
            } else {
                Vec::new()
            },
            to: match typed_to {
                Some(to) => to,
                None if caps.to => items("to")?,
                None => Vec::new(),
            },
            single: caps.single.then(|| normalize_conf(spec.get("default"))),
            route,
        })
    }

    /// The policy's metadata.
    pub fn meta(&self) -> &Meta {
        &self.origin.meta
    }

    /// The policy's type name.
    pub fn type_name(&self) -> &str {
        &self.origin.type_name
    }
}

fn parse_ref(v: Option<&Value>, field: &str) -> Result<TargetRef, PolicyShapeError> {
    let v = v.cloned().unwrap_or(Value::Object(Map::new()));
    serde_json::from_value(v).map_err(|e| shape_err(field, e.to_string()))
}

fn normalize_conf(v: Option<&Value>) -> Value {
    let mut v = match v {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v) => v.clone(),
    };
    crate::merge::strip_nulls(&mut v);
    v
}
