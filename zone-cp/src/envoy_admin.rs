//! A proxy's own view of its config, read from its Envoy admin: Kuma's `GET
//! /meshes/{mesh}/dataplanes/{name}/{xds|stats|clusters}`, `GET
//! /zoneingresses/{name}/{xds|stats|clusters}` and `GET
//! /zoneegresses/{name}/{xds|stats|clusters}` (Kuma 2.7 `pkg/api-server/
//! inspect_envoy_admin_endpoints.go`), answered by the zone the proxy is connected to and
//! forwarded by the Global over KDS ([`crate::remote_inspect`]).
//!
//! | type | Envoy admin call | query | answer |
//! |---|---|---|---|
//! | `xds` | `/config_dump` | `include_eds=true\|false` (default `false`) | JSON, redacted |
//! | `stats` | `/stats` | `format=json\|text` (default `text`), `usedonly=true\|false` (default `true`) | text or JSON |
//! | `clusters` | `/clusters` | `format=json\|text` (default `text`) | text or JSON |
//!
//! `_config` is what Umbra generated; `xds` is what the Envoy runs (after its NACKs, its
//! warming, its own defaults). The config dump is redacted as Kuma redacts it
//! (`pkg/envoy/admin/sanitize.go`): every `authorization` value of a gRPC service's
//! `initial_metadata` in the bootstrap (the dataplane token) is replaced with `[redacted]`
//! wherever it appears. Envoy itself redacts private keys in its SDS secrets.
//!
//! **Where the admin is.** The bootstrap binds the admin to `127.0.0.1:<admin port>`
//! ([`crate::bootstrap`]), inside the proxy's host. As Kuma 2.7 (`pkg/envoy/admin/client.go`),
//! the zone reaches it through the listener `kuma:envoy:admin` generated on
//! `<proxy address>:<admin port>` ([`umbra_xds::base::admin`]): HTTPS with the zone's client
//! certificate (`DNS:kuma-cp`), the proxy's server certificate verified against the zone's
//! Envoy-admin CA and the proxy's address ([`crate::admin_tls`]). The address is the one of the
//! proxy's Dataplane (or ZoneIngress), the port the one its Envoy reported; the listener exists
//! once the reconciler generated it for a connected Envoy (other loopback addresses such as
//! `127.0.0.2` get one too). A proxy whose address is `127.0.0.1` gets no listener (Envoy could not bind the admin's own address twice): its admin
//! is called at `http://127.0.0.1:<port>`, which works only when its ADS stream comes from the
//! zone CP's own host (otherwise a 502 says so).
//!
//! At most [`MAX_CONCURRENT`] admin calls run at once (the zone API's and the Global's alike).
//!
//! Errors: 400 for a bad query value (the parameter named); 404 for an unknown mesh, proxy or
//! type; 409 when no Envoy of the proxy is connected to this zone; 502 when the admin cannot be
//! reached as above, refuses or fails (a TLS failure named), or answers more than
//! [`MAX_ADMIN_BYTES`]; 504 when it takes longer than [`ADMIN_TIMEOUT`].

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use umbra_api::error::ApiError;
use umbra_api::paging::one_of;
use umbra_api::shared_routes::AdminView;
use umbra_core::dataplane::DpKey;
use umbra_core::resource::{ResourceKey, ResourceType};

use crate::insight::Insights;

/// Longest an admin call may take (Kuma's client: 5 s).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest the connection to the admin may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest admin answer relayed (bytes); under the Global's forwarding limit.
pub const MAX_ADMIN_BYTES: usize = 32 << 20;
/// Admin calls running at once (each may hold [`MAX_ADMIN_BYTES`] and its parsed copy); more
/// wait for a turn within [`ADMIN_TIMEOUT`].
pub const MAX_CONCURRENT: usize = 4;
/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

/// The Envoy admin path of `ty`.
fn envoy_path(ty: AdminView) -> &'static str {
    match ty {
        AdminView::Xds => "/config_dump",
        AdminView::Stats => "/stats",
        AdminView::Clusters => "/clusters",
    }
}

/// A validated admin query (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdminQuery {
    /// `include_eds=true` (`xds`).
    pub include_eds: bool,
    /// `format=json` (`stats`, `clusters`).
    pub json: bool,
    /// `usedonly=false` (`stats`; `true` by default, as Kuma).
    pub all_stats: bool,
    /// An internal read's own Envoy query string, URL-encoded ([`observer_stats`],
    /// [`traffic_stats`]; not a query parameter).
    internal: Option<&'static str>,
}

