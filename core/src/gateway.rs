//! Builtin gateways as generation reads them (Kuma 2.7.29 `api/mesh/v1alpha1/gateway.proto`,
//! `pkg/plugins/runtime/gateway/match`): the MeshGateway that selects a `BUILTIN` gateway DPP
//! ([`selected`]), its listeners ([`GatewayListener`]), and the MeshHTTPRoutes whose top-level
//! `targetRef` is that MeshGateway ([`routes`]).
//!
//! - A MeshGateway selects a DPP when one of its `selectors` matches the DPP's gateway tags;
//!   among several, the one whose best selector is the most specific (most tags that are not
//!   `*`) wins, then the first by name (Kuma's `SelectGateway` ranks selectors alike).
//! - A listener is `{port, protocol, hostname, tags, tls, resources}`; `hostname` defaults to
//!   `*`, `protocol` is `HTTP`, `HTTPS`, `TCP` or `TLS`.
//! - The routes of a gateway are the view's MeshHTTPRoutes with `targetRef: {kind:
//!   MeshGateway, name}` (shadow ones only in the Shadow view), by name; a route whose
//!   `targetRef.tags` is set applies only to listeners carrying those tags.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::dataplane::{DataplaneSpec, GatewayType};
use crate::policy::TargetRefPolicy;
use crate::resource::{Resource, ResourceType, Spec};
use crate::target_ref::TargetRefKind;

/// One listener of a MeshGateway.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayListener {
    /// Port the gateway listens on.
    pub port: u32,
    /// `HTTP`, `HTTPS`, `TCP` or `TLS`.
    #[serde(default)]
    pub protocol: String,
    /// Host name the listener serves (`*` when absent).
    #[serde(default = "any_host")]
    pub hostname: String,
    /// Listener tags (what a route's `targetRef.tags` selects).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

fn any_host() -> String {
    "*".to_owned()
}

/// The MeshGateway selecting a gateway DPP.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedGateway {
    /// The MeshGateway's name.
    pub name: String,
    /// Its listeners, in order (those that do not read as a listener are left out, with
    /// `unreadable` counting them).
    pub listeners: Vec<GatewayListener>,
    /// Listeners of `conf.listeners` that do not read as one.
    pub unreadable: usize,
}

/// `true` for a `BUILTIN` gateway DPP.
pub fn is_builtin(dp: &DataplaneSpec) -> bool {
    dp.networking
        .gateway
        .as_ref()
        .is_some_and(|g| g.gateway_type == Some(GatewayType::Builtin))
}

/// The MeshGateway among `stored` (a view's, [`crate::view::PolicySet::stored`]) selecting
/// builtin gateway `dp` (see the module docs); `None` for any other DPP or when none selects
/// it.
pub fn selected(stored: &[Resource], dp: &DataplaneSpec) -> Option<SelectedGateway> {
    if !is_builtin(dp) {
        return None;
    }
    let tags = &dp.networking.gateway.as_ref()?.tags;
    let mut best: Option<(usize, &str, &crate::ungenerated::SelectorResource)> = None;
    for r in stored {
        let Spec::Selected(ResourceType::MeshGateway, g) = &r.spec else {
            continue;
        };
        let Some(rank) = g
            .selectors
            .iter()
            .filter(|s| s.matches(tags))
            .map(|s| s.match_tags.values().filter(|v| v.as_str() != "*").count())
            .max()
        else {
            continue;
        };
        let name = r.meta.name.as_str();
        if best.is_none_or(|(r0, n0, _)| rank > r0 || (rank == r0 && name < n0)) {
            best = Some((rank, name, g));
        }
    }
    let (_, name, g) = best?;
    let raw: Vec<Value> = g
        .conf
        .as_ref()
        .and_then(|c| c.get("listeners"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let listeners: Vec<GatewayListener> = raw
        .iter()
        .filter_map(|l| serde_json::from_value(l.clone()).ok())
        .collect();
    Some(SelectedGateway {
        name: name.to_owned(),
        unreadable: raw.len() - listeners.len(),
        listeners,
    })
}

/// The MeshHTTPRoutes among `http_routes` (a view's) attached to MeshGateway `gateway`, by
/// name; shadow ones only with `include_shadow` (see the module docs).
pub fn routes<'a>(
    http_routes: &'a [TargetRefPolicy],
    gateway: &str,
    include_shadow: bool,
) -> Vec<&'a TargetRefPolicy> {
    let shadow = include_shadow;
    let mut out: Vec<&TargetRefPolicy> = http_routes
        .iter()
        .filter(|p| {
            p.target_ref.kind() == TargetRefKind::MeshGateway
                && p.target_ref.name == gateway
                && (shadow || !p.meta().is_shadow())
        })
        .collect();
    out.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{PolicySet, View};

    #[test]
    fn the_most_specific_gateway_selects_and_its_routes_attach() {
        let resources = Resource::all_from_bytes(b"type: Mesh\nname: default\n---\ntype: MeshGateway\nmesh: default\nname: any\nselectors: [{match: {kuma.io/service: '*'}}]\nconf: {listeners: [{port: 80, protocol: HTTP}]}\n---\ntype: MeshGateway\nmesh: default\nname: edge\nselectors: [{match: {kuma.io/service: edge}}]\nconf: {listeners: [{port: 8080, protocol: HTTP, hostname: foo.example.com, tags: {port: http}}, {port: 8443, protocol: HTTPS}]}\n---\ntype: MeshHTTPRoute\nmesh: default\nname: to-web\nspec:\n  targetRef: {kind: MeshGateway, name: edge}\n  to:\n  - targetRef: {kind: Mesh}\n    rules: [{matches: [{path: {type: PathPrefix, value: /}}], default: {backendRefs: [{kind: MeshService, name: web}]}}]\n---\ntype: MeshHTTPRoute\nmesh: default\nname: shadow-web\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshGateway, name: edge}\n  to:\n  - targetRef: {kind: Mesh}\n    rules: [{matches: [{path: {type: PathPrefix, value: /v2}}], default: {backendRefs: [{kind: MeshService, name: web}]}}]\n---\ntype: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 10.0.0.1\n  gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}\n").unwrap();
        let dp = resources.iter().find_map(Resource::as_dataplane).unwrap();
        let live = PolicySet::build("default", &resources, View::Live);
        let gw = selected(&live.stored, dp).unwrap();
        assert_eq!(gw.name, "edge");
        assert_eq!(gw.listeners.len(), 2);
        assert_eq!(gw.listeners[0].hostname, "foo.example.com");
        assert_eq!(gw.listeners[1].hostname, "*");
        let names = |p: &PolicySet| -> Vec<String> {
            let all = p
                .new
                .get(&ResourceType::MeshHTTPRoute)
                .map_or(&[][..], Vec::as_slice);
            routes(all, "edge", p.view == Some(View::Shadow))
                .iter()
                .map(|r| r.meta().name.clone())
                .collect()
        };
        assert_eq!(names(&live), ["to-web"]);
        let shadow = PolicySet::build("default", &resources, View::Shadow);
        assert_eq!(names(&shadow), ["shadow-web", "to-web"]);
    }
}
