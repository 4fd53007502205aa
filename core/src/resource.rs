//! The resource envelope in Kuma's universal format: `type`, `mesh`, `name`, `labels`,
//! (`creationTime`, `modificationTime` on output), then `spec` for new policies, the spec's own
//! fields at the top level for Mesh/Dataplane (`mtls`, `networking`...) and
//! `sources`/`destinations`/`conf` (or `selectors`) for old policies.
//!
//! [`Resource::from_value`] decodes strictly: unknown fields, wrong types and unknown resource
//! types are errors carrying the field path (`spec.to[0].default.foo`), never silently dropped.
//! [`Resource::to_value`] writes the same shape back, so decode → encode is lossless.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::codec::{self, Limits};
use crate::dataplane::DataplaneSpec;
use crate::fields::{decode_at, decode_invalid as invalid, Names};
pub use crate::fields::{from_value_at, DecodeError};
use crate::mesh::MeshSpec;
use crate::old;
use crate::policies;
use crate::stored;
use crate::validate::{PathBuilder, ValidationError};

pub use crate::meta::{Meta, DISPLAY_NAME_LABEL, EFFECT_LABEL, EFFECT_SHADOW, ORIGIN_LABEL};

macro_rules! resource_types {
    ($( $variant:ident => $name:literal, $plural:literal, $kind:ident; )*) => {
        /// Every resource type Umbra knows, with Kuma's names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ResourceType { $( #[doc = concat!("`", $name, "`")] $variant, )* }

        impl ResourceType {
            /// All types, in declaration order.
            pub const ALL: &'static [ResourceType] = &[ $( ResourceType::$variant, )* ];

            /// Kuma's type name (`MeshTimeout`).
            pub fn name(self) -> &'static str { match self { $( Self::$variant => $name, )* } }

            /// Kuma's REST path segment (`meshtimeouts`).
            pub fn plural(self) -> &'static str { match self { $( Self::$variant => $plural, )* } }

            /// What family the type belongs to.
            pub fn kind(self) -> TypeKind { match self { $( Self::$variant => TypeKind::$kind, )* } }

            /// Parse a type name (`MeshTimeout`).
            pub fn from_name(s: &str) -> Option<Self> { match s { $( $name => Some(Self::$variant), )* _ => None } }

            /// Parse a REST path segment (`meshtimeouts`).
            pub fn from_plural(s: &str) -> Option<Self> { match s { $( $plural => Some(Self::$variant), )* _ => None } }
        }
    };
}

