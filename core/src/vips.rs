//! Kuma's DNS VIPs for transparent proxying (Kuma 2.7.29 `pkg/dns/vips_allocator.go`,
//! `pkg/dns/vips/*`, `pkg/xds/topology/dns.go`, `pkg/xds/sync/dataplane_proxy_builder.go`
//! `resolveVIPOutbounds`; notes in `docs/research/kuma-2.7-edges.md` §2, §3, §5):
//!
//! - [`desired_view`]: the hostnames a mesh needs a VIP for: one `Service` entry per
//!   `kuma.io/service` of the mesh's Dataplane inbounds, of remote zones' ingresses and of its
//!   ExternalServices (with the ExternalService's port), a `Host` entry per ExternalService
//!   address host (unless `disableHostDNSEntry`), and a fully qualified entry per host a
//!   VirtualOutbound renders from those tags ([`render`]).
//! - [`allocate`]: addresses for the entries of a view in `240.0.0.0/4` (or the configured
//!   CIDR), per mesh: an entry keeps the address the persisted view gave it, a new one takes the
//!   lowest free address (the first is the network address, `240.0.0.0`, as Kuma's IPAM). A
//!   `Host` entry named by an IP keeps that IP.
//! - [`VipView::to_json`]/[`VipView::from_json`]: Kuma's persisted format (its `Config`
//!   resource `kuma-<mesh>-dns-vips`): `{"<type>:<name>": {"address", "outbounds": [{"Port",
//!   "TagSet", "Origin"}]}}`, types 0 Service, 1 Host, 2 FQDN.
//! - [`vip_outbounds`]: the outbounds and DNS names a view gives (a service: `<vip>:80` and
//!   `<svc>.mesh`, plus `<svc with _ as .>.mesh`; an ExternalService also on its own port), and
//!   [`with_vip_outbounds`]: a transparent-proxied Dataplane's outbounds, the VIP ones (narrowed
//!   by `reachableServices`) first, then its own except those on a VIP address.
//!
//! IO-free: the zone CP persists and reads the view.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dataplane::{DataplaneSpec, InboundState, Outbound};
use crate::go_net;
use crate::old_matching::Rank;
use crate::resource::{Resource, Spec};
use crate::target_ref::SERVICE_TAG;
use crate::ungenerated::ExternalService;

/// Kuma's `dnsServer.CIDR` default.
pub const DEFAULT_CIDR: &str = "240.0.0.0/4";
/// Kuma's `dnsServer.domain` default.
pub const DEFAULT_DOMAIN: &str = "mesh";
/// Kuma's `dnsServer.serviceVipPort` default.
pub const DEFAULT_SERVICE_VIP_PORT: u32 = 80;
/// Kuma's reserved inbound port (`TCPPortReserved`): inbounds on it get no VIP.
const RESERVED_PORT: u32 = 49151;

/// What kind of name a VIP is for (Kuma's `vips.EntryType`, ordered as Kuma sorts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryType {
    /// A `kuma.io/service`.
    Service = 0,
    /// An ExternalService's address host.
    Host = 1,
    /// A VirtualOutbound's rendered host.
    Fqdn = 2,
}

/// A name that gets a VIP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostnameEntry {
    /// Its kind.
    pub ty: EntryType,
    /// The service, host or FQDN.
    pub name: String,
}

impl HostnameEntry {
    fn key(&self) -> String {
        format!("{}:{}", self.ty as u8, self.name)
    }

    fn parse(key: &str) -> Option<HostnameEntry> {
        let (ty, name) = key.split_once(':')?;
        let ty = match ty {
            "0" => EntryType::Service,
            "1" => EntryType::Host,
            "2" => EntryType::Fqdn,
            _ => return None,
        };
        Some(HostnameEntry {
            ty,
            name: name.to_owned(),
        })
    }
}

/// One outbound a VIP serves (Kuma's `vips.OutboundEntry`; its JSON keys are Go's field names).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OutboundEntry {
    /// Its port; 0 for a service's VIP (served on the service VIP port).
    #[serde(rename = "Port", default)]
    pub port: u32,
    /// The destination's tags.
    #[serde(rename = "TagSet", default)]
    pub tag_set: BTreeMap<String, String>,
    /// What produced it: `service`, `external-service:<name>`, `virtual-outbound:<name>`.
    #[serde(rename = "Origin", default)]
    pub origin: String,
}

