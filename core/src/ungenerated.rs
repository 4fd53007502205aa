//! Kuma 2.7 resource types that are not `targetRef` policies, typed as far as their envelope:
//! ExternalService (generated from [`crate::external_service`]), MeshGateway, MeshGatewayRoute,
//! VirtualOutbound (stored, synced and listed; not generated), Secret (read by ExternalServices)
//! and GlobalSecret.
//!
//! Their envelope is typed as Kuma's protos give it (`api/mesh/v1alpha1/*.proto`,
//! `api/system/v1alpha1/secret.proto`), unknown top-level fields refused. The nested `conf` of
//! the gateway types and of VirtualOutbound and ExternalService's `networking` are kept as
//! JSON objects, verbatim but for field names: a `conf` field written with its proto name
//! (`request_header`) is stored under its proto3 JSON name (`requestHeader`), as Kuma's
//! protojson reads and writes it. Validation is the part of Kuma's validators
//! (`pkg/core/resources/apis/{mesh,system}/*_validator.go`) that concerns those envelopes.
//! Answers about DPPs these types could affect say they are not generated
//! ([`crate::view::PolicySet::not_generated`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::go_net;
use crate::old::selectors::{deserialize_selectors, validate_selectors, Selector, SelectorRules};
use crate::target_ref::SERVICE_TAG;
use crate::validate::{PathBuilder, ValidationError};

/// ExternalService: a service outside the mesh, addressed by `networking.address`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalService {
    /// `address` (`host:port`), `tls`, `disableHostDNSEntry`: kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Map<String, Value>>,
    /// Tags; `kuma.io/service` is required.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// MeshGateway, MeshGatewayRoute and VirtualOutbound: `selectors` and a `conf` object (and a
/// MeshGateway's `tags`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorResource {
    /// Dataplanes (or gateways) selected.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<Selector>,
    /// The configuration, with proto field names in their proto3 JSON form (`request_header`
    /// read as `requestHeader`, as Kuma's protojson reads both; [`json_field_names`]),
    /// otherwise verbatim.
    #[serde(
        default,
        deserialize_with = "deserialize_conf",
        skip_serializing_if = "Option::is_none"
    )]
    pub conf: Option<Map<String, Value>>,
    /// MeshGateway tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Secret and GlobalSecret: `data`, base64.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSpec {
    /// The secret's bytes, base64 (standard alphabet, padded).
    #[serde(default)]
    pub data: String,
}

impl ExternalService {
    /// Kuma's `ExternalServiceResource.Validate`, envelope part, in Kuma's order:
    /// `networking` present with a `host:port` address as Go's `net.SplitHostPort` splits it,
    /// a host that is an IP or a DNS name as govalidator reads them (`db_1:5432`, a compose
    /// container, is one) and a port in 1..=65535; a `tls.serverName`, when given, not empty;
    /// `tls.caCert`, `clientCert` and `clientKey`, when given, not empty data sources; a
    /// `kuma.io/service` tag that is not the address's host.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let path = PathBuilder::root().field("networking");
        let address = match &self.networking {
            None => {
                err.violation(&path, "should have networking");
                ""
            }
            Some(networking) => {
                let address = networking
                    .get("address")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                validate_external_address(&mut err, &path.field("address"), address);
                let tls = networking.get("tls");
                let tp = path.field("tls");
                if tls
                    .and_then(|t| t.get("serverName"))
                    .is_some_and(|n| n.as_str() == Some(""))
                {
                    err.violation(&tp.field("serverName"), "cannot be empty");
                }
                for field in ["caCert", "clientCert", "clientKey"] {
                    if let Some(ds) = tls.and_then(|t| t.get(field)).filter(|d| !d.is_null()) {
                        let set = |k: &str| {
                            ds.get(k)
                                .and_then(Value::as_str)
                                .is_some_and(|v| !v.is_empty())
                        };
                        if !["inline", "inlineString", "secret", "file"]
                            .into_iter()
                            .any(set)
                        {
                            err.violation(&tp.field(field), "data source cannot be empty");
                        }
                    }
                }
                address
            }
        };
        let tags = PathBuilder::root().field("tags");
        match self.tags.get(SERVICE_TAG) {
            None => err.violation(&tags, format!("mandatory tag {SERVICE_TAG:?} is missing")),
            Some(s) if s.is_empty() => {
                err.violation(&tags.key(SERVICE_TAG), "tag value must be non-empty")
            }
            Some(_) => {}
        }
        if let (Some(service), Ok((host, _))) = (
            self.tags.get(SERVICE_TAG).filter(|s| !s.is_empty()),
            go_net::split_host_port(address),
        ) {
            if service == host {
                err.violation(
                    &tags.key(SERVICE_TAG),
                    "cannot be the same as networking.address",
                );
            }
        }
        err
    }
}

