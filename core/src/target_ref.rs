//! `targetRef`: the reference every new policy uses at its top level and in `from`/`to` items,
//! and Kuma 2.7's validation of it (`ValidateTargetRef` in `pkg/core/resources/apis/mesh`).
//!
//! Kinds are ordered for precedence as in Kuma: Mesh < MeshSubset < MeshGateway < MeshService <
//! MeshServiceSubset < MeshHTTPRoute (seed 002 "Flexible policy matching").

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::validate::{
    PathBuilder, ValidationError, MUST_BE_DEFINED, MUST_BE_SET, MUST_NOT_BE_SET,
};

/// The tag naming a DPP's service (`kuma.io/service`).
pub const SERVICE_TAG: &str = "kuma.io/service";
/// The tag naming an inbound's protocol (`kuma.io/protocol`).
pub const PROTOCOL_TAG: &str = "kuma.io/protocol";
/// The tag naming a DPP's zone (`kuma.io/zone`), set by its zone CP on every inbound and
/// gateway ([`crate::dataplane::DataplaneSpec::stamp_zone`]).
pub const ZONE_TAG: &str = "kuma.io/zone";

/// What a `targetRef` points at. Unknown kinds are kept (as [`TargetRefKind::Unknown`]) so that
/// validation can report `kind: value is not supported` instead of a parse error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetRefKind {
    /// Every proxy of the mesh.
    Mesh,
    /// Proxies (or inbounds) whose tags match `tags`.
    MeshSubset,
    /// A builtin or delegated gateway by name.
    MeshGateway,
    /// Proxies of the service `name` (`kuma.io/service`).
    MeshService,
    /// Proxies of the service `name` that also match `tags`.
    MeshServiceSubset,
    /// A MeshHTTPRoute by name (its own top-level targetRef selects the proxies).
    MeshHTTPRoute,
    /// Any other string, kept verbatim.
    Unknown(String),
}

impl TargetRefKind {
    /// Kuma's name for the kind.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Mesh => "Mesh",
            Self::MeshSubset => "MeshSubset",
            Self::MeshGateway => "MeshGateway",
            Self::MeshService => "MeshService",
            Self::MeshServiceSubset => "MeshServiceSubset",
            Self::MeshHTTPRoute => "MeshHTTPRoute",
            Self::Unknown(s) => s,
        }
    }

    /// Parse Kuma's name; anything else becomes [`TargetRefKind::Unknown`].
    pub fn parse(s: &str) -> Self {
        match s {
            "Mesh" => Self::Mesh,
            "MeshSubset" => Self::MeshSubset,
            "MeshGateway" => Self::MeshGateway,
            "MeshService" => Self::MeshService,
            "MeshServiceSubset" => Self::MeshServiceSubset,
            "MeshHTTPRoute" => Self::MeshHTTPRoute,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// Precedence rank (Kuma's `order` map): Mesh 1 … MeshHTTPRoute 6, unknown 0.
    pub fn rank(&self) -> u8 {
        match self {
            Self::Mesh => 1,
            Self::MeshSubset => 2,
            Self::MeshGateway => 3,
            Self::MeshService => 4,
            Self::MeshServiceSubset => 5,
            Self::MeshHTTPRoute => 6,
            Self::Unknown(_) => 0,
        }
    }
}

impl fmt::Display for TargetRefKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TargetRefKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TargetRefKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::parse(&String::deserialize(d)?))
    }
}

/// Proxy types a `Mesh`/`MeshSubset` reference can be narrowed to (`proxyTypes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProxyType {
    /// A sidecar DPP (no `networking.gateway`).
    Sidecar,
    /// A gateway DPP (`networking.gateway` set).
    Gateway,
}

