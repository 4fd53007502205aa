//! Builtin gateways as generation reads them (Kuma 2.7.29 `api/mesh/v1alpha1/gateway.proto`,
//! `pkg/plugins/runtime/gateway/match`): the MeshGateway that selects a `BUILTIN` gateway DPP
//! ([`selected`]), its listeners ([`GatewayListener`]), and the MeshHTTPRoutes whose top-level
//! `targetRef` is that MeshGateway ([`routes`]).
//!
//! - A MeshGateway selects a DPP when one of its `selectors` matches the DPP's gateway tags;
//!   among several, the one whose best selector is the most specific (most tags that are not
//!   `*`) wins, then the first by name (Kuma's `SelectGateway` ranks selectors alike).
//! - A listener is `{port, protocol, hostname, tags, tls, resources}`; `hostname` defaults to
//!   `*`, `protocol` is `HTTP`, `HTTPS`, `TCP` or `TLS`.
//! - The routes of a gateway are the view's MeshHTTPRoutes with `targetRef: {kind:
//!   MeshGateway, name}` (shadow ones only in the Shadow view), by name; a route whose
//!   `targetRef.tags` is set applies only to listeners carrying those tags.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::dataplane::{DataplaneSpec, GatewayType};
use crate::policy::TargetRefPolicy;
use crate::resource::{Resource, ResourceType, Spec};
use crate::target_ref::TargetRefKind;

/// One listener of a MeshGateway.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayListener {
    /// Port the gateway listens on.
    pub port: u32,
    /// `HTTP`, `HTTPS`, `TCP` or `TLS`.
    #[serde(default)]
    pub protocol: String,
    /// Host name the listener serves (`*` when absent).
    #[serde(default = "any_host")]
    pub hostname: String,
    /// Listener tags (what a route's `targetRef.tags` selects); in a [`SelectedGateway`], merged
    /// with the DPP's gateway tags and the MeshGateway's `tags` (Kuma canonicalizes them so).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `tls` of an `HTTPS` or `TLS` listener.
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    /// `resources` (`connectionLimit`, a uint32: [`GatewayListener::connection_limit`]).
    #[serde(default)]
    pub resources: Option<Value>,
    /// `crossMesh`: not generated, named.
    #[serde(default)]
    pub cross_mesh: bool,
}

impl GatewayListener {
    /// `resources.connectionLimit` when above 0 (Kuma's `Resources.ConnectionLimit`, uint32,
    /// a number or a decimal string as proto3 JSON reads it; 0 means no limit). A value that is
    /// not a uint32 is refused on write
    /// ([`crate::ungenerated::SelectorResource::validate`]).
    pub fn connection_limit(&self) -> Option<u32> {
        self.resources
            .as_ref()
            .and_then(|r| r.get("connectionLimit"))
            .and_then(crate::ungenerated::read_uint32)
            .filter(|n| *n > 0)
    }
}

/// A listener's `tls`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `TERMINATE` (the default) or `PASSTHROUGH`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The certificates (each a mesh Secret holding a PEM certificate chain and its key).
    #[serde(default)]
    pub certificates: Vec<CertificateRef>,
}

/// One certificate of a listener, a Kuma `DataSource`: `{secret: <name>}` (a mesh Secret) or
/// `{inline: <base64>}`, both read; `{file: <path>}` (a file on the control plane's host) and
/// `{inlineString: ...}` (which Kuma refuses for gateways) are not.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRef {
    /// The mesh Secret's name (empty for other sources).
    #[serde(default)]
    pub secret: String,
    /// The PEM bundle, base64.
    #[serde(default)]
    pub inline: Option<String>,
    /// A path on the control plane's host.
    #[serde(default)]
    pub file: Option<String>,
    /// The PEM bundle as text.
    #[serde(default)]
    pub inline_string: Option<String>,
}

impl std::fmt::Debug for CertificateRef {
    /// Names the source; never the inline data (a private key).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateRef")
            .field("secret", &self.secret)
            .field(
                "inline",
                &self.inline.as_ref().map(|d| format!("<{} bytes>", d.len())),
            )
            .field("file", &self.file)
            .field(
                "inline_string",
                &self
                    .inline_string
                    .as_ref()
                    .map(|d| format!("<{} bytes>", d.len())),
            )
            .finish()
    }
}

