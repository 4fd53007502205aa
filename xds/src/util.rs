//! Small conversions shared by the generators and plugins: packing messages into `Any`,
//! durations, socket addresses, the ADS config source, Kuma's metric-name sanitising and tag
//! metadata. A leaf: it imports nothing from this crate.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, Address, AggregatedConfigSource, ApiVersion,
    ConfigSource, Metadata, SocketAddress,
};
use envoy_types::pb::google::protobuf::{
    value::Kind, Any, Duration as PbDuration, Struct, Value as PbValue,
};
use prost::{Message, Name};

/// Pack a message into `google.protobuf.Any` with its type URL.
pub fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

/// Unpack an `Any` into `M` when the type URL matches.
pub fn unpack<M: Message + Name + Default>(a: &Any) -> Option<M> {
    if a.type_url == M::type_url() {
        M::decode(a.value.as_slice()).ok()
    } else {
        None
    }
}

/// A protobuf duration of whole seconds.
pub fn secs(s: i64) -> PbDuration {
    PbDuration {
        seconds: s,
        nanos: 0,
    }
}

/// A protobuf duration from a Kuma duration.
pub fn duration(d: &umbra_core::duration::Duration) -> PbDuration {
    let (seconds, nanos) = d.to_secs_nanos();
    PbDuration { seconds, nanos }
}

/// A TCP socket address `address:port` (Envoy `Address.socketAddress`).
pub fn socket(address: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: address.to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

/// The v3 ADS config source (`{ads: {}, resourceApiVersion: V3}`), how Kuma points EDS and SDS
/// at the xDS stream.
pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

/// An EDS cluster `name` over ADS with Kuma's 5 s connect timeout, its stats under the
/// sanitized name when that differs (`alt_stat_name`): the base of outbound and ingress
/// clusters.
pub fn eds_cluster(name: &str) -> envoy_types::pb::envoy::config::cluster::v3::Cluster {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
    };
    let stat = sanitize_metric(name);
    envoy_types::pb::envoy::config::cluster::v3::Cluster {
        name: name.to_owned(),
        alt_stat_name: if stat == name { String::new() } else { stat },
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        connect_timeout: Some(secs(5)),
        ..Default::default()
    }
}

/// Kuma's `SanitizeMetric`: every char outside `[a-zA-Z0-9_-]` becomes `_`.
pub fn sanitize_metric(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `filterMetadata["io.kuma.tags"]` = the tags, as Kuma puts on listeners.
pub fn tags_metadata(tags: &BTreeMap<String, String>) -> Metadata {
    string_metadata("io.kuma.tags", tags)
}

/// `filterMetadata[<filter>]` = `values`, as string fields (Kuma's metadata of tags, and its
/// `LbMetadata` with `envoy.lb`).
pub fn string_metadata(filter: &str, values: &BTreeMap<String, String>) -> Metadata {
    let fields = values
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                PbValue {
                    kind: Some(Kind::StringValue(v.clone())),
                },
            )
        })
        .collect();
    Metadata {
        filter_metadata: [(filter.to_owned(), Struct { fields })]
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

/// Endpoint metadata: `envoy.lb` and `envoy.transport_socket_match` = tags minus the service.
pub fn endpoint_metadata(tags: &BTreeMap<String, String>) -> Option<Metadata> {
    let fields: std::collections::HashMap<String, PbValue> = tags
        .iter()
        .filter(|(k, _)| k.as_str() != umbra_core::target_ref::SERVICE_TAG)
        .map(|(k, v)| {
            (
                k.clone(),
                PbValue {
                    kind: Some(Kind::StringValue(v.clone())),
                },
            )
        })
        .collect();
    if fields.is_empty() {
        return None;
    }
    Some(Metadata {
        filter_metadata: [
            (
                "envoy.lb".to_owned(),
                Struct {
                    fields: fields.clone(),
                },
            ),
            ("envoy.transport_socket_match".to_owned(), Struct { fields }),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    })
}

/// Kuma's `tags.Serialize` for `x-kuma-tags`: keys sorted, each `&key=v1,v2&`, concatenated.
pub fn serialize_tags(tags: &BTreeMap<String, std::collections::BTreeSet<String>>) -> String {
    tags.iter()
        .map(|(k, vs)| format!("&{k}={}&", vs.iter().cloned().collect::<Vec<_>>().join(",")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_like_kuma() {
        assert_eq!(sanitize_metric("localhost:8080"), "localhost_8080");
        assert_eq!(
            sanitize_metric("backend_kuma-demo_svc_3001"),
            "backend_kuma-demo_svc_3001"
        );
        assert_eq!(
            sanitize_metric("inbound:10.42.0.29:6379"),
            "inbound_10_42_0_29_6379"
        );
    }

    #[test]
    fn x_kuma_tags_format() {
        let tags = BTreeMap::from([
            ("kuma.io/service".to_owned(), ["frontend".to_owned()].into()),
            (
                "version".to_owned(),
                ["v1".to_owned(), "v2".to_owned()].into(),
            ),
        ]);
        assert_eq!(
            serialize_tags(&tags),
            "&kuma.io/service=frontend&&version=v1,v2&"
        );
    }

    #[test]
    fn any_round_trip() {
        use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
        let a = any(&Router::default());
        assert!(unpack::<Router>(&a).is_some());
        assert!(unpack::<envoy_types::pb::envoy::config::cluster::v3::Cluster>(&a).is_none());
    }
}
