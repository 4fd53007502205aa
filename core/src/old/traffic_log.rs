//! Old TrafficLog and TrafficTrace policies: which traffic is logged (to a Mesh `logging`
//! backend) and which dataplanes are traced (to a Mesh `tracing` backend), and their
//! validators. Umbra stores and syncs them; their effect is not generated yet (see
//! [`crate::view::PolicySet::not_generated`]).
//!
//! Follows Kuma v2.7.29: `api/mesh/v1alpha1/traffic_log.proto`, `traffic_trace.proto` and
//! `pkg/core/resources/apis/mesh/traffic_{log,trace}_validator.go`. An empty `conf.backend`
//! means the Mesh's default backend, as in Kuma.

use serde::{Deserialize, Serialize};

use crate::old::selectors::{
    deserialize_selectors, validate_selectors, validate_sources_and_destinations, Selector,
    SelectorRules,
};
use crate::validate::{PathBuilder, ValidationError};

/// `conf` of a TrafficLog or TrafficTrace: the backend's name in the Mesh.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendConf {
    /// Backend name (empty: the Mesh's default backend).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backend: String,
}

/// TrafficLog spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficLog {
    /// Selectors of the clients whose requests are logged.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Selector>,
    /// Selectors of the destination services (only `kuma.io/service` allowed).
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub destinations: Vec<Selector>,
    /// The backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<BackendConf>,
}

/// TrafficTrace spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficTrace {
    /// Selectors of the traced dataplanes.
    #[serde(
        default,
        deserialize_with = "deserialize_selectors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<Selector>,
    /// The backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<BackendConf>,
}

impl TrafficLog {
    /// Kuma's `TrafficLogResource.Validate`: sources (service required), destinations.
    pub fn validate(&self) -> ValidationError {
        validate_sources_and_destinations(
            &self.sources,
            &self.destinations,
            &SelectorRules::NON_EMPTY_WITH_SERVICE,
            &SelectorRules::ONLY_SERVICE_TAG,
        )
    }
}

impl TrafficTrace {
    /// Kuma's `TrafficTraceResource.Validate`: at least one selector with at least one tag.
    pub fn validate(&self) -> ValidationError {
        validate_selectors(
            &PathBuilder::root().field("selectors"),
            &self.selectors,
            &SelectorRules::NON_EMPTY,
        )
    }
}
