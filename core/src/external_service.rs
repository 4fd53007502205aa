//! ExternalServices as generation reads them: each resource resolved into an endpoint (its
//! `networking.address` split into host and port, its tags, its TLS material read from the
//! mesh's Secrets or inline data), grouped by `kuma.io/service`, and which of them a DPP may
//! reach.
//!
//! Kuma 2.7.29 semantics:
//! - `pkg/xds/topology/outbound.go` `NewExternalServiceEndpoint`: weight 1; with
//!   `tls.enabled`, the endpoint's tags gain `kuma.io/external-service-name: <name>` (the
//!   cluster's `transport_socket_matches` select on it); an ExternalService whose data source
//!   cannot be loaded gives no endpoint (Kuma logs it; Umbra keeps the reason in
//!   [`ExternalServices::unresolved`], which every answer about the mesh's DPPs names under
//!   `notGenerated`).
//! - `pkg/core/permissions/matcher.go` `MatchExternalServicesTrafficPermissions`: on the legacy
//!   outbound path, a DPP reaches an ExternalService only when the old TrafficPermission that
//!   best matches the ExternalService's tags (by `destinations`, Kuma's
//!   `SelectInboundConnectionPolicy`) has a `source` matching the DPP
//!   ([`ExternalServices::permitted`]). The MeshHTTPRoute/MeshTCPRoute path
//!   (`meshroute/clusters.go`) reads every ExternalService of the mesh, unfiltered.
//! - DataSources (`api/system/v1alpha1/datasource.proto`): `secret` (a Secret of the mesh,
//!   its decoded `data`), `inline` (base64 bytes), `inlineString`. Kuma also reads `file` from
//!   the control plane's own disk; Umbra does not (a policy author would read any file of the
//!   CP host into a proxy's config), so such an ExternalService is unresolved, with that
//!   reason.
//!
//! Key material is never printed: [`ExternalTls`]'s `Debug` shows sizes only.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::dataplane::DataplaneSpec;
use crate::go_net;
use crate::old_matching::{dataplane_matches, select_inbound_connection_policy, OldPolicyRef};
use crate::resource::Resource;
use crate::target_ref::SERVICE_TAG;
use crate::ungenerated::ExternalService;

/// The tag an ExternalService endpoint with TLS carries its resource name in
/// (`mesh_proto.ExternalServiceTag`).
pub const EXTERNAL_SERVICE_NAME_TAG: &str = "kuma.io/external-service-name";

/// TLS origination towards an ExternalService (Kuma's `core_xds.ExternalService`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExternalTls {
    /// PEM bytes of the CA that signs the server's certificate; `None`: the server's
    /// certificate is not verified (Kuma's `UpstreamTlsContextOutsideMesh` without a CA).
    pub ca_cert: Option<Vec<u8>>,
    /// PEM bytes of the client certificate (used with `client_key`).
    pub client_cert: Option<Vec<u8>>,
    /// PEM bytes of the client key.
    pub client_key: Option<Vec<u8>>,
    /// `tls.allowRenegotiation`.
    pub allow_renegotiation: bool,
    /// `tls.skipHostnameVerification`: no SAN check.
    pub skip_hostname_verification: bool,
    /// `tls.serverName`: the SNI, and the name the SAN check expects.
    pub server_name: Option<String>,
}

impl std::fmt::Debug for ExternalTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = |b: &Option<Vec<u8>>| b.as_ref().map(|b| format!("<{} bytes>", b.len()));
        f.debug_struct("ExternalTls")
            .field("ca_cert", &size(&self.ca_cert))
            .field("client_cert", &size(&self.client_cert))
            .field("client_key", &size(&self.client_key))
            .field("allow_renegotiation", &self.allow_renegotiation)
            .field(
                "skip_hostname_verification",
                &self.skip_hostname_verification,
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// One ExternalService, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalEndpoint {
    /// The ExternalService resource's name.
    pub name: String,
    /// `networking.address`'s host: an IP or a DNS name.
    pub host: String,
    /// Its port.
    pub port: u32,
    /// The resource's tags (with [`EXTERNAL_SERVICE_NAME_TAG`] when TLS is enabled).
    pub tags: BTreeMap<String, String>,
    /// The tags the resource declares (what TrafficPermissions are matched against).
    pub declared_tags: BTreeMap<String, String>,
    /// TLS origination, when `tls.enabled`.
    pub tls: Option<ExternalTls>,
}

