//! Selectors of the old policies (`sources`, `destinations`, `selectors`): the [`Selector`]
//! type, its decoding and Kuma's selector validation.
//!
//! Follows Kuma v2.7.29, the selector helpers of `pkg/core/resources/apis/mesh/validators.go`
//! (`ValidateSelectors`, `ValidateSelector`, `OnlyServiceTagAllowed`, `ProtocolValidator`), as
//! [`SelectorRules`] and [`validate_selectors`].
//!
//! Decoding follows Kuma's JSON loader where YAML users rely on it: `null` anywhere means
//! "unset", so `match:` with no value is an empty selector and `kuma.io/service:` with no value
//! is the empty tag value (`tag value must be non-empty`), exactly as Kuma reports them.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::target_ref::{is_valid_tag_name, PROTOCOL_TAG, SERVICE_TAG};
use crate::validate::{go_quote, PathBuilder, ValidationError};

/// One entry of `sources`, `destinations` or `selectors`: `{match: {tag: value}}`, where a value
/// of `*` matches any value of that tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Tag requirements, all of which must hold.
    #[serde(rename = "match", default)]
    pub match_tags: BTreeMap<String, String>,
}

impl Selector {
    /// `true` when every tag of the selector is present in `tags` with an equal value or `*`.
    pub fn matches(&self, tags: &BTreeMap<String, String>) -> bool {
        self.match_tags
            .iter()
            .all(|(k, v)| tags.get(k).is_some_and(|tv| v == "*" || v == tv))
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
    /// At least one selector, each with at least one tag (TrafficPermission's lists,
    /// FaultInjection's sources).
    pub const NON_EMPTY: SelectorRules = SelectorRules {
        require_at_least_one_selector: true,
        require_at_least_one_tag: true,
        require_service: false,
        only_service_tag: false,
        protocols: None,
    };
    /// [`SelectorRules::NON_EMPTY`] plus a mandatory `kuma.io/service` tag (sources of Timeout
    /// and CircuitBreaker).
    pub const NON_EMPTY_WITH_SERVICE: SelectorRules = SelectorRules {
        require_service: true,
        ..SelectorRules::NON_EMPTY
    };
    /// Kuma's `OnlyServiceTagAllowed` (destinations of Timeout and CircuitBreaker).
    pub const ONLY_SERVICE_TAG: SelectorRules = SelectorRules {
        require_at_least_one_selector: true,
        require_at_least_one_tag: false,
        require_service: true,
        only_service_tag: true,
        protocols: None,
    };
}

/// The start of every old source/destination policy's `Validate`: `sources` with
/// `source_rules`, then `destinations` with `destination_rules`.
pub fn validate_sources_and_destinations(
    sources: &[Selector],
    destinations: &[Selector],
    source_rules: &SelectorRules,
    destination_rules: &SelectorRules,
) -> ValidationError {
    let mut err = validate_selectors(&PathBuilder::root().field("sources"), sources, source_rules);
    err.add(validate_selectors(
        &PathBuilder::root().field("destinations"),
        destinations,
        destination_rules,
    ));
    err
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{pairs, v};

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
}