/// Kuma's `validateExternalServiceAddress`: every problem of a `host:port` address, at the
/// address (an unsplittable one gets all four messages, as in Kuma).
fn validate_external_address(err: &mut ValidationError, ap: &PathBuilder, address: &str) {
    if address.is_empty() {
        err.violation(ap, "address can't be empty");
        return;
    }
    let (host, port) = go_net::split_host_port(address).unwrap_or_else(|_| {
        err.violation(ap, "unable to parse address");
        ("", "")
    });
    if !go_net::is_host(host) {
        err.violation(ap, "address has to be a valid IP address or a domain name");
    }
    // Go's `strconv.ParseUint(port, 10, 32)`: ASCII digits only, below 2^32.
    let port = if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        port.parse::<u32>().ok()
    } else {
        None
    };
    if port.is_none() {
        err.violation(ap, "unable to parse port in address");
    }
    if port.is_none_or(|p| p == 0 || p > 65535) {
        err.violation(ap, "port must be in the range [1, 65535]");
    }
}

impl SelectorResource {
    /// Kuma's envelope checks of MeshGateway, MeshGatewayRoute and VirtualOutbound: at least
    /// one selector with at least one tag, and a `conf`.
    pub fn validate(&self) -> ValidationError {
        let mut err = validate_selectors(
            &PathBuilder::root().field("selectors"),
            &self.selectors,
            &SelectorRules::NON_EMPTY,
        );
        if self.conf.is_none() {
            err.violation(&PathBuilder::root().field("conf"), "has to be defined");
        }
        // A MeshGateway listener's connection limit is served to Envoy: a uint32, as Kuma's.
        let listeners = self
            .conf
            .as_ref()
            .and_then(|c| c.get("listeners"))
            .and_then(Value::as_array);
        let path = PathBuilder::root().field("conf").field("listeners");
        for (i, l) in listeners.into_iter().flatten().enumerate() {
            let limit = l.get("resources").and_then(|r| r.get("connectionLimit"));
            if let Some(why) = limit.and_then(connection_limit_violation) {
                err.violation(
                    &path.index(i).field("resources").field("connectionLimit"),
                    why,
                );
            }
        }
        if let Some(listeners) = listeners {
            collapsible(&mut err, &path, listeners);
        }
        err
    }
}

impl SecretSpec {
    /// Kuma's `ValidateSecretData`: `data` present and base64.
    pub fn validate(&self) -> ValidationError {
        let mut err = ValidationError::new();
        let path = PathBuilder::root().field("data");
        if self.data.is_empty() {
            err.violation(&path, "cannot be empty");
        } else if base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .is_err()
        {
            err.violation(&path, "must be base64 (standard alphabet, padded)");
        }
        err
    }
}

fn deserialize_conf<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    let mut conf: Option<Map<String, Value>> = Option::deserialize(d)?;
    if let Some(c) = &mut conf {
        json_field_names(c);
    }
    Ok(conf)
}

/// Object keys holding user names (tags, destinations, selector matches), never field names.
const USER_KEYED: &[&str] = &["destination", "tags", "match"];

/// Rename every field written with its proto name (`snake_case`) to its proto3 JSON name
/// (`lowerCamelCase`), at every depth but inside [`USER_KEYED`] maps; a key already in JSON
/// form wins over its proto-named twin.
pub(crate) fn json_field_names(m: &mut Map<String, Value>) {
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        let json_name = crate::fields::proto_json_name(&k);
        if json_name != k {
            if let Some(v) = m.remove(&k) {
                m.entry(json_name).or_insert(v);
            }
        }
    }
    for (k, v) in m.iter_mut() {
        if USER_KEYED.contains(&k.as_str()) {
            continue;
        }
        names_in(v);
    }
}

