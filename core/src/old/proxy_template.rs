//! Old ProxyTemplate policy: profiles to import, raw xDS resources to add and modifications of
//! the generated clusters, listeners, filters and virtual hosts, for dataplanes matching
//! `selectors`; and its validator.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/proxy_template.proto` (shape, JSON names),
//! `api/mesh/v1alpha1/proxy_template_operations.go` (operation names) and
//! `pkg/core/resources/apis/mesh/proxytemplate_validator.go` (rules).
//!
//! Kuma behaviours reproduced on purpose:
//! - `selectors` may be empty; each selector needs a tag and `kuma.io/service`;
//! - imports are checked against the profiles a Kuma CP registers (`default-proxy`,
//!   `egress-proxy`, `gateway-proxy`, `ingress-proxy`), listed sorted and comma-joined;
//! - for `add`, a cluster or listener may not have any `match` (even `match: {}`), a virtual
//!   host may not have `match.name`; filters added before/after another one need `match.name`,
//!   and so does a filter `patch`; `remove` accepts anything;
//! - an unknown operation reports only the operation, not the value.
//!
//! Envoy texts (`value`, `resource`) are only checked the way Kuma's loader reads them before
//! it looks at Envoy's protos: YAML (or, when that fails, the first JSON value, reporting Go's
//! `encoding/json` errors such as `unexpected EOF`), which must be a mapping (or empty for
//! `value`), and for `resource` a mapping with a string `@type`. Messages have Kuma's shape,
//! `native Envoy resource is not valid: ...`. Whether the text is a valid Envoy message (field
//! names, types, Envoy's own constraints) is left to the xDS layer.
//!
//! Unlike Kuma's lenient loader, unknown fields are rejected when decoding, and so is a
//! modification setting more than one of `cluster`, `listener`, `networkFilter`, `httpFilter`,
//! `virtualHost` (Kuma silently keeps the last one).

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::old::null_as_default;
use crate::old::selectors::{deserialize_selectors, validate_selectors, Selector, SelectorRules};
use crate::policies::go_json::{load_like_kuma, Loaded};
use crate::validate::{go_quote, must_have_only_one, PathBuilder, ValidationError};

/// Profiles a Kuma 2.7 control plane registers, usable in `conf.imports`.
pub const KUMA_PROFILES: &[&str] = &[
    "default-proxy",
    "egress-proxy",
    "gateway-proxy",
    "ingress-proxy",
];

/// Kuma's message for a missing required value.
const CANNOT_BE_EMPTY: &str = "cannot be empty";
/// Prefix of every Envoy text problem.
const NOT_VALID: &str = "native Envoy resource is not valid: ";

/// ProxyTemplate spec: which dataplanes (`selectors`) get which extra xDS configuration (`conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyTemplate {
    /// Selectors of the dataplanes the template applies to.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<Selector>,
    /// The configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<ProxyTemplateConf>,
}

/// `conf` of a ProxyTemplate (Kuma's `ProxyTemplate.Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyTemplateConf {
    /// Profiles whose generated configuration is included (`default-proxy`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub imports: Vec<String>,
    /// Raw xDS resources added as they are.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<RawResource>,
    /// Modifications of the generated configuration, applied in order.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub modifications: Vec<Modification>,
}

/// One raw xDS resource (Kuma's `ProxyTemplateRawResource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawResource {
    /// Name distinguishing it from other resources of the same type.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Resource version, so xDS can track it.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub version: String,
    /// The resource as YAML or JSON, with an `@type` naming its Envoy message.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub resource: String,
}

/// Operation of a modification, as Kuma spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `add` (clusters, listeners, virtual hosts).
    Add,
    /// `addFirst` (filters).
    AddFirst,
    /// `addLast` (filters).
    AddLast,
    /// `addBefore` (filters, relative to `match.name`).
    AddBefore,
    /// `addAfter` (filters, relative to `match.name`).
    AddAfter,
    /// `patch`: merge `value` into the matching resources.
    Patch,
    /// `remove`: delete the matching resources.
    Remove,
}

