//! MeshTrafficPermission: the typed spec (which clients may reach the selected proxies) and
//! its validator.
//!
//! Follows Kuma v2.7.29, `pkg/plugins/policies/meshtrafficpermission/api/v1alpha1/`
//! (`meshtrafficpermission.go` for the shape and JSON names, `validator.go` for the rules,
//! `deprecated.go` for [`MeshTrafficPermission::deprecations`]). Validation returns every
//! violation, in Kuma's order, with paths rooted at `spec`.
//!
//! Kuma behaviours reproduced on purpose:
//! - only `from` exists; an empty or absent `from` gives `spec.from: needs at least one item`;
//! - a missing `default` (or `action`, or `action: ""`) gives
//!   `spec.from[i].default.action: must be defined`;
//! - validation does not check the action's value: Kuma's universal validator accepts any
//!   non-empty string (only the Kubernetes CRD schema limits it to `Allow`, `Deny` and
//!   `AllowWithShadowDeny`), so unknown values are kept as [`Action::Other`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::envelope::{Absent, Envelope, Items, Lists};
use super::{validate_items, validate_top_target_ref};
use crate::target_ref::TargetRefKind;
use crate::type_info::ResourceType;
use crate::validate::{ValidationError, MUST_BE_DEFINED};

/// Kinds allowed for the top-level `targetRef` and for `from[].targetRef`.
const KINDS: &[TargetRefKind] = &[
    TargetRefKind::Mesh,
    TargetRefKind::MeshSubset,
    TargetRefKind::MeshService,
    TargetRefKind::MeshServiceSubset,
];

/// MeshTrafficPermission spec: which proxies (`targetRef`) and which clients (`from`) are
/// allowed or denied.
pub type MeshTrafficPermission = Envelope<MeshTrafficPermissionLists>;

/// What a MeshTrafficPermission spec holds: `from` items of [`Conf`], no `to`.
#[derive(Debug, Clone, PartialEq)]
pub enum MeshTrafficPermissionLists {}

impl Lists for MeshTrafficPermissionLists {
    const TYPE: ResourceType = ResourceType::MeshTrafficPermission;
    type To = Absent;
    type From = Items<Conf>;
}

/// One `from` item: a client group and its action.
pub type Item = super::Item<Conf>;

/// Configuration for one client group (Kuma's `Conf`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conf {
    /// What to do with the clients' requests; required by validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// The action for a client group. Any other string is kept verbatim as [`Action::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Let the requests pass.
    Allow,
    /// Block the requests.
    Deny,
    /// Let the requests pass but log them as if they were denied.
    AllowWithShadowDeny,
    /// Any other string (including `""`, which validation reports as not defined).
    Other(String),
}

impl Action {
    /// Kuma's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Allow => "Allow",
            Self::Deny => "Deny",
            Self::AllowWithShadowDeny => "AllowWithShadowDeny",
            Self::Other(s) => s,
        }
    }

    /// Parse Kuma's spelling; anything else becomes [`Action::Other`].
    pub fn parse(s: &str) -> Self {
        match s {
            "Allow" => Self::Allow,
            "Deny" => Self::Deny,
            "AllowWithShadowDeny" => Self::AllowWithShadowDeny,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Action {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::parse(&String::deserialize(d)?))
    }
}

impl MeshTrafficPermission {
    /// Kuma 2.7's MeshTrafficPermission validation: every violation, paths rooted at `spec`
    /// (`spec.from[0].default.action`). Empty means valid.
    pub fn validate(&self) -> ValidationError {
        let (mut err, spec) = validate_top_target_ref(&self.target_ref, KINDS, false);
        let from = spec.field("from");
        if self.from_items().is_empty() {
            err.violation(&from, "needs at least one item");
        }
        validate_items(
            &mut err,
            &from,
            self.from_items(),
            KINDS,
            |err, path, conf| {
                let action = conf.and_then(|c| c.action.as_ref());
                if action.is_none_or(|a| a.as_str().is_empty()) {
                    err.violation(&path.field("action"), MUST_BE_DEFINED);
                }
            },
        );
        err
    }

