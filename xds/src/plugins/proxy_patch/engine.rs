//! The modification engine shared by MeshProxyPatch (`pkg/plugins/policies/meshproxypatch/plugin/
//! v1alpha1/*_mod.go`) and the old ProxyTemplate (`pkg/xds/generator/modifications/v3/*.go`):
//! one modification at a time, applied to the snapshot the way Kuma 2.7 applies it to its
//! `ResourceSet`.
//!
//! Resources are matched by their snapshot key (Kuma's `Resource.Name`) and their origin
//! (Kuma's `Resource.Origin`). Umbra's snapshot does not record origins, so they are derived
//! from the names `generate` gives (`inbound:*` listeners and `localhost:*` clusters are
//! `inbound`, other listeners `outbound:*` and other clusters are `outbound`), and recorded in
//! the generation's [`Origins`] for the resources the engine adds (`mesh-proxy-patch`,
//! `proxy-template-modifications`, `proxy-template-raw`).
//!
//! This module matches resources and dispatches; the edits inside one resource are in
//! `edits`, the modification model in `model`.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use serde_json::Value;
use umbra_core::matching::tags_match;
use umbra_core::policies::mesh_proxy_patch::ModificationKind;

use super::edits::{
    edit_filters, edit_hcms, edit_virtual_hosts, json_name, listener_tags, parse_typed,
    patch_typed, yaml_to_json,
};
use super::model::{Match, Modification, Op, Source, ORIGIN_RAW};
use crate::error::GenerateError;
use crate::plugins::input::Origins;
use crate::render;
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE,
};

/// Most values of one message type [`Engine::value`] keeps parsed per thread; they are
/// dropped together when there are this many.
const PARSED_LIMIT: usize = 256;

/// Parsed values by message type, then by YAML text.
type ParsedValues = std::collections::HashMap<
    std::any::TypeId,
    std::collections::HashMap<String, Box<dyn std::any::Any>>,
>;

thread_local! {
    /// Modification values parsed on this thread, by message type and YAML text.
    static PARSED: std::cell::RefCell<ParsedValues> = std::cell::RefCell::default();
}

/// Applies modifications to one snapshot, recording the origins of what it adds in `origins`
/// (which outlives the engine: ProxyTemplate's engine sees what MeshProxyPatch's added).
pub(super) struct Engine<'s> {
    snap: &'s mut Snapshot,
    origins: &'s mut Origins,
}

impl<'s> Engine<'s> {
    /// An engine editing `snap`, recording and reading origins in `origins`.
    pub(super) fn new(snap: &'s mut Snapshot, origins: &'s mut Origins) -> Self {
        Engine { snap, origins }
    }

    fn cluster_origin(&self, name: &str) -> &str {
        self.origins.cluster(name)
    }

    fn listener_origin(&self, name: &str) -> &str {
        self.origins.listener(name)
    }

    fn cluster_matches(&self, m: &Match, name: &str) -> bool {
        m.name.as_deref().is_none_or(|n| n == name)
            && m.origin
                .as_deref()
                .is_none_or(|o| o == self.cluster_origin(name))
    }

    /// Listener conditions of listener modifications (`name`, `origin`, `tags`) and of filter
    /// modifications (`listenerName`, `origin`, `listenerTags`).
    fn listener_matches(
        &self,
        name_cond: Option<&str>,
        m: &Match,
        l: &Listener,
        key: &str,
    ) -> bool {
        name_cond.is_none_or(|n| n == key)
            && m.origin
                .as_deref()
                .is_none_or(|o| o == self.listener_origin(key))
            && (m.listener_tags.is_empty() || tags_match(&m.listener_tags, &listener_tags(l)))
    }

