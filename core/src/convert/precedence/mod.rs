//! Naming the outputs of a list conversion so that the new policies' merge order reproduces the
//! old policies' precedence (issue 19, "The migration workflow"; seed 000's Timeout ->
//! MeshTimeout example, whose more specific replacements are named `aaa-...` so that they win
//! the merge; seed 002 for the new order). Owned by [`super::convert`]: [`super::convert_one`]
//! converts one policy and names nothing.
//!
//! **Old precedence** (Kuma 2.7.29, `pkg/core/policy/{connection_matcher,dataplane_matcher}.go`,
//! as [`crate::old_matching`] implements it): for each family the pass applies to, Kuma picks
//! the *single* most specific policy and applies it whole:
//! - Timeout (`pkg/xds/topology/timeouts.go`), TrafficLog (`pkg/core/logs/matcher.go`):
//!   `SelectOutboundConnectionPolicies`, per proxy and outbound service;
//! - CircuitBreaker, HealthCheck, Retry (`pkg/xds/topology/{circuitbreakers,healthchecks,
//!   retries}.go`): `SelectConnectionPolicies`, per proxy and outbound service;
//! - TrafficTrace (`pkg/xds/topology/traffictrace.go`): `SelectDataplanePolicy`, per proxy.
//!
//! The rank is the matching selectors' tag counts (source + destination), ties go to the newest
//! policy (by creation time; Umbra, like an unset Go time, breaks the remaining ties by name).
//!
//! **New precedence** ([`crate::matching::precedence`], seed 002): every policy selecting the
//! proxy (and destination) merges, ordered by top-level targetRef kind, then `kuma.io/origin`,
//! then name, the lexically smallest name last and winning. Their replacements (MeshTimeout,
//! MeshAccessLog, MeshCircuitBreaker, MeshHealthCheck, MeshRetry, MeshTrace) replace lists
//! whole, so the policy that wins the merge gives every field it sets.
//!
//! **Families left alone**, because no naming reproduces their old semantics:
//! FaultInjection and RateLimit (Kuma applies *every*
//! matching policy on an inbound, `SelectInboundConnectionMatchingPolicies`, while
//! MeshFaultInjection's `http` list and MeshRateLimit's limits replace each other);
//! TrafficPermission (one best policy per inbound, but MeshTrafficPermission `from` items only
//! add `Allow`ed clients: names change nothing); ProxyTemplate (one best template per proxy,
//! but every MeshProxyPatch's `appendModifications` are concatenated: a broader patch applies
//! whatever the order); TrafficRoute (its MeshHTTPRoute/MeshTCPRoute outputs are referenced
//! by name from other policies, so they are never renamed, and its MeshLoadBalancingStrategy
//! outputs are left to the same order as the routes they come with). Their converters' notes
//! explain the difference.
//!
//! **The pass**, per family and mesh: probe points (a proxy's inbound tags, and for outbound
//! families a destination service) are built from every old selector and every output's
//! targetRef (`*` standing for "a value no selector names"), closed under intersection. At each
//! point the old winner W ([`crate::old_matching`]) must win the merge over every other output
//! that applies there. When the top-level kinds (or origins) decide, nothing can be done by
//! naming; otherwise W's output must sort before the other one. Outputs are processed after
//! everything they must beat: an output that already sorts first keeps its name, else it gets
//! the first of the prefixes `aaa-` (seed 000), `aa-`, `a-`, `0-`, `0-0-`, ... that sorts it
//! before all of them and gives a name no resource of the type and mesh has (over 253
//! characters the end is replaced by a hash). Contradictory requirements (W1 beats W2 at one
//! point, W2 beats W1 at another) leave the names as they are.
//!
//! **Notes**: every conversion of these families gets one
//! [`NoteKind::Semantics`](super::model::NoteKind::Semantics) note on
//! `sources` (`selectors` for TrafficTrace) saying what was renamed and whether the order now
//! reproduces the old precedence. Where it cannot, the note says where and why, and its
//! `affects` names the Envoy fields whose values differ: at the Dataplanes given among the
//! resources when there are any (those are the differences a migration diff shows), else at
//! the probe points. Fields a winning policy leaves unset and a broader one sets still merge
//! in: the family converters note that.
//!
//! **Layout**: this module owns the pass's entry point ([`apply`]); the work is in leaf
//! submodules: `families` (the families and how Kuma picks their policy), `group` (one family
//! and mesh: requirements, renames, findings, the note's message), `probes` (probe points and
//! the given Dataplanes as probes), `solve` (names satisfying the requirements) and `fields`
//! (conf differences as the Envoy fields a note's `affects` names).

