//! MeshProxyPatch: the typed spec (a list of modifications of the generated Envoy clusters,
//! listeners, network filters, HTTP filters and virtual hosts) and its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshproxypatch/api/v1alpha1/`
//! (`meshproxypatch.go` for the shape and JSON names, `validator.go` for the rules), the JSON
//! patch block of `api/common/v1alpha1/jsonpatch.go` with its validator
//! (`pkg/plugins/policies/core/jsonpatch/validators`), and the design in seed 001 (the
//! "MeshProxyPatch" MADR). Validation returns every violation, in Kuma's order, with paths
//! rooted at `spec`.
//!
//! Kuma checks a modification's `value` by parsing it into the Envoy proto type (and, for an
//! added resource, running its protoc-gen-validate rules). Umbra's core has no Envoy protos, so
//! that check is behind [`NativeResourceChecker`]: [`MeshProxyPatch::validate`] uses
//! [`SyntaxChecker`] (the YAML/JSON must be a mapping, with Kuma's error texts such as
//! `unexpected EOF`; an added `Cluster`, `HttpFilter`, `Filter` or `VirtualHost` needs its
//! `name`, a `VirtualHost` its `domains`, as their validate rules say), and the xDS layer can
//! plug a full proto check into [`MeshProxyPatch::validate_with`].
//!
//! Kuma behaviours reproduced on purpose:
//! - each modification must hold exactly one kind (`exactly one modification can be defined at
//!   a time. Currently, N modifications are defined`);
//! - `Patch` wants exactly one of `value` and `jsonPatches`; with both, neither is checked;
//!   an empty `jsonPatches: []` counts as absent;
//! - the "only one"/"exactly one" messages name the modification kind (`cluster must have ...`),
//!   not the full path;
//! - for a malformed `value` Kuma falls back to reading it as raw JSON, so the reason is Go's
//!   JSON decoder error (`unexpected EOF`, `invalid character 'x' looking for beginning of
//!   value`);
//! - a JSON patch `value: null` counts as present (Go keeps `null` in a `json.RawMessage`);
//! - Go's YAML decoding turns numbers given for string fields into strings.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::go_json::{load_like_kuma, Loaded};
use super::{lenient, validate_top_target_ref};
use crate::target_ref::{TargetRef, TargetRefKind};
use crate::validate::{
    must_have_exactly_one_of, must_have_only_one, PathBuilder, ValidationError, MUST_BE_DEFINED,
    MUST_NOT_BE_DEFINED, MUST_NOT_BE_EMPTY,
};

/// Kinds allowed for the top-level `targetRef`.
const TOP_KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
    TargetRefKind::MeshGateway,
];

/// Kuma's `NameFilterBeforeErr`.
pub const NAME_FILTER_BEFORE: &str =
    "must be defined. You need to pick a filter before which this one will be added";
/// Kuma's `NameFilterAfterErr`.
pub const NAME_FILTER_AFTER: &str =
    "must be defined. You need to pick a filter after which this one will be added";
/// Prefix of the message for a `value` the [`NativeResourceChecker`] rejects.
pub const NATIVE_RESOURCE_INVALID: &str = "native Envoy resource is not valid";

/// MeshProxyPatch spec: which proxies (`targetRef`) and the modifications appended to their
/// generated Envoy config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshProxyPatch {
    /// The proxies (or gateway) the policy applies to. Absent means an empty reference, which
    /// validation reports (`spec.targetRef.kind: must be defined`), as Kuma does.
    #[serde(default)]
    pub target_ref: TargetRef,
    /// The configuration; `None` when absent (Kuma then reports the empty modification list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Conf>,
}

/// The `default` section (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// Modifications, applied in order after those of less specific policies. `None` when
    /// absent, so an explicit `[]` survives a round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_modifications: Option<Vec<Modification>>,
}

/// One modification: exactly one of the five kinds must be set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Modification {
    /// Modify Envoy clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterMod>,
    /// Modify Envoy listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<ListenerMod>,
    /// Modify network filters of listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_filter: Option<NetworkFilterMod>,
    /// Modify HTTP filters of HTTP connection managers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_filter: Option<HttpFilterMod>,
    /// Modify virtual hosts of route configurations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_host: Option<VirtualHostMod>,
}

/// A modification of one kind of Envoy resource; `M` is the kind's match conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mod<M> {
    /// Conditions selecting the resources to modify; absent means all of them.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_: Option<M>,
    /// What to do. `None` (absent) is reported as an invalid operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<ModOperation>,
    /// The resource (for adds) or the part merged into matched resources (for `Patch`), as
    /// YAML or JSON text of the Envoy type.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub value: Option<String>,
    /// RFC 6902 JSON patches applied to matched resources (`Patch` only, instead of `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patches: Option<Vec<JsonPatchBlock>>,
}

/// Cluster modification (operations `Add`, `Patch`, `Remove`).
pub type ClusterMod = Mod<ClusterMatch>;
/// Listener modification (operations `Add`, `Patch`, `Remove`).
pub type ListenerMod = Mod<ListenerMatch>;
/// Network filter modification (operations `AddFirst`, `AddLast`, `AddBefore`, `AddAfter`,
/// `Patch`, `Remove`).
pub type NetworkFilterMod = Mod<FilterMatch>;
/// HTTP filter modification (operations `AddFirst`, `AddLast`, `AddBefore`, `AddAfter`,
/// `Patch`, `Remove`).
pub type HttpFilterMod = Mod<FilterMatch>;
/// Virtual host modification (operations `Add`, `Patch`, `Remove`).
pub type VirtualHostMod = Mod<VirtualHostMatch>;