/// The Envoy `/stats` query of [`observer_stats`]: `filter=`
/// [`umbra_core::observed::STATS_FILTER`], unused counters too.
const OBSERVER_QUERY: &str = "filter=umbra_observe";
/// The Envoy `/stats` query of [`traffic_stats`], URL-encoded: the counters a gate reads
/// ([`umbra_core::rollout::TrafficSample::parse`]),
/// `upstream_rq_(total|5xx|timeout|retry|rx_reset|time)$|rbac\.denied$|rate_limited$|
/// downstream_(rq|cx)_total$`.
const TRAFFIC_QUERY: &str = "filter=upstream_rq_%28total%7C5xx%7Ctimeout%7Cretry%7Crx_reset%7Ctime%29%24%7Crbac%5C.denied%24%7Crate_limited%24%7Cdownstream_%28rq%7Ccx%29_total%24";

impl AdminQuery {
    /// Parse `pairs` for `ty`; parameters of other types and unknown ones are ignored, as on
    /// every Umbra read.
    ///
    /// # Errors
    /// A 400 naming the parameter and the allowed values.
    pub fn parse(ty: AdminView, pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let bool_of = |name: &str, v: &str| one_of(name, v, &[("true", true), ("false", false)]);
        let mut q = AdminQuery::default();
        for (k, v) in pairs {
            match (ty, k.as_str()) {
                (AdminView::Xds, "include_eds") => q.include_eds = bool_of(k, v)?,
                (AdminView::Stats | AdminView::Clusters, "format") => {
                    q.json = one_of(k, v, &[("json", true), ("text", false)])?;
                }
                (AdminView::Stats, "usedonly") => q.all_stats = !bool_of(k, v)?,
                _ => {}
            }
        }
        Ok(q)
    }

    /// The Envoy admin query string of this query for `ty` (without `?`).
    fn envoy_query(self, ty: AdminView) -> &'static str {
        if let Some(query) = self.internal {
            return query;
        }
        match (ty, self.include_eds, self.json, self.all_stats) {
            (AdminView::Xds, true, _, _) => "include_eds",
            (AdminView::Xds, false, _, _) => "",
            (AdminView::Stats, _, true, false) => "format=json&usedonly",
            (AdminView::Stats, _, true, true) => "format=json",
            (AdminView::Stats, _, false, false) => "usedonly",
            (AdminView::Stats, _, false, true) => "",
            (AdminView::Clusters, _, true, _) => "format=json",
            (AdminView::Clusters, _, false, _) => "",
        }
    }
}

/// An admin answer: its media type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminAnswer {
    /// `application/json` or `text/plain`.
    pub content_type: &'static str,
    /// The body, redacted for `xds`.
    pub body: Vec<u8>,
}

/// Read proxy `key`'s admin view `ty` (`key.mesh` empty: the ZoneIngress `key.name`;
/// [`DpKey::zone_egress`]: the ZoneEgress `key.name`), with the
/// query `pairs`, through the connection its insight records.
///
/// # Errors
/// See the module docs.
pub async fn inspect(
    store: &crate::store::Store,
    insights: &Insights,
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
    ty: AdminView,
    pairs: &[(String, String)],
) -> Result<AdminAnswer, ApiError> {
    let query = AdminQuery::parse(ty, pairs)?;
    read(store, insights, reconciler, key, ty, query).await
}

/// The observe-mode counters of DPP `key`'s Envoy (`/stats?filter=<`
/// [`umbra_core::observed::STATS_FILTER`]`>`, as text, unused counters too), read as
/// [`inspect`] reads `stats`.
///
/// # Errors
/// As [`inspect`].
pub async fn observer_stats(
    store: &crate::store::Store,
    insights: &Insights,
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
) -> Result<String, ApiError> {
    stats_text(store, insights, reconciler, key, OBSERVER_QUERY).await
}

/// The traffic counters a staged rollout's gate reads of DPP `key`'s Envoy
/// ([`TRAFFIC_QUERY`], as text), read as [`inspect`] reads `stats`.
///
/// # Errors
/// As [`inspect`].
pub async fn traffic_stats(
    store: &crate::store::Store,
    insights: &Insights,
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
) -> Result<String, ApiError> {
    stats_text(store, insights, reconciler, key, TRAFFIC_QUERY).await
}

