//! TrafficPermission to MeshTrafficPermission.
//!
//! The mapping follows the transition MADR (seed 000, "TrafficPermission ->
//! MeshTrafficPermission": `destinations` become the top-level `targetRef`, each source a `from`
//! item with `action: Allow`) and what Umbra generates for each policy
//! (`xds/src/plugins/traffic_permission.rs`, after Kuma 2.7's network RBAC configurer and its
//! `meshtrafficpermission` plugin):
//!
//! - TrafficPermission is an inbound policy: `destinations[i]` select the proxies' inbounds and
//!   become the top-level `targetRef` of one MeshTrafficPermission each (`<name>-<i+1>` when
//!   there are several);
//! - `sources[j]` become `from` items with `default.action: Allow`. A source tag with the value
//!   `*` is left out, exactly as Kuma leaves it out of the old RBAC principal, so the principal
//!   is the same (`spiffe://<mesh>/<service>`, `kuma://<tag>/<value>`, `andIds`, `any`).
//!
//! What stays different is reported as [`Note`]s: the RBAC policy is keyed
//! `MeshTrafficPermission` instead of the TrafficPermission's name and, on HTTP inbounds, moves
//! from a network filter to an HTTP filter of the connection manager (seed 000's "noise"), its
//! principals in the rules' order; and the precedence (old: the single best-matching
//! TrafficPermission per inbound; new: every MeshTrafficPermission selecting the inbound adds
//! its clients).

use serde_json::json;

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::resource::{ResourceType, Spec};

/// Convert a TrafficPermission to MeshTrafficPermissions.
///
/// # Errors
/// [`ConvertError::Empty`] without sources or destinations.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::TrafficPermission(tp) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a TrafficPermission"));
    };
    if tp.sources.is_empty() || tp.destinations.is_empty() {
        return Err(ctx.empty("a TrafficPermission without sources or destinations allows nothing"));
    }
    let mut notes = Vec::new();

    // The sources' selector notes (a `*` tag left out) do not apply here: Kuma's principal for
    // the old source leaves the same tags out.
    let from = selectors::items(
        &tp.sources,
        "sources",
        selectors::target_ref,
        &json!({"action": "Allow"}),
        &mut Vec::new(),
    );
    let targets = selectors::distinct_targets(&tp.destinations, "destinations", &mut notes);

    notes.push(
        Note::new(
            NoteKind::Default,
            "destinations",
            "the RBAC policy is keyed `MeshTrafficPermission` instead of the TrafficPermission's name, and on HTTP inbounds MeshTrafficPermission replaces the network RBAC filter with an envoy.filters.http.rbac filter in the connection manager (no statPrefix); the principals are the same, in the order of the rules built from the `from` items (most specific first) rather than of the sources, which only shows inside the renamed policy",
        )
        .affecting(&["policies", "filters", "httpFilters"]),
    );
    notes.push(Note::new(
        NoteKind::Semantics,
        "destinations",
        "Kuma applies only the best-matching TrafficPermission per inbound (most specific destination, then newest): another one matching the same inbound has no effect; every MeshTrafficPermission selecting an inbound adds its clients, so a broader converted policy (e.g. from a `kuma.io/service: '*'` destination) now also allows its sources on inbounds a more specific TrafficPermission used to restrict",
    ));

    let outputs = ctx.output_per_target(
        ResourceType::MeshTrafficPermission,
        &targets,
        |target| json!({"targetRef": target, "from": from}),
    )?;
    Ok((outputs, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{conv, fields, names, ok};

    #[test]
    fn the_seed_examples_convert_to_the_seed_replacements() {
        let c = ok("
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
");
        assert_eq!(c.outputs.len(), 1);
        assert_eq!(c.outputs[0].ty(), ResourceType::MeshTrafficPermission);
        assert_eq!(c.outputs[0].meta.name, "on-redis");
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({
                "targetRef": {"kind": "MeshService", "name": "redis_kuma-demo_svc_6379"},
                "from": [
                    {
                        "targetRef": {"kind": "MeshService", "name": "frontend_kuma-demo_svc_8080"},
                        "default": {"action": "Allow"},
                    },
                    {
                        "targetRef": {"kind": "MeshService", "name": "backend_kuma-demo_svc_3001"},
                        "default": {"action": "Allow"},
                    },
                ],
            })
        );
        assert_eq!(
            fields(&c),
            [
                (NoteKind::Default, "destinations"),
                (NoteKind::Semantics, "destinations"),
            ]
        );

        let c = ok("
type: TrafficPermission
name: on-frontend
mesh: default
sources:
  - match:
      kuma.io/service: '*'
destinations:
  - match:
      kuma.io/service: frontend_kuma-demo_svc_8080
");
        assert_eq!(
            c.outputs[0].spec_value(),
            json!({
                "targetRef": {"kind": "MeshService", "name": "frontend_kuma-demo_svc_8080"},
                "from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "Allow"}}],
            })
        );
        assert_eq!(c.notes.len(), 2);
        assert_eq!(c.notes[0].affects, ["policies", "filters", "httpFilters"]);
    }

    #[test]
    fn subsets_and_wildcards() {
        let c = ok("
type: TrafficPermission
name: tp
mesh: default
sources:
  - match:
      kuma.io/service: web
      env: prod
  - match:
      kuma.io/zone: east
      version: '*'
  - match:
      kuma.io/service: web
      env: prod
destinations:
  - match:
      kuma.io/service: '*'
  - match:
      team: payments
      version: '*'
");
        assert_eq!(names(&c), ["tp-1", "tp-2"]);
        let spec = c.outputs[1].spec_value();
        assert_eq!(
            spec["targetRef"],
            json!({"kind": "MeshSubset", "tags": {"team": "payments"}})
        );
        assert_eq!(
            spec["from"],
            json!([
                {
                    "targetRef": {"kind": "MeshServiceSubset", "name": "web", "tags": {"env": "prod"}},
                    "default": {"action": "Allow"},
                },
                {
                    "targetRef": {"kind": "MeshSubset", "tags": {"kuma.io/zone": "east"}},
                    "default": {"action": "Allow"},
                },
            ])
        );
        assert_eq!(
            c.outputs[0].spec_value()["targetRef"],
            json!({"kind": "Mesh"})
        );
        // The destination's wildcard widens the target; the source's does not change the
        // principal.
        let selector_fields: Vec<&str> = c
            .notes
            .iter()
            .filter(|n| n.kind == NoteKind::Selector)
            .map(|n| n.field.as_str())
            .collect();
        assert_eq!(selector_fields, ["destinations[1].match"]);
    }

    #[test]
    fn errors() {
        let r = conv(
            "
type: TrafficPermission
name: tp
mesh: default
destinations:
  - match:
      kuma.io/service: a
",
        );
        assert!(matches!(r, Err(ConvertError::Empty { .. })));
    }
}