/// A VIP and the outbounds it serves (Kuma's `vips.VirtualOutbound`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipEntry {
    /// The VIP (empty until allocated, or when the CIDR is exhausted).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Its outbounds, by port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbounds: Vec<OutboundEntry>,
}

/// The VIPs of one mesh, by hostname entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VipView {
    /// The entries.
    pub entries: BTreeMap<HostnameEntry, VipEntry>,
}

impl VipView {
    /// Kuma's `VirtualOutboundMeshView.Add`: a new hostname is created; an outbound on a port
    /// it already has is kept only if equal (the first one wins; the conflict is returned); a
    /// new port is added, outbounds sorted by port.
    fn add(&mut self, entry: HostnameEntry, ob: OutboundEntry) -> Option<String> {
        let e = self.entries.entry(entry.clone()).or_default();
        if let Some(existing) = e.outbounds.iter().find(|o| o.port == ob.port) {
            return (existing != &ob).then(|| {
                format!(
                    "{} port {} is already used by {} (tags {:?}); {} ignored",
                    entry.name, ob.port, existing.origin, existing.tag_set, ob.origin
                )
            });
        }
        e.outbounds.push(ob);
        e.outbounds.sort_by_key(|o| o.port);
        None
    }

    /// Kuma's persisted JSON (keys sorted as strings, as Go sorts map keys).
    pub fn to_json(&self) -> Vec<u8> {
        let map: BTreeMap<String, &VipEntry> =
            self.entries.iter().map(|(k, v)| (k.key(), v)).collect();
        serde_json::to_vec(&map).unwrap_or_default()
    }

    /// Read Kuma's persisted JSON (the default format).
    ///
    /// # Errors
    /// Not that format, or an unknown entry type.
    pub fn from_json(bytes: &[u8]) -> Result<VipView, String> {
        let map: BTreeMap<String, VipEntry> =
            serde_json::from_slice(bytes).map_err(|e| format!("DNS VIPs: {e}"))?;
        let mut entries = BTreeMap::new();
        for (k, v) in map {
            let entry =
                HostnameEntry::parse(&k).ok_or_else(|| format!("DNS VIPs: bad entry key {k:?}"))?;
            entries.insert(entry, v);
        }
        Ok(VipView { entries })
    }
}

/// What a mesh's view is built from.
#[derive(Debug, Clone, Copy)]
pub struct ViewInputs<'a> {
    /// The mesh's Dataplanes.
    pub dataplanes: &'a [&'a DataplaneSpec],
    /// Tags of the services remote zones' ingresses offer in this mesh.
    pub remote_services: &'a [&'a BTreeMap<String, String>],
    /// The mesh's ExternalServices (name, spec).
    pub external_services: &'a [(&'a str, &'a ExternalService)],
    /// The mesh's VirtualOutbound resources.
    pub virtual_outbounds: &'a [&'a Resource],
}

