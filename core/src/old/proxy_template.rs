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
use serde_json::{Map, Value};

use crate::codec::{decode_documents, CodecError, Limits};
use crate::old::traffic_permission::{
    deserialize_selectors, null_as_default, validate_selectors, SelectorRules,
};
use crate::old::Selector;
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

/// `cluster` modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterModification {
    /// `match`: only matching clusters are modified (absent: all).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ClusterMatch>,
    /// `add`, `patch` or `remove`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub operation: String,
    /// The Envoy cluster (for `add`) or the fields to merge (for `patch`), as YAML.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
}

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

/// `listener` modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerModification {
    /// `match`: only matching listeners are modified (absent: all).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ListenerMatch>,
    /// `add`, `patch` or `remove`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub operation: String,
    /// The Envoy listener (for `add`) or the fields to merge (for `patch`), as YAML.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
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

/// `networkFilter` or `httpFilter` modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterModification {
    /// `match`: only matching filters (of matching listeners) are modified.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<FilterMatch>,
    /// `addFirst`, `addLast`, `addBefore`, `addAfter`, `patch` or `remove`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub operation: String,
    /// The Envoy filter (for adds) or the fields to merge (for `patch`), as YAML.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
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

/// `virtualHost` modification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHostModification {
    /// `match`: only matching virtual hosts (of matching route configurations) are modified.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<VirtualHostMatch>,
    /// `add`, `patch` or `remove`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub operation: String,
    /// The Envoy virtual host (for `add`) or the fields to merge (for `patch`), as YAML.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
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

impl ClusterModification {
    /// The parsed operation (`None` when Kuma would not know it).
    pub fn op(&self) -> Option<Operation> {
        Operation::parse(&self.operation)
    }
}

impl ListenerModification {
    /// The parsed operation (`None` when Kuma would not know it).
    pub fn op(&self) -> Option<Operation> {
        Operation::parse(&self.operation)
    }
}

impl FilterModification {
    /// The parsed operation (`None` when Kuma would not know it).
    pub fn op(&self) -> Option<Operation> {
        Operation::parse(&self.operation)
    }
}

