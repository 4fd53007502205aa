//! The edits the modification engine makes inside one resource, free of matching and origins:
//! modification values read from YAML into Envoy messages, Kuma's proto merge or RFC 6902
//! `jsonPatches` applied to a message or a typed config (`Any`), the filter list operations
//! (network filters and HTTP filters alike), HTTP connection managers decoded and re-encoded, the
//! virtual host operations on a route configuration, and a listener's `io.kuma.tags`; and
//! [`PatchError`], why an edit failed.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, Listener};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use serde_json::Value;
use umbra_core::codec::{decode_documents, CodecError, Limits};
use umbra_core::policies::mesh_proxy_patch::JsonPatchBlock;

use super::json_patch::{self, JsonPatchError};
use super::merge::{merge_anys, merge_typed, type_name_of, MergeError};
use super::model::{Modification, Op};
use crate::names::HCM_FILTER;
use crate::protobuf::any;
use crate::render::{self, RenderError};

/// Why an edit inside one resource failed; the engine reports it as the reason of a
/// [`crate::GenerateError::Policy`] naming the policy and the resource.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The resource (or the patched JSON) does not render to or from its Envoy message.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// `jsonPatches` do not apply.
    #[error(transparent)]
    JsonPatch(#[from] JsonPatchError),
    /// Kuma's proto merge failed.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A filter to patch with `jsonPatches` has no typed config.
    #[error("filter {filter:?} has no typedConfig to patch")]
    NoTypedConfig {
        /// The filter's name.
        filter: String,
    },
    /// `Add` (a resource operation) used on a filter.
    #[error("invalid operation for a filter: Add")]
    AddFilter,
    /// An HTTP connection manager filter has no typed config.
    #[error("{HCM_FILTER} has no typedConfig")]
    HcmWithoutConfig,
    /// An HTTP connection manager filter holds another message type.
    #[error("{HCM_FILTER} holds {type_url}, not an HttpConnectionManager")]
    NotAnHcm {
        /// The type URL it holds.
        type_url: String,
    },
    /// An HTTP connection manager's bytes do not decode.
    #[error("cannot decode the HttpConnectionManager: {0}")]
    HcmDecode(prost::DecodeError),
}

/// YAML (or JSON) text as one JSON value; empty text (or `null`) is an empty object, as Kuma's
/// `FromYAML` reads it. Only the first document counts (`yaml.YAMLToJSON`).
///
/// # Errors
/// [`CodecError`] when the text is not YAML (or too large or deep).
pub(super) fn yaml_to_json(text: &str) -> Result<Value, CodecError> {
    let docs = decode_documents(text.as_bytes(), Limits::default())?;
    match docs.into_iter().next() {
        None | Some(Value::Null) => Ok(Value::Object(serde_json::Map::new())),
        Some(v) => Ok(v),
    }
}

/// The `name` member of a JSON object, if a string.
pub(super) fn json_name(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

/// Parse the proto3-JSON form of an `M` (unknown fields are an error).
///
/// # Errors
/// [`RenderError`] when the JSON does not fit `M`.
pub(super) fn parse_typed<M: Message + Name + Default>(json: &Value) -> Result<M, RenderError> {
    render::from_json::<M>(json)
}

/// Patch `msg` with a modification's `value` (Kuma's proto merge) or, when it has
/// `jsonPatches`, with those (RFC 6902 on the JSON form).
pub(super) fn patch_typed<M: Message + Name + Default + Clone + 'static>(
    msg: &M,
    value: &M,
    patches: &[JsonPatchBlock],
) -> Result<M, PatchError> {
    if patches.is_empty() {
        Ok(merge_typed(msg, value)?)
    } else {
        json_patch_typed(msg, patches)
    }
}

/// A message patched with `jsonPatches` through its proto3-JSON form (Kuma's
/// `MergeJsonPatch`: the result replaces the message).
fn json_patch_typed<M: Message + Name + Default>(
    msg: &M,
    patches: &[JsonPatchBlock],
) -> Result<M, PatchError> {
    let mut doc = render::to_json(msg)?;
    json_patch::apply(&mut doc, patches)?;
    Ok(parse_typed(&doc)?)
}

/// An `Any` patched with `jsonPatches` through the proto3-JSON form of its message (Kuma's
/// `MergeJsonPatchAny`).
fn json_patch_any(a: &Any, patches: &[JsonPatchBlock]) -> Result<Any, PatchError> {
    let type_name = type_name_of(&a.type_url);
    let mut doc = render::encoded_to_json(type_name, &a.value)?;
    json_patch::apply(&mut doc, patches)?;
    let value = render::json_to_encoded(type_name, &doc)?;
    Ok(Any {
        type_url: a.type_url.clone(),
        value,
    })
}