    fn listeners_where(&self, pred: impl Fn(&Listener, &str) -> bool) -> Vec<String> {
        self.snap
            .listeners
            .iter()
            .filter(|(k, l)| pred(l, k))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Apply one modification.
    ///
    /// # Errors
    /// [`GenerateError::Policy`] naming `src`'s policy and the resource: an invalid operation, a
    /// `value` that is not the Envoy message, a JSON patch that does not apply or whose result is
    /// not the Envoy message, filters whose typed configs cannot be merged.
    pub(super) fn apply(
        &mut self,
        m: &Modification<'_>,
        src: &Source,
    ) -> Result<(), GenerateError> {
        match m.kind {
            ModificationKind::Cluster => self.cluster(m, src),
            ModificationKind::Listener => self.listener(m, src),
            ModificationKind::NetworkFilter => self.network_filter(m, src),
            ModificationKind::HttpFilter => self.http_filter(m, src),
            ModificationKind::VirtualHost => self.virtual_host(m, src),
        }
    }

    /// The operation, if valid for the kind.
    fn op(m: &Modification<'_>, src: &Source, resource: &str) -> Result<Op, GenerateError> {
        let filter = matches!(
            m.kind,
            ModificationKind::NetworkFilter | ModificationKind::HttpFilter
        );
        let valid = match m.op {
            Some(Op::Add) => !filter,
            Some(Op::Remove | Op::Patch) => true,
            Some(Op::AddFirst | Op::AddLast | Op::AddBefore | Op::AddAfter) => filter,
            None => false,
        };
        match m.op {
            Some(op) if valid => Ok(op),
            _ => Err(src.error(
                resource,
                format!(
                    "invalid operation {:?} for a {} modification",
                    m.operation,
                    m.kind.field_name()
                ),
            )),
        }
    }

    /// Parse `m.value` as `M`; errors name `resource_type/<name>` with the value's `name` when
    /// `prefer_value_name`, else `fallback` (or `*`). A value parsed before on this thread is
    /// cloned from [`PARSED`] (every DPP a policy selects applies the same text).
    fn value<M: Message + Name + Default + Clone + 'static>(
        m: &Modification<'_>,
        src: &Source,
        resource_type: &str,
        fallback: Option<&str>,
        prefer_value_name: bool,
    ) -> Result<M, GenerateError> {
        let Some(text) = m.value else {
            return Ok(M::default());
        };
        let ty = std::any::TypeId::of::<M>();
        let cached = PARSED.with(|p| {
            p.borrow()
                .get(&ty)
                .and_then(|values| values.get(text))
                .and_then(|v| v.downcast_ref::<M>())
                .cloned()
        });
        if let Some(v) = cached {
            return Ok(v);
        }
        let parsed = Self::parse_value::<M>(text, src, resource_type, fallback, prefer_value_name)?;
        PARSED.with(|p| {
            let mut p = p.borrow_mut();
            let values = p.entry(ty).or_default();
            if values.len() >= PARSED_LIMIT {
                values.clear();
            }
            values.insert(text.to_owned(), Box::new(parsed.clone()));
        });
        Ok(parsed)
    }

    fn parse_value<M: Message + Name + Default>(
        text: &str,
        src: &Source,
        resource_type: &str,
        fallback: Option<&str>,
        prefer_value_name: bool,
    ) -> Result<M, GenerateError> {
        let label = |json: Option<&Value>| {
            let name = json
                .filter(|_| prefer_value_name)
                .and_then(json_name)
                .or(fallback)
                .unwrap_or("*");
            format!("{resource_type}/{name}")
        };
        let json = yaml_to_json(text)
            .map_err(|e| src.error(label(None), format!("value is not YAML: {e}")))?;
        parse_typed::<M>(&json).map_err(|e| {
            src.error(
                label(Some(&json)),
                format!("value is not a valid {}: {e}", M::full_name()),
            )
        })
    }