/// Conditions on a cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterMatch {
    /// Component that generated the resource (`inbound`, `outbound`, `transparent`,
    /// `prometheus`, `direct-access`, `ingress`, `egress`, `gateway`, plugin names...).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub origin: Option<String>,
    /// Cluster name.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub name: Option<String>,
}

/// Conditions on a listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerMatch {
    /// Component that generated the resource (see [`ClusterMatch::origin`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub origin: Option<String>,
    /// Listener name.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub name: Option<String>,
    /// Tags in the listener's `metadata.filterMetadata["io.kuma.tags"]`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string_map"
    )]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Conditions on a network filter or an HTTP filter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterMatch {
    /// Component that generated the resource (see [`ClusterMatch::origin`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub origin: Option<String>,
    /// Filter name (`envoy.filters.network.tcp_proxy`, `envoy.filters.http.router`); required
    /// by `AddBefore`, `AddAfter` and `Patch`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub name: Option<String>,
    /// Name of the listener holding the filter (for an HTTP filter, its HTTP connection
    /// manager).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub listener_name: Option<String>,
    /// Tags of the listener holding the filter (or its HTTP connection manager).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string_map"
    )]
    pub listener_tags: Option<BTreeMap<String, String>>,
}

/// Conditions on a network filter (same fields as an HTTP filter's).
pub type NetworkFilterMatch = FilterMatch;
/// Conditions on an HTTP filter (same fields as a network filter's).
pub type HttpFilterMatch = FilterMatch;

/// Conditions on a virtual host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHostMatch {
    /// Component that generated the resource (see [`ClusterMatch::origin`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub origin: Option<String>,
    /// Virtual host name; must not be set with `Add`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub name: Option<String>,
    /// Name of the route configuration holding the virtual host.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub route_configuration_name: Option<String>,
}

/// Match conditions that may name the matched resource (the `match.name` Kuma checks).
pub trait MatchName {
    /// The `name` condition, if set.
    fn name(&self) -> Option<&str>;
}

macro_rules! match_name {
    ($($t:ty),*) => {$(
        impl MatchName for $t {
            fn name(&self) -> Option<&str> {
                self.name.as_deref()
            }
        }
    )*};
}
match_name!(ClusterMatch, ListenerMatch, FilterMatch, VirtualHostMatch);

/// A modification operation (Kuma's `ModOperation`). Unknown strings are kept so validation
/// can report them and a round trip writes them back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModOperation {
    /// Add a new resource (clusters, listeners, virtual hosts).
    Add,
    /// Remove matched resources.
    Remove,
    /// Merge `value` into, or apply `jsonPatches` to, matched resources.
    Patch,
    /// Insert a filter first in the chain.
    AddFirst,
    /// Insert a filter last in the chain.
    AddLast,
    /// Insert a filter before the one named by `match.name` (skipped if absent).
    AddBefore,
    /// Insert a filter after the one named by `match.name` (skipped if absent).
    AddAfter,
    /// Any other string, kept verbatim.
    Unknown(String),
}

impl ModOperation {
    /// Kuma's spelling (`AddFirst`).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Add => "Add",
            Self::Remove => "Remove",
            Self::Patch => "Patch",
            Self::AddFirst => "AddFirst",
            Self::AddLast => "AddLast",
            Self::AddBefore => "AddBefore",
            Self::AddAfter => "AddAfter",
            Self::Unknown(s) => s,
        }
    }

    /// Parse Kuma's spelling (case-sensitive, like Kuma); anything else is `Unknown`.
    pub fn parse(s: &str) -> Self {
        match s {
            "Add" => Self::Add,
            "Remove" => Self::Remove,
            "Patch" => Self::Patch,
            "AddFirst" => Self::AddFirst,
            "AddLast" => Self::AddLast,
            "AddBefore" => Self::AddBefore,
            "AddAfter" => Self::AddAfter,
            other => Self::Unknown(other.to_owned()),
        }
    }
}

impl fmt::Display for ModOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ModOperation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ModOperation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = lenient::opt_string(d)?.unwrap_or_default();
        Ok(Self::parse(&s))
    }
}

/// One RFC 6902 operation (Kuma's `common_api.JsonPatchBlock`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonPatchBlock {
    /// `add`, `remove`, `replace`, `move` or `copy` (`None` when absent).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub op: Option<String>,
    /// JSON pointer to the target location.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub path: Option<String>,
    /// Any JSON value, for `add` and `replace`. An explicit `null` is `Some(Value::Null)`: it
    /// counts as present, as in Kuma.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub value: Option<Value>,
    /// JSON pointer to the source location, for `move` and `copy`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub from: Option<String>,
}

/// `Some` whenever the field is present, `null` included.
fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The five kinds of Envoy resources a modification can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModificationKind {
    /// `envoy.config.cluster.v3.Cluster`.
    Cluster,
    /// `envoy.config.listener.v3.Listener`.
    Listener,
    /// `envoy.config.listener.v3.Filter`.
    NetworkFilter,
    /// `envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter`.
    HttpFilter,
    /// `envoy.config.route.v3.VirtualHost`.
    VirtualHost,
}

