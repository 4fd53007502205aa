//! MeshGatewayRoute → MeshHTTPRoute (an HTTP route) or MeshTCPRoute (a TCP route) whose
//! top-level `targetRef` is the MeshGateway it routes (seed 000's migration of gateway routes;
//! Kuma 2.7.29 `pkg/plugins/runtime/gateway` for the old semantics, `meshhttproute`'s gateway
//! path for the new ones).
//!
//! - A MeshGatewayRoute selects gateway *listeners* (its selectors match a listener's tags, the
//!   DPP's gateway tags, the MeshGateway's `tags` and the listener's own merged); a new route
//!   names a MeshGateway, narrowed to listeners by `targetRef.tags`. So each MeshGateway of the
//!   inputs (same mesh) with a listener of the route's protocol the selectors match gets one
//!   output: all its listeners of that protocol selected, no tags; some, the listener tags they
//!   share and the others lack, or no tags (wider) with a [`NoteKind::Selector`] note. The DPP's
//!   tags are read from the MeshGateway's own selectors (their non-`*` values).
//! - HTTP rules are read as [`crate::gateway_route`] reads them for generation, so a converted
//!   route generates the same Envoy routes; they go under one `to: [{targetRef: {kind: Mesh}}]`
//!   item with the route's `hostnames`. TCP rules' backends are pooled into one rule (Kuma
//!   forwards to all of them).
//! - Notes: Kuma's per-virtual-host switch (once a MeshHTTPRoute routes a host, every
//!   MeshGatewayRoute is ignored there), and, for a route with hostnames, that a MeshHTTPRoute
//!   `to` without hostnames also joins the hosts other routes name, where a MeshGatewayRoute
//!   without hostnames does not.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use crate::gateway::GatewayListener;
use crate::gateway_route::GatewayRouteConf;
use crate::resource::{Resource, ResourceType, Spec};
use crate::ungenerated::SelectorResource;

