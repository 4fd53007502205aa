//! The Envoy-field mapping for the precedence notes: the conf paths where two merged confs
//! differ ([`diff_paths`]) and the Envoy fields such a difference shows in, per new type and
//! destination protocol ([`envoy_fields`]), which a note's `affects` lists.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::resource::ResourceType;

/// Paths (object keys) where `a` and `b` differ; arrays and scalars compare whole.
pub(super) fn diff_paths(a: &Value, b: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    fn walk(
        a: Option<&Value>,
        b: Option<&Value>,
        path: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    path.push(k.clone());
                    walk(x.get(k), y.get(k), path, out);
                    path.pop();
                }
            }
            (x, y) if x == y => {}
            _ => out.push(path.clone()),
        }
    }
    walk(Some(a), Some(b), &mut Vec::new(), &mut out);
    out
}

/// Protocols an entry of [`FIELDS`] renders for (`None`: every protocol).
type Protocols = Option<&'static [&'static str]>;

const HTTPISH: Protocols = Some(&["http", "http2", "grpc"]);
const HTTP_CLUSTER: Protocols = Some(&["http", "http2"]);
const CHECKED: Protocols = Some(&["tcp", "http", "http2", "grpc"]);

/// Per new type: conf path, the protocols of the destination it shows for, and the Envoy
/// fields it sets (as Umbra renders them, `xds/src/plugins/<family>.rs`).
#[allow(clippy::type_complexity)]
const FIELDS: &[(ResourceType, &[&str], Protocols, &[&str])] = &[
    (
        ResourceType::MeshTimeout,
        &["connectionTimeout"],
        None,
        &["connectTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["idleTimeout"],
        Some(&["tcp", "kafka", "http", "http2"]),
        &["idleTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "requestTimeout"],
        HTTPISH,
        &["timeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "streamIdleTimeout"],
        HTTPISH,
        &["idleTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "requestHeadersTimeout"],
        HTTPISH,
        &["requestHeadersTimeout"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "maxStreamDuration"],
        HTTP_CLUSTER,
        &["maxStreamDuration"],
    ),
    (
        ResourceType::MeshTimeout,
        &["http", "maxConnectionDuration"],
        HTTP_CLUSTER,
        &["maxConnectionDuration"],
    ),
    (
        ResourceType::MeshCircuitBreaker,
        &["connectionLimits"],
        None,
        &["circuitBreakers"],
    ),
    (
        ResourceType::MeshCircuitBreaker,
        &["outlierDetection"],
        None,
        &["outlierDetection"],
    ),
    (
        ResourceType::MeshRetry,
        &["http"],
        Some(&["http"]),
        &["retryPolicy"],
    ),
    (
        ResourceType::MeshRetry,
        &["grpc"],
        Some(&["grpc"]),
        &["retryPolicy"],
    ),
    (
        ResourceType::MeshRetry,
        &["tcp"],
        Some(&["tcp"]),
        &["maxConnectAttempts"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["healthyPanicThreshold"],
        None,
        &["healthyPanicThreshold"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["failTrafficOnPanic"],
        None,
        &["zoneAwareLbConfig"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["http"],
        HTTP_CLUSTER,
        &["healthChecks"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["grpc"],
        Some(&["grpc"]),
        &["healthChecks"],
    ),
    (
        ResourceType::MeshHealthCheck,
        &["tcp"],
        CHECKED,
        &["healthChecks"],
    ),
    (
        ResourceType::MeshAccessLog,
        &["backends"],
        None,
        &["accessLog"],
    ),
    (ResourceType::MeshTrace, &["backends"], None, &["tracing"]),
    (ResourceType::MeshTrace, &["sampling"], None, &["tracing"]),
    (ResourceType::MeshTrace, &["tags"], None, &["tracing"]),
];

/// Envoy fields a difference at conf `path` of a `ty` shows in, for a destination of
/// `protocol` (`None`: unknown, any). A path [`FIELDS`] does not list (a MeshHealthCheck
/// interval, ...) gives every field of the type.
pub(super) fn envoy_fields(
    ty: ResourceType,
    path: &[String],
    protocol: Option<&str>,
) -> BTreeSet<&'static str> {
    let related = |entry: &[&str]| entry.iter().zip(path.iter()).all(|(e, p)| *e == p.as_str());
    let mut out = BTreeSet::new();
    let mut listed = false;
    for (t, entry, protocols, fields) in FIELDS {
        if *t != ty || !related(entry) {
            continue;
        }
        listed = true;
        let shows = match (protocol, protocols) {
            (Some(p), Some(ps)) => ps.contains(&p),
            _ => true,
        };
        if shows {
            out.extend(fields.iter().copied());
        }
    }
    if !listed {
        for (t, _, protocols, fields) in FIELDS {
            let shows = match (protocol, protocols) {
                (Some(p), Some(ps)) => ps.contains(&p),
                _ => true,
            };
            if *t == ty && shows {
                out.extend(fields.iter().copied());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_differences_map_to_the_envoy_fields_for_the_protocol() {
        let a = serde_json::json!({"connectionTimeout": "1s", "http": {"requestTimeout": "2s"}});
        let b = serde_json::json!({"connectionTimeout": "1s", "http": {"requestTimeout": "3s"}, "idleTimeout": "4s"});
        let paths = diff_paths(&a, &b);
        assert_eq!(
            paths,
            [
                vec!["http".to_owned(), "requestTimeout".to_owned()],
                vec!["idleTimeout".to_owned()]
            ]
        );
        let fields = |p: Option<&str>| -> BTreeSet<&str> {
            paths
                .iter()
                .flat_map(|path| envoy_fields(ResourceType::MeshTimeout, path, p))
                .collect()
        };
        assert_eq!(
            fields(Some("http")),
            BTreeSet::from(["timeout", "idleTimeout"])
        );
        assert_eq!(fields(Some("tcp")), BTreeSet::from(["idleTimeout"]));
        assert_eq!(fields(Some("grpc")), BTreeSet::from(["timeout"]));
        assert_eq!(fields(None), BTreeSet::from(["timeout", "idleTimeout"]));
        // A whole section: every field under it.
        assert_eq!(
            envoy_fields(ResourceType::MeshRetry, &["tcp".to_owned()], Some("tcp")),
            BTreeSet::from(["maxConnectAttempts"])
        );
        assert!(
            envoy_fields(ResourceType::MeshRetry, &["http".to_owned()], Some("tcp")).is_empty()
        );
        // Unlisted: every field of the type.
        assert_eq!(
            envoy_fields(
                ResourceType::MeshHealthCheck,
                &["interval".to_owned()],
                Some("kafka")
            ),
            BTreeSet::from(["healthyPanicThreshold", "zoneAwareLbConfig"])
        );
    }
}