resource_types! {
    Mesh => "Mesh", "meshes", Infra;
    Dataplane => "Dataplane", "dataplanes", Infra;
    MeshTimeout => "MeshTimeout", "meshtimeouts", NewPolicy;
    MeshCircuitBreaker => "MeshCircuitBreaker", "meshcircuitbreakers", NewPolicy;
    MeshFaultInjection => "MeshFaultInjection", "meshfaultinjections", NewPolicy;
    MeshTrafficPermission => "MeshTrafficPermission", "meshtrafficpermissions", NewPolicy;
    MeshProxyPatch => "MeshProxyPatch", "meshproxypatches", NewPolicy;
    MeshHTTPRoute => "MeshHTTPRoute", "meshhttproutes", NewPolicy;
    MeshTCPRoute => "MeshTCPRoute", "meshtcproutes", NewPolicy;
    Timeout => "Timeout", "timeouts", OldPolicy;
    CircuitBreaker => "CircuitBreaker", "circuit-breakers", OldPolicy;
    FaultInjection => "FaultInjection", "fault-injections", OldPolicy;
    TrafficPermission => "TrafficPermission", "traffic-permissions", OldPolicy;
    ProxyTemplate => "ProxyTemplate", "proxytemplates", OldPolicy;
    TrafficRoute => "TrafficRoute", "traffic-routes", OldPolicy;
    MeshRetry => "MeshRetry", "meshretries", NewPolicy;
    MeshHealthCheck => "MeshHealthCheck", "meshhealthchecks", NewPolicy;
    MeshLoadBalancingStrategy => "MeshLoadBalancingStrategy", "meshloadbalancingstrategies", NewPolicy;
    MeshAccessLog => "MeshAccessLog", "meshaccesslogs", NewPolicy;
    MeshRateLimit => "MeshRateLimit", "meshratelimits", NewPolicy;
    MeshTrace => "MeshTrace", "meshtraces", NewPolicy;
    MeshMetric => "MeshMetric", "meshmetrics", NewPolicy;
    Retry => "Retry", "retries", OldPolicy;
    HealthCheck => "HealthCheck", "health-checks", OldPolicy;
    TrafficLog => "TrafficLog", "traffic-logs", OldPolicy;
    RateLimit => "RateLimit", "rate-limits", OldPolicy;
    TrafficTrace => "TrafficTrace", "traffic-traces", OldPolicy;
    VirtualOutbound => "VirtualOutbound", "virtual-outbounds", OldPolicy;
    MeshGatewayRoute => "MeshGatewayRoute", "meshgatewayroutes", OldPolicy;
    MeshGateway => "MeshGateway", "meshgateways", StoredOnly;
    ExternalService => "ExternalService", "external-services", StoredOnly;
    Secret => "Secret", "secrets", StoredOnly;
    GlobalSecret => "GlobalSecret", "global-secrets", StoredOnly;
    ZoneIngress => "ZoneIngress", "zone-ingresses", Infra;
}

/// Family of a [`ResourceType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    /// Mesh and Dataplane.
    Infra,
    /// A `targetRef` policy.
    NewPolicy,
    /// A source/destination (or selector) policy.
    OldPolicy,
    /// Any other Kuma resource (ExternalService, MeshGateway, Secret, GlobalSecret): stored,
    /// synced and listed, written through the Global like policies, never shadow, and not
    /// generated ([`crate::stored`]).
    StoredOnly,
}

impl TypeKind {
    /// `true` for `targetRef` and old policies.
    pub fn is_policy(self) -> bool {
        matches!(self, TypeKind::NewPolicy | TypeKind::OldPolicy)
    }
}

impl ResourceType {
    /// The old type a new policy replaces, and vice versa (transition seed 000):
    /// MeshTimeout↔Timeout, MeshCircuitBreaker↔CircuitBreaker, MeshFaultInjection↔FaultInjection,
    /// MeshTrafficPermission↔TrafficPermission, MeshProxyPatch↔ProxyTemplate; and by Kuma's
    /// migration guide MeshRetry↔Retry, MeshHealthCheck↔HealthCheck, MeshAccessLog↔TrafficLog,
    /// MeshRateLimit↔RateLimit, MeshTrace↔TrafficTrace.
    pub fn counterpart(self) -> Option<ResourceType> {
        use ResourceType::*;
        Some(match self {
            MeshTimeout => Timeout,
            Timeout => MeshTimeout,
            MeshCircuitBreaker => CircuitBreaker,
            CircuitBreaker => MeshCircuitBreaker,
            MeshFaultInjection => FaultInjection,
            FaultInjection => MeshFaultInjection,
            MeshTrafficPermission => TrafficPermission,
            TrafficPermission => MeshTrafficPermission,
            MeshProxyPatch => ProxyTemplate,
            ProxyTemplate => MeshProxyPatch,
            MeshRetry => Retry,
            Retry => MeshRetry,
            MeshHealthCheck => HealthCheck,
            HealthCheck => MeshHealthCheck,
            MeshAccessLog => TrafficLog,
            TrafficLog => MeshAccessLog,
            MeshRateLimit => RateLimit,
            RateLimit => MeshRateLimit,
            MeshTrace => TrafficTrace,
            TrafficTrace => MeshTrace,
            // TrafficRoute gives way per DPP, not per mesh: see `PolicySet::traffic_routes`.
            Mesh
            | Dataplane
            | ZoneIngress
            | MeshHTTPRoute
            | MeshTCPRoute
            | TrafficRoute
            | MeshLoadBalancingStrategy
            | MeshMetric
            | VirtualOutbound
            | MeshGatewayRoute
            | MeshGateway
            | ExternalService
            | Secret
            | GlobalSecret => return None,
        })
    }

