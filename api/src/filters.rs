//! The list filters of Kuma's resource API, read once from a request's query pairs
//! ([`ListFilters::parse`]) and pushed down to the store ([`umbra_store::ListQuery`]), so that
//! `total` and `next` count only what matches:
//! - `label=<key>:<value>` (repeatable, all must match; Umbra's, Kuma 2.7 has none);
//! - `name=<text>`: names containing the text (case-sensitive; Kuma's `ListByNameContains`);
//! - Dataplane and ExternalService lists: `tag=<key>:<value>` (repeatable, all must match,
//!   split at the first `:`), Kuma's `MatchTagsFuzzy`: the gateway's tags on a gateway DPP,
//!   else at least one inbound's tags, or an ExternalService's `tags`, carry every key with a
//!   value *containing* the given value (Kuma 2.7 `pkg/api-server/filters/filtering.go`);
//! - Dataplane lists only: `gateway=true|false|builtin|delegated`.
//!
//! Deviations from Kuma, each a 400 rather than silently ignored: a `label=`/`tag=` without
//! `:` (`rule: format`), a `gateway=` outside the four spellings (`rule: enum`), `tag=` on a
//! list of anything but Dataplanes and ExternalServices and `gateway=` on anything but
//! Dataplanes (Kuma ignores them there).

use std::collections::BTreeMap;

use umbra_core::resource::ResourceType;
use umbra_store::{DataplaneFilter, GatewayFilter};

use crate::error::ApiError;
use crate::paging::one_of;

/// The filters of one list request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilters {
    /// `label=`: every label with exactly this value.
    pub labels: BTreeMap<String, String>,
    /// `name=`: the name contains this (an empty `name=` is no filter).
    pub name: Option<String>,
    /// `tag=` (Dataplanes and ExternalServices) and `gateway=` (Dataplanes).
    pub dataplane: DataplaneFilter,
}

/// A 400 when one of the `keys` filters of `query` holds a NUL character: no store keeps one
/// in a name, label or tag, and PostgreSQL refuses one in text, so a filter holding one is the
/// caller's mistake (400), not a store outage (503).
///
/// # Errors
/// A 400 naming the parameter (`rule: format`).
pub fn refuse_nul(query: &[(String, String)], keys: &[&str]) -> Result<(), ApiError> {
    match query
        .iter()
        .find(|(k, v)| keys.contains(&k.as_str()) && v.contains('\0'))
    {
        Some((k, _)) => Err(
            ApiError::bad_parameter(k, "a filter may not contain a NUL character")
                .with_rule("format", &[]),
        ),
        None => Ok(()),
    }
}

impl ListFilters {
    /// The filters in `query` for a list of `ty`.
    ///
    /// # Errors
    /// A 400 naming the parameter: a NUL in `label`/`name`/`tag`, `label`/`tag` not
    /// `<key>:<value>` (`rule: format`), an
    /// unknown `gateway` spelling (`rule: enum`), `tag` on a type other than Dataplane and
    /// ExternalService, `gateway` on a type other than Dataplane.
    pub fn parse(ty: ResourceType, query: &[(String, String)]) -> Result<Self, ApiError> {
        refuse_nul(query, &["label", "name", "tag"])?;
        let mut out = ListFilters {
            labels: pairs(query, "label")?,
            name: query
                .iter()
                .find(|(k, v)| k == "name" && !v.is_empty())
                .map(|(_, v)| v.clone()),
            dataplane: DataplaneFilter {
                tags: pairs(query, "tag")?,
                gateway: None,
            },
        };
        if let Some((_, v)) = query.iter().find(|(k, _)| k == "gateway") {
            out.dataplane.gateway = Some(one_of(
                "gateway",
                v,
                &[
                    ("true", GatewayFilter::Any),
                    ("false", GatewayFilter::None),
                    ("builtin", GatewayFilter::Builtin),
                    ("delegated", GatewayFilter::Delegated),
                ],
            )?);
        }
        let refused = match ty {
            ResourceType::Dataplane => None,
            ResourceType::ExternalService if out.dataplane.gateway.is_some() => {
                Some(("gateway", "Dataplane lists"))
            }
            ResourceType::ExternalService => None,
            _ if !out.dataplane.tags.is_empty() => {
                Some(("tag", "Dataplane and ExternalService lists"))
            }
            _ if out.dataplane.gateway.is_some() => Some(("gateway", "Dataplane lists")),
            _ => None,
        };
        if let Some((field, which)) = refused {
            return Err(ApiError::bad_parameter(
                field,
                format!("only {which} filter by {field}, not {}", ty.name()),
            ));
        }
        Ok(out)
    }
}