impl ExternalEndpoint {
    /// Its `kuma.io/service`.
    pub fn service(&self) -> &str {
        self.tags.get(SERVICE_TAG).map_or("", String::as_str)
    }
}

/// The ExternalServices of one mesh in one view, resolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExternalServices {
    /// Endpoints by `kuma.io/service`, each list sorted by resource name.
    by_service: BTreeMap<String, Vec<ExternalEndpoint>>,
    /// ExternalServices that give no endpoint, by name, with the reason.
    pub unresolved: BTreeMap<String, String>,
    /// The Secrets each ExternalService reads, by ExternalService name (resolved or not).
    pub secrets: BTreeMap<String, Vec<String>>,
}

/// A data source of an ExternalService's `tls`.
fn load(
    tls: &Map<String, Value>,
    field: &str,
    secret: &dyn Fn(&str) -> Option<Vec<u8>>,
    used: &mut Vec<String>,
) -> Result<Option<Vec<u8>>, String> {
    let Some(ds) = tls.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = format!("networking.tls.{field}");
    let ds = ds
        .as_object()
        .ok_or_else(|| format!("{at}: must be a data source"))?;
    let text = |k: &str| ds.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    if let Some(name) = text("secret") {
        used.push(name.to_owned());
        return secret(name)
            .map(Some)
            .ok_or_else(|| format!("{at}: Secret {name:?} not found in the mesh"));
    }
    if let Some(b64) = text("inline") {
        return base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map(Some)
            .map_err(|_| format!("{at}.inline: must be base64"));
    }
    if let Some(s) = text("inlineString") {
        return Ok(Some(s.as_bytes().to_vec()));
    }
    if text("file").is_some() {
        return Err(format!(
            "{at}.file: Umbra does not read files from the control plane's disk into a proxy's config; use secret, inline or inlineString"
        ));
    }
    Err(format!("{at}: data source cannot be empty"))
}