/// A `targetRef` as written in a policy (`kind`, `name`, `tags`, `mesh`, `proxyTypes`).
///
/// Empty fields are omitted on output, like Kuma's `omitempty`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetRef {
    /// The kind; `None` only in invalid input (validation says `must be defined`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TargetRefKind>,
    /// Service, gateway or route name, depending on `kind`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Tags for `MeshSubset`/`MeshServiceSubset` (and gateway listeners).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Mesh name (never allowed by Kuma 2.7's validators; kept for round trips).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mesh: String,
    /// For `Mesh`/`MeshSubset`: restrict to these proxy types (empty = all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_types: Vec<ProxyType>,
}

impl TargetRef {
    /// `kind: Mesh`.
    pub fn mesh() -> Self {
        Self {
            kind: Some(TargetRefKind::Mesh),
            ..Self::default()
        }
    }

    /// `kind: MeshService, name`.
    pub fn mesh_service(name: impl Into<String>) -> Self {
        Self {
            kind: Some(TargetRefKind::MeshService),
            name: name.into(),
            ..Self::default()
        }
    }

    /// `kind: MeshSubset, tags`.
    pub fn mesh_subset(tags: BTreeMap<String, String>) -> Self {
        Self {
            kind: Some(TargetRefKind::MeshSubset),
            tags,
            ..Self::default()
        }
    }

    /// `kind: MeshServiceSubset, name, tags`.
    pub fn mesh_service_subset(name: impl Into<String>, tags: BTreeMap<String, String>) -> Self {
        Self {
            kind: Some(TargetRefKind::MeshServiceSubset),
            name: name.into(),
            tags,
            ..Self::default()
        }
    }

    /// The kind, or an `Unknown("")` placeholder when missing.
    pub fn kind(&self) -> TargetRefKind {
        self.kind
            .clone()
            .unwrap_or(TargetRefKind::Unknown(String::new()))
    }

    /// Kuma's `IncludesGateways`: MeshGateway, MeshHTTPRoute, or Mesh/MeshSubset whose
    /// `proxyTypes` is empty or contains `Gateway`.
    pub fn includes_gateways(&self) -> bool {
        match self.kind() {
            TargetRefKind::MeshGateway | TargetRefKind::MeshHTTPRoute => true,
            TargetRefKind::Mesh | TargetRefKind::MeshSubset => {
                self.proxy_types.is_empty() || self.proxy_types.contains(&ProxyType::Gateway)
            }
            _ => false,
        }
    }
}

/// The matching-only pseudo tag of a rollout sample, selecting a share of DPPs in a top-level
/// `targetRef` ([`crate::sample`]).
pub const SAMPLE_TAG: &str = "umbra.io/rollout-sample";

/// A parsed [`SAMPLE_TAG`] value: the DPPs whose sample point ([`crate::sample::point`]) under
/// `seed` is at most `bound`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The rollout's seed (`[a-z0-9]`, 1 to 32 characters).
    pub seed: String,
    /// The highest point selected.
    pub bound: u64,
}

impl Sample {
    /// Read `<seed>.<bound>`.
    ///
    /// # Errors
    /// Why the value is not `<seed>.<16 hex digits>`.
    pub fn parse(value: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "a rollout sample must be <seed>.<bound> (seed: 1 to 32 lower-case letters or digits; bound: 16 lower-case hex digits), got {value:?}"
            )
        };
        let (seed, bound) = value.split_once('.').ok_or_else(bad)?;
        let seed_ok = (1..=32).contains(&seed.len())
            && seed
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase());
        let bound_ok = bound.len() == 16
            && bound
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !seed_ok || !bound_ok {
            return Err(bad());
        }
        Ok(Self {
            seed: seed.to_owned(),
            bound: u64::from_str_radix(bound, 16).map_err(|_| bad())?,
        })
    }

    /// The tag value, `<seed>.<bound as 16 hex digits>`.
    pub fn value(&self) -> String {
        format!("{}.{:016x}", self.seed, self.bound)
    }
}

