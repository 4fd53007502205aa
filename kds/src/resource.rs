//! KDS resource conventions both ends share: type URLs (Kuma's type names), resource names
//! (`<mesh>/<name>`, `<name>` for a Mesh), content versions, the `Any`-wrapped body, and how a
//! zone's Dataplane is named and labelled on the Global.
//!
//! A version is a digest of the content (canonical JSON, keys sorted, without
//! `creationTime`/`modificationTime`), so it is the same on the Global and in a zone for the
//! same content, survives restarts of either side and does not depend on the store behind it
//! (PostgreSQL's JSONB reorders keys): that is what lets a reconnecting peer send
//! `initial_resource_versions` and receive only the difference.

use envoy_types::pb::envoy::service::discovery::v3::Resource as XdsResource;
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use umbra_core::resource::{Resource, ResourceType};
use umbra_xds_protocol::version::write_canonical;

use crate::pb::KdsResource;
use crate::KDS_RESOURCE_TYPE_URL;

/// Type URL of Dataplane insights (zone → Global; not a stored resource type).
pub const DATAPLANE_INSIGHT_TYPE: &str = "DataplaneInsight";

/// Type URL of the trust bundle (Global → zone; not a stored resource type): one item,
/// [`TRUST_BUNDLE_NAME`], whose body is an `umbra_auth::TrustBundle` in JSON (public keys
/// and revoked token IDs), so tokens issued on the Global verify in every zone (issue 15).
pub const TRUST_BUNDLE_TYPE: &str = "TrustBundle";

/// Type URL of the mesh CAs (Global → zone; not a stored resource type): one item per mesh
/// and `builtin` backend, named `<mesh>/<backend>`, whose body is the CA (root certificate and
/// private key, `umbra_pki::mesh_ca::MeshCa` in JSON), so every zone issues identities from the
/// mesh's one CA (issue 18). Sent only over an encrypted connection (KDS TLS) or loopback.
pub const MESH_CA_TYPE: &str = "MeshCA";

/// Type URL of the commit marker (Global → zone; not a stored resource type): one item,
/// [`COMMIT_NAME`], whose version moves on with every generation of the Global's offer. The
/// Global sends it right behind the last response of a generation; a zone
/// keeps what arrives in between aside and writes it to its store as one batch when the marker
/// arrives, so a store transaction on the Global (issue 19: a migration promoting new policies
/// and deleting old ones) reaches the zone's proxies as one change, never half of it.
pub const COMMIT_TYPE: &str = "Commit";

/// Name of the one commit-marker item.
pub const COMMIT_NAME: &str = "generation";

/// Name of the one trust-bundle item.
pub const TRUST_BUNDLE_NAME: &str = "bundle";

/// Label naming the zone a resource comes from (Kuma's `kuma.io/zone`).
pub const ZONE_LABEL: &str = "kuma.io/zone";

/// Label holding a synced resource's name in its zone (Kuma's `kuma.io/display-name`).
pub const DISPLAY_NAME_LABEL: &str = "kuma.io/display-name";

/// Types the Global sends to zones, Mesh first: the Global's responder treats the first type
/// as a barrier ([`crate::sync::RespondConfig::first_type_barrier`]), so a policy never
/// arrives before its Mesh. ZoneIngresses are among them: every zone receives the other zones'
/// (never its own back: the Global filters its offer per zone). ZoneEgresses are not: Kuma
/// sends them to the Global only (`kds.send_to_zone = false`), so each zone sees only its own.
/// The commit marker ([`COMMIT_TYPE`]) comes last.
pub fn global_to_zone_types() -> Vec<String> {
    let mut out = vec![ResourceType::Mesh.name().to_owned()];
    out.extend(
        ResourceType::ALL
            .iter()
            .filter(|t| {
                !matches!(
                    t,
                    ResourceType::Mesh | ResourceType::Dataplane | ResourceType::ZoneEgress
                )
            })
            .map(|t| t.name().to_owned()),
    );
    out.push(TRUST_BUNDLE_TYPE.to_owned());
    out.push(MESH_CA_TYPE.to_owned());
    out.push(COMMIT_TYPE.to_owned());
    out
}

/// Types zones send to the Global: their Dataplanes, their ZoneIngresses, their ZoneEgresses
/// and the insights (of all three: a ZoneEgress's under the KDS name
/// `<umbra_core::dataplane::ZONE_EGRESS_KEY_MESH>/<name>`).
pub fn zone_to_global_types() -> Vec<String> {
    vec![
        ResourceType::Dataplane.name().to_owned(),
        ResourceType::ZoneIngress.name().to_owned(),
        ResourceType::ZoneEgress.name().to_owned(),
        DATAPLANE_INSIGHT_TYPE.to_owned(),
    ]
}