impl CertificateRef {
    /// The certificate, read from its Secret (`certificates`, the view's) or inline data.
    ///
    /// # Errors
    /// Why it cannot be read: a missing or unreadable Secret, bad inline data, a `file` or
    /// `inlineString` source.
    pub fn read(
        &self,
        certificates: &BTreeMap<String, Result<GatewayCertificate, String>>,
    ) -> Result<GatewayCertificate, String> {
        use base64::Engine as _;
        if let Some(data) = &self.inline {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| "an inline certificate that is not base64".to_owned())?;
            return certificate(&bytes).map_err(|e| format!("an inline certificate: {e}"));
        }
        if let Some(path) = &self.file {
            return Err(format!(
                "a certificate from file {path:?}: Umbra reads gateway certificates from mesh Secrets and inline data only"
            ));
        }
        if self.inline_string.is_some() {
            return Err(
                "an inlineString certificate: Kuma refuses this data source for gateways"
                    .to_owned(),
            );
        }
        match certificates.get(&self.secret) {
            Some(Ok(c)) => Ok(c.clone()),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("Secret {:?} not read", self.secret)),
        }
    }

    /// Kuma's SDS name of this certificate of key type `key_type` on the listener for
    /// `hostname`: `cert.<type>:secret:<name>`, or `cert.<type>:inline:<hostname>`.
    pub fn sds_name(&self, key_type: &str, hostname: &str) -> String {
        if self.inline.is_some() {
            format!("cert.{key_type}:inline:{hostname}")
        } else {
            format!("cert.{key_type}:secret:{}", self.secret)
        }
    }
}

/// A gateway certificate read from a Secret (Kuma's `pkg/plugins/runtime/gateway` reads a
/// Secret as a PEM bundle: the certificate chain and one private key). `Debug` shows sizes
/// only: key material is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct GatewayCertificate {
    /// The PEM certificate blocks, in order.
    pub chain_pem: String,
    /// The PEM private key block.
    pub key_pem: String,
    /// `rsa` or `ecdsa`: Kuma's SDS name `cert.<type>:secret:<name>`.
    pub key_type: &'static str,
}

impl std::fmt::Debug for GatewayCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayCertificate")
            .field("chain_pem", &format!("<{} bytes>", self.chain_pem.len()))
            .field("key_pem", &format!("<{} bytes>", self.key_pem.len()))
            .field("key_type", &self.key_type)
            .finish()
    }
}

/// The OID of `id-ecPublicKey` (1.2.840.10045.2.1), DER-encoded: an EC key in PKCS#8.
const EC_PUBLIC_KEY_OID: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// Read a gateway certificate from a Secret's decoded bytes: its `CERTIFICATE` blocks and
/// its one private key block (`RSA PRIVATE KEY`, `EC PRIVATE KEY` or PKCS#8 `PRIVATE KEY`).
///
/// # Errors
/// A reason (never the key) when there is no certificate, no key, or more than one key.
pub fn certificate(bytes: &[u8]) -> Result<GatewayCertificate, String> {
    use base64::Engine as _;
    let text = std::str::from_utf8(bytes).map_err(|_| "not PEM text".to_owned())?;
    let mut chain = String::new();
    let mut key: Option<(String, &'static str)> = None;
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        // The label is upper-case words on the BEGIN line; anything else is refused without
        // echoing it (it could be key material).
        let label_end = after
            .find("-----")
            .filter(|&i| {
                after[..i]
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b' ')
            })
            .ok_or("a PEM BEGIN line that does not read")?;
        let label = &after[..label_end];
        let end_marker = format!("-----END {label}-----");
        // The END marker after this BEGIN line.
        let from = start + 11 + label_end + 5;
        let end = rest[from..]
            .find(&end_marker)
            .map(|i| from + i)
            .ok_or_else(|| format!("a {label} block without its end"))?;
        let block = &rest[start..end + end_marker.len()];
        match label {
            "CERTIFICATE" => {
                chain.push_str(block);
                chain.push('\n');
            }
            "RSA PRIVATE KEY" | "EC PRIVATE KEY" | "PRIVATE KEY" => {
                if key.is_some() {
                    return Err("more than one private key".to_owned());
                }
                let key_type = match label {
                    "RSA PRIVATE KEY" => "rsa",
                    "EC PRIVATE KEY" => "ecdsa",
                    _ => {
                        let body: String =
                            block.lines().filter(|l| !l.starts_with("-----")).collect();
                        let der = base64::engine::general_purpose::STANDARD
                            .decode(body.trim())
                            .map_err(|_| "a private key that is not base64".to_owned())?;
                        if der
                            .windows(EC_PUBLIC_KEY_OID.len())
                            .any(|w| w == EC_PUBLIC_KEY_OID)
                        {
                            "ecdsa"
                        } else {
                            "rsa"
                        }
                    }
                };
                key = Some((format!("{block}\n"), key_type));
            }
            _ => {}
        }
        rest = &rest[end + end_marker.len()..];
    }
    let (key_pem, key_type) = key.ok_or("no private key")?;
    if chain.is_empty() {
        return Err("no certificate".to_owned());
    }
    Ok(GatewayCertificate {
        chain_pem: chain,
        key_pem,
        key_type,
    })
}

