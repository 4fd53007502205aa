//! Kuma tags as Envoy sees them: filter metadata (`io.kuma.tags`, `envoy.lb`,
//! `envoy.transport_socket_match`) and the `x-kuma-tags` header value. A leaf: it imports
//! nothing from this crate.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};

/// `filterMetadata["io.kuma.tags"]` = the tags, as Kuma puts on listeners.
pub fn tags_metadata(tags: &BTreeMap<String, String>) -> Metadata {
    string_metadata("io.kuma.tags", tags)
}

/// `filterMetadata[<filter>]` = `values`, as string fields (Kuma's metadata of tags, and its
/// `LbMetadata` with `envoy.lb`).
pub fn string_metadata(filter: &str, values: &BTreeMap<String, String>) -> Metadata {
    let fields = values
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                PbValue {
                    kind: Some(Kind::StringValue(v.clone())),
                },
            )
        })
        .collect();
    Metadata {
        filter_metadata: [(filter.to_owned(), Struct { fields })]
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

/// Endpoint metadata: `envoy.lb` and `envoy.transport_socket_match` = tags minus the service.
pub fn endpoint_metadata(tags: &BTreeMap<String, String>) -> Option<Metadata> {
    let fields: std::collections::HashMap<String, PbValue> = tags
        .iter()
        .filter(|(k, _)| k.as_str() != umbra_core::target_ref::SERVICE_TAG)
        .map(|(k, v)| {
            (
                k.clone(),
                PbValue {
                    kind: Some(Kind::StringValue(v.clone())),
                },
            )
        })
        .collect();
    if fields.is_empty() {
        return None;
    }
    Some(Metadata {
        filter_metadata: [
            (
                "envoy.lb".to_owned(),
                Struct {
                    fields: fields.clone(),
                },
            ),
            ("envoy.transport_socket_match".to_owned(), Struct { fields }),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    })
}

/// Kuma's `tags.Serialize` for `x-kuma-tags`: keys sorted, each `&key=v1,v2&`, concatenated.
pub fn serialize_tags(tags: &BTreeMap<String, std::collections::BTreeSet<String>>) -> String {
    let mut out = String::new();
    for (k, vs) in tags {
        out.push('&');
        out.push_str(k);
        out.push('=');
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(v);
        }
        out.push('&');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x_kuma_tags_format() {
        let tags = BTreeMap::from([
            ("kuma.io/service".to_owned(), ["frontend".to_owned()].into()),
            (
                "version".to_owned(),
                ["v1".to_owned(), "v2".to_owned()].into(),
            ),
        ]);
        assert_eq!(
            serialize_tags(&tags),
            "&kuma.io/service=frontend&&version=v1,v2&"
        );
    }
}