/// Resolve ExternalService `name` (`secret` gives a mesh Secret's decoded data by name, and
/// records it in `used`).
fn resolve(
    name: &str,
    es: &ExternalService,
    secret: &dyn Fn(&str) -> Option<Vec<u8>>,
    used: &mut Vec<String>,
) -> Result<ExternalEndpoint, String> {
    let networking = es.networking.as_ref().ok_or("networking is missing")?;
    let address = networking
        .get("address")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (host, port) = go_net::split_host_port(address)
        .map_err(|_| format!("networking.address {address:?} is not host:port"))?;
    let port: u32 = port
        .parse()
        .ok()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| format!("networking.address {address:?}: bad port"))?;
    let empty = Map::new();
    let tls_conf = networking
        .get("tls")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let enabled = tls_conf
        .get("enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let flag = |k: &str| tls_conf.get(k).and_then(Value::as_bool).unwrap_or(false);
    // Kuma loads the data sources whether TLS is enabled or not (a bad one drops the service).
    let ca_cert = load(tls_conf, "caCert", secret, used)?;
    let client_cert = load(tls_conf, "clientCert", secret, used)?;
    let client_key = load(tls_conf, "clientKey", secret, used)?;
    let mut tags = es.tags.clone();
    let tls = enabled.then(|| {
        tags.insert(EXTERNAL_SERVICE_NAME_TAG.to_owned(), name.to_owned());
        ExternalTls {
            ca_cert,
            client_cert,
            client_key,
            allow_renegotiation: flag("allowRenegotiation"),
            skip_hostname_verification: flag("skipHostnameVerification"),
            server_name: tls_conf
                .get("serverName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        }
    });
    Ok(ExternalEndpoint {
        name: name.to_owned(),
        host: host.to_owned(),
        port,
        tags,
        declared_tags: es.tags.clone(),
        tls,
    })
}

impl ExternalServices {
    /// Resolve `items` (name, ExternalService) of one mesh; `secret` gives the decoded `data`
    /// of the mesh's Secret of that name.
    pub fn build<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a ExternalService)>,
        secret: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> ExternalServices {
        let mut out = ExternalServices::default();
        for (name, es) in items {
            let mut used = Vec::new();
            match resolve(name, es, secret, &mut used) {
                Ok(e) => out
                    .by_service
                    .entry(e.service().to_owned())
                    .or_default()
                    .push(e),
                Err(reason) => {
                    out.unresolved.insert(name.to_owned(), reason);
                }
            }
            if !used.is_empty() {
                out.secrets.insert(name.to_owned(), used);
            }
        }
        for eps in out.by_service.values_mut() {
            eps.sort_by(|a, b| a.name.cmp(&b.name));
        }
        out
    }

    /// No ExternalService at all (resolved or not).
    pub fn is_empty(&self) -> bool {
        self.by_service.is_empty() && self.unresolved.is_empty()
    }

    /// `true` when `service` is an ExternalService's (some resource resolved for it).
    pub fn is_external(&self, service: &str) -> bool {
        self.by_service.contains_key(service)
    }

    /// Every endpoint of `service` (the MeshHTTPRoute/MeshTCPRoute path's view).
    pub fn of(&self, service: &str) -> &[ExternalEndpoint] {
        self.by_service.get(service).map_or(&[], Vec::as_slice)
    }

    /// Every endpoint, by service then name.
    pub fn all(&self) -> impl Iterator<Item = &ExternalEndpoint> {
        self.by_service.values().flatten()
    }

    /// The endpoints of `service` that `dp` may reach on the legacy outbound path: those whose
    /// best-matching TrafficPermission among `traffic_permissions` (in effect or superseded:
    /// Kuma 2.7 reads every TrafficPermission here) has a source matching `dp`.
    pub fn permitted<'s>(
        &'s self,
        service: &str,
        dp: &DataplaneSpec,
        traffic_permissions: &[&Resource],
    ) -> Vec<&'s ExternalEndpoint> {
        let eps = self.of(service);
        if eps.is_empty() {
            return Vec::new();
        }
        let refs: Vec<OldPolicyRef<'_>> = traffic_permissions
            .iter()
            .enumerate()
            .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
            .collect();
        eps.iter()
            .filter(|e| {
                select_inbound_connection_policy(&e.declared_tags, &refs).is_some_and(|i| {
                    refs.iter().find(|r| r.idx == i).is_some_and(|p| {
                        p.sources
                            .iter()
                            .any(|s| dataplane_matches(dp, &s.match_tags))
                    })
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn es(v: serde_json::Value) -> ExternalService {
        serde_json::from_value(v).unwrap()
    }

    fn secrets(name: &str) -> Option<Vec<u8>> {
        (name == "ca").then(|| b"-----BEGIN CERTIFICATE-----".to_vec())
    }

    #[test]
    fn endpoints_with_tls_read_secrets_and_inline_data() {
        let httpbin = es(serde_json::json!({
            "networking": {"address": "httpbin.org:443", "tls": {
                "enabled": true, "caCert": {"secret": "ca"},
                "clientCert": {"inlineString": "CERT"}, "clientKey": {"inline": "S0VZ"},
                "serverName": "api.httpbin.org", "allowRenegotiation": true}},
            "tags": {"kuma.io/service": "httpbin", "kuma.io/protocol": "http"}}));
        let plain = es(serde_json::json!({
            "networking": {"address": "10.0.0.9:8080"},
            "tags": {"kuma.io/service": "httpbin"}}));
        let set = ExternalServices::build([("b-plain", &plain), ("a-tls", &httpbin)], &secrets);
        assert!(set.unresolved.is_empty(), "{:?}", set.unresolved);
        let eps = set.of("httpbin");
        assert_eq!(eps.len(), 2);
        assert_eq!(
            (eps[0].name.as_str(), eps[0].host.as_str(), eps[0].port),
            ("a-tls", "httpbin.org", 443)
        );
        assert_eq!(eps[0].tags[EXTERNAL_SERVICE_NAME_TAG], "a-tls");
        assert!(!eps[0].declared_tags.contains_key(EXTERNAL_SERVICE_NAME_TAG));
        let tls = eps[0].tls.as_ref().unwrap();
        assert_eq!(
            tls.ca_cert.as_deref(),
            Some(&b"-----BEGIN CERTIFICATE-----"[..])
        );
        assert_eq!(tls.client_cert.as_deref(), Some(&b"CERT"[..]));
        assert_eq!(tls.client_key.as_deref(), Some(&b"KEY"[..]));
        assert_eq!(tls.server_name.as_deref(), Some("api.httpbin.org"));
        assert!(tls.allow_renegotiation && !tls.skip_hostname_verification);
        let shown = format!("{tls:?}");
        assert!(
            !shown.contains("KEY") && shown.contains("<3 bytes>"),
            "{shown}"
        );
        assert!(eps[1].tls.is_none() && !eps[1].tags.contains_key(EXTERNAL_SERVICE_NAME_TAG));
        assert_eq!(set.secrets["a-tls"], ["ca"]);
    }

    #[test]
    fn unloadable_data_sources_drop_the_service_with_a_reason() {
        let missing = es(serde_json::json!({
            "networking": {"address": "db:5432", "tls": {"caCert": {"secret": "nope"}}},
            "tags": {"kuma.io/service": "db"}}));
        let file = es(serde_json::json!({
            "networking": {"address": "db:5432", "tls": {"enabled": true, "caCert": {"file": "/etc/passwd"}}},
            "tags": {"kuma.io/service": "db2"}}));
        let set = ExternalServices::build([("m", &missing), ("f", &file)], &secrets);
        assert!(!set.is_external("db") && !set.is_external("db2"));
        assert!(
            set.unresolved["m"].contains("Secret \"nope\" not found"),
            "{:?}",
            set.unresolved
        );
        assert!(
            set.unresolved["f"].contains("does not read files"),
            "{:?}",
            set.unresolved
        );
        assert_eq!(set.secrets["m"], ["nope"]);
    }

    #[test]
    fn the_best_traffic_permission_for_the_service_decides_who_reaches_it() {
        use crate::resource::Resource;
        let parse = |y: &str| Resource::all_from_bytes(y.as_bytes()).unwrap().remove(0);
        let dp = |service: &str| -> DataplaneSpec {
            serde_json::from_value(serde_json::json!({"networking": {"address": "10.0.0.1",
                "inbound": [{"port": 80, "tags": {"kuma.io/service": service}}]}}))
            .unwrap()
        };
        let httpbin = es(
            serde_json::json!({"networking": {"address": "httpbin.org:80"},
            "tags": {"kuma.io/service": "httpbin"}}),
        );
        let set = ExternalServices::build([("httpbin", &httpbin)], &secrets);
        // Everyone may call everything; only web may call httpbin (more specific wins).
        let all = parse("type: TrafficPermission\nmesh: m\nname: all\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\n");
        let web_only = parse("type: TrafficPermission\nmesh: m\nname: web-to-httpbin\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: httpbin}}]\n");
        assert_eq!(set.permitted("httpbin", &dp("web"), &[&all]).len(), 1);
        assert_eq!(set.permitted("httpbin", &dp("api"), &[&all]).len(), 1);
        assert_eq!(
            set.permitted("httpbin", &dp("web"), &[&all, &web_only])
                .len(),
            1
        );
        assert!(set
            .permitted("httpbin", &dp("api"), &[&all, &web_only])
            .is_empty());
        assert!(
            set.permitted("httpbin", &dp("web"), &[]).is_empty(),
            "no permission, no access"
        );
        assert!(set.permitted("other", &dp("web"), &[&all]).is_empty());
    }
}
