//! Views: which policies apply when computing a DPP's config.
//!
//! The transition seed (000, "Transition to new policies") defines two rules Umbra applies here:
//! - **shadow**: a policy labelled `kuma.io/effect: shadow` never reaches a proxy. The
//!   [`View::Live`] view excludes it; the [`View::Shadow`] view includes it (what the config would
//!   be if the shadow policies went live). Observed shadow policies (`umbra.io/observe: "true"`,
//!   issue 40) are the one exception: the Live set keeps them aside ([`PolicySet::observed`])
//!   for generation to render as config that enforces nothing;
//! - **old vs new**: in a view holding at least one policy of a new type (say MeshTimeout) in the
//!   mesh, the policies of the old type it replaces (Timeout) are not applied. The rule is
//!   evaluated per view, so a shadow MeshTimeout switches Timeout off in the Shadow view only.

use std::collections::BTreeMap;

use crate::dataplane::DataplaneSpec;
use crate::matching::{matched_policies, MatchOptions, MatchedPolicies};
use crate::policy::TargetRefPolicy;
use crate::resource::{Resource, ResourceType, Spec, TypeKind};

mod promotion;
pub use promotion::{PolicyRef, Promotion, PromotionError, PromotionParseError};

/// Which policies a computation sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum View {
    /// What proxies get: shadow policies excluded.
    Live,
    /// What proxies would get if shadow policies were live: shadow policies included.
    Shadow,
}

impl View {
    /// `true` when a resource with these labels takes part in this view.
    pub fn includes(self, r: &Resource) -> bool {
        self == View::Shadow || !r.meta.is_shadow()
    }
}

/// The policies of one mesh as one view sees them, ready for per-DPP matching.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicySet {
    /// New (targetRef) policies in the view, by type (MeshHTTPRoutes included).
    pub new: BTreeMap<ResourceType, Vec<TargetRefPolicy>>,
    /// The MeshHTTPRoutes of the view again, to resolve `targetRef.kind: MeshHTTPRoute`.
    pub routes: Vec<TargetRefPolicy>,
    /// Old policies still in effect (their new counterpart has no policy in the view), by type.
    pub old: BTreeMap<ResourceType, Vec<Resource>>,
    /// Old types switched off by the old-vs-new rule.
    pub superseded: Vec<ResourceType>,
    /// Old types whose new counterpart (the value) has only staged rollout copies in the view
    /// ([`crate::meta::ROLLOUT_LABEL`], issue 40): they stay in effect, and are switched off
    /// only on the DPPs a copy selects ([`PolicySet::off_for`]), so that a stage changes the
    /// staged DPPs alone. A policy of the type that is not a copy switches them off mesh-wide,
    /// as seed 000 says.
    pub staged_off: BTreeMap<ResourceType, ResourceType>,
    /// The old policies of the superseded types, kept aside: Kuma 2.7 itself still bakes old
    /// policies into the config and lets each new plugin override field by field (the seed's
    /// MeshTimeout example shows old values "leaking"); generators that must reproduce that
    /// read them here. See [`PolicySet::superseded_policies`].
    pub superseded_old: BTreeMap<ResourceType, Vec<Resource>>,
    /// The mesh's ExternalServices and MeshGateways: kept to name them in
    /// [`PolicySet::not_generated`].
    pub stored: Vec<Resource>,
    /// The view's ExternalServices, resolved against the view's Secrets
    /// ([`crate::external_service`]); generation reads them.
    pub external: crate::external_service::ExternalServices,
    /// The Mesh routes ExternalService traffic through its zone's egress
    /// (`routing.zoneEgress: true`).
    pub zone_egress: bool,
    /// The certificates the view's MeshGateway listeners name, read from the view's Secrets,
    /// by Secret name ([`crate::gateway::certificate`]; the reason when one cannot be read).
    pub gateway_certificates: BTreeMap<String, Result<crate::gateway::GatewayCertificate, String>>,
    /// The Mesh's logging backends (when the Mesh resource was among the inputs): which
    /// TrafficLogs log to a TCP backend, named in [`PolicySet::not_generated`].
    pub logging: crate::mesh::LoggingBackends,
    /// The view.
    pub view: Option<View>,
    /// Observed shadow policies ([`crate::meta::OBSERVE_LABEL`], issue 40) that are not in
    /// effect in this view (every one in [`View::Live`]; in a Shadow view, those its promotion
    /// leaves shadow), by type: generation renders them as config that enforces nothing
    /// ([`PolicySet::observed_matched`]).
    pub observed: BTreeMap<ResourceType, Observed>,
    /// The Mesh has mTLS on (when the Mesh resource was among the inputs): without it no
    /// inbound has RBAC, so an observed MeshTrafficPermission is listed as not generated.
    pub mtls: bool,
}

/// The observed policies of one type ([`PolicySet::observed`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The type's policies in effect in the view, then the observed ones: what the type's rules
    /// would be if the observed policies went live.
    pub policies: Vec<TargetRefPolicy>,
    /// The observed ones alone.
    pub only: Vec<TargetRefPolicy>,
}

