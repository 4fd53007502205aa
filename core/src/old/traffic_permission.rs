//! Old TrafficPermission policy (`sources` allowed to reach `destinations`) and its validator,
//! plus the selector rules every old source/destination policy shares.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/traffic_permission.proto` (shape),
//! `pkg/core/resources/apis/mesh/traffic_permission_validator.go` (rules) and the selector
//! helpers of `pkg/core/resources/apis/mesh/validators.go` (`ValidateSelectors`,
//! `ValidateSelector`, `OnlyServiceTagAllowed`, `ProtocolValidator`), which live here as
//! [`SelectorRules`] and [`validate_selectors`] for the other old policies to reuse.
//!
//! Decoding follows Kuma's JSON loader where YAML users rely on it: `null` anywhere means
//! "unset", so `match:` with no value is an empty selector and `kuma.io/service:` with no value
//! is the empty tag value (`tag value must be non-empty`), exactly as Kuma reports them.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::old::Selector;
use crate::target_ref::is_valid_tag_name;
use crate::validate::{go_quote, PathBuilder, ValidationError};

/// Kuma's `kuma.io/service` tag.
pub const SERVICE_TAG: &str = "kuma.io/service";
/// Kuma's `kuma.io/protocol` tag.
pub const PROTOCOL_TAG: &str = "kuma.io/protocol";

/// TrafficPermission spec: dataplanes matching any of `sources` may reach services matching any
/// of `destinations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficPermission {
    /// Selectors of the dataplanes that are sources of traffic.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the services that are destinations of traffic.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
}

impl TrafficPermission {
    /// Kuma's `TrafficPermissionResource.Validate`: both lists need at least one selector and
    /// every selector at least one tag; `kuma.io/service` is not required.
    pub fn validate(&self) -> ValidationError {
        let rules = SelectorRules {
            require_at_least_one_selector: true,
            require_at_least_one_tag: true,
            ..SelectorRules::default()
        };
        let mut err = ValidationError::new();
        err.add(validate_selectors(
            &PathBuilder::root().field("sources"),
            &self.sources,
            &rules,
        ));
        err.add(validate_selectors(
            &PathBuilder::root().field("destinations"),
            &self.destinations,
            &rules,
        ));
        err
    }
}

/// Options of Kuma's `ValidateSelectors` (`ValidateSelectorsOpts` + `ValidateTagsOpts`) as the
/// old policies use them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SelectorRules {
    /// An empty list is `must have at least one element`.
    pub require_at_least_one_selector: bool,
    /// An empty `match` is `must have at least one tag`.
    pub require_at_least_one_tag: bool,
    /// A `match` without `kuma.io/service` is `mandatory tag "kuma.io/service" is missing`.
    pub require_service: bool,
    /// Kuma's `OnlyServiceTagAllowed` extras: the `match` must be exactly one
    /// `kuma.io/service` tag, any other tag is `tag "x" is not allowed`.
    pub only_service_tag: bool,
    /// Kuma's `ProtocolValidator`: when set, `kuma.io/protocol` must be present and one of
    /// these values.
    pub protocols: Option<&'static [&'static str]>,
}

impl SelectorRules {
    /// Kuma's `OnlyServiceTagAllowed` (destinations of Timeout and CircuitBreaker).
    pub const ONLY_SERVICE_TAG: SelectorRules = SelectorRules {
        require_at_least_one_selector: true,
        require_at_least_one_tag: false,
        require_service: true,
        only_service_tag: true,
        protocols: None,
    };
}

/// Kuma's `ValidateSelectors`: each selector is checked at `path[i].match`.
pub fn validate_selectors(
    path: &PathBuilder,
    selectors: &[Selector],
    rules: &SelectorRules,
) -> ValidationError {
    let mut err = ValidationError::new();
    if rules.require_at_least_one_selector && selectors.is_empty() {
        err.violation(path, "must have at least one element");
    }
    for (i, selector) in selectors.iter().enumerate() {
        err.add(validate_selector(
            &path.index(i).field("match"),
            &selector.match_tags,
            rules,
        ));
    }
    err
}

