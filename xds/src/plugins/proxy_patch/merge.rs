//! Kuma's `util_proto.Merge` (`pkg/util/proto/google_proto.go`) on prost-reflect messages, and
//! `util_proto.MergeAnys` (`pkg/util/proto/any.go`).
//!
//! `Merge` is protobuf's merge with one exception:
//! - only fields set in the source are applied (a proto3 scalar at its zero value, `false` or
//!   `""` cannot override; a oneof member or a field with presence can, even at zero);
//! - repeated fields are appended to;
//! - map entries are replaced key by key (values are not merged);
//! - singular messages are merged recursively, except `google.protobuf.Duration`, replaced
//!   whole (Kuma's custom merge function);
//! - `google.protobuf.Any` is a message of a type URL and bytes, so its bytes are replaced: typed
//!   configs nested in a patched resource are not merged. Only filter patches merge the
//!   top-level `typedConfig` ([`merge_anys`]).
//!
//! Setting a oneof member clears the other members, as in Go.

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};

use crate::render::pool;

const DURATION: &str = "google.protobuf.Duration";

/// Why two messages (or two `Any`s) could not be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// The message type is not in the Envoy descriptor pool.
    #[error("unknown Envoy message type {type_name:?}")]
    UnknownType {
        /// Full name of the type.
        type_name: String,
    },
    /// Bytes did not decode as the message type.
    #[error("cannot decode {type_name}: {error}")]
    Decode {
        /// Full name of the type.
        type_name: String,
        /// The decoder's error.
        error: prost::DecodeError,
    },
    /// The two messages are of different types.
    #[error("cannot merge {src} into {dst}")]
    DifferentTypes {
        /// Full name of the source's type.
        src: String,
        /// Full name of the destination's type.
        dst: String,
    },
    /// A field could not take the source's value (cannot happen for equal types).
    #[error("cannot set {field}: {error}")]
    SetField {
        /// Full name of the field.
        field: String,
        /// Why.
        error: prost_reflect::SetFieldError,
    },
    /// The two `Any`s hold different types.
    #[error("type URL of dst {dst:?} is different than src {src:?}")]
    DifferentTypeUrls {
        /// Type URL of the destination.
        dst: String,
        /// Type URL of the source.
        src: String,
    },
}

fn descriptor(type_name: &str) -> Result<MessageDescriptor, MergeError> {
    pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| MergeError::UnknownType {
            type_name: type_name.to_owned(),
        })
}

/// Decode `bytes` as a dynamic message of `type_name`.
pub(super) fn dynamic(type_name: &str, bytes: &[u8]) -> Result<DynamicMessage, MergeError> {
    DynamicMessage::decode(descriptor(type_name)?, bytes).map_err(|error| MergeError::Decode {
        type_name: type_name.to_owned(),
        error,
    })
}

/// Merge `src` into `dst` (both of the same message type) with Kuma's `Merge` rules.
///
/// # Errors
/// [`MergeError`] only if the messages' shapes disagree (different types), never a panic.
pub(super) fn merge_message(
    dst: &mut DynamicMessage,
    src: &DynamicMessage,
) -> Result<(), MergeError> {
    if dst.descriptor() != src.descriptor() {
        return Err(MergeError::DifferentTypes {
            src: src.descriptor().full_name().to_owned(),
            dst: dst.descriptor().full_name().to_owned(),
        });
    }
    for (field, value) in src.fields() {
        if field.is_list() {
            if let (Value::List(d), Value::List(s)) = (dst.get_field_mut(&field), value) {
                d.extend(s.iter().cloned());
            }
        } else if field.is_map() {
            if let (Value::Map(d), Value::Map(s)) = (dst.get_field_mut(&field), value) {
                for (k, v) in s {
                    d.insert(k.clone(), v.clone());
                }
            }
        } else if let Kind::Message(m) = field.kind() {
            if m.full_name() == DURATION {
                set(dst, &field, value.clone())?;
            } else if let (Value::Message(d), Value::Message(s)) =
                (dst.get_field_mut(&field), value)
            {
                merge_message(d, s)?;
            }
        } else {
            set(dst, &field, value.clone())?;
        }
    }
    Ok(())
}

