//! RateLimit -> MeshRateLimit (issue 17), on `tests/data/rate-limits.yaml`: the old
//! RateLimits live (per-source routes on the HTTP inbound), the MeshRateLimits replacing them
//! in shadow (HTTP on the route, TCP as a network filter). Both configs are checked by the real
//! Envoy.

use serde_json::{json, Value};
use umbra_core::view::View;
use umbra_xds::diff::{apply, diff};

mod common;
use common::{envoy_validates, golden, load, snapshot};

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const LOCAL_RATE_LIMIT: &str =
    "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

fn chain<'a>(doc: &'a Value, listener: &str) -> &'a Value {
    &doc[LISTENER][listener]["filterChains"][0]
}

fn route_limit(requests: u32, interval: &str) -> Value {
    json!({
        "@type": LOCAL_RATE_LIMIT,
        "statPrefix": "rate_limit",
        "tokenBucket": {"maxTokens": requests, "tokensPerFill": requests, "fillInterval": interval},
        "filterEnabled": {"defaultValue": {"numerator": 100}, "runtimeKey": "local_rate_limit_enabled"},
        "filterEnforced": {"defaultValue": {"numerator": 100}, "runtimeKey": "local_rate_limit_enforced"},
    })
}

#[test]
fn old_rate_limit_live_and_mesh_rate_limit_in_shadow() {
    let resources = load("rate-limits.yaml");
    let live = snapshot(&resources, "backend", View::Live);
    let shadow = snapshot(&resources, "backend", View::Shadow);
    envoy_validates(&live);
    envoy_validates(&shadow);
    let (live, shadow) = (live.to_document().unwrap(), shadow.to_document().unwrap());

    // Live: one route per RateLimit, the more specific source first, then the catch-all.
    let hcm = &chain(&live, "inbound:10.0.0.20:8080")["filters"][0]["typedConfig"];
    let filters: Vec<&str> = hcm["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.http.local_ratelimit",
            "envoy.filters.http.router"
        ]
    );
    let routes = hcm["routeConfig"]["virtualHosts"][0]["routes"]
        .as_array()
        .unwrap();
    assert_eq!(routes.len(), 3, "{routes:#?}");
    assert_eq!(
        routes[0]["match"]["headers"],
        json!([{"name": "x-kuma-tags", "stringMatch": {"safeRegex": {"regex": ".*&kuma.io/service=[^&]*frontend[,&].*"}}}])
    );
    let mut frontend = route_limit(5, "10s");
    frontend["status"] = json!({"code": "Locked"});
    frontend["responseHeadersToAdd"] = json!([{"header": {"key": "x-limited", "value": "true"}}]);
    assert_eq!(
        routes[0]["typedPerFilterConfig"]["envoy.filters.http.local_ratelimit"],
        frontend
    );
    assert_eq!(
        routes[1]["match"]["headers"][0]["stringMatch"]["safeRegex"]["regex"],
        ".*&kuma.io/service=.*"
    );
    assert_eq!(
        routes[1]["typedPerFilterConfig"]["envoy.filters.http.local_ratelimit"],
        route_limit(100, "1s")
    );
    assert!(routes[2].get("typedPerFilterConfig").is_none());
    assert!(routes[2]["match"].get("headers").is_none());
    golden("rate-limits.live.json", &live);

    // Shadow: the RateLimits are off (MeshRateLimit replaces them); one route, limited.
    let hcm = &chain(&shadow, "inbound:10.0.0.20:8080")["filters"][0]["typedConfig"];
    let routes = hcm["routeConfig"]["virtualHosts"][0]["routes"]
        .as_array()
        .unwrap();
    assert_eq!(routes.len(), 1);
    let mut limit = route_limit(100, "10s");
    limit["status"] = json!({"code": "TooManyRequests"});
    limit["responseHeadersToAdd"] = json!([
        {"header": {"key": "x-kuma-rate-limited", "value": "true"}},
        {"header": {"key": "x-kuma-rate-limit", "value": "a"}, "appendAction": "OVERWRITE_IF_EXISTS_OR_ADD"},
        {"header": {"key": "x-kuma-rate-limit", "value": "b"}, "appendAction": "OVERWRITE_IF_EXISTS_OR_ADD"},
    ]);
    assert_eq!(
        routes[0]["typedPerFilterConfig"]["envoy.filters.http.local_ratelimit"],
        limit
    );
    // The TCP inbound: the network filter first.
    let tcp = &chain(&shadow, "inbound:10.0.0.20:5432")["filters"];
    assert_eq!(
        tcp[0],
        json!({
            "name": "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
            "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
                "statPrefix": "tcp_rate_limit",
                "tokenBucket": {"maxTokens": 100, "tokensPerFill": 100, "fillInterval": "0.100s"},
            },
        })
    );
    assert_eq!(tcp[1]["name"], "envoy.filters.network.tcp_proxy");

    let patch = diff(&live, &shadow);
    assert_eq!(apply(&live, &patch).unwrap(), shadow);
    golden(
        "rate-limits.shadow-diff.json",
        &serde_json::to_value(&patch).unwrap(),
    );
}
