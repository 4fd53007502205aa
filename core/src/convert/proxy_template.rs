//! ProxyTemplate to MeshProxyPatch.
//!
//! The mapping follows the MeshProxyPatch MADR (seed 001: `imports` is gone, `modifications`
//! "stays almost the same" as `appendModifications`), the transition MADR (seed 000,
//! "ProxyTemplate -> MeshProxyPatch") and what Umbra generates for each policy
//! (`xds/src/plugins/proxy_patch.rs`: the same modification engine runs both, MeshProxyPatch as
//! the last plugin, the ProxyTemplate right after it):
//!
//! - `selectors[i]` (the proxies) become the top-level `targetRef` of one MeshProxyPatch each
//!   (`<name>-<i+1>` when there are several); no selector (every proxy) is `Mesh`;
//! - `conf.resources` come first, as `Add` modifications: a raw cluster or listener becomes a
//!   `cluster`/`listener` `Add` whose `value` is the resource without its `@type`; other raw
//!   types (endpoints, route configurations, secrets) have no MeshProxyPatch form and are
//!   dropped;
//! - `conf.modifications` follow, in order, as `appendModifications`: the same kind and `value`,
//!   the operation capitalised (`addFirst` → `AddFirst`), empty `match` fields left out (`""`
//!   means "any" in the old policy, an absent field in the new one); an origin naming what a
//!   ProxyTemplate added (`proxy-template-raw`, `proxy-template-modifications`) becomes
//!   `mesh-proxy-patch`, the origin of what a MeshProxyPatch adds.
//!
//! What stays different is reported as [`Note`]s: `imports` (dropped), the raw resources that
//! cannot be converted, the origins, and the precedence (old: the single best-matching
//! ProxyTemplate per proxy; new: every MeshProxyPatch selecting a proxy appends its
//! modifications, seed 001's "No aggregation" problem solved).

use serde_json::{json, Map, Value};

use super::model::{ConvertError, Ctx, Note, NoteKind, Output};
use super::selectors;
use crate::codec::{decode_one, encode_yaml, Limits};
use crate::old::proxy_template::{Modification, ModificationOf, ProxyTemplateConf, RawResource};
use crate::resource::{ResourceType, Spec};

/// Type URL of an Envoy cluster.
const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Type URL of an Envoy listener.
const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// Origins of what a ProxyTemplate adds (Kuma's `OriginProxyTemplateRaw` and
/// `OriginProxyTemplateModifications`).
const PROXY_TEMPLATE_ORIGINS: &[&str] = &["proxy-template-raw", "proxy-template-modifications"];
/// Origin of what a MeshProxyPatch adds.
const MESH_PROXY_PATCH_ORIGIN: &str = "mesh-proxy-patch";

/// Convert a ProxyTemplate to MeshProxyPatches.
///
/// # Errors
/// [`ConvertError::Empty`] without `conf` or when nothing in it converts;
/// [`ConvertError::Invalid`] when a modification MeshProxyPatch rejects (an unknown
/// operation, a `patch` without a value) is carried over.
pub fn convert(ctx: &Ctx) -> Result<Output, ConvertError> {
    let Spec::ProxyTemplate(pt) = &ctx.source.spec else {
        return Err(ctx.unsupported("not a ProxyTemplate"));
    };
    let Some(conf) = &pt.conf else {
        return Err(ctx.empty("conf is not set: the ProxyTemplate changes nothing"));
    };
    let mut notes = Vec::new();
    let mods = modifications(conf, &mut notes);
    if mods.is_empty() {
        return Err(
            ctx.empty("no resource or modification to convert (MeshProxyPatch has no `imports`)")
        );
    }

    let mut targets = selectors::distinct_targets(&pt.selectors, "selectors", &mut notes);
    if targets.is_empty() {
        targets.push(json!({"kind": "Mesh"}));
    }
    if targets.len() > 1 {
        notes.push(Note::new(
            NoteKind::Semantics,
            "selectors",
            "a proxy matching several selectors got the template once; it is selected by several of the converted MeshProxyPatches, whose modifications are then all appended, so they run more than once (an Add replaces itself, a Patch merges its repeated fields twice)",
        ));
    }
    notes.push(Note::new(
        NoteKind::Semantics,
        "selectors",
        "Kuma applies only the best-matching ProxyTemplate per proxy (most specific selector, then newest); every MeshProxyPatch selecting a proxy appends its modifications (least specific policy first), so a converted broad template (e.g. `kuma.io/service: '*'`) now also modifies the proxies a more specific template used to cover alone",
    ));

    let outputs = ctx.output_per_target(
        ResourceType::MeshProxyPatch,
        &targets,
        |target| json!({"targetRef": target, "default": {"appendModifications": mods}}),
    )?;
    Ok((outputs, notes))
}