async fn stats_text(
    store: &crate::store::Store,
    insights: &Insights,
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
    query: &'static str,
) -> Result<String, ApiError> {
    let query = AdminQuery {
        internal: Some(query),
        ..Default::default()
    };
    let answer = read(store, insights, reconciler, key, AdminView::Stats, query).await?;
    String::from_utf8(answer.body).map_err(|_| {
        ApiError::status(
            StatusCode::BAD_GATEWAY,
            format!(
                "the Envoy of dataplane {:?} sent stats that are not UTF-8",
                key.name
            ),
        )
    })
}

async fn read(
    store: &crate::store::Store,
    insights: &Insights,
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
    ty: AdminView,
    query: AdminQuery,
) -> Result<AdminAnswer, ApiError> {
    let (what, address) = if key.is_zone_egress() {
        let Some(ze) = store.get(&ResourceKey {
            ty: ResourceType::ZoneEgress,
            mesh: String::new(),
            name: key.name.clone(),
        }) else {
            return Err(ApiError::not_found(format!(
                "zone egress {:?} not found",
                key.name
            )));
        };
        let address = ze
            .resource
            .as_zone_egress()
            .map(|z| z.networking.address.clone())
            .unwrap_or_default();
        (format!("zone egress {:?}", key.name), address)
    } else if key.mesh.is_empty() {
        let Some(zi) = store.get(&ingress_key(&key.name)) else {
            return Err(ApiError::not_found(format!(
                "zone ingress {:?} not found",
                key.name
            )));
        };
        let address = zi
            .resource
            .as_zone_ingress()
            .map(|z| z.networking.address.clone())
            .unwrap_or_default();
        (format!("zone ingress {:?}", key.name), address)
    } else {
        if store.get(&ResourceKey::mesh(key.mesh.as_str())).is_none() {
            return Err(ApiError::not_found(format!(
                "mesh {:?} not found",
                key.mesh
            )));
        }
        let Some(dp) = store.get(&ResourceKey::dataplane(
            key.mesh.as_str(),
            key.name.as_str(),
        )) else {
            return Err(ApiError::not_found(format!(
                "dataplane {:?} not found in mesh {:?}",
                key.name, key.mesh
            )));
        };
        let address = dp
            .resource
            .as_dataplane()
            .map(|d| d.networking.address.clone())
            .unwrap_or_default();
        (format!("dataplane {:?}", key.name), address)
    };
    let insight = insights.get(&key.mesh, &key.name).filter(|i| i.connected);
    let Some(admin) = insight.and_then(|i| i.admin) else {
        return Err(ApiError::status(
            StatusCode::CONFLICT,
            format!("{what} has no Envoy connected to this zone: its admin is read over the connection its ADS stream opens"),
        ));
    };
    let target = target(reconciler, key, &address, admin)
        .map_err(|reason| ApiError::status(StatusCode::BAD_GATEWAY, format!("{what}: {reason}")))?;
    let (body, _turn) = call(&target, ty, query)
        .await
        .map_err(|e| e.into_api(&what))?;
    Ok(match ty {
        AdminView::Xds => AdminAnswer {
            content_type: "application/json",
            // Parsing tens of MiB is CPU work: off the async runtime.
            body: tokio::task::spawn_blocking(move || redact_config_dump(&body))
                .await
                .map_err(|e| ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
                .map_err(|e| {
                    ApiError::status(
                        StatusCode::BAD_GATEWAY,
                        format!("the Envoy of {what} sent a config dump that is not JSON: {e}"),
                    )
                })?,
        },
        _ => AdminAnswer {
            content_type: if query.json {
                "application/json"
            } else {
                "text/plain"
            },
            body,
        },
    })
}

/// Where an admin call goes.
enum Target {
    /// `http://127.0.0.1:<port>`: the proxy runs on this zone CP's host.
    Loopback(u16),
    /// `https://<address>:<port>` through `kuma:envoy:admin`, with this client.
    Listener {
        address: std::net::IpAddr,
        port: u16,
        client: reqwest::Client,
    },
}

/// How to reach the admin of proxy `key` at `address` whose Envoy reported `admin` (see the
/// module docs), or why it cannot be reached.
fn target(
    reconciler: Option<&crate::reconciler::Reconciler>,
    key: &DpKey,
    address: &str,
    admin: crate::insight::AdminEndpoint,
) -> Result<Target, String> {
    let ip: Option<std::net::IpAddr> = address.parse().ok();
    // The admin's own address (Kuma's client: host `127.0.0.1`): no listener there.
    if address == "127.0.0.1" {
        return if admin.local {
            Ok(Target::Loopback(admin.port))
        } else {
            Err(format!("its address is {address}, but its Envoy connected from another host: its admin cannot be reached (give the Dataplane the address other hosts reach it at)"))
        };
    }
    let Some(ip) = ip else {
        return Err(format!("its address {address:?} is not an IP address: no admin listener kuma:envoy:admin is generated for it"));
    };
    let generated = reconciler
        .and_then(|r| r.get(&key.mesh, &key.name))
        .and_then(|e| e.admin.clone());
    let client = reconciler.and_then(crate::reconciler::Reconciler::admin_tls);
    match (generated, client) {
        (Some(a), Some(tls)) => Ok(Target::Listener {
            address: ip,
            port: a.port,
            client: tls.client().clone(),
        }),
        _ => Err("its admin listener kuma:envoy:admin is not generated yet".into()),
    }
}

fn ingress_key(name: &str) -> ResourceKey {
    ResourceKey {
        ty: ResourceType::ZoneIngress,
        mesh: String::new(),
        name: name.to_owned(),
    }
}

/// Why an admin call failed.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("its admin did not answer within {ADMIN_TIMEOUT:?}")]
    Timeout,
    #[error("its admin could not be reached: {0}")]
    Unreachable(String),
    #[error("its admin answered {0}")]
    Status(StatusCode),
    #[error("its admin answer is over {MAX_ADMIN_BYTES} bytes")]
    TooLarge,
}