fn names_in(v: &mut Value) {
    match v {
        Value::Object(o) => json_field_names(o),
        Value::Array(a) => a.iter_mut().for_each(names_in),
        _ => {}
    }
}

/// Kuma's `validateListenerCollapsibility` over a MeshGateway's `listeners` (at `path`): the
/// listeners of one port (merged into one Envoy listener) must share a protocol, name distinct
/// hostnames (none is `*`) and, when they set connection limits, the same one.
fn collapsible(err: &mut ValidationError, path: &PathBuilder, listeners: &[Value]) {
    let mut protocols: BTreeMap<u64, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    let mut hostnames: BTreeMap<u64, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    let mut limits: BTreeMap<u64, (Vec<usize>, std::collections::BTreeSet<u32>)> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        let port = l.get("port").and_then(Value::as_u64).unwrap_or(0);
        let protocol = l.get("protocol").and_then(Value::as_str).unwrap_or("NONE");
        let hostname = match l.get("hostname").and_then(Value::as_str) {
            None | Some("") => "*",
            Some(h) => h,
        };
        protocols
            .entry(port)
            .or_default()
            .entry(protocol)
            .or_default()
            .push(i);
        hostnames
            .entry(port)
            .or_default()
            .entry(hostname)
            .or_default()
            .push(i);
        let limit = l
            .get("resources")
            .and_then(|r| r.get("connectionLimit"))
            .and_then(read_uint32)
            .filter(|n| *n != 0);
        if let Some(n) = limit {
            let (at, values) = limits.entry(port).or_default();
            at.push(i);
            values.insert(n);
        }
    }
    let mut found: Vec<(usize, bool, &str)> = Vec::new();
    for by_protocol in protocols.values().filter(|p| p.len() > 1) {
        for &i in by_protocol.values().flatten() {
            found.push((
                i,
                false,
                "protocol conflicts with other listeners on this port",
            ));
        }
    }
    for by_hostname in hostnames.values() {
        for indexes in by_hostname.values().filter(|i| i.len() > 1) {
            for &i in indexes {
                found.push((i, false, "multiple listeners for hostname on this port"));
            }
        }
    }
    for (at, _) in limits.values().filter(|(_, v)| v.len() > 1) {
        for &i in at {
            found.push((i, true, "conflicting values for this port"));
        }
    }
    found.sort();
    for (i, limit, why) in found {
        let at = path.index(i);
        if limit {
            err.violation(&at.field("resources").field("connectionLimit"), why);
        } else {
            err.violation(&at, why);
        }
    }
}

/// A proto3 JSON uint32: a whole number or a decimal string in `0..=u32::MAX`.
pub(crate) fn read_uint32(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .and_then(|n| u32::try_from(n).ok()),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        _ => None,
    }
}