/// The `appendModifications` of `conf`: raw resources first, then the modifications.
fn modifications(conf: &ProxyTemplateConf, notes: &mut Vec<Note>) -> Vec<Value> {
    if !conf.imports.is_empty() {
        notes.push(Note::new(
            NoteKind::Dropped,
            "conf.imports",
            format!(
                "MeshProxyPatch has no imports: it always modifies the default configuration Kuma generates (the `default-proxy` profile, or the gateway's); imported here: {}",
                conf.imports.join(", ")
            ),
        ));
    }
    let mut out = Vec::new();
    for (i, raw) in conf.resources.iter().enumerate() {
        if let Some(m) = raw_resource(raw, &format!("conf.resources[{i}]"), notes) {
            out.push(m);
        }
    }
    for (i, m) in conf.modifications.iter().enumerate() {
        let field = format!("conf.modifications[{i}]");
        let converted = match m {
            Modification::Cluster(c) => kind("cluster", c, &field, notes, |x, o| {
                put(o, "origin", &x.origin);
                put(o, "name", &x.name);
            }),
            Modification::Listener(l) => kind("listener", l, &field, notes, |x, o| {
                put(o, "origin", &x.origin);
                put(o, "name", &x.name);
                if !x.tags.is_empty() {
                    o.insert("tags".to_owned(), json!(x.tags));
                }
            }),
            Modification::NetworkFilter(f) | Modification::HttpFilter(f) => {
                let name = if matches!(m, Modification::HttpFilter(_)) {
                    "httpFilter"
                } else {
                    "networkFilter"
                };
                kind(name, f, &field, notes, |x, o| {
                    put(o, "origin", &x.origin);
                    put(o, "name", &x.name);
                    put(o, "listenerName", &x.listener_name);
                    if !x.listener_tags.is_empty() {
                        o.insert("listenerTags".to_owned(), json!(x.listener_tags));
                    }
                })
            }
            Modification::VirtualHost(vh) => kind("virtualHost", vh, &field, notes, |x, o| {
                put(o, "origin", &x.origin);
                put(o, "name", &x.name);
                put(o, "routeConfigurationName", &x.route_configuration_name);
            }),
            Modification::Empty => {
                notes.push(Note::new(
                    NoteKind::Dropped,
                    field,
                    "a modification of no kind: Kuma rejects it when it generates the proxy's configuration; left out",
                ));
                continue;
            }
        };
        out.push(converted);
    }
    out
}

/// `o[key] = value` unless `value` is empty (the old policy's "any").
fn put(o: &mut Map<String, Value>, key: &str, value: &str) {
    if !value.is_empty() {
        o.insert(key.to_owned(), json!(value));
    }
}

/// One modification of kind `name`: `{name: {operation, match, value}}`, its match written by
/// `matcher` and its origin rewritten (with a note) when it names a ProxyTemplate origin.
fn kind<M>(
    name: &str,
    m: &ModificationOf<M>,
    field: &str,
    notes: &mut Vec<Note>,
    matcher: impl FnOnce(&M, &mut Map<String, Value>),
) -> Value {
    let mut body = Map::new();
    body.insert("operation".to_owned(), json!(operation(m)));
    if let Some(x) = &m.matcher {
        let mut o = Map::new();
        matcher(x, &mut o);
        if let Some(origin) = o.get_mut("origin") {
            if let Some(old) = origin
                .as_str()
                .filter(|s| PROXY_TEMPLATE_ORIGINS.contains(s))
                .map(str::to_owned)
            {
                notes.push(Note::new(
                    NoteKind::Semantics,
                    format!("{field}.{name}.match.origin"),
                    format!(
                        "`{old}` becomes `{MESH_PROXY_PATCH_ORIGIN}`, the origin of everything a MeshProxyPatch adds (raw resources and added resources alike, from any MeshProxyPatch)"
                    ),
                ));
                *origin = json!(MESH_PROXY_PATCH_ORIGIN);
            }
        }
        if !o.is_empty() {
            body.insert("match".to_owned(), Value::Object(o));
        }
    }
    if !m.value.is_empty() {
        body.insert("value".to_owned(), json!(m.value));
    }
    json!({ name: body })
}

/// The MeshProxyPatch spelling of an old operation (`addFirst` → `AddFirst`); an unknown one
/// is kept, capitalised, for the validator to reject.
fn operation<M>(m: &ModificationOf<M>) -> String {
    match m.op() {
        Some(op) => {
            let s = op.as_str();
            let mut chars = s.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        }
        None => m.operation.clone(),
    }
}