impl Operation {
    /// Operations of cluster, listener and virtual host modifications.
    pub const RESOURCE_OPERATIONS: &'static [Operation] =
        &[Operation::Add, Operation::Patch, Operation::Remove];
    /// Operations of network and HTTP filter modifications.
    pub const FILTER_OPERATIONS: &'static [Operation] = &[
        Operation::AddFirst,
        Operation::AddLast,
        Operation::AddBefore,
        Operation::AddAfter,
        Operation::Patch,
        Operation::Remove,
    ];

    /// Parse Kuma's spelling (`addFirst`); case-sensitive like Kuma.
    pub fn parse(s: &str) -> Option<Operation> {
        Some(match s {
            "add" => Operation::Add,
            "addFirst" => Operation::AddFirst,
            "addLast" => Operation::AddLast,
            "addBefore" => Operation::AddBefore,
            "addAfter" => Operation::AddAfter,
            "patch" => Operation::Patch,
            "remove" => Operation::Remove,
            _ => return None,
        })
    }

    /// Kuma's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Add => "add",
            Operation::AddFirst => "addFirst",
            Operation::AddLast => "addLast",
            Operation::AddBefore => "addBefore",
            Operation::AddAfter => "addAfter",
            Operation::Patch => "patch",
            Operation::Remove => "remove",
        }
    }
}

/// One entry of `conf.modifications`: exactly one kind of modification, or none (`{}`, which
/// Kuma accepts and ignores).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Modification {
    /// `cluster`: add, patch or remove clusters.
    Cluster(ClusterModification),
    /// `listener`: add, patch or remove listeners.
    Listener(ListenerModification),
    /// `networkFilter`: add, patch or remove network filters of listeners.
    NetworkFilter(FilterModification),
    /// `httpFilter`: add, patch or remove HTTP filters of HTTP connection managers.
    HttpFilter(FilterModification),
    /// `virtualHost`: add, patch or remove virtual hosts of route configurations.
    VirtualHost(VirtualHostModification),
    /// An entry without any modification.
    #[default]
    Empty,
}

/// A `cluster`, `listener`, `networkFilter`, `httpFilter` or `virtualHost` modification; `M` is
/// the kind's `match`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModificationOf<M> {
    /// `match`: only matching resources are modified (absent: all).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<M>,
    /// `add`, `patch` or `remove` for clusters, listeners and virtual hosts; `addFirst`,
    /// `addLast`, `addBefore`, `addAfter`, `patch` or `remove` for filters.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub operation: String,
    /// The Envoy resource (for adds) or the fields to merge (for `patch`), as YAML.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
}

/// `cluster` modification.
pub type ClusterModification = ModificationOf<ClusterMatch>;
/// `listener` modification.
pub type ListenerModification = ModificationOf<ListenerMatch>;
/// `networkFilter` or `httpFilter` modification.
pub type FilterModification = ModificationOf<FilterMatch>;
/// `virtualHost` modification.
pub type VirtualHostModification = ModificationOf<VirtualHostMatch>;

/// `match` of a cluster modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterMatch {
    /// Origin of the generated resource (`inbound`, `outbound`, `prometheus`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub origin: String,
    /// Cluster name.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
}

/// `match` of a listener modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerMatch {
    /// Origin of the generated resource (`inbound`, `outbound`, `prometheus`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub origin: String,
    /// Listener name.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Tags of the listener's `io.kuma.tags` filter metadata.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tags: BTreeMap<String, String>,
}

/// `match` of a network or HTTP filter modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterMatch {
    /// Origin of the generated resource (`inbound`, `outbound`, `prometheus`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub origin: String,
    /// Filter name (the anchor of `addBefore`/`addAfter`, the target of `patch`).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Name of the listener holding the filter.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub listener_name: String,
    /// Tags of the listener's `io.kuma.tags` filter metadata.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub listener_tags: BTreeMap<String, String>,
}

/// `match` of a virtual host modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHostMatch {
    /// Origin of the generated resource (`inbound`, `outbound`, `prometheus`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub origin: String,
    /// Virtual host name.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Name of the route configuration holding the virtual host.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub route_configuration_name: String,
}

/// Wire form of [`Modification`] (Kuma's `oneof type`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ModificationIn {
    #[serde(default)]
    cluster: Option<ClusterModification>,
    #[serde(default)]
    listener: Option<ListenerModification>,
    #[serde(default)]
    network_filter: Option<FilterModification>,
    #[serde(default)]
    http_filter: Option<FilterModification>,
    #[serde(default)]
    virtual_host: Option<VirtualHostModification>,
}

