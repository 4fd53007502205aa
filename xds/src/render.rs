//! Proto3-JSON rendering of Envoy messages, and parsing back, through one descriptor pool.
//!
//! The pool is compiled at build time from the `.proto` files `envoy-types` ships (see
//! `build.rs`), so any Envoy message, including those packed in `Any` (`typedConfig`), renders
//! the way Envoy's own config dump does: camelCase names, `"5s"` durations, `@type` on `Any`.
//! The same pool parses JSON/YAML into typed messages (MeshProxyPatch `value`, tests).

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};
use serde_json::Value;

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

/// Envoy protos the build could not compile with protox (one per line, with the reason).
pub static SKIPPED_PROTOS: &str =
    include_str!(concat!(env!("OUT_DIR"), "/envoy_descriptors_skipped.txt"));

/// What replaces a sensitive value in a rendered document, as in Envoy's own config dump.
pub const REDACTED: &str = "[redacted]";

/// The fields of Envoy's messages marked `(udpa.annotations.sensitive)` that Umbra generates:
/// `TlsCertificate.private_key` and `TlsCertificate.password` (proto3 JSON names).
pub const SENSITIVE_FIELDS: &[&str] = &["privateKey", "password"];

/// The redacted form of a sensitive `DataSource`: `{"inlineString": "[redacted]"}` (Envoy's).
pub fn redacted_data_source() -> Value {
    serde_json::json!({ "inlineString": REDACTED })
}

/// Replace, everywhere in `v`, the value of every [`SENSITIVE_FIELDS`] member that is an
/// object (a `DataSource`) with [`redacted_data_source`]: a rendered document or diff never
/// carries a private key (the admin listener's, [`crate::base::admin`]).
pub fn redact_sensitive(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if SENSITIVE_FIELDS.contains(&k.as_str()) && child.is_object() {
                    *child = redacted_data_source();
                } else {
                    redact_sensitive(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_sensitive),
        _ => {}
    }
}

/// Why a message could not be rendered or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The message type is not in the descriptor pool.
    #[error("unknown Envoy message type {0:?}")]
    UnknownType(String),
    /// Bytes did not decode as the message (cannot happen for messages prost encoded itself).
    #[error("cannot decode {type_name}: {reason}")]
    Decode {
        /// Message type.
        type_name: String,
        /// Decoder error.
        reason: String,
    },
    /// JSON did not fit the message (unknown field, wrong type, unknown `@type`...).
    #[error("invalid {type_name}: {reason}")]
    Json {
        /// Message type.
        type_name: String,
        /// Deserializer error.
        reason: String,
    },
}

/// The Envoy descriptor pool (decoded once, shared).
///
/// # Panics
/// Never in practice: the bytes are produced by `build.rs` from protox's own output.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTORS).expect("descriptor set built by build.rs decodes")
    })
}

fn options() -> SerializeOptions {
    // Envoy's config dump style: camelCase JSON names, no defaults, enums by name.
    SerializeOptions::new().skip_default_fields(true)
}

/// Render a prost message of a type in the pool as proto3 JSON.
///
/// # Errors
/// [`RenderError`] when the type is unknown to the pool.
pub fn to_json<M: Message + Name>(msg: &M) -> Result<Value, RenderError> {
    encoded_to_json(&M::full_name(), &msg.encode_to_vec())
}

/// Render already-encoded message bytes of `type_name` (`envoy.config.cluster.v3.Cluster`).
///
/// # Errors
/// [`RenderError`] for unknown types or undecodable bytes.
pub fn encoded_to_json(type_name: &str, bytes: &[u8]) -> Result<Value, RenderError> {
    let desc = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| RenderError::UnknownType(type_name.to_owned()))?;
    let dynamic = DynamicMessage::decode(desc, bytes).map_err(|e| RenderError::Decode {
        type_name: type_name.to_owned(),
        reason: e.to_string(),
    })?;
    let mut value = dynamic
        .serialize_with_options(serde_json::value::Serializer, &options())
        .map_err(|e| RenderError::Decode {
            type_name: type_name.to_owned(),
            reason: e.to_string(),
        })?;
    sort_keys(&mut value);
    Ok(value)
}

/// Sort every object's keys, recursively. Proto maps (`filterMetadata`, `Struct.fields`, RBAC
/// `policies`, ...) are `HashMap`s in envoy-types, so prost-reflect emits them in random order;
/// sorted keys make the rendered document, and the order of diff operations, deterministic
/// (and match the sorted-key style of Kuma's printed configs).
fn sort_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.sort_keys();
            m.values_mut().for_each(sort_keys);
        }
        Value::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// Parse proto3 JSON into a typed message. Unknown fields are errors.
///
/// # Errors
/// [`RenderError::Json`] naming the type and the deserializer's reason.
pub fn from_json<M: Message + Name + Default>(value: &Value) -> Result<M, RenderError> {
    let type_name = M::full_name();
    let bytes = json_to_encoded(&type_name, value)?;
    M::decode(bytes.as_slice()).map_err(|e| RenderError::Decode {
        type_name,
        reason: e.to_string(),
    })
}