/// A raw resource as an `Add` modification (clusters and listeners), or a `Dropped` note.
fn raw_resource(raw: &RawResource, field: &str, notes: &mut Vec<Note>) -> Option<Value> {
    let parsed = decode_one(raw.resource.as_bytes(), Limits::default()).ok();
    let Some(Value::Object(mut resource)) = parsed else {
        notes.push(Note::new(
            NoteKind::Dropped,
            field,
            "the resource is not a YAML or JSON mapping; left out",
        ));
        return None;
    };
    let type_url = resource
        .remove("@type")
        .and_then(|t| t.as_str().map(str::to_owned))
        .unwrap_or_default();
    let kind = match type_url.as_str() {
        CLUSTER_TYPE => "cluster",
        LISTENER_TYPE => "listener",
        _ => {
            notes.push(
                Note::new(
                    NoteKind::Dropped,
                    field,
                    format!(
                        "MeshProxyPatch can only add clusters and listeners: the {type_url} {:?} is not added",
                        raw.name
                    ),
                )
                .affecting(&[type_url.as_str()]),
            );
            return None;
        }
    };
    match resource.get("name").and_then(Value::as_str) {
        Some(n) if n == raw.name => {}
        Some(n) => {
            notes.push(
                Note::new(
                    NoteKind::Semantics,
                    format!("{field}.name"),
                    format!(
                        "the ProxyTemplate keyed the {kind} by the raw resource's name {:?}; MeshProxyPatch adds it under its own name {n:?}",
                        raw.name
                    ),
                )
                .affecting(&[raw.name.as_str(), n]),
            );
        }
        None => {
            notes.push(
                Note::new(
                    NoteKind::Default,
                    format!("{field}.resource"),
                    format!(
                        "the {kind} has no name; MeshProxyPatch adds a resource under its own name, so it is named {:?}, the raw resource's name",
                        raw.name
                    ),
                )
                .affecting(&["name"]),
            );
            resource.insert("name".to_owned(), json!(raw.name));
        }
    }
    if !raw.version.is_empty() {
        notes.push(Note::new(
            NoteKind::Dropped,
            format!("{field}.version"),
            "MeshProxyPatch has no resource version (the snapshot is versioned as a whole)",
        ));
    }
    Some(json!({ kind: {"operation": "Add", "value": encode_yaml(&Value::Object(resource))} }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::model::testing::{self, affects, fields, names, policy};
    use crate::convert::Conversion;

    /// The conversion of the ProxyTemplate `pt` with `body` (selectors and conf).
    fn conv(body: &str) -> Result<Conversion, ConvertError> {
        testing::convert(&policy("ProxyTemplate", "pt", body))
    }

    fn ok(body: &str) -> Conversion {
        conv(body).unwrap()
    }

    #[test]
    fn every_modification_kind_and_operation() {
        let c = ok(r#"
selectors:
- match:
    kuma.io/service: frontend
conf:
  imports:
  - default-proxy
  modifications:
  - cluster:
      operation: patch
      match:
        name: backend
        origin: ''
      value: |
        connectTimeout: 9s
  - cluster:
      operation: remove
      match:
        origin: inbound
  - listener:
      operation: patch
      match:
        origin: outbound
        tags:
          kuma.io/service: backend
      value: |
        perConnectionBufferLimitBytes: 4096
  - networkFilter:
      operation: addAfter
      match:
        name: envoy.filters.network.tcp_proxy
        listenerName: outbound:10.0.0.1:6379
      value: |
        name: envoy.filters.network.never_added
  - httpFilter:
      operation: addFirst
      match:
        listenerTags:
          kuma.io/service: frontend
      value: |
        name: envoy.filters.http.cors
  - virtualHost:
      operation: add
      match:
        routeConfigurationName: outbound:backend
      value: |
        name: extra
        domains: [extra.example.com]
"#);
        assert_eq!(c.outputs.len(), 1);
        let o = &c.outputs[0];
        assert_eq!(o.ty(), ResourceType::MeshProxyPatch);
        assert_eq!(
            o.spec_value(),
            json!({
                "targetRef": {"kind": "MeshService", "name": "frontend"},
                "default": {"appendModifications": [
                    {"cluster": {
                        "operation": "Patch",
                        "match": {"name": "backend"},
                        "value": "connectTimeout: 9s\n",
                    }},
                    {"cluster": {"operation": "Remove", "match": {"origin": "inbound"}}},
                    {"listener": {
                        "operation": "Patch",
                        "match": {"origin": "outbound", "tags": {"kuma.io/service": "backend"}},
                        "value": "perConnectionBufferLimitBytes: 4096\n",
                    }},
                    {"networkFilter": {
                        "operation": "AddAfter",
                        "match": {"name": "envoy.filters.network.tcp_proxy", "listenerName": "outbound:10.0.0.1:6379"},
                        "value": "name: envoy.filters.network.never_added\n",
                    }},
                    {"httpFilter": {
                        "operation": "AddFirst",
                        "match": {"listenerTags": {"kuma.io/service": "frontend"}},
                        "value": "name: envoy.filters.http.cors\n",
                    }},
                    {"virtualHost": {
                        "operation": "Add",
                        "match": {"routeConfigurationName": "outbound:backend"},
                        "value": "name: extra\ndomains: [extra.example.com]\n",
                    }},
                ]},
            })
        );
        assert_eq!(
            fields(&c),
            [
                (NoteKind::Dropped, "conf.imports"),
                (NoteKind::Semantics, "selectors"),
            ]
        );
        assert!(c.notes.iter().all(|n| n.affects.is_empty()));
    }

    #[test]
    fn raw_resources_become_adds_first() {
        let c = ok(r#"
conf:
  resources:
  - name: raw-cluster
    version: v1
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      name: raw-cluster
      connectTimeout: 2s
  - name: raw-listener
    resource: '{"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "address": {"socketAddress": {"address": "0.0.0.0", "portValue": 9999}}}'
  - name: raw-route
    resource: |
      '@type': type.googleapis.com/envoy.config.route.v3.RouteConfiguration
      name: raw-route
  - name: other
    resource: |
      '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster
      name: named-otherwise
  modifications:
  - cluster:
      operation: patch
      match:
        name: raw-cluster
        origin: proxy-template-raw
      value: 'connectTimeout: 3s'
"#);
        let spec = c.outputs[0].spec_value();
        // No selector: every proxy.
        assert_eq!(spec["targetRef"], json!({"kind": "Mesh"}));
        let mods = spec["default"]["appendModifications"].as_array().unwrap();
        assert_eq!(mods.len(), 4);
        assert_eq!(mods[0]["cluster"]["operation"], "Add");
        let value = |i: usize, kind: &str| -> Value {
            crate::codec::decode_one(
                mods[i][kind]["value"].as_str().unwrap().as_bytes(),
                Limits::default(),
            )
            .unwrap()
        };
        assert_eq!(
            value(0, "cluster"),
            json!({"name": "raw-cluster", "connectTimeout": "2s"})
        );
        assert_eq!(value(1, "listener")["name"], "raw-listener");
        assert_eq!(
            value(1, "listener")["address"]["socketAddress"]["portValue"],
            9999
        );
        assert_eq!(value(2, "cluster")["name"], "named-otherwise");
        assert_eq!(
            mods[3]["cluster"]["match"],
            json!({"name": "raw-cluster", "origin": "mesh-proxy-patch"})
        );
        assert_eq!(
            affects(&c),
            [
                ("conf.resources[1].resource", vec!["name".to_owned()]),
                (
                    "conf.resources[2]",
                    vec!["type.googleapis.com/envoy.config.route.v3.RouteConfiguration".to_owned()]
                ),
                (
                    "conf.resources[3].name",
                    vec!["other".to_owned(), "named-otherwise".to_owned()]
                ),
            ]
        );
        assert!(fields(&c).contains(&(NoteKind::Dropped, "conf.resources[0].version")));
        assert!(fields(&c).contains(&(
            NoteKind::Semantics,
            "conf.modifications[0].cluster.match.origin"
        )));
    }

    #[test]
    fn several_selectors() {
        let c = ok("
selectors:
- match:
    kuma.io/service: a
- match:
    kuma.io/service: b
    version: v2
conf:
  modifications:
  - cluster:
      operation: remove
");
        assert_eq!(names(&c), ["pt-1", "pt-2"]);
        assert_eq!(
            c.outputs[1].spec_value()["targetRef"],
            json!({"kind": "MeshServiceSubset", "name": "b", "tags": {"version": "v2"}})
        );
        assert_eq!(
            c.outputs[0].spec_value()["default"]["appendModifications"],
            json!([{"cluster": {"operation": "Remove"}}])
        );
        assert!(
            fields(&c)
                .iter()
                .filter(|(k, f)| *k == NoteKind::Semantics && *f == "selectors")
                .count()
                == 2
        );
    }

    #[test]
    fn errors() {
        let only_imports = conv("conf:\n  imports:\n  - default-proxy\n");
        assert!(matches!(only_imports, Err(ConvertError::Empty { .. })));
        let no_conf = conv("");
        assert!(matches!(no_conf, Err(ConvertError::Empty { .. })));
        // A patch without a value: MeshProxyPatch wants a value or jsonPatches.
        let patch = conv("conf:\n  modifications:\n  - cluster:\n      operation: patch\n");
        assert!(
            matches!(patch, Err(ConvertError::Invalid { .. })),
            "{patch:?}"
        );
    }
}