fn set(
    dst: &mut DynamicMessage,
    field: &prost_reflect::FieldDescriptor,
    value: Value,
) -> Result<(), MergeError> {
    dst.try_set_field(field, value)
        .map_err(|error| MergeError::SetField {
            field: field.full_name().to_owned(),
            error,
        })
}

/// `dst` merged with `src` (Kuma's `util_proto.Merge(dst, src)`), for a generated message type.
///
/// # Errors
/// [`MergeError`] when the type is missing from the descriptor pool or the result does not
/// decode.
///
/// Kuma's rules are protobuf's wire merge (decoding `src`'s encoding into `dst`: set fields
/// override, repeated fields append, map entries replace, singular messages merge, a oneof
/// member replaces the others) except for `google.protobuf.Duration`, which Kuma replaces
/// whole where the wire merge would merge its seconds and nanos. So when `src` sets no
/// Duration that would be merged into one of `dst` (one reached through singular message
/// fields), the typed wire merge is the result, with no reflection; otherwise both are merged
/// as dynamic messages ([`merge_message`]). `merge_typed_fast_path_is_merge_message` checks
/// the two agree.
pub(super) fn merge_typed<M: Message + Name + Default + Clone + 'static>(
    dst: &M,
    src: &M,
) -> Result<M, MergeError> {
    let type_name = M::full_name();
    let src_bytes = src.encode_to_vec();
    let ty = std::any::TypeId::of::<M>();
    let known = WIRE_MERGE_EXACT.with(|w| {
        w.borrow()
            .get(&ty)
            .and_then(|m| m.get(src_bytes.as_slice()))
            .copied()
    });
    let wire_exact = match known {
        Some(exact) => exact,
        None => {
            let exact = !merges_a_duration(&dynamic(&type_name, &src_bytes)?);
            WIRE_MERGE_EXACT.with(|w| {
                let mut w = w.borrow_mut();
                let m = w.entry(ty).or_default();
                if m.len() >= WIRE_MERGE_LIMIT {
                    m.clear();
                }
                m.insert(src_bytes.clone(), exact);
            });
            exact
        }
    };
    if wire_exact {
        let mut out = dst.clone();
        out.merge(src_bytes.as_slice())
            .map_err(|error| MergeError::Decode {
                type_name: type_name.clone(),
                error,
            })?;
        return Ok(out);
    }
    let s = dynamic(&type_name, &src_bytes)?;
    let mut d = dynamic(&type_name, &dst.encode_to_vec())?;
    merge_message(&mut d, &s)?;
    M::decode(d.encode_to_vec().as_slice()).map_err(|error| MergeError::Decode { type_name, error })
}

/// Most merge sources of one message type [`merge_typed`] remembers per thread; they are
/// dropped together when there are this many.
const WIRE_MERGE_LIMIT: usize = 256;

thread_local! {
    /// Per message type, per encoding of a merge source: whether the wire merge is Kuma's
    /// (every DPP a MeshProxyPatch selects merges the same sources).
    static WIRE_MERGE_EXACT: std::cell::RefCell<
        std::collections::HashMap<std::any::TypeId, std::collections::HashMap<Vec<u8>, bool>>,
    > = std::cell::RefCell::default();
}

/// `true` when `src` sets a `google.protobuf.Duration` through singular message fields only
/// (one [`merge_message`] replaces whole where the wire merge would merge it). Durations in
/// repeated fields or map values are appended or replaced the same way by both.
fn merges_a_duration(src: &DynamicMessage) -> bool {
    src.fields().any(|(field, value)| {
        if field.is_list() || field.is_map() {
            return false;
        }
        match (field.kind(), value) {
            (Kind::Message(m), _) if m.full_name() == DURATION => true,
            (Kind::Message(_), Value::Message(inner)) => merges_a_duration(inner),
            _ => false,
        }
    })
}

/// The message type name of a type URL (`type.googleapis.com/envoy.x.y` → `envoy.x.y`).
pub(super) fn type_name_of(type_url: &str) -> &str {
    type_url.rsplit_once('/').map_or(type_url, |(_, n)| n)
}