/// Why a MeshGateway listener's `resources.connectionLimit` (`value`, present and not null) is
/// refused, if it is: it must be a uint32 (Kuma's proto field).
fn connection_limit_violation(value: &Value) -> Option<&'static str> {
    if value.is_null() || read_uint32(value).is_some() {
        None
    } else {
        Some("must be an integer in 0..=4294967295 (uint32)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_are_checked() {
        let es: ExternalService = serde_json::from_value(
            json!({"networking": {"address": "httpbin.org:443", "tls": {"enabled": true}}, "tags": {"kuma.io/service": "httpbin"}}),
        )
        .unwrap();
        assert!(!es.validate().has_violations());
        let bad: ExternalService =
            serde_json::from_value(json!({"networking": {"address": "x"}})).unwrap();
        assert_eq!(bad.validate().violations.len(), 5, "{}", bad.validate());
        let gw: SelectorResource = serde_json::from_value(json!({"selectors": []})).unwrap();
        assert_eq!(gw.validate().violations.len(), 2);
        assert!(SecretSpec {
            data: "c2VjcmV0".into()
        }
        .validate()
        .violations
        .is_empty());
        assert!(SecretSpec {
            data: "not base64!".into()
        }
        .validate()
        .has_violations());
    }

    /// The `(field, message)` violations of a MeshGateway with `listeners`.
    fn listener_violations(listeners: Value) -> Vec<(String, String)> {
        let gw: SelectorResource = serde_json::from_value(json!({
            "selectors": [{"match": {"kuma.io/service": "edge"}}],
            "conf": {"listeners": listeners},
        }))
        .unwrap();
        gw.validate()
            .violations
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    }

    /// Kuma's `validateListenerCollapsibility`: one protocol per port, distinct hostnames per
    /// port (none is `*`), one connection limit per port.
    #[test]
    fn gateway_listeners_of_a_port_must_collapse() {
        let gw = listener_violations;
        let ok = json!([
            {"port": 80, "protocol": "HTTP", "hostname": "a.test", "resources": {"connectionLimit": 5}},
            {"port": 80, "protocol": "HTTP", "hostname": "b.test", "resources": {"connectionLimit": 5}},
            {"port": 80, "protocol": "HTTP"},
            {"port": 443, "protocol": "HTTPS", "hostname": "a.test", "resources": {"connectionLimit": 9}},
        ]);
        assert!(gw(ok).is_empty());
        let v = |f: &str, m: &str| (f.to_owned(), m.to_owned());
        assert_eq!(
            gw(json!([
                {"port": 80, "protocol": "HTTP"},
                {"port": 80, "protocol": "TCP", "hostname": "*"},
                {"port": 81, "protocol": "HTTP", "resources": {"connectionLimit": 1}},
                {"port": 81, "protocol": "HTTP", "hostname": "x.test", "resources": {"connectionLimit": 2}},
            ])),
            [
                v(
                    "conf.listeners[0]",
                    "multiple listeners for hostname on this port"
                ),
                v(
                    "conf.listeners[0]",
                    "protocol conflicts with other listeners on this port"
                ),
                v(
                    "conf.listeners[1]",
                    "multiple listeners for hostname on this port"
                ),
                v(
                    "conf.listeners[1]",
                    "protocol conflicts with other listeners on this port"
                ),
                v(
                    "conf.listeners[2].resources.connectionLimit",
                    "conflicting values for this port"
                ),
                v(
                    "conf.listeners[3].resources.connectionLimit",
                    "conflicting values for this port"
                ),
            ]
        );
    }

    /// Proto field names are read as their proto3 JSON names (Kuma's protojson accepts both),
    /// tags and destinations untouched.
    #[test]
    fn proto_field_names_are_read_as_json_names() {
        let route: SelectorResource = serde_json::from_value(json!({
            "selectors": [{"match": {"kuma.io/service": "gw", "my_tag": "x"}}],
            "conf": {"http": {"rules": [{
                "matches": [{"query_parameters": [{"match": "EXACT", "name": "a_b", "value": "c"}]}],
                "filters": [{"request_header": {"set": [{"name": "x", "value": "y"}]}},
                            {"redirect": {"status_code": 302, "hostname": "h"}}],
                "backends": [{"destination": {"kuma.io/service": "s", "my_tag": "v"}}],
            }]}},
        }))
        .unwrap();
        let conf = serde_json::to_value(&route.conf).unwrap();
        let rule = &conf["http"]["rules"][0];
        assert_eq!(rule["matches"][0]["queryParameters"][0]["name"], "a_b");
        assert_eq!(rule["filters"][0]["requestHeader"]["set"][0]["value"], "y");
        assert_eq!(rule["filters"][1]["redirect"]["statusCode"], 302);
        assert_eq!(rule["backends"][0]["destination"]["my_tag"], "v");
        assert_eq!(
            route.selectors[0]
                .match_tags
                .get("my_tag")
                .map(String::as_str),
            Some("x")
        );
    }

    /// A MeshGateway listener's `resources.connectionLimit` is a uint32 (number or decimal
    /// string, as proto3 JSON reads it); anything else is refused at its path.
    #[test]
    fn gateway_connection_limits_are_uint32() {
        let gw = |limit: Value| {
            listener_violations(json!([
                {"port": 80, "protocol": "HTTP"},
                {"port": 81, "protocol": "HTTP", "resources": {"connectionLimit": limit}},
            ]))
        };
        for ok in [
            json!(0),
            json!(10000),
            json!("25"),
            json!(4294967295u64),
            json!(null),
        ] {
            assert!(gw(ok.clone()).is_empty(), "{ok}");
        }
        for bad in [
            json!(-1),
            json!(1.5),
            json!("ten"),
            json!(4294967296u64),
            json!({}),
        ] {
            assert_eq!(
                gw(bad.clone()),
                [(
                    "conf.listeners[1].resources.connectionLimit".to_owned(),
                    "must be an integer in 0..=4294967295 (uint32)".to_owned()
                )],
                "{bad}"
            );
        }
    }

    /// Kuma 2.7.29 `external_service_validator_test.go`: its valid addresses and the address,
    /// `tls.serverName` and tag entries, with its messages, plus govalidator's names with
    /// underscores (issue 41) and Kuma's host-only comparison of the service tag.
    #[test]
    fn external_service_addresses_follow_kuma() {
        let es = |networking: Value, tags: Value| -> Vec<(String, String)> {
            let es: ExternalService =
                serde_json::from_value(json!({"networking": networking, "tags": tags})).unwrap();
            es.validate()
                .violations
                .into_iter()
                .map(|v| (v.field, v.message))
                .collect()
        };
        let svc = json!({"kuma.io/service": "backend"});
        let addr = |a: &str| es(json!({"address": a}), svc.clone());
        for ok in [
            "192.168.0.1:8080",
            "example.com:8080",
            "[fd00:a123::1]:8080",
            "kuma-3_postgres_1x:5432",
            "db_1.:5432",
        ] {
            assert_eq!(addr(ok), [], "{ok}");
        }
        let at = |msgs: &[&str]| -> Vec<(String, String)> {
            msgs.iter()
                .map(|m| ("networking.address".to_owned(), (*m).to_owned()))
                .collect()
        };
        let all4 = [
            "unable to parse address",
            "address has to be a valid IP address or a domain name",
            "unable to parse port in address",
            "port must be in the range [1, 65535]",
        ];
        assert_eq!(addr(""), at(&["address can't be empty"]));
        assert_eq!(addr("..>_<..:8080"), at(&[all4[1]]));
        assert_eq!(addr("http://example.com:8080"), at(&all4));
        assert_eq!(addr("fd00:1234::1:8080"), at(&all4));
        assert_eq!(addr("192.168.0.1:65536"), at(&[all4[3]]));
        assert_eq!(addr("192.168.0.1:0"), at(&[all4[3]]));
        assert_eq!(addr("192.168.0.1:+80"), at(&[all4[2], all4[3]]));
        assert_eq!(
            es(
                json!({"address": "192.168.0.1:8080", "tls": {"serverName": ""}}),
                svc.clone()
            ),
            [(
                "networking.tls.serverName".to_owned(),
                "cannot be empty".to_owned()
            )]
        );
        assert_eq!(
            es(
                json!({"address": "192.168.0.1:8080", "tls": {"caCert": {}, "clientCert": {"secret": "s"}, "clientKey": {"inline": ""}}}),
                svc.clone()
            ),
            [
                (
                    "networking.tls.caCert".to_owned(),
                    "data source cannot be empty".to_owned()
                ),
                (
                    "networking.tls.clientKey".to_owned(),
                    "data source cannot be empty".to_owned()
                ),
            ]
        );
        assert_eq!(
            es(json!({"address": "192.168.0.1:8080"}), json!({})),
            [(
                "tags".to_owned(),
                "mandatory tag \"kuma.io/service\" is missing".to_owned()
            )]
        );
        assert_eq!(
            es(
                json!({"address": "httpbin.org:443"}),
                json!({"kuma.io/service": "httpbin.org"})
            ),
            [(
                "tags[\"kuma.io/service\"]".to_owned(),
                "cannot be the same as networking.address".to_owned()
            )]
        );
    }
}