/// The types a zone owns and sends up, stored on the Global as that zone's.
pub const ZONE_OWNED: [ResourceType; 3] = [
    ResourceType::Dataplane,
    ResourceType::ZoneIngress,
    ResourceType::ZoneEgress,
];

/// The KDS name of a resource: `<mesh>/<name>`, or `<name>` when `mesh` is empty (a Mesh).
pub fn kds_name(mesh: &str, name: &str) -> String {
    if mesh.is_empty() {
        name.to_owned()
    } else {
        format!("{mesh}/{name}")
    }
}

/// Split a KDS name into `(mesh, name)` (mesh empty for a bare name).
pub fn split_kds_name(kds: &str) -> (String, String) {
    match kds.split_once('/') {
        Some((mesh, name)) => (mesh.to_owned(), name.to_owned()),
        None => (String::new(), kds.to_owned()),
    }
}

/// One resource as KDS carries it: its content version and its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// [`content_version`] of the body.
    pub version: String,
    /// The JSON document (Kuma's universal format for resources).
    pub body: Vec<u8>,
    /// W3C trace context of the change that produced it (empty when untraced); carried in
    /// [`KdsResource::trace_context`], not part of the version.
    pub trace_context: std::collections::HashMap<String, String>,
}

impl Item {
    /// The item for a JSON document.
    pub fn from_doc(doc: &Value) -> Item {
        Item {
            version: content_version(doc),
            body: serde_json::to_vec(doc).unwrap_or_default(),
            trace_context: std::collections::HashMap::new(),
        }
    }

    /// The item for a resource.
    pub fn from_resource(resource: &Resource) -> Item {
        Item::from_doc(&resource.to_value())
    }

    /// As an xDS `Resource` named `name`.
    pub fn to_xds(&self, name: &str) -> XdsResource {
        XdsResource {
            name: name.to_owned(),
            version: self.version.clone(),
            resource: Some(Any {
                type_url: KDS_RESOURCE_TYPE_URL.to_owned(),
                value: KdsResource {
                    json: self.body.clone(),
                    trace_context: self.trace_context.clone(),
                }
                .encode_to_vec(),
            }),
            ..XdsResource::default()
        }
    }
}

/// Why an xDS `Resource` does not carry a [`KdsResource`]; its text is the reason a NACK
/// gives for the resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The resource has no `Any`.
    #[error("resource has no body")]
    Missing,
    /// The `Any` holds another type.
    #[error("body type {type_url:?} is not {KDS_RESOURCE_TYPE_URL}")]
    WrongType {
        /// The type URL it holds.
        type_url: String,
    },
    /// The bytes do not decode as a [`KdsResource`].
    #[error("undecodable body: {0}")]
    Undecodable(prost::DecodeError),
}

/// The JSON body of an xDS `Resource` carrying a [`KdsResource`].
///
/// # Errors
/// [`BodyError`]: no body, another type URL, undecodable bytes.
pub fn body_of(resource: &XdsResource) -> Result<Vec<u8>, BodyError> {
    kds_resource_of(resource).map(|r| r.json)
}

/// The [`KdsResource`] (body and trace context) of an xDS `Resource`.
///
/// # Errors
/// As [`body_of`].
pub fn kds_resource_of(resource: &XdsResource) -> Result<KdsResource, BodyError> {
    let any = resource.resource.as_ref().ok_or(BodyError::Missing)?;
    if any.type_url != KDS_RESOURCE_TYPE_URL {
        return Err(BodyError::WrongType {
            type_url: any.type_url.clone(),
        });
    }
    KdsResource::decode(any.value.as_slice()).map_err(BodyError::Undecodable)
}