/// The view `inputs` call for (Kuma's `BuildVirtualOutboundMeshView`), without addresses, and
/// the conflicts met (first one kept).
pub fn desired_view(inputs: ViewInputs<'_>) -> (VipView, Vec<String>) {
    let mut view = VipView::default();
    let mut conflicts = Vec::new();
    let vos = VirtualOutbounds::of(inputs.virtual_outbounds);
    let service = |view: &mut VipView,
                   conflicts: &mut Vec<String>,
                   tags: &BTreeMap<String, String>,
                   port: u32| {
        let Some(svc) = tags.get(SERVICE_TAG) else {
            return;
        };
        let entry = HostnameEntry {
            ty: EntryType::Service,
            name: svc.clone(),
        };
        let ob = OutboundEntry {
            port,
            tag_set: BTreeMap::from([(SERVICE_TAG.to_owned(), svc.clone())]),
            origin: "service".to_owned(),
        };
        conflicts.extend(view.add(entry, ob));
        for (entry, ob) in vos.entries(tags) {
            conflicts.extend(view.add(entry, ob));
        }
    };
    for dp in inputs.dataplanes {
        for inbound in &dp.networking.inbound {
            if matches!(inbound.state, Some(InboundState::Ignored)) || inbound.port == RESERVED_PORT
            {
                continue;
            }
            service(&mut view, &mut conflicts, &inbound.tags, 0);
        }
    }
    for tags in inputs.remote_services {
        service(&mut view, &mut conflicts, tags, 0);
    }
    let mut external: Vec<&(&str, &ExternalService)> = inputs.external_services.iter().collect();
    external.sort_by_key(|(name, _)| *name);
    for (name, es) in external {
        let Some(svc) = es.tags.get(SERVICE_TAG) else {
            continue;
        };
        let Some(networking) = &es.networking else {
            continue;
        };
        let address = networking
            .get("address")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Ok((host, port)) = go_net::split_host_port(address) else {
            continue;
        };
        let Ok(port) = port.parse::<u32>() else {
            continue;
        };
        let tags = BTreeMap::from([(SERVICE_TAG.to_owned(), svc.clone())]);
        service(&mut view, &mut conflicts, &tags, port);
        let no_host_entry = networking
            .get("disableHostDNSEntry")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !no_host_entry {
            let entry = HostnameEntry {
                ty: EntryType::Host,
                name: host.to_owned(),
            };
            let ob = OutboundEntry {
                port,
                tag_set: tags.clone(),
                origin: format!("external-service:{name}"),
            };
            conflicts.extend(view.add(entry, ob));
        }
    }
    (view, conflicts)
}

/// A CIDR's IPv4 addresses, by index.
#[derive(Debug, Clone, Copy)]
struct Cidr {
    base: u32,
    size: u64,
}

impl Cidr {
    fn parse(s: &str) -> Result<Cidr, String> {
        let (ip, bits) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: not a CIDR"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{s:?}: not an IPv4 CIDR"))?;
        let bits: u32 = bits
            .parse()
            .ok()
            .filter(|b| *b <= 32)
            .ok_or_else(|| format!("{s:?}: bad prefix length"))?;
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits)
        };
        Ok(Cidr {
            base: u32::from(ip) & mask,
            size: 1u64 << (32 - bits),
        })
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let i = u64::from(u32::from(ip).wrapping_sub(self.base));
        u32::from(ip) >= self.base && i < self.size
    }
}

/// Give every entry of `new` an address (Kuma's `AllocateVIPs` over a fresh IPAM that first
/// reserves the addresses of `old`, the persisted view): an entry `old` had keeps its address,
/// a `Host` entry named by an IP gets that IP, any other takes the lowest free address of
/// `cidr`, entries in Kuma's order. Returns the view and the problems met (an address of `old`
/// outside `cidr` or taken twice is dropped; entries beyond an exhausted CIDR stay without an
/// address).
///
/// # Errors
/// `cidr` is not an IPv4 CIDR.
pub fn allocate(
    old: &VipView,
    mut new: VipView,
    cidr: &str,
) -> Result<(VipView, Vec<String>), String> {
    let cidr = Cidr::parse(cidr)?;
    let mut problems = Vec::new();
    let mut used: BTreeSet<u32> = BTreeSet::new();
    let mut kept: BTreeMap<&HostnameEntry, u32> = BTreeMap::new();
    for (entry, e) in &old.entries {
        if entry.ty == EntryType::Host && go_net::is_ip(&entry.name) {
            continue;
        }
        let Ok(ip) = e.address.parse::<Ipv4Addr>() else {
            continue;
        };
        if !cidr.contains(ip) {
            problems.push(format!(
                "{}: {ip} is outside the CIDR; reallocated",
                entry.name
            ));
            continue;
        }
        if !used.insert(u32::from(ip)) {
            problems.push(format!(
                "{}: {ip} is allocated twice; reallocated",
                entry.name
            ));
            continue;
        }
        kept.insert(entry, u32::from(ip));
    }
    let mut next: u64 = 0;
    for (entry, e) in &mut new.entries {
        if entry.ty == EntryType::Host && go_net::is_ip(&entry.name) {
            e.address = entry.name.clone();
            continue;
        }
        if let Some(ip) = kept.get(entry) {
            e.address = Ipv4Addr::from(*ip).to_string();
            continue;
        }
        while next < cidr.size && used.contains(&(cidr.base.wrapping_add(next as u32))) {
            next += 1;
        }
        if next >= cidr.size {
            problems.push(format!("{}: no VIP left in the CIDR", entry.name));
            e.address.clear();
            continue;
        }
        let ip = cidr.base.wrapping_add(next as u32);
        used.insert(ip);
        e.address = Ipv4Addr::from(ip).to_string();
    }
    Ok((new, problems))
}

