//! Inspect: what a DPP gets, and what it would get if the shadow policies went live
//! (transition seed 000, "Changes in the Inspect API").
//!
//! - `GET /meshes/{mesh}/dataplanes/{name}/_config?shadow=&include=diff`: `{xds, diff?}` where
//!   `xds` is the config document of the requested view and `diff` the RFC 6902 patch from the
//!   Live document to it, so `xds` always equals the live document with `diff` applied
//!   (`shadow=false&include=diff` gives `diff: []`).
//! - `GET .../_rules?shadow=&include=diff`: Kuma's `InspectRules`: the matched rules per
//!   policy type that produces any (to rules, from rules per inbound with its tags and port,
//!   the proxy rule, with origins) and, with `include=diff`, the RFC 6902 diff between the
//!   live and shadow rules at the root. Kuma never implemented shadow for `_rules`; Umbra does.
//!
//! Both answers carry `notGenerated`: the policies of the view that select the DPP but whose
//! effect Umbra does not generate (policies of types other than MeshTimeout whose top-level
//! `targetRef` is a MeshHTTPRoute), each with the reason, then the fields of the Dataplane
//! itself Umbra accepts but does not act on (`metrics`, ...: `type:
//! Dataplane` with its `field`), so neither the config nor a diff is read as if they were in it. `_rules` lists MeshHTTPRoute and MeshTCPRoute rules like any
//! other type and fills `httpMatches` (Kuma's `{hash, match}`, one per match of a route rule).
//!
//! Bad `shadow` or `include` values are 400s; an unknown mesh or dataplane is a 404. The zone
//! proxies' `_config` (ZoneIngress, ZoneEgress) is [`crate::inspect_zone_proxies`].
//!
//! [`MeshShadow`] answers the same question for many DPPs of a mesh at once (the Global's
//! fleet-wide shadow diff, issue 6): the views and the mesh context are built once, DPPs whose
//! dependencies are equal in both views are skipped without generating, the Shadow view of the
//! others regenerates only what the differing policies reach ([`umbra_xds::shadow`]), and
//! changed resources shared by many DPPs are diffed once ([`umbra_xds::diff::DiffCache`]).
//!
//! Both views are generated from the store as the reconciler generates the Live one. The SDS
//! secrets (identity certificates and their private keys, see [`umbra_pki::identity`]) are not part of
//! the document: listeners and clusters still name them, but key material never leaves the
//! zone through the API (Envoy's own config dump redacts it too), and policies cannot change it.

use std::collections::HashMap;

use std::sync::Arc;

use serde_json::{json, Value};
use umbra_core::dataplane::DataplaneSpec;
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{NotGenerated, PolicySet, Promotion, View};
use umbra_xds::context::MeshContext;

use crate::reconciler::vips;
use umbra_core::dependencies::shadow::{view_difference, ViewDifference};
use umbra_xds::diff::{DiffCache, Patch};
use umbra_xds::generate::{generate, Proxy};
use umbra_xds::shadow::{shadow_from_live, Shadow};
use umbra_xds::snapshot::Snapshot;

pub use crate::ingress::ZoneView;
use umbra_api::error::ApiError;

pub use umbra_api::inspect_rules::InspectQuery;
use umbra_api::inspect_rules::{http_matches, rules_doc};

/// An inspect answer (`config` or `rules`) over a mesh's resources, the zone's view, the mesh,
/// the DPP and the query.
pub type InspectFn =
    fn(&[Resource], &ZoneView, &str, &str, InspectQuery) -> Result<Value, ApiError>;

/// Parse the inspect query `pairs` and run `f` (`config` or `rules`) over the store's
/// resources of `mesh`, off the async runtime (generation is CPU work). What both the zone API
/// and the Global's forwarded calls ([`crate::remote_inspect`]) answer.
///
/// # Errors
/// A 400 for bad parameters, `f`'s errors, a 500 if the task fails.
pub async fn answer(
    store: crate::store::Store,
    zone: ZoneView,
    mesh: String,
    name: String,
    pairs: &[(String, String)],
    f: InspectFn,
) -> Result<Value, ApiError> {
    let q = InspectQuery::parse(pairs)?;
    blocking(move || {
        let resources = vips::with_persisted(&store, &mesh, store.mesh_resources(&mesh));
        f(&resources, &zone, &mesh, &name, q)
    })
    .await
}