impl ModificationKind {
    /// The field naming the kind in a modification (`networkFilter`).
    pub fn field_name(self) -> &'static str {
        match self {
            Self::Cluster => "cluster",
            Self::Listener => "listener",
            Self::NetworkFilter => "networkFilter",
            Self::HttpFilter => "httpFilter",
            Self::VirtualHost => "virtualHost",
        }
    }

    /// Full name of the Envoy proto message a `value` of this kind must parse as.
    pub fn envoy_message(self) -> &'static str {
        match self {
            Self::Cluster => "envoy.config.cluster.v3.Cluster",
            Self::Listener => "envoy.config.listener.v3.Listener",
            Self::NetworkFilter => "envoy.config.listener.v3.Filter",
            Self::HttpFilter => {
                "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
            }
            Self::VirtualHost => "envoy.config.route.v3.VirtualHost",
        }
    }

    /// The operations Kuma accepts for this kind, in Kuma's order.
    pub fn operations(self) -> &'static [ModOperation] {
        match self {
            Self::Cluster | Self::Listener | Self::VirtualHost => {
                &[ModOperation::Add, ModOperation::Patch, ModOperation::Remove]
            }
            Self::NetworkFilter | Self::HttpFilter => &[
                ModOperation::AddFirst,
                ModOperation::AddLast,
                ModOperation::AddBefore,
                ModOperation::AddAfter,
                ModOperation::Patch,
                ModOperation::Remove,
            ],
        }
    }
}

/// Checks a modification's `value` against the Envoy type of its kind (Kuma's
/// `ValidateAnyResourceYAML` / `ValidateAnyResourceYAMLPatch`).
///
/// `is_patch` is `true` for `Patch` (Kuma only parses the value) and `false` for the add
/// operations (Kuma also runs the proto's own validation rules). An `Err` carries the reason;
/// the violation reads `native Envoy resource is not valid: <reason>`.
pub trait NativeResourceChecker {
    /// Check `yaml` as a `kind` resource.
    ///
    /// # Errors
    /// The reason the value is not a valid resource of that kind.
    fn check(&self, kind: ModificationKind, yaml: &str, is_patch: bool) -> Result<(), String>;
}

impl<F> NativeResourceChecker for F
where
    F: Fn(ModificationKind, &str, bool) -> Result<(), String>,
{
    fn check(&self, kind: ModificationKind, yaml: &str, is_patch: bool) -> Result<(), String> {
        self(kind, yaml, is_patch)
    }
}

/// The checker core can run without Envoy protos: the value must be YAML/JSON whose (first)
/// document is a mapping or empty, as Kuma's proto JSON decoder requires before it looks at
/// fields. Error texts follow Kuma's: text that is not YAML is read as raw JSON and reported
/// with Go's JSON decoder messages (`unexpected EOF` for `{`), and a non-mapping document gives
/// `json: cannot unmarshal <type> into Go value of type map[string]*json.RawMessage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyntaxChecker;

impl NativeResourceChecker for SyntaxChecker {
    fn check(&self, kind: ModificationKind, yaml: &str, is_patch: bool) -> Result<(), String> {
        let object = match load_like_kuma(yaml).map_err(|e| e.to_string())? {
            Loaded::Null => None,
            Loaded::Object(Some(object)) => Some(object),
            Loaded::Object(None) => return Ok(()),
            Loaded::Other(kind) => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]*json.RawMessage",
                    kind.go_name()
                ))
            }
        };
        if is_patch {
            return Ok(());
        }
        required_fields(kind, object.as_ref())
    }
}

/// The first protoc-gen-validate rules Kuma's `Validate()` runs on an added resource
/// (issue 41): Envoy's `Cluster`, `HttpFilter`, listener `Filter` and `VirtualHost` need a
/// `name` (`min_len: 1`), a `VirtualHost` at least one of `domains` (`min_items: 1`), with
/// protoc-gen-validate's messages. A resource without them is refused by Kuma, and would be
/// refused by Envoy if Umbra sent it. `Listener` has no such rule.
fn required_fields(
    kind: ModificationKind,
    object: Option<&serde_json::Map<String, Value>>,
) -> Result<(), String> {
    let ty = match kind {
        ModificationKind::Cluster => "Cluster",
        ModificationKind::HttpFilter => "HttpFilter",
        ModificationKind::NetworkFilter => "Filter",
        ModificationKind::VirtualHost => "VirtualHost",
        ModificationKind::Listener => return Ok(()),
    };
    let field = |k: &str| object.and_then(|o| o.get(k)).filter(|v| !v.is_null());
    if field("name").is_none_or(|n| n.as_str() == Some("")) {
        return Err(format!(
            "invalid {ty}.Name: value length must be at least 1 runes"
        ));
    }
    if kind == ModificationKind::VirtualHost
        && field("domains").is_none_or(|d| d.as_array().is_some_and(Vec::is_empty))
    {
        return Err(
            "invalid VirtualHost.Domains: value must contain at least 1 item(s)".to_owned(),
        );
    }
    Ok(())
}

impl Conf {
    /// The modifications (empty when absent).
    pub fn modifications(&self) -> &[Modification] {
        self.append_modifications.as_deref().unwrap_or_default()
    }
}

impl Modification {
    /// How many kinds are set (valid modifications have exactly one).
    pub fn kinds_defined(&self) -> usize {
        [
            self.cluster.is_some(),
            self.listener.is_some(),
            self.virtual_host.is_some(),
            self.network_filter.is_some(),
            self.http_filter.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count()
    }
}

impl MeshProxyPatch {
    /// The modifications (empty when `default` or the list is absent).
    pub fn modifications(&self) -> &[Modification] {
        self.default.as_ref().map_or(&[], Conf::modifications)
    }

    /// Kuma 2.7's MeshProxyPatch validation with the syntax-only [`SyntaxChecker`] for
    /// `value`s: every violation, paths rooted at `spec`. Empty means valid.
    pub fn validate(&self) -> ValidationError {
        self.validate_with(&SyntaxChecker)
    }