/// A DNS name and the VIP it resolves to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct VipDomain {
    /// The name (`backend.mesh`, `httpbin.org`, a VirtualOutbound host).
    pub name: String,
    /// The IPv4 VIP.
    pub address: String,
}

/// The outbounds and DNS names `view` gives (Kuma's `VIPOutbounds`), with `domain` (`mesh`) and
/// the service VIP port (`80`).
pub fn vip_outbounds(
    view: &VipView,
    domain: &str,
    vip_port: u32,
) -> (Vec<VipDomain>, Vec<Outbound>) {
    let mut domains = Vec::new();
    let mut outbounds = Vec::new();
    let ob = |address: &str, port: u32, tags: &BTreeMap<String, String>| Outbound {
        address: address.to_owned(),
        port,
        tags: tags.clone(),
        backend_ref: None,
    };
    for (entry, e) in &view.entries {
        if e.address.is_empty() || e.outbounds.is_empty() {
            continue;
        }
        let mut names = Vec::new();
        match entry.ty {
            EntryType::Service => {
                names.push(format!("{}.{domain}", entry.name));
                let dotted = format!("{}.{domain}", entry.name.replace('_', "."));
                if dotted != names[0] {
                    names.push(dotted);
                }
                let first = &e.outbounds[0];
                if first.port != 0 {
                    outbounds.push(ob(&e.address, first.port, &first.tag_set));
                }
                if first.port != vip_port {
                    outbounds.push(ob(&e.address, vip_port, &first.tag_set));
                }
            }
            EntryType::Host | EntryType::Fqdn => {
                if go_net::is_dns_name(&entry.name) {
                    names.push(entry.name.clone());
                }
                for o in e.outbounds.iter().filter(|o| o.port != 0) {
                    outbounds.push(ob(&e.address, o.port, &o.tag_set));
                }
                let has_vip_port = e.outbounds.iter().any(|o| o.port == vip_port);
                if entry.ty == EntryType::Host && !has_vip_port && !names.is_empty() {
                    outbounds.push(ob(&e.address, vip_port, &e.outbounds[0].tag_set));
                }
            }
        }
        domains.extend(names.into_iter().map(|name| VipDomain {
            name,
            address: e.address.clone(),
        }));
    }
    (domains, outbounds)
}

/// `dp` with the outbounds a transparent proxy gets (Kuma's `resolveVIPOutbounds`): the VIP
/// outbounds of its mesh (only those of `reachableServices` when it lists any), then its own
/// outbounds but those on a VIP address. `None` when `dp` has no `transparentProxying`.
pub fn with_vip_outbounds(dp: &DataplaneSpec, vip: &[Outbound]) -> Option<DataplaneSpec> {
    let tp = dp.networking.transparent_proxying.as_ref()?;
    let reachable: BTreeSet<&str> = tp.reachable().iter().map(String::as_str).collect();
    let vips: BTreeSet<&str> = vip.iter().map(|o| o.address.as_str()).collect();
    let mut out: Vec<Outbound> = vip
        .iter()
        .filter(|o| reachable.is_empty() || reachable.contains(o.service()))
        .filter(|o| {
            !dp.networking
                .inbound
                .iter()
                .any(|i| dp.inbound_key(i).address == o.address && i.port == o.port)
        })
        .cloned()
        .collect();
    out.extend(
        dp.networking
            .outbound
            .iter()
            .filter(|o| !vips.contains(o.address.as_str()))
            .cloned(),
    );
    let mut resolved = dp.clone();
    resolved.networking.outbound = out;
    Some(resolved)
}

/// The VirtualOutbounds of a mesh, in the order Kuma applies them.
struct VirtualOutbounds<'a> {
    items: Vec<(&'a Resource, &'a crate::ungenerated::SelectorResource)>,
}