    fn cluster(&mut self, m: &Modification<'_>, src: &Source) -> Result<(), GenerateError> {
        let fallback = m.matcher.name.as_deref();
        let op = Self::op(
            m,
            src,
            &format!("{CLUSTER_TYPE}/{}", fallback.unwrap_or("*")),
        )?;
        let value: Cluster = Self::value(m, src, CLUSTER_TYPE, fallback, op == Op::Add)?;
        match op {
            Op::Add => {
                let name = value.name.clone();
                if name.is_empty() {
                    return Err(
                        src.error(format!("{CLUSTER_TYPE}/"), "an added cluster needs a name")
                    );
                }
                self.snap.clusters.insert(name.clone(), value.into());
                self.origins.clusters.insert(name, src.origin);
            }
            Op::Remove => {
                let names: Vec<String> = self
                    .snap
                    .clusters
                    .keys()
                    .filter(|n| self.cluster_matches(&m.matcher, n))
                    .cloned()
                    .collect();
                for n in names {
                    self.snap.clusters.remove(&n);
                    self.origins.clusters.remove(&n);
                }
            }
            _ => {
                let names: Vec<String> = self
                    .snap
                    .clusters
                    .keys()
                    .filter(|n| self.cluster_matches(&m.matcher, n))
                    .cloned()
                    .collect();
                for n in names {
                    let Some(c) = self.snap.clusters.get_mut(&n) else {
                        continue;
                    };
                    let patched = patch_typed(&**c, &value, m.json_patches);
                    *c = patched
                        .map_err(|e| src.error(format!("{CLUSTER_TYPE}/{n}"), e))?
                        .into();
                }
            }
        }
        Ok(())
    }

    fn listener(&mut self, m: &Modification<'_>, src: &Source) -> Result<(), GenerateError> {
        let fallback = m.matcher.name.as_deref();
        let op = Self::op(
            m,
            src,
            &format!("{LISTENER_TYPE}/{}", fallback.unwrap_or("*")),
        )?;
        let value: Listener = Self::value(m, src, LISTENER_TYPE, fallback, op == Op::Add)?;
        if op == Op::Add {
            let name = value.name.clone();
            if name.is_empty() {
                return Err(src.error(
                    format!("{LISTENER_TYPE}/"),
                    "an added listener needs a name",
                ));
            }
            self.snap.listeners.insert(name.clone(), value.into());
            self.origins.listeners.insert(name, src.origin);
            return Ok(());
        }
        let names = self.listeners_where(|l, k| {
            self.listener_matches(m.matcher.name.as_deref(), &m.matcher, l, k)
        });
        for n in names {
            if op == Op::Remove {
                self.snap.listeners.remove(&n);
                self.origins.listeners.remove(&n);
                continue;
            }
            let Some(l) = self.snap.listeners.get_mut(&n) else {
                continue;
            };
            let patched = patch_typed(&**l, &value, m.json_patches);
            *l = patched
                .map_err(|e| src.error(format!("{LISTENER_TYPE}/{n}"), e))?
                .into();
        }
        Ok(())
    }

    fn filter_listeners(&self, m: &Modification<'_>) -> Vec<String> {
        self.listeners_where(|l, k| {
            self.listener_matches(m.matcher.listener_name.as_deref(), &m.matcher, l, k)
        })
    }

    fn network_filter(&mut self, m: &Modification<'_>, src: &Source) -> Result<(), GenerateError> {
        let fallback = m.matcher.listener_name.as_deref();
        let op = Self::op(
            m,
            src,
            &format!("{LISTENER_TYPE}/{}", fallback.unwrap_or("*")),
        )?;
        let value: Filter = Self::value(m, src, LISTENER_TYPE, fallback, false)?;
        for n in self.filter_listeners(m) {
            let Some(l) = self.snap.listeners.get_mut(&n) else {
                continue;
            };
            for chain in &mut l.filter_chains {
                edit_filters(&mut chain.filters, m, op, &value)
                    .map_err(|e| src.error(format!("{LISTENER_TYPE}/{n}"), e))?;
            }
        }
        Ok(())
    }