/// Borrowed wire form of [`Modification`], for encoding.
#[derive(Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct ModificationOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<&'a ClusterModification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listener: Option<&'a ListenerModification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    network_filter: Option<&'a FilterModification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_filter: Option<&'a FilterModification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    virtual_host: Option<&'a VirtualHostModification>,
}

/// JSON names of the modification kinds, in Kuma's field order.
const MODIFICATION_KINDS: &[&str] = &[
    "cluster",
    "listener",
    "networkFilter",
    "httpFilter",
    "virtualHost",
];

impl<'de> Deserialize<'de> for Modification {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: ModificationIn = Option::deserialize(d)?.unwrap_or_default();
        let mut kinds = Vec::with_capacity(1);
        if let Some(m) = raw.cluster {
            kinds.push(Modification::Cluster(m));
        }
        if let Some(m) = raw.listener {
            kinds.push(Modification::Listener(m));
        }
        if let Some(m) = raw.network_filter {
            kinds.push(Modification::NetworkFilter(m));
        }
        if let Some(m) = raw.http_filter {
            kinds.push(Modification::HttpFilter(m));
        }
        if let Some(m) = raw.virtual_host {
            kinds.push(Modification::VirtualHost(m));
        }
        match kinds.len() {
            0 => Ok(Modification::Empty),
            1 => Ok(kinds.pop().unwrap_or_default()),
            _ => Err(D::Error::custom(must_have_only_one(
                "modification",
                MODIFICATION_KINDS,
            ))),
        }
    }
}

impl Serialize for Modification {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = ModificationOut::default();
        match self {
            Modification::Cluster(m) => out.cluster = Some(m),
            Modification::Listener(m) => out.listener = Some(m),
            Modification::NetworkFilter(m) => out.network_filter = Some(m),
            Modification::HttpFilter(m) => out.http_filter = Some(m),
            Modification::VirtualHost(m) => out.virtual_host = Some(m),
            Modification::Empty => {}
        }
        out.serialize(s)
    }
}

impl<M> ModificationOf<M> {
    /// The parsed operation (`None` when Kuma would not know it).
    pub fn op(&self) -> Option<Operation> {
        Operation::parse(&self.operation)
    }
}

impl ProxyTemplate {
    /// Kuma's `ProxyTemplateResource.Validate` with the profiles of a Kuma CP
    /// ([`KUMA_PROFILES`]).
    pub fn validate(&self) -> ValidationError {
        self.validate_with_profiles(KUMA_PROFILES)
    }

    /// Kuma's `ValidateWithProfiles`: selectors, then imports, raw resources and
    /// modifications, with `profiles` as the importable profiles.
    pub fn validate_with_profiles(&self, profiles: &[&str]) -> ValidationError {
        let mut err = validate_selectors(
            &PathBuilder::root().field("selectors"),
            &self.selectors,
            &SelectorRules {
                require_at_least_one_tag: true,
                require_service: true,
                ..SelectorRules::default()
            },
        );
        let Some(conf) = &self.conf else {
            return err;
        };
        let root = PathBuilder::root().field("conf");
        let mut available: Vec<&str> = profiles.to_vec();
        available.sort_unstable();
        available.dedup();
        for (i, import) in conf.imports.iter().enumerate() {
            let path = root.field("imports").index(i);
            if import.is_empty() {
                err.violation(&path, CANNOT_BE_EMPTY);
            } else if !available.contains(&import.as_str()) {
                err.violation(
                    &path,
                    format!(
                        "profile not found. Available profiles: {}",
                        available.join(",")
                    ),
                );
            }
        }
        for (i, resource) in conf.resources.iter().enumerate() {
            let path = root.field("resources").index(i);
            if resource.name.is_empty() {
                err.violation(&path.field("name"), CANNOT_BE_EMPTY);
            }
            if resource.version.is_empty() {
                err.violation(&path.field("version"), CANNOT_BE_EMPTY);
            }
            let path = path.field("resource");
            if resource.resource.is_empty() {
                err.violation(&path, CANNOT_BE_EMPTY);
            } else if let Err(e) = check_raw_resource(&resource.resource) {
                err.violation(&path, format!("{NOT_VALID}{e}"));
            }
        }
        for (i, modification) in conf.modifications.iter().enumerate() {
            let path = root.field("modifications").index(i);
            validate_modification(&mut err, &path, modification);
        }
        err
    }
}