    /// `true` for types that live inside a mesh (everything but Mesh, GlobalSecret and
    /// ZoneIngress).
    pub fn is_mesh_scoped(self) -> bool {
        !matches!(
            self,
            ResourceType::Mesh | ResourceType::GlobalSecret | ResourceType::ZoneIngress
        )
    }

    /// `true` when Umbra generates Envoy config from resources of this type. The others are
    /// stored, synced and listed, and every inspect answer about a DPP they select names them
    /// as not generated ([`crate::view::PolicySet::not_generated`]).
    pub fn is_generated(self) -> bool {
        use ResourceType::*;
        matches!(
            self,
            Mesh | Dataplane
                | ZoneIngress
                | MeshTimeout
                | MeshCircuitBreaker
                | MeshFaultInjection
                | MeshTrafficPermission
                | MeshProxyPatch
                | MeshHTTPRoute
                | MeshTCPRoute
                | MeshRetry
                | MeshHealthCheck
                | MeshRateLimit
                | MeshAccessLog
                | MeshTrace
                | MeshLoadBalancingStrategy
                | Timeout
                | CircuitBreaker
                | FaultInjection
                | TrafficPermission
                | ProxyTemplate
                | TrafficRoute
                | Retry
                | HealthCheck
                | RateLimit
                | TrafficLog
                | TrafficTrace
        )
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A typed key: `(type, mesh, name)`. Mesh resources have an empty `mesh`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// The type.
    pub ty: ResourceType,
    /// Owning mesh (empty for a Mesh).
    pub mesh: String,
    /// Name, unique per type and mesh.
    pub name: String,
}

impl ResourceKey {
    /// The key of the Mesh `name`.
    pub fn mesh(name: impl Into<String>) -> Self {
        ResourceKey {
            ty: ResourceType::Mesh,
            mesh: String::new(),
            name: name.into(),
        }
    }