/// Kuma's `MergeAnys`: `src` absent keeps `dst`, `dst` absent takes `src`, otherwise both must
/// have the same type URL and their decoded messages are merged with [`merge_message`].
///
/// # Errors
/// [`MergeError`]: different type URLs, an unknown type or undecodable bytes.
pub(super) fn merge_anys(dst: Option<&Any>, src: Option<&Any>) -> Result<Option<Any>, MergeError> {
    let (dst, src) = match (dst, src) {
        (d, None) => return Ok(d.cloned()),
        (None, s) => return Ok(s.cloned()),
        (Some(d), Some(s)) => (d, s),
    };
    if dst.type_url != src.type_url {
        return Err(MergeError::DifferentTypeUrls {
            dst: dst.type_url.clone(),
            src: src.type_url.clone(),
        });
    }
    let type_name = type_name_of(&dst.type_url);
    let mut d = dynamic(type_name, &dst.value)?;
    let s = dynamic(type_name, &src.value)?;
    merge_message(&mut d, &s)?;
    Ok(Some(Any {
        type_url: dst.type_url.clone(),
        value: d.encode_to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{from_json, to_json};
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use serde_json::json;

    fn cluster(v: serde_json::Value) -> Cluster {
        from_json(&v).unwrap()
    }

    #[test]
    fn merge_follows_kuma_util_proto_merge() {
        let dst = cluster(json!({
            "name": "backend",
            "type": "EDS",
            "connectTimeout": "5.500s",
            "perConnectionBufferLimitBytes": 1024,
            "circuitBreakers": {"thresholds": [{"maxConnections": 10}]},
            "typedExtensionProtocolOptions": {
                "a": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                      "commonHttpProtocolOptions": {"idleTimeout": "1s"}},
                "b": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"}
            },
            "commonLbConfig": {"healthyPanicThreshold": {"value": 50}, "ignoreNewHostsUntilFirstHc": true}
        }));
        let src = cluster(json!({
            "connectTimeout": "7s",
            "perConnectionBufferLimitBytes": 0,
            "circuitBreakers": {"thresholds": [{"maxConnections": 20}]},
            "typedExtensionProtocolOptions": {
                "a": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                      "commonHttpProtocolOptions": {"maxStreamDuration": "2s"}}
            },
            "commonLbConfig": {"closeConnectionsOnHostSetChange": true},
            "type": "STATIC"
        }));
        let merged = to_json(&merge_typed(&dst, &src).unwrap()).unwrap();
        assert_eq!(
            merged,
            json!({
                "name": "backend",
                // a oneof member at its zero value is set, and overrides
                "type": "STATIC",
                // durations are replaced whole (the 500ms do not survive)
                "connectTimeout": "7s",
                // wrappers are messages: {value: 0} does not override
                "perConnectionBufferLimitBytes": 1024,
                // repeated fields append
                "circuitBreakers": {"thresholds": [{"maxConnections": 10}, {"maxConnections": 20}]},
                // map entries are replaced, not merged; other keys stay
                "typedExtensionProtocolOptions": {
                    "a": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                          "commonHttpProtocolOptions": {"maxStreamDuration": "2s"}},
                    "b": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"}
                },
                // messages merge field by field
                "commonLbConfig": {
                    "healthyPanicThreshold": {"value": 50.0},
                    "ignoreNewHostsUntilFirstHc": true,
                    "closeConnectionsOnHostSetChange": true
                }
            })
        );
    }

    /// The typed wire merge [`merge_typed`] takes when no Duration is merged gives what
    /// [`merge_message`] gives, over clusters that set fields of every kind (scalars at zero,
    /// wrappers, enums, oneof members, repeated fields, maps, nested messages, Durations in
    /// lists) in both directions.
    #[test]
    fn merge_typed_fast_path_is_merge_message() {
        let cases = [
            json!({"name": "a", "type": "EDS", "perConnectionBufferLimitBytes": 1024,
                   "commonLbConfig": {"healthyPanicThreshold": {"value": 50}},
                   "circuitBreakers": {"thresholds": [{"maxConnections": 10}]}}),
            json!({"perConnectionBufferLimitBytes": 0, "lbPolicy": "LEAST_REQUEST",
                   "circuitBreakers": {"thresholds": [{"maxConnections": 20, "priority": "HIGH"}]},
                   "commonLbConfig": {"ignoreNewHostsUntilFirstHc": true}}),
            json!({"clusterType": {"name": "envoy.clusters.aggregate"},
                   "metadata": {"filterMetadata": {"x": {"k": "v"}}}}),
            json!({"type": "STATIC", "metadata": {"filterMetadata": {"x": {"j": 1}, "y": {}}},
                   "healthChecks": [{"timeout": "1s", "interval": "2s"}]}),
            json!({"typedExtensionProtocolOptions": {
                "a": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                      "commonHttpProtocolOptions": {"idleTimeout": "1s"}}}}),
            json!({"typedExtensionProtocolOptions": {
                "a": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                      "commonHttpProtocolOptions": {"maxRequestsPerConnection": 3}},
                "b": {"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"}}}),
            json!({"outlierDetection": {"consecutive5xx": 0, "enforcingConsecutive5xx": 7},
                   "dnsLookupFamily": "V4_ONLY", "respectDnsTtl": true}),
            json!({}),
        ];
        for d in &cases {
            for s in &cases {
                let (dst, src) = (cluster(d.clone()), cluster(s.clone()));
                let dynamic_src =
                    dynamic("envoy.config.cluster.v3.Cluster", &src.encode_to_vec()).unwrap();
                assert!(!merges_a_duration(&dynamic_src), "{s}");
                let mut slow =
                    dynamic("envoy.config.cluster.v3.Cluster", &dst.encode_to_vec()).unwrap();
                merge_message(&mut slow, &dynamic_src).unwrap();
                let slow = Cluster::decode(slow.encode_to_vec().as_slice()).unwrap();
                assert_eq!(merge_typed(&dst, &src).unwrap(), slow, "{d} <- {s}");
            }
        }
        // A Duration reached through singular fields takes the dynamic merge.
        for s in [
            json!({"connectTimeout": "7s"}),
            json!({"outlierDetection": {"interval": "3s"}}),
        ] {
            let src = cluster(s.clone());
            let dynamic_src =
                dynamic("envoy.config.cluster.v3.Cluster", &src.encode_to_vec()).unwrap();
            assert!(merges_a_duration(&dynamic_src), "{s}");
        }
    }

    /// Random clusters as proto3 JSON: a subset of fragments that set fields of every kind
    /// (scalars at zero, enums, a oneof's members, wrappers, repeated fields, maps, `Any`s,
    /// nested messages, Durations in lists, map values and singular fields).
    fn cluster_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::strategy::Strategy;
        let http_options = |options: serde_json::Value| {
            let mut any = json!({"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"});
            any["commonHttpProtocolOptions"] = options;
            any
        };
        let fragments: Vec<(&str, serde_json::Value)> = vec![
            ("name", json!("a")),
            ("type", json!("STATIC")),
            ("type", json!("EDS")),
            ("clusterType", json!({"name": "envoy.clusters.aggregate"})),
            ("perConnectionBufferLimitBytes", json!(0)),
            ("perConnectionBufferLimitBytes", json!(7)),
            ("lbPolicy", json!("LEAST_REQUEST")),
            ("lbPolicy", json!("ROUND_ROBIN")),
            (
                "circuitBreakers",
                json!({"thresholds": [{"maxConnections": 3}]}),
            ),
            (
                "circuitBreakers",
                json!({"thresholds": [{"priority": "HIGH", "maxRetries": 0}]}),
            ),
            ("metadata", json!({"filterMetadata": {"x": {"k": "v"}}})),
            (
                "metadata",
                json!({"filterMetadata": {"x": {"j": 1}, "y": {}}}),
            ),
            (
                "commonLbConfig",
                json!({"healthyPanicThreshold": {"value": 50}}),
            ),
            (
                "commonLbConfig",
                json!({"ignoreNewHostsUntilFirstHc": true, "zoneAwareLbConfig": {"minClusterSize": "3"}}),
            ),
            ("healthChecks", json!([{"timeout": "1s", "interval": "2s"}])),
            (
                "typedExtensionProtocolOptions",
                json!({"a": http_options(json!({"maxRequestsPerConnection": 3}))}),
            ),
            (
                "typedExtensionProtocolOptions",
                json!({"a": http_options(json!({"idleTimeout": "1s"})), "b": http_options(json!({}))}),
            ),
            (
                "outlierDetection",
                json!({"consecutive5xx": 0, "enforcingConsecutive5xx": 7}),
            ),
            ("outlierDetection", json!({"maxEjectionPercent": 10})),
            ("outlierDetection", json!({"interval": "3s"})),
            ("respectDnsTtl", json!(true)),
            ("dnsLookupFamily", json!("V4_ONLY")),
            ("connectTimeout", json!("5.500s")),
            ("connectTimeout", json!("7s")),
            (
                "loadAssignment",
                json!({"clusterName": "c", "endpoints": [{"lbEndpoints": [{"endpoint": {"address": {"socketAddress": {"address": "1.2.3.4", "portValue": 80}}}}]}]}),
            ),
            (
                "transportSocket",
                json!({"name": "tls", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "sni": "x"}}),
            ),
            (
                "transportSocket",
                json!({"name": "tls", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "allowRenegotiation": true}}),
            ),
        ];
        let count = fragments.len();
        proptest::sample::subsequence(fragments, 0..=count).prop_map(|chosen| {
            let mut out = serde_json::Map::new();
            for (key, value) in chosen {
                out.insert(key.to_owned(), value);
            }
            // One member of the discovery-type oneof per message.
            if out.contains_key("type") {
                out.remove("clusterType");
            }
            serde_json::Value::Object(out)
        })
    }

    proptest::proptest! {
        /// [`merge_typed`] (the wire merge where it applies) gives what [`merge_message`] gives,
        /// for random pairs of clusters.
        #[test]
        fn merge_typed_is_merge_message_on_random_clusters(d in cluster_json(), s in cluster_json()) {
            let (dst, src) = (cluster(d.clone()), cluster(s.clone()));
            let name = "envoy.config.cluster.v3.Cluster";
            let mut slow = dynamic(name, &dst.encode_to_vec()).unwrap();
            merge_message(&mut slow, &dynamic(name, &src.encode_to_vec()).unwrap()).unwrap();
            let slow = Cluster::decode(slow.encode_to_vec().as_slice()).unwrap();
            proptest::prop_assert_eq!(merge_typed(&dst, &src).unwrap(), slow, "{} <- {}", d, s);
        }
    }

    #[test]
    fn oneof_members_replace_each_other() {
        let dst = cluster(json!({"name": "c", "type": "EDS"}));
        let src = cluster(json!({"clusterType": {"name": "envoy.clusters.aggregate"}}));
        let merged = to_json(&merge_typed(&dst, &src).unwrap()).unwrap();
        assert_eq!(
            merged,
            json!({"name": "c", "clusterType": {"name": "envoy.clusters.aggregate"}})
        );
    }

    #[test]
    fn anys_merge_by_type() {
        use crate::protobuf::any;
        use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
        let a = any(&TcpProxy {
            stat_prefix: "a".into(),
            ..Default::default()
        });
        let b = any(&TcpProxy {
            idle_timeout: Some(crate::protobuf::secs(3)),
            ..Default::default()
        });
        let merged = merge_anys(Some(&a), Some(&b)).unwrap().unwrap();
        let t: TcpProxy = crate::protobuf::unpack(&merged).unwrap();
        assert_eq!(t.stat_prefix, "a");
        assert_eq!(t.idle_timeout, Some(crate::protobuf::secs(3)));
        assert_eq!(merge_anys(Some(&a), None).unwrap(), Some(a.clone()));
        assert_eq!(merge_anys(None, Some(&b)).unwrap(), Some(b.clone()));
        let other = any(&Cluster::default());
        assert!(merge_anys(Some(&a), Some(&other))
            .unwrap_err()
            .to_string()
            .contains("different"));
    }
}