/// Kuma's `validateModification` for one entry at `path` (`conf.modifications[i]`).
fn validate_modification(err: &mut ValidationError, path: &PathBuilder, m: &Modification) {
    match m {
        Modification::Cluster(c) => {
            validate_resource_modification(err, &path.field("cluster"), c);
        }
        Modification::Listener(l) => {
            validate_resource_modification(err, &path.field("listener"), l);
        }
        Modification::NetworkFilter(f) => {
            validate_filter_modification(err, &path.field("networkFilter"), f);
        }
        Modification::HttpFilter(f) => {
            validate_filter_modification(err, &path.field("httpFilter"), f);
        }
        Modification::VirtualHost(vh) => {
            let path = path.field("virtualHost");
            match vh.op() {
                Some(Operation::Add) => {
                    if vh.matcher.as_ref().is_some_and(|m| !m.name.is_empty()) {
                        err.violation(&path.field("match").field("name"), "cannot be defined");
                    }
                    check_value(err, &path, &vh.value);
                }
                Some(Operation::Patch) => check_value(err, &path, &vh.value),
                Some(Operation::Remove) => {}
                _ => invalid_operation(err, &path, Operation::RESOURCE_OPERATIONS),
            }
        }
        Modification::Empty => {}
    }
}

/// Cluster and listener modifications: `add` forbids any `match`.
fn validate_resource_modification<M>(
    err: &mut ValidationError,
    path: &PathBuilder,
    m: &ModificationOf<M>,
) {
    match m.op() {
        Some(Operation::Add) => {
            if m.matcher.is_some() {
                err.violation(&path.field("match"), "cannot be defined");
            }
            check_value(err, path, &m.value);
        }
        Some(Operation::Patch) => check_value(err, path, &m.value),
        Some(Operation::Remove) => {}
        _ => invalid_operation(err, path, Operation::RESOURCE_OPERATIONS),
    }
}

/// Network and HTTP filter modifications.
fn validate_filter_modification(
    err: &mut ValidationError,
    path: &PathBuilder,
    f: &FilterModification,
) {
    let no_name = f.matcher.as_ref().is_none_or(|m| m.name.is_empty());
    let name_path = path.field("match").field("name");
    match f.op() {
        Some(Operation::AddFirst | Operation::AddLast) => check_value(err, path, &f.value),
        Some(Operation::AddBefore) => {
            if no_name {
                err.violation(
                    &name_path,
                    "cannot be empty. You need to pick a filter before which this one will be added",
                );
            }
            check_value(err, path, &f.value);
        }
        Some(Operation::AddAfter) => {
            if no_name {
                err.violation(
                    &name_path,
                    "cannot be empty. You need to pick a filter after which this one will be added",
                );
            }
            check_value(err, path, &f.value);
        }
        Some(Operation::Patch) => {
            if no_name {
                err.violation(&name_path, CANNOT_BE_EMPTY);
            }
            check_value(err, path, &f.value);
        }
        Some(Operation::Remove) => {}
        _ => invalid_operation(err, path, Operation::FILTER_OPERATIONS),
    }
}

/// `invalid operation. Available operations: "add", "patch", "remove"` at `path.operation`.
fn invalid_operation(err: &mut ValidationError, path: &PathBuilder, allowed: &[Operation]) {
    let names: Vec<String> = allowed.iter().map(|op| go_quote(op.as_str())).collect();
    err.violation(
        &path.field("operation"),
        format!(
            "invalid operation. Available operations: {}",
            names.join(", ")
        ),
    );
}

/// Check a modification's `value` at `path.value`: empty or a mapping.
fn check_value(err: &mut ValidationError, path: &PathBuilder, value: &str) {
    let problem = match load_like_kuma(value) {
        Ok(Loaded::Null | Loaded::Object(_)) => return,
        Ok(Loaded::Other(kind)) => cannot_unmarshal(kind.go_name()),
        Err(e) => e.to_string(),
    };
    err.violation(&path.field("value"), format!("{NOT_VALID}{problem}"));
}