    /// The key of the Dataplane `name` in `mesh`.
    pub fn dataplane(mesh: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceKey {
            ty: ResourceType::Dataplane,
            mesh: mesh.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mesh.is_empty() {
            write!(f, "{}/{}", self.ty, self.name)
        } else {
            write!(f, "{}/{}/{}", self.ty, self.mesh, self.name)
        }
    }
}

/// A typed spec, one variant per [`ResourceType`].
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Spec {
    /// A Mesh.
    Mesh(MeshSpec),
    /// A Dataplane (DPP).
    Dataplane(DataplaneSpec),
    /// MeshTimeout.
    MeshTimeout(policies::mesh_timeout::MeshTimeout),
    /// MeshCircuitBreaker.
    MeshCircuitBreaker(policies::mesh_circuit_breaker::MeshCircuitBreaker),
    /// MeshFaultInjection.
    MeshFaultInjection(policies::mesh_fault_injection::MeshFaultInjection),
    /// MeshTrafficPermission.
    MeshTrafficPermission(policies::mesh_traffic_permission::MeshTrafficPermission),
    /// MeshProxyPatch.
    MeshProxyPatch(policies::mesh_proxy_patch::MeshProxyPatch),
    /// MeshHTTPRoute.
    MeshHTTPRoute(policies::mesh_http_route::MeshHttpRoute),
    /// MeshTCPRoute.
    MeshTCPRoute(policies::mesh_tcp_route::MeshTcpRoute),
    /// MeshRetry.
    MeshRetry(policies::mesh_retry::MeshRetry),
    /// MeshHealthCheck.
    MeshHealthCheck(policies::mesh_health_check::MeshHealthCheck),
    /// MeshRateLimit.
    MeshRateLimit(policies::mesh_rate_limit::MeshRateLimit),
    /// MeshAccessLog.
    MeshAccessLog(policies::mesh_access_log::MeshAccessLog),
    /// MeshTrace.
    MeshTrace(policies::mesh_trace::MeshTrace),
    /// MeshLoadBalancingStrategy.
    MeshLoadBalancingStrategy(policies::mesh_load_balancing_strategy::MeshLoadBalancingStrategy),
    /// Old Timeout.
    Timeout(old::timeout::Timeout),
    /// Old CircuitBreaker.
    CircuitBreaker(old::circuit_breaker::CircuitBreaker),
    /// Old FaultInjection.
    FaultInjection(old::fault_injection::FaultInjection),
    /// Old TrafficPermission.
    TrafficPermission(old::traffic_permission::TrafficPermission),
    /// Old ProxyTemplate.
    ProxyTemplate(old::proxy_template::ProxyTemplate),
    /// Old TrafficRoute.
    TrafficRoute(old::traffic_route::TrafficRoute),
    /// A stored-only `targetRef` policy (MeshRetry, MeshHealthCheck, ...) and its type.
    StoredPolicy(ResourceType, policies::stored::StoredPolicy),
    /// Old Retry.
    Retry(old::retry::Retry),
    /// Old HealthCheck.
    HealthCheck(old::health_check::HealthCheck),
    /// Old TrafficLog.
    TrafficLog(old::traffic_log::TrafficLog),
    /// Old RateLimit.
    RateLimit(old::rate_limit::RateLimit),
    /// Old TrafficTrace.
    TrafficTrace(old::traffic_log::TrafficTrace),
    /// ExternalService.
    ExternalService(stored::ExternalService),
    /// MeshGateway, MeshGatewayRoute or VirtualOutbound, and which.
    Selected(ResourceType, stored::SelectorResource),
    /// Secret or GlobalSecret, and which.
    Secret(ResourceType, stored::SecretSpec),
    /// A ZoneIngress.
    ZoneIngress(crate::zone_ingress::ZoneIngressSpec),
}

/// A decoded resource: type, metadata and typed spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Metadata.
    pub meta: Meta,
    /// Typed spec (its variant gives the type).
    pub spec: Spec,
}

impl Resource {
    /// The resource's type.
    pub fn ty(&self) -> ResourceType {
        match &self.spec {
            Spec::Mesh(_) => ResourceType::Mesh,
            Spec::Dataplane(_) => ResourceType::Dataplane,
            Spec::MeshTimeout(_) => ResourceType::MeshTimeout,
            Spec::MeshCircuitBreaker(_) => ResourceType::MeshCircuitBreaker,
            Spec::MeshFaultInjection(_) => ResourceType::MeshFaultInjection,
            Spec::MeshTrafficPermission(_) => ResourceType::MeshTrafficPermission,
            Spec::MeshProxyPatch(_) => ResourceType::MeshProxyPatch,
            Spec::MeshHTTPRoute(_) => ResourceType::MeshHTTPRoute,
            Spec::MeshTCPRoute(_) => ResourceType::MeshTCPRoute,
            Spec::MeshRetry(_) => ResourceType::MeshRetry,
            Spec::MeshHealthCheck(_) => ResourceType::MeshHealthCheck,
            Spec::MeshRateLimit(_) => ResourceType::MeshRateLimit,
            Spec::MeshAccessLog(_) => ResourceType::MeshAccessLog,
            Spec::MeshTrace(_) => ResourceType::MeshTrace,
            Spec::MeshLoadBalancingStrategy(_) => ResourceType::MeshLoadBalancingStrategy,
            Spec::Timeout(_) => ResourceType::Timeout,
            Spec::CircuitBreaker(_) => ResourceType::CircuitBreaker,
            Spec::FaultInjection(_) => ResourceType::FaultInjection,
            Spec::TrafficPermission(_) => ResourceType::TrafficPermission,
            Spec::ProxyTemplate(_) => ResourceType::ProxyTemplate,
            Spec::TrafficRoute(_) => ResourceType::TrafficRoute,
            Spec::StoredPolicy(ty, _) | Spec::Selected(ty, _) | Spec::Secret(ty, _) => *ty,
            Spec::Retry(_) => ResourceType::Retry,
            Spec::HealthCheck(_) => ResourceType::HealthCheck,
            Spec::TrafficLog(_) => ResourceType::TrafficLog,
            Spec::RateLimit(_) => ResourceType::RateLimit,
            Spec::TrafficTrace(_) => ResourceType::TrafficTrace,
            Spec::ExternalService(_) => ResourceType::ExternalService,
            Spec::ZoneIngress(_) => ResourceType::ZoneIngress,
        }
    }