    /// Kuma 2.7's MeshProxyPatch validation, checking `value`s with `checker`.
    pub fn validate_with(&self, checker: &dyn NativeResourceChecker) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, TOP_KINDS, false);
        let path = spec.field("default").field("appendModifications");
        let mods = self.modifications();
        if mods.is_empty() {
            err.violation(&path, MUST_NOT_BE_EMPTY);
        }
        for (i, m) in mods.iter().enumerate() {
            let path = path.index(i);
            let defined = m.kinds_defined();
            if defined != 1 {
                err.violation(
                    &path,
                    format!(
                        "exactly one modification can be defined at a time. Currently, {defined} modifications are defined"
                    ),
                );
                continue;
            }
            let v = Validator {
                err: &mut err,
                checker,
            };
            if let Some(c) = &m.cluster {
                v.modification(&path, ModificationKind::Cluster, c);
            } else if let Some(l) = &m.listener {
                v.modification(&path, ModificationKind::Listener, l);
            } else if let Some(vh) = &m.virtual_host {
                v.modification(&path, ModificationKind::VirtualHost, vh);
            } else if let Some(nf) = &m.network_filter {
                v.modification(&path, ModificationKind::NetworkFilter, nf);
            } else if let Some(hf) = &m.http_filter {
                v.modification(&path, ModificationKind::HttpFilter, hf);
            }
        }
        err
    }
}

/// Validation state for one modification.
struct Validator<'a> {
    err: &'a mut ValidationError,
    checker: &'a dyn NativeResourceChecker,
}

impl Validator<'_> {
    /// Kuma's `validate{Cluster,Listener,VirtualHost,NetworkFilter,HTTPFilter}Mod`.
    fn modification<M: MatchName>(self, parent: &PathBuilder, kind: ModificationKind, m: &Mod<M>) {
        let path = parent.field(kind.field_name());
        let name_set = m.match_.as_ref().and_then(MatchName::name).is_some();
        let is_filter = matches!(
            kind,
            ModificationKind::NetworkFilter | ModificationKind::HttpFilter
        );
        let op = m.operation.as_ref();
        match op {
            Some(ModOperation::Add) if !is_filter => {
                if kind == ModificationKind::VirtualHost {
                    if name_set {
                        self.err
                            .violation(&path.field("match").field("name"), MUST_NOT_BE_DEFINED);
                    }
                } else if m.match_.is_some() {
                    self.err
                        .violation(&path.field("match"), MUST_NOT_BE_DEFINED);
                }
                self.resource_value(&path, kind, m.value.as_deref());
            }
            Some(ModOperation::AddFirst | ModOperation::AddLast) if is_filter => {
                self.resource_value(&path, kind, m.value.as_deref());
            }
            Some(ModOperation::AddBefore | ModOperation::AddAfter) if is_filter => {
                if !name_set {
                    let msg = if op == Some(&ModOperation::AddBefore) {
                        NAME_FILTER_BEFORE
                    } else {
                        NAME_FILTER_AFTER
                    };
                    self.err.violation(&path.field("match").field("name"), msg);
                }
                self.resource_value(&path, kind, m.value.as_deref());
            }
            Some(ModOperation::Patch) => {
                if is_filter && !name_set {
                    self.err
                        .violation(&path.field("match").field("name"), MUST_BE_DEFINED);
                }
                self.patch(&path, kind, m.value.as_deref(), m.json_patches.as_deref());
            }
            Some(ModOperation::Remove) => {
                if m.value.is_some() {
                    self.err
                        .violation(&path.field("value"), MUST_NOT_BE_DEFINED);
                }
            }
            _ => {
                let ops: Vec<String> = kind
                    .operations()
                    .iter()
                    .map(|o| format!("\"{o}\""))
                    .collect();
                self.err.violation(
                    &path.field("operation"),
                    format!(
                        "invalid operation. Available operations: {}",
                        ops.join(", ")
                    ),
                );
            }
        }
    }

    /// Kuma's `validateResourceValue`: required, and must be a valid resource.
    fn resource_value(self, path: &PathBuilder, kind: ModificationKind, value: Option<&str>) {
        let path = path.field("value");
        match value {
            None => self.err.violation(&path, MUST_BE_DEFINED),
            Some(v) => {
                if let Err(reason) = self.checker.check(kind, v, false) {
                    self.err
                        .violation(&path, format!("{NATIVE_RESOURCE_INVALID}: {reason}"));
                }
            }
        }
    }

    /// Kuma's `validatePatch`: exactly one of `value` and a non-empty `jsonPatches`.
    fn patch(
        self,
        path: &PathBuilder,
        kind: ModificationKind,
        value: Option<&str>,
        patches: Option<&[JsonPatchBlock]>,
    ) {
        let patches = patches.unwrap_or_default();
        let choices = ["value", "jsonPatches"];
        match value {
            Some(_) if !patches.is_empty() => self
                .err
                .violation(path, must_have_only_one(kind.field_name(), &choices)),
            Some(v) => {
                if let Err(reason) = self.checker.check(kind, v, true) {
                    self.err.violation(
                        &path.field("value"),
                        format!("{NATIVE_RESOURCE_INVALID}: {reason}"),
                    );
                }
            }
            None if !patches.is_empty() => {
                self.err
                    .add(validate_json_patches(&path.field("jsonPatches"), patches));
            }
            None => self
                .err
                .violation(path, must_have_exactly_one_of(kind.field_name(), &choices)),
        }
    }
}