    fn http_filter(&mut self, m: &Modification<'_>, src: &Source) -> Result<(), GenerateError> {
        let fallback = m.matcher.listener_name.as_deref();
        let op = Self::op(
            m,
            src,
            &format!("{LISTENER_TYPE}/{}", fallback.unwrap_or("*")),
        )?;
        let value: HttpFilter = Self::value(m, src, LISTENER_TYPE, fallback, false)?;
        for n in self.filter_listeners(m) {
            let Some(l) = self.snap.listeners.get_mut(&n) else {
                continue;
            };
            edit_hcms(l, |hcm| edit_filters(&mut hcm.http_filters, m, op, &value))
                .map_err(|e| src.error(format!("{LISTENER_TYPE}/{n}"), e))?;
        }
        Ok(())
    }

    fn virtual_host(&mut self, m: &Modification<'_>, src: &Source) -> Result<(), GenerateError> {
        let fallback = m.matcher.route_configuration_name.as_deref();
        let op = Self::op(m, src, &format!("{ROUTE_TYPE}/{}", fallback.unwrap_or("*")))?;
        let value: VirtualHost = Self::value(m, src, ROUTE_TYPE, fallback, false)?;
        let origin = m.matcher.origin.as_deref();
        let names =
            self.listeners_where(|_, k| origin.is_none_or(|o| o == self.listener_origin(k)));
        let rc_name = m.matcher.route_configuration_name.as_deref();
        let vh_name = m.matcher.name.as_deref();
        for n in names {
            let Some(l) = self.snap.listeners.get_mut(&n) else {
                continue;
            };
            edit_hcms(l, |hcm| {
                // Only route configurations embedded in the HCM; RDS is ignored, as in Kuma.
                let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier else {
                    return Ok(());
                };
                if rc_name.is_some_and(|r| r != rc.name) {
                    return Ok(());
                }
                edit_virtual_hosts(rc, op, vh_name, &value, m.json_patches)
            })
            .map_err(|e| src.error(format!("{LISTENER_TYPE}/{n}"), e))?;
        }
        Ok(())
    }