/// Run `work` (generation: CPU work) off the async runtime.
///
/// # Errors
/// `work`'s error, or a 500 if the task fails.
pub(crate) async fn blocking(
    work: impl FnOnce() -> Result<Value, ApiError> + Send + 'static,
) -> Result<Value, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        ApiError::status(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("inspect task failed: {e}"),
        )
    })?
}

/// The DPP and its mesh's resources, or a 404.
fn find<'a>(
    resources: &'a [Resource],
    mesh: &str,
    name: &str,
) -> Result<&'a DataplaneSpec, ApiError> {
    if !resources
        .iter()
        .any(|r| r.ty() == ResourceType::Mesh && r.meta.name == mesh)
    {
        return Err(ApiError::not_found(format!("mesh {mesh:?} not found")));
    }
    resources
        .iter()
        .find(|r| r.ty() == ResourceType::Dataplane && r.meta.name == name)
        .and_then(Resource::as_dataplane)
        .ok_or_else(|| {
            ApiError::not_found(format!("dataplane {name:?} not found in mesh {mesh:?}"))
        })
}

fn snapshot(
    resources: &[Resource],
    zone: &ZoneView,
    mesh: &str,
    name: &str,
    dp: &DataplaneSpec,
    view: View,
) -> Result<Snapshot, ApiError> {
    let mesh_spec = resources
        .iter()
        .find_map(|r| match &r.spec {
            umbra_core::resource::Spec::Mesh(m) if r.meta.name == mesh => Some(m.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let ctx = zone.context(
        mesh,
        &mesh_spec,
        resources.iter().filter_map(Resource::as_dataplane),
    );
    let policies = PolicySet::build(mesh, resources, view);
    let start = std::time::Instant::now();
    let admin = zone.admin_input(mesh, name, &dp.networking.address);
    let dns = zone.dns_input(mesh, name, dp);
    let generated = generate(
        Proxy {
            name,
            dataplane: dp,
            admin: admin.as_deref(),
            dns: dns.as_ref(),
        },
        &ctx,
        &policies,
    );
    let label = match view {
        View::Shadow => "shadow",
        _ => "live",
    };
    metrics::histogram!(umbra_runtime::metrics::XDS_GENERATION, "view" => label)
        .record(start.elapsed().as_secs_f64());
    generated
        .map_err(|e| ApiError::status(axum::http::StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

pub(crate) fn render_err(e: umbra_xds::render::RenderError) -> ApiError {
    ApiError::status(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("rendering failed: {e}"),
    )
}

/// The `_config` response body.
///
/// # Errors
/// 404 for an unknown mesh/dataplane, 422 when a policy cannot be applied (the detail names it).
pub fn config(
    resources: &[Resource],
    zone: &ZoneView,
    mesh: &str,
    name: &str,
    q: InspectQuery,
) -> Result<Value, ApiError> {
    let dp = find(resources, mesh, name)?;
    let live = snapshot(resources, zone, mesh, name, dp, View::Live)?;
    let live_doc = live.to_document().map_err(render_err)?;
    if !q.shadow {
        let mut body = json!({ "xds": live_doc, "notGenerated": not_generated(resources, mesh, name, dp, View::Live) });
        if q.diff {
            body["diff"] = json!([]);
        }
        return Ok(body);
    }
    let shadow = snapshot(resources, zone, mesh, name, dp, View::Shadow)?;
    let shadow_doc = shadow.to_document().map_err(render_err)?;
    let mut body = json!({ "xds": shadow_doc, "notGenerated": not_generated(resources, mesh, name, dp, View::Shadow) });
    if q.diff {
        let patch = umbra_xds::diff::snapshot_diff(&live, &shadow).map_err(render_err)?;
        body["diff"] = serde_json::to_value(patch).unwrap_or_else(|_| json!([]));
    }
    Ok(body)
}

/// What of DPP `mesh`/`name` is not in its config, as the answers' `notGenerated` list: the
/// policies of `view` that select `dp` but are not generated ([`PolicySet::not_generated`]),
/// then the fields of the Dataplane itself Umbra does not act on
/// ([`NotGenerated::dataplane_fields`]).
fn not_generated(
    resources: &[Resource],
    mesh: &str,
    name: &str,
    dp: &DataplaneSpec,
    view: View,
) -> Value {
    let mut out = PolicySet::build(mesh, resources, view).not_generated(dp);
    out.extend(NotGenerated::dataplane_fields(mesh, name, dp));
    serde_json::to_value(out).unwrap_or_else(|_| json!([]))
}

/// The `_rules` response body: Kuma's `InspectRules` (`api.yaml`), `{resource: Meta, rules:
/// [InspectRule] (see [`rules_doc`]), httpMatches: [HttpMatch] (see [`http_matches`])}`, plus
/// Umbra's `notGenerated` and, with `include=diff`, `diff` (an RFC 6902 patch from the live
/// `rules` to the requested view's; the schema allows these extra members).
///
/// # Errors
/// 404 for an unknown mesh/dataplane.
pub fn rules(
    resources: &[Resource],
    _zone: &ZoneView,
    mesh: &str,
    name: &str,
    q: InspectQuery,
) -> Result<Value, ApiError> {
    let dp = find(resources, mesh, name)?;
    let live = rules_doc(resources, mesh, dp, View::Live);
    let view_doc = if q.shadow {
        rules_doc(resources, mesh, dp, View::Shadow)
    } else {
        live.clone()
    };
    let view = if q.shadow { View::Shadow } else { View::Live };
    let mut body = json!({
        "resource": {"type": "Dataplane", "mesh": mesh, "name": name},
        "rules": view_doc,
        "httpMatches": http_matches(dp, &PolicySet::build(mesh, resources, view)),
        "notGenerated": not_generated(resources, mesh, name, dp, view),
    });
    if q.diff {
        body["diff"] = serde_json::to_value(json_patch::diff(&live, &body["rules"]))
            .unwrap_or_else(|_| json!([]));
    }
    Ok(body)
}

/// Resource diffs a [`MeshShadow`] keeps for reuse across its DPPs.
const DIFF_CACHE_ENTRIES: usize = 20_000;

/// One mesh prepared for many shadow diffs: the mesh context and both views, built once.
#[derive(Debug)]
pub struct MeshShadow {
    mesh: String,
    ctx: MeshContext,
    live: PolicySet,
    shadow: PolicySet,
    /// The mesh's resources, owned (not copied again per DPP).
    resources: Vec<Resource>,
    /// DPP name → its index in `resources`.
    dataplanes: HashMap<String, usize>,
    /// Live snapshots already generated for these exact resources (the reconciler's).
    live_snapshots: HashMap<String, Arc<Snapshot>>,
    cache: DiffCache,
    /// For ingress diffs ([`MeshShadow::with_ingresses`]): this zone's ZoneIngresses and the
    /// other meshes (context and Live policies, by name) their config also spans.
    ingresses: HashMap<String, umbra_core::zone_ingress::ZoneIngressSpec>,
    /// For egress diffs: this zone's ZoneEgresses.
    egresses: HashMap<String, umbra_core::zone_egress::ZoneEgressSpec>,
    other_meshes: Vec<(String, MeshContext, PolicySet)>,
    /// The proxies' admin inputs, as the reconciler takes them (both views carry the same
    /// admin resources, so they never show in a diff).
    admin: Option<crate::admin_tls::AdminLookup>,
    /// The zone's view (the proxies' kuma-dp DNS ports and the meshes' VIPs).
    zone: ZoneView,
}

impl MeshShadow {
    /// Prepare `mesh` from `resources` (the zone store's), with the shadow policies
    /// `promotion` admits in the Shadow view.
    ///
    /// # Errors
    /// 404 for an unknown mesh or an unknown promoted policy, 409 when the promoted policy is
    /// not labelled `kuma.io/effect: shadow`.
    pub fn prepare(
        resources: Vec<Resource>,
        zone: &ZoneView,
        mesh: &str,
        promotion: &Promotion,
    ) -> Result<Self, ApiError> {
        let mesh_spec = resources
            .iter()
            .find_map(|r| match &r.spec {
                umbra_core::resource::Spec::Mesh(m) if r.meta.name == mesh => Some(m.clone()),
                _ => None,
            })
            .ok_or_else(|| ApiError::not_found(format!("mesh {mesh:?} not found")))?;
        promotion.check(mesh, &resources).map_err(ApiError::from)?;
        let dataplanes: HashMap<String, usize> = resources
            .iter()
            .enumerate()
            .filter(|(_, r)| r.meta.mesh == mesh && r.as_dataplane().is_some())
            .map(|(i, r)| (r.meta.name.clone(), i))
            .collect();
        let specs = dataplanes
            .values()
            .filter_map(|i| resources[*i].as_dataplane());
        Ok(Self {
            ctx: zone.context(mesh, &mesh_spec, specs),
            live: PolicySet::build(mesh, &resources, View::Live),
            shadow: PolicySet::build_shadow(mesh, &resources, promotion),
            mesh: mesh.to_owned(),
            resources,
            dataplanes,
            live_snapshots: HashMap::new(),
            cache: DiffCache::new(DIFF_CACHE_ENTRIES),
            ingresses: HashMap::new(),
            egresses: HashMap::new(),
            other_meshes: Vec::new(),
            admin: zone.admin.clone(),
            zone: zone.clone(),
        })
    }

    /// Also answer for this zone's ZoneIngresses (named
    /// `zone-ingress/<name>`, [`umbra_core::dependencies::ingress::FLEET_NAME_PREFIX`]): their config spans
    /// every mesh, so the other meshes of `store` are read here (Live in both views: only this
    /// mesh's shadow policies are going live).
    #[must_use]
    pub fn with_ingresses(mut self, store: &crate::store::Store, zone: &ZoneView) -> Self {
        for s in store.list_all(ResourceType::ZoneIngress) {
            if let umbra_core::resource::Spec::ZoneIngress(zi) = s.resource.spec {
                if !zi.is_remote(&zone.zone) {
                    self.ingresses.insert(s.resource.meta.name, zi);
                }
            }
        }
        self.egresses = crate::egress::local(store, &zone.zone)
            .into_iter()
            .collect();
        for m in store.list(ResourceType::Mesh, "") {
            let name = m.resource.meta.name.clone();
            let umbra_core::resource::Spec::Mesh(spec) = &m.resource.spec else {
                continue;
            };
            if name == self.mesh {
                continue;
            }
            let resources = vips::with_persisted(store, &name, store.mesh_resources(&name));
            let ctx = zone.context(
                &name,
                spec,
                resources.iter().filter_map(Resource::as_dataplane),
            );
            let live = PolicySet::build(&name, &resources, View::Live);
            self.other_meshes.push((name, ctx, live));
        }
        self
    }

    /// Every mesh in name order, this one in the Shadow view when `shadow`, the others Live:
    /// what a zone proxy is generated from.
    fn zone_proxy_meshes(&self, shadow: bool) -> Vec<(&MeshContext, &PolicySet)> {
        let mut all: Vec<(&str, (&MeshContext, &PolicySet))> = self
            .other_meshes
            .iter()
            .map(|(n, ctx, live)| (n.as_str(), (ctx, live)))
            .collect();
        all.push((
            self.mesh.as_str(),
            (&self.ctx, if shadow { &self.shadow } else { &self.live }),
        ));
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, m)| m).collect()
    }

    /// The diff of ZoneEgress `name` between the views (every mesh in name order, as the
    /// reconciler generates it; its identities left out, the same in both).
    fn egress_diff(&self, name: &str) -> Result<Patch, DiffError> {
        let ze = self
            .egresses
            .get(name)
            .ok_or_else(|| DiffError::NotEgress(name.to_owned()))?;
        let view = |shadow: bool| {
            let meshes: Vec<umbra_xds::egress::EgressMesh<'_>> = self
                .zone_proxy_meshes(shadow)
                .into_iter()
                .map(|(ctx, policies)| umbra_xds::egress::EgressMesh { ctx, policies })
                .collect();
            umbra_xds::egress::generate_egress(ze, &self.zone.zone, &meshes)
        };
        Ok(umbra_xds::diff::snapshot_diff_cached(
            &view(false)?,
            &view(true)?,
            &self.cache,
        )?)
    }

    /// The diff of ZoneIngress `name` between the views (every mesh in name order, as the
    /// reconciler generates it).
    fn ingress_diff(&self, name: &str) -> Result<Patch, DiffError> {
        let zi = self
            .ingresses
            .get(name)
            .ok_or_else(|| DiffError::NotIngress(name.to_owned()))?;
        let view = |shadow: bool| {
            let meshes: Vec<umbra_xds::ingress::IngressMesh<'_>> = self
                .zone_proxy_meshes(shadow)
                .into_iter()
                .map(|(ctx, policies)| umbra_xds::ingress::IngressMesh { ctx, policies })
                .collect();
            umbra_xds::ingress::generate_ingress(name, zi, &meshes)
        };
        Ok(umbra_xds::diff::snapshot_diff_cached(
            &view(false),
            &view(true),
            &self.cache,
        )?)
    }

    /// Use these Live snapshots (by DPP name) instead of generating them. They must have been
    /// generated from the very resources given to [`MeshShadow::prepare`] (see
    /// [`crate::reconciler::Reconciler::live_at`]); their SDS secrets are ignored. The Shadow
    /// side then shares their EDS resources where the content is equal, so the diff compares
    /// those by pointer.
    #[must_use]
    pub fn with_live_snapshots(mut self, live: HashMap<String, Arc<Snapshot>>) -> Self {
        self.ctx
            .share_load_assignments(live.values().flat_map(|s| s.endpoints.iter()));
        self.live_snapshots = live;
        self
    }

    /// The RFC 6902 patch from DPP `name`'s Live config document to its Shadow one (as
    /// `_config?shadow=true&include=diff` gives it; `[]` when unchanged).
    ///
    /// # Errors
    /// [`DiffError`]: the DPP is not in the mesh, or generation or rendering fails (naming the
    /// policy when one is at fault).
    pub fn diff(&self, name: &str) -> Result<Patch, DiffError> {
        if let Some(ingress) =
            name.strip_prefix(umbra_core::dependencies::ingress::FLEET_NAME_PREFIX)
        {
            return self.ingress_diff(ingress);
        }
        if let Some(egress) = name.strip_prefix(umbra_core::dependencies::egress::FLEET_NAME_PREFIX)
        {
            return self.egress_diff(egress);
        }
        let dp = self
            .dataplanes
            .get(name)
            .and_then(|i| self.resources[*i].as_dataplane())
            .ok_or_else(|| DiffError::NotFound {
                name: name.to_owned(),
                mesh: self.mesh.clone(),
            })?;
        let difference = view_difference(dp, &self.live, &self.shadow);
        if difference == ViewDifference::Same {
            return Ok(Patch(Vec::new()));
        }
        let admin = self
            .admin
            .as_ref()
            .and_then(|a| a.input(&self.mesh, name, &dp.networking.address));
        let dns = self.zone.dns_input(&self.mesh, name, dp);
        let proxy = Proxy {
            name,
            dataplane: dp,
            admin: admin.as_deref(),
            dns: dns.as_ref(),
        };
        let live = match self.live_snapshots.get(name) {
            Some(served) => served.clone(),
            None => Arc::new(generate(proxy, &self.ctx, &self.live)?),
        };
        let start = std::time::Instant::now();
        // Only what the differing policies reach is generated (issue 39, item 3).
        let shadow = shadow_from_live(
            proxy,
            &self.ctx,
            &self.live,
            &self.shadow,
            difference,
            &live,
        );
        metrics::histogram!(umbra_runtime::metrics::XDS_GENERATION, "view" => "shadow")
            .record(start.elapsed().as_secs_f64());
        let shadow = match shadow? {
            Shadow::Unchanged => return Ok(Patch(Vec::new())),
            Shadow::Spliced { snapshot, .. } | Shadow::Regenerated(snapshot) => snapshot,
        };
        Ok(umbra_xds::diff::snapshot_diff_cached(
            &live,
            &shadow,
            &self.cache,
        )?)
    }
}

/// Why [`MeshShadow::diff`] has no patch for a DPP (the message is the `error` of its result).
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// A fleet name of a ZoneIngress that is not this zone's.
    #[error("zone ingress {0:?} is not one of this zone's")]
    NotIngress(String),
    /// A fleet name of a ZoneEgress that is not this zone's.
    #[error("zone egress {0:?} is not one of this zone's")]
    NotEgress(String),
    /// No such Dataplane in the mesh.
    #[error("dataplane {name:?} not found in mesh {mesh:?}")]
    NotFound {
        /// The DPP's name.
        name: String,
        /// The mesh.
        mesh: String,
    },
    /// Generating the Live or Shadow config failed (naming the policy at fault).
    #[error(transparent)]
    Generate(#[from] umbra_xds::generate::GenerateError),
    /// A changed resource could not be rendered.
    #[error("rendering failed: {0}")]
    Render(#[from] umbra_xds::render::RenderError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            InspectQuery::parse(&pairs(&[])).unwrap(),
            InspectQuery::default()
        );
        assert_eq!(
            InspectQuery::parse(&pairs(&[("shadow", "true"), ("include", "diff")])).unwrap(),
            InspectQuery {
                shadow: true,
                diff: true
            }
        );
        assert!(InspectQuery::parse(&pairs(&[("shadow", "yes")])).is_err());
        assert!(InspectQuery::parse(&pairs(&[("include", "diff,xds")])).is_err());
    }

    const SEED: &str = include_str!("../../xds/tests/data/timeouts.yaml");

    /// `probes` is named; `transparentProxying` is generated and is not.
    #[test]
    fn dataplane_fields_not_acted_on_are_named_in_every_answer() {
        let yaml = "type: Mesh\nname: default\n---\ntype: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 10.0.0.1\n  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001}\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\nprobes: {port: 9000}\n";
        let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
        let want = json!({
            "type": "Dataplane", "mesh": "default", "name": "web",
            "field": "probes",
        });
        for shadow in [false, true] {
            let q = InspectQuery { shadow, diff: true };
            let answers = [
                config(&resources, &ZoneView::default(), "default", "web", q).unwrap(),
                rules(&resources, &ZoneView::default(), "default", "web", q).unwrap(),
            ];
            for answer in answers {
                let listed = answer["notGenerated"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(listed.len(), 1, "{answer}");
                for key in ["type", "mesh", "name", "field"] {
                    assert_eq!(listed[0][key], want[key], "{answer}");
                }
                assert!(
                    listed[0]["reason"]
                        .as_str()
                        .unwrap()
                        .contains("virtual probes listener"),
                    "{answer}"
                );
            }
        }
    }

    /// A shadow policy to one service: its callers' Shadow views are spliced from the Live
    /// ones (issue 39, item 3), and answer as the per-DPP `_config` diff does. (Its name sorts
    /// before the live one's, so its conf wins: Kuma 2.7 orders policies of one `targetRef`
    /// kind by name, the lexicographically smaller one last.)
    #[test]
    fn a_shadow_policy_to_one_service_diffs_its_callers_only() {
        let yaml = r"
type: Mesh
name: default
---
type: Dataplane
mesh: default
name: web
networking:
  address: 10.0.0.1
  inbound:
  - port: 80
    tags: {kuma.io/service: web, kuma.io/protocol: http}
  outbound:
  - {port: 9001, tags: {kuma.io/service: backend}}
  - {port: 9002, tags: {kuma.io/service: redis}}
---
type: Dataplane
mesh: default
name: backend
networking:
  address: 10.0.0.2
  inbound:
  - port: 80
    tags: {kuma.io/service: backend, kuma.io/protocol: http}
  outbound:
  - {port: 9002, tags: {kuma.io/service: redis}}
---
type: MeshRetry
mesh: default
name: all
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: Mesh}, default: {http: {numRetries: 1}}}]
---
type: MeshRetry
mesh: default
name: a-to-backend
labels: {kuma.io/effect: shadow}
spec:
  targetRef: {kind: Mesh}
  to: [{targetRef: {kind: MeshService, name: backend}, default: {http: {numRetries: 5}}}]
";
        let resources = Resource::all_from_bytes(yaml.as_bytes()).unwrap();
        let shadow = MeshShadow::prepare(
            resources.clone(),
            &ZoneView::default(),
            "default",
            &Promotion::All,
        )
        .unwrap();
        let q = InspectQuery {
            shadow: true,
            diff: true,
        };
        for (name, differs) in [("web", true), ("backend", false)] {
            let direct = config(&resources, &ZoneView::default(), "default", name, q).unwrap()
                ["diff"]
                .clone();
            let patch = serde_json::to_value(shadow.diff(name).unwrap()).unwrap();
            assert_eq!(patch, direct, "{name}");
            assert_eq!(patch != json!([]), differs, "{name}: {patch}");
        }
    }

    #[test]
    fn mesh_shadow_diffs_equal_the_per_dpp_config_diff() {
        let resources = Resource::all_from_bytes(SEED.as_bytes()).unwrap();
        let shadow = MeshShadow::prepare(
            resources.clone(),
            &ZoneView::default(),
            "default",
            &Promotion::All,
        )
        .unwrap();
        let q = InspectQuery {
            shadow: true,
            diff: true,
        };
        for name in ["frontend", "backend", "redis"] {
            let direct = config(&resources, &ZoneView::default(), "default", name, q).unwrap()
                ["diff"]
                .clone();
            // Twice: the second answer comes from the resource diff cache.
            for _ in 0..2 {
                let patch = serde_json::to_value(shadow.diff(name).unwrap()).unwrap();
                assert_eq!(patch, direct, "{name}");
            }
        }
        assert!(!shadow.cache.is_empty());
        assert!(shadow
            .diff("nope")
            .unwrap_err()
            .to_string()
            .contains("not found"));
        // Promoting one policy: it must exist and be shadow.
        let only = |name: &str, ty| Promotion::Only {
            ty,
            name: name.into(),
        };
        assert_eq!(
            MeshShadow::prepare(
                resources.clone(),
                &ZoneView::default(),
                "default",
                &only("nope", ResourceType::MeshTimeout)
            )
            .unwrap_err()
            .status,
            axum::http::StatusCode::NOT_FOUND
        );
        assert_eq!(
            MeshShadow::prepare(
                resources.clone(),
                &ZoneView::default(),
                "default",
                &only("timeout-global", ResourceType::Timeout)
            )
            .unwrap_err()
            .status,
            axum::http::StatusCode::CONFLICT
        );
        assert_eq!(
            MeshShadow::prepare(
                resources.clone(),
                &ZoneView::default(),
                "other",
                &Promotion::All
            )
            .unwrap_err()
            .status,
            axum::http::StatusCode::NOT_FOUND
        );
    }
}