impl<'a> VirtualOutbounds<'a> {
    fn of(resources: &'a [&'a Resource]) -> Self {
        let items = resources
            .iter()
            .filter_map(|r| match &r.spec {
                Spec::Selected(crate::resource::ResourceType::VirtualOutbound, s) => Some((*r, s)),
                _ => None,
            })
            .collect();
        VirtualOutbounds { items }
    }

    /// Every VirtualOutbound matching `tags` (highest selector rank first, newer first on a
    /// tie: Kuma's `dns.Match`), rendered into FQDN entries; those that do not render are
    /// skipped, as Kuma's.
    fn entries(&self, tags: &BTreeMap<String, String>) -> Vec<(HostnameEntry, OutboundEntry)> {
        let mut matched: Vec<(Rank, &Resource, &crate::ungenerated::SelectorResource)> = self
            .items
            .iter()
            .filter_map(|(r, s)| {
                s.selectors
                    .iter()
                    .filter(|sel| sel.matches(tags))
                    .map(|sel| Rank::of(&sel.match_tags))
                    .max()
                    .map(|rank| (rank, *r, *s))
            })
            .collect();
        matched.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| b.1.meta.creation_time.cmp(&a.1.meta.creation_time))
        });
        matched
            .into_iter()
            .filter_map(|(_, r, s)| {
                let conf = s.conf.as_ref()?;
                let rendered = render(conf, tags).ok()?;
                Some((
                    HostnameEntry {
                        ty: EntryType::Fqdn,
                        name: rendered.host,
                    },
                    OutboundEntry {
                        port: rendered.port,
                        tag_set: rendered.tags,
                        origin: format!("virtual-outbound:{}", r.meta.name),
                    },
                ))
            })
            .collect()
    }
}

/// A VirtualOutbound rendered for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The host (a DNS name).
    pub host: String,
    /// The port (1..=65535).
    pub port: u32,
    /// The destination's tags its parameters pick (the outbound's tags).
    pub tags: BTreeMap<String, String>,
}

/// Render a VirtualOutbound `conf` (`host`, `port`, `parameters: [{name, tagKey?}]`) for a
/// destination with `tags` (Kuma's `EvalHost`/`EvalPort`/`FilterTags`): each parameter is the
/// tag `tagKey` (default: its name); templates are Go `text/template` actions `{{.name}}` (a
/// missing parameter renders `<no value>`, as Go's); the host must be a DNS name, the port an
/// integer in 1..=65535.
///
/// # Errors
/// A template Umbra cannot read (only `{{.name}}` actions), or a host or port that does not
/// check.
pub fn render(
    conf: &serde_json::Map<String, Value>,
    tags: &BTreeMap<String, String>,
) -> Result<Rendered, String> {
    let mut params = BTreeMap::new();
    let mut picked = BTreeMap::new();
    for p in conf
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = p.get("name").and_then(Value::as_str) else {
            continue;
        };
        let key = p
            .get("tagKey")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .unwrap_or(name);
        if let Some(v) = tags.get(key) {
            params.insert(name.to_owned(), v.clone());
            picked.insert(key.to_owned(), v.clone());
        }
    }
    let text = |k: &str| conf.get(k).and_then(Value::as_str).unwrap_or("");
    let host = template(text("host"), &params)?;
    if !go_net::is_dns_name(&host) {
        return Err(format!("host {host:?} is not a DNS name"));
    }
    let port_text = template(text("port"), &params)?;
    let port = port_text
        .parse::<u32>()
        .ok()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| format!("port {port_text:?} is not in 1..65535"))?;
    Ok(Rendered {
        host,
        port,
        tags: picked,
    })
}

/// Go `text/template` limited to `{{.name}}` actions (spaces allowed inside the braces).
fn template(tmpl: &str, params: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = tmpl;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("template {tmpl:?}: unclosed action"))?;
        let action = after[..end].trim();
        let name = action
            .strip_prefix('.')
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric()))
            .ok_or_else(|| {
                format!(
                    "template {tmpl:?}: only {{{{.name}}}} actions are supported, not {action:?}"
                )
            })?;
        out.push_str(params.get(name).map_or("<no value>", String::as_str));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "vips_tests.rs"]
mod tests;