impl CallError {
    fn into_api(self, what: &str) -> ApiError {
        let status = match self {
            CallError::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        };
        ApiError::status(status, format!("the Envoy of {what}: {self}"))
    }
}

/// The HTTP client for admin calls: no proxy from the environment (the admin is on loopback),
/// [`CONNECT_TIMEOUT`].
fn client() -> Result<&'static reqwest::Client, CallError> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .no_proxy()
                .connect_timeout(CONNECT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| CallError::Unreachable(format!("no HTTP client: {e}")))
}

/// One of the [`MAX_CONCURRENT`] turns of admin calls.
fn turns() -> &'static std::sync::Arc<tokio::sync::Semaphore> {
    static TURNS: OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = OnceLock::new();
    TURNS.get_or_init(|| std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)))
}

/// `GET <target><path>?<query>`, the body read up to [`MAX_ADMIN_BYTES`], in one of
/// [`MAX_CONCURRENT`] turns (held by the caller while it works on the body), all within
/// [`ADMIN_TIMEOUT`].
async fn call(
    target: &Target,
    ty: AdminView,
    query: AdminQuery,
) -> Result<(Vec<u8>, tokio::sync::OwnedSemaphorePermit), CallError> {
    let q = query.envoy_query(ty);
    let (base, client) = match target {
        Target::Loopback(port) => (format!("http://127.0.0.1:{port}"), client()?),
        Target::Listener {
            address,
            port,
            client,
        } => (
            format!("https://{}", std::net::SocketAddr::new(*address, *port)),
            client,
        ),
    };
    let url = if q.is_empty() {
        format!("{base}{}", envoy_path(ty))
    } else {
        format!("{base}{}?{q}", envoy_path(ty))
    };
    let read = async {
        let turn = turns()
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::Unreachable("the zone is stopping".into()))?;
        let mut response = client
            .get(&url)
            .send()
            .await
            .map_err(|e| CallError::Unreachable(without_url(&e)))?;
        if !response.status().is_success() {
            return Err(CallError::Status(response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_ADMIN_BYTES as u64)
        {
            return Err(CallError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| CallError::Unreachable(without_url(&e)))?
        {
            if body.len() + chunk.len() > MAX_ADMIN_BYTES {
                return Err(CallError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body, turn))
    };
    tokio::time::timeout(ADMIN_TIMEOUT, read)
        .await
        .map_err(|_| CallError::Timeout)?
}

/// What went wrong in a reqwest error, with its sources, without the URL (the answer names
/// the proxy).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "the body could not be read"
    } else {
        "the request failed"
    }
    .to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `dump` (Envoy's `/config_dump` JSON) with every dataplane token redacted: the values of the
/// `authorization` entries of every `initial_metadata` list, replaced with [`REDACTED`]
/// wherever they appear in the document (Kuma's `Sanitize`).
///
/// # Errors
/// `dump` is not JSON.
pub fn redact_config_dump(dump: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let mut doc: Value = serde_json::from_slice(dump)?;
    let mut secrets = Vec::new();
    collect_authorization(&doc, &mut secrets);
    secrets.retain(|s| !s.is_empty());
    if !secrets.is_empty() {
        redact(&mut doc, &secrets);
    }
    serde_json::to_vec_pretty(&doc)
}

/// Every `authorization` value of an `initial_metadata` list in `v`.
fn collect_authorization(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "initial_metadata" {
                    for entry in child.as_array().into_iter().flatten() {
                        let is_auth = entry
                            .get("key")
                            .and_then(Value::as_str)
                            .is_some_and(|k| k.eq_ignore_ascii_case("authorization"));
                        if let (true, Some(value)) =
                            (is_auth, entry.get("value").and_then(Value::as_str))
                        {
                            out.push(value.to_owned());
                        }
                    }
                }
                collect_authorization(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_authorization(i, out)),
        _ => {}
    }
}

/// Replace every occurrence of a `secrets` value inside the strings of `v`.
fn redact(v: &mut Value, secrets: &[String]) {
    match v {
        Value::String(s) => {
            for secret in secrets {
                if s.contains(secret.as_str()) {
                    *s = s.replace(secret.as_str(), REDACTED);
                }
            }
        }
        Value::Object(map) => map.values_mut().for_each(|c| redact(c, secrets)),
        Value::Array(items) => items.iter_mut().for_each(|c| redact(c, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn queries_map_to_envoy_admin_queries() {
        let q = |ty, p: &[(&str, &str)]| {
            AdminQuery::parse(ty, &pairs(p))
                .unwrap()
                .envoy_query(ty)
                .to_owned()
        };
        assert_eq!(q(AdminView::Xds, &[]), "");
        assert_eq!(q(AdminView::Xds, &[("include_eds", "true")]), "include_eds");
        // Kuma's default: used stats only.
        assert_eq!(q(AdminView::Stats, &[]), "usedonly");
        assert_eq!(q(AdminView::Stats, &[("usedonly", "false")]), "");
        assert_eq!(
            q(AdminView::Stats, &[("format", "json")]),
            "format=json&usedonly"
        );
        assert_eq!(q(AdminView::Clusters, &[("format", "json")]), "format=json");
        // Another type's parameter is ignored.
        assert_eq!(q(AdminView::Clusters, &[("include_eds", "maybe")]), "");
    }

    #[test]
    fn bad_values_are_400s_naming_the_parameter() {
        for (ty, p) in [
            (AdminView::Xds, ("include_eds", "yes")),
            (AdminView::Stats, ("format", "xml")),
            (AdminView::Stats, ("usedonly", "")),
            (AdminView::Clusters, ("format", "")),
        ] {
            let e = AdminQuery::parse(ty, &pairs(&[p])).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.body().to_string().contains(p.0), "{:?}", e.body());
        }
    }

    #[test]
    fn the_dataplane_token_is_redacted_wherever_it_appears() {
        let dump = serde_json::json!({"configs": [{
            "@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
            "bootstrap": {
                "node": {"metadata": {"copy": "Bearer tok.en.sig"}},
                "dynamic_resources": {"ads_config": {"grpc_services": [{
                    "envoy_grpc": {"cluster_name": "ads_cluster"},
                    "initial_metadata": [
                        {"key": "Authorization", "value": "tok.en.sig"},
                        {"key": "x-other", "value": "kept"},
                    ],
                }]}},
            },
        }]});
        let out = redact_config_dump(&serde_json::to_vec(&dump).unwrap()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("tok.en.sig"), "{text}");
        assert!(text.contains("Bearer [redacted]"), "{text}");
        assert!(text.contains("\"kept\""), "{text}");
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            doc["configs"][0]["bootstrap"]["dynamic_resources"]["ads_config"]["grpc_services"][0]
                ["initial_metadata"][0]["value"],
            REDACTED
        );
    }

    #[test]
    fn a_dump_without_token_is_unchanged_and_a_non_json_one_refused() {
        let dump = br#"{"configs":[{"x":"y"}]}"#;
        let out: Value = serde_json::from_slice(&redact_config_dump(dump).unwrap()).unwrap();
        assert_eq!(out, serde_json::json!({"configs": [{"x": "y"}]}));
        assert!(redact_config_dump(b"<html>").is_err());
    }
}