/// Parse proto3 JSON into a typed message, skipping unknown fields (Go's `jsonpb` with
/// `AllowUnknownFields`, as Kuma's `util_proto.FromJSON` reads a MeshAccessLog body).
///
/// # Errors
/// [`RenderError`] when the JSON does not fit the message's known fields.
pub fn from_json_allowing_unknown<M: Message + Name + Default>(
    value: &Value,
) -> Result<M, RenderError> {
    let type_name = M::full_name();
    let desc = pool()
        .get_message_by_name(&type_name)
        .ok_or_else(|| RenderError::UnknownType(type_name.clone()))?;
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let dynamic = DynamicMessage::deserialize_with_options(desc, value, &options).map_err(|e| {
        RenderError::Json {
            type_name: type_name.clone(),
            reason: e.to_string(),
        }
    })?;
    M::decode(dynamic.encode_to_vec().as_slice()).map_err(|e| RenderError::Decode {
        type_name,
        reason: e.to_string(),
    })
}

/// Parse proto3 JSON of `type_name` into encoded message bytes.
///
/// # Errors
/// [`RenderError`] for unknown types or JSON that does not fit.
pub fn json_to_encoded(type_name: &str, value: &Value) -> Result<Vec<u8>, RenderError> {
    let desc = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| RenderError::UnknownType(type_name.to_owned()))?;
    let dynamic = DynamicMessage::deserialize_with_options(desc, value, &DeserializeOptions::new())
        .map_err(|e| RenderError::Json {
            type_name: type_name.to_owned(),
            reason: e.to_string(),
        })?;
    Ok(dynamic.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::protobuf::Duration;
    use serde_json::json;

    #[test]
    fn pool_has_the_types_umbra_generates() {
        for t in [
            "envoy.config.cluster.v3.Cluster",
            "envoy.config.listener.v3.Listener",
            "envoy.config.route.v3.RouteConfiguration",
            "envoy.config.endpoint.v3.ClusterLoadAssignment",
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
            "envoy.extensions.filters.http.fault.v3.HTTPFault",
            "envoy.extensions.filters.http.rbac.v3.RBAC",
            "envoy.extensions.filters.network.rbac.v3.RBAC",
            "envoy.extensions.filters.http.router.v3.Router",
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "envoy.extensions.transport_sockets.tls.v3.Secret",
            "envoy.config.bootstrap.v3.Bootstrap",
            "envoy.service.runtime.v3.Runtime",
        ] {
            assert!(
                pool().get_message_by_name(t).is_some(),
                "{t} missing; skipped:\n{SKIPPED_PROTOS}"
            );
        }
    }

    #[test]
    fn renders_like_envoy_config_dump_and_parses_back() {
        let cluster = Cluster {
            name: "test-cluster".into(),
            connect_timeout: Some(Duration {
                seconds: 5,
                nanos: 0,
            }),
            cluster_discovery_type: Some(
                envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType::Type(0),
            ),
            ..Default::default()
        };
        let v = to_json(&cluster).unwrap();
        // `type` is a oneof member: set oneof fields render even at their zero value (STATIC),
        // as in the seed's MeshProxyPatch diff.
        assert_eq!(
            v,
            json!({"name": "test-cluster", "connectTimeout": "5s", "type": "STATIC"})
        );
        let back: Cluster =
            from_json(&json!({"name": "test-cluster", "connectTimeout": "5s", "type": "STATIC"}))
                .unwrap();
        assert_eq!(back, cluster);
        let err = from_json::<Cluster>(&json!({"nmae": "x"})).unwrap_err();
        assert!(matches!(err, RenderError::Json { .. }), "{err}");
    }

    #[test]
    fn rendering_is_byte_stable_across_map_orders() {
        use envoy_types::pb::envoy::config::core::v3::Metadata;
        use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};
        let make = || Metadata {
            filter_metadata: (0..12)
                .map(|i| {
                    let fields = (0..12)
                        .map(|j| {
                            (
                                format!("k{j}"),
                                PbValue {
                                    kind: Some(Kind::StringValue(format!("v{j}"))),
                                },
                            )
                        })
                        .collect();
                    (format!("f{i}"), Struct { fields })
                })
                .collect(),
            ..Default::default()
        };
        let a = serde_json::to_string(&to_json(&make()).unwrap()).unwrap();
        for _ in 0..8 {
            assert_eq!(
                serde_json::to_string(&to_json(&make()).unwrap()).unwrap(),
                a
            );
        }
    }

    #[test]
    fn any_renders_with_its_type() {
        use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
        use envoy_types::pb::google::protobuf::Any;
        let any = Any {
            type_url: Router::type_url(),
            value: Router::default().encode_to_vec(),
        };
        assert_eq!(
            encoded_to_json("google.protobuf.Any", &any.encode_to_vec()).unwrap(),
            json!({"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"})
        );
    }
}