/// Violations of [`SAMPLE_TAG`] in `tags` (rooted at `path`, the `tags` field): outside a
/// top-level `targetRef` (`allowed` false) it is refused, inside it must read.
pub fn validate_sample(
    path: &PathBuilder,
    tags: &BTreeMap<String, String>,
    allowed: bool,
) -> ValidationError {
    let mut err = ValidationError::new();
    if let Some(value) = tags.get(SAMPLE_TAG) {
        if !allowed {
            err.violation(
                &path.key(SAMPLE_TAG),
                "a rollout sample selects DPPs: it is allowed only in a top-level targetRef",
            );
        } else if let Err(e) = Sample::parse(value) {
            err.violation(&path.key(SAMPLE_TAG), e);
        }
    }
    err
}

/// Options for [`validate_target_ref`] (Kuma's `ValidateTargetRefOpts`).
#[derive(Debug, Clone, Default)]
pub struct TargetRefOpts<'a> {
    /// Kinds allowed at this position; others get `kind: value is not supported`.
    pub supported_kinds: &'a [TargetRefKind],
    /// Allow `tags` on `MeshGateway` (listener tags).
    pub gateway_listener_tags_allowed: bool,
    /// Allow the rollout sample pseudo tag ([`crate::sample::SAMPLE_TAG`]) in `tags`: only a
    /// top-level `targetRef` selects DPPs with it.
    pub sample_tag_allowed: bool,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_digit() || c.is_ascii_lowercase() || matches!(c, '.' | '-' | '_')
}

/// Kuma's tag-name character set `^[a-zA-Z0-9.\-_:/]*$`.
pub fn is_valid_tag_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '/'))
}

/// Kuma's tag-value character set `^[a-zA-Z0-9.\-_:]*$`.
pub fn is_valid_tag_value(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
}

/// Kuma's `ValidateTags` with default options: relative paths rooted at `path`.
///
/// Keys are visited in sorted order, as Kuma does.
pub fn validate_tags(path: &PathBuilder, tags: &BTreeMap<String, String>) -> ValidationError {
    let mut err = ValidationError::new();
    for (key, value) in tags {
        if key.is_empty() {
            err.violation(path, "tag name must be non-empty");
        }
        if !is_valid_tag_name(key) {
            err.violation(&path.key(key), "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores");
        }
        if value.is_empty() {
            err.violation(&path.key(key), "tag value must be non-empty");
        }
        if !is_valid_tag_value(value) {
            err.violation(
                &path.key(key),
                "tag value must consist of alphanumeric characters, dots, dashes and underscores",
            );
        }
    }
    err
}