    /// The typed key.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            ty: self.ty(),
            mesh: self.meta.mesh.clone(),
            name: self.meta.name.clone(),
        }
    }

    /// Decode YAML/JSON text holding exactly one resource.
    ///
    /// # Errors
    /// [`DecodeError`] with the failing field path.
    pub fn from_bytes(bytes: &[u8]) -> Result<Resource, DecodeError> {
        Self::from_value(codec::decode_one(bytes, Limits::default())?)
    }

    /// Decode every resource of a multi-document YAML file; the first bad document stops
    /// decoding and its error names the document index (`[2].spec...`).
    ///
    /// # Errors
    /// [`DecodeError`].
    pub fn all_from_bytes(bytes: &[u8]) -> Result<Vec<Resource>, DecodeError> {
        decode_documents_with(bytes, Limits::default(), Self::from_value)
    }

    /// Decode a universal-format document.
    ///
    /// # Errors
    /// [`DecodeError::Invalid`] for a missing/unknown `type`, mistyped metadata, unknown fields
    /// or fields of the wrong type anywhere in the spec.
    pub fn from_value(value: Value) -> Result<Resource, DecodeError> {
        let Value::Object(mut obj) = value else {
            return Err(invalid("", "resource must be a mapping"));
        };
        let ty_name = match obj.remove("type") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("type", "must be a string")),
            None => return Err(invalid("type", "must be defined")),
        };
        let ty = ResourceType::from_name(&ty_name)
            .ok_or_else(|| invalid("type", format!("unknown resource type {ty_name:?}")))?;
        let string_field =
            |obj: &mut Map<String, Value>, f: &str| -> Result<Option<String>, DecodeError> {
                match obj.remove(f) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s)),
                    Some(_) => Err(invalid(f, "must be a string")),
                }
            };
        let mesh = string_field(&mut obj, "mesh")?.unwrap_or_default();
        let name = string_field(&mut obj, "name")?.unwrap_or_default();
        let creation_time = string_field(&mut obj, "creationTime")?;
        let modification_time = string_field(&mut obj, "modificationTime")?;
        let labels = match obj.remove("labels") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(v) => from_value_at(&PathBuilder::rooted_at("labels"), v)?,
        };
        let meta = Meta {
            mesh,
            name,
            labels,
            creation_time,
            modification_time,
        };
        let spec = match ty.kind() {
            TypeKind::NewPolicy => {
                if let Some(k) = obj.keys().find(|k| *k != "spec") {
                    return Err(invalid(k.clone(), "unknown field"));
                }
                let spec = obj.remove("spec").unwrap_or(Value::Object(Map::new()));
                decode_spec(ty, &PathBuilder::rooted_at("spec"), spec)?
            }
            TypeKind::Infra | TypeKind::OldPolicy | TypeKind::StoredOnly => {
                decode_spec(ty, &PathBuilder::root(), Value::Object(obj))?
            }
        };
        Ok(Resource { meta, spec })
    }

    /// Encode in universal format (meta first, then the spec), omitting empty fields.
    pub fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), Value::String(self.ty().name().into()));
        if !self.meta.mesh.is_empty() {
            out.insert("mesh".into(), Value::String(self.meta.mesh.clone()));
        }
        out.insert("name".into(), Value::String(self.meta.name.clone()));
        if let Some(t) = &self.meta.creation_time {
            out.insert("creationTime".into(), Value::String(t.clone()));
        }
        if let Some(t) = &self.meta.modification_time {
            out.insert("modificationTime".into(), Value::String(t.clone()));
        }
        if !self.meta.labels.is_empty() {
            out.insert(
                "labels".into(),
                serde_json::to_value(&self.meta.labels).unwrap_or_default(),
            );
        }
        let spec = self.spec_value();
        match self.ty().kind() {
            TypeKind::NewPolicy => {
                out.insert("spec".into(), spec);
            }
            TypeKind::Infra | TypeKind::OldPolicy | TypeKind::StoredOnly => {
                if let Value::Object(m) = spec {
                    out.extend(m);
                }
            }
        }
        Value::Object(out)
    }

    /// The spec alone as JSON (for new policies: the content of `spec`).
    pub fn spec_value(&self) -> Value {
        let r = match &self.spec {
            Spec::Mesh(s) => serde_json::to_value(s),
            Spec::Dataplane(s) => serde_json::to_value(s),
            Spec::MeshTimeout(s) => serde_json::to_value(s),
            Spec::MeshCircuitBreaker(s) => serde_json::to_value(s),
            Spec::MeshFaultInjection(s) => serde_json::to_value(s),
            Spec::MeshTrafficPermission(s) => serde_json::to_value(s),
            Spec::MeshProxyPatch(s) => serde_json::to_value(s),
            Spec::MeshHTTPRoute(s) => serde_json::to_value(s),
            Spec::MeshTCPRoute(s) => serde_json::to_value(s),
            Spec::MeshRetry(s) => serde_json::to_value(s),
            Spec::MeshHealthCheck(s) => serde_json::to_value(s),
            Spec::MeshRateLimit(s) => serde_json::to_value(s),
            Spec::MeshAccessLog(s) => serde_json::to_value(s),
            Spec::MeshTrace(s) => serde_json::to_value(s),
            Spec::MeshLoadBalancingStrategy(s) => serde_json::to_value(s),
            Spec::Timeout(s) => serde_json::to_value(s),
            Spec::CircuitBreaker(s) => serde_json::to_value(s),
            Spec::FaultInjection(s) => serde_json::to_value(s),
            Spec::TrafficPermission(s) => serde_json::to_value(s),
            Spec::ProxyTemplate(s) => serde_json::to_value(s),
            Spec::TrafficRoute(s) => serde_json::to_value(s),
            Spec::StoredPolicy(_, s) => serde_json::to_value(s),
            Spec::Retry(s) => serde_json::to_value(s),
            Spec::HealthCheck(s) => serde_json::to_value(s),
            Spec::TrafficLog(s) => serde_json::to_value(s),
            Spec::RateLimit(s) => serde_json::to_value(s),
            Spec::TrafficTrace(s) => serde_json::to_value(s),
            Spec::ExternalService(s) => serde_json::to_value(s),
            Spec::Selected(_, s) => serde_json::to_value(s),
            Spec::Secret(_, s) => serde_json::to_value(s),
            Spec::ZoneIngress(s) => serde_json::to_value(s),
        };
        // Serializing plain data structs with string keys cannot fail.
        r.unwrap_or(Value::Null)
    }

    /// Validate metadata and spec, returning every violation (empty = valid).
    ///
    /// Metadata: `name` required (Kuma's name charset), `mesh` required for mesh-scoped types.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        if self.meta.name.is_empty() {
            err.violation_field("name", "must not be empty");
        } else if self.meta.name.len() > 253 {
            err.violation_field("name", "must be at most 253 characters");
        } else if matches!(self.meta.name.as_str(), "." | "..") {
            // A path segment that URLs normalise away: such a resource could be stored but
            // never read or deleted by name.
            err.violation_field("name", "must not be \".\" or \"..\"");
        } else if !self
            .meta
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            err.violation_field(
                "name",
                "invalid characters: must consist of alphanumeric characters, '-', '.' and '_'",
            );
        }
        if self.ty().is_mesh_scoped() && self.meta.mesh.is_empty() {
            err.violation_field("mesh", "must not be empty");
        }
        if self.ty() == ResourceType::GlobalSecret && !self.meta.mesh.is_empty() {
            err.violation_field("mesh", "must not be set: a GlobalSecret belongs to no mesh");
        }
        if let Some(effect) = self.meta.labels.get(EFFECT_LABEL) {
            if effect != EFFECT_SHADOW {
                err.violation(
                    &PathBuilder::rooted_at("labels").key(EFFECT_LABEL),
                    "must be \"shadow\" when set",
                );
            } else if self.ty().kind() != TypeKind::NewPolicy {
                err.violation(
                    &PathBuilder::rooted_at("labels").key(EFFECT_LABEL),
                    "only targetRef policies can be shadow",
                );
            }
        }
        err.add(self.validate_spec());
        err
    }

    /// Validate the spec only (paths rooted at `spec` for new policies, at the top for others).
    pub fn validate_spec(&self) -> ValidationError {
        match &self.spec {
            Spec::Mesh(s) => s.validate(),
            Spec::Dataplane(s) => s.validate(),
            Spec::MeshTimeout(s) => s.validate(),
            Spec::MeshCircuitBreaker(s) => s.validate(),
            Spec::MeshFaultInjection(s) => s.validate(),
            Spec::MeshTrafficPermission(s) => s.validate(),
            Spec::MeshProxyPatch(s) => s.validate(),
            Spec::MeshHTTPRoute(s) => s.validate(),
            Spec::MeshTCPRoute(s) => s.validate(),
            Spec::MeshRetry(s) => s.validate(),
            Spec::MeshHealthCheck(s) => s.validate(),
            Spec::MeshRateLimit(s) => s.validate(),
            Spec::MeshAccessLog(s) => s.validate(),
            Spec::MeshTrace(s) => s.validate(),
            Spec::MeshLoadBalancingStrategy(s) => s.validate(),
            Spec::Timeout(s) => s.validate(),
            Spec::CircuitBreaker(s) => s.validate(),
            Spec::FaultInjection(s) => s.validate(),
            Spec::TrafficPermission(s) => s.validate(),
            Spec::ProxyTemplate(s) => s.validate(),
            Spec::TrafficRoute(s) => s.validate(),
            Spec::StoredPolicy(ty, s) => s.validate(*ty, &self.spec_value()),
            Spec::Retry(s) => s.validate(),
            Spec::HealthCheck(s) => s.validate(),
            Spec::TrafficLog(s) => s.validate(),
            Spec::RateLimit(s) => s.validate(),
            Spec::TrafficTrace(s) => s.validate(),
            Spec::ExternalService(s) => s.validate(),
            Spec::Selected(_, s) => s.validate(),
            Spec::Secret(_, s) => s.validate(),
            Spec::ZoneIngress(s) => s.validate(),
        }
    }

    /// The ZoneIngress spec, if this is a ZoneIngress.
    pub fn as_zone_ingress(&self) -> Option<&crate::zone_ingress::ZoneIngressSpec> {
        match &self.spec {
            Spec::ZoneIngress(z) => Some(z),
            _ => None,
        }
    }

    /// The Dataplane spec, if this is a Dataplane.
    pub fn as_dataplane(&self) -> Option<&DataplaneSpec> {
        match &self.spec {
            Spec::Dataplane(d) => Some(d),
            _ => None,
        }
    }
}