/// Whether `listener`, an `HTTPS` or `TLS` one, is one Umbra generates (`Some(Ok)`), one it
/// cannot (`Some(Err(why))`: HTTPS in passthrough mode, no certificate to terminate with, a
/// certificate that does not read), or neither HTTPS nor TLS (`None`). `tls.mode` is
/// `TERMINATE` when absent; a `TLS` listener in `PASSTHROUGH` mode needs no certificate.
/// `certificates` are the view's ([`crate::view::PolicySet::gateway_certificates`]).
pub fn tls_problem(
    listener: &GatewayListener,
    certificates: &BTreeMap<String, Result<GatewayCertificate, String>>,
) -> Option<Result<(), String>> {
    if listener.protocol != "HTTPS" && listener.protocol != "TLS" {
        return None;
    }
    let Some(tls) = &listener.tls else {
        return Some(Err("no tls".to_owned()));
    };
    match tls.mode.as_deref() {
        None | Some("TERMINATE") => {}
        Some("PASSTHROUGH") if listener.protocol == "TLS" => return Some(Ok(())),
        Some(other) => return Some(Err(format!("tls.mode {other:?}"))),
    }
    if tls.certificates.is_empty() {
        return Some(Err("no certificate".to_owned()));
    }
    for c in &tls.certificates {
        if let Err(why) = c.read(certificates) {
            return Some(Err(why));
        }
    }
    Some(Ok(()))
}

/// `true` for a listener in TLS `PASSTHROUGH` mode.
pub fn is_passthrough(listener: &GatewayListener) -> bool {
    listener
        .tls
        .as_ref()
        .is_some_and(|t| t.mode.as_deref() == Some("PASSTHROUGH"))
}