/// `true` for Kuma's selector value set `^([a-zA-Z0-9.\-_:/]*|\*)$`.
fn is_valid_selector_value(value: &str) -> bool {
    value == "*"
        || value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '/'))
}

/// Kuma's `ValidateSelector` (`validateTagKeyValues` with the selector value rule), in Kuma's
/// order: tag count, whole-selector rules, then per tag in sorted order (name, extra name
/// rule, value, value charset), then the mandatory service tag.
pub fn validate_selector(
    path: &PathBuilder,
    tags: &BTreeMap<String, String>,
    rules: &SelectorRules,
) -> ValidationError {
    let mut err = ValidationError::new();
    if rules.require_at_least_one_tag && tags.is_empty() {
        err.violation(path, "must have at least one tag");
    }
    if rules.only_service_tag && (tags.len() != 1 || !tags.contains_key(SERVICE_TAG)) {
        err.violation(
            path,
            format!("must consist of exactly one tag {}", go_quote(SERVICE_TAG)),
        );
    }
    if let Some(protocols) = rules.protocols {
        match tags.get(PROTOCOL_TAG) {
            None => err.violation(path, "protocol must be specified"),
            Some(p) if protocols.contains(&p.as_str()) => {}
            Some(_) => err.violation(
                &path.key(PROTOCOL_TAG),
                format!("must be one of the [{}]", protocols.join(", ")),
            ),
        }
    }
    for (key, value) in tags {
        if key.is_empty() {
            err.violation(path, "tag name must be non-empty");
        }
        if !is_valid_tag_name(key) {
            err.violation(
                &path.key(key),
                "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores",
            );
        }
        if rules.only_service_tag && key != SERVICE_TAG {
            err.violation(
                &path.key(key),
                format!("tag {} is not allowed", go_quote(key)),
            );
        }
        if value.is_empty() {
            err.violation(&path.key(key), "tag value must be non-empty");
        }
        if !is_valid_selector_value(value) {
            err.violation(
                &path.key(key),
                "tag value must consist of alphanumeric characters, dots, dashes, slashes and underscores or be \"*\"",
            );
        }
    }
    if rules.require_service && !tags.contains_key(SERVICE_TAG) {
        err.violation(
            path,
            format!("mandatory tag {} is missing", go_quote(SERVICE_TAG)),
        );
    }
    err
}

/// A selector as written: `null` for the selector, its `match` or a tag value means empty.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSelector {
    #[serde(rename = "match", default)]
    match_tags: Option<BTreeMap<String, Option<String>>>,
}

/// Deserialize a `sources`/`destinations`/`selectors` list the way Kuma's loader reads it:
/// `null` for the list, an item, its `match` or a tag value is the empty value.
pub(crate) fn deserialize_selectors<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<Selector>, D::Error> {
    let raw: Option<Vec<Option<RawSelector>>> = Option::deserialize(d)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .map(|item| Selector {
            match_tags: item
                .and_then(|s| s.match_tags)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect(),
        })
        .collect())
}

/// Deserialize any defaultable field, reading `null` as the default (Kuma's loader skips
/// `null` fields).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Serialize a `google.protobuf.DoubleValue` so integral values are written as integers
/// (`percentage: 50` reads back as `50`, not `50.0`).
pub(crate) fn serialize_opt_f64<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact
    match *v {
        None => s.serialize_none(),
        Some(f) if f.fract() == 0.0 && f.abs() < EXACT => {
            if f < 0.0 {
                s.serialize_i64(f as i64)
            } else {
                s.serialize_u64(f as u64)
            }
        }
        Some(f) => s.serialize_f64(f),
    }
}