/// Kuma's `ValidateJsonPatchBlock`: op, from, value and path of every block, in that order.
pub fn validate_json_patches(path: &PathBuilder, patches: &[JsonPatchBlock]) -> ValidationError {
    let mut err = ValidationError::new();
    if patches.is_empty() {
        err.violation(path, MUST_NOT_BE_EMPTY);
    }
    for (i, p) in patches.iter().enumerate() {
        let path = path.index(i);
        let op = p.op.as_deref().unwrap_or_default();
        if !matches!(op, "add" | "remove" | "replace" | "move" | "copy") {
            err.violation(
                &path.field("op"),
                one_of_message(
                    "op",
                    None,
                    "must be",
                    &["add", "remove", "replace", "move", "copy"],
                ),
            );
        }
        let move_copy = ["move", "copy"];
        if move_copy.contains(&op) {
            if p.from.is_none() {
                err.violation(
                    &path.field("from"),
                    one_of_message("from", Some("op"), MUST_NOT_BE_EMPTY, &move_copy),
                );
            }
        } else if p.from.is_some() {
            err.violation(
                &path.field("from"),
                one_of_message("from", Some("op"), "is allowed only", &move_copy),
            );
        }
        let add_replace = ["add", "replace"];
        if add_replace.contains(&op) {
            if p.value.is_none() {
                err.violation(
                    &path.field("value"),
                    one_of_message("value", Some("op"), MUST_NOT_BE_EMPTY, &add_replace),
                );
            }
        } else if p.value.is_some() {
            err.violation(
                &path.field("value"),
                one_of_message("value", Some("op"), "is allowed only", &add_replace),
            );
        }
        match p.path.as_deref() {
            None => err.violation(&path.field("path"), MUST_BE_DEFINED),
            Some("" | "/") if op == "remove" => {
                err.violation(&path.field("path"), "root path cannot be removed");
            }
            Some(_) => {}
        }
    }
    err
}

