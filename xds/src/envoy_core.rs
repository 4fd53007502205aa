//! Envoy core building blocks shared by the generators: TCP socket addresses, the ADS config
//! source and the EDS cluster every outbound and ingress cluster starts from. Imports only the
//! leaves [`crate::names`] and [`crate::protobuf`].

use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, Address, AggregatedConfigSource, ApiVersion,
    ConfigSource, SocketAddress,
};

use crate::names::sanitize_metric;
use crate::protobuf::secs;

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