/// The content version of a document: the first 16 bytes (hex) of SHA-256 over its canonical
/// JSON (object keys sorted, `creationTime` and `modificationTime` left out at the top level).
pub fn content_version(doc: &Value) -> String {
    let mut canonical = String::new();
    match doc {
        Value::Object(map)
            if map.contains_key("creationTime") || map.contains_key("modificationTime") =>
        {
            let mut body = map.clone();
            body.remove("creationTime");
            body.remove("modificationTime");
            write_canonical(&Value::Object(body), &mut canonical);
        }
        other => write_canonical(other, &mut canonical),
    }
    let digest = Sha256::digest(canonical.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// How a zone sends one of its Dataplanes, ZoneIngresses or ZoneEgresses up: `kuma.io/zone`
/// set to the zone and `kuma.io/display-name` to its name (whatever the labels said), a
/// ZoneIngress's or ZoneEgress's `zone` set to the zone; the rest unchanged.
pub fn zone_dataplane_upstream(resource: &Resource, zone: &str) -> Resource {
    let mut r = resource.clone();
    r.meta.labels.insert(ZONE_LABEL.into(), zone.into());
    r.meta
        .labels
        .insert(DISPLAY_NAME_LABEL.into(), r.meta.name.clone());
    match &mut r.spec {
        umbra_core::resource::Spec::ZoneIngress(zi) => zi.zone = zone.to_owned(),
        umbra_core::resource::Spec::ZoneEgress(ze) => ze.zone = zone.to_owned(),
        _ => {}
    }
    r
}

/// The name the Global stores a zone's resource under: `<name>-<hash>`, the hash over mesh,
/// name and zone (Kuma 2.7's `hash.HashedName`), so equal names in different zones never meet.
pub fn global_name(mesh: &str, name: &str, zone: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [mesh, name, zone] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hash}")
}

/// The zone form of a Dataplane stored on the Global (the inverse of storing an upstream
/// Dataplane under [`global_name`]): named by its `kuma.io/display-name` label.
pub fn zone_form(stored: &Resource) -> Option<Resource> {
    let display = stored.meta.labels.get(DISPLAY_NAME_LABEL)?.clone();
    let mut r = stored.clone();
    r.meta.name = display;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_ignore_key_order_and_times() {
        let a: Value = serde_json::from_str(
            r#"{"type":"Mesh","name":"m","creationTime":"x","spec":{"b":1,"a":[{"y":1,"x":2}]}}"#,
        )
        .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"spec":{"a":[{"x":2,"y":1}],"b":1},"name":"m","type":"Mesh","modificationTime":"z"}"#)
                .unwrap();
        assert_eq!(content_version(&a), content_version(&b));
        let c: Value =
            serde_json::from_str(r#"{"type":"Mesh","name":"m","spec":{"b":2}}"#).unwrap();
        assert_ne!(content_version(&a), content_version(&c));
        assert_eq!(content_version(&a).len(), 32);
    }

    #[test]
    fn names_and_bodies_round_trip() {
        assert_eq!(kds_name("", "default"), "default");
        assert_eq!(split_kds_name("m/a/b"), ("m".into(), "a/b".into()));
        assert_eq!(split_kds_name("default"), (String::new(), "default".into()));
        let item = Item::from_doc(&serde_json::json!({"type": "Mesh", "name": "m"}));
        let x = item.to_xds("m");
        assert_eq!(body_of(&x).unwrap(), item.body);
        let mut bad = x.clone();
        bad.resource.as_mut().unwrap().type_url = "other".into();
        assert!(body_of(&bad).unwrap_err().to_string().contains("is not"));
        assert_ne!(global_name("m", "dp", "z1"), global_name("m", "dp", "z2"));
        assert!(global_name("m", "dp", "z1").starts_with("dp-"));
    }

    #[test]
    fn upstream_dataplanes_round_trip_through_the_global_name() {
        let dp = Resource::from_bytes(
            b"type: Dataplane\nmesh: m\nname: web-1\nlabels: {kuma.io/zone: other, app: web}\nnetworking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web}}]}\n",
        )
        .unwrap();
        let up = zone_dataplane_upstream(&dp, "z1");
        assert_eq!(up.meta.labels[ZONE_LABEL], "z1");
        let mut stored = up.clone();
        stored.meta.name = global_name("m", "web-1", "z1");
        let back = zone_form(&stored).unwrap();
        assert_eq!(
            content_version(&back.to_value()),
            content_version(&up.to_value())
        );
    }

    #[test]
    fn a_zone_egress_goes_up_with_its_zone_and_never_down() {
        let ze = Resource::from_bytes(
            b"type: ZoneEgress\nname: ze\nnetworking: {address: 10.0.0.1, port: 10002}\n",
        )
        .unwrap();
        let up = zone_dataplane_upstream(&ze, "zone-1");
        assert_eq!(up.as_zone_egress().unwrap().zone, "zone-1");
        assert_eq!(up.meta.labels[ZONE_LABEL], "zone-1");
        assert!(zone_to_global_types().contains(&"ZoneEgress".to_owned()));
        assert!(!global_to_zone_types().contains(&"ZoneEgress".to_owned()));
        assert!(ZONE_OWNED.contains(&ResourceType::ZoneEgress));
    }

    #[test]
    fn a_zone_ingress_goes_up_with_its_zone() {
        // The upstream form carries the zone in the spec too.
        let local = Resource::from_bytes(
            b"type: ZoneIngress\nname: zi\nnetworking: {address: 10.0.0.1, port: 1}\n",
        )
        .unwrap();
        let up = zone_dataplane_upstream(&local, "zone-1");
        assert_eq!(up.as_zone_ingress().unwrap().zone, "zone-1");
    }
}