use std::collections::BTreeSet;

use super::model::{Conversion, ConvertError};
use crate::dataplane::DataplaneSpec;
use crate::resource::{Resource, ResourceType, Spec, TypeKind};

mod families;
mod fields;
mod group;
mod probes;
mod solve;

pub use families::{family, Family, Scope, FAMILIES};
use group::Group;
pub use solve::PREFIXES;

/// Name the outputs of `results` (one per old policy of `resources`, in order, as
/// [`super::convert`] produces them) so that the merge order reproduces the old precedence,
/// and add each conversion's precedence note.
pub fn apply(resources: &[Resource], results: &mut [Result<Conversion, ConvertError>]) {
    let olds: Vec<&Resource> = resources
        .iter()
        .filter(|r| r.ty().kind() == TypeKind::OldPolicy)
        .collect();
    if olds.len() != results.len() {
        return;
    }
    let mut taken: BTreeSet<(ResourceType, String, String)> = resources
        .iter()
        .filter(|r| r.ty().kind() != TypeKind::OldPolicy)
        .map(|r| (r.ty(), r.meta.mesh.clone(), r.meta.name.clone()))
        .collect();
    for c in results.iter().flatten() {
        for o in &c.outputs {
            taken.insert((o.ty(), o.meta.mesh.clone(), o.meta.name.clone()));
        }
    }
    for fam in FAMILIES {
        let meshes: BTreeSet<&str> = olds
            .iter()
            .filter(|r| r.ty() == fam.old)
            .map(|r| r.meta.mesh.as_str())
            .collect();
        for mesh in meshes {
            let members: Vec<usize> = (0..olds.len())
                .filter(|&i| olds[i].ty() == fam.old && olds[i].meta.mesh == mesh)
                .collect();
            let dataplanes: Vec<(&str, &DataplaneSpec)> = resources
                .iter()
                .filter(|r| r.meta.mesh == mesh)
                .filter_map(|r| match &r.spec {
                    Spec::Dataplane(d) => Some((r.meta.name.as_str(), d)),
                    _ => None,
                })
                .collect();
            let mut group = Group::new(*fam, &olds, &members, results);
            group.run(&dataplanes, results, &mut taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::{Note, NoteKind};
    use crate::convert::{convert, convert_one, Options};
    use crate::resource::DISPLAY_NAME_LABEL;

    fn resources(yaml: &str) -> Vec<Resource> {
        Resource::all_from_bytes(yaml.as_bytes()).unwrap()
    }

    fn run(yaml: &str) -> Vec<Conversion> {
        convert(&resources(yaml), &Options::default())
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    fn names(cs: &[Conversion]) -> Vec<&str> {
        cs.iter()
            .flat_map(|c| c.outputs.iter().map(|o| o.meta.name.as_str()))
            .collect()
    }

    /// The precedence note (the last one the pass adds).
    fn note(c: &Conversion) -> &Note {
        c.notes
            .iter()
            .rev()
            .find(|n| n.message.starts_with("precedence among"))
            .unwrap()
    }

    fn timeout(name: &str, source: &str, destinations: &[&str], connect: &str) -> String {
        let dests: String = destinations
            .iter()
            .map(|d| format!("- match:\n    kuma.io/service: '{d}'\n"))
            .collect();
        format!(
            "---\ntype: Timeout\nmesh: default\nname: {name}\nsources:\n- match:\n    kuma.io/service: '{source}'\ndestinations:\n{dests}conf:\n  connectTimeout: {connect}\n"
        )
    }

    fn circuit_breaker(name: &str, source: &str, destination: &str, extra: &str) -> String {
        format!(
            "---\ntype: CircuitBreaker\nmesh: default\nname: {name}\n{extra}sources:\n- match:\n    kuma.io/service: '{source}'\ndestinations:\n- match:\n    kuma.io/service: '{destination}'\nconf:\n  interval: 5s\n  detectors:\n    totalErrors: {{consecutive: {}}}\n",
            name.len()
        )
    }

    #[test]
    fn seed_000_timeouts_get_the_aaa_prefix_and_a_note_that_the_order_holds() {
        let cs = run(&format!(
            "{}{}{}",
            timeout("timeout-global", "*", &["*"], "21s"),
            timeout(
                "timeout-to-backend",
                "*",
                &["backend_kuma-demo_svc_3001"],
                "31s"
            ),
            timeout(
                "timeout-to-redis",
                "*",
                &["redis_kuma-demo_svc_6379"],
                "41s"
            ),
        ));
        assert_eq!(
            names(&cs),
            [
                "timeout-global",
                "aaa-timeout-to-backend",
                "aaa-timeout-to-redis"
            ]
        );
        for c in &cs {
            let n = note(c);
            assert_eq!((n.kind, n.field.as_str()), (NoteKind::Semantics, "sources"));
            assert!(n.affects.is_empty(), "{n:?}");
            assert!(n.message.contains("reproduces Kuma's"), "{}", n.message);
            // The source stays named in the labels.
            assert_eq!(
                c.outputs[0].meta.labels[super::super::model::CONVERTED_FROM_NAME_LABEL],
                c.source.name
            );
        }
        assert!(note(&cs[1])
            .message
            .contains("timeout-to-backend is renamed aaa-timeout-to-backend"));
        assert!(!note(&cs[0]).message.contains("renamed"));
    }

    #[test]
    fn names_already_in_order_and_disjoint_policies_are_kept() {
        // timeout-backend already sorts before timeout-global; z-api and a-db never overlap.
        let cs = run(&format!(
            "{}{}{}{}",
            timeout("timeout-global", "*", &["*"], "21s"),
            timeout("timeout-backend", "*", &["backend"], "31s"),
            timeout("z-api", "web", &["api"], "2s"),
            timeout("a-db", "api", &["db"], "3s"),
        ));
        assert_eq!(
            names(&cs),
            ["timeout-global", "timeout-backend", "z-api", "a-db"]
        );
        assert!(cs.iter().all(|c| note(c).affects.is_empty()));
    }

    #[test]
    fn convert_one_names_nothing() {
        let r = resources(&timeout("timeout-to-backend", "*", &["backend"], "31s"));
        let c = convert_one(&r[0], &Options::default()).unwrap();
        assert_eq!(c.outputs[0].meta.name, "timeout-to-backend");
        assert!(!c
            .notes
            .iter()
            .any(|n| n.message.starts_with("precedence among")));
    }

    #[test]
    fn other_families_are_left_alone() {
        let cs = run(
            "type: TrafficPermission\nmesh: default\nname: z-web\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: web}\n---\ntype: TrafficPermission\nmesh: default\nname: a-all\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\n",
        );
        assert_eq!(names(&cs), ["z-web", "a-all"]);
        assert!(cs.iter().all(|c| !c
            .notes
            .iter()
            .any(|n| n.message.starts_with("precedence among"))));
        assert!(family(ResourceType::FaultInjection).is_none());
        assert!(family(ResourceType::ProxyTemplate).is_none());
        assert_eq!(
            family(ResourceType::TrafficTrace).map(|f| f.scope),
            Some(Scope::Dataplane)
        );
    }

    #[test]
    fn a_top_level_kind_that_contradicts_kuma_is_noted_with_the_fields() {
        // frontend -> backend: cb-to-backend (* -> backend) and zz-frontend (frontend -> *) rank
        // equally; without creation times the first by name wins in Kuma's order as Umbra
        // applies it (cb-to-backend), but zz-frontend's MeshService top level wins the merge.
        let yaml = format!(
            "{}{}",
            circuit_breaker("cb-to-backend", "*", "backend", ""),
            circuit_breaker("zz-frontend", "frontend", "*", ""),
        );
        let cs = run(&yaml);
        assert_eq!(names(&cs), ["cb-to-backend", "zz-frontend"]);
        let n = note(&cs[0]);
        assert!(n.message.contains("cannot reproduce"), "{}", n.message);
        assert!(n.message.contains("MeshService"), "{}", n.message);
        assert!(n.message.contains("rank equally"), "{}", n.message);
        assert!(
            n.message.contains("without creation times"),
            "{}",
            n.message
        );
        // No Dataplane given: the probe points decide; the detector count differs.
        assert_eq!(n.affects, ["outlierDetection"]);
        assert!(note(&cs[1]).affects.is_empty());

        // A Dataplane that never calls backend: nothing shows.
        let with_dp = format!(
            "type: Dataplane\nmesh: default\nname: fe\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: frontend}}\n  outbound:\n  - {{port: 81, tags: {{kuma.io/service: redis}}}}\n{yaml}"
        );
        let cs = run(&with_dp);
        let n = note(&cs[0]);
        assert!(n.message.contains("cannot reproduce"), "{}", n.message);
        assert!(n.affects.is_empty(), "{n:?}");
        assert!(
            n.message.contains("at the given Dataplanes"),
            "{}",
            n.message
        );

        // With creation times Kuma picks the newer one: zz-frontend, as the merge does.
        let timed = format!(
            "{}{}",
            circuit_breaker(
                "cb-to-backend",
                "*",
                "backend",
                "creationTime: '2024-01-01T00:00:00Z'\n"
            ),
            circuit_breaker(
                "zz-frontend",
                "frontend",
                "*",
                "creationTime: '2024-06-01T00:00:00Z'\n"
            ),
        );
        let cs = run(&timed);
        assert!(cs.iter().all(|c| note(c).message.contains("reproduces")));
        assert!(cs.iter().all(|c| note(c).affects.is_empty()));
    }

    #[test]
    fn contradictory_rankings_keep_the_names_and_are_noted() {
        // p1 is the most specific for x, p2 for y; both target Mesh with a Mesh `to` item, so
        // one of them must lose somewhere.
        let cs = run(&format!(
            "{}{}",
            timeout("p1", "*", &["x", "*"], "1s"),
            timeout("p2", "*", &["y", "*"], "2s"),
        ));
        assert_eq!(names(&cs), ["p1", "p2"]);
        assert!(note(&cs[0]).message.contains("reproduces"));
        let n = note(&cs[1]);
        assert!(n.message.contains("calling y"), "{}", n.message);
        assert!(n.message.contains("no name order"), "{}", n.message);
        assert_eq!(n.affects, ["connectTimeout"]);
    }

    #[test]
    fn the_display_name_label_is_renamed_too() {
        let yaml = format!(
            "{}{}",
            timeout("t-all", "*", &["*"], "1s"),
            timeout("t-web", "*", &["web"], "2s").replace(
                "name: t-web\n",
                "name: t-web-1a2b\nlabels:\n  kuma.io/display-name: t-web\n"
            ),
        );
        let cs = run(&yaml);
        let out = &cs[1].outputs[0];
        assert_eq!(out.meta.name, "aaa-t-web-1a2b");
        assert_eq!(out.meta.labels[DISPLAY_NAME_LABEL], "aaa-t-web");
    }

    #[test]
    fn renames_avoid_names_in_use() {
        let yaml = format!(
            "type: MeshTimeout\nmesh: default\nname: aaa-t-web\nspec:\n  targetRef: {{kind: MeshService, name: other}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 1s}}\n{}{}",
            timeout("t-all", "*", &["*"], "1s"),
            timeout("t-web", "*", &["web"], "2s"),
        );
        let cs = run(&yaml);
        assert_eq!(names(&cs), ["t-all", "aa-t-web"]);
    }

    #[test]
    fn a_trace_per_proxy_keeps_names_its_kinds_order() {
        let mesh = "type: Mesh\nname: default\ntracing:\n  defaultBackend: zipkin\n  backends:\n  - name: zipkin\n    type: zipkin\n    conf: {url: 'http://zipkin:9411/api/v2/spans'}\n";
        let trace = |name: &str, selector: &str| {
            format!("---\ntype: TrafficTrace\nmesh: default\nname: {name}\nselectors:\n- match: {{{selector}}}\n")
        };
        let cs = run(&format!(
            "{mesh}{}{}",
            trace("all", "kuma.io/service: '*'"),
            trace("web", "kuma.io/service: web")
        ));
        assert_eq!(names(&cs), ["all", "web"]);
        for c in &cs {
            let n = note(c);
            assert_eq!(n.field, "selectors");
            assert!(n.message.contains("reproduces"), "{}", n.message);
        }
    }
}