/// Every `<key>:<value>` given as query parameter `param`, split at the first `:`.
fn pairs(query: &[(String, String)], param: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let mut out = BTreeMap::new();
    for (_, v) in query.iter().filter(|(k, _)| k == param) {
        let (key, value) = v.split_once(':').ok_or_else(|| {
            ApiError::bad_parameter(param, format!("{v:?} is not <key>:<value>"))
                .with_rule("format", &[])
        })?;
        out.insert(key.to_owned(), value.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_in_a_filter_is_the_callers_mistake() {
        for (k, v) in [("name", "a\0"), ("label", "a:\0"), ("tag", "\0:b")] {
            let q = vec![(k.to_owned(), v.to_owned())];
            let e = ListFilters::parse(ResourceType::Dataplane, &q).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{k}");
        }
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_every_filter() {
        let f = ListFilters::parse(
            ResourceType::Dataplane,
            &q(&[
                ("label", "env:prod"),
                ("name", "web"),
                ("tag", "kuma.io/service:web"),
                ("tag", "url:http://x"),
                ("gateway", "builtin"),
            ]),
        )
        .unwrap();
        assert_eq!(f.labels, [("env".into(), "prod".into())].into());
        assert_eq!(f.name.as_deref(), Some("web"));
        assert_eq!(
            f.dataplane.tags.get("url").map(String::as_str),
            Some("http://x")
        );
        assert_eq!(f.dataplane.tags.len(), 2);
        assert_eq!(f.dataplane.gateway, Some(GatewayFilter::Builtin));
        assert_eq!(
            ListFilters::parse(ResourceType::Dataplane, &q(&[("name", "")])).unwrap(),
            ListFilters::default()
        );
    }

    #[test]
    fn refuses_bad_filters() {
        let field = |r: Result<ListFilters, ApiError>| {
            r.unwrap_err().body()["invalid_parameters"][0].clone()
        };
        let e = field(ListFilters::parse(
            ResourceType::Dataplane,
            &q(&[("tag", "x")]),
        ));
        assert_eq!(
            (e["field"].as_str(), e["rule"].as_str()),
            (Some("tag"), Some("format"))
        );
        let e = field(ListFilters::parse(
            ResourceType::Dataplane,
            &q(&[("gateway", "yes")]),
        ));
        assert_eq!(
            (e["field"].as_str(), e["rule"].as_str()),
            (Some("gateway"), Some("enum"))
        );
        let e = field(ListFilters::parse(
            ResourceType::MeshTimeout,
            &q(&[("tag", "a:b")]),
        ));
        assert_eq!(e["field"], "tag");
        let e = field(ListFilters::parse(
            ResourceType::Mesh,
            &q(&[("gateway", "true")]),
        ));
        assert_eq!(e["field"], "gateway");
        // ExternalServices filter by tag (Kuma's), not by gateway kind.
        let f = ListFilters::parse(
            ResourceType::ExternalService,
            &q(&[("tag", "kuma.io/service:http")]),
        )
        .unwrap();
        assert_eq!(f.dataplane.tags.len(), 1);
        let e = field(ListFilters::parse(
            ResourceType::ExternalService,
            &q(&[("gateway", "true")]),
        ));
        assert_eq!(e["field"], "gateway");
    }
}
