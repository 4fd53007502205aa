//! Old TrafficPermission policy (`sources` allowed to reach `destinations`) and its validator.
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/traffic_permission.proto` (shape) and
//! `pkg/core/resources/apis/mesh/traffic_permission_validator.go` (rules). The selector rules
//! it shares with the other old policies are in [`crate::old::selectors`].

use serde::{Deserialize, Serialize};

use crate::old::selectors::{
    deserialize_selectors, validate_sources_and_destinations, Selector, SelectorRules,
};
use crate::validate::ValidationError;

pub use crate::target_ref::{PROTOCOL_TAG, SERVICE_TAG};

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
        validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY,
            &SelectorRules::NON_EMPTY,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{self, assert_round_trip, decodes, resource, v};
    use crate::resource::Spec;

    fn violations(spec: &str) -> Vec<(String, String)> {
        test_support::violations::<TrafficPermission>(spec)
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
            let resource = resource(doc);
            assert!(resource.validate().violations.is_empty(), "{doc}");
            assert_round_trip(doc);
        }
        let Spec::TrafficPermission(tp) = resource(SEED.split("---").next().unwrap()).spec else {
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
    fn unknown_fields_are_decode_errors() {
        assert!(!decodes::<TrafficPermission>("conf: {}\n"));
        assert!(!decodes::<TrafficPermission>(
            "sources:\n- match: {kuma.io/service: a}\n  tags: {}\n"
        ));
        assert!(!decodes::<TrafficPermission>(
            "sources:\n- match:\n    kuma.io/service: 1\n"
        ));
        assert!(decodes::<TrafficPermission>("sources:\ndestinations:\n"));
    }
}