impl VirtualHostModification {
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
        Modification::Cluster(c) => validate_resource_modification(
            err,
            &path.field("cluster"),
            &c.operation,
            c.matcher.is_some(),
            &c.value,
        ),
        Modification::Listener(l) => validate_resource_modification(
            err,
            &path.field("listener"),
            &l.operation,
            l.matcher.is_some(),
            &l.value,
        ),
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
fn validate_resource_modification(
    err: &mut ValidationError,
    path: &PathBuilder,
    operation: &str,
    has_match: bool,
    value: &str,
) {
    match Operation::parse(operation) {
        Some(Operation::Add) => {
            if has_match {
                err.violation(&path.field("match"), "cannot be defined");
            }
            check_value(err, path, value);
        }
        Some(Operation::Patch) => check_value(err, path, value),
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
        Ok(Loaded::Other(kind)) => cannot_unmarshal(kind),
        Err(e) => e,
    };
    err.violation(&path.field("value"), format!("{NOT_VALID}{problem}"));
}

/// Check a raw resource the way Kuma's `envoy.ResourceFromYaml` reads it into an `Any`
/// (before resolving `@type`).
fn check_raw_resource(text: &str) -> Result<(), String> {
    let object = match load_like_kuma(text)? {
        Loaded::Null => return Err("proto: invalid empty type URL".to_owned()),
        Loaded::Other(kind) => return Err(cannot_unmarshal(kind)),
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

/// An Envoy text as Kuma's loader sees it.
enum Loaded {
    /// Empty text or `null`.
    Null,
    /// A mapping (`None` when it could only be scanned, not inspected).
    Object(Option<Map<String, Value>>),
    /// Anything else, named like Go's `encoding/json` does (`string`, `number`, ...).
    Other(&'static str),
}

/// Read `text` like Kuma's `yaml.YAMLToJSON` + `jsonpb`: the first YAML document, or, when the
/// text is not YAML, the first JSON value of the raw text (with Go's JSON errors).
fn load_like_kuma(text: &str) -> Result<Loaded, String> {
    match decode_documents(text.as_bytes(), Limits::default()) {
        Ok(docs) => Ok(match docs.into_iter().next() {
            None | Some(Value::Null) => Loaded::Null,
            Some(Value::Object(o)) => Loaded::Object(Some(o)),
            Some(Value::Array(_)) => Loaded::Other("array"),
            Some(Value::String(_)) => Loaded::Other("string"),
            Some(Value::Number(_)) => Loaded::Other("number"),
            Some(Value::Bool(_)) => Loaded::Other("bool"),
        }),
        Err(CodecError::Syntax(_) | CodecError::Unsupported(_)) => {
            let (kind, raw) = go_first_json_value(text)?;
            Ok(match kind {
                JsonKind::Null => Loaded::Null,
                JsonKind::Object => Loaded::Object(serde_json::from_str(raw).ok()),
                JsonKind::Array => Loaded::Other("array"),
                JsonKind::String => Loaded::Other("string"),
                JsonKind::Number => Loaded::Other("number"),
                JsonKind::Bool => Loaded::Other("bool"),
            })
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Kind of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonKind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// Where a container is in Go's scanner (`parseObjectKey`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nest {
    ObjectKey,
    ObjectValue,
    Array,
}

/// States of Go's `encoding/json` scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    Digits,
    Dot,
    DotDigits,
    Exp,
    ExpSign,
    ExpDigits,
    Literal(&'static str, usize),
}

/// Go's `maxNestingDepth`.
const MAX_JSON_DEPTH: usize = 10_000;

/// The first JSON value of `text` as Go's `json.Decoder.Decode` finds it: its kind and text,
/// or Go's error (`unexpected EOF`, `invalid character 'x' looking for beginning of value`).
fn go_first_json_value(text: &str) -> Result<(JsonKind, &str), String> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Nest> = Vec::new();
    let mut state = Scan::BeginValue;
    let mut first: Option<(JsonKind, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let mut advance = true;
        match state {
            Scan::BeginValue | Scan::BeginValueOrEmpty => {
                if is_json_space(c) {
                    // skip
                } else if state == Scan::BeginValueOrEmpty && c == b']' {
                    state = Scan::EndValue;
                    advance = false;
                } else {
                    let kind = match c {
                        b'{' => JsonKind::Object,
                        b'[' => JsonKind::Array,
                        b'"' => JsonKind::String,
                        b'-' | b'0'..=b'9' => JsonKind::Number,
                        b't' | b'f' => JsonKind::Bool,
                        b'n' => JsonKind::Null,
                        _ => return scan_error(c, "looking for beginning of value"),
                    };
                    if first.is_none() {
                        first = Some((kind, i));
                    }
                    state = match c {
                        b'{' | b'[' => {
                            stack.push(if c == b'{' {
                                Nest::ObjectKey
                            } else {
                                Nest::Array
                            });
                            if stack.len() > MAX_JSON_DEPTH {
                                return scan_error(c, "exceeded max depth");
                            }
                            if c == b'{' {
                                Scan::BeginStringOrEmpty
                            } else {
                                Scan::BeginValueOrEmpty
                            }
                        }
                        b'"' => Scan::InString,
                        b'-' => Scan::Neg,
                        b'0' => Scan::Zero,
                        b'1'..=b'9' => Scan::Digits,
                        b't' => Scan::Literal("true", 1),
                        b'f' => Scan::Literal("false", 1),
                        _ => Scan::Literal("null", 1),
                    };
                }
            }
            Scan::BeginStringOrEmpty => {
                if is_json_space(c) {
                    // skip
                } else if c == b'}' {
                    if let Some(top) = stack.last_mut() {
                        *top = Nest::ObjectValue;
                    }
                    state = Scan::EndValue;
                    advance = false;
                } else {
                    state = Scan::BeginString;
                    advance = false;
                }
            }
            Scan::BeginString => {
                if is_json_space(c) {
                    // skip
                } else if c == b'"' {
                    state = Scan::InString;
                } else {
                    return scan_error(c, "looking for beginning of object key string");
                }
            }
            Scan::EndValue => {
                let Some(top) = stack.last().copied() else {
                    // The top-level value ended before this byte.
                    return Ok(finish(text, first, i));
                };
                if is_json_space(c) {
                    // skip
                } else {
                    match (top, c) {
                        (Nest::ObjectKey, b':') => {
                            if let Some(t) = stack.last_mut() {
                                *t = Nest::ObjectValue;
                            }
                            state = Scan::BeginValue;
                        }
                        (Nest::ObjectKey, _) => return scan_error(c, "after object key"),
                        (Nest::ObjectValue, b',') => {
                            if let Some(t) = stack.last_mut() {
                                *t = Nest::ObjectKey;
                            }
                            state = Scan::BeginString;
                        }
                        (Nest::ObjectValue, b'}') | (Nest::Array, b']') => {
                            stack.pop();
                            if stack.is_empty() {
                                return Ok(finish(text, first, i + 1));
                            }
                        }
                        (Nest::ObjectValue, _) => {
                            return scan_error(c, "after object key:value pair");
                        }
                        (Nest::Array, b',') => state = Scan::BeginValue,
                        (Nest::Array, _) => return scan_error(c, "after array element"),
                    }
                }
            }
            Scan::InString => match c {
                b'"' => {
                    if stack.is_empty() {
                        return Ok(finish(text, first, i + 1));
                    }
                    state = Scan::EndValue;
                }
                b'\\' => state = Scan::InStringEsc,
                c if c < 0x20 => return scan_error(c, "in string literal"),
                _ => {}
            },
            Scan::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => state = Scan::InString,
                b'u' => state = Scan::InStringEscU(0),
                _ => return scan_error(c, "in string escape code"),
            },
            Scan::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return scan_error(c, "in \\u hexadecimal character escape");
                }
                state = if n == 3 {
                    Scan::InString
                } else {
                    Scan::InStringEscU(n + 1)
                };
            }
            Scan::Neg => match c {
                b'0' => state = Scan::Zero,
                b'1'..=b'9' => state = Scan::Digits,
                _ => return scan_error(c, "in numeric literal"),
            },
            Scan::Zero | Scan::Digits => match c {
                b'0'..=b'9' if state == Scan::Digits => {}
                b'.' => state = Scan::Dot,
                b'e' | b'E' => state = Scan::Exp,
                _ => {
                    state = Scan::EndValue;
                    advance = false;
                }
            },
            Scan::Dot => {
                if !c.is_ascii_digit() {
                    return scan_error(c, "after decimal point in numeric literal");
                }
                state = Scan::DotDigits;
            }
            Scan::DotDigits => match c {
                b'0'..=b'9' => {}
                b'e' | b'E' => state = Scan::Exp,
                _ => {
                    state = Scan::EndValue;
                    advance = false;
                }
            },
            Scan::Exp => {
                state = Scan::ExpSign;
                if c != b'+' && c != b'-' {
                    advance = false;
                }
            }
            Scan::ExpSign => {
                if !c.is_ascii_digit() {
                    return scan_error(c, "in exponent of numeric literal");
                }
                state = Scan::ExpDigits;
            }
            Scan::ExpDigits => {
                if !c.is_ascii_digit() {
                    state = Scan::EndValue;
                    advance = false;
                }
            }
            Scan::Literal(word, k) => {
                let expected = word.as_bytes().get(k).copied().unwrap_or(b' ');
                if c != expected {
                    return scan_error(
                        c,
                        &format!("in literal {word} (expecting {})", go_quote_char(expected)),
                    );
                }
                if k + 1 == word.len() {
                    if stack.is_empty() {
                        return Ok(finish(text, first, i + 1));
                    }
                    state = Scan::EndValue;
                } else {
                    state = Scan::Literal(word, k + 1);
                }
            }
        }
        if advance {
            i += 1;
        }
    }
    // End of input: a top-level number is complete, anything else started is truncated.
    let complete = stack.is_empty()
        && matches!(
            state,
            Scan::Zero | Scan::Digits | Scan::DotDigits | Scan::ExpDigits | Scan::EndValue
        );
    match first {
        Some(_) if complete => Ok(finish(text, first, bytes.len())),
        Some(_) => Err("unexpected EOF".to_owned()),
        None => Err("EOF".to_owned()),
    }
}

/// Go's `SyntaxError` text for byte `c` in `context`.
fn scan_error<T>(c: u8, context: &str) -> Result<T, String> {
    Err(format!("invalid character {} {context}", go_quote_char(c)))
}

/// The kind and text of the first value, which started at `first` and ended before `end`.
fn finish(text: &str, first: Option<(JsonKind, usize)>, end: usize) -> (JsonKind, &str) {
    let (kind, start) = first.unwrap_or((JsonKind::Null, 0));
    (kind, text.get(start..end).unwrap_or_default())
}

/// Go's JSON whitespace.
fn is_json_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: a byte in single quotes, escaped like `strconv.Quote` does for the rune
/// with that value.
fn go_quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_owned(),
        b'"' => "\"".to_owned(),
        b'\\' => "\\\\".to_owned(),
        0x07 => "\\a".to_owned(),
        0x08 => "\\b".to_owned(),
        0x0c => "\\f".to_owned(),
        b'\n' => "\\n".to_owned(),
        b'\r' => "\\r".to_owned(),
        b'\t' => "\\t".to_owned(),
        0x0b => "\\v".to_owned(),
        0x20..=0x7e => char::from(c).to_string(),
        0x00..=0x1f | 0x7f => format!("\\x{c:02x}"),
        0x80..=0xa0 | 0xad => format!("\\u{c:04x}"),
        _ => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::old::traffic_permission::testing::*;
    use crate::resource::Spec;

    fn decode(spec: &str) -> ProxyTemplate {
        match decode_spec("ProxyTemplate", spec) {
            Spec::ProxyTemplate(pt) => pt,
            other => panic!("unexpected spec {other:?}"),
        }
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
        assert_round_trip(&resource_yaml("ProxyTemplate", spec));
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
        assert!(!decodes(
            "ProxyTemplate",
            &with_selectors(
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
    fn go_json_scanner_errors() {
        let err = |s: &str| go_first_json_value(s).err();
        assert_eq!(err("{"), Some("unexpected EOF".into()));
        assert_eq!(err("  "), Some("EOF".into()));
        assert_eq!(err("[1, 2"), Some("unexpected EOF".into()));
        assert_eq!(
            err("{a: 1}"),
            Some("invalid character 'a' looking for beginning of object key string".into())
        );
        assert_eq!(
            err("{\"a\" 1}"),
            Some("invalid character '1' after object key".into())
        );
        assert_eq!(
            err("{\"a\": 1 \"b\"}"),
            Some("invalid character '\"' after object key:value pair".into())
        );
        assert_eq!(
            err("[1 2]"),
            Some("invalid character '2' after array element".into())
        );
        assert_eq!(err("tru"), Some("unexpected EOF".into()));
        assert_eq!(
            err("trUe"),
            Some("invalid character 'U' in literal true (expecting 'u')".into())
        );
        assert_eq!(
            err("-x"),
            Some("invalid character 'x' in numeric literal".into())
        );
        assert_eq!(
            err("1.x"),
            Some("invalid character 'x' after decimal point in numeric literal".into())
        );
        assert_eq!(
            err("1ex"),
            Some("invalid character 'x' in exponent of numeric literal".into())
        );
        assert_eq!(
            err("\"a\\q\""),
            Some("invalid character 'q' in string escape code".into())
        );
        assert_eq!(
            err("\"\\u12g4\""),
            Some("invalid character 'g' in \\u hexadecimal character escape".into())
        );
        assert_eq!(
            err("\"a\tb\""),
            Some("invalid character '\\t' in string literal".into())
        );
        assert_eq!(
            err("'x'"),
            Some("invalid character '\\'' looking for beginning of value".into())
        );
        assert_eq!(
            err("\u{e9}"),
            Some("invalid character '\u{c3}' looking for beginning of value".into())
        );
        assert_eq!(
            err(&"[".repeat(10_001)),
            Some("invalid character '[' exceeded max depth".into())
        );
        fn ok(s: &str) -> Option<(JsonKind, &str)> {
            go_first_json_value(s).ok()
        }
        assert_eq!(
            ok(" {\"a\": [1, {}]} trailing"),
            Some((JsonKind::Object, "{\"a\": [1, {}]}"))
        );
        assert_eq!(ok("-1.5e+3"), Some((JsonKind::Number, "-1.5e+3")));
        assert_eq!(ok("12abc"), Some((JsonKind::Number, "12")));
        assert_eq!(ok("null"), Some((JsonKind::Null, "null")));
        assert_eq!(
            ok("\"s\\u00e9\" x"),
            Some((JsonKind::String, "\"s\\u00e9\""))
        );
        assert_eq!(ok("[]"), Some((JsonKind::Array, "[]")));
    }

    #[test]
    fn modification_kinds_are_exclusive() {
        let spec = with_selectors(
            "conf:\n  modifications:\n  - cluster:\n      operation: remove\n    listener:\n      operation: remove\n",
        );
        let value = crate::codec::decode_one(
            resource_yaml("ProxyTemplate", &spec).as_bytes(),
            crate::codec::Limits::default(),
        )
        .unwrap();
        let err = crate::resource::Resource::from_value(value).unwrap_err();
        let violations = err.violations();
        assert_eq!(violations[0].field, "conf.modifications[0]");
        assert_eq!(
            violations[0].message,
            "modification must have only one type defined: cluster, listener, networkFilter, httpFilter, virtualHost"
        );
        assert!(!decodes(
            "ProxyTemplate",
            "conf:\n  modifications:\n  - route: {}\n"
        ));
        assert!(!decodes(
            "ProxyTemplate",
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
