//! Helpers shared by the unit tests of the policy specs, new ([`crate::policies`]) and old
//! ([`crate::old`]): wrap a spec into a resource document, decode it, check round trips and
//! turn validation results into `(field, message)` pairs.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::codec::{decode_one, Limits};
use crate::resource::{Resource, ResourceType, Spec, TypeKind};
use crate::validate::ValidationError;

/// A policy spec type the helpers can decode and validate.
pub(crate) trait TestSpec: DeserializeOwned {
    /// Kuma's type name (`MeshTimeout`).
    const TYPE: &'static str;
    /// The typed spec, or `spec` back when it holds another type.
    fn from_spec(spec: Spec) -> Result<Self, Box<Spec>>;
    /// The type's default validation (`validate()`).
    fn check(&self) -> ValidationError;
}

macro_rules! test_spec {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl TestSpec for $ty {
            const TYPE: &'static str = stringify!($variant);

            fn from_spec(spec: Spec) -> Result<Self, Box<Spec>> {
                match spec {
                    Spec::$variant(s) => Ok(s),
                    other => Err(Box::new(other)),
                }
            }

            fn check(&self) -> ValidationError {
                <$ty>::validate(self)
            }
        }
    )*};
}

test_spec!(
    MeshTimeout => crate::policies::mesh_timeout::MeshTimeout,
    MeshCircuitBreaker => crate::policies::mesh_circuit_breaker::MeshCircuitBreaker,
    MeshFaultInjection => crate::policies::mesh_fault_injection::MeshFaultInjection,
    MeshTrafficPermission => crate::policies::mesh_traffic_permission::MeshTrafficPermission,
    MeshProxyPatch => crate::policies::mesh_proxy_patch::MeshProxyPatch,
    MeshHTTPRoute => crate::policies::mesh_http_route::MeshHttpRoute,
    MeshTCPRoute => crate::policies::mesh_tcp_route::MeshTcpRoute,
    MeshRetry => crate::policies::mesh_retry::MeshRetry,
    MeshHealthCheck => crate::policies::mesh_health_check::MeshHealthCheck,
    MeshRateLimit => crate::policies::mesh_rate_limit::MeshRateLimit,
    MeshAccessLog => crate::policies::mesh_access_log::MeshAccessLog,
    MeshTrace => crate::policies::mesh_trace::MeshTrace,
    MeshLoadBalancingStrategy => crate::policies::mesh_load_balancing_strategy::MeshLoadBalancingStrategy,
    Timeout => crate::old::timeout::Timeout,
    CircuitBreaker => crate::old::circuit_breaker::CircuitBreaker,
    FaultInjection => crate::old::fault_injection::FaultInjection,
    TrafficPermission => crate::old::traffic_permission::TrafficPermission,
    ProxyTemplate => crate::old::proxy_template::ProxyTemplate,
    TrafficRoute => crate::old::traffic_route::TrafficRoute,
    Retry => crate::old::retry::Retry,
    HealthCheck => crate::old::health_check::HealthCheck,
);

/// A resource document of type `T` holding `spec` (flush-left YAML): indented under `spec:` for
/// new policies, inline after the metadata for old ones.
pub(crate) fn document<T: TestSpec>(spec: &str) -> String {
    let head = format!("type: {}\nmesh: default\nname: policy-1\n", T::TYPE);
    let new_policy =
        ResourceType::from_name(T::TYPE).is_some_and(|ty| ty.kind() == TypeKind::NewPolicy);
    if new_policy {
        let body: String = spec
            .trim_matches('\n')
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect();
        format!("{head}spec:\n{body}")
    } else {
        format!("{head}{}\n", spec.trim_matches('\n'))
    }
}

/// Parse YAML/JSON text (which must be well-formed).
pub(crate) fn yaml_value(yaml: &str) -> Value {
    decode_one(yaml.as_bytes(), Limits::default()).unwrap()
}

/// Decode a full resource document (which must be valid YAML): `Err` carries the decode error.
pub(crate) fn try_resource(yaml: &str) -> Result<Resource, String> {
    Resource::from_value(yaml_value(yaml)).map_err(|e| e.to_string())
}

/// Decode a full resource document, which must decode.
pub(crate) fn resource(yaml: &str) -> Resource {
    try_resource(yaml).unwrap()
}

/// `true` when `spec` decodes (strictly) as a `T` resource.
pub(crate) fn decodes<T: TestSpec>(spec: &str) -> bool {
    try_resource(&document::<T>(spec)).is_ok()
}

/// Decode `spec` as a `T` resource and return its typed spec.
pub(crate) fn decode<T: TestSpec>(spec: &str) -> T {
    T::from_spec(resource(&document::<T>(spec)).spec)
        .unwrap_or_else(|other| panic!("unexpected spec {other:?}"))
}

/// Validation of `spec` decoded as a `T` resource, as `(field, message)` pairs.
pub(crate) fn violations<T: TestSpec>(spec: &str) -> Vec<(String, String)> {
    pairs(decode::<T>(spec).check())
}

/// Decode bare spec YAML (no resource envelope) straight into `T`.
pub(crate) fn bare_spec<T: TestSpec>(yaml: &str) -> T {
    serde_json::from_value(yaml_value(yaml)).unwrap()
}

/// Validation of bare spec YAML decoded straight into `T`, as `(field, message)` pairs.
pub(crate) fn bare_violations<T: TestSpec>(yaml: &str) -> Vec<(String, String)> {
    pairs(bare_spec::<T>(yaml).check())
}

/// Validation of bare spec YAML decoded straight into `T`, as `field: message` lines.
pub(crate) fn bare_messages<T: TestSpec>(yaml: &str) -> Vec<String> {
    bare_violations::<T>(yaml)
        .into_iter()
        .map(|(field, message)| format!("{field}: {message}"))
        .collect()
}

/// Decode → encode must give back the input document; returns the decoded resource.
pub(crate) fn assert_round_trip(yaml: &str) -> Resource {
    let input = yaml_value(yaml);
    let resource = Resource::from_value(input.clone()).unwrap();
    assert_eq!(resource.to_value(), input, "{yaml}");
    resource
}

/// `(field, message)` pairs of a validation result.
pub(crate) fn pairs(err: ValidationError) -> Vec<(String, String)> {
    err.violations
        .into_iter()
        .map(|v| (v.field, v.message))
        .collect()
}

/// An expected `(field, message)` pair.
pub(crate) fn v(field: &str, message: &str) -> (String, String) {
    (field.to_owned(), message.to_owned())
}