/// Kuma's `MakeOneOfErr`: `"a" <msg> one of ["x", "y"]` or `"a" <msg> when "b" is one of [...]`.
fn one_of_message(field: &str, when: Option<&str>, msg: &str, one_of: &[&str]) -> String {
    let quoted: Vec<String> = one_of.iter().map(|v| format!("\"{v}\"")).collect();
    match when {
        Some(b) => format!(
            "\"{field}\" {msg} when \"{b}\" is one of [{}]",
            quoted.join(", ")
        ),
        None => format!("\"{field}\" {msg} one of [{}]", quoted.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{
        assert_round_trip, bare_spec, bare_violations, pairs, v, yaml_value,
    };
    use crate::resource::{Resource, Spec};

    fn spec(yaml: &str) -> MeshProxyPatch {
        bare_spec(yaml)
    }

    fn violations(yaml: &str) -> Vec<(String, String)> {
        bare_violations::<MeshProxyPatch>(yaml)
    }

    const SEED_ADD_CLUSTER: &str = r#"
type: MeshProxyPatch
mesh: default
name: custom-template-1
labels:
  kuma.io/effect: shadow
spec:
  targetRef:
    kind: MeshService
    name: frontend_kuma-demo_svc_8080
  default:
    appendModifications:
      - cluster:
          operation: Add
          value: |
            name: test-cluster
            connectTimeout: 5s
            type: STATIC
"#;

    #[test]
    fn seed_add_cluster_is_valid_and_round_trips() {
        let r = assert_round_trip(SEED_ADD_CLUSTER);
        assert_eq!(r.validate(), ValidationError::new());
        let Spec::MeshProxyPatch(mpp) = &r.spec else {
            panic!("not a MeshProxyPatch")
        };
        let c = mpp.modifications()[0].cluster.as_ref().unwrap();
        assert_eq!(c.operation, Some(ModOperation::Add));
        assert_eq!(
            c.value.as_deref(),
            Some("name: test-cluster\nconnectTimeout: 5s\ntype: STATIC\n")
        );
    }

    #[test]
    fn seed_001_draft_uses_names_kuma_did_not_ship() {
        // The MADR's draft wrote `defaults` and lower-case operations.
        let draft = "type: MeshProxyPatch\nmesh: default\nname: custom-template-1\nspec:\n  targetRef:\n    kind: Mesh\n  defaults:\n    appendModifications: []\n";
        assert!(Resource::from_bytes(draft.as_bytes()).is_err());
        let lower = "targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - cluster:\n      operation: add\n      value: 'name: test-cluster'\n";
        assert_eq!(
            violations(lower),
            vec![v(
                "spec.default.appendModifications[0].cluster.operation",
                "invalid operation. Available operations: \"Add\", \"Patch\", \"Remove\""
            )]
        );
        // Its patch example sets both `value` and `jsonPatches`, which Kuma rejects.
        let both = r#"
targetRef:
  kind: Mesh
default:
  appendModifications:
    - cluster:
        operation: Patch
        match:
          name: test-cluster
          origin: inbound
        value: |
          connectTimeout: 5s
        jsonPatches:
          - op: add
            from: ""
            path: "/connectTimeout"
            value: "5s"
"#;
        assert_eq!(
            violations(both),
            vec![v(
                "spec.default.appendModifications[0].cluster",
                "cluster must have only one type defined: value, jsonPatches"
            )]
        );
    }

    #[test]
    fn all_kinds_round_trip() {
        let yaml = r#"
type: MeshProxyPatch
mesh: default
name: all
spec:
  targetRef:
    kind: MeshSubset
    tags:
      kuma.io/zone: east
  default:
    appendModifications:
      - cluster:
          operation: Patch
          match:
            name: inbound:127.0.0.1:8080
            origin: inbound
          jsonPatches:
            - op: replace
              path: /foo
              value:
                bar: [1, 2.5, null, true]
            - op: move
              from: /a
              path: /b
            - op: add
              path: /c
              value: null
      - listener:
          operation: Remove
          match:
            origin: inbound
            tags:
              kuma.io/service: backend
      - networkFilter:
          operation: AddAfter
          match:
            name: envoy.filters.network.direct_response
            listenerName: inbound:127.0.0.0:8080
            listenerTags:
              version: v1
          value: |
            name: envoy.filters.network.tcp_proxy
      - httpFilter:
          operation: AddFirst
          match:
            origin: outbound
          value: '{"name": "envoy.filters.http.router"}'
      - virtualHost:
          operation: Patch
          match:
            name: backend
            routeConfigurationName: outbound:backend
          value: 'retryPolicy: {numRetries: 3}'
"#;
        let r = assert_round_trip(yaml);
        assert_eq!(r.validate(), ValidationError::new());
    }

    #[test]
    fn empty_default_and_modification() {
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\n"),
            vec![v("spec.default.appendModifications", MUST_NOT_BE_EMPTY)]
        );
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications: []\n"),
            vec![v("spec.default.appendModifications", MUST_NOT_BE_EMPTY)]
        );
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - {}\n"),
            vec![v(
                "spec.default.appendModifications[0]",
                "exactly one modification can be defined at a time. Currently, 0 modifications are defined"
            )]
        );
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - cluster: {operation: Remove}\n    virtualHost: {operation: Remove}\n"),
            vec![v(
                "spec.default.appendModifications[0]",
                "exactly one modification can be defined at a time. Currently, 2 modifications are defined"
            )]
        );
    }

    #[test]
    fn invalid_cluster_modifications() {
        let got = violations(
            r#"
targetRef:
  kind: Mesh
default:
  appendModifications:
  - cluster:
      operation: AddFirst
  - cluster:
      operation: Add
      value: '{'
  - cluster:
      operation: Patch
      value: '{'
  - cluster:
      operation: Add
      match:
        name: inbound:127.0.0.1:80
      value: |
        name: xyz
  - cluster:
      operation: Remove
      value: |
        name: xyz
  - cluster:
      operation: Add
  - cluster:
      operation: Patch
  - cluster:
      operation: Patch
      value: '{}'
      jsonPatches:
      - op: remove
        path: ""
  - cluster:
      match:
        name: x
"#,
        );
        let p = |i: usize, f: &str| format!("spec.default.appendModifications[{i}].cluster{f}");
        let ops = "invalid operation. Available operations: \"Add\", \"Patch\", \"Remove\"";
        let eof = "native Envoy resource is not valid: unexpected EOF";
        assert_eq!(
            got,
            vec![
                v(&p(0, ".operation"), ops),
                v(&p(1, ".value"), eof),
                v(&p(2, ".value"), eof),
                v(&p(3, ".match"), MUST_NOT_BE_DEFINED),
                v(&p(4, ".value"), MUST_NOT_BE_DEFINED),
                v(&p(5, ".value"), MUST_BE_DEFINED),
                v(
                    &p(6, ""),
                    "cluster must have exactly one defined: value, jsonPatches"
                ),
                v(
                    &p(7, ""),
                    "cluster must have only one type defined: value, jsonPatches"
                ),
                v(&p(8, ".operation"), ops),
            ]
        );
    }

    #[test]
    fn invalid_filter_and_virtual_host_operations() {
        for kind in ["networkFilter", "httpFilter"] {
            let yaml = format!(
                r#"
targetRef:
  kind: Mesh
default:
  appendModifications:
  - {kind}:
      operation: AddFirst
      value: '{{'
  - {kind}:
      operation: AddBefore
      value: '{{'
  - {kind}:
      operation: AddAfter
      value: '{{'
  - {kind}:
      operation: Patch
      value: '{{'
  - {kind}:
      operation: Remove
      value: '{{'
  - {kind}:
      operation: Add
  - {kind}:
      operation: Patch
      value: '{{}}'
      jsonPatches:
      - op: remove
        path: ""
  - {kind}:
      operation: AddLast
"#
            );
            let p = |i: usize, f: &str| format!("spec.default.appendModifications[{i}].{kind}{f}");
            let eof = "native Envoy resource is not valid: unexpected EOF";
            assert_eq!(
                violations(&yaml),
                vec![
                    v(&p(0, ".value"), eof),
                    v(&p(1, ".match.name"), NAME_FILTER_BEFORE),
                    v(&p(1, ".value"), eof),
                    v(&p(2, ".match.name"), NAME_FILTER_AFTER),
                    v(&p(2, ".value"), eof),
                    v(&p(3, ".match.name"), MUST_BE_DEFINED),
                    v(&p(3, ".value"), eof),
                    v(&p(4, ".value"), MUST_NOT_BE_DEFINED),
                    v(&p(5, ".operation"), "invalid operation. Available operations: \"AddFirst\", \"AddLast\", \"AddBefore\", \"AddAfter\", \"Patch\", \"Remove\""),
                    v(&p(6, ".match.name"), MUST_BE_DEFINED),
                    v(&p(6, ""), &format!("{kind} must have only one type defined: value, jsonPatches")),
                    v(&p(7, ".value"), MUST_BE_DEFINED),
                ],
                "{kind}"
            );
        }
        let got = violations(
            r#"
targetRef:
  kind: Mesh
default:
  appendModifications:
  - virtualHost:
      operation: Add
      match:
        name: xyz
      value: '{'
  - virtualHost:
      operation: AddFirst
  - virtualHost:
      operation: Patch
      value: '{'
  - virtualHost:
      operation: Remove
      value: '{'
  - virtualHost:
      operation: Patch
      value: '{}'
      jsonPatches:
      - op: remove
        path: ""
  - virtualHost:
      operation: Add
      match:
        routeConfigurationName: rc
      value: '{name: vh, domains: ["*"]}'
"#,
        );
        let p = |i: usize, f: &str| format!("spec.default.appendModifications[{i}].virtualHost{f}");
        assert_eq!(
            got,
            vec![
                v(&p(0, ".match.name"), MUST_NOT_BE_DEFINED),
                v(
                    &p(0, ".value"),
                    "native Envoy resource is not valid: unexpected EOF"
                ),
                v(
                    &p(1, ".operation"),
                    "invalid operation. Available operations: \"Add\", \"Patch\", \"Remove\""
                ),
                v(
                    &p(2, ".value"),
                    "native Envoy resource is not valid: unexpected EOF"
                ),
                v(&p(3, ".value"), MUST_NOT_BE_DEFINED),
                v(
                    &p(4, ""),
                    "virtualHost must have only one type defined: value, jsonPatches"
                ),
            ]
        );
    }

    #[test]
    fn target_ref_rules() {
        assert_eq!(
            violations("targetRef:\n  kind: Unknown\ndefault:\n  appendModifications:\n  - virtualHost:\n      operation: Remove\n"),
            vec![v("spec.targetRef.kind", "value is not supported")]
        );
        assert_eq!(
            violations("targetRef:\n  kind: MeshGateway\n  name: gw\n  tags:\n    port: '80'\ndefault:\n  appendModifications:\n  - cluster:\n      operation: Remove\n"),
            vec![v("spec.targetRef.tags", "must not be set with kind MeshGateway")]
        );
        assert_eq!(
            violations("targetRef:\n  kind: MeshHTTPRoute\n  name: r\n"),
            vec![
                v("spec.targetRef.kind", "value is not supported"),
                v("spec.default.appendModifications", MUST_NOT_BE_EMPTY),
            ]
        );
    }

    #[test]
    fn json_patch_rules() {
        let got = violations(
            r#"
targetRef:
  kind: Mesh
default:
  appendModifications:
  - listener:
      operation: Patch
      jsonPatches:
      - op: test
        path: /a
      - op: move
        path: /a
      - op: add
        path: /a
        from: /b
      - op: remove
        path: /
        value: 1
      - op: replace
      - path: /a
      - op: copy
        from: /x
        path: ""
      - op: remove
        path: /a
        value: null
"#,
        );
        let p = |i: usize, f: &str| {
            format!("spec.default.appendModifications[0].listener.jsonPatches[{i}].{f}")
        };
        let ops = "\"op\" must be one of [\"add\", \"remove\", \"replace\", \"move\", \"copy\"]";
        assert_eq!(
            got,
            vec![
                v(&p(0, "op"), ops),
                v(
                    &p(1, "from"),
                    "\"from\" must not be empty when \"op\" is one of [\"move\", \"copy\"]"
                ),
                v(
                    &p(2, "from"),
                    "\"from\" is allowed only when \"op\" is one of [\"move\", \"copy\"]"
                ),
                v(
                    &p(2, "value"),
                    "\"value\" must not be empty when \"op\" is one of [\"add\", \"replace\"]"
                ),
                v(
                    &p(3, "value"),
                    "\"value\" is allowed only when \"op\" is one of [\"add\", \"replace\"]"
                ),
                v(&p(3, "path"), "root path cannot be removed"),
                v(
                    &p(4, "value"),
                    "\"value\" must not be empty when \"op\" is one of [\"add\", \"replace\"]"
                ),
                v(&p(4, "path"), MUST_BE_DEFINED),
                v(&p(5, "op"), ops),
                v(
                    &p(7, "value"),
                    "\"value\" is allowed only when \"op\" is one of [\"add\", \"replace\"]"
                ),
            ]
        );
        // An empty list counts as no patches at all.
        assert_eq!(
            violations("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - cluster:\n      operation: Patch\n      jsonPatches: []\n"),
            vec![v(
                "spec.default.appendModifications[0].cluster",
                "cluster must have exactly one defined: value, jsonPatches"
            )]
        );
        assert_eq!(
            pairs(validate_json_patches(&PathBuilder::rooted_at("p"), &[])),
            vec![v("p", MUST_NOT_BE_EMPTY)]
        );
    }

    #[test]
    fn syntax_checker_messages() {
        // A Listener has no required field (see `added_resources_need_the_fields_envoy_requires`).
        let check = |s: &str| SyntaxChecker.check(ModificationKind::Listener, s, false);
        assert_eq!(check("{"), Err("unexpected EOF".into()));
        assert_eq!(check("{}"), Ok(()));
        assert_eq!(check(""), Ok(()));
        assert_eq!(check("name: xyz\nconnectTimeout: 5s\n"), Ok(()));
        assert_eq!(check("{\"name\": \"xyz\"}"), Ok(()));
        assert_eq!(
            check("a: [1, 2"),
            Err("invalid character 'a' looking for beginning of value".into())
        );
        assert_eq!(
            check("xyz"),
            Err(
                "json: cannot unmarshal string into Go value of type map[string]*json.RawMessage"
                    .into()
            )
        );
        assert_eq!(
            check("- a\n- b\n"),
            Err(
                "json: cannot unmarshal array into Go value of type map[string]*json.RawMessage"
                    .into()
            )
        );
        assert_eq!(
            check("5"),
            Err(
                "json: cannot unmarshal number into Go value of type map[string]*json.RawMessage"
                    .into()
            )
        );
        assert_eq!(
            check("true"),
            Err(
                "json: cannot unmarshal bool into Go value of type map[string]*json.RawMessage"
                    .into()
            )
        );
        let got = violations("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - listener:\n      operation: Patch\n      value: 'just text'\n");
        assert_eq!(
            got,
            vec![v(
                "spec.default.appendModifications[0].listener.value",
                "native Envoy resource is not valid: json: cannot unmarshal string into Go value of type map[string]*json.RawMessage"
            )]
        );
    }

    #[test]
    fn pluggable_checker() {
        let mpp = spec("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - cluster:\n      operation: Add\n      value: 'name: a'\n  - virtualHost:\n      operation: Patch\n      value: 'domains: []'\n  - httpFilter:\n      operation: AddLast\n      value: 'name: f'\n");
        let seen = std::cell::RefCell::new(Vec::new());
        let checker = |kind: ModificationKind, yaml: &str, is_patch: bool| {
            seen.borrow_mut().push((kind, yaml.to_owned(), is_patch));
            if kind == ModificationKind::VirtualHost {
                Err("proto: unknown field".to_owned())
            } else {
                Ok(())
            }
        };
        assert_eq!(
            pairs(mpp.validate_with(&checker)),
            vec![v(
                "spec.default.appendModifications[1].virtualHost.value",
                "native Envoy resource is not valid: proto: unknown field"
            )]
        );
        assert_eq!(
            seen.into_inner(),
            vec![
                (ModificationKind::Cluster, "name: a".to_owned(), false),
                (
                    ModificationKind::VirtualHost,
                    "domains: []".to_owned(),
                    true
                ),
                (ModificationKind::HttpFilter, "name: f".to_owned(), false),
            ]
        );
        assert_eq!(
            ModificationKind::HttpFilter.envoy_message(),
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
        );
    }

    proptest::proptest! {
        #[test]
        fn syntax_checker_never_panics(s in "(?s).{0,64}") {
            let _ = SyntaxChecker.check(ModificationKind::Listener, &s, true);
        }

        #[test]
        fn syntax_checker_accepts_json_objects(k in "[a-z]{1,8}", n in proptest::num::i64::ANY) {
            let text = serde_json::json!({ k: [n, {"x": null}] }).to_string();
            proptest::prop_assert_eq!(SyntaxChecker.check(ModificationKind::Listener, &text, false), Ok(()));
            // Truncated anywhere after the opening brace, it is an unexpected EOF.
            let cut = &text[..text.len() - 1];
            proptest::prop_assert_eq!(
                SyntaxChecker.check(ModificationKind::Listener, cut, false),
                Err("unexpected EOF".to_owned())
            );
        }
    }

    #[test]
    fn lenient_scalars_and_unknown_fields() {
        let mpp = spec("targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - listener:\n      operation: Remove\n      match:\n        name: 8080\n        tags:\n          port: 8080\n");
        let m = mpp.modifications()[0].listener.as_ref().unwrap();
        let matcher = m.match_.as_ref().unwrap();
        assert_eq!(matcher.name.as_deref(), Some("8080"));
        assert_eq!(
            matcher
                .tags
                .as_ref()
                .unwrap()
                .get("port")
                .map(String::as_str),
            Some("8080")
        );
        let unknown = "targetRef:\n  kind: Mesh\ndefault:\n  appendModifications:\n  - cluster:\n      operation: Remove\n      matches: {}\n";
        assert!(serde_json::from_value::<MeshProxyPatch>(yaml_value(unknown)).is_err());
        let op = ModOperation::parse("AddBefore");
        assert_eq!(op, ModOperation::AddBefore);
        assert_eq!(
            serde_json::to_value(ModOperation::Unknown("x".into())).unwrap(),
            Value::String("x".into())
        );
    }

    /// Issue 41: Kuma runs the Envoy type's protoc-gen-validate rules (`Validate()`) on an
    /// added resource (`ValidateAnyResourceYAML`), not on a `Patch` value
    /// (`ValidateAnyResourceYAMLPatch`). Envoy's `Cluster`, `HttpFilter`, listener `Filter` and
    /// `VirtualHost` need a `name` (`min_len: 1`), a `VirtualHost` `domains` (`min_items: 1`);
    /// `Listener.name` has no rule. Messages are protoc-gen-validate's.
    #[test]
    fn added_resources_need_the_fields_envoy_requires() {
        let one = |kind: &str, op: &str, value: &str| {
            violations(&format!(
                "targetRef: {{kind: Mesh}}\ndefault:\n  appendModifications:\n  - {kind}:\n      operation: {op}\n      value: '{value}'\n"
            ))
        };
        let bad = |kind: &str, message: &str| {
            vec![v(
                &format!("spec.default.appendModifications[0].{kind}.value"),
                &format!("native Envoy resource is not valid: {message}"),
            )]
        };
        let name = |ty: &str| format!("invalid {ty}.Name: value length must be at least 1 runes");
        assert_eq!(
            one("cluster", "Add", "connectTimeout: 5s"),
            bad("cluster", &name("Cluster"))
        );
        assert_eq!(
            one("cluster", "Add", "{name: \"\"}"),
            bad("cluster", &name("Cluster"))
        );
        assert_eq!(one("cluster", "Add", ""), bad("cluster", &name("Cluster")));
        assert_eq!(one("cluster", "Add", "name: c"), []);
        assert_eq!(one("cluster", "Patch", "connectTimeout: 5s"), []);
        assert_eq!(one("listener", "Add", "address: {pipe: {path: /x}}"), []);
        for op in ["AddFirst", "AddLast"] {
            assert_eq!(
                one("httpFilter", op, "{}"),
                bad("httpFilter", &name("HttpFilter"))
            );
            assert_eq!(
                one("networkFilter", op, "{}"),
                bad("networkFilter", &name("Filter"))
            );
        }
        assert_eq!(one("httpFilter", "Patch", "{}").len(), 1); // match.name only
        assert_eq!(
            one("virtualHost", "Add", "domains: [a]"),
            bad("virtualHost", &name("VirtualHost"))
        );
        assert_eq!(
            one("virtualHost", "Add", "name: vh"),
            bad(
                "virtualHost",
                "invalid VirtualHost.Domains: value must contain at least 1 item(s)"
            )
        );
        assert_eq!(
            one("virtualHost", "Add", "{name: vh, domains: []}"),
            bad(
                "virtualHost",
                "invalid VirtualHost.Domains: value must contain at least 1 item(s)"
            )
        );
        assert_eq!(
            one("virtualHost", "Add", "{name: vh, domains: [\"*\"]}"),
            []
        );
    }
}