    /// Add one raw ProxyTemplate resource (`conf.resources[i]`) under `name`: YAML of an `Any`
    /// (`@type` plus the message's fields). Clusters, listeners, endpoints, route
    /// configurations and secrets are supported (the types a snapshot holds).
    ///
    /// # Errors
    /// [`GenerateError::Policy`] when the text is not such an `Any`.
    pub(super) fn add_raw(
        &mut self,
        name: &str,
        text: &str,
        src: &Source,
    ) -> Result<(), GenerateError> {
        let json = yaml_to_json(text);
        let type_url = json
            .as_ref()
            .ok()
            .and_then(|j| j.get("@type"))
            .and_then(Value::as_str)
            .unwrap_or("*")
            .to_owned();
        let err = |e: String| src.error(format!("{type_url}/{name}"), e);
        let json = json.map_err(|e| err(format!("resource is not YAML: {e}")))?;
        let bytes = render::json_to_encoded("google.protobuf.Any", &json)
            .map_err(|e| err(format!("resource is not a valid Envoy resource: {e}")))?;
        let a = Any::decode(bytes.as_slice()).map_err(|e| err(e.to_string()))?;
        let decode_err = |e: prost::DecodeError| err(e.to_string());
        let key = name.to_owned();
        match a.type_url.as_str() {
            CLUSTER_TYPE => {
                let c = Cluster::decode(a.value.as_slice()).map_err(decode_err)?;
                self.snap.clusters.insert(key.clone(), c.into());
                self.origins.clusters.insert(key, ORIGIN_RAW);
            }
            LISTENER_TYPE => {
                let l = Listener::decode(a.value.as_slice()).map_err(decode_err)?;
                self.snap.listeners.insert(key.clone(), l.into());
                self.origins.listeners.insert(key, ORIGIN_RAW);
            }
            ENDPOINT_TYPE => {
                let e = ClusterLoadAssignment::decode(a.value.as_slice()).map_err(decode_err)?;
                self.snap.endpoints.insert(key, e.into());
            }
            ROUTE_TYPE => {
                let r = RouteConfiguration::decode(a.value.as_slice()).map_err(decode_err)?;
                self.snap.routes.insert(key, r.into());
            }
            SECRET_TYPE => {
                let s = Secret::decode(a.value.as_slice()).map_err(decode_err)?;
                self.snap.secrets.insert(key, s.into());
            }
            other => {
                return Err(err(format!(
                    "unsupported xDS resource type {other:?} (clusters, listeners, endpoints, route configurations and secrets are)"
                )))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::HCM_FILTER;
    use crate::render::{from_json, to_json};
    use serde_json::json;

    fn listener(name: &str, filters: &[&str]) -> Listener {
        let filters: Vec<Value> = filters
            .iter()
            .map(|f| {
                json!({"name": f, "typedConfig": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                    "statPrefix": f, "cluster": "c"}})
            })
            .collect();
        from_json(&json!({
            "name": name,
            "metadata": {"filterMetadata": {"io.kuma.tags": {"kuma.io/service": name}}},
            "filterChains": [{"filters": filters}, {"filters": [filters[0].clone()]}]
        }))
        .unwrap()
    }

    fn snap() -> Snapshot {
        let mut s = Snapshot::default();
        for name in ["localhost:80", "backend"] {
            s.clusters.insert(
                name.into(),
                crate::interner::Shared::from(Cluster {
                    name: name.into(),
                    ..Default::default()
                }),
            );
        }
        for (name, filters) in [
            ("inbound:10.0.0.1:80", &["a", "b"][..]),
            ("outbound:10.0.0.2:80", &["a"][..]),
        ] {
            s.listeners
                .insert(name.into(), listener(name, filters).into());
        }
        s
    }

    fn src() -> Source {
        Source {
            policy: "MeshProxyPatch/p".into(),
            label: "appendModifications[0]".into(),
            origin: "mesh-proxy-patch",
        }
    }

    fn modification(
        kind: ModificationKind,
        op: Op,
        matcher: Match,
        value: Option<&str>,
    ) -> Modification<'_> {
        Modification {
            kind,
            operation: "op",
            op: Some(op),
            matcher,
            value,
            json_patches: &[],
        }
    }

    fn filter_names(s: &Snapshot, l: &str, chain: usize) -> Vec<String> {
        s.listeners[l].filter_chains[chain]
            .filters
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    #[test]
    fn network_filter_operations_apply_to_every_chain() {
        let mut s = snap();
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        let inbound = Match {
            origin: Some("inbound".into()),
            ..Match::default()
        };
        let named = |n: &str| Match {
            name: Some(n.into()),
            listener_tags: [(
                "kuma.io/service".to_owned(),
                "inbound:10.0.0.1:80".to_owned(),
            )]
            .into(),
            ..Match::default()
        };
        for (op, matcher) in [
            (Op::AddFirst, inbound.clone()),
            (Op::AddLast, inbound.clone()),
            (Op::AddAfter, named("a")),
            (Op::AddBefore, named("missing")),
        ] {
            e.apply(
                &modification(
                    ModificationKind::NetworkFilter,
                    op,
                    matcher,
                    Some("name: x"),
                ),
                &src(),
            )
            .unwrap();
        }
        assert_eq!(
            filter_names(&s, "inbound:10.0.0.1:80", 0),
            ["x", "a", "x", "b", "x"]
        );
        assert_eq!(
            filter_names(&s, "inbound:10.0.0.1:80", 1),
            ["x", "a", "x", "x"]
        );
        assert_eq!(filter_names(&s, "outbound:10.0.0.2:80", 0), ["a"]);
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        e.apply(
            &modification(
                ModificationKind::NetworkFilter,
                Op::Remove,
                named("x"),
                None,
            ),
            &src(),
        )
        .unwrap();
        assert_eq!(filter_names(&s, "inbound:10.0.0.1:80", 0), ["a", "b"]);
        // A filter patch merges the typed config.
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        e.apply(
            &modification(
                ModificationKind::NetworkFilter,
                Op::Patch,
                named("b"),
                Some("name: b\ntypedConfig:\n  '@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy\n  idleTimeout: 3s\n"),
            ),
            &src(),
        )
        .unwrap();
        let l = to_json(&*s.listeners["inbound:10.0.0.1:80"]).unwrap();
        assert_eq!(
            l["filterChains"][0]["filters"][1]["typedConfig"],
            json!({"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                   "statPrefix": "b", "cluster": "c", "idleTimeout": "3s"})
        );
    }

    #[test]
    fn origins_are_derived_and_remembered() {
        let mut s = snap();
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        e.apply(
            &modification(
                ModificationKind::Cluster,
                Op::Add,
                Match::default(),
                Some("name: added"),
            ),
            &src(),
        )
        .unwrap();
        e.apply(
            &modification(
                ModificationKind::Listener,
                Op::Add,
                Match::default(),
                Some("name: extra"),
            ),
            &src(),
        )
        .unwrap();
        let origin = |o: &str| Match {
            origin: Some(o.into()),
            ..Match::default()
        };
        e.apply(
            &modification(
                ModificationKind::Cluster,
                Op::Remove,
                origin("outbound"),
                None,
            ),
            &src(),
        )
        .unwrap();
        e.apply(
            &modification(
                ModificationKind::Listener,
                Op::Remove,
                origin("inbound"),
                None,
            ),
            &src(),
        )
        .unwrap();
        assert_eq!(
            s.clusters.keys().collect::<Vec<_>>(),
            ["added", "localhost:80"]
        );
        assert_eq!(
            s.listeners.keys().collect::<Vec<_>>(),
            ["extra", "outbound:10.0.0.2:80"]
        );
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        // A fresh engine no longer knows "added" was added: it derives `outbound`.
        e.apply(
            &modification(
                ModificationKind::Cluster,
                Op::Remove,
                origin("outbound"),
                None,
            ),
            &src(),
        )
        .unwrap();
        assert_eq!(s.clusters.keys().collect::<Vec<_>>(), ["localhost:80"]);
    }

    #[test]
    fn invalid_operations_values_and_raw_resources_are_errors() {
        let mut s = snap();
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        let err = e
            .apply(
                &modification(
                    ModificationKind::HttpFilter,
                    Op::Add,
                    Match::default(),
                    None,
                ),
                &src(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("invalid operation"), "{err}");
        let mut unknown = modification(ModificationKind::Cluster, Op::Add, Match::default(), None);
        unknown.op = None;
        assert!(e.apply(&unknown, &src()).is_err());
        let err = e
            .apply(
                &modification(
                    ModificationKind::Cluster,
                    Op::Add,
                    Match::default(),
                    Some("connectTimeout: 1s"),
                ),
                &src(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("needs a name"), "{err}");
        let err = e
            .apply(
                &modification(
                    ModificationKind::Listener,
                    Op::Patch,
                    Match::default(),
                    Some("{"),
                ),
                &src(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("not YAML"), "{err}");
        // HTTP filter modifications need decodable HTTP connection managers.
        for l in s.listeners.values_mut() {
            for f in &mut l.filter_chains[0].filters {
                f.name = HCM_FILTER.into();
            }
        }
        let mut origins = Origins::default();
        let mut e = Engine::new(&mut s, &mut origins);
        let err = e
            .apply(
                &modification(
                    ModificationKind::HttpFilter,
                    Op::Remove,
                    Match::default(),
                    None,
                ),
                &src(),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("not an HttpConnectionManager"),
            "{err}"
        );
        let err = e
            .add_raw(
                "x",
                "'@type': type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: x",
                &src(),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("unsupported xDS resource type"),
            "{err}"
        );
        assert!(e.add_raw("x", "name: x", &src()).is_err());
        e.add_raw(
            "raw-secret",
            "'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: s",
            &src(),
        )
        .unwrap();
        assert!(s.secrets.contains_key("raw-secret"));
    }
}