/// Check a raw resource the way Kuma's `envoy.ResourceFromYaml` reads it into an `Any`
/// (before resolving `@type`).
fn check_raw_resource(text: &str) -> Result<(), String> {
    let object = match load_like_kuma(text).map_err(|e| e.to_string())? {
        Loaded::Null => return Err("proto: invalid empty type URL".to_owned()),
        Loaded::Other(kind) => return Err(cannot_unmarshal(kind.go_name())),
        Loaded::Object(None) => return Ok(()),
        Loaded::Object(Some(object)) => object,
    };
    match object.get("@type") {
        None => Err("Any JSON doesn't have '@type'".to_owned()),
        Some(Value::Null) => Err("could not resolve Any message type: ".to_owned()),
        Some(Value::String(url)) if url.is_empty() => {
            Err("could not resolve Any message type: ".to_owned())
        }
        Some(Value::String(_)) => Ok(()),
        Some(other) => Err(format!(
            "can't unmarshal Any's '@type': {}",
            go_quote(&other.to_string())
        )),
    }
}

/// Go's error for a JSON value that is not an object where a message is expected.
fn cannot_unmarshal(kind: &str) -> String {
    format!("json: cannot unmarshal {kind} into Go value of type map[string]json.RawMessage")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{
        self, assert_round_trip, decodes, document, pairs, v, yaml_value,
    };

    fn decode(spec: &str) -> ProxyTemplate {
        test_support::decode(spec)
    }

    /// Violations with Kuma's validator-test profiles.
    fn violations(spec: &str) -> Vec<(String, String)> {
        pairs(decode(spec).validate_with_profiles(&[
            "default-proxy",
            "egress-proxy",
            "ingress-proxy",
        ]))
    }

    fn assert_valid(spec: &str) {
        let pt = decode(spec);
        assert!(
            pt.validate_with_profiles(&["default-proxy"])
                .violations
                .is_empty(),
            "{spec}: {:?}",
            pt.validate_with_profiles(&["default-proxy"])
        );
        assert_round_trip(&document::<ProxyTemplate>(spec));
    }

    const SELECTORS: &str = "selectors:\n- match:\n    kuma.io/service: backend\n";

    fn with_selectors(conf: &str) -> String {
        format!("{SELECTORS}{}", conf.trim_start_matches('\n'))
    }

    const EOF_MSG: &str = "native Envoy resource is not valid: unexpected EOF";

    #[test]
    fn kuma_full_example() {
        let conf = r#"
conf:
  imports:
  - default-proxy
  resources:
  - name: additional
    version: v1
    resource: | 
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      connection_pool_per_downstream_connection: true # V3 only setting
      connectTimeout: 5s
      loadAssignment:
        clusterName: localhost:8443
        endpoints:
          - lbEndpoints:
              - endpoint:
                  address:
                    socketAddress:
                      address: 127.0.0.1
                      portValue: 8443
      name: localhost:8443
      type: STATIC
"#;
        let spec = with_selectors(conf);
        assert_valid(&spec);
        assert!(decode(&spec).validate().violations.is_empty());
        let pt = decode(&spec);
        let conf = pt.conf.unwrap();
        assert_eq!(conf.imports, ["default-proxy"]);
        assert_eq!(conf.resources[0].name, "additional");
        assert!(conf.resources[0].resource.contains("connectTimeout: 5s"));
        assert_valid(SELECTORS);
    }

    #[test]
    fn kuma_cluster_and_listener_modifications() {
        assert_valid(&with_selectors(
            "
conf:
  modifications:
  - cluster:
      operation: add
      value: |
        name: xyz
        connectTimeout: 5s
        type: STATIC
  - cluster:
      operation: patch
      value: |
        connectTimeout: 5s
  - cluster:
      operation: patch
      match:
        name: inbound:127.0.0.1:8080
      value: |
        connectTimeout: 5s
  - cluster:
      operation: patch
      match:
        origin: inbound
      value: |
        connectTimeout: 5s
  - cluster:
      operation: remove
  - cluster:
      operation: remove
      match:
        name: inbound:127.0.0.1:8080
  - cluster:
      operation: remove
      match:
        origin: inbound
",
        ));
        assert_valid(&with_selectors(
            "
conf:
  modifications:
  - listener:
      operation: add
      value: |
        name: xyz
        address:
          socketAddress:
            address: 192.168.0.1
            portValue: 8080
  - listener:
      operation: patch
      match:
        name: inbound:127.0.0.1:8080
        tags:
          kuma.io/service: backend
      value: |
        address:
          socketAddress:
            portValue: 8080
  - listener:
      operation: remove
      match:
        origin: inbound
",
        ));
    }

    #[test]
    fn kuma_filter_modifications() {
        assert_valid(&with_selectors(
            "
conf:
  modifications:
  - networkFilter:
      operation: addFirst
      value: |
        name: envoy.filters.network.tcp_proxy
        typedConfig:
          '@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          cluster: backend
  - networkFilter:
      operation: addBefore
      match:
        name: envoy.filters.network.direct_response
      value: |
        name: envoy.filters.network.tcp_proxy
  - networkFilter:
      operation: addAfter
      match:
        name: envoy.filters.network.direct_response
        listenerName: inbound:127.0.0.0:8080
      value: |
        name: envoy.filters.network.tcp_proxy
  - networkFilter:
      operation: patch
      match:
        name: envoy.filters.network.tcp_proxy
        listenerName: inbound:127.0.0.0:8080
        listenerTags:
          kuma.io/service: backend
      value: |
        name: envoy.filters.network.tcp_proxy
  - networkFilter:
      operation: remove
  - httpFilter:
      operation: addLast
      value: |
        name: envoy.filters.http.router
        typedConfig:
          '@type': type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          dynamicStats: false
  - httpFilter:
      operation: addAfter
      match:
        name: envoy.filters.http.router
      value: |
        name: envoy.filters.http.gzip
  - httpFilter:
      operation: remove
",
        ));
    }

    #[test]
    fn kuma_virtual_host_modifications() {
        let spec = with_selectors(
            "
conf:
  modifications:
  - virtualHost:
      operation: add
      match:
        origin: outbound
        routeConfigurationName: outbound:backend
      value: |
        name: backend
        domains:
        - backend.com
        routes:
        - match:
            prefix: /
          route:
            cluster: backend
  - virtualHost:
      operation: patch
      match:
        routeConfigurationName: outbound:backend
        name: backend
      value: |
        retryPolicy:
          retryOn: 5xx
          numRetries: 3
  - cluster:
      operation: remove
      match:
        origin: inbound
",
        );
        assert_valid(&spec);
        let pt = decode(&spec);
        let Modification::VirtualHost(vh) = &pt.conf.as_ref().unwrap().modifications[0] else {
            panic!("not a virtual host modification");
        };
        assert_eq!(vh.op(), Some(Operation::Add));
        assert_eq!(
            vh.matcher.as_ref().unwrap().route_configuration_name,
            "outbound:backend"
        );
        // Kuma's own fixture gives a cluster match a `routeConfigurationName`, which its
        // lenient loader ignores; Umbra rejects the unknown field.
        assert!(!decodes::<ProxyTemplate>(&with_selectors(
                "conf:\n  modifications:\n  - cluster:\n      operation: remove\n      match:\n        routeConfigurationName: outbound:backend\n"
            )
        ));
    }

    #[test]
    fn kuma_imports() {
        assert_eq!(
            violations(&with_selectors("conf:\n  imports:\n  - \"\"\n")),
            [v("conf.imports[0]", "cannot be empty")]
        );
        assert_eq!(
            violations(&with_selectors("conf:\n  imports:\n  - unknown-profile\n")),
            [v(
                "conf.imports[0]",
                "profile not found. Available profiles: default-proxy,egress-proxy,ingress-proxy"
            )]
        );
        // The profiles of a running Kuma CP.
        assert_eq!(
            pairs(decode(&with_selectors("conf:\n  imports:\n  - custom\n  - gateway-proxy\n")).validate()),
            [v(
                "conf.imports[0]",
                "profile not found. Available profiles: default-proxy,egress-proxy,gateway-proxy,ingress-proxy"
            )]
        );
    }

    #[test]
    fn kuma_resources_with_empty_fields() {
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  resources:\n  - name:\n    version:\n    resource:\n"
            )),
            [
                v("conf.resources[0].name", "cannot be empty"),
                v("conf.resources[0].version", "cannot be empty"),
                v("conf.resources[0].resource", "cannot be empty"),
            ]
        );
    }

    #[test]
    fn kuma_selectors() {
        assert_eq!(
            violations("selectors:\n- match:\n"),
            [
                v("selectors[0].match", "must have at least one tag"),
                v(
                    "selectors[0].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
            ]
        );
        assert_eq!(
            violations("selectors:\n- match:\n    \"\": asdf\n"),
            [
                v("selectors[0].match", "tag name must be non-empty"),
                v(
                    "selectors[0].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
            ]
        );
        assert_eq!(
            violations("selectors:\n- match:\n    kuma.io/service:\n"),
            [v(
                "selectors[0].match[\"kuma.io/service\"]",
                "tag value must be non-empty"
            )]
        );
        // No selector at all is fine in Kuma 2.7.
        assert!(violations("").is_empty());
    }

    #[test]
    fn kuma_invalid_resources() {
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  resources:\n  - name: additional\n    version: v1\n    resource: not-envoy-resource\n"
            )),
            [v(
                "conf.resources[0].resource",
                "native Envoy resource is not valid: json: cannot unmarshal string into Go value of type map[string]json.RawMessage"
            )]
        );
        // Kuma's Envoy-level check (`invalid Cluster.Name: ...`) belongs to the xDS layer: the
        // text itself is a well-formed `Any`.
        assert!(violations(&with_selectors(
            "
conf:
  resources:
  - name: additional
    version: v1
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      loadAssignment:
        clusterName: localhost:8443
"
        ))
        .is_empty());
    }

    #[test]
    fn raw_resource_any_checks() {
        let check = |s: &str| check_raw_resource(s).err();
        assert_eq!(
            check("name: x"),
            Some("Any JSON doesn't have '@type'".into())
        );
        assert_eq!(
            check("'@type': 12"),
            Some("can't unmarshal Any's '@type': \"12\"".into())
        );
        assert_eq!(
            check("'@type': [a]"),
            Some("can't unmarshal Any's '@type': \"[\\\"a\\\"]\"".into())
        );
        assert_eq!(
            check("'@type': ''"),
            Some("could not resolve Any message type: ".into())
        );
        assert_eq!(
            check("'@type':"),
            Some("could not resolve Any message type: ".into())
        );
        assert_eq!(
            check("# only a comment"),
            Some("proto: invalid empty type URL".into())
        );
        assert_eq!(
            check("[1]"),
            Some(
                "json: cannot unmarshal array into Go value of type map[string]json.RawMessage"
                    .into()
            )
        );
        assert_eq!(check("{\"@type\": \"x\""), Some("unexpected EOF".into()));
        assert_eq!(check("{\"@type\": \"type.googleapis.com/x\"}"), None);
    }

    #[test]
    fn kuma_invalid_cluster_and_listener_modifications() {
        for kind in ["cluster", "listener"] {
            let spec = with_selectors(&format!(
                "
conf:
  modifications:
  - {kind}:
      operation: addFirst
  - {kind}:
      operation: add
      value: '{{'
  - {kind}:
      operation: patch
      value: '{{'
  - {kind}:
      operation: add
      match:
        name: inbound:127.0.0.1:80
      value: |
        name: xyz
"
            ));
            let p = |i: usize, f: &str| format!("conf.modifications[{i}].{kind}.{f}");
            assert_eq!(
                violations(&spec),
                [
                    v(
                        &p(0, "operation"),
                        "invalid operation. Available operations: \"add\", \"patch\", \"remove\""
                    ),
                    v(&p(1, "value"), EOF_MSG),
                    v(&p(2, "value"), EOF_MSG),
                    v(&p(3, "match"), "cannot be defined"),
                ],
                "{kind}"
            );
        }
        // Even an empty match counts as defined for `add`.
        assert_eq!(
            violations(&with_selectors(
                "conf:\n  modifications:\n  - cluster:\n      operation: add\n      match: {}\n"
            )),
            [v(
                "conf.modifications[0].cluster.match",
                "cannot be defined"
            )]
        );
    }

    #[test]
    fn kuma_invalid_filter_operations() {
        for kind in ["networkFilter", "httpFilter"] {
            let spec = with_selectors(&format!(
                "
conf:
  modifications:
  - {kind}:
      operation: addFirst
      value: '{{'
  - {kind}:
      operation: addBefore
      value: '{{'
  - {kind}:
      operation: addAfter
      value: '{{'
  - {kind}:
      operation: patch
      value: '{{'
  - {kind}:
      operation: add
      value: '{{'
"
            ));
            let p = |i: usize, f: &str| format!("conf.modifications[{i}].{kind}.{f}");
            assert_eq!(
                violations(&spec),
                [
                    v(&p(0, "value"), EOF_MSG),
                    v(
                        &p(1, "match.name"),
                        "cannot be empty. You need to pick a filter before which this one will be added"
                    ),
                    v(&p(1, "value"), EOF_MSG),
                    v(
                        &p(2, "match.name"),
                        "cannot be empty. You need to pick a filter after which this one will be added"
                    ),
                    v(&p(2, "value"), EOF_MSG),
                    v(&p(3, "match.name"), "cannot be empty"),
                    v(&p(3, "value"), EOF_MSG),
                    v(
                        &p(4, "operation"),
                        "invalid operation. Available operations: \"addFirst\", \"addLast\", \"addBefore\", \"addAfter\", \"patch\", \"remove\""
                    ),
                ],
                "{kind}"
            );
        }
    }

    #[test]
    fn kuma_invalid_virtual_host_operations() {
        let spec = with_selectors(
            "
conf:
  modifications:
  - virtualHost:
      operation: add
      match:
        name: xyz
      value: '{'
  - virtualHost:
      operation: addFirst
  - virtualHost:
      operation: patch
      value: '{'
",
        );
        assert_eq!(
            violations(&spec),
            [
                v(
                    "conf.modifications[0].virtualHost.match.name",
                    "cannot be defined"
                ),
                v("conf.modifications[0].virtualHost.value", EOF_MSG),
                v(
                    "conf.modifications[1].virtualHost.operation",
                    "invalid operation. Available operations: \"add\", \"patch\", \"remove\""
                ),
                v("conf.modifications[2].virtualHost.value", EOF_MSG),
            ]
        );
    }

    #[test]
    fn value_must_be_a_mapping_or_empty() {
        let spec = with_selectors(
            "
conf:
  modifications:
  - cluster:
      operation: patch
  - cluster:
      operation: patch
      value: just-a-string
  - cluster:
      operation: patch
      value: '- a'
  - cluster:
      operation: patch
      value: '42'
  - cluster:
      operation: patch
      value: 'true'
  - cluster:
      operation: patch
      value: '{\"connectTimeout\": \"5s\"}'
  - cluster:
      operation: patch
      value: 'a: b: c'
  - {}
",
        );
        let msg = |kind: &str| {
            format!("native Envoy resource is not valid: json: cannot unmarshal {kind} into Go value of type map[string]json.RawMessage")
        };
        assert_eq!(
            violations(&spec),
            [
                v("conf.modifications[1].cluster.value", &msg("string")),
                v("conf.modifications[2].cluster.value", &msg("array")),
                v("conf.modifications[3].cluster.value", &msg("number")),
                v("conf.modifications[4].cluster.value", &msg("bool")),
                v(
                    "conf.modifications[6].cluster.value",
                    "native Envoy resource is not valid: invalid character 'a' looking for beginning of value"
                ),
            ]
        );
        assert_eq!(
            decode(&spec).conf.unwrap().modifications[7],
            Modification::Empty
        );
    }

    #[test]
    fn modification_kinds_are_exclusive() {
        let spec = with_selectors(
            "conf:\n  modifications:\n  - cluster:\n      operation: remove\n    listener:\n      operation: remove\n",
        );
        let value = yaml_value(&document::<ProxyTemplate>(&spec));
        let err = crate::resource::Resource::from_value(value).unwrap_err();
        let violations = err.violations();
        assert_eq!(violations[0].field, "conf.modifications[0]");
        assert_eq!(
            violations[0].message,
            "modification must have only one type defined: cluster, listener, networkFilter, httpFilter, virtualHost"
        );
        assert!(!decodes::<ProxyTemplate>(
            "conf:\n  modifications:\n  - route: {}\n"
        ));
        assert!(!decodes::<ProxyTemplate>(
            "conf:\n  imports: default-proxy\n"
        ));
    }

    #[test]
    fn operations_parse() {
        for op in Operation::FILTER_OPERATIONS
            .iter()
            .chain(Operation::RESOURCE_OPERATIONS)
        {
            assert_eq!(Operation::parse(op.as_str()), Some(*op));
        }
        assert_eq!(Operation::parse("Add"), None);
    }
}