/// Kuma 2.7's `ValidateTargetRef`. Violations are relative (`kind`, `name`, `tags["x"]`), to be
/// re-rooted by the caller with [`ValidationError::add_at`].
pub fn validate_target_ref(r: &TargetRef, opts: &TargetRefOpts<'_>) -> ValidationError {
    let mut err = ValidationError::new();
    let kind = match &r.kind {
        None => {
            err.violation_field("kind", MUST_BE_DEFINED);
            return err;
        }
        Some(TargetRefKind::Unknown(s)) if s.is_empty() => {
            err.violation_field("kind", MUST_BE_DEFINED);
            return err;
        }
        Some(k) => k,
    };
    if !opts.supported_kinds.contains(kind) {
        err.violation_field("kind", "value is not supported");
        return err;
    }
    let disallowed = |err: &mut ValidationError, field: &str, set: bool| {
        if set {
            err.violation_field(field, format!("{MUST_NOT_BE_SET} with kind {kind}"));
        }
    };
    let required = |err: &mut ValidationError, field: &str, set: bool| {
        if !set {
            err.violation_field(field, format!("{MUST_BE_SET} with kind {kind}"));
        }
    };
    let name_chars = |err: &mut ValidationError| {
        if !r.name.chars().all(is_name_char) {
            err.violation_field(
                "name",
                "invalid characters: must consist of lower case alphanumeric characters, '-', '.' and '_'.",
            );
        }
    };
    let tags_root = PathBuilder::rooted_at("tags");
    match kind {
        TargetRefKind::Mesh => {
            if !r.name.is_empty() {
                err.violation_field(
                    "name",
                    format!("using name with kind {kind} is not yet supported"),
                );
            }
            disallowed(&mut err, "mesh", !r.mesh.is_empty());
            disallowed(&mut err, "tags", !r.tags.is_empty());
        }
        TargetRefKind::MeshSubset => {
            disallowed(&mut err, "name", !r.name.is_empty());
            disallowed(&mut err, "mesh", !r.mesh.is_empty());
            err.add(validate_tags(&tags_root, &r.tags));
            err.add(validate_sample(
                &tags_root,
                &r.tags,
                opts.sample_tag_allowed,
            ));
        }
        TargetRefKind::MeshService | TargetRefKind::MeshHTTPRoute => {
            required(&mut err, "name", !r.name.is_empty());
            name_chars(&mut err);
            disallowed(&mut err, "mesh", !r.mesh.is_empty());
            disallowed(&mut err, "tags", !r.tags.is_empty());
            disallowed(&mut err, "proxyTypes", !r.proxy_types.is_empty());
        }
        TargetRefKind::MeshServiceSubset | TargetRefKind::MeshGateway => {
            required(&mut err, "name", !r.name.is_empty());
            name_chars(&mut err);
            disallowed(&mut err, "mesh", !r.mesh.is_empty());
            disallowed(&mut err, "proxyTypes", !r.proxy_types.is_empty());
            err.add(validate_tags(&tags_root, &r.tags));
            err.add(validate_sample(
                &tags_root,
                &r.tags,
                opts.sample_tag_allowed && *kind == TargetRefKind::MeshServiceSubset,
            ));
            if *kind == TargetRefKind::MeshGateway
                && !r.tags.is_empty()
                && !opts.gateway_listener_tags_allowed
            {
                disallowed(&mut err, "tags", true);
            }
        }
        TargetRefKind::Unknown(_) => {}
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_round_trips_and_is_reported() {
        let r: TargetRef = serde_json::from_str(r#"{"kind":"MeshFoo","name":"x"}"#).unwrap();
        assert_eq!(r.kind, Some(TargetRefKind::Unknown("MeshFoo".into())));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"kind":"MeshFoo","name":"x"}"#
        );
        let err = validate_target_ref(
            &r,
            &TargetRefOpts {
                supported_kinds: &[TargetRefKind::Mesh],
                ..Default::default()
            },
        );
        assert_eq!(err.to_string(), "kind: value is not supported");
    }

    #[test]
    fn mesh_service_rules() {
        let r = TargetRef {
            kind: Some(TargetRefKind::MeshService),
            tags: [("a".into(), "b".into())].into(),
            ..Default::default()
        };
        let err = validate_target_ref(
            &r,
            &TargetRefOpts {
                supported_kinds: &[TargetRefKind::MeshService],
                ..Default::default()
            },
        );
        assert_eq!(
            err.to_string(),
            "name: must be set with kind MeshService; tags: must not be set with kind MeshService"
        );
    }

    #[test]
    fn missing_kind() {
        let err = validate_target_ref(&TargetRef::default(), &TargetRefOpts::default());
        assert_eq!(err.to_string(), "kind: must be defined");
    }

    #[test]
    fn unknown_fields_rejected() {
        assert!(serde_json::from_str::<TargetRef>(r#"{"kind":"Mesh","nmae":"x"}"#).is_err());
    }

    #[test]
    fn ranks() {
        assert!(TargetRefKind::Mesh.rank() < TargetRefKind::MeshSubset.rank());
        assert!(TargetRefKind::MeshService.rank() < TargetRefKind::MeshServiceSubset.rank());
    }
}