/// Convert the MeshGatewayRoute of `ctx` against the MeshGateways among `others`.
///
/// # Errors
/// [`ConvertError::Empty`] when its conf does not read or it routes no listener of those
/// MeshGateways; [`ConvertError::Unsupported`] without any MeshGateway among `others`;
/// [`ConvertError::Invalid`] when an output does not validate.
pub fn convert(ctx: &Ctx, others: &[Resource]) -> Result<Output, ConvertError> {
    let Spec::Selected(ResourceType::MeshGatewayRoute, route) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a MeshGatewayRoute"));
    };
    let conf = GatewayRouteConf::read(route.conf.as_ref())
        .filter(|c| c.http.is_some() != c.tcp.is_some())
        .ok_or_else(|| ctx.empty("its conf is neither one HTTP nor one TCP route"))?;
    let gateways: Vec<(&Resource, &SelectorResource)> = others
        .iter()
        .filter(|r| r.meta.mesh == ctx.source.meta.mesh)
        .filter_map(|r| match &r.spec {
            Spec::Selected(ResourceType::MeshGateway, g) => Some((r, g)),
            _ => None,
        })
        .collect();
    if gateways.is_empty() {
        return Err(ctx.unsupported(
            "a MeshHTTPRoute names the MeshGateway it routes, and no MeshGateway of this mesh is among the inputs: convert the route together with its MeshGateways",
        ));
    }
    let http = conf.http.is_some();
    let protocols: &[&str] = if http {
        &["HTTP", "HTTPS"]
    } else {
        &["TCP", "TLS"]
    };
    let mut notes = Vec::new();
    let mut targets: Vec<Value> = Vec::new();
    for (gw, g) in gateways {
        let listeners: Vec<(GatewayListener, bool)> = listeners(g)
            .into_iter()
            .filter(|(l, _)| protocols.contains(&l.protocol.as_str()))
            .map(|(l, merged)| {
                let selected = route.selectors.iter().any(|s| s.matches(&merged));
                (l, selected)
            })
            .collect();
        if !listeners.iter().any(|(_, s)| *s) {
            continue;
        }
        let mut target = json!({"kind": "MeshGateway", "name": gw.meta.name});
        if listeners.iter().any(|(_, s)| !*s) {
            match distinguishing_tags(&listeners) {
                Some(tags) => target["tags"] = json!(tags),
                None => notes.push(Note::new(
                    NoteKind::Selector,
                    "selectors",
                    format!(
                        "it routes only some {} listeners of MeshGateway {:?}, which no listener tags tell apart: the new route targets every one of them (wider)",
                        protocols.join("/"),
                        gw.meta.name
                    ),
                ).affecting(&["virtualHosts", "routes"])),
            }
        }
        targets.push(target);
    }
    if targets.is_empty() {
        return Err(ctx.empty(
            "its selectors match no listener of a MeshGateway among the inputs (of its protocol)",
        ));
    }
    let to = if http {
        let rules: Vec<Value> = conf
            .http_rules()
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect();
        let mut item = json!({"targetRef": {"kind": "Mesh"}, "rules": rules});
        if !conf.hostnames().is_empty() {
            item["hostnames"] = json!(conf.hostnames());
            notes.push(Note::new(
                NoteKind::Semantics,
                "conf.http.hostnames",
                "a MeshGatewayRoute without hostnames does not reach the virtual hosts other routes' hostnames create, but a MeshHTTPRoute `to` without hostnames joins every host: once all of the gateway's routes are MeshHTTPRoutes, those hosts also get the rules without hostnames",
            ).affecting(&["routes"]));
        }
        item
    } else {
        let backends: Vec<Value> = conf
            .tcp_backends()
            .iter()
            .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
            .collect();
        json!({"targetRef": {"kind": "Mesh"}, "rules": [{"default": {"backendRefs": backends}}]})
    };
    notes.push(Note::new(
        NoteKind::Semantics,
        "conf",
        "Kuma switches per virtual host: once any MeshHTTPRoute (MeshTCPRoute for TCP) routes a host of the gateway, every MeshGatewayRoute is ignored on that host, so promote the conversions of one gateway's routes together",
    ).affecting(&["routes"]));
    let ty = if http {
        ResourceType::MeshHTTPRoute
    } else {
        ResourceType::MeshTCPRoute
    };
    let outputs = ctx.output_per_target(
        ty,
        &targets,
        |target| json!({"targetRef": target, "to": [to.clone()]}),
    )?;
    Ok((outputs, notes))
}

/// The listeners of MeshGateway `g`, each with its merged tags: the DPP's (the non-`*` values
/// of the MeshGateway's first selector), the MeshGateway's `tags`, the listener's own.
fn listeners(g: &SelectorResource) -> Vec<(GatewayListener, BTreeMap<String, String>)> {
    let dp: BTreeMap<String, String> = g
        .selectors
        .first()
        .map(|s| {
            s.match_tags
                .iter()
                .filter(|(_, v)| v.as_str() != "*")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    g.conf
        .as_ref()
        .and_then(|c| c.get("listeners"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| serde_json::from_value::<GatewayListener>(l.clone()).ok())
        .map(|l| {
            let mut merged = dp.clone();
            merged.extend(g.tags.iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
            merged.extend(l.tags.clone());
            (l, merged)
        })
        .collect()
}

/// The own tags every selected listener shares and no unselected one carries all of (what a
/// `targetRef.tags` narrowing to the selected ones needs); `None` when there are none.
fn distinguishing_tags(listeners: &[(GatewayListener, bool)]) -> Option<BTreeMap<String, String>> {
    let mut selected = listeners.iter().filter(|(_, s)| *s).map(|(l, _)| &l.tags);
    let mut common = selected.next()?.clone();
    for tags in selected {
        common.retain(|k, v| tags.get(k) == Some(v));
    }
    let excluded = listeners
        .iter()
        .filter(|(_, s)| !*s)
        .all(|(l, _)| common.iter().any(|(k, v)| l.tags.get(k) != Some(v)));
    (!common.is_empty() && excluded).then_some(common)
}