/// Tags of a listener's `io.kuma.tags` metadata (Kuma's `envoy_metadata.ExtractTags`).
pub(super) fn listener_tags(l: &Listener) -> BTreeMap<String, String> {
    use envoy_types::pb::google::protobuf::value::Kind;
    l.metadata
        .as_ref()
        .and_then(|m| m.filter_metadata.get("io.kuma.tags"))
        .map(|s| {
            s.fields
                .iter()
                .filter_map(|(k, v)| match &v.kind {
                    Some(Kind::StringValue(s)) => Some((k.clone(), s.clone())),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A network or HTTP filter: what the list operations need.
pub(super) trait NamedFilter: Clone {
    fn filter_name(&self) -> &str;
    fn typed_config(&self) -> Option<&Any>;
    fn set_typed_config(&mut self, a: Any);
}

impl NamedFilter for Filter {
    fn filter_name(&self) -> &str {
        &self.name
    }
    fn typed_config(&self) -> Option<&Any> {
        match &self.config_type {
            Some(filter::ConfigType::TypedConfig(a)) => Some(a),
            _ => None,
        }
    }
    fn set_typed_config(&mut self, a: Any) {
        self.config_type = Some(filter::ConfigType::TypedConfig(a));
    }
}

impl NamedFilter for HttpFilter {
    fn filter_name(&self) -> &str {
        &self.name
    }
    fn typed_config(&self) -> Option<&Any> {
        match &self.config_type {
            Some(http_filter::ConfigType::TypedConfig(a)) => Some(a),
            _ => None,
        }
    }
    fn set_typed_config(&mut self, a: Any) {
        self.config_type = Some(http_filter::ConfigType::TypedConfig(a));
    }
}

/// One filter operation on a filter list (a filter chain's filters or an HCM's HTTP filters).
pub(super) fn edit_filters<F: NamedFilter>(
    list: &mut Vec<F>,
    m: &Modification<'_>,
    op: Op,
    value: &F,
) -> Result<(), PatchError> {
    let name = m.matcher.name.as_deref();
    let matches = |f: &F| name.is_none_or(|n| n == f.filter_name());
    match op {
        Op::AddFirst => list.insert(0, value.clone()),
        Op::AddLast => list.push(value.clone()),
        Op::AddBefore | Op::AddAfter => {
            // Kuma: the first filter named `match.name`; nothing when there is none.
            let found = name.and_then(|n| list.iter().position(|f| f.filter_name() == n));
            if let Some(i) = found {
                let at = if op == Op::AddBefore { i } else { i + 1 };
                list.insert(at, value.clone());
            }
        }
        Op::Remove => list.retain(|f| !matches(f)),
        Op::Patch => {
            for f in list.iter_mut().filter(|f| matches(f)) {
                let merged = if m.json_patches.is_empty() {
                    merge_anys(f.typed_config(), value.typed_config())?
                } else {
                    let a = f.typed_config().ok_or_else(|| PatchError::NoTypedConfig {
                        filter: f.filter_name().to_owned(),
                    })?;
                    Some(json_patch_any(a, m.json_patches)?)
                };
                if let Some(a) = merged {
                    f.set_typed_config(a);
                }
            }
        }
        Op::Add => return Err(PatchError::AddFilter),
    }
    Ok(())
}

/// Decode the HTTP connection manager of a network filter.
fn hcm_of(f: &Filter) -> Result<HttpConnectionManager, PatchError> {
    let a = f.typed_config().ok_or(PatchError::HcmWithoutConfig)?;
    if a.type_url != HttpConnectionManager::type_url() {
        return Err(PatchError::NotAnHcm {
            type_url: a.type_url.clone(),
        });
    }
    HttpConnectionManager::decode(a.value.as_slice()).map_err(PatchError::HcmDecode)
}

/// Apply `f` to every HTTP connection manager of `l` (all filter chains), re-encoding each.
pub(super) fn edit_hcms(
    l: &mut Listener,
    mut f: impl FnMut(&mut HttpConnectionManager) -> Result<(), PatchError>,
) -> Result<(), PatchError> {
    for chain in &mut l.filter_chains {
        for flt in chain.filters.iter_mut().filter(|x| x.name == HCM_FILTER) {
            let mut hcm = hcm_of(flt)?;
            f(&mut hcm)?;
            flt.set_typed_config(any(&hcm));
        }
    }
    Ok(())
}

/// One virtual host operation on a route configuration.
pub(super) fn edit_virtual_hosts(
    rc: &mut RouteConfiguration,
    op: Op,
    name: Option<&str>,
    value: &VirtualHost,
    json_patches: &[JsonPatchBlock],
) -> Result<(), PatchError> {
    let matches = |vh: &VirtualHost| name.is_none_or(|n| n == vh.name);
    match op {
        Op::Add => rc.virtual_hosts.push(value.clone()),
        Op::Remove => rc.virtual_hosts.retain(|vh| !matches(vh)),
        _ => {
            for vh in rc.virtual_hosts.iter_mut().filter(|vh| matches(vh)) {
                *vh = patch_typed(vh, value, json_patches)?;
            }
        }
    }
    Ok(())
}