/// The Secrets the listeners of the MeshGateways among `stored` name as certificates.
pub fn certificate_secrets(stored: &[Resource]) -> Vec<String> {
    let mut out: Vec<String> = stored
        .iter()
        .filter_map(|r| match &r.spec {
            Spec::Selected(ResourceType::MeshGateway, g) => g.conf.as_ref(),
            _ => None,
        })
        .filter_map(|c| c.get("listeners").and_then(Value::as_array))
        .flatten()
        .filter_map(|l| serde_json::from_value::<GatewayListener>(l.clone()).ok())
        .filter_map(|l| l.tls)
        .flat_map(|t| t.certificates)
        .map(|c| c.secret)
        .filter(|s| !s.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn any_host() -> String {
    "*".to_owned()
}

/// The MeshGateway selecting a gateway DPP.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedGateway {
    /// The MeshGateway's name.
    pub name: String,
    /// Its listeners, in order (those that do not read as a listener are left out, with
    /// `unreadable` counting them).
    pub listeners: Vec<GatewayListener>,
    /// Listeners of `conf.listeners` that do not read as one.
    pub unreadable: usize,
}

impl SelectedGateway {
    /// The names of the Envoy listeners its listeners give (`<gateway>:<protocol>:<port>`,
    /// one per port and protocol, sorted), whether generated or not.
    pub fn envoy_listener_names(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .listeners
            .iter()
            .map(|l| format!("{}:{}:{}", self.name, l.protocol, l.port))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// `true` for a `BUILTIN` gateway DPP.
pub fn is_builtin(dp: &DataplaneSpec) -> bool {
    dp.networking
        .gateway
        .as_ref()
        .is_some_and(|g| g.gateway_type == Some(GatewayType::Builtin))
}

/// The MeshGateway among `stored` (a view's, [`crate::view::PolicySet::stored`]) selecting
/// builtin gateway `dp` (see the module docs); `None` for any other DPP or when none selects
/// it.
pub fn selected(stored: &[Resource], dp: &DataplaneSpec) -> Option<SelectedGateway> {
    if !is_builtin(dp) {
        return None;
    }
    let tags = &dp.networking.gateway.as_ref()?.tags;
    let mut best: Option<(usize, &str, &crate::ungenerated::SelectorResource)> = None;
    for r in stored {
        let Spec::Selected(ResourceType::MeshGateway, g) = &r.spec else {
            continue;
        };
        let Some(rank) = g
            .selectors
            .iter()
            .filter(|s| s.matches(tags))
            .map(|s| s.match_tags.values().filter(|v| v.as_str() != "*").count())
            .max()
        else {
            continue;
        };
        let name = r.meta.name.as_str();
        if best.is_none_or(|(r0, n0, _)| rank > r0 || (rank == r0 && name < n0)) {
            best = Some((rank, name, g));
        }
    }
    let (_, name, g) = best?;
    let raw: Vec<Value> = g
        .conf
        .as_ref()
        .and_then(|c| c.get("listeners"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // Kuma canonicalizes each listener's tags to the DPP's gateway tags, the MeshGateway's
    // `tags` and the listener's own, merged in that order (what routes' selectors match).
    let listeners: Vec<GatewayListener> = raw
        .iter()
        .filter_map(|l| serde_json::from_value::<GatewayListener>(l.clone()).ok())
        .map(|mut l| {
            let mut merged = tags.clone();
            merged.extend(g.tags.iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
            merged.extend(std::mem::take(&mut l.tags));
            l.tags = merged;
            l
        })
        .collect();
    Some(SelectedGateway {
        name: name.to_owned(),
        unreadable: raw.len() - listeners.len(),
        listeners,
    })
}

/// The MeshHTTPRoutes among `http_routes` (a view's) attached to MeshGateway `gateway`, by
/// name; shadow ones only with `include_shadow` (see the module docs).
pub fn routes<'a>(
    http_routes: &'a [TargetRefPolicy],
    gateway: &str,
    include_shadow: bool,
) -> Vec<&'a TargetRefPolicy> {
    let shadow = include_shadow;
    let mut out: Vec<&TargetRefPolicy> = http_routes
        .iter()
        .filter(|p| {
            p.target_ref.kind() == TargetRefKind::MeshGateway
                && p.target_ref.name == gateway
                && (shadow || !p.meta().is_shadow())
        })
        .collect();
    out.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    out
}

/// Why MeshGateway `r`, whose selectors match a gateway DPP's tags, is (partly) not in its
/// config: the DPP is a delegated gateway, another MeshGateway selects it, or some of the
/// listeners are of a protocol Umbra does not generate yet; `None` when all of it is generated.
pub fn not_generated_reason(
    r: &Resource,
    selected: Option<&SelectedGateway>,
    (builtin, tcp_routed): (bool, bool),
    certificates: &BTreeMap<String, Result<GatewayCertificate, String>>,
) -> Option<String> {
    if !builtin {
        return Some("not generated: a MeshGateway configures builtin gateways, and this DPP is a DELEGATED one".to_owned());
    }
    let g = selected?;
    if g.name != r.meta.name {
        return Some(format!(
            "not generated: MeshGateway {:?} selects this DPP more specifically",
            g.name
        ));
    }
    let mut left: Vec<String> = g
        .listeners
        .iter()
        .filter_map(|l| match tls_problem(l, certificates) {
            _ if l.protocol == "HTTP" => None,
            Some(Err(why)) => Some(format!("{} {}: {why}", l.protocol, l.port)),
            _ if (l.protocol == "TCP" || l.protocol == "TLS") && !tcp_routed => Some(format!(
                "{} {}: no MeshTCPRoute attached and no MeshGatewayRoute routes it",
                l.protocol, l.port
            )),
            Some(Ok(())) => None,
            None if l.protocol == "TCP" => None,
            None => Some(format!("{} {}", l.protocol, l.port)),
        })
        .collect();
    for l in &g.listeners {
        if l.cross_mesh {
            left.push(format!("{} {}: crossMesh", l.protocol, l.port));
        }
    }
    if left.is_empty() && g.unreadable == 0 {
        return None;
    }
    Some(format!(
        "partly generated by Umbra: its HTTP listeners, its HTTPS ones whose certificates read and its TCP and TLS ones a route routes (TLS terminated with certificates that read, or passed through) are in this DPP's config; these are not ({}{})",
        left.join(", "),
        if g.unreadable > 0 { format!("; {} unreadable", g.unreadable) } else { String::new() }
    ))
}

/// A MeshGatewayRoute of a view, read ([`crate::gateway_route`]).
#[derive(Debug, Clone)]
pub struct OldRoute<'a> {
    /// The resource.
    pub resource: &'a Resource,
    /// Its `selectors` (matched against a listener's merged tags).
    pub selectors: &'a [crate::old::Selector],
    /// Its `conf`.
    pub conf: crate::gateway_route::GatewayRouteConf,
}

impl OldRoute<'_> {
    /// Whether the route applies to a listener with (merged) `tags` (Kuma's `match.Routes`).
    pub fn selects(&self, tags: &BTreeMap<String, String>) -> bool {
        self.selectors.iter().any(|s| s.matches(tags))
    }
}

/// The MeshGatewayRoutes among a view's old policies (`old`, any type), by name; those whose
/// `conf` does not read are left out.
pub fn old_routes(old: &[Resource]) -> Vec<OldRoute<'_>> {
    let mut out: Vec<OldRoute<'_>> = old
        .iter()
        .filter_map(|r| match &r.spec {
            Spec::Selected(ResourceType::MeshGatewayRoute, s) => Some(OldRoute {
                resource: r,
                selectors: &s.selectors,
                conf: crate::gateway_route::GatewayRouteConf::read(s.conf.as_ref())?,
            }),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.resource.meta.name.cmp(&b.resource.meta.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{PolicySet, View};

    #[test]
    fn bad_pem_is_refused_without_panicking_or_echoing_it() {
        for bad in [
            "-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nAAAA\n",
            "-----BEGIN PRIVATE KEY\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n",
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
            "-----BEGIN ",
        ] {
            let err = certificate(bad.as_bytes()).unwrap_err();
            assert!(!err.contains("c2VjcmV0"), "{err}");
        }
    }

    #[test]
    fn the_most_specific_gateway_selects_and_its_routes_attach() {
        let resources = Resource::all_from_bytes(b"type: Mesh\nname: default\n---\ntype: MeshGateway\nmesh: default\nname: any\nselectors: [{match: {kuma.io/service: '*'}}]\nconf: {listeners: [{port: 80, protocol: HTTP}]}\n---\ntype: MeshGateway\nmesh: default\nname: edge\nselectors: [{match: {kuma.io/service: edge}}]\nconf: {listeners: [{port: 8080, protocol: HTTP, hostname: foo.example.com, tags: {port: http}}, {port: 8443, protocol: HTTPS}]}\n---\ntype: MeshHTTPRoute\nmesh: default\nname: to-web\nspec:\n  targetRef: {kind: MeshGateway, name: edge}\n  to:\n  - targetRef: {kind: Mesh}\n    rules: [{matches: [{path: {type: PathPrefix, value: /}}], default: {backendRefs: [{kind: MeshService, name: web}]}}]\n---\ntype: MeshHTTPRoute\nmesh: default\nname: shadow-web\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshGateway, name: edge}\n  to:\n  - targetRef: {kind: Mesh}\n    rules: [{matches: [{path: {type: PathPrefix, value: /v2}}], default: {backendRefs: [{kind: MeshService, name: web}]}}]\n---\ntype: Dataplane\nmesh: default\nname: gw\nnetworking:\n  address: 10.0.0.1\n  gateway: {type: BUILTIN, tags: {kuma.io/service: edge}}\n").unwrap();
        let dp = resources.iter().find_map(Resource::as_dataplane).unwrap();
        let live = PolicySet::build("default", &resources, View::Live);
        let gw = selected(&live.stored, dp).unwrap();
        assert_eq!(gw.name, "edge");
        assert_eq!(gw.listeners.len(), 2);
        assert_eq!(gw.listeners[0].hostname, "foo.example.com");
        assert_eq!(gw.listeners[1].hostname, "*");
        let names = |p: &PolicySet| -> Vec<String> {
            let all = p
                .new
                .get(&ResourceType::MeshHTTPRoute)
                .map_or(&[][..], Vec::as_slice);
            routes(all, "edge", p.view == Some(View::Shadow))
                .iter()
                .map(|r| r.meta().name.clone())
                .collect()
        };
        assert_eq!(names(&live), ["to-web"]);
        let shadow = PolicySet::build("default", &resources, View::Shadow);
        assert_eq!(names(&shadow), ["shadow-web", "to-web"]);
    }
}