    /// Kuma's deprecation warnings for this spec (shown on apply; they do not fail validation).
    pub fn deprecations(&self) -> Vec<String> {
        if self
            .from_items()
            .iter()
            .any(|f| f.target_ref.kind == Some(TargetRefKind::MeshService))
        {
            vec!["MeshService value for 'from[].targetRef.kind' is deprecated, use MeshSubset with 'kuma.io/service' instead".to_owned()]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::test_support::{assert_round_trip, decodes, document, v};

    fn decode(spec: &str) -> MeshTrafficPermission {
        crate::policies::test_support::decode(spec)
    }

    fn violations(spec: &str) -> Vec<(String, String)> {
        crate::policies::test_support::violations::<MeshTrafficPermission>(spec)
    }

    const ALL_KINDS: &str = "
targetRef:
  kind: Mesh
from:
  - targetRef:
      kind: Mesh
    default:
      action: Allow
  - targetRef:
      kind: MeshSubset
      tags:
        kuma.io/zone: us-east
        env: dev
    default:
      action: Deny
  - targetRef:
      kind: MeshService
      name: backend
    default:
      action: AllowWithShadowDeny
  - targetRef:
      kind: MeshServiceSubset
      name: backend
      tags:
        version: v1
    default:
      action: Deny
";

    #[test]
    fn valid_examples() {
        assert!(violations(ALL_KINDS).is_empty());
        for top in [
            "kind: MeshSubset\n  tags:\n    env: prod",
            "kind: MeshService\n  name: backend",
            "kind: MeshServiceSubset\n  name: backend\n  tags:\n    version: v2",
        ] {
            let spec = format!(
                "targetRef:\n  {top}\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      action: Deny\n"
            );
            assert!(violations(&spec).is_empty(), "{spec}");
        }
    }

    #[test]
    fn round_trip_is_lossless() {
        for spec in [
            ALL_KINDS,
            "targetRef:\n  kind: MeshService\n  name: backend\nfrom: []\n",
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n",
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n    default: {}\n",
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      action: Maybe\n",
        ] {
            assert_round_trip(&document::<MeshTrafficPermission>(spec));
        }
        let mtp = decode(ALL_KINDS);
        let actions: Vec<_> = mtp
            .from_items()
            .iter()
            .map(|f| f.default.as_ref().and_then(|c| c.action.clone()))
            .collect();
        assert_eq!(
            actions,
            [
                Some(Action::Allow),
                Some(Action::Deny),
                Some(Action::AllowWithShadowDeny),
                Some(Action::Deny)
            ]
        );
    }

    #[test]
    fn unknown_fields_are_decode_errors() {
        for spec in [
            "targetRef:\n  kind: Mesh\nto:\n  - targetRef:\n      kind: Mesh\n",
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      acton: Allow\n",
        ] {
            assert!(!decodes::<MeshTrafficPermission>(spec), "{spec}");
        }
    }

    #[test]
    fn empty_from() {
        let want = [v("spec.from", "needs at least one item")];
        assert_eq!(
            violations("targetRef:\n  kind: MeshService\n  name: backend\nfrom: []\n"),
            want
        );
        assert_eq!(
            violations("targetRef:\n  kind: MeshService\n  name: backend\n"),
            want
        );
    }

    #[test]
    fn unsupported_kinds() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: MeshGateway
  name: gw
from:
  - targetRef:
      kind: MeshGatewayRoute
      name: mgr-1
    default:
      action: Allow
  - targetRef:
      kind: MeshHTTPRoute
      name: route
    default:
      action: Allow
"
            ),
            [
                v("spec.targetRef.kind", "value is not supported"),
                v("spec.from[0].targetRef.kind", "value is not supported"),
                v("spec.from[1].targetRef.kind", "value is not supported"),
            ]
        );
    }

    #[test]
    fn missing_action() {
        assert_eq!(
            violations(
                "
targetRef:
  kind: Mesh
from:
  - targetRef:
      kind: Mesh
  - targetRef:
      kind: MeshService
    default: {}
  - targetRef:
      kind: Mesh
    default:
      action: ''
  - targetRef:
      kind: Mesh
    default:
      action: Whatever
"
            ),
            [
                v("spec.from[0].default.action", "must be defined"),
                v(
                    "spec.from[1].targetRef.name",
                    "must be set with kind MeshService"
                ),
                v("spec.from[1].default.action", "must be defined"),
                v("spec.from[2].default.action", "must be defined"),
            ]
        );
    }

    #[test]
    fn deprecations() {
        assert_eq!(decode(ALL_KINDS).deprecations().len(), 1);
        assert!(decode(
            "targetRef:\n  kind: Mesh\nfrom:\n  - targetRef:\n      kind: Mesh\n    default:\n      action: Allow\n"
        )
        .deprecations()
        .is_empty());
    }
}