/// Shared helpers for the old policies' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::codec::{decode_one, Limits};
    use crate::resource::{Resource, Spec};

    /// Prefix a spec (flush-left YAML) with `type`, `mesh` and `name`.
    pub(crate) fn resource_yaml(ty: &str, spec: &str) -> String {
        format!(
            "type: {ty}\nmesh: default\nname: policy-1\n{}\n",
            spec.trim_matches('\n')
        )
    }

    /// Decode a full resource document.
    pub(crate) fn decode_resource(yaml: &str) -> Resource {
        let value = decode_one(yaml.as_bytes(), Limits::default()).unwrap();
        Resource::from_value(value).unwrap()
    }

    /// Decode `spec` as a resource of type `ty` and return its typed spec.
    pub(crate) fn decode_spec(ty: &str, spec: &str) -> Spec {
        decode_resource(&resource_yaml(ty, spec)).spec
    }

    /// `true` when the document decodes (strictly) into a resource.
    pub(crate) fn decodes(ty: &str, spec: &str) -> bool {
        let value = decode_one(resource_yaml(ty, spec).as_bytes(), Limits::default()).unwrap();
        Resource::from_value(value).is_ok()
    }

    /// Decode → encode must give back the input document.
    pub(crate) fn assert_round_trip(yaml: &str) {
        let input = decode_one(yaml.as_bytes(), Limits::default()).unwrap();
        let resource = Resource::from_value(input.clone()).unwrap();
        assert_eq!(resource.to_value(), input, "{yaml}");
    }

    /// `(field, message)` pairs of a validation result.
    pub(crate) fn pairs(err: crate::validate::ValidationError) -> Vec<(String, String)> {
        err.violations
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    }

    /// Build an expected `(field, message)` pair.
    pub(crate) fn v(field: &str, message: &str) -> (String, String) {
        (field.to_owned(), message.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::resource::Spec;

    fn decode(spec: &str) -> TrafficPermission {
        match decode_spec("TrafficPermission", spec) {
            Spec::TrafficPermission(tp) => tp,
            other => panic!("unexpected spec {other:?}"),
        }
    }

    fn violations(spec: &str) -> Vec<(String, String)> {
        pairs(decode(spec).validate())
    }

    /// The two TrafficPermissions of the transition seed (000); `*` is quoted because a bare
    /// `*` is a YAML alias, which Kuma's loader rejects too.
    const SEED: &str = "
type: TrafficPermission
name: on-redis
mesh: default
sources:
  - match:
      kuma.io/service: frontend_kuma-demo_svc_8080
  - match:
      kuma.io/service: backend_kuma-demo_svc_3001
destinations:
  - match:
      kuma.io/service: redis_kuma-demo_svc_6379
---
type: TrafficPermission
name: on-frontend
mesh: default
sources:
  - match:
      kuma.io/service: '*'
destinations:
  - match:
      kuma.io/service: frontend_kuma-demo_svc_8080
";

    #[test]
    fn seed_examples_are_valid_and_round_trip() {
        for doc in SEED.split("---") {
            let resource = decode_resource(doc);
            assert!(resource.validate().violations.is_empty(), "{doc}");
            assert_round_trip(doc);
        }
        let Spec::TrafficPermission(tp) = decode_resource(SEED.split("---").next().unwrap()).spec
        else {
            panic!("not a TrafficPermission");
        };
        assert_eq!(tp.sources.len(), 2);
        assert_eq!(
            tp.destinations[0].match_tags[SERVICE_TAG],
            "redis_kuma-demo_svc_6379"
        );
    }

    #[test]
    fn bare_star_is_a_yaml_error() {
        let yaml = "type: TrafficPermission\nmesh: default\nname: x\nsources:\n  - match:\n      kuma.io/service: *\n";
        assert!(
            crate::codec::decode_one(yaml.as_bytes(), crate::codec::Limits::default()).is_err()
        );
    }

    #[test]
    fn kuma_empty_spec() {
        assert_eq!(
            violations(""),
            [
                v("sources", "must have at least one element"),
                v("destinations", "must have at least one element"),
            ]
        );
    }

    #[test]
    fn kuma_selectors_without_tags() {
        assert_eq!(
            violations("sources:\n- match: {}\ndestinations:\n- match: {}\n"),
            [
                v("sources[0].match", "must have at least one tag"),
                v("destinations[0].match", "must have at least one tag"),
            ]
        );
    }

    #[test]
    fn kuma_selectors_with_empty_tag_values() {
        let spec = "
sources:
- match:
    kuma.io/service:
    region:
destinations:
- match:
    kuma.io/service:
    region:
";
        assert_eq!(
            violations(spec),
            [
                v(
                    "sources[0].match[\"kuma.io/service\"]",
                    "tag value must be non-empty"
                ),
                v(
                    "sources[0].match[\"region\"]",
                    "tag value must be non-empty"
                ),
                v(
                    "destinations[0].match[\"kuma.io/service\"]",
                    "tag value must be non-empty"
                ),
                v(
                    "destinations[0].match[\"region\"]",
                    "tag value must be non-empty"
                ),
            ]
        );
    }

    #[test]
    fn kuma_multiple_selectors() {
        let spec = "
sources:
- match:
    kuma.io/service:
    region:
- match: {}
destinations:
- match:
    kuma.io/service:
    region:
- match: {}
";
        assert_eq!(
            violations(spec),
            [
                v(
                    "sources[0].match[\"kuma.io/service\"]",
                    "tag value must be non-empty"
                ),
                v(
                    "sources[0].match[\"region\"]",
                    "tag value must be non-empty"
                ),
                v("sources[1].match", "must have at least one tag"),
                v(
                    "destinations[0].match[\"kuma.io/service\"]",
                    "tag value must be non-empty"
                ),
                v(
                    "destinations[0].match[\"region\"]",
                    "tag value must be non-empty"
                ),
                v("destinations[1].match", "must have at least one tag"),
            ]
        );
    }

    #[test]
    fn null_match_and_null_item_are_empty_selectors() {
        assert_eq!(
            violations("sources:\n- match:\ndestinations:\n- \n"),
            [
                v("sources[0].match", "must have at least one tag"),
                v("destinations[0].match", "must have at least one tag"),
            ]
        );
    }

    #[test]
    fn tag_charsets() {
        let spec = "
sources:
- match:
    kuma.io/service: '*'
    bad key: x
    version: v@1
destinations:
- match:
    kuma.io/service: web/v1:80
";
        assert_eq!(
            violations(spec),
            [
                v(
                    "sources[0].match[\"bad key\"]",
                    "tag name must consist of alphanumeric characters, dots, dashes, slashes and underscores"
                ),
                v(
                    "sources[0].match[\"version\"]",
                    "tag value must consist of alphanumeric characters, dots, dashes, slashes and underscores or be \"*\""
                ),
            ]
        );
    }

    #[test]
    fn only_service_tag_rules() {
        let mut tags = BTreeMap::new();
        let path = PathBuilder::root()
            .field("destinations")
            .index(0)
            .field("match");
        let got = pairs(validate_selector(
            &path,
            &tags,
            &SelectorRules::ONLY_SERVICE_TAG,
        ));
        assert_eq!(
            got,
            [
                v(
                    "destinations[0].match",
                    "must consist of exactly one tag \"kuma.io/service\""
                ),
                v(
                    "destinations[0].match",
                    "mandatory tag \"kuma.io/service\" is missing"
                ),
            ]
        );
        tags.insert("kuma.io/service".to_owned(), "backend".to_owned());
        assert!(
            validate_selector(&path, &tags, &SelectorRules::ONLY_SERVICE_TAG)
                .violations
                .is_empty()
        );
    }

    #[test]
    fn unknown_fields_are_decode_errors() {
        assert!(!decodes("TrafficPermission", "conf: {}\n"));
        assert!(!decodes(
            "TrafficPermission",
            "sources:\n- match: {kuma.io/service: a}\n  tags: {}\n"
        ));
        assert!(!decodes(
            "TrafficPermission",
            "sources:\n- match:\n    kuma.io/service: 1\n"
        ));
        assert!(decodes("TrafficPermission", "sources:\ndestinations:\n"));
    }

    #[test]
    fn double_values_serialize_integral_as_integers() {
        #[derive(Serialize)]
        struct W(#[serde(serialize_with = "serialize_opt_f64")] Option<f64>);
        let s = |f| serde_json::to_string(&W(f)).unwrap();
        assert_eq!(s(Some(50.0)), "50");
        assert_eq!(s(Some(-2.0)), "-2");
        assert_eq!(s(Some(1.33)), "1.33");
        assert_eq!(s(Some(1e300)), "1e+300");
        assert_eq!(s(None), "null");
    }
}