/// Decode a spec of type `ty` from JSON, reporting failures at paths under `root`.
///
/// # Errors
/// [`DecodeError::Invalid`] with the failing path.
pub fn decode_spec(ty: ResourceType, root: &PathBuilder, v: Value) -> Result<Spec, DecodeError> {
    // Kuma decodes every type but the targetRef policies with protojson: proto names too.
    let names = if ty.kind() == TypeKind::NewPolicy {
        Names::Json
    } else {
        Names::JsonOrProto
    };
    let mut v = v;
    if ty == ResourceType::Mesh {
        crate::fields::normalize_mesh_sections(root, &mut v).map_err(DecodeError::Invalid)?;
    }
    Ok(match ty {
        ResourceType::Mesh => Spec::Mesh(decode_at(root, v, names).map_err(DecodeError::Invalid)?),
        ResourceType::Dataplane => {
            Spec::Dataplane(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshTimeout => {
            Spec::MeshTimeout(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshCircuitBreaker => {
            Spec::MeshCircuitBreaker(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshFaultInjection => {
            Spec::MeshFaultInjection(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshTrafficPermission => {
            Spec::MeshTrafficPermission(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshProxyPatch => {
            Spec::MeshProxyPatch(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshHTTPRoute => {
            Spec::MeshHTTPRoute(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshTCPRoute => {
            Spec::MeshTCPRoute(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshRetry => {
            Spec::MeshRetry(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshHealthCheck => {
            Spec::MeshHealthCheck(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshRateLimit => {
            Spec::MeshRateLimit(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshAccessLog => {
            Spec::MeshAccessLog(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshTrace => {
            Spec::MeshTrace(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshLoadBalancingStrategy => Spec::MeshLoadBalancingStrategy(
            decode_at(root, v, names).map_err(DecodeError::Invalid)?,
        ),
        ResourceType::Timeout => {
            Spec::Timeout(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::CircuitBreaker => {
            Spec::CircuitBreaker(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::FaultInjection => {
            Spec::FaultInjection(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::TrafficPermission => {
            Spec::TrafficPermission(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::ProxyTemplate => {
            Spec::ProxyTemplate(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::TrafficRoute => {
            Spec::TrafficRoute(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::MeshMetric => {
            Spec::StoredPolicy(ty, decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::Retry => {
            Spec::Retry(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::HealthCheck => {
            Spec::HealthCheck(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::TrafficLog => {
            Spec::TrafficLog(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::RateLimit => {
            Spec::RateLimit(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::TrafficTrace => {
            Spec::TrafficTrace(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::ExternalService => {
            Spec::ExternalService(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::VirtualOutbound
        | ResourceType::MeshGatewayRoute
        | ResourceType::MeshGateway => {
            Spec::Selected(ty, decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::Secret | ResourceType::GlobalSecret => {
            Spec::Secret(ty, decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
        ResourceType::ZoneIngress => {
            Spec::ZoneIngress(decode_at(root, v, names).map_err(DecodeError::Invalid)?)
        }
    })
}

/// Every document of a multi-document YAML (or JSON) text decoded by `decode`; the first bad
/// document stops decoding, and with several documents its violations' paths start with the
/// document's index (`[2].spec...`).
///
/// # Errors
/// [`DecodeError`].
pub(crate) fn decode_documents_with(
    bytes: &[u8],
    limits: Limits,
    decode: impl Fn(Value) -> Result<Resource, DecodeError>,
) -> Result<Vec<Resource>, DecodeError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_paths_normalise_away_are_refused() {
        for (name, refused) in [(".", true), ("..", true), ("...", false), ("a.b", false)] {
            let r =
                Resource::from_value(serde_json::json!({"type": "Mesh", "name": name})).unwrap();
            let errors = r.validate();
            assert_eq!(
                errors.violations.iter().any(|v| v.field == "name"),
                refused,
                "{name:?}: {errors}"
            );
        }
    }
}