impl Observed {
    /// `true` when `name` is one of the observed policies.
    pub fn contains(&self, name: &str) -> bool {
        self.only.iter().any(|p| p.meta().name == name)
    }
}

/// Policy types whose top-level `targetRef: {kind: MeshHTTPRoute}` Umbra generates (the route's
/// Envoy routes get their rules).
pub const ROUTE_TARGETED_GENERATED: &[ResourceType] =
    &[ResourceType::MeshTimeout, ResourceType::MeshRetry];

/// A policy that selects a DPP but is not in its generated config ([`PolicySet::not_generated`]),
/// or a field of the DPP's own Dataplane that Umbra accepts but does not act on
/// ([`NotGenerated::dataplane_fields`]: `type: Dataplane`, the DPP's name, and `field`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotGenerated {
    /// Resource type (`MeshHTTPRoute`, `Dataplane`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Mesh.
    pub mesh: String,
    /// Name.
    pub name: String,
    /// The field not acted on (`networking.transparentProxying`), for a Dataplane's own
    /// fields; absent when the whole resource is not generated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Why it is not in the config.
    pub reason: String,
}

/// Why an access log to a TCP backend is not in a config.
const TCP_LOG_REASON: &str = "partly generated by Umbra: its Tcp logging backends are not in this DPP's config (Kuma sends those lines through kuma-dp's access log socket, which a DPP of Umbra, Envoy alone, does not have); its File and OpenTelemetry backends are";

/// `true` when a MeshAccessLog `default` lists a `Tcp` backend.
fn has_tcp_backend(conf: &serde_json::Value) -> bool {
    conf.get("backends")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|b| {
            b.iter()
                .any(|b| b.get("type").and_then(|t| t.as_str()) == Some("Tcp"))
        })
}

/// Why a resource of a type Umbra does not generate is not in a config.
fn stored_reason(ty: ResourceType) -> String {
    format!(
        "not generated by Umbra: {} resources are stored and synced, but Umbra does not generate their Envoy config yet, so this DPP's config has none of this one's effect",
        ty.name()
    )
}

/// `true` when an old (selector) policy concerns `dp`: one of its `selectors`, `sources` or
/// `destinations` matches one of `dp`'s inbounds (or its gateway), so `dp` is a selected
/// proxy, a client or a destination of the policy. Coarser than Kuma's per-type matching, and
/// used only to name the policies that are not generated.
pub fn old_selects(r: &Resource, dp: &DataplaneSpec) -> bool {
    let spec = r.spec_value();
    let mut own: Vec<BTreeMap<String, String>> = dp
        .networking
        .inbound
        .iter()
        .map(|i| i.tags.clone())
        .collect();
    if let Some(g) = &dp.networking.gateway {
        own.push(g.tags.clone());
    }
    ["selectors", "sources", "destinations"].iter().any(|key| {
        let selectors: Vec<crate::old::Selector> = spec
            .get(*key)
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        selectors.iter().any(|s| own.iter().any(|t| s.matches(t)))
    })
}

impl NotGenerated {
    fn of_resource(r: &Resource, reason: &str) -> Self {
        Self {
            type_name: r.ty().name().to_owned(),
            mesh: r.meta.mesh.clone(),
            name: r.meta.name.clone(),
            field: None,
            reason: reason.to_owned(),
        }
    }

    fn of(p: &TargetRefPolicy, reason: &str) -> Self {
        Self {
            type_name: p.origin.type_name.clone(),
            mesh: p.meta().mesh.clone(),
            name: p.meta().name.clone(),
            field: None,
            reason: reason.to_owned(),
        }
    }

    /// The fields of Dataplane `mesh`/`name` that Umbra stores but does not act on
    /// ([`DataplaneSpec::not_generated_fields`]), one entry each, in field order. Every answer
    /// about the DPP (`_config`, `_rules`, its diffs, the fleet diff) lists them, so nothing
    /// accepted is silently ignored.
    pub fn dataplane_fields(mesh: &str, name: &str, dp: &DataplaneSpec) -> Vec<Self> {
        dp.not_generated_fields()
            .into_iter()
            .map(|(field, reason)| Self {
                type_name: ResourceType::Dataplane.name().to_owned(),
                mesh: mesh.to_owned(),
                name: name.to_owned(),
                field: Some(field),
                reason: reason.to_owned(),
            })
            .collect()
    }
}

impl PolicySet {
    /// Build the view of `mesh` from `resources` (other meshes, Mesh and Dataplane resources are
    /// ignored). Policies keep their input order; matching sorts them.
    pub fn build<'a>(
        mesh: &str,
        resources: impl IntoIterator<Item = &'a Resource>,
        view: View,
    ) -> PolicySet {
        let mut set = PolicySet {
            view: Some(view),
            ..PolicySet::default()
        };
        let mut old: BTreeMap<ResourceType, Vec<Resource>> = BTreeMap::new();
        let mut secrets: BTreeMap<&str, &str> = BTreeMap::new();
        let resources: Vec<&Resource> = resources.into_iter().collect();
        for &r in &resources {
            if let Spec::Mesh(m) = &r.spec {
                if r.meta.name == mesh {
                    set.logging = m.logging_backends();
                    set.zone_egress = m.zone_egress_enabled();
                    set.mtls = m.mtls_enabled();
                }
                continue;
            }
            if let Spec::Secret(ResourceType::Secret, data) = &r.spec {
                if r.meta.mesh == mesh && view.includes(r) {
                    secrets.insert(r.meta.name.as_str(), data.data.as_str());
                }
                continue;
            }
            if r.meta.mesh != mesh || !view.includes(r) {
                continue;
            }
            match r.ty().kind() {
                TypeKind::NewPolicy => {
                    let Some(p) = TargetRefPolicy::from_resource(r) else {
                        continue;
                    };
                    if r.ty() == ResourceType::MeshHTTPRoute {
                        set.routes.push(p.clone());
                    }
                    set.new.entry(r.ty()).or_default().push(p);
                }
                TypeKind::OldPolicy => old.entry(r.ty()).or_default().push(r.clone()),
                // What `not_generated` names; Secrets concern no DPP and stay out.
                TypeKind::StoredOnly
                    if matches!(
                        r.ty(),
                        ResourceType::ExternalService | ResourceType::MeshGateway
                    ) =>
                {
                    set.stored.push(r.clone())
                }
                TypeKind::StoredOnly => {}
                TypeKind::Infra => {}
            }
        }
        for name in crate::gateway::certificate_secrets(&set.stored) {
            use base64::Engine as _;
            let read = secrets
                .get(name.as_str())
                .ok_or_else(|| format!("Secret {name:?} not found"))
                .and_then(|data| {
                    base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .map_err(|_| format!("Secret {name:?} is not base64"))
                })
                .and_then(|bytes| {
                    crate::gateway::certificate(&bytes).map_err(|e| format!("Secret {name:?}: {e}"))
                });
            set.gateway_certificates.insert(name, read);
        }
        set.external = crate::external_service::ExternalServices::build(
            set.stored.iter().filter_map(|r| match &r.spec {
                Spec::ExternalService(es) => Some((r.meta.name.as_str(), es)),
                _ => None,
            }),
            &|name: &str| {
                use base64::Engine as _;
                let data = secrets.get(name)?;
                base64::engine::general_purpose::STANDARD.decode(data).ok()
            },
        );
        for (ty, list) in old {
            let replacing = ty
                .counterpart()
                .and_then(|n| Some((n, set.new.get(&n).filter(|v| !v.is_empty())?)));
            match replacing {
                Some((n, copies)) if copies.iter().all(|p| p.meta().is_staged_copy()) => {
                    set.staged_off.insert(ty, n);
                    set.old.insert(ty, list);
                }
                Some(_) => {
                    set.superseded.push(ty);
                    set.superseded_old.insert(ty, list);
                }
                None => {
                    set.old.insert(ty, list);
                }
            }
        }
        if view == View::Live {
            set.add_observed(mesh, resources.iter().copied());
        }
        set
    }

    /// Record, among `candidates`, the observed shadow policies of `mesh` of a type observe
    /// mode renders, as [`PolicySet::observed`] (each type's policies in effect first).
    fn add_observed<'a>(&mut self, mesh: &str, candidates: impl Iterator<Item = &'a Resource>) {
        for r in candidates {
            if r.meta.mesh != mesh
                || !r.meta.is_observed()
                || !crate::meta::OBSERVABLE_TYPES.contains(&r.ty().name())
            {
                continue;
            }
            if let Some(p) = TargetRefPolicy::from_resource(r) {
                self.observed.entry(r.ty()).or_default().only.push(p);
            }
        }
        for (ty, observed) in &mut self.observed {
            let mut all = self.new.get(ty).cloned().unwrap_or_default();
            all.extend(observed.only.iter().cloned());
            observed.policies = all;
        }
    }

    /// The [`View::Shadow`] set of `mesh` with only the shadow policies `promotion` admits.
    pub fn build_shadow<'a>(
        mesh: &str,
        resources: impl IntoIterator<Item = &'a Resource>,
        promotion: &Promotion,
    ) -> PolicySet {
        let resources: Vec<&Resource> = resources.into_iter().collect();
        let mut set = Self::build(
            mesh,
            resources.iter().copied().filter(|r| promotion.admits(r)),
            View::Shadow,
        );
        // The observed policies this promotion leaves shadow are still observed.
        set.add_observed(mesh, resources.into_iter().filter(|r| !promotion.admits(r)));
        set
    }

    /// Match `ty`'s policies in effect and its observed ones against `dp` as if the observed
    /// ones were live ([`PolicySet::observed`]), with the observed ones; `None` when no policy
    /// of `ty` is observed in this view.
    pub fn observed_matched(
        &self,
        ty: ResourceType,
        dp: &DataplaneSpec,
    ) -> Option<(MatchedPolicies<'_>, &Observed)> {
        let observed = self.observed.get(&ty)?;
        let routes: Vec<&TargetRefPolicy> = self.routes.iter().collect();
        let matched = matched_policies(
            dp,
            &observed.policies,
            &routes,
            MatchOptions {
                include_shadow: true,
            },
        );
        Some((matched, observed))
    }

    /// Match the new policies of `ty` against `dp` (empty result when the view has none).
    pub fn matched(&self, ty: ResourceType, dp: &DataplaneSpec) -> MatchedPolicies<'_> {
        let routes: Vec<&TargetRefPolicy> = self.routes.iter().collect();
        let include_shadow = self.view == Some(View::Shadow);
        matched_policies(
            dp,
            self.new.get(&ty).map_or(&[][..], Vec::as_slice),
            &routes,
            MatchOptions { include_shadow },
        )
    }

    /// [`PolicySet::matched`], except for a builtin gateway a MeshGateway selects: the policies
    /// selecting its listeners ([`crate::gateway_rules::matched_policies`]), what Kuma's
    /// `_rules` shows for it and what the single-item plugins (MeshTrace, MeshProxyPatch)
    /// apply to it.
    pub fn matched_with_gateways(
        &self,
        ty: ResourceType,
        dp: &DataplaneSpec,
    ) -> MatchedPolicies<'_> {
        let Some(gateway) = crate::gateway::selected(&self.stored, dp) else {
            return self.matched(ty, dp);
        };
        let routes: Vec<&TargetRefPolicy> = self.routes.iter().collect();
        crate::gateway_rules::matched_policies(
            dp,
            &gateway,
            self.new.get(&ty).map_or(&[][..], Vec::as_slice),
            &routes,
            MatchOptions {
                include_shadow: self.view == Some(View::Shadow),
            },
        )
    }

    /// `true` when the old TrafficRoutes of this view apply to `dp`: no MeshHTTPRoute or
    /// MeshTCPRoute gives it a `to` rule (Kuma 2.7's route plugins fall back to TrafficRoute only
    /// then; the old-type-off rule of seed 000, decided per DPP as Kuma does).
    pub fn traffic_routes_apply(&self, dp: &DataplaneSpec) -> bool {
        !self.new_routes_apply(dp)
    }

    /// `true` when a MeshHTTPRoute or MeshTCPRoute of this view gives `dp` a `to` rule.
    pub fn new_routes_apply(&self, dp: &DataplaneSpec) -> bool {
        [ResourceType::MeshHTTPRoute, ResourceType::MeshTCPRoute]
            .into_iter()
            .any(|ty| !self.matched(ty, dp).to_rules.is_empty())
    }

    /// The policies and resources of this view that select `dp` but whose effect Umbra does
    /// not generate, each with the reason, sorted by type then name. The inspect answers and
    /// the fleet diff list them, so a diff is never read as if they were in the config:
    /// - `targetRef` policies of a type Umbra stores but does not generate
    ///   ([`ResourceType::is_generated`]) whose top-level `targetRef` selects `dp`;
    /// - policies of generated types whose top-level `targetRef` is a MeshHTTPRoute, when their
    ///   type is not applied per route (every type but MeshTimeout and MeshRetry);
    /// - old policies of a type Umbra does not generate (HealthCheck, TrafficLog,
    ///   RateLimit, TrafficTrace, MeshGatewayRoute) that are in effect in the
    ///   view and whose selectors concern `dp` ([`old_selects`]);
    /// - the mesh's ExternalServices that give no endpoint (a data source that cannot be read,
    ///   [`crate::external_service`]), whether sidecars reach them or the zone's egress does;
    ///   and MeshGateways whose selectors match `dp`'s gateway tags;
    /// - access logs to TCP backends, which Umbra does not generate: TrafficLogs in effect whose
    ///   Mesh logging backend is `tcp`, MeshAccessLogs selecting `dp` with a `Tcp` backend
    ///   (their other backends are generated; the reason says so).
    pub fn not_generated(&self, dp: &DataplaneSpec) -> Vec<NotGenerated> {
        let routes: Vec<&TargetRefPolicy> = self.routes.iter().collect();
        let opts = MatchOptions {
            include_shadow: self.view == Some(View::Shadow),
        };
        let mut out: Vec<NotGenerated> = Vec::new();
        let builtin_gateway = crate::gateway::is_builtin(dp);
        for (ty, observed) in &self.observed {
            let reason = if *ty == ResourceType::MeshTrafficPermission && !self.mtls {
                "observe mode renders a MeshTrafficPermission as RBAC shadow rules, and without mTLS on the Mesh no inbound has RBAC (as in Kuma): nothing observes it on this DPP"
            } else if builtin_gateway {
                "observe mode is not rendered on builtin gateways: nothing observes it on this DPP"
            } else {
                continue;
            };
            let all = MatchOptions {
                include_shadow: true,
            };
            for p in matched_policies(dp, &observed.only, &routes, all).dataplane_policies {
                out.push(NotGenerated::of(p, reason));
            }
        }
        for (ty, list) in &self.new {
            if !ty.is_generated() {
                for p in matched_policies(dp, list, &routes, opts).dataplane_policies {
                    out.push(NotGenerated::of(p, &stored_reason(*ty)));
                }
                continue;
            }
            if ROUTE_TARGETED_GENERATED.contains(ty) {
                continue;
            }
            let on_routes: Vec<TargetRefPolicy> = list
                .iter()
                .filter(|p| p.target_ref.kind() == crate::target_ref::TargetRefKind::MeshHTTPRoute)
                .cloned()
                .collect();
            if on_routes.is_empty() {
                continue;
            }
            for p in matched_policies(dp, &on_routes, &routes, opts).dataplane_policies {
                out.push(NotGenerated::of(
                    p,
                    &format!(
                        "this {} targets MeshHTTPRoute {:?}; Umbra applies route-targeted policies of type {} only, so it changes nothing in this DPP's config",
                        ty.name(),
                        p.target_ref.name,
                        ROUTE_TARGETED_GENERATED.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        for (ty, list) in &self.old {
            // A type staged copies switch off on this DPP is superseded here, not withheld.
            if self.off_for(*ty, dp) {
                continue;
            }
            for r in list.iter().filter(|r| old_selects(r, dp)) {
                if !ty.is_generated() {
                    out.push(NotGenerated::of_resource(r, &stored_reason(*ty)));
                } else if let Spec::TrafficLog(log) = &r.spec {
                    let name = log.conf.as_ref().map_or("", |c| c.backend.as_str());
                    if self.logging.get(name).is_some_and(|b| {
                        matches!(b.kind, crate::mesh::LoggingBackendKind::Tcp { .. })
                    }) {
                        out.push(NotGenerated::of_resource(r, TCP_LOG_REASON));
                    }
                }
            }
        }
        if let Some(logs) = self.new.get(&ResourceType::MeshAccessLog) {
            let with_tcp: Vec<TargetRefPolicy> = logs
                .iter()
                .filter(|p| p.to.iter().chain(&p.from).any(|i| has_tcp_backend(&i.conf)))
                .cloned()
                .collect();
            for p in matched_policies(dp, &with_tcp, &routes, opts).dataplane_policies {
                out.push(NotGenerated::of(p, TCP_LOG_REASON));
            }
        }
        let gateway_tags = dp.networking.gateway.as_ref().map(|g| &g.tags);
        // Policies selecting a builtin gateway DPP itself: none applies to it yet (Kuma applies
        // most policy types to gateway listeners, routes and clusters).
        if crate::gateway::is_builtin(dp) {
            // Matching leaves builtin gateways out (Umbra applies nothing to them); seen as a
            // delegated gateway with the same tags, the DPP is selected as Kuma selects it.
            let mut seen = dp.clone();
            if let Some(g) = seen.networking.gateway.as_mut() {
                g.gateway_type = Some(crate::dataplane::GatewayType::Delegated);
            }
            for (ty, list) in &self.new {
                if *ty == ResourceType::MeshAccessLog {
                    // Generated on gateways but for their TCP backends, as on sidecars.
                    let selecting = self.matched_with_gateways(*ty, dp).dataplane_policies;
                    for p in selecting {
                        if p.to.iter().chain(&p.from).any(|i| has_tcp_backend(&i.conf)) {
                            out.push(NotGenerated::of(p, TCP_LOG_REASON));
                        }
                    }
                }
                if matches!(ty, ResourceType::MeshHTTPRoute | ResourceType::MeshTCPRoute)
                    || crate::gateway_rules::GENERATED_ON_GATEWAYS.contains(ty)
                {
                    continue;
                }
                let reason = crate::gateway_rules::not_generated_reason(*ty);
                for p in matched_policies(&seen, list, &routes, opts).dataplane_policies {
                    out.push(NotGenerated::of(p, reason));
                }
            }
            for list in self.old.values().chain(self.superseded_old.values()) {
                for r in list.iter().filter(|r| old_selects(r, dp)) {
                    if let Some(reason) = crate::gateway_old::not_generated_reason(r) {
                        out.push(NotGenerated::of_resource(r, reason));
                    }
                }
            }
        } else {
            for r in self.old_policies(ResourceType::MeshGatewayRoute) {
                if old_selects(r, dp) {
                    out.push(NotGenerated::of_resource(
                        r,
                        crate::gateway_old::NOT_BUILTIN,
                    ));
                }
            }
        }
        // The builtin gateway: the MeshGateway selecting it is generated as far as its HTTP
        // listeners go, with the MeshHTTPRoutes attached to it; other listeners, other
        // MeshGateways matching its tags and every other policy targeting a MeshGateway are not.
        let gateway = crate::gateway::selected(&self.stored, dp);
        if let Some(tags) = gateway_tags {
            let selects = |name: &str| {
                self.stored.iter().any(|r| {
                    r.meta.name == name
                        && matches!(&r.spec, Spec::Selected(ResourceType::MeshGateway, g)
                            if g.selectors.iter().any(|s| s.matches(tags)))
                })
            };
            for p in self.new.values().flatten() {
                let generated = crate::gateway::is_builtin(dp)
                    && crate::gateway_rules::generated_on_gateways(&p.origin.type_name)
                    && gateway
                        .as_ref()
                        .is_some_and(|g| g.name == p.target_ref.name);
                if p.target_ref.kind() == crate::target_ref::TargetRefKind::MeshGateway
                    && (opts.include_shadow || !p.meta().is_shadow())
                    && selects(&p.target_ref.name)
                    && !generated
                {
                    let reason = crate::gateway_rules::targets_gateway_reason(p);
                    out.push(NotGenerated::of(p, &reason));
                }
            }
        }
        for r in &self.stored {
            if let Spec::ExternalService(_) = &r.spec {
                // Every DPP of the mesh may call them (and transparent proxies get them all).
                // With the Mesh's ZoneEgress, the egress skips it likewise.
                let reason = self.external.unresolved.get(&r.meta.name).map(|why| {
                    format!("not generated by Umbra: this ExternalService gives no endpoint ({why}); as in Kuma, which skips it, its outbounds get a cluster without endpoints")
                });
                if let Some(reason) = reason {
                    out.push(NotGenerated::of_resource(r, &reason));
                }
                continue;
            }
            if let Spec::Selected(ResourceType::MeshGateway, g) = &r.spec {
                let matches =
                    gateway_tags.is_some_and(|tags| g.selectors.iter().any(|s| s.matches(tags)));
                if let Some(reason) = matches
                    .then(|| {
                        let tcp = self
                            .new
                            .get(&ResourceType::MeshTCPRoute)
                            .map_or(&[][..], Vec::as_slice);
                        let tcp_routed = gateway.as_ref().is_some_and(|g| {
                            !crate::gateway::routes(tcp, &g.name, opts.include_shadow).is_empty()
                                || crate::gateway::old_routes(
                                    self.old_policies(ResourceType::MeshGatewayRoute),
                                )
                                .iter()
                                .any(|r| {
                                    r.conf.tcp.is_some()
                                        && g.listeners.iter().any(|l| {
                                            (l.protocol == "TCP" || l.protocol == "TLS")
                                                && r.selects(&l.tags)
                                        })
                                })
                        });
                        crate::gateway::not_generated_reason(
                            r,
                            gateway.as_ref(),
                            (crate::gateway::is_builtin(dp), tcp_routed),
                            &self.gateway_certificates,
                        )
                    })
                    .flatten()
                {
                    out.push(NotGenerated::of_resource(r, &reason));
                }
            }
        }
        out.sort_by(|a, b| (&a.type_name, &a.name).cmp(&(&b.type_name, &b.name)));
        out.dedup();
        out
    }

    /// Old policies of `ty` in effect in this view (empty when superseded or absent), whatever
    /// the DPP: for a ZoneIngress or ZoneEgress, or where no DPP is at hand. A DPP's config
    /// reads [`PolicySet::old_policies_for`].
    pub fn old_policies(&self, ty: ResourceType) -> &[Resource] {
        self.old.get(&ty).map_or(&[][..], Vec::as_slice)
    }

    /// `true` when old type `ty` is switched off on `dp` by staged rollout copies alone
    /// ([`PolicySet::staged_off`]): a copy of its new counterpart selects the DPP.
    pub fn off_for(&self, ty: ResourceType, dp: &DataplaneSpec) -> bool {
        self.staged_off.get(&ty).is_some_and(|n| {
            !self
                .matched_with_gateways(*n, dp)
                .dataplane_policies
                .is_empty()
        })
    }

    /// Old policies of `ty` in effect on `dp` in this view: [`PolicySet::old_policies`], or
    /// none where staged copies switch the type off ([`PolicySet::off_for`]).
    pub fn old_policies_for(&self, ty: ResourceType, dp: &DataplaneSpec) -> &[Resource] {
        if self.off_for(ty, dp) {
            &[]
        } else {
            self.old_policies(ty)
        }
    }

    /// Old policies of `ty` in effect *or* superseded in this view: what Kuma 2.7 bakes into
    /// the config before the new plugins override it field by field (see
    /// [`PolicySet::superseded_old`]).
    pub fn old_policies_with_superseded(
        &self,
        ty: ResourceType,
    ) -> impl Iterator<Item = &Resource> {
        self.old_policies(ty)
            .iter()
            .chain(self.superseded_policies(ty))
    }

    /// Old policies of `ty` switched off by the old-vs-new rule in this view (empty otherwise).
    pub fn superseded_policies(&self, ty: ResourceType) -> &[Resource] {
        self.superseded_old.get(&ty).map_or(&[][..], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(yaml: &str) -> Vec<Resource> {
        Resource::all_from_bytes(yaml.as_bytes()).unwrap()
    }

    const TIMEOUTS: &str = "type: Timeout\nmesh: default\nname: timeout-global\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\nconf:\n  connectTimeout: 21s\n";
    const MESH_TIMEOUT_SHADOW: &str = "type: MeshTimeout\nmesh: default\nname: timeout-global\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {connectionTimeout: 21s}\n";

    #[test]
    fn shadow_new_policy_supersedes_old_type_only_in_shadow_view() {
        let all = res(&format!("{TIMEOUTS}---\n{MESH_TIMEOUT_SHADOW}"));
        let live = PolicySet::build("default", &all, View::Live);
        assert_eq!(live.old_policies(ResourceType::Timeout).len(), 1);
        assert!(live.new.is_empty());
        let shadow = PolicySet::build("default", &all, View::Shadow);
        assert!(shadow.old_policies(ResourceType::Timeout).is_empty());
        assert_eq!(shadow.superseded, [ResourceType::Timeout]);
        assert_eq!(shadow.superseded_policies(ResourceType::Timeout).len(), 1);
        assert!(live.superseded_policies(ResourceType::Timeout).is_empty());
        assert_eq!(shadow.new[&ResourceType::MeshTimeout].len(), 1);
    }

    #[test]
    fn live_new_policy_supersedes_in_both_views_and_other_meshes_are_ignored() {
        let live_mt = MESH_TIMEOUT_SHADOW.replace("labels: {kuma.io/effect: shadow}\n", "");
        let other_mesh = TIMEOUTS.replace("mesh: default", "mesh: other");
        let all = res(&format!("{TIMEOUTS}---\n{live_mt}---\n{other_mesh}"));
        for view in [View::Live, View::Shadow] {
            let set = PolicySet::build("default", &all, view);
            assert!(
                set.old_policies(ResourceType::Timeout).is_empty(),
                "{view:?}"
            );
            assert_eq!(set.new[&ResourceType::MeshTimeout].len(), 1);
        }
    }

    #[test]
    fn staged_copies_switch_the_old_type_off_on_the_dpps_they_select_only() {
        let rate_limit = "type: RateLimit\nmesh: default\nname: rl\nsources:\n- match: {kuma.io/service: '*'}\ndestinations:\n- match: {kuma.io/service: '*'}\nconf:\n  http: {requests: 10, interval: 1s}\n";
        let copy = "type: MeshRateLimit\nmesh: default\nname: mrl-stage-1\nlabels: {umbra.io/rollout: fp}\nspec:\n  targetRef: {kind: MeshSubset, tags: {kuma.io/zone: zone-1}}\n  from:\n  - targetRef: {kind: Mesh}\n    default: {local: {http: {requestRate: {num: 5, interval: 1s}}}}\n";
        let dp = |zone: &str| -> DataplaneSpec {
            serde_json::from_value(serde_json::json!({"networking": {"address": "10.0.0.1",
                "inbound": [{"port": 80, "tags": {"kuma.io/service": "web", "kuma.io/zone": zone}}]}}))
            .unwrap()
        };
        let (staged, other) = (dp("zone-1"), dp("zone-2"));
        let rl = ResourceType::RateLimit;
        let set = PolicySet::build(
            "default",
            &res(&format!("{rate_limit}---\n{copy}")),
            View::Live,
        );
        assert!(set.superseded.is_empty());
        assert_eq!(
            set.staged_off,
            BTreeMap::from([(rl, ResourceType::MeshRateLimit)])
        );
        assert_eq!(set.old_policies(rl).len(), 1, "on, mesh-wide");
        assert!(set.off_for(rl, &staged) && !set.off_for(rl, &other));
        assert!(set.old_policies_for(rl, &staged).is_empty());
        assert_eq!(set.old_policies_for(rl, &other).len(), 1);
        // A policy of the new type that is not a copy switches it off everywhere (seed 000).
        let plain = copy.replace(
            "name: mrl-stage-1\nlabels: {umbra.io/rollout: fp}\n",
            "name: mrl\n",
        );
        let all = res(&format!("{rate_limit}---\n{copy}---\n{plain}"));
        let set = PolicySet::build("default", &all, View::Live);
        assert_eq!(set.superseded, [rl]);
        assert!(set.staged_off.is_empty());
        assert!(set.old_policies_for(rl, &other).is_empty());
        // Shadow copies are not in the Live view: nothing is off.
        let shadow_copy = copy.replace("labels: {", "labels: {kuma.io/effect: shadow, ");
        let set = PolicySet::build(
            "default",
            &res(&format!("{rate_limit}---\n{shadow_copy}")),
            View::Live,
        );
        assert!(set.staged_off.is_empty() && !set.off_for(rl, &staged));
    }

    #[test]
    fn promotion_parses_and_admits_one_shadow_policy() {
        assert_eq!(Promotion::parse("").unwrap(), Promotion::All);
        let only = Promotion::parse("MeshTimeout/timeout-global").unwrap();
        assert_eq!(only.to_string(), "MeshTimeout/timeout-global");
        for bad in [
            "MeshTimeout",
            "Nope/x",
            "Mesh/default",
            "Dataplane/x",
            "MeshTimeout/",
        ] {
            assert!(Promotion::parse(bad).is_err(), "{bad}");
        }
        let other = MESH_TIMEOUT_SHADOW.replace("name: timeout-global", "name: other");
        let all = res(&format!("{TIMEOUTS}---\n{MESH_TIMEOUT_SHADOW}---\n{other}"));
        let set = PolicySet::build_shadow("default", &all, &only);
        let names: Vec<&str> = set.new[&ResourceType::MeshTimeout]
            .iter()
            .map(|p| p.meta().name.as_str())
            .collect();
        assert_eq!(names, ["timeout-global"]);
        // The live Timeout still takes part (and is superseded by the promoted MeshTimeout).
        assert_eq!(set.superseded, [ResourceType::Timeout]);
        let none = PolicySet::build_shadow(
            "default",
            &all,
            &Promotion::Only {
                ty: ResourceType::MeshTimeout,
                name: "absent".into(),
            },
        );
        assert!(none.new.is_empty());
        assert_eq!(none.old_policies(ResourceType::Timeout).len(), 1);
        assert_eq!(
            PolicySet::build_shadow("default", &all, &Promotion::All).new
                [&ResourceType::MeshTimeout]
                .len(),
            2
        );
    }

    #[test]
    fn a_migration_set_promotes_some_shadow_policies_and_retires_live_ones() {
        let p =
            Promotion::parse("MeshTimeout/timeout-global,-Timeout/timeout-all-default").unwrap();
        assert_eq!(
            p.to_string(),
            "MeshTimeout/timeout-global,-Timeout/timeout-all-default"
        );
        assert_eq!(Promotion::parse(&p.to_string()).unwrap(), p);
        assert_eq!(p.retired(), ["Timeout/timeout-all-default"]);
        for bad in [
            ",",
            "-",
            "-Timeout/",
            "MeshTimeout/a,Nope/b",
            "MeshTimeout/a,x",
        ] {
            assert!(Promotion::parse(bad).is_err(), "{bad}");
        }
        let other = MESH_TIMEOUT_SHADOW.replace("name: timeout-global", "name: other");
        let all = res(&format!("{TIMEOUTS}---\n{MESH_TIMEOUT_SHADOW}---\n{other}"));
        let timeouts: Vec<String> = all
            .iter()
            .filter(|r| r.ty() == ResourceType::Timeout)
            .map(|r| r.meta.name.clone())
            .collect();
        let retire_all = timeouts
            .iter()
            .map(|n| format!("-Timeout/{n}"))
            .collect::<Vec<_>>()
            .join(",");
        let p = Promotion::parse(&format!("MeshTimeout/timeout-global,{retire_all}")).unwrap();
        p.check("default", &all).unwrap();
        let set = PolicySet::build_shadow("default", &all, &p);
        let names: Vec<&str> = set.new[&ResourceType::MeshTimeout]
            .iter()
            .map(|pol| pol.meta().name.as_str())
            .collect();
        assert_eq!(names, ["timeout-global"]);
        // Retired Timeouts are gone: neither in effect nor kept aside to leak.
        assert!(set.old_policies(ResourceType::Timeout).is_empty());
        assert!(set.superseded_policies(ResourceType::Timeout).is_empty());
        // Checks: promoted must be shadow, retired must be live, both must exist.
        let live_promoted =
            Promotion::parse(&format!("Timeout/{},MeshTimeout/other", timeouts[0])).unwrap();
        assert!(matches!(
            live_promoted.check("default", &all),
            Err(PromotionError::NotShadow(_))
        ));
        let shadow_retired = Promotion::parse("-MeshTimeout/other").unwrap();
        assert!(matches!(
            shadow_retired.check("default", &all),
            Err(PromotionError::RetireShadow(_))
        ));
        let missing = Promotion::parse("MeshTimeout/other,-Timeout/absent").unwrap();
        assert!(matches!(
            missing.check("default", &all),
            Err(PromotionError::NotFound(..))
        ));
    }

    #[test]
    fn shadow_policy_matches_only_in_shadow_view() {
        let all = res(MESH_TIMEOUT_SHADOW);
        let dp: DataplaneSpec = serde_json::from_value(
            crate::codec::decode_one(b"networking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n", crate::codec::Limits::default()).unwrap(),
        )
        .unwrap();
        let live = PolicySet::build("default", &all, View::Live);
        assert!(live
            .matched(ResourceType::MeshTimeout, &dp)
            .to_rules
            .is_empty());
        let shadow = PolicySet::build("default", &all, View::Shadow);
        let m = shadow.matched(ResourceType::MeshTimeout, &dp);
        assert_eq!(m.dataplane_policies.len(), 1);
        assert_eq!(
            m.to_rules.0[0].conf,
            serde_json::json!({"connectionTimeout": "21s"})
        );
    }
}
